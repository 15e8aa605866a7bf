"""Tables and JSON of the schedule commands: simulate (the plan simulated, the summary
and per-stage tables, memory per stage, the gain) and plan (the candidates). The
pictures of a schedule (terminal timeline, SVG, trace) are `vppctl.schedule.timeline`'s."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from vppctl.commands import (
    PlanOutcome,
    SimulatedPlan,
    SimulateOutcome,
)
from vppctl.planner import MemoryOptions, StageMemory, iec, worst_stage
from vppctl.report.common import (
    BUBBLE_DEFINITION,
    compact_table,
    document,
    picture_columns,
    printed,
)
from vppctl.schedule import (
    SimResult,
    Step,
    number,
    percent,
    render_timelines,
    rounded,
    stage_units,
)

if TYPE_CHECKING:  # the planner loads with `vppctl plan` only
    from vppctl.planner import Candidate, Conversion, PirInput, PirSplit, Settings

# -- simulate: names and the plan line


def plan_lines(simulated: SimulatedPlan) -> list[str]:
    """`plan: pp 8 x vpp 2, loop placement, split balanced (layers 4,8,9,...)` and the
    costs line."""
    measure = "forward FLOPs" if simulated.measure == "flops" else "forward op count"
    f, b, w = (number(x) for x in simulated.costs)
    return [
        f"plan: {simulated.description}",
        f"costs: F,B,W = {f},{b},{w} x each segment's {measure}",
    ]


# -- simulate: comparison between 1F1B and the interleaving schedule


def _pair(results: Sequence[SimResult]) -> tuple[SimResult, SimResult] | None:
    """The (1F1B, interleaving schedule) pair to compare, if both are present."""
    baseline = next((r for r in results if r.schedule == "1f1b"), None)
    candidate = next(
        (r for r in results if r.schedule in ("interleaved", "zbv") and r.vpp > 1), None
    )
    if baseline is None or candidate is None:
        return None
    return baseline, candidate


def gain_line(results: Sequence[SimResult]) -> str | None:
    """One sentence with what interleaving buys and costs, or None if nothing to compare."""
    pair = _pair(results)
    if pair is None:
        return None
    base, vpp = pair
    saved = (base.makespan - vpp.makespan) / base.makespan
    memory = vpp.peak_in_flight_stage_units[0] / base.peak_in_flight_stage_units[0]
    return (
        f"{vpp.title} vs {base.title}: makespan {number(base.makespan)} -> "
        f"{number(vpp.makespan)} ({percent(saved)} shorter), bubble {percent(base.bubble)} -> "
        f"{percent(vpp.bubble)} of the step, stage 0 activations {stage_units(base, 0)} -> "
        f"{stage_units(vpp, 0)} stages (x{float(memory):.2f})"
    )


# -- simulate: tables


def summary_heading(results: Sequence[SimResult]) -> str:
    first = results[0]
    heading = f"one training step: pp={first.pp}, m={first.micro_batches}"
    if first.p2p_cost:
        heading += f", p2p cost {number(first.p2p_cost)} per hop"
    return heading


def summary_table(results: Sequence[SimResult]) -> Table:
    """Headline figures, one column per schedule, so the comparison is one glance."""
    table = compact_table()
    table.add_column("")
    for result in results:
        table.add_column(result.title, justify="right")
    rows: list[tuple[str, list[str]]] = [
        ("makespan", [number(r.makespan) for r in results]),
        ("busiest stage's compute", [number(r.ideal) for r in results]),
        ("bubble (idle share of the step)", [percent(r.bubble) for r in results]),
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


def stage_table(results: Sequence[SimResult]) -> Table:
    """Per-stage bubble and peak in-flight units, side by side."""
    table = compact_table()
    table.add_column("Stg", justify="right")
    for result in results:
        table.add_column(f"bubble {result.title}", justify="right")
        table.add_column("in-flight", justify="right")
    for stage in range(results[0].pp):
        cells: list[str] = []
        for result in results:
            cells.append(percent(result.per_stage_bubble[stage]))
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


def iec_short(n: int) -> str:
    """At most eight characters: `493 MiB`, `6.30 GiB`, `46.3 GiB`."""
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            value = n / size
            digits = 0 if value >= 100 else 1 if value >= 10 else 2
            return f"{value:.{digits}f} {unit}"
    return f"{n} B"


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


def simulation_warnings(results: Sequence[SimResult]) -> list[str]:
    return list(dict.fromkeys(w for r in results for w in r.warnings))


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
    outcome, runs = _unpack(results)
    if outcome is not None and outcome.plan is not None:
        for line in plan_lines(outcome.plan):
            console.print(printed(line))
    console.print(printed(f"bubble: {BUBBLE_DEFINITION}"))
    console.print(printed(summary_heading(runs) + ":"))
    console.print(summary_table(runs))
    console.print(printed("per stage (bubble: the stage's idle share of the step):"))
    console.print(stage_table(runs))
    if outcome is not None and outcome.memory and outcome.memory_options is not None:
        console.print(printed(memory_heading(outcome.memory_options)))
        console.print(memory_table(runs, outcome.memory, outcome.memory_options))
        for line in memory_notes(outcome.memory, runs):
            console.print(printed(line))
    gain = gain_line(runs)
    if gain is not None:
        console.print(printed(gain, style="bold"))
    if timeline:
        render_timelines(
            runs, console, suggest_files=suggest_files, columns=picture_columns(console)
        )


# -- simulate: JSON


def _step_json(step: Step) -> dict[str, Any]:
    return {
        "stage": step.stage,
        "chunk": step.chunk,
        "virtual_stage": step.virtual_stage,
        "micro_batch": step.micro_batch,
        "kind": step.kind,
        "action": step.action,
        "start": rounded(step.start),
        "end": rounded(step.end),
    }


# A stage's memory keys, null when there is no program to size.
NO_STAGE_MEMORY: dict[str, Any] = dict.fromkeys(
    (
        "params_bytes",
        "grads_bytes",
        "optimizer_bytes",
        "peak_activation_bytes",
        "peak_bytes",
        "over_limit",
        "chunks",
    )
)


def stage_memory_json(s: StageMemory) -> dict[str, Any]:
    """One stage's bytes (the shape `simulate`, `plan` and their JSON share)."""
    return {
        "params_bytes": s.params_bytes,
        "grads_bytes": s.grads_bytes,
        "optimizer_bytes": s.optimizer_bytes,
        "peak_activation_bytes": s.peak_activation_bytes,
        "peak_bytes": s.peak_bytes,
        "over_limit": s.over_limit,
        "chunks": [
            {
                "chunk": c.chunk,
                "virtual_stage": c.virtual_stage,
                "params_bytes": c.params_bytes,
                "grads_bytes": c.grads_bytes,
                "optimizer_bytes": c.optimizer_bytes,
                "activation_bytes_per_micro_batch": c.activation_bytes_per_micro_batch,
                "peak_in_flight": c.peak_in_flight,
                "activation_bytes": c.activation_bytes,
            }
            for c in s.chunks
        ],
    }


