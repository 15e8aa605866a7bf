"""Planner: search one program's conversions for the fastest step that fits in memory.

This module's one job is `vppctl plan`'s search. The program is read and indexed
once; every candidate is a plan `convert` would make (`convert.replan` with `convert`'s
own options, so each candidate's `vppctl convert` command reproduces it exactly),
timed with the program's forward FLOPs per segment (backward I = W = F) and its hops'
bytes (`vppctl.planner.costs.Communication`), and sized with its bytes per stage
(`vppctl.planner.memory`). A PIR program is searched the same way (the simulator does
not read the IR); each candidate launches on Paddle one of three ways
(`vppctl.planner.pir.PirLaunch`): by the PIR strategy alone (Paddle's own completion
makes the split: no command), with `vppctl.paddle.pir_plan` (its command is the `vppctl
convert ... -o FILE` that writes the plan file), or not at all (left out under
`paddle-pir`).

Candidates run under one runtime (`--runtime`, default the program's own: Paddle 3.0.0
for a legacy program, Paddle 3.3.1's PIR pipeline for a PIR one; `any`: each schedule
under its own runtime's rules), and what it would refuse is left out, counted by the
rule that refuses it (`vppctl.schedule.preflight`), never shown:

* its schedules only: at vpp 1 (plain PP, any split) the merged ones (`fthenb`,
  `1f1b`, `eager1f1b`, `zbh1`, `zb1p`); at vpp >= 2, loop placement, `interleaved`
  (Megatron's default group size pp, or torch's own under `torch`), `vpp` (Paddle's;
  not where its job list deadlocks), `interleaved-zb` (torch's group size); at vpp 2,
  V placement, `zbvpp`, `zbv`, `dualpipev`;
* at the micro-batch counts its rules accept, and never m < pp;
* under `paddle-pir`, only the splits Paddle's PIR completion makes, alone or under
  `vppctl.paddle.pir_plan` (not V placement, nor an empty middle virtual stage);
* splits `uniform` (where the layers divide), `keep` (where every stage keeps at
  least vpp layers) and `balanced` (stage-balanced, `--cost` measure); a split equal
  to an earlier one of the same vpp and placement is the same candidate; or the one
  split `--layout` names.

vpp runs over every value a split can serve (pp * vpp <= layers) unless restricted.
Candidates over `--memory-limit` are left out, counted. They are ranked by the time
of one micro-batch through the step (makespan / m: steps with different m process
different amounts of data; with one m this is the makespan order), then by the
worst stage's peak memory and the p2p messages.

Costs: the mean stage's forward of one micro-batch is the time unit, so the
makespans of all candidates compare; a hop costs what its plan's largest cut carries
over the link, in that unit. With measured costs (`costs_from`) every time is in seconds,
a hop's too (its bytes over the link, or `p2p_cost` read as seconds).
"""

from __future__ import annotations

import os
import shlex
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import cached_property
from pathlib import PurePath
from typing import ClassVar

from vppctl import progress, validate
from vppctl.choices import (
    COST_KINDS,
    MAX_DEGREE,
    MAX_MICRO_BATCHES,
    PLACEMENTS,
    RUNTIMES,
    SCHEDULES,
    SEARCHED_SPLITS,
    SPLITS,
    Fill,
    Link,
    Runtime,
)
from vppctl.convert import ConvertOptions, Planned, plan_program, replan
from vppctl.engine import check_seg_method
from vppctl.errors import ConversionError, UsageError, VppctlError
from vppctl.plan import CostKind, Placement, Plan, PlanOptions, Split
from vppctl.planner.costs import HopCost
from vppctl.planner.importers import PaddleTrace
from vppctl.planner.launch import (
    LaunchCandidate,
    Layouts,
    Settings,
    launch_settings,
    layouts,
    megatron_layout,
)
from vppctl.planner.measured import MeasuredCosts, SegmentTimes
from vppctl.planner.memory import MemoryOptions, StageMemory, iec, worst_stage
from vppctl.planner.pir import (
    PLAN_FILE,
    PirInput,
    PirLaunch,
    PirSplit,
    candidate_launch,
    held_layers,
    pir_input,
    pir_launch_settings,
    pir_paddle_settings,
    pir_split,
    pir_split_launch,
    short_stage_refusal,
)
from vppctl.planner.simulate import ProgramModel, SizedPlan, check_p2p, program_runtime
from vppctl.program import Program, read_plan
from vppctl.schedule import (
    LOOPED,
    MAX_UNITS,
    MERGED,
    OVER_MAX_UNITS,
    RULE,
    RUNTIME_SCHEDULES,
    V_SHAPED,
    Counts,
    Pipeline,
    Rule,
    Schedule,
    ScheduleRefused,
    check_size,
    default_group_size,
    not_in_runtime,
    pir_split_rule,
    preflight,
)

