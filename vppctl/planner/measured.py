"""Measured costs: what each layer or virtual stage of a real run took, in seconds.

This module's one job is what measured costs are and how they fit a plan; reading them
from a file is `vppctl.planner.importers`'. They are given per virtual stage (0..pp*vpp-1,
the plan's segment order) or per layer (the program's layer numbers, as `vppctl inspect`
prints them, with `pre` and `post` for the ops before the first layer and after the
last): the forward and backward seconds of one micro-batch and, where known, the weight
gradient and the activation bytes one micro-batch leaves stashed. With a weight
gradient, the backward is the input gradient, and schedules that run the backward whole
run both; without one the backward is whole, split evenly where a schedule splits it (as
`--costs F,B,W` does). A backward of 0 is legal (torch computes no input gradient on the
first stage). Seconds are kept exactly, to the nanosecond.

Fitting costs to a plan (`segment_times`): per-stage costs must have exactly pp*vpp
stages (else a UsageError naming both counts); per-layer costs are summed per segment
(`pre` onto the first, `post` onto the last). A layer or stage the file does not measure
is refused, or with `fill` taken from the program's estimate (its FLOPs, or op counts)
scaled to the measured ones, each kind by its own ratio; the result names what was filled.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Literal

from vppctl.errors import UsageError

CostsFormat = Literal["csv", "json", "torch-trace", "paddle-trace"]
Per = Literal["stage", "layer"]
Unit = Literal["s", "ms", "us"]
UNITS: dict[str, int] = {"s": 1, "ms": 1_000, "us": 1_000_000}  # per second
PRE, POST = "pre", "post"

NS = 10**9  # seconds are kept to the nanosecond
MAX_SECONDS = 10**6  # per action: a larger time is a unit mistake (about 11 days)


@dataclass(frozen=True)
class CostsSource:
    """Where measured costs came from: the path as given, the format read, the file's
    time unit."""

    path: str
    format: CostsFormat
    unit: Unit

    @property
    def text(self) -> str:
        """`costs.csv (csv, seconds)`: the source as the headers name it."""
        units = {"s": "seconds", "ms": "milliseconds", "us": "microseconds"}
        return f"{self.path} ({self.format}, {units[self.unit]})"


@dataclass(frozen=True)
class Timing:
    """One stage's or layer's measured costs for one micro-batch, in seconds: the forward,
    the backward (the input gradient when `weight` is known, else the whole backward),
    the weight gradient, and the activation bytes stashed."""

    forward: Fraction
    backward: Fraction
    weight: Fraction | None = None
    activation_bytes: int | None = None

    @property
    def whole(self) -> Fraction:
        """The whole backward: input and weight gradient."""
        return self.backward + (self.weight or 0)


Key = int | str  # a stage or layer index, or PRE / POST


@dataclass(frozen=True)
class MeasuredCosts:
    """A costs file read: per stage or per layer, what was measured."""

    source: CostsSource
    per: Per
    timings: Mapping[Key, Timing]
    # Per stage: 1 + the largest stage measured (the stages the file describes).
    stage_count: int = 0
    step: Fraction | None = None  # a whole step measured in the trace (its profiler steps)
    notes: tuple[str, ...] = ()  # what the importer read, and what it left out

    @property
    def has_weight(self) -> bool:
        return all(t.weight is not None for t in self.timings.values())


def key_text(per: Per, key: Key) -> str:
    """`stage 3`, `layer 5`, `post`."""
    return key if isinstance(key, str) else f"{per} {key}"


def keys_text(per: Per, keys: Sequence[Key]) -> str:
    """`layers 3, 4, post` / `stage 5`, at most eight named."""
    numbers = [str(k) for k in keys if isinstance(k, int)]
    words = [k for k in keys if isinstance(k, str)]
    shown = numbers[:8] + (["..."] if len(numbers) > 8 else [])
    parts = []
    if shown:
        parts.append(f"{per}{'s' if len(numbers) > 1 else ''} {', '.join(shown)}")
    return ", ".join(parts + words)


# -- seconds -------------------------------------------------------------------------------


def seconds(value: Fraction, unit: Unit = "s") -> Fraction:
    """`value` in `unit` as seconds, rounded to the nanosecond."""
    return Fraction(round(value * NS / UNITS[unit]), NS)


def median_seconds(values: Iterable[float], unit: Unit) -> Fraction:
    """The median of durations in `unit`, as seconds to the nanosecond."""
    return seconds(Fraction(repr(statistics.median(values))), unit)


# -- fitting the costs to a plan -----------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    """The program's own estimate of each layer's forward (FLOPs, or op counts), to fill
    what was not measured; `pre` and `post` are None where the program has no ops."""

    layers: tuple[int, ...]
    pre: int | None
    post: int | None
    measure: str  # "flops" or "ops"


@dataclass(frozen=True)
class SegmentTimes:
    """Measured costs fitted to one plan: per virtual stage, seconds of one micro-batch's
    forward, input gradient and weight gradient (a whole backward split evenly where the
    file gives none), and the activation bytes where every part was measured."""

    source: CostsSource
    forward: tuple[Fraction, ...]
    input_grad: tuple[Fraction, ...]
    weight_grad: tuple[Fraction, ...]
    activation_bytes: tuple[int, ...] | None
    weight_measured: bool  # the file gave the weight gradient apart
    filled: tuple[str, ...] = ()  # what was filled from the estimate (`layer 3`, `post`)
    notes: tuple[str, ...] = field(default=())

    @property
    def ticks(self) -> tuple[list[int], list[int], list[int]]:
        """Forward, input-gradient and weight-gradient nanoseconds per virtual stage."""
        return tuple(  # type: ignore[return-value]
            [int(t * NS) for t in kind]
            for kind in (self.forward, self.input_grad, self.weight_grad)
        )


def segment_times(
    costs: MeasuredCosts,
    sizes: Sequence[int] | None,
    pp: int,
    vpp: int,
    estimate: Estimate | None,
    fill: bool,
) -> SegmentTimes:
    """`costs` as the plan's virtual stages: `sizes` are its segments' layer counts (None
    without a program), `estimate` the program's per-layer estimate (None without one)."""
    if costs.per == "stage":
        timings = _stages(costs, pp, vpp, sizes, estimate, fill)
        keys: list[list[Key]] = [[k] for k in range(pp * vpp)]
    else:
        if sizes is None or estimate is None:
            raise UsageError(
                f"{costs.source.path} measures layers: pass the program, whose layers they "
                "are, or give costs per stage (stage,forward_s,...)"
            )
        timings, keys = _layers(costs, sizes, estimate, fill)
    filled = tuple(k for k in timings if k not in costs.timings)
    return _summed(costs, timings, keys, filled)