def _result_json(
    result: SimResult, steps: bool, memory: Sequence[StageMemory] | None
) -> dict[str, Any]:
    orders = result.orders
    per_stage = []
    for stage in range(result.pp):
        entry: dict[str, Any] = {
            "stage": stage,
            "bubble": rounded(result.per_stage_bubble[stage]),
            "idle": rounded(result.per_stage_idle[stage]),
            "peak_in_flight": result.peak_in_flight[stage],
            "peak_in_flight_stages": rounded(result.peak_in_flight_stage_units[stage]),
            "peak_in_flight_per_chunk": list(result.peak_in_flight_per_chunk[stage]),
            "order": list(orders[stage]),
        }
        entry.update(NO_STAGE_MEMORY if memory is None else stage_memory_json(memory[stage]))
        per_stage.append(entry)
    data: dict[str, Any] = {
        "schedule": result.schedule,
        "pp": result.pp,
        "vpp": result.vpp,
        "plan_vpp": result.plan_vpp,
        "placement": result.placement,
        "group_size": result.group_size,
        "micro_batches": result.micro_batches,
        "p2p_cost": rounded(result.p2p_cost),
        "makespan": rounded(result.makespan),
        "ideal": rounded(result.ideal),
        "bubble": rounded(result.bubble),
        "bubble_vs_ideal": rounded(result.bubble_vs_ideal),
        "stage_imbalance": rounded(result.stage_imbalance),
        "p2p_messages": result.p2p_messages,
        "per_stage": per_stage,
        "warnings": list(result.warnings),
        # Exact values for anyone checking closed forms; floats above are rounded.
        "exact": {
            "makespan": str(result.makespan),
            "ideal": str(result.ideal),
            "bubble": str(result.bubble),
            "bubble_vs_ideal": str(result.bubble_vs_ideal),
        },
    }
    data["memory"] = None
    if memory is not None:
        worst = worst_stage(memory)
        data["memory"] = {"worst_stage": worst.stage, "peak_bytes": worst.peak_bytes}
    data["steps"] = [_step_json(step) for step in result.steps] if steps else None
    return data


