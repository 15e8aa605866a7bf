"""Rules 6, 7, 8 and 10 of docs/conversion.md: every forward op, variable, sub-block op and
optimizer op gets its stage mesh and chunk id (vppctl/engine/apply.py, over the data-flow
facts of vppctl/engine/flow.py). The running example is tests/support/rulekit.py's.
"""

from __future__ import annotations

import random
from array import array
from functools import partial
from operator import and_
from types import SimpleNamespace

import pytest
from programs import BACKWARD, OPTIMIZE, Prog, layered
from rulekit import (
    EMB,
    LOSS,
    S0,
    S1,
    S2,
    convert,
    find_var,
    grad_of,
    layer_op,
    move_op,
    refusal,
    running,
    set_role,
)

from vppctl import progress
from vppctl.engine import apply, loss_op
from vppctl.program._proto import program_pb2 as pb

# ---------------------------------------------------------------------------------
# Rule 6: forward ops


def test_rule6_ops_before_the_first_layer_are_segment_0_and_keep_their_mesh() -> None:
    p = running()
    # A forward op on stage 1 before everything (its output feeds nothing).
    p.op("fill_constant", {}, {"Out": ["const"]}, struct="/Model/", stage=1, chunk=1)
    move_op(p, len(p.msg.blocks[0].ops) - 1, 0)
    c = convert(p, vpp=2)
    assert c.where(0) == (S1, 0)
    assert c.where(1) == (S0, 0)  # the embedding


def test_rule6_ops_after_the_last_layer_are_the_last_segment_and_keep_their_mesh() -> None:
    p = layered([0, 0, 1, 1, 2, 2])  # pp 3, V 2: the last segment is stage 2 chunk 1
    p.op("fill_constant", {}, {"Out": ["unused"]}, struct="/Model/Tail/", stage=0)
    c = convert(p, vpp=2)
    head, loss, tail = layer_op(6), layer_op(6) + 1, layer_op(6) + 2
    assert c.op(loss).type == "mean"
    assert c.where(head) == (S2, 1)
    assert c.where(loss) == (S2, 1)
    assert c.where(tail) == (S0, 1)  # keeps stage 0's mesh, takes the last chunk


def test_rule6_layer_ops_and_their_tensor_dist_attrs_take_the_segment_mesh() -> None:
    c = convert(running(), vpp=2)
    for k, want in enumerate([S0, S1, S0, S1]):
        for j in range(2):
            d = c.op(layer_op(k, j)).dist_attr
            assert tuple(d.process_mesh.process_ids) == want
            tensor_meshes = {
                tuple(e.tensor_dist_attr.process_mesh.process_ids)
                for e in (*d.input_dist_attrs, *d.output_dist_attrs)
            }
            assert tensor_meshes == {want}
            # dims mappings are not touched
            assert all(
                list(e.tensor_dist_attr.dims_mapping) == [-1, -1] for e in d.input_dist_attrs
            )


def test_rule6_tensor_dist_attrs_take_the_segment_mesh_even_if_the_op_stays() -> None:
    p = running()
    op = p.msg.blocks[0].ops[layer_op(0)]  # layer 0 stays on stage 0
    op.dist_attr.input_dist_attrs[0].tensor_dist_attr.process_mesh.CopyFrom(p.meshes[1])
    c = convert(p, vpp=2)
    d = c.op(layer_op(0)).dist_attr
    assert tuple(d.input_dist_attrs[0].tensor_dist_attr.process_mesh.process_ids) == S0


def test_rule6_manual_mode_refuses_a_tensor_dist_attr_on_another_mesh_than_its_op() -> None:
    """Manual mode keeps meshes, tensor dist attrs included; one that names another mesh than
    its op (Paddle's setter never leaves that) is an inconsistent input, refused."""
    p = layered([0, 1, 0, 1])
    op = p.msg.blocks[0].ops[layer_op(2)]
    op.dist_attr.output_dist_attrs[0].tensor_dist_attr.process_mesh.CopyFrom(p.meshes[1])
    msg = refusal(p, vpp=2)
    assert f"op #{layer_op(2)}" in msg and "inconsistent" in msg


def test_rule6_an_op_without_op_role_is_a_forward_op() -> None:
    p = running()
    for j in range(2):
        set_role(p.msg.blocks[0].ops[layer_op(2, j)], None)
    c = convert(p, vpp=2)
    assert c.where(layer_op(2, 0)) == c.where(layer_op(2, 1)) == (S0, 1)


