"""vppctl's conversion of programs exported from real Paddle equals Paddle's own answer.

The inputs and Paddle's answers are checked in (tests/data/paddle_reference/, see its README),
so this runs without Paddle; tests/paddle/ repeats the round trip against live
Paddle. Optimizer ops and the variables only they use are compared by mesh: Paddle leaves
their chunk id at 0, vppctl gives them their parameter's chunk. Blocks no op reaches (the
recompute pass's scratch block) and the recompute pass's dependency nops that only the
plain build has are not compared (see tests/support/paddle_compare.py).

The real training programs (`llama_*`, built by tests/support/real_programs.py):
recompute on some or all layers, the DataLoader reader, AMP O1/O2, TP x PP, tied
embeddings, leftover meshes, reshard between layers. A case still waiting for a fix is
marked ``xfail(strict=True)``: the marker flips to XPASS when the fix lands.
"""

from __future__ import annotations

import lzma
import re
from typing import Any

import paths
import pytest
from paddle_compare import compare_annotations, compare_programs, report

from vppctl.convert import ConvertOptions, ConvertResult, convert_program
from vppctl.plan import PlanOptions
from vppctl.program._proto import program_pb2 as pb
from vppctl.program.load import parse_program
from vppctl.verify import VerifyOptions
from vppctl.verify.expectation import verify_program

REFERENCE = paths.PADDLE_REFERENCE
CASES = sorted(
    {p.name.split("_plain.pb")[0] for p in REFERENCE.glob("*_plain.pb*")},
)
LLAMA = [c for c in CASES if c.startswith("llama_")]
RECOMPUTE = [c for c in LLAMA if c.startswith(("llama_rc_", "llama_rcall_"))]

#: Conversions that wait for a fix (see tests/paddle/test_real_programs.py): none.
PENDING: dict[str, str] = {}


def _marked(cases: list[str], pending: dict[str, str]) -> list[Any]:
    return [
        pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=pending[c]))
        if c in pending
        else c
        for c in cases
    ]


def vpp_of(case: str) -> int:
    found = re.search(r"_v(\d+)", case)
    assert found is not None, case
    return int(found.group(1))


def seg_method_of(case: str) -> str:
    return "LlamaDecoderLayer" if case.startswith("llama_") else "DecoderLayer"


def reference(name: str) -> bytes:
    """A checked-in export; the real programs are stored xz-compressed."""
    path = REFERENCE / name
    if path.exists():
        return path.read_bytes()
    return lzma.decompress((REFERENCE / f"{name}.xz").read_bytes())


def _strip_ids(data: bytes) -> bytes:
    program = pb.ProgramDesc.FromString(data)
    for block in program.blocks:
        for op in block.ops:
            op.ClearField("id")
            op.ClearField("forward_op_id")
    return program.SerializeToString()


def converted(
    case: str, placement: str = "loop", *, strict: bool = False, ids: bool = True
) -> tuple[bytes, ConvertResult]:
    data = reference(f"{case}_plain.pb")
    program = parse_program(data if ids else _strip_ids(data))
    plan = PlanOptions(vpp=vpp_of(case), placement=placement)  # type: ignore[arg-type]
    opts = ConvertOptions(plan=plan, seg_method=seg_method_of(case), strict=strict)
    result = convert_program(program, opts)
    return program.to_bytes(), result


def paddle_answer(case: str, kind: str = "paddlevpp") -> pb.ProgramDesc:
    return pb.ProgramDesc.FromString(reference(f"{case}_{kind}.pb"))


def test_reference_programs_are_present() -> None:
    assert len(CASES) >= 15
    for case in LLAMA:
        reference(f"{case}_plain.pb")
        reference(f"{case}_paddlevpp.pb")


@pytest.mark.parametrize("case", _marked(CASES, PENDING))
def test_conversion_matches_paddle_op_by_op(case: str) -> None:
    ours = pb.ProgramDesc.FromString(converted(case)[0])
    diffs = compare_annotations(paddle_answer(case), ours)
    assert not diffs, report(diffs)


