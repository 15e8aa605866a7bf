"""The encoder: a sample's ops and variables as serialized bytes.

Each op is encoded from cached parts (its type and attributes, meshes, dims
mappings are serialized once with the generated messages) joined with its
names and ids, in protobuf's canonical field order, so parsing and
re-serializing a sample gives the same bytes. What one unit of the model
encodes is kept as fragments (`UnitBytes`) so that `stamp` can see its names
and ids. The serialized ops and variables are collected in large pieces
(`Spool`) and copied into the result piece by piece, so the result is never
held twice (the peak is about 1.7x the output at 10,000 layers, most of the
rest being the names).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import cast

from vppctl.program import block_field_start, block_head, varint
from vppctl.program._proto import program_pb2 as pb
from vppctl.program._proto import view_pb2 as view
from vppctl.sample.model import (
    CALLSTACK_FRAMES,
    COMMON_ATTRS,
    FP32,
    OP_ATTRS,
    Model,
    SampleOptions,
)

SMALL_VARINTS = [varint(n) for n in range(1 << 14)]


def field_bytes(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: tag, length, payload."""
    n = len(payload)
    return tag + (SMALL_VARINTS[n] if n < 16384 else varint(n)) + payload


# Wire tags (field number << 3 | wire type) of the fields the writer encodes itself.
T1, T2 = b"\x0a", b"\x12"
T_STRUCT_NAME, T_DIST_ATTR = b"\xca\x3e", b"\xd2\x3e"  # OpDesc 1001, 1002 (length-delimited)
T_ID, T_FORWARD_OP_ID = b"\xd8\x3e", b"\xe0\x3e"  # OpDesc 1003, 1004 (varint)
T_ATTRS, T_STRINGS = b"\x22", b"\x42"  # OpDesc.attrs = 4, Attr.strings = 8
T_BLOCK_VARS, T_BLOCK_OPS = b"\x1a", b"\x22"  # BlockDesc.vars = 3, BlockDesc.ops = 4

# An encoded op or variable is kept as fragments until it is written: bytes as
# they are, a str (a name) as UTF-8, an int (an op id) as a varint. The names and
# ids stay visible that way, which is what stamping needs.
Fragment = bytes | str | int


class Rope:
    """Encoded fields as fragments, and the size they take once rendered."""

    __slots__ = ("parts", "size")

    def __init__(self) -> None:
        self.parts: list[Fragment] = []
        self.size = 0

    def raw(self, data: bytes) -> None:
        self.parts.append(data)
        self.size += len(data)

    def name(self, tag: bytes, name: str) -> None:
        """A string field holding a name."""
        n = len(name.encode())
        head = tag + varint(n)
        self.parts += (head, name)
        self.size += len(head) + n

    def number(self, tag: bytes, value: int) -> None:
        """A varint field holding an op id."""
        self.parts += (tag, value)
        self.size += len(tag) + len(varint(value))

    def field(self, tag: bytes, inner: Rope) -> None:
        """A length-delimited field holding `inner`."""
        head = tag + varint(inner.size)
        self.parts.append(head)
        self.parts += inner.parts
        self.size += len(head) + inner.size

    def render(self) -> bytes:
        return b"".join(
            [
                f if isinstance(f, bytes) else f.encode() if isinstance(f, str) else varint(f)
                for f in self.parts
            ]
        )


@dataclass
class UnitBytes:
    """What the writer wrote for one unit of a section, op by op."""

    ops: Rope = field(default_factory=Rope)  # block `ops` fields
    vars: Rope = field(default_factory=Rope)  # block `vars` fields of the new variables
    names: list[str] = field(default_factory=list)  # the new variables' names
    # Dims the unit registered (gradients): later units encoded op by op read them.
    registered: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)
    n_ops: int = 0


class Spool:
    """Bytes appended in order and kept in pieces of at least 32 MB.

    Pieces that large are mmapped by malloc, so releasing each one as soon as it
    is copied into the result returns its memory: the result never coexists with
    a full second copy of itself.
    """

    PIECE = 32 << 20

    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        self.pending: list[bytes] = []
        self.pending_size = 0
        self.size = 0

    def add(self, data: bytes) -> None:
        self.pending.append(data)
        self.pending_size += len(data)
        self.size += len(data)
        if self.pending_size >= self.PIECE:
            self._cut()

    def _cut(self) -> None:
        if self.pending:
            self.pieces.append(b"".join(self.pending))
            self.pending, self.pending_size = [], 0

    def drain_into(self, out: io.BytesIO) -> None:
        self._cut()
        self.pieces.reverse()
        while self.pieces:
            out.write(self.pieces.pop())


