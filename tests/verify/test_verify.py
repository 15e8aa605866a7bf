"""`vppctl verify`: every program convert writes is valid; each rule catches its own breakage.

Rule tests start from one small converted program (4 layers, pp 2, vpp 2, with
backward and optimizer ops; `Broken`) or a hand-built VPP program (`fan`), break
exactly one thing, and expect exactly that rule id. Breaking a layer's placement
consistently means moving its forward op, its grad op and the variables those
first write together, which `Broken.move` does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from programs import LOSS, Prog, layered

from vppctl.cli import cli
from vppctl.convert import ConvertOptions, convert_program
from vppctl.plan import PlanOptions
from vppctl.program._proto import program_pb2 as pb
from vppctl.program.load import parse_program
from vppctl.verify import RULES, VerifyOptions, Violation
from vppctl.verify.expectation import verify_program

# -- helpers ---------------------------------------------------------------------------


def converted(data: bytes, vpp: int, **plan: object) -> bytes:
    program = parse_program(data)
    convert_program(program, ConvertOptions(plan=PlanOptions(vpp=vpp, **plan)))  # type: ignore[arg-type]
    return program.to_bytes()


def violations(data: bytes, **kw: object) -> list[Violation]:
    return list(verify_program(parse_program(data), VerifyOptions(**kw)).violations)  # type: ignore[arg-type]


def rules(data: bytes, **kw: object) -> set[str]:
    return {v.rule for v in violations(data, **kw)}


def _op_names(op: pb.OpDesc, outputs: bool = True) -> list[str]:
    return [a for v in (op.outputs if outputs else op.inputs) for a in v.arguments]


class Broken:
    """The converted 4-layer program (pp 2, vpp 2), to break one rule at a time.

    Layer k sits on stage k % 2, chunk k // 2; op 0 is the embedding, ops 1..8 the
    layers (two matmuls each), 9 the head, 10 the loss, 11 the loss-grad op, then
    one grad op per forward op and one sgd op per parameter.
    """

    SOURCE = layered([0, 0, 1, 1], backward=True, optimizer=True).bytes()
    DATA = converted(SOURCE, 2)

    def __init__(self) -> None:
        self.msg = pb.ProgramDesc.FromString(self.DATA)
        self.ops = self.msg.blocks[0].ops

    def bytes(self) -> bytes:
        return self.msg.SerializeToString()

    def rules(self, **kw: object) -> set[str]:
        return rules(self.bytes(), **kw)

    def index(self, type_: str, nth: int = 0) -> int:
        return [i for i, op in enumerate(self.ops) if op.type == type_][nth]

    def grad_of(self, i: int) -> int:
        fid = self.ops[i].id
        return next(j for j, op in enumerate(self.ops) if op.forward_op_id == fid)

    def var(self, name: str) -> pb.VarDesc:
        return next(v for v in self.msg.blocks[0].vars if v.name == name)

    def place_op(self, i: int, stage: int, chunk: int) -> None:
        d = self.ops[i].dist_attr
        d.process_mesh.CopyFrom(self.msg.process_meshes[stage])
        for entry in (*d.input_dist_attrs, *d.output_dist_attrs):
            entry.tensor_dist_attr.process_mesh.CopyFrom(self.msg.process_meshes[stage])
        d.chunk_id = chunk

    def place_var(self, name: str, stage: int, chunk: int) -> None:
        v = self.var(name)
        v.dist_attr.process_mesh.CopyFrom(self.msg.process_meshes[stage])
        v.dist_attr.chunk_id = chunk

    def move(self, i: int, stage: int, chunk: int) -> None:
        """Move forward op i, its grad op, the variables they write first, and the
        parameters op i reads with their updates (each layer op has its own)."""
        for j in (i, self.grad_of(i)):
            self.place_op(j, stage, chunk)
            for name in _op_names(self.ops[j]):
                self.place_var(name, stage, chunk)
        params = {v.name for v in self.msg.blocks[0].vars if v.is_parameter}
        for name in set(_op_names(self.ops[i], outputs=False)) & params:
            self.place_var(name, stage, chunk)
            for j, op in enumerate(self.ops):
                if op.type == "sgd" and _op_names(op, outputs=False)[0] == name:
                    self.place_op(j, stage, chunk)


def fan(places: list[tuple[int, int]], head: tuple[int, int]) -> Prog:
    """A forward-only VPP program whose layers do not feed each other.

    The embedding (stage 0, chunk 0) feeds every layer; the head, on `head`, reads
    every layer's output. Layer k is one op on places[k]; every variable is declared
    on the place of the op that writes it.
    """
    pp = 1 + max(s for s, _ in (*places, head))
    p = Prog(stages=pp)
    p.var("ids", 0, 0)
    p.var("h0", 0, 0)
    p.op("lookup_table_v2", {"Ids": ["ids"]}, {"Out": ["h0"]}, struct="/M/Embedding/")
    outs = []
    for k, (stage, chunk) in enumerate(places):
        name = "Layer" if k == 0 else f"Layer_{k}"
        out = f"{name}.out"
        p.var(out, stage, chunk)
        p.op(
            "relu",
            {"X": ["h0"]},
            {"Out": [out]},
            struct=f"/M/{name}/",
            stage=stage,
            chunk=chunk,
        )
        outs.append(out)
    p.var("logits", *head)
    p.var("loss", *head)
    p.op(
        "concat", {"X": outs}, {"Out": ["logits"]}, struct="/M/Head/", stage=head[0], chunk=head[1]
    )
    p.op(
        "mean",
        {"X": ["logits"]},
        {"Out": ["loss"]},
        struct="/M/Loss/",
        role=LOSS,
        stage=head[0],
        chunk=head[1],
    )
    return p


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


# -- one rule at a time ----------------------------------------------------------------


def test_rules_are_numbered_v001_to_v021() -> None:
    assert list(RULES) == [f"V{n:03d}" for n in range(1, 22)]


def test_v001_op_without_chunk_id() -> None:
    b = Broken()
    b.ops[b.index("sgd")].dist_attr.ClearField("chunk_id")
    assert b.rules() == {"V001"}


def test_v001_op_without_mesh() -> None:
    b = Broken()
    b.ops[b.index("sgd")].dist_attr.ClearField("process_mesh")
    found = violations(b.bytes())
    assert {v.rule for v in found} == {"V001", "V010"}  # an update off its parameter's mesh
    assert any(v.rule == "V001" and "process mesh" in v.message for v in found)


def test_v002_chunk_id_out_of_range() -> None:
    b = Broken()
    b.ops[b.index("sgd")].dist_attr.chunk_id = 2
    found = violations(b.bytes())
    assert {v.rule for v in found} == {"V002"}
    assert "chunk id 2 is outside [0, 2)" in found[0].message


@pytest.mark.parametrize("chunk", [-5, 2**40, -(2**63)])
def test_v002_negative_or_huge_chunk_id(chunk: int) -> None:
    b = Broken()
    b.ops[b.index("sgd")].dist_attr.chunk_id = chunk
    assert b.rules() == {"V002"}


def test_v002_huge_chunk_ids_do_not_become_the_vpp(tmp_path: Path) -> None:
    """Without a plan, vpp comes from the chunk ids used; a corrupt one must not make it 2**40."""
    b = Broken()
    b.msg.ClearField("pipeline_plan")
    b.ops[b.index("sgd")].dist_attr.chunk_id = 2**40
    report = verify_program(parse_program(b.bytes()))
    assert report.vpp == 2
    assert {v.rule for v in report.violations} == {"V002"}


def test_v003_op_on_a_mesh_that_is_no_stage_mesh() -> None:
    b = Broken()
    op = b.ops.add(type="increment")
    op.attrs.add(name="op_role", type=pb.INT, i=16)  # LRSched
    op.dist_attr.process_mesh.CopyFrom(pb.ProcessMesh(shape=[1], process_ids=[7]))
    op.dist_attr.chunk_id = 0
    found = violations(b.bytes())
    assert {v.rule for v in found} == {"V003"}
    assert found[0].op == len(b.ops) - 1 and found[0].type == "increment"


def test_v003_forward_op_on_the_global_mesh() -> None:
    p = layered([0, 0, 1, 1])
    p.msg.process_meshes.add(shape=[2], process_ids=[0, 1])
    data = converted(p.bytes(), 2)
    assert violations(data) == []
    msg = pb.ProgramDesc.FromString(data)
    head = msg.blocks[0].ops[9]
    head.dist_attr.process_mesh.CopyFrom(msg.process_meshes[2])
    found = rules(msg.SerializeToString())
    assert "V003" in found


def test_v004_a_layer_split_over_two_chunks() -> None:
    p = fan([(0, 0), (1, 0), (0, 1), (1, 1)], head=(1, 1))
    p.var("Layer.out2", 0, 1)
    p.op("scale", {"X": ["Layer.out"]}, {"Out": ["Layer.out2"]}, struct="/M/Layer/Scale/", chunk=1)
    ops = p.msg.blocks[0].ops
    second = pb.OpDesc()
    second.CopyFrom(ops[len(ops) - 1])
    del ops[len(ops) - 1]
    ops.insert(2, second)  # right after the layer's first op
    found = violations(p.bytes(), pp=2, vpp=2)
    assert {v.rule for v in found} == {"V004"}
    assert found[0].op == 2 and "layer Layer is on [0] chunk 0" in found[0].message


def test_v004_a_layer_split_over_two_stages_is_reported_as_layers_not_found() -> None:
    """A layer on two meshes cannot be found at all (the layer finder refuses it), so the
    verifier reports it under V005 with the finder's message."""
    b = Broken()
    b.move(6, 1, 1)  # layer 2's second op joins layer 3's placement
    found = violations(b.bytes())
    assert {v.rule for v in found} == {"V005"}
    assert "DecoderLayer_2 spans two meshes" in found[0].message


