"""Runtimes: which framework runs each schedule vppctl names, under which name, and its rules.

This module's one job is the facts that join vppctl's schedules to the runtimes whose
orders they are, read from those runtimes' code: Paddle's ``schedule_mode``, torch's
``torch.distributed.pipelining`` classes, Megatron-Core's two pipelined schedules, which
Paddle releases schedule a legacy-IR program, and each runtime's preflight rules (`RULES`:
the micro-batch counts, group sizes and degrees it refuses, each with its source, its own
words and the fix). `preflight` applies them to one (schedule, pp, vpp, m): `plan` leaves a
refused candidate out counted by its rule, `simulate` refuses it (exit 2) in the runtime's
words. Under a runtime, only its schedules run (`RUNTIME_SCHEDULES`); under ``any`` each
schedule runs under the rules of the runtime whose order it is (`HOME`). Data and small
lookups only: the planner's launch settings, the Paddle bridge and docs/plan.md's table
(`docs/make_tables.py`) read them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from vppctl.choices import RUNTIMES, SCHEDULES, Placement, Runtime, Schedule
from vppctl.schedule.interleaving import legal_group_sizes, torch_group_size, torch_rounds
from vppctl.schedule.refusal import ScheduleRefused

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


# ---------------------------------------------------------------------------
# Each runtime's schedules

# The versions whose code the rules were read from.
RUNTIME_NAMES: dict[Runtime, str] = {
    "paddle": "Paddle 3.0.0 (legacy ProgramDesc)",
    "paddle-pir": "Paddle 3.3.1 (PIR)",
    "megatron": "Megatron-Core 0.16.1",
    "torch": "torch 2.13 (torch.distributed.pipelining)",
    "any": "any runtime",
}
RUNTIME_SCHEDULES: dict[Runtime, tuple[Schedule, ...]] = {
    "paddle": ("fthenb", "1f1b", "eager1f1b", "vpp", "zbh1", "zbvpp"),
    "paddle-pir": ("fthenb", "1f1b", "vpp"),
    "megatron": ("1f1b", "interleaved"),
    "torch": ("fthenb", "1f1b", "interleaved", "zb1p", "interleaved-zb", "zbv", "dualpipev"),
    "any": SCHEDULES,
}
# Under `any`, the runtime whose order each schedule is, and whose rules it runs under.
HOME: dict[Schedule, Runtime] = {
    "fthenb": "paddle",
    "1f1b": "megatron",
    "eager1f1b": "paddle",
    "vpp": "paddle",
    "zbh1": "paddle",
    "zbvpp": "paddle",
    "interleaved": "megatron",
    "zb1p": "torch",
    "interleaved-zb": "torch",
    "zbv": "torch",
    "dualpipev": "torch",
}


def rules_runtime(runtime: Runtime, schedule: Schedule) -> Runtime:
    """The runtime whose rules `schedule` runs under: `runtime`, or its home under `any`."""
    return HOME[schedule] if runtime == "any" else runtime


def default_group_size(runtime: Runtime, schedule: Schedule, pp: int, m: int) -> int | None:
    """The interleaved schedule's group size a runtime uses: torch derives its own
    (``m // max(1, m // pp)``), Megatron-Core's default is pp (None: the simulator's
    default, the same). The other schedules take none here."""
    if schedule == "interleaved" and rules_runtime(runtime, schedule) == "torch":
        return torch_group_size(pp, m)
    return None


def comparison(runtime: Runtime, vpp: int, placement: Placement) -> tuple[Schedule, ...]:
    """What `simulate` compares by default: 1F1B, and the runtime's schedule that
    interleaves the plan's chunks, if it has one for this placement."""
    second: dict[Runtime, dict[Placement, Schedule]] = {
        "paddle": {"loop": "vpp", "v": "zbvpp"},
        "paddle-pir": {"loop": "vpp"},
        "megatron": {"loop": "interleaved"},
        "torch": {"loop": "interleaved", "v": "zbv"},
        "any": {"loop": "interleaved", "v": "zbv"},
    }
    interleaving = second[runtime].get(placement)
    if vpp < 2 or interleaving is None or (placement == "v" and vpp != 2):
        return ("1f1b",)
    return ("1f1b", interleaving)


# ---------------------------------------------------------------------------
# The rules