# The most (micro-batch, chunk) units one search may time, summed over its candidates:
# the 126-layer sample at pp 8 with m 16, 32 and 64 needs about 220,000; this bounds a
# search to about a minute whatever the options.
MAX_SEARCH_UNITS = 1 << 23


@validate.named_fields
@dataclass(frozen=True)
class PlanSearchOptions:
    """What `plan` searches: the micro-batch counts (required) and, for each other
    dimension, the values to try; an empty sequence tries them all (every vpp a split
    can serve, both placements, the splits uniform, keep and balanced, every schedule).
    Sequences are kept as tuples, `p2p_cost` as an exact fraction. Checked when made
    (UsageError, exit 2)."""

    micro_batches: Sequence[int]
    pp: int | None = None  # None: the program's
    vpp: Sequence[int] = ()
    placements: Sequence[Placement] = ()
    splits: Sequence[Split] = ()  # not explicit: counts are given, not searched
    schedules: Sequence[Schedule] = ()  # empty: every one the runtime runs
    cost: CostKind = "flops"  # the balanced split's measure
    # Whose schedules and rules (None: the program's own: Paddle 3.0.0 for a legacy
    # program, Paddle 3.3.1's PIR pipeline for a PIR program); every candidate runs there.
    runtime: Runtime | None = None
    seg_method: str | None = None  # regex naming the repeated layer; None: detected
    # One split as Megatron-Core's layout (`vppctl.plan.layout`): it fixes vpp, placement
    # (loop) and split, and is searched alone.
    layout: str | None = None
    # Time per hop between stages, in the time unit: the mean stage's forward of one
    # micro-batch (module docstring), seconds with `costs_from`. None: what the plan's
    # boundary activations take over `link` (`vppctl.planner.costs.Communication`).
    p2p_cost: float | Fraction | None = None
    link: Link | None = None  # None: costs.DEFAULT_LINK
    memory: MemoryOptions = field(default_factory=MemoryOptions)
    # Measured costs (seconds) instead of FLOPs: every candidate is timed with them, and
    # `p2p_cost` is then seconds too (vppctl.planner.measured).
    costs_from: str | os.PathLike[str] | None = None
    fill: Fill = "none"

    FLAGS: ClassVar[Mapping[str, str]] = {
        "micro_batches": "--micro-batches",
        "pp": "--pp",
        "vpp": "--vpp",
        "placements": "--placement",
        "splits": "--split",
        "schedules": "--schedule",
        "cost": "--cost",
        "runtime": "--runtime",
        "seg_method": "--seg-method",
        "layout": "--layout",
        "p2p_cost": "--p2p-cost",
        "link": "--link",
        "costs_from": "--costs-from",
        "fill": "--fill",
    }
    NESTED: ClassVar[Mapping[str, type]] = {"memory": MemoryOptions}

    def __post_init__(self) -> None:
        fixed = [f for f in ("vpp", "placements", "splits") if getattr(self, f)]
        need = "at least one count, e.g. (16,) or (16, 32, 64)"
        validate.integers(
            self, "micro_batches", 1, MAX_MICRO_BATCHES, empty=need, example="(16, 32, 64)"
        )
        validate.integer(self, "pp", 1, MAX_DEGREE, optional=True)
        validate.integers(self, "vpp", 1, MAX_DEGREE, example="(1, 2, 4)")
        validate.choices(self, "placements", PLACEMENTS)
        validate.choices(self, "splits", SEARCHED_SPLITS)
        asked = validate.sequence(
            self, "schedules", f"a sequence of names, each one of {', '.join(SCHEDULES)}"
        )
        validate.choices(self, "schedules", SCHEDULES)
        if not asked:  # every one the runtime runs, decided with the program
            object.__setattr__(self, "schedules", ())
        validate.choice(self, "cost", COST_KINDS)
        validate.choice(self, "runtime", RUNTIMES, optional=True)
        check_seg_method(self, "seg_method")
        validate.text(self, "layout", "a layout string, e.g. 'Et*3|t*4|t*4|t*3L'")
        if self.layout is not None and fixed:
            given = ", ".join(validate.where(self, f) for f in fixed)
            raise UsageError(
                f"{validate.where(self, 'layout')} fixes vpp, placement and split itself: "
                f"drop {given}"
            )
        check_p2p(self)
        validate.nested(self, "memory", MemoryOptions)
        validate.measured_costs(self)

    def searched(self, runtime: Runtime) -> tuple[Schedule, ...]:
        """The schedules to try under `runtime`: those asked for (each one it runs, else
        a UsageError naming the rule and how to widen it), or all of its own."""
        if not self.schedules:
            return RUNTIME_SCHEDULES[runtime]
        for schedule in self.schedules:
            missing = not_in_runtime(runtime, schedule)
            if missing is not None:
                raise UsageError(missing)
        return tuple(self.schedules)


