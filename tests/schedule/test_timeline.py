"""The pictures of a simulated schedule: SVG, Chrome trace and the terminal timeline.

The SVG draws every schedule given, stacked on one time scale, with a legend (kinds
by chunk, micro-batch colours, the naming scheme) and a time axis per schedule; its
width grows with the steps so that the shortest step keeps a readable box; labels
appear only where they fit; a label and its tooltip use one name,
`{virtual stage}{kind}{micro-batch}`, with the virtual stage taken from the
result's placement. The terminal timeline scales time to the console width and
says so. Expected values are worked out here from the steps, not read back from
the renderer's own helpers.
"""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import pytest
from commandline import invoke
from rich.console import Console

from vppctl.report import render_simulation
from vppctl.schedule import timeline
from vppctl.schedule.simulation import SimResult, compare, simulate
from vppctl.schedule.timeline import to_chrome_trace, to_svg

NS = "{http://www.w3.org/2000/svg}"
NAME = re.compile(r"(\d+)([FBIW])(\d+)")


@dataclass(frozen=True)
class Box:
    schedule: str
    stage: int
    chunk: int
    virtual_stage: int
    micro_batch: int
    kind: str
    x: float
    width: float
    tooltip: str
    label: str | None


def boxes(svg: str) -> list[Box]:
    out = []
    for panel in ET.fromstring(svg).iter(f"{NS}g"):
        if panel.get("class") != "schedule":
            continue
        for g in panel.iter(f"{NS}g"):
            if not (g.get("class") or "").startswith("step"):
                continue
            fill = [r for r in g.findall(f"{NS}rect")][-1]  # the box (the strip is first)
            text = g.find(f"{NS}text")
            out.append(
                Box(
                    schedule=panel.get("data-schedule") or "",
                    stage=int(g.get("data-stage") or -1),
                    chunk=int(g.get("data-chunk") or -1),
                    virtual_stage=int(g.get("data-virtual-stage") or -1),
                    micro_batch=int(g.get("data-micro-batch") or -1),
                    kind=g.get("data-kind") or "",
                    x=float(fill.get("x") or 0),
                    width=float(fill.get("width") or 0),
                    tooltip=g.findtext(f"{NS}title") or "",
                    label=None if text is None else text.text,
                )
            )
    return out


def width_of(svg: str) -> int:
    return int(ET.fromstring(svg).get("width") or 0)


def test_every_schedule_given_is_drawn_one_box_per_step() -> None:
    runs = compare(4, 2, 8)
    drawn = boxes(to_svg(runs))
    assert [b.schedule for b in drawn].count("1f1b") == len(runs[0].steps) == 4 * 8 * 2
    assert [b.schedule for b in drawn].count("interleaved") == len(runs[1].steps) == 4 * 2 * 8 * 2
    panels = [g for g in ET.fromstring(to_svg(runs)).iter(f"{NS}g") if g.get("class") == "schedule"]
    headings = [p.findtext(f"{NS}text") or "" for p in panels]
    assert headings[0].startswith("1F1B (v=1): pp 4, m 8, makespan 66")
    assert headings[1].startswith("interleaved 1F1B (v=2): pp 4, m 8, makespan 57")


def test_schedules_share_one_time_scale() -> None:
    """x = left edge + start * pixels per unit and width = duration * pixels per unit,
    the same pixels per unit in both panels, so the shorter schedule is shorter."""
    runs = compare(4, 2, 8)
    drawn = boxes(to_svg(runs))
    origin = min(b.x for b in drawn)
    scales = set()
    for run in runs:
        steps = {(s.stage, s.chunk, s.micro_batch, s.kind): s for s in run.steps}
        for b in (b for b in drawn if b.schedule == run.schedule):
            step = steps[b.stage, b.chunk, b.micro_batch, b.kind]
            scales.add(round(b.width / float(step.duration), 1))
            if step.start:
                scales.add(round((b.x - origin) / float(step.start), 1))
    assert len(scales) == 1
    ends = {r.schedule: max(b.x + b.width for b in drawn if b.schedule == r.schedule) for r in runs}
    assert ends["interleaved"] < ends["1f1b"]
    assert ends["1f1b"] - origin == pytest.approx(66 * scales.pop(), abs=0.1)


