"""Paddle's PIR preconditions as `plan` models them, checked against Paddle's own code.

For each program of the PIR matrix (tests/data/pir_matrix/), `plan` searches every vpp,
placement, split and schedule (at m = 2 pp) and says of every candidate whether Paddle
3.3.1's PIR pipeline runs it (its strategy) or why not. Beside them, the same plans at
m = pp - 1, as `simulate` judges them (`plan` never offers m < pp). Each verdict is then
put to Paddle, in a child process in PIR mode (tests/support/pir_matrix_build.py
--agree): Paddle runs a candidate when

- its schedule has a Paddle schedule_mode that `pir_pass.pipeline_pass` takes (vppctl's
  `paddle_mode` maps vppctl's names to Paddle's), and that mode's own job-list builder
  accepts (pp, vpp, accumulate_steps) on every stage; and
- at vpp > 1, Paddle's `complete_chunk_id`, run on the model built with the layers the
  candidate puts on each stage mesh, succeeds and puts every layer on the candidate's
  stage and chunk.

Paddle's completion runs on every candidate, taken or refused (once per distinct model
and vpp). A contradiction is a candidate vppctl says Paddle runs that Paddle does not, or
one it says Paddle cannot run that Paddle does; there must be none. CI asks Paddle about
two programs (`CI`: the one whose refusal only Paddle's rank arithmetic shows, and one
it takes with uneven stages at vpp 3); VPPCTL_SLOW=1 about all of them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

import paths
import pir_matrix as pm
import pytest

from vppctl.plan import place
from vppctl.planner import PIR_MODES, PlanSearchOptions, search_plans
from vppctl.planner.launch import LaunchCandidate, paddle_mode
from vppctl.planner.pir import PirMismatch, candidate_strategy

pytestmark = pytest.mark.paddle

BUILDER = paths.SUPPORT / "pir_matrix_build.py"
CASES = list(pm.manifest()["cases"])
program, seg_method = pm.program, pm.user_seg_method


def _first(kind: str | None, predicate: object = lambda c: True) -> str:
    return next(
        c.name
        for c in pm.matrix()
        if c.refused_by_paddle == kind and predicate(c)  # type: ignore[operator]
    )


CI = (
    _first("rank_order"),
    _first(None, lambda c: c.layout == "uneven" and c.vpp == 3),
)


@dataclass(frozen=True)
class Verdict:
    """One candidate, what vppctl says of it, and what to ask Paddle."""

    candidate: LaunchCandidate
    runs: bool
    reason: str | None
    stage_layers: tuple[int, ...]  # the layers the candidate puts on each stage mesh
    places: tuple[tuple[int, int], ...]  # each layer's (stage, chunk), in program order
    mode: str | None  # Paddle's schedule_mode for its schedule, if any


def verdicts(name: str) -> list[Verdict]:
    c = pm.by_name()[name]
    m = 2 * c.pp
    # runtime any: every candidate, each with its verdict (Paddle's PIR runtime drops theirs)
    opts = PlanSearchOptions(micro_batches=(m,), seg_method=seg_method(name), runtime="any")
    result = search_plans(program(name, "plain"), f"{name}.json", opts)
    assert result.pir is not None
    pir = result.pir
    found = []
    for cand in (*result.candidates, *result.over):
        launch = LaunchCandidate(
            schedule=cand.schedule,
            pp=cand.pp,
            vpp=cand.vpp,
            placement=cand.placement,
            micro_batches=cand.micro_batches,
            group_size=cand.group_size,
            layers_per_segment=cand.layers_per_segment,
            layer_class=result.layer_class,
        )
        found.append(_verdict(launch, pir))
        if cand.micro_batches == m and cand.pp > 1:  # the same plan at m = pp - 1
            fewer = replace(launch, micro_batches=cand.pp - 1)
            found.append(_verdict(fewer, pir))
    return found


def _verdict(c: LaunchCandidate, pir: object) -> Verdict:
    got = candidate_strategy(c, pir)  # type: ignore[arg-type]
    stage_layers = [0] * c.pp
    places = []
    for k, n in enumerate(c.layers_per_segment):
        stage, chunk = place(k, c.pp, c.placement)
        stage_layers[stage] += n
        places += [(stage, chunk)] * n
    return Verdict(
        candidate=c,
        runs=not isinstance(got, PirMismatch),
        reason=got.reason if isinstance(got, PirMismatch) else None,
        stage_layers=tuple(stage_layers),
        places=tuple(places),
        mode=paddle_mode(c),
    )


def ask_paddle(name: str, found: list[Verdict], seg: str, tmp: Path) -> dict[str, object]:
    completions = sorted({(v.stage_layers, v.candidate.vpp) for v in found if v.candidate.vpp > 1})
    jobs = sorted(
        {
            (v.mode, v.candidate.pp, v.candidate.vpp, v.candidate.micro_batches)
            for v in found
            if v.mode is not None
        }
    )
    questions = {
        "completions": [
            {"case": name, "stage_layers": list(s), "vpp": vpp, "seg_method": seg}
            for s, vpp in completions
        ],
        "jobs": [{"mode": mo, "pp": pp, "vpp": vpp, "m": m} for mo, pp, vpp, m in jobs],
    }
    asked, answered = tmp / f"{name}.questions.json", tmp / f"{name}.answers.json"
    asked.write_text(json.dumps(questions))
    env = {**os.environ, "FLAGS_enable_pir_api": "1", "GLOG_minloglevel": "2"}
    run = subprocess.run(
        ["nice", "-n", "15", sys.executable, str(BUILDER), "--agree", str(asked), str(answered)],
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(answered.read_text())  # type: ignore[no-any-return]


def paddle_runs(v: Verdict, answers: dict[str, object]) -> tuple[bool, str]:
    """Whether Paddle's own code runs the candidate, and what it said."""
    c = v.candidate
    jobs = {(j["mode"], j["pp"], j["vpp"], j["m"]): j for j in answers["jobs"]}  # type: ignore[attr-defined]
    if v.mode is None:
        return False, f"no Paddle schedule_mode is {c.schedule}"
    job = jobs[v.mode, c.pp, c.vpp, c.micro_batches]
    if "error" in job:
        return False, job["error"]
    if c.vpp == 1:
        return True, "no completion at vpp_degree 1"
    done = {
        (tuple(a["stage_layers"]), a["vpp"]): a
        for a in answers["completions"]  # type: ignore[attr-defined]
    }[v.stage_layers, c.vpp]
    if "error" in done:
        return False, done["error"]
    places = tuple((stage, chunk) for _, stage, chunk in done["layers"])
    if places != v.places:
        return False, f"Paddle places the layers {places}"
    return True, "completed as planned"


