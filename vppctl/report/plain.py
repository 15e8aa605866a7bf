"""Plain reports: what a renderer prints where rich would print it without styles (a pipe,
a file, a CI log), as lines, without loading rich.

rich costs a command line about as much as reading a small program (its import and its
first table); where nothing is styled, its output is plain text laid out by a few rules,
and this module lays it out by the same rules: the compact table (`compact_table`) as
rich draws it at a pipe's width, each note as one line. It does so only for text whose
every character rich counts as one column, with no cell starting or ending in a space
and no line near the pipe's width (`Grid.lines` and `lines` return None otherwise, and
the renderer takes rich). tests/cli/test_plain.py holds it to rich, table by table.

It also holds what the convert report says (`convert_title`, `convert_grid`,
`convert_notes`) and the number formats every table uses, so that the rich renderers
(`vppctl.report.program`) and the plain one say the same.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from vppctl import outcomes, planner, schedule
from vppctl.escape import printable
from vppctl.units import human_bytes, seconds_text

if TYPE_CHECKING:
    from vppctl.convert import ConvertResult
    from vppctl.outcomes import ConvertOutcome
    from vppctl.plan import Plan
    from vppctl.planner import Bubble

Justify = Literal["left", "right"]

# A line a pipe gets whole: rich's console for a pipe is this wide (vppctl.cli.streams'
# PIPE_WIDTH); a line near it is left to rich, which would wrap it.
PIPE_WIDTH = 1 << 16
_MAX_LINE = PIPE_WIDTH // 2
# Characters rich counts as one column each: printable ASCII and the few others vppctl
# itself prints (the layer runs' ellipsis, the arrows and dashes of the notes, the rule).
_ONE_COLUMN = re.compile("[\x20-\x7e…–—→×─]*")


def plain(text: str) -> bool:
    """Whether rich prints `text` as it is, one column per character, on one line."""
    return len(text) < _MAX_LINE and _ONE_COLUMN.fullmatch(text) is not None


@dataclass(frozen=True)
class Column:
    header: str
    justify: Justify = "left"
    wrap: bool = False  # at a terminal, rich may wrap this column's cells (never in a pipe)


@dataclass(frozen=True)
class Grid:
    """A compact table's columns and cells (already `printable`), for rich or for `lines`."""

    columns: tuple[Column, ...]
    rows: tuple[tuple[str, ...], ...]

    def lines(self) -> list[str] | None:
        """The table as rich's compact table prints it at a pipe's width, trailing spaces
        off (`vppctl.cli.streams` strips them from every line): the header, a rule, a line
        per row, the columns two spaces apart. None when rich may print it otherwise."""
        cells = [c.header for c in self.columns] + [cell for row in self.rows for cell in row]
        if not all(c.header and "[" not in c.header for c in self.columns) or not all(
            plain(cell) and cell == cell.strip(" ") for cell in cells
        ):
            return None
        widths = [len(c.header) for c in self.columns]
        for row in self.rows:
            widths = [max(w, len(cell)) for w, cell in zip(widths, row)]
        width = sum(widths) + 2 * (len(widths) - 1)
        if width >= _MAX_LINE:
            return None
        justified = list(zip(widths, (c.justify for c in self.columns)))

        def line(row: Iterable[str]) -> str:
            return "  ".join(
                cell.rjust(w) if how == "right" else cell.ljust(w)
                for cell, (w, how) in zip(row, justified)
            ).rstrip(" ")

        return [
            line(c.header for c in self.columns),
            "─" * width,
            *(line(row) for row in self.rows),
        ]


def lines(texts: Iterable[str]) -> list[str] | None:
    """Lines of text (escaped here) as rich prints each alone; None when it may not."""
    said = [printable(text).rstrip(" ") for text in texts]
    return said if all(map(plain, said)) else None


# -- number formats -------------------------------------------------------------------


def human(n: float) -> str:
    """1234567 -> 1.2M."""
    for unit, size in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f}{unit}"
    return f"{n:g}"


def iec_short(n: int) -> str:
    """At most eight characters: `493 MiB`, `6.30 GiB`, `46.3 GiB`."""
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            value = n / size
            digits = 0 if value >= 100 else 1 if value >= 10 else 2
            return f"{value:.{digits}f} {unit}"
    return f"{n} B"


_NUMBERED = re.compile(r"(.*)_(\d+)")


def compact_layers(names: Sequence[str]) -> str:
    """A run of layers in one short cell: `DecoderLayer_103…111 (9)`, `DecoderLayer…_4 (5)`
    (Paddle's first instance has no suffix), else `first … last (n)`; one layer: its name."""
    if len(names) <= 1:
        return "".join(names)
    first, last = names[0], names[-1]
    numbered = _NUMBERED.fullmatch(last)
    if numbered is not None:
        prefix, number = numbered.groups()
        if first == prefix:
            return f"{first}…_{number} ({len(names)})"
        head = _NUMBERED.fullmatch(first)
        if head is not None and head[1] == prefix:
            return f"{first}…{number} ({len(names)})"
    return f"{first} … {last} ({len(names)})"


# -- convert ----------------------------------------------------------------------------


def convert_lines(o: ConvertOutcome) -> list[str] | None:
    """The convert report as plain lines (the title, the table, the notes), or None when
    rich may print it otherwise (`vppctl.report.render_convert` then prints it)."""
    table = convert_grid(o.result).lines()
    said = lines([convert_title(o.result), *convert_notes(o)])
    if table is None or said is None:
        return None
    return [said[0], *table, *said[1:]]


def layers_line(plan: Plan) -> str:
    how = "detected" if plan.detected else f"--seg-method {plan.seg_method}"
    return f"layers: {plan.layer_class} x {plan.n_layers} ({how})"


def convert_title(r: ConvertResult) -> str:
    p = r.plan
    return (
        f"pp {p.pp} x vpp {p.vpp}, {p.mode} mode: {r.ops_changed}/{r.n_ops} ops, "
        f"{r.vars_changed}/{r.n_vars} vars changed"
    )


_CONVERT_COLUMNS = (
    Column("VS", "right"),
    Column("Stg", "right"),
    Column("Ch", "right"),
    Column("Mesh"),
    Column("Layers", wrap=True),
    Column("Fwd", "right"),
    Column("Bwd", "right"),
    Column("Opt", "right"),
    Column("Params", "right"),
)


def convert_grid(r: ConvertResult) -> Grid:
    """Convert's table: a row per segment (virtual stage), its place, layers, ops and
    parameters, and its cost when the plan weighed something other than parameters."""
    p = r.plan
    show_cost = p.cost_kind != "params"
    columns = _CONVERT_COLUMNS + ((Column(p.cost_kind.capitalize(), "right"),) * show_cost)
    rows = []
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
        rows.append(tuple(map(printable, row)))
    return Grid(columns, tuple(rows))


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
        verdict = outcomes.vpp_verdict(bubble)
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
