"""Schedules as torch.distributed.pipelining's schedule CSV, written and read back.

This module's one job is the CSV form of per-stage action orders. The format is the
one ``PipelineScheduleMulti._dump_csv`` writes and ``_load_csv`` reads (its
"compute_only" format): one row per stage (rank), in stage order, each cell one
action in torch notation ``{virtual_stage}{F|B|I|W}{micro_batch}`` (``2F0``,
``3W1``); an empty cell is an idle slot (torch's ``None``). Rows are written with
Python's ``csv`` module in its default dialect, as torch does, so a torch user loads
the file with ``schedule._load_csv(path)``.

Reading accepts only compute actions: communication actions (``SEND_F``, ``RECV_B``,
...) belong to torch's "compute_comms" format, which vppctl does not simulate.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence

from vppctl.errors import ProgramFileError
from vppctl.plan import Placement, place
from vppctl.schedule.actions import Kind, Op

ACTION = re.compile(r"(\d+)([FBIW])(\d+)")

# One parsed action: (virtual stage, kind, micro-batch).
Action = tuple[int, Kind, int]


def to_csv(orders: Sequence[Sequence[str]]) -> str:
    """The CSV text of per-stage orders (one sequence of action strings per stage)."""
    out = io.StringIO()
    writer = csv.writer(out)
    for row in orders:
        writer.writerow(row)
    return out.getvalue()


def parse_csv(text: str, source: str = "schedule CSV") -> tuple[tuple[Action, ...], ...]:
    """Per-stage actions from CSV text; empty cells (idle slots) are dropped."""
    rows: list[tuple[Action, ...]] = []
    for line, row in enumerate(csv.reader(io.StringIO(text, newline="")), start=1):
        actions: list[Action] = []
        for cell in row:
            value = cell.strip()
            if not value:
                continue
            match = ACTION.fullmatch(value)
            if match is None:
                raise ProgramFileError(
                    f"{source}: row {line} has {value!r}, not a compute action like 2F0, "
                    "1B3, 3I1 or 3W1 (torch's compute_only format); write it with _dump_csv "
                    "from a compute-only schedule"
                )
            stage, kind, micro_batch = match.groups()
            actions.append((int(stage), kind, int(micro_batch)))  # type: ignore[arg-type]
        rows.append(tuple(actions))
    if not rows:
        raise ProgramFileError(f"{source} is empty: it needs one row of actions per stage")
    return tuple(rows)


def to_ops(
    rows: Sequence[Sequence[Action]], vpp: int, placement: Placement, source: str = "schedule CSV"
) -> tuple[tuple[Op, ...], ...]:
    """Parsed rows as simulator orders: row ``s`` is stage ``s``; each virtual stage
    must sit on that stage under ``placement`` (the plan's mapping)."""
    pp = len(rows)
    orders: list[tuple[Op, ...]] = []
    for stage, row in enumerate(rows):
        order: list[Op] = []
        for virtual, kind, micro_batch in row:
            if virtual >= pp * vpp:
                raise ProgramFileError(
                    f"{source}: row {stage + 1} names virtual stage {virtual}, but pp {pp} x "
                    f"vpp {vpp} has {pp * vpp}; pass the vpp the schedule was written for"
                )
            where, chunk = place(virtual, pp, placement)
            if where != stage:
                raise ProgramFileError(
                    f"{source}: row {stage + 1} runs virtual stage {virtual}, which the "
                    f"{placement} placement puts on stage {where}; pass the placement the "
                    "schedule was written for"
                )
            order.append(Op(kind, micro_batch, chunk))
        orders.append(tuple(order))
    return tuple(orders)
