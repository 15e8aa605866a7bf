"""What Paddle's own passes leave in a training program, converted as Paddle does (rules 3, 7,
9 and 10 of docs/conversion.md), on small programs built in code.

The recompute pass's backward copies of forward ops and its dependency `nop`s, the
DataLoader's reader queue that no block declares, meshes an earlier program left, the AMP
pass's casts, `dist.reshard`'s assigns, backward ops with no `forward_op_id`, and a
`forward_op_id` the data flow contradicts. tests/paddle/test_reference.py checks the same on
programs Paddle 3.3.1 built, against Paddle's own answers.
"""

from __future__ import annotations

import pytest
from programs import BACKWARD, FORWARD, OPTIMIZE, Prog, layered
from rulekit import convert, refusal

from vppctl.program._proto import program_pb2 as pb

# layered([0, 0, 1, 1]) at vpp 2: DecoderLayer_k goes to segment k, which is stage k % 2,
# chunk k // 2. In the input DecoderLayer_2 is on stage 1; after conversion on stage 0.
LAYER_2_NOW = ((0,), 1)


def _move(p: Prog, i: int, to: int) -> int:
    """Move op i of block 0 to position `to`; returns `to`."""
    ops = p.msg.blocks[0].ops
    op = pb.OpDesc()
    op.CopyFrom(ops[i])
    del ops[i]
    ops.insert(to, op)
    return to


def _after_loss_grad(p: Prog) -> int:
    return next(i for i, o in enumerate(p.msg.blocks[0].ops) if o.type == "fill_constant") + 1


def recompute_copy(ids: bool = True) -> tuple[Prog, int]:
    """layered([0, 0, 1, 1]) with a recompute copy of DecoderLayer_2's first matmul (what
    Paddle's recompute pass makes: backward role, struct `/`, no forward_op_id, outputs
    renamed `.subprog_0`), put right after the loss-grad op; it reads layer 1's output."""
    p = layered([0, 0, 1, 1], backward=True, optimizer=True, ids=ids)
    i = p.op(
        "matmul_v2",
        {"X": ["DecoderLayer_1.out1"], "Y": ["DecoderLayer_2.w0"]},
        {"Out": ["DecoderLayer_2.out0.subprog_0"]},
        role=BACKWARD,
        stage=1,
        op_id=-1 if ids else None,
    )
    return p, _move(p, i, _after_loss_grad(p))


@pytest.mark.parametrize("ids", [True, False])
def test_a_recompute_copy_sits_with_the_forward_op_it_recomputes(ids: bool) -> None:
    p, copy = recompute_copy(ids)
    c = convert(p, vpp=2)
    assert c.where(copy) == LAYER_2_NOW  # not layer 1's (stage 1, chunk 0), its first input's
    assert c.var_where("DecoderLayer_2.out0.subprog_0") == LAYER_2_NOW
    assert not [w for w in c.warnings if "forward op" in w]


def test_a_copy_whose_outputs_are_not_its_forward_ops_is_no_recompute_copy() -> None:
    p, copy = recompute_copy()
    p.msg.blocks[0].ops[copy].outputs[0].arguments[0] = "elsewhere.subprog_0"
    p.var("elsewhere.subprog_0", 1)
    c = convert(p, vpp=2)
    assert c.where(copy) == ((1,), 0)  # it follows its first input, and says so
    assert any("belong to no forward op" in w and f"op #{copy}" in w for w in c.warnings)


def test_a_dependency_nop_stays_with_the_op_it_waits_for_and_is_reported() -> None:
    p = layered([0, 0, 1, 1], backward=True)
    # The recompute pass orders the last grad op of a layer before the next segment's
    # copies with a nop reading that grad op's output and "writing" the segment's input.
    grads = [i for i, o in enumerate(p.msg.blocks[0].ops) if o.type == "matmul_v2_grad"]
    prior = grads[4]  # DecoderLayer_2's last grad op: it writes DecoderLayer_1.out1@GRAD
    nop = p.op(
        "nop",
        {"X": ["DecoderLayer_1.out1@GRAD"]},
        {"Out": ["DecoderLayer_1.out1"]},
        role=BACKWARD,
        stage=1,
        op_id=None,
    )
    nop = _move(p, nop, prior + 1)
    c = convert(p, vpp=2)
    assert c.where(nop) == c.where(prior) == LAYER_2_NOW
    assert c.where(nop + 1) != c.where(nop)  # it now orders ops on two stages
    assert any("1 dependency nop(s)" in w for w in c.warnings)
    assert not [w for w in c.warnings if "belong to no forward op" in w]


# -- the reader's queue ------------------------------------------------------------------------


def reader(queue: str = "lod_tensor_blocking_queue_0") -> Prog:
    """A DataLoader.from_generator(iterable=False) program: create_py_reader reads a queue
    that lives in Paddle's Scope and in no block; `read` writes the data variables."""
    p = layered([0, 0, 1, 1], backward=True)
    ops = [
        p.op("create_py_reader", {"blocking_queue": [queue]}, {"Out": ["reader_0"]}, declare=False),
        p.op("create_double_buffer_reader", {"UnderlyingReader": ["reader_0"]}, {"Out": ["db_0"]}),
        p.op("read", {"Reader": ["db_0"]}, {"Out": ["ids"]}),
    ]
    for k, i in enumerate(ops):
        _move(p, i, k)
    return p