_PASSES = "paddle/distributed/passes/pipeline_scheduler_pass/"
_MEGATRON = "megatron/core/pipeline_parallel/schedules.py"
_TORCH = "torch/distributed/pipelining/schedules.py"
_PIR_PASS = "paddle/distributed/auto_parallel/static/pir_pass.py"


@dataclass(frozen=True)
class Counts:
    """What a rule is checked against: one schedule run on pp stages of `vpp` chunks
    (the plan's), m micro-batches, a placement and the interleaved group size (None: the
    runtime's default)."""

    schedule: Schedule
    pp: int
    vpp: int
    m: int
    placement: Placement = "loop"
    group_size: int | None = None


@dataclass(frozen=True)
class Rule:
    """One runtime rule: what it says in vppctl's words, where the runtime's code says it
    (file, function), the runtime's own words ("" where it has none: a bare assert, a
    hang), and the fix vppctl names. `breaks` is None for a rule no count can break (any
    m) or one only a simulation finds (a deadlock); `refuses` False for a rule the runtime
    runs but its own tooling would not propose (a note, not a refusal); `split` True for a
    rule on the plan's layers per stage and chunk, not on counts (Paddle PIR's completion:
    checked by `vppctl.planner.pir` and `--split keep`, named by `pir_split_rule`);
    `needs_plan` True for a split rule `vppctl.paddle.pir_plan` builds past."""

    id: str
    runtime: Runtime
    schedules: tuple[Schedule, ...]
    says: str
    source: str
    words: str
    fix: Callable[[Counts], str]
    breaks: Callable[[Counts], bool] | None = None
    refuses: bool = True
    split: bool = False
    # a split rule (Paddle PIR's completion) `vppctl.paddle.pir_plan` lifts: a split that
    # breaks it launches with the plan file `vppctl convert` writes, not refused
    needs_plan: bool = False


def _fix_m(low: Callable[[int], int], other: str) -> Callable[[Counts], str]:
    return lambda c: f"pass --micro-batches >= {low(c.pp)}" + (f", or {other}" if other else "")


def _megatron_group(c: Counts) -> int:
    return c.pp if c.group_size is None else c.group_size


def _torch_group_differs(c: Counts) -> bool:
    return c.group_size is not None and c.group_size != torch_group_size(c.pp, c.m)


def _legal(c: Counts) -> str:
    sizes = legal_group_sizes(c.pp, c.m)
    if not sizes:
        return f"pass --micro-batches >= {c.pp}"
    return f"legal --group-size values: {', '.join(map(str, sizes))}"


