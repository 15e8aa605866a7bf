"""Pictures of simulated pipeline schedules: the terminal timeline, SVG, Chrome trace.

This module's one job is drawing :class:`vppctl.schedule.simulation.SimResult` values; it
computes nothing about schedules itself (the tables and JSON are in `vppctl.report`).
Every function here is pure except :func:`render_timeline`, which writes to the rich
console it is given.

One naming scheme everywhere (SVG labels and tooltips, trace events): a step is
``{virtual stage}{kind}{micro-batch}``, torch.distributed.pipelining's notation, e.g.
``5F3`` is the forward of micro-batch 3 through virtual stage 5. Kinds: ``F`` forward,
``B`` backward, ``I`` input gradient and ``W`` weight gradient (zero-bubble schedules
split ``B`` into the two). The virtual stage of a (stage, chunk) comes from the
result's placement (`vppctl.plan.virtual_stages`; loop when a result names none).

Terminal: one row per stage, time to the right, scaled to the console width when the
exact picture does not fit. A forward of chunk ``c`` is the upper-case letter
``A + c``, a backward (or input gradient) the lower-case letter, a weight gradient the
lower-case letter underlined; the colour is the micro-batch's; ``.`` is idle time.

SVG: every result given, stacked on one time axis (same scale, so a shorter schedule
is a shorter picture), each with its own axis and its unit; fill colour = kind, its
shade = chunk; a strip on top of each box in the micro-batch's colour; a legend; the
caption (the plan simulated) under the title. The picture fits ``width`` pixels
(default :data:`DEFAULT_WIDTH`, a page): the scale gives the shortest step a box its
name fits in when that fits, else every box is narrower and only the boxes wide enough
for their name carry it; every box keeps its hover title.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from fractions import Fraction
from typing import Any
from xml.sax.saxutils import escape

from rich.console import Console
from rich.text import Text

from vppctl.choices import MIN_SVG_WIDTH
from vppctl.escape import printable
from vppctl.plan import Placement, virtual_stages
from vppctl.schedule.simulation import SimResult, Step
from vppctl.units import seconds_text

KIND_NAMES = {"F": "forward", "B": "backward", "I": "input gradient", "W": "weight gradient"}
KIND_ORDER = "FBIW"

# Terminal colours cycle over micro-batches; eight is enough to tell neighbours apart.
TERMINAL_COLOURS = ("red", "green", "yellow", "blue", "magenta", "cyan", "bright_red", "white")

IDLE = "."
ROUND_DIGITS = 6
# Chrome traces count in microseconds; one simulated time unit is shown as one
# millisecond so unit-cost schedules read naturally in Perfetto.
TRACE_US_PER_UNIT = 1000


# ---------------------------------------------------------------------------
# Small formatting helpers


def number(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):.4g}"


def percent(value: Fraction) -> str:
    return f"{float(value) * 100:.1f}%"


def rounded(value: Fraction) -> float:
    return round(float(value), ROUND_DIGITS)


def stage_units(result: SimResult, stage: int) -> str:
    return number(result.peak_in_flight_stage_units[stage])


# ---------------------------------------------------------------------------
# Naming: one scheme for labels, tooltips and trace events


def placement_of(result: SimResult) -> Placement:
    """The placement the result was simulated with (loop when it records none)."""
    value = getattr(result, "placement", "loop")
    return "v" if value == "v" else "loop"


def virtual_stage_of(result: SimResult) -> dict[tuple[int, int], int]:
    """(stage, chunk) -> virtual stage, for the result's placement."""
    return virtual_stages(result.pp, result.vpp, placement_of(result))


def step_name(step: Step, virtual_stage: int) -> str:
    """``5F3``: virtual stage, kind, micro-batch (torch.distributed.pipelining notation)."""
    return f"{virtual_stage}{step.kind}{step.micro_batch}"


def step_description(step: Step, virtual_stage: int) -> str:
    """The name, then what it means: the SVG tooltip."""
    kind = KIND_NAMES.get(step.kind, step.kind)
    return (
        f"{step_name(step, virtual_stage)}: {kind} of micro-batch {step.micro_batch}, "
        f"virtual stage {virtual_stage} (stage {step.stage}, chunk {step.chunk}), "
        f"time {number(step.start)} to {number(step.end)}"
    )


