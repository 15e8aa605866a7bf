"""The one module that knows the program's field names and wire details.

It reads what the engine needs from every op and variable into columns of
plain values (one scan, no object per op), and writes new meshes and chunk ids
back into the serialized ops and variables. Everything else in vppctl talks in
plain Python values.

How the fields are read (Paddle's conventions):

- an op's role is its int attr `op_role` (absent = 0);
- a sub-block is the BLOCK attr `sub_block`;
- an op's layer path is `OpDesc.struct_name`, its mesh and chunk id are in
  `OpDesc.dist_attr` (`process_mesh`, `chunk_id`), a variable's in
  `VarDesc.dist_attr`;
- the empty variable name and Paddle's `@EMPTY@` name no variable.
"""

from __future__ import annotations

import os
import re
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import groupby, repeat
from operator import add, itemgetter
from typing import NamedTuple, TypeVar

from google.protobuf.message import DecodeError

from vppctl._version import __version__
from vppctl.errors import ProgramFileError
from vppctl.mesh import Mesh
from vppctl.plan import Plan
from vppctl.program._proto import program_pb2 as pb
from vppctl.program._proto import view_pb2 as view
from vppctl.program.load import Block
from vppctl.program.roles import BACKWARD, FORWARD_ROLES, OPTIMIZE

NO_VAR = -1  # an argument naming no declared variable
EMPTY_VAR = -2  # "" or Paddle's @EMPTY@: no variable, by design
# A reader queue (a name containing NO_CHUNK_NAME) that no block declares: it lives in
# Paddle's Scope (`DataLoader.from_generator` puts it there), and Paddle's chunk step skips
# it on purpose. Accepted; every other undeclared name is NO_VAR.
SCOPE_VAR = -3
EMPTY_NAMES = (b"", b"@EMPTY@")

_ATTRS_READ = re.compile(rb"\n\x07op_role|\n\tsub_block").match
_ROLE_PREFIX = b"\n\x07op_role\x10\x00\x18"  # name "op_role", type INT, then field i
_CANONICAL_ROLES = {_ROLE_PREFIX + bytes((r,)): r for r in range(0x80)}  # the usual encoding
NO_CHUNK_NAME = b"lod_tensor_blocking_queue"  # reader-queue variables never get a chunk id
_MINUS_ONES = repeat(NO_VAR)  # the default of `lookup` in map(lookup, names, _MINUS_ONES)
_CALLSTACK_NAME = b"op_callstack"
_PARAM = b"Param"
_T = TypeVar("_T")


@dataclass
class OpColumns:
    """One block's ops as columns; index i is op i of the block."""

    type: list[bytes] = field(default_factory=list)
    role: array[int] = field(default_factory=lambda: array("q"))
    struct: list[bytes] = field(default_factory=list)  # forward ops only (b"" for others)
    mesh: list[bytes] = field(default_factory=list)  # raw ProcessMesh bytes, b"" = none
    chunk: array[int] = field(default_factory=lambda: array("q"))  # -1 = none
    op_id: array[int] = field(default_factory=lambda: array("q"))  # forward ops; -1 = none
    forward_op_id: array[int] = field(default_factory=lambda: array("q"))  # backward ops; -1
    sub_blocks: dict[int, list[int]] = field(default_factory=dict)  # op -> block indices
    in_off: array[int] = field(default_factory=lambda: array("q", [0]))
    in_var: array[int] = field(default_factory=lambda: array("q"))
    out_off: array[int] = field(default_factory=lambda: array("q", [0]))
    out_var: array[int] = field(default_factory=lambda: array("q"))
    param: dict[int, int] = field(default_factory=dict)  # optimizer op -> its Param var

    def __len__(self) -> int:
        return len(self.type)


@dataclass
class VarColumns:
    """One block's variables as columns; index i is var i of the block."""

    name: list[bytes] = field(default_factory=list)
    mesh: list[bytes] = field(default_factory=list)
    chunk: array[int] = field(default_factory=lambda: array("q"))
    is_parameter: bytearray = field(default_factory=bytearray)

    def __len__(self) -> int:
        return len(self.name)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = data[pos]
        result |= (b & 0x7F) << shift
        pos += 1
        if b < 0x80:
            return result, pos
        shift += 7


