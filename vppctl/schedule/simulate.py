"""Simulate one training step of a pipeline schedule and measure its bubble and memory.

This module's one job is the arithmetic of pipeline schedules: given the number of
stages (pp), chunks per stage (vpp), micro-batches (m), a schedule name and a cost per
virtual stage, it works out when every forward and backward step runs and reports the
makespan, the idle time (bubble) and the peak number of in-flight activations.

Vocabulary
----------
* A *stage* is one pipeline rank (one device group); there are ``pp`` of them.
* A *chunk* is one of the ``vpp`` slices of the model a stage holds under VPP.
* A *virtual stage* is ``chunk * pp + stage``: Megatron's interleaved placement, where
  stage ``s`` holds virtual stages ``s, s + pp, s + 2 pp, ...``. Cost lists are given in
  virtual-stage order.
* A *step* is one forward (F) or backward (B) pass of one micro-batch through one chunk.

Time is kept in exact integer ticks internally (every cost is turned into a fraction and
all of them are scaled by the least common denominator), so closed-form results such as
the 1F1B bubble ``(p - 1) / (m + p - 1)`` come out exactly; reported times are
``fractions.Fraction``.

The simulation walks each stage's fixed op order and starts an op as soon as the stage is
free and the op's inputs have arrived (the activation from the previous virtual stage for
F, the gradient from the next virtual stage for B). This is a longest-path evaluation of
the schedule's dependency graph; a stage whose next op can never be satisfied is a
deadlock and raises :class:`DeadlockError`.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, get_args

from vppctl.errors import EXIT_CONVERT, ConversionError

Schedule = Literal["fthenb", "1f1b", "interleaved"]
Kind = Literal["F", "B"]

SCHEDULES: tuple[Schedule, ...] = get_args(Schedule)

# Backward passes cost about twice the forward (two matmuls per forward matmul: one for
# the input gradient, one for the weight gradient).
DEFAULT_BACKWARD_RATIO = 2


class SimulationError(ConversionError):
    """The simulation cannot run: bad arguments or a schedule that deadlocks."""

    exit_code = EXIT_CONVERT


class DeadlockError(SimulationError):
    """A stage's next op waits for a step that can never run."""

    def __init__(self, stage: int, op: str, waits_for: str, waits_on_stage: int) -> None:
        self.stage = stage
        self.op = op
        self.waits_for = waits_for
        self.waits_on_stage = waits_on_stage
        super().__init__(
            f"deadlock: stage {stage} cannot run {op}: it waits for {waits_for} on stage "
            f"{waits_on_stage}, which can never run first; reorder the schedule or use a "
            "supported --schedule"
        )


@dataclass(frozen=True)
class Op:
    """One unit of work in a stage's order, before it is placed in time."""

    kind: Kind
    micro_batch: int
    chunk: int

    @property
    def label(self) -> str:
        """Short name, e.g. ``F3.c1`` for the forward of micro-batch 3 through chunk 1."""
        return f"{self.kind}{self.micro_batch}.c{self.chunk}"


@dataclass(frozen=True)
class Step:
    """One forward or backward step placed in time on a stage."""

    stage: int
    chunk: int
    micro_batch: int
    kind: Kind
    start: Fraction
    end: Fraction

    @property
    def label(self) -> str:
        """Short name, e.g. ``B0.c2``."""
        return f"{self.kind}{self.micro_batch}.c{self.chunk}"

    @property
    def duration(self) -> Fraction:
        return self.end - self.start


