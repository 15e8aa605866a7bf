"""What the renderers share: number formats, the compact table, row limits, the bubble's
one definition (`vppctl.shapes`'), the width of a picture on a terminal or a pipe, and
`printed`, the one way a string becomes printed text (names escaped)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from vppctl.escape import printable
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


# Rows a terminal table shows; the JSON always holds everything.
TABLE_ROWS = 200
