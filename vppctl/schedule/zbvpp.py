"""Paddle's ZBVPP: the zero-bubble V schedule Paddle builds with a greedy, per stage.

``PipelineZeroBubbleVirtualPipelinePass`` (Paddle 3.0.0 to 3.3.1; its ``VScheduleCreator``
is the same in both) places jobs one at a time on a model of the pipeline that knows
five times, ``strategy.pipeline.program_runtimes``: a forward, an input gradient
(``backward_b``), a weight gradient (``backward_w``), the loss (added to the last
chunk's forward on the loss stage) and one hop (``communication``). Chunk ``c`` runs
down the pipeline when ``c`` is even and back up when odd: with two chunks that is
vppctl's V placement. It fills the pipeline with forwards, then alternates input
gradients and forwards, slipping pending weight passes into gaps the model predicts,
tries the eight combinations of its three fill rules (and, for each, re-runs while
the largest stage bubble shrinks), and keeps the shortest. Paddle only runs it with
``m == pp``; memory does not steer it unless ``memory_limit_times`` is set (then it
reads device memory, which no simulator can), so vppctl reproduces the default.

The greedy decides with Paddle's runtimes, not with the costs vppctl then times the
order with: the order is what Paddle runs for those runtimes (default
:data:`PADDLE_RUNTIMES`, Paddle's own), the timing is the program's.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from vppctl.schedule.actions import Op
from vppctl.schedule.refusal import ScheduleRefused

F, B, W = "F", "I", "W"  # Paddle's forward, backward_b, backward_w as vppctl's kinds


@dataclass(frozen=True)
class Runtimes:
    """Paddle's ``program_runtimes``: forward, backward_b, backward_w, loss, communication
    (integers, as Paddle's strategy holds them; the greedy's arithmetic is Paddle's)."""

    forward: int
    input_grad: int
    weight_grad: int
    loss: int
    hop: int

    def as_list(self) -> list[int]:
        return [self.forward, self.input_grad, self.weight_grad, self.loss, self.hop]


# strategy.pipeline.program_runtimes' default in Paddle.
PADDLE_RUNTIMES = Runtimes(61, 72, 71, 34, 3)


# The most stages the greedy is run for: its work grows faster than pp squared (pp 64
# takes seconds; Paddle runs the same greedy once per rank).
MAX_ZBVPP_STAGES = 64


def check_zbvpp(pp: int, micro_batches: int) -> None:
    """Paddle asserts ``m % pp == 0`` and ``m <= pp``: one micro-batch per stage."""
    if pp > MAX_ZBVPP_STAGES:
        raise ScheduleRefused(
            f"zbvpp's greedy is simulated for at most {MAX_ZBVPP_STAGES} stages, got pp {pp}: "
            "its work grows faster than pp squared; use --schedule zbv",
            reason=f"zbvpp at pp {pp}: simulated for at most {MAX_ZBVPP_STAGES} stages",
        )
    if micro_batches != pp:
        raise ScheduleRefused(
            f"zbvpp (Paddle's ZBVPP) runs exactly pp = {pp} micro-batches (Paddle asserts "
            f"accumulate_steps % pp == 0 and <= pp), got {micro_batches}: pass "
            f"--micro-batches {pp} or use --schedule zbv",
            reason=f"zbvpp at m {micro_batches}: Paddle runs it at m == pp only",
        )


class _Greedy:
    """One run of Paddle's greedy: every stage's jobs so far, their end times in the
    greedy's model, the pending weight passes and each stage's bubble."""

    def __init__(self, pp: int, m: int, vpp: int, rt: Runtimes) -> None:
        self.pp, self.m, self.vpp, self.rt = pp, m, vpp, rt
        self.loss_stage = 0 if vpp % 2 == 0 else pp - 1
        self.count = [{(k, c): 0 for k in (F, B, W) for c in range(vpp)} for _ in range(pp)]
        self.end: dict[tuple[str, int, int, int], int] = {}
        self.now = [0] * pp
        self.pending: list[deque[tuple[int, int]]] = [deque() for _ in range(pp)]
        self.jobs: list[list[Op]] = [[] for _ in range(pp)]
        self.bubble = [0] * pp

    # -- the model ----------------------------------------------------------------

    def runtime(self, kind: str, stage: int, chunk: int) -> int:
        t = {F: self.rt.forward, B: self.rt.input_grad, W: self.rt.weight_grad}[kind]
        if stage == self.loss_stage and chunk == self.vpp - 1:
            t += self.rt.loss  # Paddle adds the loss to every job of that chunk there
        return t

    def upstream(self, kind: str, chunk: int, stage: int) -> int:
        """The stage a job's input comes from: even chunks run down, odd ones up."""
        down = chunk % 2 == 0
        if kind == F:
            return stage - 1 if down else stage + 1
        return stage + 1 if down else stage - 1

    def ready_at(self, kind: str, chunk: int, stage: int, mb: int) -> int:
        """When the input arrives from upstream: 0 at the ends, -1 not yet scheduled."""
        up = self.upstream(kind, chunk, stage)
        if not 0 <= up < self.pp:
            return 0
        return self.end.get((kind, chunk, up, mb), -1)

    def forwards(self, stage: int, chunks: range | list[int] | None = None) -> int:
        return sum(self.count[stage][F, c] for c in chunks or range(self.vpp))

    def can_run(self, kind: str, chunk: int, stage: int) -> bool:
        n = self.count[stage][kind, chunk]
        if n >= self.m:
            return False
        if kind == F and chunk > 0:
            before = self.count[stage][F, chunk - 1]
        elif kind == B:
            last = chunk + 1 >= self.vpp
            before = self.count[stage][(F, self.vpp - 1) if last else (B, chunk + 1)]
        else:
            before = n + 1
        return before > n and self.ready_at(kind, chunk, stage, n) >= 0

    def fits_before(self, chunk: int, stage: int, deadline: int) -> bool:
        """Whether a forward of ``chunk`` would end on ``stage`` by ``deadline``."""
        ready = self.ready_at(F, chunk, stage, self.count[stage][F, chunk])
        return max(self.now[stage], ready + self.rt.hop) + self.runtime(F, stage, chunk) <= deadline

    def put(self, kind: str, chunk: int, stage: int) -> None:
        rt = self.runtime(kind, stage, chunk)
        mb = self.count[stage][kind, chunk]
        end = self.now[stage] + rt
        if kind != W:
            end = max(end, self.ready_at(kind, chunk, stage, mb) + self.rt.hop + rt)
        if self.count[stage][F, 0] > 0:
            self.bubble[stage] += end - self.now[stage] - rt
        self.end[kind, chunk, stage, mb] = end
        self.now[stage] = end
        self.jobs[stage].append(Op(kind, mb, chunk))  # type: ignore[arg-type]
        if kind == B:
            self.pending[stage].append((chunk, mb))
        self.count[stage][kind, chunk] += 1

    def put_weight(self, stage: int) -> None:
        chunk, _ = self.pending[stage].popleft()
        self.put(W, chunk, stage)

    def max_bubble(self, stage: int = -1, approved: list[int] | None = None) -> int:
        top = max(self.bubble)
        if stage >= 0 and approved is not None:
            top = max(top, max(approved) - approved[stage])
        return top

    # -- the phases -----------------------------------------------------------------

    def fill_forwards(
        self, stage: int, chunks: list[int], start: int, deadline: int, up: bool
    ) -> None:
        """Forwards into the gap before a job due at ``deadline`` on ``stage``, chunk by
        chunk in turn, on the stages between it and the pipeline's end it fills from."""
        chunk, fewest = start, 0
        stages = list(range(0, stage + 1))
        if up:
            fewest = self.forwards(0, chunks)
            stages = list(range(self.pp - 1, stage - 1, -1))
        while self.room_for_forwards(chunks, stages, deadline, fewest):
            for s in stages:
                if not self.can_run(F, chunk, s):
                    continue
                if self.forwards(s, chunks) >= fewest and not self.fits_before(chunk, s, deadline):
                    continue
                self.put(F, chunk, s)
            chunk = (chunk + 1) % len(chunks)

    def room_for_forwards(
        self, chunks: list[int], stages: list[int], deadline: int, fewest: int
    ) -> bool:
        last = stages[-1]
        if self.forwards(last, chunks) < fewest:
            return True
        if all(self.count[last][F, c] >= self.m for c in chunks):
            return False
        for c in chunks:
            for s in stages:
                if self.can_run(F, c, s) and (
                    self.forwards(s, chunks) < fewest or self.fits_before(c, s, deadline)
                ):
                    return True
        return False

    def fill_before(
        self, kind: str, chunk: int, chunks: list[int], up: bool, place_it: bool = True
    ) -> None:
        """Walk the stages in the direction of ``kind``/``chunk``'s data, filling each
        one's gap before it with forwards (and placing that job after, if asked)."""
        stages = list(range(self.pp)) if up else list(range(self.pp - 1, -1, -1))
        last = self.jobs[stages[0]][-1]
        due = self.end[last.kind, last.chunk, stages[0], last.micro_batch]
        if place_it:
            self.put(kind, chunk, stages[0])
        for s in stages[1:]:
            start = (self.jobs[s][-1].chunk + 1) % len(chunks)
            due = due + self.rt.hop + self.runtime(kind, s, chunk)
            self.fill_forwards(s, chunks, start, due, up)
            if place_it:
                self.put(kind, chunk, s)

    def warm_up(self) -> None:
        for s in range(self.pp):
            self.put(F, 0, s)
        self.fill_before(F, 1, [0], up=False)
        for chunk in range(2, self.vpp):
            self.fill_before(F, chunk, list(range(chunk)), up=(chunk - 1) % 2 == 1)
        chunks = list(range(self.vpp))
        self.fill_before(B, 0, chunks, up=(self.vpp - 1) % 2 == 1, place_it=False)

    def weights_into_gap(self, stage: int, ready: int, fraction: float = 1.0) -> None:
        """Pending weight passes while they end before the next job's input arrives."""
        while self.pending[stage]:
            w = self.runtime(W, stage, self.pending[stage][0][0])
            # Paddle's loss-stage rule compares with a fifth of the pass (a float there too).
            if ready + self.rt.hop < self.now[stage] + (w * fraction if fraction != 1.0 else w):
                return
            self.put_weight(stage)

    def next_job(
        self, kind: str, stage: int, chunks: range, fill_w: bool, fill_loss: bool,
        approved: list[int],
    ) -> None:  # fmt: skip
        """The first of ``chunks`` whose ``kind`` can run on ``stage``, after the weight
        passes the gap before it holds."""
        for c in chunks:
            if not self.can_run(kind, c, stage):
                continue
            ready = self.ready_at(kind, c, stage, self.count[stage][kind, c])
            self.weights_into_gap(stage, ready)
            if kind == B and stage == self.loss_stage and fill_loss:
                self.weights_into_gap(stage, ready, 0.2)
            room = self.max_bubble(stage, approved) - self.bubble[stage]
            if self.pending[stage] and ready + self.rt.hop - self.now[stage] > room and fill_w:
                self.put_weight(stage)
            self.put(kind, c, stage)
            return

    def steady(
        self, fill_w_before_f: bool, fill_w_before_b: bool, fill_loss: bool,
        approved: list[int],
    ) -> None:  # fmt: skip
        first = 0 if self.vpp % 2 == 0 else self.pp - 1
        order = list(range(self.pp)) if self.vpp % 2 == 0 else list(range(self.pp - 1, -1, -1))
        while sum(self.count[first][B, c] for c in range(self.vpp)) < self.vpp * self.m:
            for s in order:
                self.next_job(B, s, range(self.vpp), fill_w_before_b, fill_loss, approved)
            for s in order:
                self.next_job(F, s, range(self.vpp - 1, -1, -1), fill_w_before_f, False, approved)
        for s in range(self.pp):
            while self.pending[s]:
                self.put_weight(s)


def _run(
    pp: int, m: int, vpp: int, rt: Runtimes, rules: tuple[bool, bool, bool],
    approved: list[int] | None = None,
) -> tuple[list[list[Op]], int]:  # fmt: skip
    """``create_v_schedule``: one greedy, re-run with its bubbles as the allowance while
    the largest bubble shrinks; the jobs and the model's makespan of the best."""
    fill_w_before_f, fill_w_before_b, fill_loss = rules
    g = _Greedy(pp, m, vpp, rt)
    allowed = approved if approved is not None else [-1] * pp
    g.warm_up()
    g.steady(fill_w_before_f, fill_w_before_b, fill_loss, allowed)
    makespan, top = max(g.end.values()), g.max_bubble()
    if max(allowed) < 0 or top < max(allowed):
        jobs, again = _run(pp, m, vpp, rt, rules, g.bubble)
        if again < makespan:
            return jobs, again
    return g.jobs, makespan


def zbvpp_orders(
    pp: int, micro_batches: int, vpp: int = 2, runtimes: Runtimes = PADDLE_RUNTIMES
) -> tuple[tuple[Op, ...], ...]:
    """Every stage's order as Paddle's ZBVPP builds it: the shortest of its eight rule
    combinations (the first on a tie), in its own order of trying them."""
    check_zbvpp(pp, micro_batches)
    best: tuple[list[list[Op]], int] | None = None
    for before_b in (True, False):
        for before_f in (True, False):
            for loss in (True, False):
                found = _run(pp, micro_batches, vpp, runtimes, (before_f, before_b, loss))
                if best is None or found[1] < best[1]:
                    best = found
    assert best is not None
    return tuple(tuple(jobs) for jobs in best[0])
