"""One rule at a time (vppctl/verify/checks.py): each numbered rule of `vppctl verify` is
broken on purpose in a program that is otherwise valid (`Broken`, or a hand-built VPP
program, `fan`: tests/support/verifykit.py), and exactly that rule fires, naming the op.

The tests here also cover vppctl/verify/checker.py, vppctl/verify/rules.py and
vppctl/verify/segments.py, which have no test file of their own.
"""

from __future__ import annotations

import lzma
import random
from array import array
from pathlib import Path

import paths
import pytest
from programs import layered
from verifykit import Broken, converted, fan, op_names, rules, violations

from vppctl.engine.index import build_index
from vppctl.program._proto import program_pb2 as pb
from vppctl.program.load import parse_program
from vppctl.verify import RULES, VerifyOptions
from vppctl.verify.checker import FirstOps
from vppctl.verify.expectation import verify_program

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
    for name in op_names(b.ops[g]):
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
    sum_inputs = {a for op in ops if op.type == "sum" for a in op_names(op, outputs=False)}
    i = next(
        i for i, op in enumerate(ops) if op.type == "sum" and not set(op_names(op)) & sum_inputs
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


def test_v011_a_sum_output_lives_with_its_forward_variable_not_with_the_sum() -> None:
    """A gradient sum runs where its parts meet; its output lives with its forward variable
    (Paddle's answers put it there). For every sum of Paddle's tied-embedding answer on
    another place than its output's forward variable: as Paddle wrote it, V011 is quiet;
    the output moved onto the sum's own place, V011 names it at the sum."""
    data = lzma.decompress(
        (paths.PADDLE_REFERENCE / "llama_tied_pp2_v2_paddlevpp.pb.xz").read_bytes()
    )
    options = VerifyOptions(seg_method="LlamaDecoderLayer")
    assert not [
        v for v in verify_program(parse_program(data), options).violations if v.rule == "V011"
    ]
    msg = pb.ProgramDesc.FromString(data)
    block = msg.blocks[0]
    var = {v.name: v for v in block.vars}
    moved = 0
    for i, op in enumerate(block.ops):
        out = op_names(op)
        if op.type not in ("sum", "grad_add") or len(out) != 1 or not out[0].endswith("@GRAD"):
            continue
        here = (list(op.dist_attr.process_mesh.process_ids), op.dist_attr.chunk_id)
        forward = var[out[0].removesuffix("@GRAD")].dist_attr
        if (list(forward.process_mesh.process_ids), forward.chunk_id) == here:
            continue
        broken = pb.ProgramDesc.FromString(data)
        v = next(v for v in broken.blocks[0].vars if v.name == out[0])
        v.dist_attr.process_mesh.CopyFrom(op.dist_attr.process_mesh)
        v.dist_attr.chunk_id = op.dist_attr.chunk_id
        found = verify_program(parse_program(broken.SerializeToString()), options).violations
        assert [(x.rule, x.op) for x in found if out[0] in x.message] == [("V011", i)], out[0]
        moved += 1
    assert moved >= 2


def test_v011_reports_many_variables_latest_listed_first() -> None:
    """Every forward and backward output moved off its writer's stage: V011 names each
    variable once, at its first writer, in the order the ops' output columns name them
    last, read from their end (the order V011 has always used)."""
    b = Broken()
    stage0 = b.msg.process_meshes[0]
    for op in b.ops:
        if op.type != "sgd":
            other = 1 if op.dist_attr.process_mesh == stage0 else 0
            for name in op_names(op):
                b.place_var(name, other, 0)
    data = b.bytes()
    found = [v for v in violations(data) if v.rule == "V011"]
    index = build_index(parse_program(data))
    o = index.global_block.ops
    names = [v.message.split()[1] for v in found]
    assert len(names) >= 10 and len(set(names)) == len(names)
    last: dict[str, int] = {}
    first: dict[str, int] = {}
    for op in range(len(o.out_off) - 1):
        for at in range(o.out_off[op], o.out_off[op + 1]):
            name = index.var_name(o.out_var[at])
            last[name] = at
            first.setdefault(name, op)
    assert names == sorted(names, key=last.__getitem__, reverse=True)
    assert [v.op for v in found] == [first[n] for n in names]


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


# -- first positions (checker.FirstOps) ---------------------------------------------------


def _columns(per_op: list[list[int]]) -> tuple[array[int], array[int]]:
    var, off = array("q"), array("q", [0])
    for args in per_op:
        var.extend(args)
        off.append(len(var))
    return var, off


@pytest.mark.parametrize("seed", range(40))
def test_first_ops_are_each_variables_earliest_op(seed: int) -> None:
    """Against the definition, counted independently: a variable's first op is the least
    op listing it; ids below 0 (names resolving to no variable) are never kept."""
    rng = random.Random(seed)
    n_vars = rng.randint(1, 30)
    per_op = [
        [rng.randint(-3, n_vars - 1) for _ in range(rng.randint(0, 4))]
        for _ in range(rng.randint(0, 25))
    ]
    first = FirstOps(n_vars, *_columns(per_op))
    for v in range(-3, n_vars):
        listing = [op for op, args in enumerate(per_op) if v in args]
        want = listing[0] if listing and v >= 0 else None
        assert first.get(v, 99) == (99 if want is None else want)


def test_first_ops_hold_four_bytes_a_variable_not_a_dict() -> None:
    first = FirstOps(100_000, *_columns([[5, 7], [7, 99_999]]))
    assert first.first.itemsize == 4 and len(first.first) == 100_000
    assert [first.get(v, -1) for v in (5, 7, 99_999, 6)] == [0, 0, 1, -1]