def test_rule6_the_loss_op_role_256_is_a_forward_op() -> None:
    c = convert(running(), vpp=2)
    assert c.op(LOSS).type == "mean"
    assert c.where(LOSS) == (S1, 1)


# ---------------------------------------------------------------------------------
# Rule 7: variables


def test_rule7_moved_op_moves_inputs_on_its_old_mesh_and_every_output() -> None:
    c = convert(running(), vpp=2)
    assert c.var_where("DecoderLayer_1.w0") == (S1, 0)  # parameter, was on stage 0
    assert c.var_where("DecoderLayer_1.out0") == (S1, 0)
    assert c.var_where("DecoderLayer_2.w1") == (S0, 1)  # was on stage 1
    assert c.var_where("DecoderLayer_2.out1") == (S0, 1)


def test_rule7_output_takes_the_new_mesh_whatever_its_old_mesh() -> None:
    # pp 3, V 2: layer 3 moves 1 -> 0 (segment 3 = stage 0 chunk 1).
    p = layered([0, 0, 1, 1, 2, 2])
    find_var(p.msg, "DecoderLayer_3.out0").dist_attr.process_mesh.CopyFrom(p.meshes[2])
    c = convert(p, vpp=2)
    assert c.where(layer_op(3)) == (S0, 1)
    assert c.var_where("DecoderLayer_3.out0") == (S0, 1)


def test_rule7_input_on_another_mesh_keeps_it_and_gets_a_chunk_only_on_the_ops_new_mesh() -> None:
    p = layered([0, 0, 1, 1, 2, 2])  # layer 3: stage 1 -> stage 0, chunk 1
    p.var("far", stage=2, chunk=None)  # neither the old nor the new mesh
    p.var("here", stage=0, chunk=None)  # the new mesh
    op = p.msg.blocks[0].ops[layer_op(3)]
    op.inputs.add(parameter="Extra", arguments=["far", "here"])
    c = convert(p, vpp=2)
    assert c.var_where("far") == (S2, None)
    assert c.var_where("here") == (S0, 1)


def test_rule7_first_writer_wins_for_the_chunk_id() -> None:
    p = running()
    p.var("shared", stage=0, chunk=None)
    for k in (0, 2):  # layer 0 (stage 0 chunk 0), then layer 2 (moves 1 -> 0, chunk 1)
        p.msg.blocks[0].ops[layer_op(k)].inputs.add(parameter="Shared", arguments=["shared"])
    c = convert(p, vpp=2)
    assert c.var_where("shared") == (S0, 0)


def test_rule7_first_writer_wins_for_the_mesh() -> None:
    p = running()
    p.var("shared", stage=0, chunk=None)
    for k in (0, 1):  # layer 0 stays on stage 0, then layer 1 moves 0 -> 1
        p.msg.blocks[0].ops[layer_op(k)].inputs.add(parameter="Shared", arguments=["shared"])
    c = convert(p, vpp=2)
    assert c.var_where("shared") == (S0, 0)


def test_rule7_lod_tensor_blocking_queue_gets_no_chunk_id() -> None:
    p = running()
    p.var("lod_tensor_blocking_queue_0", stage=1, chunk=None)
    p.var("reader_lod_tensor_blocking_queue_1", stage=1, chunk=0)
    op = p.msg.blocks[0].ops[layer_op(2)]  # moves 1 -> 0, chunk 1
    op.inputs.add(
        parameter="Queue",
        arguments=["lod_tensor_blocking_queue_0", "reader_lod_tensor_blocking_queue_1"],
    )
    c = convert(p, vpp=2)
    assert c.var_where("lod_tensor_blocking_queue_0") == (S0, None)
    assert c.var_where("reader_lod_tensor_blocking_queue_1") == (S0, 0)


def test_rule7_manual_mode_variables_keep_their_mesh_and_take_the_chunk() -> None:
    p = layered([0, 1, 0, 1])
    p.var("other_stage", stage=1, chunk=None)
    p.msg.blocks[0].ops[layer_op(2)].inputs.add(parameter="Extra", arguments=["other_stage"])
    c = convert(p, vpp=2)
    assert c.var_where("DecoderLayer_2.w0") == (S0, 1)
    assert c.var_where("DecoderLayer_2.out1") == (S0, 1)
    assert c.var_where("DecoderLayer_1.w1") == (S1, 0)
    assert c.var_where("other_stage") == (S1, None)  # not on the op's mesh: no chunk


