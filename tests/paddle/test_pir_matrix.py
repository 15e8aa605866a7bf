"""The PIR matrix (tests/data/pir_matrix/, built by Paddle 3.3.1 with
tests/support/pir_matrix_build.py): every program reads; inspect, simulate, plan and verify
run on them; vppctl's plan puts every forward layer op (and its grad ops and recompute
copies) on the stage and chunk Paddle's completion gives it; each stage's forward, backward
and optimizer op counts are Paddle's; and where Paddle's completion refused the job, plan
refuses it too, with Paddle's reason.

The matrix is a covering design (tests/support/pir_matrix.py): every value of every axis
in a job Paddle takes, and the pairs that matter together. These tests read the checked-in
files (no Paddle); `test_paddle_builds_the_checked_in_matrix` (VPPCTL_SLOW=1) builds every
case again with Paddle and compares.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from functools import cache
from pathlib import Path

import paths
import pir_matrix as pm
import pytest
from commandline import invoke
from pir_cases import paddle_stage_op_counts, parity, planned, stage_op_counts

from vppctl.planner import PirStrategy
from vppctl.planner.launch import LaunchCandidate
from vppctl.planner.pir import candidate_strategy, pir_input
from vppctl.program import Program, parse_program
from vppctl.summary import summarize

CASES = list(pm.manifest()["cases"])
TAKEN = [n for n in CASES if pm.has(n, "vpp")]
REFUSED = [n for n in CASES if not pm.has(n, "vpp")]
BUILDER = paths.SUPPORT / "pir_matrix_build.py"


def case(name: str) -> pm.Case:
    return pm.by_name()[name]


def seg_method(name: str) -> str | None:
    """What a user passes to `plan`: nothing (the layer is detected), but for two layer
    classes, which no detection picks together: the regex naming both."""
    c = case(name)
    return c.seg_method if len(pm.LAYER_CLASSES[c.model]) > 1 else None


@cache
def program(name: str, kind: str) -> Program:
    return parse_program(pm.data(name, kind), source=f"{name}.{kind}.json")


def json_file(tmp_path: Path, name: str, kind: str) -> Path:
    path = tmp_path / f"{name}.{kind}.json"
    path.write_bytes(pm.data(name, kind))
    return path


# -- the design --------------------------------------------------------------------------------


def test_the_matrix_covers_every_value_and_pair_and_is_what_was_built() -> None:
    cases = pm.matrix()
    assert len(cases) >= 40
    assert pm.uncovered_by(cases) == []
    built = pm.manifest()["cases"]
    assert list(built) == [c.name for c in cases]  # the builder's output is current
    for c in cases:
        entry = built[c.name]
        assert {k: entry[k] for k in c.fields()} == c.fields(), c.name
        assert (entry["paddle_refused"] is None) == (c.refused_by_paddle is None), c.name
    assert pm.manifest()["versions"]["paddle"] == "3.3.1"
    kinds = Counter(c.refused_by_paddle for c in cases)
    assert set(kinds) == {None, "between", "rank_order", "short"}, kinds


@pytest.mark.parametrize("name", REFUSED)
def test_paddle_refused_the_jobs_the_design_says_it_refuses(name: str) -> None:
    said = pm.built(name)["paddle_refused"]
    expected = {
        "between": "without seg_method in its struct_name should only be reshard",
        "rank_order": "The number of layers on each pp_stage must not be less than the vpp_degree",
        "short": "The number of layers on each pp_stage must not be less than the vpp_degree",
    }[case(name).refused_by_paddle]
    assert expected in said


# -- every program reads, and the commands run -------------------------------------------------


@pytest.mark.parametrize("name", CASES)
def test_every_program_reads(name: str) -> None:
    c = case(name)
    for kind in pm.KINDS:
        if not pm.has(name, kind):
            continue
        prog = program(name, kind)
        assert prog.is_pir
        s = summarize(prog)
        assert len(s.stage_meshes) == c.pp, kind
        if kind in ("plain", "vpp"):
            assert s.ops["forward"] and s.ops["backward"] and s.ops["optimizer"], kind
        else:  # the forward program Paddle's completion gets or leaves
            assert s.ops["forward"] and not s.ops["backward"], kind


@pytest.mark.parametrize("name", CASES)
def test_inspect_simulate_plan_verify_run(name: str, tmp_path: Path) -> None:
    c = case(name)
    plain = json_file(tmp_path, name, "plain")
    seg = ["--seg-method", c.seg_method] if seg_method(name) else []
    out = json.loads(invoke("inspect", plain, "--json", *seg).stdout)
    assert out["layers"]["count"] == c.layers
    m = c.accumulate_steps
    sim = ["simulate", plain, "--vpp", c.vpp, "--split", "balanced", "-m", m, "--json", *seg]
    assert json.loads(invoke(*sim).stdout)["plan"]["pp"] == c.pp
    data = json.loads(invoke("plan", plain, "-m", m, "--vpp", c.vpp, "--json", *seg).stdout)
    assert data["pir"]["stage_layers"] == list(c.stage_layers)
    assert data["candidates"]
    invoke("verify", plain, exit_code=None)  # a plain program: whatever it says, no crash
    if pm.has(name, "vpp"):
        done = json_file(tmp_path, name, "vpp")
        assert (
            json.loads(invoke("inspect", done, "--json", *seg).stdout)["layers"]["count"]
            == c.layers
        )
        r = invoke("verify", done, "--json", *seg, exit_code=None)
        assert r.exit_code in (0, 1), r.output
        rules = {v["rule"] for v in json.loads(r.stdout)["violations"]}
        assert rules <= {"V009"}, rules  # the one rule Paddle's completion breaks


# -- vppctl's plan is Paddle's completion ----------------------------------------------------------


@cache
def compared(name: str) -> tuple[int, int, int, int, tuple[object, ...]]:
    """(forward layer ops, their grad ops, their recompute copies, stage op counts) compared
    for a case Paddle completed, and every difference."""
    c = case(name)
    plain, done = program(name, "plain"), program(name, "vpp")
    result = parity(plain, done, vpp=c.vpp, split="keep", seg_method=seg_method(name))
    ours = stage_op_counts(planned(plain, c.vpp, "keep", seg_method(name)))
    theirs = paddle_stage_op_counts(done)
    counts = [(k, ours.get(k), theirs.get(k)) for k in sorted(set(ours) | set(theirs))]
    differ = (*result.differ, *(d for d in counts if d[1] != d[2]))
    return result.forward, result.backward, result.recomputed, sum(theirs.values()), differ


@pytest.mark.parametrize("name", TAKEN)
def test_the_plan_is_paddles_completion_op_for_op(name: str) -> None:
    """The plan Paddle's completion makes (split keep, loop placement) puts every forward
    layer op, grad op and recompute copy where Paddle's program has it, and each stage holds
    as many forward, backward and optimizer ops as in Paddle's (reshards aside: the reader
    reads through them)."""
    forward, backward, recomputed, staged, differ = compared(name)
    assert not differ, differ[:5]
    assert forward > 0 and backward > 0 and staged > 0
    assert (recomputed > 0) == case(name).recompute


@pytest.mark.parametrize("name", TAKEN)
def test_plan_gives_the_strategy_paddle_was_built_with(name: str) -> None:
    """The strategy `plan` gives for the program as placed is what the builder gave Paddle:
    vpp_seg_method, and VPP at the case's vpp taken with no layer moved."""
    c = case(name)
    p = planned(program(name, "plain"), c.vpp, "keep", seg_method(name))
    pir = pir_input(p)
    assert pir.vpp_seg_method.lower() == c.seg_method.lower() or (
        len(pm.LAYER_CLASSES[c.model]) == 1 and pir.vpp_seg_method.endswith("(?=/)")
    )
    got = candidate_strategy(_candidate(p, "vpp" if c.vpp > 1 else "1f1b", c.accumulate_steps), pir)
    assert isinstance(got, PirStrategy), got
    assert got.stage_layers == c.stage_layers and not got.moves_layers