def _int_attr(blob: bytes) -> int:
    """The value of an INT or LONG attr (canonical bytes decoded inline, else parsed)."""
    if blob.startswith(_ROLE_PREFIX):
        try:
            value, end = _varint(blob, len(_ROLE_PREFIX))
        except IndexError:
            end = -1
        if end == len(blob):
            value &= 0xFFFFFFFF  # field `i` is an int32: its low 32 bits, as protobuf reads it
            return value - (1 << 32) if value >= 1 << 31 else value
    attr = pb.OpDesc.Attr.FromString(blob)
    return attr.l if attr.type == pb.LONG else attr.i


def _block_attr(blob: bytes) -> list[int]:
    attr = pb.OpDesc.Attr.FromString(blob)
    if attr.type == pb.BLOCKS:
        return list(attr.blocks_idx)
    return [attr.block_idx]


def scan_vars(block: Block, block_idx: int) -> VarColumns:
    """Read every variable of `block` into columns: in pieces parsed as one, as `scan_ops`
    reads ops (a piece that cannot be read so exactly is read variable by variable)."""
    cols = VarColumns()
    dists: list[bytes] = []
    vars_ = block.vars
    pos = 0
    try:
        for pos in range(0, len(vars_), _SCAN_PIECE):
            piece = vars_[pos : pos + _SCAN_PIECE]
            merged = _merged_vars(piece) if _small(piece) else None
            if merged is not None:
                cols.name.extend(merged[0])
                cols.is_parameter.extend(merged[1])
                dists.extend(merged[2])
                continue
            for pos, blob in enumerate(piece, pos):  # noqa: B007, B020 (names a corrupt var)
                v = view.ScanVar.FromString(blob)
                cols.name.append(v.name)
                cols.is_parameter.append(v.is_parameter)
                dists.append(v.dist_attr)
    except DecodeError:
        raise _corrupt_var(block_idx, pos) from None
    # A program has few distinct dist attrs: decode each once.
    placement = {}
    for raw in dict.fromkeys(dists):
        try:
            placement[raw] = _tensor_placement(raw)
        except DecodeError:
            raise _corrupt_var(block_idx, dists.index(raw)) from None
    placements = list(map(placement.__getitem__, dists))
    cols.mesh = list(map(itemgetter(0), placements))
    cols.chunk = array("q", map(itemgetter(1), placements))
    return cols


def _merged_vars(piece: list[bytes]) -> tuple[list[bytes], list[bool], list[bytes]] | None:
    """(names, is_parameter flags, raw dist attrs) of a piece of variables parsed as one,
    or None when that cannot be read as each variable alone would be (see `_OpScan.merged`)."""
    n = len(piece)
    data = _VAR_SEPARATOR.join(piece) + _VAR_SEPARATOR
    try:
        m = view.ScanVarMerge.FromString(data)
        if view.ScanVarProbe.FromString(data).is_parameter:
            return None
    except DecodeError:
        return None
    names = _last_each(list(m.name), n, _SENTINEL_NAME, b"")
    flags = _last_each(list(m.is_parameter), n, _SENTINEL_INT, 0)
    dists = _last_each(list(m.dist_attr), n, _SENTINEL_NAME, b"")
    if names is None or flags is None or dists is None:
        return None
    return names, list(map(bool, flags)), dists


def _tensor_placement(raw: bytes) -> tuple[bytes, int]:
    """(raw mesh, chunk id or -1) of a serialized TensorDistAttr."""
    d = view.ScanTensorDist.FromString(raw)
    return d.process_mesh, d.chunk_id


def scan_ops(block: Block, block_idx: int, lookup: Callable[[bytes, int], int]) -> OpColumns:
    """Read every op of `block` into columns; `lookup(name, default)` gives a var id.

    This runs once per op of the program, so it is written for speed. The ops are
    read in pieces of _SCAN_PIECE: each piece is joined with a separator op and
    parsed as one message through the ScanMerge view (see view.proto), so the
    values arrive as a few lists per piece instead of a dozen attribute reads per
    op. A piece that this cannot read exactly (see `_OpScan.merged`) is read op by
    op through the ScanOp view, which names a corrupt op. Names are resolved to
    var ids in one pass at the end. (Run it with the garbage collector paused: see
    `vppctl.gcpause`.)
    """
    ops = block.ops
    scan = _OpScan()
    i = 0
    try:
        for i in range(0, len(ops), _SCAN_PIECE):
            piece = ops[i : i + _SCAN_PIECE]
            if not (_small(piece) and scan.merged(piece)):
                for i, blob in enumerate(piece, i):  # noqa: B020 (i names a corrupt op)
                    scan.one(blob, i)
    except DecodeError:
        raise _corrupt_op(block_idx, i) from None
    return scan.columns(ops, lookup, block_idx)