@dataclass(frozen=True)
class Candidate:
    vpp: int
    placement: Placement
    split: Split
    schedule: Schedule
    micro_batches: int
    group_size: int | None
    layers_per_segment: tuple[int, ...]
    makespan: Fraction  # in the time unit
    bubble: Fraction  # idle share of the step
    p2p_messages: int
    memory: tuple[StageMemory, ...]
    # the `vppctl convert` argv that produces the plan (for a PIR program: its plan file for
    # vppctl.paddle.pir_plan); () for a PIR program's split pir_plan is not needed for
    command: tuple[str, ...]
    megatron_layout: str | None  # loop placement only
    hop: HopCost  # what a hop between stages cost in its step

    @property
    def time_per_micro_batch(self) -> Fraction:
        return self.makespan / self.micro_batches

    @property
    def worst(self) -> StageMemory:
        return worst_stage(self.memory)

    @property
    def pp(self) -> int:
        return len(self.memory)

    @property
    def conversion(self) -> tuple[int, Placement, Split]:
        """What makes its plan: one conversion per (vpp, placement, split) in a search."""
        return self.vpp, self.placement, self.split

    def launch(
        self, layer_class: str, micro_batch_size: int, pir: PirInput | None = None
    ) -> tuple[Settings, ...]:
        """Paddle's, Megatron-Core's and torch's settings to run this candidate; Paddle's
        as the PIR strategy when `pir` says what a PIR program holds (with the plan file
        of `vppctl.paddle.pir_plan` where its split needs it)."""
        c = self._launch_candidate(layer_class, micro_batch_size)
        return launch_settings(c) if pir is None else pir_launch_settings(c, pir, self.command)

    def pir_launch(self, pir: PirInput) -> PirLaunch:
        """How its split runs on Paddle's PIR pipeline: strategy only, with pir_plan, or not."""
        return candidate_launch(self._launch_candidate("", 1), pir, self.command)

    def layouts(self, pir: PirInput | None = None) -> Layouts:
        """Its split in each runtime's terms (`vppctl.planner.launch.layouts`); for a PIR
        program, with the stage mesh of each layer when Paddle's completion makes it."""
        held = None
        if pir is not None:
            split = self.pir_split(pir)
            held = split.stage_layers if split.takes else None
        return layouts(self._launch_candidate("", 1), held)

    def pir_split(self, pir: PirInput) -> PirSplit:
        """Whether, and how, Paddle's PIR completion makes this candidate's split."""
        c = self._launch_candidate("", 1)
        return pir_split(c.pp, c.vpp, c.placement, c.layers_per_segment, pir.stage_layers)

    def runs_on_pir(self, pir: PirInput) -> bool:
        """Whether Paddle's PIR completion (alone or under `vppctl.paddle.pir_plan`) and
        pipeline run this candidate."""
        return pir_paddle_settings(self._launch_candidate("", 1), pir, self.command).runs

    def _launch_candidate(self, layer_class: str, micro_batch_size: int) -> LaunchCandidate:
        return LaunchCandidate(
            schedule=self.schedule,
            pp=self.pp,
            vpp=self.vpp,
            placement=self.placement,
            micro_batches=self.micro_batches,
            group_size=self.group_size,
            layers_per_segment=self.layers_per_segment,
            layer_class=layer_class,
            micro_batch_size=micro_batch_size,
        )


