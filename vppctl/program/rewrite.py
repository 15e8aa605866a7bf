"""Rewrite: new meshes and chunk ids written into the serialized ops and variables.

Ops and variables stay serialized; an edited one is parsed through a write view
that declares every field number of its program.proto message (view.proto's
Edit* messages), changed, and serialized again, so every field it does not
touch, unknown ones included, survives in its order. That is exact when
re-serializing the parsed view gives the bytes back, as it does for everything
protobuf (and Paddle) writes. An op or variable in another valid encoding (a
field out of order, given twice, a sub-message split over several occurrences,
which the view would not merge) is edited as its full program.proto message
instead. Either way an op or variable counts as changed when its values change,
and one whose values stay the same keeps its bytes, in the encoding it came in.

Ops and variables kept as ranges of the bytes read (`vppctl.program.items`) are
edited without being rewritten whole, wherever that gives the very bytes the
rewrite above gives: an op in protobuf's own encoding gets its new dist attr
spliced in where the old one was (`vppctl.program.splice`), and a variable its
rewritten rest after its name. Any other op or variable is rewritten whole, as
above, and counted (`Items.rewritten`).
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice

from google.protobuf.message import DecodeError, Message

from vppctl.mesh import Mesh
from vppctl.program._proto import program_pb2 as pb
from vppctl.program._proto import view_pb2 as view
from vppctl.program.load import Block, corrupt_op, corrupt_var
from vppctl.program.reads import CALLSTACK_NAME, is_callstack
from vppctl.program.splice import splice_ops
from vppctl.program.wire import BIG_OP, field_spans, varint


def encode_mesh(mesh: Mesh) -> bytes:
    return pb.ProcessMesh(
        shape=mesh.shape, process_ids=mesh.process_ids, dim_names=mesh.dim_names
    ).SerializeToString()


def rewrite_ops(block: Block, edits: Iterable[tuple[int, bytes | None, int]]) -> int:
    """Set (mesh, chunk id) on ops: (op index, raw mesh or None to keep, chunk id).

    A mesh also replaces the meshes in the op's per-input and per-output tensor
    dist attrs. Those stay serialized, and a program has few distinct ones, so
    each is rewritten once and then looked up. Returns the number of ops that
    changed (module docstring).
    """
    ops = block.ops
    edit = _OpEditor()
    if ops.spans:
        return splice_ops(block, edits, edit)
    n = i = 0
    try:
        for i, mesh, chunk in edits:
            old = ops[i]
            new = edit(old, mesh, chunk)
            if new is not old:
                ops[i] = new
                n += 1
    except DecodeError:  # the write view reads fields the scan view skips
        raise corrupt_op(block.idx, i) from None
    ops.rewritten += n
    return n


class _Canonical:
    """Whether serialized messages of one type are in protobuf's own encoding (then equal
    bytes mean equal values), memoised: a program has few distinct meshes and dist attrs.
    `all_plain` stays True until one is not."""

    def __init__(self, message: type[Message]) -> None:
        self.parse = message.FromString
        self.seen: dict[bytes, bool] = {}
        self.all_plain = True

    def __call__(self, raw: bytes) -> bool:
        plain = self.seen.get(raw)
        if plain is None:
            plain = self.seen[raw] = self.parse(raw).SerializeToString() == raw
            self.all_plain = self.all_plain and plain
        return plain


class _OpEditor:
    """Edits ops one at a time, remembering the rewritten per-tensor dist attrs."""

    def __init__(self) -> None:
        self.by_mesh: dict[bytes, dict[bytes, bytes]] = {}  # mesh -> old tensor attr -> new
        self.plain_mesh = _Canonical(pb.ProcessMesh)
        self.plain_tensor = _Canonical(pb.TensorDistAttr)

    def __call__(self, old: bytes, mesh: bytes | None, chunk: int) -> bytes:
        """`old` with the mesh (None: kept) and chunk id; `old` itself when no value changes."""
        if len(old) > BIG_OP:
            spliced = self.spliced(old, mesh, chunk)
            if spliced is not None:
                return spliced
        op = view.EditOp.FromString(old)
        if op.SerializeToString() != old:  # another encoding than protobuf's: the view may
            return _edit_full(pb.OpDesc, old, mesh, chunk)  # not read it exactly
        d = op.dist_attr
        old_mesh = d.process_mesh
        self.edit_dist(d, mesh, chunk)
        new = op.SerializeToString()
        if new == old:
            return old
        # New bytes mean new values, unless a value replaced was in another encoding.
        plain = self.plain_tensor.all_plain and (mesh is None or self.plain_mesh(old_mesh))
        return new if plain or _differ(pb.OpDesc, new, old) else old

    def dist_edit(self, was: bytes, mesh: bytes | None, chunk: int) -> tuple[bytes, bool] | None:
        """An op's serialized dist attr (b"" for none) with the mesh and chunk id, as
        `__call__` edits it inside the op: (its new bytes, whether new bytes mean new values);
        None when the view would not read `was` exactly (then `__call__` edits the op)."""
        d = view.EditOpDist.FromString(was)
        if d.SerializeToString() != was:
            return None
        old_mesh = d.process_mesh
        self.edit_dist(d, mesh, chunk)
        plain = self.plain_tensor.all_plain and (mesh is None or self.plain_mesh(old_mesh))
        return d.SerializeToString(), plain

    def edit_dist(self, d: view.EditOpDist, mesh: bytes | None, chunk: int) -> None:
        if mesh is not None:
            d.process_mesh = mesh
            done = self.by_mesh.get(mesh)
            if done is None:
                done = self.by_mesh[mesh] = {}
            for entries in (d.input_dist_attrs, d.output_dist_attrs):
                for entry in entries:
                    t = entry.tensor_dist_attr
                    if t:
                        new_t = done.get(t)
                        if new_t is None:
                            self.plain_tensor(t)
                            new_t = done[t] = _retensored(t, mesh, None)
                        entry.tensor_dist_attr = new_t
        d.chunk_id = chunk

    def spliced(self, old: bytes, mesh: bytes | None, chunk: int) -> bytes | None:
        """A large op (a huge attr) edited by its fields: only its dist attr is parsed and
        written, and spliced in where it was. Parsing and serializing the whole op would
        hold it four times over (its bytes, the parse, upb's serialization and its copy),
        beyond the memory bound; this holds it twice. None when the bytes do not split
        into fields (the usual path then names the corrupt op)."""
        spans = field_spans(old)
        if spans is None:
            return None
        dists = [s for s in spans if s.number == _DIST_ATTR]
        was = b"".join(old[s.value : s.end] for s in dists)  # occurrences merge (view.proto)
        now = self.dist_value(was, mesh, chunk)
        if now is None:
            return old
        field = _DIST_TAG + varint(len(now)) + now
        whole = memoryview(old)
        parts: list[bytes | memoryview] = []
        for s in spans:  # every field as it is, the dist attr once, where it was (or goes)
            if field and (s.number == _DIST_ATTR or (not dists and s.number > _DIST_ATTR)):
                parts.append(field)
                field = b""
            if s.number != _DIST_ATTR:
                parts.append(whole[s.start : s.end])
        parts.append(field)
        return b"".join(parts)

    def dist_value(self, was: bytes, mesh: bytes | None, chunk: int) -> bytes | None:
        """A large op's serialized dist attr (its occurrences joined; b"" for none) with the
        mesh and chunk id, as `spliced` writes it; None when no value changes."""
        d = view.EditOpDist.FromString(was)
        if d.SerializeToString() == was:
            old_mesh = d.process_mesh
            self.edit_dist(d, mesh, chunk)
            now = d.SerializeToString()
            plain = self.plain_tensor.all_plain and (mesh is None or self.plain_mesh(old_mesh))
            changed = now != was if plain else _differ(pb.OperatorDistAttr, now, was)
        else:  # not what the view reads exactly: the full message (see __call__)
            full = pb.OperatorDistAttr.FromString(was)
            _edit_full_dist(full, mesh, chunk)
            now = full.SerializeToString()
            changed = full != pb.OperatorDistAttr.FromString(was)
        return now if changed else None


# A large op (wire.BIG_OP) is edited by its spans (`_OpEditor.spliced`); OpDesc.dist_attr
# is field 1002.
_DIST_ATTR = 1002
_DIST_TAG = varint(_DIST_ATTR << 3 | 2)


def rewrite_vars(block: Block, edits: Iterable[tuple[int, bytes | None, int | None]]) -> int:
    """Set (mesh, chunk id) on variables: (var index, raw mesh or None, chunk or None).
    Returns the number of variables that changed (module docstring).

    A variable usually starts with its name, and the rest of its bytes (type, shape, dist
    attr) is shared by many variables: that rest is rewritten once per distinct value
    and the name put back in front, which gives exactly the bytes rewriting the whole
    variable gives (the name is field 1, written first)."""
    vars_ = block.vars
    edit = _VarEditor()
    n = 0
    flow = iter(edits)
    try:
        while batch := list(islice(flow, _RELEASE_VARS)):
            if vars_.spans:
                vars_.release(batch[0][0])  # a mapped file's pages behind given back
            at = [i for i, _, _ in batch]
            if vars_.spans and vars_.follows(at):
                n += _splice_vars(block, batch, edit)
            else:
                n += _rewrite_vars(block, batch, edit)
    except DecodeError:  # the write view reads fields the scan view skips
        raise corrupt_var(block.idx, edit.at) from None
    return n


def _splice_vars(
    block: Block, edits: list[tuple[int, bytes | None, int | None]], edit: _VarEditor
) -> int:
    """`rewrite_vars` for variables as read, ascending: each one's rest after its name,
    rewritten (once per distinct rest and values), spliced in; the edits recorded together
    (`Items.splice_run`). A variable whose name is not one field with a one-byte length in
    front, or whose rest does not qualify, is rewritten whole, in its turn."""
    vars_ = block.vars
    buf, starts, ends = vars_.ranges()
    rests = edit.rests
    at: list[int] = []
    lo: list[int] = []
    hi: list[int] = []
    what: list[int] = []
    n = 0
    for i, mesh, chunk in edits:
        if mesh is None and chunk is None:
            continue
        s, e = starts[i], ends[i]
        name = buf[s + 1] if e - s > 1 and buf[s] == 0x0A else 0x80
        if name < 0x80 and s + 2 + name <= e:  # the name field, whole, in front
            key = (buf[s + 2 + name : e], mesh, chunk)
            w = rests.get(key)
            if w is None:
                edit.at = i
                rest = edit.rest(key[0], mesh, chunk)
                if rest is None:
                    w = _AS_IS
                else:
                    w = vars_.shared(rest) if rest != key[0] else _SAME
                rests[key] = w
            if w >= 0:
                at.append(i)
                lo.append(2 + name)
                hi.append(e - s)
                what.append(w)
                continue
            if w == _SAME:
                continue
        vars_.splice_run(at, lo, hi, what)  # the edits before, then this one, in order
        n += len(at)
        vars_.spliced += len(at)
        at, lo, hi, what = [], [], [], []
        edit.at = i
        old = vars_[i]
        new = edit(old, mesh, chunk)
        if new != old:
            vars_[i] = new
            vars_.rewritten += 1
            n += 1
    vars_.splice_run(at, lo, hi, what)
    vars_.spliced += len(at)
    return n + len(at)


def _rewrite_vars(
    block: Block, edits: list[tuple[int, bytes | None, int | None]], edit: _VarEditor
) -> int:
    """`rewrite_vars` one variable at a time, each as it is now (a list of them, or edits
    in any order, a variable edited before)."""
    vars_ = block.vars
    rests = edit.whole_rests
    n = 0
    for i, mesh, chunk in edits:
        if mesh is None and chunk is None:
            continue
        edit.at = i
        fresh = vars_.spans and not vars_.edited(i)  # as read: its rest can be spliced
        old = vars_.original(i) if fresh else vars_[i]
        cut = 2 + old[1] if len(old) > 1 and old[0] == 0x0A and old[1] < 0x80 else 0
        if 0 < cut <= len(old):  # the name field, whole, in front: one-byte length
            key = (old[cut:], mesh, chunk)
            rest = rests.get(key, _NOT_YET)
            if rest is _NOT_YET:
                rest = rests[key] = edit.rest(key[0], mesh, chunk)
            if rest is not None:
                if rest != key[0]:
                    if fresh:  # the rest spliced in after the name (its bytes shared)
                        vars_.splice(i, cut, len(old), rest)
                        vars_.spliced += 1
                    else:
                        vars_[i] = old[:cut] + rest
                        vars_.rewritten += 1
                    n += 1
                continue
        new = edit(old, mesh, chunk)
        if new != old:
            vars_[i] = new
            vars_.rewritten += 1
            n += 1
    return n


# What a variable's rest becomes (`_VarEditor.rests`), besides a replacement's number:
_SAME, _AS_IS = -1, -2  # its bytes stay; it is not spliced (the variable rewritten whole)
_NOT_YET = b"not yet rewritten"  # compared by identity only
_RELEASE_VARS = 1 << 12  # variables edited between two `Items.release` calls


class _VarEditor:
    """Edits variables (or their bytes after the name), remembering the rewritten dist
    attrs."""

    def __init__(self) -> None:
        self.done: dict[tuple[bytes, bytes | None, int | None], bytes] = {}
        self.plain_tensor = _Canonical(pb.TensorDistAttr)
        # (rest, mesh, chunk) -> its rewritten rest's number in the Items' table, or _SAME,
        # _AS_IS (`_splice_vars`); or the rewritten rest itself, None for _AS_IS
        # (`_rewrite_vars`).
        self.rests: dict[tuple[bytes, bytes | None, int | None], int] = {}
        self.whole_rests: dict[tuple[bytes, bytes | None, int | None], bytes | None] = {}
        self.at = -1  # the variable being edited, for the error naming a corrupt one

    def rest(self, rest: bytes, mesh: bytes | None, chunk: int | None) -> bytes | None:
        """A variable's bytes after its name field, rewritten; None when they name it again
        or are in another encoding than protobuf's (then the whole variable is rewritten)."""
        v = view.EditVar.FromString(rest)
        if v.HasField("name") or v.SerializeToString() != rest:
            return None
        return self.edited(v, rest, mesh, chunk)

    def __call__(self, old: bytes, mesh: bytes | None, chunk: int | None) -> bytes:
        v = view.EditVar.FromString(old)
        if v.SerializeToString() != old:  # another encoding: see _OpEditor
            return _edit_full(pb.VarDesc, old, mesh, chunk)
        return self.edited(v, old, mesh, chunk)

    def edited(self, v: view.EditVar, old: bytes, mesh: bytes | None, chunk: int | None) -> bytes:
        """`old`, parsed exactly as `v`, with a new mesh and/or chunk id; `old` itself when
        no value changes."""
        key = (v.dist_attr, mesh, chunk)
        new_t = self.done.get(key)
        if new_t is None:
            self.plain_tensor(v.dist_attr)
            new_t = self.done[key] = _retensored(v.dist_attr, mesh, chunk)
        v.dist_attr = new_t
        new = v.SerializeToString()
        if new == old:
            return old
        return new if self.plain_tensor.all_plain or _differ(pb.VarDesc, new, old) else old


def _retensored(old: bytes, mesh: bytes | None, chunk: int | None) -> bytes:
    """A serialized TensorDistAttr with a new mesh and/or chunk id (through the full message
    when the write view would not read `old` exactly: see _OpEditor)."""
    t = view.EditTensorDist.FromString(old)
    if t.SerializeToString() != old:
        full = pb.TensorDistAttr.FromString(old)
        if mesh is not None:
            full.process_mesh.ParseFromString(mesh)
        if chunk is not None:
            full.chunk_id = chunk
        return full.SerializeToString()
    if mesh is not None:
        t.process_mesh = mesh
    if chunk is not None:
        t.chunk_id = chunk
    return t.SerializeToString()


def _edit_full(message: type[Message], old: bytes, mesh: bytes | None, chunk: int | None) -> bytes:
    """An op (OpDesc) or variable (VarDesc) in an unusual encoding, edited as the full
    message: what the Edit views do, on values protobuf has read and merged. Returns `old`
    itself when no value changes (and the bytes protobuf writes otherwise)."""
    was = message.FromString(old)
    m = message.FromString(old)
    if isinstance(m, pb.OpDesc):
        _edit_full_dist(m.dist_attr, mesh, chunk)
    else:
        assert isinstance(m, pb.VarDesc)
        t = m.dist_attr
        if mesh is not None:
            t.process_mesh.ParseFromString(mesh)
        if chunk is not None:
            t.chunk_id = chunk
    if m == was:
        return old
    return m.SerializePartialToString()


def _edit_full_dist(d: pb.OperatorDistAttr, mesh: bytes | None, chunk: int | None) -> None:
    """What `_OpEditor.edit_dist` does, on the full message."""
    if mesh is not None:
        d.process_mesh.ParseFromString(mesh)
        for entry in (*d.input_dist_attrs, *d.output_dist_attrs):
            if entry.HasField("tensor_dist_attr") and entry.tensor_dist_attr.ByteSize():
                entry.tensor_dist_attr.process_mesh.ParseFromString(mesh)
    if chunk is not None:
        d.chunk_id = chunk


def _differ(message: type[Message], new: bytes, old: bytes) -> bool:
    """Whether two serialized messages hold different values (for bytes in another encoding
    than protobuf's own, where comparing bytes would not say)."""
    return bool(message.FromString(new) != message.FromString(old))


def strip_callstack(block: Block) -> int:
    """Drop `op_callstack` attrs from every op of `block`, however they are encoded;
    returns the bytes saved."""
    ops = block.ops
    saved = 0
    for i, blob in enumerate(ops):
        if CALLSTACK_NAME not in blob:
            continue
        try:
            new = _stripped(blob)
        except DecodeError:
            raise corrupt_op(block.idx, i) from None
        if new is not None:
            saved += len(blob) - len(new)
            ops[i] = new
    return saved


def _stripped(blob: bytes) -> bytes | None:
    """The op without its op_callstack attrs; None when it has none."""
    op = view.EditOp.FromString(blob)
    kept = [a for a in op.attrs if not is_callstack(a)]
    if len(kept) == len(op.attrs):
        return None
    if op.SerializeToString() != blob:  # another encoding: the full message (see _OpEditor)
        full = pb.OpDesc.FromString(blob)
        attrs = [a for a in full.attrs if a.name != "op_callstack"]
        del full.attrs[:]
        full.attrs.extend(attrs)
        return full.SerializePartialToString()
    del op.attrs[:]
    op.attrs.extend(kept)
    return op.SerializeToString()