def _plan_json(simulated: SimulatedPlan, opts: MemoryOptions | None) -> dict[str, Any]:
    p = simulated.plan
    out: dict[str, Any] = {
        "pp": p.pp,
        "vpp": p.vpp,
        "placement": p.placement,
        "split": simulated.split,
        "recorded": simulated.recorded,
        "layers_per_segment": [len(s.layers) for s in p.segments],
        "costs": {
            "measure": simulated.measure,
            "forward": list(simulated.segment_costs),
            "ratios": dict(zip(("forward", "backward", "weight"), map(rounded, simulated.costs))),
        },
        "memory": None,
    }
    if opts is not None:
        out["memory"] = {
            "micro_batch_size": opts.micro_batch_size,
            "seq_len": opts.seq_len,
            "limit_bytes": opts.limit,
        }
    return out


def _unpack(
    results: Sequence[SimResult] | SimulateOutcome,
) -> tuple[SimulateOutcome | None, tuple[SimResult, ...]]:
    if isinstance(results, SimulateOutcome):
        return results, results.results
    return None, tuple(results)


def simulation_json(
    results: Sequence[SimResult] | SimulateOutcome, *, steps: bool = False
) -> dict[str, Any]:
    """A json-serialisable dict of the figures; ``steps=True`` adds every step."""
    outcome, runs = _unpack(results)
    memory: Sequence[Sequence[StageMemory] | None] = (
        outcome.memory if outcome is not None and outcome.memory else [None] * len(runs)
    )
    data: dict[str, Any] = {"bubble_definition": BUBBLE_DEFINITION}
    data["plan"] = None
    if outcome is not None and outcome.plan is not None:
        data["plan"] = _plan_json(outcome.plan, outcome.memory_options)
    data["results"] = [_result_json(r, steps, m) for r, m in zip(runs, memory)]
    data["over_memory_limit"] = None if outcome is None else over_memory_limit(outcome)
    data["comparison"] = None
    pair = _pair(runs)
    if pair is not None:
        base, vpp = pair
        data["comparison"] = {
            "baseline": base.schedule,
            "candidate": vpp.schedule,
            "speedup": rounded(base.makespan / vpp.makespan),
            "bubble": [rounded(base.bubble), rounded(vpp.bubble)],
            "bubble_vs_ideal": [rounded(base.bubble_vs_ideal), rounded(vpp.bubble_vs_ideal)],
            "stage0_activation_ratio": rounded(
                vpp.peak_in_flight_stage_units[0] / base.peak_in_flight_stage_units[0]
            ),
        }
    written = () if outcome is None else outcome.written
    data["written"] = [{"path": path, "bytes": size} for path, size in written]
    data["warnings"] = simulation_warnings(runs) if outcome is None else list(outcome.warnings)
    return document("simulate", data)


