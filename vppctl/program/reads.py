"""Reads: what the engine asks of one op or variable at a time, and the mesh values.

The scan (`vppctl.program.scan`) reads what every op needs; the functions here
read the rest on demand, for the few ops that need it: argument names and slots,
a variable's dims and data type, a serialized mesh as a `Mesh` value, the meshes
of an op's per-tensor dist attrs (verify's rule V017), the callstack attrs.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from typing import NamedTuple

from google.protobuf.message import DecodeError

from vppctl.errors import ProgramFileError
from vppctl.mesh import Mesh, mesh_text
from vppctl.program._proto import program_pb2 as pb
from vppctl.program._proto import view_pb2 as view
from vppctl.program.limits import raise_if_out_of_memory
from vppctl.program.load import Block, corrupt_op, corrupt_var
from vppctl.program.scan import PIECE_ITEMS, joinable_size
from vppctl.program.wire import BIG_OP, OP_TAG

CALLSTACK_NAME = b"op_callstack"

# -- per-tensor meshes (verify's rule V017) ------------------------------------

MeshKey = tuple[tuple[int, ...], tuple[int, ...]]  # Mesh.key


def tensor_mesh_conflicts(
    block: Block, op_mesh: Sequence[int], keys: Sequence[MeshKey]
) -> list[tuple[int, str, bytes]]:
    """Ops of `block` whose per-input/output tensor dist attrs name another mesh than the
    op's own: (op index, "input NAME" or "output NAME" of the first such entry, its raw
    mesh), in op order. `op_mesh` is each op's mesh class (negative: none; such ops are
    left out), `keys` each class's `Mesh.key`: meshes are equal when their keys are.

    Every op has to be read, so this is written for speed: each run of consecutive ops
    on one mesh is read in pieces, each piece as the output holds it (`Items.framed`: the
    bytes as read with the edits put in, no op rebuilt alone) and parsed as one op through
    the TensorDistRun view (see view.proto), whose lists then hold every per-tensor dist
    attr of the piece, serialized; each distinct one is read once (`_TensorMeshes`). Only
    a piece with a mesh of another key among them, or one that does not parse, is read
    op by op. The ops' own fields were read by the index's scan, so reading them as one
    cannot misframe one.
    """
    ops = block.ops
    out = []
    end = 0
    meshes = _TensorMeshes()
    for mesh, run in groupby(op_mesh):
        run_start, end = end, end + len(list(run))
        if mesh < 0:
            continue
        for start in range(run_start, end, PIECE_ITEMS):  # pieces: bounded memory
            stop = min(start + PIECE_ITEMS, end)
            ops.release(start)  # a mapped file's pages behind given back
            if joinable_size(ops.nbytes(start, stop)) and _run_on(
                ops.framed(start, stop, OP_TAG), keys[mesh], meshes
            ):
                continue
            for i in range(start, stop):
                conflict = _tensor_conflict(block, i, keys[mesh])
                if conflict is not None:
                    out.append((i, *conflict))
    return out


def _run_on(run: bytes, own: MeshKey, meshes: _TensorMeshes) -> bool:
    """Whether every tensor dist attr of the ops of `run` (framed as a block's ops) that
    names a mesh names `own` (False also when the ops do not parse: reading them one by
    one names the corrupt one)."""
    try:
        d = view.TensorDistRun.FromString(run).ops.dist_attr
    except DecodeError:
        return False
    tensors = set(d.input_dist_attrs.tensor_dist_attr[:])  # a slice: a list built in C
    tensors.update(d.output_dist_attrs.tensor_dist_attr[:])
    return all(meshes.on(t, own) for t in tensors)


class _TensorMeshes:
    """The mesh keys each distinct serialized tensor dist attr names, read once per value.

    A mesh split over several occurrences (protobuf merges them) is read as its pieces,
    each decoded alone. That reads the merge exactly whenever `on` says True: a piece
    without process ids is invalid (so False, and the ops are read one by one), and two
    pieces each holding all of `own`'s ids would merge into a mesh that repeats them, which
    no valid program holds (the one-by-one reading refuses it)."""

    def __init__(self) -> None:
        self._keys: dict[bytes, frozenset[MeshKey] | None] = {}  # None: not readable

    def on(self, tensor: bytes, own: MeshKey) -> bool:
        """Whether every mesh `tensor` names is `own` (False when it does not read)."""
        if tensor in self._keys:
            keys = self._keys[tensor]
        else:
            if len(self._keys) >= _KEPT:  # a program of ever new values: bounded all the same
                self._keys.clear()
            keys = self._keys[tensor] = _tensor_keys(tensor)
        return keys is not None and all(k == own for k in keys)


_KEPT = 1 << 12  # distinct tensor dist attrs kept read (a program has a few dozen)


def _tensor_keys(tensor: bytes) -> frozenset[MeshKey] | None:
    """The keys of the meshes a serialized tensor dist attr names (an empty mesh field is
    not compared); None when it does not parse or a mesh is corrupt or invalid."""
    try:
        raws = set(view.MeshMergeTensors.FromString(tensor).process_mesh)
        raws.discard(b"")
        return frozenset(decode_mesh(raw).key for raw in raws)
    except (DecodeError, ProgramFileError):  # reading op by op reports it
        return None


def _tensor_conflict(block: Block, op: int, own: MeshKey) -> tuple[str, bytes] | None:
    """The first tensor dist attr of one op whose mesh is not `own`, if any (the op parsed
    whole, as protobuf reads it: this runs only for the few ops `_run_on` cannot clear)."""
    try:
        d = pb.OpDesc.FromString(_dist_fields(block, op)).dist_attr
        for side, entries in (("input", d.input_dist_attrs), ("output", d.output_dist_attrs)):
            for e in entries:
                t = e.tensor_dist_attr
                raw = t.process_mesh.SerializeToString() if t.HasField("process_mesh") else b""
                if raw and decode_mesh(raw).key != own:
                    return f"{side} {as_text(e.name)}", raw
    except DecodeError:
        raise corrupt_op(block.idx, op) from None
    return None


def _dist_fields(block: Block, op: int) -> bytes:
    """The op, or for one of more than BIG_OP bytes (a huge attr) only its dist attr fields,
    all V017 reads: parsing it whole would hold the attr twice more."""
    ops = block.ops
    if ops.size(op) > BIG_OP:
        fields = ops.fields(op, _DIST_ATTR)
        if fields is not None:
            return fields
    return ops[op]


_DIST_ATTR = 1002  # OpDesc.dist_attr


def _slot_op(block: Block, op: int) -> view.SlotOp:
    try:
        return view.SlotOp.FromString(block.ops[op])
    except DecodeError:
        raise corrupt_op(block.idx, op) from None


def _scan_op(block: Block, op: int) -> view.ScanOp:
    try:
        return view.ScanOp.FromString(block.ops[op])
    except DecodeError:
        raise corrupt_op(block.idx, op) from None


def _scan_var(block: Block, pos: int) -> view.ScanVar:
    try:
        return view.ScanVar.FromString(block.vars[pos])
    except DecodeError:
        raise corrupt_var(block.idx, pos) from None


def op_arguments(block: Block, op: int) -> tuple[list[bytes], list[bytes]]:
    """The input and output argument names of one op (for messages and fallbacks)."""
    o = _scan_op(block, op)
    return list(o.inputs.arguments), list(o.outputs.arguments)


def op_slots(block: Block, op: int) -> dict[str, list[bytes]]:
    """An op's input slots -> argument names (cost estimates read matmul shapes)."""
    o = _slot_op(block, op)
    return {v.parameter.decode(): list(v.arguments) for v in o.inputs}


def var_dims(block: Block, pos: int) -> tuple[int, ...]:
    """The dims of a dense-tensor variable (empty when it has none)."""
    return var_shape(block, pos)[1]


def var_shape(block: Block, pos: int) -> tuple[int, tuple[int, ...]]:
    """The bytes per element (0: not a known data type, or no tensor) and dims (empty: none)
    of a dense-tensor or selected-rows variable, read through its type alone."""
    v = _scan_var(block, pos)
    try:
        t = pb.VarType.FromString(b"".join(v.type))
    except DecodeError:
        raise corrupt_var(block.idx, pos) from None
    if t.HasField("dense_tensor"):
        desc = t.dense_tensor.tensor
    elif t.HasField("selected_rows"):
        desc = t.selected_rows
    else:
        return 0, ()
    return _DTYPE_BYTES.get(desc.data_type, 0), tuple(desc.dims)


# Bytes per element of each VarType data type (Paddle's `SizeOfType`).
_DTYPE_BYTES = {
    pb.VarType.BOOL: 1,
    pb.VarType.INT16: 2,
    pb.VarType.INT32: 4,
    pb.VarType.INT64: 8,
    pb.VarType.FP16: 2,
    pb.VarType.FP32: 4,
    pb.VarType.FP64: 8,
    pb.VarType.SIZE_T: 8,
    pb.VarType.UINT8: 1,
    pb.VarType.INT8: 1,
    pb.VarType.BF16: 2,
    pb.VarType.COMPLEX64: 8,
    pb.VarType.COMPLEX128: 16,
    pb.VarType.FP8_E4M3FN: 1,
    pb.VarType.FP8_E5M2: 1,
    pb.VarType.UINT16: 2,
    pb.VarType.UINT32: 4,
    pb.VarType.UINT64: 8,
}


class VarTensor(NamedTuple):
    """What the memory model needs of one tensor variable (a tuple: one per variable
    read, so it must be cheap)."""

    dtype_bytes: int  # bytes per element; 0 when the data type is not a known one
    dims: tuple[int, ...]  # -1 for a dimension unknown until run time
    persistable: bool


def var_tensor(block: Block, pos: int) -> VarTensor | None:
    """Element size, dims and persistable flag of a dense-tensor or selected-rows
    variable; None for other kinds (readers, scopes, arrays, ...)."""
    try:
        v = pb.VarDesc.FromString(block.vars[pos])
    except DecodeError:
        raise corrupt_var(block.idx, pos) from None
    t = v.type
    if t.HasField("dense_tensor"):
        desc = t.dense_tensor.tensor
    elif t.HasField("selected_rows"):
        desc = t.selected_rows
    else:
        return None
    return VarTensor(_DTYPE_BYTES.get(desc.data_type, 0), tuple(desc.dims), v.persistable)


_meshes: dict[bytes, Mesh] = {}


def decode_mesh(raw: bytes) -> Mesh:
    """A ProcessMesh message's bytes as a Mesh value (cached: programs have few meshes)."""
    mesh = _meshes.get(raw)
    if mesh is None:
        try:
            m = pb.ProcessMesh.FromString(raw)
        except DecodeError:
            raise ProgramFileError("not a program: a process mesh is corrupt") from None
        mesh = Mesh(tuple(m.shape), tuple(m.process_ids), tuple(map(as_text, m.dim_names)))
        problem = mesh.problem()
        if problem:
            raise ProgramFileError(
                f"not a valid program: process mesh {mesh_text(mesh)} is invalid: {problem}; a "
                "mesh needs distinct non-negative process ids and a shape whose product is their "
                "number"
            )
        _meshes[raw] = mesh
    return mesh


_canonical_meshes: dict[bytes, bytes] = {}


def canonical_mesh(raw: bytes) -> bytes:
    """A serialized ProcessMesh as protobuf writes it: one byte string per mesh however the
    input wrote it (fields in any order, ids packed or not, split: view.proto), so that the
    mesh written into rewritten ops and variables is the same for every encoding. Cached:
    programs have few meshes. The caller has decoded `raw` (`decode_mesh`)."""
    out = _canonical_meshes.get(raw)
    if out is None:
        out = _canonical_meshes[raw] = pb.ProcessMesh.FromString(raw).SerializeToString()
    return out


def as_text(value: str | bytes) -> str:
    """A string field's value: protobuf hands proto2 strings that are not UTF-8 over as bytes."""
    return value if isinstance(value, str) else value.decode("utf-8", "backslashreplace")


def program_meshes(program: view.LazyProgram) -> list[bytes]:
    """`ProgramDesc.process_meshes`, raw, in order."""
    return list(program.process_meshes)


def is_callstack(attr: bytes) -> bool:
    """Whether a serialized OpDesc.Attr is `op_callstack`, however it is encoded (fields
    out of order, a long length, the name given twice: the last one counts, as protobuf
    reads it)."""
    if CALLSTACK_NAME not in attr:
        return False
    try:
        return pb.OpDesc.Attr.FromString(attr).name == "op_callstack"
    except DecodeError as e:
        raise_if_out_of_memory(e)
        return False


def callstack_ops(block: Block) -> int:
    """Ops of `block` that carry an `op_callstack` attr (for reports; not on the hot path)."""
    n = 0
    for i, blob in enumerate(block.ops):
        if CALLSTACK_NAME in blob:  # cheap filter; the parse makes it exact
            try:
                attrs = view.EditOp.FromString(blob).attrs
            except DecodeError:
                raise corrupt_op(block.idx, i) from None
            n += any(map(is_callstack, attrs))
    return n
