"""`vppctl/schedule/runtimes.py`: each runtime's rules, on both sides of every boundary.

Three sources say where a boundary is: the runtimes' own code, run at the boundaries
(tests/data/runtimes/: Paddle 3.0.0's and 3.3.1's job-list builders, torch 2.13's schedule
constructors, written by tests/support/runtime_probes.py; Paddle 3.3.1's builders again live
with the `paddle` extra); the orders the references themselves produced
(tests/data/schedules.json: every case there ran in its runtime, so its rules accept it);
and a table with a case on each side of every rule. Each rule cites its source (file and
function), and docs/plan.md lists them all.
"""

from __future__ import annotations

import json

import paths
import pytest

from vppctl.choices import RUNTIMES, SCHEDULES, Placement
from vppctl.errors import ConversionError
from vppctl.plan import keep_sizes
from vppctl.planner import pir_split
from vppctl.schedule import ScheduleRefused
from vppctl.schedule.execute import Pipeline
from vppctl.schedule.runtimes import (
    HOME,
    RULE,
    RULES,
    RUNTIME_SCHEDULES,
    Counts,
    check_runtime,
    comparison,
    default_group_size,
    not_in_runtime,
    pir_split_rule,
    preflight,
    runtime_line,
    split_refusal,
)

RUNTIME_DATA = paths.DATA / "runtimes"
PADDLE = {"FThenB": "fthenb", "1F1B": "1f1b", "Eager1F1B": "eager1f1b", "ZBH1": "zbh1"}
PADDLE |= {"VPP": "vpp", "ZBVPP": "zbvpp"}


def refused(runtime: str, counts: Counts) -> ScheduleRefused | None:
    return preflight(runtime, counts)[0]  # type: ignore[arg-type]


def probe(name: str) -> dict:  # type: ignore[type-arg]
    return json.loads((RUNTIME_DATA / f"{name}.json").read_text())  # type: ignore[no-any-return]


# -- against the runtimes' own code ---------------------------------------------------


@pytest.mark.parametrize(("version", "runtime"), [("3.0.0", "paddle"), ("3.3.1", "paddle-pir")])
def test_paddles_rules_are_its_job_list_builders(version: str, runtime: str) -> None:
    """Every (schedule_mode, pp, vpp, m <= 3pp) Paddle's own builder refuses, vppctl refuses
    under its rules, and nothing else; where Paddle says why, vppctl quotes it."""
    data = probe(f"paddle-{version}")
    assert data["paddle"] == version
    checked = 0
    for row in data["rows"]:
        schedule = PADDLE[row["mode"]]
        if schedule not in RUNTIME_SCHEDULES[runtime]:
            assert runtime == "paddle-pir"  # its builder exists, its PIR engine never runs it
            continue
        pp, vpp = row["pp"], row["vpp"]
        placement = "v" if schedule == "zbvpp" else "loop"
        for m in range(1, 3 * pp + 1):
            said = row["refused"].get(str(m))
            got = refused(runtime, Counts(schedule, pp, vpp, m, placement))
            assert (got is not None) == (said is not None), (row["mode"], pp, vpp, m, said)
            words = said and said.split(": ", 1)[1].rsplit(" (stage", 1)[0]
            if got is not None and words:
                assert words in str(got), (words, str(got))
            checked += 1
    assert checked >= 108  # m = 1..3pp on pp 2, 3, 4 for every mode the runtime runs


TORCH = {
    "GPipe": ("fthenb", 1, "loop"),
    "1F1B": ("1f1b", 1, "loop"),
    "Interleaved1F1B_v2": ("interleaved", 2, "loop"),
    "InterleavedZB_v2": ("interleaved-zb", 2, "loop"),
    "InterleavedZB_v1": ("zb1p", 1, "loop"),
    "ZBV": ("zbv", 2, "v"),
    "DualPipeV": ("dualpipev", 2, "v"),
}


def test_torchs_rules_are_its_schedule_constructors() -> None:
    data = probe("torch-2.13")
    assert data["torch"].startswith("2.13")
    for case in data["cases"]:
        pp, m = case["pp"], case["m"]
        for name, (schedule, vpp, placement) in TORCH.items():
            got = refused("torch", Counts(schedule, pp, vpp, m, placement))  # type: ignore[arg-type]
            assert (got is None) == (case[name] == "ok"), (name, pp, m, case[name])
    assert len(data["cases"]) == 42


