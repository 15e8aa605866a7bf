"""The per-stage action orders of every pipeline schedule, before they are placed in time.

This module's one job is to say, for each schedule, in which order each stage runs
its actions; `simulate` times those orders and `torchcsv` writes them out.

Vocabulary (as in :mod:`vppctl.plan`): ``pp`` stages, ``vpp`` chunks per stage, ``m``
micro-batches. An action (:class:`vppctl.schedule.actions.Op`) is one pass of one
micro-batch through one chunk: ``F`` forward, ``B`` full backward, ``I`` input
gradient, ``W`` weight gradient.

Orders name chunks; the virtual stage of (stage, chunk) comes from the plan's
placement (:func:`vppctl.plan.place`), the only such mapping in vppctl. Rendered in
torch.distributed.pipelining's notation ``{virtual_stage}{F|B|I|W}{micro_batch}``
(``2F0``, ``3I1``). Schedules that do not interleave (:data:`MERGED`) run one merged
chunk per stage, whose virtual stage is the stage itself.

The schedules, by the runtime whose order each one is (the names are Paddle's
``schedule_mode`` in lower case, and torch's or Megatron's where Paddle has none):

* ``fthenb``: Paddle's ``FThenB`` (GPipe, torch's ``ScheduleGPipe``): every forward,
  then every backward.
* ``1f1b``: Paddle's ``1F1B`` (torch's ``Schedule1F1B``, Megatron-Core without
  interleaving): stage ``s`` warms up with ``pp - s - 1`` forwards, then alternates.
* ``eager1f1b``: Paddle's ``Eager1F1B``: ``2 (pp - s) - 1`` forwards before the first
  backward (sends leave earlier, to overlap communication); Paddle refuses fewer than
  ``2 pp - 1`` micro-batches.
* ``vpp``: Paddle's ``VPP`` (:mod:`vppctl.schedule.interleaving`).
* ``zbh1``: Paddle's ``ZBH1`` (``PipelineZeroBubblePipelinePass``): 1F1B's shape with a
  warm-up of ``pp - s`` forwards; on stage ``s >= 1`` the backwards of micro-batches
  ``0..s-1`` are split into ``I`` and ``W`` with those weight passes kept for the very
  end, the middle backwards run whole, and the last micro-batch runs ``I`` then ``W``.
  Paddle refuses fewer than ``pp`` micro-batches.
* ``interleaved``: Megatron-Core's interleaved 1F1B (:mod:`vppctl.schedule.interleaving`).
* ``zb1p``: torch's ``ScheduleInterleavedZeroBubble`` with one stage per rank (ZB1P,
  the ZB-H1 of the zero-bubble paper, Qi et al., 2023): every backward split, stage
  ``s`` deferring its first ``s`` weight passes by ``s`` slots (first in, first out).
* ``interleaved-zb``: the same torch class with several chunks per stage.
* ``zbvpp``: Paddle's ``ZBVPP``, a greedy on Paddle's runtime model, two chunks in V
  placement, ``m == pp`` only (:mod:`vppctl.schedule.zbvpp`).
* ``zbv`` and ``dualpipev``: torch's V-shaped schedules (:mod:`vppctl.schedule.vshape`).
"""

from __future__ import annotations

from collections.abc import Sequence

from vppctl.choices import SCHEDULES as SCHEDULES
from vppctl.choices import Schedule as Schedule
from vppctl.plan import Placement, virtual_stages
from vppctl.schedule.actions import Kind as Kind
from vppctl.schedule.actions import Op as Op
from vppctl.schedule.actions import warmup_then_steady
from vppctl.schedule.interleaving import (
    check_group_size,
    check_zero_bubble_group,
    interleaved,
    interleaved_zero_bubble,
    paddle_vpp,
)
from vppctl.schedule.interleaving import interleaved_warmup as interleaved_warmup
from vppctl.schedule.interleaving import legal_group_sizes as legal_group_sizes
from vppctl.schedule.interleaving import schedule_table as schedule_table
from vppctl.schedule.refusal import ScheduleRefused
from vppctl.schedule.vshape import dualpipev, zbv
from vppctl.schedule.zbvpp import zbvpp_orders

