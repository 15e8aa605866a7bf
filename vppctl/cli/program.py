"""The program commands: convert, verify, inspect, dump, sample (parse, one call, render)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import click

import vppctl
import vppctl.outcomes
import vppctl.report
from vppctl.choices import LAYOUTS, MAX_LAYERS, OPTIMIZERS, OUTPUT_FORMATS, PLACEMENTS
from vppctl.cli.base import (
    cli,
    exit_codes,
    expect_outputs,
    outputs_written,
    print_json,
    report_console,
    same_as_stdout,
    stderr_console,
    stdout_console,
    warn,
    write_text,
    wrote,
)
from vppctl.cli.config import selection
from vppctl.cli.options import (
    DEGREE,
    MICRO_BATCHES,
    PATH,
    IntRange,
    choice,
    json_option,
    measured_options,
    output_option,
    p2p_options,
    plan_options,
    pp_option,
    program_argument,
    quiet_option,
    runtime_option,
    seg_method_option,
)
from vppctl.cli.progress import observer
from vppctl.errors import (
    EXIT_CONVERT,
    EXIT_FILE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_MEMORY,
    EXIT_TERMINATED,
    EXIT_USAGE,
    EXIT_VIOLATIONS,
    UsageError,
)
from vppctl.units import human_bytes

if TYPE_CHECKING:
    from vppctl.choices import Fill, Link, OutputFormat, Runtime
    from vppctl.plan import CostKind, Placement, Split
    from vppctl.sample import Layout, Optimizer
    from vppctl.verify import VerifyReport

# The exit codes each command can return (its --help lists only these).
_FAILURES = (EXIT_USAGE, EXIT_FILE, EXIT_MEMORY, EXIT_INTERNAL, EXIT_INTERRUPTED)
# A command that replaces a file may be terminated (SIGTERM) while it does.
CONVERT_EXITS = exit_codes(*_FAILURES, EXIT_CONVERT, EXIT_TERMINATED)
VERIFY_EXITS = exit_codes(*_FAILURES, EXIT_VIOLATIONS, found="violations found")
INSPECT_EXITS = exit_codes(*_FAILURES)
DUMP_EXITS = exit_codes(*_FAILURES, EXIT_CONVERT, EXIT_TERMINATED)
SAMPLE_EXITS = exit_codes(*_FAILURES, EXIT_CONVERT, EXIT_TERMINATED)


# -- convert ---------------------------------------------------------------------


@cli.command(epilog=CONVERT_EXITS, short_help="Convert a plain-PP program to VPP.")
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
@runtime_option("that bubble is simulated under", "paddle, the runtime of legacy programs")
@p2p_options
@click.option(
    "--moves",
    type=PATH,
    metavar="FILE",
    help="Also write (JSON) every parameter's (stage, chunk) before and after, with its "
    "bytes: the map that remaps a checkpoint, so nothing is re-initialised.",
)
@measured_options()
@click.option(
    "--strip-callstack",
    is_flag=True,
    help="Drop op_callstack attributes (machine-specific paths, most of the bytes).",
)
@json_option
@quiet_option
def convert(
    src: str,
    output: str | None,
    in_place: bool,
    pp: int | None,
    vpp: int | None,
    seg_method: str | None,
    strict: bool,
    placement: str,
    split: str | None,
    layers_per_chunk: tuple[int, ...],
    layout: str | None,
    cost: str,
    micro_batches: int | None,
    runtime: str | None,
    p2p_cost: float | None,
    link: str | None,
    moves: str | None,
    costs_from: str | None,
    fill: str,
    strip_callstack: bool,
    as_json: bool,
    quiet: bool,
) -> None:
    """Convert a plain-PP program to VPP (--vpp chunks per stage).

    SRC is a program file, or - for stdin: binary, protobuf text or PIR JSON, plain or
    compressed with xz or gzip, told by its content.
    The table (or --json) goes to stdout, or to stderr when the program does.
    For a PIR program (Paddle 3.x JSON) the plan is written instead, which Paddle's
    own build follows under vppctl.paddle.pir_plan.

    \b
    vppctl convert prog.pb --vpp 2
    vppctl convert - --vpp 2 -o - < prog.pb > prog.vpp.pb
    vppctl convert prog.pb --vpp 2 --seg-method DecoderLayer -o out.pb --json
    vppctl convert prog.pb --vpp 2 --split balanced --cost flops
    vppctl convert prog.json --vpp 2 --layers-per-chunk 1,3,3,1 -o plan.json
    vppctl convert prog.pb --layout 'Et|t|t|t|t|t|t|tL' --moves moves.json
    """
    plan = vppctl.PlanOptions(
        vpp=vpp,
        pp=pp,
        placement=cast("Placement", placement),
        split=cast("Split | None", split),
        layers_per_chunk=layers_per_chunk,
        cost=cast("CostKind", cost),
        layout=layout,
    )
    opts = vppctl.ConvertOptions(
        plan=plan,
        seg_method=seg_method,
        strict=strict,
        strip_callstack=strip_callstack,
        micro_batches=micro_batches,
        in_place=in_place,
        runtime=cast("Runtime | None", runtime),
        p2p_cost=p2p_cost,
        link=cast("Link | None", link),
        moves=moves,
        costs_from=costs_from,
        fill=cast("Fill", fill),
    )
    # The report goes where the program does not: to stderr when the program goes to stdout.
    default = "-" if src == "-" and not in_place else None
    to_stderr = same_as_stdout(output if output is not None else default)
    expect_outputs()
    progress = observer(quiet, json_on_stderr=as_json and to_stderr)
    outcome = vppctl.convert_file(src, output, opts, progress=progress)
    to_stderr = to_stderr or outcome.to_stdout or same_as_stdout(moves)
    written = [outcome.output] + (
        [] if outcome.moves_written is None else [outcome.moves_written[0]]
    )
    outputs_written(written, stdout=outcome.to_stdout)
    if as_json:
        print_json(outcome.to_json(), to_stderr=to_stderr)
        if to_stderr:
            return  # stderr holds the JSON and nothing else (its warnings are in it)
    else:
        vppctl.report.render_convert(report_console(to_stderr), outcome)
    err = stderr_console(quiet)
    wrote(err, outcome.output, outcome.bytes_written)
    if outcome.moves_written is not None:
        wrote(err, *outcome.moves_written)
    warn(err, outcome.warnings)


# -- verify ----------------------------------------------------------------------


@cli.command(epilog=VERIFY_EXITS, short_help="Check a VPP program against the numbered rules.")
@click.argument("prog", required=False, type=PATH)
@pp_option()
@click.option(
    "--vpp",
    type=DEGREE,
    help="Expected chunks per stage. Default: the recorded plan's, else the chunk ids used.",
)
@seg_method_option
@click.option(
    "--placement",
    type=choice(PLACEMENTS),
    help="Expected placement. Default: the recorded plan's, else loop.",
)
@click.option(
    "--plan",
    type=PATH,
    metavar="PLAN",
    help="Check the program against a PIR plan (the file vppctl convert writes for a PIR "
    "program): its pp, vpp, layer regex and each virtual stage's layers, an empty first or "
    "last virtual stage included.",
)
@click.option(
    "--output-format",
    type=click.Choice(OUTPUT_FORMATS, case_sensitive=False),
    help="full: a table (default); concise: one line per violation; json: one JSON object; "
    "github: GitHub Actions annotations; junit: a JUnit XML report (one test case per rule).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON object on stdout (the same as --output-format json).",
)
@click.option(
    "--statistics",
    is_flag=True,
    help="Count the violations of each rule instead of listing them (full, concise; the "
    "JSON always holds both the statistics and the violations).",
)
@click.option(
    "--select",
    metavar="RULES",
    help="Enforce only these rules: ids or prefixes, comma-separated (V0, V009,V011, ALL). "
    "Default: [tool.vppctl.verify] in pyproject.toml, else every rule.",
)
@click.option(
    "--ignore",
    metavar="RULES",
    help="Do not enforce these rules (ids or prefixes, comma-separated): their violations "
    "are counted, not failed. Adds to pyproject.toml's ignore.",
)
@click.option("--isolated", is_flag=True, help="Read no pyproject.toml ([tool.vppctl.verify]).")
@click.option(
    "--rules", "list_rules", is_flag=True, help="List the rules and exit (takes no PROG)."
)
@quiet_option
def verify(
    prog: str | None,
    pp: int | None,
    vpp: int | None,
    seg_method: str | None,
    placement: str | None,
    plan: str | None,
    output_format: str | None,
    as_json: bool,
    statistics: bool,
    select: str | None,
    ignore: str | None,
    isolated: bool,
    list_rules: bool,
    quiet: bool,
) -> None:
    """Check an annotated VPP program; report every violation (exit 1 if any).

    \b
    vppctl verify prog.vpp.pb
    vppctl verify completed.json --plan plan.json   # Paddle's PIR build under pir_plan
    vppctl verify prog.vpp.pb --output-format concise
    vppctl verify prog.vpp.pb --output-format github      # in a GitHub Actions step
    vppctl verify prog.vpp.pb --output-format junit > verify.xml
    vppctl verify prog.vpp.pb --pp 4 --vpp 2 --json | jq .violations
    vppctl verify completed.json --ignore V009           # waive a rule (counted, not failed)
    vppctl verify --rules
    """
    form = _verify_format(output_format, as_json)
    if statistics and form in ("github", "junit"):
        raise UsageError(
            f"--statistics counts the violations as a table or JSON, not as {form}: drop one"
        )
    if list_rules:
        if prog is not None:  # a CI step so written would pass without checking it
            raise UsageError(
                f"--rules lists the rules and checks no program, and {prog} was given: drop "
                "--rules to check it, or the program to list the rules"
            )
        if form == "json":
            print_json(vppctl.outcomes.rules_json())
        elif form in ("github", "junit"):
            raise UsageError(f"--rules lists the rules as a table or JSON, not as {form}")
        else:
            stdout_console().print(vppctl.report.rules_table())
            stdout_console().print(vppctl.report.pir_rules_table())
        return
    if prog is None:
        raise click.UsageError(
            "Missing argument 'PROG' (the program to check; --rules alone lists the rules)."
        )
    click.get_current_context().ensure_object(dict)["source"] = prog  # named by a failure's report
    chosen, waived = selection(prog, select, ignore, isolated)
    opts = vppctl.VerifyOptions(
        pp,
        vpp,
        cast("Placement | None", placement),
        seg_method,
        select=chosen,
        ignore=waived,
        plan=plan,
    )
    result = vppctl.verify_file(prog, opts, progress=observer(quiet))
    _render_verify(result, form, statistics)
    if not result.valid:
        raise click.exceptions.Exit(EXIT_VIOLATIONS)


def _verify_format(output_format: str | None, as_json: bool) -> OutputFormat:
    if as_json and output_format not in (None, "json"):
        raise UsageError(
            f"--json is --output-format json, and --output-format {output_format} asks for "
            "another: drop one"
        )
    return cast("OutputFormat", "json" if as_json else output_format or "full")


def _render_verify(result: VerifyReport, form: OutputFormat, statistics: bool) -> None:
    report = vppctl.report
    if form == "json":
        print_json(result.to_json())
        return
    if form in ("github", "junit"):
        text = (
            report.junit_xml(result)
            if form == "junit"
            else "".join(f"{line}\n" for line in report.github_lines(result))
        )
        click.get_current_context().ensure_object(dict)["report_written"] = True
        write_text(text)
        return
    console = stdout_console()
    if statistics and (not result.valid or result.ignored):
        console.print(report.statistics_table(result))
        if result.valid:  # what it was checked as, and that the ignored do not fail it
            report.render_verify(console, result)
    elif form == "concise":
        for line in report.concise_lines(result):
            console.print(report.printed(line), soft_wrap=True)
    else:
        report.render_verify(console, result)


# -- inspect ---------------------------------------------------------------------


@cli.command(epilog=INSPECT_EXITS, short_help="Summarise a program: stages, layers, layout.")
@program_argument("prog")
@seg_method_option
@json_option
@quiet_option
def inspect(prog: str, seg_method: str | None, as_json: bool, quiet: bool) -> None:
    """Summarise a program: blocks, ops by role, meshes, stages, layers, layout.

    \b
    vppctl inspect prog.pb
    vppctl inspect prog.pb --seg-method DecoderLayer --json
    """
    summary = vppctl.inspect_file(prog, vppctl.InspectOptions(seg_method), progress=observer(quiet))
    if as_json:
        print_json(summary.to_json())
    else:
        vppctl.report.render_summary(stdout_console(), summary)


# -- dump ------------------------------------------------------------------------


@cli.command(epilog=DUMP_EXITS, short_help="Print a program as text, or convert its format.")
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
    opts = vppctl.DumpOptions(strip_callstack=strip_callstack)
    to_stdout = same_as_stdout(output if output is not None else "-")
    if as_json and to_stdout:
        raise UsageError(
            "--json describes the file written, so it needs -o OUT (not stdout): stdout "
            "holds the program"
        )
    expect_outputs()
    outcome = vppctl.dump_file(prog, output, opts, progress=observer(quiet))
    outputs_written([outcome.output], stdout=to_stdout)
    if as_json:
        print_json(outcome.to_json())
    err = stderr_console(quiet)
    if outcome.callstack_bytes_saved is not None:
        saved = human_bytes(outcome.callstack_bytes_saved)
        err.print(f"stripped op_callstack: {saved} saved")
    if not to_stdout:
        wrote(err, outcome.output, outcome.bytes_written)
    warn(err, outcome.warnings)


# -- sample ----------------------------------------------------------------------


@cli.command(epilog=SAMPLE_EXITS, short_help="Write a GPT-like plain-PP sample program.")
@click.option("--layers", type=IntRange(1, MAX_LAYERS), required=True, help="Decoder layers.")
@click.option("--pp", type=DEGREE, required=True, help="Pipeline stages.")
@click.option(
    "--ranks-per-stage", type=int, default=1, show_default=True, help="Ranks in each stage mesh."
)
@click.option(
    "--layout",
    type=choice(LAYOUTS),
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
@click.option("--optimizer", type=choice(OPTIMIZERS), default="adamw", show_default=True)
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
    opts = vppctl.SampleOptions(
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
    to_stderr = same_as_stdout(output)
    expect_outputs()
    err = stderr_console(quiet or (as_json and to_stderr))
    progress = observer(quiet, json_on_stderr=as_json and to_stderr)
    outcome = vppctl.sample_file(output, opts, progress=progress)
    outputs_written([outcome.output], stdout=to_stderr)
    if as_json:
        print_json(outcome.to_json(), to_stderr=to_stderr)
    warn(err, outcome.warnings)
    wrote(err, outcome.output, outcome.bytes_written)
