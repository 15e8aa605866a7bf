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
from dataclasses import dataclass
from fractions import Fraction

from vppctl.errors import EXIT_CONVERT, ConversionError, UsageError
from vppctl.plan import Placement, place, virtual_stages
from vppctl.schedule.orders import (
    MERGED,
    SCHEDULES,
    Kind,
    Op,
    Schedule,
    check_group_size,
    natural_placement,
    order_names,
    stage_orders,
)

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
    "micro_batch_warnings",
    "parse_unit_costs",
    "simulate",
    "simulate_orders",
    "stage_orders",
]

# A whole backward costs about twice the forward: one matmul for the input gradient
# (B) and one for the weight gradient (W) per forward matmul.
DEFAULT_BACKWARD_RATIO = 2


class SimulationError(ConversionError):
    """The simulation cannot run: bad arguments or a schedule that deadlocks."""

    exit_code = EXIT_CONVERT


class DeadlockError(SimulationError):
    """A stage's next action waits for a step that can never run."""

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
class Step:
    """One action placed in time on a stage."""

    stage: int
    chunk: int
    micro_batch: int
    kind: Kind
    start: Fraction
    end: Fraction
    virtual_stage: int

    @property
    def label(self) -> str:
        """Short name, e.g. ``B0.c2``."""
        return f"{self.kind}{self.micro_batch}.c{self.chunk}"

    @property
    def action(self) -> str:
        """torch.distributed.pipelining notation, e.g. ``3I1``."""
        return f"{self.virtual_stage}{self.kind}{self.micro_batch}"

    @property
    def duration(self) -> Fraction:
        return self.end - self.start


