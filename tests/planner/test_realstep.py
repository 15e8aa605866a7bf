"""A real step profiled beside timings alone (vppctl/planner/realstep.py): each action's
time in the step where no wait can hide in it, its overhead over its time alone per stage
and kind, and how it folds into the costs each schedule's actions run."""

from __future__ import annotations

import json
import re
from collections import Counter
from fractions import Fraction
from pathlib import Path
from typing import Any

import paths
import pytest

from vppctl.planner.importers import read_costs
from vppctl.planner.measured import MeasuredCosts, Timing
from vppctl.planner.realstep import Overhead

TORCH_ISOLATED = paths.MEASURED / "torch-isolated-pp2-v2.json"
TORCH_STEP = paths.MEASURED / "torch-zbv-step-pp2.json"


def read(path: Path) -> MeasuredCosts:
    found = read_costs(str(path))
    assert isinstance(found, MeasuredCosts)
    return found


def write(tmp_path: Path, events: list[Any]) -> Path:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


# Placements of four virtual stages on two ranks ("a", "b"), and of two.
OWNERS = {
    "pp 2": {0: "a", 1: "b"},
    "loop pp 2 vpp 2": {0: "a", 1: "b", 2: "a", 3: "b"},
    "V pp 2": {0: "a", 1: "b", 2: "b", 3: "a"},
}
ALONE_US = {"F": 1000, "B": 2000, "I": 1200, "W": 800}
GAP, FREE, WAITED = 10, 100, 5000  # us: between events; excess of free and waiting actions


def could_not_wait(owner: dict[int, str], stage: int, kind: str) -> bool:
    """The rule as the issue states it: an action cannot have waited for a message when
    its input was made on its own rank."""
    last = max(owner)
    if kind == "F":
        return stage == 0 or owner[stage - 1] == owner[stage]
    if kind in ("B", "I"):
        return stage == last or owner[stage + 1] == owner[stage]
    return True  # W


def stepped_trace(owner: dict[int, str], kinds: str, micro_batches: int = 2) -> list[Any]:
    """Each stage timed alone (outside any step), then one profiled step per rank: an
    UNSHARD first, then each action GAP after the previous one, lasting its time alone plus
    FREE where it could not wait and WAITED where it could."""
    events: list[Any] = []
    for stage, pid in owner.items():
        for kind in kinds:
            for mb in range(3):
                name = f"PP:{stage}{kind}{mb}"
                events.append(
                    {"ph": "X", "name": name, "ts": mb, "dur": ALONE_US[kind], "pid": pid}
                )
    for pid in sorted(set(owner.values())):
        start = 1_000_000
        events.append(
            {"ph": "X", "name": "ProfilerStep#1", "ts": start, "dur": 900_000, "pid": pid}
        )
        events.append({"ph": "X", "name": "PP:0UNSHARD", "ts": start + 5, "dur": 5, "pid": pid})
        cursor = start + 10
        for stage in (s for s, p in owner.items() if p == pid):
            for kind in kinds:
                for mb in range(micro_batches):
                    excess = FREE if could_not_wait(owner, stage, kind) else WAITED
                    ts, dur = cursor + GAP, ALONE_US[kind] + excess
                    events.append(
                        {
                            "ph": "X",
                            "name": f"PP:{stage}{kind}{mb}",
                            "ts": ts,
                            "dur": dur,
                            "pid": pid,
                        }
                    )
                    cursor = ts + dur
    return events


