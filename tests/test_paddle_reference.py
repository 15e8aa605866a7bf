"""vppctl's conversion of programs exported from real Paddle equals Paddle's own answer.

The inputs and Paddle's answers are checked in (tests/paddle_reference/), so this
runs without Paddle; tests/paddle_bridge/ repeats the round trip against live Paddle.
Optimizer ops and the variables only they use are compared by mesh: Paddle
leaves their chunk id at 0, vppctl gives them their parameter's chunk.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from paddle_compare import compare_annotations, report

from vppctl import program_pb2 as pb
from vppctl.convert import ConvertOptions, convert_program
from vppctl.expectation import verify_program
from vppctl.load import parse_program
from vppctl.plan import PlanOptions

REFERENCE = Path(__file__).resolve().parent / "paddle_reference"
CASES = sorted(p.name.removesuffix("_plain.pb") for p in REFERENCE.glob("*_plain.pb"))


def vpp_of(case: str) -> int:
    return int(case.split("_")[1].removeprefix("v"))


def converted(case: str, placement: str = "loop") -> bytes:
    program = parse_program((REFERENCE / f"{case}_plain.pb").read_bytes())
    plan = PlanOptions(vpp=vpp_of(case), placement=placement)  # type: ignore[arg-type]
    convert_program(program, ConvertOptions(plan=plan, seg_method="DecoderLayer"))
    return program.to_bytes()


def test_reference_programs_are_present() -> None:
    assert len(CASES) >= 4


@pytest.mark.parametrize("case", CASES)
def test_conversion_matches_paddle_op_by_op(case: str) -> None:
    ours = pb.ProgramDesc.FromString(converted(case))
    paddle = pb.ProgramDesc.FromString((REFERENCE / f"{case}_paddlevpp.pb").read_bytes())
    diffs = compare_annotations(paddle, ours)
    assert not diffs, report(diffs)


@pytest.mark.parametrize("case", CASES)
def test_paddles_own_answer_passes_verify(case: str) -> None:
    data = (REFERENCE / f"{case}_paddlevpp.pb").read_bytes()
    found = verify_program(parse_program(data), vpp=vpp_of(case), seg_method="DecoderLayer")
    assert found.violations == ()


def test_paddles_v_shape_passes_verify_with_v_placement() -> None:
    data = (REFERENCE / "pp4_v2_noclip_paddlezbvpp.pb").read_bytes()
    assert verify_program(parse_program(data), placement="v").violations == ()
    loop = verify_program(parse_program(data), placement="loop").violations
    assert "V006" in {v.rule for v in loop}  # V placement read as loop is wrong


def test_v_shape_matches_paddles_zbvpp() -> None:
    case = "pp4_v2_noclip"
    ours = pb.ProgramDesc.FromString(converted(case, placement="v"))
    paddle = pb.ProgramDesc.FromString((REFERENCE / f"{case}_paddlezbvpp.pb").read_bytes())
    diffs = compare_annotations(paddle, ours)
    assert not diffs, report(diffs)