RULES: tuple[Rule, ...] = (
    Rule(
        "P1",
        "paddle",
        SCHEDULES,
        "schedule_mode is FThenB, 1F1B, Eager1F1B, VPP, ZBH1 or ZBVPP",
        _PASSES + "__init__.py apply_pass",
        "pipeline scheduler only support FThenB, 1F1B, Eager1F1B, VPP and ZBH1, but receive ...",
        lambda c: "pass --schedule " + ", ".join(RUNTIME_SCHEDULES["paddle"]),
    ),
    Rule(
        "P2",
        "paddle",
        ("fthenb",),
        "FThenB takes any m",
        _PASSES + "pipeline_fthenb.py PipelineFThenBPass._create_job_list",
        "",
        lambda c: "",
    ),
    Rule(
        "P3",
        "paddle",
        ("1f1b",),
        "1F1B needs m >= pp",
        _PASSES + "pipeline_1f1b.py Pipeline1F1BPass._create_job_list",
        "Num of micro batches should larger than or equal to pp degree.",
        _fix_m(lambda pp: pp, "--schedule fthenb (any m)"),
        lambda c: c.m < c.pp,
    ),
    Rule(
        "P4",
        "paddle",
        ("eager1f1b",),
        "Eager1F1B needs m >= 2pp - 1",
        _PASSES + "pipeline_eager_1f1b.py PipelineEager1F1BPass._create_job_list",
        "Num of micro batches should larger than 2 * (pp_degree - pp_stage) - 1.",
        _fix_m(lambda pp: 2 * pp - 1, "--schedule 1f1b"),
        lambda c: c.m < 2 * c.pp - 1,
    ),
    Rule(
        "P5",
        "paddle",
        ("zbh1",),
        "ZBH1 needs m >= pp",
        _PASSES + "pipeline_zero_bubble.py PipelineZeroBubblePipelinePass._create_job_list",
        "Num of micro batches should larger than or equal to pp degree.",
        _fix_m(lambda pp: pp, "--schedule fthenb (any m)"),
        lambda c: c.m < c.pp,
    ),
    Rule(
        "P6",
        "paddle",
        ("zbvpp",),
        "ZBVPP needs m == pp (m % pp == 0 and m <= pp)",
        _PASSES + "pipeline_zero_bubble.py PipelineZeroBubbleVirtualPipelinePass._create_job_list",
        "zbvpp now only supports accumulate steps <= pp degree. It will cause gradient "
        "exploitation when accumulate steps > pp degree.",
        lambda c: f"pass --micro-batches {c.pp}, or --schedule vpp with loop placement",
        lambda c: c.m != c.pp,
    ),
    Rule(
        "P7",
        "paddle",
        ("vpp",),
        "VPP needs m >= pp",
        _PASSES + "pipeline_vpp.py PipelineVirtualPipelinePass._create_job_list",
        "",  # a bare `assert accumulate_steps >= num_stages`
        _fix_m(lambda pp: pp, ""),
        lambda c: c.m < c.pp,
    ),
    Rule(
        "P8",
        "paddle",
        ("vpp",),
        "VPP's job list deadlocks at some m that pp does not divide",
        _PASSES + "pipeline_vpp.py PipelineVirtualPipelinePass._create_job_list (its short last "
        "group of m % pp)",
        "",  # a hang: vppctl finds the cycle by running the job list
        lambda c: f"pass --micro-batches a multiple of pp {c.pp}",
    ),
    Rule(
        "P9",
        "paddle",
        ("fthenb", "1f1b", "eager1f1b", "zbh1"),
        "vpp_degree > 1 only with VPP or ZBVPP: a merged schedule on a vpp > 1 plan runs as "
        "plain PP, launched with vpp_degree 1",
        "paddle/distributed/auto_parallel/static/completion.py Completer._complete_chunk_id",
        "Please set right schedule_mode and vpp_seg_method for VPP and ZBVPP.",
        lambda c: "launch the plain-PP program with vpp_degree 1, or --schedule vpp",
        lambda c: c.vpp > 1,
        refuses=False,
    ),
    Rule(
        "P13",
        "paddle",
        ("vpp",),
        "Paddle's auto-tuner proposes VPP only at m % pp == 0 and pp > 2 (it runs others)",
        "paddle/distributed/auto_tuner/prune.py prune_by_vpp",
        "",  # a search heuristic: the tuner drops the configuration silently
        lambda c: (
            "Paddle runs it as asked (m >= pp); its tuner would try m a multiple of pp at pp > 2"
        ),
        lambda c: c.m % c.pp != 0 or c.pp <= 2,
        refuses=False,
    ),
    Rule(
        "P14",
        "paddle",
        ("vpp", "zbvpp"),
        "VPP and ZBVPP need pp >= 2",
        "paddle/distributed/auto_parallel/static/completion.py Completer._complete_chunk_id",
        "VPP schedule mode only can be set in pipeline mode.",
        lambda c: "pass --vpp 1, or a program of two stages or more",
        lambda c: c.pp < 2 and c.vpp > 1,
    ),
    Rule(
        "R1",
        "paddle-pir",
        SCHEDULES,
        "schedule_mode is FThenB, 1F1B or VPP (loop placement)",
        _PIR_PASS + " pipeline_pass",
        "pipeline scheduler only support FThenB, 1F1B and VPP now, but receive ...",
        lambda c: "pass --schedule " + ", ".join(RUNTIME_SCHEDULES["paddle-pir"]),
    ),
    Rule(
        "R2",
        "paddle-pir",
        ("fthenb",),
        "FThenB takes any m",
        _PASSES + "pipeline_fthenb.py PipelineFThenBPass._create_job_list",
        "",
        lambda c: "",
    ),
    Rule(
        "R3",
        "paddle-pir",
        ("1f1b",),
        "1F1B needs m >= pp",
        _PASSES + "pipeline_1f1b.py Pipeline1F1BPass._create_job_list_in_pir",
        "Num of micro batches should larger than or equal to pp degree.",
        _fix_m(lambda pp: pp, "--schedule fthenb (any m)"),
        lambda c: c.m < c.pp,
    ),
    Rule(
        "R4",
        "paddle-pir",
        ("vpp",),
        "VPP needs m >= pp (and deadlocks as P8)",
        _PASSES + "pipeline_vpp.py PipelineVirtualPipelinePass._pir_create_job_list",
        "",  # a bare `assert accumulate_steps >= num_stages`
        _fix_m(lambda pp: pp, ""),
        lambda c: c.m < c.pp,
    ),
    Rule(
        "R5",
        "paddle-pir",
        ("fthenb", "1f1b"),
        "vpp_degree > 1 is read only under VPP (with FThenB or 1F1B Paddle ignores it "
        "silently): a merged schedule on a vpp > 1 plan runs as plain PP, vpp_degree 1",
        "paddle/distributed/auto_parallel/static/engine.py Engine._parallel_pir (calls "
        "pir_pass.complete_chunk_id under VPP only)",
        "",  # Paddle says nothing: the degree is ignored
        lambda c: "launch it with vpp_degree 1, or --schedule vpp",
        lambda c: c.vpp > 1,
        refuses=False,
    ),
    Rule(
        "R6",
        "paddle-pir",
        ("vpp",),
        "VPP needs every stage mesh to hold at least vpp layers",
        _PIR_PASS + " complete_chunk_id",
        "The number of layers on each pp_stage must not be less than the vpp_degree in the "
        "pp_stage to ensure that each chunk contains at least one layer.",
        lambda c: f"pass --vpp no more than the fewest layers a stage holds (not {c.vpp})",
        split=True,
        needs_plan=True,
    ),
    Rule(
        "R7",
        "paddle-pir",
        ("vpp",),
        "VPP places segment k on stage k % pp, chunk k // pp (loop placement only)",
        _PIR_PASS + " complete_chunk_id",
        "",  # the placement is computed, never checked
        lambda c: "pass --placement loop",
        split=True,
    ),
    Rule(
        "R8",
        "paddle-pir",
        ("vpp",),
        "VPP deals each stage mesh's layers over its chunks, layer i to chunk i % vpp "
        "(earlier chunks take the extras): only such splits run",
        _PIR_PASS + " complete_chunk_id",
        "",  # the layers are dealt, never checked
        lambda c: "pass --split keep, or a split that deals each stage's layers so",
        split=True,
        needs_plan=True,
    ),
    Rule(
        "R14",
        "paddle-pir",
        ("vpp",),
        "VPP needs pp >= 2",
        _PIR_PASS + " complete_chunk_id",
        "VPP schedule mode only can be set in pipeline mode.",
        lambda c: "pass --vpp 1, or a program of two stages or more",
        lambda c: c.pp < 2 and c.vpp > 1,
    ),
    Rule(
        "M0",
        "megatron",
        SCHEDULES,
        "Megatron-Core runs 1F1B and interleaved 1F1B only",
        _MEGATRON + " get_forward_backward_func",
        "",
        lambda c: "pass --schedule " + ", ".join(RUNTIME_SCHEDULES["megatron"]),
    ),
    Rule(
        "M1",
        "megatron",
        ("interleaved",),
        "interleaved: group size N with pp <= N <= m",
        _MEGATRON + " forward_backward_pipelining_with_interleaving",
        "The number of contiguous micro-batches in a virtual pipeline stageshould range in "
        "[PP=... , M=...]",
        _legal,
        lambda c: c.vpp > 1 and not c.pp <= _megatron_group(c) <= c.m,
    ),
    Rule(
        "M2",
        "megatron",
        ("interleaved",),
        "interleaved: m % N is 0 or >= pp (default N = pp)",
        _MEGATRON + " forward_backward_pipelining_with_interleaving",
        "The remainder of M (the total micro-batches) divided by N (number of contiguous "
        "micro-batches in a virtual pipeline stage) should be 0, or larger than or equal to "
        "the pipeline-parallel size, but it is ...",
        _legal,
        lambda c: c.vpp > 1 and 0 < c.m % _megatron_group(c) < c.pp,
    ),
    Rule(
        "M4",
        "megatron",
        ("1f1b",),
        "1F1B (without interleaving) takes any m",
        _MEGATRON + " forward_backward_pipelining_without_interleaving",
        "",
        lambda c: "",
    ),
    Rule(
        "M6",
        "megatron",
        ("interleaved",),
        "interleaving needs pp > 1",
        "megatron/core/parallel_state.py initialize_model_parallel",
        "pipeline-model-parallel size should be greater than 1 with interleaved schedule",
        lambda c: "pass --vpp 1, or a program of two stages or more",
        lambda c: c.vpp > 1 and c.pp < 2,
    ),
    Rule(
        "T9",
        "torch",
        SCHEDULES,
        "torch runs GPipe, 1F1B, Interleaved1F1B, InterleavedZeroBubble, ZBVZeroBubble, "
        "DualPipeV (and LoopedBFS)",
        _TORCH + " get_schedule_class",
        "",
        lambda c: "pass --schedule " + ", ".join(RUNTIME_SCHEDULES["torch"]),
    ),
    Rule(
        "T1",
        "torch",
        ("fthenb",),
        "ScheduleGPipe takes any m",
        _TORCH + " ScheduleGPipe",
        "",
        lambda c: "",
    ),
    Rule(
        "T2",
        "torch",
        ("1f1b",),
        "Schedule1F1B needs m >= pp",
        _TORCH + " Schedule1F1B.__init__",
        "Number of microbatches (...) must be greater than or equal to the number of stages (...).",
        _fix_m(lambda pp: pp, "--schedule fthenb (any m)"),
        lambda c: c.m < c.pp,
    ),
    Rule(
        "T3",
        "torch",
        ("interleaved",),
        "ScheduleInterleaved1F1B: m % max(1, m // pp) == 0, in groups of m // max(1, m // pp)",
        _TORCH + " ScheduleInterleaved1F1B.__init__",
        "Interleaved 1F1B requires the number of microbatches to be a multiple of the number "
        "of rounds (...), but got ...",
        lambda c: (
            f"pass a --micro-batches that its rounds max(1, m // pp) = "
            f"{torch_rounds(c.pp, c.m)} divide, and no --group-size (torch derives "
            f"{torch_group_size(c.pp, c.m)})"
        ),
        lambda c: c.vpp > 1 and (c.m % torch_rounds(c.pp, c.m) != 0 or _torch_group_differs(c)),
    ),
    Rule(
        "T4",
        "torch",
        ("zb1p", "interleaved-zb"),
        "ScheduleInterleavedZeroBubble: m % max(1, m // pp) == 0",
        _TORCH + " ScheduleInterleavedZeroBubble.__init__",
        "Zero bubble requires the number of microbatches to be a multiple of the number of "
        "rounds (...), but got ...",
        lambda c: (
            f"pass a --micro-batches that its rounds max(1, m // pp) = "
            f"{torch_rounds(c.pp, c.m)} divide"
        ),
        lambda c: c.m % torch_rounds(c.pp, c.m) != 0,
    ),
    Rule(
        "T5",
        "torch",
        ("zbv",),
        "ScheduleZBVZeroBubble: 2 stages per rank (V), any m",
        _TORCH + " ScheduleZBVZeroBubble.__init__",
        "ZBV requires exactly 2 stages per rank",
        lambda c: "",
    ),
    Rule(
        "T6",
        "torch",
        ("dualpipev",),
        "ScheduleDualPipeV needs m >= 2pp",
        _TORCH + " ScheduleDualPipeV.__init__",
        "DualPipeV requires at least as many microbatches as stages, but got ... microbatches "
        "and ... stages.",
        _fix_m(lambda pp: 2 * pp, "--schedule zbv (any m)"),
        lambda c: c.m < 2 * c.pp,
    ),
)
RULE: dict[str, Rule] = {r.id: r for r in RULES}
# The rule that lists each runtime's schedules.
_SCHEDULES_RULE: dict[Runtime, str] = {
    "paddle": "P1",
    "paddle-pir": "R1",
    "megatron": "M0",
    "torch": "T9",
}