def test_v005_a_stage_and_chunk_without_a_layer() -> None:
    b = Broken()
    b.move(7, 0, 1)  # layer 3 joins layer 2 on stage 0 chunk 1: stage 1 chunk 1 is empty
    b.move(8, 0, 1)
    b.msg.ClearField("pipeline_plan")
    found = violations(b.bytes(), pp=2, vpp=2)
    assert {v.rule for v in found} == {"V005"}
    assert "stage 1 chunk 1 holds no layer" in found[0].message


def test_v005_more_segments_than_layers_is_one_violation() -> None:
    b = Broken()
    b.msg.ClearField("pipeline_plan")
    found = violations(b.bytes(), vpp=4000)
    assert [v.rule for v in found] == ["V005"]


def test_v005_layers_not_found() -> None:
    found = violations(Broken.DATA, seg_method="NoSuchLayer")
    assert {v.rule for v in found} == {"V005"}
    assert "cannot find the layers" in found[0].message


def test_v006_segments_in_the_wrong_order() -> None:
    # Layers in the order of the V placement, checked against loop placement; the layers
    # do not feed each other, so data flow (V007) is not broken.
    p = fan([(0, 0), (1, 0), (1, 1), (0, 1)], head=(1, 1))
    found = violations(p.bytes(), pp=2, vpp=2, placement="loop")
    assert {v.rule for v in found} == {"V006"}
    assert "segment 2" in found[0].message


