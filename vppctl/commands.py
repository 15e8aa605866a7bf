"""Commands: one library call per CLI command, each returning one outcome.

Each function takes paths (`str` or `Path`; "-" is stdin or stdout) and
options, does the whole job of its command (resolve the outputs, read, run the
pipeline, write) and returns a frozen outcome that `vppctl.report` renders as
a table or JSON. Outputs are resolved before any work (`vppctl.files`): an
output that is an input, a trailing "/" or a missing directory is refused
before the program is read, and nothing is written on failure. The CLI parses
options, calls one of these and renders; a training script can call them
directly (they are in `vppctl.__all__`). Errors are `vppctl.errors` exceptions,
each with its exit code.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from vppctl.convert import ConvertOptions, ConvertResult, convert_program
from vppctl.errors import UsageError
from vppctl.expectation import VerifyReport, verify_program
from vppctl.files import STDIO, Output, resolve_output
from vppctl.load import Program, is_text_name, parse_program, read_program
from vppctl.plan import Placement
from vppctl.sample import SampleOptions, build_sample, estimate_size
from vppctl.save import check_size, write_atomic, write_program
from vppctl.schedule.simulate import Schedule, SimResult, compare, simulate
from vppctl.summary import Summary, summarize

PathLike = str | os.PathLike[str]


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
    """Simulated idle share of the step, 1F1B and interleaved 1F1B (unit costs)."""

    one_f_one_b: float
    interleaved: float


@dataclass(frozen=True)
class ConvertOutcome:
    result: ConvertResult
    output: str  # as the user gave it ("-": stdout)
    bytes_written: int
    bubble: Bubble | None
    warnings: tuple[str, ...]  # the conversion's, the simulator's and the writer's

    @property
    def to_stdout(self) -> bool:
        return self.output == STDIO


def convert_file(
    src: PathLike,
    out: PathLike | None,
    opts: ConvertOptions,
    *,
    in_place: bool = False,
    micro_batches: int | None = None,
) -> ConvertOutcome:
    """Convert the program in `src` ("-": stdin) and write it to `out` (default: `src`
    with `.vpp` before the extension, stdout for stdin; `in_place`: over `src`,
    atomically, through a symbolic link to its target). Nothing is written on failure."""
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
    program = read_program(src)
    result = convert_program(program, opts)
    bubble, sim_warnings = (None, ()) if micro_batches is None else _bubble(result, micro_batches)
    written, save_warnings = write_program(program, output)
    warnings = (*result.warnings, *sim_warnings, *save_warnings)
    return ConvertOutcome(result, output.shown, written, bubble, warnings)


def _bubble(result: ConvertResult, micro_batches: int) -> tuple[Bubble, tuple[str, ...]]:
    runs = compare(result.plan.pp, result.plan.vpp, micro_batches)
    warnings = tuple(dict.fromkeys(w for r in runs for w in r.warnings))
    return Bubble(float(runs[0].bubble), float(runs[-1].bubble)), warnings


# -- verify, inspect -------------------------------------------------------------


def verify_file(
    path: PathLike,
    *,
    pp: int | None = None,
    vpp: int | None = None,
    seg_method: str | None = None,
    placement: Placement | None = None,
) -> VerifyReport:
    """Check an annotated program against the numbered rules (`report.valid`)."""
    program = read_program(path)
    return verify_program(program, pp=pp, vpp=vpp, seg_method=seg_method, placement=placement)


def inspect_file(path: PathLike, *, seg_method: str | None = None) -> Summary:
    """What a program holds: blocks, ops by role, meshes, stages, layers, layout."""
    return summarize(read_program(path), seg_method)


# -- dump, sample ----------------------------------------------------------------


@dataclass(frozen=True)
class DumpOutcome:
    output: str  # as the user gave it ("-": stdout)
    bytes_written: int
    callstack_bytes_saved: int | None
    warnings: tuple[str, ...]


def dump_file(
    src: PathLike, out: PathLike | None = None, *, strip_callstack: bool = False
) -> DumpOutcome:
    """The program in `src` as protobuf text on stdout (no `out`), or written to `out`
    in the format its extension names (binary for `-o -`)."""
    if out is None:
        output = resolve_output(STDIO, binary=False, inputs=(src,))
    else:
        output = program_output(out, (src,))
    program = read_program(src)
    saved = _strip(program) if strip_callstack else None
    written, warnings = write_program(program, output)
    return DumpOutcome(output.shown, written, saved, tuple(warnings))


def _strip(program: Program) -> int:
    from vppctl.fields import strip_callstack

    return sum(strip_callstack(b) for b in program.blocks)


@dataclass(frozen=True)
class SampleOutcome:
    output: str
    bytes_written: int


def sample_file(opts: SampleOptions, out: PathLike) -> SampleOutcome:
    """Write the GPT-like plain-PP program `opts` describes to `out` ("-": stdout).
    A program that would be 2 GiB or more is refused from its options, before it is built."""
    opts.check()
    output = program_output(out)
    fix = "use fewer --layers" + (" or drop --callstack" if opts.callstack else "")
    check_size(estimate_size(opts), fix=fix)
    data = build_sample(opts)
    if not output.binary:
        written, _ = write_program(parse_program(data, source="sample"), output)
        return SampleOutcome(output.shown, written)
    check_size(len(data), fix=fix)
    output.write(data)  # already canonical bytes: written as they are
    return SampleOutcome(output.shown, len(data))


# -- simulate --------------------------------------------------------------------


@dataclass(frozen=True)
class SimulateOutcome:
    results: tuple[SimResult, ...]
    costs_from: str | None  # the program the costs came from
    written: tuple[tuple[str, int], ...]  # (path, bytes) of the SVG and trace files


def simulate_run(
    prog: PathLike | None,
    *,
    pp: int | None,
    vpp: int,
    micro_batches: int,
    schedule: Schedule | None = None,
    seg_method: str | None = None,
    p2p_cost: float = 0.0,
    svg: PathLike | None = None,
    trace: PathLike | None = None,
) -> SimulateOutcome:
    """Simulate one training step (costs from `prog` when given) and write the pictures."""
    forward = None
    if prog is not None:
        from vppctl.schedule.costs import program_costs

        for picture in (svg, trace):
            if picture is not None:
                _refuse_input_as_output(_path(prog), _path(picture), "write to another path")
        costs = program_costs(read_program(_path(prog)), pp=pp, vpp=vpp, seg_method=seg_method)
        pp, forward = costs.plan.pp, list(costs.forward)
    if pp is None:
        raise UsageError("--pp is required without a program")
    if schedule:
        runs: tuple[SimResult, ...] = (
            simulate(pp, vpp, micro_batches, schedule, forward=forward, p2p_cost=p2p_cost),
        )
    else:
        runs = compare(pp, vpp, micro_batches, forward=forward, p2p_cost=p2p_cost)
    written = tuple(_pictures(runs, svg, trace))
    return SimulateOutcome(runs, None if prog is None else str(prog), written)


def _pictures(
    runs: tuple[SimResult, ...], svg: PathLike | None, trace: PathLike | None
) -> list[tuple[str, int]]:
    from vppctl.schedule import timeline

    out = []
    if svg is not None:
        data = timeline.to_svg(runs).encode()
        write_atomic(_path(svg), data)
        out.append((str(svg), len(data)))
    if trace is not None:
        data = json.dumps(timeline.to_chrome_trace(runs)).encode()
        write_atomic(_path(trace), data)
        out.append((str(trace), len(data)))
    return out
