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
from commandline import describe, invoke
from pir_cases import paddle_stage_op_counts, parity, planned, stage_op_counts

from vppctl.planner import PirStrategy
from vppctl.planner.launch import LaunchCandidate
from vppctl.planner.pir import candidate_strategy, pir_input
from vppctl.summary import summarize

pytestmark = pytest.mark.heavy  # about a minute: started first (tests/conftest.py)

CASES = list(pm.manifest()["cases"])
TAKEN = [n for n in CASES if pm.has(n, "vpp")]
REFUSED = [n for n in CASES if not pm.has(n, "vpp")]
BUILDER = paths.SUPPORT / "pir_matrix_build.py"


def case(name: str) -> pm.Case:
    return pm.by_name()[name]


seg_method = pm.user_seg_method
program = pm.program


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
    readme = (pm.MATRIX / "README.md").read_text()
    assert pm.with_table(readme, built) == readme  # the README's table is the manifest's


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


def cli_cases() -> list[str]:
    """The cases the CLI runs on in CI: chosen in the matrix's order until every model,
    mesh, pp, vpp, layout and refusal is met (the in-process tests below take them all;
    the CLI, a few seconds a case, takes them all with VPPCTL_SLOW=1)."""
    axes = ("model", "mesh", "pp", "vpp", "layout", "refused_by_paddle")
    seen: set[tuple[str, object]] = set()
    chosen = []
    for c in pm.matrix():
        new = {(a, getattr(c, a)) for a in axes} - seen
        if new and c.name in CASES:
            chosen.append(c.name)
            seen |= new
    return chosen


def _cli_params() -> list[object]:
    ci = set(cli_cases())
    return [n if n in ci else pytest.param(n, marks=pytest.mark.slow) for n in CASES]


@pytest.mark.parametrize("name", _cli_params())
def test_inspect_simulate_plan_verify_run(name: str, tmp_path: Path) -> None:
    c = case(name)
    plain = json_file(tmp_path, name, "plain")
    seg = ["--seg-method", c.seg_method] if seg_method(name) else []
    out = json.loads(invoke("inspect", plain, "--json", *seg).stdout)
    assert out["layers"]["count"] == c.layers
    m = c.accumulate_steps
    anyrt = ["--runtime", "any"]  # every schedule and split, each row saying what Paddle does
    sim = ["simulate", plain, "--vpp", c.vpp, "--split", "balanced", "-m", m, "--json"]
    assert json.loads(invoke(*sim, *anyrt, *seg).stdout)["plan"]["pp"] == c.pp
    plan = ["plan", plain, "-m", m, "--vpp", c.vpp, "--json", *anyrt, *seg]
    data = json.loads(invoke(*plan).stdout)
    assert data["pir"]["stage_layers"] == list(c.stage_layers)
    assert data["candidates"]
    r = invoke("verify", plain, "--json", *seg)  # as Paddle's plain pipeline runs it
    assert json.loads(r.stdout)["violations"] == [], describe(r)
    if pm.has(name, "vpp"):
        done = json_file(tmp_path, name, "vpp")
        assert (
            json.loads(invoke("inspect", done, "--json", *seg).stdout)["layers"]["count"]
            == c.layers
        )
        if c.vpp > 1:  # vpp and split from Paddle's chunk ids, under its own runtime
            got = json.loads(invoke("simulate", done, "-m", m, "--json", *seg).stdout)["plan"]
            assert (got["pp"], got["vpp"], got["split"]) == (c.pp, c.vpp, "keep")
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
        invoke(
            "plan",
            plain,
            "-m",
            c.accumulate_steps,
            "--vpp",
            c.vpp,
            "--json",
            "--runtime",
            "any",
            *seg,
        ).stdout
    )
    reasons = [v["paddle_pir"]["reason"] for v in data["conversions"]]
    refused = [r["reason"] for r in data["refused"]]
    words = REFUSAL_WORDS[c.refused_by_paddle]
    if c.refused_by_paddle == "short":
        # keep (the program as placed) is refused with why and the counts Paddle would
        # take; a split Paddle does not make says keep cannot, and why
        (keep,) = [r for r in refused if r.startswith(f"split keep refused at vpp {c.vpp}: ")]
        assert "and Paddle's PIR completion: stage" in keep and all(w in keep for w in words)
        said = [r for r in reasons if r is not None]
        assert all("`--split keep` cannot" in r and words[0] in r for r in said), said
        taken = [v for v in data["conversions"] if v["paddle_pir"]["reason"] is None]
        assert all(min(v["paddle_pir"]["stage_layers"]) >= c.vpp for v in taken)
    else:  # no conversion at this vpp: every row says Paddle's reason
        assert reasons and all(r is not None and all(w in r for w in words) for r in reasons)
        args = ["plan", plain, "-m", c.accumulate_steps, "--vpp", c.vpp, "--runtime", "any"]
        text = invoke(*args, *seg).stdout
        text = " ".join(text.split())
        assert "Paddle's PIR completion refuses it at every vpp_degree > 1" in text
        assert (
            "Paddle (PIR) runs none of these candidates: it runs fthenb, 1f1b, vpp, and at "
            "vpp > 1 its completion refuses this program (above)"
        ) in text
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
    assert len(CASES) >= 40 and programs == 4 * len(TAKEN) + 2 * len(REFUSED)
    assert differences == 0


# -- Paddle builds them again ---------------------------------------------------------------------

# Built live in CI (about a minute on one core): the smallest job, and a job with every kind
# of mesh dimension, AMP, recompute and Paddle's VPP completion. The whole matrix (tens of
# minutes) with VPPCTL_SLOW=1.
LIVE = ("m00_gpt_pp2v1", "m04_attnbias_pp2v2")


def rebuilt(out: Path, names: tuple[str, ...]) -> dict[str, object]:
    """The manifest entries of `names` built again by Paddle 3.3.1, in a child process in PIR
    mode (this test package forces the legacy IR in-process), into `out`."""
    env = {**os.environ, "FLAGS_enable_pir_api": "1", "GLOG_minloglevel": "2"}
    run = subprocess.run(
        ["nice", "-n", "15", sys.executable, str(BUILDER), str(out), *names],
        env=env,
        capture_output=True,
        text=True,
        timeout=7200,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    manifest = json.loads((out / "MANIFEST.json").read_text())
    assert manifest["versions"]["paddle"] == "3.3.1" and manifest["versions"]["pir"] is True
    return manifest["cases"]  # type: ignore[no-any-return]


@pytest.mark.paddle
def test_paddle_builds_the_checked_in_programs(tmp_path: Path) -> None:
    """Two cases built again are byte for byte the checked-in programs (the digests of
    their JSON), and the files there are those programs."""
    got = rebuilt(tmp_path, LIVE)
    for name in LIVE:
        assert got[name] == pm.built(name), name
        for kind in got[name]["files"]:  # type: ignore[index]
            assert (tmp_path / f"{name}.{kind}.json.xz").exists()
            assert pm.digest(pm.data(name, kind)) == pm.built(name)["files"][kind]


@pytest.mark.paddle
@pytest.mark.slow
def test_paddle_builds_the_checked_in_matrix(tmp_path: Path) -> None:
    """Every case built again by Paddle 3.3.1 is byte for byte the checked-in program, and
    refuses where it refused."""
    assert rebuilt(tmp_path, tuple(CASES)) == pm.manifest()["cases"]
