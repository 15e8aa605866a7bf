"""Tables of the program commands: convert and inspect (verify's are `vppctl.report.verify`;
the JSON of each is its outcome's `to_json()`). Each renderer reads one outcome."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from vppctl.choices import ProgramLayout
from vppctl.convert import ConvertResult
from vppctl.outcomes import ConvertOutcome
from vppctl.report.common import (
    TABLE_ROWS,
    compact_table,
    human,
    human_bytes,
    printed,
    rich_table,
)
from vppctl.report.plain import convert_grid, convert_notes, convert_title
from vppctl.summary import ChunkLayers, Summary

if TYPE_CHECKING:  # a PIR program's: loaded with its reader
    from vppctl.program import PirOrigin


def convert_table(r: ConvertResult) -> Table:
    return rich_table(convert_grid(r))


def render_convert(console: Console, o: ConvertOutcome) -> None:
    # The title is its own line, not the table's title, so that it never wraps to
    # the table's width.
    console.print(printed(convert_title(o.result)), soft_wrap=True)
    console.print(convert_table(o.result))
    for line in convert_notes(o):
        console.print(printed(line))


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