def _candidate(p: object, schedule: str, m: int) -> LaunchCandidate:
    plan = p.plan  # type: ignore[attr-defined]
    return LaunchCandidate(
        schedule=schedule,  # type: ignore[arg-type]
        pp=plan.pp,
        vpp=plan.vpp,
        placement=plan.placement,
        micro_batches=m,
        group_size=None,
        layers_per_segment=tuple(len(s.layers) for s in plan.segments),
        layer_class=plan.layer_class,
    )


# -- where Paddle refused, plan refuses -----------------------------------------------------------

# What plan says for each refusal, and the fix it gives.
REFUSAL_WORDS = {
    "between": ("raises ValueError on", "should only be reshard", "move it into a layer"),
    "rank_order": ("reads a stage from the ranks", "r // (world / pp)", "give stage s the ranks"),
    "short": ("fewer than vpp_degree", "must not be less than the vpp_degree", "put at least"),
}


@pytest.mark.parametrize("name", REFUSED)
def test_plan_refuses_what_paddles_completion_refused_with_its_reason(
    name: str, tmp_path: Path
) -> None:
    c = case(name)
    plain = json_file(tmp_path, name, "plain")
    seg = ["--seg-method", c.seg_method] if seg_method(name) else []
    data = json.loads(
        invoke("plan", plain, "-m", c.accumulate_steps, "--vpp", c.vpp, "--json", *seg).stdout
    )
    reasons = [v["paddle_pir"]["reason"] for v in data["conversions"]]
    refused = [r["reason"] for r in data["refused"]]
    words = REFUSAL_WORDS[c.refused_by_paddle]
    if c.refused_by_paddle == "short":
        # keep (the program as placed) is refused with why, and every other split says
        # keep cannot and which counts Paddle would take
        assert any(
            r.startswith(f"split keep refused at vpp {c.vpp}: --split keep needs") for r in refused
        )
        said = [r for r in reasons if r is not None and "`--split keep` cannot" in r]
        assert said and all(w in said[0] for w in words), said
    else:  # no conversion at this vpp: every row says Paddle's reason
        assert reasons and all(r is not None and all(w in r for w in words) for r in reasons)
        text = invoke("plan", plain, "-m", c.accumulate_steps, "--vpp", c.vpp, *seg).stdout
        assert "Paddle's PIR completion refuses it at every vpp_degree > 1" in text
    # the program as placed, at the vpp it was built with: no strategy Paddle takes
    p = planned(program(name, "plain"), c.vpp, "balanced", seg_method(name))
    got = candidate_strategy(_candidate(p, "vpp", c.accumulate_steps), pir_input(p))
    assert not isinstance(got, PirStrategy) or got.moves_layers


