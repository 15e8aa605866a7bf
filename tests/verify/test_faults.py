"""Seeded faults for the rules of issue 11: each starts from a correct conversion (vppctl's,
or Paddle's own answer from tests/data/paddle_reference), breaks exactly one thing, and expects
exactly its rule, naming the op, in the library and on the command line (exit 1).

Expecting *only* that rule is what proves each rule can fail: without it, the broken
program would pass every other rule, i.e. `verify` would call it valid. Where a fault
moves an op, its tensor dist attrs and the variables it writes first move with it, so
that V017 and V011 stay quiet.
"""

from __future__ import annotations

import json
import lzma
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import paths
import pytest
from commandline import invoke
from programs import layered
from verifykit import Broken, converted

from vppctl.convert import ConvertOptions, convert_program
from vppctl.engine.flow import recomputed_ops
from vppctl.engine.index import build_index
from vppctl.errors import SelfCheckError
from vppctl.plan import PlanOptions
from vppctl.program._proto import program_pb2 as pb
from vppctl.program.load import parse_program
from vppctl.verify import RULES, VerifyOptions, Violation
from vppctl.verify.expectation import verify_program

REFERENCE = paths.PADDLE_REFERENCE
SEG = "LlamaDecoderLayer"


def reference(name: str) -> bytes:
    return lzma.decompress((REFERENCE / f"{name}.xz").read_bytes())


def role(op: pb.OpDesc) -> int:
    return next((a.i for a in op.attrs if a.name == "op_role"), 0)


def args(op: pb.OpDesc, outputs: bool = True) -> list[str]:
    return [a for v in (op.outputs if outputs else op.inputs) for a in v.arguments]


def place(op: pb.OpDesc, mesh: pb.ProcessMesh, chunk: int) -> None:
    """Put an op on a mesh and chunk, its tensor dist attrs with it (as Paddle's setter)."""
    d = op.dist_attr
    d.process_mesh.CopyFrom(mesh)
    for e in (*d.input_dist_attrs, *d.output_dist_attrs):
        e.tensor_dist_attr.process_mesh.CopyFrom(mesh)
    d.chunk_id = chunk


def place_var(block: pb.BlockDesc, name: str, mesh: pb.ProcessMesh, chunk: int) -> None:
    v = next(v for v in block.vars if v.name == name)
    v.dist_attr.process_mesh.CopyFrom(mesh)
    v.dist_attr.chunk_id = chunk


def move_with_outputs(block: pb.BlockDesc, i: int, mesh: pb.ProcessMesh, chunk: int) -> None:
    place(block.ops[i], mesh, chunk)
    for name in args(block.ops[i]):
        place_var(block, name, mesh, chunk)


def strip_ids(msg: pb.ProgramDesc) -> None:
    for block in msg.blocks:
        for op in block.ops:
            op.ClearField("id")
            op.ClearField("forward_op_id")


@dataclass
class Fault:
    """A broken program and the one violation it must give."""

    data: bytes
    rule: str
    block: int
    op: int
    type: str
    says: str = ""  # a piece of the message
    verify_args: dict[str, object] = field(default_factory=dict)


FAULTS: dict[str, Callable[[], Fault]] = {}


def fault(fn: Callable[[], Fault]) -> Callable[[], Fault]:
    FAULTS[fn.__name__] = fn
    return fn


# -- V016: sub-blocks -----------------------------------------------------------------


