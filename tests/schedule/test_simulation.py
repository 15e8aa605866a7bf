"""`vppctl simulate`: the schedule simulator and its pictures, checked against closed forms.

Notation as in Megatron's paper: p stages, v chunks per stage, m micro-batches.
Unit costs are forward 1 and backward 2 per virtual stage (the default).

The tests here also cover vppctl/schedule/arguments.py and vppctl/schedule/results.py, which
have no test file of their own.
"""

from __future__ import annotations

import io
import json
import re
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from fractions import Fraction
from itertools import pairwise

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from rich.console import Console

from vppctl.errors import ConversionError, UsageError
from vppctl.outcomes import simulation_json, simulation_warnings
from vppctl.report import render_simulation
from vppctl.schedule.orders import MERGED, SCHEDULE_NAMES, SPLIT, V_SHAPED, legal_group_sizes
from vppctl.schedule.simulation import (
    DeadlockError,
    Op,
    SimResult,
    SimulationError,
    Step,
    compare,
    simulate,
    simulate_orders,
    stage_orders,
)
from vppctl.schedule.timeline import time_cell, to_chrome_trace, to_svg

SVG = "{http://www.w3.org/2000/svg}"


def cell_count(result: SimResult) -> int:
    """How many cells wide the exact timeline is."""
    return int(result.makespan / time_cell(result))


def console() -> Console:
    return Console(file=io.StringIO(), width=100, color_system=None)


def printed(out: Console) -> str:
    file = out.file
    assert isinstance(file, io.StringIO)
    return file.getvalue()


# ---------------------------------------------------------------------------
# Bubble fractions equal the closed forms exactly

ONE_F_ONE_B_GRID = [(p, m) for p in (1, 2, 3, 4, 8) for m in (1, 2, 3, 4, 5, 8, 16, 32)]
INTERLEAVED_GRID = [
    (p, v, k * p) for p in (2, 3, 4, 8) for v in (2, 3, 4) for k in (1, 2, 3, 4)
] + [(8, 2, 32), (8, 4, 32), (16, 8, 32)]


@pytest.mark.parametrize(("p", "m"), ONE_F_ONE_B_GRID)
def test_1f1b_bubble_is_p_minus_1_over_m_plus_p_minus_1(p: int, m: int) -> None:
    result = simulate(p, 1, m, "1f1b")
    assert result.bubble == Fraction(p - 1, m + p - 1)
    assert result.bubble_vs_ideal == Fraction(p - 1, m)
    assert result.makespan == (m + p - 1) * 3


@pytest.mark.parametrize(("p", "m"), ONE_F_ONE_B_GRID)
def test_fthenb_has_the_same_bubble_as_1f1b(p: int, m: int) -> None:
    assert simulate(p, 1, m, "fthenb").bubble_vs_ideal == Fraction(p - 1, m)


@pytest.mark.parametrize(("p", "v", "m"), INTERLEAVED_GRID)
def test_interleaved_bubble_is_p_minus_1_over_v_m(p: int, v: int, m: int) -> None:
    result = simulate(p, v, m, "interleaved")
    assert result.bubble_vs_ideal == Fraction(p - 1, v * m)
    assert result.bubble == Fraction(p - 1, v * m + p - 1)
    assert result.ideal == v * m * 3


@pytest.mark.parametrize(
    ("p", "v", "m", "f", "b"), [(4, 2, 8, 3, 5), (3, 3, 6, 2, 7), (8, 4, 32, 5, 1)]
)
def test_closed_forms_hold_for_any_equal_forward_and_backward_costs(
    p: int, v: int, m: int, f: int, b: int
) -> None:
    forward, backward = [f] * (p * v), [b] * (p * v)
    assert simulate(p, v, m, "1f1b", forward, backward).bubble_vs_ideal == Fraction(p - 1, m)
    interleaved = simulate(p, v, m, "interleaved", forward, backward)
    assert interleaved.bubble_vs_ideal == Fraction(p - 1, v * m)


def test_p8_m32_bubble_halves_with_each_doubling_of_v() -> None:
    one_f_one_b = simulate(8, 1, 32, "1f1b")
    v2 = simulate(8, 2, 32, "interleaved")
    v4 = simulate(8, 4, 32, "interleaved")
    assert [r.bubble_vs_ideal for r in (one_f_one_b, v2, v4)] == [
        Fraction(7, 32),
        Fraction(7, 64),
        Fraction(7, 128),
    ]
    assert [f"{float(r.bubble_vs_ideal):.1%}" for r in (one_f_one_b, v2, v4)] == [
        "21.9%",
        "10.9%",
        "5.5%",
    ]