def test_v007_forward_data_flow_runs_backwards() -> None:
    b = Broken()
    b.move(0, 1, 1)  # the embedding, read by layer 0 (virtual stage 0), to virtual stage 3
    found = violations(b.bytes())
    assert {v.rule for v in found} == {"V007"}
    assert found[0].op == 1 and "virtual stage 3" in found[0].message


def test_v007_a_variable_written_later_is_no_flow() -> None:
    """An op that reads a variable before any op writes it reads an input, not a later stage."""
    p = fan([(0, 0), (1, 0)], head=(1, 0))
    p.var("late", 1, 0)
    ops = p.msg.blocks[0].ops
    ops[1].inputs.add(parameter="Y", arguments=["late"])
    p.op("assign", {"X": ["loss"]}, {"Out": ["late"]}, stage=1, chunk=0)
    assert violations(p.bytes(), pp=2, vpp=1) == []


def test_v008_grad_op_off_its_forward_op() -> None:
    b = Broken()
    g = b.grad_of(3)  # layer 1 (stage 1 chunk 0)
    b.place_op(g, 0, 0)
    for name in _op_names(b.ops[g]):
        b.place_var(name, 0, 0)
    found = violations(b.bytes())
    assert {v.rule for v in found} == {"V008"}
    assert found[0].op == g and found[0].type == "matmul_v2_grad"