@pytest.mark.parametrize("placement", OWNERS)
@pytest.mark.parametrize("kinds", ["FB", "FIW"])
def test_the_overhead_is_read_from_the_actions_that_could_not_wait(
    tmp_path: Path, placement: str, kinds: str
) -> None:
    """Per kind, the median of slot (gap + span) less the time alone, over exactly the
    actions whose input was made on their own rank; costs still from the times alone."""
    owner = OWNERS[placement]
    costs = read(write(tmp_path, stepped_trace(owner, kinds)))
    free = Counter(k for s in owner for k in kinds if could_not_wait(owner, s, k))
    assert costs.overhead == {k: Fraction(GAP + FREE, 10**6) for k in sorted(free)}
    (said,) = [n for n in costs.notes if n.startswith("per-action overhead")]
    for kind, n in free.items():
        assert f"{kind} +0.110 ms ({2 * n})" in said  # two micro-batches each
    # every stage's every action: its time alone and the overhead (its own where the step
    # measured it, else the kind's: here both GAP + FREE)
    assert set(costs.timings) == set(owner)
    o = Fraction(GAP + FREE, 10**6)
    for timing in costs.timings.values():
        assert timing.forward == Fraction(ALONE_US["F"], 10**6) + o
        if kinds == "FB":
            assert timing.backward == Fraction(ALONE_US["B"], 10**6) + o
        else:
            assert timing.backward == Fraction(ALONE_US["I"], 10**6) + o
            assert timing.weight == Fraction(ALONE_US["W"], 10**6) + o
    assert any("timed alone" in n for n in costs.notes)


def test_a_post_in_the_step_is_its_time_there_and_the_first_event_has_no_gap(
    tmp_path: Path,
) -> None:
    events = stepped_trace(OWNERS["pp 2"], "FB")
    alone = {"ph": "X", "name": "PP:1RECV_F0", "ts": 0, "dur": 100, "pid": "b"}
    # b's step: the post is its first event (no gap counted), then one after a gap of 40
    events = [e for e in events if not (e["pid"] == "b" and e["name"] == "PP:0UNSHARD")]
    b_end = max(e["ts"] + e["dur"] for e in events if e["pid"] == "b" and e["name"][:3] == "PP:")
    first = {**alone, "ts": 1_000_001, "dur": 3}
    later = {**alone, "name": "PP:1RECV_F1", "ts": b_end + 40, "dur": 250}
    costs = read(write(tmp_path, [*events, alone, first, later]))
    # the median of the step's two slots (3 and 290), not the 100 timed alone; stage 1's
    # forwards waited (no op inside): the forward's overhead is the kind's
    posts = Fraction(3 + 290, 2 * 10**6)
    assert costs.timings[1].forward == Fraction(ALONE_US["F"], 10**6) + posts + costs.overhead["F"]


def test_a_trace_of_the_step_alone_reads_its_spans_and_says_they_read_high(
    tmp_path: Path,
) -> None:
    events = [e for e in stepped_trace(OWNERS["pp 2"], "FB") if e["ts"] >= 1_000_000]
    costs = read(write(tmp_path, events))
    assert costs.overhead == {}
    assert costs.timings[1].forward == Fraction(ALONE_US["F"] + WAITED, 10**6)
    assert any("inside a profiled step" in n and "read high" in n for n in costs.notes)


def test_a_real_zbv_step_beside_timings_alone_gives_f_i_and_w_overheads(tmp_path: Path) -> None:
    """torch's own trace: rank 0 holds stages 0 and 3, rank 1 stages 1 and 2 (V): the
    forwards of 0 and 2, the input gradients of 3 and 1, and every W could not wait."""
    alone = json.loads(TORCH_ISOLATED.read_text())["traceEvents"]
    step = json.loads(TORCH_STEP.read_text())["traceEvents"]
    costs = read(write(tmp_path, alone + step))
    assert set(costs.overhead) == {"F", "I", "W"}
    owner = {0: "a", 1: "b", 2: "b", 3: "a"}
    in_steps = Counter()
    for e in step:
        got = re.fullmatch(r"PP:(\d+)([FIW])\d+", e.get("name", ""))
        if e.get("ph") == "X" and got and could_not_wait(owner, int(got[1]), got[2]):
            in_steps[got[2]] += 1
    (said,) = [n for n in costs.notes if n.startswith("per-action overhead")]
    for kind, n in in_steps.items():
        assert re.search(rf"{kind} [+-]\d+\.\d+ ms \({n}\)", said)
    # the costs are the times alone with the step's posts (none alone) and overheads
    for stage, alone_timing in read(TORCH_ISOLATED).timings.items():
        assert costs.timings[stage] != alone_timing