# A separator's sentinels: drawn at random per process, so that no input can hold
# them (an op holding a whole separator could otherwise hide a corrupt neighbour).
_SENTINEL_NAME = b"\xff" + os.urandom(15)
_SENTINEL_INT = int.from_bytes(os.urandom(8), "little", signed=True)
_SCAN_PIECE = 256  # ops parsed together (small pieces stay in the cache: faster)
# A piece larger than this is read one by one: joining it would hold a second copy
# of huge ops (a callstack of megabytes) at once, where one by one holds one op's.
_PIECE_BYTES = 1 << 22


def _small(piece: list[bytes]) -> bool:
    return sum(map(len, piece)) <= _PIECE_BYTES


def _scan_separator() -> bytes:
    sep = view.ScanMerge()
    name, n = _SENTINEL_NAME, _SENTINEL_INT
    sep.inputs.arguments.append(name)
    sep.outputs.arguments.append(name)
    sep.type.append(name)
    sep.attrs.append(name)
    sep.struct_name.append(name)
    sep.dist_attr.process_mesh.append(name)
    sep.dist_attr.chunk_id.append(n)
    sep.id.append(n)
    sep.forward_op_id.append(n)
    return sep.SerializeToString()


_SCAN_SEPARATOR = _scan_separator()
_VAR_SEPARATOR = view.ScanVarMerge(
    name=[_SENTINEL_NAME], is_parameter=[_SENTINEL_INT], dist_attr=[_SENTINEL_NAME]
).SerializeToString()