SCHEDULE_NAMES: dict[str, str] = {  # the name people read, in tables and pictures
    "fthenb": "F-then-B",
    "1f1b": "1F1B",
    "eager1f1b": "eager 1F1B",
    "vpp": "Paddle VPP",
    "zbh1": "Paddle ZB-H1",
    "zbvpp": "Paddle ZB-VPP",
    "interleaved": "interleaved 1F1B",
    "zb1p": "ZB1P",
    "interleaved-zb": "interleaved ZB",
    "zbv": "ZB-V",
    "dualpipev": "DualPipeV",
}
# Schedules that run each stage's chunks as one (their orders use chunk 0 only).
MERGED: frozenset[str] = frozenset({"fthenb", "1f1b", "eager1f1b", "zbh1", "zb1p"})
# Schedules of two chunks per stage in V placement.
V_SHAPED: frozenset[str] = frozenset({"zbvpp", "zbv", "dualpipev"})
# Schedules that interleave a loop-placed plan's chunks (the rest: MERGED and V_SHAPED).
LOOPED: frozenset[str] = frozenset({"interleaved", "vpp", "interleaved-zb"})
# Schedules whose backward is split into I and W (all or some of it).
SPLIT: frozenset[str] = frozenset({"zbh1", "zbvpp", "zb1p", "interleaved-zb", "zbv", "dualpipev"})
# Schedules that take a micro-batch group size (--group-size).
GROUPED: frozenset[str] = frozenset({"interleaved", "interleaved-zb"})


def natural_placement(schedule: Schedule) -> Placement:
    """The placement a schedule is defined for: V for the V-shaped ones, loop otherwise."""
    return "v" if schedule in V_SHAPED else "loop"


def order_names(
    orders: Sequence[Sequence[Op]], vpp: int, placement: Placement
) -> tuple[tuple[str, ...], ...]:
    """Every stage's order in torch notation, ``{virtual_stage}{kind}{micro_batch}``.

    ``vpp`` is the chunk count the orders use (1 for the merged schedules); the
    virtual stage of (stage, chunk) is the plan's (:func:`vppctl.plan.virtual_stages`).
    """
    pp = len(orders)
    vs = virtual_stages(pp, vpp, placement)
    return tuple(
        tuple(f"{vs[stage, op.chunk]}{op.kind}{op.micro_batch}" for op in order)
        for stage, order in enumerate(orders)
    )


def check_group(
    schedule: Schedule, pp: int, vpp: int, micro_batches: int, group_size: int | None
) -> int | None:
    """The group size a grouped schedule runs with (checked), None for the others.

    ``interleaved`` with one chunk is plain 1F1B and takes none; ``interleaved-zb``
    checks torch's rule at any vpp, as ``zb1p`` does with torch's own size."""
    if schedule == "interleaved":
        return check_group_size(pp, micro_batches, group_size) if vpp > 1 else None
    if schedule in ("interleaved-zb", "zb1p"):
        return check_zero_bubble_group(pp, micro_batches, group_size, schedule)
    return None


# ---------------------------------------------------------------------------
# Orders of the merged schedules


def _passes(micro_batches: int) -> tuple[list[Op], list[Op]]:
    """Every micro-batch's forward and backward through one merged chunk, in order
    (built once per schedule and shared by every stage's order)."""
    return [Op("F", i, 0) for i in range(micro_batches)], [
        Op("B", i, 0) for i in range(micro_batches)
    ]


def check_eager(pp: int, micro_batches: int) -> None:
    """Paddle's Eager1F1B asserts ``2 (pp - s) - 1 <= m`` on every stage ``s``."""
    if micro_batches < 2 * pp - 1:
        raise ScheduleRefused(
            f"eager1f1b needs at least 2*pp - 1 = {2 * pp - 1} micro-batches (Paddle's "
            f"Eager1F1B refuses fewer), got {micro_batches}: pass --micro-batches >= "
            f"{2 * pp - 1} or use --schedule 1f1b",
            reason=f"eager1f1b at m {micro_batches} < 2pp - 1",
        )


def check_paddle_zbh1(pp: int, micro_batches: int) -> None:
    """Paddle's ZBH1 asserts ``pp <= m``."""
    if micro_batches < pp:
        raise ScheduleRefused(
            f"zbh1 (Paddle's ZBH1) needs at least pp = {pp} micro-batches (Paddle asserts "
            f"pp_degree <= accumulate_steps), got {micro_batches}: pass --micro-batches >= "
            f"{pp} or use --schedule zb1p",
            reason=f"zbh1 at m {micro_batches} < pp",
        )