def test_every_order_a_reference_produced_passes_its_runtimes_rules() -> None:
    """tests/data/schedules.json: each case ran in its runtime (Megatron-Core 0.16.1 with
    every legal group size, torch 2.13, Paddle 3.3.1): its rules accept every one."""
    cases = json.loads(paths.SCHEDULE_GOLDENS.read_text())["cases"]
    runtime = {"megatron": "megatron", "torch": "torch", "paddle": "paddle"}
    checked = 0
    for c in cases:
        schedule, pp, vpp, m = c["schedule"], c["pp"], c["vpp"], c["m"]
        placement = "v" if schedule in ("zbv", "dualpipev", "zbvpp") else "loop"
        group = (
            c["group_size"] if schedule == "interleaved" and c["reference"] == "megatron" else None
        )
        counts = Counts(schedule, pp, vpp, m, placement, group)
        if schedule in RUNTIME_SCHEDULES[runtime[c["reference"]]]:
            assert refused(runtime[c["reference"]], counts) is None, c
            checked += 1
    assert checked > 1000


@pytest.mark.paddle
@pytest.mark.parametrize(
    ("mode", "pp", "m_refused", "m_runs"),
    [
        ("FThenB", 4, None, 1),
        ("1F1B", 4, 3, 4),
        ("VPP", 4, 3, 4),
        ("ZBH1", 3, 2, 3),
        ("Eager1F1B", 3, 4, 5),
        ("ZBVPP", 4, 5, 4),
    ],
)
def test_paddle_3_3_1_itself_on_both_sides(
    mode: str, pp: int, m_refused: int | None, m_runs: int
) -> None:
    """The installed Paddle's own builders (the test extra, 3.3.1), live: each side of the
    boundary as vppctl's rule says."""
    from runtime_probes import paddle_refusals

    refusals = paddle_refusals(mode, pp, 2 if mode in ("VPP", "ZBVPP") else 1, pir=True)
    assert str(m_runs) not in refusals
    if m_refused is not None:
        assert str(m_refused) in refusals
    runtime = "paddle-pir" if PADDLE[mode] in RUNTIME_SCHEDULES["paddle-pir"] else "paddle"
    placement = "v" if mode == "ZBVPP" else "loop"
    vpp = 2 if mode in ("VPP", "ZBVPP") else 1
    assert refused(runtime, Counts(PADDLE[mode], pp, vpp, m_runs, placement)) is None  # type: ignore[arg-type]
    if m_refused is not None:
        assert refused(runtime, Counts(PADDLE[mode], pp, vpp, m_refused, placement)) is not None  # type: ignore[arg-type]


# -- each rule, both sides ----------------------------------------------------------

# rule -> (runtime, counts it refuses or notes, counts on the other side)
C = Counts
BOTH_SIDES: dict[str, tuple[str, Counts | None, Counts]] = {
    "P1": ("paddle", C("interleaved", 4, 2, 8), C("vpp", 4, 2, 8)),
    "P2": ("paddle", None, C("fthenb", 4, 1, 1)),
    "P3": ("paddle", C("1f1b", 4, 1, 3), C("1f1b", 4, 1, 4)),
    "P4": ("paddle", C("eager1f1b", 4, 1, 6), C("eager1f1b", 4, 1, 7)),
    "P5": ("paddle", C("zbh1", 4, 1, 3), C("zbh1", 4, 1, 4)),
    "P6": ("paddle", C("zbvpp", 4, 2, 8, "v"), C("zbvpp", 4, 2, 4, "v")),
    "P7": ("paddle", C("vpp", 4, 2, 3), C("vpp", 4, 2, 4)),
    "P8": ("paddle", C("vpp", 4, 3, 5), C("vpp", 4, 3, 8)),
    "P9": ("paddle", C("1f1b", 4, 2, 8), C("1f1b", 4, 1, 8)),
    "P13": ("paddle", C("vpp", 4, 2, 6), C("vpp", 4, 2, 8)),
    "P14": ("paddle", C("vpp", 1, 2, 4), C("vpp", 2, 2, 4)),
    "R1": ("paddle-pir", C("zbh1", 4, 1, 8), C("1f1b", 4, 1, 8)),
    "R2": ("paddle-pir", None, C("fthenb", 4, 1, 1)),
    "R3": ("paddle-pir", C("1f1b", 4, 1, 3), C("1f1b", 4, 1, 4)),
    "R4": ("paddle-pir", C("vpp", 4, 2, 3), C("vpp", 4, 2, 4)),
    "R5": ("paddle-pir", C("fthenb", 4, 2, 8), C("fthenb", 4, 1, 8)),
    "R14": ("paddle-pir", C("vpp", 1, 2, 4), C("vpp", 2, 2, 4)),
    "M0": ("megatron", C("zbv", 4, 2, 8, "v"), C("interleaved", 4, 2, 8)),
    "M1": ("megatron", C("interleaved", 4, 2, 3), C("interleaved", 4, 2, 4)),
    "M2": ("megatron", C("interleaved", 4, 2, 6), C("interleaved", 4, 2, 8)),
    "M4": ("megatron", None, C("1f1b", 4, 1, 1)),
    "M6": ("megatron", C("interleaved", 1, 2, 4), C("interleaved", 2, 2, 4)),
    "T9": ("torch", C("vpp", 4, 2, 8), C("interleaved", 4, 2, 8)),
    "T1": ("torch", None, C("fthenb", 4, 1, 1)),
    "T2": ("torch", C("1f1b", 4, 1, 3), C("1f1b", 4, 1, 4)),
    "T3": ("torch", C("interleaved", 4, 2, 9), C("interleaved", 4, 2, 10)),
    "T4": ("torch", C("interleaved-zb", 4, 2, 9), C("interleaved-zb", 4, 2, 7)),
    "T5": ("torch", None, C("zbv", 4, 2, 1, "v")),
    "T6": ("torch", C("dualpipev", 4, 2, 7, "v"), C("dualpipev", 4, 2, 8, "v")),
}