def stages_over_limit(outcome: SimulateOutcome) -> str:
    """`stage 0 in 1F1B (v=1); stages 0, 1 in interleaved 1F1B (v=2)`: what is over the
    memory limit, per schedule simulated."""
    parts = []
    for result, stages in zip(outcome.results, outcome.memory):
        over = [str(s.stage) for s in stages if s.over_limit]
        if over:
            noun = "stage" if len(over) == 1 else "stages"
            parts.append(f"{noun} {', '.join(over)} in {result.title}")
    return "; ".join(parts)


def over_memory_limit(outcome: SimulateOutcome) -> bool | None:
    """Whether a stage's peak exceeds --memory-limit in any schedule simulated (None: no
    limit was given, or no program to size)."""
    opts = outcome.memory_options
    if opts is None or opts.limit is None or not outcome.memory:
        return None
    return any(s.over_limit for stages in outcome.memory for s in stages)


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
            f"a PIR program (Paddle 3.x), its stage meshes holding {held} layers: vppctl "
            "converts no PIR; each row says whether Paddle's PIR completion makes its split"
        )
    lines.append(
        f"costs: {measure}; memory at micro-batch size {opts.memory.micro_batch_size}{seq}{limit}"
    )
    return lines


def plan_table(conversions: Sequence[Conversion], best: Candidate) -> Table:
    """One row per conversion, at its best schedule and micro-batch count (the schedules
    and counts it was simulated under are listed with its command)."""
    table = compact_table()
    for name, justify in (
        ("#", "right"),
        ("vpp", "right"),
        ("place", "left"),
        ("split", "left"),
        ("schedule", "left"),
        ("m", "right"),
        ("time", "right"),
        ("bubble", "right"),
        ("p2p", "right"),
        ("peak", "right"),
        ("Stg", "right"),
    ):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for i, conversion in enumerate(conversions, start=1):
        c = conversion.best
        worst = c.worst
        cells = (
            str(i),
            str(c.vpp),
            c.placement,
            c.split,
            c.schedule,
            str(c.micro_batches),
            f"{float(c.time_per_micro_batch / best.time_per_micro_batch):.3f}x",
            percent(c.bubble),
            str(c.p2p_messages),
            iec_short(worst.peak_bytes),
            str(worst.stage),
        )
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
        "bubble: idle share of the step; peak: the worst stage's bytes",
        f"{len(r.conversions)} conversions ({len(r.candidates)} candidates), {shown} shown",
    ]
    if r.over_limit:
        notes.append(f"{r.over_limit} over --memory-limit left out")
    refused = sum(n for _, n in r.refused)
    if refused:
        reasons = "; ".join(f"{reason}: {n}" for reason, n in r.refused[:3])
        more = "; ..." if len(r.refused) > 3 else ""
        notes.append(f"{refused} refused as a runtime or convert would ({reasons}{more})")
    return notes


def conversion_split(conversion: Conversion, pir: PirInput) -> PirSplit:
    """A PIR program's conversion as Paddle's PIR completion would make it, or why not."""
    from vppctl.planner import pir_split

    c = conversion.best
    return pir_split(c.pp, c.vpp, c.placement, c.layers_per_segment, pir.stage_layers)


