"""Measured costs fitted to a plan (vppctl/planner/measured.py): per stage exactly pp*vpp of
them, per layer summed per segment with pre and post, what is not measured refused or
filled from the program's estimate scaled to what is."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vppctl.errors import UsageError
from vppctl.planner.measured import (
    CostsSource,
    Estimate,
    MeasuredCosts,
    Timing,
    relative_error,
    segment_times,
)

F = Fraction
SOURCE = CostsSource("costs.csv", "csv", "s")


def stages(*rows: Timing) -> MeasuredCosts:
    return MeasuredCosts(SOURCE, "stage", dict(enumerate(rows)), len(rows))


def layers(timings: dict[int | str, Timing]) -> MeasuredCosts:
    return MeasuredCosts(SOURCE, "layer", timings)


def t(f: str, b: str, w: str | None = None, stash: int | None = None) -> Timing:
    return Timing(F(f), F(b), None if w is None else F(w), stash)


def test_per_stage_costs_are_the_virtual_stages_as_given() -> None:
    costs = stages(t("0.01", "0", "0.02", 10), t("0.02", "0.01", "0.01", 20))
    times = segment_times(costs, None, 2, 1, None, fill=False)
    assert times.forward == (F("0.01"), F("0.02"))
    assert times.input_grad == (0, F("0.01")) and times.weight_grad == (F("0.02"), F("0.01"))
    assert times.activation_bytes == (10, 20) and times.weight_measured
    assert times.ticks == ([10_000_000, 20_000_000], [0, 10_000_000], [20_000_000, 10_000_000])


def test_a_whole_backward_is_split_evenly_for_the_schedules_that_split_it() -> None:
    times = segment_times(stages(t("1", "3"), t("1", "2")), None, 2, 1, None, fill=False)
    assert times.input_grad == (F(3, 2), 1) and times.weight_grad == (F(3, 2), 1)
    assert not times.weight_measured and times.activation_bytes is None


@pytest.mark.parametrize(("pp", "vpp"), [(2, 1), (4, 2), (3, 1), (1, 3)])
def test_a_stage_count_that_does_not_fit_the_plan_names_both(pp: int, vpp: int) -> None:
    costs = stages(*(t("1", "1") for _ in range(4)))
    with pytest.raises(UsageError) as caught:
        segment_times(costs, None, pp, vpp, None, fill=False)
    assert caught.value.exit_code == 2
    assert "measures 4 virtual stages" in str(caught.value)
    assert f"pp {pp} x vpp {vpp} = {pp * vpp}" in str(caught.value)


ESTIMATE = Estimate(layers=(10, 20, 30, 40), pre=5, post=None, measure="flops")


def test_per_layer_costs_are_summed_per_segment_pre_on_the_first() -> None:
    costs = layers({"pre": t("1", "2"), 0: t("1", "2"), 1: t("2", "4"), 2: t("3", "6"),
                    3: t("4", "8")})  # fmt: skip
    times = segment_times(costs, (1, 3), 2, 1, ESTIMATE, fill=False)
    assert times.forward == (2, 9)
    assert times.input_grad == (2, 9) and times.weight_grad == (2, 9)  # whole 4 and 18, halved
    assert times.filled == ()


def test_a_layer_not_measured_is_refused_with_the_way_out() -> None:
    costs = layers({"pre": t("1", "1"), 0: t("1", "1"), 1: t("1", "1")})
    with pytest.raises(UsageError) as caught:
        segment_times(costs, (2, 2), 2, 1, ESTIMATE, fill=False)
    assert "does not measure layers 2, 3" in str(caught.value)
    assert "--fill estimate" in str(caught.value)


def test_filling_scales_the_estimate_to_the_measured_ones_kind_by_kind() -> None:
    # measured: layers 0 and 1 (estimate 10 + 20 = 30): forward 3 s, input 6 s, weight 1.5 s
    costs = layers({0: t("1", "2", "0.5"), 1: t("2", "4", "1"), "pre": t("0.5", "1", "0.25")})
    times = segment_times(costs, (2, 2), 2, 1, ESTIMATE, fill=True)
    # pre (estimate 5) is measured too: 3.5 s forward over an estimate of 35
    assert times.filled == ("layer 2", "layer 3")
    assert times.forward == (F("3.5"), F("7"))  # 30 * 0.1 + 40 * 0.1
    assert times.input_grad == (F(7), F(14))
    assert times.weight_grad == (F("1.75"), F("3.5"))


def test_filling_needs_an_estimate_that_is_not_zero_and_a_program() -> None:
    zero = Estimate(layers=(0, 0, 7), pre=None, post=None, measure="flops")
    with pytest.raises(UsageError, match="estimate of the measured ones is 0"):
        segment_times(layers({0: t("1", "1"), 1: t("1", "1")}), (1, 2), 2, 1, zero, fill=True)
    costs = MeasuredCosts(SOURCE, "stage", {0: t("1", "1")}, 2)  # stage 1 not measured
    with pytest.raises(UsageError, match="without the program there is no estimate"):
        segment_times(costs, None, 2, 1, None, fill=True)
    with pytest.raises(UsageError, match="pass the program"):
        segment_times(layers({0: t("1", "1")}), None, 2, 1, None, fill=False)


def test_a_layer_beyond_the_programs_names_both_counts() -> None:
    costs = layers({k: t("1", "1") for k in range(6)})
    with pytest.raises(UsageError, match=r"measures layer 5, but the program has 4 layers"):
        segment_times(costs, (2, 2), 2, 1, ESTIMATE, fill=True)


def test_activation_bytes_are_used_only_where_every_part_has_them() -> None:
    full = layers({"pre": t("1", "1", stash=1), **{k: t("1", "1", stash=10) for k in range(4)}})
    assert segment_times(full, (1, 3), 2, 1, ESTIMATE, False).activation_bytes == (11, 30)
    part = layers({"pre": t("1", "1"), **{k: t("1", "1", stash=10) for k in range(4)}})
    times = segment_times(part, (1, 3), 2, 1, ESTIMATE, False)
    assert times.activation_bytes is None
    assert any("activation_bytes is not given for every part" in n for n in times.notes)


def test_the_error_is_signed_low_predictions_negative() -> None:
    assert relative_error(F(9), F(10)) == F(-1, 10)
    assert relative_error(F(11), F(10)) == F(1, 10)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 10**6), min_size=2, max_size=12),
    st.booleans(),
    st.data(),
)
def test_summing_layers_into_segments_loses_and_adds_nothing(
    micros: list[int], split: bool, data: st.DataObject
) -> None:
    """Whatever the split into segments, the segments' forwards, input and weight
    gradients add up to the layers' (the class of every per-layer costs file)."""
    n = len(micros)
    cuts = sorted(data.draw(st.sets(st.integers(1, n - 1), max_size=n - 1)))
    sizes = [b - a for a, b in zip([0, *cuts], [*cuts, n])]
    timings: dict[int | str, Timing] = {
        i: Timing(F(us, 10**6), F(2 * us, 10**6), F(us, 10**6) if split else None)
        for i, us in enumerate(micros)
    }
    estimate = Estimate(layers=tuple([1] * n), pre=None, post=None, measure="ops")
    times = segment_times(layers(timings), sizes, len(sizes), 1, estimate, fill=False)
    assert sum(times.forward) == sum(t.forward for t in timings.values())
    whole = sum(t.whole for t in timings.values())
    assert sum(times.input_grad) + sum(times.weight_grad) == whole
    assert times.weight_measured == split
