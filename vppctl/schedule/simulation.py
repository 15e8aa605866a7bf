"""Simulate one training step of a pipeline schedule and measure its bubble and memory.

This module's one job is the arithmetic of pipeline schedules: given the number of
stages (pp), chunks per stage (vpp), micro-batches (m), a schedule (its per-stage
orders come from :mod:`vppctl.schedule.orders`), a placement and a cost per virtual
stage, it works out when every action runs and reports the makespan, the idle time
(bubble) and the peak number of in-flight activations.

Vocabulary
----------
* A *stage* is one pipeline rank; there are ``pp`` of them.
* A *chunk* is one of the ``vpp`` slices of the model a stage holds.
* A *virtual stage* is the plan's segment index: segment ``k`` sits on
  ``vppctl.plan.place(k, pp, placement)``, loop (stage ``k % pp``, chunk ``k // pp``)
  or V (stage ``s`` holds ``s`` and ``2pp-1-s`` with two chunks). Cost lists are
  given in virtual-stage order; the simulator uses no other mapping.
* An *action* is ``F`` (forward), ``B`` (whole backward), ``I`` (input gradient) or
  ``W`` (weight gradient) of one micro-batch through one chunk.

Costs: per virtual stage a forward ``F``, an input-gradient ``B`` and a weight-gradient
``W``; a schedule without the split runs ``B + W`` as one backward. By default
``F = B = W = 1`` (a whole backward of 2, twice the forward).

Bubble, one convention used everywhere: the *bubble* is the idle time of all stages
over ``pp x makespan``, i.e. the idle share of the step (``per_stage_idle`` gives it
in time units per stage). ``bubble_vs_ideal`` (makespan over the busiest stage's
compute, minus one) is the form of Megatron's ``(p-1)/m``; it is a second figure, not
the bubble.

In flight (the memory model's multiplier): a micro-batch holds a chunk's stashed
activations on a stage from the start of its forward ``F`` until its backward through
that chunk has finished: the end of ``B``, or of ``W`` when the backward is split.
Releasing at ``W`` rather than at ``I`` is deliberate and conservative: the weight
gradient still reads each weight op's input activation and output gradient, so only
part of the stash can go after ``I``; counting until ``W`` is an upper bound. Peaks
depend only on each stage's order (a stage runs one action at a time), not on costs.

Time is kept in exact integer ticks (every cost is a fraction, scaled by the least
common denominator), so closed forms such as the 1F1B bubble ``(p-1)/(m+p-1)`` come
out exactly; reported times are ``fractions.Fraction``. Each stage runs its order
strictly; an action starts when the stage is free and its inputs have arrived. A
stage whose next action can never be satisfied is a deadlock (:class:`DeadlockError`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

from vppctl.plan import Placement
from vppctl.schedule.arguments import (
    check_counts,
    check_placement,
    check_size,
    exact,
    fail,
    micro_batch_warnings,
    parse_unit_costs,
    resolve_costs,
)
from vppctl.schedule.execute import Asked, Pipeline, held_peak, raise_if_stuck, time_stages
from vppctl.schedule.orders import (
    SCHEDULES,
    Kind,
    Op,
    Schedule,
    stage_orders,
)
from vppctl.schedule.results import DeadlockError, SimResult, SimulationError, Step

__all__ = [
    "SCHEDULES",
    "DeadlockError",
    "Kind",
    "Op",
    "Schedule",
    "SimResult",
    "SimulationError",
    "Step",
    "compare",
    "held_peak",
    "interleaving_schedule",
    "micro_batch_warnings",
    "parse_unit_costs",
    "simulate",
    "simulate_orders",
    "stage_orders",
]


# ---------------------------------------------------------------------------
# Public entry points


def simulate(
    pp: int,
    vpp: int,
    micro_batches: int,
    schedule: Schedule,
    forward: Sequence[float | Fraction] | None = None,
    backward: Sequence[float | Fraction] | None = None,
    p2p_cost: float | Fraction = 0,
    *,
    weight: Sequence[float | Fraction] | None = None,
    placement: Placement | None = None,
    group_size: int | None = None,
    full: Sequence[float | Fraction] | None = None,
) -> SimResult:
    """Simulate one training step of ``schedule`` and measure it.

    Costs: one entry per virtual stage (``pp * vpp``, the plan's segment order).
    ``forward`` defaults to 1. Without ``weight``, ``backward`` is the whole backward
    (default twice the forward), split evenly into I and W where a schedule needs the
    split; with ``weight``, ``backward`` is the input-gradient cost (default the
    forward) and ``weight`` the weight-gradient cost; then ``full``, where the whole
    backward was measured apart, is what a whole backward (a B action) costs instead of
    I + W. ``p2p_cost`` is added to every send between two different stages.

    ``placement`` is the plan's (default: loop, or V for ``zbv`` and ``dualpipev``, which
    need ``vpp == 2`` and V placement). ``group_size`` is the micro-batch group size of
    ``interleaved`` (Megatron's, default ``pp``) and ``interleaved-zb`` (torch's
    ``microbatches_per_round``, default torch's own); illegal sizes are refused, listing
    the legal ones. Micro-batch counts a runtime refuses are refused too (``eager1f1b``
    below ``2 pp - 1``, ``vpp`` and ``zbh1`` below ``pp``, ``dualpipev`` below ``2 pp``).
    The merged schedules (``fthenb``, ``1f1b``, ``eager1f1b``, ``zbh1``, ``zb1p``) do not
    interleave: given ``vpp > 1`` they simulate each stage's chunks merged into one
    (costs summed) and report ``vpp == 1``; ``interleaved`` with ``vpp == 1`` is plain
    1F1B. A simulation of more than :data:`MAX_UNITS` units (``pp * vpp * m``) is refused.

    Raises :class:`vppctl.errors.UsageError` for a schedule a runtime would refuse or a
    simulation too large, :class:`SimulationError` on bad arguments,
    :class:`DeadlockError` if the orders cannot make progress.
    """
    check_counts(pp, vpp, micro_batches, schedule)
    check_size(pp, vpp, micro_batches)  # before anything grows with pp * vpp
    check_placement(schedule, vpp, placement)
    costs = resolve_costs(pp * vpp, forward, backward, weight, full)
    hop = exact(p2p_cost, "p2p cost")
    pipe, group = Pipeline.of(
        schedule, pp, vpp, micro_batches, placement=placement, group_size=group_size
    )
    warnings = tuple(micro_batch_warnings(pp, vpp, micro_batches, schedule))
    return pipe.simulate(Asked(schedule, micro_batches, vpp, group, warnings), costs, hop)


def simulate_orders(
    orders: Sequence[Sequence[Op]],
    vpp: int,
    forward: Sequence[float | Fraction] | None = None,
    backward: Sequence[float | Fraction] | None = None,
    p2p_cost: float | Fraction = 0,
    *,
    weight: Sequence[float | Fraction] | None = None,
    placement: Placement = "loop",
) -> tuple[Step, ...]:
    """Time a hand-written action order (one sequence per stage), e.g. a loaded CSV.

    Costs as in :func:`simulate`. Raises :class:`DeadlockError` if the orders cannot
    all run to the end.
    """
    pp = len(orders)
    if pp < 1:
        raise fail("orders is empty: give one op sequence per stage")
    micro_batches = 0
    for stage, order in enumerate(orders):
        for op in order:
            if not 0 <= op.chunk < vpp or op.micro_batch < 0:
                raise fail(
                    f"stage {stage} lists {op.label}, outside vpp={vpp} chunks: "
                    f"use chunks 0..{vpp - 1} and micro-batches >= 0"
                )
            micro_batches = max(micro_batches, op.micro_batch + 1)
    check_size(pp, vpp, micro_batches)
    costs = resolve_costs(pp * vpp, forward, backward, weight)
    hop = exact(p2p_cost, "p2p cost")
    scale = math.lcm(*(c.denominator for c in (*costs.all, hop)))
    pipe = Pipeline(orders, vpp, placement)
    run = time_stages(
        pipe.stages, pipe.durations(*costs.ticks(scale)), int(hop * scale), record=True
    )
    raise_if_stuck(pipe, run)
    return pipe.steps(run, scale)


def interleaving_schedule(vpp: int, placement: Placement) -> Schedule | None:
    """The interleaving schedule a plan runs beside 1F1B: Megatron's interleaved 1F1B for
    a loop-placed plan with ``vpp > 1``, ZB-V for a V-placed plan with ``vpp == 2``, none
    otherwise."""
    if placement == "loop" and vpp > 1:
        return "interleaved"
    if placement == "v" and vpp == 2:
        return "zbv"
    return None


def compare(
    pp: int,
    vpp: int,
    micro_batches: int,
    forward: Sequence[float | Fraction] | None = None,
    backward: Sequence[float | Fraction] | None = None,
    p2p_cost: float | Fraction = 0,
    *,
    weight: Sequence[float | Fraction] | None = None,
    group_size: int | None = None,
    placement: Placement = "loop",
) -> tuple[SimResult, ...]:
    """1F1B over merged chunks, then the interleaving schedule the plan runs
    (:func:`interleaving_schedule`; a V plan with ``vpp`` other than 2 has none).

    Both runs see the same total cost per stage, so the difference is the schedule's.
    """
    results = [
        simulate(
            pp,
            vpp,
            micro_batches,
            "1f1b",
            forward,
            backward,
            p2p_cost,
            weight=weight,
            placement=placement,
        )
    ]
    second = interleaving_schedule(vpp, placement)
    if second is not None:
        results.append(
            simulate(
                pp,
                vpp,
                micro_batches,
                second,
                forward,
                backward,
                p2p_cost,
                weight=weight,
                placement=placement,
                group_size=group_size if second == "interleaved" else None,
            )
        )
    return tuple(results)