@dataclass(frozen=True)
class Conversion:
    """One distinct conversion (one `vppctl convert` command, or for a PIR program one split
    Paddle's completion is asked for) and every candidate that was simulated on it, best
    first: the schedules and micro-batch counts it ran under."""

    command: tuple[str, ...]  # () for a PIR program's split that needs no pir_plan
    candidates: tuple[Candidate, ...]

    @property
    def best(self) -> Candidate:
        return self.candidates[0]

    @property
    def schedules(self) -> tuple[Schedule, ...]:
        """The schedules simulated, in vppctl's order."""
        return tuple(s for s in SCHEDULES if any(c.schedule == s for c in self.candidates))

    @property
    def micro_batches(self) -> tuple[int, ...]:
        return tuple(sorted({c.micro_batches for c in self.candidates}))

    def best_on_pir(self, pir: PirInput) -> Candidate | None:
        """Its best candidate that Paddle's PIR pipeline runs, if any."""
        return next((c for c in self.candidates if c.runs_on_pir(pir)), None)


def group_conversions(candidates: Sequence[Candidate]) -> tuple[Conversion, ...]:
    """The candidates (best first) grouped by conversion, ranked by each one's best."""
    groups: dict[tuple[int, Placement, Split], list[Candidate]] = {}
    for c in candidates:
        groups.setdefault(c.conversion, []).append(c)
    return tuple(Conversion(found[0].command, tuple(found)) for found in groups.values())


@dataclass(frozen=True)
class PlanResult:
    candidates: tuple[Candidate, ...]  # best first
    pp: int
    n_layers: int
    layer_class: str
    measure: str  # "flops", or "ops" when the program has no matmul shapes
    refused: tuple[tuple[str, int], ...]  # (reason, how many) of what was left out
    warnings: tuple[str, ...]
    over: tuple[Candidate, ...] = ()  # the candidates over the memory limit, best first
    pir: PirInput | None = None  # a PIR program: what Paddle's completion reads from it
    runtime: Runtime = "any"  # whose schedules and rules: every candidate runs there
    # (rule, how many candidates) of the rules candidates break that the runtime runs
    # anyway (Paddle's auto-tuner would not propose them, ...)
    notes: tuple[tuple[str, int], ...] = ()
    # Measured costs, as fitted to the first plan searched (their source, notes and what
    # was filled); every candidate's makespan is then in seconds.
    measured: SegmentTimes | None = None

    @property
    def over_limit(self) -> int:
        """How many candidates the memory limit left out."""
        return len(self.over)

    # Derived from the candidates once, on first use: the table, the JSON and the notes
    # each read them.
    @cached_property
    def conversions(self) -> tuple[Conversion, ...]:
        """One entry per distinct conversion, best first."""
        return group_conversions(self.candidates)

    @cached_property
    def best_on_pir(self) -> int | None:
        """A PIR program's best candidate that Paddle's PIR pipeline runs (its index in
        `candidates`), if any; None for a legacy program."""
        if self.pir is None:
            return None
        pir = self.pir
        return next((i for i, c in enumerate(self.candidates) if c.runs_on_pir(pir)), None)