@dataclass(frozen=True)
class SimResult:
    """What one simulated training step looks like.

    ``vpp`` is the number of chunks per stage *as simulated*: the merged schedules
    (``fthenb``, ``1f1b``, ``eager1f1b``, ``zbh1``) run each stage's chunks as one and carry
    ``vpp == 1``; ``plan_vpp`` is the chunk count the costs were given for.

    * ``makespan``: time from the first action's start to the last one's end.
    * ``ideal``: compute time of the busiest stage (the makespan with no bubble).
    * ``bubble``: idle time of all stages over ``pp x makespan`` (the convention).
    * ``bubble_vs_ideal``: ``(makespan - ideal) / ideal``, Megatron's form.
    * ``per_stage_bubble``: each stage's idle share of the makespan.
    * ``per_stage_idle``: each stage's idle time, in cost units.
    * ``peak_in_flight``: per stage, the most (micro-batch, chunk) units in flight at
      once (module docstring); ``peak_in_flight_per_chunk[stage][chunk]`` the most of
      one chunk's micro-batches in flight on that stage.
    * ``p2p_messages``: sends between different stages in the whole step.
    * ``ops``: every stage's action order; ``orders`` the same in torch notation.
    * ``work``: actions the executor examined (at most twice the steps: linear).
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
    placement: Placement = "loop"
    plan_vpp: int = 1
    group_size: int | None = None
    per_stage_idle: tuple[Fraction, ...] = ()
    peak_in_flight_per_chunk: tuple[tuple[int, ...], ...] = ()
    ops: tuple[tuple[Op, ...], ...] = ()
    work: int = 0

    @property
    def orders(self) -> tuple[tuple[str, ...], ...]:
        """Every stage's order as torch action strings (``2F0``, ``1B3``, ``3I1``)."""
        return order_names(self.ops, self.vpp, self.placement)

    @property
    def stage_imbalance(self) -> Fraction:
        """The busiest stage's compute over the mean stage's (1 = even). The other stages
        idle for the difference whatever the schedule: the part of the bubble that only a
        better split removes."""
        busy = [self.makespan - idle for idle in self.per_stage_idle]
        mean = Fraction(sum(busy), len(busy)) if busy else Fraction(0)
        return self.ideal / mean if mean else Fraction(1)

    @property
    def peak_in_flight_stage_units(self) -> tuple[Fraction, ...]:
        """Peak in-flight activations in units of one full stage's activations.

        A chunk holds ``1 / vpp`` of its stage's layers, so (with chunks of equal
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


def _check_placement(schedule: Schedule, vpp: int, placement: Placement | None) -> Placement:
    """The placement to simulate; ZB-V runs only two chunks in V placement."""
    if placement not in (None, "loop", "v"):
        raise UsageError(f"unknown placement {placement!r}: choose loop or v")
    chosen = natural_placement(schedule) if placement is None else placement
    if schedule == "zbv":
        if vpp != 2:
            raise UsageError(
                f"zbv runs exactly 2 chunks per stage (V placement), got vpp {vpp}: "
                "pass --vpp 2 or choose another --schedule"
            )
        if chosen != "v":
            raise UsageError(
                "zbv runs the V placement (stage s holds virtual stages s and 2pp-1-s), "
                "but the plan is loop-placed: convert with --placement v or choose another "
                "--schedule"
            )
    if schedule == "interleaved" and chosen == "v" and vpp > 1:
        raise UsageError(
            "interleaved 1F1B is Megatron's loop-placed schedule; a V-placed plan runs "
            "--schedule zbv (vpp 2), or a merged one (1f1b, zbh1, fthenb)"
        )
    return chosen


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


@dataclass(frozen=True)
class _Costs:
    """Per virtual stage: forward, input-gradient and weight-gradient costs."""

    forward: tuple[Fraction, ...]
    input_grad: tuple[Fraction, ...]
    weight_grad: tuple[Fraction, ...]


def _resolve_costs(
    count: int,
    forward: Sequence[float | Fraction] | None,
    backward: Sequence[float | Fraction] | None,
    weight: Sequence[float | Fraction] | None,
) -> _Costs:
    """Unit forwards by default; without ``weight`` the backward is whole and split
    evenly into B and W; with ``weight`` the backward is the input gradient only."""
    fwd = _costs(forward, count, "forward") or tuple(Fraction(1) for _ in range(count))
    bwd = _costs(backward, count, "backward")
    wgt = _costs(weight, count, "weight")
    if wgt is None:
        whole = bwd or tuple(DEFAULT_BACKWARD_RATIO * f for f in fwd)
        bwd, wgt = tuple(c / 2 for c in whole), tuple(c / 2 for c in whole)
    elif bwd is None:
        bwd = fwd
    if not any(fwd) and not any(bwd) and not any(wgt):
        raise _fail("all costs are zero: give at least one virtual stage a positive cost")
    return _Costs(fwd, bwd, wgt)


def parse_unit_costs(text: str) -> tuple[Fraction, Fraction, Fraction]:
    """``--costs F,B,W``: forward, input-gradient and weight-gradient cost of a chunk."""
    parts = text.split(",")
    try:
        values = tuple(Fraction(p.strip()) for p in parts)
    except (ValueError, ZeroDivisionError):
        values = ()
    if len(values) != 3 or any(v < 0 for v in values) or not any(values):
        raise UsageError(
            f"--costs takes three non-negative numbers F,B,W (forward, input gradient, "
            f"weight gradient), not all zero, e.g. 1,1,1; got {text!r}"
        )
    return values[0], values[1], values[2]


def _merge_chunks(
    costs: Sequence[Fraction], pp: int, vpp: int, placement: Placement
) -> tuple[Fraction, ...]:
    """Per-stage totals: a stage's chunks run back to back when they are not interleaved."""
    totals = [Fraction(0)] * pp
    for k, cost in enumerate(costs[: pp * vpp]):
        totals[place(k, pp, placement)[0]] += cost
    return tuple(totals)


# ---------------------------------------------------------------------------
# Warnings about the micro-batch count


def micro_batch_warnings(pp: int, vpp: int, micro_batches: int, schedule: Schedule) -> list[str]:
    """Micro-batch counts that a schedule runs, but badly."""
    warnings: list[str] = []
    if micro_batches < pp:
        warnings.append(
            f"micro-batches ({micro_batches}) < pp ({pp}): the pipeline never fills and "
            f"some stages idle most of the step; use --micro-batches >= {pp}"
        )
    return warnings


# ---------------------------------------------------------------------------
# Size: every simulation is bounded

# The most (micro-batch, chunk) units one simulation runs, pp * vpp * m. Each unit is
# two or three actions, and each timed action keeps a Step (about 0.5 KB), so the
# limit holds a simulation near a few seconds and a few hundred MB. Real jobs stay
# far below it (pp 32 x vpp 4 x m 512 is 65,536).
MAX_UNITS = 1 << 17