def test_default_costs_are_unit_forward_and_double_backward() -> None:
    result = simulate(2, 2, 4, "interleaved")
    assert {s.duration for s in result.steps if s.kind == "F"} == {1}
    assert {s.duration for s in result.steps if s.kind == "B"} == {2}


def test_float_costs_are_exact_decimals() -> None:
    result = simulate(2, 1, 2, "1f1b", forward=[0.1, 0.1], backward=[0.2, 0.2])
    assert result.makespan == Fraction(9, 10)  # (m + p - 1) (F + B) = 3 * 0.3
    assert result.bubble_vs_ideal == Fraction(1, 2)


def test_a_large_pipeline_is_simulated_quickly() -> None:
    began = time.perf_counter()
    result = simulate(16, 8, 256, "interleaved")
    assert time.perf_counter() - began < 20
    assert len(result.steps) == 16 * 8 * 256 * 2
    assert result.bubble_vs_ideal == Fraction(15, 8 * 256)


# ---------------------------------------------------------------------------
# Peak in-flight micro-batches (activation memory)


@pytest.mark.parametrize(("p", "m"), ONE_F_ONE_B_GRID)
def test_1f1b_stage_k_holds_min_m_p_minus_k_micro_batches(p: int, m: int) -> None:
    result = simulate(p, 1, m, "1f1b")
    assert result.peak_in_flight == tuple(min(m, p - k) for k in range(p))


def test_fthenb_holds_every_micro_batch() -> None:
    assert simulate(4, 1, 6, "fthenb").peak_in_flight == (6, 6, 6, 6)


@pytest.mark.parametrize(("p", "v", "m"), [g for g in INTERLEAVED_GRID if g[2] > g[0]])
def test_interleaved_stage_k_holds_its_warmup_plus_one_chunk_units(p: int, v: int, m: int) -> None:
    # Megatron's warmup: 2 (p - k - 1) + (v - 1) p forwards, then one more before a backward.
    warmup = [2 * (p - k - 1) + (v - 1) * p for k in range(p)]
    result = simulate(p, v, m, "interleaved")
    assert result.peak_in_flight == tuple(min(w + 1, m * v) for w in warmup)


@pytest.mark.parametrize(("p", "v", "m"), [g for g in INTERLEAVED_GRID if g[2] >= 2 * g[0]])
def test_interleaved_first_stage_memory_is_1_plus_p_minus_1_over_p_v_of_1f1b(
    p: int, v: int, m: int
) -> None:
    interleaved = simulate(p, v, m, "interleaved").peak_in_flight_stage_units[0]
    one_f_one_b = simulate(p, v, m, "1f1b").peak_in_flight_stage_units[0]
    assert one_f_one_b == p
    assert interleaved / one_f_one_b == 1 + Fraction(p - 1, p * v)


def test_interleaved_with_m_equal_p_warms_up_as_megatron_core_does() -> None:
    # One group of p micro-batches: stages whose warm-up 2 (p - k - 1) + (v - 1) p reaches
    # v m = 8 run every forward first; later stages start 1F1B (Megatron-Core and torch
    # dropped the older "m == p: all forwards first on every stage" special case).
    result = simulate(4, 2, 4, "interleaved")
    assert result.peak_in_flight == (8, 8, 7, 5)
    assert result.bubble_vs_ideal == Fraction(3, 8)


# ---------------------------------------------------------------------------
# The schedules' op orders and dependencies


def test_interleaved_order_follows_megatron_groups_of_p_per_chunk() -> None:
    stage0 = [op.label for op in stage_orders("interleaved", 2, 2, 4)[0]]
    # Warmup on stage 0 of p=2, v=2: 2 (p - 1) + (v - 1) p = 4 forwards.
    assert stage0[:4] == ["F0.c0", "F1.c0", "F0.c1", "F1.c1"]
    # Then one forward, one backward; backwards enter the last chunk first.
    assert stage0[4:8] == ["F2.c0", "B0.c1", "F3.c0", "B1.c1"]
    last = [op.label for op in stage_orders("interleaved", 2, 2, 4)[1]]
    assert last[:2] == ["F0.c0", "F1.c0"]


