"""Launch settings: how to run one planned candidate under Paddle, Megatron-Core and torch.

This module's one job is to turn a candidate's plan (stages, chunks, placement, layers
per segment), schedule, micro-batches and group size into each runtime's own
settings, or into the reason that runtime cannot run it. It is pure (no program, no
framework imported) so that any planner can use it: `vppctl plan` for legacy
programs, and for PIR programs with the Paddle part from `vppctl.planner.pir`.

* Paddle: the auto-parallel ``Strategy``'s ``pipeline`` fields (``enable``,
  ``schedule_mode``, ``pp_degree``, ``vpp_degree``, ``vpp_seg_method``,
  ``accumulate_steps`` = micro-batches, ``micro_batch_size``), and which Paddle runs
  a legacy program with that schedule (`vppctl.schedule.runtimes`).
* Megatron-Core: command-line flags of its training script
  (``--pipeline-model-parallel-size``, ``--num-layers-per-virtual-pipeline-stage`` or
  ``--pipeline-model-parallel-layout``, ``--microbatch-group-size-per-virtual-pipeline-stage``,
  ``--micro-batch-size``, ``--global-batch-size``).
* torch: the ``torch.distributed.pipelining`` schedule class and its arguments.

Where another runtime's schedule runs the very same order (Paddle's VPP and
Megatron's interleaved 1F1B with groups of pp when pp divides m and m > pp; torch's
interleaved 1F1B when its derived round size is the group size), the candidate runs
there too, and the note says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from vppctl.choices import Placement, Schedule
from vppctl.plan import layout_of_counts
from vppctl.schedule import (
    MEGATRON_SCHEDULES,
    PADDLE_LEGACY_VPP,
    PADDLE_MODES,
    PADDLE_RUNTIMES,
    TORCH_CLASSES,
    torch_group_size,
    torch_rounds,
)

Runtime = Literal["paddle", "megatron", "torch"]
# program_runtimes as Paddle's Strategy holds them (the greedy zbvpp simulated).
ZBVPP_RUNTIMES = tuple(PADDLE_RUNTIMES.as_list())
# A setting's value: a flag, a count, a name, or a list of numbers.
Value = str | int | bool | tuple[int, ...]


@dataclass(frozen=True)
class LaunchCandidate:
    """What a launch needs to know about one planned candidate."""

    schedule: Schedule
    pp: int
    vpp: int
    placement: Placement
    micro_batches: int
    group_size: int | None
    layers_per_segment: tuple[int, ...]
    layer_class: str  # the repeated layer's class name: Paddle's vpp_seg_method
    micro_batch_size: int = 1


@dataclass(frozen=True)
class Settings:
    """One runtime's settings for a candidate, in the order they are set; empty with
    ``note`` saying why when the runtime cannot run it (``runs`` False)."""

    runtime: Runtime
    runs: bool
    settings: tuple[tuple[str, Value], ...]
    note: str


def launch_settings(c: LaunchCandidate) -> tuple[Settings, Settings, Settings]:
    """Paddle's, Megatron-Core's and torch's settings for ``c``."""
    return paddle_settings(c), megatron_settings(c), torch_settings(c)


# ---------------------------------------------------------------------------
# Paddle


def same_as_megatron_interleaved(c: LaunchCandidate) -> bool:
    """Paddle's VPP and Megatron's interleaved 1F1B run one order when Megatron's groups
    are of pp, pp divides m, and m > pp (at m == pp Paddle runs every forward first)."""
    if c.schedule not in ("vpp", "interleaved") or c.vpp < 2 or c.placement != "loop":
        return False
    group = c.pp if c.schedule == "vpp" else c.group_size
    return group == c.pp and c.micro_batches % c.pp == 0 and c.micro_batches > c.pp


def paddle_mode(c: LaunchCandidate) -> str | None:
    """The schedule_mode that runs ``c``'s order, if Paddle has one."""
    if c.schedule == "interleaved" and same_as_megatron_interleaved(c):
        return "VPP"
    return PADDLE_MODES.get(c.schedule)


def paddle_settings(c: LaunchCandidate) -> Settings:
    mode = paddle_mode(c)
    if mode is None or (c.placement == "v") != (mode == "ZBVPP"):
        nearest = "VPP" if c.vpp > 1 and c.placement == "loop" else "ZBH1 or 1F1B"
        why = (
            f"Paddle has no {c.schedule} schedule (its nearest schedule_mode is {nearest})"
            if c.placement == "loop" or c.vpp == 1
            else f"Paddle has no {c.schedule} schedule: its V-shaped ZBVPP is a cost-driven "
            "greedy of its own, for m == pp only"
        )
        return Settings("paddle", False, (), why)
    settings = paddle_fields(c, mode, c.layer_class)
    if mode == "ZBVPP":  # the greedy's runtime model: vppctl simulated Paddle's default
        settings += (("strategy.pipeline.program_runtimes", ZBVPP_RUNTIMES),)
    note = (
        f"vppctl writes legacy programs: Paddle {PADDLE_LEGACY_VPP} schedules them, 3.1.0 to "
        "3.3.1 schedule PIR programs only"
    )
    if c.schedule != "vpp" and mode == "VPP":
        note = "the same order as Megatron's interleaved 1F1B here; " + note
    if mode == "ZBVPP":
        note = (
            f"Paddle {PADDLE_LEGACY_VPP} builds this job list, 3.3.1 cannot: its ZBVPP pass "
            "calls an undefined _get_max_memory; keep memory_limit_times at -1"
        )
    return Settings("paddle", True, settings, note)