def with_sub_blocks() -> pb.ProgramDesc:
    """The 4-layer program (pp 2) whose first layer runs block 1 from a conditional_block
    op; block 1 holds an assign and a while op running block 2 (a scale); converted."""
    p = layered([0, 0, 1, 1], backward=True, optimizer=True)
    b1 = p.sub_block(0)
    b2 = p.sub_block(b1)
    p.var("cond", 1)
    p.op("assign", {"X": ["h0"]}, {"Out": ["inner"]}, block=b1, stage=1)
    p.op("scale", {"X": ["inner"]}, {"Out": ["inner2"]}, block=b2, stage=1)
    p.op("while", {"X": ["inner"]}, {"Out": ["inner3"]}, block=b1, sub_block=b2, stage=1)
    i = p.op(
        "conditional_block",
        {"Cond": ["cond"], "Input": ["h0"]},
        {"Out": ["cb_out"]},
        struct="/Model/DecoderLayer_2/Cond/",  # in layer 2: stage 1, then stage 0 chunk 1
        stage=1,
        sub_block=b1,
    )
    ops = p.msg.blocks[0].ops
    op = pb.OpDesc()
    op.CopyFrom(ops[i])
    del ops[i]
    ops.insert(6, op)  # inside layer 2 (its ops are 5 and 6)
    return pb.ProgramDesc.FromString(converted(p.bytes(), 2))


def test_the_sub_block_program_is_valid_and_its_blocks_sit_with_their_op() -> None:
    msg = with_sub_blocks()
    assert verify_program(parse_program(msg.SerializeToString())).violations == ()
    where = {
        (tuple(op.dist_attr.process_mesh.process_ids), op.dist_attr.chunk_id)
        for b in (1, 2)
        for op in msg.blocks[b].ops
    }
    assert where == {((0,), 1)}  # layer 2's: stage 0, chunk 1


@fault
def v016_sub_block_op_on_another_chunk() -> Fault:
    msg = with_sub_blocks()
    op = msg.blocks[1].ops[0]
    place(op, op.dist_attr.process_mesh, 0)  # its conditional_block is on chunk 1
    return Fault(msg.SerializeToString(), "V016", 1, 0, "assign", "runs at op #6")


@fault
def v016_nested_sub_block_op_on_another_stage() -> Fault:
    msg = with_sub_blocks()
    place(msg.blocks[2].ops[0], msg.process_meshes[1], 1)  # its while op is on stage 0
    return Fault(msg.SerializeToString(), "V016", 2, 0, "scale", "block 1 op #1 (while)")


def test_v016_a_sub_block_op_on_its_ops_placement_is_not_reported_for_its_parent() -> None:
    """Each level is compared with the level above: a whole sub-block moved with its op
    is one violation (at the op), not one per nested op."""
    msg = with_sub_blocks()
    for b in (1, 2):
        for op in msg.blocks[b].ops:
            place(op, msg.process_meshes[1], 1)
    found = verify_program(parse_program(msg.SerializeToString())).violations
    assert [(v.rule, v.block, v.op) for v in found] == [("V016", 1, 0), ("V016", 1, 1)]


def test_blocks_no_op_names_are_not_judged_as_executed_code() -> None:
    """The recompute pass leaves a scratch block no op names: never run, so its ops may
    carry anything (here: no mesh, a chunk out of range, a mesh of no stage)."""
    b = Broken()
    scratch = b.msg.blocks.add(idx=1, parent_idx=0)
    scratch.ops.add(type="relu")
    stray = scratch.ops.add(type="relu")
    stray.dist_attr.process_mesh.CopyFrom(pb.ProcessMesh(shape=[1], process_ids=[7]))
    stray.dist_attr.chunk_id = 9
    assert verify_program(parse_program(b.bytes())).violations == ()
    b.ops[b.index("sgd")].attrs.add(name="sub_block", type=pb.BLOCK, block_idx=1)  # now run
    found = {v.rule for v in verify_program(parse_program(b.bytes())).violations}
    assert {"V001", "V002", "V003"} <= found


# -- V017: per-tensor meshes ----------------------------------------------------------


@fault
def v017_tensor_dist_attr_on_another_stage() -> Fault:
    b = Broken()
    op = b.ops[3]  # layer 1, stage 1
    op.dist_attr.input_dist_attrs[0].tensor_dist_attr.process_mesh.CopyFrom(b.msg.process_meshes[0])
    return Fault(b.bytes(), "V017", 0, 3, "matmul_v2", "input DecoderLayer.out1")