def glyph(step: Step) -> str:
    """Upper-case chunk letter for a forward, lower-case for the backward kinds."""
    letter = chr(ord("A") + step.chunk % 26)
    return letter if step.kind == "F" else letter.lower()


# ---------------------------------------------------------------------------
# Terminal timeline


def time_cell(result: SimResult) -> Fraction:
    """Largest time span that divides every step boundary: one exact terminal cell."""
    times = [t for step in result.steps for t in (step.start, step.end)]
    scale = math.lcm(*(t.denominator for t in times))
    return Fraction(math.gcd(*(int(t * scale) for t in times)), scale)


def nice_span(at_least: Fraction) -> Fraction:
    """The smallest round value (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 x 10^k) that is at
    least `at_least` (> 0): a scale people can read that wastes at most a fifth."""
    power = Fraction(10) ** math.floor(math.log10(at_least))
    steps = (1, Fraction(6, 5), Fraction(3, 2), 2, Fraction(5, 2), 3, 4, 5, 6, 8, 10)
    return next(step * power for step in steps if step * power >= at_least)


def shared_cell(results: Sequence[SimResult]) -> Fraction:
    """The largest span dividing every step boundary of every result."""
    cells = [time_cell(r) for r in results]
    scale = math.lcm(*(c.denominator for c in cells))
    return Fraction(math.gcd(*(int(c * scale) for c in cells)), scale)


def column_span(results: SimResult | Sequence[SimResult], columns: int) -> Fraction:
    """Time per terminal column, one for all `results`: the exact shared cell when the
    longest picture fits `columns`, else a round span that fits it."""
    runs = (results,) if isinstance(results, SimResult) else tuple(results)
    cell = shared_cell(runs)
    makespan = max(r.makespan for r in runs)
    if makespan / cell <= columns:
        return cell
    return nice_span(makespan / max(columns, 1))


def _stage_label(stage: int, pp: int) -> str:
    return f"stage {stage:>{len(str(pp - 1))}} "


def _style(step: Step) -> str:
    colour = TERMINAL_COLOURS[step.micro_batch % len(TERMINAL_COLOURS)]
    # Backwards get a filled background so direction shows even to colour-blind eyes.
    if step.kind == "F":
        return f"bold {colour}"
    kind: str = step.kind  # "I" and "W" come with the zero-bubble schedules
    return f"black on {colour}" + (" underline" if kind == "W" else "")


def timeline_rows(result: SimResult, span: Fraction | None = None) -> list[Text]:
    """One styled row per stage, one character per `span` of time (default: the exact
    cell). A column shows the step running at its midpoint."""
    span = time_cell(result) if span is None else span
    width = math.ceil(result.makespan / span)
    rows = [[Text(IDLE, style="dim") for _ in range(width)] for _ in range(result.pp)]
    for step in result.steps:
        cell = Text(glyph(step), style=_style(step))
        # Columns whose midpoint (k + 1/2) * span lies in [start, end).
        first = math.ceil(step.start / span - Fraction(1, 2))
        last = math.ceil(step.end / span - Fraction(1, 2))
        for k in range(max(first, 0), min(last, width)):
            rows[step.stage][k] = cell
    return [
        Text(_stage_label(stage, result.pp)).append_text(Text("").join(cells))
        for stage, cells in enumerate(rows)
    ]


def _legend(result: SimResult, span: Fraction, exact: bool, seconds: bool = False) -> str:
    letters = "/".join(chr(ord("A") + c % 26) for c in range(result.vpp))
    kinds = {step.kind for step in result.steps}
    backward = "backward" if "I" not in kinds else "backward (input gradient; W underlined)"
    if seconds:
        column = seconds_text(float(span))
    else:
        column = f"{number(span)} time unit(s)" if exact else f"{number(span)} time units"
    scale = (
        f"one column = {column}"
        if exact
        else f"one column = {column}, scaled to fit (a column shows the step running at its middle)"
    )
    return (
        f"{letters} forward of chunk {'/'.join(map(str, range(result.vpp)))}, "
        f"{letters.lower()} {backward}; colour = micro-batch; {IDLE} idle; {scale}"
    )


