"""Commands: one library call per CLI command, each returning one outcome.

Every call has one shape: its inputs (paths, `str` or `Path`; "-" is stdin or stdout),
then its output (a path, or for `simulate_run` the `Pictures` to draw; None where it
has a default), then one options object named for the command (`ConvertOptions`,
`VerifyOptions`, ...; the same `PlanOptions` and `MemoryOptions` inside wherever that
concept is), then the keyword `progress`. It does the whole job of its command
(resolve the outputs, read, run the pipeline, write) and returns a frozen outcome
(`vppctl.outcomes`) whose `to_json()` is the command's `--json`. Options are checked
when they are made, and outputs are resolved before any work (`vppctl.program.destinations`):
an output that is an input, a trailing "/" or a missing directory is refused before
the program is read, and nothing is written on failure. The CLI builds the same
options, calls one of these and renders; a training script calls them directly (they
are in `vppctl.__all__`). Errors are `vppctl.errors` exceptions, each with its exit
code; one worded in the command line's flags carries a note naming the API's fields
(`--split` is `ConvertOptions.plan.split`; `vppctl.validate.api_names`). Running out of
memory anywhere is OutOfMemoryError (exit 5), with what the command needs
(`vppctl.program.memory_guarded`), and a command's layer regexes share one time budget
(`vppctl.engine.regex_budget`). Long work reports its phases to the `progress` observer
given (`vppctl.progress`); nothing is printed.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, ParamSpec, TypeVar

from vppctl import outcomes, planner, sample, schedule, validate
from vppctl.choices import MAX_SVG_WIDTH, MIN_SVG_WIDTH
from vppctl.convert import ConvertOptions, converted
from vppctl.engine import regex_budget
from vppctl.errors import UsageError
from vppctl.outcomes import ConvertOutcome, DumpOutcome, SampleOutcome
from vppctl.plan import PirPlan
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
    strip_callstack,
    write_all,
    write_program,
    write_serialized,
)
from vppctl.progress import Observer, observing
from vppctl.summary import InspectOptions, Summary, summarize
from vppctl.verify import VerifyOptions, VerifyReport, verify_program

if TYPE_CHECKING:  # the schedule side, the planner and the sample generator load on use
    from vppctl.outcomes import PlanOutcome, SimulateOutcome
    from vppctl.planner import PlanSearchOptions, SimulateOptions
    from vppctl.sample import SampleOptions
    from vppctl.schedule import SimResult

PathLike = str | os.PathLike[str]
_OUT = {"-o": "out", "--output": "out"}  # the command line's flag of a call's `out`
_P = ParamSpec("_P")
_R = TypeVar("_R")


def _command(source: str | None) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """What every command shares: one budget for all its layer regexes (a command may match
    several: its input's, a recorded plan's, its output's), and running out of memory said
    as such (exit 5, `vppctl.program.memory_guarded`), sized from the program its parameter
    `source` names (None: it reads none)."""

    def wrap(run: Callable[_P, _R]) -> Callable[_P, _R]:
        guarded = memory_guarded(run, source)

        @functools.wraps(run)
        def command(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            with regex_budget():
                return guarded(*args, **kwargs)

        return command

    return wrap


def _flags_on_use(
    options: Callable[[], list[tuple[type, str]]], outputs: Mapping[str, str] | None = None
) -> Callable[[], dict[str, str]]:
    """`validate.flags_of` for options classes of a package that loads on use (the
    planner, the sample generator): named when the first error asks, not at import."""
    return functools.cache(lambda: validate.flag_table(options(), outputs or {}))


def _options(call: str, options: object, kind: type[validate.Options]) -> None:
    """Refuse options of the wrong kind (a `PlanOptions` where `ConvertOptions` belongs)."""
    if not isinstance(options, kind):
        raise UsageError(validate.wrong_options(call, kind.__name__, options))


def _order(
    call: str,
    params: str,
    given: Mapping[str, object],
    kinds: Mapping[str, type],
    hint: str = "",
) -> None:
    """An options object given where another argument goes (`convert_file(src, options,
    out)`): say the order, not that the options are of the wrong kind."""
    for name, value in given.items():
        for slot, kind in kinds.items():
            if slot != name and isinstance(value, kind):
                raise UsageError(
                    f"the arguments of {call}{params} are in the wrong order: the "
                    f"{kind.__name__} came as {name}, and it is {slot}" + hint
                )


def _paths(call: str, **paths: object) -> None:
    """Refuse, before any work, what cannot be a file name (`validate.file_name`: bytes, a
    Program, a NUL, an unencodable surrogate): a UsageError or ProgramFileError."""
    for name, value in paths.items():
        if value is not None:
            validate.file_name(value, f"{call}'s {name}")


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


# -- convert ---------------------------------------------------------------------


@validate.api_names(validate.flags_of((ConvertOptions, "ConvertOptions"), outputs=_OUT))
@_command("src")
def convert_file(
    src: PathLike,
    out: PathLike | None,
    options: ConvertOptions,
    *,
    progress: Observer | None = None,
) -> ConvertOutcome:
    """Convert the program in `src` ("-": stdin) and write it to `out` (None: `src` with
    `.vpp` before the extension, stdout for stdin; with `options.in_place`: over `src`,
    atomically, through a symbolic link to its target). Nothing is written on failure.
    With `options.micro_batches`, also simulate the converted plan's bubble
    (`outcome.bubble`); a micro-batch count a schedule refuses leaves that schedule out
    with a warning, never the conversion. With `options.moves`, also write there (JSON,
    with the program, all or nothing) every parameter's (stage, chunk) before and after,
    and its bytes: the map that remaps a checkpoint (`outcome.result.moves`).

    A PIR program (Paddle 3.x JSON) is converted in memory, and what is written is the
    plan Paddle's PIR completion follows under `vppctl.paddle.pir_plan`
    (`outcome.result.pir_plan`, JSON: vppctl/report/schemas/pir-plan.json); it takes no
    `in_place`, `strip_callstack` or `moves`."""
    _order(
        "convert_file", "(src, out, options)", {"src": src, "out": out}, {"options": ConvertOptions}
    )
    _paths("convert_file", src=src, out=out)
    _options("convert_file", options, ConvertOptions)
    in_place = options.in_place
    if in_place and out is not None:
        raise UsageError("--in-place writes over the input, so it takes no -o; drop one of them")
    if in_place and str(src) == STDIO:
        raise UsageError("--in-place needs a file to write over, not stdin; pass -o OUT")
    if in_place:
        output = program_output(src)
    else:
        fix = "pass --in-place to overwrite it, or -o another path"
        output = program_output(default_output(src) if out is None else out, (src,), fix)
    moves = options.moves
    moves_output = None if moves is None else _moves_output(moves, src, output)
    micro_batches = options.micro_batches
    costs = _measured(options.costs_from, src)
    with observing(progress):
        program = read_program(src)
        if program.is_pir:
            _plan_only(options)
        result, planned = converted(program, options)
        bubble, sim_warnings = (
            (None, ())
            if micro_batches is None
            else planner.converted_bubble(
                planned,
                micro_batches,
                options.runtime or "paddle",
                options.p2p_cost,
                options.link,
                costs,
                options.fill,
            )
        )
        beside = []
        if moves_output is not None:
            document = outcomes.moves_document(result, str(src), output.shown)
            beside.append((moves_output, (json.dumps(document, indent=1) + "\n").encode()))
        if result.pir_plan is None:
            written, save_warnings = write_program(program, output, beside=beside)
        else:
            written, save_warnings = _write_pir_plan(result.pir_plan, output)
    warnings = (*result.warnings, *sim_warnings, *save_warnings)
    moves_written = None
    if moves_output is not None:
        warnings += tuple(moves_output.warnings())
        moves_written = (moves_output.shown, len(beside[0][1]))
    return ConvertOutcome(
        result, output.shown, written, bubble, warnings, output.is_stdout, moves_written
    )


def _moves_output(spec: PathLike, src: PathLike, program: Output) -> Output:
    """Where `--moves` goes: JSON, never the input, the program's file, or stdout beside a
    program on stdout."""
    output = resolve_output(spec, binary=False, inputs=(src,), fix="write to another path")
    if output.same_file(program):
        raise UsageError(f"-o and --moves name the same file {spec}; give each its own")
    if output.is_stdout and program.is_stdout:
        raise UsageError("-o and --moves both write to stdout; give one of them a file")
    return output


def _measured(costs_from: PathLike | None, prog: PathLike | None) -> Any:
    """The measured costs `--costs-from` names, read before the program (a malformed file
    fails first); None without it. It and the program cannot both be stdin."""
    if costs_from is None:
        return None
    if str(costs_from) == STDIO and prog is not None and str(prog) == STDIO:
        raise UsageError("the program and --costs-from both read stdin; give one of them a file")
    return planner.read_costs(str(costs_from))


def _plan_only(options: ConvertOptions) -> None:
    """Refuse what a PIR program's conversion cannot do: it writes a plan file, not the
    program."""
    for name, why in (
        ("in_place", "writes over the input, and a PIR program's conversion writes a plan file"),
        (
            "strip_callstack",
            "drops attributes from the program written, and a PIR program's "
            "conversion writes a plan file",
        ),
        (
            "moves",
            "maps a checkpoint of the program written, and a PIR program's conversion writes "
            "a plan file (Paddle places the parameters in its own build)",
        ),
    ):
        if getattr(options, name):
            raise UsageError(
                f"{validate.where(options, name)} {why} (for vppctl.paddle.pir_plan), not the "
                "program: drop it, and name the plan with -o PLAN.json"
            )


def _write_pir_plan(plan: PirPlan, output: Output) -> tuple[int, list[str]]:
    """The plan file, as `PirPlan.dumps` gives it (deterministic JSON)."""
    data = plan.dumps().encode()
    output.write(data)
    return len(data), output.warnings()


# -- verify, inspect -------------------------------------------------------------


@validate.api_names(validate.flags_of((VerifyOptions, "VerifyOptions")))
@_command("path")
def verify_file(
    path: PathLike, options: VerifyOptions | None = None, *, progress: Observer | None = None
) -> VerifyReport:
    """Check an annotated program against the numbered rules (`report.valid`); every
    violation found is in the report (a program with violations is not an error)."""
    _order("verify_file", "(path, options)", {"path": path}, {"options": VerifyOptions})
    _paths("verify_file", path=path)
    options = VerifyOptions() if options is None else options
    _options("verify_file", options, VerifyOptions)
    plan = options.plan
    if str(path) == STDIO and isinstance(plan, (str, os.PathLike)) and os.fspath(plan) == STDIO:
        raise UsageError("the program and --plan cannot both be read from stdin; name a file")
    with observing(progress):
        program = read_program(path)
        return verify_program(program, options)


@validate.api_names(validate.flags_of((InspectOptions, "InspectOptions")))
@_command("path")
def inspect_file(
    path: PathLike, options: InspectOptions | None = None, *, progress: Observer | None = None
) -> Summary:
    """What a program holds: blocks, ops by role, meshes, stages, layers, layout."""
    _order("inspect_file", "(path, options)", {"path": path}, {"options": InspectOptions})
    _paths("inspect_file", path=path)
    options = InspectOptions() if options is None else options
    _options("inspect_file", options, InspectOptions)
    with observing(progress):
        return summarize(read_program(path), options.seg_method)


# -- dump, sample ----------------------------------------------------------------


@validate.named_fields
@dataclass(frozen=True)
class DumpOptions:
    """What `dump` is asked. Checked when made (UsageError, exit 2)."""

    strip_callstack: bool = False  # drop op_callstack attributes

    FLAGS: ClassVar[Mapping[str, str]] = {"strip_callstack": "--strip-callstack"}

    def __post_init__(self) -> None:
        validate.flag(self, "strip_callstack")


@validate.api_names(validate.flags_of((DumpOptions, "DumpOptions"), outputs=_OUT))
@_command("src")
def dump_file(
    src: PathLike,
    out: PathLike | None = None,
    options: DumpOptions | None = None,
    *,
    progress: Observer | None = None,
) -> DumpOutcome:
    """The program in `src` as protobuf text on stdout (no `out`), or written to `out`
    in the format its extension names (binary for `-o -`)."""
    _order("dump_file", "(src, out, options)", {"src": src, "out": out}, {"options": DumpOptions})
    _paths("dump_file", src=src, out=out)
    options = DumpOptions() if options is None else options
    _options("dump_file", options, DumpOptions)
    if out is None:
        output = resolve_output(STDIO, binary=False, inputs=(src,))
    else:
        output = program_output(out, (src,))
    with observing(progress):
        program = read_program(src)
        saved = _strip(program) if options.strip_callstack else None
        written, warnings = write_program(program, output)
    return DumpOutcome(output.shown, written, saved, tuple(warnings))


def _strip(program: Program) -> int:
    return sum(strip_callstack(b) for b in program.blocks)


@validate.api_names(_flags_on_use(lambda: [(sample.SampleOptions, "SampleOptions")], _OUT))
@_command(None)
def sample_file(
    out: PathLike, options: SampleOptions, *, progress: Observer | None = None
) -> SampleOutcome:
    """Write the GPT-like plain-PP program `options` describes to `out` ("-": stdout).
    A program that would be 2 GiB or more is refused from its options, before it is built."""
    if isinstance(out, sample.SampleOptions):  # the order of vppctl 0.2
        raise UsageError("sample_file takes the output first: sample_file(out, SampleOptions(...))")
    _paths("sample_file", out=out)
    _options("sample_file", options, sample.SampleOptions)
    output = program_output(out)
    fix = "use fewer --layers" + (" or drop --callstack" if options.callstack else "")
    check_size(sample.estimate_size(options), fix=fix)
    with observing(progress):
        data = sample.build_sample(options)
        if not output.binary:
            written, warnings = write_program(parse_program(data, source="sample"), output)
            return SampleOutcome(output.shown, written, tuple(warnings))
        check_size(len(data), fix=fix)
        written, warnings = write_serialized(data, output)  # canonical bytes, as they are
    return SampleOutcome(output.shown, written, tuple(warnings))


# -- simulate --------------------------------------------------------------------


@validate.named_fields
@dataclass(frozen=True)
class Pictures:
    """The files `simulate` draws (each None: not drawn; "-": stdout) and the SVG's width
    bound (None: a page's)."""

    svg: PathLike | None = None  # every schedule simulated, as SVG
    trace: PathLike | None = None  # a Chrome trace JSON of every schedule
    csv: PathLike | None = None  # the last schedule's orders as torch's schedule CSV
    svg_width: int | None = None  # pixels

    FLAGS: ClassVar[Mapping[str, str]] = {
        "svg": "--svg",
        "trace": "--trace",
        "csv": "--csv",
        "svg_width": "--width",
    }

    def __post_init__(self) -> None:
        for name in ("svg", "trace", "csv"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, (str, os.PathLike)):
                raise validate.refuse(self, name, "a path (str or os.PathLike), '-' or None")
            if value is not None:  # a name no file can have (a NUL): refused when made
                validate.file_name(value, validate.where(self, name))
        validate.integer(self, "svg_width", MIN_SVG_WIDTH, MAX_SVG_WIDTH, optional=True)


@validate.api_names(
    _flags_on_use(lambda: [(planner.SimulateOptions, "SimulateOptions"), (Pictures, "Pictures")])
)
@_command("prog")
def simulate_run(
    prog: PathLike | None,
    pictures: Pictures | None,
    options: SimulateOptions | None = None,  # required: None is refused, saying so
    *,
    progress: Observer | None = None,
) -> SimulateOutcome:
    """Simulate one training step and draw the `pictures` asked for (the SVG captioned
    with the plan simulated).

    With `prog`, the plan is the one `convert` makes with the same options (a converted
    program: its recorded plan, so `options.plan.vpp` is not needed), costs are its
    segments' forward FLOPs, and `outcome.memory` holds each stage's bytes. Without it,
    every chunk costs `options.costs`. `options.schedule` None compares 1F1B with the
    runtime's schedule that interleaves the plan; `options.runtime` None is the program's
    own runtime (`any` without one), whose rules refuse what it would refuse (exit 2)."""
    _order(
        "simulate_run",
        "(prog, pictures, options)",
        {"prog": prog, "pictures": pictures, "options": options},
        {"pictures": Pictures, "options": planner.SimulateOptions},
        "; pass pictures=None to draw nothing",
    )
    _paths("simulate_run", prog=prog)
    if options is None:
        raise UsageError(
            "simulate_run(prog, pictures, options) needs its options: "
            "simulate_run(prog, None, SimulateOptions(micro_batches=8, ...))"
        )
    pictures = Pictures() if pictures is None else pictures
    _options("simulate_run", pictures, Pictures)
    _options("simulate_run", options, planner.SimulateOptions)
    outputs = _picture_outputs(
        prog, {"--svg": pictures.svg, "--trace": pictures.trace, "--csv": pictures.csv}
    )
    costs = _measured(options.costs_from, prog)
    seconds = costs is not None
    if prog is not None:
        with observing(progress):
            found = planner.simulate_program(read_program(prog), options, costs)
        assert found.plan is not None  # a program's simulation always has its plan
        drawing = _Drawing(
            pictures.svg_width,
            f"{prog}, plan {found.plan.description}"
            + (f", measured costs from {costs_from(found)}" if seconds else ""),
            "time (seconds)"
            if seconds
            else "time (1 = the mean stage's forward of one micro-batch)",
            seconds,
        )
        written = tuple(_pictures(found.results, outputs, drawing))
        warnings = (
            *found.warnings,
            *outcomes.simulation_warnings(found.results),
            *_link_warnings(outputs),
        )
        return outcomes.SimulateOutcome(
            found.results,
            str(prog),
            written,
            found.plan,
            found.memory,
            found.memory_options,
            warnings,
            runtime=found.runtime,
            hop=found.hop,
            measured=found.measured,
            measured_step=found.measured_step,
        )
    found = planner.simulate_counts(options, costs)
    runs = found.results
    pp, vpp = runs[-1].pp, runs[-1].plan_vpp
    where = f"plan pp {pp} x vpp {vpp}, {runs[-1].placement} placement, "
    drawing = _Drawing(
        pictures.svg_width,
        where
        + (
            f"measured costs from {costs_from(found)}"
            if seconds
            else "every chunk F,B,W = " + ",".join(str(x) for x in planner.cost_ratios(options))
        ),
        "time (seconds)" if seconds else "time (1 = the unit of --costs)",
        seconds,
    )
    written = tuple(_pictures(runs, outputs, drawing))
    warnings = (*outcomes.simulation_warnings(runs), *_link_warnings(outputs))
    return outcomes.SimulateOutcome(
        runs,
        None,
        written,
        warnings=warnings,
        runtime=found.runtime,
        hop=found.hop,
        measured=found.measured,
        measured_step=found.measured_step,
    )


def costs_from(found: planner.Simulation) -> str:
    """The measured costs' path, as the pictures' caption names it."""
    assert found.measured is not None
    return found.measured.source.path


@dataclass(frozen=True)
class _Drawing:
    """How the SVG is drawn: its width bound (None: a page), caption and time unit, and
    whether times are seconds (measured costs: the Chrome trace shows them as they are)."""

    width: int | None
    caption: str
    unit: str
    seconds: bool = False


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
            if output.same_file(earlier):
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
    draw = {
        "--svg": lambda: schedule.to_svg(
            runs,
            width=drawing.width or schedule.DEFAULT_WIDTH,
            caption=drawing.caption,
            unit=drawing.unit,
        ),
        "--trace": lambda: json.dumps(schedule.to_chrome_trace(runs, seconds=drawing.seconds)),
        "--csv": lambda: schedule.to_csv(runs[-1].orders),
    }
    drawn = [(output, draw[flag]().encode()) for flag, output in outputs.items()]
    write_all(drawn)  # all or nothing: no file is replaced unless every output was written
    return [(output.shown, len(data)) for output, data in drawn]


def _link_warnings(outputs: dict[str, Output]) -> tuple[str, ...]:
    return tuple(w for output in outputs.values() for w in output.warnings())


# -- plan ------------------------------------------------------------------------


@validate.api_names(_flags_on_use(lambda: [(planner.PlanSearchOptions, "PlanSearchOptions")]))
@_command("prog")
def plan_run(
    prog: PathLike, options: PlanSearchOptions, *, progress: Observer | None = None
) -> PlanOutcome:
    """Search the conversions of `prog` (vpp, placement, split, schedule, micro-batches)
    for the fastest step that fits `options.memory.limit`; candidates best first, each
    with the `vppctl convert` command that makes it (none for a PIR program: `result.pir`
    says what Paddle's PIR completion reads, and each candidate's Paddle launch settings
    are its PIR strategy). Raises NoConversionFits (a ConversionError, exit 4) when none
    fits, naming the smallest peak found; its `outcome` is what was searched."""
    _order("plan_run", "(prog, options)", {"prog": prog}, {"options": planner.PlanSearchOptions})
    _paths("plan_run", prog=prog)
    _options("plan_run", options, planner.PlanSearchOptions)
    costs = _measured(options.costs_from, prog)
    with observing(progress):
        program = read_program(_path(prog))
        source = str(prog)
        try:
            found = planner.search_plans(program, source, options, costs)
        except planner.NoPlanFits as e:
            searched = outcomes.PlanOutcome(source, options, e.result)
            raise outcomes.NoConversionFits(str(e), searched) from None
        return outcomes.PlanOutcome(source, options, found)