@fault
def v017_tensor_dist_attr_on_another_2d_mesh() -> Fault:
    """Tensor x pipeline parallel: stage meshes [2, 2]; an output's attr on the other."""
    msg = pb.ProgramDesc.FromString(reference("llama_tp2_pp2_v2_paddlevpp.pb"))
    ops = msg.blocks[0].ops
    i = next(i for i, op in enumerate(ops) if op.type == "matmul_v2" and role(op) == 0)
    mine = ops[i].dist_attr.process_mesh
    other = next(m for m in msg.process_meshes if m.process_ids != mine.process_ids)
    ops[i].dist_attr.output_dist_attrs[0].tensor_dist_attr.process_mesh.CopyFrom(other)
    return Fault(
        msg.SerializeToString(), "V017", 0, i, "matmul_v2", "output", {"vpp": 2, "seg_method": SEG}
    )


def test_v017_meshes_equal_by_shape_and_ids_are_one_mesh() -> None:
    """Dim names do not make a mesh another one (Paddle compares shape and ids)."""
    b = Broken()
    t = b.ops[3].dist_attr.input_dist_attrs[0].tensor_dist_attr
    t.process_mesh.ClearField("dim_names")
    t.process_mesh.dim_names.append("pp")
    assert verify_program(parse_program(b.bytes())).violations == ()


def test_v017_every_paddle_program_has_its_tensor_meshes_on_its_ops() -> None:
    """Checked before writing the rule, on every reference (plain and Paddle's VPP)."""
    for path in sorted(REFERENCE.glob("llama_*.pb.xz")):
        data = lzma.decompress(path.read_bytes())
        found = verify_program(parse_program(data), VerifyOptions(seg_method=SEG)).violations
        assert not [v for v in found if v.rule == "V017"], path.name


# -- V018: parameters -----------------------------------------------------------------


@fault
def v018_parameter_and_its_update_on_another_stage() -> Fault:
    b = Broken()
    b.place_var("DecoderLayer_1.w0", 0, 0)  # read first by op 3, on stage 1
    b.place_op(b.index("sgd", 3), 0, 0)  # its update goes with it: V010 stays quiet
    return Fault(b.bytes(), "V018", 0, 3, "matmul_v2", "parameter DecoderLayer_1.w0")


@fault
def v018_tied_embedding_on_the_head_stage() -> Fault:
    """embedding_0.w_0 is read on stage 0 (the lookup) and stage 1 (the tied head): legal
    where Paddle puts it, with its first reader; moved to the head's stage, it is not."""
    msg = pb.ProgramDesc.FromString(reference("llama_tied_pp2_v2_paddlevpp.pb"))
    block = msg.blocks[0]
    readers = [i for i, op in enumerate(block.ops) if "embedding_0.w_0" in args(op, False)]
    head = next(i for i in readers if block.ops[i].type == "matmul_v2")
    last = block.ops[head].dist_attr
    place_var(block, "embedding_0.w_0", last.process_mesh, 0)
    place_var(block, "embedding_0.w_0@GRAD", last.process_mesh, 0)  # the sum's: V011 follows
    for i in readers:
        if role(block.ops[i]) == 2:  # its adamw
            place(block.ops[i], last.process_mesh, 0)
    return Fault(
        msg.SerializeToString(),
        "V018",
        0,
        readers[0],
        "lookup_table_v2",
        "embedding_0.w_0",
        {"vpp": 2, "seg_method": SEG},
    )


# -- V010: updates and their parameter's chunk ----------------------------------------------


@fault
def v010_update_on_another_chunk_than_its_parameter() -> Fault:
    b = Broken()
    i = b.index("sgd", 5)  # DecoderLayer_2.w0: stage 0, chunk 1
    b.ops[i].dist_attr.chunk_id = 0
    return Fault(b.bytes(), "V010", 0, i, "sgd", "(chunk 1) from chunk 0")


