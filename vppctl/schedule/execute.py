"""Execute: place every action of the stage orders in time (a linear pass).

Orders are encoded once into integer columns per stage (`Pipeline`); timing them
with a set of costs is then one pass over those columns, with a faster pass that
only measures the makespan (what the planner needs). `held_peak` weighs the
in-flight micro-batches by their chunk's activation bytes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from vppctl.plan import Placement, place, virtual_stages
from vppctl.schedule.arguments import Costs, check_counts, check_placement, check_size, fail
from vppctl.schedule.orders import (
    MERGED,
    Op,
    Schedule,
    check_group,
    checked_orders,
)
from vppctl.schedule.refusal import ScheduleRefused
from vppctl.schedule.results import DeadlockError, SimResult, Step

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


def time_stages(
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


def raise_if_stuck(pipe: Pipeline, run: _Run) -> None:
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
    each chunk's own peak count. F adds a unit; a whole backward B removes it, a split
    one only at its W (a W still reads the stash), never at its I."""
    totals: list[int] = []
    per_chunk: list[tuple[int, ...]] = []
    for stage, cols in enumerate(stages):
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
            elif k == 1 or k == 3:
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
        raise fail(
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
class Asked:
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
        check_counts(pp, vpp, micro_batches, schedule)
        check_size(pp, vpp, micro_batches)
        chosen = check_placement(schedule, vpp, placement)
        run_vpp = 1 if schedule in MERGED else vpp
        group = check_group(schedule, pp, run_vpp, micro_batches, group_size)
        orders = checked_orders(schedule, pp, run_vpp, micro_batches, group)
        pipe = cls(orders, run_vpp, chosen, plan_vpp=vpp)
        if schedule == "vpp" and micro_batches % pp:
            pipe.refuse_deadlock(
                f"Paddle's VPP job list deadlocks at pp {pp}, vpp {vpp}, m {micro_batches} "
                f"(rule P8, pipeline_vpp.py PipelineVirtualPipelinePass._create_job_list: its "
                f"short last group of {micro_batches % pp} micro-batches): stage "
                "{stage} waits for {waits} on stage {producer}, which waits for it; pass "
                f"--micro-batches a multiple of pp {pp}",
                reason=f"vpp at m {micro_batches}: Paddle's job list deadlocks (short last group)",
            )
        return pipe, group

    def refuse_deadlock(self, message: str, *, reason: str) -> None:
        """Raise :class:`ScheduleRefused` with ``message`` (``{stage}``, ``{waits}`` and
        ``{producer}`` filled in) and ``reason`` when the orders deadlock, whatever the
        costs: a runtime that runs them hangs, so the option set is the problem, not the
        simulation."""
        durations = [[1] * len(cols.kinds) for cols in self.stages]
        try:
            raise_if_stuck(self, _makespan(self.stages, durations))
        except DeadlockError as e:
            raise ScheduleRefused(
                message.format(stage=e.stage, waits=e.waits_for, producer=e.waits_on_stage),
                reason=reason,
            ) from None

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
            run = time_stages(self.stages, durations, hop, record=False)
        else:
            run = _makespan(self.stages, durations)
        raise_if_stuck(self, run)
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

    def simulate(self, asked: Asked, costs: Costs, hop: Fraction) -> SimResult:
        """Time the pipeline with exact costs (per plan virtual stage) and measure it."""
        scale = math.lcm(
            *(c.denominator for c in (*costs.forward, *costs.input_grad, *costs.weight_grad, hop))
        )
        ticks = [
            self.merged([int(c * scale) for c in values])
            for values in (costs.forward, costs.input_grad, costs.weight_grad)
        ]
        durations = self.durations(*ticks)
        run = time_stages(self.stages, durations, int(hop * scale), record=True)
        raise_if_stuck(self, run)
        busy = [sum(d) for d in durations]
        makespan, ideal = run.makespan, max(busy)
        if makespan == 0:
            raise fail("all costs are zero: give at least one virtual stage a positive cost")
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
