"""Commands: one library call per CLI command, each returning one outcome.

Each function takes paths (`str` or `Path`) and options, does the whole job of
its command (read, run the pipeline, write) and returns a frozen outcome that
`vppctl.report` renders as a table or JSON. The CLI parses options, calls one
of these and renders; a training script can call them directly (they are in
`vppctl.__all__`). Errors are `vppctl.errors` exceptions, each with its exit code.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from vppctl.convert import ConvertOptions, ConvertResult, convert_program
from vppctl.errors import UsageError
from vppctl.expectation import VerifyReport, verify_program
from vppctl.load import Program, parse_program, read_program
from vppctl.plan import Placement
from vppctl.sample import SampleOptions, build_sample
from vppctl.save import serialize, write_atomic, write_program
from vppctl.schedule.simulate import Schedule, SimResult, compare, simulate
from vppctl.summary import Summary, summarize

PathLike = str | os.PathLike[str]


def _path(p: PathLike) -> Path:
    return p if isinstance(p, Path) else Path(p)


def default_output(src: PathLike) -> Path:
    """`prog.pb` -> `prog.vpp.pb` (`.vpp` before the extension)."""
    src = _path(src)
    if src.suffix:
        return src.with_name(f"{src.stem}.vpp{src.suffix}")
    return src.with_name(f"{src.name}.vpp")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (b.exists() and a.samefile(b))
    except OSError:
        return False


def _refuse_input_as_output(src: Path, out: Path, fix: str) -> None:
    if _same_file(src, out):
        raise UsageError(f"the output {out} is the input; {fix}")


# -- convert ---------------------------------------------------------------------


@dataclass(frozen=True)
class Bubble:
    """Simulated idle share of the step, 1F1B and interleaved 1F1B (unit costs)."""

    one_f_one_b: float
    interleaved: float


@dataclass(frozen=True)
class ConvertOutcome:
    result: ConvertResult
    output: str
    bytes_written: int
    bubble: Bubble | None
    warnings: tuple[str, ...]  # the conversion's, the simulator's and the writer's


def convert_file(
    src: PathLike,
    out: PathLike | None,
    opts: ConvertOptions,
    *,
    in_place: bool = False,
    micro_batches: int | None = None,
) -> ConvertOutcome:
    """Convert the program in `src` and write it to `out` (default: `src` with `.vpp`
    before the extension; `in_place`: over `src`, atomically)."""
    src = _path(src)
    if in_place and out is not None:
        raise UsageError("--in-place writes over the input, so it takes no -o; drop one of them")
    target = src if in_place else _path(out) if out is not None else default_output(src)
    if not in_place:
        _refuse_input_as_output(src, target, "pass --in-place to overwrite it, or -o another path")
    opts.plan.check()
    program = read_program(src)
    result = convert_program(program, opts)
    bubble, sim_warnings = (None, ()) if micro_batches is None else _bubble(result, micro_batches)
    written, save_warnings = write_program(program, target)
    warnings = (*result.warnings, *sim_warnings, *save_warnings)
    return ConvertOutcome(result, str(target), written, bubble, warnings)


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
    program = read_program(_path(path))
    return verify_program(program, pp=pp, vpp=vpp, seg_method=seg_method, placement=placement)


def inspect_file(path: PathLike, *, seg_method: str | None = None) -> Summary:
    """What a program holds: blocks, ops by role, meshes, stages, layers, layout."""
    return summarize(read_program(_path(path)), seg_method)


# -- dump, sample ----------------------------------------------------------------


@dataclass(frozen=True)
class DumpOutcome:
    output: str | None  # None: `text` is for stdout
    text: bytes | None  # the program as protobuf text, when there is no output file
    bytes_written: int
    callstack_bytes_saved: int | None
    warnings: tuple[str, ...]


def dump_file(
    src: PathLike, out: PathLike | None = None, *, strip_callstack: bool = False
) -> DumpOutcome:
    """The program in `src` as protobuf text (no `out`), or written to `out` in the
    format its extension names."""
    src = _path(src)
    if out is not None:
        _refuse_input_as_output(src, _path(out), "write to another path")
    program = read_program(src)
    saved = _strip(program) if strip_callstack else None
    if out is None:
        data, warnings = serialize(program, Path("<stdout>.pbtxt"))
        return DumpOutcome(None, data, len(data), saved, tuple(warnings))
    written, warnings = write_program(program, _path(out))
    return DumpOutcome(str(out), None, written, saved, tuple(warnings))


def _strip(program: Program) -> int:
    from vppctl.fields import strip_callstack

    return sum(strip_callstack(b) for b in program.blocks)


@dataclass(frozen=True)
class SampleOutcome:
    output: str
    bytes_written: int


def sample_file(opts: SampleOptions, out: PathLike) -> SampleOutcome:
    """Write the GPT-like plain-PP program `opts` describes to `out`."""
    out = _path(out)
    data = build_sample(opts)
    if out.suffix.lower() in (".pbtxt", ".textproto", ".txtpb"):
        written, _ = write_program(parse_program(data, source="sample"), out)
        return SampleOutcome(str(out), written)
    write_atomic(out, data)  # already canonical bytes: written as they are
    return SampleOutcome(str(out), len(data))


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
