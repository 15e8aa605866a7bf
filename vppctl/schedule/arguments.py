"""Arguments: what a simulation is asked, checked before any work.

Counts, the placement a schedule needs, exact costs per virtual stage (floats go
through their shortest decimal form), the micro-batch warnings, and the size bound
that keeps a hostile option set from running for minutes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from vppctl.errors import UsageError
from vppctl.plan import Placement
from vppctl.schedule.orders import (
    LOOPED,
    SCHEDULES,
    V_SHAPED,
    Schedule,
    natural_placement,
)
from vppctl.schedule.refusal import ScheduleRefused
from vppctl.schedule.results import SimulationError

# A whole backward costs about twice the forward: one matmul for the input gradient
# (B) and one for the weight gradient (W) per forward matmul.
DEFAULT_BACKWARD_RATIO = 2

# ---------------------------------------------------------------------------
# Argument checking


def fail(message: str) -> SimulationError:
    return SimulationError(message)


def check_counts(pp: int, vpp: int, micro_batches: int, schedule: str) -> None:
    for name, value, flag in (
        ("pp", pp, "--pp"),
        ("vpp", vpp, "--vpp"),
        ("micro-batches", micro_batches, "--micro-batches"),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise fail(f"{name} must be a positive integer (got {value!r}): pass {flag} >= 1")
    if schedule not in SCHEDULES:
        choices = ", ".join(SCHEDULES)
        raise fail(f"unknown schedule {schedule!r}: choose one of {choices}")


def check_placement(schedule: Schedule, vpp: int, placement: Placement | None) -> Placement:
    """The placement to simulate; the V-shaped schedules run only two chunks in V
    placement, the interleaving ones only loop-placed chunks."""
    if placement not in (None, "loop", "v"):
        raise UsageError(f"unknown placement {placement!r}: choose loop or v")
    chosen = natural_placement(schedule) if placement is None else placement
    if schedule in V_SHAPED:
        if vpp != 2:
            raise UsageError(
                f"{schedule} runs exactly 2 chunks per stage (V placement), got vpp {vpp}: "
                "pass --vpp 2 or choose another --schedule"
            )
        if chosen != "v":
            raise UsageError(
                f"{schedule} runs the V placement (stage s holds virtual stages s and "
                "2pp-1-s), but the plan is loop-placed: convert with --placement v or choose "
                "another --schedule"
            )
    if schedule in LOOPED and chosen == "v" and vpp > 1:
        raise UsageError(
            f"{schedule} is a loop-placed schedule; a V-placed plan runs --schedule zbv or "
            "dualpipev (vpp 2), or a merged one (1f1b, zbh1, zb1p, fthenb)"
        )
    return chosen


def exact(value: float | Fraction, what: str) -> Fraction:
    """Turn a cost into an exact fraction; floats go through their shortest decimal form
    so that 0.1 means one tenth rather than the nearest binary double."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction)):
        raise fail(f"{what} must be a number (got {value!r}): pass numeric costs")
    if isinstance(value, float) and not math.isfinite(value):
        raise fail(f"{what} must be finite (got {value!r}): pass finite costs")
    exact = Fraction(repr(value)) if isinstance(value, float) else Fraction(value)
    if exact < 0:
        raise fail(f"{what} must not be negative (got {value!r}): pass costs >= 0")
    return exact


def _costs(
    values: Sequence[float | Fraction] | None, expected: int, what: str
) -> tuple[Fraction, ...] | None:
    if values is None:
        return None
    if len(values) != expected:
        raise fail(
            f"{what} costs list has {len(values)} entries but pp * vpp = {expected}: "
            f"give one {what} cost per virtual stage"
        )
    return tuple(exact(v, f"{what} cost of virtual stage {i}") for i, v in enumerate(values))


@dataclass(frozen=True)
class Costs:
    """Per virtual stage: forward, input-gradient and weight-gradient costs."""

    forward: tuple[Fraction, ...]
    input_grad: tuple[Fraction, ...]
    weight_grad: tuple[Fraction, ...]


def resolve_costs(
    count: int,
    forward: Sequence[float | Fraction] | None,
    backward: Sequence[float | Fraction] | None,
    weight: Sequence[float | Fraction] | None,
) -> Costs:
    """Unit forwards by default; without ``weight`` the backward is whole and split
    evenly into B and W; with ``weight`` the backward is the input gradient only."""
    fwd = _costs(forward, count, "forward") or tuple(Fraction(1) for _ in range(count))
    bwd = _costs(backward, count, "backward")
    wgt = _costs(weight, count, "weight")
    if wgt is None:
        whole = bwd or tuple(DEFAULT_BACKWARD_RATIO * f for f in fwd)
        bwd, wgt = tuple(c / 2 for c in whole), tuple(c / 2 for c in whole)
    elif bwd is None:
        bwd = fwd
    if not any(fwd) and not any(bwd) and not any(wgt):
        raise fail("all costs are zero: give at least one virtual stage a positive cost")
    return Costs(fwd, bwd, wgt)


def parse_unit_costs(text: str) -> tuple[Fraction, Fraction, Fraction]:
    """``--costs F,B,W``: forward, input-gradient and weight-gradient cost of a chunk."""
    parts = text.split(",")
    try:  # through a float, as --p2p-cost: `1e-999999999` is no 10^999999999 to build
        floats = [float(p.strip()) for p in parts]
        values = tuple(Fraction(repr(f)) for f in floats if math.isfinite(f))
        if len(values) != len(floats):
            values = ()
    except (ValueError, ZeroDivisionError):
        values = ()
    if len(values) != 3 or any(v < 0 for v in values) or not any(values):
        raise UsageError(
            f"--costs takes three non-negative numbers F,B,W (forward, input gradient, "
            f"weight gradient), not all zero, e.g. 1,1,1; got {text!r}"
        )
    return values[0], values[1], values[2]


# ---------------------------------------------------------------------------
# Warnings about the micro-batch count


def micro_batch_warnings(pp: int, vpp: int, micro_batches: int, schedule: Schedule) -> list[str]:
    """Micro-batch counts that a schedule runs, but badly."""
    warnings: list[str] = []
    if micro_batches < pp:
        warnings.append(
            f"micro-batches ({micro_batches}) < pp ({pp}): the pipeline never fills and "
            f"some stages idle most of the step; use --micro-batches >= {pp}"
        )
    return warnings


# ---------------------------------------------------------------------------
# Size: every simulation is bounded

# The most (micro-batch, chunk) units one simulation runs, pp * vpp * m. Each unit is
# two or three actions, and each timed action keeps a Step (about 0.5 KB), so the
# limit holds a simulation near a few seconds and a few hundred MB. Real jobs stay
# far below it (pp 32 x vpp 4 x m 512 is 65,536).
MAX_UNITS = 1 << 17
# The reason a search counts such candidates by (`ScheduleRefused.reason`).
OVER_MAX_UNITS = f"pp x vpp x m over the simulator's limit of {MAX_UNITS:,}"


def check_size(pp: int, vpp: int, micro_batches: int) -> None:
    """Refuse (exit 2) a simulation larger than :data:`MAX_UNITS` units."""
    units = pp * vpp * micro_batches
    if units > MAX_UNITS:
        raise ScheduleRefused(
            f"pp {pp} x vpp {vpp} x {micro_batches} micro-batches = {units:,} units to "
            f"simulate, more than the simulator's limit of {MAX_UNITS:,} (pp*vpp*m); "
            "lower --micro-batches (the bubble depends on m relative to pp, so a smaller m "
            "with the same ratio shows the same shape) or --pp/--vpp",
            reason=OVER_MAX_UNITS,
        )
