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
from vppctl.mesh import NO_MESH, mesh_text, wide_meshes
from vppctl.plan import Plan, PlanSpec
from vppctl.program import BACKWARD, FORWARD_ROLES, NO_VAR, is_backward, is_forward, op_arguments


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
                    f"{index.op_label(bi.idx, op)} is on mesh {mesh_text(index.meshes[m])}, "
                    f"which is neither a stage mesh ({_stage_list(index, stages)}) nor a global "
                    "mesh; annotate every forward and backward op with its stage's mesh"
                )
            if m not in wide:
                raise ConversionError(
                    f"{index.op_label(bi.idx, op)} is on mesh {mesh_text(index.meshes[m])}, "
                    f"which is neither a stage mesh ({_stage_list(index, stages)}) nor one holding "
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


def _stage_list(index: ProgramIndex, stages: Sequence[int]) -> str:
    return " ".join(str(index.meshes[m]) for m in stages)


def check_sections(index: ProgramIndex) -> None:
    roles = index.global_block.ops.role
    backward = compress(count(), map(and_, roles, repeat(BACKWARD)))  # in C: once per op
    first_backward = next(backward, None)
    if first_backward is None:
        return
    after = first_backward + 1
    rest = roles[after:]
    if not any(role in rest for role in FORWARD_ROLES):  # searched in C: the usual case
        return
    i = next(compress(count(after), map(FORWARD_ROLES.__contains__, rest)), None)
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


def check_pp(stages: Sequence[int], opts: PlanSpec) -> None:
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