@pytest.mark.parametrize("case", _marked(LLAMA, PENDING))
def test_conversion_without_op_ids_matches_paddle(case: str) -> None:
    """Programs serialized without vppctl's op ids (no `id`, no `forward_op_id`)."""
    ours = pb.ProgramDesc.FromString(converted(case, ids=False)[0])
    diffs = compare_annotations(paddle_answer(case), ours)
    assert not diffs, report(diffs)


@pytest.mark.parametrize("case", RECOMPUTE)
def test_recompute_conversion_places_forward_ops_as_paddle(case: str) -> None:
    result = compare_programs(paddle_answer(case), pb.ProgramDesc.FromString(converted(case)[0]))
    forward = [str(d) for d in result.differences if d.kind == "forward"]
    assert not forward, report(forward)
    assert result.skipped_blocks == (1,)  # the scratch block


@pytest.mark.parametrize("case", RECOMPUTE)
def test_unmatched_nops_sit_with_an_op_they_order(case: str) -> None:
    """Nops only the plain build has (Paddle inserts one only between ops on one mesh) sit
    on the mesh and chunk of the op before them or of the recomputed op after them."""
    ours = pb.ProgramDesc.FromString(converted(case)[0])
    result = compare_programs(paddle_answer(case), ours)
    assert result.only_ours
    ops = ours.blocks[0].ops

    def place(op: pb.OpDesc) -> tuple[tuple[int, ...], int]:
        return tuple(op.dist_attr.process_mesh.process_ids), op.dist_attr.chunk_id

    for _, j in result.only_ours:
        assert ops[j].type == "nop"
        assert place(ops[j]) in (place(ops[j - 1]), place(ops[j + 1])), j


@pytest.mark.parametrize("case", CASES)
def test_paddles_own_answer_passes_verify(case: str) -> None:
    data = reference(f"{case}_paddlevpp.pb")
    found = verify_program(
        parse_program(data), VerifyOptions(vpp=vpp_of(case), seg_method=seg_method_of(case))
    )
    assert found.violations == ()


def test_strict_accepts_reshard_assigns() -> None:
    ours = pb.ProgramDesc.FromString(converted("llama_reshard_pp2_v2", strict=True)[0])
    diffs = compare_annotations(paddle_answer("llama_reshard_pp2_v2"), ours)
    assert not diffs, report(diffs)


@pytest.mark.parametrize("case", ["llama_amp_o1_pp2_v2", "llama_amp_o2_pp2_v2"])
def test_amp_casts_are_not_reported_op_by_op(case: str) -> None:
    _, result = converted(case)
    assert not [w for w in result.warnings if "(cast)" in w], result.warnings


@pytest.mark.parametrize("case", ["llama_tp2_pp2_v2", "llama_tied_pp2_v2", "llama_amp_o2_pp2_v2"])
def test_no_ids_conversion_has_no_backward_noise(case: str) -> None:
    """Every op of these programs lands where Paddle puts it, so without op ids no backward
    op should be reported as possibly misplaced."""
    ours, result = converted(case, ids=False)
    assert not compare_annotations(paddle_answer(case), pb.ProgramDesc.FromString(ours))
    assert not [w for w in result.warnings if "backward op" in w], result.warnings


def test_paddles_v_shape_passes_verify_with_v_placement() -> None:
    data = reference("pp4_v2_noclip_paddlezbvpp.pb")
    assert verify_program(parse_program(data), VerifyOptions(placement="v")).violations == ()
    loop = verify_program(parse_program(data), VerifyOptions(placement="loop")).violations
    assert "V006" in {v.rule for v in loop}  # V placement read as loop is wrong


def test_v_shape_matches_paddles_zbvpp() -> None:
    case = "pp4_v2_noclip"
    ours = pb.ProgramDesc.FromString(converted(case, placement="v")[0])
    diffs = compare_annotations(paddle_answer(case, "paddlezbvpp"), ours)
    assert not diffs, report(diffs)