def test_v008_loss_grad_op_off_the_loss_op() -> None:
    b = Broken()
    i = b.index("fill_constant")
    b.place_op(i, 1, 0)
    b.place_var("loss@GRAD", 1, 0)
    assert b.rules() == {"V008"}


def test_v009_sum_op_off_its_nearest_producer(sample_bytes: dict[tuple[int, int], bytes]) -> None:
    msg = pb.ProgramDesc.FromString(converted(sample_bytes[4, 2], 2))
    ops = msg.blocks[0].ops
    sum_inputs = {a for op in ops if op.type == "sum" for a in _op_names(op, outputs=False)}
    i = next(
        i for i, op in enumerate(ops) if op.type == "sum" and not set(_op_names(op)) & sum_inputs
    )
    here = ops[i].dist_attr
    other = next(m for m in msg.process_meshes if m.process_ids != here.process_mesh.process_ids)
    here.process_mesh.CopyFrom(other)
    for entry in (*here.input_dist_attrs, *here.output_dist_attrs):
        entry.tensor_dist_attr.process_mesh.CopyFrom(other)
    found = violations(msg.SerializeToString())
    assert {v.rule for v in found} == {"V009"}
    assert found[0].op == i and found[0].type == "sum"


def test_v010_update_off_its_parameters_mesh() -> None:
    b = Broken()
    i = b.index("sgd", 1)  # DecoderLayer.w0, on stage 0
    b.place_op(i, 1, 0)
    found = violations(b.bytes())
    assert {v.rule for v in found} == {"V010"}
    assert "DecoderLayer.w0" in found[0].message


def test_v011_variable_off_its_first_writer() -> None:
    b = Broken()
    b.place_var("DecoderLayer_2.out0", 0, 0)  # written by layer 2 on stage 0 chunk 1
    found = violations(b.bytes())
    assert {v.rule for v in found} == {"V011"}
    assert found[0].op == 5 and "DecoderLayer_2.out0" in found[0].message


def test_v011_shows_the_shape_of_meshes_that_differ_only_in_shape() -> None:
    b = Broken()
    v = b.var("DecoderLayer_2.out0")
    v.dist_attr.process_mesh.ClearField("shape")
    v.dist_attr.process_mesh.shape.extend([1, 1])
    found = violations(b.bytes())
    assert {x.rule for x in found} == {"V011"}
    assert "shape [1, 1]" in found[0].message


def test_v012_recorded_plan_disagrees_with_the_ops() -> None:
    b = Broken()
    b.msg.pipeline_plan.segments[1].layers[0] = "DecoderLayer_9"
    found = violations(b.bytes())
    assert {v.rule for v in found} == {"V012"}
    assert "segment 1" in found[0].message


