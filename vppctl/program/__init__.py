"""The program: every byte and every protobuf message vppctl reads or writes.

A program is loaded with its ops and variables kept serialized (`load`), read in
one scan into columns of plain values (`scan`) and, on demand, one op or variable
at a time (`reads`); edited in place (`rewrite`, `record`) and saved (`save`).
Where the bytes come from and go to (files, stdin, devices, atomic replacement)
is `destinations` (where an output goes, decided before any work), `files` (the
bytes read and written) and `atomic`; running out of memory, said as such, is `limits`;
`sniff` tells a program's format by its content (compressed or not), `wire` holds the
wire-format facts the hand-framed paths need, and `roles`
Paddle's op roles. A Paddle 3.x PIR program (JSON) is read into the same `Program`
by `pir` (its own package: `parse`, `tables`, `grads`, `encode`), and is never written.
The generated protobuf modules (`_proto`)
are imported nowhere else but the builders (`vppctl.sample`, `vppctl.paddle`): ruff's
banned-api in pyproject.toml says so, once.

Other packages import these names from here, never a module of this package. `PirOrigin`
loads on first use, with the PIR reader: a binary or text program never loads it.
"""

from typing import TYPE_CHECKING

from vppctl._lazy import face
from vppctl.program.destinations import resolve_output
from vppctl.program.files import STDIO, Bound, Input, Output, interrupted, read_input, write_all
from vppctl.program.limits import memory_guarded
from vppctl.program.load import (
    Block,
    Program,
    is_text_name,
    parse_program,
    read_program,
    to_full,
)
from vppctl.program.planfile import MAX_PLAN_BYTES, read_pir_plan_file
from vppctl.program.reads import (
    VarTensor,
    as_text,
    callstack_ops,
    canonical_mesh,
    decode_mesh,
    op_arguments,
    op_slots,
    program_meshes,
    tensor_mesh_conflicts,
    var_dims,
    var_shape,
    var_tensor,
)
from vppctl.program.record import RecordedPlan, RecordedSegment, read_plan, write_plan
from vppctl.program.rewrite import encode_mesh, rewrite_ops, rewrite_vars, strip_callstack
from vppctl.program.roles import (
    BACKWARD,
    FORWARD,
    FORWARD_ROLES,
    GRAD_SUM_TYPES,
    GRAD_SUMS,
    KINDS,
    LOSS,
    LOSS_GRAD,
    OPTIMIZE,
    OpKind,
    is_backward,
    is_forward,
    is_loss_grad,
    kind,
)
from vppctl.program.save import check_size, write_program, write_serialized
from vppctl.program.scan import (
    EMPTY_NAMES,
    EMPTY_VAR,
    NO_CHUNK_NAME,
    NO_VAR,
    SCOPE_VAR,
    OpColumns,
    VarColumns,
    scan_ops,
    scan_vars,
)
from vppctl.program.sniff import MAX_PROGRAM_BYTES, looks_like_text
from vppctl.program.wire import block_field_start, block_head, varint

__all__ = [
    "BACKWARD",
    "EMPTY_NAMES",
    "EMPTY_VAR",
    "FORWARD",
    "FORWARD_ROLES",
    "GRAD_SUMS",
    "GRAD_SUM_TYPES",
    "KINDS",
    "LOSS",
    "LOSS_GRAD",
    "MAX_PLAN_BYTES",
    "MAX_PROGRAM_BYTES",
    "NO_CHUNK_NAME",
    "NO_VAR",
    "OPTIMIZE",
    "SCOPE_VAR",
    "STDIO",
    "Block",
    "Bound",
    "Input",
    "OpColumns",
    "OpKind",
    "Output",
    "PirOrigin",
    "Program",
    "RecordedPlan",
    "RecordedSegment",
    "VarColumns",
    "VarTensor",
    "as_text",
    "block_field_start",
    "block_head",
    "callstack_ops",
    "canonical_mesh",
    "check_size",
    "decode_mesh",
    "encode_mesh",
    "interrupted",
    "is_backward",
    "is_forward",
    "is_loss_grad",
    "is_text_name",
    "kind",
    "looks_like_text",
    "memory_guarded",
    "op_arguments",
    "op_slots",
    "parse_program",
    "program_meshes",
    "read_input",
    "read_pir_plan_file",
    "read_plan",
    "read_program",
    "resolve_output",
    "rewrite_ops",
    "rewrite_vars",
    "scan_ops",
    "scan_vars",
    "strip_callstack",
    "tensor_mesh_conflicts",
    "to_full",
    "var_dims",
    "var_shape",
    "var_tensor",
    "varint",
    "write_all",
    "write_plan",
    "write_program",
    "write_serialized",
]

if TYPE_CHECKING:
    from vppctl.program.pir import PirOrigin

# The one name loaded on use (from the `pir` package's own lazy face).
__getattr__, __dir__ = face(__name__, {"PirOrigin": "pir"}, globals())