def test_rule7_ops_that_keep_their_mesh_give_chunks_to_variables_on_it() -> None:
    c = convert(running(), vpp=2)
    # The head (stays on stage 1, last segment) gives chunk 1 to its parameter.
    assert c.var_where("head.w") == (S1, 1)
    assert c.var_where("logits") == (S1, 1)
    assert c.var_where("emb.w") == (S0, 0)


# ---------------------------------------------------------------------------------
# Rule 8: sub-blocks


def _with_nested_blocks(p: Prog, k: int, stage: int) -> tuple[int, int]:
    """Give op 0 of layer k a sub-block holding an op with a nested sub-block."""
    b1 = p.sub_block(0)
    b2 = p.sub_block(b1)
    p.var("outer", stage=stage, chunk=None)
    p.var("shadowed", stage=stage, chunk=None)
    p.var("shadowed", stage=stage, chunk=None, block=b2)
    p.var("inner", stage=stage, chunk=None, block=b1)
    p.op(
        "relu",
        {"X": ["outer"]},
        {"Out": ["inner"]},
        block=b1,
        stage=stage,
        chunk=None,
        sub_block=b2,
    )
    p.op("relu", {"X": ["inner", "shadowed"]}, {"Out": ["deep"]}, block=b2, stage=stage, chunk=None)
    p.msg.blocks[0].ops[layer_op(k)].attrs.add(name="sub_block", type=pb.BLOCK, block_idx=b1)
    return b1, b2


def test_rule8_sub_block_ops_take_the_ops_mesh_and_chunk_recursively() -> None:
    p = running()
    b1, b2 = _with_nested_blocks(p, 2, stage=1)  # layer 2 moves 1 -> 0, chunk 1
    c = convert(p, vpp=2)
    assert c.where(0, block=b1) == (S0, 1)
    assert c.where(0, block=b2) == (S0, 1)  # nested: vppctl goes deeper than Paddle


def test_rule8_sub_block_variables_follow_rule7_looked_up_in_block_then_ancestors() -> None:
    p = running()
    b1, b2 = _with_nested_blocks(p, 2, stage=1)
    c = convert(p, vpp=2)
    assert c.var_where("inner", block=b1) == (S0, 1)
    assert c.var_where("outer", block=0) == (S0, 1)  # found in the parent block
    assert c.var_where("deep", block=b2) == (S0, 1)
    assert c.var_where("shadowed", block=b2) == (S0, 1)  # the nested block's own
    assert c.var_where("shadowed", block=0) == (S1, None)  # the parent's is not touched


def test_rule8_manual_mode_sub_block_ops_keep_their_mesh_and_get_the_chunk() -> None:
    p = layered([0, 1, 0, 1])
    b1, b2 = _with_nested_blocks(p, 2, stage=0)  # layer 2: stage 0 chunk 1
    c = convert(p, vpp=2)
    assert c.plan.mode == "manual"
    assert c.where(0, block=b1) == (S0, 1)
    assert c.where(0, block=b2) == (S0, 1)


def test_rule8_sub_block_of_an_op_before_the_layers_keeps_mesh_with_chunk_0() -> None:
    p = running()
    b1 = p.sub_block(0)
    p.op("relu", {"X": ["ids"]}, {"Out": ["in_sub"]}, block=b1, stage=0, chunk=None)
    p.msg.blocks[0].ops[EMB].attrs.add(name="sub_block", type=pb.BLOCK, block_idx=b1)
    c = convert(p, vpp=2)
    assert c.where(0, block=b1) == (S0, 0)


def test_rule8_a_sub_block_op_away_from_an_op_before_the_layers_is_refused() -> None:
    """Ops before the first layer keep their mesh, and so (as in Paddle, which re-meshes only
    the sub-blocks of layer ops) do their sub-block ops: one on another stage than the op
    running it is an inconsistent input, refused."""
    p = running()
    b1 = p.sub_block(0)
    p.op("relu", {"X": ["ids"]}, {"Out": ["in_sub"]}, block=b1, stage=1, chunk=None)
    p.msg.blocks[0].ops[EMB].attrs.add(name="sub_block", type=pb.BLOCK, block_idx=b1)
    msg = refusal(p, vpp=2)
    assert "block 1 op #0 (relu)" in msg and "inconsistent" in msg


