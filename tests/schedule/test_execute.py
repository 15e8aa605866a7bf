"""The planner's timing pass (`Pipeline.makespan`, no steps recorded) agrees with the
full simulation for every schedule, cost and hop; and the stage-balanced split stays
bounded for any number of segments."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from vppctl.errors import UsageError
from vppctl.plan import stage_balanced_split, stage_loads
from vppctl.schedule.execute import Pipeline
from vppctl.schedule.orders import SCHEDULES, legal_group_sizes
from vppctl.schedule.simulation import DeadlockError, Op, held_peak, simulate


@settings(max_examples=150, deadline=None)
@given(
    schedule=st.sampled_from(SCHEDULES),
    pp=st.integers(1, 5),
    vpp=st.integers(1, 3),
    m=st.integers(1, 12),
    costs=st.lists(st.integers(0, 5), min_size=45, max_size=45),
    hop=st.integers(0, 2),
)
def test_the_timing_pass_equals_the_simulation(
    schedule: str, pp: int, vpp: int, m: int, costs: list[int], hop: int
) -> None:
    if schedule == "zbv":
        vpp = 2
    if schedule == "interleaved" and vpp > 1:
        assume(pp in legal_group_sizes(pp, m))
    if schedule == "eager1f1b":
        assume(m >= 2 * pp - 1)
    n = pp * vpp
    forward = [c + 1 for c in costs[:n]]
    input_grad, weight_grad = costs[15 : 15 + n], costs[30 : 30 + n]
    placement = "v" if schedule == "zbv" else "loop"
    try:
        result = simulate(
            pp, vpp, m, schedule, forward, input_grad, hop,  # type: ignore[arg-type]
            weight=weight_grad, placement=placement,  # type: ignore[arg-type]
        )  # fmt: skip
    except UsageError:
        return
    pipe, _ = Pipeline.of(schedule, pp, vpp, m, placement=placement)  # type: ignore[arg-type]
    makespan, busy = pipe.makespan(forward, input_grad, weight_grad, hop)
    assert Fraction(makespan) == result.makespan
    assert max(busy) == result.ideal
    assert pipe.messages == result.p2p_messages
    assert pipe.peaks_per_chunk == result.peak_in_flight_per_chunk
    sizes = [3 * k + 1 for k in range(n)]
    assert pipe.held_peak(sizes) == held_peak(result, sizes)


def test_the_timing_pass_reports_a_deadlock() -> None:
    stage0 = [Op("F", 0, 0), Op("B", 0, 0), Op("F", 1, 0), Op("B", 1, 0)]
    stage1 = [Op("F", 0, 0), Op("F", 1, 0), Op("B", 0, 0), Op("B", 1, 0)]
    with pytest.raises(DeadlockError, match="stage 0 cannot run B0.c0"):
        Pipeline([stage0, stage1], 1, "loop").makespan([1, 1], [1, 1], [1, 1])


@pytest.mark.parametrize(("layers", "pp", "vpp"), [(600, 32, 8), (3000, 64, 32), (5000, 4096, 1)])
def test_the_stage_balanced_split_is_bounded_for_many_segments(
    layers: int, pp: int, vpp: int
) -> None:
    # The exact search is iterative (no recursion limit) and the local improvement has a
    # budget: thousands of segments finish (each of these in well under a second).
    split = stage_balanced_split([1] * layers, pp, vpp, "loop")
    assert len(split.sizes) == pp * vpp and sum(split.sizes) == layers
    assert min(split.sizes) >= 1
    assert max(stage_loads(split.segment_costs, pp, "loop")) <= -(-layers // pp) + vpp
