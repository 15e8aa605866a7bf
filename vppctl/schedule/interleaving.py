"""Interleaving orders: the loop-placed schedules that walk micro-batch groups chunk by chunk.

Three runtimes publish one, and they differ in what they accept and in the details:

* ``interleaved``: Megatron-Core's interleaved 1F1B
  (``forward_backward_pipelining_with_interleaving``) with its micro-batch group size
  ``N`` (``microbatch_group_size_per_vp_stage``, default ``pp``): see
  :func:`schedule_table` and :func:`legal_group_sizes`.
* ``vpp``: Paddle's ``VPP`` (``PipelineVirtualPipelinePass._create_job_list``, 3.3.1):
  groups of ``pp``, a short last group of ``m % pp`` when ``pp`` does not divide ``m``
  (Megatron refuses that), and every forward before any backward when ``m == pp``.
* ``interleaved-zb``: torch's ``ScheduleInterleavedZeroBubble`` (ZB1P generalised to
  several stages per rank): the backward split into ``I`` and ``W``, stage ``s`` holding
  back its first ``s`` weight passes; its group size is torch's
  ``microbatches_per_round``, derived as ``m // max(1, m // pp)``.

In all three every stage runs its forwards in the order of the group table, and its
backwards in the same order with the chunks mirrored (gradients enter the last chunk
first); only the warm-up length and the backward kinds differ.
"""

from __future__ import annotations

from typing import Literal

from vppctl.schedule.actions import Op, warmup_then_steady
from vppctl.schedule.refusal import ScheduleRefused

# ---------------------------------------------------------------------------
# The group table and Megatron's group size


def schedule_table(micro_batches: int, vpp: int, group_size: int) -> list[tuple[int, int]]:
    """Megatron-Core's ``get_schedule_table``: the (micro-batch, chunk) forward order.

    Micro-batches go in groups of ``group_size``: the whole group through chunk 0, then
    through chunk 1, and so on; the last group holds whatever is left (fewer, never
    more, than ``group_size``). Every stage runs its forwards in this order. Paddle's
    VPP walks the same table with groups of ``pp``.
    """
    table: list[tuple[int, int]] = []
    for first in range(0, micro_batches, group_size):
        group = range(first, min(first + group_size, micro_batches))
        table += [(mb, chunk) for chunk in range(vpp) for mb in group]
    return table


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
        raise ScheduleRefused(
            f"interleaved needs at least pp = {pp} micro-batches, got {micro_batches}: "
            f"pass --micro-batches >= {pp}",
            reason=f"interleaved at m {micro_batches} < pp",
        )
    which = "the default --group-size pp" if group_size is None else "--group-size"
    size = f"the default group size pp {pp}" if group_size is None else f"group size {n}"
    raise ScheduleRefused(
        f"{which} = {n} is not legal for pp {pp} and {micro_batches} micro-batches "
        "(Megatron-Core needs pp <= N <= m and m % N == 0 or >= pp); legal --group-size "
        f"values: {', '.join(map(str, legal))}",
        reason=f"interleaved at m {micro_batches}: {size} is not legal",
    )


def interleaved_warmup(pp: int, vpp: int, stage: int, micro_batches: int, group_size: int) -> int:
    """Megatron-Core's warm-up forwards on ``stage``: ``2 (pp-s-1) + (vpp-1) N``, capped."""
    return min(2 * (pp - stage - 1) + (vpp - 1) * group_size, micro_batches * vpp)


def table_passes(
    vpp: int, micro_batches: int, group_size: int, backward: Literal["B", "I"] = "B"
) -> tuple[list[Op], list[Op]]:
    """Forwards in table order; backwards (``B``, or ``I`` when split) in the same order
    with chunks mirrored, as Megatron-Core's ``get_model_chunk_id``."""
    table = schedule_table(micro_batches, vpp, group_size)
    forwards = [Op("F", mb, chunk) for mb, chunk in table]
    backwards = [Op(backward, mb, vpp - 1 - chunk) for mb, chunk in table]
    return forwards, backwards


def interleaved(
    pp: int, vpp: int, micro_batches: int, group_size: int
) -> tuple[tuple[Op, ...], ...]:
    """Megatron-Core's interleaved 1F1B on every stage (the group size checked before)."""
    forwards, backwards = table_passes(vpp, micro_batches, group_size)
    return tuple(
        tuple(
            warmup_then_steady(
                forwards, backwards, interleaved_warmup(pp, vpp, s, micro_batches, group_size)
            )
        )
        for s in range(pp)
    )


# ---------------------------------------------------------------------------
# Paddle's VPP


def check_paddle_vpp(pp: int, micro_batches: int) -> None:
    """Paddle's VPP asserts ``accumulate_steps >= pp``."""
    if micro_batches < pp:
        raise ScheduleRefused(
            f"vpp (Paddle's VPP) needs at least pp = {pp} micro-batches (Paddle asserts "
            f"accumulate_steps >= pp_degree), got {micro_batches}: pass --micro-batches >= {pp}",
            reason=f"vpp at m {micro_batches} < pp",
        )


