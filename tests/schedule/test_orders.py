"""Schedules beyond 1F1B: Megatron's group size, ZB1P, ZB-V, torch notation and CSV.

Golden vectors come from the published sources named in each test; the torch CSV
files in tests/data were written by torch 2.13's own schedule classes (see
tests/data/README.md), so these tests check against torch without importing it.

The tests here also cover vppctl/schedule/actions.py, vppctl/schedule/interleaving.py,
vppctl/schedule/refusal.py, vppctl/schedule/runtimes.py and vppctl/schedule/vshape.py, which
have no test file of their own.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from fractions import Fraction
from itertools import pairwise

import paths
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vppctl.errors import ProgramFileError, UsageError
from vppctl.plan import place
from vppctl.schedule import OVER_MAX_UNITS, Pipeline, ScheduleRefused
from vppctl.schedule.orders import (
    LOOPED,
    MERGED,
    SCHEDULES,
    SPLIT,
    V_SHAPED,
    interleaved_warmup,
    legal_group_sizes,
    schedule_table,
    stage_orders,
)
from vppctl.schedule.simulation import (
    SimResult,
    compare,
    held_peak,
    parse_unit_costs,
    simulate,
    simulate_orders,
)
from vppctl.schedule.torchcsv import parse_csv, to_csv, to_ops

DATA = paths.DATA


def unit(p: int, v: int) -> dict[str, list[int]]:
    """F = B = W = 1 on every virtual stage."""
    return {"forward": [1] * (p * v), "backward": [1] * (p * v), "weight": [1] * (p * v)}


def leading_forwards(order: tuple[str, ...]) -> int:
    """Forwards a stage runs before its first backward action."""
    return next(i for i, action in enumerate(order) if "F" not in action)


# ---------------------------------------------------------------------------
# Megatron-Core's interleaved schedule and its group size N


def test_megatron_schedule_table_pp2_n3_m5_vp2() -> None:
    # Megatron-Core's comment in forward_backward_pipelining_with_interleaving.
    table = schedule_table(5, 2, 3)
    assert [mb for mb, _ in table] == [0, 1, 2, 0, 1, 2, 3, 4, 3, 4]
    assert [chunk for _, chunk in table] == [0, 0, 0, 1, 1, 1, 0, 0, 1, 1]


def test_stage_0_forward_order_for_pp2_n3_m5_vp2_in_torch_notation() -> None:
    result = simulate(2, 2, 5, "interleaved", group_size=3)
    forwards = [a for a in result.orders[0] if "F" in a]
    assert forwards == ["0F0", "0F1", "0F2", "2F0", "2F1", "2F2", "0F3", "0F4", "2F3", "2F4"]


def test_interleaved_p4_v2_m8_n4_warms_up_10_8_6_4_forwards() -> None:
    assert [interleaved_warmup(4, 2, s, 8, 4) for s in range(4)] == [10, 8, 6, 4]
    # The steady phase then opens with one more forward before the first backward.
    result = simulate(4, 2, 8, "interleaved", group_size=4)
    assert [leading_forwards(order) for order in result.orders] == [11, 9, 7, 5]


def test_interleaved_p4_v2_m8_n4_stage_0_holds_2_p_minus_1_plus_v_minus_1_n_plus_1() -> None:
    p, v, n = 4, 2, 4
    result = simulate(p, v, 8, "interleaved", group_size=n)
    assert result.peak_in_flight[0] == 2 * (p - 1) + (v - 1) * n + 1 == 11


def test_warmup_is_capped_at_m_times_vpp() -> None:
    assert interleaved_warmup(8, 4, 0, 8, 8) == 32  # 14 + 24 = 38 > 4 * 8


def test_legal_group_sizes_for_m10_pp4_are_5_6_10() -> None:
    assert legal_group_sizes(4, 10) == (5, 6, 10)


@pytest.mark.parametrize(("pp", "m", "legal"), [(4, 8, (4, 8)), (2, 5, (3, 5)), (4, 3, ())])
def test_legal_group_sizes_follow_megatron_cores_two_checks(
    pp: int, m: int, legal: tuple[int, ...]
) -> None:
    assert legal_group_sizes(pp, m) == legal


def test_an_illegal_group_size_is_a_usage_error_listing_the_legal_ones() -> None:
    with pytest.raises(UsageError) as caught:
        simulate(4, 2, 10, "interleaved", group_size=4)
    assert caught.value.exit_code == 2
    assert str(caught.value).endswith("legal --group-size values: 5, 6, 10")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("n", [3, 11, 7])
def test_group_sizes_outside_range_or_with_a_short_last_group_are_refused(n: int) -> None:
    with pytest.raises(UsageError, match=f"--group-size = {n} is not legal"):
        simulate(4, 2, 10, "interleaved", group_size=n)


def test_interleaved_with_fewer_micro_batches_than_stages_is_refused() -> None:
    with pytest.raises(UsageError, match="needs at least pp = 4 micro-batches, got 3"):
        simulate(4, 2, 3, "interleaved")


def test_the_last_group_holds_the_remainder() -> None:
    # m 10, N 6: groups 0-5 and 6-9, each through chunk 0 then chunk 1.
    table = schedule_table(10, 2, 6)
    assert table[12:] == [(6, 0), (7, 0), (8, 0), (9, 0), (6, 1), (7, 1), (8, 1), (9, 1)]


def test_a_larger_group_size_holds_more_activations() -> None:
    small = simulate(4, 2, 12, "interleaved", group_size=4)
    large = simulate(4, 2, 12, "interleaved", group_size=12)
    assert large.peak_in_flight[0] > small.peak_in_flight[0]
    assert small.group_size == 4 and large.group_size == 12


@settings(max_examples=60, deadline=None)
@given(p=st.integers(2, 6), v=st.integers(2, 4), m=st.integers(2, 24), pick=st.integers(0, 99))
def test_every_legal_group_size_runs_without_deadlock(p: int, v: int, m: int, pick: int) -> None:
    legal = legal_group_sizes(p, m)
    if not legal:
        with pytest.raises(UsageError):
            simulate(p, v, m, "interleaved")
        return
    result = simulate(p, v, m, "interleaved", group_size=legal[pick % len(legal)])
    assert len(result.steps) == 2 * p * v * m


# ---------------------------------------------------------------------------
# Unit costs F = B = W = 1: 1F1B against ZB1P (the zero-bubble paper, p 4, m 8)


def test_1f1b_unit_costs_p4_m8_makespan_33_and_9_idle_units_per_stage() -> None:
    result = simulate(4, 1, 8, "1f1b", **unit(4, 1))
    assert result.makespan == 33
    assert result.per_stage_idle == (9, 9, 9, 9)
    assert result.bubble == Fraction(4 * 9, 4 * 33)


def test_zb1p_unit_costs_p4_m8_makespan_27_and_3_idle_units_per_stage() -> None:
    result = simulate(4, 1, 8, "zb1p", **unit(4, 1))
    assert result.makespan == 27
    assert result.per_stage_idle == (3, 3, 3, 3)


def test_zb1p_needs_no_more_activation_memory_than_1f1b() -> None:
    # ZB1P keeps 1F1B's peak (p micro-batches on stage 0), even counting until W.
    for p, m in [(4, 8), (8, 32), (3, 3)]:
        zb, one = simulate(p, 1, m, "zb1p"), simulate(p, 1, m, "1f1b")
        assert max(zb.peak_in_flight) == max(one.peak_in_flight) == p


def test_a_micro_batch_stays_in_flight_until_its_weight_gradient() -> None:
    # The last stage of ZB1P defers p - 1 weight passes: p micro-batches held, not 1.
    assert simulate(4, 1, 8, "zb1p").peak_in_flight[3] == 4
    assert simulate(4, 1, 8, "1f1b").peak_in_flight[3] == 1


def test_zb1p_stage_s_defers_its_first_s_weight_passes() -> None:
    orders = simulate(4, 1, 8, "zb1p").orders
    assert orders[0][:6] == ("0F0", "0F1", "0F2", "0F3", "0I0", "0W0")
    assert orders[3][:9] == ("3F0", "3I0", "3F1", "3I1", "3F2", "3I2", "3F3", "3I3", "3W0")


def test_zb1p_given_chunks_merges_each_stage_chunks() -> None:
    result = simulate(2, 2, 4, "zb1p", forward=[1, 2, 3, 4])
    assert (result.vpp, result.plan_vpp) == (1, 2)
    durations = {(s.stage, s.kind): s.duration for s in result.steps}
    assert durations[0, "F"] == 4 and durations[1, "I"] == 6 and durations[1, "W"] == 6


# ---------------------------------------------------------------------------
# Paddle's Eager1F1B


def test_eager1f1b_stage_s_runs_2_pp_minus_s_minus_1_forwards_then_backward_forward_pairs() -> None:
    # Paddle's pipeline_eager_1f1b.py, pp 2, m 4: stage 0 warms up with 3 forwards.
    orders = simulate(2, 1, 4, "eager1f1b").orders
    assert orders[0] == ("0F0", "0F1", "0F2", "0B0", "0F3", "0B1", "0B2", "0B3")
    assert orders[1] == ("1F0", "1B0", "1F1", "1B1", "1F2", "1B2", "1F3", "1B3")


def test_eager1f1b_holds_2_pp_minus_s_minus_1_micro_batches_on_stage_s() -> None:
    assert simulate(4, 1, 16, "eager1f1b").peak_in_flight == (7, 5, 3, 1)


def test_eager1f1b_refuses_fewer_than_2_pp_minus_1_micro_batches() -> None:
    with pytest.raises(UsageError, match="eager1f1b needs at least 2\\*pp - 1 = 7 micro-batches"):
        simulate(4, 1, 6, "eager1f1b")
    assert simulate(4, 1, 7, "eager1f1b").micro_batches == 7


# ---------------------------------------------------------------------------
# ZB-V: two chunks per stage in V placement


def test_zbv_stage_0_runs_virtual_stages_0_and_2pp_minus_1() -> None:
    result = simulate(4, 2, 8, "zbv")
    assert result.placement == "v"
    for stage, order in enumerate(result.orders):
        assert {int(a[:-2]) for a in order} == {stage, 7 - stage}


def test_zbv_refuses_a_vpp_other_than_2() -> None:
    with pytest.raises(UsageError, match="zbv runs exactly 2 chunks per stage") as caught:
        simulate(4, 3, 8, "zbv")
    assert caught.value.exit_code == 2


def test_zbv_refuses_a_loop_placed_plan() -> None:
    with pytest.raises(UsageError, match="convert with --placement v"):
        simulate(4, 2, 8, "zbv", placement="loop")


def test_interleaved_refuses_a_v_placed_plan() -> None:
    # Megatron's order deadlocks on V placement (e.g. pp 2, vpp 2, m 2): refuse it.
    with pytest.raises(UsageError, match="V-placed plan runs --schedule zbv"):
        simulate(2, 2, 2, "interleaved", placement="v")


def test_compare_runs_zbv_for_a_v_placed_plan_with_two_chunks() -> None:
    assert [r.schedule for r in compare(4, 2, 8, placement="v")] == ["1f1b", "zbv"]
    assert [r.schedule for r in compare(4, 3, 8, placement="v")] == ["1f1b"]
    assert [r.schedule for r in compare(4, 3, 8)] == ["1f1b", "interleaved"]


def test_zbv_beats_zb1p_and_1f1b_on_the_same_work() -> None:
    zbv = simulate(4, 2, 8, "zbv", **unit(4, 2))
    zb1p = simulate(4, 2, 8, "zb1p", **unit(4, 2))
    one = simulate(4, 2, 8, "1f1b", **unit(4, 2))
    assert zbv.ideal == zb1p.ideal == one.ideal == 48
    assert zbv.makespan < zb1p.makespan < one.makespan


def test_a_v_placed_plan_takes_costs_in_virtual_stage_order() -> None:
    # pp 2, V: stage 0 holds virtual stages 0 and 3, stage 1 holds 1 and 2.
    result = simulate(2, 2, 2, "zbv", forward=[1, 2, 3, 4])
    durations = {(s.virtual_stage, s.kind) for s in result.steps if s.kind == "F"}
    assert {(s.stage, s.virtual_stage) for s in result.steps} == {(0, 0), (0, 3), (1, 1), (1, 2)}
    assert len(durations) == 4
    f = {s.virtual_stage: s.duration for s in result.steps if s.kind == "F"}
    assert f == {0: 1, 1: 2, 2: 3, 3: 4}
    merged = simulate(2, 2, 2, "1f1b", forward=[1, 2, 3, 4], placement="v")
    assert {s.stage: s.duration for s in merged.steps if s.kind == "F"} == {0: 5, 1: 5}


# ---------------------------------------------------------------------------
# Every schedule: each action once, dependencies respected


def assert_split_dependencies(result: SimResult) -> None:
    """F after upstream F; I/B after own F and downstream gradient; W after own I."""
    end: dict[tuple[str, int, int], Fraction] = {}
    for s in result.steps:
        end[s.kind, s.micro_batch, s.virtual_stage] = s.end
    last = result.pp * result.vpp - 1
    for s in result.steps:
        v = s.virtual_stage
        if s.kind == "F" and v > 0:
            assert s.start >= end["F", s.micro_batch, v - 1]
        if s.kind in "BI":
            assert s.start >= end["F", s.micro_batch, v]
            if v < last:
                grad = end.get(("I", s.micro_batch, v + 1), end.get(("B", s.micro_batch, v + 1)))
                assert grad is not None and s.start >= grad
        if s.kind == "W":
            assert s.start >= end["I", s.micro_batch, v]
    by_stage: dict[int, list[Fraction]] = defaultdict(list)
    for s in sorted(result.steps, key=lambda s: s.start):
        by_stage[s.stage] += [s.start, s.end]
    assert all(a <= b for times in by_stage.values() for a, b in pairwise(times))


@settings(max_examples=150, deadline=None)
@given(
    p=st.integers(1, 6),
    v=st.integers(1, 3),
    m=st.integers(1, 14),
    schedule=st.sampled_from(SCHEDULES),
    costs=st.lists(st.integers(0, 3), min_size=54, max_size=54),
)
def test_every_schedule_runs_each_action_once_in_dependency_order(
    p: int, v: int, m: int, schedule: str, costs: list[int]
) -> None:
    if schedule in V_SHAPED:
        v = 2
    n = p * v
    try:
        result = simulate(
            p,
            v,
            m,
            schedule,  # type: ignore[arg-type]
            forward=[c + 1 for c in costs[:n]],
            backward=costs[18 : 18 + n],
            weight=costs[36 : 36 + n],
        )
    except UsageError:  # a count the runtime refuses: refused, never deadlocked
        return
    v = result.vpp
    counts = Counter((s.kind, s.micro_batch, s.virtual_stage) for s in result.steps)
    assert set(counts.values()) == {1}
    for mb in range(m):  # every unit: its forward, and a whole backward or both halves
        for vs in range(p * v):
            assert ("F", mb, vs) in counts
            whole = ("B", mb, vs) in counts
            assert whole != (("I", mb, vs) in counts) == (("W", mb, vs) in counts)
    kinds = {k for k, _, _ in counts}
    assert kinds <= ({"F", "B", "I", "W"} if schedule in SPLIT else {"F", "B"})
    assert_split_dependencies(result)


def test_an_unsplit_schedule_runs_b_plus_w_as_one_backward() -> None:
    result = simulate(2, 1, 2, "1f1b", forward=[1, 1], backward=[2, 3], weight=[5, 7])
    assert {s.stage: s.duration for s in result.steps if s.kind == "B"} == {0: 7, 1: 10}


def test_a_whole_backward_without_weight_costs_is_split_evenly() -> None:
    result = simulate(2, 1, 2, "zb1p", forward=[1, 1], backward=[4, 6])
    assert {(s.stage, s.kind): s.duration for s in result.steps if s.kind != "F"} == {
        (0, "I"): 2,
        (0, "W"): 2,
        (1, "I"): 3,
        (1, "W"): 3,
    }


@pytest.mark.parametrize(
    ("text", "value"), [("1,1,1", (1, 1, 1)), ("1, 2.5, 0", (1, Fraction(5, 2), 0))]
)
def test_unit_costs_parse_f_b_w(text: str, value: tuple[int, ...]) -> None:
    assert parse_unit_costs(text) == value


@pytest.mark.parametrize("text", ["1,1", "1,1,1,1", "a,1,1", "-1,1,1", "0,0,0", "1/0,1,1"])
def test_bad_unit_costs_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError, match="--costs takes three non-negative numbers"):
        parse_unit_costs(text)


# ---------------------------------------------------------------------------
# Memory: in-flight peaks per chunk, weighted peaks


def test_peak_in_flight_per_chunk_of_interleaved_p4_v2_m8() -> None:
    result = simulate(4, 2, 8, "interleaved")
    # Stage 0 warms up with 10 forwards: 4 + 4 of chunk 0 (groups of 4) and 2 of chunk 1.
    assert result.peak_in_flight_per_chunk[0][0] >= 6
    assert all(len(chunks) == 2 for chunks in result.peak_in_flight_per_chunk)
    assert all(
        max(c) <= total for c, total in zip(result.peak_in_flight_per_chunk, result.peak_in_flight)
    )


def test_held_peak_weights_each_chunk_by_its_size() -> None:
    result = simulate(4, 2, 8, "interleaved")
    sizes = [1] * 8
    assert held_peak(result, sizes) == result.peak_in_flight
    heavy_first = [10] * 4 + [1] * 4  # chunk 0 of every stage costs 10 per micro-batch
    peaks = held_peak(result, heavy_first)
    chunk0 = [c[0] for c in result.peak_in_flight_per_chunk]
    assert all(peak >= 10 * c for peak, c in zip(peaks, chunk0))
    assert all(
        peak <= 10 * c0 + c1 for peak, (c0, c1) in zip(peaks, result.peak_in_flight_per_chunk)
    )


def test_held_peak_of_a_merged_schedule_sums_the_stage_segments() -> None:
    result = simulate(2, 2, 4, "1f1b")
    assert held_peak(result, [1, 2, 30, 40]) == (2 * 31, 1 * 42)


# ---------------------------------------------------------------------------
# torch: orders and CSV


@pytest.mark.parametrize(
    ("name", "schedule", "p", "v", "m"),
    [
        ("torch-zb1p-pp4-v1-m8.csv", "zb1p", 4, 1, 8),
        ("torch-zbv-pp4-m8.csv", "zbv", 4, 2, 8),
        ("torch-zbv-pp3-m4.csv", "zbv", 3, 2, 4),
        ("torch-interleaved1f1b-pp4-v2-m8.csv", "interleaved", 4, 2, 8),
    ],
)
def test_orders_equal_those_torch_writes(name: str, schedule: str, p: int, v: int, m: int) -> None:
    result = simulate(p, v, m, schedule)  # type: ignore[arg-type]
    rows = parse_csv((DATA / name).read_text())
    assert tuple(tuple(f"{a}{k}{b}" for a, k, b in row) for row in rows) == result.orders


def test_csv_is_one_row_per_stage_in_torch_notation() -> None:
    result = simulate(2, 1, 2, "1f1b")
    assert to_csv(result.orders) == "0F0,0F1,0B0,0B1\r\n1F0,1B0,1F1,1B1\r\n"


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_csv_round_trips_to_the_same_orders(schedule: str) -> None:
    v = 1 if schedule in MERGED else 2
    m = 4 if schedule == "zbvpp" else 8  # Paddle runs ZBVPP at m == pp only
    result = simulate(4, v, m, schedule)  # type: ignore[arg-type]
    rows = parse_csv(to_csv(result.orders))
    assert to_ops(rows, result.vpp, result.placement) == result.ops


def test_a_loaded_csv_times_like_the_schedule_it_came_from() -> None:
    result = simulate(4, 2, 8, "zbv")
    ops = to_ops(parse_csv((DATA / "torch-zbv-pp4-m8.csv").read_text()), 2, "v")
    assert simulate_orders(ops, 2, placement="v") == result.steps


def test_csv_idle_cells_are_skipped() -> None:
    assert parse_csv(",0F0,,0B0\r\n") == (((0, "F", 0), (0, "B", 0)),)


@pytest.mark.parametrize("cell", ["0SEND_F0", "F0", "0X1", "0F"])
def test_csv_with_non_compute_actions_is_refused(cell: str) -> None:
    with pytest.raises(ProgramFileError, match="not a compute action"):
        parse_csv(f"0F0,{cell}\r\n")


def test_csv_whose_virtual_stage_is_not_on_its_row_is_refused() -> None:
    rows = parse_csv("0F0,3F0\r\n1F0,2F0\r\n")
    with pytest.raises(ProgramFileError, match="loop placement puts on stage 1"):
        to_ops(rows, 2, "loop")
    assert to_ops(rows, 2, "v")[0][1].chunk == 1


def test_every_virtual_stage_in_torch_notation_is_the_plans_segment() -> None:
    for placement in ("loop", "v"):
        result = simulate(4, 2, 8, "zbv" if placement == "v" else "interleaved")
        for step in result.steps:
            assert place(step.virtual_stage, 4, result.placement) == (step.stage, step.chunk)


# ---------------------------------------------------------------------------
# Linear cost


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_the_executor_examines_each_action_at_most_twice(schedule: str) -> None:
    for p, m in [(2, 4), (4, 16), (8, 64)]:
        v = 1 if schedule in MERGED else 2
        m = p if schedule == "zbvpp" else m
        result = simulate(p, v, m, schedule)  # type: ignore[arg-type]
        assert len(result.steps) <= result.work <= 2 * len(result.steps)


def test_stage_orders_names_every_schedule() -> None:
    assert {
        len(stage_orders(s, 2, 1 if s in MERGED else 2, 2 if s == "zbvpp" else 4))
        for s in SCHEDULES
    } == {2}


# ---------------------------------------------------------------------------
# What each runtime refuses, refused as it would be (exit 2, the fix named)


@pytest.mark.parametrize(
    ("schedule", "pp", "vpp", "m", "message"),
    [
        ("vpp", 4, 2, 3, "vpp \\(Paddle's VPP\\) needs at least pp = 4 micro-batches"),
        ("zbh1", 4, 1, 3, "zbh1 \\(Paddle's ZBH1\\) needs at least pp = 4 micro-batches"),
        ("dualpipev", 4, 2, 7, "dualpipev needs at least 2\\*pp = 8 micro-batches"),
        ("zb1p", 4, 1, 9, "multiple of its rounds max\\(1, m // pp\\) = 2"),
        ("interleaved-zb", 4, 2, 9, "multiple of its rounds max\\(1, m // pp\\) = 2"),
    ],
)
def test_a_micro_batch_count_the_runtime_refuses_is_a_usage_error(
    schedule: str, pp: int, vpp: int, m: int, message: str
) -> None:
    with pytest.raises(UsageError, match=message) as caught:
        simulate(pp, vpp, m, schedule)  # type: ignore[arg-type]
    assert caught.value.exit_code == 2


def test_every_schedule_is_of_one_family() -> None:
    """Merged (one chunk per stage), loop-placed interleaving, or V-shaped: the families
    the simulator's placement checks and `plan`'s search go by."""
    assert set(SCHEDULES) == MERGED | LOOPED | V_SHAPED
    assert not MERGED & LOOPED and not MERGED & V_SHAPED and not LOOPED & V_SHAPED


@pytest.mark.parametrize(
    ("schedule", "vpp", "checker"),
    [
        ("interleaved", 2, "check_group_size"),
        ("interleaved-zb", 2, "check_zero_bubble_group"),
        ("zb1p", 1, "check_zero_bubble_group"),
    ],
)
def test_a_pipelines_group_size_is_checked_once(
    monkeypatch: pytest.MonkeyPatch, schedule: str, vpp: int, checker: str
) -> None:
    from vppctl.schedule import orders

    calls = []
    check = getattr(orders, checker)
    monkeypatch.setattr(orders, checker, lambda *a: calls.append(a) or check(*a))
    _, group = Pipeline.of(schedule, 4, vpp, 8)  # type: ignore[arg-type]
    assert group == 4 and len(calls) == 1


_ROUNDS = "not a multiple of torch's rounds max(1, m // pp)"


@pytest.mark.parametrize(
    ("schedule", "pp", "vpp", "m", "reason"),
    [
        ("vpp", 4, 2, 3, "vpp at m 3 < pp"),
        ("zbh1", 4, 1, 3, "zbh1 at m 3 < pp"),
        ("eager1f1b", 4, 1, 6, "eager1f1b at m 6 < 2pp - 1"),
        ("dualpipev", 4, 2, 7, "dualpipev at m 7 < 2pp"),
        ("zb1p", 4, 1, 9, f"zb1p at m 9: {_ROUNDS}"),
        ("interleaved-zb", 4, 2, 9, f"interleaved-zb at m 9: {_ROUNDS}"),
        ("interleaved", 4, 2, 3, "interleaved at m 3 < pp"),
        ("interleaved", 4, 2, 6, "interleaved at m 6: the default group size pp 4 is not legal"),
        ("zbvpp", 4, 2, 8, "zbvpp at m 8: Paddle runs it at m == pp only"),
        ("zbvpp", 65, 2, 65, "zbvpp at pp 65: simulated for at most 64 stages"),
        ("vpp", 4, 3, 5, "vpp at m 5: Paddle's job list deadlocks (short last group)"),
        ("1f1b", 4, 1, 40_000, OVER_MAX_UNITS),
    ],
)
def test_each_refusal_carries_the_short_reason_plan_counts_it_by(
    schedule: str, pp: int, vpp: int, m: int, reason: str
) -> None:
    # The message names the fix for a person; `plan` counts what it leaves out by the
    # reason, said where the rule is (never read back from the message).
    with pytest.raises(ScheduleRefused) as caught:
        Pipeline.of(schedule, pp, vpp, m)  # type: ignore[arg-type]
    assert caught.value.exit_code == 2 and caught.value.reason == reason


def test_interleaved_zb_takes_torchs_rounds_as_its_group_size() -> None:
    # m 12, pp 4: torch runs 3 rounds of 4; a group of 6 or 12 also divides m.
    assert simulate(4, 2, 12, "interleaved-zb").group_size == 4
    assert simulate(4, 2, 12, "interleaved-zb", group_size=6).group_size == 6
    with pytest.raises(UsageError, match="legal --group-size values: 4, 6, 12"):
        simulate(4, 2, 12, "interleaved-zb", group_size=5)
    # m 9 is refused by torch's own size, but a group of 9 runs.
    assert simulate(4, 2, 9, "interleaved-zb", group_size=9).makespan > 0


def test_dualpipev_runs_two_chunks_in_v_placement_with_whole_and_split_backwards() -> None:
    result = simulate(4, 2, 8, "dualpipev")
    assert result.placement == "v"
    for stage, order in enumerate(result.orders):
        assert {int(a[:-2]) for a in order} == {stage, 7 - stage}
    kinds = {s.kind for s in result.steps}
    assert kinds == {"F", "B", "I", "W"}
    with pytest.raises(UsageError, match="dualpipev runs exactly 2 chunks"):
        simulate(4, 3, 8, "dualpipev")


@pytest.mark.parametrize("schedule", ["vpp", "interleaved-zb"])
def test_the_loop_placed_interleavings_refuse_a_v_plan(schedule: str) -> None:
    with pytest.raises(UsageError, match=f"{schedule} is a loop-placed schedule"):
        simulate(2, 2, 4, schedule, placement="v")  # type: ignore[arg-type]


def test_a_split_backward_is_in_flight_until_its_w_and_a_whole_one_until_its_b() -> None:
    # Paddle's ZB-H1 on the last stage: I0..I2 are whole B's except the held ones.
    result = simulate(4, 1, 8, "zbh1")
    assert result.peak_in_flight == (4, 4, 4, 4)
    assert simulate(4, 1, 8, "1f1b").peak_in_flight == (4, 3, 2, 1)


def test_paddles_vpp_order_with_a_short_last_group_can_deadlock_and_is_refused() -> None:
    # pp 4, vpp 3, m 5: stage 0 runs 8F4 before 8B0, but 8F4 needs 7F4, which stage 3
    # runs after 7B0, which needs 8B0: Paddle's job list hangs; vppctl says so.
    with pytest.raises(
        UsageError, match="Paddle's VPP job list deadlocks at pp 4, vpp 3, m 5"
    ) as e:
        simulate(4, 3, 5, "vpp")
    assert "pass --micro-batches a multiple of pp 4" in str(e.value)
    assert simulate(4, 2, 6, "vpp").micro_batches == 6  # a short last group that runs


def test_zbvpp_runs_one_micro_batch_per_stage_in_v_placement_only() -> None:
    result = simulate(4, 2, 4, "zbvpp")
    assert result.placement == "v" and {s.kind for s in result.steps} == {"F", "I", "W"}
    with pytest.raises(UsageError, match="zbvpp \\(Paddle's ZBVPP\\) runs exactly pp = 4"):
        simulate(4, 2, 8, "zbvpp")
    with pytest.raises(UsageError, match="at most 64 stages"):
        simulate(65, 2, 65, "zbvpp")