def test_an_action_that_could_wait_is_timed_from_its_first_op(tmp_path: Path) -> None:
    """pp 2: stage 1's forwards and stage 0's backwards wait on the other rank. With ops
    recorded inside them, each is timed from its first op (the wait is before it) and its
    stage gets its own overhead; without ops the stage takes the kind's."""
    events = stepped_trace(OWNERS["pp 2"], "FB")
    waiting = [e for e in events if e["name"] in ("PP:1F0", "PP:1F1") and e["ts"] >= 10**6]
    for e in waiting:  # the wait, then an op: the last ALONE + 300 us of the span
        start = e["ts"] + e["dur"] - (ALONE_US["F"] + 300)
        events.append(
            {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "ts": start, "dur": 9, "pid": "b"}
        )
    costs = read(write(tmp_path, events))
    alone = Fraction(ALONE_US["F"], 10**6)
    assert costs.timings[1].forward == alone + Fraction(300, 10**6)  # its own
    assert costs.timings[0].forward == alone + Fraction(GAP + FREE, 10**6)
    # stage 0's backward waited and has no op: the kind's, read on stage 1 (the last)
    assert costs.timings[0].backward == Fraction(ALONE_US["B"] + GAP + FREE, 10**6)
    # per kind, the median over every stage: (110 + 300) / 2 for the forward
    assert costs.overhead == {"B": Fraction(GAP + FREE, 10**6), "F": Fraction(205, 10**6)}
    (said,) = [n for n in costs.notes if n.startswith("per-action overhead")]
    assert "F +0.205 ms (4)" in said and "2 of them timed from their first op" in said


MS = Fraction(1, 1000)


@pytest.mark.parametrize(
    ("timing", "overhead", "expected"),
    [
        # a whole backward measured, a whole backward's overhead
        (Timing(MS, 3 * MS), {"F": MS, "B": MS}, Timing(2 * MS, 4 * MS)),
        # a split backward, only a whole backward's overhead: half to each part, the
        # whole backward timed apart gets it whole
        (
            Timing(MS, 2 * MS, MS, None, 2 * MS),
            {"B": MS},
            Timing(MS, MS * 5 / 2, MS * 3 / 2, None, 3 * MS),
        ),
        # a split backward, each part's own; a whole backward timed apart: I + W
        (
            Timing(MS, 2 * MS, MS, None, 2 * MS),
            {"I": 3 * MS, "W": MS},
            Timing(MS, 5 * MS, 2 * MS, None, 6 * MS),
        ),
        # a whole backward, the parts' overheads: both on the one action
        (Timing(MS, 3 * MS), {"I": 3 * MS, "W": MS}, Timing(MS, 7 * MS)),
        # an overhead below the action's time leaves it at 0
        (Timing(MS, 3 * MS, MS), {"F": -2 * MS, "W": -2 * MS}, Timing(0 * MS, 3 * MS, 0 * MS)),
    ],
)
def test_each_action_gets_its_kinds_overhead_once(
    timing: Timing, overhead: dict[str, Fraction], expected: Timing
) -> None:
    assert Overhead({}, overhead, {}).folded(0, timing) == expected


def test_a_stages_own_overhead_comes_before_the_kinds() -> None:
    read = Overhead({(1, "F"): 2 * MS}, {"F": MS}, {})
    assert read.folded(1, Timing(MS, MS)).forward == 3 * MS
    assert read.folded(0, Timing(MS, MS)).forward == 2 * MS


def test_a_step_with_nothing_timed_without_a_wait_says_so(tmp_path: Path) -> None:
    """Only actions that could wait, and no ops recorded inside them: no overhead, said."""
    owner = OWNERS["pp 2"]
    events = [
        e
        for e in stepped_trace(owner, "FB")
        if e["ts"] < 10**6 or not _free_action(owner, e["name"])
    ]
    costs = read(write(tmp_path, events))
    assert costs.overhead == {}
    assert costs.timings[0].forward == Fraction(ALONE_US["F"], 10**6)
    assert any("no per-action overhead read" in n for n in costs.notes)


def _free_action(owner: dict[int, str], name: str) -> bool:
    got = re.fullmatch(r"PP:(\d+)([FBIW])\d+", name)
    return got is not None and could_not_wait(owner, int(got[1]), got[2])