@dataclass(frozen=True)
class SimResult:
    """What one simulated training step looks like.

    ``vpp`` is the number of chunks per stage *as simulated*: ``fthenb`` and ``1f1b``
    merge each stage's chunks into one, so their results carry ``vpp == 1``.

    * ``makespan``: time from the first step's start to the last step's end.
    * ``ideal``: compute time of the busiest stage, the makespan with no bubble at all.
    * ``bubble``: idle share of the makespan, averaged over stages.
    * ``bubble_vs_ideal``: ``(makespan - ideal) / ideal``, the overhead relative to the
      ideal compute time (the form of Megatron's ``(p - 1) / m`` and ``(p - 1) / (v m)``).
    * ``per_stage_bubble``: each stage's idle share of the makespan.
    * ``peak_in_flight``: per stage, the most (micro-batch, chunk) units whose forward
      has run and whose backward has not yet finished; each such unit holds one chunk's
      activations. See :attr:`peak_in_flight_stage_units` for full-stage units.
    * ``p2p_messages``: point-to-point sends between different stages in the whole
      training step (activations forward plus gradients backward).
    """

    schedule: Schedule
    pp: int
    vpp: int
    micro_batches: int
    makespan: Fraction
    ideal: Fraction
    bubble: Fraction
    bubble_vs_ideal: Fraction
    per_stage_bubble: tuple[Fraction, ...]
    peak_in_flight: tuple[int, ...]
    p2p_messages: int
    steps: tuple[Step, ...]
    warnings: tuple[str, ...]
    p2p_cost: Fraction = Fraction(0)

    @property
    def peak_in_flight_stage_units(self) -> tuple[Fraction, ...]:
        """Peak in-flight activations in units of one full stage's activations.

        A chunk holds ``1 / vpp`` of its stage's layers, so (assuming chunks of equal
        activation size) ``vpp`` in-flight units cost as much memory as one micro-batch
        in flight under plain 1F1B. This is the figure to compare across schedules.
        """
        return tuple(Fraction(peak, self.vpp) for peak in self.peak_in_flight)


# ---------------------------------------------------------------------------
# Argument checking


def _fail(message: str) -> SimulationError:
    return SimulationError(message)