# -- the numbers -----------------------------------------------------------------------------------


def test_the_matrix_in_numbers() -> None:
    """Programs read, ops compared with Paddle's, differences: printed (`-s`), and no
    difference."""
    programs = sum(1 for n in CASES for k in pm.KINDS if pm.has(n, k))
    totals = Counter()
    differences = 0
    for name in TAKEN:
        forward, backward, recomputed, staged, differ = compared(name)
        totals.update(forward=forward, backward=backward, recomputed=recomputed, staged=staged)
        differences += len(differ)
    print(
        f"\nPIR matrix: {len(CASES)} cases ({len(TAKEN)} completed by Paddle, {len(REFUSED)} "
        f"refused), {programs} programs; compared op for op: {totals['forward']} forward layer "
        f"ops, {totals['backward']} grad ops, {totals['recomputed']} recompute copies; stage "
        f"op counts over {totals['staged']} ops; differences: {differences}"
    )
    assert programs >= 4 * 40 and differences == 0


# -- Paddle builds them again ---------------------------------------------------------------------


@pytest.mark.paddle
@pytest.mark.slow
def test_paddle_builds_the_checked_in_matrix(tmp_path: Path) -> None:
    """Every case built again by Paddle 3.3.1 (in a child process in PIR mode: this test
    package forces the legacy IR in-process) is byte for byte the checked-in program, and
    refuses where it refused."""
    env = {**os.environ, "FLAGS_enable_pir_api": "1", "GLOG_minloglevel": "2"}
    run = subprocess.run(
        ["nice", "-n", "15", sys.executable, str(BUILDER), str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=7200,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    rebuilt = json.loads((tmp_path / "MANIFEST.json").read_text())
    assert rebuilt["cases"] == pm.manifest()["cases"]
