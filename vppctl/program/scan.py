"""Scan: every op and variable of a block read into columns of plain values, in one pass.

This is the hot path of every command: it runs once per op of the program. Ops
and variables are read in pieces, each joined with a separator and parsed as one
message through the merged views of view.proto; a piece that cannot be read so
exactly is read one by one. The columns (`OpColumns`, `VarColumns`) are what the
index's side tables are built from.

Every field is read as protobuf reads it, whatever the encoding (fields in any
order, a field given twice, a sub-message split over several occurrences:
view.proto); the few byte-level shortcuts below match only bytes whose reading
they know exactly, and parse everything else.

How the fields are read (Paddle's conventions):

- an op's role is its int attr `op_role` (absent = 0; the last one counts);
- a sub-block is the BLOCK attr `sub_block` (or BLOCKS);
- an op's layer path is `OpDesc.struct_name`, its mesh and chunk id are in
  `OpDesc.dist_attr` (`process_mesh`, `chunk_id`), a variable's in
  `VarDesc.dist_attr`;
- the empty variable name and Paddle's `@EMPTY@` name no variable.
"""

from __future__ import annotations

import os
import re
import struct
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import accumulate, compress, count, repeat
from operator import add, and_, contains, itemgetter
from typing import TypeVar

from google.protobuf.message import DecodeError

from vppctl import progress
from vppctl.program._proto import program_pb2 as pb
from vppctl.program._proto import view_pb2 as view
from vppctl.program.items import Items
from vppctl.program.load import Block, corrupt_op, corrupt_var
from vppctl.program.roles import BACKWARD, FORWARD_ROLES, OPTIMIZE
from vppctl.program.wire import BIG_OP, field_spans, varint, varint_at

NO_VAR = -1  # an argument naming no declared variable
EMPTY_VAR = -2  # "" or Paddle's @EMPTY@: no variable, by design
# A reader queue (a name containing NO_CHUNK_NAME) that no block declares: it lives in
# Paddle's Scope (`DataLoader.from_generator` puts it there), and Paddle's chunk step skips
# it on purpose. Accepted; every other undeclared name is NO_VAR.
SCOPE_VAR = -3
EMPTY_NAMES = (b"", b"@EMPTY@")

# The attrs the scan reads: op_role and sub_block. An attr with either name holds the name's
# bytes right after its length, which ends in 7 or 9 (or 0 when written in more bytes than
# needed), wherever the name field sits: this finds every such attr (and a few others,
# which parsing the attr then tells apart).
_ATTRS_READ = re.compile(rb"[\x00\x07]op_role|[\x00\t]sub_block").search
_READ_NAMES = ((b"op_role", b"\x00\x07"), (b"sub_block", b"\x00\t"))  # the same, for find
_ROLE_PREFIX = b"\n\x07op_role\x10\x00\x18"  # name "op_role", type INT, then field i
_CANONICAL_ROLES = {_ROLE_PREFIX + bytes((r,)): r for r in range(0x80)}  # the usual encoding
NO_CHUNK_NAME = b"lod_tensor_blocking_queue"  # reader-queue variables never get a chunk id
_MINUS_ONES = repeat(NO_VAR)  # the default of `lookup` in map(lookup, names, _MINUS_ONES)
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


def _canonical_role(blob: bytes) -> int | None:
    """The value of an attr whose bytes are exactly name "op_role", type INT and field `i`,
    in that order, each once (how Paddle writes it); None for any other bytes."""
    if not blob.startswith(_ROLE_PREFIX):
        return None
    try:
        got = varint_at(blob, len(_ROLE_PREFIX))
    except ValueError:  # longer than 10 bytes: protobuf's parse says what it is
        return None
    if got is None or got[1] != len(blob):
        return None
    value = got[0] & 0xFFFFFFFF  # field `i` is an int32: its low 32 bits, as protobuf reads it
    return value - (1 << 32) if value >= 1 << 31 else value


def _role_value(attr: pb.OpDesc.Attr) -> int:
    return attr.l if attr.type == pb.LONG else attr.i


def _block_value(attr: pb.OpDesc.Attr) -> list[int]:
    if attr.type == pb.BLOCKS:
        return list(attr.blocks_idx)
    return [attr.block_idx]