def test_one_name_for_label_and_tooltip_with_the_kind_it_says() -> None:
    """The issue's bug: `B0` was a forward of chunk 1 in the label and a backward in the
    tooltip. Now every label is `{virtual stage}{kind}{micro-batch}` of its own box."""
    pp = 4
    drawn = boxes(to_svg(compare(pp, 2, 8)))
    labelled = [b for b in drawn if b.label is not None]
    assert len(labelled) == len(drawn)  # at 4x8 every box is wide enough for its name
    words = {"F": "forward", "B": "backward"}
    for b in drawn:
        name = f"{b.virtual_stage}{b.kind}{b.micro_batch}"
        assert b.label == name
        assert b.tooltip.startswith(f"{name}: {words[b.kind]} of micro-batch {b.micro_batch}, ")
        assert f"(stage {b.stage}, chunk {b.chunk})" in b.tooltip
        expected_vs = b.stage if b.schedule == "1f1b" else b.chunk * pp + b.stage  # loop
        assert b.virtual_stage == expected_vs
    assert any(b.label == "4B0" and b.chunk == 1 and b.kind == "B" for b in drawn)


@dataclass(frozen=True)
class _VShaped(SimResult):
    """A result simulated with the V placement (the simulator records it with the
    zero-bubble schedules; here the same steps, relabelled)."""

    placement: str = "v"


def test_virtual_stages_follow_the_results_placement() -> None:
    base = simulate(4, 2, 8, "interleaved")
    fields = {f: getattr(base, f) for f in base.__dataclass_fields__ if f != "placement"}
    v = _VShaped(**fields)
    drawn = boxes(to_svg(v))
    for b in drawn:  # V: stage s holds virtual stages s and 2pp-1-s
        assert b.virtual_stage == (b.stage if b.chunk == 0 else 2 * 4 - 1 - b.stage)
    trace = to_chrome_trace(v)["traceEvents"]
    assert {e["args"]["virtual_stage"] for e in trace if e["ph"] == "X" and e["tid"] == 0} == {0, 7}


def test_the_legend_names_every_kind_by_chunk_and_the_micro_batch_colours() -> None:
    root = ET.fromstring(to_svg(compare(4, 4, 8)))
    legend = next(g for g in root.iter(f"{NS}g") if g.get("class") == "legend")
    chunks = {(r.get("data-kind"), r.get("data-chunk")) for r in legend.iter(f"{NS}rect")}
    assert {(k, str(c)) for k in "FB" for c in range(4)} <= chunks
    fills = {
        (r.get("data-kind"), r.get("data-chunk")): r.get("fill")
        for r in legend.iter(f"{NS}rect")
        if r.get("class") == "legend-chunk"
    }
    assert len(set(fills.values())) == 8  # every (kind, chunk) has its own colour
    mbs = [r for r in legend.iter(f"{NS}rect") if r.get("class") == "legend-micro-batch"]
    assert len(mbs) == 10
    words = " ".join(t.text or "" for t in legend.iter(f"{NS}text"))
    assert "forward" in words and "backward" in words and "micro-batch" in words
    assert "5F3: forward of micro-batch 3 on virtual stage 5" in words
    # The boxes use the legend's colours: a box's fill is its (kind, chunk) swatch.
    for g in root.iter(f"{NS}g"):
        if (g.get("class") or "").startswith("step"):
            box = g.findall(f"{NS}rect")[-1]
            assert box.get("fill") == fills[g.get("data-kind"), g.get("data-chunk")]


def test_each_schedule_has_a_time_axis_up_to_the_longest_makespan() -> None:
    runs = compare(8, 2, 32)
    root = ET.fromstring(to_svg(runs))
    for panel in (g for g in root.iter(f"{NS}g") if g.get("class") == "schedule"):
        ticks = [
            Fraction(t.text or "") for t in panel.iter(f"{NS}text") if t.get("class") == "tick"
        ]
        assert ticks[0] == 0 and ticks == sorted(ticks)
        step = ticks[1] - ticks[0]
        assert all(b - a == step for a, b in zip(ticks, ticks[1:]))
        assert ticks[-1] <= max(r.makespan for r in runs) < ticks[-1] + step


def test_the_width_grows_with_the_steps_and_keeps_a_readable_box_while_it_fits() -> None:
    small, large = to_svg(compare(4, 2, 8)), to_svg(compare(4, 2, 8), width=4000)
    assert min(b.width for b in boxes(small)) >= timeline.MIN_BOX
    # At a page's width the 4x8 unit-cost picture already labels every box; more room
    # does not stretch it.
    assert all(b.label is not None for b in boxes(small))
    assert width_of(large) == width_of(small) <= timeline.DEFAULT_WIDTH


@pytest.mark.parametrize("width", [None, 1000, 2400])
def test_the_svg_at_pp8_vpp4_m32_fits_a_page_by_default_and_the_width_asked(
    width: int | None,
) -> None:
    runs = compare(8, 4, 32)
    svg = to_svg(runs) if width is None else to_svg(runs, width=width)
    assert width_of(svg) <= (width or 2000)
    drawn = boxes(svg)
    assert len(drawn) == sum(len(r.steps) for r in runs)  # every step drawn and hoverable
    assert all(b.tooltip for b in drawn)
    for b in drawn:  # a label only where the box holds it
        if b.label is not None:
            assert b.width >= len(b.label) * timeline.CHAR_WIDTH + timeline.LABEL_PAD


