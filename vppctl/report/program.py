"""Tables of the program commands: convert and inspect (verify's are `vppctl.report.verify`;
the JSON of each is its outcome's `to_json()`). Each renderer reads one outcome."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from vppctl import planner, schedule
from vppctl.choices import ProgramLayout
from vppctl.convert import ConvertResult
from vppctl.outcomes import ConvertOutcome, vpp_verdict
from vppctl.plan import Plan
from vppctl.program import PirOrigin
from vppctl.report.common import (
    TABLE_ROWS,
    compact_layers,
    compact_table,
    human,
    human_bytes,
    iec_short,
    printed,
)
from vppctl.summary import ChunkLayers, Summary
from vppctl.units import seconds_text

if TYPE_CHECKING:  # the planner's, as convert --micro-batches found it
    from vppctl.planner import Bubble


def layers_line(plan: Plan) -> str:
    how = "detected" if plan.detected else f"--seg-method {plan.seg_method}"
    return f"layers: {plan.layer_class} x {plan.n_layers} ({how})"


def convert_title(r: ConvertResult) -> str:
    p = r.plan
    return (
        f"pp {p.pp} x vpp {p.vpp}, {p.mode} mode: {r.ops_changed}/{r.n_ops} ops, "
        f"{r.vars_changed}/{r.n_vars} vars changed"
    )


def convert_table(r: ConvertResult) -> Table:
    p = r.plan
    show_cost = p.cost_kind != "params"
    table = compact_table()
    for name, justify in (
        ("VS", "right"),
        ("Stg", "right"),
        ("Ch", "right"),
        ("Mesh", "left"),
        ("Layers", "left"),
        ("Fwd", "right"),
        ("Bwd", "right"),
        ("Opt", "right"),
        ("Params", "right"),
    ):
        table.add_column(name, justify=justify, no_wrap=name != "Layers")  # type: ignore[arg-type]
    if show_cost:
        table.add_column(p.cost_kind.capitalize(), justify="right", no_wrap=True)
    for seg, st in zip(p.segments, r.stats):
        row = [
            str(seg.virtual_stage),
            str(seg.stage),
            str(seg.chunk),
            str(seg.mesh),
            compact_layers(seg.layers),
            str(st.forward),
            str(st.backward),
            str(st.optimizer),
            human(st.params),
        ]
        if show_cost:
            row.append(human(seg.cost))
        table.add_row(*map(printed, row))
    return table


def convert_notes(o: ConvertOutcome) -> list[str]:
    r, bubble = o.result, o.bubble
    p = r.plan
    notes = [
        layers_line(p),
        f"placement: {p.placement}; split: {p.split}",
        f"imbalance: {p.imbalance:.2f} (max/mean segment {p.cost_kind})",
        f"cross-stage edges per micro-batch: {r.edges_before} -> {r.edges_after}",
    ]
    notes.append(f"stage imbalance: {p.stage_imbalance:.2f} (busiest/mean stage {p.cost_kind})")
    if bubble is not None:
        notes.append(bubble_line(bubble))
        notes.append(bubble.hop.text())
        if bubble.measured is not None and bubble.measured.filled:
            filled = ", ".join(bubble.measured.filled)
            notes.append(f"not measured, filled from the program's estimate: {filled}")
        if bubble.memory:
            notes.append(peak_memory_line(bubble))
        verdict = vpp_verdict(bubble)
        if verdict is not None:
            notes.append(f"why: {verdict}")
    if r.moves:
        notes.append(moves_line(r))
    if r.callstack_bytes_saved is not None:
        notes.append(f"stripped op_callstack: {human_bytes(r.callstack_bytes_saved)} saved")
    if r.pir_plan is not None:
        notes.append(
            "a PIR program: written is the plan for vppctl.paddle.pir_plan (vpp_seg_method "
            f"{r.pir_plan.seg_method!r}), which Paddle's PIR completion follows; not the program"
        )
    return notes


def render_convert(console: Console, o: ConvertOutcome) -> None:
    # The title is its own line, not the table's title, so that it never wraps to
    # the table's width.
    console.print(printed(convert_title(o.result)), soft_wrap=True)
    console.print(convert_table(o.result))
    for line in convert_notes(o):
        console.print(printed(line))


def bubble_line(bubble: Bubble) -> str:
    """`bubble at m=8 (FLOP costs): 1F1B 35.1% -> interleaved 1F1B 23.5% of the step`: the
    idle share of the step, as `simulate` prints it for the same program."""
    names = schedule.SCHEDULE_NAMES
    shown = " -> ".join(f"{names[s]} {float(share):.1%}" for s, share in bubble.schedules.items())
    measure = "FLOP" if bubble.measure == "flops" else "op"
    runtime = f"--runtime {bubble.runtime}"
    if not shown:
        return f"bubble at m={bubble.micro_batches} ({runtime}): no schedule could run it"
    if bubble.measured is None:
        return (
            f"bubble at m={bubble.micro_batches} ({measure} costs, {runtime}): {shown} of the step"
        )
    steps = " -> ".join(seconds_text(float(step)) for step in bubble.steps.values())
    return (
        f"bubble at m={bubble.micro_batches} (measured costs, {bubble.measured.source.path}, "
        f"{runtime}): {shown} of the step; step {steps}"
    )


def peak_memory_line(bubble: Bubble) -> str:
    """`worst stage's peak: 1F1B 3.99 GiB -> interleaved 1F1B 5.08 GiB (stage 0)`, at
    micro-batch size 1 (`vppctl simulate --micro-batch-size` sizes others)."""
    shown, stages = [], []
    for s, memory in bubble.memory.items():
        worst = planner.worst_stage(memory)
        shown.append(f"{schedule.SCHEDULE_NAMES[s]} {iec_short(worst.peak_bytes)}")
        stages.append(str(worst.stage))
    where = f"stage {stages[0]}" if len(set(stages)) == 1 else f"stages {', '.join(stages)}"
    return f"worst stage's peak: {' -> '.join(shown)} ({where})"


def moves_line(r: ConvertResult) -> str:
    """`parameters: 138 (25.2 MiB), 96 (12.0 MiB) move to another (stage, chunk)`: what a
    checkpoint remap touches (`--moves` writes the map; for a PIR program, whose plan is
    written, Paddle's own build moves them)."""
    moved = [m for m in r.moves if m.moved]
    total = sum(m.bytes for m in r.moves)
    how = "--moves FILE writes the map" if r.pir_plan is None else "Paddle's build moves them"
    return (
        f"parameters: {len(r.moves)} ({iec_short(total)}), {len(moved)} "
        f"({iec_short(sum(m.bytes for m in moved))}) move to another (stage, chunk); {how}"
    )


def pir_line(origin: PirOrigin) -> str:
    """What `inspect` says of a program read from PIR: the ops it read as something else."""
    folded = ", ".join(f"{n} {t}" for t, n in origin.folded) or "none"
    return (
        f"read from PIR (Paddle 3.x JSON, version {origin.version}); ops read as variables or "
        f"read through: {folded}"
    )


def number_runs(numbers: Sequence[int]) -> str:
    """Layer numbers as runs: `0–7`, `3`, `0–3,8`."""
    runs: list[str] = []
    start = 0
    for i in range(1, len(numbers) + 1):
        if i == len(numbers) or numbers[i] != numbers[i - 1] + 1:
            a, b = numbers[start], numbers[i - 1]
            runs.append(str(a) if a == b else f"{a}–{b}")
            start = i
    return ",".join(runs)


def chunk_ranges(chunks: Sequence[ChunkLayers]) -> str:
    """A stage's layers, chunk by chunk in chunk order: `0–7 | 64–71`."""
    return " | ".join(number_runs(c.numbers) for c in chunks)


def layer_numbers_line(names: Sequence[str]) -> str:
    """What the stage table's layer numbers stand for, first and last few."""
    shown = [f"{k} = {n}" for k, n in enumerate(names)]
    if len(shown) > 3:
        shown = [*shown[:2], "…", shown[-1]]
    return "layer numbers: " + ", ".join(shown)


# How the table names each layout token of the JSON.
LAYOUT_NAMES: dict[ProgramLayout, str] = {
    "plain": "plain PP",
    "interleaved": "interleaved VPP",
    "unannotated": "unannotated",
}


def render_summary(console: Console, s: Summary) -> None:
    total = sum(s.ops.values())
    roles = ", ".join(f"{n} {k}" for k, n in s.ops.items() if n)
    lines = [
        f"{s.source}: {human_bytes(s.size)}, {s.blocks} block(s), {s.vars} vars",
        f"ops: {total} ({roles})",
        f"parameters: {s.params} ({human(s.param_elements)} elements)",
        f"layout: {LAYOUT_NAMES[s.layout]}; "
        f"chunk ids present: {', '.join(map(str, s.chunks)) or 'none'}",
        f"layers: {s.layers.layer_class} x {len(s.layers)} ({s.layers_note})"
        if s.layers
        else f"layers: not found ({s.layers_note})",
    ]
    if s.layers:
        lines.append(layer_numbers_line(s.layers.names))
    if s.global_meshes:
        lines.append("global meshes (not stages): " + " ".join(str(m) for m in s.global_meshes))
    if s.plan is not None:
        lines.append(
            f"plan: pp {s.plan.pp} x vpp {s.plan.vpp}, {s.plan.placement} placement, "
            f"{s.plan.mode} mode, written by vppctl {s.plan.vppctl_version}"
        )
    if s.callstack_ops:
        lines.append(f"{s.callstack_ops} ops carry op_callstack (--strip-callstack drops them)")
    if s.unplaced_ops:
        lines.append(f"{s.unplaced_ops} ops have no process mesh")
    if s.pir is not None:
        lines.append(pir_line(s.pir))
    for line in lines:
        console.print(printed(line))
    table = compact_table("stages")
    for name, justify in (
        ("Stage", "right"),
        ("Mesh", "left"),
        ("Layers", "left"),
        ("Fwd", "right"),
        ("Bwd", "right"),
        ("Opt", "right"),
        ("Chunks", "left"),
    ):
        table.add_column(name, justify=justify, no_wrap=name != "Layers")  # type: ignore[arg-type]
    for st in s.stages[:TABLE_ROWS]:
        cells = (
            str(st.stage),
            str(st.mesh),
            chunk_ranges(st.layers_by_chunk) or "-",
            str(st.ops["forward"]),
            str(st.ops["backward"]),
            str(st.ops["optimizer"]),
            ",".join(map(str, st.chunks)) or "-",
        )
        table.add_row(*map(printed, cells))
    console.print(table)
    if len(s.stages) > TABLE_ROWS:
        more = len(s.stages) - TABLE_ROWS
        console.print(printed(f"... and {more} more stage(s); --json lists them all"))