def check_size(pp: int, vpp: int, micro_batches: int) -> None:
    """Refuse (exit 2) a simulation larger than :data:`MAX_UNITS` units."""
    units = pp * vpp * micro_batches
    if units > MAX_UNITS:
        raise UsageError(
            f"pp {pp} x vpp {vpp} x {micro_batches} micro-batches = {units:,} units to "
            f"simulate, more than the simulator's limit of {MAX_UNITS:,} (pp*vpp*m); "
            "lower --micro-batches (the bubble depends on m relative to pp, so a smaller m "
            "with the same ratio shows the same shape) or --pp/--vpp"
        )


# ---------------------------------------------------------------------------
# Execution: place every action in time
#
# Orders are encoded once into integer columns per stage; timing them with a set of
# costs is then one pass over those columns. Results travel through "slots": slot
# 2*(mb*V + v) is the end of micro-batch mb's forward through virtual stage v, and
# slot 2*(mb*V + v) + 1 the end of the input gradient a B or I sends upstream.

_KIND_CODE: dict[str, int] = {"F": 0, "B": 1, "I": 2, "W": 3}
_NONE = -1


@dataclass(frozen=True)
class _Stage:
    """One stage's order as columns: per position the kind code, virtual stage and
    chunk, the (up to two) slots the action waits for with a 0/1 flag for a wait that
    crosses stages, and the slot it fills (-1: none)."""

    kinds: list[int]
    virtual: list[int]
    chunks: list[int]
    wait_a: list[int]
    cross_a: list[int]
    wait_b: list[int]
    cross_b: list[int]
    fills: list[int]


def _encode(stage: int, order: Sequence[Op], vmap: Sequence[int], owner: Sequence[int]) -> _Stage:
    """The columns of one stage's order (the dependency rules of every schedule);
    `vmap[chunk]` is the chunk's virtual stage on this stage."""
    n_virtual = len(owner)
    last = n_virtual - 1
    code = _KIND_CODE
    kinds = [code[op.kind] for op in order]
    chunks = [op.chunk for op in order]
    virtual = [vmap[c] for c in chunks]
    here = [2 * (op.micro_batch * n_virtual + v) for op, v in zip(order, virtual)]
    # F waits for the forward of the virtual stage before; W for its own input
    # gradient; B and I for their forward, and the gradient from downstream.
    wait_a = [
        (h - 2 if v > 0 else _NONE) if k == 0 else h + 1 if k == 3 else h
        for k, v, h in zip(kinds, virtual, here)
    ]
    wait_b = [h + 3 if k in (1, 2) and v < last else _NONE for k, v, h in zip(kinds, virtual, here)]
    fills = [h if k == 0 else _NONE if k == 3 else h + 1 for k, h in zip(kinds, here)]
    cross_a = [int(a >= 0 and owner[(a >> 1) % n_virtual] != stage) for a in wait_a]
    cross_b = [int(b >= 0 and owner[(b >> 1) % n_virtual] != stage) for b in wait_b]
    return _Stage(kinds, virtual, chunks, wait_a, cross_a, wait_b, cross_b, fills)


@dataclass
class _Run:
    """What one timing pass found: the makespan, each stage's start and end times per
    position (when recorded), the work done, and the stages left waiting."""

    makespan: int
    starts: list[list[int]]
    ends: list[list[int]]
    work: int
    position: list[int]
    parked: dict[int, list[int]]


def _time(
    stages: Sequence[_Stage], durations: Sequence[Sequence[int]], hop: int, record: bool
) -> _Run:
    """Place each stage's actions in time with the given durations (ticks).

    A stage runs its actions strictly in order. When the next one's input is missing
    the stage parks on that slot and is woken when the slot is filled, so each action
    is examined at most twice: linear in the number of actions. Times are the longest
    path through the dependencies, so they do not depend on which stage runs first.
    """
    pp = len(stages)
    size = 2 + max((max(s.wait_a + s.wait_b + s.fills, default=0) for s in stages), default=0)
    done = [_NONE] * size
    position = [0] * pp
    free_at = [0] * pp
    starts: list[list[int]] = [[] for _ in range(pp)]
    ends: list[list[int]] = [[] for _ in range(pp)]
    parked: dict[int, list[int]] = {}
    runnable = list(range(pp - 1, -1, -1))
    work = 0
    while runnable:
        stage = runnable.pop()
        cols, dur = stages[stage], durations[stage]
        wait_a, cross_a, wait_b, cross_b, fills = (
            cols.wait_a,
            cols.cross_a,
            cols.wait_b,
            cols.cross_b,
            cols.fills,
        )
        p, free, n = position[stage], free_at[stage], len(dur)
        begin_s, end_s = starts[stage], ends[stage]
        while p < n:
            work += 1
            start = free
            slot = wait_a[p]
            if slot >= 0:
                t = done[slot]
                if t < 0:
                    parked.setdefault(slot, []).append(stage)
                    break
                t += hop * cross_a[p]
                if t > start:
                    start = t
            slot = wait_b[p]
            if slot >= 0:
                t = done[slot]
                if t < 0:
                    parked.setdefault(slot, []).append(stage)
                    break
                t += hop * cross_b[p]
                if t > start:
                    start = t
            free = start + dur[p]
            if record:
                begin_s.append(start)
                end_s.append(free)
            slot = fills[p]
            if slot >= 0:
                done[slot] = free
                woken = parked.pop(slot, None)
                if woken:
                    runnable += woken
            p += 1
        position[stage], free_at[stage] = p, free
    return _Run(max(free_at, default=0), starts, ends, work, position, parked)