def paddle_fields(c: LaunchCandidate, mode: str, seg_method: str) -> tuple[tuple[str, Value], ...]:
    """The ``strategy.pipeline`` fields that run ``c`` with ``mode`` (a legacy program's or,
    from `vppctl.planner.pir`, a PIR program's)."""
    prefix = "strategy.pipeline."
    return (
        (prefix + "enable", True),
        (prefix + "schedule_mode", mode),
        (prefix + "pp_degree", c.pp),
        (prefix + "vpp_degree", c.vpp),
        (prefix + "vpp_seg_method", seg_method if c.vpp > 1 else ""),
        (prefix + "accumulate_steps", c.micro_batches),
        (prefix + "micro_batch_size", c.micro_batch_size),
    )


# ---------------------------------------------------------------------------
# Megatron-Core


def megatron_layout(layers_per_segment: Sequence[int]) -> str:
    """Megatron-Core's `--pipeline-model-parallel-layout` for a loop-placed plan: one
    `|`-separated stage per virtual stage, in order; `E` the embedding (in segment 0),
    `t` a decoder layer (`t*n` for n of them), `L` the loss (in the last segment); runs
    of equal stages as `(t*n|)*k` (`vppctl.plan.layout_of_counts`)."""
    return layout_of_counts(layers_per_segment)


def megatron_settings(c: LaunchCandidate) -> Settings:
    if c.placement == "v" and c.vpp > 1:
        return Settings(
            "megatron",
            False,
            (),
            "Megatron-Core places virtual stages in a loop; its layout cannot express V placement",
        )
    runs = c.schedule in MEGATRON_SCHEDULES or same_as_megatron_interleaved(c)
    if c.schedule == "interleaved" and c.vpp == 1:
        runs = True
    if not runs:
        nearest = "interleaved 1F1B" if c.vpp > 1 else "1F1B"
        return Settings(
            "megatron",
            False,
            (),
            f"Megatron-Core has no {c.schedule} schedule (its nearest is {nearest})",
        )
    flags: list[tuple[str, Value]] = [("--pipeline-model-parallel-size", c.pp)]
    uniform = len(set(c.layers_per_segment)) == 1
    if uniform and c.vpp > 1:
        flags.append(("--num-layers-per-virtual-pipeline-stage", c.layers_per_segment[0]))
    elif not uniform:
        flags.append(("--pipeline-model-parallel-layout", megatron_layout(c.layers_per_segment)))
    if c.vpp > 1:
        group = c.group_size if c.schedule == "interleaved" and c.group_size else c.pp
        flags.append(("--microbatch-group-size-per-virtual-pipeline-stage", group))
    flags += [
        ("--micro-batch-size", c.micro_batch_size),
        ("--global-batch-size", c.micro_batch_size * c.micro_batches),
    ]
    note = "--global-batch-size is per data-parallel replica: multiply it by the DP size"
    if c.schedule == "vpp":
        note = "the same order as Paddle's VPP here; " + note
    return Settings("megatron", True, tuple(flags), note)


# ---------------------------------------------------------------------------
# torch


def torch_class(c: LaunchCandidate) -> tuple[str | None, str]:
    """The torch class that runs ``c``'s order, or None, and a note."""
    name = TORCH_CLASSES.get(c.schedule)
    own = torch_group_size(c.pp, c.micro_batches)
    divides = c.micro_batches % torch_rounds(c.pp, c.micro_batches) == 0
    if c.schedule == "interleaved" and c.vpp == 1:
        return "Schedule1F1B", ""
    if c.schedule == "vpp" and same_as_megatron_interleaved(c) and own == c.pp and divides:
        return "ScheduleInterleaved1F1B", "the same order as Paddle's VPP here"
    if name is None:
        return None, f"torch has no {c.schedule} schedule"
    grouped = c.schedule in ("interleaved", "interleaved-zb") and c.vpp > 1
    if grouped and (not divides or c.group_size != own):
        return None, (
            f"torch derives its round size itself: m // max(1, m // pp) = {own}"
            + (
                ""
                if divides
                else f", and refuses m {c.micro_batches} (not a multiple of its rounds)"
            )
            + f"; this candidate's group size is {c.group_size}"
        )
    return name, ""