@fault
def v010_without_a_vppctl_plan_only_the_parameters_chunk_or_0() -> Fault:
    b = Broken()
    b.msg.ClearField("pipeline_plan")
    i = b.index("sgd", 1)  # DecoderLayer.w0: stage 0, chunk 0
    b.ops[i].dist_attr.chunk_id = 1
    return Fault(b.bytes(), "V010", 0, i, "sgd", "(chunk 0) from chunk 1", {"pp": 2, "vpp": 2})


def test_v010_without_a_vppctl_plan_chunk_0_is_paddles_convention() -> None:
    b = Broken()
    b.msg.ClearField("pipeline_plan")
    for i in (b.index("sgd", 5), b.index("sgd", 7)):  # parameters on chunk 1
        b.ops[i].dist_attr.chunk_id = 0
    assert verify_program(parse_program(b.bytes()), VerifyOptions(pp=2, vpp=2)).violations == ()
    b = Broken()  # with the plan vppctl records, it is not
    b.ops[b.index("sgd", 5)].dist_attr.chunk_id = 0
    assert [v.rule for v in verify_program(parse_program(b.bytes())).violations] == ["V010"]


# -- V019, V020: gradients and their forward op -----------------------------------------


@fault
def v019_forward_op_id_naming_an_op_without_a_shared_variable() -> Fault:
    """Layer 0's grad claims the last layer's forward op; it stays where it belongs."""
    b = Broken()
    g = b.grad_of(1)
    b.ops[g].forward_op_id = b.ops[8].id
    return Fault(b.bytes(), "V019", 0, g, "matmul_v2_grad", "names op #8 (matmul_v2)")


def test_v019_and_v020_a_gradient_moved_to_the_other_end_of_the_pipeline() -> None:
    """What an engine trusting the lying forward_op_id writes: both rules fire."""
    b = Broken()
    g = b.grad_of(1)
    b.ops[g].forward_op_id = b.ops[8].id
    move_with_outputs(b.msg.blocks[0], g, b.msg.process_meshes[1], 1)
    found = verify_program(parse_program(b.bytes())).violations
    assert {(v.rule, v.op) for v in found} == {("V019", g), ("V020", g)}


@fault
def v020_gradient_away_from_its_forward_op_by_data_flow() -> Fault:
    """The grad of layer 1's last op claims layer 2's first op, which reads that op's
    output (so it shares a variable: V019 is content), and sits there (V008 is content);
    by the data flow it differentiates layer 1's op."""
    b = Broken()
    g = b.grad_of(4)
    b.ops[g].forward_op_id = b.ops[5].id
    move_with_outputs(b.msg.blocks[0], g, b.msg.process_meshes[0], 1)
    return Fault(b.bytes(), "V020", 0, g, "matmul_v2_grad", "differentiates op #4 (matmul_v2)")


@fault
def v020_gradient_linked_to_a_neighbour_and_placed_with_it() -> Fault:
    """The cast grad of layer 3's first op (its RMSNorm's astype) names, by forward_op_id,
    the op that wrote the cast's input (layer 2's last add, on the other stage, sharing that
    variable: no V019), and sits there with the sum after it (so V008 and V009 hold). The
    data flow says it differentiates the cast: it reads the gradient of the cast's output
    and writes that of its input."""
    msg = pb.ProgramDesc.FromString(reference("llama_tied_pp2_v2_paddlevpp.pb"))
    block = msg.blocks[0]
    by_id = {op.id: i for i, op in enumerate(block.ops)}
    writer: dict[str, int] = {}
    for i, op in enumerate(block.ops):
        if role(op) in (0, 256):
            for name in args(op):
                writer.setdefault(name, i)
    g, neighbour = next(
        (i, writer[block.ops[by_id[op.forward_op_id]].inputs[0].arguments[0]])
        for i, op in enumerate(block.ops)
        if op.type == "cast"
        and role(op) == 1
        and op.HasField("forward_op_id")
        and block.ops[i + 1].type == "sum"
        and block.ops[by_id[op.forward_op_id]].struct_name.endswith("/LlamaRMSNorm/")
        and "LlamaDecoderLayer_3" in block.ops[by_id[op.forward_op_id]].struct_name
    )
    there = block.ops[neighbour].dist_attr
    block.ops[g].forward_op_id = block.ops[neighbour].id
    move_with_outputs(block, g, there.process_mesh, there.chunk_id)
    place(block.ops[g + 1], there.process_mesh, there.chunk_id)  # the sum follows it
    return Fault(
        msg.SerializeToString(),
        "V020",
        0,
        g,
        "cast",
        "differentiates",
        {"vpp": 2, "seg_method": SEG},
    )