def scan_vars(block: Block, block_idx: int) -> VarColumns:
    """Read every variable of `block` into columns: in pieces parsed as one, as `scan_ops`
    reads ops (a piece that cannot be read so exactly is read variable by variable).

    A program has few distinct dist attrs: each is decoded once, as first met, and the
    pieces' placements are taken from those (a dist attr that does not decode names its
    first variable once every variable is read, as a variable that does not parse is named
    at once)."""
    cols = VarColumns()
    placement: dict[bytes, tuple[bytes, int]] = {}  # raw dist attr -> (raw mesh, chunk id)
    bad = -1  # the first variable whose dist attr does not decode
    vars_ = block.vars
    pos = 0
    try:
        for start in range(0, len(vars_), PIECE_ITEMS):
            pos = start
            vars_.release(start)  # a mapped file's pages behind the scan given back
            piece = _piece(vars_, start, start + PIECE_ITEMS, _framed_vars)
            merged = _merged_vars(piece) if joinable(piece) else None
            if merged is not None:
                names, flags, dists = merged
            else:
                names, flags, dists = [], [], []
                for pos, blob in enumerate(piece, start):  # noqa: B007 (names a corrupt var)
                    v = view.ScanVar.FromString(blob)
                    names.append(v.name)
                    flags.append(v.is_parameter)
                    dists.append(b"".join(v.dist_attr))
            cols.name.extend(names)
            cols.is_parameter.extend(flags)
            if bad < 0:
                bad = _placed(dists, placement, start)
            if bad < 0:
                placements = list(map(placement.__getitem__, dists))
                cols.mesh.extend(map(itemgetter(0), placements))
                cols.chunk.frombytes(_packed(list(map(itemgetter(1), placements))))
    except DecodeError:
        raise corrupt_var(block_idx, pos) from None
    if bad >= 0:
        raise corrupt_var(block_idx, bad)
    return cols


def _placed(dists: list[bytes], placement: dict[bytes, tuple[bytes, int]], start: int) -> int:
    """Every new dist attr of a piece (its variables' from `start` on) decoded into
    `placement`; -1, or the first variable whose dist attr does not decode."""
    for raw in dict.fromkeys(dists):
        if raw not in placement:
            try:
                placement[raw] = _tensor_placement(raw)
            except DecodeError:
                return start + dists.index(raw)
    return -1


def _merged_vars(piece: list[bytes]) -> tuple[list[bytes], list[bool], list[bytes]] | None:
    """(names, is_parameter flags, raw dist attrs) of a piece of variables parsed as one,
    or None when that cannot be read as each variable alone would be (see `_OpScan.merged`)."""
    n = len(piece)
    data = _VAR_SEPARATOR.join(piece) + _VAR_SEPARATOR
    try:
        m = view.ScanVarMerge.FromString(data)
        if _may_hold_packed_flag(data, n) and view.ScanVarProbe.FromString(data).is_parameter:
            return None
    except DecodeError:
        return None
    names = _last_each(m.name[:], n, _SENTINEL_NAME, b"")
    flags = _last_each(m.is_parameter[:], n, _SENTINEL_INT, 0)
    dists = _joined_each(m.dist_attr[:], n, _SENTINEL_NAME)
    if names is None or flags is None or dists is None:
        return None
    return names, list(map(bool, flags)), dists


# A length-delimited is_parameter (field 5) begins with the tag byte 0x2a, or 0xaa when its tag
# is written in more bytes than needed.
_PACKED_FLAG_TAGS = (b"*", b"\xaa")


def _may_hold_packed_flag(data: bytes, n: int) -> bool:
    """Whether `n` variables joined with separators (`data`) may hold a length-delimited
    is_parameter (ScanVarProbe finds them): not when their bytes hold neither tag byte, those
    of the separators aside (a count of bytes: no parse)."""
    return any(data.count(t) != n * _VAR_SEPARATOR.count(t) for t in _PACKED_FLAG_TAGS)


def _tensor_placement(raw: bytes) -> tuple[bytes, int]:
    """(raw mesh, chunk id or -1) of a serialized TensorDistAttr."""
    d = view.ScanTensorDist.FromString(raw)
    return b"".join(d.process_mesh), d.chunk_id


