"""The program commands: convert, verify, inspect, dump, sample (parse, one call, render)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import click

from vppctl.choices import LAYOUTS, OPTIMIZERS, PLACEMENTS
from vppctl.cli.base import (
    EXIT_CODES_HELP,
    cli,
    print_json,
    status,
    stderr_console,
    stdout_console,
    warn,
    wrote,
)
from vppctl.cli.options import (
    DEGREE,
    MICRO_BATCHES,
    json_option,
    output_option,
    parse_counts,
    plan_options,
    pp_option,
    program_argument,
    quiet_option,
    seg_method_option,
)

if TYPE_CHECKING:
    from vppctl.plan import CostKind, Placement, Split
    from vppctl.sample import Layout, Optimizer


# -- convert ---------------------------------------------------------------------


@cli.command(epilog=EXIT_CODES_HELP, short_help="Convert a plain-PP program to VPP.")
@program_argument("src")
@output_option(
    "Where to write the converted program (- for stdout; text format by the .pbtxt, "
    ".textproto or .txtpb extension). Default: SRC with .vpp before the extension "
    "(prog.pb -> prog.vpp.pb), stdout when SRC is -."
)
@click.option(
    "--in-place", is_flag=True, help="Overwrite SRC (atomically, through a link); takes no -o."
)
@plan_options("convert")
@click.option(
    "--strict", is_flag=True, help="Refuse forward ops inside the layer region that match no layer."
)
@click.option(
    "--micro-batches",
    "-m",
    type=MICRO_BATCHES,
    metavar="M",
    help="Also simulate the converted plan's bubble at M micro-batches: the idle share of "
    "the step with the program's FLOP costs, as vppctl simulate OUT -m M prints it.",
)
@click.option(
    "--strip-callstack",
    is_flag=True,
    help="Drop op_callstack attributes (machine-specific paths, most of the bytes).",
)
@json_option
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

    counts = parse_counts(layers_per_chunk)
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
    err = stderr_console(quiet)
    with status(err, quiet, "converting"):
        outcome = convert_file(src, output, opts, in_place=in_place, micro_batches=micro_batches)
    from vppctl import report

    to = stderr_console() if outcome.to_stdout else stdout_console()
    if as_json:
        print_json(report.convert_json(outcome), to)
    elif not quiet:
        report.render_convert(to, outcome)
    wrote(err, outcome.output, outcome.bytes_written)
    warn(err, outcome.warnings)


# -- verify ----------------------------------------------------------------------


@cli.command(epilog=EXIT_CODES_HELP, short_help="Check a VPP program against the numbered rules.")
@program_argument("prog")
@pp_option()
@click.option(
    "--vpp",
    type=DEGREE,
    help="Expected chunks per stage. Default: the recorded plan's, else the chunk ids used.",
)
@seg_method_option
@click.option(
    "--placement",
    type=click.Choice(PLACEMENTS),
    help="Expected placement. Default: the recorded plan's, else loop.",
)
@json_option
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
        stdout_console().print(report.rules_table())
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
        print_json(report.verify_json(result))
    else:
        report.render_verify(stdout_console(), result)
    if not result.valid:
        raise click.exceptions.Exit(1)


# -- inspect ---------------------------------------------------------------------


@cli.command(epilog=EXIT_CODES_HELP, short_help="Summarise a program: stages, layers, layout.")
@program_argument("prog")
@seg_method_option
@json_option
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
        print_json(report.summary_json(summary))
    else:
        report.render_summary(stdout_console(), summary)


# -- dump ------------------------------------------------------------------------


@cli.command(epilog=EXIT_CODES_HELP, short_help="Print a program as text, or convert its format.")
@program_argument("prog")
@output_option(
    "Write here instead of stdout; binary or text by extension (.pbtxt, .textproto, "
    ".txtpb are text; - is binary on stdout)."
)
@click.option("--strip-callstack", is_flag=True, help="Drop op_callstack attributes.")
@click.option(
    "--json", "as_json", is_flag=True, help="With -o: print what was written as one JSON object."
)
@quiet_option
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
        print_json(report.dump_json(outcome))
    err = stderr_console(quiet)
    if outcome.callstack_bytes_saved is not None:
        saved = report.human_bytes(outcome.callstack_bytes_saved)
        err.print(f"stripped op_callstack: {saved} saved")
    if output is not None and output != "-":
        wrote(err, outcome.output, outcome.bytes_written)
    warn(err, outcome.warnings)


# -- sample ----------------------------------------------------------------------


@cli.command(epilog=EXIT_CODES_HELP, short_help="Write a GPT-like plain-PP sample program.")
@click.option("--layers", type=click.IntRange(1), required=True, help="Decoder layers.")
@click.option("--pp", type=DEGREE, required=True, help="Pipeline stages.")
@click.option(
    "--ranks-per-stage", type=int, default=1, show_default=True, help="Ranks in each stage mesh."
)
@click.option(
    "--layout",
    type=click.Choice(LAYOUTS),
    default="blocked",
    show_default=True,
    help="blocked: layer i on stage i*pp//layers (plain PP); "
    "interleaved: already laid out for --vpp (chunk ids still 0).",
)
@click.option(
    "--vpp",
    type=DEGREE,
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
@click.option("--optimizer", type=click.Choice(OPTIMIZERS), default="adamw", show_default=True)
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
@output_option("Where to write; binary or text by extension (- for stdout).", required=True)
@json_option
@quiet_option
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
    err = stderr_console(quiet)
    with status(err, quiet, "building"):
        outcome = sample_file(opts, output)
    if as_json:
        print_json(report.sample_json(outcome), stderr_console() if output == "-" else None)
    warn(err, outcome.warnings)
    wrote(err, outcome.output, outcome.bytes_written)
