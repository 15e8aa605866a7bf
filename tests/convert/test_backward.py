"""Rule 9 of docs/conversion.md: backward ops go where their forward op is
(vppctl/engine/backward.py finds each backward op's forward op: by `forward_op_id`, or
inferred from the data flow; gradient sums follow their inputs' writers). The running
example is tests/support/rulekit.py's.
"""

from __future__ import annotations

import pytest
from programs import BACKWARD, LOSS_GRAD, Prog
from rulekit import (
    LOSS,
    LOSS_GRAD_OP,
    S0,
    S1,
    convert,
    grad_of,
    layer_op,
    move_op,
    placements,
    put_on,
    rename_arg,
    role,
    running,
)

from vppctl.engine import ForwardOps, build_index
from vppctl.program import EMPTY_VAR, NO_VAR, SCOPE_VAR

# ---------------------------------------------------------------------------------
# Rule 9: backward ops


def test_rule9_loss_grad_op_takes_the_loss_ops_mesh_and_chunk() -> None:
    p = running(backward=True)
    put_on(p, p.msg.blocks[0].ops[LOSS_GRAD_OP], 0, chunk=0)
    c = convert(p, vpp=2)
    assert role(c.op(LOSS_GRAD_OP)) == LOSS_GRAD
    assert c.where(LOSS_GRAD_OP) == c.where(LOSS) == (S1, 1)


def test_rule9_grad_op_takes_its_forward_ops_mesh_and_chunk_by_forward_op_id() -> None:
    p = running(backward=True)
    # Misleading types: only forward_op_id says which forward op a grad op belongs to.
    for op in p.msg.blocks[0].ops:
        if op.HasField("forward_op_id"):
            op.type = "custom_grad"
    c = convert(p, vpp=2)
    by_id = {o.id: i for i, o in enumerate(c.after.blocks[0].ops)}
    grads = [(i, o) for i, o in enumerate(c.after.blocks[0].ops) if o.HasField("forward_op_id")]
    assert len(grads) == 11
    for i, o in grads:
        assert c.where(i) == c.where(by_id[o.forward_op_id]), f"grad op {i}"
    assert c.warnings == ()


def test_rule9_grad_op_forward_op_is_inferred_when_ids_are_absent() -> None:
    p = running(backward=True, ids=False)
    with_ids = convert(running(backward=True), vpp=2)
    c = convert(p, vpp=2)
    assert not any(o.HasField("id") for o in c.after.blocks[0].ops)
    # Op 0 of layer 2 reads layer 1's output first (stage 1 chunk 0); inference must
    # still find its forward op (stage 0 chunk 1), not follow that input.
    g = next(
        i
        for i, o in enumerate(c.after.blocks[0].ops)
        if o.type == "matmul_v2_grad" and "DecoderLayer_2.out0@GRAD" in str(o.inputs)
    )
    assert c.where(g) == (S0, 1)
    assert placements(c.after) == placements(with_ids.after)
    assert c.warnings == ()


def test_rule9_grad_op_without_forward_op_id_among_others_is_inferred() -> None:
    p = running(backward=True)
    g = grad_of(p, layer_op(2))
    p.msg.blocks[0].ops[g].ClearField("forward_op_id")
    c = convert(p, vpp=2)
    assert c.where(g) == (S0, 1)


def test_rule9_unmapped_grad_op_is_reported_and_follows_its_first_input_with_a_mesh() -> None:
    p = running(backward=True)
    p.var("nowhere", stage=None, chunk=None)
    p.op(
        "mystery_grad",
        {"X": ["nowhere", "DecoderLayer_2.w0", "DecoderLayer_1.w0"]},
        {"Out": ["mystery_out"]},
        role=BACKWARD,
        stage=1,
    )
    i = len(p.msg.blocks[0].ops) - 1
    c = convert(p, vpp=2)
    assert c.where(i) == (S0, 1)  # DecoderLayer_2.w0's new placement
    assert c.var_where("mystery_out") == (S0, 1)
    assert any("mystery_grad" in w for w in c.warnings), c.warnings


def test_rule9_other_backward_op_takes_its_first_input_variables_mesh_and_chunk() -> None:
    p = running(backward=True)
    p.op(
        "c_allreduce_sum",
        {"X": ["DecoderLayer_2.w0@GRAD"]},
        {"Out": ["DecoderLayer_2.w0@GRAD"]},
        role=BACKWARD,
        stage=1,
    )
    c = convert(p, vpp=2)
    assert c.where(len(c.after.blocks[0].ops) - 1) == (S0, 1)