class _OpScan:
    """The columns `scan_ops` builds for one block, filled a piece (merged) or an op
    (ScanOp) at a time."""

    def __init__(self) -> None:
        self.type: list[bytes] = []
        self.role: list[int] = []
        self.struct: list[bytes] = []  # every op's, until `columns` keeps forward ops'
        self.mesh: list[bytes] = []
        self.chunk: list[int] = []
        self.id: list[int] = []
        self.forward_op_id: list[int] = []
        self.in_names: list[bytes] = []
        self.out_names: list[bytes] = []
        self.in_off: list[int] = [0]
        self.out_off: list[int] = [0]
        self.sub_blocks: dict[int, list[int]] = {}
        self.interned: dict[bytes, bytes] = {}

    def one(self, blob: bytes, i: int) -> None:
        """Op `i`, parsed alone."""
        op = view.ScanOp.FromString(blob)
        self.role.append(self._role(op.attrs, i))
        intern = self.interned.setdefault
        t, s, d = op.type, op.struct_name, op.dist_attr
        m = d.process_mesh
        self.type.append(intern(t, t))
        self.struct.append(intern(s, s))
        self.mesh.append(intern(m, m))
        self.chunk.append(d.chunk_id)  # -1 when absent, as are the ids (the view's defaults)
        self.id.append(op.id)
        self.forward_op_id.append(op.forward_op_id)
        self.in_names.extend(op.inputs.arguments)
        self.in_off.append(len(self.in_names))
        self.out_names.extend(op.outputs.arguments)
        self.out_off.append(len(self.out_names))

    def merged(self, piece: list[bytes]) -> bool:
        """The ops of `piece`, parsed as one; False (nothing taken) when that parse cannot
        be read as the ops alone would be: it fails, a list holds other than one sentinel
        per op (a corrupt op swallowed a separator), or an int field is length-delimited
        (ScanOp skips it; ScanMerge would read it as packed)."""
        n = len(piece)
        data = _SCAN_SEPARATOR.join(piece) + _SCAN_SEPARATOR
        try:
            m = view.ScanMerge.FromString(data)
            p = view.ScanProbe.FromString(data)
        except DecodeError:
            return False
        if p.id or p.forward_op_id or p.dist_attr.chunk_id:
            return False
        d = m.dist_attr
        name, num = _SENTINEL_NAME, _SENTINEL_INT
        types = _last_each(list(m.type), n, name, b"")
        structs = _last_each(list(m.struct_name), n, name, b"")
        meshes = _last_each(list(d.process_mesh), n, name, b"")
        chunks = _last_each(list(d.chunk_id), n, num, -1)
        ids = _last_each(list(m.id), n, num, -1)
        forward_ids = _last_each(list(m.forward_op_id), n, num, -1)
        ins, outs, attrs = list(m.inputs.arguments), list(m.outputs.arguments), list(m.attrs)
        in_ends, out_ends = _ends(ins, n, name), _ends(outs, n, name)
        attr_ends = _ends(attrs, n, name)
        if (
            types is None
            or structs is None
            or meshes is None
            or chunks is None
            or ids is None
            or forward_ids is None
            or in_ends is None
            or out_ends is None
            or attr_ends is None
        ):
            return False
        roles = self._roles(attrs, attr_ends)
        if roles is None:
            return False
        self.role.extend(roles)
        intern = self.interned.setdefault
        self.type.extend(map(intern, types, types))
        self.struct.extend(map(intern, structs, structs))
        self.mesh.extend(map(intern, meshes, meshes))
        self.chunk.extend(chunks)
        self.id.extend(ids)
        self.forward_op_id.extend(forward_ids)
        for names, off, values, ends in (
            (self.in_names, self.in_off, ins, in_ends),
            (self.out_names, self.out_off, outs, out_ends),
        ):
            base = len(names)
            off.extend(map(add, ends, range(base, base - n, -1)))  # names before each sentinel
            names.extend(filter(name.__ne__, values))
        return True

    def _roles(self, attrs: list[bytes], ends: list[int]) -> list[int] | None:
        """The roles of a merged piece's ops from their attrs (op k's before ends[k]),
        noting sub-blocks; None when an attr is corrupt (read op by op: that names its op)."""
        first, begin = len(self.role), 0
        out, canonical = [], _CANONICAL_ROLES.get
        try:
            for k, end in enumerate(ends):
                read = list(filter(_ATTRS_READ, attrs[begin:end]))
                role = canonical(read[0]) if len(read) == 1 else None  # the usual op
                out.append(role if role is not None else self._role(read, first + k))
                begin = end + 1
        except DecodeError:
            return None
        return out

    def _role(self, attrs: Iterable[bytes], i: int) -> int:
        """Op `i`'s role from its attrs (the last `op_role`; 0 without), noting its sub-blocks."""
        role = 0
        for attr in filter(_ATTRS_READ, attrs):
            if attr.startswith(_ROLE_PREFIX) and len(attr) == 13:  # the usual role < 128
                role = attr[12] if attr[12] < 0x80 else _int_attr(attr)
            elif attr[2] == 0x6F:  # op_role in another encoding
                role = _int_attr(attr)
            else:
                self.sub_blocks[i] = _block_attr(attr)
        return role

    def columns(
        self, ops: list[bytes], lookup: Callable[[bytes, int], int], block_idx: int
    ) -> OpColumns:
        roles = self.role
        # Only forward ops' layer paths and ids are used, and only backward ops' links.
        forward = [r in FORWARD_ROLES for r in roles]
        links = zip(self.forward_op_id, roles)
        cols = OpColumns(
            type=self.type,
            role=array("q", roles),
            struct=[s if f else b"" for s, f in zip(self.struct, forward)],
            mesh=self.mesh,
            chunk=array("q", self.chunk),
            op_id=array("q", [v if f else -1 for v, f in zip(self.id, forward)]),
            forward_op_id=array("q", [v if r & BACKWARD else -1 for v, r in links]),
            sub_blocks=self.sub_blocks,
            in_off=array("q", self.in_off),
            in_var=array("q", map(lookup, self.in_names, _MINUS_ONES)),
            out_off=array("q", self.out_off),
            out_var=array("q", map(lookup, self.out_names, _MINUS_ONES)),
        )
        i = 0
        try:
            for i, r in enumerate(roles):
                if r & OPTIMIZE:  # also optimize-bit ops of other phases: Param is looked up
                    cols.param[i] = _param_input(ops[i], lookup)
        except DecodeError:
            raise _corrupt_op(block_idx, i) from None
        return cols