def test_rule8_sub_blocks_of_backward_ops_follow_the_backward_op() -> None:
    p = running(backward=True)
    g = grad_of(p, layer_op(2))  # -> stage 0 chunk 1
    b1 = p.sub_block(0)
    p.op(
        "relu",
        {"X": ["DecoderLayer_2.w0"]},
        {"Out": ["in_grad_sub"]},
        block=b1,
        stage=1,
        chunk=None,
        role=BACKWARD,
    )
    p.msg.blocks[0].ops[g].attrs.add(name="sub_block", type=pb.BLOCK, block_idx=b1)
    c = convert(p, vpp=2)
    assert c.where(g) == (S0, 1)
    assert c.where(0, block=b1) == (S0, 1)


# ---------------------------------------------------------------------------------
# Rule 10: optimizer ops


def test_rule10_op_with_a_param_input_takes_the_params_mesh_and_chunk() -> None:
    c = convert(running(backward=True, optimizer=True), vpp=2)
    sgd = {
        o.inputs[0].arguments[0]: i for i, o in enumerate(c.after.blocks[0].ops) if o.type == "sgd"
    }
    assert c.op(sgd["emb.w"]).inputs[0].parameter == "Param"
    # Paddle would leave chunk 0 on every optimizer op; vppctl follows the parameter.
    assert c.where(sgd["emb.w"]) == (S0, 0)
    assert c.where(sgd["DecoderLayer_1.w0"]) == (S1, 0)
    assert c.where(sgd["DecoderLayer_2.w1"]) == (S0, 1)
    assert c.where(sgd["DecoderLayer_3.w0"]) == (S1, 1)
    assert c.where(sgd["head.w"]) == (S1, 1)


def test_rule10_moments_and_other_outputs_follow_the_param() -> None:
    p = running(backward=True)
    p.var("lr", stage=0)
    p.var("m1", stage=1, chunk=0)  # layer 2's moment, on its old stage
    p.var("beta1_pow", stage=1, chunk=0)
    p.op(
        "adamw",
        {
            "Param": ["DecoderLayer_2.w0"],
            "Grad": ["DecoderLayer_2.w0@GRAD"],
            "LearningRate": ["lr"],
            "Moment1": ["m1"],
            "Beta1Pow": ["beta1_pow"],
        },
        {"ParamOut": ["DecoderLayer_2.w0"], "Moment1Out": ["m1"], "Beta1PowOut": ["beta1_pow"]},
        role=OPTIMIZE,
        stage=1,
    )
    c = convert(p, vpp=2)
    assert c.where(len(c.after.blocks[0].ops) - 1) == (S0, 1)
    assert c.var_where("m1") == (S0, 1)
    assert c.var_where("beta1_pow") == (S0, 1)
    assert c.var_where("lr") == (S0, 0)  # an input only: untouched


def test_rule10_clip_op_takes_its_first_input_on_a_stage_mesh() -> None:
    p = running(backward=True)
    p.msg.process_meshes.append(p.global_mesh)
    p.var("clip_scale", stage=-1)
    p.op(
        "elementwise_mul",
        {"X": ["clip_scale"], "Y": ["DecoderLayer_2.w0@GRAD"]},
        {"Out": ["DecoderLayer_2.w0@GRAD@CLIP"]},
        role=OPTIMIZE,
        stage=1,
    )
    c = convert(p, vpp=2)
    assert c.where(len(c.after.blocks[0].ops) - 1) == (S0, 1)
    assert c.var_where("DecoderLayer_2.w0@GRAD@CLIP") == (S0, 1)
    assert c.var_where("clip_scale") == ((0, 1), 0)


def test_rule10_optimizer_op_on_the_global_mesh_keeps_it_with_chunk_0() -> None:
    p = running(backward=True)
    p.msg.process_meshes.append(p.global_mesh)
    p.op(
        "sum",
        {"X": ["DecoderLayer_3.w0@GRAD", "DecoderLayer_2.w0@GRAD"]},
        {"Out": ["global_norm"]},
        role=OPTIMIZE,
        stage=-1,
        chunk=1,
    )
    c = convert(p, vpp=2)
    assert c.where(len(c.after.blocks[0].ops) - 1) == ((0, 1), 0)


