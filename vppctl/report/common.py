"""What the renderers share: number formats, the compact table, row limits, shapes used
by several commands' JSON (a layer set), the bubble's one definition."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from rich import box
from rich.table import Table

from vppctl.engine import LayerSet


def human(n: float) -> str:
    """1234567 -> 1.2M."""
    for unit, size in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f}{unit}"
    return f"{n:g}"


def human_bytes(n: int) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
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


def layers_json(layers: LayerSet | None) -> dict[str, Any]:
    """The one shape of a layer set in every command's JSON."""
    if not layers:
        return {"count": 0, "class": "", "seg_method": None, "detected": False}
    return {
        "count": len(layers),
        "class": layers.layer_class,
        "seg_method": layers.seg_method,
        "detected": layers.detected,
    }


# Rows a terminal table shows; the JSON always holds everything.
TABLE_ROWS = 200


BUBBLE_DEFINITION = "idle time of all stages over pp x makespan (the idle share of the step)"