def scan_ops(block: Block, block_idx: int, lookup: Callable[[bytes, int], int]) -> OpColumns:
    """Read every op of `block` into columns; `lookup(name, default)` gives a var id.

    This runs once per op of the program, so it is written for speed. The ops are
    read in pieces of PIECE_ITEMS: each piece is joined with a separator op and
    parsed as one message through the ScanMerge view (see view.proto), so the
    values arrive as a few lists per piece instead of a dozen attribute reads per
    op. A piece that this cannot read exactly (see `_OpScan.merged`) is read op by
    op through the ScanOp view, which names a corrupt op. Names are resolved to
    var ids a piece at a time, and the columns grow as integer arrays: no Python
    object is kept per op or argument. (Run it with the garbage collector paused:
    see `vppctl.gcpause`.)
    """
    ops = block.ops
    scan = _OpScan(lookup)
    i = 0
    try:
        for i in range(0, len(ops), PIECE_ITEMS):
            ops.release(i)  # a mapped file's pages behind the scan given back
            piece = _piece(ops, i, i + PIECE_ITEMS, _framed_ops)
            if not (joinable(piece) and scan.merged(piece)):
                for i, blob in enumerate(piece, i):  # noqa: B020 (i names a corrupt op)
                    scan.one(blob, i)
            progress.step(len(piece))
    except DecodeError:
        raise corrupt_op(block_idx, i) from None
    return scan.columns(ops, block_idx)


# A separator's sentinels: drawn at random per process, so that no input can hold
# them (an op holding a whole separator could otherwise hide a corrupt neighbour).
_SENTINEL_NAME = b"\xff" + os.urandom(15)
_SENTINEL_INT = int.from_bytes(os.urandom(8), "little", signed=True)
PIECE_ITEMS = 256  # ops parsed together (small pieces stay in the cache: faster)
# A piece larger than this is read one by one: joining it would hold a second copy
# of huge ops (a callstack of megabytes) at once, where one by one holds one op's.
_PIECE_BYTES = 1 << 22


def _piece(items: Items, lo: int, hi: int, framed: Callable[[bytes], list[bytes]]) -> list[bytes]:
    """items[lo:hi], split by protobuf's parse of their framing (`framed`) where they are
    unedited ranges of the bytes read and not too large to join (the run is copied once,
    then parsed): one copy and a C loop, not a slice per item."""
    hi = min(hi, len(items))
    if items.spans and not items.has_edits and hi > lo:
        if _run_bytes(items, lo, hi) > _PIECE_BYTES:
            return items[lo:hi]
        got = framed(items.framed_run(lo, hi))
        if len(got) == hi - lo:  # else framed under another tag: sliced
            return got
    return items[lo:hi]


def _run_bytes(items: Items, lo: int, hi: int) -> int:
    """About the bytes of items lo..hi-1 as read (their frames included), without a step per
    item where they are ranges of the bytes read."""
    if hi <= lo:
        return 0
    if items.spans:
        _, starts, ends = items.ranges()
        return ends[hi - 1] - starts[lo]
    return sum(map(len, items[lo:hi]))  # a list's slice: no bytes copied


def _framed_ops(run: bytes) -> list[bytes]:
    return view.FramedOps.FromString(run).ops[:]  # BlockDesc.ops, field 4


def _framed_vars(run: bytes) -> list[bytes]:
    return view.LazyBlock.FromString(run).vars[:]  # BlockDesc.vars, field 3


def joinable(piece: list[bytes]) -> bool:
    """Whether a piece is small enough to be joined and parsed as one message."""
    return joinable_size(sum(map(len, piece)))


def joinable_size(n: int) -> bool:
    """Whether a piece of n bytes (its items' own, frames aside) is small enough to be joined
    and parsed as one message."""
    return n <= _PIECE_BYTES


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
# An op_role attr in the usual encoding (roles below 0x200: Paddle's, Loss included) -> its
# role + 1; the separator's attr -> _ROLE_END (see `_canonical_roles`).
_ROLE_END = -1
_ROLE_OF = {_ROLE_PREFIX + varint(r): r + 1 for r in range(0x200)}
_ROLE_OF[_SENTINEL_NAME] = _ROLE_END
_VAR_SEPARATOR = view.ScanVarMerge(
    name=[_SENTINEL_NAME], is_parameter=[_SENTINEL_INT], dist_attr=[_SENTINEL_NAME]
).SerializeToString()


