"""The per-stage action orders of every pipeline schedule, before they are placed in time.

This module's one job is to say, for each schedule, in which order each stage runs
its actions; `simulate` times those orders and `torchcsv` writes them out.

Vocabulary (as in :mod:`vppctl.plan`): ``pp`` stages, ``vpp`` chunks per stage, ``m``
micro-batches. An action is one pass of one micro-batch through one chunk:

* ``F`` forward;
* ``B`` full backward (input and weight gradients in one pass);
* ``I`` input-gradient backward (sends the gradient upstream);
* ``W`` weight-gradient backward (local; needs its ``I`` first).

Orders name chunks; the virtual stage of (stage, chunk) comes from the plan's
placement (:func:`vppctl.plan.place`), the only such mapping in vppctl. Rendered in
torch.distributed.pipelining's notation ``{virtual_stage}{F|B|I|W}{micro_batch}``
(``2F0``, ``3I1``). Schedules that do not interleave (``fthenb``, ``1f1b``,
``eager1f1b``, ``zbh1``) run one merged chunk per stage, whose virtual stage is the
stage itself.

The schedules and where their orders come from:

* ``fthenb`` (GPipe): every forward, then every backward.
* ``1f1b``: stage ``s`` warms up with ``pp - s - 1`` forwards, then alternates.
* ``eager1f1b``: Paddle's ``Eager1F1B``: ``2 (pp - s) - 1`` forwards before the first
  backward (sends leave earlier, to overlap communication), then alternates; Paddle
  refuses fewer than ``2 pp - 1`` micro-batches.
* ``interleaved``: Megatron-Core's interleaved 1F1B with its micro-batch group size
  ``N`` (``microbatch_group_size_per_vp_stage``, default ``pp``); see
  :func:`schedule_table` and :func:`legal_group_sizes`.
* ``zbh1``: ZB-H1 of the zero-bubble paper (Qi et al., 2023), as torch's
  ``ScheduleInterleavedZeroBubble`` builds it for one stage per rank: 1F1B's warm-up,
  the backward split into ``I`` and ``W``, and stage ``s`` deferring its first ``s``
  weight passes so that they fill the cool-down bubble.
* ``zbv``: ZB-V (the paper's section 6, torch's ``ScheduleZBVZeroBubble``): two chunks
  per stage in V placement, stage ``s`` holding virtual stages ``s`` and ``2pp-1-s``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from vppctl.choices import SCHEDULES as SCHEDULES
from vppctl.choices import Schedule as Schedule
from vppctl.errors import UsageError
from vppctl.plan import Placement, virtual_stages

Kind = Literal["F", "B", "I", "W"]

SCHEDULE_NAMES: dict[str, str] = {  # the name people read, in tables and pictures
    "fthenb": "F-then-B",
    "1f1b": "1F1B",
    "eager1f1b": "eager 1F1B",
    "interleaved": "interleaved 1F1B",
    "zbh1": "ZB-H1",
    "zbv": "ZB-V",
}
# Schedules that run each stage's chunks as one (their orders use chunk 0 only).
MERGED: frozenset[str] = frozenset({"fthenb", "1f1b", "eager1f1b", "zbh1"})
# Schedules whose backward is split into I and W.
SPLIT: frozenset[str] = frozenset({"zbh1", "zbv"})


@dataclass(frozen=True)
class Op:
    """One action in a stage's order: its kind, micro-batch and chunk on that stage."""

    kind: Kind
    micro_batch: int
    chunk: int

    @property
    def label(self) -> str:
        """Short name, e.g. ``F3.c1`` for the forward of micro-batch 3 through chunk 1."""
        return f"{self.kind}{self.micro_batch}.c{self.chunk}"


def natural_placement(schedule: Schedule) -> Placement:
    """The placement a schedule is defined for: V for ZB-V, loop for the others."""
    return "v" if schedule == "zbv" else "loop"


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


# ---------------------------------------------------------------------------
# Megatron's micro-batch group size


def legal_group_sizes(pp: int, micro_batches: int) -> tuple[int, ...]:
    """Group sizes ``N`` Megatron-Core's interleaved schedule accepts for ``pp`` and ``m``.

    Megatron-Core (``forward_backward_pipelining_with_interleaving``) refuses ``N``
    outside ``[pp, m]`` (a group must cover the pipeline, and cannot exceed the
    micro-batches), and refuses a final, shorter group of ``m % N`` micro-batches
    when ``0 < m % N < pp`` (it would leave dependency bubbles). So ``N`` is legal
    when ``pp <= N <= m`` and ``m % N == 0 or m % N >= pp``. For ``m = 10, pp = 4``:
    4 leaves 2, 7 leaves 3, 8 leaves 2, 9 leaves 1 (refused); 5 and 10 divide and 6
    leaves 4 >= pp: the legal sizes are 5, 6 and 10. With ``m < pp`` none is legal.
    """
    return tuple(n for n in range(pp, micro_batches + 1) if not 0 < micro_batches % n < pp)


