"""Precheck: refuse programs that cannot be converted, with a message naming the fix.

Run on the index before planning (structure, meshes, stage count) and after it
(stray ops in manual mode); and, after the conversion, `refuse_input_problems`
tells violations the input caused (an op the rules keep on its mesh had none, an
embedding on the wrong stage) from ones that would be bugs in vppctl.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress, count, repeat
from operator import and_, ge

from vppctl.engine.backward import ForwardOps
from vppctl.engine.index import ProgramIndex
from vppctl.engine.layers import LayerSet
from vppctl.errors import ConversionError
from vppctl.mesh import NO_MESH, wide_meshes
from vppctl.plan import Plan, PlanOptions
from vppctl.program import BACKWARD, FORWARD_ROLES, NO_VAR, is_backward, is_forward, op_arguments
from vppctl.verify.checks import Cause, Violation


def check_structure(index: ProgramIndex) -> None:
    """Refuse malformed programs up front (what verify reports as V013 and V014), and
    programs whose global block has forward ops after its backward section starts."""
    n_blocks = len(index.blocks)
    if index.problems:
        raise ConversionError(f"the program is malformed: {index.problems[0]}")
    check_sections(index)
    for bi in index.blocks:
        o = bi.ops
        if NO_VAR in o.in_var or NO_VAR in o.out_var:
            op, name = _first_undeclared(index, bi.idx)
            raise ConversionError(
                f"{index.op_label(bi.idx, op)} names variable {name!r}, which is not declared "
                f"in block {bi.idx} or its ancestors; the program is malformed (export it again)"
            )
        for op, subs in sorted(o.sub_blocks.items()):
            bad = [s for s in subs if not bi.idx < s < n_blocks]
            if bad:
                why = (
                    f"which does not exist (the program has {n_blocks} blocks)"
                    if not 0 <= bad[0] < n_blocks
                    else f"which is not a later block than {bi.idx} (a cycle)"
                )
                raise ConversionError(
                    f"{index.op_label(bi.idx, op)} has sub_block {bad[0]}, {why}; the program "
                    "is malformed"
                )


def check_meshes(index: ProgramIndex, stages: Sequence[int], globals_: Sequence[int]) -> None:
    """Forward and backward ops run on a stage mesh (a global one, or none: V003's premise).

    Optimizer and other ops and variables may also be on another mesh holding every
    stage's ranks: a process that built an earlier program can leave some
    (`learning_rate_0` and gradient clipping on the earlier world's mesh). Paddle
    converts such programs and keeps those meshes, and so does vppctl (apply keeps them,
    with chunk 0, and says how many). An op on a mesh missing some stage's ranks (one
    device outside the pipeline) is refused: no rule places it and V003 rejects it."""
    allowed = {*stages, *globals_, NO_MESH}
    wide = wide_meshes(index.meshes, stages) if stages else set()
    for bi in index.blocks:
        odd = set(bi.op_mesh) - allowed
        if not odd:
            continue
        roles = bi.ops.role
        for op, m in enumerate(bi.op_mesh):
            if m not in odd:
                continue
            if is_forward(roles[op]) or is_backward(roles[op]):
                raise ConversionError(
                    f"{index.op_label(bi.idx, op)} is on {_mesh_text(index, m)}, which is "
                    f"neither a stage mesh ({_stage_list(index, stages)}) nor a global mesh; "
                    "annotate every forward and backward op with its stage's mesh"
                )
            if m not in wide:
                raise ConversionError(
                    f"{index.op_label(bi.idx, op)} is on {_mesh_text(index, m)}, which is "
                    f"neither a stage mesh ({_stage_list(index, stages)}) nor one holding "
                    "every stage's ranks; put the op on its stage's mesh (or on the global mesh)"
                )


def check_forward_links(index: ProgramIndex, forward: ForwardOps) -> None:
    """A `forward_op_id` must name a forward op the grad op shares a variable with: one the
    data flow contradicts (a layer-0 grad claiming a last-layer op) would send the gradient
    to the other end of the pipeline."""
    block = index.global_block
    ids, roles, by_id = block.ops.forward_op_id, block.ops.role, forward.by_id.get
    for op in compress(range(block.n_ops), map(ge, ids, repeat(0))):  # the linked ops
        f = by_id(ids[op])
        if f is not None and roles[op] & BACKWARD and not forward.shares_a_variable(op, f):
            raise ConversionError(
                f"{index.op_label(0, op)} has forward_op_id {ids[op]}, which names "
                f"{index.op_label(0, f)}, but the two share no variable (neither the forward "
                "op's inputs and outputs nor their gradients): the link contradicts the data "
                "flow; export the program again (vppctl.paddle.export_program writes the links)"
            )


def _mesh_text(index: ProgramIndex, mesh: int) -> str:
    m = index.meshes[mesh]
    return f"mesh {m} (shape {list(m.shape)})"


def _stage_list(index: ProgramIndex, stages: Sequence[int]) -> str:
    return " ".join(str(index.meshes[m]) for m in stages)


def check_sections(index: ProgramIndex) -> None:
    roles = index.global_block.ops.role
    backward = compress(count(), map(and_, roles, repeat(BACKWARD)))  # in C: once per op
    first_backward = next(backward, None)
    if first_backward is None:
        return
    after = first_backward + 1
    i = next(compress(count(after), map(FORWARD_ROLES.__contains__, roles[after:])), None)
    if i is not None:
        raise ConversionError(
            f"{index.op_label(0, i)} is a forward op after the backward section starts at "
            f"{index.op_label(0, first_backward)}; vppctl expects the forward ops, then the "
            "backward ops, then the optimizer ops (check the ops' op_role)"
        )


def _first_undeclared(index: ProgramIndex, b: int) -> tuple[int, str]:
    bi = index.blocks[b]
    for op in range(bi.n_ops):
        if NO_VAR in bi.inputs(op) or NO_VAR in bi.outputs(op):
            ins, outs = op_arguments(index.program.blocks[b], op)
            for name in (*ins, *outs):
                if index.lookup(b, name) == NO_VAR:
                    return op, name.decode("utf-8", "backslashreplace")
    return 0, "?"


def check_strays(index: ProgramIndex, layers: LayerSet, plan: Plan) -> None:
    """In manual mode meshes are kept, so a stray op must already be on its layer's mesh."""
    if plan.mode != "manual":
        return
    meshes = index.global_block.op_mesh
    for i in layers.strays:
        layer = layers.layers[layers.op_layer[i]]
        if meshes[i] != layer.mesh:
            got = index.meshes[meshes[i]] if meshes[i] != NO_MESH else "no mesh"
            raise ConversionError(
                f"{index.op_label(0, i)} matches no layer and joins layer {layer.name}, but it "
                f"is on {got} and the layer on {index.meshes[layer.mesh]}; the program is "
                "already interleaved (manual mode keeps meshes), so put it on its layer's mesh "
                "or give it the layer's struct name"
            )


def check_pp(stages: Sequence[int], opts: PlanOptions) -> None:
    pp = len(stages)
    if opts.pp is not None and opts.pp != pp:
        raise ConversionError(
            f"--pp {opts.pp} does not match the program, which has {pp} stage meshes; "
            f"drop --pp or pass --pp {pp}"
        )
    if pp == 0:
        raise ConversionError(
            "the program has no stage meshes (no process_meshes and no op carries a mesh); "
            "annotate it for pipeline parallelism first"
        )
    if pp < 2 and opts.vpp > 1:
        raise ConversionError(
            f"the program has only {pp} stage mesh, so there is no pipeline to interleave; "
            "annotate it with one process mesh per stage, or use --vpp 1"
        )


_GRAD_TYPES = ("_grad", "sum", "grad_add")
_DIST_ATTRS = "fix the program's dist_attrs (or export it again)"
_KEPT_FROM_INPUT = {  # cause -> (the rule the input broke, the fix)
    Cause.TENSOR_MESH_MISMATCH: ("an op's tensor dist attrs share its mesh", _DIST_ATTRS),
    Cause.SUB_BLOCK_MISPLACED: ("a sub-block runs where the op running it runs", _DIST_ATTRS),
    Cause.PARAM_MISPLACED: ("a parameter lives where its first forward reader runs", _DIST_ATTRS),
    Cause.FORWARD_LINK_CONTRADICTED: (
        "a grad op's forward_op_id names the forward op it differentiates",
        "fix the op's forward_op_id (vppctl.paddle.export_program writes the links)",
    ),
}


def refuse_input_problems(index: ProgramIndex, violations: Sequence[Violation]) -> None:
    """Violations on a converted program that come from the input, not from a bug.

    Decided by each violation's cause, never by its message text:
    NO_MESH: an op the rules keep on its mesh had none in the input.
    BACKWARD_FLOW: layers are placed in program order, but ops outside the layers keep
    their mesh (rule 6), so an input with the embedding or head on another stage makes
    the forward pass run backwards. VAR_MISPLACED at a forward op: the op kept its mesh
    (outside the layers, or an interleaved program) and the input had its output
    variable on another mesh; the same at any op that is no grad or sum op.
    NOT_STAGE_MESH at an op that is neither forward nor backward: no rule puts one on a
    mesh the input did not give it (its own, or its parameter variable's), and precheck
    refused forward and backward ops on such meshes.
    The causes of `_KEPT_FROM_INPUT`: an op the rules keep where it is (outside the
    layers, an interleaved program, an optimizer op) carried the inconsistency in: a
    tensor dist attr on another mesh than its op, a sub-block op away from the op running
    it, a parameter away from its first reader, a forward_op_id the data flow contradicts
    (convert writes no forward_op_id, and moves an op's tensor meshes, sub-blocks and read
    parameters with it).
    """
    for v in violations:
        where = f"block {v.block} op #{v.op} ({v.type})"
        if v.cause is Cause.NO_MESH:
            raise ConversionError(
                f"{where} has no process mesh and no rule gives it one; annotate the program "
                "for pipeline parallelism first (every forward op on its stage mesh)"
            )
        if v.cause is Cause.VAR_MISPLACED and v.type and not v.type.endswith(_GRAD_TYPES):
            raise ConversionError(
                f"{where} {v.message}: the input's annotation is inconsistent (a variable "
                "should sit on the mesh of the op that writes it, and ops outside the layers "
                "or in an interleaved program keep their mesh); fix the variable's dist_attr"
            )
        if v.cause is Cause.NOT_STAGE_MESH and v.op >= 0:
            role = index.blocks[v.block].ops.role[v.op]
            if not is_forward(role) and not is_backward(role):
                raise ConversionError(
                    f"{where}: {v.message}, nor one holding every stage's ranks; the op keeps "
                    "its mesh or takes its parameter's from the input, so put the op and the "
                    "variables it updates on a stage mesh (or on the global mesh)"
                )
        if v.cause in _KEPT_FROM_INPUT:
            broken, fix = _KEPT_FROM_INPUT[v.cause]
            raise ConversionError(
                f"{where} {v.message}: the input's annotation is inconsistent, and the rules "
                f"keep it as it is ({broken}); {fix}"
            )
        if v.cause is Cause.BACKWARD_FLOW:
            raise ConversionError(
                f"the forward pass would run backwards through the pipeline: {where} "
                f"{v.message}; ops outside the layers keep their mesh, so put the ops before "
                "the first layer on the first stage and those after the last layer on the "
                "last segment's stage"
            )
