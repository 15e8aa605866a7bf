"""V-shaped orders: two chunks per stage in V placement (stage ``s`` holds virtual stages
``s`` and ``2pp-1-s``), chunk 0 going down the pipeline and chunk 1 coming back up.

* ``zbv``: ZB-V (the zero-bubble paper's section 6) as torch's ``ScheduleZBVZeroBubble``
  builds it.
* ``dualpipev``: DeepSeek's DualPipe folded into a V, as torch's ``ScheduleDualPipeV``
  builds it. torch pairs a forward of one chunk with a full backward of the other
  (``OVERLAP_F_B``) and, without a custom overlap function, runs the pair's forward
  then its backward; so does vppctl. The middle backwards are whole (``B``); around
  the end of the step some are split into ``I`` and ``W`` to fill the drain.
"""

from __future__ import annotations

from collections import deque

from vppctl.schedule.actions import Kind, Op
from vppctl.schedule.refusal import ScheduleRefused

# ---------------------------------------------------------------------------
# ZB-V


def zbv_stage(pp: int, stage: int, micro_batches: int) -> list[Op]:
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


def zbv(pp: int, micro_batches: int) -> tuple[tuple[Op, ...], ...]:
    return tuple(tuple(zbv_stage(pp, s, micro_batches)) for s in range(pp))


# ---------------------------------------------------------------------------
# DualPipeV


def check_dualpipev(pp: int, micro_batches: int) -> None:
    """torch's ``ScheduleDualPipeV`` needs at least as many micro-batches as stages, 2pp."""
    if micro_batches < 2 * pp:
        raise ScheduleRefused(
            f"dualpipev needs at least 2*pp = {2 * pp} micro-batches (torch's "
            f"ScheduleDualPipeV refuses fewer than its {2 * pp} stages), got {micro_batches}: "
            f"pass --micro-batches >= {2 * pp} or use --schedule zbv",
            reason=f"dualpipev at m {micro_batches} < 2pp",
        )


class _DualPipeStage:
    """One stage's DualPipeV order as it is built: a forward, input-gradient and whole
    backward counter per chunk, and the weight passes waiting to run (oldest first)."""

    def __init__(self) -> None:
        self.order: list[Op] = []
        self.forwards = [0, 0]
        self.backwards = [0, 0]
        self.waiting: deque[tuple[int, int]] = deque()

    def forward(self, chunk: int) -> None:
        self.order.append(Op("F", self.forwards[chunk], chunk))
        self.forwards[chunk] += 1

    def backward(self, chunk: int, split: bool = False) -> None:
        """A whole backward, or (``split``) its input gradient with the weight pass queued."""
        mb = self.backwards[chunk]
        self.backwards[chunk] += 1
        self.order.append(Op("I" if split else "B", mb, chunk))
        if split:
            self.waiting.append((chunk, mb))

    def weight(self) -> None:
        """The oldest queued weight pass, if any."""
        if self.waiting:
            chunk, mb = self.waiting.popleft()
            self.order.append(Op("W", mb, chunk))


def dualpipev_stage(pp: int, stage: int, micro_batches: int) -> list[Op]:
    """DualPipeV for one stage, phase by phase as torch builds it (chunk 0 = virtual
    stage ``s``, chunk 1 = ``2pp-1-s``; ``rest`` = stages below this one)."""
    rest = pp - stage - 1
    b = _DualPipeStage()
    for _ in range(2 * rest):  # chunk 0 alone
        b.forward(0)
    for _ in range(stage + 1):  # both chunks
        b.forward(0)
        b.forward(1)
    for _ in range(rest):  # the first gradients of chunk 1, weight passes filling gaps
        b.backward(1, split=True)
        b.weight()
        b.forward(1)
    for _ in range(micro_batches - 2 * pp + stage + 1):  # steady: F0 B1, F1 B0
        b.forward(0)
        b.backward(1)
        b.forward(1)
        b.backward(0)
    for _ in range(rest):
        b.backward(1)
        b.forward(1)
        b.backward(0)
    split = False
    half = (stage + 1) // 2
    for i in range(stage + 1):  # the drain: the second half splits its backwards
        split = split or (i == half and stage % 2 == 1)
        b.backward(1, split)
        split = split or (i == half and stage % 2 == 0)
        b.backward(0, split)
    for _ in range(rest):
        b.weight()
        b.backward(0, split)
    for _ in range(stage + 1):
        b.weight()
    return b.order


def dualpipev(pp: int, micro_batches: int) -> tuple[tuple[Op, ...], ...]:
    check_dualpipev(pp, micro_batches)
    return tuple(tuple(dualpipev_stage(pp, s, micro_batches)) for s in range(pp))