def test_1f1b_stage_k_warms_up_with_p_minus_k_minus_1_forwards() -> None:
    orders = stage_orders("1f1b", 4, 1, 8)
    for stage, order in enumerate(orders):
        first_backward = next(i for i, op in enumerate(order) if op.kind == "B")
        assert first_backward == 4 - stage


def assert_respects_dependencies(result: SimResult) -> None:
    """Steps on a stage never overlap; F waits for upstream F, B for downstream B."""
    p, v = result.pp, result.vpp
    end: dict[tuple[str, int, int], Fraction] = {}
    for step in result.steps:
        end[(step.kind, step.micro_batch, step.chunk * p + step.stage)] = step.end
    by_stage: dict[int, list[Step]] = defaultdict(list)
    for step in result.steps:
        by_stage[step.stage].append(step)
        virtual = step.chunk * p + step.stage
        source = virtual - 1 if step.kind == "F" else virtual + 1
        if 0 <= source < p * v:
            hop = result.p2p_cost if source % p != step.stage else 0
            assert step.start >= end[(step.kind, step.micro_batch, source)] + hop
        if step.kind == "B":
            assert step.start >= end[("F", step.micro_batch, virtual)]
    for steps in by_stage.values():
        steps.sort(key=lambda s: s.start)
        assert all(a.end <= b.start for a, b in pairwise(steps))


@settings(max_examples=60, deadline=None)
@given(
    p=st.integers(1, 5),
    v=st.integers(1, 3),
    m=st.integers(1, 12),
    schedule=st.sampled_from(["fthenb", "1f1b", "interleaved"]),
    costs=st.lists(st.integers(0, 4), min_size=30, max_size=30),
    hop=st.integers(0, 2),
)
def test_every_schedule_runs_every_step_once_and_respects_dependencies(
    p: int, v: int, m: int, schedule: str, costs: list[int], hop: int
) -> None:
    forward = [c + 1 for c in costs[: p * v]]
    backward = costs[15 : 15 + p * v]
    if schedule == "interleaved" and v > 1:
        assume(bool(legal_group_sizes(p, m)))
        group = legal_group_sizes(p, m)[0]
    else:
        group = None
    result = simulate(p, v, m, schedule, forward, backward, hop, group_size=group)  # type: ignore[arg-type]
    units = {(s.kind, s.micro_batch, s.chunk, s.stage) for s in result.steps}
    assert len(units) == len(result.steps) == p * result.vpp * m * 2
    assert_respects_dependencies(result)


@pytest.mark.parametrize("p", [2, 3, 4, 5, 8])
@pytest.mark.parametrize("v", [2, 3, 4])
def test_interleaved_never_deadlocks_nor_loses_to_1f1b_for_any_legal_group_size(
    p: int, v: int
) -> None:
    for m in range(p, 3 * p + 3):
        for n in legal_group_sizes(p, m):
            interleaved = simulate(p, v, m, "interleaved", group_size=n)
            assert interleaved.makespan <= simulate(p, v, m, "1f1b").makespan


def test_fthenb_pays_each_hop_once_on_the_way_down_and_once_back() -> None:
    for p, m, hop in [(4, 8, Fraction(1)), (2, 3, Fraction(1, 2)), (8, 32, Fraction(1, 4))]:
        result = simulate(p, 1, m, "fthenb", p2p_cost=hop)
        assert result.makespan == (m + p - 1) * 3 + 2 * (p - 1) * hop


def test_communication_cost_lengthens_the_step() -> None:
    free = simulate(4, 2, 8, "interleaved")
    costly = simulate(4, 2, 8, "interleaved", p2p_cost=Fraction(1, 2))
    assert costly.makespan > free.makespan
    assert costly.p2p_cost == Fraction(1, 2)


@pytest.mark.parametrize(("p", "v", "m"), [(4, 2, 8), (8, 4, 32), (1, 3, 4)])
def test_p2p_messages_count_every_boundary_crossing_both_ways(p: int, v: int, m: int) -> None:
    crossings = p * v - 1 if p > 1 else 0
    assert simulate(p, v, m, "interleaved").p2p_messages == 2 * m * crossings
    assert simulate(p, v, m, "1f1b").p2p_messages == 2 * m * (p - 1)


