"""PIR programs built by live Paddle 3.3.1: read from the file Paddle writes and from the
in-memory export (`vppctl.paddle.export_program` on the `paddle.pir.Program`), through
inspect, simulate, plan and verify, and vppctl's plan against Paddle's PIR completion.

`tests/support/pir_programs.py` builds them in a child process in PIR mode (this test package
forces the legacy IR in-process). One kind runs always (GPT, pp 2); all six kinds
(GPT pp 2 and 4, GPT 7 + 5 layers a stage, Llama TP 2, Llama AMP pp 4, Llama with
recompute) with
VPPCTL_SLOW=1. Each build must equal the checked-in program (tests/data/pir_reference/): the
fixture tests there then say the same of what Paddle builds today.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import paths
import pytest
from commandline import invoke
from pir_cases import (
    CASES,
    LAYERS,
    PARITY,
    PP,
    RECOMPUTED,
    launched,
    parity,
    planned,
    reference,
)

from vppctl.planner import PirStrategy
from vppctl.planner.pir import candidate_strategy
from vppctl.program import parse_program, read_program
from vppctl.summary import summarize
from vppctl.verify import verify_program

pytestmark = pytest.mark.paddle

ALWAYS = ("gpt_pp2_v2",)
BUILDER = paths.SUPPORT / "pir_programs.py"
_BUILT: dict[tuple[str, ...], tuple[Path, dict[str, object]]] = {}


def built(
    cases: tuple[str, ...], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, object]]:
    """(directory, versions) of `cases` built by Paddle with --export, once per session."""
    if cases not in _BUILT:
        out = tmp_path_factory.mktemp("pir")
        env = {**os.environ, "FLAGS_enable_pir_api": "1"}  # PIR: Paddle 3.3.1's default
        run = subprocess.run(
            [sys.executable, str(BUILDER), str(out), *cases, "--export"],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        line = next(x for x in run.stdout.splitlines() if x.startswith("VERSIONS "))
        _BUILT[cases] = (out, json.loads(line.removeprefix("VERSIONS ")))
    return _BUILT[cases]


def _params(cases: tuple[str, ...]) -> list[object]:
    return [c if c in ALWAYS else pytest.param(c, marks=pytest.mark.slow) for c in cases]


@pytest.fixture
def build(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    case = request.node.callspec.params["case"]
    cases = ALWAYS if case in ALWAYS else tuple(c for c in CASES if c not in ALWAYS)
    out, versions = built(cases, tmp_path_factory)
    assert versions["paddle"] == "3.3.1" and versions["pir"] is True
    return out


@pytest.mark.parametrize("case", _params(CASES))
def test_paddle_builds_the_checked_in_programs(build: Path, case: str) -> None:
    for kind in ("plain", "paddlevpp"):
        assert (build / f"{case}_{kind}.json").read_bytes() == reference(case, kind), kind


@pytest.mark.parametrize("case", _params(CASES))
def test_the_in_memory_export_is_read_as_the_file(build: Path, case: str) -> None:
    for kind in ("plain", "paddlevpp"):
        exported = (build / f"{case}_{kind}.export.json").read_bytes()
        from_memory = parse_program(exported, source="export")
        from_file = read_program(build / f"{case}_{kind}.json")
        assert from_memory.is_pir and from_file.is_pir
        assert [b.ops for b in from_memory.blocks] == [b.ops for b in from_file.blocks]
        assert [b.vars for b in from_memory.blocks] == [b.vars for b in from_file.blocks]


@pytest.mark.parametrize("case", _params(CASES))
def test_inspect_simulate_plan_verify_read_the_file(build: Path, case: str) -> None:
    plain, paddle_vpp = build / f"{case}_plain.json", build / f"{case}_paddlevpp.json"
    r = invoke("inspect", str(paddle_vpp), "--json")
    out = json.loads(r.stdout)
    assert (out["layout"], out["chunks"], out["layers"]["count"]) == (
        "interleaved",
        [0, 1],
        LAYERS[case],
    )
    r = invoke("verify", str(paddle_vpp), "--json", exit_code=1)
    assert [v["rule"] for v in json.loads(r.stdout)["violations"]] == ["V009"]
    sim = ["simulate", str(paddle_vpp), "--vpp", "2", "--split", "keep", "-m", "8", "--json"]
    r = invoke(*sim)
    assert json.loads(r.stdout)["plan"]["pp"] == PP[case]
    r = invoke("plan", str(plain), "-m", "8", "--schedule", "vpp", "--json")
    candidates = json.loads(r.stdout)["candidates"]
    assert any(c["launch"]["paddle"]["runs"] for c in candidates)


@pytest.mark.parametrize("case", _params(CASES))
def test_inspect_plan_verify_read_the_in_memory_export(build: Path, case: str) -> None:
    paddle_vpp = parse_program((build / f"{case}_paddlevpp.export.json").read_bytes())
    summary = summarize(paddle_vpp)
    assert summary.layout == "interleaved" and summary.layers is not None
    assert len(summary.layers) == LAYERS[case]
    report = verify_program(paddle_vpp)
    assert [v.rule for v in report.violations] == ["V009"]
    p = planned(parse_program((build / f"{case}_plain.export.json").read_bytes()), 2, "keep")
    assert isinstance(candidate_strategy(*launched(p, "vpp", 8)), PirStrategy)


@pytest.mark.parametrize("case", _params(CASES))
def test_vppctls_plan_is_paddles_pir_completion(build: Path, case: str) -> None:
    plain = parse_program((build / f"{case}_plain.export.json").read_bytes())
    paddle_vpp = parse_program((build / f"{case}_paddlevpp.export.json").read_bytes())
    result = parity(plain, paddle_vpp)
    assert not result.differ, result.differ[:3]
    assert (result.forward, result.backward) == PARITY[case]
    assert result.recomputed == RECOMPUTED.get(case, 0)


# -- V009 on Paddle's completion: once per chunk boundary of stage 0 ---------------------------

# Builds GPT (pp 2) in a child process with Paddle's PIR VPP completion at `vpp` chunks and
# writes it as Paddle saves it.
_VPP_CHILD = """
import sys
sys.path.insert(0, sys.argv[1])
import paddle
import pir_programs
out, vpp, layers = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
case = pir_programs.Case(f"gpt_pp2_v{vpp}", "gpt", 2, vpp, layers)
paddle.base.core.serialize_pir_program(pir_programs.build(case, vpp), out)
"""


@pytest.mark.parametrize(
    ("vpp", "layers"), [(4, 8), pytest.param(3, 12, marks=pytest.mark.slow)], ids=["v4", "v3"]
)
def test_paddles_completion_breaks_v009_once_per_chunk_boundary(
    tmp_path: Path, vpp: int, layers: int
) -> None:
    """docs/paddle.md said Paddle's PIR completion breaks V009 "once": it breaks it vpp - 1
    times, at the sum of the gradient of each hidden state a later chunk of stage 0 reads
    from the last stage (placed in the earlier chunk, its parts in the later one)."""
    out = tmp_path / f"gpt_pp2_v{vpp}.json"
    env = {**os.environ, "FLAGS_enable_pir_api": "1"}
    run = subprocess.run(
        [sys.executable, "-c", _VPP_CHILD, str(paths.SUPPORT), str(out), str(vpp), str(layers)],
        env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    report = verify_program(read_program(out))
    assert (report.pp, report.vpp) == (2, vpp)
    assert [v.rule for v in report.violations] == ["V009"] * (vpp - 1)
    boundaries = sorted(
        (int(v.message.split(" chunk ")[1][0]), int(v.message.rsplit(" chunk ", 1)[1][0]))
        for v in report.violations
    )
    assert boundaries == [(k, k + 1) for k in range(vpp - 1)]