def check_group_size(pp: int, micro_batches: int, group_size: int | None) -> int:
    """The group size to use (default ``pp``); refuse one Megatron-Core would refuse."""
    n = pp if group_size is None else group_size
    legal = legal_group_sizes(pp, micro_batches)
    if n in legal:
        return n
    if not legal:
        raise UsageError(
            f"interleaved needs at least pp = {pp} micro-batches, got {micro_batches}: "
            f"pass --micro-batches >= {pp}"
        )
    which = "the default --group-size pp" if group_size is None else "--group-size"
    raise UsageError(
        f"{which} = {n} is not legal for pp {pp} and {micro_batches} micro-batches "
        "(Megatron-Core needs pp <= N <= m and m % N == 0 or >= pp); legal --group-size "
        f"values: {', '.join(map(str, legal))}"
    )


def schedule_table(micro_batches: int, vpp: int, group_size: int) -> list[tuple[int, int]]:
    """Megatron-Core's ``get_schedule_table``: the (micro-batch, chunk) forward order.

    Micro-batches go in groups of ``group_size``: the whole group through chunk 0, then
    through chunk 1, and so on; the last group holds whatever is left (fewer, never
    more, than ``group_size``). Every stage runs its forwards in this order.
    """
    table: list[tuple[int, int]] = []
    for first in range(0, micro_batches, group_size):
        group = range(first, min(first + group_size, micro_batches))
        table += [(mb, chunk) for chunk in range(vpp) for mb in group]
    return table


# ---------------------------------------------------------------------------
# Orders of each schedule


def _fthenb(micro_batches: int) -> list[Op]:
    forwards = [Op("F", i, 0) for i in range(micro_batches)]
    return forwards + [Op("B", i, 0) for i in range(micro_batches)]


def _warmup_then_1f1b(forwards: Sequence[Op], backwards: Sequence[Op], warmup: int) -> list[Op]:
    """``warmup`` forwards, then alternate one forward and one backward, then drain."""
    total = len(forwards)
    order = list(forwards[:warmup])
    for i in range(total - warmup):
        order += [forwards[warmup + i], backwards[i]]
    return order + list(backwards[total - warmup :])


def _passes(micro_batches: int) -> tuple[list[Op], list[Op]]:
    """Every micro-batch's forward and backward through one merged chunk, in order
    (built once per schedule and shared by every stage's order)."""
    return [Op("F", i, 0) for i in range(micro_batches)], [
        Op("B", i, 0) for i in range(micro_batches)
    ]


def _1f1b(pp: int, stage: int, micro_batches: int, passes: tuple[list[Op], list[Op]]) -> list[Op]:
    forwards, backwards = passes
    return _warmup_then_1f1b(forwards, backwards, min(pp - stage - 1, micro_batches))


def check_eager(pp: int, micro_batches: int) -> None:
    """Paddle's Eager1F1B asserts ``2 (pp - s) - 1 <= m`` on every stage ``s``."""
    if micro_batches < 2 * pp - 1:
        raise UsageError(
            f"eager1f1b needs at least 2*pp - 1 = {2 * pp - 1} micro-batches (Paddle's "
            f"Eager1F1B refuses fewer), got {micro_batches}: pass --micro-batches >= "
            f"{2 * pp - 1} or use --schedule 1f1b"
        )


def _eager1f1b(
    pp: int, stage: int, micro_batches: int, passes: tuple[list[Op], list[Op]]
) -> list[Op]:
    """``2 (pp - s) - 1`` forwards, then backward-forward pairs, then the backwards:
    the 1F1B shape with a warm-up of ``2 (pp - s - 1)`` (the steady phase opens with
    one more forward)."""
    forwards, backwards = passes
    return _warmup_then_1f1b(forwards, backwards, min(2 * (pp - stage - 1), micro_batches))


def interleaved_warmup(pp: int, vpp: int, stage: int, micro_batches: int, group_size: int) -> int:
    """Megatron-Core's warm-up forwards on ``stage``: ``2 (pp-s-1) + (vpp-1) N``, capped."""
    return min(2 * (pp - stage - 1) + (vpp - 1) * group_size, micro_batches * vpp)


def _interleaved_passes(vpp: int, micro_batches: int, group_size: int) -> tuple[list[Op], list[Op]]:
    """Forwards in table order; backwards in the same order with chunks mirrored
    (gradients enter the last chunk first), as Megatron-Core's ``get_model_chunk_id``."""
    table = schedule_table(micro_batches, vpp, group_size)
    forwards = [Op("F", mb, chunk) for mb, chunk in table]
    backwards = [Op("B", mb, vpp - 1 - chunk) for mb, chunk in table]
    return forwards, backwards