class NoPlanFits(ConversionError):
    """No candidate fits (exit 4): `result` holds what the search found, the candidates
    over the memory limit (`result.over`) and what was refused, so that a report can
    still say why each was left out."""

    def __init__(self, message: str, result: PlanResult) -> None:
        super().__init__(message)
        self.result = result


def search_plans(
    program: Program,
    source: str,
    opts: PlanSearchOptions,
    costs: MeasuredCosts | PaddleTrace | None = None,
) -> PlanResult:
    """Every candidate of `program` (see the module docstring), best first: each one its
    runtime runs (`opts.runtime`, else the program's own); timed with the measured `costs`
    (read from `opts.costs_from`) when given."""
    runtime = program_runtime(program, opts.runtime)
    schedules = opts.searched(runtime)
    base = _base(program, opts)
    pp, n = base.plan.pp, base.plan.n_layers
    model = ProgramModel(base, opts.memory, opts.p2p_cost, opts.link, costs, opts.fill)
    opts = _measured_search(opts, model.measured, pp)
    pir = pir_input(base) if program.is_pir else None
    search = _Search(runtime, refused=Counter(), notes=Counter())
    found: list[Candidate] = []
    over: list[Candidate] = []
    plans = [
        (plan, split, _schedules(plan, schedules))
        for plan, split in _plans(base, opts, schedules, search)
    ]
    progress.phase("searching", sum(len(s) for *_, s in plans) * len(opts.micro_batches))
    measured = None
    for plan, split, runs in plans:
        sized = model.sized(plan)
        measured = measured or sized.measured
        command = convert_command(source, plan, split, opts)
        if pir is not None:
            command = pir_plan_command(command, plan, pir)
        for schedule in runs:
            for m in opts.micro_batches:
                timed = search.pipeline(schedule, plan, m)
                if timed is not None:
                    candidate = _candidate(sized, split, schedule, m, timed, command)
                    if search.launchable(candidate, pir):
                        over_limit = any(s.over_limit for s in candidate.memory)
                        (over if over_limit else found).append(candidate)
                progress.step(1)  # a candidate timed, or refused
    found.sort(key=_rank)
    over.sort(key=_rank)
    result = PlanResult(
        candidates=tuple(found),
        pp=pp,
        n_layers=n,
        layer_class=base.plan.layer_class,
        measure=model.measure,
        refused=tuple(sorted(search.refused.items())),
        warnings=(*base.plan.warnings, *model.warnings),
        over=tuple(over),
        pir=pir,
        runtime=runtime,
        notes=tuple(sorted(search.notes.items())),
        measured=measured,
    )
    if not found:
        error = _nothing_fits(over, search.refused, opts)
        if isinstance(error, ConversionError):
            raise NoPlanFits(str(error), result)
        raise error
    return result


def _measured_search(
    opts: PlanSearchOptions, costs: MeasuredCosts | None, pp: int
) -> PlanSearchOptions:
    """Measured per-stage costs are the stages of the one split they were measured on: the
    search keeps their vpp (count / pp) and needs that split named. Per-layer costs time
    any plan."""
    if costs is None or costs.per == "layer":
        return opts
    count, path = costs.stage_count, costs.source.path
    if count % pp:
        raise UsageError(
            f"{path} measures {count} virtual stages, which pp {pp} does not divide: give "
            f"pp x vpp stages, or costs per layer"
        )
    vpp = count // pp
    if tuple(opts.vpp) not in ((), (vpp,)) or len(opts.splits) != 1:
        raise UsageError(
            f"{path} measures the {count} virtual stages of one split (pp {pp} x vpp {vpp}): "
            f"pass --vpp {vpp} and the one --split they were measured on, or give costs per "
            "layer, which time every split"
        )
    return replace(opts, vpp=(vpp,))


# A schedule's pipeline for one plan shape, and the group size it runs with.
Timed = tuple[Pipeline, int | None]