def test_the_reader_queue_may_be_declared_in_no_block() -> None:
    c = convert(reader(), vpp=2)
    for i in range(3):  # before the first layer: segment 0, on their own mesh
        assert c.where(i) == ((0,), 0)
    assert c.var_where("db_0") == ((0,), 0)


def test_any_other_undeclared_name_is_still_refused() -> None:
    msg = refusal(reader("some_queue_0"), vpp=2)
    assert "some_queue_0" in msg and "not declared" in msg


# -- meshes an earlier program left ---------------------------------------------------------


def leftover(op_role: int = OPTIMIZE) -> tuple[Prog, int]:
    """layered([0, 0, 1, 1]) whose learning rate and one op sit on ranks [0-3], a mesh left
    by an earlier program that had four stages (this one has two)."""
    p = layered([0, 0, 1, 1], backward=True, optimizer=True)
    odd = pb.ProcessMesh(shape=[4], process_ids=[0, 1, 2, 3], dim_names=["x"])
    p.meshes.append(odd)
    lr = next(v for v in p.msg.blocks[0].vars if v.name == "lr")
    lr.dist_attr.process_mesh.CopyFrom(odd)
    i = p.op("fill_constant", {}, {"Out": ["clip_limit"]}, role=op_role, stage=2)
    if op_role == FORWARD:
        i = _move(p, i, 1)
    return p, i


def test_variables_and_optimizer_ops_on_a_leftover_mesh_keep_it_with_chunk_0() -> None:
    p, op = leftover()
    c = convert(p, vpp=2)
    assert c.var_where("lr") == ((0, 1, 2, 3), 0)
    assert c.where(op) == ((0, 1, 2, 3), 0)
    assert any(
        "2 variable(s) and 1 optimizer op(s) are on [0-3]" in w and "earlier program" in w
        for w in c.warnings
    ), c.warnings


def test_a_forward_op_on_a_leftover_mesh_is_refused() -> None:
    p, op = leftover(FORWARD)
    msg = refusal(p, vpp=2)
    assert f"op #{op} (fill_constant)" in msg and "[0-3]" in msg and "stage mesh" in msg


def test_an_optimizer_op_on_a_mesh_missing_a_stages_ranks_is_refused() -> None:
    """A mesh of one device outside the pipeline is no earlier program's world: no rule
    places an op there and V003 would reject it, so the input is refused."""
    p = layered([0, 0, 1, 1], backward=True, optimizer=True)
    p.meshes.append(pb.ProcessMesh(shape=[1], process_ids=[2], dim_names=["x"]))
    op = p.op("fill_constant", {}, {"Out": ["clip_limit"]}, role=OPTIMIZE, stage=2)
    msg = refusal(p, vpp=2)
    assert f"op #{op} (fill_constant)" in msg and "mesh [2]" in msg
    assert "holding every stage's ranks" in msg


def test_an_update_of_a_variable_on_a_mesh_missing_a_stages_ranks_is_refused() -> None:
    """An optimizer op takes its Param variable's mesh; a variable no rule moves (not
    marked a parameter, written by no forward or backward op) on one device outside the
    pipeline would take the update there."""
    p = layered([0, 0, 1, 1], backward=True, optimizer=True)
    odd = pb.ProcessMesh(shape=[1], process_ids=[2], dim_names=["x"])
    p.meshes.append(odd)
    ops = p.msg.blocks[0].ops
    update = next(i for i, o in enumerate(ops) if o.type == "sgd")
    name = next(a.arguments[0] for a in ops[update].inputs if a.parameter == "Param")
    var = next(v for v in p.msg.blocks[0].vars if v.name == name)
    var.is_parameter = False
    var.dist_attr.process_mesh.CopyFrom(odd)
    msg = refusal(p, vpp=2)
    assert f"op #{update} (sgd)" in msg and "mesh [2]" in msg
    assert "holding every stage's ranks" in msg and "variables it updates" in msg


# -- backward ops and their forward ops ---------------------------------------------------------


def test_a_forward_op_id_the_data_flow_contradicts_is_refused() -> None:
    p = layered([0, 0, 1, 1], backward=True)
    ops = p.msg.blocks[0].ops
    first_grad = next(i for i, o in enumerate(ops) if o.type == "matmul_v2_grad")  # the head's
    ops[first_grad].forward_op_id = ops[0].id  # claims the embedding, at the other end
    msg = refusal(p, vpp=2)
    assert f"op #{first_grad} (matmul_v2_grad)" in msg
    assert "share no variable" in msg and "op #0 (lookup_table_v2)" in msg