def torch_settings(c: LaunchCandidate) -> Settings:
    name, note = torch_class(c)
    if name is None:
        return Settings("torch", False, (), note)
    if name in ("ScheduleGPipe", "Schedule1F1B") or c.vpp == 1:
        stages = "1 PipelineStage per rank (rank r: stage r)"
    elif c.placement == "v":
        stages = "2 PipelineStages per rank (rank r: stages r and 2*pp-1-r, V)"
    else:
        stages = f"{c.vpp} PipelineStages per rank (rank r: stages r + k*pp, k < {c.vpp})"
    settings: tuple[tuple[str, Value], ...] = (
        ("class", f"torch.distributed.pipelining.{name}"),
        ("n_microbatches", c.micro_batches),
        ("stages", stages),
    )
    return Settings("torch", True, settings, note)


# ---------------------------------------------------------------------------
# The split in the other dialects: torchtitan's module names, DeepSpeed's parts

# torchtitan's LLMs' top-level modules (torchtitan/models/common/decoder.py): the
# embedding, the blocks `layers.<i>`, the final norm and the output head.
TORCHTITAN_EMBEDDING = ("tok_embeddings",)
TORCHTITAN_HEAD = ("norm", "lm_head")
# DeepSpeed's PipelineModule layer specs of such a model: one for the embedding, one per
# block, two for the final norm and the head (the loss is `loss_fn`, not a spec).
DEEPSPEED_EMBEDDING_SPECS, DEEPSPEED_HEAD_SPECS = 1, 2


@dataclass(frozen=True)
class Layouts:
    """One split in each runtime's own terms: Megatron-Core's layout (loop placement), the
    names torchtitan's `parallelism.module_fqns_per_model_part` takes (one list per
    virtual stage in pipeline order, any placement: torchtitan places V stages itself),
    DeepSpeed's `PipelineModule.parts` (one stage per rank, or DualPipeV's V of two) and
    whether its `partition_method='uniform'` gives them, and for a PIR program the stage
    mesh Paddle needs each layer on (None where a dialect cannot say it)."""

    megatron: str | None
    torchtitan: tuple[tuple[str, ...], ...]
    deepspeed_parts: tuple[int, ...] | None
    deepspeed_uniform: bool
    paddle_stage_per_layer: tuple[int, ...] | None


def torchtitan_fqns(layers_per_segment: Sequence[int]) -> tuple[tuple[str, ...], ...]:
    """torchtitan's module names per virtual stage (pipeline order): the embedding with the
    first, `layers.<i>` by global index, the norm and head with the last."""
    out: list[tuple[str, ...]] = []
    first, last = 0, len(layers_per_segment) - 1
    for k, n in enumerate(layers_per_segment):
        names: tuple[str, ...] = TORCHTITAN_EMBEDDING if k == 0 else ()
        names += tuple(f"layers.{i}" for i in range(first, first + n))
        out.append(names + (TORCHTITAN_HEAD if k == last else ()))
        first += n
    return tuple(out)


def deepspeed_parts(layers_per_segment: Sequence[int]) -> tuple[int, ...]:
    """`PipelineModule.parts`: stage i builds the specs `parts[i]:parts[i + 1]` of the flat
    list (embedding, blocks, norm, head; `_partition_layers`)."""
    parts, last = [0], len(layers_per_segment) - 1
    for k, n in enumerate(layers_per_segment):
        specs = n + (DEEPSPEED_EMBEDDING_SPECS if k == 0 else 0)
        specs += DEEPSPEED_HEAD_SPECS if k == last else 0
        parts.append(parts[-1] + specs)
    return tuple(parts)


def deepspeed_uniform(num_items: int, num_parts: int) -> tuple[int, ...]:
    """The parts DeepSpeed's `partition_method='uniform'` gives (`partition_uniform`):
    equal counts, the first `num_items % num_parts` parts one more; with fewer items than
    parts, one each and then empty parts."""
    if num_items <= num_parts:
        return tuple(min(p, num_items) for p in range(num_parts + 1))
    base, extra = divmod(num_items, num_parts)
    return tuple(p * base + min(p, extra) for p in range(num_parts + 1))


def layouts(c: LaunchCandidate, stage_layers: Sequence[int] | None = None) -> Layouts:
    """`c`'s split in every dialect; `stage_layers`, a PIR program's layers per stage mesh
    as the plan needs them (`vppctl.planner.pir.PirSplit.stage_layers`), gives the stage
    of each layer in program order."""
    sizes = c.layers_per_segment
    loop = c.placement == "loop" or c.vpp == 1
    deepspeed = c.vpp == 1 or (c.placement == "v" and c.vpp == 2)
    parts = deepspeed_parts(sizes) if deepspeed else None
    uniform = parts is not None and parts == deepspeed_uniform(parts[-1], len(parts) - 1)
    per_layer = None
    if stage_layers is not None:
        per_layer = tuple(s for s, n in enumerate(stage_layers) for _ in range(n))
    return Layouts(
        megatron_layout(sizes) if loop else None,
        torchtitan_fqns(sizes),
        parts,
        uniform,
        per_layer,
    )