class _OpScan:
    """The columns `scan_ops` builds for one block, filled a piece (merged) or an op
    (ScanOp) at a time."""

    def __init__(self, lookup: Callable[[bytes, int], int]) -> None:
        self.lookup = lookup  # argument name -> var id, for the block's scope
        self.type: list[bytes] = []
        self.role: list[int] = []
        self.struct: list[bytes] = []  # every op's, until `columns` keeps forward ops'
        self.mesh: list[bytes] = []
        self.chunk = array("q")
        self.id = array("q")
        self.forward_op_id = array("q")
        self.in_var = array("q")
        self.out_var = array("q")
        self.in_off = array("q", [0])
        self.out_off = array("q", [0])
        self.sub_blocks: dict[int, list[int]] = {}
        self.interned: dict[bytes, bytes] = {}

    def one(self, blob: bytes, i: int) -> None:
        """Op `i`, parsed alone."""
        if len(blob) > BIG_OP and (cut := _without_attrs(blob)) is not None:
            op = view.ScanOp.FromString(cut[0])
            self.role.append(self._role(cut[1], i))
        else:
            op = view.ScanOp.FromString(blob)
            self.role.append(self._role(op.attrs, i))
        intern = self.interned.setdefault
        t, s, d = op.type, op.struct_name, op.dist_attr
        m = b"".join(d.process_mesh)
        self.type.append(intern(t, t))
        self.struct.append(intern(s, s))
        self.mesh.append(intern(m, m))
        self.chunk.append(d.chunk_id)  # -1 when absent, as are the ids (the view's defaults)
        self.id.append(op.id)
        self.forward_op_id.append(op.forward_op_id)
        lookup = self.lookup
        self.in_var.extend(map(lookup, op.inputs.arguments, _MINUS_ONES))
        self.in_off.append(len(self.in_var))
        self.out_var.extend(map(lookup, op.outputs.arguments, _MINUS_ONES))
        self.out_off.append(len(self.out_var))

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
        types = _last_each(m.type[:], n, name, b"")
        structs = _last_each(m.struct_name[:], n, name, b"")
        meshes = _joined_each(d.process_mesh[:], n, name)
        chunks = _last_each(d.chunk_id[:], n, num, -1)
        ids = _last_each(m.id[:], n, num, -1)
        forward_ids = _last_each(m.forward_op_id[:], n, num, -1)
        # (a container's [:] is a list built in C: faster than list() of it)
        ins, outs, attrs = m.inputs.arguments[:], m.outputs.arguments[:], m.attrs[:]
        in_ends, out_ends = _ends(ins, n, name), _ends(outs, n, name)
        if (
            types is None
            or structs is None
            or meshes is None
            or chunks is None
            or ids is None
            or forward_ids is None
            or in_ends is None
            or out_ends is None
        ):
            return False
        roles = _canonical_roles(attrs, n)
        if roles is None:
            attr_ends = _ends(attrs, n, name)
            roles = None if attr_ends is None else self._roles(attrs, attr_ends)
            if roles is None:
                return False
        self.role.extend(roles)
        intern = self.interned.setdefault
        self.type.extend(map(intern, types, types))
        self.struct.extend(map(intern, structs, structs))
        self.mesh.extend(map(intern, meshes, meshes))
        self.chunk.frombytes(_packed(chunks))
        self.id.frombytes(_packed(ids))
        self.forward_op_id.frombytes(_packed(forward_ids))
        lookup = self.lookup
        for var, off, values, ends in (
            (self.in_var, self.in_off, ins, in_ends),
            (self.out_var, self.out_off, outs, out_ends),
        ):
            base = len(var)  # op k's names end where its sentinel is, less the k before it
            off.frombytes(_packed(list(map(add, ends, range(base, base - n, -1)))))
            var.frombytes(_packed(list(map(lookup, filter(name.__ne__, values), _MINUS_ONES))))
        return True

    def _roles(self, attrs: list[bytes], ends: list[int]) -> list[int] | None:
        """The roles of a merged piece's ops from their attrs (op k's before ends[k]),
        noting sub-blocks; None when an attr is corrupt (read op by op: that names its op).

        The attrs that may be read (`_read_attrs`) are found in the piece's attrs joined,
        by bytes.find, so that the thousands of others cost no Python step each."""
        first = len(self.role)
        out = [0] * len(ends)
        canonical = _CANONICAL_ROLES.get
        try:
            for j in _read_attrs(attrs):
                k = bisect_left(ends, j)  # attr j is op k's
                blob = attrs[j]
                role = canonical(blob)  # the usual encoding: read at once
                out[k] = role if role is not None else self._role((blob,), first + k, out[k])
        except DecodeError:
            return None
        return out

    def _role(self, attrs: Iterable[bytes], i: int, role: int = 0) -> int:
        """Op `i`'s role after reading `attrs` (the last `op_role`; `role` without one), noting
        its sub-blocks (the last `sub_block`). An attr in the usual encoding is read from its
        bytes; any other is parsed, and its name, as protobuf reads it, says what it is."""
        for blob in filter(_may_be_read, attrs):
            value = _canonical_role(blob)
            if value is not None:
                role = value
                continue
            attr = pb.OpDesc.Attr.FromString(blob)
            if attr.name == "op_role":
                role = _role_value(attr)
            elif attr.name == "sub_block":
                self.sub_blocks[i] = _block_value(attr)
        return role

    def columns(self, ops: Items, block_idx: int) -> OpColumns:
        roles = self.role
        # Only forward ops' layer paths and ids are used, and only backward ops' links.
        forward = list(map(FORWARD_ROLES.__contains__, roles))
        links = zip(self.forward_op_id, roles)
        cols = OpColumns(
            type=self.type,
            role=array("q", roles),
            struct=[s if f else b"" for s, f in zip(self.struct, forward)],
            mesh=self.mesh,
            chunk=self.chunk,
            op_id=array("q", [v if f else -1 for v, f in zip(self.id, forward)]),
            forward_op_id=array("q", [v if r & BACKWARD else -1 for v, r in links]),
            sub_blocks=self.sub_blocks,
            in_off=self.in_off,
            in_var=self.in_var,
            out_off=self.out_off,
            out_var=self.out_var,
        )
        cols.param = _params(ops, roles, self.lookup, block_idx)
        return cols