@pytest.mark.parametrize("op_role", [4, 8, 16, 4096])
def test_rule10_ops_of_other_roles_keep_their_mesh_with_chunk_0(op_role: int) -> None:
    p = running(backward=True, optimizer=True)
    p.op("increment", {"X": ["lr"]}, {"Out": ["lr"]}, role=op_role, stage=1, chunk=1)
    c = convert(p, vpp=2)
    assert c.where(len(c.after.blocks[0].ops) - 1) == (S1, 0)


# ---------------------------------------------------------------------------------
# The write pass's edits and the passes' spans, against their definitions, one item at a time


def _tables(
    n: int, seed: int, meshes: int = 4
) -> tuple[list[int], list[int], list[int], list[int]]:
    """Random (new, old) meshes and chunk ids, NO_MESH (-1) and unset chunks (-1) among them,
    and chunk ids below -1 (a broken annotation) too."""
    rng = random.Random(seed)
    new_mesh = [rng.choice([-1, *range(meshes)]) for _ in range(n)]
    old_mesh = [m if rng.random() < 0.3 else rng.choice([-1, *range(meshes)]) for m in new_mesh]
    new_chunk = [rng.choice([-3, -1, 0, 1, 2]) for _ in range(n)]
    old_chunk = [c if rng.random() < 0.3 else rng.choice([-1, 0, 1, 7]) for c in new_chunk]
    return new_mesh, old_mesh, new_chunk, old_chunk


