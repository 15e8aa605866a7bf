"""A real step profiled beside the stages timed alone: what the runtime adds to each action.

This module's one job is reading a profiled step of a torch pipeline (torch's
`ProfilerStep#N` events, the runtime's `PP:` events inside them) against the same stages'
timings alone, which `vppctl.planner.importers` reads. Isolated timings miss what the
runtime does around each action (its bookkeeping before and after the stage's compute,
the Python between actions, caches cold after another stage ran); the step shows it, but
its spans also hold waits for messages. So each action of the step is measured where no
wait can hide in it:

* an action that cannot have waited (its input was made on its own rank: a forward of the
  first stage or after a stage on the same rank, a backward (B or I) of the last stage or
  before a stage on the same rank, every weight gradient W) by its slot: the time from the
  end of the rank's previous `PP:` event in the step to its end;
* any other action from its first op (the trace's `cpu_op` events: the compute begins when
  the wait is over) to its end, where the trace records ops.

Its overhead is that time less its stage's median alone; per stage and kind the median of
them, and per kind the median over every stage (for the stages whose actions of that kind
the step could not measure). A post (RECV_F, SEND_F, ...) never waits: its time in the
step is its slot. Processes are ranks (the events' `pid`); their clocks are not compared.
"""

from __future__ import annotations

import bisect
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

from vppctl.planner.measured import Timing, median_seconds

ACTION_EVENT = re.compile(r"PP:(\d+)([FBIW])(\d+)")
# The runtime's own point-to-point posts around a stage's actions (`_PipelineScheduleRuntime`
# runs each as an action of the rank's order): RECV_F before and SEND_F after its forward,
# RECV_B before and SEND_B after its backward (or input gradient).
POST_EVENT = re.compile(r"PP:(\d+)(SEND_F|RECV_F|SEND_B|RECV_B)(\d+)")


@dataclass(frozen=True)
class Span:
    """One complete ("X") event of a Chrome trace; times in microseconds."""

    name: str
    cat: str
    ts: float
    dur: float
    pid: str = ""  # the process (a rank) the event ran in

    @property
    def end(self) -> float:
        return self.ts + self.dur


Windows = Mapping[str, Sequence[tuple[float, float]]]


def step_windows(spans: Sequence[Span]) -> dict[str, list[tuple[float, float]]]:
    """Per process, its profiled steps (`ProfilerStep#N` events) as (start, end), in order."""
    windows: dict[str, list[tuple[float, float]]] = {}
    for s in spans:
        if s.name.startswith("ProfilerStep#"):
            windows.setdefault(s.pid, []).append((s.ts, s.end))
    for w in windows.values():
        w.sort()
    return windows


def _step_of(windows: Windows, span: Span) -> int | None:
    mine = windows.get(span.pid, ())
    i = bisect.bisect_right(mine, (span.ts, math.inf)) - 1
    return i if i >= 0 and mine[i][0] <= span.ts < mine[i][1] else None


def inside(windows: Windows, span: Span) -> bool:
    """Whether `span` began inside one of its process's profiled steps."""
    return _step_of(windows, span) is not None


@dataclass(frozen=True)
class Slot:
    """One action or post of the step: its time there (microseconds) and whether a wait
    may hide in it."""

    stage: int
    kind: str  # F, B, I, W, SEND_F, ...
    time: float
    from_first_op: bool  # timed from its first op: it could have waited


def slots(spans: Sequence[Span], windows: Windows) -> list[Slot]:
    """Every `PP:` action and post inside a profiled step, timed as the module says (an
    action that could have waited and has no op inside is left out)."""
    stepped = sorted(
        (s for s in spans if s.name.startswith("PP:") and inside(windows, s)),
        key=lambda s: (s.pid, s.ts),
    )
    ops: dict[str, list[float]] = {}  # per process, its ops' start times, sorted
    for s in spans:
        if s.cat == "cpu_op":
            ops.setdefault(s.pid, []).append(s.ts)
    for starts in ops.values():
        starts.sort()
    held: dict[str, set[int]] = {}
    matched = []
    for span in stepped:
        m = ACTION_EVENT.fullmatch(span.name) or POST_EVENT.fullmatch(span.name)
        matched.append(m)
        if m is not None and len(m[2]) == 1:
            held.setdefault(span.pid, set()).add(int(m[1]))
    last = max((max(h) for h in held.values()), default=0)
    out: list[Slot] = []
    previous: dict[tuple[str, int | None], float] = {}  # (process, step) -> last event's end
    for span, m in zip(stepped, matched):
        key = (span.pid, _step_of(windows, span))
        before = previous.get(key)
        previous[key] = max(span.end, before or span.end)
        if m is None:  # UNSHARD, REDUCE_GRAD, ...: their time is no action's
            continue
        stage, kind = int(m[1]), m[2]
        slot = span.dur + (0.0 if before is None else max(0.0, span.ts - before))
        if len(kind) > 1 or _could_not_wait(stage, kind, held[span.pid], last):
            out.append(Slot(stage, kind, slot, False))
            continue
        starts = ops.get(span.pid, [])
        i = bisect.bisect_left(starts, span.ts)
        if i < len(starts) and starts[i] < span.end:
            out.append(Slot(stage, kind, span.end - starts[i], True))
    return out


