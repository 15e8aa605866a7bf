"""PIR strategy: the Paddle 3.x pipeline strategy that runs a vppctl plan, or why none can.

Paddle 3.1+ trains PIR programs, and their VPP is Paddle's own: the engine
(`Engine._parallel_pir`, Paddle 3.3.1) runs `pir_pass.complete_chunk_id` on the
forward program when `strategy.pipeline.schedule_mode` is "VPP", and that pass
decides the split itself, from the program:

- a stage holds the layers the model puts on its mesh (`vpp_seg_method` names them);
  layer i of a stage goes to chunk i % vpp_degree, so a stage's chunks hold its
  layers dealt evenly, earlier chunks taking the extras, and every chunk needs one;
- segment k (chunk k // pp of stage k % pp: loop placement) takes the next layers
  in program order, as many as its chunk holds.

So a plan runs on Paddle's PIR completion when it is loop-placed and each stage's
chunks hold its layers dealt so (vppctl's `keep` split, and `uniform` when the stages
hold equal counts that `vpp` divides). Its per-stage totals are then the layer counts
the model must put on each stage's mesh: the input's, or a move of layers between
stages. Paddle 3.3.1's PIR pipeline passes schedule FThenB, 1F1B and VPP
(interleaved 1F1B, which needs `accumulate_steps >= pp`); Eager1F1B, ZBH1 and ZBVPP
have no PIR implementation there (`_partial_pir_programs`), and `complete_chunk_id`
refuses `vpp_degree > 1` with any mode but VPP.

`pir_strategy` is pure: it takes the plan and the input's layer stages and returns
the strategy (`PirStrategy`) or the reason (`PirMismatch`), printing nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vppctl.choices import Schedule
from vppctl.plan import Plan

# vppctl's schedules -> Paddle 3.3.1's PIR `pipeline.schedule_mode`, where one exists.
PIR_SCHEDULE_MODES: dict[Schedule, str] = {
    "fthenb": "FThenB",
    "1f1b": "1F1B",
    "interleaved": "VPP",
}


@dataclass(frozen=True)
class PirStrategy:
    """`paddle.distributed.Strategy().pipeline` settings (and the model's layer placement)
    that make Paddle's PIR completion and scheduler run the plan."""

    pp_degree: int
    vpp_degree: int
    vpp_seg_method: str  # the layer regex (Paddle's `_extract_seg_method` reads it as vppctl)
    schedule_mode: str
    accumulate_steps: int  # micro-batches per step
    stage_layers: tuple[int, ...]  # layers the model puts on each stage's mesh
    chunk_layers: tuple[int, ...]  # layers per segment, in virtual-stage order (what it gives)
    moves_layers: bool  # stage_layers differ from the program's: re-place layers in the model

    def settings(self) -> dict[str, int | str]:
        """The strategy's fields as `strategy.pipeline.<name> = value` would set them."""
        out: dict[str, int | str] = {
            "pp_degree": self.pp_degree,
            "vpp_degree": self.vpp_degree,
            "schedule_mode": self.schedule_mode,
            "accumulate_steps": self.accumulate_steps,
        }
        if self.vpp_degree > 1:
            out["vpp_seg_method"] = self.vpp_seg_method
        return out


@dataclass(frozen=True)
class PirMismatch:
    """Why Paddle's PIR pipeline cannot run the plan as it is."""

    reason: str


def pir_strategy(
    plan: Plan, layer_stages: Sequence[int], schedule: Schedule, micro_batches: int
) -> PirStrategy | PirMismatch:
    """The PIR strategy for `plan` run with `schedule` over `micro_batches` (see the module
    docstring); `layer_stages` is each layer's stage in the input program."""
    mode = PIR_SCHEDULE_MODES.get(schedule)
    if mode is None:
        known = ", ".join(PIR_SCHEDULE_MODES.values())
        return PirMismatch(
            f"Paddle 3.3.1's PIR pipeline has no {schedule} schedule (it runs {known}: "
            "Eager1F1B, ZBH1 and ZBVPP have no PIR implementation)"
        )
    if (plan.vpp > 1) != (mode == "VPP"):
        return PirMismatch(
            f"Paddle's PIR pipeline runs {mode} with vpp_degree 1 only, and VPP with "
            "vpp_degree > 1 only"
            if mode != "VPP"
            else "Paddle's PIR VPP schedule needs vpp_degree > 1"
        )
    if plan.vpp > 1 and plan.placement != "loop":
        return PirMismatch(
            "Paddle's PIR VPP completion places segment k on stage k % pp (loop placement); "
            f"it cannot take {plan.placement} placement"
        )
    if mode == "VPP" and micro_batches < plan.pp:
        return PirMismatch(
            f"Paddle's PIR VPP schedule needs accumulate_steps >= pp ({micro_batches} < {plan.pp})"
        )
    sizes = [len(s.layers) for s in plan.segments]
    stage_layers = [sum(sizes[s :: plan.pp]) for s in range(plan.pp)]
    for s in range(plan.pp):
        chunks = sizes[s :: plan.pp]
        dealt = dealt_layers(stage_layers[s], plan.vpp)
        if chunks != dealt:
            return PirMismatch(
                f"stage {s} holds {'+'.join(map(str, chunks))} layers in its chunks, and "
                f"Paddle's PIR completion deals a stage's {stage_layers[s]} layers as "
                f"{'+'.join(map(str, dealt))} (earlier chunks take the extras); use "
                "`--split keep`, or a split that deals each stage's layers so"
            )
    held = [0] * plan.pp
    for s in layer_stages:
        if 0 <= s < plan.pp:
            held[s] += 1
    return PirStrategy(
        pp_degree=plan.pp,
        vpp_degree=plan.vpp,
        vpp_seg_method=plan.seg_method,
        schedule_mode=mode,
        accumulate_steps=micro_batches,
        stage_layers=tuple(stage_layers),
        chunk_layers=tuple(sizes),
        moves_layers=held != stage_layers,
    )


def dealt_layers(n: int, vpp: int) -> list[int]:
    """How Paddle's PIR completion deals a stage's `n` layers over its `vpp` chunks (layer i
    to chunk i % vpp): earlier chunks take the extras."""
    return [n // vpp + (1 if j < n % vpp else 0) for j in range(vpp)]