def _said(rule: Rule) -> str:
    """`rule P3 (pipeline_1f1b.py Pipeline1F1BPass._create_job_list: 'Num of ...')`."""
    where = rule.source.rsplit("/", 1)[-1]
    return f"rule {rule.id} ({where}" + (f": '{rule.words}')" if rule.words else ")")


def not_in_runtime(runtime: Runtime, schedule: Schedule) -> str | None:
    """Why `runtime` cannot run `schedule` at all (None: it can)."""
    if schedule in RUNTIME_SCHEDULES[runtime]:
        return None
    rule = RULE[_SCHEDULES_RULE[runtime]]
    return (
        f"{RUNTIME_NAMES[runtime]} has no {schedule} schedule ({_said(rule)}): "
        f"{rule.fix(Counts(schedule, 1, 1, 1))}, its schedules; or --runtime any for every "
        "schedule, or the --runtime you launch"
    )


def preflight(runtime: Runtime, counts: Counts) -> tuple[ScheduleRefused | None, tuple[Rule, ...]]:
    """`counts` under `runtime`'s rules: the refusal of the first rule it breaks (its
    message in the runtime's words and the fix; its `reason` the rule, for `plan` to count
    by), or None; and the rules it breaks that do not refuse (notes: `note`)."""
    schedule = counts.schedule
    missing = not_in_runtime(runtime, schedule)
    if missing is not None:
        rule_id = _SCHEDULES_RULE[runtime]  # `any` has every schedule: never here
        return ScheduleRefused(missing, reason=f"{rule_id}: {schedule} not in {runtime}"), ()
    home = rules_runtime(runtime, schedule)
    notes: list[Rule] = []
    for rule in RULES:
        if rule.runtime != home or schedule not in rule.schedules or rule.breaks is None:
            continue
        if not rule.breaks(counts):
            continue
        if not rule.refuses:
            notes.append(rule)
            continue
        message = f"{_where(home, counts)} breaks {_said(rule)}: {rule.says}; {rule.fix(counts)}"
        if runtime != "any":
            message += " (or --runtime any)"
        return ScheduleRefused(message, reason=f"{rule.id}: {rule.says}"), tuple(notes)
    return None, tuple(notes)