def _makespan(stages: Sequence[_Stage], durations: Sequence[Sequence[int]]) -> _Run:
    """`_time` without hops and without recording times: the planner's inner loop."""
    pp = len(stages)
    size = 2 + max((max(s.wait_a + s.wait_b + s.fills, default=0) for s in stages), default=0)
    done = [_NONE] * size
    position = [0] * pp
    free_at = [0] * pp
    parked: dict[int, list[int]] = {}
    runnable = list(range(pp - 1, -1, -1))
    work = 0
    while runnable:
        stage = runnable.pop()
        cols, dur = stages[stage], durations[stage]
        wait_a, wait_b, fills = cols.wait_a, cols.wait_b, cols.fills
        p, free, n = position[stage], free_at[stage], len(dur)
        begin = p
        while p < n:
            slot = wait_a[p]
            start = free
            if slot >= 0:
                t = done[slot]
                if t < 0:
                    parked.setdefault(slot, []).append(stage)
                    break
                if t > start:
                    start = t
            slot = wait_b[p]
            if slot >= 0:
                t = done[slot]
                if t < 0:
                    parked.setdefault(slot, []).append(stage)
                    break
                if t > start:
                    start = t
            free = start + dur[p]
            slot = fills[p]
            if slot >= 0:
                done[slot] = free
                woken = parked.pop(slot, None)
                if woken:
                    runnable += woken
            p += 1
        work += p - begin + (p < n)
        position[stage], free_at[stage] = p, free
    return _Run(max(free_at, default=0), [], [], work, position, parked)


def _raise_if_stuck(pipe: Pipeline, run: _Run) -> None:
    """Every unfinished stage is parked on a missing slot; name the lowest such stage."""
    if not run.parked:
        return
    slot, stage = min(
        ((slot, min(stages)) for slot, stages in run.parked.items()), key=lambda x: x[1]
    )
    op = pipe.orders[stage][run.position[stage]]
    n_virtual = pipe.pp * pipe.vpp
    micro_batch, virtual = divmod(slot >> 1, n_virtual)
    producer = pipe.owner[virtual]
    chunk = place(virtual, pipe.pp, pipe.placement)[1]
    kinds = "BI" if slot & 1 else "F"
    kind = next(
        (o.kind for o in pipe.orders[producer] if o.kind in kinds and o.chunk == chunk), kinds[0]
    )
    raise DeadlockError(stage, op.label, f"{kind}{micro_batch}.c{chunk}", producer)


def _in_flight_peaks(
    stages: Sequence[_Stage], vpp: int, weights: Sequence[Sequence[int]] | None = None
) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
    """Per stage: the peak of in-flight units (weighted by chunk if ``weights``), and
    each chunk's own peak count. F adds a unit; B removes it, or W when the stage's
    backward is split (a W still reads the stash)."""
    totals: list[int] = []
    per_chunk: list[tuple[int, ...]] = []
    for stage, cols in enumerate(stages):
        release = 3 if 3 in cols.kinds else 1
        w = weights[stage] if weights is not None else [1] * vpp
        live, peak = [0] * vpp, [0] * vpp
        load = top = 0
        for k, c in zip(cols.kinds, cols.chunks):
            if k == 0:
                live[c] += 1
                if live[c] > peak[c]:
                    peak[c] = live[c]
                load += w[c]
                if load > top:
                    top = load
            elif k == release:
                live[c] -= 1
                load -= w[c]
        totals.append(top)
        per_chunk.append(tuple(peak))
    return tuple(totals), tuple(per_chunk)