def test_v020_gradients_of_every_paddle_program_sit_with_their_forward_op() -> None:
    """The data flow finds the forward op of all but the recompute copies, nops and AMP's
    loss-scaling grad, with and without op ids, and they sit there in every reference."""
    for path in sorted(REFERENCE.glob("llama_*.pb.xz")):
        msg = pb.ProgramDesc.FromString(lzma.decompress(path.read_bytes()))
        strip_ids(msg)
        found = verify_program(
            parse_program(msg.SerializeToString()), VerifyOptions(seg_method=SEG)
        ).violations
        assert not [v for v in found if v.rule in ("V019", "V020")], path.name


# -- V021: recomputed ops ---------------------------------------------------------------


def recompute_answer(ids: bool = True) -> tuple[pb.ProgramDesc, int, int]:
    """Paddle's answer for recompute on layers 0 and 2 (pp 2, vpp 2), its first
    recomputed op and that op's forward op."""
    msg = pb.ProgramDesc.FromString(reference("llama_rc_pp2_v2_paddlevpp.pb"))
    if not ids:
        strip_ids(msg)
    pairs = recomputed_ops(build_index(parse_program(msg.SerializeToString())))
    r = min(pairs)
    return msg, r, pairs[r]


def test_v021_pairs_every_recomputed_op_of_paddles_answer() -> None:
    """112 copies (findings 2.1), each of the forward op with its outputs' names."""
    msg, _, _ = recompute_answer()
    pairs = recomputed_ops(build_index(parse_program(msg.SerializeToString())))
    ops = msg.blocks[0].ops
    assert len(pairs) == 112
    for r, f in pairs.items():
        assert ops[r].type == ops[f].type and role(ops[r]) == 1 and role(ops[f]) == 0
        assert [a.rsplit(".subprog_", 1)[0] for a in args(ops[r])] == args(ops[f])


@pytest.mark.parametrize("ids", [True, False])
def test_v021_recomputed_op_on_another_chunk(ids: bool) -> None:
    f = v021_recomputed_op_on_another_chunk() if ids else v021_without_op_ids()
    assert_only(f)


@fault
def v021_recomputed_op_on_another_chunk() -> Fault:
    msg, r, f = recompute_answer()
    block = msg.blocks[0]
    d = block.ops[r].dist_attr
    move_with_outputs(block, r, d.process_mesh, 1 - d.chunk_id)
    return Fault(
        msg.SerializeToString(),
        "V021",
        0,
        r,
        block.ops[r].type,
        f"recomputes op #{f}",
        {"vpp": 2, "seg_method": SEG},
    )


@fault
def v021_without_op_ids() -> Fault:
    msg, r, f = recompute_answer(ids=False)
    block = msg.blocks[0]
    other = next(
        m
        for m in msg.process_meshes
        if m.process_ids != block.ops[r].dist_attr.process_mesh.process_ids
    )
    move_with_outputs(block, r, other, block.ops[r].dist_attr.chunk_id)
    return Fault(
        msg.SerializeToString(),
        "V021",
        0,
        r,
        block.ops[r].type,
        f"recomputes op #{f}",
        {"vpp": 2, "seg_method": SEG},
    )