def test_v012_recorded_plan_with_an_absurd_vpp() -> None:
    b = Broken()
    b.msg.pipeline_plan.vpp = 2**31 - 1
    assert b.rules() == {"V012"}


def test_v012_recorded_plan_with_a_regex_that_does_not_compile() -> None:
    b = Broken()
    b.msg.pipeline_plan.seg_method = "("
    found = violations(b.bytes())
    assert {v.rule for v in found} == {"V005"}
    assert "recorded plan" in found[0].message


def test_v013_op_names_an_undeclared_variable() -> None:
    b = Broken()
    i = b.index("sgd")
    b.ops[i].inputs.add(parameter="Ghost", arguments=["ghost"])
    found = violations(b.bytes())
    assert {v.rule for v in found} == {"V013"}
    assert found[0].op == i


def test_v014_sub_block_that_does_not_exist() -> None:
    b = Broken()
    i = b.index("sgd")
    b.ops[i].attrs.add(name="sub_block", type=pb.BLOCK, block_idx=5)
    found = violations(b.bytes())
    assert {v.rule for v in found} == {"V014"}
    assert found[0].op == i and "sub_block 5" in found[0].message


def test_v014_sub_block_pointing_back_at_its_own_block() -> None:
    b = Broken()
    b.ops[b.index("sgd")].attrs.add(name="sub_block", type=pb.BLOCK, block_idx=0)
    assert b.rules() == {"V014"}


def test_v015_pp_asked_for_is_not_the_programs() -> None:
    found = violations(Broken.DATA, pp=3)
    assert {v.rule for v in found} == {"V015"}
    assert "--pp is 3" in found[0].message


def test_v015_vpp_asked_for_is_not_the_recorded_plans() -> None:
    assert "V015" in rules(Broken.DATA, vpp=4)


def test_every_rule_is_reported_when_several_are_broken() -> None:
    b = Broken()
    b.ops[b.index("sgd")].dist_attr.chunk_id = 2
    b.ops[b.index("sgd", 2)].inputs.add(parameter="Ghost", arguments=["ghost"])
    b.place_var("DecoderLayer_2.out0", 0, 0)
    assert b.rules(pp=3) == {"V002", "V011", "V013", "V015"}


# -- the command line ---------------------------------------------------------------------


def _write(tmp_path: Path, data: bytes, name: str = "prog.pb") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_cli_valid_program_is_one_line_and_exit_0(runner: CliRunner, tmp_path: Path) -> None:
    src = _write(tmp_path, Broken.DATA)
    r = runner.invoke(cli, ["verify", str(src)])
    assert r.exit_code == 0, r.output
    assert r.stdout.count("\n") == 1 and r.stdout.startswith("valid: pp 2 x vpp 2")
    assert "cross-stage edges per micro-batch" in r.stdout
    assert r.stderr == ""


def test_cli_violations_are_a_table_and_exit_1(runner: CliRunner, tmp_path: Path) -> None:
    b = Broken()
    b.ops[b.index("sgd")].dist_attr.chunk_id = 2
    b.place_var("DecoderLayer_2.out0", 0, 0)
    src = _write(tmp_path, b.bytes())
    r = runner.invoke(cli, ["verify", str(src)])
    assert r.exit_code == 1, r.output
    assert "2 violation(s)" in r.stdout
    for header in ("Rule", "Block", "Op", "Type", "Message"):
        assert header in r.stdout
    assert "V002" in r.stdout and "V011" in r.stdout and "sgd" in r.stdout
    assert r.stderr == ""