def _check_counts(pp: int, vpp: int, micro_batches: int, schedule: str) -> None:
    for name, value, flag in (
        ("pp", pp, "--pp"),
        ("vpp", vpp, "--vpp"),
        ("micro-batches", micro_batches, "--micro-batches"),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise _fail(f"{name} must be a positive integer (got {value!r}): pass {flag} >= 1")
    if schedule not in SCHEDULES:
        choices = ", ".join(SCHEDULES)
        raise _fail(f"unknown schedule {schedule!r}: choose one of {choices}")


def _exact(value: float | Fraction, what: str) -> Fraction:
    """Turn a cost into an exact fraction; floats go through their shortest decimal form
    so that 0.1 means one tenth rather than the nearest binary double."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction)):
        raise _fail(f"{what} must be a number (got {value!r}): pass numeric costs")
    if isinstance(value, float) and not math.isfinite(value):
        raise _fail(f"{what} must be finite (got {value!r}): pass finite costs")
    exact = Fraction(repr(value)) if isinstance(value, float) else Fraction(value)
    if exact < 0:
        raise _fail(f"{what} must not be negative (got {value!r}): pass costs >= 0")
    return exact


def _costs(
    values: Sequence[float | Fraction] | None, expected: int, what: str
) -> tuple[Fraction, ...] | None:
    if values is None:
        return None
    if len(values) != expected:
        raise _fail(
            f"{what} costs list has {len(values)} entries but pp * vpp = {expected}: "
            f"give one {what} cost per virtual stage"
        )
    return tuple(_exact(v, f"{what} cost of virtual stage {i}") for i, v in enumerate(values))


def _resolve_costs(
    pp: int,
    vpp: int,
    forward: Sequence[float | Fraction] | None,
    backward: Sequence[float | Fraction] | None,
) -> tuple[tuple[Fraction, ...], tuple[Fraction, ...]]:
    """Costs per virtual stage: unit forwards and backward = 2 x forward by default."""
    count = pp * vpp
    fwd = _costs(forward, count, "forward") or tuple(Fraction(1) for _ in range(count))
    bwd = _costs(backward, count, "backward") or tuple(DEFAULT_BACKWARD_RATIO * f for f in fwd)
    if not any(fwd) and not any(bwd):
        raise _fail("all costs are zero: give at least one virtual stage a positive cost")
    return fwd, bwd


def _merge_chunks(costs: Sequence[Fraction], pp: int, vpp: int) -> tuple[Fraction, ...]:
    """Per-stage totals: a stage's chunks run back to back when they are not interleaved."""
    return tuple(sum((costs[c * pp + s] for c in range(vpp)), Fraction(0)) for s in range(pp))


# ---------------------------------------------------------------------------
# Warnings about the micro-batch count


def micro_batch_warnings(pp: int, vpp: int, micro_batches: int, schedule: Schedule) -> list[str]:
    """Rules on the micro-batch count that real frameworks enforce or that waste time."""
    warnings: list[str] = []
    if micro_batches < pp:
        warnings.append(
            f"micro-batches ({micro_batches}) < pp ({pp}): the pipeline never fills and "
            f"some stages idle most of the step; use --micro-batches >= {pp}"
        )
    if schedule == "interleaved" and vpp > 1 and micro_batches % pp != 0:
        warnings.append(
            f"micro-batches ({micro_batches}) is not a multiple of pp ({pp}): Megatron's "
            "original interleaved schedule and Paddle's VPP reject this; use a multiple "
            f"of {pp}"
        )
    return warnings


# ---------------------------------------------------------------------------
# Per-stage op orders of each schedule


def _fthenb_order(micro_batches: int) -> list[Op]:
    """GPipe: every forward, then every backward, micro-batches in order."""
    forwards = [Op("F", i, 0) for i in range(micro_batches)]
    return forwards + [Op("B", i, 0) for i in range(micro_batches)]


def _warmup_then_1f1b(forwards: Sequence[Op], backwards: Sequence[Op], warmup: int) -> list[Op]:
    """``warmup`` forwards, then alternate one forward and one backward, then drain."""
    total = len(forwards)
    order = list(forwards[:warmup])
    for i in range(total - warmup):
        order += [forwards[warmup + i], backwards[i]]
    return order + list(backwards[total - warmup :])


def _1f1b_order(pp: int, stage: int, micro_batches: int) -> list[Op]:
    """1F1B: stage ``s`` keeps ``pp - s - 1`` forwards ahead before alternating."""
    forwards = [Op("F", i, 0) for i in range(micro_batches)]
    backwards = [Op("B", i, 0) for i in range(micro_batches)]
    return _warmup_then_1f1b(forwards, backwards, min(pp - stage - 1, micro_batches))


def _interleaved_table(pp: int, vpp: int, micro_batches: int) -> list[tuple[int, int]]:
    """Order of (micro-batch, chunk) in which every stage runs its forwards.

    Megatron runs micro-batches in groups of ``pp``: the whole group through chunk 0,
    then through chunk 1, and so on. ``micro_batches`` must be a multiple of ``pp``.
    """
    table: list[tuple[int, int]] = []
    for first in range(0, micro_batches, pp):
        group = range(first, first + pp)
        table += [(mb, chunk) for chunk in range(vpp) for mb in group]
    return table


def _interleaved_order(pp: int, vpp: int, stage: int, micro_batches: int) -> list[Op]:
    """Megatron's interleaved 1F1B order for one stage.

    Backwards follow the same table with the chunk order reversed (gradients enter the
    last chunk first). Warmup is ``2 (pp - s - 1) + (vpp - 1) pp`` forwards, capped at
    the total; with exactly ``pp`` micro-batches Megatron runs all forwards first.

    When ``m`` is not a multiple of ``pp`` (Megatron's original and Paddle refuse it) we
    plan for the next multiple and drop the placeholder micro-batches. Simply shortening
    the last group instead can deadlock (e.g. pp=4, vpp=3, m=5); dropping ops from a
    deadlock-free order cannot, because it only removes nodes from an acyclic graph.
    """
    padded = -(-micro_batches // pp) * pp
    table = _interleaved_table(pp, vpp, padded)
    forwards = [Op("F", mb, chunk) for mb, chunk in table]
    backwards = [Op("B", mb, vpp - 1 - chunk) for mb, chunk in table]
    total = len(table)
    # Megatron's special case: with one group it runs every forward before any backward.
    warmup = total if padded == pp else min(2 * (pp - stage - 1) + (vpp - 1) * pp, total)
    order = _warmup_then_1f1b(forwards, backwards, warmup)
    return [op for op in order if op.micro_batch < micro_batches]


def stage_orders(
    schedule: Schedule, pp: int, vpp: int, micro_batches: int
) -> tuple[tuple[Op, ...], ...]:
    """The op order of every stage. ``vpp`` must already be 1 for fthenb and 1f1b."""
    if schedule == "fthenb":
        return tuple(tuple(_fthenb_order(micro_batches)) for _ in range(pp))
    if schedule == "1f1b" or vpp == 1:
        return tuple(tuple(_1f1b_order(pp, s, micro_batches)) for s in range(pp))
    return tuple(tuple(_interleaved_order(pp, vpp, s, micro_batches)) for s in range(pp))


# ---------------------------------------------------------------------------
# Execution: place every op in time


@dataclass(frozen=True)
class _Timed:
    """A step in integer ticks, before conversion to fractions."""

    stage: int
    op: Op
    start: int
    end: int


@dataclass(frozen=True)
class _Plan:
    """Everything the executor needs, with costs already in integer ticks."""

    pp: int
    vpp: int
    orders: tuple[tuple[Op, ...], ...]
    forward: tuple[int, ...]
    backward: tuple[int, ...]
    hop: int


def _inputs(op: Op, stage: int, pp: int, vpp: int) -> list[tuple[str, int, int]]:
    """Steps (kind, micro-batch, virtual stage) whose results ``op`` consumes."""
    virtual = op.chunk * pp + stage
    if op.kind == "F":
        return [("F", op.micro_batch, virtual - 1)] if virtual > 0 else []
    # A backward needs its own forward's activations, and the gradient from downstream.
    needs = [("F", op.micro_batch, virtual)]
    if virtual < pp * vpp - 1:
        needs.append(("B", op.micro_batch, virtual + 1))
    return needs


def _label(key: tuple[str, int, int], pp: int) -> str:
    kind, micro_batch, virtual = key
    return f"{kind}{micro_batch}.c{virtual // pp}"


def _execute(plan: _Plan) -> tuple[list[_Timed], int]:
    """Place each stage's ops in time; return the timed steps and cross-stage sends.

    A stage runs its ops strictly in order. When the next op's input is missing the
    stage parks on that input and is woken when it is produced, so each op is looked at
    a constant number of times: linear in the number of steps.
    """
    pp, vpp = plan.pp, plan.vpp
    done: dict[tuple[str, int, int], int] = {}
    position = [0] * pp
    free_at = [0] * pp
    parked: dict[tuple[str, int, int], list[int]] = {}
    runnable = deque(range(pp))
    timed: list[_Timed] = []
    messages = 0
    while runnable:
        stage = runnable.popleft()
        order = plan.orders[stage]
        while position[stage] < len(order):
            op = order[position[stage]]
            needs = _inputs(op, stage, pp, vpp)
            missing = next((key for key in needs if key not in done), None)
            if missing is not None:
                parked.setdefault(missing, []).append(stage)
                break
            start = free_at[stage]
            for key in needs:
                crosses = key[2] % pp != stage
                messages += crosses
                start = max(start, done[key] + (plan.hop if crosses else 0))
            virtual = op.chunk * pp + stage
            cost = plan.forward[virtual] if op.kind == "F" else plan.backward[virtual]
            key = (op.kind, op.micro_batch, virtual)
            done[key] = free_at[stage] = start + cost
            timed.append(_Timed(stage, op, start, start + cost))
            position[stage] += 1
            runnable.extend(parked.pop(key, []))
    _raise_if_stuck(plan, position, parked)
    return timed, messages


def _raise_if_stuck(
    plan: _Plan, position: list[int], parked: dict[tuple[str, int, int], list[int]]
) -> None:
    """Every unfinished stage is parked on a missing input; name the lowest such stage."""
    if not parked:
        return
    missing, stage = min(((key, min(stages)) for key, stages in parked.items()), key=lambda x: x[1])
    op = plan.orders[stage][position[stage]]
    raise DeadlockError(stage, op.label, _label(missing, plan.pp), missing[2] % plan.pp)


def _ticks(values: Sequence[Fraction], scale: int) -> tuple[int, ...]:
    return tuple(int(v * scale) for v in values)


def _to_steps(timed: Sequence[_Timed], scale: int) -> tuple[Step, ...]:
    """Public steps in time order, ticks turned back into exact fractions."""
    return tuple(
        Step(
            stage=t.stage,
            chunk=t.op.chunk,
            micro_batch=t.op.micro_batch,
            kind=t.op.kind,
            start=Fraction(t.start, scale),
            end=Fraction(t.end, scale),
        )
        for t in sorted(timed, key=lambda t: (t.start, t.stage))
    )


def _peak_in_flight(timed: Sequence[_Timed], pp: int) -> tuple[int, ...]:
    """Most forwards done but backwards not yet done, per stage, in execution order."""
    live = [0] * pp
    peak = [0] * pp
    for step in sorted(timed, key=lambda t: (t.stage, t.start)):
        live[step.stage] += 1 if step.op.kind == "F" else -1
        peak[step.stage] = max(peak[step.stage], live[step.stage])
    return tuple(peak)


def _result(
    schedule: Schedule,
    plan: _Plan,
    micro_batches: int,
    scale: int,
    warnings: list[str],
) -> SimResult:
    timed, messages = _execute(plan)
    busy = [0] * plan.pp
    for step in timed:
        busy[step.stage] += step.end - step.start
    makespan = max(step.end for step in timed)
    ideal = max(busy)
    idle = [makespan - b for b in busy]
    return SimResult(
        schedule=schedule,
        pp=plan.pp,
        vpp=plan.vpp,
        micro_batches=micro_batches,
        makespan=Fraction(makespan, scale),
        ideal=Fraction(ideal, scale),
        bubble=Fraction(sum(idle), plan.pp * makespan),
        bubble_vs_ideal=Fraction(makespan - ideal, ideal),
        per_stage_bubble=tuple(Fraction(i, makespan) for i in idle),
        peak_in_flight=_peak_in_flight(timed, plan.pp),
        p2p_messages=messages,
        steps=_to_steps(timed, scale),
        warnings=tuple(warnings),
        p2p_cost=Fraction(plan.hop, scale),
    )


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
) -> SimResult:
    """Simulate one training step of ``schedule`` and measure it.

    ``forward`` and ``backward`` give one cost per virtual stage (``pp * vpp`` entries,
    virtual stage ``chunk * pp + stage``); by default forwards cost 1 and backwards
    twice their forward. ``p2p_cost`` is added to every send between two different
    stages. ``fthenb`` and ``1f1b`` do not interleave: given ``vpp > 1`` they simulate
    the same model with each stage's chunks merged into one (costs summed), and report
    ``vpp == 1``. ``interleaved`` with ``vpp == 1`` is plain 1F1B.

    Raises :class:`SimulationError` on bad arguments and :class:`DeadlockError` if the
    schedule cannot make progress.
    """
    _check_counts(pp, vpp, micro_batches, schedule)
    fwd, bwd = _resolve_costs(pp, vpp, forward, backward)
    hop = _exact(p2p_cost, "p2p cost")
    warnings = micro_batch_warnings(pp, vpp, micro_batches, schedule)
    if schedule != "interleaved" and vpp > 1:
        fwd, bwd, vpp = _merge_chunks(fwd, pp, vpp), _merge_chunks(bwd, pp, vpp), 1
    scale = math.lcm(*(c.denominator for c in (*fwd, *bwd, hop)))
    plan = _Plan(
        pp=pp,
        vpp=vpp,
        orders=stage_orders(schedule, pp, vpp, micro_batches),
        forward=_ticks(fwd, scale),
        backward=_ticks(bwd, scale),
        hop=int(hop * scale),
    )
    return _result(schedule, plan, micro_batches, scale, warnings)


def simulate_orders(
    orders: Sequence[Sequence[Op]],
    vpp: int,
    forward: Sequence[float | Fraction] | None = None,
    backward: Sequence[float | Fraction] | None = None,
    p2p_cost: float | Fraction = 0,
) -> tuple[Step, ...]:
    """Time a hand-written op order (one sequence per stage); used to test new schedules.

    Each (kind, micro-batch, chunk) should appear once on every stage. Raises
    :class:`DeadlockError` if the orders cannot all run to the end.
    """
    pp = len(orders)
    if pp < 1:
        raise _fail("orders is empty: give one op sequence per stage")
    for stage, order in enumerate(orders):
        for op in order:
            if not 0 <= op.chunk < vpp or op.micro_batch < 0:
                raise _fail(
                    f"stage {stage} lists {op.label}, outside vpp={vpp} chunks: "
                    f"use chunks 0..{vpp - 1} and micro-batches >= 0"
                )
    fwd, bwd = _resolve_costs(pp, vpp, forward, backward)
    hop = _exact(p2p_cost, "p2p cost")
    scale = math.lcm(*(c.denominator for c in (*fwd, *bwd, hop)))
    plan = _Plan(
        pp=pp,
        vpp=vpp,
        orders=tuple(tuple(order) for order in orders),
        forward=_ticks(fwd, scale),
        backward=_ticks(bwd, scale),
        hop=int(hop * scale),
    )
    timed, _ = _execute(plan)
    return _to_steps(timed, scale)


def compare(
    pp: int,
    vpp: int,
    micro_batches: int,
    forward: Sequence[float | Fraction] | None = None,
    backward: Sequence[float | Fraction] | None = None,
    p2p_cost: float | Fraction = 0,
) -> tuple[SimResult, ...]:
    """1F1B over merged chunks, and Megatron's interleaved 1F1B when ``vpp > 1``.

    Both runs see the same total cost per stage, so the difference is the schedule's.
    """
    results = [simulate(pp, vpp, micro_batches, "1f1b", forward, backward, p2p_cost)]
    if vpp > 1:
        results.append(simulate(pp, vpp, micro_batches, "interleaved", forward, backward, p2p_cost))
    return tuple(results)