def test_v021_rejects_the_recompute_conversion_exactly_where_it_differs_from_paddle() -> None:
    """The silent failure of issue 11: vppctl 0.1.0 converts llama_rc_pp2_v2 with 48
    recomputed ops on the previous layer's stage and calls the result valid. `verify` now
    names exactly the recomputed ops that sit elsewhere than in Paddle's answer (none,
    once the engine pairs them), and convert refuses to write such a program."""
    program = parse_program(reference("llama_rc_pp2_v2_plain.pb"))
    opts = ConvertOptions(plan=PlanOptions(vpp=2), seg_method=SEG)
    try:
        convert_program(program, opts)  # converts in place, then checks its own result
    except SelfCheckError as e:
        assert "rule V021" in str(e)
        refused = True
    else:
        refused = False
    ours = pb.ProgramDesc.FromString(program.to_bytes())
    paddle = pb.ProgramDesc.FromString(reference("llama_rc_pp2_v2_paddlevpp.pb"))
    rejected = {
        v.op
        for v in verify_program(
            parse_program(ours.SerializeToString()), VerifyOptions(vpp=2, seg_method=SEG)
        ).violations
        if v.rule == "V021"
    }
    # Align the two op lists around the nops only the plain build has.
    mine = [i for i, op in enumerate(ours.blocks[0].ops) if op.type != "nop"]
    theirs = [i for i, op in enumerate(paddle.blocks[0].ops) if op.type != "nop"]
    assert len(mine) == len(theirs)
    copies = recomputed_ops(build_index(parse_program(ours.SerializeToString())))

    def at(op: pb.OpDesc) -> tuple[tuple[int, ...], int]:
        return tuple(op.dist_attr.process_mesh.process_ids), op.dist_attr.chunk_id

    wrong = {
        i
        for i, j in zip(mine, theirs)
        if i in copies and at(ours.blocks[0].ops[i]) != at(paddle.blocks[0].ops[j])
    }
    assert rejected == wrong
    assert refused == bool(wrong)


# -- V012: the recorded plan ------------------------------------------------------------


def plan_fault(edit: Callable[[pb.PipelinePlan], None], says: str) -> Fault:
    b = Broken()
    edit(b.msg.pipeline_plan)
    return Fault(b.bytes(), "V012", 0, -1, "", says)


@fault
def v012_segment_mesh() -> Fault:
    def edit(p: pb.PipelinePlan) -> None:
        p.segments[1].mesh.CopyFrom(p.segments[0].mesh)

    return plan_fault(edit, "segment 1: the plan records mesh [0] for stage 1")


@fault
def v012_segment_op_begin() -> Fault:
    def edit(p: pb.PipelinePlan) -> None:
        p.segments[2].op_begin = 6

    return plan_fault(edit, "segment 2: the plan records ops [6, 7), but its layers give [5, 7)")


@fault
def v012_last_segment_op_end() -> Fault:
    def edit(p: pb.PipelinePlan) -> None:
        p.segments[3].op_end = 10  # the loss op (10) is the last forward op

    return plan_fault(edit, "[7, 10), but its layers give [7, 11)")


@fault
def v012_unknown_mode() -> Fault:
    def edit(p: pb.PipelinePlan) -> None:
        p.mode = "zigzag"

    return plan_fault(edit, "mode 'zigzag', not auto/manual")


@fault
def v012_unknown_placement() -> Fault:
    def edit(p: pb.PipelinePlan) -> None:
        p.placement = "zigzag"

    return plan_fault(edit, "placement 'zigzag', not loop/v")


@fault
def v012_unknown_split() -> Fault:
    def edit(p: pb.PipelinePlan) -> None:
        p.split = "even"

    return plan_fault(edit, "split 'even'")