def render_timeline(
    result: SimResult,
    console: Console,
    *,
    suggest_files: bool = True,
    span: Fraction | None = None,
    seconds: bool = False,
) -> None:
    """Print the timeline scaled to the console's width (or to `span` per column), with
    its legend. `suggest_files`: when the picture had to be scaled, point to --svg and
    --trace for every step (off when the caller writes them already); `seconds`: the
    times are seconds (measured costs), said so in the legend."""
    label = len(_stage_label(0, result.pp))
    if span is None:
        span = column_span(result, max(console.width - label, 1))
    exact = (result.makespan / span).denominator == 1 and all(
        (t / span).denominator == 1 for step in result.steps for t in (step.start, step.end)
    )
    console.print(Text(f"{result.title} timeline", style="bold"))
    for row in timeline_rows(result, span):
        console.print(row, no_wrap=True, overflow="ignore", crop=False)
    legend = _legend(result, span, exact, seconds)
    if not exact and suggest_files:
        legend += "; --svg or --trace draw every step"
    console.print(Text(legend, style="dim"))


def render_timelines(
    results: Sequence[SimResult],
    console: Console,
    *,
    suggest_files: bool = True,
    columns: int | None = None,
    seconds: bool = False,
) -> None:
    """Every result's timeline on one time scale, so that they compare column by column,
    scaled to `columns` (default: the console's width)."""
    label = max(len(_stage_label(0, r.pp)) for r in results)
    span = column_span(results, max((columns or console.width) - label, 1))
    for result in results:
        render_timeline(result, console, suggest_files=suggest_files, span=span, seconds=seconds)


# ---------------------------------------------------------------------------
# SVG (hand-built XML text; stdlib only)

# px for the shortest step: enough for its label, within bounds (a box stays clickable,
# and a huge micro-batch count does not make every box wide)
MIN_BOX, MAX_BOX, LABEL_PAD = 24, 48, 6
MIN_PLOT = 400  # px of time axis at least, whatever the width asked
# The default picture width: a page (or a screen) wide. pp 8, vpp 4, m 32 then keeps
# boxes of about 6 px for its shortest steps, each hoverable, the longer ones labelled.
DEFAULT_WIDTH = 1800
LABEL_WIDTH = 64
RIGHT_MARGIN = 24
ROW_HEIGHT, BOX_HEIGHT, STRIP = 24, 21, 3
FONT, CHAR_WIDTH = 10, 6.1  # monospace at 10 px: width of one character
AXIS_HEIGHT, PANEL_GAP, HEADING = 38, 18, 22
TICK_SPACING = 90  # px between time-axis ticks, at least

# Fill colour by kind, darkest for chunk 0 and lightest for the last chunk.
KIND_SHADES = {
    "F": ("#1f4e99", "#a9c8ef"),
    "B": ("#1d7436", "#acdcb8"),
    "I": ("#a34f00", "#f6c894"),
    "W": ("#5e3591", "#d3bff0"),
}
OTHER_SHADES = ("#555555", "#cccccc")
# Micro-batch strip colours (Tableau 10), repeating every ten micro-batches.
MICRO_BATCH_COLOURS = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)


