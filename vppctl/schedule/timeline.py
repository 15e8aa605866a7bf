"""Pictures of simulated pipeline schedules: the terminal timeline, SVG, Chrome trace.

This module's one job is drawing :class:`vppctl.schedule.simulate.SimResult` values; it
computes nothing about schedules itself (the tables and JSON are in `vppctl.report`).
Every function here is pure except :func:`render_timeline`, which writes to the rich
console it is given.

Picture conventions (terminal and SVG alike): one row per stage, time to the right.
A forward step of chunk ``c`` is drawn with the upper-case letter ``A + c``, a backward
step with the lower-case letter; the colour is the micro-batch's; ``.`` is idle time.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any
from xml.sax.saxutils import escape

from rich.console import Console
from rich.text import Text

from vppctl.schedule.simulate import SimResult, Step

SCHEDULE_TITLES = {"fthenb": "F-then-B", "1f1b": "1F1B", "interleaved": "interleaved 1F1B"}

# Colours cycle over micro-batches; eight is enough to tell neighbours apart.
TERMINAL_COLOURS = ("red", "green", "yellow", "blue", "magenta", "cyan", "bright_red", "white")
SVG_COLOURS = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1")

IDLE = "."
ROUND_DIGITS = 6
# Chrome traces count in microseconds; one simulated time unit is shown as one
# millisecond so unit-cost schedules read naturally in Perfetto.
TRACE_US_PER_UNIT = 1000


# ---------------------------------------------------------------------------
# Small formatting helpers


def title(result: SimResult) -> str:
    """Human name of a result, e.g. ``interleaved 1F1B (v=2)``."""
    return f"{SCHEDULE_TITLES[result.schedule]} (v={result.vpp})"


def number(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):.4g}"


def percent(value: Fraction) -> str:
    return f"{float(value) * 100:.1f}%"


def rounded(value: Fraction) -> float:
    return round(float(value), ROUND_DIGITS)


def glyph(step: Step) -> str:
    """Upper-case chunk letter for a forward, lower-case for a backward."""
    letter = chr(ord("A") + step.chunk % 26)
    return letter if step.kind == "F" else letter.lower()


def stage_units(result: SimResult, stage: int) -> str:
    return number(result.peak_in_flight_stage_units[stage])


# ---------------------------------------------------------------------------
# Terminal timeline


def time_cell(result: SimResult) -> Fraction:
    """Largest time span that divides every step boundary: one terminal or SVG cell."""
    times = [t for step in result.steps for t in (step.start, step.end)]
    scale = math.lcm(*(t.denominator for t in times))
    return Fraction(math.gcd(*(int(t * scale) for t in times)), scale)


def cell_count(result: SimResult) -> int:
    """How many cells wide the timeline is."""
    return int(result.makespan / time_cell(result))


def _stage_label(stage: int, pp: int) -> str:
    return f"stage {stage:>{len(str(pp - 1))}} "


def timeline_rows(result: SimResult) -> list[Text]:
    """One styled row per stage, one character per time cell."""
    unit = time_cell(result)
    width = cell_count(result)
    rows = [[Text(IDLE, style="dim") for _ in range(width)] for _ in range(result.pp)]
    for step in result.steps:
        colour = TERMINAL_COLOURS[step.micro_batch % len(TERMINAL_COLOURS)]
        # Backwards get a filled background so direction shows even to colour-blind eyes.
        style = f"bold {colour}" if step.kind == "F" else f"black on {colour}"
        for cell in range(int(step.start / unit), int(step.end / unit)):
            rows[step.stage][cell] = Text(glyph(step), style=style)
    return [
        Text(_stage_label(stage, result.pp)).append_text(Text("").join(cells))
        for stage, cells in enumerate(rows)
    ]


def _legend(result: SimResult) -> str:
    letters = [chr(ord("A") + c % 26) for c in range(result.vpp)]
    chunks = "/".join(letters)
    return (
        f"{chunks} forward of chunk {'/'.join(map(str, range(result.vpp)))}, "
        f"{chunks.lower()} backward; colour = micro-batch; {IDLE} idle; "
        f"one cell = {number(time_cell(result))} time unit(s)"
    )


def render_timeline(result: SimResult, console: Console) -> None:
    """Print the timeline if it fits the console width, else say why it is not shown."""
    label = len(_stage_label(0, result.pp))
    needed = label + cell_count(result)
    console.print(Text(f"{title(result)} timeline", style="bold"))
    if needed > console.width:
        console.print(
            Text(
                f"timeline does not fit: {needed} columns needed, {console.width} available; "
                "write it with --svg or --trace instead"
            )
        )
        return
    for row in timeline_rows(result):
        console.print(row, no_wrap=True, overflow="ignore", crop=False)
    console.print(Text(_legend(result), style="dim"))


# ---------------------------------------------------------------------------
# SVG (hand-built XML text; stdlib only)

SVG_WIDTH = 1000
ROW_HEIGHT = 24
LABEL_WIDTH = 70
TOP = 28


def _svg_rect(step: Step, x: float, width: float, y: float) -> str:
    colour = SVG_COLOURS[step.micro_batch % len(SVG_COLOURS)]
    kind = "forward" if step.kind == "F" else "backward"
    # Backwards are paler so the two directions separate at a glance.
    opacity = "1" if step.kind == "F" else "0.55"
    attributes = (
        f'class="step {kind}" x="{x:.2f}" y="{y:.2f}" width="{width:.2f}" '
        f'height="{ROW_HEIGHT - 4}" fill="{colour}" fill-opacity="{opacity}" stroke="#333" '
        f'stroke-width="0.5" data-stage="{step.stage}" data-chunk="{step.chunk}" '
        f'data-micro-batch="{step.micro_batch}" data-kind="{step.kind}"'
    )
    hover = f"{step.label} [{number(step.start)}, {number(step.end)})"
    return f"<rect {attributes}><title>{escape(hover)}</title></rect>"


def _svg_step(step: Step, pixels_per_unit: float) -> list[str]:
    x = LABEL_WIDTH + float(step.start) * pixels_per_unit
    width = float(step.duration) * pixels_per_unit
    y = TOP + step.stage * ROW_HEIGHT + 2
    parts = [_svg_rect(step, x, width, y)]
    text = glyph(step) + str(step.micro_batch)
    if width >= 7 * len(text):
        parts.append(
            f'<text class="cell-label" x="{x + width / 2:.2f}" y="{y + ROW_HEIGHT / 2 + 2:.2f}" '
            f'text-anchor="middle" font-size="10">{escape(text)}</text>'
        )
    return parts


def to_svg(result: SimResult) -> str:
    """The timeline as an SVG document: one ``<rect class="step ...">`` per step."""
    pixels_per_unit = SVG_WIDTH / float(result.makespan)
    width = LABEL_WIDTH + SVG_WIDTH + 10
    height = TOP + result.pp * ROW_HEIGHT + 10
    heading = (
        f"{title(result)}: pp={result.pp} m={result.micro_batches} "
        f"makespan {number(result.makespan)}, bubble {percent(result.bubble)}"
    )
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="monospace">',
        f"<title>{escape(heading)}</title>",
        f'<text x="4" y="16" font-size="12">{escape(heading)}</text>',
    ]
    for stage in range(result.pp):
        y = TOP + stage * ROW_HEIGHT + ROW_HEIGHT / 2 + 4
        parts.append(
            f'<text class="stage-label" x="4" y="{y:.2f}" font-size="11">stage {stage}</text>'
        )
    for step in result.steps:
        parts += _svg_step(step, pixels_per_unit)
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


# ---------------------------------------------------------------------------
# Chrome trace (opens in Perfetto and chrome://tracing)

TRACE_PID = 0


def _trace_event(step: Step, pp: int) -> dict[str, Any]:
    return {
        "name": step.label,
        "cat": "forward" if step.kind == "F" else "backward",
        "ph": "X",
        "pid": TRACE_PID,
        "tid": step.stage,
        "ts": rounded(step.start * TRACE_US_PER_UNIT),
        "dur": rounded(step.duration * TRACE_US_PER_UNIT),
        "args": {
            "stage": step.stage,
            "chunk": step.chunk,
            "virtual_stage": step.chunk * pp + step.stage,
            "micro_batch": step.micro_batch,
        },
    }


def _metadata(name: str, args: dict[str, Any], tid: int | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {"name": name, "ph": "M", "pid": TRACE_PID, "args": args}
    if tid is not None:
        event["tid"] = tid
    return event


def _trace_names(result: SimResult) -> list[dict[str, Any]]:
    """Metadata events so the viewer labels the process and one track per stage."""
    process = f"vppctl simulate: {title(result)} pp={result.pp} m={result.micro_batches}"
    events = [_metadata("process_name", {"name": process})]
    for stage in range(result.pp):
        events.append(_metadata("thread_name", {"name": f"stage {stage}"}, stage))
        events.append(_metadata("thread_sort_index", {"sort_index": stage}, stage))
    return events


def to_chrome_trace(result: SimResult) -> dict[str, Any]:
    """``{"traceEvents": [...]}`` with one complete ("X") event per step.

    All stages share one process (pid 0) with one thread per stage (tid = stage), so a
    viewer stacks the stages like the terminal picture. One simulated time unit is one
    millisecond in the trace. Metadata ("M") events name the tracks.
    """
    events = _trace_names(result) + [_trace_event(s, result.pp) for s in result.steps]
    return {"traceEvents": events, "displayTimeUnit": "ms"}