def _chunk_weights(
    pp: int, vpp: int, plan_vpp: int, placement: Placement, per_virtual_stage: Sequence[int]
) -> list[list[int]]:
    """Sizes per (stage, simulated chunk); a merged chunk holds its stage's segments."""
    if len(per_virtual_stage) != pp * plan_vpp:
        raise _fail(
            f"{len(per_virtual_stage)} sizes given, but the plan has pp * vpp = "
            f"{pp * plan_vpp} virtual stages: give one size per virtual stage"
        )
    weights = [[0] * vpp for _ in range(pp)]
    for k, size in enumerate(per_virtual_stage):
        stage, chunk = place(k, pp, placement)
        weights[stage][chunk if vpp == plan_vpp else 0] += size
    return weights


def held_peak(result: SimResult, per_virtual_stage: Sequence[int]) -> tuple[int, ...]:
    """Per stage, the peak of in-flight activations weighted by each chunk's size.

    ``per_virtual_stage`` gives one size (e.g. bytes of one micro-batch's stashed
    activations) per virtual stage of the plan (``pp * plan_vpp`` entries); a merged
    schedule's one chunk holds the sum of its stage's segments. Exact: the maximum over
    each stage's order of the sum held, not a sum of per-chunk peaks.
    """
    weights = _chunk_weights(
        result.pp, result.vpp, result.plan_vpp, result.placement, per_virtual_stage
    )
    pipe = Pipeline(result.ops, result.vpp, result.placement, plan_vpp=result.plan_vpp)
    return _in_flight_peaks(pipe.stages, result.vpp, weights)[0]


def _fractions(ticks: Sequence[int], scale: int, memo: dict[int, Fraction]) -> list[Fraction]:
    out = []
    for t in ticks:
        f = memo.get(t)
        if f is None:
            f = memo[t] = Fraction(t, scale)
        out.append(f)
    return out


@dataclass(frozen=True)
class _Asked:
    """What the caller asked for, carried into the result."""

    schedule: Schedule
    micro_batches: int
    plan_vpp: int
    group_size: int | None
    warnings: tuple[str, ...]


