"""PIR strategy: the Paddle 3.x pipeline strategy that runs a planned candidate, or why none can.

vppctl converts no PIR program (Paddle cannot load one back); Paddle converts it itself.
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

Everything here is pure: plain values in, the strategy (`PirStrategy`) or the reason
(`PirMismatch`) out, and the Paddle part of a candidate's launch settings from them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from vppctl.choices import Placement, Schedule
from vppctl.plan import place
from vppctl.planner.launch import (
    LaunchCandidate,
    Settings,
    megatron_settings,
    paddle_fields,
    paddle_mode,
    torch_settings,
)
from vppctl.schedule import PADDLE_MODES

# The schedule_modes Paddle 3.3.1 runs on a PIR program (the module docstring).
PIR_MODES: tuple[str, ...] = ("FThenB", "1F1B", "VPP")
# vppctl's schedules that are those orders under Paddle's own names.
PIR_SCHEDULE_MODES: dict[Schedule, str] = {
    s: mode for s, mode in PADDLE_MODES.items() if mode in PIR_MODES
}
PIR_VERSION = "3.3.1"  # the Paddle whose PIR passes these facts were read from


@dataclass(frozen=True)
class PirInput:
    """What Paddle's PIR completion reads from the program being planned."""

    stage_layers: tuple[int, ...]  # layers the program puts on each stage's mesh
    vpp_seg_method: str  # what to set as strategy.pipeline.vpp_seg_method (`seg_method_for`)


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
    return replace(split, reason=_split_refusal(split, vpp, placement))


def _split_refusal(split: PirSplit, vpp: int, placement: Placement) -> str | None:
    if vpp > 1 and placement != "loop":
        return (
            "Paddle's PIR completion places segment k on stage k % pp (loop placement); "
            f"it cannot take {placement} placement"
        )
    for s, chunks in enumerate(split.chunk_layers):
        dealt = dealt_layers(split.stage_layers[s], vpp)
        if list(chunks) != dealt:
            return (
                f"stage {s} holds {'+'.join(map(str, chunks))} layers in its chunks, and "
                f"Paddle's PIR completion deals a stage's {split.stage_layers[s]} layers as "
                f"{'+'.join(map(str, dealt))} (earlier chunks take the extras); use "
                "`--split keep`, or a split that deals each stage's layers so"
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
    if mode == "VPP" and c.micro_batches < c.pp:
        return PirMismatch(
            f"Paddle's PIR VPP schedule needs accumulate_steps >= pp ({c.micro_batches} < {c.pp})"
        )
    return mode


# ---------------------------------------------------------------------------
# The strategy, and the launch settings of a candidate


def candidate_strategy(c: LaunchCandidate, pir: PirInput) -> PirStrategy | PirMismatch:
    """The PIR strategy that runs candidate `c` of a PIR program, or why none does: the
    split first (it does not depend on the schedule), then the schedule."""
    split = pir_split(c.pp, c.vpp, c.placement, c.layers_per_segment, pir.stage_layers)
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


def pir_paddle_settings(c: LaunchCandidate, pir: PirInput) -> Settings:
    """Paddle's launch settings for a candidate of a PIR program: the strategy, with a note
    saying where the model puts its layers; or why Paddle cannot run it."""
    split = pir_split(c.pp, c.vpp, c.placement, c.layers_per_segment, pir.stage_layers)
    got = _strategy(c, pir, split)
    if isinstance(got, PirMismatch):
        return Settings("paddle", False, (), got.reason)
    note = f"a PIR program: {split.placement_text(pir.stage_layers)}"
    if c.schedule != "vpp" and got.schedule_mode == "VPP":
        note = "the same order as Megatron's interleaved 1F1B here; " + note
    settings = paddle_fields(c, got.schedule_mode, got.vpp_seg_method)
    return Settings("paddle", True, settings, note)


def pir_launch_settings(c: LaunchCandidate, pir: PirInput) -> tuple[Settings, Settings, Settings]:
    """Paddle's (for a PIR program), Megatron-Core's and torch's settings for `c`. The
    latter two do not read the program: they run the same split and schedule of the same
    model, whatever IR Paddle traced it into."""
    return pir_paddle_settings(c, pir), megatron_settings(c), torch_settings(c)


def held_layers(layer_stages: Sequence[int], pp: int) -> tuple[int, ...]:
    """How many layers each of `pp` stages holds, from each layer's stage."""
    held = [0] * pp
    for s in layer_stages:
        if 0 <= s < pp:
            held[s] += 1
    return tuple(held)


# ---------------------------------------------------------------------------
# vpp_seg_method


def seg_method_for(layer_class: str, seg_method: str, structs: Iterable[str]) -> str:
    """The `vpp_seg_method` to give Paddle: the layer class (as a user writes it) when
    Paddle reads it as it reads vppctl's layer regex on every forward op's struct name,
    else that regex, which Paddle's reading also takes."""
    if not layer_class.isidentifier():  # Paddle would read it as a regex: give the regex
        return seg_method
    by_class = re.compile(layer_class, re.IGNORECASE)
    by_regex = re.compile(seg_method, re.IGNORECASE)
    for struct in set(structs):
        if paddle_layer(by_class, struct) != paddle_layer(by_regex, struct):
            return seg_method
    return layer_class


def paddle_layer(seg_method: re.Pattern[str], struct: str) -> str | None:
    """The layer Paddle's PIR completion (`_extract_seg_method`) reads from a struct name:
    from the first match of `vpp_seg_method` (case-insensitive) to the next `/`."""
    m = seg_method.search(struct)
    return None if m is None else struct[m.start() :].split("/")[0]