def test_the_svg_names_the_plan_and_the_time_unit() -> None:
    svg = to_svg(compare(4, 2, 8), caption="prog.pb, plan pp 4 x vpp 2", unit="time (1 = F)")
    root = ET.fromstring(svg)
    assert "prog.pb, plan pp 4 x vpp 2" in (root.findtext(f"{NS}title") or "")
    texts = {t.get("class"): t.text for t in root.iter(f"{NS}text") if t.get("class")}
    assert texts["caption"] == "prog.pb, plan pp 4 x vpp 2"
    assert texts["unit"] == "time (1 = F)"


def test_labels_only_where_they_fit_when_the_width_is_bounded() -> None:
    """3003 time units in a page's width leave under 1 px per unit: no name fits, every
    box is still drawn and hoverable, and the picture stays bounded."""
    run = simulate(2, 1, 1000, "1f1b")
    svg = to_svg(run)
    drawn = boxes(svg)
    assert len(drawn) == len(run.steps)
    assert all(b.label is None for b in drawn)
    assert all(b.tooltip for b in drawn)
    assert width_of(svg) <= timeline.DEFAULT_WIDTH


def test_the_trace_has_one_process_per_schedule() -> None:
    runs = compare(4, 2, 8)
    events = to_chrome_trace(runs)["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert [e["pid"] for e in complete].count(0) == len(runs[0].steps)
    assert [e["pid"] for e in complete].count(1) == len(runs[1].steps)
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert "1F1B" in names[0] and "interleaved" in names[1]
    for e in complete:
        vs, kind, mb = NAME.fullmatch(e["name"]).groups()  # type: ignore[union-attr]
        assert (int(vs), kind, int(mb)) == (
            e["args"]["virtual_stage"],
            e["args"]["kind"],
            e["args"]["micro_batch"],
        )


# -- the terminal -------------------------------------------------------------------


def _render(results: list[SimResult] | tuple[SimResult, ...], width: int, **kw: bool) -> str:
    out = io.StringIO()
    render_simulation(Console(file=out, width=width, color_system=None), results, **kw)
    return out.getvalue()


@pytest.mark.parametrize("width", [40, 80, 120])
def test_a_long_timeline_is_scaled_to_the_console_width(width: int) -> None:
    runs = compare(8, 2, 32)
    text = _render(runs, width)
    rows = [line for line in text.splitlines() if re.fullmatch(r"stage \d+ [A-Za-z.]+ *", line)]
    assert len(rows) == 16
    assert max(map(len, rows)) <= width
    assert max(map(len, rows)) >= (width - 8) * 3 // 4  # a round scale wastes little
    assert "scaled to fit" in " ".join(text.split())


def test_a_scaled_column_shows_the_step_at_its_middle() -> None:
    """pp 2, m 2, 1F1B, unit costs: stage 0 runs F0 [0,1) F1 [1,2) B0 [4,6) B1 [7,9),
    stage 1 F0 [1,2) B0 [2,4) F1 [4,5) B1 [5,7). At 2 units a column the midpoints
    1, 3, 5, 7, 9 fall in F1, idle, B0, B1, idle on stage 0 and F0, B0, B1, idle, idle
    on stage 1."""
    run = simulate(2, 1, 2, "1f1b")
    rows = [r.plain for r in timeline.timeline_rows(run, Fraction(2))]
    assert rows == ["stage 0 A.aa.", "stage 1 Aaa.."]


def test_no_pointer_to_files_when_they_are_being_written() -> None:
    runs = compare(8, 2, 32)
    assert "--svg or --trace" in " ".join(_render(runs, 80).split())
    assert "--svg or --trace" not in _render(runs, 80, suggest_files=False)


def test_simulate_writes_every_schedule_to_the_svg_and_the_trace(tmp_path: Path) -> None:
    svg, trace = tmp_path / "t.svg", tmp_path / "t.json"
    args = [
        "simulate",
        "--pp",
        "4",
        "--vpp",
        "2",
        "-m",
        "8",
        "--svg",
        str(svg),
        "--trace",
        str(trace),
    ]
    result = invoke(*args, env={"COLUMNS": "60"})
    drawn = boxes(svg.read_text())
    assert {b.schedule for b in drawn} == {"1f1b", "interleaved"}
    assert len(drawn) == 4 * 8 * 2 + 4 * 2 * 8 * 2
    assert "--svg or --trace" not in result.stdout  # given: not suggested


def test_simulate_width_bounds_the_svg_and_the_caption_names_the_program(
    tmp_path: Path, sample_bytes
) -> None:
    prog, svg = tmp_path / "p.pb", tmp_path / "t.svg"
    prog.write_bytes(sample_bytes[8, 4])
    args = ["simulate", str(prog), "--vpp", "2", "-m", "8", "--svg", str(svg), "--width", "900"]
    invoke(*args)
    root = ET.fromstring(svg.read_text())
    assert int(root.get("width") or 0) <= 900
    caption = " ".join(t.text or "" for t in root.iter(f"{NS}text") if t.get("class") == "caption")
    assert f"{prog}, plan pp 4 x vpp 2, loop placement" in caption
    units = {t.text for t in root.iter(f"{NS}text") if t.get("class") == "unit"}
    assert units == {"time (1 = the mean stage's forward of one micro-batch)"}
    narrow = invoke(*args[:-1], "100", exit_code=2)
    assert "--width" in narrow.stderr


def _zero_bubble_like() -> SimResult:
    """1F1B with every backward split into an input-gradient and a weight-gradient half,
    the step kinds of the zero-bubble schedules."""
    from dataclasses import replace

    base = simulate(2, 1, 2, "1f1b")
    steps = []
    for s in base.steps:
        if s.kind != "B":
            steps.append(s)
            continue
        mid = (s.start + s.end) / 2
        steps.append(replace(s, kind="I", end=mid))  # type: ignore[arg-type]
        steps.append(replace(s, kind="W", start=mid))  # type: ignore[arg-type]
    return replace(base, steps=tuple(steps))


def test_input_and_weight_gradients_have_their_own_names_and_legend_entries() -> None:
    run = _zero_bubble_like()
    svg = to_svg(run)
    drawn = boxes(svg)
    assert {b.kind for b in drawn} == {"F", "I", "W"}
    assert any(b.label == "1I0" and b.tooltip.startswith("1I0: input gradient of") for b in drawn)
    assert any(b.label == "0W1" and b.tooltip.startswith("0W1: weight gradient of") for b in drawn)
    legend = next(g for g in ET.fromstring(svg).iter(f"{NS}g") if g.get("class") == "legend")
    words = " ".join(t.text or "" for t in legend.iter(f"{NS}text"))
    assert "input gradient" in words and "weight gradient" in words and "backward" not in words
    text = _render([run], 80)
    assert "W underlined" in text
    trace = [e for e in to_chrome_trace(run)["traceEvents"] if e["ph"] == "X"]
    assert {e["cat"] for e in trace} == {"forward", "input gradient", "weight gradient"}


# Characters XML 1.0 forbids (C0 controls but tab, LF, CR; U+FFFE, U+FFFF; lone
# surrogates) and others a picture must not hold raw.
XML_FORBIDDEN = [
    *(chr(c) for c in range(0x20) if chr(c) not in "\t\n\r"),
    "\ufffe",
    "\uffff",
    "\ud800",
    "\udcff",
    "\x7f",
    "\u202e",
]


@pytest.mark.parametrize("char", XML_FORBIDDEN, ids=lambda c: f"U+{ord(c):04X}")
def test_the_svg_stays_well_formed_whatever_its_caption_and_unit_hold(char: str) -> None:
    """Was: U+FFFE, U+FFFF (and a path that is not UTF-8) in the caption made the SVG
    malformed, or could not be encoded at all."""
    svg = to_svg(compare(2, 2, 4), caption=f"pro{char}g.pb, plan", unit=f"t{char}")
    root = ET.fromstring(svg.encode("utf-8"))
    assert char not in svg
    assert root.findtext(f"{NS}title")


@pytest.mark.parametrize("char", ["\ufffe", "\uffff", "\x01", "\udcff"], ids=ascii)
def test_simulate_draws_a_well_formed_svg_of_a_program_whose_names_and_path_hold_any_character(
    tmp_path: Path, char: str
) -> None:
    import os

    from programs import layered

    layer = "Dec" + (char if char != "\udcff" else "x") + "Layer"
    p = layered([0, 0, 1, 1], backward=True, optimizer=True, layer=layer)
    p.msg.blocks[0].ops[1].type = f"matmul{layer}"
    name = os.fsdecode(os.fsencode(str(tmp_path)) + b"/p") + char + ".pb"
    with open(os.fsencode(name), "wb") as f:
        f.write(p.bytes())
    svg = tmp_path / "t.svg"
    invoke("simulate", name, "--vpp", "2", "-m", "4", "--svg", str(svg))
    root = ET.fromstring(svg.read_bytes())
    assert root.findtext(f"{NS}title")