def paddle_vpp_warmup(pp: int, vpp: int, stage: int, micro_batches: int) -> int:
    """Paddle's warm-up: every forward when ``m == pp``, else Megatron's with ``N = pp``."""
    if micro_batches == pp:
        return micro_batches * vpp
    return interleaved_warmup(pp, vpp, stage, micro_batches, pp)


def paddle_vpp(pp: int, vpp: int, micro_batches: int) -> tuple[tuple[Op, ...], ...]:
    """Paddle's VPP: the group table with groups of ``pp`` (a short last group allowed),
    whole backwards (``split_backward`` off, Paddle's default)."""
    check_paddle_vpp(pp, micro_batches)
    forwards, backwards = table_passes(vpp, micro_batches, pp)
    return tuple(
        tuple(warmup_then_steady(forwards, backwards, paddle_vpp_warmup(pp, vpp, s, micro_batches)))
        for s in range(pp)
    )


# ---------------------------------------------------------------------------
# torch's interleaved zero bubble (and ZB1P, its one-chunk case)


def torch_rounds(pp: int, micro_batches: int) -> int:
    """torch's ``number_of_rounds``: ``max(1, m // pp)``."""
    return max(1, micro_batches // pp)


def torch_group_size(pp: int, micro_batches: int) -> int:
    """torch's ``microbatches_per_round``: ``m // max(1, m // pp)``."""
    return micro_batches // torch_rounds(pp, micro_batches)


def zero_bubble_group_sizes(pp: int, micro_batches: int) -> tuple[int, ...]:
    """Group sizes ``interleaved-zb`` takes: divisors ``N`` of ``m`` with ``N >= min(pp, m)``
    (torch derives one of them; a round must cover the pipeline, or hold every
    micro-batch when there are fewer than ``pp``)."""
    low = min(pp, micro_batches)
    return tuple(n for n in range(low, micro_batches + 1) if micro_batches % n == 0)


def check_zero_bubble_group(pp: int, micro_batches: int, group_size: int | None, name: str) -> int:
    """The group size of torch's zero-bubble schedules (default torch's own); refuse what
    torch refuses (``m`` not a multiple of its rounds) or a size it could not derive."""
    if group_size is None:
        rounds = torch_rounds(pp, micro_batches)
        if micro_batches % rounds:
            raise ScheduleRefused(
                f"{name} (torch's ScheduleInterleavedZeroBubble) needs m to be a multiple of "
                f"its rounds max(1, m // pp) = {rounds}, got m {micro_batches}: pass another "
                "--micro-batches" + (" or --group-size" if name == "interleaved-zb" else ""),
                reason=f"{name} at m {micro_batches}: not a multiple of torch's rounds "
                "max(1, m // pp)",
            )
        return torch_group_size(pp, micro_batches)
    legal = zero_bubble_group_sizes(pp, micro_batches)
    if group_size not in legal:
        raise ScheduleRefused(
            f"--group-size = {group_size} is not legal for {name} with pp {pp} and "
            f"{micro_batches} micro-batches (torch's microbatches_per_round divides m and "
            f"is at least min(pp, m)); legal --group-size values: {', '.join(map(str, legal))}",
            reason=f"{name} at m {micro_batches}: group size {group_size} is not legal",
        )
    return group_size


def _zero_bubble_stage(forwards: list[Op], inputs: list[Op], warmup: int, held: int) -> list[Op]:
    """Warm-up forwards, then F and I in turn; after the first ``held`` input gradients
    every I is followed by the oldest weight pass not yet run; the rest drain at the end."""
    total = len(forwards)
    order = list(forwards[:warmup])
    weights = 0
    for k, grad in enumerate(inputs):
        if warmup + k < total:
            order.append(forwards[warmup + k])
        order.append(grad)
        if k >= held:
            order.append(Op("W", inputs[weights].micro_batch, inputs[weights].chunk))
            weights += 1
    return order + [Op("W", op.micro_batch, op.chunk) for op in inputs[weights:]]


def interleaved_zero_bubble(
    pp: int, vpp: int, micro_batches: int, group_size: int
) -> tuple[tuple[Op, ...], ...]:
    """torch's ``ScheduleInterleavedZeroBubble``: warm-up ``(vpp-1) N + pp-s-1`` (capped);
    stage ``s`` defers its first ``s`` weight passes. With ``vpp == 1`` this is ZB1P."""
    forwards, inputs = table_passes(vpp, micro_batches, group_size, backward="I")
    orders = []
    for s in range(pp):
        warmup = min((vpp - 1) * group_size + pp - s - 1, micro_batches * vpp)
        orders.append(tuple(_zero_bubble_stage(forwards, inputs, warmup, s)))
    return tuple(orders)