def test_a_forward_op_id_sharing_only_an_empty_argument_is_refused() -> None:
    """Paddle's @EMPTY@ names no variable: two ops that both list it share nothing."""
    p = layered([0, 0, 1, 1], backward=True)
    ops = p.msg.blocks[0].ops
    first_grad = next(i for i, o in enumerate(ops) if o.type == "matmul_v2_grad")
    ops[first_grad].forward_op_id = ops[0].id
    for op in (ops[first_grad], ops[0]):
        op.inputs.add(parameter="Unused", arguments=["@EMPTY@"])
    msg = refusal(p, vpp=2)
    assert f"op #{first_grad} (matmul_v2_grad)" in msg
    assert "share no variable" in msg and "op #0 (lookup_table_v2)" in msg


def test_a_forward_op_id_naming_a_neighbour_in_another_chunk_is_refused() -> None:
    """The claimed op shares a variable (the layer boundary) but the data flow says the grad
    differentiates the next layer's op: following the link would put the gradient in
    another chunk than the op it differentiates."""
    p = layered([0, 0, 1, 1], backward=True)
    ops = p.msg.blocks[0].ops
    first_of = {  # the first matmul of each layer
        o.struct_name.split("/")[2]: i
        for i, o in reversed(list(enumerate(ops)))
        if o.type == "matmul_v2" and o.struct_name.count("/") > 2
    }
    layer_1, layer_0_last = first_of["DecoderLayer_1"], first_of["DecoderLayer_1"] - 1
    grad = next(
        i
        for i, o in enumerate(ops)
        if o.type == "matmul_v2_grad" and o.forward_op_id == ops[layer_1].id
    )
    ops[grad].forward_op_id = ops[layer_0_last].id  # reads its output: shares a variable
    msg = refusal(p, vpp=2)
    assert f"op #{grad} (matmul_v2_grad)" in msg
    assert f"differentiates op #{layer_1} (matmul_v2)" in msg
    assert f"forward_op_id names op #{layer_0_last} (matmul_v2)" in msg
    assert "fix the op's forward_op_id" in msg


def test_without_ids_an_op_that_is_its_own_grad_is_found_by_the_data_flow() -> None:
    """`scale`'s grad is a `scale` (no `_grad` type): it reads out@GRAD, writes in@GRAD."""
    p = layered([0, 0, 1, 1], backward=True, ids=False)
    fwd = p.op(
        "scale",
        {"X": ["DecoderLayer_2.out0"]},
        {"Out": ["DecoderLayer_2.scaled"]},
        struct="/Model/DecoderLayer_2/Scale/",
        stage=1,
        op_id=None,
    )
    layer_2_last = next(
        i
        for i, o in enumerate(p.msg.blocks[0].ops)
        if o.struct_name.startswith("/Model/DecoderLayer_2/Linear_1/")
    )
    fwd = _move(p, fwd, layer_2_last)
    grad = p.op(
        "scale",
        {"X": ["DecoderLayer_2.scaled@GRAD"]},
        {"Out": ["DecoderLayer_2.out0@GRAD"]},
        role=BACKWARD,
        stage=0,  # wrong in the input on purpose: the rule, not the input, places it
        op_id=None,
    )
    grad = _move(p, grad, _after_loss_grad(p))
    c = convert(p, vpp=2)
    assert c.where(fwd) == LAYER_2_NOW
    assert c.where(grad) == LAYER_2_NOW
    assert not [w for w in c.warnings if "forward op" in w]


# -- ops Paddle's passes put inside the layer region ------------------------------------------


def _stray(p: Prog, type_: str, x: str, out: str) -> int:
    """A forward op with struct name `/` between layer 1 and layer 2, reading layer 1's
    output; layer 2's first op then reads its output instead."""
    i = p.op(type_, {"X": [x]}, {"Out": [out]}, stage=0)
    ops = p.msg.blocks[0].ops
    layer_2 = next(k for k, o in enumerate(ops) if "/DecoderLayer_2/" in o.struct_name)
    ops[i].struct_name = "/"
    ops[layer_2].inputs[0].arguments[0] = out
    return _move(p, i, layer_2)


@pytest.mark.parametrize(
    ("type_", "out"),
    [("cast", "DecoderLayer_1.out1.cast_fp16"), ("assign", "reshard_api.tmp_0")],
)
def test_amp_casts_and_reshard_assigns_join_the_next_layer_quietly_even_under_strict(
    type_: str, out: str
) -> None:
    p = layered([0, 0, 1, 1], backward=True)
    i = _stray(p, type_, "DecoderLayer_1.out1", out)
    for strict in (False, True):
        c = convert(p, vpp=2, strict=strict)
        assert c.where(i) == LAYER_2_NOW
        assert not [w for w in c.warnings if "match no layer" in w]


def test_any_other_stray_op_warns_and_is_refused_under_strict() -> None:
    p = layered([0, 0, 1, 1], backward=True)
    i = _stray(p, "cast", "DecoderLayer_1.out1", "DecoderLayer_1.out1.mine")
    c = convert(p, vpp=2)
    assert c.where(i) == LAYER_2_NOW
    assert any(f"op #{i} (cast) -> DecoderLayer_2" in w for w in c.warnings)
    assert "--strict" in refusal(p, vpp=2, strict=True) or "matches no layer" in refusal(
        p, vpp=2, strict=True
    )
