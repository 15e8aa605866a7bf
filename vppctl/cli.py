"""The command line: thin click commands over the library (`vppctl.commands`).

Each command parses its options, calls one library function and renders the
outcome: tables and JSON on stdout (on stderr when the program itself goes to
stdout, `-o -`); warnings, progress and `wrote PATH (size)` lines on stderr.
Errors are turned into one `Error: ...` line and the documented exit code in
one place, `_Group.invoke`, which also holds the pipe policy: a reader that
closes the pipe early (`| head`) is not an error (exit 0). Output that an
encoding cannot show (`…`, `─`, `×` under PYTHONIOENCODING=ascii) falls back
to ASCII instead of failing after the work is done. Heavy modules are imported
inside the commands so that `vppctl --help` starts fast.
"""

from __future__ import annotations

import codecs
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from vppctl import __version__
from vppctl.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, VppctlError

if TYPE_CHECKING:
    from rich.console import Console

    from vppctl.plan import CostKind, Placement, Split
    from vppctl.sample import Layout, Optimizer
    from vppctl.schedule.simulate import Schedule

F = TypeVar("F", bound=Callable[..., Any])

EXIT_CODES_HELP = """Exit codes: 0 success, 1 verification found problems, 2 usage error,
3 file cannot be read or written (or is not a program), 4 program cannot be converted as
asked, 70 internal error (a bug: please report it), 130 interrupted."""


BUG_REPORT = (
    "this is a bug in vppctl; please report it with the command line and the input program "
    "(README: Reporting a bug)"
)