# The rules that take any m: no boundary to be on either side of.
ANY_M = {"P2", "R2", "M4", "T1", "T5"}


# Paddle PIR's rules on the split (R6-R8): (held layers per stage, vpp, placement, layers per
# segment) it refuses, and the same on the other side. R6 binds on `--split keep`, the one
# split that keeps the program's stage meshes: its layers per segment are keep's own.
SPLIT_SIDES: dict[str, tuple[tuple[tuple[int, ...], int, Placement], ...]] = {
    "R6": (((7, 5), 6, "loop"), ((7, 5), 5, "loop")),
    "R7": (((2, 2), 2, "v"), ((2, 2), 2, "loop")),
    "R8": (((7, 5), 2, "loop"), ((7, 5), 2, "loop")),
}
R8_SEGMENTS = ((3, 3, 4, 2), (4, 3, 3, 2))  # stage 0's 7 layers as 3+4, then as dealt 4+3


def test_every_rule_has_a_case_on_each_side() -> None:
    assert set(BOTH_SIDES) | set(SPLIT_SIDES) == set(RULE)
    assert {r.id for r in RULES if r.split} == set(SPLIT_SIDES)
    for rule in RULES:
        if rule.split:
            assert rule.breaks is None and rule.refuses
            continue
        assert (BOTH_SIDES[rule.id][1] is None) == (rule.id in ANY_M), rule.id
        assert rule.id not in ANY_M or rule.breaks is None


def _deadlocks(c: Counts) -> bool:
    try:
        Pipeline.of(c.schedule, c.pp, c.vpp, c.m, placement=c.placement)
    except ScheduleRefused:
        return True
    return False


@pytest.mark.parametrize("rule_id", sorted(BOTH_SIDES))
def test_each_rule_on_both_sides_of_its_boundary(rule_id: str) -> None:
    rule = RULE[rule_id]
    runtime, broken, kept = BOTH_SIDES[rule_id]
    assert rule.runtime == runtime
    if rule_id == "P8":  # a hang: the simulator finds the cycle in Paddle's own job list
        assert broken is not None and _deadlocks(broken) and not _deadlocks(kept)
        assert refused(runtime, broken) is None  # no count rule says it: only the run
        return
    got, notes = preflight(runtime, kept)  # type: ignore[arg-type]
    assert got is None and rule not in notes
    if broken is None:  # "any m": no boundary; the smallest m runs
        assert kept.m == 1
        return
    got, notes = preflight(runtime, broken)  # type: ignore[arg-type]
    if rule.refuses:
        assert got is not None and got.reason.startswith(f"{rule_id}: "), (got, notes)
        message = str(got)
        assert f"rule {rule_id} (" in message
        assert rule.source.rsplit("/", 1)[-1] in message  # file and function
        assert not rule.words or rule.words.split("...")[0] in message  # the runtime's words
        fix = rule.fix(broken)
        assert fix and fix in message
        assert "--runtime any" in message
    else:
        assert got is None and rule in notes
        assert rule.source.rsplit("/", 1)[-1] in check_runtime(runtime, broken)[0]  # type: ignore[arg-type]


def _segments(
    rule_id: str, side: int, held: tuple[int, ...], vpp: int, placement: Placement
) -> tuple[int, ...]:
    if rule_id == "R8":
        return R8_SEGMENTS[side]
    layer_stages = [s for s, n in enumerate(held) for _ in range(n)]
    return tuple(keep_sizes(layer_stages, len(held), vpp, placement))


