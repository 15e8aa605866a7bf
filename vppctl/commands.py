"""Commands: one library call per CLI command, each returning one outcome.

Each function takes paths (`str` or `Path`; "-" is stdin or stdout) and
options, does the whole job of its command (resolve the outputs, read, run the
pipeline, write) and returns a frozen outcome that `vppctl.report` renders as
a table or JSON. Outputs are resolved before any work (`vppctl.program.files`): an
output that is an input, a trailing "/" or a missing directory is refused
before the program is read, and nothing is written on failure. The CLI parses
options, calls one of these and renders; a training script can call them
directly (they are in `vppctl.__all__`). Errors are `vppctl.errors` exceptions,
each with its exit code; running out of memory anywhere is OutOfMemoryError (exit
5), with what the command needs (`vppctl.program.memory_guarded`), and a command's
layer regexes share one time budget (`vppctl.engine.regex_budget`). Long work reports
its phases to the `progress` observer given (`vppctl.progress`); nothing is printed.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from vppctl.convert import ConvertOptions, ConvertResult, Planned, converted
from vppctl.engine import regex_budget
from vppctl.errors import ConversionError, UsageError, VppctlError
from vppctl.program import (
    STDIO,
    Output,
    Program,
    check_size,
    is_text_name,
    memory_guarded,
    parse_program,
    read_program,
    resolve_output,
    write_all,
    write_program,
)
from vppctl.progress import Observer, observing
from vppctl.summary import Summary, summarize
from vppctl.verify import VerifyReport, verify_program

if TYPE_CHECKING:  # the schedule side, the planner and the sample generator load on use
    from vppctl.plan import CostKind, Placement, Plan, Split
    from vppctl.planner import MemoryOptions, PlanRequest, PlanResult, PlanSearch, StageMemory
    from vppctl.sample import SampleOptions
    from vppctl.schedule import Schedule, SimResult

PathLike = str | os.PathLike[str]
_P = ParamSpec("_P")
_R = TypeVar("_R")


def _command(run: Callable[_P, _R]) -> Callable[_P, _R]:
    """What every command shares: one budget for all its layer regexes (a command may match
    several: its input's, a recorded plan's, its output's), and running out of memory said
    as such (exit 5, `vppctl.program.memory_guarded`)."""
    guarded = memory_guarded(run)

    @functools.wraps(run)
    def command(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with regex_budget():
            return guarded(*args, **kwargs)

    return command


def _path(p: PathLike) -> Path:
    return p if isinstance(p, Path) else Path(p)


def default_output(src: PathLike) -> str:
    """`prog.pb` -> `prog.vpp.pb` (`.vpp` before the extension); stdin -> stdout."""
    if str(src) == STDIO:
        return STDIO
    path = _path(src)
    if path.suffix:
        return str(path.with_name(f"{path.stem}.vpp{path.suffix}"))
    return str(path.with_name(f"{path.name}.vpp"))


def program_output(
    spec: PathLike, inputs: tuple[PathLike, ...] = (), fix: str = "write to another path"
) -> Output:
    """Where a program goes: protobuf text when the name ends in .pbtxt, .textproto or
    .txtpb, else binary (stdout included)."""
    return resolve_output(spec, binary=not is_text_name(spec), inputs=inputs, fix=fix)


def _refuse_input_as_output(src: Path, out: Path, fix: str) -> None:
    resolve_output(out, binary=False, inputs=(src,), fix=fix)


# -- convert ---------------------------------------------------------------------


@dataclass(frozen=True)
class Bubble:
    """The simulated bubble of the converted plan at `micro_batches`: per schedule (1F1B,
    then the interleaving schedule of the placement) the idle share of the step, with
    the program's costs (`measure`: FLOPs, or op counts without matmul shapes). The
    same figure `vppctl simulate OUT -m M` prints."""

    micro_batches: int
    measure: str
    schedules: tuple[tuple[Schedule, Fraction], ...]
    # Per schedule shown, each stage's bytes at micro-batch size 1 (`vppctl.planner.memory`).
    memory: tuple[tuple[StageMemory, ...], ...] = ()


@dataclass(frozen=True)
class ConvertOutcome:
    result: ConvertResult
    output: str  # as the user gave it ("-": stdout)
    bytes_written: int
    bubble: Bubble | None
    warnings: tuple[str, ...]  # the conversion's, the simulator's and the writer's
    to_stdout: bool = False  # the program went to stdout (`-o -`, /dev/stdout)


@_command
def convert_file(
    src: PathLike,
    out: PathLike | None,
    opts: ConvertOptions,
    *,
    in_place: bool = False,
    micro_batches: int | None = None,
    progress: Observer | None = None,
) -> ConvertOutcome:
    """Convert the program in `src` ("-": stdin) and write it to `out` (default: `src`
    with `.vpp` before the extension, stdout for stdin; `in_place`: over `src`,
    atomically, through a symbolic link to its target). Nothing is written on failure.
    With `micro_batches`, also simulate the converted plan's bubble (`outcome.bubble`); a
    micro-batch count a schedule refuses leaves that schedule out with a warning, never
    the conversion."""
    if in_place and out is not None:
        raise UsageError("--in-place writes over the input, so it takes no -o; drop one of them")
    if in_place and str(src) == STDIO:
        raise UsageError("--in-place needs a file to write over, not stdin; pass -o OUT")
    opts.plan.check()
    if in_place:
        output = program_output(src)
    else:
        fix = "pass --in-place to overwrite it, or -o another path"
        output = program_output(default_output(src) if out is None else out, (src,), fix)
    with observing(progress):
        program = read_program(src)
        result, planned = converted(program, opts)
        bubble, sim_warnings = (
            (None, ()) if micro_batches is None else _bubble(planned, micro_batches)
        )
        written, save_warnings = write_program(program, output)
    warnings = (*result.warnings, *sim_warnings, *save_warnings)
    return ConvertOutcome(result, output.shown, written, bubble, warnings, output.is_stdout)


def _bubble(planned: Planned, micro_batches: int) -> tuple[Bubble | None, tuple[str, ...]]:
    """The converted plan simulated as `simulate OUT` does it: the same plan, its costs,
    1F1B and the placement's interleaving schedule (from the conversion's own planning:
    the converted program is not planned again)."""
    from vppctl.planner import CostModel, MemoryModel, MemoryOptions, stage_memory
    from vppctl.schedule import held_peak, simulate

    plan = planned.plan
    model = CostModel(planned)
    forward = model.forward(plan)
    memory_model = MemoryModel(planned, MemoryOptions())
    segments = memory_model.segments(plan)
    sizes = [s.activations for s in segments]
    shown: list[tuple[Schedule, Fraction]] = []
    memory: list[tuple[StageMemory, ...]] = []
    warnings: list[str] = list(memory_model.warnings)
    for schedule in ("1f1b", *_interleaving(plan.placement, plan.vpp)):
        try:
            run = simulate(
                plan.pp, plan.vpp, micro_batches, schedule, forward, placement=plan.placement
            )
        except VppctlError as e:
            warnings.append(
                f"no {schedule} bubble at --micro-batches {micro_batches}: {e} (the "
                "conversion is unaffected)"
            )
            continue
        shown.append((schedule, run.bubble))
        held = held_peak(run, sizes)
        memory.append(stage_memory(plan, segments, run.peak_in_flight_per_chunk, held, None))
        warnings += run.warnings
    bubble = Bubble(micro_batches, model.measure, tuple(shown), tuple(memory))
    return bubble, tuple(dict.fromkeys(warnings))


def _interleaving(placement: Placement, vpp: int) -> tuple[Schedule, ...]:
    """The interleaving schedule a plan runs (as `compare`): interleaved 1F1B for loop
    placement, ZB-V for V with two chunks, none otherwise."""
    if vpp > 1 and placement == "loop":
        return ("interleaved",)
    if vpp == 2 and placement == "v":
        return ("zbv",)
    return ()


# -- verify, inspect -------------------------------------------------------------


@_command
def verify_file(
    path: PathLike,
    *,
    pp: int | None = None,
    vpp: int | None = None,
    seg_method: str | None = None,
    placement: Placement | None = None,
    progress: Observer | None = None,
) -> VerifyReport:
    """Check an annotated program against the numbered rules (`report.valid`)."""
    with observing(progress):
        program = read_program(path)
        return verify_program(program, pp=pp, vpp=vpp, seg_method=seg_method, placement=placement)


@_command
def inspect_file(
    path: PathLike, *, seg_method: str | None = None, progress: Observer | None = None
) -> Summary:
    """What a program holds: blocks, ops by role, meshes, stages, layers, layout."""
    with observing(progress):
        return summarize(read_program(path), seg_method)


# -- dump, sample ----------------------------------------------------------------


@dataclass(frozen=True)
class DumpOutcome:
    output: str  # as the user gave it ("-": stdout)
    bytes_written: int
    callstack_bytes_saved: int | None
    warnings: tuple[str, ...]


@_command
def dump_file(
    src: PathLike,
    out: PathLike | None = None,
    *,
    strip_callstack: bool = False,
    progress: Observer | None = None,
) -> DumpOutcome:
    """The program in `src` as protobuf text on stdout (no `out`), or written to `out`
    in the format its extension names (binary for `-o -`)."""
    if out is None:
        output = resolve_output(STDIO, binary=False, inputs=(src,))
    else:
        output = program_output(out, (src,))
    with observing(progress):
        program = read_program(src)
        saved = _strip(program) if strip_callstack else None
        written, warnings = write_program(program, output)
    return DumpOutcome(output.shown, written, saved, tuple(warnings))


def _strip(program: Program) -> int:
    from vppctl.program import strip_callstack

    return sum(strip_callstack(b) for b in program.blocks)


@dataclass(frozen=True)
class SampleOutcome:
    output: str
    bytes_written: int
    warnings: tuple[str, ...] = ()


@_command
def sample_file(opts: SampleOptions, out: PathLike) -> SampleOutcome:
    """Write the GPT-like plain-PP program `opts` describes to `out` ("-": stdout).
    A program that would be 2 GiB or more is refused from its options, before it is built."""
    from vppctl.sample import build_sample, estimate_size

    opts.check()
    output = program_output(out)
    fix = "use fewer --layers" + (" or drop --callstack" if opts.callstack else "")
    check_size(estimate_size(opts), fix=fix)
    data = build_sample(opts)
    if not output.binary:
        written, warnings = write_program(parse_program(data, source="sample"), output)
        return SampleOutcome(output.shown, written, tuple(warnings))
    check_size(len(data), fix=fix)
    output.write(data)  # already canonical bytes: written as they are
    return SampleOutcome(output.shown, len(data), tuple(output.warnings()))


# -- simulate --------------------------------------------------------------------


@dataclass(frozen=True)
class SimulatedPlan:
    """The plan a program was simulated with, and its costs."""

    plan: Plan
    recorded: bool  # the program's recorded plan (a converted program)
    split: str  # the split's name, as converted or asked
    measure: str  # "flops", or "ops" when the program has no matmul shapes
    segment_costs: tuple[int, ...]  # each segment's forward FLOPs (or ops)
    costs: tuple[Fraction, Fraction, Fraction]  # F,B,W per unit of a segment's cost

    @property
    def description(self) -> str:
        """`pp 8 x vpp 2, loop placement, split balanced (layers 4,8,9,...)`: the plan
        line of the table and the caption of the pictures."""
        p = self.plan
        source = "as converted" if self.recorded else f"split {self.split}"
        counts = counts_text([len(s.layers) for s in p.segments])
        return f"pp {p.pp} x vpp {p.vpp}, {p.placement} placement, {source} (layers {counts})"


def counts_text(counts: Sequence[int]) -> str:
    """Layer counts per segment: `7,7,9,9`; beyond 32 segments runs as `7 (x6)`."""
    if len(counts) <= 32:
        return ",".join(map(str, counts))
    parts: list[str] = []
    i = 0
    while i < len(counts):
        j = i
        while j < len(counts) and counts[j] == counts[i]:
            j += 1
        parts.append(f"{counts[i]} (x{j - i})" if j - i > 1 else str(counts[i]))
        i = j
    return ", ".join(parts)


@dataclass(frozen=True)
class SimulateOutcome:
    results: tuple[SimResult, ...]
    costs_from: str | None  # the program the costs came from
    written: tuple[tuple[str, int], ...]  # (path, bytes) of the SVG, trace and CSV files
    plan: SimulatedPlan | None = None  # with a program
    memory: tuple[tuple[StageMemory, ...], ...] = ()  # per result, with a program
    memory_options: MemoryOptions | None = None
    warnings: tuple[str, ...] = ()  # the plan's, the memory model's and the simulator's


@_command
def simulate_run(
    prog: PathLike | None,
    *,
    micro_batches: int,
    pp: int | None = None,
    vpp: int | None = None,
    schedule: Schedule | None = None,
    group_size: int | None = None,
    costs: str | tuple[Fraction, Fraction, Fraction] | None = None,
    placement: Placement | None = None,
    split: Split | None = None,
    layers_per_chunk: Sequence[int] = (),
    cost: CostKind | None = None,
    seg_method: str | None = None,
    p2p_cost: float = 0.0,
    memory: MemoryOptions | None = None,
    svg: PathLike | None = None,
    trace: PathLike | None = None,
    csv: PathLike | None = None,
    svg_width: int | None = None,
    progress: Observer | None = None,
) -> SimulateOutcome:
    """Simulate one training step and write the pictures (the SVG at most `svg_width`
    px wide, default a page's width, captioned with the plan simulated).

    With `prog`, the plan is the one `convert` makes with the same options (a converted
    program: its recorded plan, so `vpp` is not needed), costs are its segments'
    forward FLOPs, and `outcome.memory` holds each stage's bytes. Without it, `pp` and
    `vpp` are required and every chunk costs `costs` (F,B,W; default 1,1,1). `schedule`
    None compares 1F1B with the plan's interleaving schedule."""
    from vppctl.planner import MemoryOptions, PlanRequest
    from vppctl.schedule import GROUPED, parse_unit_costs
    from vppctl.schedule import check_size as check_simulation_size

    outputs = _picture_outputs(prog, {"--svg": svg, "--trace": trace, "--csv": csv})
    ratios = parse_unit_costs(costs) if isinstance(costs, str) else costs or _UNIT_COSTS
    if schedule is not None and group_size is not None and schedule not in GROUPED:
        raise UsageError(
            f"--group-size is the interleaved schedules' (interleaved, interleaved-zb); "
            f"--schedule {schedule} takes none: drop --group-size"
        )
    run = _StepOptions(micro_batches, schedule, group_size, ratios, p2p_cost)
    if prog is not None:
        request = PlanRequest(vpp, pp, placement, split, tuple(layers_per_chunk), cost, seg_method)
        with observing(progress):
            outcome = _simulate_program(prog, request, run, memory or MemoryOptions())
        assert outcome.plan is not None  # a program's simulation always has its plan
        drawing = _Drawing(
            svg_width,
            f"{prog}, plan {outcome.plan.description}",
            "time (1 = the mean stage's forward of one micro-batch)",
        )
        written = tuple(_pictures(outcome.results, outputs, drawing))
        warnings = (*outcome.warnings, *_link_warnings(outputs))
        return replace(outcome, written=written, warnings=warnings)
    program_only = {
        "--split": split,
        "--layers-per-chunk": layers_per_chunk,
        "--cost": cost,
        "--seg-method": seg_method,
        "memory options": memory,
    }
    given = [flag for flag, value in program_only.items() if value]
    if given:
        raise UsageError(
            f"{', '.join(given)} describe a program's plan or memory: pass the program, or "
            "drop them"
        )
    if pp is None:
        raise UsageError("--pp is required without a program")
    if vpp is None:
        raise UsageError("--vpp is required without a program")
    check_simulation_size(pp, vpp, micro_batches)  # before cost lists of pp * vpp entries
    f, b, w = ratios
    n = pp * vpp
    unit = None if costs is None else ([f] * n, [b] * n, [w] * n)
    runs = _runs(pp, vpp, placement, unit, run)
    drawing = _Drawing(
        svg_width,
        f"plan pp {pp} x vpp {vpp}, {runs[-1].placement} placement, every chunk F,B,W = "
        + ",".join(str(x) for x in ratios),
        "time (1 = the unit of --costs)",
    )
    written = tuple(_pictures(runs, outputs, drawing))
    warnings = (*_run_warnings(runs), *_link_warnings(outputs))
    return SimulateOutcome(runs, None, written, warnings=warnings)


@dataclass(frozen=True)
class _Drawing:
    """How the SVG is drawn: its width bound (None: a page), caption and time unit."""

    width: int | None
    caption: str
    unit: str


_UNIT_COSTS = (Fraction(1), Fraction(1), Fraction(1))


@dataclass(frozen=True)
class _StepOptions:
    """What to simulate on a plan: the step and the schedule options."""

    micro_batches: int
    schedule: Schedule | None
    group_size: int | None
    ratios: tuple[Fraction, Fraction, Fraction]  # F,B,W
    p2p_cost: float


def _simulate_program(
    prog: PathLike, request: PlanRequest, run: _StepOptions, opts: MemoryOptions
) -> SimulateOutcome:
    """A program simulated with the plan `convert` would make (or made), its FLOP costs
    and its bytes per stage."""
    from vppctl.planner import CostModel, MemoryModel, resolve_plan, stage_memory
    from vppctl.schedule import held_peak

    resolved = resolve_plan(read_program(prog), request)
    plan = resolved.plan
    model = CostModel(resolved.planned)
    forward = model.forward(plan)
    f, b, w = run.ratios
    costs = ([c * f for c in forward], [c * b for c in forward], [c * w for c in forward])
    runs = _runs(plan.pp, plan.vpp, plan.placement, costs, run)
    memory_model = MemoryModel(resolved.planned, opts)
    segments = memory_model.segments(plan)
    sizes = [s.activations for s in segments]
    stages = tuple(
        stage_memory(plan, segments, r.peak_in_flight_per_chunk, held_peak(r, sizes), opts.limit)
        for r in runs
    )
    simulated = SimulatedPlan(
        plan, resolved.recorded, resolved.split, model.measure, model.segments(plan), run.ratios
    )
    warnings = (*resolved.warnings, *memory_model.warnings, *_run_warnings(runs))
    return SimulateOutcome(runs, str(prog), (), simulated, stages, opts, warnings)


def _runs(
    pp: int,
    vpp: int,
    placement: Placement | None,
    costs: tuple[Sequence[Fraction], Sequence[Fraction], Sequence[Fraction]] | None,
    run: _StepOptions,
) -> tuple[SimResult, ...]:
    """One schedule, or 1F1B and the placement's interleaving schedule side by side."""
    from vppctl.schedule import compare, simulate

    forward, backward, weight = costs if costs is not None else (None, None, None)
    m, hop, group = run.micro_batches, run.p2p_cost, run.group_size
    if run.schedule is not None:
        one = simulate(
            pp, vpp, m, run.schedule, forward, backward, hop,
            weight=weight, placement=placement, group_size=group,
        )  # fmt: skip
        return (one,)
    if group is not None and _interleaving(placement or "loop", vpp) != ("interleaved",):
        raise UsageError(
            "--group-size is Megatron's interleaved schedule's, and this plan runs none "
            "(it needs vpp > 1 and loop placement): drop --group-size"
        )
    return compare(
        pp, vpp, m, forward, backward, hop,
        weight=weight, group_size=group, placement=placement or "loop",
    )  # fmt: skip


def _run_warnings(runs: Sequence[SimResult]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(w for r in runs for w in r.warnings))


def _picture_outputs(prog: PathLike | None, specs: dict[str, PathLike | None]) -> dict[str, Output]:
    """The picture files, resolved before any work: none may be the input program, and no
    two may be the same file."""
    outputs: dict[str, Output] = {}
    inputs = () if prog is None else (prog,)
    for flag, spec in specs.items():
        if spec is None:
            continue
        output = resolve_output(spec, binary=False, inputs=inputs, fix="write to another path")
        for other, earlier in outputs.items():
            if output.kind == "file" and output.target == earlier.target:
                raise UsageError(f"{other} and {flag} name the same file {spec}; give each its own")
            if output.is_stdout and earlier.is_stdout:  # one stream cannot hold two documents
                raise UsageError(
                    f"{other} and {flag} both write to stdout; give one of them a file"
                )
        outputs[flag] = output
    return outputs


def _pictures(
    runs: tuple[SimResult, ...], outputs: dict[str, Output], drawing: _Drawing
) -> list[tuple[str, int]]:
    """Every schedule simulated as SVG and Chrome trace; the last as torch's schedule CSV."""
    from vppctl.schedule import DEFAULT_WIDTH, to_chrome_trace, to_csv, to_svg

    draw = {
        "--svg": lambda: to_svg(
            runs,
            width=drawing.width or DEFAULT_WIDTH,
            caption=drawing.caption,
            unit=drawing.unit,
        ),
        "--trace": lambda: json.dumps(to_chrome_trace(runs)),
        "--csv": lambda: to_csv(runs[-1].orders),
    }
    drawn = [(output, draw[flag]().encode()) for flag, output in outputs.items()]
    write_all(drawn)  # all or nothing: no file is replaced unless every output was written
    return [(output.shown, len(data)) for output, data in drawn]


def _link_warnings(outputs: dict[str, Output]) -> tuple[str, ...]:
    return tuple(w for output in outputs.values() for w in output.warnings())


# -- plan ------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanOutcome:
    source: str
    search: PlanSearch
    result: PlanResult


class NoConversionFits(ConversionError):
    """`plan_run` found no candidate that fits (exit 4); `outcome` is what it searched:
    no candidates, those over the memory limit and what was refused."""

    def __init__(self, message: str, outcome: PlanOutcome) -> None:
        super().__init__(message)
        self.outcome = outcome


@_command
def plan_run(
    prog: PathLike,
    *,
    micro_batches: Sequence[int],
    pp: int | None = None,
    vpp: Sequence[int] = (),
    placements: Sequence[Placement] = (),
    splits: Sequence[Split] = (),
    schedules: Sequence[Schedule] = (),
    cost: CostKind = "flops",
    seg_method: str | None = None,
    p2p_cost: float = 0.0,
    memory: MemoryOptions | None = None,
    progress: Observer | None = None,
) -> PlanOutcome:
    """Search the conversions of `prog` (vpp, placement, split, schedule, micro-batches)
    for the fastest step that fits `memory.limit`; candidates best first, each with the
    `vppctl convert` command that makes it (none for a PIR program: `result.pir` says what
    Paddle's PIR completion reads, and each candidate's Paddle launch settings are its PIR
    strategy). Raises NoConversionFits (a ConversionError, exit 4) when none fits, naming
    the smallest peak found."""
    from vppctl.choices import PLACEMENTS, SEARCHED_SPLITS
    from vppctl.planner import MemoryOptions, NoPlanFits, PlanSearch, search_plans
    from vppctl.schedule import SCHEDULES

    opts = PlanSearch(
        micro_batches=tuple(micro_batches),
        pp=pp,
        vpp=tuple(vpp),
        placements=tuple(placements) or PLACEMENTS,
        splits=tuple(splits) or SEARCHED_SPLITS,
        schedules=tuple(schedules) or SCHEDULES,
        cost=cost,
        seg_method=seg_method,
        p2p_cost=_exact_cost(p2p_cost),
        memory=memory or MemoryOptions(),
    )
    with observing(progress):
        program = read_program(_path(prog))
        try:
            return PlanOutcome(str(prog), opts, search_plans(program, str(prog), opts))
        except NoPlanFits as e:
            raise NoConversionFits(str(e), PlanOutcome(str(prog), opts, e.result)) from None


def _exact_cost(value: float) -> Fraction:
    if value < 0 or value != value or value == float("inf"):
        raise UsageError(f"--p2p-cost must be a finite number >= 0, got {value}")
    return Fraction(repr(value)) if isinstance(value, float) else Fraction(value)