def _stages(
    costs: MeasuredCosts,
    pp: int,
    vpp: int,
    sizes: Sequence[int] | None,
    estimate: Estimate | None,
    fill: bool,
) -> dict[Key, Timing]:
    n = pp * vpp
    if costs.stage_count != n:
        raise UsageError(
            f"{costs.source.path} measures {costs.stage_count} virtual stages "
            f"(0..{costs.stage_count - 1}), but the plan has pp {pp} x vpp {vpp} = {n}: give "
            f"one per virtual stage of the plan, or simulate a plan of {costs.stage_count}"
        )
    missing: list[Key] = [k for k in range(n) if k not in costs.timings]
    if not missing:
        return dict(costs.timings)
    per_stage = None
    if estimate is not None and sizes is not None:
        per_stage = _segment_estimate(sizes, estimate)
    return _filled(costs, missing, per_stage, fill)


def _segment_estimate(sizes: Sequence[int], estimate: Estimate) -> dict[Key, int]:
    out: dict[Key, int] = {}
    i = 0
    for k, n in enumerate(sizes):
        out[k] = sum(estimate.layers[i : i + n])
        i += n
    if out:
        out[0] += estimate.pre or 0
        out[len(sizes) - 1] += estimate.post or 0
    return out


def _layers(
    costs: MeasuredCosts, sizes: Sequence[int], estimate: Estimate, fill: bool
) -> tuple[dict[Key, Timing], list[list[Key]]]:
    n = len(estimate.layers)
    numbers = [k for k in costs.timings if isinstance(k, int)]
    if numbers and max(numbers) >= n:
        raise UsageError(
            f"{costs.source.path} measures layer {max(numbers)}, but the program has {n} "
            f"layers (0..{n - 1}): give its layers, as vppctl inspect numbers them"
        )
    wanted: list[Key] = [
        *([PRE] if estimate.pre is not None or PRE in costs.timings else []),
        *range(n),
        *([POST] if estimate.post is not None or POST in costs.timings else []),
    ]
    missing = [k for k in wanted if k not in costs.timings]
    timings = dict(costs.timings)
    if missing:
        est: dict[Key, int] = {k: v for k, v in enumerate(estimate.layers)}
        est[PRE], est[POST] = estimate.pre or 0, estimate.post or 0
        timings = _filled(costs, missing, est, fill)
    keys: list[list[Key]] = []
    i = 0
    for n_layers in sizes:
        keys.append(list(range(i, i + n_layers)))
        i += n_layers
    if PRE in timings:
        keys[0].insert(0, PRE)
    if POST in timings:
        keys[-1].append(POST)
    return timings, keys