# ---------------------------------------------------------------------------
# 1F1B over merged chunks, and the side-by-side comparison


def test_1f1b_given_chunks_merges_each_stage_chunks() -> None:
    # p=2, v=2: stage 0 holds virtual stages 0 and 2, stage 1 holds 1 and 3.
    result = simulate(2, 2, 4, "1f1b", forward=[1, 2, 3, 4])
    assert result.vpp == 1
    assert {s.chunk for s in result.steps} == {0}
    durations = {(s.stage, s.kind): s.duration for s in result.steps}
    assert durations == {(0, "F"): 4, (1, "F"): 6, (0, "B"): 8, (1, "B"): 12}
    assert result.makespan == simulate(2, 1, 4, "1f1b", [4, 6], [8, 12]).makespan


def test_compare_puts_1f1b_and_interleaved_side_by_side_on_the_same_work() -> None:
    baseline, interleaved = compare(4, 2, 8)
    assert (baseline.schedule, baseline.vpp) == ("1f1b", 1)
    assert (interleaved.schedule, interleaved.vpp) == ("interleaved", 2)
    assert baseline.ideal == interleaved.ideal
    assert interleaved.makespan < baseline.makespan


def test_compare_without_chunks_is_just_1f1b() -> None:
    (only,) = compare(4, 1, 8)
    assert only.schedule == "1f1b"


def test_interleaved_with_one_chunk_is_plain_1f1b() -> None:
    assert simulate(4, 1, 8, "interleaved").steps == simulate(4, 1, 8, "1f1b").steps


# ---------------------------------------------------------------------------
# Warnings and errors


def test_warns_when_micro_batches_are_fewer_than_stages() -> None:
    (warning,) = simulate(4, 1, 2, "1f1b").warnings
    assert "micro-batches (2) < pp (4)" in warning


def test_interleaved_refuses_micro_batches_the_default_group_size_cannot_serve() -> None:
    # m 6, pp 4: the default N = pp = 4 leaves a last group of 2 < pp, which
    # Megatron-Core refuses; N = 6 is the one legal size. 1F1B runs it silently.
    with pytest.raises(UsageError, match="legal --group-size values: 6$") as caught:
        simulate(4, 2, 6, "interleaved")
    assert caught.value.exit_code == 2
    assert simulate(4, 2, 6, "interleaved", group_size=6).group_size == 6
    assert simulate(4, 2, 6, "1f1b").warnings == ()


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"pp": 0}, "pp must be a positive integer"),
        ({"vpp": 0}, "vpp must be a positive integer"),
        ({"micro_batches": 0}, "micro-batches must be a positive integer"),
        ({"schedule": "zb"}, "unknown schedule 'zb'"),
        ({"forward": [1, 1, 1]}, "forward costs list has 3 entries but pp * vpp = 4"),
        ({"backward": [1] * 5}, "backward costs list has 5 entries"),
        ({"forward": [1, -1, 1, 1]}, "forward cost of virtual stage 1 must not be negative"),
        ({"forward": [1, float("nan"), 1, 1]}, "must be finite"),
        ({"p2p_cost": -1}, "p2p cost must not be negative"),
        ({"forward": [0] * 4, "backward": [0] * 4}, "all costs are zero"),
    ],
)
def test_bad_arguments_raise_a_one_line_simulation_error(
    kwargs: dict[str, object], words: str
) -> None:
    arguments: dict[str, object] = {
        "pp": 2,
        "vpp": 2,
        "micro_batches": 4,
        "schedule": "interleaved",
    }
    arguments.update(kwargs)
    with pytest.raises(SimulationError) as caught:
        simulate(**arguments)  # type: ignore[arg-type]
    message = str(caught.value)
    assert words in message
    assert "\n" not in message
    assert caught.value.exit_code == 4
    assert isinstance(caught.value, ConversionError)


def test_a_schedule_that_cannot_progress_raises_deadlock_naming_stage_and_op() -> None:
    # Stage 0 wants B0's gradient before sending F1; stage 1 wants F1 before doing B0.
    stage0 = [Op("F", 0, 0), Op("B", 0, 0), Op("F", 1, 0), Op("B", 1, 0)]
    stage1 = [Op("F", 0, 0), Op("F", 1, 0), Op("B", 0, 0), Op("B", 1, 0)]
    with pytest.raises(DeadlockError) as caught:
        simulate_orders([stage0, stage1], vpp=1)
    error = caught.value
    assert (error.stage, error.op, error.waits_for, error.waits_on_stage) == (
        0,
        "B0.c0",
        "B0.c0",
        1,
    )
    assert "stage 0 cannot run B0.c0: it waits for B0.c0 on stage 1" in str(error)
    assert isinstance(error, SimulationError)