@dataclass
class _Search:
    """One search's runtime and what it left out or noted, by reason, and the pipelines
    built (one per schedule and plan shape, shared by every split)."""

    runtime: Runtime
    refused: Counter[str]
    notes: Counter[str]
    built: dict[tuple[Schedule, int, Placement, int], Timed | str] = field(default_factory=dict)
    noted: dict[tuple[Schedule, int, Placement, int], tuple[Rule, ...]] = field(
        default_factory=dict
    )

    def pipeline(self, schedule: Schedule, plan: Plan, m: int) -> Timed | None:
        """The schedule's pipeline for the plan's shape and its group size, or None when the
        runtime would refuse it (the reason counted in `refused`)."""
        key = (schedule, plan.vpp, plan.placement, m)
        if key not in self.built:
            self.built[key] = self._build(schedule, plan, m)
        found = self.built[key]
        if isinstance(found, str):
            self.refused[found] += 1
            return None
        for rule in self.noted.get(key, ()):
            self.notes[f"{rule.id}: {rule.says}"] += 1
        return found

    def _build(self, schedule: Schedule, plan: Plan, m: int) -> Timed | str:
        """The pipeline and group size, or the reason it is left out: plan's own rule (a
        pipeline never filled), the runtime's rule (`preflight`), or the simulator's (a
        deadlock, its bound), the same for every split and vpp it repeats on, so that the
        notes stay short."""
        if m < plan.pp:
            return f"m {m} < pp {plan.pp}"
        try:
            check_size(plan.pp, plan.vpp, m)  # the simulator's bound first, as simulate's
        except ScheduleRefused as e:
            return e.reason
        counts = Counts(schedule, plan.pp, plan.vpp, m, plan.placement)
        refusal, notes = preflight(self.runtime, counts)
        if refusal is not None:
            return refusal.reason
        self.noted[schedule, plan.vpp, plan.placement, m] = notes
        group = default_group_size(self.runtime, schedule, plan.pp, m)
        try:
            return Pipeline.of(
                schedule, plan.pp, plan.vpp, m, placement=plan.placement, group_size=group
            )
        except ScheduleRefused as e:
            return e.reason

    def launchable(self, c: Candidate, pir: PirInput | None) -> bool:
        """Under Paddle's PIR runtime, whether Paddle's PIR completion makes the candidate's
        split (`vppctl.planner.pir`; the reason counted otherwise); true elsewhere."""
        if self.runtime != "paddle-pir" or pir is None or c.runs_on_pir(pir):
            return True
        launch = c.pir_launch(pir)
        if launch.runs:  # the split is made, the strategy is not (preflight saw to the counts)
            self.refused["Paddle (PIR) has no strategy that runs it"] += 1
        elif c.placement != "loop":
            split = c.pir_split(pir)
            rule = pir_split_rule(c.placement, c.vpp, split.stage_layers)
            self.refused[f"{rule.id}: {rule.says}"] += 1
        else:
            self.refused[f"Paddle (PIR) cannot: {launch.reason}"] += 1
        return False


def _base(program: Program, opts: PlanSearchOptions) -> Planned:
    """The program indexed and its layers found once: a one-chunk balanced plan."""
    recorded = read_plan(program.header)
    if recorded is not None:
        raise ConversionError(
            f"the program is already converted (pp {recorded.pp} x vpp {recorded.vpp}, "
            f"{recorded.placement} placement); plan the plain-PP program it came from"
        )
    base = PlanOptions(vpp=1, pp=opts.pp, split="balanced", cost=opts.cost)
    try:
        return plan_program(program, ConvertOptions(plan=base, seg_method=opts.seg_method))
    except ConversionError as e:
        raise ConversionError(f"plan searches the conversions of a plain-PP program: {e}") from None