@pytest.mark.parametrize("rule_id", sorted(SPLIT_SIDES))
def test_each_split_rule_on_both_sides_of_its_boundary(rule_id: str) -> None:
    """R6-R8, on the plan's layers per stage and chunk: vppctl's reading of Paddle PIR's
    completion (`vppctl.planner.pir.pir_split`, and `--split keep`, which keeps the stage
    meshes) refuses one side and takes the other, and the refusal names the rule, its
    source and words, and the fix."""
    rule = RULE[rule_id]
    (held, vpp, placement), (held2, vpp2, placement2) = SPLIT_SIDES[rule_id]
    # the side it takes
    kept = pir_split(
        len(held2), vpp2, placement2, _segments(rule_id, 1, held2, vpp2, placement2), held2
    )
    assert kept.takes, kept.reason
    # the side it refuses
    if rule_id == "R6":  # keep cannot deal a stage of 5 layers over 6 chunks
        layer_stages = [s for s, n in enumerate(held) for _ in range(n)]
        with pytest.raises(ConversionError, match="needs at least vpp = 6 layers on every stage"):
            keep_sizes(layer_stages, len(held), vpp, placement)
        assert pir_split_rule(placement, vpp, held) is rule
        assert pir_split_rule(placement2, vpp2, held2) is RULE["R8"]  # not R6
        why = "stage 1 holds 5 layers"
    else:
        broken = pir_split(
            len(held), vpp, placement, _segments(rule_id, 0, held, vpp, placement), held
        )
        assert broken.reason is not None
        assert pir_split_rule(placement, vpp, broken.stage_layers) is rule
        why = broken.reason
    message = str(split_refusal(rule, why))
    assert f"rule {rule_id} (" in message and rule.source.rsplit("/", 1)[-1] in message
    assert not rule.words or rule.words in message
    assert why in message and "--runtime any" in message
    assert split_refusal(rule, why).reason.startswith(f"{rule_id}: ")


def test_every_rule_is_cited_in_docs_plan() -> None:
    text = (paths.DOCS / "plan.md").read_text()
    for rule in RULES:
        assert f"| {rule.id} |" in text and rule.source in text, rule.id


# -- the runtimes' schedules, defaults and the header ------------------------------


def test_each_runtime_runs_its_own_schedules_and_any_runs_all() -> None:
    assert RUNTIME_SCHEDULES["any"] == SCHEDULES
    assert set(HOME) == set(SCHEDULES) and set(RUNTIME_SCHEDULES) == set(RUNTIMES)
    for runtime, schedules in RUNTIME_SCHEDULES.items():
        for schedule in SCHEDULES:
            missing = not_in_runtime(runtime, schedule)  # type: ignore[arg-type]
            assert (missing is None) == (schedule in schedules)
            if missing:
                assert "--runtime any" in missing and ", ".join(schedules) in missing
    for schedule, home in HOME.items():
        assert schedule in RUNTIME_SCHEDULES[home]


def test_under_any_each_schedule_keeps_its_home_runtimes_rules() -> None:
    # Megatron's 1F1B takes any m; its interleaved refuses pp 4, m 7 (the default N = pp)
    assert refused("any", C("1f1b", 4, 1, 2)) is None
    assert refused("any", C("interleaved", 4, 2, 7)) is not None
    # which torch runs, with its own group of 7
    assert refused("torch", C("interleaved", 4, 2, 7)) is None
    assert default_group_size("torch", "interleaved", 4, 7) == 7
    assert default_group_size("megatron", "interleaved", 4, 7) is None  # the default pp


def test_the_default_comparison_is_the_runtimes_own() -> None:
    assert comparison("paddle", 2, "loop") == ("1f1b", "vpp")
    assert comparison("paddle", 2, "v") == ("1f1b", "zbvpp")
    assert comparison("paddle-pir", 2, "v") == ("1f1b",)
    assert comparison("megatron", 2, "loop") == ("1f1b", "interleaved")
    assert comparison("torch", 2, "v") == ("1f1b", "zbv")
    assert comparison("any", 1, "loop") == ("1f1b",)
    assert comparison("any", 3, "v") == ("1f1b",)


def test_the_header_names_the_runtime_and_how_to_widen_it() -> None:
    line = runtime_line("paddle")
    assert "Paddle 3.0.0" in line and "fthenb, 1f1b, eager1f1b, vpp, zbh1, zbvpp" in line
    assert "--runtime any" in line
    assert "--runtime paddle, paddle-pir, megatron or torch keeps to one" in runtime_line("any")