def _params(
    ops: Items, roles: list[int], lookup: Callable[[bytes, int], int], block_idx: int
) -> dict[int, int]:
    """The var id of every optimize-role op's `Param` input, NO_VAR where it has none
    (`_param_input`), in op order. The ops are read in runs; only those holding the bytes
    `Param` are parsed (most optimize-role ops hold none: clipping)."""
    optimize = list(compress(count(), map(and_, roles, repeat(OPTIMIZE))))
    params = dict.fromkeys(optimize, NO_VAR)  # also optimize-bit ops of other phases
    i = 0
    try:
        for lo, hi in _runs(optimize, PIECE_ITEMS):
            ops.release(lo)  # a mapped file's pages behind given back
            if _run_bytes(ops, lo, hi) > _PIECE_BYTES:  # huge ops: one at a time
                for i in range(lo, hi):
                    params[i] = _param_input(ops[i], lookup)
                continue
            piece = _piece(ops, lo, hi, _framed_ops)
            for i in compress(range(lo, hi), map(contains, piece, repeat(_PARAM))):
                params[i] = _param_input(piece[i - lo], lookup)
    except DecodeError:
        raise corrupt_op(block_idx, i) from None
    return params


def _runs(positions: list[int], most: int) -> list[tuple[int, int]]:
    """The runs [lo, hi) of consecutive numbers in `positions` (ascending), each at most
    `most` long."""
    runs: list[tuple[int, int]] = []
    lo = hi = -1
    for p in positions:
        if p != hi or hi - lo == most:
            if hi > lo:
                runs.append((lo, hi))
            lo = p
        hi = p + 1
    if hi > lo:
        runs.append((lo, hi))
    return runs


_ATTRS = 4  # OpDesc.attrs


def _without_attrs(blob: bytes) -> tuple[bytes, list[bytes]] | None:
    """A large op's bytes without its attrs, and the attrs `_ATTRS_READ` may find: parsing
    it whole would copy its attrs twice (upb's parse, then Python's bytes), beyond the
    memory bound for an op with a huge one. None when the bytes do not split into fields."""
    spans = field_spans(blob)
    if spans is None:
        return None
    whole = memoryview(blob)
    rest = b"".join(whole[s.start : s.end] for s in spans if s.number != _ATTRS)
    read = [
        blob[s.value : s.end]
        for s in spans
        if s.number == _ATTRS
        and (
            blob.find(b"op_role", s.value, s.end) >= 0
            or blob.find(b"sub_block", s.value, s.end) >= 0
        )
    ]
    return rest, read