def _plans(
    base: Planned, opts: PlanSearchOptions, schedules: Sequence[Schedule], search: _Search
) -> list[tuple[Plan, Split]]:
    """Every distinct plan a candidate needs: (vpp, placement) by the schedules asked for,
    times the splits; a refused split is counted (under Paddle PIR, `keep` on a stage mesh
    of fewer than vpp layers is its rule R6), a repeated one dropped. With a layout, the
    one plan it names (its vpp, loop-placed)."""
    pp, n = base.plan.pp, base.plan.n_layers
    if opts.layout is not None:
        plan = replan(base, PlanOptions(pp=opts.pp, cost=opts.cost, layout=opts.layout)).plan
        return [(plan, "explicit")]
    vpps = opts.vpp or tuple(range(1, n // pp + 1))
    wanted: list[tuple[int, Placement]] = []
    for vpp in sorted(set(vpps)):
        for placement in opts.placements:
            if any(_schedule_runs_on(s, vpp, placement) for s in schedules):
                wanted.append((vpp, placement))
    units = sum(pp * vpp * m for vpp, _ in wanted for m in opts.micro_batches) * len(opts.splits)
    if units > MAX_SEARCH_UNITS:
        raise UsageError(
            f"this search would time {units:,} (micro-batch, chunk) units, more than plan's "
            f"limit of {MAX_SEARCH_UNITS:,}: narrow it with --vpp, fewer or smaller "
            "--micro-batches, or --schedule"
        )
    plans: list[tuple[Plan, Split]] = []
    for vpp, placement in wanted:
        seen: set[tuple[int, ...]] = set()
        for split in opts.splits:
            options = PlanOptions(
                vpp=vpp, pp=opts.pp, placement=placement, split=split, cost=opts.cost
            )
            try:
                plan = replan(base, options).plan
            except ConversionError as e:
                short = split == "keep" and min(held_layers(base.facts.stages, pp)) < vpp
                if search.runtime == "paddle-pir" and short:
                    rule = RULE["R6"]
                    held = held_layers(base.facts.stages, pp)
                    why = f"{rule.id}: {rule.says}: {short_stage_refusal(held, vpp)}"
                    search.refused[why] += 1
                else:
                    why = f"{e}{_paddle_too(base, split, vpp)}"
                    search.refused[f"split {split} refused at vpp {vpp}: {why}"] += 1
                continue
            sizes = tuple(len(s.layers) for s in plan.segments)
            if sizes not in seen:
                seen.add(sizes)
                plans.append((plan, split))
    return plans


def _paddle_too(base: Planned, split: Split, vpp: int) -> str:
    """For keep refused on a PIR program: Paddle's completion refuses the same stages, and
    the layers per stage mesh it would take (`short_stage_refusal`)."""
    if split != "keep" or not base.index.program.is_pir:
        return ""
    held = held_layers(base.facts.stages, base.plan.pp)
    if all(n >= vpp for n in held):
        return ""
    return f"; and Paddle's PIR completion: {short_stage_refusal(held, vpp)}"


def _schedule_runs_on(schedule: Schedule, vpp: int, placement: Placement) -> bool:
    """Which (vpp, placement) each family's candidates use (module docstring; `_FAMILIES`
    says it to a person): interleaving with vpp 1 would be plain PP again."""
    if schedule in MERGED:
        return vpp == 1 and placement == "loop"
    if schedule in V_SHAPED:
        return vpp == 2 and placement == "v"
    assert schedule in LOOPED  # the three families are every schedule
    return vpp > 1 and placement == "loop"


# Each family, and the plans `_schedule_runs_on` gives its candidates, as `plan` says them.
_FAMILIES = ((V_SHAPED, "V with vpp 2"), (LOOPED, "loop with vpp > 1"), (MERGED, "vpp 1"))


def _schedules(plan: Plan, schedules: Sequence[Schedule]) -> list[Schedule]:
    return [s for s in schedules if _schedule_runs_on(s, plan.vpp, plan.placement)]


def _candidate(
    sized: SizedPlan,
    split: Split,
    schedule: Schedule,
    m: int,
    timed: Timed,
    command: tuple[str, ...],
) -> Candidate:
    pipe, group = timed
    makespan, bubble, stages = sized.time(pipe)
    plan = sized.plan
    sizes = tuple(len(s.layers) for s in plan.segments)
    return Candidate(
        vpp=plan.vpp,
        placement=plan.placement,
        split=split,
        schedule=schedule,
        micro_batches=m,
        group_size=group,
        layers_per_segment=sizes,
        makespan=makespan,
        bubble=bubble,
        p2p_messages=pipe.messages,
        memory=stages,
        command=command,
        megatron_layout=megatron_layout(sizes) if plan.placement == "loop" else None,
        hop=sized.hop,
    )


_NONE_ASKED = "no schedule runs the vpp and placements asked for ({})".format(
    "; ".join(
        f"{', '.join(s for s in SCHEDULES if s in family)}: {said}" for family, said in _FAMILIES
    )
)
_SPLIT_ORDER = {s: i for i, s in enumerate(SPLITS)}
_SCHEDULE_ORDER = {s: i for i, s in enumerate(SCHEDULES)}


def _rank(c: Candidate) -> tuple[Fraction, int, int, int, int, int, int, int]:
    return (
        c.time_per_micro_batch,
        c.worst.peak_bytes,
        c.p2p_messages,
        c.vpp,
        PLACEMENTS.index(c.placement),
        _SPLIT_ORDER[c.split],
        _SCHEDULE_ORDER[c.schedule],
        c.micro_batches,
    )


def _nothing_fits(
    over: Sequence[Candidate], refused: Counter[str], opts: PlanSearchOptions
) -> VppctlError:
    if over and opts.memory.limit is not None:
        best = min(over, key=lambda c: (c.worst.peak_bytes, _rank(c)))
        worst = best.worst
        return ConversionError(
            f"no candidate fits --memory-limit {iec(opts.memory.limit)}: the smallest peak "
            f"is {iec(worst.peak_bytes)} on stage {worst.stage} (vpp {best.vpp}, "
            f"{best.placement}, split {best.split}, {best.schedule}, m {best.micro_batches}); "
            "raise the limit, lower --micro-batch-size, or plan a program with more stages"
        )
    others = {r for r in refused if r != OVER_MAX_UNITS and not r.startswith("split ")}
    if OVER_MAX_UNITS in refused and not others:  # only sizes too large to simulate: a usage error
        return UsageError(
            f"every candidate is over the simulator's limit of {MAX_UNITS:,} units "
            "(pp*vpp*m): lower --micro-batches (the bubble depends on m relative to pp) "
            "or --vpp"
        )
    reasons = "; ".join(f"{reason} ({n}x)" for reason, n in sorted(refused.items())[:4])
    return ConversionError(
        f"no candidate to simulate: {reasons or _NONE_ASKED}; ask for other "
        "--micro-batches, --vpp, --schedule or --split values"
    )


def pir_plan_command(command: tuple[str, ...], plan: Plan, pir: PirInput) -> tuple[str, ...]:
    """For a PIR program, `command` writing the plan file (`-o`, convert's default name)
    where its split runs with `vppctl.paddle.pir_plan`; () where it needs none."""
    sizes = [len(s.layers) for s in plan.segments]
    launch = pir_split_launch(plan.pp, plan.vpp, plan.placement, sizes, pir)
    if launch.how != "pir_plan":
        return ()
    source = command[2]
    if source == "-":
        return (*command, "-o", PLAN_FILE)
    path = PurePath(source)
    name = f"{path.stem}.vpp{path.suffix}" if path.suffix else f"{path.name}.vpp"
    return (*command, "-o", str(path.with_name(name)))


def convert_command(
    source: str, plan: Plan, split: Split, opts: PlanSearchOptions
) -> tuple[str, ...]:
    """The `vppctl convert` argv that makes `plan` from `source`."""
    if split == "explicit" and opts.layout is not None:
        argv = ["vppctl", "convert", source, "--layout", opts.layout]
    else:
        argv = ["vppctl", "convert", source, "--vpp", str(plan.vpp)]
        if plan.placement != "loop":
            argv += ["--placement", plan.placement]
        argv += ["--split", split]
    if split == "balanced":
        argv += ["--cost", opts.cost]
    if opts.seg_method:
        argv += ["--seg-method", opts.seg_method]
    if opts.pp is not None:
        argv += ["--pp", str(opts.pp)]
    return tuple(argv)


def shell(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)