def _filled(
    costs: MeasuredCosts, missing: Sequence[Key], estimate: Mapping[Key, int] | None, fill: bool
) -> dict[Key, Timing]:
    """The measured timings, with `missing` taken from the estimate scaled to the measured
    ones (each kind by its own ratio), or refused."""
    named = keys_text(costs.per, missing)
    if not fill:
        raise UsageError(
            f"{costs.source.path} does not measure {named}: measure them, or pass --fill "
            "estimate to take them from the program's estimate scaled to the measured ones"
        )
    if estimate is None:
        raise UsageError(
            f"{costs.source.path} does not measure {named}, and without the program there is "
            "no estimate to fill them from: pass the program, or measure them"
        )
    have = [k for k in costs.timings if k in estimate]
    base = sum(estimate[k] for k in have)
    if not base:
        raise UsageError(
            f"{costs.source.path} does not measure {named}, and the program's estimate of the "
            "measured ones is 0, so it cannot be scaled to them: measure every one"
        )

    def per_unit(values: Iterable[Fraction]) -> Fraction:
        return sum(values, Fraction(0)) / base

    got = [costs.timings[k] for k in have]
    f = per_unit(t.forward for t in got)
    if costs.has_weight:
        b, w = per_unit(t.backward for t in got), per_unit(t.weight or Fraction(0) for t in got)
    else:
        b, w = per_unit(t.whole for t in got), None
    out = dict(costs.timings)
    for k in missing:
        e = estimate.get(k, 0)
        out[k] = Timing(seconds(e * f), seconds(e * b), None if w is None else seconds(e * w))
    return out


def _summed(
    costs: MeasuredCosts,
    timings: Mapping[Key, Timing],
    keys: Sequence[Sequence[Key]],
    filled: Sequence[Key],
) -> SegmentTimes:
    split = all(timings[k].weight is not None for group in keys for k in group)
    forward, input_grad, weight_grad, stash = [], [], [], []
    for group in keys:
        parts = [timings[k] for k in group]
        forward.append(sum((t.forward for t in parts), Fraction(0)))
        if split:
            input_grad.append(sum((t.backward for t in parts), Fraction(0)))
            weight_grad.append(sum((t.weight or Fraction(0) for t in parts), Fraction(0)))
        else:  # a whole backward, split evenly where a schedule splits it
            whole = sum((t.whole for t in parts), Fraction(0))
            input_grad.append(whole / 2)
            weight_grad.append(whole / 2)
        sizes = [t.activation_bytes for t in parts]
        stash.append(None if None in sizes else sum(s or 0 for s in sizes))
    activations = None if None in stash else tuple(s or 0 for s in stash)
    notes = list(costs.notes)
    if activations is None and any(t.activation_bytes is not None for t in timings.values()):
        notes.append(
            "activation_bytes is not given for every part: memory uses the program's estimate"
        )
    return SegmentTimes(
        costs.source,
        tuple(forward),
        tuple(input_grad),
        tuple(weight_grad),
        activations,
        split,
        tuple(key_text(costs.per, k) for k in filled),
        tuple(notes),
    )


def relative_error(predicted: Fraction, measured: Fraction) -> Fraction:
    """(predicted - measured) / measured: negative when the prediction is low."""
    return (predicted - measured) / measured