def test_cli_json_valid(runner: CliRunner, tmp_path: Path) -> None:
    src = _write(tmp_path, Broken.DATA)
    r = runner.invoke(cli, ["verify", str(src), "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)  # stdout holds the JSON object and nothing else
    assert data["valid"] is True and data["violations"] == []
    assert data["pp"] == 2 and data["vpp"] == 2
    assert data["layers"]["count"] == 4 and data["layers"]["class"] == "DecoderLayer"
    assert isinstance(data["cross_stage_edges"], int) and data["cross_stage_edges"] > 0
    assert r.stderr == ""


def test_cli_json_violations(runner: CliRunner, tmp_path: Path) -> None:
    b = Broken()
    i = b.index("sgd")
    b.ops[i].dist_attr.chunk_id = 2
    src = _write(tmp_path, b.bytes())
    r = runner.invoke(cli, ["verify", str(src), "--json"])
    assert r.exit_code == 1, r.output
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


def test_cli_options_set_the_expectation(runner: CliRunner, tmp_path: Path) -> None:
    src = _write(tmp_path, Broken.DATA)
    r = runner.invoke(cli, ["verify", str(src), "--pp", "4", "--json"])
    assert r.exit_code == 1
    assert [v["rule"] for v in json.loads(r.stdout)["violations"]] == ["V015"]


def test_cli_rules_lists_every_rule(runner: CliRunner) -> None:
    r = runner.invoke(cli, ["verify", "--rules"])
    assert r.exit_code == 0
    for rule in RULES:
        assert rule in r.stdout


def test_cli_table_shows_names_with_markup_characters_verbatim(
    runner: CliRunner, tmp_path: Path
) -> None:
    """Op types and variable names are data: `[/]` in one must not be read as rich markup."""
    b = Broken()
    i = b.index("sgd")
    b.ops[i].type = "[/]odd[bold]"
    b.ops[i].dist_attr.chunk_id = 2
    src = _write(tmp_path, b.bytes())
    r = runner.invoke(cli, ["verify", str(src)])
    assert r.exit_code == 1, r.output
    assert "[/]odd[bold]" in r.stdout


# -- cross-stage edges ---------------------------------------------------------------------


def test_convert_reports_cross_stage_edges_before_and_after(
    runner: CliRunner, tmp_path: Path, sample_bytes: dict[tuple[int, int], bytes]
) -> None:
    src = _write(tmp_path, sample_bytes[8, 4])
    out = tmp_path / "out.pb"
    r = runner.invoke(cli, ["convert", str(src), "--vpp", "2", "-o", str(out), "--json"])
    assert r.exit_code == 0, r.output
    edges = json.loads(r.stdout)["cross_stage_edges"]
    assert set(edges) == {"before", "after"}
    assert 0 < edges["before"] < edges["after"]  # VPP multiplies point-to-point traffic
    v = runner.invoke(cli, ["verify", str(out), "--json"])
    assert v.exit_code == 0, v.output
    assert json.loads(v.stdout)["cross_stage_edges"] == edges["after"]
    before = runner.invoke(cli, ["verify", str(src), "--vpp", "1", "--json"])
    data = json.loads(before.stdout)
    if data["valid"]:
        assert data["cross_stage_edges"] == edges["before"]


def test_cross_stage_edges_count_each_variable_once_per_consuming_stage() -> None:
    from vppctl.engine.flow import cross_stage_edges
    from vppctl.engine.index import build_index

    # h0 (stage 0) is read by layers on stages 1 and 2: two edges; the head on stage 2 reads
    # both layer outputs, from stages 1 and 2: one more edge.
    p = fan([(1, 0), (2, 0)], head=(2, 0))
    index = build_index(p.program())
    stages, _ = index.stage_mesh_ids()
    assert cross_stage_edges(index, stages) == 3


def test_backward_and_optimizer_ops_do_not_count_as_edges() -> None:
    from vppctl.engine.flow import cross_stage_edges
    from vppctl.engine.index import build_index

    p = layered([0, 1])
    plain = p.program()
    q = layered([0, 1], backward=True, optimizer=True)
    index_plain, index_full = build_index(plain), build_index(q.program())
    assert cross_stage_edges(index_plain, index_plain.stage_mesh_ids()[0]) == cross_stage_edges(
        index_full, index_full.stage_mesh_ids()[0]
    )