class Pipeline:
    """A schedule's per-stage orders with their dependencies resolved, ready to be timed
    with any costs: encoding is paid once, each timing is one linear pass. The planner
    times one pipeline with many splits' costs; :func:`simulate` builds one and times it
    once.

    ``vpp`` is the chunk count the orders use (1 for the merged schedules); ``plan_vpp``
    the plan's, whose ``pp * plan_vpp`` virtual stages the costs are given for.
    Messages between stages and in-flight peaks depend only on the orders.
    """

    def __init__(
        self,
        orders: Sequence[Sequence[Op]],
        vpp: int,
        placement: Placement,
        *,
        plan_vpp: int | None = None,
    ) -> None:
        self.orders = tuple(tuple(order) for order in orders)
        self.pp, self.vpp, self.placement = len(self.orders), vpp, placement
        self.plan_vpp = vpp if plan_vpp is None else plan_vpp
        vs = virtual_stages(self.pp, vpp, placement)
        self.owner = [0] * (self.pp * vpp)
        vmaps = [[0] * vpp for _ in range(self.pp)]
        for (stage, chunk), k in vs.items():
            self.owner[k] = stage
            vmaps[stage][chunk] = k
        self.stages = tuple(
            _encode(s, order, vmaps[s], self.owner) for s, order in enumerate(self.orders)
        )
        self.messages = sum(sum(c.cross_a) + sum(c.cross_b) for c in self.stages)
        self.peaks, self.peaks_per_chunk = _in_flight_peaks(self.stages, vpp)

    @classmethod
    def of(
        cls,
        schedule: Schedule,
        pp: int,
        vpp: int,
        micro_batches: int,
        *,
        placement: Placement | None = None,
        group_size: int | None = None,
    ) -> tuple[Pipeline, int | None]:
        """The pipeline of ``schedule`` for a plan of ``pp x vpp`` (see :func:`simulate`
        for what is refused), and the group size used (interleaved only)."""
        _check_counts(pp, vpp, micro_batches, schedule)
        check_size(pp, vpp, micro_batches)
        chosen = _check_placement(schedule, vpp, placement)
        run_vpp = 1 if schedule in MERGED else vpp
        group = None
        if schedule == "interleaved" and vpp > 1:
            group = check_group_size(pp, micro_batches, group_size)
        orders = stage_orders(schedule, pp, run_vpp, micro_batches, group)
        return cls(orders, run_vpp, chosen, plan_vpp=vpp), group

    def merged(self, costs: Sequence[int]) -> tuple[int, ...]:
        """Costs per plan virtual stage -> per simulated virtual stage (merged chunks sum)."""
        if self.vpp == self.plan_vpp:
            return tuple(costs)
        totals = [0] * self.pp
        for k, cost in enumerate(costs):
            totals[place(k, self.pp, self.placement)[0]] += cost
        return tuple(totals)

    def durations(
        self, forward: Sequence[int], input_grad: Sequence[int], weight_grad: Sequence[int]
    ) -> list[list[int]]:
        """Per stage and position, the action's duration in ticks (per simulated virtual
        stage costs); a whole backward B runs I + W."""
        whole = [i + w for i, w in zip(input_grad, weight_grad)]
        table = (forward, whole, input_grad, weight_grad)
        return [[table[k][v] for k, v in zip(cols.kinds, cols.virtual)] for cols in self.stages]

    def makespan(
        self,
        forward: Sequence[int],
        input_grad: Sequence[int],
        weight_grad: Sequence[int],
        hop: int = 0,
    ) -> tuple[int, list[int]]:
        """The makespan and each stage's busy time, in the integer units of the costs
        (one cost per plan virtual stage)."""
        durations = self.durations(
            self.merged(forward), self.merged(input_grad), self.merged(weight_grad)
        )
        if hop:
            run = _time(self.stages, durations, hop, record=False)
        else:
            run = _makespan(self.stages, durations)
        _raise_if_stuck(self, run)
        return run.makespan, [sum(d) for d in durations]

    def held_peak(self, per_virtual_stage: Sequence[int]) -> tuple[int, ...]:
        """As :func:`held_peak`, for this pipeline's orders."""
        weights = _chunk_weights(
            self.pp, self.vpp, self.plan_vpp, self.placement, per_virtual_stage
        )
        return _in_flight_peaks(self.stages, self.vpp, weights)[0]

    def steps(self, run: _Run, scale: int) -> tuple[Step, ...]:
        """Public steps in time order, ticks turned back into exact fractions."""
        memo: dict[int, Fraction] = {}
        keyed = []
        for stage, (order, cols) in enumerate(zip(self.orders, self.stages)):
            begins = _fractions(run.starts[stage], scale, memo)
            ends = _fractions(run.ends[stage], scale, memo)
            for p, op in enumerate(order):
                keyed.append(
                    (
                        run.starts[stage][p],
                        stage,
                        p,
                        Step(
                            stage,
                            op.chunk,
                            op.micro_batch,
                            op.kind,
                            begins[p],
                            ends[p],
                            cols.virtual[p],
                        ),
                    )
                )
        keyed.sort(key=lambda item: item[:3])
        return tuple(item[3] for item in keyed)

    def simulate(self, asked: _Asked, costs: _Costs, hop: Fraction) -> SimResult:
        """Time the pipeline with exact costs (per plan virtual stage) and measure it."""
        scale = math.lcm(
            *(c.denominator for c in (*costs.forward, *costs.input_grad, *costs.weight_grad, hop))
        )
        ticks = [
            self.merged([int(c * scale) for c in values])
            for values in (costs.forward, costs.input_grad, costs.weight_grad)
        ]
        durations = self.durations(*ticks)
        run = _time(self.stages, durations, int(hop * scale), record=True)
        _raise_if_stuck(self, run)
        busy = [sum(d) for d in durations]
        makespan, ideal = run.makespan, max(busy)
        if makespan == 0:
            raise _fail("all costs are zero: give at least one virtual stage a positive cost")
        idle = [makespan - b for b in busy]
        return SimResult(
            schedule=asked.schedule,
            pp=self.pp,
            vpp=self.vpp,
            micro_batches=asked.micro_batches,
            makespan=Fraction(makespan, scale),
            ideal=Fraction(ideal, scale),
            bubble=Fraction(sum(idle), self.pp * makespan),
            bubble_vs_ideal=Fraction(makespan - ideal, ideal),
            per_stage_bubble=tuple(Fraction(i, makespan) for i in idle),
            peak_in_flight=self.peaks,
            p2p_messages=self.messages,
            steps=self.steps(run, scale),
            warnings=asked.warnings,
            p2p_cost=hop,
            placement=self.placement,
            plan_vpp=asked.plan_vpp,
            group_size=asked.group_size,
            per_stage_idle=tuple(Fraction(i, scale) for i in idle),
            peak_in_flight_per_chunk=self.peaks_per_chunk,
            ops=self.orders,
            work=run.work,
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
    *,
    weight: Sequence[float | Fraction] | None = None,
    placement: Placement | None = None,
    group_size: int | None = None,
) -> SimResult:
    """Simulate one training step of ``schedule`` and measure it.

    Costs: one entry per virtual stage (``pp * vpp``, the plan's segment order).
    ``forward`` defaults to 1. Without ``weight``, ``backward`` is the whole backward
    (default twice the forward), split evenly into I and W where a schedule needs the
    split; with ``weight``, ``backward`` is the input-gradient cost (default the
    forward) and ``weight`` the weight-gradient cost. ``p2p_cost`` is added to every
    send between two different stages.

    ``placement`` is the plan's (default: loop, or V for ``zbv``); ``zbv`` needs
    ``vpp == 2`` and V placement. ``group_size`` is Megatron's micro-batch group size
    for ``interleaved`` (default ``pp``; illegal sizes are refused, listing the legal
    ones); ``eager1f1b`` needs ``2 pp - 1`` micro-batches. ``fthenb``, ``1f1b``,
    ``eager1f1b`` and ``zbh1`` do not interleave: given ``vpp > 1`` they simulate each
    stage's chunks merged into one (costs summed) and report ``vpp == 1``;
    ``interleaved`` with ``vpp == 1`` is plain 1F1B. A simulation of more than
    :data:`MAX_UNITS` units (``pp * vpp * m``) is refused.

    Raises :class:`vppctl.errors.UsageError` for a schedule a runtime would refuse or a
    simulation too large, :class:`SimulationError` on bad arguments,
    :class:`DeadlockError` if the orders cannot make progress.
    """
    _check_counts(pp, vpp, micro_batches, schedule)
    check_size(pp, vpp, micro_batches)  # before anything grows with pp * vpp
    _check_placement(schedule, vpp, placement)
    costs = _resolve_costs(pp * vpp, forward, backward, weight)
    hop = _exact(p2p_cost, "p2p cost")
    pipe, group = Pipeline.of(
        schedule, pp, vpp, micro_batches, placement=placement, group_size=group_size
    )
    warnings = tuple(micro_batch_warnings(pp, vpp, micro_batches, schedule))
    return pipe.simulate(_Asked(schedule, micro_batches, vpp, group, warnings), costs, hop)


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
        raise _fail("orders is empty: give one op sequence per stage")
    micro_batches = 0
    for stage, order in enumerate(orders):
        for op in order:
            if not 0 <= op.chunk < vpp or op.micro_batch < 0:
                raise _fail(
                    f"stage {stage} lists {op.label}, outside vpp={vpp} chunks: "
                    f"use chunks 0..{vpp - 1} and micro-batches >= 0"
                )
            micro_batches = max(micro_batches, op.micro_batch + 1)
    check_size(pp, vpp, micro_batches)
    costs = _resolve_costs(pp * vpp, forward, backward, weight)
    hop = _exact(p2p_cost, "p2p cost")
    scale = math.lcm(
        *(c.denominator for c in (*costs.forward, *costs.input_grad, *costs.weight_grad, hop))
    )
    pipe = Pipeline(orders, vpp, placement)
    ticks = [
        [int(c * scale) for c in values]
        for values in (costs.forward, costs.input_grad, costs.weight_grad)
    ]
    run = _time(pipe.stages, pipe.durations(*ticks), int(hop * scale), record=True)
    _raise_if_stuck(pipe, run)
    return pipe.steps(run, scale)


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
    """1F1B over merged chunks, then the interleaving schedule the placement runs:
    Megatron's interleaved 1F1B for a loop-placed plan with ``vpp > 1``, ZB-V for a
    V-placed plan with ``vpp == 2`` (a V plan with another ``vpp`` has none).

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
    second: Schedule | None = None
    if placement == "loop" and vpp > 1:
        second = "interleaved"
    elif placement == "v" and vpp == 2:
        second = "zbv"
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