def test_hand_written_orders_must_use_existing_chunks() -> None:
    with pytest.raises(SimulationError, match="outside vpp=1 chunks"):
        simulate_orders([[Op("F", 0, 1)]], vpp=1)


def test_hand_written_orders_that_can_progress_are_timed() -> None:
    stage0 = [Op("F", 0, 0), Op("F", 1, 0), Op("B", 0, 0), Op("B", 1, 0)]
    stage1 = [Op("F", 0, 0), Op("B", 0, 0), Op("F", 1, 0), Op("B", 1, 0)]
    steps = simulate_orders([stage0, stage1], vpp=1)
    assert max(s.end for s in steps) == 9  # 1F1B, p=2, m=2: (m + p - 1) * 3


# ---------------------------------------------------------------------------
# Pictures


def test_svg_parses_and_has_one_cell_per_step() -> None:
    p, v, m = 4, 2, 8
    root = ET.fromstring(to_svg(simulate(p, v, m, "interleaved")))
    cells = [g for g in root.iter(f"{SVG}g") if g.get("class", "").startswith("step")]
    assert len(cells) == p * v * m * 2
    assert sum("forward" in (c.get("class") or "") for c in cells) == p * v * m
    assert {c.get("data-stage") for c in cells} == {str(s) for s in range(p)}


def test_chrome_trace_has_one_complete_event_per_step() -> None:
    p, v, m = 4, 2, 8
    result = simulate(p, v, m, "interleaved")
    trace = json.loads(json.dumps(to_chrome_trace(result)))
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(events) == p * v * m * 2
    assert all(re.fullmatch(r"\d+[FB]\d+", e["name"]) for e in events)
    assert {e["tid"] for e in events} == set(range(p))
    first = next(e for e in events if e["name"] == "4F3" and e["tid"] == 0)
    assert first["args"] == {
        "stage": 0,
        "chunk": 1,
        "virtual_stage": 4,
        "micro_batch": 3,
        "kind": "F",
    }


def test_terminal_timeline_draws_one_row_per_stage_when_it_fits() -> None:
    out = console()
    result = simulate(4, 2, 8, "interleaved")
    render_simulation(out, [result])
    rows = [line for line in printed(out).splitlines() if line.startswith("stage ")]
    assert len(rows) == 4
    cells = [row.removeprefix(f"stage {k} ") for k, row in enumerate(rows)]
    assert all(len(c) == cell_count(result) for c in cells)
    # Unit costs: each stage does v*m forwards of one cell and v*m backwards of two.
    for row in cells:
        assert sum(ch.isupper() for ch in row) == 2 * 8
        assert sum(ch.islower() for ch in row) == 2 * 8 * 2
    assert cells[0].startswith("AAAABBBB")  # two groups of p forwards: chunk 0, chunk 1
    assert cells[3].startswith("...A")
    assert "one column = 1 time unit(s)" in printed(out)
    assert "scaled" not in printed(out)


def test_terminal_timeline_is_scaled_to_fit_when_it_is_long() -> None:
    out = console()
    render_simulation(out, compare(8, 2, 32))
    text = printed(out)
    rows = [line for line in text.splitlines() if line.startswith("stage ")]
    assert len(rows) == 2 * 8
    assert all(len(row) <= 100 for row in rows)
    # 1F1B takes 234 units in 92 columns: 2.54 a column, rounded up to 3, for both.
    flat = " ".join(text.split())
    assert flat.count("one column = 3 time units, scaled to fit") == 2
    assert [len(r) for r in rows] == [len("stage 0 ") + 78] * 8 + [len("stage 0 ") + 71] * 8
    assert "--svg or --trace draw every step" in flat


def test_render_shows_both_schedules_side_by_side_and_the_gain() -> None:
    out = console()
    render_simulation(out, compare(8, 2, 32), timeline=False)
    text = printed(out)
    assert "1F1B (v=1)" in text and "interleaved 1F1B (v=2)" in text
    assert "21.9%" in text and "10.9%" in text
    assert "23 (11.5 stages)" in text  # stage 0: p v + p - 1 chunk units
    assert "timeline" not in text