def pir_row_text(conversion: Conversion, pir: PirInput, best: Candidate) -> str:
    """A PIR program's row: what the model holds and Paddle's completion deals, and the
    best candidate Paddle runs on it; or why Paddle's completion cannot make the split."""
    split = conversion_split(conversion, pir)
    if split.reason is not None:
        return f"Paddle (PIR) cannot: {split.reason}"
    text = f"Paddle (PIR) takes it: {split.placement_text(pir.stage_layers)}"
    runs = conversion.best_on_pir(pir)
    if runs is None:
        from vppctl.planner import PIR_MODES

        return (
            f"{text}; none of its schedules simulated runs on Paddle's PIR pipeline "
            f"({', '.join(PIR_MODES)})"
        )
    return f"{text}; Paddle runs it best as {candidate_text(runs, best)}"


def candidate_text(c: Candidate, best: Candidate) -> str:
    """`vpp at m 8 (1.120x)`: a candidate's schedule, m and time relative to #1."""
    relative = float(c.time_per_micro_batch / best.time_per_micro_batch)
    return f"{c.schedule} at m {c.micro_batches} ({relative:.3f}x)"


def conversion_lines(o: PlanOutcome, conversions: Sequence[Conversion]) -> list[str]:
    """Per row, how to get its plan: the `vppctl convert` command, or for a PIR program
    whether Paddle's PIR completion makes its split; and what it was simulated under."""
    from vppctl.planner import shell

    pir, best = o.result.pir, o.result.candidates[0]
    lines = ["to convert:" if pir is None else "in Paddle (PIR):"]
    for i, conversion in enumerate(conversions, start=1):
        how = shell(conversion.command) if pir is None else pir_row_text(conversion, pir, best)
        lines.append(f"{i:>2}  {how}")
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
    from vppctl.planner import shell

    return shell([flag, str(value)])


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
    return lines + pir_best_lines(o, conversions[:LAUNCHES_SHOWN])


def pir_best_lines(o: PlanOutcome, launched: Sequence[Conversion]) -> list[str]:
    """For a PIR program: the best candidate Paddle's PIR pipeline runs, and its strategy
    (unless it is one just launched)."""
    r = o.result
    if r.pir is None:
        return []
    i = r.best_on_pir
    if i is None:
        from vppctl.planner import PIR_SCHEDULE_MODES

        return [
            "Paddle (PIR) runs none of these candidates: it runs "
            f"{', '.join(PIR_SCHEDULE_MODES)}, loop-placed, on splits its completion makes "
            "(--split keep does)"
        ]
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


def render_plan(console: Console, o: PlanOutcome, top: int) -> None:
    conversions = o.result.conversions[:top]
    for line in plan_heading(o):
        console.print(printed(line))
    console.print(plan_table(conversions, o.result.candidates[0]))
    for line in conversion_lines(o, conversions):
        console.print(printed(line), soft_wrap=True)
    for line in launch_lines(o, conversions):
        console.print(printed(line), soft_wrap=True)
    for line in plan_notes(o, len(conversions)):
        console.print(printed(line))


def settings_json(s: Settings) -> dict[str, Any]:
    settings = {k: list(v) if isinstance(v, tuple) else v for k, v in s.settings}
    return {"runs": s.runs, "settings": settings, "note": s.note}


def command_json(command: Sequence[str]) -> dict[str, Any]:
    """`command` and `argv` of a conversion: null for a PIR program (vppctl converts none)."""
    from vppctl.planner import shell

    if not command:
        return {"command": None, "argv": None}
    return {"command": shell(command), "argv": list(command)}


def candidate_json(
    c: Candidate,
    best: Candidate,
    layer_class: str,
    micro_batch_size: int,
    pir: PirInput | None = None,
) -> dict[str, Any]:
    worst = c.worst
    launch = c.launch(layer_class, micro_batch_size, pir)
    return {
        **command_json(c.command),
        "vpp": c.vpp,
        "placement": c.placement,
        "split": c.split,
        "schedule": c.schedule,
        "group_size": c.group_size,
        "micro_batches": c.micro_batches,
        "makespan": rounded(c.makespan),
        "time_per_micro_batch": rounded(c.time_per_micro_batch),
        "relative": rounded(c.time_per_micro_batch / best.time_per_micro_batch),
        "bubble": rounded(c.bubble),
        "p2p_messages": c.p2p_messages,
        "layers_per_segment": list(c.layers_per_segment),
        "megatron_layout": c.megatron_layout,
        "peak_bytes": worst.peak_bytes,
        "worst_stage": worst.stage,
        "per_stage": [{"stage": s.stage, **stage_memory_json(s)} for s in c.memory],
        "launch": {s.runtime: settings_json(s) for s in launch},
        "exact": {"makespan": str(c.makespan), "bubble": str(c.bubble)},
    }


