"""Tables of the schedule commands: simulate (the plan simulated, the summary and
per-stage tables, memory per stage, the gain) and plan (the candidates); the JSON of each
is its outcome's `to_json()`. The pictures of a schedule (terminal timeline, SVG,
trace) are `vppctl.schedule.timeline`'s."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from vppctl import planner
from vppctl.outcomes import (
    PlanOutcome,
    SimulatedPlan,
    SimulateOutcome,
    comparison_pair,
)
from vppctl.planner import MeasuredStep, MemoryOptions, SegmentTimes, StageMemory, iec, worst_stage
from vppctl.report.common import (
    BUBBLE_DEFINITION,
    compact_table,
    iec_short,
    picture_columns,
    printed,
)
from vppctl.schedule import (
    PADDLE_LEGACY_VPP,
    SimResult,
    number,
    percent,
    render_timelines,
    runtime_line,
    stage_units,
)
from vppctl.units import seconds_text

if TYPE_CHECKING:  # the planner loads with `vppctl plan` only
    from vppctl.planner import Candidate, Conversion, Layouts, PirInput, Settings

# -- simulate: names and the plan line


def plan_lines(simulated: SimulatedPlan) -> list[str]:
    """`plan: pp 8 x vpp 2, loop placement, split balanced (layers 4,8,9,...)` and the
    costs line (the measured costs' lines when they were given)."""
    if simulated.measured is not None:
        return [f"plan: {simulated.description}", *measured_lines(simulated.measured)]
    measure = "forward FLOPs" if simulated.measure == "flops" else "forward op count"
    f, b, w = (number(x) for x in simulated.costs)
    return [
        f"plan: {simulated.description}",
        f"costs: F,B,W = {f},{b},{w} x each segment's {measure}",
    ]


def measured_lines(measured: SegmentTimes) -> list[str]:
    """`costs: measured, from costs.csv (csv, seconds); ...`: where the costs came from,
    what was filled, and what the importer read and left out."""
    weight = (
        "the weight gradient apart"
        if measured.weight_measured
        else "the backward whole (split evenly where a schedule splits it)"
    )
    lines = [f"costs: measured, from {measured.source.text}; {weight}; times in seconds"]
    if measured.filled:
        lines.append(
            f"  not measured, filled from the program's estimate: {', '.join(measured.filled)}"
        )
    lines += [f"  {note}" for note in measured.notes]
    return lines


def prediction_lines(results: Sequence[SimResult], step: MeasuredStep | None) -> list[str]:
    """`1F1B (v=1): predicted 1.234 s, measured 1.300 s (--measured-step): error -5.1%`."""
    if step is None:
        return []
    return [
        f"{r.title}: predicted {seconds_text(float(r.makespan))}, measured "
        f"{seconds_text(float(step.seconds))} ({step.source}): error "
        f"{float(step.error(r.makespan)):+.1%}"
        for r in results
    ]


def time_text(value: Fraction, seconds: bool) -> str:
    """A time of the step: seconds said as such, else in the costs' unit."""
    return seconds_text(float(value)) if seconds else number(value)


def gain_line(results: Sequence[SimResult], seconds: bool = False) -> str | None:
    """One sentence with what interleaving buys and costs, or None if nothing to compare."""
    pair = comparison_pair(results)
    if pair is None:
        return None
    base, vpp = pair
    saved = (base.makespan - vpp.makespan) / base.makespan
    memory = vpp.peak_in_flight_stage_units[0] / base.peak_in_flight_stage_units[0]
    return (
        f"{vpp.title} vs {base.title}: makespan {time_text(base.makespan, seconds)} -> "
        f"{time_text(vpp.makespan, seconds)} "
        f"({percent(abs(saved))} {'shorter' if saved >= 0 else 'longer'}), "
        f"bubble {percent(base.bubble)} -> "
        f"{percent(vpp.bubble)} of the step, stage 0 activations {stage_units(base, 0)} -> "
        f"{stage_units(vpp, 0)} stages (x{float(memory):.2f})"
    )


# -- simulate: tables


def summary_heading(results: Sequence[SimResult], seconds: bool = False) -> str:
    first = results[0]
    heading = f"one training step: pp={first.pp}, m={first.micro_batches}"
    if first.p2p_cost:
        heading += f", p2p cost {time_text(first.p2p_cost, seconds)} per hop"
    return heading


def summary_table(results: Sequence[SimResult], seconds: bool = False) -> Table:
    """Headline figures, one column per schedule, so the comparison is one glance (times
    in seconds with measured costs)."""
    table = compact_table()
    table.add_column("")
    for result in results:
        table.add_column(result.title, justify="right")
    rows: list[tuple[str, list[str]]] = [
        ("makespan", [time_text(r.makespan, seconds) for r in results]),
        ("busiest stage's compute", [time_text(r.ideal, seconds) for r in results]),
        ("bubble (idle share of the step)", [percent(r.bubble) for r in results]),
        *(
            [("idle per stage (mean)", [time_text(mean_idle(r), True) for r in results])]
            if seconds
            else []
        ),
        ("overhead vs the busiest stage", [percent(r.bubble_vs_ideal) for r in results]),
        ("imbalance between stages", [f"{float(r.stage_imbalance):.2f}x" for r in results]),
        (
            "peak in-flight, stage 0",
            [f"{r.peak_in_flight[0]} ({stage_units(r, 0)} stages)" for r in results],
        ),
        ("p2p messages", [str(r.p2p_messages) for r in results]),
    ]
    for name, cells in rows:
        table.add_row(name, *cells)
    return table


def mean_idle(result: SimResult) -> Fraction:
    """The mean stage's idle time in the step: the bubble as a time."""
    return Fraction(sum(result.per_stage_idle), result.pp)


def stage_table(results: Sequence[SimResult], seconds: bool = False) -> Table:
    """Per-stage bubble and peak in-flight units, side by side (with measured costs the
    bubble's idle time too)."""
    table = compact_table()
    table.add_column("Stg", justify="right")
    for result in results:
        table.add_column(f"bubble {result.title}", justify="right")
        table.add_column("in-flight", justify="right")
    for stage in range(results[0].pp):
        cells: list[str] = []
        for result in results:
            share = percent(result.per_stage_bubble[stage])
            if seconds:
                share += f" ({seconds_text(float(result.per_stage_idle[stage]))})"
            cells.append(share)
            cells.append(f"{result.peak_in_flight[stage]} ({stage_units(result, stage)})")
        table.add_row(str(stage), *cells)
    return table


def memory_table(
    results: Sequence[SimResult], memory: Sequence[Sequence[StageMemory]], opts: MemoryOptions
) -> Table:
    """Bytes per stage: static (params, grads, optimizer) and, per schedule, the peak
    activations and the peak (in red over --memory-limit)."""
    table = compact_table()
    for name in ("Stg", "params", "grads", "optim"):
        table.add_column(name, justify="right", no_wrap=True)
    for result in results:
        table.add_column(f"{result.schedule}\nact", justify="right", no_wrap=True)
        table.add_column(f"{result.schedule}\npeak", justify="right", no_wrap=True)
    for stage, first in enumerate(memory[0]):
        cells = [
            str(stage),
            iec_short(first.params_bytes),
            iec_short(first.grads_bytes),
            iec_short(first.optimizer_bytes),
        ]
        for stages in memory:
            s = stages[stage]
            cells += [iec_short(s.peak_activation_bytes), iec_short(s.peak_bytes)]
        row = [printed(c) for c in cells]
        for i, stages in enumerate(memory):
            if stages[stage].over_limit:  # the notes below name these stages too
                row[5 + 2 * i].stylize("bold red")
        table.add_row(*row)
    return table


def memory_heading(opts: MemoryOptions) -> str:
    seq = "" if opts.seq_len is None else f", seq len {opts.seq_len}"
    limit = "" if opts.limit is None else f", limit {iec(opts.limit)}"
    return f"memory per stage (micro-batch size {opts.micro_batch_size}{seq}{limit}):"


def memory_notes(
    memory: Sequence[Sequence[StageMemory]], results: Sequence[SimResult]
) -> list[str]:
    notes = []
    for result, stages in zip(results, memory):
        worst = worst_stage(stages)
        over = [s.stage for s in stages if s.over_limit]
        line = f"{result.title}: worst stage {worst.stage}, peak {iec(worst.peak_bytes)}"
        if over:
            line += (
                f"; over the limit: stage{'s' if len(over) > 1 else ''} {', '.join(map(str, over))}"
            )
        notes.append(line)
    return notes


def render_simulation(
    console: Console,
    results: Sequence[SimResult] | SimulateOutcome,
    *,
    timeline: bool = True,
    suggest_files: bool = True,
) -> None:
    """The plan simulated, the summary and per-stage tables, memory per stage (with a
    program), the gain and the timelines (warnings are the caller's, for stderr).
    `suggest_files`: a scaled timeline points to --svg and --trace (off when they are
    being written)."""
    outcome, runs = (
        (results, results.results)
        if isinstance(results, SimulateOutcome)
        else (None, tuple(results))
    )
    measured = None if outcome is None else outcome.measured
    seconds = measured is not None
    if outcome is not None and outcome.plan is not None:
        for line in plan_lines(outcome.plan):
            console.print(printed(line))
    elif measured is not None:
        for line in measured_lines(measured):
            console.print(printed(line))
    if outcome is not None:
        console.print(printed(runtime_line(outcome.runtime)))
        if outcome.hop is not None:
            console.print(printed(outcome.hop.text()))
    console.print(printed(f"bubble: {BUBBLE_DEFINITION}"))
    console.print(printed(summary_heading(runs, seconds) + ":"))
    console.print(summary_table(runs, seconds))
    console.print(printed("per stage (bubble: the stage's idle share of the step):"))
    console.print(stage_table(runs, seconds))
    if outcome is not None and outcome.memory and outcome.memory_options is not None:
        console.print(printed(memory_heading(outcome.memory_options)))
        console.print(memory_table(runs, outcome.memory, outcome.memory_options))
        for line in memory_notes(outcome.memory, runs):
            console.print(printed(line))
    gain = gain_line(runs, seconds)
    if gain is not None:
        console.print(printed(gain, style="bold"))
    for line in prediction_lines(runs, None if outcome is None else outcome.measured_step):
        console.print(printed(line, style="bold"))
    if timeline:
        render_timelines(
            runs,
            console,
            suggest_files=suggest_files,
            columns=picture_columns(console),
            seconds=seconds,
        )


# -- plan ------------------------------------------------------------------------


def plan_heading(o: PlanOutcome) -> list[str]:
    r, opts = o.result, o.search
    measure = "forward FLOPs" if r.measure == "flops" else "forward op counts"
    seq = "" if opts.memory.seq_len is None else f", seq len {opts.memory.seq_len}"
    limit = "" if opts.memory.limit is None else f", limit {iec(opts.memory.limit)}"
    lines = [f"plan {o.source}: {r.n_layers} layers ({r.layer_class}) on pp {r.pp}"]
    if r.pir is not None:
        held = ", ".join(map(str, r.pir.stage_layers))
        lines.append(
            f"a PIR program (Paddle 3.x), its stage meshes holding {held} layers: each row "
            "says how Paddle runs its split: strategy only, with vppctl.paddle.pir_plan (the "
            "plan file vppctl convert writes), or cannot"
        )
        refused = planner.completion_refusal(r.pir, 2)
        if refused is not None:
            lines.append(f"Paddle's PIR completion refuses it at every vpp_degree > 1: {refused}")
    memory = f"memory at micro-batch size {opts.memory.micro_batch_size}{seq}{limit}"
    if r.measured is None:
        lines.append(f"costs: {measure}; {memory}")
    else:
        lines += [*measured_lines(r.measured), memory]
    lines.append(runtime_line(r.runtime))
    if r.candidates:
        lines.append(hop_line(r.candidates))
    return lines


def hop_line(candidates: Sequence[Candidate]) -> str:
    """The best candidate's hop, and the range over the candidates when cuts differ."""
    text = candidates[0].hop.text()
    sizes = {c.hop.hop_bytes for c in candidates if c.hop.hop_bytes is not None}
    if len(sizes) > 1:
        text += f" (cuts of {iec(min(sizes))} to {iec(max(sizes))} over the candidates)"
    return text


def plan_table(conversions: Sequence[Conversion], best: Candidate, seconds: bool = False) -> Table:
    """One row per conversion, at its best schedule and micro-batch count (the schedules
    and counts it was simulated under are listed with its command); with measured costs
    the step too, in seconds."""
    table = compact_table()
    columns = ["#", "vpp", "place", "split", "schedule", "m", "time"]
    columns += ["step"] if seconds else []
    columns += ["bubble", "p2p", "peak", "Stg"]
    for name in columns:
        justify = "left" if name in ("place", "split", "schedule") else "right"
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for i, conversion in enumerate(conversions, start=1):
        c = conversion.best
        worst = c.worst
        cells = [
            str(i),
            str(c.vpp),
            c.placement,
            c.split,
            c.schedule,
            str(c.micro_batches),
            f"{float(c.time_per_micro_batch / best.time_per_micro_batch):.3f}x",
        ]
        cells += [seconds_text(float(c.makespan))] if seconds else []
        cells += [percent(c.bubble), str(c.p2p_messages), iec_short(worst.peak_bytes)]
        cells.append(str(worst.stage))
        table.add_row(*map(printed, cells))
    return table


def simulated_line(conversion: Conversion) -> str:
    """`simulated: fthenb, 1f1b, zbh1 at m 8, 16`: what a conversion was tried under."""
    schedules = ", ".join(conversion.schedules)
    counts = ", ".join(map(str, conversion.micro_batches))
    return f"simulated: {schedules} at m {counts}"


def plan_notes(o: PlanOutcome, shown: int) -> list[str]:
    r = o.result
    notes = [
        "each row: one conversion, at its best schedule and m",
        "time: one micro-batch's share of the step (makespan / m) relative to #1; "
        + ("step: the step predicted from the measured costs; " if r.measured else "")
        + "bubble: idle share of the step; peak: the worst stage's bytes",
        f"{len(r.conversions)} conversions ({len(r.candidates)} candidates), {shown} shown",
    ]
    if r.over_limit:
        notes.append(f"{r.over_limit} over --memory-limit left out")
    for rule, n in r.notes:
        notes.append(f"{n} run, but note {rule}")
    refused = sum(n for _, n in r.refused)
    if refused:
        reasons = "; ".join(f"{reason}: {n}" for reason, n in r.refused[:3])
        more = "; ..." if len(r.refused) > 3 else ""
        notes.append(f"{refused} refused as a runtime or convert would ({reasons}{more})")
    return notes


def pir_row_text(conversion: Conversion, pir: PirInput, best: Candidate) -> list[str]:
    """A PIR program's row: how Paddle runs its split (strategy only: the stage mesh of each
    layer and how Paddle deals them; with vppctl.paddle.pir_plan: the command that writes
    the plan file and the two lines of Python; or why it cannot), and the best candidate
    Paddle runs on it."""
    launch = conversion.best.pir_launch(pir)
    if launch.reason is not None:
        return [f"Paddle (PIR) cannot: {launch.reason}"]
    lines: list[str] = []
    if launch.how == "strategy":
        text = f"Paddle (PIR), {launch.text}"
    else:
        text = (
            f"Paddle (PIR), with vppctl.paddle.pir_plan (Paddle's completion alone cannot "
            f"make this split: {launch.rule})"
        )
        lines = [f"    {planner.shell(conversion.command)}", *(f"    {x}" for x in launch.python)]
    runs = conversion.best_on_pir(pir)
    if runs is None:
        text = (
            f"{text}; none of its schedules simulated runs on Paddle's PIR pipeline "
            f"(it runs {pir_schedules()})"
        )
    else:
        text = f"{text}; Paddle runs it best as {candidate_text(runs, best)}"
    return [text, *lines]


def pir_schedules() -> str:
    """`fthenb, 1f1b, vpp`: the schedules Paddle's PIR pipeline runs, by the names
    `--schedule` takes (Paddle's schedule_modes are said only in its settings)."""
    return ", ".join(planner.PIR_SCHEDULE_MODES)


def candidate_text(c: Candidate, best: Candidate) -> str:
    """`vpp at m 8 (1.120x)`: a candidate's schedule, m and time relative to #1."""
    relative = float(c.time_per_micro_batch / best.time_per_micro_batch)
    return f"{c.schedule} at m {c.micro_batches} ({relative:.3f}x)"


def conversion_lines(o: PlanOutcome, conversions: Sequence[Conversion]) -> list[str]:
    """Per row, how to get its plan: the `vppctl convert` command, or for a PIR program
    how Paddle runs its split (`pir_row_text`); and what it was simulated under."""
    shell = planner.shell
    pir, best = o.result.pir, o.result.candidates[0]
    lines = ["to convert:" if pir is None else "in Paddle (PIR):"]
    for i, conversion in enumerate(conversions, start=1):
        how = [shell(conversion.command)] if pir is None else pir_row_text(conversion, pir, best)
        lines.append(f"{i:>2}  {how[0]}")
        lines.extend(how[1:])
        lines.append(f"    {simulated_line(conversion)}")
    return lines


# How many of the best conversions `plan` shows the launch settings of.
LAUNCHES_SHOWN = 3
RUNTIME_NAMES = {"paddle": "Paddle", "megatron": "Megatron-Core", "torch": "torch"}


def settings_text(s: Settings) -> str:
    """One runtime's settings on one line, as they are written in its own language."""
    if not s.runs:
        return f"cannot: {s.note}"
    if s.runtime == "paddle":
        fields = ", ".join(
            f"{key.removeprefix('strategy.pipeline.')}={_python(value)}"
            for key, value in s.settings
        )
        return f"strategy.pipeline: {fields}"
    if s.runtime == "megatron":
        return " ".join(shell_pair(flag, value) for flag, value in s.settings)
    values = dict(s.settings)
    return (
        f"{values['class']}(stages, n_microbatches={values['n_microbatches']}); {values['stages']}"
    )


def _python(value: object) -> str:
    """A setting as Python writes it (a list for a tuple of numbers)."""
    return repr(list(value)) if isinstance(value, tuple) else repr(value)


def shell_pair(flag: str, value: object) -> str:
    return planner.shell([flag, str(value)])


def launch_lines(o: PlanOutcome, conversions: Sequence[Conversion]) -> list[str]:
    """For the best conversions: how to run each one's best candidate in every runtime."""
    lines = []
    size, pir = o.search.memory.micro_batch_size, o.result.pir
    for i, conversion in enumerate(conversions[:LAUNCHES_SHOWN], start=1):
        c = conversion.best
        lines.append(f"to launch #{i} ({c.schedule}, m {c.micro_batches}):")
        for s in c.launch(o.result.layer_class, size, pir):
            name = RUNTIME_NAMES[s.runtime] + (" (PIR)" if pir and s.runtime == "paddle" else "")
            lines.append(f"  {name}: {settings_text(s)}")
            if s.runs and s.note:
                lines.append(f"    ({s.note})")
        lines += layout_lines(c.layouts(pir))
    launched = conversions[:LAUNCHES_SHOWN]
    return lines + pir_best_lines(o, launched) + legacy_best_lines(o, launched)


# The most virtual stages a layout line lists (--json lists them all).
STAGES_SHOWN = 8


def layout_lines(split: Layouts) -> list[str]:
    """The split in each dialect: Megatron's layout, torchtitan's module names per stage,
    DeepSpeed's parts, and a PIR program's stage mesh per layer."""
    lines = []
    if split.megatron is not None:
        lines.append(f"  layout (Megatron-Core): {planner.shell([split.megatron])}")
    stages = [_fqn_runs(names) for names in split.torchtitan[:STAGES_SHOWN]]
    more = len(split.torchtitan) - STAGES_SHOWN
    lines.append(
        "  layout (torchtitan module_fqns_per_model_part): "
        + " | ".join(stages)
        + (f" | ... ({more} more; --json lists all)" if more > 0 else "")
    )
    if split.deepspeed_parts is not None:
        uniform = ", as partition_method='uniform' gives" if split.deepspeed_uniform else ""
        lines.append(
            f"  layout (DeepSpeed PipelineModule.parts): {list(split.deepspeed_parts)}{uniform}"
        )
    if split.paddle_stage_per_layer is not None:
        held = Counter(split.paddle_stage_per_layer)  # non-decreasing: runs by stage
        runs = ", ".join(f"stage {stage} x{n}" for stage, n in sorted(held.items()))
        lines.append(f"  layout (Paddle PIR, stage mesh of each layer in order): {runs}")
    return lines


def _fqn_runs(names: Sequence[str]) -> str:
    """`tok_embeddings, layers.0-3`: a stage's module names, its blocks as one range."""
    blocks = [i for i, name in enumerate(names) if name.startswith("layers.")]
    if len(blocks) < 2:
        return ", ".join(names) or "(empty)"
    first, last = blocks[0], blocks[-1]
    span = f"{names[first]}-{names[last].removeprefix('layers.')}"
    return ", ".join([*names[:first], span, *names[last + 1 :]])


def pir_best_lines(o: PlanOutcome, launched: Sequence[Conversion]) -> list[str]:
    """For a PIR program: the best candidate Paddle's PIR pipeline runs, and its strategy
    (unless it is one just launched)."""
    r = o.result
    if r.pir is None:
        return []
    i = r.best_on_pir
    if i is None:
        refused = planner.completion_refusal(r.pir, 2) is not None
        which = (
            "and at vpp > 1 its completion refuses this program (above)"
            if refused
            else "loop-placed, on splits its completion makes (--split keep does)"
        )
        return [f"Paddle (PIR) runs none of these candidates: it runs {pir_schedules()}, {which}"]
    c = r.candidates[i]
    shown = next((k for k, v in enumerate(launched, start=1) if v.best is c), None)
    if shown is not None:
        return [f"best in Paddle (PIR): #{shown}, launched above"]
    paddle = c.launch(r.layer_class, o.search.memory.micro_batch_size, r.pir)[0]
    return [
        f"best in Paddle (PIR): vpp {c.vpp}, split {c.split}, {candidate_text(c, r.candidates[0])}",
        f"  {settings_text(paddle)}",
        f"    ({paddle.note})",
    ]


def legacy_best_lines(o: PlanOutcome, launched: Sequence[Conversion]) -> list[str]:
    """For a legacy program searched under another runtime than its own (Paddle 3.0.0):
    the best candidate Paddle runs, and its strategy (unless it is one just launched)."""
    r = o.result
    if r.pir is not None or r.runtime == "paddle":
        return []
    name = f"Paddle {PADDLE_LEGACY_VPP}"
    size = o.search.memory.micro_batch_size
    for c in r.candidates:
        paddle = c.launch(r.layer_class, size)[0]
        if not paddle.runs:
            continue
        shown = next((k for k, v in enumerate(launched, start=1) if v.best is c), None)
        if shown is not None:
            return [f"best in {name}: #{shown}, launched above"]
        text = candidate_text(c, r.candidates[0])
        return [
            f"best in {name}: vpp {c.vpp}, {c.placement} placement, split {c.split}, {text}",
            f"  {planner.shell(c.command)}",
            f"  {settings_text(paddle)}",
        ]
    return [f"best in {name}: none of these candidates; --runtime paddle searches its own"]


def render_plan(console: Console, o: PlanOutcome, top: int) -> None:
    conversions = o.result.conversions[:top]
    for line in plan_heading(o):
        console.print(printed(line))
    console.print(plan_table(conversions, o.result.candidates[0], o.result.measured is not None))
    for line in conversion_lines(o, conversions):
        console.print(printed(line), soft_wrap=True)
    for line in launch_lines(o, conversions):
        console.print(printed(line), soft_wrap=True)
    for line in plan_notes(o, len(conversions)):
        console.print(printed(line))
