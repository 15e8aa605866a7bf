"""Simulate: a plan's training step simulated with the program's costs and memory.

This module's one job is `simulate`'s use case below the command: which plan and costs a
simulation runs (a program's plan as `convert` makes it, or pp, vpp and unit costs
without one), which schedules under which runtime's rules (one asked for, or 1F1B beside
the runtime's schedule that interleaves the plan; the runtime is the program's own, a
legacy program's Paddle 3.0.0 or a PIR program's Paddle 3.3.1, and `any` without one),
what a hop costs, and each stage's bytes in each. `SizedPlan` is the one path from a plan to
its simulated step and its stages' bytes: `simulate`, `convert --micro-batches` (the
converted plan's bubble) and `plan`'s search (`vppctl.planner.search`, timing many
candidates on one shared pipeline) all take it. Writing the pictures and the outcome is
the command's (`vppctl.commands.simulate_run`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import ClassVar

from vppctl import validate
from vppctl.choices import (
    LINKS,
    MAX_MICRO_BATCHES,
    RUNTIMES,
    SCHEDULES,
    Fill,
    Link,
    Placement,
    Runtime,
    Schedule,
)
from vppctl.convert import Planned
from vppctl.engine import check_seg_method
from vppctl.errors import UsageError, VppctlError
from vppctl.plan import Plan, PlanOptions, place, stage_loads
from vppctl.planner.costs import (
    Communication,
    CostModel,
    HopCost,
    Measure,
    no_program_hop,
    resolve_plan,
)
from vppctl.planner.importers import PaddleTrace
from vppctl.planner.measured import (
    NS,
    MeasuredCosts,
    SegmentTimes,
    relative_error,
    segment_times,
)
from vppctl.planner.memory import (
    MemoryModel,
    MemoryOptions,
    SegmentMemory,
    StageMemory,
    stage_memory,
)
from vppctl.planner.pir import held_layers, pir_plan_refusal, pir_split, simulated_verdicts
from vppctl.program import Program
from vppctl.schedule import (
    GROUPED,
    Counts,
    Pipeline,
    SimResult,
    check_runtime,
    comparison,
    default_group_size,
    held_peak,
    natural_placement,
    pir_split_rule,
    simulate,
    split_refusal,
)
from vppctl.schedule import check_size as check_simulation_size
from vppctl.units import runs_text


@validate.named_fields
@dataclass(frozen=True)
class SimulateOptions:
    """What `simulate` is asked: the step (`micro_batches`, required), the schedule and its
    costs, and with a program the plan to simulate (`plan`: its fields None where not
    given, `PlanOptions`' defaults; a converted program is simulated with its recorded
    plan) and how to size its memory. Without a program, `plan.pp` and `plan.vpp` are
    required and `plan.placement` alone of the rest may be given. Checked when made
    (UsageError, exit 2)."""

    micro_batches: int
    plan: PlanOptions = field(default_factory=PlanOptions)
    seg_method: str | None = None  # regex naming the repeated layer; None: detected
    schedule: Schedule | None = None  # None: 1F1B and the runtime's interleaving schedule
    group_size: int | None = None  # the interleaved schedules' micro-batch group
    # Whose rules and schedules: None is the program's own (a legacy program's Paddle, a
    # PIR program's Paddle PIR), `any` without a program.
    runtime: Runtime | None = None
    # Forward, input-gradient and weight-gradient cost of a chunk (default 1, 1, 1); with
    # a program, per unit of each segment's FLOP share. Numbers >= 0, kept as fractions.
    costs: tuple[float | Fraction, float | Fraction, float | Fraction] | None = None
    # Time per hop between stages, in the costs' unit (seconds with `costs_from`); None:
    # with a program, what its boundary activations take over `link`
    # (`vppctl.planner.costs.Communication`), else 0.
    p2p_cost: float | Fraction | None = None
    link: Link | None = None  # None: costs.DEFAULT_LINK
    memory: MemoryOptions | None = None  # None: the defaults (with a program only)
    # Measured costs in seconds instead of estimated ones (vppctl.planner.measured): a costs
    # CSV/JSON or a profiler trace; `fill` "estimate" takes what it does not measure from
    # the program's estimate scaled to the measured ones. `measured_step`: the step time
    # measured (seconds), to state the prediction's error against (a torch trace's
    # profiler steps give one too).
    costs_from: str | os.PathLike[str] | None = None
    fill: Fill = "none"
    measured_step: float | Fraction | None = None

    FLAGS: ClassVar[Mapping[str, str]] = {
        "micro_batches": "--micro-batches",
        "seg_method": "--seg-method",
        "schedule": "--schedule",
        "group_size": "--group-size",
        "runtime": "--runtime",
        "costs": "--costs",
        "p2p_cost": "--p2p-cost",
        "link": "--link",
        "costs_from": "--costs-from",
        "fill": "--fill",
        "measured_step": "--measured-step",
    }
    NESTED: ClassVar[Mapping[str, type]] = {"plan": PlanOptions, "memory": MemoryOptions}

    def __post_init__(self) -> None:
        validate.integer(self, "micro_batches", 1, MAX_MICRO_BATCHES)
        validate.nested(self, "plan", PlanOptions)
        check_seg_method(self, "seg_method")
        validate.choice(self, "schedule", SCHEDULES, optional=True)
        validate.integer(self, "group_size", 1, MAX_MICRO_BATCHES, optional=True)
        validate.choice(self, "runtime", RUNTIMES, optional=True)
        self._check_costs()
        check_p2p(self)
        validate.nested(self, "memory", MemoryOptions, optional=True)
        self._check_measured()
        grouped = self.schedule is None or self.schedule in GROUPED
        if self.group_size is not None and not grouped:
            raise UsageError(
                f"{validate.where(self, 'group_size')} is the interleaved schedules' "
                f"(interleaved, interleaved-zb); {validate.where(self, 'schedule')} "
                f"{self.schedule!r} takes none: drop --group-size"
            )

    def _check_measured(self) -> None:
        validate.measured_costs(self)
        if self.measured_step is not None:
            step = validate.exact_number(self, "measured_step", self.measured_step)
            if not step:
                raise validate.refuse(self, "measured_step", "a number of seconds > 0")
            object.__setattr__(self, "measured_step", step)
        if self.costs_from is None:
            if self.measured_step is not None:
                raise UsageError(
                    f"{validate.where(self, 'measured_step')} is compared with a step "
                    "predicted in seconds, from measured costs: pass --costs-from FILE"
                )
            return
        if self.costs is not None:
            raise UsageError(
                f"{validate.where(self, 'costs')} scales estimated costs, and "
                f"{validate.where(self, 'costs_from')} gives each stage's own seconds: "
                "drop one of them"
            )

    def _check_costs(self) -> None:
        if self.costs is None:
            return
        legal = (
            f"three numbers F,B,W, each {validate.NUMBER_LEGAL.removeprefix('a ')}, not all "
            "zero, e.g. (1, 1, 1)"
        )
        values = validate.sequence(self, "costs", legal)
        exact = [validate.exact_number(self, "costs", v) for v in values]
        if len(exact) != 3 or any(v is None for v in exact) or not any(exact):
            shown = tuple(
                float(v) if isinstance(v, Fraction) and abs(v) < 10**300 else v for v in values
            )
            raise validate.refuse(self, "costs", legal, shown)  # as numbers, not Fractions
        object.__setattr__(self, "costs", tuple(exact))


def check_p2p(options: validate.Options) -> None:
    """`p2p_cost` a number >= 0 or None, `link` a known name or None, not both given."""
    given, link = getattr(options, "p2p_cost"), getattr(options, "link")  # noqa: B009
    if given is not None:
        validate.number(options, "p2p_cost")
    validate.choice(options, "link", LINKS, optional=True)
    if given is not None and link is not None:
        raise UsageError(
            f"{validate.where(options, 'p2p_cost')} gives a hop's cost itself, and "
            f"{validate.where(options, 'link')} would time it from the program's bytes: "
            "pass one of them"
        )


def cost_ratios(options: SimulateOptions) -> tuple[Fraction, Fraction, Fraction]:
    """F,B,W as exact fractions (the options hold them so), 1,1,1 by default."""
    if options.costs is None:
        return _UNIT_COSTS
    f, b, w = (Fraction(c) for c in options.costs)
    return f, b, w


_UNIT_COSTS = (Fraction(1), Fraction(1), Fraction(1))


def counts_text(counts: Sequence[int]) -> str:
    """Layer counts per segment: `7,7,9,9`; beyond 32 segments runs as `7 (x6)`."""
    if len(counts) <= 32:
        return ",".join(map(str, counts))
    return runs_text(counts, "{value} (x{count})", ", ")


@dataclass(frozen=True)
class SimulatedPlan:
    """The plan a program was simulated with, and its costs."""

    plan: Plan
    recorded: bool  # the program's recorded plan (a converted program)
    split: str  # the split's name, as converted or asked
    measure: str  # "flops", or "ops" when the program has no matmul shapes
    segment_costs: tuple[int, ...]  # each segment's forward FLOPs (or ops)
    costs: tuple[Fraction, Fraction, Fraction]  # F,B,W per unit of a segment's cost
    measured: SegmentTimes | None = None  # measured costs, in seconds, when given

    @property
    def description(self) -> str:
        """`pp 8 x vpp 2, loop placement, split balanced (layers 4,8,9,...)`: the plan
        line of the table and the caption of the pictures."""
        p = self.plan
        source = "as converted" if self.recorded else f"split {self.split}"
        counts = counts_text([len(s.layers) for s in p.segments])
        return f"pp {p.pp} x vpp {p.vpp}, {p.placement} placement, {source} (layers {counts})"


@dataclass(frozen=True)
class Bubble:
    """The simulated bubble of the converted plan at `micro_batches`: per schedule (1F1B,
    then `runtime`'s schedule that interleaves the plan) the idle share of the step, with
    the program's costs (`measure`: FLOPs, or op counts without matmul shapes) and hops
    (`hop`). The same figure `vppctl simulate OUT -m M` prints."""

    micro_batches: int
    measure: str
    schedules: Mapping[Schedule, Fraction]  # in the order simulated
    # Per schedule shown, each stage's bytes at micro-batch size 1 (`vppctl.planner.memory`).
    memory: Mapping[Schedule, tuple[StageMemory, ...]]
    # With measured costs: what they were, and per schedule the step in seconds.
    measured: SegmentTimes | None = None
    steps: Mapping[Schedule, Fraction] = field(default_factory=dict)
    runtime: Runtime = "paddle"
    hop: HopCost = field(default_factory=lambda: no_program_hop(0))
    # Each stage's forward FLOPs (or ops; with measured costs its measured forward in
    # nanoseconds) in the plan, and where the ops before the first layer (the embedding)
    # and after the last (the LM head and loss) sit, with their costs (0 when measured):
    # what says why interleaving buys little (`vppctl.outcomes.vpp_verdict`).
    stage_loads: tuple[int, ...] = ()
    ends: tuple[tuple[int, int], tuple[int, int]] = ((0, 0), (0, 0))  # (stage, cost) pre, post


# -- the one path: a plan, its costs and its memory ---------------------------------


class ProgramModel:
    """One program's costs and bytes, computed once for any plan of it: each layer's
    forward cost (`CostModel`), bytes (`MemoryModel`, sized by `memory`) and what a hop
    between stages costs (`Communication`: `p2p_cost` given, else the plan's boundary
    bytes over `link`); with `measured` costs, those (in seconds) time the step, and a hop
    is in seconds too."""

    def __init__(
        self,
        planned: Planned,
        memory: MemoryOptions,
        p2p_cost: float | Fraction | None = None,
        link: Link | None = None,
        measured: MeasuredCosts | PaddleTrace | None = None,
        fill: Fill = "none",
    ) -> None:
        self.costs = CostModel(planned)
        self.memory = MemoryModel(planned, memory)
        # With measured costs (seconds) a hop is in seconds too: given so, or bytes / bandwidth.
        seconds = measured is not None
        self.communication = Communication(planned, self.memory, p2p_cost, link, seconds)
        self.limit = memory.limit
        # A Paddle trace is matched to this program's ops once; any plan then sums its layers.
        self.measured = measured.match(planned) if isinstance(measured, PaddleTrace) else measured
        self.fill = fill == "estimate"

    @property
    def measure(self) -> Measure:
        return self.costs.measure

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the memory model could not size (said once per program)."""
        return self.memory.warnings

    def sized(self, plan: Plan) -> SizedPlan:
        """The plan with its segments' costs (measured ones fitted to it, when given),
        bytes and hop: the one place a plan's costs come from."""
        times = None
        if self.measured is not None:
            sizes = [len(s.layers) for s in plan.segments]
            estimate = self.costs.estimate()
            times = segment_times(self.measured, sizes, plan.pp, plan.vpp, estimate, self.fill)
        return SizedPlan(
            plan,
            self.costs.segments(plan),
            self.memory.segments(plan),
            self.limit,
            self.communication.hop(plan),
            times,
        )


@dataclass(frozen=True)
class SizedPlan:
    """A plan with its segments' forward costs and bytes and its hop's cost: its step
    simulated whole under the schedules `simulate` runs (`steps`) or only timed on a
    pipeline (`time`, the search's fast path), with each stage's bytes in that step."""

    plan: Plan
    segment_costs: tuple[int, ...]  # each segment's forward FLOPs (or ops)
    segment_memory: tuple[SegmentMemory, ...]
    limit: int | None  # bytes per stage; stages over it are flagged
    hop: HopCost = field(default_factory=lambda: no_program_hop(0))
    measured: SegmentTimes | None = None  # measured costs in seconds: they time the step

    def forward(self) -> tuple[Fraction, ...]:
        """Per virtual stage, scaled so that the mean stage load is 1."""
        plan, costs = self.plan, self.segment_costs
        total = sum(costs)
        if not total:
            return tuple(Fraction(1, plan.vpp) for _ in costs)
        return tuple(Fraction(c * plan.pp, total) for c in costs)

    def steps(
        self, options: SimulateOptions, runtime: Runtime, only: Schedule | None = None
    ) -> tuple[tuple[SimResult, tuple[StageMemory, ...]], ...]:
        """The step under each schedule `options` asks for under `runtime` (`only`: that
        one of the default comparison's), each segment costing F,B,W =
        `cost_ratios(options)` per unit of its forward share, a hop `self.hop`, and each
        stage's bytes in it."""
        plan, measured = self.plan, self.measured
        costs: tuple[Sequence[Fraction], Sequence[Fraction], Sequence[Fraction]]
        if measured is not None:
            costs = measured.forward, measured.input_grad, measured.weight_grad
        else:
            f, b, w = cost_ratios(options)
            forward = self.forward()
            costs = [c * f for c in forward], [c * b for c in forward], [c * w for c in forward]
        runs = simulate_schedules(
            plan.pp, plan.vpp, plan.placement, costs, options, runtime, self.hop.cost, only
        )
        sizes = self.activations()
        return tuple(
            (r, self._stages(r.peak_in_flight_per_chunk, held_peak(r, sizes))) for r in runs
        )

    def time(self, pipe: Pipeline) -> tuple[Fraction, Fraction, tuple[StageMemory, ...]]:
        """The step `pipe` runs on this plan, only timed: its makespan in the time unit (the
        mean stage's forward of one micro-batch, a hop costing `self.hop`; seconds with
        measured costs, the hop then in seconds too), its bubble, and each stage's bytes."""
        plan = self.plan
        if self.measured is not None:  # integer nanoseconds
            forward, input_grad, weight_grad = self.measured.ticks
            hop_ns = round(self.hop.cost * NS)
            makespan, busy = pipe.makespan(forward, input_grad, weight_grad, hop_ns)
            span = Fraction(makespan, NS)
        else:
            unit = Fraction(sum(self.segment_costs), plan.pp) or Fraction(1)
            hop = self.hop.cost * unit
            scale = hop.denominator
            ticks = [c * scale for c in self.segment_costs]
            makespan, busy = pipe.makespan(ticks, ticks, ticks, int(hop * scale))
            span = Fraction(makespan, scale) / unit
        held = pipe.held_peak(self.activations())
        stages = self._stages(pipe.peaks_per_chunk, held)
        bubble = Fraction(plan.pp * makespan - sum(busy), plan.pp * makespan)
        return span, bubble, stages

    def activations(self) -> list[int]:
        """Bytes one micro-batch leaves stashed per segment: measured where the costs give
        them for every part, else the memory model's."""
        measured = self.measured.activation_bytes if self.measured is not None else None
        if measured is not None:
            return list(measured)
        return [s.activations for s in self.segment_memory]

    def _stages(
        self, peaks_per_chunk: Sequence[Sequence[int]], held: Sequence[int]
    ) -> tuple[StageMemory, ...]:
        # Each chunk's row says the bytes the peak was simulated with: measured or modelled.
        segments = [
            replace(s, activations=a) for s, a in zip(self.segment_memory, self.activations())
        ]
        return stage_memory(self.plan, segments, peaks_per_chunk, held, self.limit)


def simulate_schedules(
    pp: int,
    vpp: int,
    placement: Placement | None,
    costs: tuple[Sequence[Fraction], Sequence[Fraction], Sequence[Fraction]] | None,
    options: SimulateOptions,
    runtime: Runtime,
    hop: Fraction,
    only: Schedule | None = None,
) -> tuple[SimResult, ...]:
    """The step under the one schedule `options` asks for, or under 1F1B and `runtime`'s
    schedule that interleaves the plan (`vppctl.schedule.comparison`), side by side; each
    checked against `runtime`'s rules first (`check_runtime`: a refusal is exit 2 in the
    runtime's words), whose notes join the result's warnings. A hop costs `hop`; `only`
    keeps one schedule of the default comparison."""
    forward, backward, weight = costs if costs is not None else (None, None, None)
    m, group = options.micro_batches, options.group_size
    if options.schedule is not None:
        asked: tuple[Schedule, ...] = (options.schedule,)
    else:
        asked = comparison(runtime, vpp, placement or "loop")
        asked = tuple(s for s in asked if only in (None, s))
        if group is not None and not any(s in GROUPED for s in asked):
            raise UsageError(
                "--group-size is the interleaved schedules', and this plan runs none under "
                f"--runtime {runtime} (it needs vpp > 1 and loop placement): drop --group-size"
            )
    results = []
    for schedule in asked:
        baseline = options.schedule is None and schedule == "1f1b"  # the plan, merged
        where = placement or ("loop" if baseline else natural_placement(schedule))
        size = group if schedule in GROUPED else None
        counts = Counts(schedule, pp, 1 if baseline else vpp, m, where, size)
        notes = check_runtime(runtime, counts)
        if size is None:
            size = default_group_size(runtime, schedule, pp, m)
        result = simulate(
            pp, vpp, m, schedule, forward, backward, hop,
            weight=weight, placement=placement, group_size=size,
        )  # fmt: skip
        results.append(replace(result, warnings=(*result.warnings, *notes)))
    return tuple(results)


def check_pir_split(
    runtime: Runtime, planned: Planned, schedules: Sequence[Schedule], placement: Placement
) -> None:
    """Under Paddle PIR, for a schedule that interleaves, a split neither Paddle's own
    completion (its rules R6-R8, `vppctl.planner.pir`) nor `vppctl.paddle.pir_plan` makes:
    refused (exit 2) naming the rule. A split only `pir_plan` makes (R6, R8) runs."""
    plan = planned.plan
    if runtime != "paddle-pir" or plan.vpp < 2 or "vpp" not in schedules:
        return
    held = held_layers(planned.facts.stages, plan.pp)
    sizes = [len(s.layers) for s in plan.segments]
    split = pir_split(plan.pp, plan.vpp, placement, sizes, held)
    if split.reason is None:
        return
    why = pir_plan_refusal(plan.pp, plan.vpp, placement, sizes)
    if why is not None:
        rule = pir_split_rule(placement, plan.vpp, split.stage_layers)
        raise split_refusal(rule, f"{split.reason}; {why}" if placement == "loop" else why)


# -- simulate ----------------------------------------------------------------------


@dataclass(frozen=True)
class Simulation:
    """What a simulation found: one result per schedule, the runtime whose rules they ran
    under and what a hop cost, and with a program its plan and each stage's bytes per
    schedule; with measured costs what they were (each result's makespan then in
    seconds) and the step measured, if one was given."""

    results: tuple[SimResult, ...]
    plan: SimulatedPlan | None = None  # with a program
    memory: tuple[tuple[StageMemory, ...], ...] = ()  # per result, with a program
    memory_options: MemoryOptions | None = None
    warnings: tuple[str, ...] = ()  # the plan's and the memory model's (with a program)
    runtime: Runtime = "any"
    hop: HopCost = field(default_factory=lambda: no_program_hop(0))
    measured: SegmentTimes | None = None  # the measured costs, fitted to the plan
    measured_step: MeasuredStep | None = None


def program_runtime(program: Program, asked: Runtime | None) -> Runtime:
    """The runtime asked for, else the program's own: Paddle 3.3.1's for a PIR program,
    Paddle 3.0.0's (the last to schedule one) for a legacy ProgramDesc."""
    if asked is not None:
        return asked
    return "paddle-pir" if program.is_pir else "paddle"


@dataclass(frozen=True)
class MeasuredStep:
    """A step time measured (seconds), and where it came from: `--measured-step`, or the
    profiler steps of the costs' trace."""

    seconds: Fraction
    source: str

    def error(self, predicted: Fraction) -> Fraction:
        """The prediction's signed relative error: negative when it is low."""
        return relative_error(predicted, self.seconds)


def measured_step(
    options: SimulateOptions, costs: MeasuredCosts | PaddleTrace | None
) -> MeasuredStep | None:
    """`--measured-step`, else the step the costs' trace measured (its profiler steps)."""
    if options.measured_step is not None:
        return MeasuredStep(Fraction(options.measured_step), "--measured-step")
    if isinstance(costs, MeasuredCosts) and costs.step is not None:
        return MeasuredStep(costs.step, f"the profiler steps of {costs.source.path}")
    return None


def simulate_program(
    program: Program, options: SimulateOptions, costs: MeasuredCosts | PaddleTrace | None = None
) -> Simulation:
    """`program` simulated with the plan `convert` would make (or made), its FLOP costs
    (or the measured `costs`, read from `options.costs_from`), its bytes per stage and its
    hops' bytes, under its runtime's rules (`options.runtime`, else the program's own)."""
    opts = options.memory or MemoryOptions()
    runtime = program_runtime(program, options.runtime)
    resolved = resolve_plan(program, options.plan, options.seg_method)
    plan = resolved.plan
    model = ProgramModel(
        resolved.planned, opts, options.p2p_cost, options.link, costs, options.fill
    )
    sized = model.sized(plan)
    asked = (
        (options.schedule,) if options.schedule else comparison(runtime, plan.vpp, plan.placement)
    )
    check_pir_split(runtime, resolved.planned, asked, plan.placement)
    steps = sized.steps(options, runtime)
    simulated = SimulatedPlan(
        plan, resolved.recorded, resolved.split, model.measure, sized.segment_costs,
        cost_ratios(options), sized.measured,
    )  # fmt: skip
    runs = tuple(run for run, _ in steps)
    paddle = simulated_verdicts(resolved.planned, runs) if program.is_pir else ()
    return Simulation(
        runs,
        simulated,
        tuple(stages for _, stages in steps),
        opts,
        (*resolved.warnings, *model.warnings, *paddle),
        runtime,
        sized.hop,
        sized.measured,
        measured_step(options, costs),
    )


def simulate_counts(
    options: SimulateOptions, costs: MeasuredCosts | PaddleTrace | None = None
) -> Simulation:
    """A step without a program: `options.plan`'s pp and vpp, every chunk costing
    `options.costs`, or each virtual stage its measured `costs` (per stage: per-layer costs
    and Paddle traces need the program), under `options.runtime` (default any); the
    options that describe a program's plan or memory are refused."""
    pp, vpp, placement = _without_program(options)
    times = None
    forward: tuple[Sequence[Fraction], Sequence[Fraction], Sequence[Fraction]] | None = None
    if isinstance(costs, PaddleTrace):
        raise UsageError(
            f"{costs.source.path} is a Paddle trace, matched to a program's ops: pass the "
            "program it profiled"
        )
    if costs is not None:
        times = segment_times(costs, None, pp, vpp, None, options.fill == "estimate")
        forward = times.forward, times.input_grad, times.weight_grad
    elif options.costs is not None:
        f, b, w = cost_ratios(options)
        n = pp * vpp
        forward = [f] * n, [b] * n, [w] * n
    runtime = options.runtime or "any"
    hop = no_program_hop(options.p2p_cost, seconds=costs is not None)
    runs = simulate_schedules(pp, vpp, placement, forward, options, runtime, hop.cost)
    return Simulation(
        runs,
        runtime=runtime,
        hop=hop,
        measured=times,
        measured_step=measured_step(options, costs),
    )


def _without_program(options: SimulateOptions) -> tuple[int, int, Placement | None]:
    """pp, vpp and the placement of a simulation without a program; the options that
    describe a program's plan or memory are refused."""
    plan = options.plan
    program_only = {
        "--split": plan.split,
        "--layers-per-chunk": plan.layers_per_chunk,
        "--layout": plan.layout,
        "--cost": plan.cost,
        "--seg-method": options.seg_method,
        "--link": options.link,
        "memory options": options.memory,
    }
    given = [flag for flag, value in program_only.items() if value]
    if given:
        raise UsageError(
            f"{', '.join(given)} describe a program's plan or memory: pass the program, or "
            "drop them"
        )
    if plan.pp is None:
        raise UsageError("--pp is required without a program")
    if plan.vpp is None:
        raise UsageError("--vpp is required without a program")
    check_simulation_size(plan.pp, plan.vpp, options.micro_batches)  # before pp * vpp costs
    return plan.pp, plan.vpp, plan.placement


# -- convert --micro-batches -------------------------------------------------------


def converted_bubble(
    planned: Planned,
    micro_batches: int,
    runtime: Runtime = "paddle",
    p2p_cost: float | Fraction | None = None,
    link: Link | None = None,
    costs: MeasuredCosts | PaddleTrace | None = None,
    fill: Fill = "none",
) -> tuple[Bubble, tuple[str, ...]]:
    """The converted plan simulated as `simulate OUT` does it: the same plan, its costs (the
    measured `costs` when given) and hops (`p2p_cost` given, else timed over `link`), 1F1B
    and `runtime`'s schedule that interleaves the plan (from the conversion's own planning:
    the converted program is not planned again). A schedule that refuses the count is left
    out with a warning, never the conversion; measured costs that do not fit the plan are
    refused (before anything is written)."""
    plan = planned.plan
    model = ProgramModel(planned, MemoryOptions(), p2p_cost, link, costs, fill)
    sized = model.sized(plan)
    shown: dict[Schedule, Fraction] = {}
    spans: dict[Schedule, Fraction] = {}
    memory: dict[Schedule, tuple[StageMemory, ...]] = {}
    warnings: list[str] = list(model.warnings)
    for schedule in comparison(runtime, plan.vpp, plan.placement):
        try:
            ((run, stages),) = sized.steps(SimulateOptions(micro_batches), runtime, only=schedule)
        except VppctlError as e:
            warnings.append(
                f"no {schedule} bubble at --micro-batches {micro_batches}: {e} (the "
                "conversion is unaffected)"
            )
            continue
        shown[schedule] = run.bubble
        spans[schedule] = run.makespan
        memory[schedule] = stages
        warnings += run.warnings
    last = len(plan.segments) - 1
    ends = (
        (place(0, plan.pp, plan.placement)[0], model.costs.pre),
        (place(last, plan.pp, plan.placement)[0], model.costs.post),
    )
    loads = tuple(stage_loads(sized.segment_costs, plan.pp, plan.placement))
    measured = sized.measured
    if measured is not None:  # what the stages carry is the measured forward (nanoseconds),
        loads = tuple(stage_loads(measured.ticks[0], plan.pp, plan.placement))
        ends = ((ends[0][0], 0), (ends[1][0], 0))  # with no FLOP end to blame it on
    bubble = Bubble(
        micro_batches, model.measure, shown, memory, measured, spans if measured else {},
        runtime, sized.hop, loads, ends,
    )  # fmt: skip
    return bubble, tuple(dict.fromkeys(warnings))