class Writer:
    """Turns the model into serialized ops and vars.

    The parts of an op that repeat (type, attributes, meshes, dims mappings) are
    built once with the generated messages and kept as bytes; each op is then
    encoded by joining those parts with its names and ids, in protobuf's
    canonical field order. A variable is written when an op first names it (data
    variables and parameters first), which is the order Paddle lists them in.
    Output goes to the current `UnitBytes`, which `record` and `flush` render.
    """

    def __init__(self, opts: SampleOptions, model: Model) -> None:
        self.opts, self.model = opts, model
        k = opts.ranks_per_stage
        self.meshes = [
            pb.ProcessMesh(shape=[k], process_ids=range(s * k, s * k + k), dim_names=["dp"])
            for s in range(opts.pp)
        ]
        # With one stage its mesh is every rank already: a second mesh of the same
        # ranks (shape [1, k]) would read as a second stage (rule 1 keeps meshes
        # that all cover every rank).
        self.global_mesh = (
            self.meshes[0]
            if opts.pp == 1
            else pb.ProcessMesh(
                shape=[opts.pp, k], process_ids=range(opts.pp * k), dim_names=["pp", "dp"]
            )
        )
        self.uses_global = False
        self.var_stage = model.var_stage  # grows with backward and optimizer variables; -1 = global
        self.params, self.data_vars = set(model.params), set(model.data_vars)
        self.seen: set[str] = set()  # variables written so far
        self.heads: dict[tuple[str, str, int], bytes] = {}
        self.tails: dict[int, bytes] = {}
        self.tdas: dict[tuple[int, int], bytes] = {}
        self.var_rests: dict[tuple[object, ...], bytes] = {}
        self.entries: dict[tuple[str, int], Rope] = {}
        self.next_id = 1
        self.callstack = list(CALLSTACK_FRAMES) if opts.callstack else None
        self.unit = UnitBytes()
        self.ops_out, self.vars_out = Spool(), Spool()

    # -- cached parts --------------------------------------------------------
    def mesh(self, stage: int) -> pb.ProcessMesh:
        return self.global_mesh if stage < 0 else self.meshes[stage]

    def head(self, type_: str, attrs_key: str, role: int) -> bytes:
        """The op's type and attribute fields, serialized (they repeat across layers)."""
        key = (type_, attrs_key, role)
        head = self.heads.get(key)
        if head is None:
            op = pb.OpDesc(type=type_)
            base = OP_ATTRS[attrs_key or type_.removesuffix("_grad")]
            for name, atype, value in (*base, *COMMON_ATTRS, ("op_role", pb.INT, role)):
                set_attr(op.attrs.add(name=name, type=atype), atype, value)
            if self.callstack:
                op.attrs.add(name="op_callstack", type=pb.STRINGS, strings=self.callstack)
            head = self.heads[key] = op.SerializeToString()
        return head

    def tail(self, stage: int) -> bytes:
        """OperatorDistAttr fields after the per-tensor entries: mesh, impl, chunk 0."""
        tail = self.tails.get(stage)
        if tail is None:
            d = pb.OperatorDistAttr(
                process_mesh=self.mesh(stage), impl_type="default", impl_idx=0, chunk_id=0
            )
            tail = self.tails[stage] = d.SerializeToString()
        return tail

    def tda(self, name: str, stage: int) -> bytes:
        """The TensorDistAttr of `name` on `stage`: the mesh, and -1 for each dim."""
        ndim = len(self.model.dims.get(name, ()))
        tda = self.tdas.get((stage, ndim))
        if tda is None:
            tda = self.tdas[stage, ndim] = pb.TensorDistAttr(
                process_mesh=self.mesh(stage), dims_mapping=[-1] * ndim, chunk_id=0
            ).SerializeToString()
        return tda

    def var_rest(self, name: str) -> bytes:
        """A VarDesc after its name (field 1): type, flags and dist attr, cached by kind."""
        model = self.model
        stage = self.var_stage.get(name, 0)
        dims = model.dims.get(name, ())
        dtype = model.dtype.get(name.split("@")[0], FP32)
        is_param, is_data = name in self.params, name in self.data_vars
        persistable = (
            is_param
            or name == "learning_rate_0"
            or name.endswith(("_moment1_0", "_moment2_0", "_pow_acc_0"))
        )
        key = (stage, dims, dtype, persistable, is_param, is_data)
        rest = self.var_rests.get(key)
        if rest is None:
            v = pb.VarDesc(persistable=persistable or None, is_parameter=is_param or None)
            v.type.type = pb.VarType.DENSE_TENSOR
            v.type.dense_tensor.tensor.data_type = cast("pb.VarType.Type", dtype)
            v.type.dense_tensor.tensor.dims.extend(dims)
            if is_data:
                v.need_check_feed = True
                v.stop_gradient = True
            v.dist_attr.process_mesh.CopyFrom(self.mesh(stage))
            v.dist_attr.dims_mapping.extend([-1] * len(dims))
            v.dist_attr.chunk_id = 0
            rest = self.var_rests[key] = v.SerializePartialToString()
        return rest

    # -- writing -------------------------------------------------------------
    def var(self, name: str) -> None:
        """Write variable `name` unless it is written already."""
        if name in self.seen:
            return
        self.seen.add(name)
        unit = self.unit
        var = Rope()
        var.name(T1, name)
        var.raw(self.var_rest(name))
        unit.vars.field(T_BLOCK_VARS, var)
        unit.names.append(name)

    def emit(
        self,
        type_: str,
        ins: Sequence[tuple[str, Sequence[str]]],
        outs: Sequence[tuple[str, Sequence[str]]],
        role: int,
        stage: int,
        struct: str = "/",
        attrs_key: str = "",
        forward_op_id: int = 0,
        role_var: Sequence[str] = (),
    ) -> int:
        """Append one op (and the variables it names first); returns its id."""
        op, in_entries, out_entries = Rope(), Rope(), Rope()
        used: list[str] = []
        for slot, names in ins:
            op.field(T1, self.slot(slot, names))
            for n in names:
                in_entries.field(T1, self.entry(n, stage))
            used += names
        for slot, names in outs:
            op.field(T2, self.slot(slot, names))
            for n in names:
                out_entries.field(T2, self.entry(n, stage))
                self.var_stage.setdefault(n, stage)
            used += names
        op.raw(self.head(type_, attrs_key, role))
        if role_var:
            attr = Rope()
            attr.raw(field_bytes(T1, b"op_role_var") + b"\x10\x05")  # type: STRINGS
            for n in role_var:
                attr.name(T_STRINGS, n)
            op.field(T_ATTRS, attr)
        op.name(T_STRUCT_NAME, struct)
        dist = Rope()
        for part in (in_entries, out_entries):
            dist.parts += part.parts
            dist.size += part.size
        dist.raw(self.tail(stage))
        op.field(T_DIST_ATTR, dist)
        op_id = self.next_id
        self.next_id += 1
        op.number(T_ID, op_id)
        if forward_op_id:
            op.number(T_FORWARD_OP_ID, forward_op_id)
        self.unit.ops.field(T_BLOCK_OPS, op)
        self.unit.n_ops += 1
        for n in used:
            self.var(n)
        return op_id

    def slot(self, slot: str, names: Sequence[str]) -> Rope:
        """An `OpDesc.Var`: the slot name and its arguments."""
        var = Rope()
        var.raw(slot_bytes(slot))
        for n in names:
            var.name(T2, n)
        return var

    def entry(self, name: str, stage: int) -> Rope:
        """A per-tensor dist attr entry of an op: the name and its TensorDistAttr (cached)."""
        entry = self.entries.get((name, stage))
        if entry is None:
            entry = self.entries[name, stage] = Rope()
            entry.name(T1, name)
            entry.raw(field_bytes(T2, self.tda(name, stage)))
        return entry

    # -- units ---------------------------------------------------------------
    def flush(self) -> UnitBytes:
        """Render the current unit into the output; returns it."""
        unit, self.unit = self.unit, UnitBytes()
        if unit.ops.parts:
            self.ops_out.add(unit.ops.render())
        if unit.vars.parts:
            self.vars_out.add(unit.vars.render())
        return unit

    def record(self, write: Callable[[], object]) -> UnitBytes:
        """Run `write` in a unit of its own; returns that unit (already written out)."""
        self.flush()
        dims = self.model.dims
        before = len(dims)
        write()
        unit = self.flush()
        # New keys are at the end of the dict, in the order they were registered.
        unit.registered = list(islice(reversed(dims.items()), len(dims) - before))[::-1]
        return unit

    def write_program(self) -> bytes:
        """The serialized program: one block with the variables, then the ops, then meshes."""
        self.flush()
        head = block_head(0, -1)
        block_size = len(head) + self.vars_out.size + self.ops_out.size
        separate = self.uses_global and self.opts.pp > 1
        meshes = [*self.meshes, self.global_mesh] if separate else self.meshes
        rest = view.LazyProgram(
            version=[pb.Version(version=0).SerializeToString()],
            process_meshes=[m.SerializeToString() for m in meshes],
        ).SerializeToString()
        out = io.BytesIO()
        out.write(block_field_start(head, block_size))
        self.vars_out.drain_into(out)
        self.ops_out.drain_into(out)
        out.write(rest)  # fields 4 and 1001 follow the block in canonical order
        return out.getvalue()


_SLOTS: dict[str, bytes] = {}


def slot_bytes(slot: str) -> bytes:
    """The encoded `parameter` field of an OpDesc.Var (a handful of slot names, cached)."""
    b = _SLOTS.get(slot)
    if b is None:
        b = _SLOTS[slot] = field_bytes(T1, slot.encode())
    return b


def set_attr(attr: pb.OpDesc.Attr, atype: int, value: object) -> None:
    if atype == pb.INT:
        attr.i = int(value)  # type: ignore[call-overload]
    elif atype == pb.LONG:
        attr.l = int(value)  # type: ignore[call-overload]
    elif atype == pb.FLOAT:
        attr.f = float(value)  # type: ignore[arg-type]
    elif atype == pb.BOOLEAN:
        attr.b = bool(value)
    elif atype == pb.STRING:
        attr.s = str(value)
    elif atype == pb.INTS:
        attr.ints.extend(cast("Iterable[int]", value))
    elif atype == pb.LONGS:
        attr.longs.extend(cast("Iterable[int]", value))
    else:  # pragma: no cover - programming error in the tables above
        raise AssertionError(f"unhandled attr type {atype}")