def _ends(values: list[_T], n: int, sentinel: _T) -> list[int] | None:
    """The positions of the `n` sentinels in `values` (None unless there are exactly n)."""
    if values.count(sentinel) != n:
        return None
    at = values.index
    ends, pos = [], -1
    for _ in range(n):
        pos = at(sentinel, pos + 1)
        ends.append(pos)
    return ends


def _last_each(values: list[_T], n: int, sentinel: _T, default: _T) -> list[_T] | None:
    """Per op, its last value before its sentinel (`default` without one), from a merged
    list holding `n` sentinels (None otherwise)."""
    if len(values) == 2 * n and values[1::2].count(sentinel) == n:  # one value per op
        firsts = values[0::2]
        return firsts if sentinel not in firsts else None
    ends = _ends(values, n, sentinel)
    if ends is None:
        return None
    out, prev = [], -1
    for end in ends:
        out.append(values[end - 1] if end - 1 > prev else default)
        prev = end
    return out


def _param_input(blob: bytes, lookup: Callable[[bytes, int], int]) -> int:
    """The var id of an optimizer op's `Param` input, or NO_VAR."""
    if _PARAM not in blob:  # no slot can be named Param (most optimize-role ops: clipping)
        return NO_VAR
    for v in view.SlotOp.FromString(blob).inputs:
        if v.parameter == b"Param" and v.arguments:
            return lookup(v.arguments[0], NO_VAR)
    return NO_VAR


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
    on one mesh is joined, in pieces, and parsed as one op through the MeshMerge view
    (see view.proto), whose lists then hold every tensor mesh of the piece; only a
    piece with a mesh of another key among them, or one that does not parse, is read
    op by op. The ops' own fields were read by the index's scan, so joining them cannot
    misframe one.
    """
    ops = block.ops
    out = []
    end = 0
    for mesh, run in groupby(op_mesh):
        run_start, end = end, end + len(list(run))
        if mesh < 0:
            continue
        for start in range(run_start, end, _SCAN_PIECE):  # pieces: bounded memory
            stop = min(start + _SCAN_PIECE, end)
            piece = ops[start:stop]
            if _small(piece) and _run_on(piece, keys[mesh]):
                continue
            for i in range(start, stop):
                conflict = _tensor_conflict(block, i, keys[mesh])
                if conflict is not None:
                    out.append((i, *conflict))
    return out


def _run_on(run: list[bytes], own: MeshKey) -> bool:
    """Whether every tensor dist attr of the ops of `run` that names a mesh names `own`
    (False also when the ops do not parse: reading them one by one names the corrupt one)."""
    try:
        d = view.MeshMerge.FromString(b"".join(run)).dist_attr
    except DecodeError:
        return False
    found = set(d.input_dist_attrs.tensor_dist_attr.process_mesh)
    found.update(d.output_dist_attrs.tensor_dist_attr.process_mesh)
    found.discard(b"")  # a tensor dist attr without a mesh is not compared
    try:
        return all(decode_mesh(raw).key == own for raw in found)
    except ProgramFileError:  # a corrupt or invalid mesh: reading op by op reports it
        return False


def _tensor_conflict(block: Block, op: int, own: MeshKey) -> tuple[str, bytes] | None:
    """The first tensor dist attr of one op whose mesh is not `own`, if any (read as the
    index reads meshes: a field given twice counts once, the last)."""
    try:
        d = view.EditOp.FromString(block.ops[op]).dist_attr
        for side, entries in (("input", d.input_dist_attrs), ("output", d.output_dist_attrs)):
            for e in entries:
                raw = view.ScanTensorDist.FromString(e.tensor_dist_attr).process_mesh
                if raw and decode_mesh(raw).key != own:
                    return f"{side} {_text(e.name)}", raw
    except DecodeError:
        raise _corrupt_op(block.idx, op) from None
    return None


def _corrupt_op(block: int, op: int) -> ProgramFileError:
    return ProgramFileError(
        f"not a program: op {op} of block {block} is corrupt (not a valid OpDesc)"
    )


def _corrupt_var(block: int, pos: int) -> ProgramFileError:
    return ProgramFileError(
        f"not a program: variable {pos} of block {block} is corrupt (not a valid VarDesc)"
    )


def _slot_op(block: Block, op: int) -> view.SlotOp:
    try:
        return view.SlotOp.FromString(block.ops[op])
    except DecodeError:
        raise _corrupt_op(block.idx, op) from None


def _scan_op(block: Block, op: int) -> view.ScanOp:
    try:
        return view.ScanOp.FromString(block.ops[op])
    except DecodeError:
        raise _corrupt_op(block.idx, op) from None


def _scan_var(block: Block, pos: int) -> view.ScanVar:
    try:
        return view.ScanVar.FromString(block.vars[pos])
    except DecodeError:
        raise _corrupt_var(block.idx, pos) from None


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
    v = _scan_var(block, pos)
    try:
        t = pb.VarType.FromString(v.type)
    except DecodeError:
        raise _corrupt_var(block.idx, pos) from None
    if t.HasField("dense_tensor"):
        return tuple(t.dense_tensor.tensor.dims)
    if t.HasField("selected_rows"):
        return tuple(t.selected_rows.dims)
    return ()


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
        raise _corrupt_var(block.idx, pos) from None
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
        mesh = Mesh(tuple(m.shape), tuple(m.process_ids), tuple(map(_text, m.dim_names)))
        problem = mesh.problem()
        if problem:
            raise ProgramFileError(
                f"not a valid program: process mesh {_mesh_text(mesh)} is invalid: {problem}; a "
                "mesh needs distinct non-negative process ids and a shape whose product is their "
                "number"
            )
        _meshes[raw] = mesh
    return mesh


def _text(value: str | bytes) -> str:
    """A string field's value: protobuf hands proto2 strings that are not UTF-8 over as bytes."""
    return value if isinstance(value, str) else value.decode("utf-8", "backslashreplace")