def pir_split_rule(placement: Placement, vpp: int, stage_layers: Sequence[int]) -> Rule:
    """Which of Paddle PIR's split rules (R6-R8) a split its completion does not make
    breaks: the placement (R7), a stage of fewer than vpp layers (R6), else the dealing
    (R8). `stage_layers`: the layers each stage mesh holds."""
    if placement != "loop":
        return RULE["R7"]
    if min(stage_layers, default=vpp) < vpp:
        return RULE["R6"]
    return RULE["R8"]


def split_refusal(rule: Rule, why: str) -> ScheduleRefused:
    """A split rule's refusal (`pir_split_rule`): the rule and its source, vppctl's reading
    of why, the fix; its `reason` the rule, for `plan` to count by."""
    name = RUNTIME_NAMES[rule.runtime]
    return ScheduleRefused(
        f"{name} cannot make this split for VPP ({_said(rule)}): {why} (or --runtime any)",
        reason=f"{rule.id}: {rule.says}",
    )


def _where(runtime: Runtime, counts: Counts) -> str:
    c = counts
    return f"{RUNTIME_NAMES[runtime]}: {c.schedule} at pp {c.pp}, vpp {c.vpp}, m {c.m}"


def note(rule: Rule, counts: Counts) -> str:
    """A rule `counts` breaks without being refused, said as a warning."""
    return f"{_where(rule.runtime, counts)}: {rule.says} ({_said(rule)}); {rule.fix(counts)}"


def check_runtime(runtime: Runtime, counts: Counts) -> tuple[str, ...]:
    """`preflight`, raising its refusal (ScheduleRefused, exit 2); its notes otherwise."""
    refused, notes = preflight(runtime, counts)
    if refused is not None:
        raise refused
    return tuple(note(rule, counts) for rule in notes)


def runtime_line(runtime: Runtime) -> str:
    """`runtime: Paddle 3.0.0 (legacy ProgramDesc): fthenb, 1f1b, ...; --runtime any ...`:
    the header line of `plan` and `simulate`, naming the runtime and how to widen it."""
    if runtime == "any":
        others = [r for r in RUNTIMES if r != "any"]
        return (
            "runtime: any (each schedule under the rules of the runtime whose order it is); "
            f"--runtime {', '.join(others[:-1])} or {others[-1]} keeps to one"
        )
    return (
        f"runtime: {RUNTIME_NAMES[runtime]}, schedules "
        f"{', '.join(RUNTIME_SCHEDULES[runtime])} under its rules; --runtime any for every "
        "schedule"
    )