def _mix(dark: str, light: str, t: float) -> str:
    a = [int(dark[i : i + 2], 16) for i in (1, 3, 5)]
    b = [int(light[i : i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(a, b))


def _shade(kind: str, chunk: int, vpp: int) -> tuple[str, float]:
    """Fill colour of `kind` for `chunk`, and how light it is (0 dark .. 1 light)."""
    dark, light = KIND_SHADES.get(kind, OTHER_SHADES)
    t = 0.0 if vpp < 2 else (chunk % vpp) / (vpp - 1)
    return _mix(dark, light, t), t


def pixels_per_unit(results: Sequence[SimResult], width: int = DEFAULT_WIDTH) -> float:
    """One scale for every panel: the shortest step gets a box its longest possible name
    fits in (at least `MIN_BOX`, at most `MAX_BOX` px), unless the time axis would then
    overflow `width`: then the axis fills the width (never less than `MIN_PLOT` px)."""
    span = max(float(r.makespan) for r in results)
    durations = (float(s.duration) for r in results for s in r.steps if s.duration > 0)
    shortest = min(durations, default=1.0)
    longest = max(len(f"{r.pp * r.vpp - 1}F{r.micro_batches - 1}") for r in results)
    box = min(max(MIN_BOX, longest * CHAR_WIDTH + LABEL_PAD), MAX_BOX)
    plot = max(width - LABEL_WIDTH - RIGHT_MARGIN, MIN_PLOT)
    return min(box / shortest, plot / span)


def _tick_step(ppu: float) -> Fraction:
    """1, 2 or 5 x 10^k time units, at least `TICK_SPACING` px apart."""
    at_least = Fraction(TICK_SPACING / ppu).limit_denominator(1000)
    power = Fraction(10) ** math.floor(math.log10(at_least))
    return next(step * power for step in (1, 2, 5, 10) if step * power >= at_least)


def _svg_step(step: Step, virtual_stage: int, vpp: int, x0: float, y: float, ppu: float) -> str:
    x = x0 + float(step.start) * ppu
    width = float(step.duration) * ppu
    fill, light = _shade(step.kind, step.chunk, vpp)
    strip = MICRO_BATCH_COLOURS[step.micro_batch % len(MICRO_BATCH_COLOURS)]
    kind = KIND_NAMES.get(step.kind, step.kind).replace(" ", "-")
    data = (
        f'data-stage="{step.stage}" data-chunk="{step.chunk}" data-virtual-stage="{virtual_stage}" '
        f'data-micro-batch="{step.micro_batch}" data-kind="{step.kind}"'
    )
    parts = [
        f'<g class="step {kind}" {data}><title>{escape(step_description(step, virtual_stage))}'
        "</title>",
        # The strip sits above the box, apart from it, so that it shows on any fill.
        f'<rect x="{x:.2f}" y="{y:.2f}" width="{width:.2f}" height="{STRIP}" fill="{strip}"/>',
        f'<rect x="{x:.2f}" y="{y + STRIP + 1:.2f}" width="{width:.2f}" '
        f'height="{BOX_HEIGHT - STRIP - 1}" fill="{fill}" stroke="#ffffff" stroke-width="0.6"/>',
    ]
    name = step_name(step, virtual_stage)
    if width >= len(name) * CHAR_WIDTH + LABEL_PAD:
        colour = "#ffffff" if light < 0.5 else "#111111"
        parts.append(
            f'<text x="{x + width / 2:.2f}" y="{y + BOX_HEIGHT / 2 + 6.5:.2f}" fill="{colour}" '
            f'text-anchor="middle" font-size="{FONT}">{escape(name)}</text>'
        )
    parts.append("</g>")
    return "".join(parts)


def _svg_axis(
    y: float, x0: float, ppu: float, span: Fraction, rows_top: float, unit: str
) -> list[str]:
    """A time axis under a panel, with light grid lines up through its rows and its unit
    written under the ticks."""
    step = _tick_step(ppu)
    end = x0 + float(span) * ppu
    parts = [f'<line x1="{x0}" y1="{y:.2f}" x2="{end:.2f}" y2="{y:.2f}" stroke="#333"/>']
    tick = Fraction(0)
    while tick <= span:
        x = x0 + float(tick) * ppu
        parts.append(
            f'<line x1="{x:.2f}" y1="{rows_top:.2f}" x2="{x:.2f}" y2="{y:.2f}" '
            'stroke="#000" stroke-opacity="0.12"/>'
            f'<line x1="{x:.2f}" y1="{y:.2f}" x2="{x:.2f}" y2="{y + 4:.2f}" stroke="#333"/>'
            f'<text class="tick" x="{x:.2f}" y="{y + 15:.2f}" text-anchor="middle" '
            f'font-size="{FONT}">{number(tick)}</text>'
        )
        tick += step
    parts.append(
        f'<text class="unit" x="{x0}" y="{y + 30:.2f}" font-size="{FONT}" fill="#555">'
        f"{escape(unit)}</text>"
    )
    return parts


def _svg_panel(
    result: SimResult, top: float, ppu: float, span: Fraction, unit: str
) -> tuple[list[str], float]:
    """One result: heading, one row per stage, the axis; returns its parts and height."""
    heading = (
        f"{result.title}: pp {result.pp}, m {result.micro_batches}, makespan "
        f"{number(result.makespan)}, bubble {percent(result.bubble)} of the step"
    )
    parts = [
        f'<g class="schedule" data-schedule="{escape(result.schedule)}">',
        f'<text class="heading" x="4" y="{top + 15:.2f}" font-size="12" '
        f'font-weight="bold">{escape(heading)}</text>',
    ]
    rows_top = top + HEADING
    for stage in range(result.pp):
        y = rows_top + stage * ROW_HEIGHT
        parts.append(
            f'<rect class="idle" x="{LABEL_WIDTH}" y="{y + 1:.2f}" '
            f'width="{float(result.makespan) * ppu:.2f}" '
            f'height="{BOX_HEIGHT}" fill="#f1f1f1"/>'
            f'<text class="stage-label" x="4" y="{y + 14:.2f}" font-size="11">stage {stage}</text>'
        )
    axis_y = rows_top + result.pp * ROW_HEIGHT + 2
    parts += _svg_axis(axis_y, LABEL_WIDTH, ppu, span, rows_top, unit)
    places = virtual_stage_of(result)
    for step in result.steps:
        y = rows_top + step.stage * ROW_HEIGHT + 1
        vs = places.get((step.stage, step.chunk), step.stage)
        parts.append(_svg_step(step, vs, result.vpp, LABEL_WIDTH, y, ppu))
    parts.append("</g>")
    return parts, HEADING + result.pp * ROW_HEIGHT + AXIS_HEIGHT


def _svg_legend(results: Sequence[SimResult], top: float) -> tuple[list[str], float, float]:
    """Kinds by chunk, micro-batch strip colours, the naming scheme; returns the parts,
    the height and the width they need."""
    kinds = [k for k in KIND_ORDER if any(s.kind == k for r in results for s in r.steps)]
    kinds += sorted({s.kind for r in results for s in r.steps} - set(KIND_ORDER))
    vpp = max(r.vpp for r in results)
    parts = ['<g class="legend">']
    x, y = 4.0, top
    for kind in kinds:
        name = KIND_NAMES.get(kind, kind)
        parts.append(f'<text x="{x:.1f}" y="{y + 12:.1f}" font-size="11">{escape(name)}</text>')
        x += len(name) * 6.6 + 6
        for chunk in range(vpp):
            fill, light = _shade(kind, chunk, vpp)
            ink = "#ffffff" if light < 0.5 else "#111111"
            parts.append(
                f'<rect class="legend-chunk" data-kind="{kind}" data-chunk="{chunk}" '
                f'x="{x:.1f}" y="{y:.1f}" width="22" height="16" fill="{fill}"/>'
                f'<text x="{x + 11:.1f}" y="{y + 12:.1f}" text-anchor="middle" font-size="9" '
                f'fill="{ink}">c{chunk}</text>'
            )
            x += 24
        x += 14
    width = x
    x, y = 4.0, y + 22
    text = "micro-batch (strip on top of a box; colours repeat every 10):"
    parts.append(f'<text x="{x}" y="{y + 12:.1f}" font-size="11">{text}</text>')
    x += len(text) * 6.6 + 6
    for mb, colour in enumerate(MICRO_BATCH_COLOURS):
        parts.append(
            f'<rect class="legend-micro-batch" x="{x:.1f}" y="{y:.1f}" width="18" height="16" '
            f'fill="{colour}"/><text x="{x + 9:.1f}" y="{y + 12:.1f}" text-anchor="middle" '
            f'font-size="9">{mb}</text>'
        )
        x += 20
    width = max(width, x)
    examples = (
        "label: virtual stage, kind, micro-batch (5F3: forward of micro-batch 3 on virtual "
        "stage 5);",
        "cN = chunk N; boxes too narrow for a label have none; hover a box for its details",
    )
    for example in examples:
        y += 18
        parts.append(f'<text x="4" y="{y + 12:.1f}" font-size="11">{escape(example)}</text>')
        width = max(width, 4 + len(example) * 6.6)
    parts.append("</g>")
    return parts, y + 22 - top, width


# The time unit when the caller names none: the costs' own.
DEFAULT_UNIT = "time, in the costs' unit"


def to_svg(
    results: SimResult | Sequence[SimResult],
    *,
    width: int = DEFAULT_WIDTH,
    caption: str = "",
    unit: str = DEFAULT_UNIT,
) -> str:
    """Every result as one SVG document at most ``width`` px wide, stacked on one time
    scale: one ``<g class="step ...">`` per step (a box, its micro-batch strip, its label
    where it fits, its tooltip), a legend and a time axis with ``unit`` per schedule;
    ``caption`` (e.g. the plan simulated) goes under the title and into ``<title>``."""
    runs = (results,) if isinstance(results, SimResult) else tuple(results)
    ppu = pixels_per_unit(runs, width)
    span = max(r.makespan for r in runs)
    first = runs[0]
    heading = f"vppctl simulate: pp {first.pp}, m {first.micro_batches}"
    if first.p2p_cost:
        heading += f", p2p cost {number(first.p2p_cost)} per hop"
    # XML cannot hold control characters (nor U+FFFE, U+FFFF, a lone surrogate), and a
    # person should not read them raw: every text from outside (the program's path in the
    # caption, the unit) is made printable, which escapes them all (vppctl.escape).
    heading, caption, unit = printable(heading), printable(caption), printable(unit)
    lines = textwrap.wrap(caption, max(int((width - 8) / 6.6), 20)) if caption else []
    parts = [f'<text x="4" y="17" font-size="13" font-weight="bold">{escape(heading)}</text>']
    for i, line in enumerate(lines):
        parts.append(
            f'<text class="caption" x="4" y="{34 + 15 * i}" font-size="11">{escape(line)}</text>'
        )
    top: float = 28 + 15 * len(lines)
    legend, legend_height, legend_width = _svg_legend(runs, top)
    parts += legend
    top += legend_height + 6
    for result in runs:
        panel, height = _svg_panel(result, top, ppu, span, unit)
        parts += panel
        top += height + PANEL_GAP
    drawn = max(LABEL_WIDTH + float(span) * ppu + RIGHT_MARGIN, legend_width + 8)
    svg_width = math.ceil(min(drawn, max(width, MIN_SVG_WIDTH)))
    height = math.ceil(top)
    title = heading + (f"; {caption}" if caption else "")
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{svg_width}" height="{height}" '
        f'viewBox="0 0 {svg_width} {height}" font-family="monospace">'
        f"<title>{escape(title)}</title>"
        f'<rect width="{svg_width}" height="{height}" fill="#ffffff"/>'
    )
    return "\n".join([head, *parts, "</svg>"]) + "\n"


# ---------------------------------------------------------------------------
# Chrome trace (opens in Perfetto and chrome://tracing)


def _trace_event(step: Step, virtual_stage: int, pid: int, us: int) -> dict[str, Any]:
    return {
        "name": step_name(step, virtual_stage),
        "cat": KIND_NAMES.get(step.kind, step.kind),
        "ph": "X",
        "pid": pid,
        "tid": step.stage,
        "ts": rounded(step.start * us),
        "dur": rounded(step.duration * us),
        "args": {
            "stage": step.stage,
            "chunk": step.chunk,
            "virtual_stage": virtual_stage,
            "micro_batch": step.micro_batch,
            "kind": step.kind,
        },
    }


def _metadata(name: str, pid: int, args: dict[str, Any], tid: int | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {"name": name, "ph": "M", "pid": pid, "args": args}
    if tid is not None:
        event["tid"] = tid
    return event


def _trace_names(result: SimResult, pid: int) -> list[dict[str, Any]]:
    """Metadata events so the viewer labels the process and one track per stage."""
    process = f"vppctl simulate: {result.title} pp={result.pp} m={result.micro_batches}"
    events = [
        _metadata("process_name", pid, {"name": process}),
        _metadata("process_sort_index", pid, {"sort_index": pid}),
    ]
    for stage in range(result.pp):
        events.append(_metadata("thread_name", pid, {"name": f"stage {stage}"}, stage))
        events.append(_metadata("thread_sort_index", pid, {"sort_index": stage}, stage))
    return events


def to_chrome_trace(
    results: SimResult | Sequence[SimResult], *, seconds: bool = False
) -> dict[str, Any]:
    """``{"traceEvents": [...]}`` with one complete ("X") event per step.

    Each result is one process (pid = its position), its stages one thread each (tid =
    stage), so a viewer stacks the schedules like the SVG. One simulated time unit is
    one millisecond in the trace; with `seconds` (measured costs) times are real. Metadata
    ("M") events name the tracks.
    """
    runs = (results,) if isinstance(results, SimResult) else tuple(results)
    us = 1_000_000 if seconds else TRACE_US_PER_UNIT
    events: list[dict[str, Any]] = []
    for pid, result in enumerate(runs):
        places = virtual_stage_of(result)
        events += _trace_names(result, pid)
        events += [
            _trace_event(s, places.get((s.stage, s.chunk), s.stage), pid, us) for s in result.steps
        ]
    return {"traceEvents": events, "displayTimeUnit": "ms"}