def _mesh_text(mesh: Mesh) -> str:
    ids = ",".join(map(str, mesh.process_ids[:8])) + ("..." if len(mesh.process_ids) > 8 else "")
    return f"[{ids}] (shape {list(mesh.shape[:8])})"


def encode_mesh(mesh: Mesh) -> bytes:
    return pb.ProcessMesh(
        shape=mesh.shape, process_ids=mesh.process_ids, dim_names=mesh.dim_names
    ).SerializeToString()


def program_meshes(program: view.LazyProgram) -> list[bytes]:
    """`ProgramDesc.process_meshes`, raw, in order."""
    return list(program.process_meshes)


def rewrite_ops(block: Block, edits: Iterable[tuple[int, bytes | None, int]]) -> int:
    """Set (mesh, chunk id) on ops: (op index, raw mesh or None to keep, chunk id).

    A mesh also replaces the meshes in the op's per-input and per-output tensor
    dist attrs. Those stay serialized, and a program has few distinct ones, so
    each is rewritten once and then looked up. Returns the number of ops whose
    bytes changed.
    """
    ops = block.ops
    parse = view.EditOp.FromString
    by_mesh: dict[bytes, dict[bytes, bytes]] = {}  # mesh -> old tensor attr -> new
    n = i = 0
    try:
        for i, mesh, chunk in edits:
            old = ops[i]
            op = parse(old)
            d = op.dist_attr
            if mesh is not None:
                d.process_mesh = mesh
                done = by_mesh.get(mesh)
                if done is None:
                    done = by_mesh[mesh] = {}
                for entries in (d.input_dist_attrs, d.output_dist_attrs):
                    for entry in entries:
                        t = entry.tensor_dist_attr
                        if t:
                            new_t = done.get(t)
                            if new_t is None:
                                new_t = done[t] = _retensored(t, mesh, None)
                            entry.tensor_dist_attr = new_t
            d.chunk_id = chunk
            new = op.SerializeToString()
            if new != old:
                ops[i] = new
                n += 1
    except DecodeError:  # the write view reads fields the scan view skips
        raise _corrupt_op(block.idx, i) from None
    return n