def _interleaved(
    pp: int,
    vpp: int,
    stage: int,
    micro_batches: int,
    group_size: int,
    passes: tuple[list[Op], list[Op]],
) -> list[Op]:
    forwards, backwards = passes
    warmup = interleaved_warmup(pp, vpp, stage, micro_batches, group_size)
    return _warmup_then_1f1b(forwards, backwards, warmup)


def _zbh1(pp: int, stage: int, micro_batches: int) -> list[Op]:
    """ZB-H1: 1F1B with I for B; stage ``s`` holds back its first ``s`` weight passes,
    then runs one W after each later I, and drains the held ones at the end."""
    warmup = min(pp - stage - 1, micro_batches)
    order = [Op("F", i, 0) for i in range(warmup)]
    done_w = 0
    for j in range(micro_batches):  # j-th input-gradient pass
        if warmup + j < micro_batches:
            order.append(Op("F", warmup + j, 0))
        order.append(Op("I", j, 0))
        if j >= stage:
            order.append(Op("W", done_w, 0))
            done_w += 1
    return order + [Op("W", k, 0) for k in range(done_w, micro_batches)]


def _zbv(pp: int, stage: int, micro_batches: int) -> list[Op]:
    """ZB-V for one stage (chunk 0 = virtual stage ``s``, chunk 1 = ``2pp-1-s``).

    As torch's ``ScheduleZBVZeroBubble``: planned for at least ``2pp - 1``
    micro-batches, the extra ones then dropped (removing actions from a deadlock-free
    order cannot create a deadlock).
    """
    n = max(2 * pp - 1, micro_batches)
    f, b = [0, 0], [0, 0]
    order: list[Op] = []

    def run(kind: Kind, chunk: int) -> None:
        counts = f if kind == "F" else b
        order.append(Op(kind, counts[chunk], chunk))
        counts[chunk] += 1
        if kind == "I":
            order.append(Op("W", counts[chunk] - 1, chunk))

    for _ in range(2 * (pp - stage) - 1):
        run("F", 0)
    for _ in range(stage):
        run("F", 1)
        run("F", 0)
    for _ in range(pp - stage):
        run("F", 1)
        run("I", 1)
    while f[1] < f[0] or f[0] < n:
        if f[0] < n:
            run("F", 0)
        run("I", 0)
        run("F", 1)
        run("I", 1)
    order += _zbv_cooldown(pp, stage, b, n)
    return [op for op in order if op.micro_batch < micro_batches]


def _zbv_cooldown(pp: int, stage: int, b: list[int], n: int) -> list[Op]:
    """ZB-V's drain: input gradients first, weight gradients deferred to the end."""
    w = list(b)
    order: list[Op] = []
    for _ in range(stage):
        order += [Op("I", b[0], 0), Op("I", b[1], 1)]
        b[0] += 1
        b[1] += 1
    for _ in range(pp - stage):
        order += [Op("I", b[0], 0), Op("W", w[0], 0)]
        b[0] += 1
        w[0] += 1
    order += [Op("W", k, 1) for k in range(w[1], b[1])]
    order += [Op("W", k, 0) for k in range(w[0], b[0])]
    if b != [n, n]:
        raise AssertionError(f"ZB-V order of stage {stage} is incomplete: {b} of {n}")
    return order


def stage_orders(
    schedule: Schedule, pp: int, vpp: int, micro_batches: int, group_size: int | None = None
) -> tuple[tuple[Op, ...], ...]:
    """The action order of every stage.

    ``vpp`` must already be 1 for the merged schedules (:data:`MERGED`) and 2 for
    ``zbv``; ``interleaved`` with ``vpp == 1`` is plain 1F1B. The group size of
    ``interleaved`` and the micro-batches of ``eager1f1b`` are checked (UsageError).
    """
    if schedule in MERGED and vpp != 1:
        raise ValueError(f"{schedule} orders run one merged chunk, got vpp {vpp}")
    if schedule == "zbv" and vpp != 2:
        raise ValueError(f"zbv orders need vpp 2, got {vpp}")
    if schedule == "fthenb":
        return (tuple(_fthenb(micro_batches)),) * pp
    if schedule == "zbh1":
        return tuple(tuple(_zbh1(pp, s, micro_batches)) for s in range(pp))
    if schedule == "eager1f1b":
        check_eager(pp, micro_batches)
        passes = _passes(micro_batches)
        return tuple(tuple(_eager1f1b(pp, s, micro_batches, passes)) for s in range(pp))
    if schedule == "zbv":
        return tuple(tuple(_zbv(pp, s, micro_batches)) for s in range(pp))
    if schedule == "1f1b" or vpp == 1:
        passes = _passes(micro_batches)
        return tuple(tuple(_1f1b(pp, s, micro_batches, passes)) for s in range(pp))
    n = check_group_size(pp, micro_batches, group_size)
    passes = _interleaved_passes(vpp, micro_batches, n)
    return tuple(tuple(_interleaved(pp, vpp, s, micro_batches, n, passes)) for s in range(pp))
