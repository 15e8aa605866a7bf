"""Invariants of the conversion for random layer counts, pp and V.

Programs come from `layered(...)`: random pp in 2..4, V in 1..3, 1..2 layers per
segment, the layers on a random non-decreasing stage sequence (plain PP, auto mode;
first layer on stage 0, last on the last stage) or already interleaved as the
segments give (manual mode), with or without backward
ops, optimizer ops and op ids.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from programs import Prog, layered
from rulekit import convert, layer_op, placements, without_placements

from vppctl.program._proto import program_pb2 as pb
from vppctl.program.load import parse_program
from vppctl.verify.expectation import verify_program

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass(frozen=True)
class Case:
    pp: int
    vpp: int
    per_segment: int
    layer_stages: tuple[int, ...]
    interleaved: bool
    backward: bool
    optimizer: bool
    ids: bool

    @property
    def n_layers(self) -> int:
        return len(self.layer_stages)

    def build(self, ids: bool | None = None) -> Prog:
        return layered(
            list(self.layer_stages),
            stages=self.pp,
            backward=self.backward,
            optimizer=self.optimizer,
            ids=self.ids if ids is None else ids,
        )

    def segment_of(self, layer: int) -> int:
        return layer // self.per_segment


@st.composite
def cases(draw: st.DrawFn) -> Case:
    pp = draw(st.integers(2, 4))
    vpp = draw(st.integers(1, 3))
    per = draw(st.integers(1, 2))
    n = pp * vpp * per
    interleaved = vpp > 1 and draw(st.booleans())
    if interleaved:
        stages = tuple((i // per) % pp for i in range(n))
    else:
        # Plain PP as Paddle lays it out: stages never decrease, the first layer on stage 0
        # and the last on the last stage (with the head); stages in between may be empty.
        inner = draw(st.lists(st.integers(0, pp - 1), min_size=n - 2, max_size=n - 2))
        stages = (0, *sorted(inner), pp - 1) if n > 1 else (0,)
    backward = draw(st.booleans())
    return Case(
        pp=pp,
        vpp=vpp,
        per_segment=per,
        layer_stages=stages,
        interleaved=interleaved,
        backward=backward,
        optimizer=backward and draw(st.booleans()),
        ids=draw(st.booleans()),
    )


def _names(n: int) -> list[str]:
    return ["DecoderLayer"] + [f"DecoderLayer_{k}" for k in range(1, n)]


@SETTINGS
@given(cases())
def test_every_layer_lands_in_exactly_one_non_empty_segment(case: Case) -> None:
    c = convert(case.build(), case.vpp)
    segs = c.plan.segments
    assert len(segs) == case.pp * case.vpp
    assert all(len(s.layers) > 0 for s in segs)
    assert [n for s in segs for n in s.layers] == _names(case.n_layers)
    assert c.plan.mode == ("manual" if case.interleaved or _decreasing(case) else "auto")


def _decreasing(case: Case) -> bool:
    s = case.layer_stages
    return any(a > b for a, b in zip(s, s[1:]))


@SETTINGS
@given(cases())
def test_segment_k_sits_on_stage_k_mod_pp_with_chunk_k_div_pp(case: Case) -> None:
    c = convert(case.build(), case.vpp)
    for k, s in enumerate(c.plan.segments):
        assert (s.virtual_stage, s.stage, s.chunk) == (k, k % case.pp, k // case.pp)
        assert tuple(s.mesh.process_ids) == (k % case.pp,)
    for layer in range(case.n_layers):
        k = case.segment_of(layer)
        for j in range(2):
            assert c.where(layer_op(layer, j)) == ((k % case.pp,), k // case.pp)


@SETTINGS
@given(cases())
def test_every_op_has_a_stage_mesh_and_a_chunk_id_in_range(case: Case) -> None:
    c = convert(case.build(), case.vpp)
    stage_meshes = {(s,) for s in range(case.pp)}
    for b, block in enumerate(c.after.blocks):
        for i, op in enumerate(block.ops):
            mesh, chunk = c.where(i, block=b)
            assert mesh in stage_meshes, f"op {i} ({op.type})"
            assert chunk is not None and 0 <= chunk < case.vpp, f"op {i} ({op.type})"
        for v in block.vars:
            if v.dist_attr.HasField("chunk_id"):
                assert 0 <= v.dist_attr.chunk_id < case.vpp, v.name


@SETTINGS
@given(cases())
def test_converting_is_deterministic(case: Case) -> None:
    data = case.build().bytes()
    assert convert(data, case.vpp).data == convert(data, case.vpp).data


@SETTINGS
@given(cases())
def test_converting_a_converted_program_again_changes_only_the_plan(case: Case) -> None:
    first = convert(case.build(), case.vpp)
    again = convert(first.data, case.vpp)
    if case.vpp > 1:
        assert again.plan.mode == "manual"
    assert again.result.ops_changed == 0 and again.result.vars_changed == 0
    a, b = pb.ProgramDesc.FromString(first.data), pb.ProgramDesc.FromString(again.data)
    a.ClearField("pipeline_plan")
    b.ClearField("pipeline_plan")
    assert a.SerializeToString() == b.SerializeToString()
    assert [(s.stage, s.chunk, list(s.layers)) for s in again.plan.segments] == [
        (s.stage, s.chunk, list(s.layers)) for s in first.plan.segments
    ]


@SETTINGS
@given(cases())
def test_ops_without_ids_convert_like_ops_with_ids(case: Case) -> None:
    with_ids = convert(case.build(ids=True), case.vpp)
    without = convert(case.build(ids=False), case.vpp)
    assert placements(without.after) == placements(with_ids.after)
    assert without.warnings == with_ids.warnings == ()


@SETTINGS
@given(cases())
def test_verify_accepts_every_output(case: Case) -> None:
    c = convert(case.build(), case.vpp)
    report = verify_program(parse_program(c.data))
    assert list(report.violations) == []


@SETTINGS
@given(cases())
def test_only_meshes_chunk_ids_and_the_plan_change(case: Case) -> None:
    c = convert(case.build(), case.vpp)
    assert (
        without_placements(c.before).SerializeToString()
        == without_placements(c.after).SerializeToString()
    )