def _could_not_wait(stage: int, kind: str, held: set[int], last: int) -> bool:
    if kind == "F":
        return stage == 0 or stage - 1 in held
    if kind in ("B", "I"):
        return stage == last or stage + 1 in held
    return True  # W: its inputs are the stage's own


def posted(found: Sequence[Slot]) -> dict[tuple[int, str], list[float]]:
    """Per (stage, post kind), the posts' times in the step."""
    out: dict[tuple[int, str], list[float]] = {}
    for s in found:
        if len(s.kind) > 1:
            out.setdefault((s.stage, s.kind), []).append(s.time)
    return out


@dataclass(frozen=True)
class Overhead:
    """What the runtime adds to an action, seconds: per (stage, kind) where the step
    measured that stage's actions of the kind, and per kind over every stage."""

    per_stage: Mapping[tuple[int, str], Fraction]
    per_kind: Mapping[str, Fraction]
    counts: Mapping[str, tuple[int, int]]  # per kind: actions read, of them from first op

    def of(self, stage: int, kind: str) -> Fraction | None:
        return self.per_stage.get((stage, kind), self.per_kind.get(kind))

    def folded(self, stage: int, t: Timing) -> Timing:
        """`t` with the overhead of each action the stage runs: the forward; a whole
        backward (B), or where the weight gradient is apart the input gradient (I), the
        weight gradient (W) and a whole backward timed apart. A kind the step did not
        run is made of the others: B of I + W, I and W of half a B each. Never below 0."""
        zero = Fraction(0)
        o_f, o_b = self.of(stage, "F") or zero, self.of(stage, "B")
        o_i, o_w = self.of(stage, "I"), self.of(stage, "W")
        if o_i is None and o_w is None:
            o_i = o_w = (o_b or zero) / 2
        o_i, o_w = o_i or zero, o_w or zero
        if o_b is None:
            o_b = o_i + o_w
        if t.weight is None:
            return replace(t, forward=_floor(t.forward + o_f), backward=_floor(t.backward + o_b))
        return replace(
            t,
            forward=_floor(t.forward + o_f),
            backward=_floor(t.backward + o_i),
            weight=_floor(t.weight + o_w),
            full=None if t.full is None else _floor(t.full + o_b),
        )

    def notes(self) -> list[str]:
        if not self.per_kind:
            return [
                "the profiled step has no action timed without a wait (none that could not "
                "wait, and no ops recorded inside the others): no per-action overhead read"
            ]
        shown = ", ".join(
            f"{kind} {float(o) * 1000:+.3f} ms ({self.counts[kind][0]})"
            for kind, o in self.per_kind.items()
        )
        waited = sum(n for _, n in self.counts.values())
        return [
            f"per-action overhead read from the profiled step: {shown} (the median over the "
            "actions in brackets of each one's time in the step less its stage's time "
            f"alone; {waited} of them timed from their first op, after any wait); each "
            "stage's actions take their own stage's where the step measured it, else the kind's"
        ]


def overhead(found: Sequence[Slot], alone: Mapping[tuple[int, str], Sequence[float]]) -> Overhead:
    """The overhead of the step's actions (`slots`) over the medians timed alone."""
    median = {key: statistics.median(values) for key, values in alone.items() if values}
    excess: dict[tuple[int, str], list[float]] = {}
    for s in found:
        base = median.get((s.stage, s.kind))
        if base is None and s.kind == "B" and (s.stage, "I") in median:
            base = median[(s.stage, "I")] + median.get((s.stage, "W"), 0.0)
        if len(s.kind) == 1 and base is not None:
            excess.setdefault((s.stage, s.kind), []).append(s.time - base)
    per_stage = {key: median_seconds(values, "us") for key, values in sorted(excess.items())}
    kinds: dict[str, list[float]] = {}
    counts: dict[str, tuple[int, int]] = {}
    for s in found:
        if (s.stage, s.kind) in excess:
            n, waited = counts.get(s.kind, (0, 0))
            counts[s.kind] = (n + 1, waited + s.from_first_op)
    for (_, kind), values in excess.items():
        kinds.setdefault(kind, []).extend(values)
    per_kind = {kind: median_seconds(values, "us") for kind, values in sorted(kinds.items())}
    return Overhead(per_stage, per_kind, counts)


def _floor(value: Fraction) -> Fraction:
    return max(value, Fraction(0))