def over_limit_json(
    c: Candidate,
    best: Candidate,
    layer_class: str,
    micro_batch_size: int,
    limit: int | None,
    pir: PirInput | None = None,
) -> dict[str, Any]:
    """A candidate left out by --memory-limit, and why: the stages over it."""
    over = [s for s in c.memory if s.over_limit]
    shown = ", ".join(f"stage {s.stage} {iec(s.peak_bytes)}" for s in over)
    reason = f"over --memory-limit {iec(limit)}: {shown}" if limit is not None else "over the limit"
    return {
        **candidate_json(c, best, layer_class, micro_batch_size, pir),
        "reason": reason,
        "stages_over_limit": [s.stage for s in over],
    }


def pir_split_json(split: PirSplit) -> dict[str, Any]:
    return {
        "takes": split.takes,
        "reason": split.reason,
        "stage_layers": list(split.stage_layers),
        "chunk_layers": [list(chunks) for chunks in split.chunk_layers],
        "moves_layers": split.moves_layers,
    }


def conversion_json(
    conversion: Conversion, index: dict[int, int], pir: PirInput | None = None
) -> dict[str, Any]:
    c = conversion.best
    split = None if pir is None else pir_split_json(conversion_split(conversion, pir))
    return {
        **command_json(conversion.command),
        "paddle_pir": split,
        "vpp": c.vpp,
        "placement": c.placement,
        "split": c.split,
        "layers_per_segment": list(c.layers_per_segment),
        "schedules": list(conversion.schedules),
        "micro_batches": list(conversion.micro_batches),
        "best": index[id(c)],
    }


def plan_json(o: PlanOutcome) -> dict[str, Any]:
    r, opts = o.result, o.search
    best = (r.candidates or r.over or (None,))[0]
    index = {id(c): i for i, c in enumerate(r.candidates)}
    size, limit, layer_class, pir = (
        opts.memory.micro_batch_size,
        opts.memory.limit,
        r.layer_class,
        r.pir,
    )
    fits = [candidate_json(c, best, layer_class, size, pir) for c in r.candidates] if best else []
    over = [over_limit_json(c, best, layer_class, size, limit, pir) for c in r.over] if best else []
    return document(
        "plan",
        {
            "source": o.source,
            "pp": r.pp,
            "layers": {"count": r.n_layers, "class": r.layer_class},
            "pir": None
            if pir is None
            else {
                "stage_layers": list(pir.stage_layers),
                "vpp_seg_method": pir.vpp_seg_method,
                "best": r.best_on_pir,
            },
            "costs": r.measure,
            "time_unit": "the mean stage's forward of one micro-batch",
            "bubble_definition": BUBBLE_DEFINITION,
            "order": "time per micro-batch (makespan / micro_batches), then the worst stage's "
            "peak bytes, then p2p messages",
            "memory": {
                "micro_batch_size": opts.memory.micro_batch_size,
                "seq_len": opts.memory.seq_len,
                "limit_bytes": opts.memory.limit,
            },
            "conversions": [conversion_json(v, index, pir) for v in r.conversions],
            "candidates": fits,
            "over_limit": r.over_limit,
            "over_limit_candidates": over,
            "refused": [{"reason": reason, "count": n} for reason, n in r.refused],
            "warnings": list(r.warnings),
        },
    )
