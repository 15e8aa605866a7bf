"""The convert and inspect tables fit 80 columns: one line per segment, pipes included.

Rendering tests with `Console(file=io.StringIO(), width=80, color_system=None)`, on
the 126-layer sample at pp 8 (`vppctl sample --layers 126 --pp 8`) with
`--cost flops --split balanced --vpp 2`, where the layer ranges used to wrap every
row in two, and on the compact range form itself.

The tests here also cover vppctl/report/common.py and vppctl/report/program.py, which have
no test file of their own.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from vppctl import report
from vppctl.commands import ConvertOutcome, convert_file, inspect_file
from vppctl.convert import ConvertOptions
from vppctl.plan import PlanOptions
from vppctl.report import compact_layers

ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+\[")  # VS, stage, chunk, then the mesh


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=80, color_system=None), out


@pytest.fixture(scope="module")
def converted(gpt126: Path) -> ConvertOutcome:
    plan = PlanOptions(vpp=2, split="balanced", cost="flops")
    return convert_file(gpt126, gpt126.with_name("gpt126.vpp.pb"), ConvertOptions(plan=plan))


def test_the_126_layer_flops_table_has_one_line_per_segment_at_80_columns(
    converted: ConvertOutcome,
) -> None:
    console, out = _console()
    report.render_convert(console, converted)
    lines = out.getvalue().splitlines()
    assert [line for line in lines if len(line) > 80] == []
    rows = [line for line in lines if ROW.match(line)]
    assert [int(ROW.match(r)[1]) for r in rows] == list(range(16))  # type: ignore[index]
    # The line after each row is the next row (nothing wrapped), then the notes.
    first = lines.index(rows[0])
    assert lines[first : first + 16] == rows
    assert lines[first + 16].startswith("layers: DecoderLayer x 126")
    segments = converted.result.plan.segments
    for row, seg in zip(rows, segments):
        assert compact_layers(seg.layers) in row
        assert row.rstrip().endswith(report.human(seg.cost))
    assert all("…" in compact_layers(seg.layers) for seg in segments if len(seg.layers) > 2)
    assert compact_layers(segments[15].layers) in rows[15]


def test_the_inspect_table_of_the_converted_126_layer_program_fits_80_columns(
    converted: ConvertOutcome,
) -> None:
    console, out = _console()
    report.render_summary(console, inspect_file(converted.output))
    lines = out.getvalue().splitlines()
    assert [line for line in lines if len(line) > 80] == []
    rows = [line for line in lines if re.match(r"^\s*\d+\s+\[\d+\]", line)]
    assert len(rows) == 8


@pytest.mark.parametrize(
    ("names", "shown"),
    [
        ([], ""),
        (["DecoderLayer_3"], "DecoderLayer_3"),
        (["DecoderLayer", "DecoderLayer_1"], "DecoderLayer…_1 (2)"),
        ([f"DecoderLayer_{k}" for k in range(103, 112)], "DecoderLayer_103…111 (9)"),
        (["block_7", "block_8", "block_9"], "block_7…9 (3)"),
        (["encoder.layers.0", "encoder.layers.1"], "encoder.layers.0 … encoder.layers.1 (2)"),
        (["Attn_1", "MLP_1"], "Attn_1 … MLP_1 (2)"),  # different classes: both names in full
    ],
)
def test_compact_layers(names: list[str], shown: str) -> None:
    assert compact_layers(names) == shown