def test_simulation_warnings_name_fewer_micro_batches_than_stages() -> None:
    warnings = simulation_warnings([simulate(4, 1, 2, "1f1b")])
    assert any("micro-batches (2) < pp (4)" in w for w in warnings)


# ---------------------------------------------------------------------------
# JSON


def test_to_json_is_serialisable_and_carries_the_figures() -> None:
    data = json.loads(json.dumps(simulation_json(compare(8, 2, 32))))
    baseline, interleaved = data["results"]
    assert baseline["bubble_vs_ideal"] == 0.21875
    assert interleaved["exact"]["bubble_vs_ideal"] == "7/64"
    assert Fraction(interleaved["exact"]["makespan"]) == 213
    stage0 = interleaved["per_stage"][0]
    assert {
        k: stage0[k] for k in ("stage", "bubble", "peak_in_flight", "peak_in_flight_stages")
    } == {
        "stage": 0,
        "bubble": round(float(Fraction(21, 213)), 6),
        "peak_in_flight": 23,
        "peak_in_flight_stages": 11.5,
    }
    assert stage0["idle"] == 21 and stage0["peak_in_flight_per_chunk"] == [16, 8]
    assert stage0["order"][:3] == ["0F0", "0F1", "0F2"] and len(stage0["order"]) == 2 * 2 * 32
    assert interleaved["placement"] == "loop" and interleaved["group_size"] == 8
    assert interleaved["p2p_messages"] == 2 * 32 * 15
    assert data["comparison"]["stage0_activation_ratio"] == round(23 / 16, 6)
    assert baseline["steps"] is None  # every key is always there: null when not asked for


def test_to_json_can_include_every_step() -> None:
    data = simulation_json([simulate(2, 2, 2, "interleaved")], steps=True)
    assert len(data["results"][0]["steps"]) == 2 * 2 * 2 * 2
    assert data["comparison"] is None  # one schedule: nothing to compare


# -- a whole backward measured apart ---------------------------------------------------------

F_, I_, W_, FULL = (
    [Fraction(2), Fraction(3)],
    [Fraction(3), Fraction(2)],
    [Fraction(1)] * 2,
    [
        Fraction(7, 2),
        Fraction(5, 2),
    ],
)


@pytest.mark.parametrize("schedule", sorted(SCHEDULE_NAMES))
def test_each_action_runs_its_own_measured_time(schedule: str) -> None:
    """Every schedule: each step lasts its kind's cost on its virtual stage, a whole
    backward (B) the `full` measured apart. So a schedule without the split is the same
    schedule on a whole backward of `full`, whatever I and W say; one that never runs a
    whole backward is untouched by `full`; Paddle's ZB-H1 and DualPipeV mix both."""
    vpp = 1 if schedule in MERGED else 2
    placement = "v" if schedule in V_SHAPED else "loop"
    n = 2 * vpp
    f, i, w = F_ * vpp, I_ * vpp, W_ * vpp
    full = [Fraction(5 + k, 2) for k in range(n)]
    args = (2, vpp, 2 if schedule == "zbvpp" else 4, schedule)  # ZB-VPP runs m = pp only
    result = simulate(*args, f, i, weight=w, full=full, placement=placement)  # type: ignore[arg-type]
    cost = {"F": f, "I": i, "W": w, "B": full}
    assert all(s.end - s.start == cost[s.kind][s.virtual_stage] for s in result.steps)
    kinds = {s.kind for s in result.steps}
    without = simulate(*args, f, i, weight=w, placement=placement)  # type: ignore[arg-type]
    if "B" not in kinds:
        assert result.makespan == without.makespan
    if not kinds & {"I", "W"}:
        whole = simulate(*args, f, full, placement=placement)  # type: ignore[arg-type]
        assert result.makespan == whole.makespan != without.makespan
    assert ("B" in kinds) == (schedule not in SPLIT or schedule in ("zbh1", "dualpipev"))


def test_a_whole_backward_needs_the_weight_apart() -> None:
    with pytest.raises(SimulationError, match="whole backward cost needs the weight"):
        simulate(2, 1, 4, "1f1b", F_, I_, full=FULL)