def rewrite_vars(block: Block, edits: Iterable[tuple[int, bytes | None, int | None]]) -> int:
    """Set (mesh, chunk id) on variables: (var index, raw mesh or None, chunk or None).
    Returns the number of variables whose bytes changed.

    A variable usually starts with its name, and the rest of its bytes (type, shape, dist
    attr) is shared by many variables: that rest is rewritten once per distinct value
    and the name put back in front, which gives exactly the bytes rewriting the whole
    variable gives (the name is field 1, written first)."""
    vars_ = block.vars
    parse = view.EditVar.FromString
    retensor = _Rewriter()
    rests: dict[tuple[bytes, bytes | None, int | None], bytes | None] = {}
    n = i = 0
    try:
        for i, mesh, chunk in edits:
            if mesh is None and chunk is None:
                continue
            old = vars_[i]
            new = None
            cut = 2 + old[1] if len(old) > 1 and old[0] == 0x0A and old[1] < 0x80 else 0
            if 0 < cut <= len(old):  # the name field, whole, in front: one-byte length
                key = (old[cut:], mesh, chunk)
                rest = rests.get(key, _NOT_YET)
                if rest is _NOT_YET:
                    rest = rests[key] = _rewritten_rest(key[0], mesh, chunk, retensor)
                if rest is not None:
                    new = old[:cut] + rest
            if new is None:
                v = parse(old)
                v.dist_attr = retensor(v.dist_attr, mesh, chunk)
                new = v.SerializeToString()
            if new != old:
                vars_[i] = new
                n += 1
    except DecodeError:  # the write view reads fields the scan view skips
        raise _corrupt_var(block.idx, i) from None
    return n


_NOT_YET = b"not yet rewritten"  # compared by identity only


def _rewritten_rest(
    rest: bytes, mesh: bytes | None, chunk: int | None, retensor: _Rewriter
) -> bytes | None:
    """A variable's bytes after its name field, rewritten; None when they name it again
    (then the whole variable is rewritten, which keeps one name field)."""
    v = view.EditVar.FromString(rest)
    if v.HasField("name"):
        return None
    v.dist_attr = retensor(v.dist_attr, mesh, chunk)
    return v.SerializeToString()


class _Rewriter:
    """Serialized TensorDistAttr -> the same with a new mesh and/or chunk id, memoised."""

    def __init__(self) -> None:
        self.done: dict[tuple[bytes, bytes | None, int | None], bytes] = {}

    def __call__(self, old: bytes, mesh: bytes | None, chunk: int | None) -> bytes:
        key = (old, mesh, chunk)
        new = self.done.get(key)
        if new is None:
            new = self.done[key] = _retensored(old, mesh, chunk)
        return new


def _retensored(old: bytes, mesh: bytes | None, chunk: int | None) -> bytes:
    """A serialized TensorDistAttr with a new mesh and/or chunk id."""
    t = view.EditTensorDist.FromString(old)
    if mesh is not None:
        t.process_mesh = mesh
    if chunk is not None:
        t.chunk_id = chunk
    return t.SerializeToString()


def _is_callstack(attr: bytes) -> bool:
    """Whether a serialized OpDesc.Attr is `op_callstack`, however it is encoded (fields
    out of order, a long length, the name given twice: the last one counts, as protobuf
    reads it)."""
    if _CALLSTACK_NAME not in attr:
        return False
    try:
        return pb.OpDesc.Attr.FromString(attr).name == "op_callstack"
    except DecodeError:
        return False


def callstack_ops(block: Block) -> int:
    """Ops of `block` that carry an `op_callstack` attr (for reports; not on the hot path)."""
    n = 0
    for i, blob in enumerate(block.ops):
        if _CALLSTACK_NAME in blob:  # cheap filter; the parse makes it exact
            try:
                attrs = view.EditOp.FromString(blob).attrs
            except DecodeError:
                raise _corrupt_op(block.idx, i) from None
            n += any(map(_is_callstack, attrs))
    return n


def strip_callstack(block: Block) -> int:
    """Drop `op_callstack` attrs from every op of `block`, however they are encoded;
    returns the bytes saved."""
    ops = block.ops
    saved = 0
    for i, blob in enumerate(ops):
        if _CALLSTACK_NAME not in blob:
            continue
        try:
            op = view.EditOp.FromString(blob)
        except DecodeError:
            raise _corrupt_op(block.idx, i) from None
        kept = [a for a in op.attrs if not _is_callstack(a)]
        if len(kept) == len(op.attrs):
            continue
        del op.attrs[:]
        op.attrs.extend(kept)
        new = op.SerializeToString()
        saved += len(blob) - len(new)
        ops[i] = new
    return saved


