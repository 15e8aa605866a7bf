"""PIR strategy: the Paddle 3.x pipeline strategy that runs a planned candidate, or why none can.

vppctl writes no PIR program (Paddle cannot load one back); Paddle converts it itself.
Its engine (`Engine._parallel_pir`, Paddle 3.3.1) runs `pir_pass.complete_chunk_id` on
the forward program when `strategy.pipeline.schedule_mode` is "VPP", and that pass
decides the split, from the program:

- a stage holds the layers the model puts on its mesh (`vpp_seg_method` names them);
  layer i of a stage goes to chunk i % vpp_degree, so a stage's chunks hold its
  layers dealt evenly, earlier chunks taking the extras, and every chunk needs one;
- segment k (chunk k // pp of stage k % pp: loop placement) takes the next layers
  in program order, as many as its chunk holds.

So Paddle's completion takes a plan that is loop-placed and whose stages' chunks hold
their layers dealt so (vppctl's `keep` split, `uniform` when the stages hold equal
counts that `vpp` divides, and any other split that happens to deal so); its per-stage
totals are the layer counts the model must put on each stage's mesh: the program's, or
a move of layers between stages (`PirSplit`).

Schedules, read from the 3.3.1 wheel and run there (tests/paddle/test_pir_reference.py): the
engine's PIR pipeline pass (`pir_pass.pipeline_pass`) asserts that `schedule_mode` is
FThenB, 1F1B or VPP, and of the six scheduler passes only those three implement
`_partial_pir_programs` (Eager1F1B's, ZBH1's and ZBVPP's inherit the base's, which
returns nothing: applied to a PIR program they fail to unpack it). Their job lists
exist (vppctl's goldens call the builders), but no PIR program is split to run them.
`complete_chunk_id` refuses `vpp_degree > 1` with any mode but VPP, and VPP's job list
needs `accumulate_steps >= pp`. VPP on PIR runs vppctl's `vpp` order (the job list of
`_pir_create_job_list`); Megatron's `interleaved` only where the two are one order
(`launch.paddle_mode`).

A split the completion does not make itself (R6, R8 of `vppctl.schedule`) is built by
`vppctl.paddle.pir_plan` from the plan file `vppctl convert` writes: any loop-placed
split at vpp >= 2 without an empty middle virtual stage. So each split launches one of
three ways (`PirLaunch`): by the strategy only, with `vppctl.paddle.pir_plan`, or not.

Everything here is pure: plain values in, the strategy (`PirStrategy`) or the reason
(`PirMismatch`) out, and the Paddle part of a candidate's launch settings from them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from vppctl.choices import Placement, Schedule
from vppctl.convert import Planned
from vppctl.mesh import NO_MESH
from vppctl.plan import paddle_seg_method, place
from vppctl.planner.launch import (
    LaunchCandidate,
    Settings,
    megatron_settings,
    paddle_fields,
    paddle_mode,
    torch_settings,
)
from vppctl.schedule import PADDLE_MODES, SimResult, pir_split_rule

# The schedule_modes Paddle 3.3.1 runs on a PIR program (the module docstring).
PIR_MODES: tuple[str, ...] = ("FThenB", "1F1B", "VPP")
# vppctl's schedules that are those orders under Paddle's own names.
PIR_SCHEDULE_MODES: dict[Schedule, str] = {
    s: mode for s, mode in PADDLE_MODES.items() if mode in PIR_MODES
}
PIR_VERSION = "3.3.1"  # the Paddle whose PIR passes these facts were read from


@dataclass(frozen=True)
class StrayOp:
    """A forward op between two layers that belongs to neither (Paddle's completion raises)."""

    label: str  # `op #57 (pd_op.scale)`
    type: str  # `pd_op.scale`, as Paddle's message names it
    struct: str  # its struct name
    after: str  # the layer before it
    before: str  # the layer after it
    part: str | None  # its struct name's part where the layers' names are (`DenseLayer_1`)


@dataclass(frozen=True)
class PirInput:
    """What Paddle's PIR completion reads from the program being planned."""

    stage_layers: tuple[int, ...]  # layers the program puts on each stage's mesh
    vpp_seg_method: (
        str  # what to set as strategy.pipeline.vpp_seg_method (`vppctl.plan.paddle_seg_method`)
    )
    strays: tuple[StrayOp, ...] = ()  # forward ops between layers in none (reshards aside)
    stage_ranks: tuple[tuple[int, ...], ...] = ()  # each stage mesh's ranks, stage 0 first


@dataclass(frozen=True)
class PirSplit:
    """A plan's layers as Paddle's PIR completion would place them, and whether it can."""

    stage_layers: tuple[int, ...]  # the plan's layers per stage
    chunk_layers: tuple[tuple[int, ...], ...]  # per stage, its chunks' layers in chunk order
    moves_layers: bool  # stage_layers differ from the program's: re-place layers in the model
    reason: str | None  # None: Paddle's completion makes this split; else why it cannot

    @property
    def takes(self) -> bool:
        return self.reason is None

    def placement_text(self, held: Sequence[int]) -> str:
        """`the stage meshes hold 7, 5 layers, as the program's do; vpp_degree 2 deals them
        4+3 | 3+2`: what the model must hold, and the chunks that gives."""
        counts = ", ".join(map(str, self.stage_layers))
        where = (
            f"the model must put {counts} layers on the stage meshes, not the program's "
            + ", ".join(map(str, held))
            if self.moves_layers
            else f"the stage meshes hold {counts} layers, as the program's do"
        )
        vpp = len(self.chunk_layers[0]) if self.chunk_layers else 1
        if vpp == 1:
            return where
        dealt = " | ".join("+".join(map(str, chunks)) for chunks in self.chunk_layers)
        return f"{where}; vpp_degree {vpp} deals them {dealt}"


@dataclass(frozen=True)
class PirStrategy:
    """`paddle.distributed.Strategy().pipeline` settings (and the model's layer placement)
    that make Paddle's PIR completion and scheduler run the plan. Said to a person as the
    launch settings (`pir_paddle_settings`), the one rendering `plan` prints."""

    pp_degree: int
    vpp_degree: int
    vpp_seg_method: str
    schedule_mode: str
    accumulate_steps: int  # micro-batches per step
    stage_layers: tuple[int, ...]  # layers the model puts on each stage's mesh
    segment_layers: tuple[int, ...]  # layers per segment, in virtual-stage order (what it gives)
    moves_layers: bool  # stage_layers differ from the program's: re-place layers in the model


@dataclass(frozen=True)
class PirMismatch:
    """Why Paddle's PIR pipeline cannot run the plan as it is."""

    reason: str


# ---------------------------------------------------------------------------
# The split


def pir_split(
    pp: int,
    vpp: int,
    placement: Placement,
    layers_per_segment: Sequence[int],
    held: Sequence[int],
) -> PirSplit:
    """Whether Paddle's PIR completion makes this split (`layers_per_segment` in
    virtual-stage order) from a program whose stage meshes hold `held` layers."""
    chunks: list[list[int]] = [[0] * vpp for _ in range(pp)]
    for k, n in enumerate(layers_per_segment):
        stage, chunk = place(k, pp, placement)
        chunks[stage][chunk] = n
    stage_layers = tuple(sum(c) for c in chunks)
    split = PirSplit(
        stage_layers=stage_layers,
        chunk_layers=tuple(tuple(c) for c in chunks),
        moves_layers=stage_layers != tuple(held),
        reason=None,
    )
    return replace(split, reason=_split_refusal(split, vpp, placement, held))


def _split_refusal(
    split: PirSplit, vpp: int, placement: Placement, held: Sequence[int]
) -> str | None:
    if vpp > 1 and placement != "loop":
        return (
            "Paddle's PIR completion places segment k on stage k % pp (loop placement); "
            f"it cannot take {placement} placement; {splits_paddle_makes(held, vpp)}"
        )
    for s, chunks in enumerate(split.chunk_layers):
        dealt = dealt_layers(split.stage_layers[s], vpp)
        if list(chunks) != dealt:
            return (
                f"stage {s} holds {'+'.join(map(str, chunks))} layers in its chunks, and "
                f"Paddle's PIR completion deals a stage's {split.stage_layers[s]} layers as "
                f"{'+'.join(map(str, dealt))} (earlier chunks take the extras); "
                f"{splits_paddle_makes(held, vpp)}"
            )
    return None


def splits_paddle_makes(held: Sequence[int], vpp: int) -> str:
    """The fix for a split Paddle's completion does not make: `--split keep` (the stage
    meshes' layers, dealt) where every stage holds vpp layers; else why keep cannot, and
    the layers per stage mesh Paddle would take (`stage_counts_paddle_takes`)."""
    dealt = " | ".join("+".join(map(str, dealt_layers(n, vpp))) for n in held)
    if all(n >= vpp for n in held):
        return (
            f"use `--split keep` (the stage meshes' {_counts(held)} layers, dealt {dealt}), or "
            "a split that deals each stage's layers so"
        )
    return f"`--split keep` cannot: {short_stage_refusal(held, vpp)}"


def short_stage_refusal(held: Sequence[int], vpp: int) -> str:
    """Why Paddle's completion refuses a model whose stage meshes hold `held` layers at
    `vpp` (some stage has fewer than vpp), and the layers per stage mesh it would take."""
    s = next(s for s, n in enumerate(held) if n < vpp)
    why = (
        f"stage {s} holds {held[s]} layer{'s' if held[s] != 1 else ''}, fewer than vpp_degree "
        f"{vpp}, and Paddle's PIR completion asserts that every stage holds at least "
        'vpp_degree layers ("The number of layers on each pp_stage must not be less than the '
        'vpp_degree ...")'
    )
    counts = stage_counts_paddle_takes(held, vpp)
    if counts is None:
        most = sum(held) // len(held)
        return (
            f"{why}; the program's {sum(held)} layers are fewer than pp x vpp = "
            f"{len(held) * vpp}: use vpp_degree {most} or less"
            if most >= 1
            else f"{why}; the program has fewer layers than stages"
        )
    return f"{why}; put at least {vpp} on each stage mesh, e.g. {_counts(counts)}"


def stage_counts_paddle_takes(held: Sequence[int], vpp: int) -> tuple[int, ...] | None:
    """The layers per stage mesh nearest `held` (fewest layers moved, each move to or from
    a neighbouring stage first) with at least `vpp` on every stage; None when there are too
    few layers. Layers keep their order: a move shifts a stage boundary."""
    n, pp = sum(held), len(held)
    if n < pp * vpp:
        return None
    counts = list(held)
    while True:
        short = next((s for s, c in enumerate(counts) if c < vpp), None)
        if short is None:
            return tuple(counts)
        spare = [s for s, c in enumerate(counts) if c > vpp]
        donor = min(spare, key=lambda s: (abs(s - short), -counts[s], s))
        counts[donor] -= 1
        counts[short] += 1


def _counts(counts: Sequence[int]) -> str:
    return ", ".join(map(str, counts))


# ---------------------------------------------------------------------------
# What Paddle's completion refuses in the program itself, whatever the split


def pir_verdict(
    pp: int,
    vpp: int,
    placement: Placement,
    layers_per_segment: Sequence[int],
    pir: PirInput,
) -> PirSplit:
    """`pir_split`, and before it what Paddle's completion refuses in the program itself
    (`completion_refusal`): the verdict `plan` gives a conversion of a PIR program."""
    split = pir_split(pp, vpp, placement, layers_per_segment, pir.stage_layers)
    refused = completion_refusal(pir, vpp)
    return split if refused is None else replace(split, reason=refused)


def completion_refusal(pir: PirInput, vpp: int) -> str | None:
    """Why Paddle 3.3.1's `complete_chunk_id` refuses this program at `vpp` whatever the
    split, in the order it finds out; None when it does not (it runs at vpp > 1 only).

    1. `_get_seg_struct_names`: an op between the first and the last layer op, on a mesh,
       that is in no layer `vpp_seg_method` names and is no reshard raises ValueError;
    2. `get_pp_stage_by_process_mesh`: a mesh is on stage r // (world // pp) of its ranks
       r, or on none when they disagree; the layers on a stage mesh Paddle puts on no or
       another stage are counted there, and the split is dealt from those counts (its
       assertion that every stage holds vpp layers fails on a stage with none).
    """
    if vpp < 2:
        return None
    if pir.strays:
        return stray_refusal(pir.strays, pir.vpp_seg_method)
    return rank_order_refusal(pir.stage_ranks)


def stray_refusal(strays: Sequence[StrayOp], seg_method: str) -> str:
    first = strays[0]
    more = f" (and {len(strays) - 1} more)" if len(strays) > 1 else ""
    # Another repeated layer class: the stray ops are in two or more of its instances.
    instances: dict[str, set[str]] = {}
    for stray in strays:
        if stray.part:
            instances.setdefault(re.sub(r"_\d+$", "", stray.part), set()).add(stray.part)
    classes = sorted(c for c, seen in instances.items() if len(seen) > 1)
    fix = "move it into a layer's forward (or out of the layers' span)"
    if classes and all(s.part and re.sub(r"_\d+$", "", s.part) in classes for s in strays):
        names = "|".join([seg_method, *classes])
        fix = (
            f"it is in a layer of class {', '.join(classes)}: name every layer class in "
            f"vpp_seg_method (plan with `--seg-method '{names}'`)"
        )
    return (
        f"Paddle's PIR completion raises ValueError on {first.label}{more} between layers "
        f"{first.after} and {first.before} (struct name {first.struct!r}): every op between "
        "the first and the last layer must be in a layer vpp_seg_method names, or a reshard "
        f'("The op {first.type} without seg_method in its struct_name should only be '
        f'reshard"); {fix}'
    )


def paddle_stage(ranks: Sequence[int], world: int, pp: int) -> int | None:
    """The stage Paddle 3.3.1 gives a mesh (`get_pp_stage_by_process_mesh`): rank r is on
    stage r // (world // pp) (`get_pp_stage_by_rank`); None when its ranks disagree."""
    group = max(world // pp, 1)
    stages = {r // group for r in ranks}
    return stages.pop() if len(stages) == 1 else None


def rank_order_refusal(stage_ranks: Sequence[Sequence[int]]) -> str | None:
    """Why Paddle's completion cannot place the stages where the program has them: it
    reads a mesh's stage from its ranks (`paddle_stage`), not from the program."""
    pp = len(stage_ranks)
    if pp < 2:
        return None
    world = len({r for ranks in stage_ranks for r in ranks})
    group = max(world // pp, 1)
    for s, ranks in enumerate(stage_ranks):
        got = paddle_stage(ranks, world, pp)
        if got == s:
            continue
        ids = "[" + ", ".join(map(str, ranks)) + "]"
        said = (
            f"on stages {', '.join(map(str, sorted({r // group for r in ranks})))}"
            if got is None
            else f"on stage {got}"
        )
        return (
            f"Paddle's PIR completion reads a stage from the ranks (rank r is on stage "
            f"r // (world / pp) = r // {group}, get_pp_stage_by_rank), so stage mesh {s}'s "
            f"ranks {ids} are {said}: it counts stage {s}'s layers on no stage or another "
            "(and asserts that every stage holds at least vpp_degree layers); give stage s "
            f"the ranks {group}*s to {group}*s+{group - 1}, dp and tp inside a stage (a mesh of "
            "shape [pp, ...] whose first dimension is the stage)"
        )
    return None


def dealt_layers(n: int, vpp: int) -> list[int]:
    """How Paddle's PIR completion deals a stage's `n` layers over its `vpp` chunks (layer i
    to chunk i % vpp): earlier chunks take the extras."""
    return [n // vpp + (1 if j < n % vpp else 0) for j in range(vpp)]


# ---------------------------------------------------------------------------
# The schedule


def pir_mode(c: LaunchCandidate) -> str | PirMismatch:
    """The schedule_mode that runs `c`'s order on a PIR program, or why none does."""
    mode = paddle_mode(c)
    known = ", ".join(PIR_MODES)
    if mode is None:
        nearest = "VPP" if c.vpp > 1 else "1F1B"
        return PirMismatch(
            f"Paddle has no {c.schedule} schedule (on a PIR program it runs {known}; the "
            f"nearest is {nearest})"
        )
    if mode not in PIR_MODES:
        return PirMismatch(
            f"Paddle {PIR_VERSION} runs no {mode} on a PIR program: its PIR pipeline pass takes "
            f"{known} only (its {mode} pass builds a job list but splits no PIR program)"
        )
    if (c.vpp > 1) != (mode == "VPP"):
        return PirMismatch(
            f"{c.schedule} interleaves chunks: it needs vpp_degree > 1 (at vpp_degree 1 Paddle's "
            "PIR pipeline runs FThenB or 1F1B)"
            if mode == "VPP"
            else f"Paddle's PIR completion takes vpp_degree > 1 with schedule_mode VPP only "
            f"(complete_chunk_id), not {mode}"
        )
    if mode in ("VPP", "1F1B") and c.micro_batches < c.pp:
        return PirMismatch(
            f"Paddle's PIR {mode} schedule needs accumulate_steps >= pp ({c.micro_batches} < "
            f"{c.pp}: its job list asserts it); use FThenB, or more micro-batches"
        )
    return mode


# ---------------------------------------------------------------------------
# The strategy, and the launch settings of a candidate


def candidate_strategy(c: LaunchCandidate, pir: PirInput) -> PirStrategy | PirMismatch:
    """The PIR strategy that runs candidate `c` of a PIR program, or why none does: the
    split first (it does not depend on the schedule), then the schedule."""
    split = pir_verdict(c.pp, c.vpp, c.placement, c.layers_per_segment, pir)
    return _strategy(c, pir, split)


def _strategy(c: LaunchCandidate, pir: PirInput, split: PirSplit) -> PirStrategy | PirMismatch:
    if split.reason is not None:
        return PirMismatch(split.reason)
    mode = pir_mode(c)
    if isinstance(mode, PirMismatch):
        return mode
    return PirStrategy(
        pp_degree=c.pp,
        vpp_degree=c.vpp,
        vpp_seg_method=pir.vpp_seg_method,
        schedule_mode=mode,
        accumulate_steps=c.micro_batches,
        stage_layers=split.stage_layers,
        segment_layers=tuple(c.layers_per_segment),
        moves_layers=split.moves_layers,
    )


# ---------------------------------------------------------------------------
# How a split is launched on Paddle's PIR pipeline

PirHow = Literal["strategy", "pir_plan", "cannot"]
PIR_HOWS: tuple[PirHow, ...] = ("strategy", "pir_plan", "cannot")
PLAN_FILE = "PLAN.json"  # the plan file named where the program is read from stdin


@dataclass(frozen=True)
class PirLaunch:
    """How a split runs on Paddle's PIR pipeline: by the strategy alone (`strategy`: Paddle's
    completion makes it), with `vppctl.paddle.pir_plan` (`pir_plan`: the plan file `vppctl
    convert` writes, and the two lines of Python that make Paddle's completion follow it),
    or not (`cannot`, and why). `text` says it in one line, for a person."""

    how: PirHow
    text: str
    python: tuple[str, ...] = ()  # pir_plan: the training script's two lines
    reason: str | None = None  # cannot: why
    rule: str | None = None  # pir_plan: the rule of Paddle's completion it needs the plan for

    @property
    def runs(self) -> bool:
        return self.how != "cannot"


def pir_split_launch(
    pp: int,
    vpp: int,
    placement: Placement,
    layers_per_segment: Sequence[int],
    pir: PirInput,
    convert: Sequence[str] = (),
) -> PirLaunch:
    """How a split (`layers_per_segment` in virtual-stage order) of the PIR program `pir`
    describes runs on Paddle: Paddle's own refusals of the program first (a stray op, stage
    meshes not rank blocks: `completion_refusal`, kept under `pir_plan`), then the split
    Paddle's completion makes itself, then one `pir_plan` builds (loop placement at
    vpp >= 2, no empty middle virtual stage). `convert`: the `vppctl convert` argv that
    writes its plan file (`-o FILE` last)."""
    refused = completion_refusal(pir, vpp)
    if refused is not None:
        return PirLaunch("cannot", f"cannot: {refused}", reason=refused)
    split = pir_split(pp, vpp, placement, layers_per_segment, pir.stage_layers)
    if split.takes:
        text = f"strategy only: {stage_mesh_text(split.stage_layers)}"
        if vpp > 1:
            dealt = " | ".join("+".join(map(str, chunks)) for chunks in split.chunk_layers)
            text += f"; vpp_degree {vpp} deals them {dealt}"
        if split.moves_layers:
            held = ", ".join(map(str, pir.stage_layers))
            text += f" (the program's stage meshes hold {held}: move layers in the model)"
        return PirLaunch("strategy", text)
    reason = pir_plan_refusal(pp, vpp, placement, layers_per_segment)
    if reason is not None:
        return PirLaunch("cannot", f"cannot: {reason}", reason=reason)
    plan_file = convert[-1] if convert else PLAN_FILE
    python = pir_plan_lines(plan_file)
    rule = pir_split_rule(placement, vpp, split.stage_layers)
    command = f"`{' '.join(convert)}`, then " if convert else ""
    return PirLaunch(
        "pir_plan",
        f"with vppctl.paddle.pir_plan: {command}`{python[0]} {python[1].strip()}` (the model "
        f"as it is; Paddle's completion alone cannot make this split: {rule.id})",
        python=python,
        rule=rule.id,
    )


def pir_plan_refusal(
    pp: int, vpp: int, placement: Placement, layers_per_segment: Sequence[int]
) -> str | None:
    """Why `vppctl.paddle.pir_plan` cannot build a split Paddle's completion does not make
    itself (None when it can): Paddle runs the PIR VPP completion at vpp >= 2 only, its
    VPP pass runs loop placement only, and an empty middle virtual stage degenerates."""
    if vpp < 2:
        return (
            "at vpp_degree 1 Paddle's PIR completion does not run (a plan needs vpp >= 2): "
            "put each stage's layers on its stage mesh"
        )
    if placement != "loop":
        return (
            f"Paddle's PIR VPP pass runs virtual stage k on stage k % pp, chunk k // pp (loop "
            f"placement) and has no V-shaped schedule: it cannot take {placement} placement, "
            "nor can vppctl.paddle.pir_plan; plan with --placement loop"
        )
    n = len(layers_per_segment)
    for k in range(1, n - 1):
        if layers_per_segment[k] == 0:
            return (
                f"virtual stage {k} (stage {k % pp}, chunk {k // pp}) holds no layer: only the "
                "first (embedding only) or the last (head only) may be empty under "
                "vppctl.paddle.pir_plan (Paddle's VPP pass degenerates on an empty middle chunk)"
            )
    return None


def pir_plan_lines(plan_file: str) -> tuple[str, str]:
    """The two lines of a training script that build its train program under the plan."""
    return (f"with vppctl.paddle.pir_plan({json.dumps(plan_file)}):", "    dist_model.train()")


def stage_mesh_text(stage_layers: Sequence[int]) -> str:
    """`layers 0-5 on stage 0's mesh, 6-11 on stage 1's`: the stage mesh the model builds
    each layer on, so that Paddle's completion makes the split."""
    parts, first = [], 0
    for s, n in enumerate(stage_layers):
        layers = "none" if n == 0 else str(first) if n == 1 else f"{first}-{first + n - 1}"
        parts.append(f"{layers} on stage {s}'s mesh" if s == 0 else f"{layers} on stage {s}'s")
        first += n
    return "layers " + ", ".join(parts)


def candidate_launch(c: LaunchCandidate, pir: PirInput, convert: Sequence[str] = ()) -> PirLaunch:
    """`pir_split_launch` of a candidate's split."""
    return pir_split_launch(c.pp, c.vpp, c.placement, c.layers_per_segment, pir, convert)


def pir_paddle_settings(c: LaunchCandidate, pir: PirInput, convert: Sequence[str] = ()) -> Settings:
    """Paddle's launch settings for a candidate of a PIR program: the strategy, with a note
    saying where the model puts its layers (Paddle's completion makes the split) or the plan
    file and the lines of `vppctl.paddle.pir_plan` (it cannot alone); or why Paddle cannot
    run it (the split, or its schedule). `convert` writes the plan file."""
    launch = candidate_launch(c, pir, convert)
    if launch.how == "strategy":
        split = pir_verdict(c.pp, c.vpp, c.placement, c.layers_per_segment, pir)
        got = _strategy(c, pir, split)
        if isinstance(got, PirMismatch):
            return Settings("paddle", False, (), got.reason)
        note = f"a PIR program: {split.placement_text(pir.stage_layers)}"
        mode = got.schedule_mode
    elif launch.how == "pir_plan":
        found = pir_mode(c)
        if isinstance(found, PirMismatch):
            return Settings("paddle", False, (), found.reason)
        note, mode = f"a PIR program: {launch.text}", found
    else:
        return Settings("paddle", False, (), launch.reason or launch.text)
    if c.schedule != "vpp" and mode == "VPP":
        note = "the same order as Megatron's interleaved 1F1B here; " + note
    return Settings("paddle", True, paddle_fields(c, mode, pir.vpp_seg_method), note)


def pir_launch_settings(
    c: LaunchCandidate, pir: PirInput, convert: Sequence[str] = ()
) -> tuple[Settings, Settings, Settings]:
    """Paddle's (for a PIR program), Megatron-Core's and torch's settings for `c`. The
    latter two do not read the program: they run the same split and schedule of the same
    model, whatever IR Paddle traced it into."""
    return pir_paddle_settings(c, pir, convert), megatron_settings(c), torch_settings(c)


def simulated_verdicts(base: Planned, runs: Sequence[SimResult]) -> tuple[str, ...]:
    """`simulate` on a PIR program Paddle has not completed yet: for each schedule
    simulated that Paddle's PIR pipeline cannot run on this plan, why (and the fix), as
    `plan` says it of its candidates. The merged schedules (vpp 1 as simulated) are judged
    as the same model at vpp 1, each stage holding its plan's layers. A split only
    `vppctl.paddle.pir_plan` makes is said so, with its two lines."""
    block = base.index.global_block
    if any(block.ops.chunk[op] > 0 for op in block.forward_ops):
        return ()  # already completed (by Paddle): nothing of Paddle's to say about it
    plan, pir = base.plan, pir_input(base)
    sizes = tuple(len(s.layers) for s in plan.segments)
    totals = [0] * plan.pp
    for segment in plan.segments:
        totals[segment.stage] += len(segment.layers)
    out = []
    for r in runs:
        merged = r.vpp == 1 and plan.vpp > 1
        c = LaunchCandidate(
            schedule=r.schedule,
            pp=plan.pp,
            vpp=1 if merged else plan.vpp,
            placement="loop" if merged else plan.placement,
            micro_batches=r.micro_batches,
            group_size=r.group_size,
            layers_per_segment=tuple(totals) if merged else sizes,
            layer_class=plan.layer_class,
        )
        settings = pir_paddle_settings(c, pir)
        if not settings.runs:
            out.append(f"Paddle (PIR) cannot run {r.title} on this plan: {settings.note}")
            continue
        launch = candidate_launch(c, pir)
        if launch.how == "pir_plan":
            out.append(
                f"Paddle (PIR) runs {r.title} on this plan with vppctl.paddle.pir_plan only "
                f"(its completion alone does not make this split: {launch.rule}): `vppctl "
                f"convert` this program with the same options and -o {PLAN_FILE}, then "
                f"`{launch.python[0]} {launch.python[1].strip()}`"
            )
    return tuple(out)


def held_layers(layer_stages: Sequence[int], pp: int) -> tuple[int, ...]:
    """How many layers each of `pp` stages holds, from each layer's stage."""
    held = [0] * pp
    for s in layer_stages:
        if 0 <= s < pp:
            held[s] += 1
    return tuple(held)


# ---------------------------------------------------------------------------
# What the completion reads from a program


def pir_input(base: Planned) -> PirInput:
    """What Paddle's PIR completion reads from a planned program: its layers per stage
    mesh, the vpp_seg_method that names its layers as vppctl found them, the ops between
    layers in none, and each stage mesh's ranks."""
    index, plan = base.index, base.plan
    block = index.global_block
    structs = {block.ops.struct[op] for op in block.forward_ops}
    seg_method = paddle_seg_method(
        plan.layer_class, plan.seg_method, (s.decode(errors="replace") for s in structs)
    )
    return PirInput(
        stage_layers=held_layers(base.facts.stages, plan.pp),
        vpp_seg_method=seg_method,
        strays=stray_ops(base),
        stage_ranks=tuple(tuple(index.meshes[m].process_ids) for m in base.stages),
    )


def stray_ops(base: Planned) -> tuple[StrayOp, ...]:
    """The forward ops between the first and the last layer that are in no layer and on a
    mesh (the reader reads through reshards: they are no ops here), as Paddle's completion
    sees them."""
    index, layers = base.index, base.layers
    block = index.global_block
    ops = block.ops
    on_mesh = [i for i in layers.strays if block.op_mesh[i] != NO_MESH]
    if not on_mesh:
        return ()
    first = layers.layers[0]
    struct0 = ops.struct[first.last].decode(errors="replace")
    prefix = struct0[: max(struct0.find(first.name), 0)]
    out = []
    for i in on_mesh:
        k = layers.op_layer[i]  # the layer it joined: the next one
        struct = ops.struct[i].decode(errors="replace")
        part = struct[len(prefix) :].split("/")[0] if struct.startswith(prefix) else ""
        out.append(
            StrayOp(
                label=index.op_label(0, i),
                type=ops.type[i].decode(errors="replace"),
                struct=struct,
                after=layers.names[max(k - 1, 0)],
                before=layers.names[k],
                part=part or None,
            )
        )
    return tuple(out)