@cache
def agreement(name: str, tmp: Path) -> tuple[int, int, tuple[str, ...], Counter[str]]:
    """(claims, refusals, contradictions, refusals by reason) over one program's candidates."""
    found = verdicts(name)
    seg = pm.by_name()[name].seg_method
    answers = ask_paddle(name, found, seg, tmp)
    assert answers["versions"]["paddle"] == "3.3.1"  # type: ignore[index]
    contradictions = []
    reasons: Counter[str] = Counter()
    for v in found:
        theirs, said = paddle_runs(v, answers)
        if theirs != v.runs:
            contradictions.append(
                f"{v.candidate.schedule} vpp {v.candidate.vpp} {v.candidate.placement} "
                f"{v.candidate.layers_per_segment} m {v.candidate.micro_batches}: vppctl "
                f"{'takes' if v.runs else 'refuses'} ({v.reason}), Paddle: {said}"
            )
        if not v.runs:
            reasons[_reason_kind(v.reason or "")] += 1
    claims = sum(v.runs for v in found)
    return claims, len(found) - claims, tuple(contradictions), reasons


def _reason_kind(reason: str) -> str:
    for words, kind in (
        ("raises ValueError", "op between layers"),
        ("reads a stage from the ranks", "rank-to-stage mapping"),
        ("accumulate_steps >= pp", "accumulate steps < pp"),
        ("loop placement", "V placement"),
        ("deals a stage's", "a split Paddle does not deal"),
        ("fewer than vpp_degree", "layers per stage < vpp"),
        ("no ", "a schedule Paddle has not on PIR"),
        ("runs no", "a schedule Paddle has not on PIR"),
        ("vpp_degree", "vpp and schedule_mode"),
    ):
        if words in reason:
            return kind
    return reason[:60]


def _params() -> list[object]:
    return [n if n in CI else pytest.param(n, marks=pytest.mark.slow) for n in CASES]


@pytest.fixture(scope="module")
def answers_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("agree")


@pytest.mark.parametrize("name", _params())
def test_paddle_agrees_with_every_verdict_of_plan(name: str, answers_dir: Path) -> None:
    claims, refusals, contradictions, reasons = agreement(name, answers_dir)
    print(f"\n{name}: {claims} claims, {refusals} refusals {dict(reasons)}, "
          f"{len(contradictions)} contradictions")  # fmt: skip
    assert not contradictions, contradictions[:5]
    assert claims + refusals > 0
    if pm.by_name()[name].refused_by_paddle is None:
        assert claims > 0


def test_the_ci_programs_show_a_refusal_and_an_uneven_split() -> None:
    kinds = {pm.by_name()[n].refused_by_paddle for n in CI}
    assert kinds == {None, "rank_order"}
    assert set(PIR_MODES) == {"FThenB", "1F1B", "VPP"}


@pytest.mark.slow
def test_the_agreement_in_numbers(answers_dir: Path) -> None:
    """Over the whole matrix: claims, refusals (by reason) and contradictions, printed."""
    claims = refusals = 0
    contradictions: list[str] = []
    reasons: Counter[str] = Counter()
    for name in CASES:
        a, b, c, r = agreement(name, answers_dir)
        claims, refusals = claims + a, refusals + b
        contradictions += c
        reasons.update(r)
    print(
        f"\nPaddle agrees: {len(CASES)} programs, {claims} claims, {refusals} refusals "
        f"({dict(sorted(reasons.items()))}), {len(contradictions)} contradictions"
    )
    assert not contradictions, contradictions[:5]
