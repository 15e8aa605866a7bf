"""`vppctl verify`: every program convert writes is valid; each rule catches its own breakage.

Rule tests start from one small converted program (4 layers, pp 2, vpp 2, with
backward and optimizer ops; `Broken`) or a hand-built VPP program (`fan`), break
exactly one thing, and expect exactly that rule id. Breaking a layer's placement
consistently means moving its forward op, its grad op and the variables those
first write together, which `Broken.move` does.

The tests here also cover vppctl/verify/expectation.py, which has no test file of its own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from commandline import invoke
from failures import write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from programs import layered
from verifykit import Broken, converted, violations

from vppctl.program._proto import program_pb2 as pb
from vppctl.verify import RULES

# -- verify accepts what convert writes ---------------------------------------------------


def test_the_base_of_the_rule_tests_is_valid() -> None:
    assert violations(Broken.DATA) == []
    assert violations(Broken.DATA, pp=2, vpp=2, seg_method="DecoderLayer") == []


@pytest.mark.parametrize(
    ("layers", "pp", "vpp"), [(4, 2, 2), (8, 4, 2), (16, 4, 2), (16, 4, 4), (8, 2, 4), (12, 4, 3)]
)
def test_verify_accepts_converted_samples(
    sample_bytes: dict[tuple[int, int], bytes], layers: int, pp: int, vpp: int
) -> None:
    out = converted(sample_bytes[layers, pp], vpp)
    assert violations(out) == []
    assert violations(out, pp=pp, vpp=vpp, seg_method="DecoderLayer") == []


@pytest.mark.parametrize("placement", ["loop", "v"])
@pytest.mark.parametrize("split", ["keep", "balanced"])
def test_verify_accepts_other_placements_and_splits(
    sample_bytes: dict[tuple[int, int], bytes], placement: str, split: str
) -> None:
    out = converted(sample_bytes[8, 2], 2, placement=placement, split=split)
    assert violations(out) == []


def test_verify_accepts_a_converted_interleaved_program() -> None:
    from vppctl.sample import SampleOptions, build_sample

    data = build_sample(
        SampleOptions(layers=8, pp=2, layout="interleaved", vpp=2, hidden=64, vocab=1000)
    )
    out = converted(data, 2)
    assert pb.ProgramDesc.FromString(out).pipeline_plan.mode == "manual"
    assert violations(out) == []


def test_verify_accepts_a_program_converted_twice() -> None:
    twice = converted(Broken.DATA, 2)
    assert violations(twice) == []


@st.composite
def conversions(draw: st.DrawFn) -> tuple[list[int], int, int, str, str, bool]:
    pp = draw(st.integers(2, 4))
    vpp = draw(st.integers(1, 3))
    split = draw(st.sampled_from(["uniform", "balanced"]))
    per = draw(st.integers(1, 3))
    n = pp * vpp * per if split == "uniform" else draw(st.integers(pp * vpp, pp * vpp * 3))
    stages = [i * pp // n for i in range(n)]
    placement = draw(st.sampled_from(["loop", "v"]))
    return stages, pp, vpp, placement, split, draw(st.booleans())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversions())
def test_verify_accepts_every_conversion(case: tuple[list[int], int, int, str, str, bool]) -> None:
    stages, pp, vpp, placement, split, ids = case
    src = layered(stages, stages=pp, backward=True, optimizer=True, ids=ids).bytes()
    out = converted(src, vpp, placement=placement, split=split)
    assert violations(out) == []
    assert violations(out, pp=pp, vpp=vpp, placement=placement, seg_method="DecoderLayer") == []


# -- the command line ---------------------------------------------------------------------


def test_cli_valid_program_is_one_line_and_exit_0(tmp_path: Path) -> None:
    src = write(tmp_path, Broken.DATA)
    r = invoke("verify", str(src))
    assert r.stdout.count("\n") == 1 and r.stdout.startswith("valid: pp 2 x vpp 2")
    assert "cross-stage edges per micro-batch" in r.stdout
    assert r.stderr == ""


def test_cli_violations_are_a_table_and_exit_1(tmp_path: Path) -> None:
    b = Broken()
    b.ops[b.index("sgd")].dist_attr.chunk_id = 2
    b.place_var("DecoderLayer_2.out0", 0, 0)
    src = write(tmp_path, b.bytes())
    r = invoke("verify", str(src), exit_code=1)
    assert "2 violation(s)" in r.stdout
    for header in ("Rule", "Block", "Op", "Type", "Message"):
        assert header in r.stdout
    assert "V002" in r.stdout and "V011" in r.stdout and "sgd" in r.stdout
    assert r.stderr == ""


def test_cli_json_valid(tmp_path: Path) -> None:
    src = write(tmp_path, Broken.DATA)
    r = invoke("verify", str(src), "--json")
    data = json.loads(r.stdout)  # stdout holds the JSON object and nothing else
    assert data["valid"] is True and data["violations"] == []
    assert data["pp"] == 2 and data["vpp"] == 2
    assert data["layers"]["count"] == 4 and data["layers"]["class"] == "DecoderLayer"
    assert isinstance(data["cross_stage_edges"], int) and data["cross_stage_edges"] > 0
    assert r.stderr == ""


def test_cli_json_violations(tmp_path: Path) -> None:
    b = Broken()
    i = b.index("sgd")
    b.ops[i].dist_attr.chunk_id = 2
    src = write(tmp_path, b.bytes())
    r = invoke("verify", str(src), "--json", exit_code=1)
    data = json.loads(r.stdout)
    assert data["valid"] is False
    assert data["violations"] == [
        {
            "rule": "V002",
            "cause": "chunk_out_of_range",
            "block": 0,
            "op": i,
            "type": "sgd",
            "message": "chunk id 2 is outside [0, 2)",
        }
    ]
    assert data["cross_stage_edges"] is None
    assert r.stderr == ""


def test_cli_options_set_the_expectation(tmp_path: Path) -> None:
    src = write(tmp_path, Broken.DATA)
    r = invoke("verify", str(src), "--pp", "4", "--json", exit_code=1)
    assert [v["rule"] for v in json.loads(r.stdout)["violations"]] == ["V015"]


def test_cli_rules_lists_every_rule() -> None:
    r = invoke("verify", "--rules")
    for rule in RULES:
        assert rule in r.stdout


def test_cli_table_shows_names_with_markup_characters_verbatim(tmp_path: Path) -> None:
    """Op types and variable names are data: `[/]` in one must not be read as rich markup."""
    b = Broken()
    i = b.index("sgd")
    b.ops[i].type = "[/]odd[bold]"
    b.ops[i].dist_attr.chunk_id = 2
    src = write(tmp_path, b.bytes())
    r = invoke("verify", str(src), exit_code=1)
    assert "[/]odd[bold]" in r.stdout


# -- verify --plan: a PIR plan's virtual stages, an empty end included ----------------------


def _empty_first(tmp_path: Path) -> tuple[Path, Path]:
    """A PIR program whose first virtual stage holds no layer (layers on stage 1 chunk 0,
    stage 0 chunk 1, stage 1 chunk 1: virtual stages 1, 2, 3), and the plan saying so."""
    from pir_json import training

    from vppctl.plan import PirPlan

    program = tmp_path / "prog.json"
    program.write_bytes(training([1, 0, 1], [0, 1, 1]).bytes())
    plan = tmp_path / "plan.json"
    plan.write_text(PirPlan(2, 2, "Layer", ((), ("Layer",), ("Layer_1",), ("Layer_2",))).dumps())
    return program, plan


def _rules(*args: object) -> list[str]:
    r = invoke("verify", *args, "--json", exit_code=None)
    return sorted({v["rule"] for v in json.loads(r.stdout)["violations"]})


def test_an_empty_end_virtual_stage_is_valid_when_the_plan_says_so(tmp_path: Path) -> None:
    program, plan = _empty_first(tmp_path)
    assert {"V005", "V006"} <= set(_rules(program))  # the rules as stated: every chunk a layer
    assert _rules(program, "--plan", plan) == []
    r = invoke("verify", program, "--plan", plan)
    assert r.stdout.startswith("valid: pp 2 x vpp 2, loop placement, 3 layers")


def test_a_plan_the_program_does_not_follow_is_a_violation(tmp_path: Path) -> None:
    from vppctl.plan import PirPlan

    program, _ = _empty_first(tmp_path)
    plans = {
        "other layers": ((), ("Layer", "Layer_1"), ("Layer_2",), ()),  # an empty last one
        "no empty end": (("Layer",), ("Layer_1",), ("Layer_2",), ("Layer_3",)),
    }
    for name, stages in plans.items():
        path = tmp_path / f"{name}.json"
        path.write_text(PirPlan(2, 2, "Layer", stages).dumps())
        assert "V012" in _rules(program, "--plan", path), name
    pp4 = tmp_path / "pp4.json"
    pp4.write_text(PirPlan(4, 2, "Layer", ((), *((f"L{i}",) for i in range(6)), ())).dumps())
    assert "V015" in _rules(program, "--plan", pp4)
    assert "V015" in _rules(program, "--plan", tmp_path / "other layers.json", "--vpp", "3")


def test_the_plan_and_the_program_cannot_both_come_from_stdin(tmp_path: Path) -> None:
    r = invoke("verify", "-", "--plan", "-", exit_code=2, input=b"")
    assert "cannot both be read from stdin" in r.stderr
