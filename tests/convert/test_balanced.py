"""`--split balanced` balances stages: the busiest stage's load, ties by the costliest segment.

A stage runs all of its chunks, so its load is the sum of its segments (loop or V
placement). The split must never do worse than the uniform split where that is
legal, must equal the exhaustive optimum on small inputs, and must bring the
126-layer sample (pp 8, vpp 2, flops) within 1.06x of the mean stage load.
"""

from __future__ import annotations

import itertools
import json

import paths
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vppctl.errors import ConversionError
from vppctl.plan import (
    Placement,
    balanced_sizes,
    segment_costs,
    stage_balanced_sizes,
    stage_balanced_split,
    stage_imbalance,
    stage_loads,
)

S126 = json.loads((paths.DATA / "s126-flops-costs.json").read_text())


def objective(
    sizes: list[int] | tuple[int, ...],
    costs: list[int],
    pp: int,
    placement: Placement,
    pre: int,
    post: int,
) -> tuple[int, int]:
    """(busiest stage's load, costliest segment) of a split."""
    seg = segment_costs(sizes, costs, pre, post)
    return max(stage_loads(seg, pp, placement)), max(seg)


def brute_force(
    costs: list[int], pp: int, vpp: int, placement: Placement, pre: int, post: int
) -> tuple[int, int]:
    n, parts = len(costs), pp * vpp
    return min(
        objective([b - a for a, b in zip((0, *cuts), (*cuts, n))], costs, pp, placement, pre, post)
        for cuts in itertools.combinations(range(1, n), parts - 1)
    )


def test_stage_loads_sum_each_stages_segments_for_loop_and_v() -> None:
    seg = [1, 2, 3, 4, 5, 6]  # pp 3, vpp 2
    assert stage_loads(seg, 3, "loop") == [1 + 4, 2 + 5, 3 + 6]
    assert stage_loads(seg, 3, "v") == [1 + 6, 2 + 5, 3 + 4]


def test_stage_imbalance_is_busiest_over_mean() -> None:
    assert stage_imbalance([1, 2, 3, 4, 5, 6], 3, "loop") == 9 / 7
    assert stage_imbalance([1, 2, 3, 4, 5, 6], 3, "v") == 1.0
    assert stage_imbalance([0, 0], 2, "loop") == 1.0


@pytest.mark.parametrize("placement", ["loop", "v"])
def test_126_layer_sample_busiest_stage_within_1_06_of_the_mean(placement: Placement) -> None:
    costs, pre, post = S126["layers"], S126["pre"], S126["post"]
    split = stage_balanced_split(costs, 8, 2, placement, pre, post)
    assert len(split.sizes) == 16 and sum(split.sizes) == 126 and min(split.sizes) >= 1
    assert stage_imbalance(split.segment_costs, 8, placement) <= 1.06
    assert list(split.segment_costs) == segment_costs(split.sizes, costs, pre, post)
    assert list(split.stage_loads) == stage_loads(split.segment_costs, 8, placement)


def test_126_layer_sample_min_max_segment_split_leaves_the_stages_uneven() -> None:
    # The figure: the costliest-segment optimum carries 1.11x the mean stage load.
    costs, pre, post = S126["layers"], S126["pre"], S126["post"]
    old = balanced_sizes(costs, 16, pre, post)
    assert stage_imbalance(segment_costs(old, costs, pre, post), 8, "loop") > 1.11


def test_126_layer_sample_reaches_the_integer_optimum_of_17_layers() -> None:
    # 126 equal layers and a head of 3.5 layers over 8 stages: some stage carries 17
    # layers (or 13 plus the head), so 17 layer costs is the best possible.
    costs, pre, post = S126["layers"], S126["pre"], S126["post"]
    split = stage_balanced_split(costs, 8, 2, "loop", pre, post)
    assert max(split.stage_loads) == 17 * costs[0]


def test_a_heavy_head_takes_layers_off_the_last_segment() -> None:
    sizes = stage_balanced_sizes([10] * 16, 4, 1, "loop", pre=0, post=20)
    assert sizes[-1] < sizes[0]
    assert max(stage_loads(segment_costs(sizes, [10] * 16, 0, 20), 4, "loop")) == 50


def test_too_few_layers_for_the_segments_is_refused() -> None:
    with pytest.raises(ConversionError, match="3 layers cannot fill pp\\*vpp = 4 segments"):
        stage_balanced_sizes([1, 1, 1], 2, 2, "loop")


def test_the_split_is_deterministic() -> None:
    costs = [(i * 7919) % 13 + 1 for i in range(200)]
    first = stage_balanced_split(costs, 4, 3, "v", 5, 9)
    assert stage_balanced_split(costs, 4, 3, "v", 5, 9) == first


@settings(max_examples=150, deadline=None)
@given(
    costs=st.lists(st.integers(0, 40), min_size=1, max_size=10),
    pp=st.integers(1, 3),
    vpp=st.integers(1, 3),
    placement=st.sampled_from(["loop", "v"]),
    pre=st.integers(0, 50),
    post=st.integers(0, 50),
)
def test_small_splits_equal_the_exhaustive_optimum(
    costs: list[int], pp: int, vpp: int, placement: Placement, pre: int, post: int
) -> None:
    if len(costs) < pp * vpp:
        return
    split = stage_balanced_split(costs, pp, vpp, placement, pre, post)
    assert split.proven
    assert objective(split.sizes, costs, pp, placement, pre, post) == brute_force(
        costs, pp, vpp, placement, pre, post
    )


@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    pp=st.integers(1, 8),
    vpp=st.integers(1, 4),
    per_segment=st.integers(1, 6),
    placement=st.sampled_from(["loop", "v"]),
    pre=st.integers(0, 300),
    post=st.integers(0, 300),
)
def test_never_worse_than_the_uniform_split_where_it_is_legal(
    data: st.DataObject,
    pp: int,
    vpp: int,
    per_segment: int,
    placement: Placement,
    pre: int,
    post: int,
) -> None:
    n = pp * vpp * per_segment
    costs = data.draw(st.lists(st.integers(0, 100), min_size=n, max_size=n))
    sizes = stage_balanced_sizes(costs, pp, vpp, placement, pre, post)
    assert len(sizes) == pp * vpp and min(sizes) >= 1 and sum(sizes) == n
    uniform = [per_segment] * (pp * vpp)
    assert objective(sizes, costs, pp, placement, pre, post) <= objective(
        uniform, costs, pp, placement, pre, post
    )


@settings(max_examples=60, deadline=None)
@given(
    costs=st.lists(st.integers(0, 100), min_size=4, max_size=60),
    pp=st.integers(1, 4),
    vpp=st.integers(1, 3),
    placement=st.sampled_from(["loop", "v"]),
)
def test_never_worse_than_the_min_max_segment_split(
    costs: list[int], pp: int, vpp: int, placement: Placement
) -> None:
    if len(costs) < pp * vpp:
        return
    sizes = stage_balanced_sizes(costs, pp, vpp, placement, 7, 11)
    old = balanced_sizes(costs, pp * vpp, 7, 11)
    assert objective(sizes, costs, pp, placement, 7, 11) <= objective(
        old, costs, pp, placement, 7, 11
    )