def write_plan(program: view.LazyProgram, plan: Plan) -> None:
    """Record the plan in `ProgramDesc.pipeline_plan` (field 1002)."""
    msg = pb.PipelinePlan(
        pp=plan.pp,
        vpp=plan.vpp,
        seg_method=plan.seg_method,
        placement=plan.placement,
        mode=plan.mode,
        vppctl_version=__version__,
        split=plan.split,
        cost=plan.cost_kind,
    )
    for s in plan.segments:
        msg.segments.add(
            virtual_stage=s.virtual_stage,
            stage=s.stage,
            chunk=s.chunk,
            mesh=pb.ProcessMesh(
                shape=s.mesh.shape, process_ids=s.mesh.process_ids, dim_names=s.mesh.dim_names
            ),
            layers=s.layers,
            op_begin=s.op_begin,
            op_end=s.op_end,
            cost=s.cost,
        )
    program.pipeline_plan = msg.SerializeToString()


# vppctl 0.1.0 recorded the --layers-per-chunk split as "manual".
_SPLIT_NAMES = {"manual": "explicit"}


@dataclass(frozen=True)
class RecordedSegment:
    """One segment of a recorded plan, as plain values."""

    virtual_stage: int
    stage: int
    chunk: int
    mesh: Mesh | None  # None: not recorded (or not a valid mesh)
    layers: tuple[str, ...]
    op_begin: int  # -1: not recorded
    op_end: int
    cost: float


@dataclass(frozen=True)
class RecordedPlan:
    """The plan a program carries, as plain values."""

    pp: int
    vpp: int
    seg_method: str
    placement: str
    mode: str
    split: str
    segments: tuple[tuple[int, int, tuple[str, ...]], ...]  # (stage, chunk, layers)
    vppctl_version: str
    cost_kind: str = ""
    details: tuple[RecordedSegment, ...] = ()  # the segments with all they record

    @classmethod
    def of(cls, plan: Plan) -> RecordedPlan:
        """What `write_plan` records for `plan`, read back (convert checks its own plan)."""
        details = tuple(
            RecordedSegment(
                s.virtual_stage, s.stage, s.chunk, s.mesh, s.layers, s.op_begin, s.op_end, s.cost
            )
            for s in plan.segments
        )
        return cls(
            pp=plan.pp,
            vpp=plan.vpp,
            seg_method=plan.seg_method,
            placement=plan.placement,
            mode=plan.mode,
            split=plan.split,
            segments=tuple((s.stage, s.chunk, s.layers) for s in plan.segments),
            vppctl_version=__version__,
            cost_kind=plan.cost_kind,
            details=details,
        )


def read_plan(program: view.LazyProgram) -> RecordedPlan | None:
    if not program.HasField("pipeline_plan"):
        return None
    try:
        m = pb.PipelinePlan.FromString(program.pipeline_plan)
    except DecodeError:
        raise ProgramFileError("not a program: its pipeline_plan (field 1002) is corrupt") from None
    return RecordedPlan(
        pp=m.pp,
        vpp=m.vpp,
        seg_method=_text(m.seg_method),
        placement=_text(m.placement),
        mode=_text(m.mode),
        split=_SPLIT_NAMES.get(_text(m.split), _text(m.split)),
        vppctl_version=_text(m.vppctl_version),
        segments=tuple((s.stage, s.chunk, tuple(map(_text, s.layers))) for s in m.segments),
        cost_kind=_text(m.cost),
        details=tuple(_recorded_segment(s) for s in m.segments),
    )


def _recorded_segment(s: pb.PlanSegment) -> RecordedSegment:
    mesh = None
    if s.HasField("mesh"):
        m = s.mesh
        mesh = Mesh(tuple(m.shape), tuple(m.process_ids), tuple(map(_text, m.dim_names)))
        if mesh.problem():  # a plan's mesh is only compared, never used: an odd one is no mesh
            mesh = None
    return RecordedSegment(
        virtual_stage=s.virtual_stage,
        stage=s.stage,
        chunk=s.chunk,
        mesh=mesh,
        layers=tuple(map(_text, s.layers)),
        op_begin=s.op_begin if s.HasField("op_begin") else -1,
        op_end=s.op_end if s.HasField("op_end") else -1,
        cost=s.cost,
    )
