"""Runtimes: which framework runs each schedule vppctl names, and under which name.

This module's one job is the facts that join vppctl's schedule names to the three
runtimes whose orders they are: Paddle's ``strategy.pipeline.schedule_mode``, torch's
``torch.distributed.pipelining`` schedule classes, Megatron-Core's two pipelined
schedules, and which Paddle releases can schedule a legacy-IR program (the
``ProgramDesc`` vppctl reads and writes). The planner's launch settings
(`vppctl.planner.launch`) and the Paddle bridge (`vppctl.paddle`) read them; it
holds data and small lookups only.
"""

from __future__ import annotations

from vppctl.choices import Schedule

# Paddle's schedule_mode of each schedule that is Paddle's own order.
PADDLE_MODES: dict[Schedule, str] = {
    "fthenb": "FThenB",
    "1f1b": "1F1B",
    "eager1f1b": "Eager1F1B",
    "vpp": "VPP",
    "zbh1": "ZBH1",
    "zbvpp": "ZBVPP",
}
# Every schedule_mode Paddle has (its pipeline_scheduler_* passes): one per Paddle order.
PADDLE_SCHEDULE_MODES: tuple[str, ...] = tuple(PADDLE_MODES.values())
# torch.distributed.pipelining's class of each schedule that is torch's order.
TORCH_CLASSES: dict[Schedule, str] = {
    "fthenb": "ScheduleGPipe",
    "1f1b": "Schedule1F1B",
    "interleaved": "ScheduleInterleaved1F1B",
    "zb1p": "ScheduleInterleavedZeroBubble",
    "interleaved-zb": "ScheduleInterleavedZeroBubble",
    "zbv": "ScheduleZBVZeroBubble",
    "dualpipev": "ScheduleDualPipeV",
}
# Megatron-Core runs 1F1B (forward_backward_pipelining_without_interleaving) and
# interleaved 1F1B (forward_backward_pipelining_with_interleaving), nothing else.
MEGATRON_SCHEDULES: frozenset[Schedule] = frozenset({"1f1b", "interleaved"})

# Paddle's legacy-IR pipeline scheduler, read from the wheels' pipeline passes
# (paddle/distributed/passes/pipeline_scheduler_pass/): 3.0.0 implements
# _partial_programs for every schedule_mode; 3.3.1's legacy passes all raise ("Not
# support for old IR", "only support PIR now"), as from 3.1.0 on; 2.6.2 has no VPP
# completion or scheduler (its other schedules are not checked here).
PADDLE_LEGACY_VPP = "3.0.0"  # the one release whose legacy-IR VPP scheduler works
_LEGACY_MODES_3_0 = frozenset(PADDLE_SCHEDULE_MODES)  # every one
_INTERLEAVED_MODES = frozenset({"VPP", "ZBVPP"})


def paddle_legacy_refusal(version: str, schedule_mode: str) -> str | None:
    """Why Paddle ``version`` cannot schedule a legacy program with ``schedule_mode``
    (None: it can, or nothing is known against it)."""
    series = _series(version)
    if series >= (3, 1) or series == (0, 0):  # 0.0.0: a develop build, newer than any
        what = "schedules PIR programs only (its legacy pipeline passes raise)"
    elif series >= (3, 0):
        if schedule_mode in _LEGACY_MODES_3_0:
            return None
        what = f"has no {schedule_mode} schedule"
    elif schedule_mode in _INTERLEAVED_MODES:
        what = "has no VPP completion or scheduler"
    else:
        return None
    return (
        f"Paddle {version} {what}: it cannot run schedule_mode {schedule_mode} on a legacy "
        f"(ProgramDesc) program; Paddle {PADDLE_LEGACY_VPP} is the release whose legacy "
        "pipeline scheduler runs every schedule_mode, VPP included"
    )


def _series(version: str) -> tuple[int, int]:
    """(major, minor) of a version string such as ``3.3.1`` or ``3.0.0rc1``."""
    parts = version.split(".")
    try:
        return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0)
    except (ValueError, IndexError):
        return (0, 0)