@fault
def v012_unknown_cost() -> Fault:
    def edit(p: pb.PipelinePlan) -> None:
        p.cost = "watts"

    return plan_fault(edit, "cost 'watts'")


@fault
def v012_virtual_stage_out_of_order() -> Fault:
    def edit(p: pb.PipelinePlan) -> None:
        p.segments[1].virtual_stage = 5

    return plan_fault(edit, "segment 1 records virtual stage 5")


@fault
def v012_manual_mode_with_vpp_1() -> Fault:
    msg = pb.ProgramDesc.FromString(converted(layered([0, 0, 1, 1]).bytes(), 1))
    msg.pipeline_plan.mode = "manual"
    return Fault(msg.SerializeToString(), "V012", 0, -1, "", "manual mode")


def explicit(counts: str) -> pb.ProgramDesc:
    """Eight layers over pp 2, vpp 2 with --layers-per-chunk `counts`."""
    sizes = tuple(int(n) for n in counts.split(","))
    data = converted(
        layered([0] * 4 + [1] * 4).bytes(), 2, split="explicit", layers_per_chunk=sizes
    )
    return pb.ProgramDesc.FromString(data)


@fault
def v012_uniform_split_with_unequal_segments() -> Fault:
    msg = explicit("1,2,3,2")
    msg.pipeline_plan.split = "uniform"
    return Fault(msg.SerializeToString(), "V012", 0, -1, "", "segments hold 1, 2, 3, 2 layers")


@fault
def v012_keep_split_with_the_extra_layer_on_a_later_chunk() -> Fault:
    msg = explicit("1,2,3,2")  # stage 0 holds 1 then 3 layers: keep gives 2 and 2
    msg.pipeline_plan.split = "keep"
    return Fault(msg.SerializeToString(), "V012", 0, -1, "", "stage 0's chunks hold 1, 3 layers")


def test_v012_every_split_and_placement_vppctl_writes_passes() -> None:
    for kw in (
        {"split": "keep"},
        {"split": "balanced"},
        {"split": "explicit", "layers_per_chunk": (1, 2, 3, 2)},
        {"placement": "v"},
    ):
        data = converted(layered([0] * 4 + [1] * 4).bytes(), 2, **kw)
        assert verify_program(parse_program(data)).violations == (), kw


# -- V003 and V013: what Paddle accepts ---------------------------------------------------


@fault
def v003_backward_op_on_a_mesh_an_earlier_program_left() -> Fault:
    """Paddle's answer runs the global-norm clipping (optimizer ops) on the world mesh
    [0-3] an earlier program left: accepted. A backward op there is not."""
    msg = pb.ProgramDesc.FromString(reference("llama_leftover_clip_pp2_v2_paddlevpp.pb"))
    ops = msg.blocks[0].ops
    i = next(i for i, op in enumerate(ops) if op.type == "sum" and role(op) == 2)
    assert list(ops[i].dist_attr.process_mesh.process_ids) == [0, 1, 2, 3]
    next(a for a in ops[i].attrs if a.name == "op_role").i = 1
    return Fault(
        msg.SerializeToString(), "V003", 0, i, "sum", "[0-3]", {"vpp": 2, "seg_method": SEG}
    )


def test_v003_other_ops_may_run_on_any_mesh_holding_every_stage() -> None:
    b = Broken()
    op = b.ops.add(type="increment")
    op.attrs.add(name="op_role", type=pb.INT, i=16)  # LRSched
    op.dist_attr.process_mesh.CopyFrom(pb.ProcessMesh(shape=[3], process_ids=[0, 1, 2]))
    op.dist_attr.chunk_id = 0
    assert verify_program(parse_program(b.bytes())).violations == ()
    op.dist_attr.process_mesh.CopyFrom(pb.ProcessMesh(shape=[2], process_ids=[1, 2]))
    assert [v.rule for v in verify_program(parse_program(b.bytes())).violations] == ["V003"]