class _Group(click.Group):
    """Turns vppctl's exceptions into one clean stderr line and the class's exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        _ascii_fallback()
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            _silence_stdout()  # the reader left: say nothing, and nothing at exit either
            ctx.exit(EXIT_OK)
        except VppctlError as e:
            click.echo(f"Error: {e}", err=True)
            ctx.exit(e.exit_code)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except KeyboardInterrupt:
            click.echo("Error: interrupted; nothing was written", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except Exception as e:  # a bug: say so, traceback only under --debug
            if ctx.obj and ctx.obj.get("debug"):
                traceback.print_exc()
            click.echo(
                f"Error: internal error ({type(e).__name__}: {e}); {BUG_REPORT}; --debug "
                "shows the traceback",
                err=True,
            )
            ctx.exit(EXIT_INTERNAL)


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


_ASCII = {"…": "...", "─": "-", "━": "-", "×": "x", "–": "-", "—": "-", "→": "->", "│": "|"}


def _to_ascii(e: UnicodeError) -> tuple[str, int]:
    if not isinstance(e, UnicodeEncodeError):
        raise e
    bad = e.object[e.start : e.end]
    return "".join(_ASCII.get(ch, "?") for ch in bad), e.end


def _ascii_fallback() -> None:
    """Streams whose encoding cannot show vppctl's few non-ASCII characters get ASCII
    stand-ins for them, so that nothing fails after the work is done."""
    codecs.register_error("vppctl-ascii", _to_ascii)
    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None) or "ascii"
        try:
            "…─×".encode(encoding)
        except (UnicodeEncodeError, LookupError):
            reconfigure = getattr(stream, "reconfigure", None)
            if reconfigure is not None:
                reconfigure(errors="vppctl-ascii")


@click.group(
    cls=_Group, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_CODES_HELP
)
@click.version_option(__version__, prog_name="vppctl")
@click.option("--debug", is_flag=True, help="Show the traceback of internal errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Convert pipeline-parallel (PP) training programs to virtual pipeline parallelism (VPP).

    \b
    vppctl sample --layers 8 --pp 4 -o prog.pb     # a GPT-like plain-PP program
    vppctl convert prog.pb --vpp 2                 # -> prog.vpp.pb, and a table
    vppctl verify prog.vpp.pb                      # check the result
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="vppctl")


# -- shared options ------------------------------------------------------------


def _json_option(f: F) -> F:
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Print one JSON object on stdout instead of the table.",
    )(f)


def _seg_method_option(f: F) -> F:
    return click.option(
        "--seg-method",
        metavar="REGEX",
        help="Regex naming the repeated layer in the ops' struct names "
        "(Paddle's vpp_seg_method), e.g. DecoderLayer. Default: detected.",
    )(f)


def _program_argument(name: str) -> Callable[[F], F]:
    # Existence is checked by the loader, so a missing file is exit 3, not a usage error.
    return click.argument(name, type=_PATH)


# Paths stay strings: "-" is stdin or stdout, and a trailing "/" must reach the checks.
_PATH = click.Path(path_type=str, allow_dash=True)


def _output_option(help_text: str, required: bool = False) -> Callable[[F], F]:
    return click.option(
        "-o", "--output", type=_PATH, required=required, metavar="OUT", help=help_text
    )


def _quiet_option(f: F) -> F:
    return click.option("-q", "--quiet", is_flag=True, help="No warnings or progress.")(f)


def _wrote(console: Console, output: str, size: int) -> None:
    from rich.text import Text

    from vppctl.report import human_bytes

    where = "stdout" if output == "-" else output
    console.print(Text(f"wrote {where} ({human_bytes(size)})"))


def _console(**kwargs: Any) -> Console:
    from rich.console import Console

    class PipeConsole(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError  # rich would exit 1: leave it to the one pipe policy

    return PipeConsole(**kwargs)


def _stdout() -> Console:
    return _console(soft_wrap=False)


def _stderr(quiet: bool = False) -> Console:
    return _console(stderr=True, quiet=quiet, highlight=False, soft_wrap=True)


def _print_json(data: dict[str, Any], console: Console | None = None) -> None:
    text = json.dumps(data, indent=2, sort_keys=False)
    if console is None:
        click.echo(text)
    else:
        console.out(text, highlight=False)


def _warn(console: Console, warnings: Iterator[str] | list[str] | tuple[str, ...]) -> None:
    from rich.text import Text

    for w in warnings:
        console.print(Text(f"warning: {w}", style="yellow"))


@contextmanager
def _status(console: Console, quiet: bool, text: str) -> Iterator[None]:
    """A spinner on stderr for long work, only when stderr is a terminal."""
    if quiet or not console.is_terminal:
        yield
        return
    with console.status(text):
        yield


# -- convert ---------------------------------------------------------------------


def _parse_counts(value: str | None) -> tuple[int, ...]:
    if not value:
        return ()
    try:
        return tuple(int(x) for x in value.replace(" ", "").split(","))
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not a comma-separated list of layer counts, e.g. 3,4,4,5"
        ) from None


@cli.command(epilog=EXIT_CODES_HELP, short_help="Convert a plain-PP program to VPP.")
@_program_argument("src")
@_output_option(
    "Where to write the converted program (- for stdout; text format by the .pbtxt, "
    ".textproto or .txtpb extension). Default: SRC with .vpp before the extension "
    "(prog.pb -> prog.vpp.pb), stdout when SRC is -."
)
@click.option(
    "--in-place", is_flag=True, help="Overwrite SRC (atomically, through a link); takes no -o."
)
@click.option(
    "--pp",
    type=click.IntRange(1, 4096),
    help="Expected number of stages; derived from the program.",
)
@click.option(
    "--vpp", type=click.IntRange(1, 4096), required=True, help="Chunks (virtual stages) per stage."
)
@_seg_method_option
@click.option(
    "--strict", is_flag=True, help="Refuse forward ops inside the layer region that match no layer."
)
@click.option(
    "--placement",
    type=click.Choice(["loop", "v"]),
    default="loop",
    show_default=True,
    help="loop: segment k on stage k % pp; v: stages 0..pp-1 then pp-1..0 (ZB-V).",
)
@click.option(
    "--split",
    type=click.Choice(["uniform", "keep", "balanced", "explicit"]),
    help="uniform (default): equal layer counts (must divide); keep: each stage keeps its "
    "layer count; balanced: minimise the busiest stage's load; explicit: the counts of "
    "--layers-per-chunk.",
)
@click.option(
    "--layers-per-chunk",
    metavar="N,N,...",
    help="Explicit layer counts per segment, in virtual-stage order (implies --split explicit).",
)
@click.option(
    "--cost",
    type=click.Choice(["params", "ops", "flops"]),
    default="params",
    show_default=True,
    help="Cost measure for --split balanced and the table.",
)
@click.option(
    "--micro-batches",
    "-m",
    type=click.IntRange(1, 1 << 16),
    metavar="M",
    help="Also simulate the converted plan's bubble at M micro-batches: the idle share of "
    "the step with the program's FLOP costs, as vppctl simulate OUT -m M prints it.",
)
@click.option(
    "--strip-callstack",
    is_flag=True,
    help="Drop op_callstack attributes (machine-specific paths, most of the bytes).",
)
@_json_option
@click.option("-q", "--quiet", is_flag=True, help="No table, warnings or progress.")
def convert(
    src: str,
    output: str | None,
    in_place: bool,
    pp: int | None,
    vpp: int,
    seg_method: str | None,
    strict: bool,
    placement: str,
    split: str | None,
    layers_per_chunk: str | None,
    cost: str,
    micro_batches: int | None,
    strip_callstack: bool,
    as_json: bool,
    quiet: bool,
) -> None:
    """Convert a plain-PP program to VPP (--vpp chunks per stage).

    SRC is a program file, or - for stdin (binary, or protobuf text, detected).
    The table (or --json) goes to stdout, or to stderr when the program does.

    \b
    vppctl convert prog.pb --vpp 2
    vppctl convert - --vpp 2 -o - < prog.pb > prog.vpp.pb
    vppctl convert prog.pb --vpp 2 --seg-method DecoderLayer -o out.pb --json
    vppctl convert prog.pb --vpp 2 --split balanced --cost flops
    """
    from vppctl.commands import convert_file
    from vppctl.convert import ConvertOptions
    from vppctl.plan import PlanOptions

    counts = _parse_counts(layers_per_chunk)
    plan = PlanOptions(
        vpp=vpp,
        pp=pp,
        placement=cast("Placement", placement),
        split=cast("Split", split or ("explicit" if counts else "uniform")),
        layers_per_chunk=counts,
        cost=cast("CostKind", cost),
    )
    opts = ConvertOptions(
        plan=plan, seg_method=seg_method, strict=strict, strip_callstack=strip_callstack
    )
    err = _stderr(quiet)
    with _status(err, quiet, "converting"):
        outcome = convert_file(src, output, opts, in_place=in_place, micro_batches=micro_batches)
    from vppctl import report

    to = _stderr() if outcome.to_stdout else _stdout()
    if as_json:
        _print_json(report.convert_json(outcome), to)
    elif not quiet:
        report.render_convert(to, outcome)
    _wrote(err, outcome.output, outcome.bytes_written)
    _warn(err, outcome.warnings)


# -- verify ----------------------------------------------------------------------


@cli.command(epilog=EXIT_CODES_HELP, short_help="Check a VPP program against the numbered rules.")
@_program_argument("prog")
@click.option("--pp", type=click.IntRange(1, 4096), help="Expected number of stages.")
@click.option(
    "--vpp",
    type=click.IntRange(1, 4096),
    help="Expected chunks per stage. Default: the recorded plan's, else the chunk ids used.",
)
@_seg_method_option
@click.option(
    "--placement",
    type=click.Choice(["loop", "v"]),
    help="Expected placement. Default: the recorded plan's, else loop.",
)
@_json_option
@click.option("--rules", "list_rules", is_flag=True, help="List the rules and exit.")
def verify(
    prog: str,
    pp: int | None,
    vpp: int | None,
    seg_method: str | None,
    placement: str | None,
    as_json: bool,
    list_rules: bool,
) -> None:
    """Check an annotated VPP program; report every violation (exit 1 if any).

    \b
    vppctl verify prog.vpp.pb
    vppctl verify prog.vpp.pb --pp 4 --vpp 2 --json | jq .violations
    """
    from vppctl import report

    if list_rules:
        _stdout().print(report.rules_table())
        return
    from vppctl.commands import verify_file

    result = verify_file(
        prog,
        pp=pp,
        vpp=vpp,
        seg_method=seg_method,
        placement=cast("Placement | None", placement),
    )
    if as_json:
        _print_json(report.verify_json(result))
    else:
        report.render_verify(_stdout(), result)
    if not result.valid:
        raise click.exceptions.Exit(1)


# -- inspect ---------------------------------------------------------------------


@cli.command(epilog=EXIT_CODES_HELP, short_help="Summarise a program: stages, layers, layout.")
@_program_argument("prog")
@_seg_method_option
@_json_option
def inspect(prog: str, seg_method: str | None, as_json: bool) -> None:
    """Summarise a program: blocks, ops by role, meshes, stages, layers, layout.

    \b
    vppctl inspect prog.pb
    vppctl inspect prog.pb --seg-method DecoderLayer --json
    """
    from vppctl import report
    from vppctl.commands import inspect_file

    summary = inspect_file(prog, seg_method=seg_method)
    if as_json:
        _print_json(report.summary_json(summary))
    else:
        report.render_summary(_stdout(), summary)


# -- dump ------------------------------------------------------------------------


@cli.command(epilog=EXIT_CODES_HELP, short_help="Print a program as text, or convert its format.")
@_program_argument("prog")
@_output_option(
    "Write here instead of stdout; binary or text by extension (.pbtxt, .textproto, "
    ".txtpb are text; - is binary on stdout)."
)
@click.option("--strip-callstack", is_flag=True, help="Drop op_callstack attributes.")
@click.option(
    "--json", "as_json", is_flag=True, help="With -o: print what was written as one JSON object."
)
@_quiet_option
def dump(prog: str, output: str | None, strip_callstack: bool, as_json: bool, quiet: bool) -> None:
    """Print a program as protobuf text, or convert between binary and text.

    \b
    vppctl dump prog.pb | less
    vppctl dump prog.pb -o prog.pbtxt
    vppctl dump prog.pbtxt -o prog.pb
    """
    from vppctl import report
    from vppctl.commands import dump_file
    from vppctl.errors import UsageError

    if as_json and (output is None or output == "-"):
        raise UsageError("--json describes the file written, so it needs -o OUT (not stdout)")
    outcome = dump_file(prog, output, strip_callstack=strip_callstack)
    if as_json:
        _print_json(report.dump_json(outcome))
    err = _stderr(quiet)
    if outcome.callstack_bytes_saved is not None:
        saved = report.human_bytes(outcome.callstack_bytes_saved)
        err.print(f"stripped op_callstack: {saved} saved")
    if output is not None and output != "-":
        _wrote(err, outcome.output, outcome.bytes_written)
    _warn(err, outcome.warnings)


# -- sample ----------------------------------------------------------------------


@cli.command(epilog=EXIT_CODES_HELP, short_help="Write a GPT-like plain-PP sample program.")
@click.option("--layers", type=click.IntRange(1), required=True, help="Decoder layers.")
@click.option("--pp", type=click.IntRange(1, 4096), required=True, help="Pipeline stages.")
@click.option(
    "--ranks-per-stage", type=int, default=1, show_default=True, help="Ranks in each stage mesh."
)
@click.option(
    "--layout",
    type=click.Choice(["blocked", "interleaved"]),
    default="blocked",
    show_default=True,
    help="blocked: layer i on stage i*pp//layers (plain PP); "
    "interleaved: already laid out for --vpp (chunk ids still 0).",
)
@click.option(
    "--vpp",
    type=click.IntRange(1, 4096),
    default=2,
    show_default=True,
    help="Chunks per stage of the interleaved layout.",
)
@click.option(
    "--backward/--no-backward",
    default=True,
    show_default=True,
    help="Add the backward ops (and the optimizer).",
)
@click.option(
    "--optimizer", type=click.Choice(["adamw", "sgd", "none"]), default="adamw", show_default=True
)
@click.option(
    "--grad-clip/--no-grad-clip",
    default=True,
    show_default=True,
    help="Global-norm gradient clipping before the optimizer.",
)
@click.option("--hidden", type=int, default=1024, show_default=True, help="Hidden size.")
@click.option("--vocab", type=int, default=50304, show_default=True, help="Vocabulary size.")
@click.option(
    "--callstack",
    is_flag=True,
    help="Add Paddle-like op_callstack attributes (most of a real program's bytes).",
)
@_output_option("Where to write; binary or text by extension (- for stdout).", required=True)
@_json_option
@_quiet_option
def sample(
    layers: int,
    pp: int,
    ranks_per_stage: int,
    layout: str,
    vpp: int,
    backward: bool,
    optimizer: str,
    grad_clip: bool,
    hidden: int,
    vocab: int,
    callstack: bool,
    output: str,
    as_json: bool,
    quiet: bool,
) -> None:
    """Write a GPT-like training program annotated for plain PP.

    \b
    vppctl sample --layers 8 --pp 4 -o gpt8.pb
    vppctl sample --layers 10000 --pp 8 -o big.pb     # about 1M ops
    """
    from vppctl import report
    from vppctl.commands import sample_file
    from vppctl.sample import SampleOptions

    opts = SampleOptions(
        layers=layers,
        pp=pp,
        ranks_per_stage=ranks_per_stage,
        layout=cast("Layout", layout),
        vpp=vpp,
        backward=backward,
        optimizer=cast("Optimizer", optimizer),
        grad_clip=grad_clip,
        hidden=hidden,
        vocab=vocab,
        callstack=callstack,
    )
    err = _stderr(quiet)
    with _status(err, quiet, "building"):
        outcome = sample_file(opts, output)
    if as_json:
        _print_json(report.sample_json(outcome), _stderr() if output == "-" else None)
    _wrote(err, outcome.output, outcome.bytes_written)


# -- simulate and plan: shared options ---------------------------------------------


def _placement_option(f: F) -> F:
    return click.option(
        "--placement",
        type=click.Choice(["loop", "v"]),
        help="loop: segment k on stage k % pp; v: stages 0..pp-1 then pp-1..0 (ZB-V). "
        "Default: the recorded plan's, else loop.",
    )(f)


def _split_options(f: F) -> F:
    f = click.option(
        "--cost",
        type=click.Choice(["params", "ops", "flops"]),
        help="Cost measure for --split balanced (default params, as convert).",
    )(f)
    f = click.option(
        "--layers-per-chunk",
        metavar="N,N,...",
        help="Explicit layer counts per segment, in virtual-stage order (implies --split "
        "explicit).",
    )(f)
    return click.option(
        "--split",
        type=click.Choice(["uniform", "keep", "balanced", "explicit"]),
        help="As convert: uniform, keep, balanced (the busiest stage's load minimised) or "
        "explicit. Default: the recorded plan's, else uniform when the layers divide, else "
        "balanced (with a warning).",
    )(f)


def _memory_options(f: F) -> F:
    f = click.option(
        "--memory-limit",
        metavar="SIZE",
        callback=_parse_size,
        help="Bytes per stage, e.g. 80GiB or 80GB: stages whose peak exceeds it are flagged.",
    )(f)
    f = click.option(
        "--seq-len",
        type=click.IntRange(1, 1 << 24),
        help="Size of an activation's later unknown (-1) dimensions. Default: counted as 1 "
        "(with a warning when there are any).",
    )(f)
    return click.option(
        "--micro-batch-size",
        type=click.IntRange(1, 1 << 24),
        help="Size of an activation's first unknown (-1) dimension. Default 1.",
    )(f)


def _parse_size(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    from vppctl.memory import parse_size

    size = parse_size(value)
    if size is None or size <= 0:
        raise click.BadParameter(
            f"{value!r} is not a size: give bytes with a unit, e.g. 80GiB, 80GB, 512MiB"
        )
    return size


def _memory(micro_batch_size: int | None, seq_len: int | None, memory_limit: int | None) -> Any:
    from vppctl.memory import MemoryOptions

    if micro_batch_size is None and seq_len is None and memory_limit is None:
        return None
    return MemoryOptions(micro_batch_size or 1, seq_len, memory_limit)


def _schedule_names() -> list[str]:
    # The schedule names without importing the simulator (vppctl --help stays fast).
    return ["fthenb", "1f1b", "eager1f1b", "interleaved", "zbh1", "zbv"]


# -- simulate --------------------------------------------------------------------


@cli.command(
    epilog=EXIT_CODES_HELP, short_help="Simulate pipeline schedules: bubble, memory, timeline."
)
@click.argument("prog", required=False, type=click.Path(path_type=Path))
@click.option("--pp", type=click.IntRange(1, 4096), help="Stages (default: the program's).")
@click.option(
    "--vpp",
    type=click.IntRange(1, 4096),
    help="Chunks per stage. Default: a converted program's recorded plan; needed otherwise.",
)
@click.option(
    "--micro-batches",
    "-m",
    type=click.IntRange(1, 1 << 16),
    required=True,
    help="Micro-batches per step.",
)
@click.option(
    "--schedule",
    type=click.Choice(_schedule_names()),
    help="One schedule; default: 1F1B and the plan's interleaving schedule (interleaved "
    "1F1B, or ZB-V for a V plan with vpp 2) side by side.",
)
@click.option(
    "--group-size",
    type=click.IntRange(1, 1 << 16),
    metavar="N",
    help="Megatron's micro-batch group size of the interleaved schedule (default pp).",
)
@click.option(
    "--costs",
    metavar="F,B,W",
    help="Forward, input-gradient and weight-gradient cost of a chunk (default 1,1,1; "
    "schedules without the I/W split run B+W). With PROG, per unit of each segment's "
    "FLOP share.",
)
@_placement_option
@_split_options
@_seg_method_option
@click.option(
    "--p2p-cost",
    type=click.FloatRange(0),
    default=0.0,
    show_default=True,
    help="Time per point-to-point hop between stages.",
)
@_memory_options
@_json_option
@click.option("--svg", type=click.Path(path_type=Path), help="Write the timeline as SVG.")
@click.option(
    "--trace",
    type=click.Path(path_type=Path),
    help="Write a Chrome trace JSON (Perfetto, chrome://tracing).",
)
@click.option(
    "--csv",
    "csv_path",
    type=click.Path(path_type=Path),
    help="Write the last schedule's orders as torch.distributed.pipelining's schedule CSV.",
)
def simulate(
    prog: Path | None,
    pp: int | None,
    vpp: int | None,
    micro_batches: int,
    schedule: str | None,
    group_size: int | None,
    costs: str | None,
    placement: str | None,
    split: str | None,
    layers_per_chunk: str | None,
    cost: str | None,
    seg_method: str | None,
    p2p_cost: float,
    micro_batch_size: int | None,
    seq_len: int | None,
    memory_limit: int | None,
    as_json: bool,
    svg: Path | None,
    trace: Path | None,
    csv_path: Path | None,
) -> None:
    """Simulate the pipeline schedule: bubble, in-flight micro-batches, memory, timeline.

    With PROG, the plan is the one convert makes with the same options (a converted
    program is simulated as converted: no --vpp needed), costs are each segment's
    forward FLOPs (backward I = W = F), and memory per stage comes from its variables.
    Without PROG every chunk costs --costs. The bubble is the idle time of all stages
    over pp x makespan: the idle share of the step.

    \b
    vppctl simulate --pp 8 --vpp 2 -m 32
    vppctl simulate prog.vpp.pb -m 16 --svg timeline.svg
    vppctl simulate prog.pb --vpp 2 -m 16 --schedule zbv --placement v --csv zbv.csv
    vppctl simulate prog.pb --vpp 2 -m 16 --micro-batch-size 4 --memory-limit 80GiB
    """
    from vppctl import report
    from vppctl.commands import simulate_run

    outcome = simulate_run(
        prog,
        micro_batches=micro_batches,
        pp=pp,
        vpp=vpp,
        schedule=cast("Schedule | None", schedule),
        group_size=group_size,
        costs=costs,
        placement=cast("Placement | None", placement),
        split=cast("Split | None", split),
        layers_per_chunk=_parse_counts(layers_per_chunk),
        cost=cast("CostKind | None", cost),
        seg_method=seg_method,
        p2p_cost=p2p_cost,
        memory=_memory(micro_batch_size, seq_len, memory_limit),
        svg=svg,
        trace=trace,
        csv=csv_path,
    )
    if as_json:
        _print_json(report.simulation_json(outcome))
    else:
        report.render_simulation(_stdout(), outcome, suggest_files=not outcome.written)
    _warn(_stderr(), outcome.warnings)


# -- plan ------------------------------------------------------------------------


def _ints(flag: str) -> Callable[[click.Context, click.Parameter, str | None], tuple[int, ...]]:
    def parse(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, ...]:
        if value is None:
            return ()
        try:
            values = tuple(int(x) for x in value.replace(" ", "").split(","))
        except ValueError:
            raise click.BadParameter(
                f"{value!r} is not a comma-separated list of integers, e.g. 16,32,64"
            ) from None
        if any(v < 1 for v in values):
            raise click.BadParameter(f"{flag} values must be positive, got {value!r}")
        return values

    return parse


def _names(
    choices: list[str],
) -> Callable[[click.Context, click.Parameter, str | None], tuple[str, ...]]:
    def parse(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[str, ...]:
        if value is None:
            return ()
        values = tuple(x for x in value.replace(" ", "").split(",") if x)
        unknown = [v for v in values if v not in choices]
        if unknown or not values:
            raise click.BadParameter(
                f"{value!r}: choose from {', '.join(choices)} (comma-separated)"
            )
        return values

    return parse


@cli.command(epilog=EXIT_CODES_HELP)
@_program_argument("prog")
@click.option(
    "--micro-batches",
    "-m",
    required=True,
    metavar="M[,M...]",
    callback=_ints("--micro-batches"),
    help="Micro-batches per step: one count or a list, e.g. 16,32,64.",
)
@click.option("--pp", type=click.IntRange(1, 4096), help="Expected number of stages.")
@click.option(
    "--vpp",
    metavar="V[,V...]",
    callback=_ints("--vpp"),
    help="Chunks per stage to try. Default: every value a split can serve.",
)
@click.option(
    "--placement",
    metavar="loop,v",
    callback=_names(["loop", "v"]),
    help="Placements to try (default both; V runs ZB-V with vpp 2).",
)
@click.option(
    "--split",
    metavar="uniform,keep,balanced",
    callback=_names(["uniform", "keep", "balanced"]),
    help="Splits to try (default all three; uniform only where the layers divide).",
)
@click.option(
    "--schedule",
    metavar="NAME[,NAME...]",
    callback=_names(_schedule_names()),
    help="Schedules to try (default all: " + ", ".join(_schedule_names()) + ").",
)
@click.option(
    "--cost",
    type=click.Choice(["params", "ops", "flops"]),
    default="flops",
    show_default=True,
    help="Cost measure of the balanced split (the schedule's costs are always FLOPs).",
)
@_seg_method_option
@click.option(
    "--p2p-cost",
    type=click.FloatRange(0),
    default=0.0,
    show_default=True,
    help="Time per point-to-point hop, in units of the mean stage's forward.",
)
@_memory_options
@click.option(
    "--top",
    type=click.IntRange(1, 1000),
    default=10,
    show_default=True,
    help="Candidates shown in the table (--json lists all).",
)
@_json_option
def plan(
    prog: Path,
    micro_batches: tuple[int, ...],
    pp: int | None,
    vpp: tuple[int, ...],
    placement: tuple[str, ...],
    split: tuple[str, ...],
    schedule: tuple[str, ...],
    cost: str,
    seg_method: str | None,
    p2p_cost: float,
    micro_batch_size: int | None,
    seq_len: int | None,
    memory_limit: int | None,
    top: int,
    as_json: bool,
) -> None:
    """Find the best conversion of PROG: vpp, placement, split, schedule, micro-batches.

    Simulates every candidate with the program's FLOP costs and memory per stage,
    leaves out what a runtime would refuse and what exceeds --memory-limit (exit 4 if
    nothing fits), and prints the best with the vppctl convert command for each.

    \b
    vppctl plan prog.pb -m 16
    vppctl plan prog.pb -m 16,32,64 --memory-limit 80GiB --micro-batch-size 2
    vppctl plan prog.pb -m 32 --schedule interleaved,zbv --json | jq '.candidates[0]'
    """
    from vppctl import report
    from vppctl.commands import plan_run

    outcome = plan_run(
        prog,
        micro_batches=micro_batches,
        pp=pp,
        vpp=vpp,
        placements=cast("tuple[Placement, ...]", placement),
        splits=cast("tuple[Split, ...]", split),
        schedules=cast("tuple[Schedule, ...]", schedule),
        cost=cast("CostKind", cost),
        seg_method=seg_method,
        p2p_cost=p2p_cost,
        memory=_memory(micro_batch_size, seq_len, memory_limit),
    )
    if as_json:
        _print_json(report.plan_json(outcome))
    else:
        report.render_plan(_stdout(), outcome, top)
    _warn(_stderr(), outcome.result.warnings)