def _with_gradient_sum(type_: str = "sum") -> tuple[Prog, int, int, int]:
    """Layer 3 also reads layer 1's output, so its gradient is accumulated.

    The grad op of layer 3's op 0 (stage 1 chunk 1) writes `..@RENAME@0`, the one of
    layer 2's op 0 (stage 0 chunk 1) `..@RENAME@1`, and a sum after the latter adds them.
    Returns (program, first writer, nearest writer, sum op).
    """
    p = running(backward=True)
    ops = p.msg.blocks[0].ops
    ops[layer_op(3)].inputs.add(parameter="Residual", arguments=["DecoderLayer_1.out1"])
    g3, g2 = grad_of(p, layer_op(3)), grad_of(p, layer_op(2))
    name = "DecoderLayer_1.out1@GRAD"
    ops[g3].outputs.add(parameter="Residual@GRAD", arguments=[f"{name}@RENAME@0"])
    rename_arg(ops[g2], name, f"{name}@RENAME@1")
    p.op(
        type_,
        {"X": [f"{name}@RENAME@0", f"{name}@RENAME@1"]},
        {"Out": [name]},
        role=BACKWARD,
        stage=0,
        chunk=0,
        op_id=None,
    )
    move_op(p, len(ops) - 1, g2 + 1)
    return p, g3, g2, g2 + 1


@pytest.mark.parametrize("type_", ["sum", "grad_add"])
def test_rule9_gradient_sum_takes_the_nearest_earlier_writer_of_its_inputs(type_: str) -> None:
    p, first, nearest, s = _with_gradient_sum(type_)
    c = convert(p, vpp=2)
    assert c.op(s).type == type_
    assert c.where(first) == (S1, 1)
    assert c.where(nearest) == (S0, 1)
    assert c.where(s) == (S0, 1)


def test_rule9_gradient_sum_output_takes_its_forward_variables_mesh_and_chunk() -> None:
    p, _, _, _ = _with_gradient_sum()
    c = convert(p, vpp=2)
    assert c.var_where("DecoderLayer_1.out1") == (S1, 0)
    assert c.var_where("DecoderLayer_1.out1@GRAD") == (S1, 0)
    # the inputs of the sum take their writers' placements
    assert c.var_where("DecoderLayer_1.out1@GRAD@RENAME@0") == (S1, 1)
    assert c.var_where("DecoderLayer_1.out1@GRAD@RENAME@1") == (S0, 1)


def test_rule9_sum_right_after_the_first_grad_op_uses_it() -> None:
    # Paddle skips the first grad op after the loss-grad op when it looks for the writer
    # (and fails here); vppctl does not.
    p = running(backward=True)
    ops = p.msg.blocks[0].ops
    first = LOSS_GRAD_OP + 1
    assert ops[first].type == "mean_grad"
    rename_arg(ops[first], "logits@GRAD", "logits@GRAD@RENAME@0")
    p.op(
        "sum",
        {"X": ["logits@GRAD@RENAME@0"]},
        {"Out": ["logits@GRAD"]},
        role=BACKWARD,
        stage=0,
        chunk=0,
    )
    move_op(p, len(ops) - 1, first + 1)
    c = convert(p, vpp=2)
    assert c.op(first + 1).type == "sum"
    assert c.where(first + 1) == c.where(first) == (S1, 1)


def test_rule9_backward_outputs_take_their_ops_placement_first_writer_wins() -> None:
    p = running(backward=True)
    # A later backward op on layer 1's gradient also writes layer 2's weight gradient.
    p.op(
        "scale",
        {"X": ["DecoderLayer_1.w0@GRAD"]},
        {"Out": ["DecoderLayer_2.w0@GRAD"]},
        role=BACKWARD,
        stage=0,
    )
    c = convert(p, vpp=2)
    assert c.where(len(c.after.blocks[0].ops) - 1) == (S1, 0)
    assert c.var_where("DecoderLayer_1.w0@GRAD") == (S1, 0)
    assert c.var_where("DecoderLayer_2.w0@GRAD") == (S0, 1)  # its first writer's


@pytest.mark.parametrize("rename", [False, True])
def test_shares_a_variable_is_its_definition_for_every_pair_of_ops(rename: bool) -> None:
    """`ForwardOps.shares_a_variable` (its usual case tested first: the op reads what the
    forward op reads) is, for every backward op and every forward op of the running
    example, whether one names a variable of the other, or the gradient of one."""
    p = running(backward=True)
    if rename:  # grad ops that read only gradients: the slow path decides
        for op in p.msg.blocks[0].ops:
            if op.type.endswith("_grad"):
                for var in op.inputs:
                    var.arguments[:] = [a for a in var.arguments if "@GRAD" in a] or ["x@GRAD"]
    index = build_index(p.program())
    forward = ForwardOps(index)
    block = index.global_block
    sentinels = {NO_VAR, EMPTY_VAR, SCOPE_VAR}
    checked = 0
    for op in range(block.n_ops):
        if not block.ops.role[op] & BACKWARD:
            continue
        mine = {*block.inputs(op), *block.outputs(op)} - sentinels
        for f in block.forward_ops:
            theirs = {*block.inputs(f), *block.outputs(f)}
            want = not mine.isdisjoint(theirs) or any(index.forward_var(v) in theirs for v in mine)
            assert forward.shares_a_variable(op, f) == want
            checked += want
    assert checked  # some pairs share, and the rest do not