@fault
def v013_undeclared_variable_that_is_no_reader_queue() -> Fault:
    b = Broken()
    i = b.index("sgd")
    b.ops[i].inputs.add(parameter="Queue", arguments=["blocking_queue_0"])
    return Fault(b.bytes(), "V013", 0, i, "sgd", "not declared")


def test_v013_the_readers_queue_lives_in_the_scope() -> None:
    b = Broken()
    i = b.index("sgd")
    b.ops[i].inputs.add(parameter="Queue", arguments=["lod_tensor_blocking_queue_0"])
    assert verify_program(parse_program(b.bytes())).violations == ()
    b.ops[i].inputs.add(parameter="Ghost", arguments=["ghost"])  # one more name: reported
    assert [v.rule for v in verify_program(parse_program(b.bytes())).violations] == ["V013"]


# -- every fault, in the library and on the command line --------------------------------


def assert_only(f: Fault) -> list[Violation]:
    found = list(verify_program(parse_program(f.data), VerifyOptions(**f.verify_args)).violations)  # type: ignore[arg-type]
    assert {v.rule for v in found} == {f.rule}, found
    hit = [v for v in found if (v.block, v.op, v.type) == (f.block, f.op, f.type)]
    assert hit, found
    assert any(f.says in v.message for v in hit), hit
    return found


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_seeded_fault_gives_exactly_its_rule(name: str) -> None:
    assert_only(FAULTS[name]())


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_seeded_fault_exits_1_on_the_command_line(name: str, tmp_path: Path) -> None:
    f = FAULTS[name]()
    path = tmp_path / "prog.pb"
    path.write_bytes(f.data)
    options = []
    for key, value in f.verify_args.items():
        options += [f"--{key.replace('_', '-')}", str(value)]
    r = invoke("verify", str(path), "--json", *options, exit_code=1)
    found = json.loads(r.stdout)["violations"]
    assert {v["rule"] for v in found} == {f.rule}
    # JSON says null where a violation is about no block, op or type (-1, -1, "" inside)
    where = (
        None if f.block < 0 else f.block,
        None if f.op < 0 else f.op,
        f.type if f.op >= 0 and f.type else None,
    )
    assert any((v["block"], v["op"], v["type"]) == where for v in found)


#: The verify functions that hold each rule (some hold others too), by module.
CHECKS = {
    "V003": [("checks", "_check_placements")],
    "V010": [("checks", "_check_optimizer")],
    "V012": [("checks", "check_plan_record"), ("segments", "_check_plan_spans")],
    "V013": [("checks", "_check_structure")],
    "V016": [("checks", "_check_sub_blocks")],
    "V017": [("checks", "_check_tensor_meshes")],
    "V018": [("checks", "_check_parameters")],
    "V019": [("checks", "_check_backward")],
    "V020": [("checks", "_check_backward")],
    "V021": [("checks", "_check_recomputed")],
}


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_without_its_rule_the_fault_passes(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The proof that each test needs its rule: with the function holding the rule
    switched off, every other rule calls the broken program valid."""
    from vppctl.verify import checks, segments

    modules = {"checks": checks, "segments": segments}
    f = FAULTS[name]()
    for module, check in CHECKS[f.rule]:
        monkeypatch.setattr(modules[module], check, lambda *a, **k: None)
    found = verify_program(parse_program(f.data), VerifyOptions(**f.verify_args)).violations  # type: ignore[arg-type]
    assert found == ()


def test_every_rule_of_issue_11_has_a_seeded_fault() -> None:
    covered = {name[:4].upper() for name in FAULTS}
    assert covered >= {"V003", "V010", "V012", "V013", *(f"V{n:03d}" for n in range(16, 22))}
    assert covered <= set(RULES)


def test_the_rules_list_names_each_new_rule() -> None:
    r = invoke("verify", "--rules")
    for rule in ("V016", "V017", "V018", "V019", "V020", "V021"):
        assert rule in r.stdout