@pytest.mark.parametrize("n", [0, 1, 1023, 1025, 4096, 4097, 3 * 4096 + 5])
def test_the_edits_are_each_changed_op_and_variable_in_order(
    n: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`_op_edits` and `_var_edits` (array slices zipped a span at a time) give, for any
    tables and any size around their spans and progress batches, what testing each op and
    variable by the rule gives; progress is reported at the first op of every 1024 edits."""
    raw = [b"m0", b"m1", b"m2", b"m3"]
    new_mesh, old_mesh, new_chunk, old_chunk = _tables(n, seed=n)
    moved = bytearray(random.Random(-n).random() < 0.4 for _ in range(n))
    base, block_vars = 5, n  # the block's variables after 5 of an earlier block's
    ops = SimpleNamespace(chunk=array("q", old_chunk), __len__=lambda: n)
    block = SimpleNamespace(ops=ops, n_ops=n)
    pad = [0] * base
    index = SimpleNamespace(
        blocks=[block],
        mesh_raw=raw,
        var_mesh=array("q", pad + old_mesh + [2]),
        var_chunks=array("q", pad + old_chunk + [1]),
    )
    a = SimpleNamespace(
        op_mesh=[array("q", new_mesh)],
        op_chunk=[array("q", new_chunk)],
        moved=[moved],
        var_mesh=array("q", pad + new_mesh + [3]),  # the next block's variable: not this one's
        var_chunk=array("q", pad + new_chunk + [0]),
    )
    reported: list[int] = []
    monkeypatch.setattr(progress, "advance", reported.append)
    want_ops = [
        (i, raw[new_mesh[i]] if moved[i] else None, new_chunk[i])
        for i in range(n)
        if moved[i] or new_chunk[i] != old_chunk[i]
    ]
    assert list(apply._op_edits(index, a, 0, 100)) == want_ops  # type: ignore[arg-type]
    assert reported == [100 + e[0] for e in want_ops[::1024]]
    want_vars = [
        (
            i,
            raw[new_mesh[i]] if new_mesh[i] != old_mesh[i] and new_mesh[i] >= 0 else None,
            new_chunk[i] if new_chunk[i] != old_chunk[i] and new_chunk[i] >= 0 else None,
        )
        for i in range(n)
        if new_mesh[i] != old_mesh[i] or new_chunk[i] != old_chunk[i]
    ]
    assert list(apply._var_edits(index, a, base, block_vars)) == want_vars  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(20))
def test_a_pass_spans_its_ops_and_the_loss_op_is_found_as_paddle_picks_it(seed: int) -> None:
    """`_span` (first and last op of a role, found in C) and `loss_op` (searched in C) against
    a walk over the roles, for role sequences with and without a loss, a loss grad, or
    several of each."""
    rng = random.Random(seed)
    roles = array(
        "q", (rng.choice([0, 0, 1, 1, 2, 4, 256, 257]) for _ in range(rng.randrange(0, 40)))
    )
    for bit in (1, 2):
        marked = [i for i, r in enumerate(roles) if r & bit]
        want = (marked[0], marked[-1] + 1) if marked else (0, 0)
        assert apply._span(roles, partial(and_, bit)) == want
    loss = None
    for i, r in enumerate(roles):
        if r == 257:
            break
        if r == 256:
            loss = i
    index = SimpleNamespace(global_block=SimpleNamespace(ops=SimpleNamespace(role=roles)))
    assert loss_op(index) == loss  # type: ignore[arg-type]


def _remesh_and_chunk_by_the_rule(
    a: apply.Assignment, ops: SimpleNamespace, op: int, mesh: int | None, chunk: int
) -> None:
    """Rules 6 and 7 for one op in their written order: every variable's mesh (the inputs on
    the op's old mesh and the outputs), then every one's chunk id; first writer wins."""
    ins = ops.in_var[ops.in_off[op] : ops.in_off[op + 1]]
    outs = ops.out_var[ops.out_off[op] : ops.out_off[op + 1]]
    if mesh is not None:
        old = a.op_mesh[0][op]
        for v in ins:
            if v >= 0 and not a.mesh_set[v] and a.var_mesh[v] == old:
                a.var_mesh[v], a.mesh_set[v] = mesh, 1
        for v in outs:
            if v >= 0 and not a.mesh_set[v]:
                a.var_mesh[v], a.mesh_set[v] = mesh, 1
        a.op_mesh[0][op], a.moved[0][op] = mesh, 1
    a.op_chunk[0][op] = chunk
    own = a.op_mesh[0][op]
    for v in outs:
        if v >= 0 and a.var_mesh[v] == -1 and not a.mesh_set[v]:
            a.var_mesh[v], a.mesh_set[v] = own, 1
    for v in (*ins, *outs):
        if v >= 0 and not a.chunk_set[v] and a.var_mesh[v] == own and v not in a.no_chunk:
            a.var_chunk[v], a.chunk_set[v] = chunk, 1


@pytest.mark.parametrize("seed", range(40))
def test_an_op_is_placed_as_the_rules_order_places_it(seed: int) -> None:
    """`placer` (each variable's mesh and chunk id in one step, outputs first) leaves every
    table as rules 6 and 7 in their written order do, for ops whose arguments repeat, are
    both read and written (in place), name no variable, or are already placed; moved or
    not; with and without variables that never get a chunk id."""
    rng = random.Random(seed)
    n_vars, n_ops = rng.randrange(1, 12), rng.randrange(1, 30)
    in_var, out_var, in_off, out_off = array("q"), array("q"), array("q", [0]), array("q", [0])
    for _ in range(n_ops):
        in_var.extend(rng.choice([-2, -3, *range(n_vars)]) for _ in range(rng.randrange(0, 4)))
        out_var.extend(rng.choice([-2, *range(n_vars)]) for _ in range(rng.randrange(0, 3)))
        in_off.append(len(in_var))
        out_off.append(len(out_var))
    ops = SimpleNamespace(in_var=in_var, out_var=out_var, in_off=in_off, out_off=out_off)
    index = SimpleNamespace(blocks=[SimpleNamespace(ops=ops)])

    def state() -> apply.Assignment:
        r = random.Random(seed)  # the same start for both
        return apply.Assignment(
            op_mesh=[array("q", (r.choice([-1, 0, 1, 2]) for _ in range(n_ops)))],
            op_chunk=[array("q", [0]) * n_ops],
            moved=[bytearray(n_ops)],
            var_mesh=array("q", (r.choice([-1, 0, 1, 2]) for _ in range(n_vars))),
            var_chunk=array("q", (r.choice([-1, 0, 1]) for _ in range(n_vars))),
            mesh_set=bytearray(r.random() < 0.2 for _ in range(n_vars)),
            chunk_set=bytearray(r.random() < 0.2 for _ in range(n_vars)),
            no_chunk=frozenset(v for v in range(n_vars) if r.random() < 0.15),
            vpp=3,
        )

    got, want = state(), state()
    place = apply.placer(index, got, 0)  # type: ignore[arg-type]
    for op in range(n_ops):
        mesh, chunk = rng.choice([None, 0, 1, 2, 3]), rng.randrange(3)
        place(op, mesh, chunk)
        _remesh_and_chunk_by_the_rule(want, ops, op, mesh, chunk)
        assert got == want
