"""vppctl's own inputs verify: every `vppctl sample` program and every shipped sample.

A plain-PP sample (the blocked layout) carries no plan, so `verify` checks it as
vpp 1 from its chunk ids; it must find nothing. In particular a gradient summed
across a stage boundary (`tmp_4@GRAD`, the sum of the contributions of the next
stage's first layer) lives on its forward variable's mesh, as Paddle's backward
completion puts it, not on the stage of the `sum` op.

The interleaved layout is the input of manual mode (layers already on their VPP
stages, chunk ids still 0, as Paddle's program is before its VPP pass): as it is
it is not a runnable pipeline, and `verify` says so with layout rules only; once
converted it verifies.
"""

from __future__ import annotations

from pathlib import Path

import paths
import pytest
from commandline import invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vppctl.convert import ConvertOptions, convert_program
from vppctl.plan import PlanOptions
from vppctl.program.load import parse_program
from vppctl.sample import SampleOptions, build_sample
from vppctl.verify import VerifyOptions
from vppctl.verify.expectation import verify_program

SAMPLES = paths.SAMPLES
LAYOUT_RULES = {"V005", "V006", "V007"}
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def blocked(draw: st.DrawFn) -> SampleOptions:
    pp = draw(st.integers(1, 5))
    backward = draw(st.booleans())
    return SampleOptions(
        layers=draw(st.integers(pp, pp + 7)),
        pp=pp,
        ranks_per_stage=draw(st.integers(1, 3)),
        backward=backward,
        optimizer=draw(st.sampled_from(["adamw", "sgd", "none"])),
        grad_clip=draw(st.booleans()),
        hidden=64 * draw(st.integers(1, 2)),
        vocab=draw(st.integers(1, 300)),
        callstack=draw(st.booleans()),
    )


@st.composite
def interleaved(draw: st.DrawFn) -> SampleOptions:
    pp, vpp = draw(st.integers(2, 4)), draw(st.integers(2, 3))
    return SampleOptions(
        layers=pp * vpp * draw(st.integers(1, 2)),
        pp=pp,
        layout="interleaved",
        vpp=vpp,
        optimizer=draw(st.sampled_from(["adamw", "sgd", "none"])),
        grad_clip=draw(st.booleans()),
        hidden=64,
        vocab=100,
    )


@SETTINGS
@given(blocked())
def test_every_plain_pp_sample_verifies_as_vpp_1(opts: SampleOptions) -> None:
    # One layer has no sibling to be detected by (detection needs two instances).
    seg_method = "DecoderLayer" if opts.layers == 1 else None
    report = verify_program(parse_program(build_sample(opts)), VerifyOptions(seg_method=seg_method))
    assert report.violations == ()
    assert (report.pp, report.vpp, report.recorded) == (opts.pp, 1, None)
    assert report.layers is not None and len(report.layers) == opts.layers


@SETTINGS
@given(interleaved())
def test_an_interleaved_sample_breaks_only_layout_rules_and_verifies_once_converted(
    opts: SampleOptions,
) -> None:
    data = build_sample(opts)
    raw = verify_program(parse_program(data))
    assert raw.violations, "chunk ids 0 on an interleaved layout cannot be a valid pipeline"
    assert {v.rule for v in raw.violations} <= LAYOUT_RULES
    program = parse_program(data)
    result = convert_program(program, ConvertOptions(plan=PlanOptions(vpp=opts.vpp)))
    assert result.plan.mode == "manual"
    assert verify_program(program).violations == ()


def test_a_boundary_gradient_lives_on_its_forward_variables_mesh() -> None:
    """The fault this file exists for, shown on the smallest program that has it."""
    report = verify_program(parse_program(build_sample(SampleOptions(layers=2, pp=2, hidden=64))))
    assert report.violations == ()


def _shipped() -> list[str]:
    return sorted(p.name for p in SAMPLES.iterdir() if p.name != "README.md")


@pytest.mark.parametrize("name", _shipped())
def test_every_shipped_sample_verifies(name: str) -> None:
    result = invoke("verify", str(SAMPLES / name))
    assert result.stdout.startswith("valid: ")
    assert "no pipeline plan recorded" in result.stdout


def test_verify_json_names_the_recorded_plan_or_null(tmp_path: Path) -> None:
    import json

    plain = json.loads(invoke("verify", str(SAMPLES / "gpt-8l-pp4.pb"), "--json").stdout)
    assert plain["plan"] is None and plain["valid"] is True
    out = tmp_path / "out.pb"
    invoke("convert", str(SAMPLES / "gpt-8l-pp4.pb"), "--vpp", "2", "-o", str(out))
    done = json.loads(invoke("verify", str(out), "--json").stdout)
    assert done["plan"]["pp"] == 4 and done["plan"]["vpp"] == 2
    assert done["plan"]["placement"] == "loop" and done["plan"]["mode"] == "auto"


def _sum_placements(data: bytes) -> list[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
    """(sum op's mesh, its output's mesh, the forward variable's mesh) for each `sum`."""
    from vppctl.program._proto import program_pb2 as pb

    block = pb.ProgramDesc.FromString(data).blocks[0]
    mesh = {v.name: tuple(v.dist_attr.process_mesh.process_ids) for v in block.vars}
    out = []
    for op in block.ops:
        if op.type == "sum" and op.outputs[0].arguments[0].endswith("@GRAD"):
            grad = op.outputs[0].arguments[0]
            here = tuple(op.dist_attr.process_mesh.process_ids)
            out.append((here, mesh[grad], mesh[grad.removesuffix("@GRAD")]))
    return out


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(
            (paths.PADDLE_REFERENCE / "pp4_v2_noclip_plain.pb").read_bytes(),
            id="paddle-3.3.1",
        ),
        pytest.param(build_sample(SampleOptions(layers=8, pp=4, hidden=64)), id="sample"),
    ],
)
def test_sums_across_a_stage_boundary_are_placed_as_paddle_places_them(data: bytes) -> None:
    """Paddle's own export (tests/data/paddle_reference) and the sample agree: a boundary
    sum runs on the later stage, its output lives on the forward variable's mesh."""
    sums = _sum_placements(data)
    assert all(out == forward for _, out, forward in sums)
    boundary = [s for s in sums if s[0] != s[1]]
    assert len(boundary) == 3  # one per boundary of 4 stages
    assert all(here[0] == out[0] + 1 for here, out, _ in boundary)