def _paddle_zbh1(pp: int, stage: int, micro_batches: int) -> list[Op]:
    """Paddle's ZBH1 on one stage (module docstring): ``pp - s`` forwards; ``s`` pairs of
    an input gradient and a forward; whole backwards paired with forwards, then alone;
    the last micro-batch's I and W (B on stage 0); the held weight passes."""
    forwards = iter(range(micro_batches))
    backward = 0
    order = [Op("F", next(forwards), 0) for _ in range(pp - stage)]
    for _ in range(stage):
        order += [Op("I", backward, 0), Op("F", next(forwards), 0)]
        backward += 1
    for _ in range(micro_batches - pp):
        order += [Op("B", backward, 0), Op("F", next(forwards), 0)]
        backward += 1
    for _ in range(pp - stage - 1):
        order.append(Op("B", backward, 0))
        backward += 1
    if stage > 0:
        order += [Op("I", backward, 0), Op("W", backward, 0)]
    else:
        order.append(Op("B", backward, 0))
    return order + [Op("W", k, 0) for k in range(stage)]


def _merged(schedule: Schedule, pp: int, micro_batches: int) -> tuple[tuple[Op, ...], ...]:
    if schedule == "zbh1":
        check_paddle_zbh1(pp, micro_batches)
        return tuple(tuple(_paddle_zbh1(pp, s, micro_batches)) for s in range(pp))
    if schedule == "zb1p":
        return interleaved_zero_bubble(pp, 1, micro_batches, micro_batches)
    forwards, backwards = _passes(micro_batches)
    if schedule == "fthenb":
        return (tuple(forwards + backwards),) * pp
    if schedule == "eager1f1b":
        check_eager(pp, micro_batches)
    # Eager1F1B's 2(pp-s)-1 forwards before the first backward are a warm-up of
    # 2(pp-s-1): the steady phase opens with one more forward, as in 1F1B.
    factor = 2 if schedule == "eager1f1b" else 1
    return tuple(
        tuple(warmup_then_steady(forwards, backwards, min(factor * (pp - s - 1), micro_batches)))
        for s in range(pp)
    )


def stage_orders(
    schedule: Schedule, pp: int, vpp: int, micro_batches: int, group_size: int | None = None
) -> tuple[tuple[Op, ...], ...]:
    """The action order of every stage.

    ``vpp`` must already be 1 for the merged schedules (:data:`MERGED`) and 2 for the
    V-shaped ones; ``interleaved`` with ``vpp == 1`` is plain 1F1B. Group sizes and the
    micro-batch counts a runtime refuses are checked (:class:`ScheduleRefused`, exit 2).
    """
    group = check_group(schedule, pp, vpp, micro_batches, group_size)
    return checked_orders(schedule, pp, vpp, micro_batches, group)


def checked_orders(
    schedule: Schedule, pp: int, vpp: int, micro_batches: int, group: int | None
) -> tuple[tuple[Op, ...], ...]:
    """:func:`stage_orders` with the group size already checked (`check_group`'s result),
    for a caller that needs the group size too: the check runs once."""
    if schedule in MERGED and vpp != 1:
        raise ValueError(f"{schedule} orders run one merged chunk, got vpp {vpp}")
    if schedule in V_SHAPED and vpp != 2:
        raise ValueError(f"{schedule} orders need vpp 2, got {vpp}")
    if schedule in MERGED or (schedule == "interleaved" and vpp == 1):
        return _merged("1f1b" if schedule == "interleaved" else schedule, pp, micro_batches)
    if schedule == "zbv":
        return zbv(pp, micro_batches)
    if schedule == "dualpipev":
        return dualpipev(pp, micro_batches)
    if schedule == "zbvpp":
        return zbvpp_orders(pp, micro_batches)
    if schedule == "vpp":
        return paddle_vpp(pp, vpp, micro_batches)
    assert group is not None  # the grouped schedules have one
    if schedule == "interleaved-zb":
        return interleaved_zero_bubble(pp, vpp, micro_batches, group)
    return interleaved(pp, vpp, micro_batches, group)
