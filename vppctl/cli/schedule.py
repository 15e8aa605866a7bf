"""The schedule commands: simulate and plan (parse, one call, render)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import click

import vppctl
import vppctl.planner
import vppctl.report
import vppctl.schedule
from vppctl.choices import (
    COST_KINDS,
    MAX_SVG_WIDTH,
    MIN_SVG_WIDTH,
    PLACEMENTS,
    SCHEDULES,
    SEARCHED_SPLITS,
)
from vppctl.cli.base import (
    cli,
    exit_codes,
    expect_outputs,
    json_printed,
    outputs_written,
    print_json,
    report_console,
    same_as_stdout,
    stderr_console,
    stdout_console,
    warn,
    wrote,
)
from vppctl.cli.options import (
    MICRO_BATCHES,
    PATH,
    ChoiceList,
    IntList,
    IntRange,
    choice,
    json_option,
    layout_option,
    measured_options,
    memory_options,
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
)
from vppctl.escape import printable

if TYPE_CHECKING:
    from vppctl.choices import Fill, Link, Runtime
    from vppctl.plan import CostKind, Placement, Split
    from vppctl.schedule import Schedule

_FAILURES = (EXIT_USAGE, EXIT_FILE, EXIT_CONVERT, EXIT_MEMORY, EXIT_INTERNAL, EXIT_INTERRUPTED)
SIMULATE_EXITS = exit_codes(
    *_FAILURES,
    EXIT_VIOLATIONS,
    EXIT_TERMINATED,  # while a picture file is replaced
    found="a stage's peak over --memory-limit (the report still printed)",
)
PLAN_EXITS = exit_codes(*_FAILURES)


def _memory(micro_batch_size: int | None, seq_len: int | None, memory_limit: int | None) -> Any:
    """The memory options given, or None when none was."""
    if micro_batch_size is None and seq_len is None and memory_limit is None:
        return None
    return vppctl.MemoryOptions(
        1 if micro_batch_size is None else micro_batch_size, seq_len, memory_limit
    )


# -- simulate --------------------------------------------------------------------


@cli.command(
    epilog=SIMULATE_EXITS, short_help="Simulate pipeline schedules: bubble, memory, timeline."
)
@click.argument("prog", required=False, type=PATH)
@plan_options("simulate")
@click.option(
    "--micro-batches",
    "-m",
    type=MICRO_BATCHES,
    required=True,
    help="Micro-batches per step.",
)
@click.option(
    "--schedule",
    type=choice(SCHEDULES),
    help="One schedule: Paddle's schedule_mode names (FThenB, 1F1B, Eager1F1B, VPP, ZBH1, "
    "ZBVPP; any case), then Megatron's interleaved and torch's zb1p, interleaved-zb, zbv, "
    "dualpipev. Default: 1F1B and the runtime's schedule that interleaves the plan (Paddle: "
    "VPP, or ZBVPP for a V plan; Megatron, torch, any: interleaved 1F1B, or ZB-V for a V "
    "plan with vpp 2) side by side.",
)
@click.option(
    "--group-size",
    type=MICRO_BATCHES,
    metavar="N",
    help="Micro-batch group size: Megatron's of interleaved (default pp), torch's "
    "microbatches_per_round of interleaved-zb (default m // max(1, m // pp)).",
)
@runtime_option("simulate runs (one it does not run, or counts it refuses: exit 2)")
@click.option(
    "--costs",
    metavar="F,B,W",
    help="Forward, input-gradient and weight-gradient cost of a chunk (default 1,1,1; "
    "schedules without the I/W split run B+W). With PROG, per unit of each segment's "
    "FLOP share.",
)
@p2p_options
@measured_options(step=True)
@memory_options
@json_option
@click.option(
    "--svg", type=PATH, metavar="OUT", help="Draw every schedule simulated as SVG (- for stdout)."
)
@click.option(
    "--width",
    "svg_width",
    type=IntRange(MIN_SVG_WIDTH, MAX_SVG_WIDTH),
    metavar="PX",
    help="Widest the SVG may be, in pixels (default 1800, a page): boxes too narrow for "
    "their label are drawn without one, each keeps its hover title.",
)
@click.option(
    "--trace",
    type=PATH,
    metavar="OUT",
    help="Write a Chrome trace JSON (Perfetto, chrome://tracing) of every schedule.",
)
@click.option(
    "--csv",
    "csv_path",
    type=PATH,
    metavar="OUT",
    help="Write the last schedule's orders as torch.distributed.pipelining's schedule CSV.",
)
@quiet_option
def simulate(
    prog: str | None,
    pp: int | None,
    vpp: int | None,
    micro_batches: int,
    schedule: str | None,
    group_size: int | None,
    runtime: str | None,
    costs: str | None,
    placement: str | None,
    split: str | None,
    layers_per_chunk: tuple[int, ...],
    layout: str | None,
    cost: str | None,
    seg_method: str | None,
    p2p_cost: float | None,
    link: str | None,
    costs_from: str | None,
    fill: str,
    measured_step: float | None,
    micro_batch_size: int | None,
    seq_len: int | None,
    memory_limit: int | None,
    as_json: bool,
    svg: str | None,
    svg_width: int | None,
    trace: str | None,
    csv_path: str | None,
    quiet: bool,
) -> None:
    """Simulate the pipeline schedule: bubble, in-flight micro-batches, memory, timeline.

    With PROG, the plan is the one convert makes with the same options (a converted
    program is simulated as converted, one with chunk ids as they split it: no --vpp
    needed), costs are each segment's forward FLOPs (backward I = W = F), a hop between
    stages what its boundary activations take over --link, and memory per stage comes
    from its variables. Without PROG every chunk costs --costs. The runtime's rules
    (--runtime) refuse what it would refuse. The bubble is the idle time of all stages
    over pp x makespan: the idle share of the step.

    \b
    vppctl simulate --pp 8 --vpp 2 -m 32
    vppctl simulate prog.vpp.pb -m 16 --svg timeline.svg
    vppctl simulate prog.pb --vpp 2 -m 16 --schedule zbv --placement v --csv zbv.csv
    vppctl simulate prog.pb --vpp 2 -m 16 --micro-batch-size 4 --memory-limit 80GiB
    vppctl simulate --pp 2 --vpp 2 -m 8 --costs-from trace.json --measured-step 1.25
    """
    plan = vppctl.PlanOptions(
        vpp=vpp,
        pp=pp,
        placement=cast("Placement | None", placement),
        split=cast("Split | None", split),
        layers_per_chunk=layers_per_chunk,
        cost=cast("CostKind | None", cost),
        layout=layout,
    )
    opts = vppctl.SimulateOptions(
        micro_batches=micro_batches,
        plan=plan,
        seg_method=seg_method,
        schedule=cast("Schedule | None", schedule),
        group_size=group_size,
        runtime=cast("Runtime | None", runtime),
        costs=None if costs is None else vppctl.schedule.parse_unit_costs(costs),
        p2p_cost=p2p_cost,
        link=cast("Link | None", link),
        memory=_memory(micro_batch_size, seq_len, memory_limit),
        costs_from=costs_from,
        fill=cast("Fill", fill),
        measured_step=measured_step,
    )
    pictures = vppctl.Pictures(svg=svg, trace=trace, csv=csv_path, svg_width=svg_width)
    # A picture on stdout (`--svg -`) sends the report to stderr.
    to_stderr = any(same_as_stdout(path) for path in (svg, trace, csv_path))
    expect_outputs()
    progress = observer(quiet, json_on_stderr=as_json and to_stderr)
    outcome = vppctl.simulate_run(prog, pictures, opts, progress=progress)
    outputs_written([path for path, _ in outcome.written], stdout=to_stderr)
    if as_json:
        print_json(outcome.to_json(), to_stderr=to_stderr)
    else:
        console = report_console(to_stderr)
        vppctl.report.render_simulation(console, outcome, suggest_files=not outcome.written)
    if not (as_json and to_stderr):  # a stream with JSON carries nothing else
        err = stderr_console(quiet)
        for path, size in outcome.written:
            wrote(err, path, size)
        warn(err, outcome.warnings)
    over = outcome.over_memory_limit
    if over:
        if not (as_json and to_stderr):
            limit = vppctl.planner.iec(memory_limit or 0)
            stages = outcome.stages_over_limit
            stderr_console().print(
                printable(f"Error: over --memory-limit {limit}: {stages}"), style="red"
            )
        raise click.exceptions.Exit(EXIT_VIOLATIONS)


# -- plan ------------------------------------------------------------------------


@cli.command(epilog=PLAN_EXITS, short_help="Find the best conversion: vpp, split, schedule, m.")
@program_argument("prog")
@click.option(
    "--micro-batches",
    "-m",
    required=True,
    metavar="M[,M...]",
    type=IntList("16,32,64"),
    help="Micro-batches per step: one count or a list, e.g. 16,32,64.",
)
@pp_option()
@click.option(
    "--vpp",
    metavar="V[,V...]",
    type=IntList("1,2,4"),
    default=(),
    help="Chunks per stage to try. Default: every value a split can serve.",
)
@click.option(
    "--placement",
    metavar="loop,v",
    type=ChoiceList(PLACEMENTS),
    default=(),
    help="Placements to try (default both; v runs the V-shaped schedules zbvpp, zbv and "
    "dualpipev, at vpp 2).",
)
@click.option(
    "--split",
    metavar="uniform,keep,balanced",
    type=ChoiceList(SEARCHED_SPLITS),
    default=(),
    help="Splits to try (default all three; uniform only where the layers divide).",
)
@click.option(
    "--schedule",
    metavar="NAME[,NAME...]",
    type=ChoiceList(SCHEDULES),
    default=(),
    help="Schedules to try (default: every one the runtime runs; --runtime any: "
    + ", ".join(SCHEDULES)
    + ").",
)
@click.option(
    "--cost",
    type=choice(COST_KINDS),
    default="flops",
    show_default=True,
    help="Cost measure of the balanced split (the schedule's costs are always FLOPs).",
)
@runtime_option("plan searches: every row is one it runs")
@seg_method_option
@layout_option
@p2p_options
@measured_options()
@memory_options
@click.option(
    "--top",
    type=click.IntRange(1, 1000),
    default=10,
    show_default=True,
    help="Candidates shown in the table (--json lists all).",
)
@json_option
@quiet_option
def plan(
    prog: str,
    micro_batches: tuple[int, ...],
    pp: int | None,
    vpp: tuple[int, ...],
    placement: tuple[str, ...],
    split: tuple[str, ...],
    schedule: tuple[str, ...],
    cost: str,
    runtime: str | None,
    seg_method: str | None,
    layout: str | None,
    p2p_cost: float | None,
    link: str | None,
    costs_from: str | None,
    fill: str,
    micro_batch_size: int | None,
    seq_len: int | None,
    memory_limit: int | None,
    top: int,
    as_json: bool,
    quiet: bool,
) -> None:
    """Find the best conversion of PROG: vpp, placement, split, schedule, micro-batches.

    Simulates every candidate with the program's FLOP costs, its hops' bytes over --link
    and memory per stage, keeps the schedules of --runtime (default: the program's own)
    and leaves out what it would refuse and what exceeds --memory-limit (exit 4 if
    nothing fits), and prints the best with the vppctl convert command for each; for a
    PIR program (Paddle 3.x), whether Paddle's PIR completion makes each split, and the
    strategy that runs it.

    \b
    vppctl plan prog.pb -m 16
    vppctl plan prog.pb -m 16,32,64 --memory-limit 80GiB --micro-batch-size 2
    vppctl plan prog.pb -m 32 --schedule interleaved,zbv --json | jq '.candidates[0]'
    vppctl plan prog.pb -m 16 --costs-from layers.csv
    """
    opts = vppctl.PlanSearchOptions(
        micro_batches=micro_batches,
        pp=pp,
        vpp=vpp,
        placements=cast("tuple[Placement, ...]", placement),
        splits=cast("tuple[Split, ...]", split),
        schedules=cast("tuple[Schedule, ...]", schedule),
        cost=cast("CostKind", cost),
        runtime=cast("Runtime | None", runtime),
        seg_method=seg_method,
        layout=layout,
        p2p_cost=p2p_cost,
        link=cast("Link | None", link),
        memory=_memory(micro_batch_size, seq_len, memory_limit) or vppctl.MemoryOptions(),
        costs_from=costs_from,
        fill=cast("Fill", fill),
    )
    try:
        outcome = vppctl.plan_run(prog, opts, progress=observer(quiet))
    except vppctl.NoConversionFits as e:
        if as_json:  # what was searched, and why each candidate was left out
            print_json(e.to_json())
            json_printed()
        raise
    if as_json:
        print_json(outcome.to_json())
    else:
        vppctl.report.render_plan(stdout_console(), outcome, top)
    warn(stderr_console(quiet), outcome.result.warnings)
