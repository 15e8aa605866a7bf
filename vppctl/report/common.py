"""What the renderers share: number formats, the compact table, row limits, the bubble's
one definition (`vppctl.shapes`'), the width of a picture on a terminal or a pipe, and
`printed`, the one way a string becomes printed text (names escaped)."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from vppctl.escape import printable
from vppctl.report.plain import Grid
from vppctl.report.plain import compact_layers as compact_layers
from vppctl.report.plain import human as human
from vppctl.report.plain import iec_short as iec_short
from vppctl.shapes import BUBBLE_DEFINITION as BUBBLE_DEFINITION
from vppctl.units import human_bytes as human_bytes


def printed(text: str, style: str | None = None) -> Text:
    """Printed text: control characters in it (from a program's names) escaped."""
    return Text(printable(text), style=style or "")


def picture_columns(console: Console) -> int:
    """The columns a picture (the timeline) is scaled to: the console's width, or what a
    console for a pipe says (`vppctl.cli.streams`: its lines are never split, so its
    width is no guide)."""
    columns: int | None = getattr(console, "picture_columns", None)
    return columns or console.width


def compact_table(title: str | None = None) -> Table:
    """A compact table: no outer edge, one space of padding, a rule under the header."""
    return Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 1),
        collapse_padding=True,
    )


def rich_table(grid: Grid) -> Table:
    """A compact table of `grid`'s columns and cells (what `Grid.lines` lays out plainly)."""
    table = compact_table()
    for column in grid.columns:
        table.add_column(column.header, justify=column.justify, no_wrap=not column.wrap)
    for row in grid.rows:
        table.add_row(*map(Text, row))
    return table


# Rows a terminal table shows; the JSON always holds everything.
TABLE_ROWS = 200
