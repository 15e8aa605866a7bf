"""Refusals: which violations on a converted program the input caused, refused with a fix.

`convert` verifies its own result. A violation there is a bug in vppctl, unless
the input carried it in: an op the rules keep where it is brought an
inconsistent annotation along. Those are refused here as conversion errors
(exit 4) that name the fix; what is left is the self-check's (exit 70).
"""

from __future__ import annotations

from collections.abc import Sequence

from vppctl.engine import ProgramIndex
from vppctl.errors import ConversionError
from vppctl.program import is_backward, is_forward
from vppctl.verify.rules import Cause, Violation

_GRAD_TYPES = ("_grad", "sum", "grad_add")
_DIST_ATTRS = "fix the program's dist_attrs (or export it again)"
_LINKS_RULE = "a grad op's forward_op_id names the forward op it differentiates"
_LINKS_FIX = "fix the op's forward_op_id (vppctl.paddle.export_program writes the links)"
_KEPT_FROM_INPUT = {  # cause -> (the rule the input broke, the fix)
    Cause.TENSOR_MESH_MISMATCH: ("an op's tensor dist attrs share its mesh", _DIST_ATTRS),
    Cause.SUB_BLOCK_MISPLACED: ("a sub-block runs where the op running it runs", _DIST_ATTRS),
    Cause.PARAM_MISPLACED: ("a parameter lives where its first forward reader runs", _DIST_ATTRS),
    Cause.FORWARD_LINK_CONTRADICTED: (_LINKS_RULE, _LINKS_FIX),
    Cause.LINK_OFF_DATA_FLOW: (_LINKS_RULE, _LINKS_FIX),
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