def _canonical_roles(attrs: list[bytes], n: int) -> list[int] | None:
    """The roles of a merged piece's `n` ops from their attrs (each op's followed by a
    sentinel), when every attr `_ATTRS_READ` may find is an op_role in the usual encoding
    (`_ROLE_OF`); None otherwise (`_OpScan._roles` reads them then).

    Each attr is looked up in `_ROLE_OF` (a usual role attr gives its role + 1, a sentinel
    0 and any other attr nothing), in C. The piece's attrs joined hold each usual role
    attr's name once, right after its length: when they hold no more names that
    `_ATTRS_READ` finds than the usual role attrs found, no other attr is read."""
    marks = list(filter(None, map(_ROLE_OF.get, attrs)))  # roles + 1, and -1 per sentinel
    joined = b"".join(attrs)
    found = len(marks) - n  # role attrs in the usual encoding, each holding b"op_role" once
    if joined.count(b"op_role") != found and (  # else every op_role is theirs
        joined.count(b"\x07op_role") + joined.count(b"\x00op_role") != found
    ):
        return None
    if b"sub_block" in joined and (b"\x00sub_block" in joined or b"\tsub_block" in joined):
        return None
    last = _last_each(marks, n, _ROLE_END, 1)  # an op without a role attr has role 0
    return None if last is None else list(map(add, last, repeat(-1)))


def _may_be_read(attr: bytes) -> bool:
    """Whether `_ATTRS_READ` finds `attr` (bytes.find first: a huge attr is not walked by
    the regex engine byte by byte)."""
    return (b"op_role" in attr or b"sub_block" in attr) and _ATTRS_READ(attr) is not None


def _read_attrs(attrs: list[bytes]) -> list[int]:
    """The positions in `attrs` of every attr that `_ATTRS_READ` finds (and of a few others
    holding its names, which it then tells apart), in order."""
    joined = b"".join(attrs)
    ends = list(accumulate(map(len, attrs)))  # attr j ends where ends[j] says
    found: dict[int, None] = {}
    for name, lengths in _READ_NAMES:
        at = joined.find(name)
        while at >= 0:
            if at and joined[at - 1] in lengths:  # a name field's length ends right before it
                found[bisect_right(ends, at)] = None
            at = joined.find(name, at + 1)
    return sorted(found)


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


def _joined_each(values: list[bytes], n: int, sentinel: bytes) -> list[bytes] | None:
    """Per op, its occurrences of a sub-message field before its sentinel, joined (b"" without
    one): protobuf merges the occurrences, and their concatenation parses as that merge.
    From a merged list holding `n` sentinels (None otherwise)."""
    if len(values) == 2 * n and values[1::2].count(sentinel) == n:  # one value per op
        firsts = values[0::2]
        return firsts if sentinel not in firsts else None
    ends = _ends(values, n, sentinel)
    if ends is None:
        return None
    starts = [0, *map(add, ends[:-1], repeat(1))]  # op k's run: after op k - 1's sentinel
    return list(map(b"".join, map(values.__getitem__, map(slice, starts, ends))))


def _last_each(values: list[_T], n: int, sentinel: _T, default: _T) -> list[_T] | None:
    """Per op, its last value before its sentinel (`default` without one), from a merged
    list holding `n` sentinels (None otherwise)."""
    if len(values) == 2 * n and values[1::2].count(sentinel) == n:  # one value per op
        firsts = values[0::2]
        return firsts if sentinel not in firsts else None
    ends = _ends(values, n, sentinel)
    if ends is None:
        return None
    # The value before each sentinel: the previous sentinel where the op has none.
    before = list(map(values.__getitem__, map(add, ends, repeat(-1))))
    out = list(map({sentinel: default}.get, before, before))
    if ends and ends[0] == 0:  # op 0 has none (values[-1] is not its)
        out[0] = default
    return out


def _packed(values: list[int]) -> bytes:
    """`values` as an array("q")'s bytes: `array.frombytes` of them takes a list in one C
    call, where `array.extend` converts item by item (about 20 times slower)."""
    return struct.pack(f"{len(values)}q", *values)


def _param_input(blob: bytes, lookup: Callable[[bytes, int], int]) -> int:
    """The var id of an optimizer op's `Param` input, or NO_VAR."""
    if _PARAM not in blob:  # no slot can be named Param (most optimize-role ops: clipping)
        return NO_VAR
    for v in view.SlotOp.FromString(blob).inputs:
        if v.parameter == b"Param" and v.arguments:
            return lookup(v.arguments[0], NO_VAR)
    return NO_VAR
