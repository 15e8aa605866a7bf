"""Rewrite: new meshes and chunk ids written into the serialized ops and variables.

Ops and variables stay serialized; an edited one is parsed through a write view
that declares every field number of its program.proto message (view.proto's
Edit* messages), changed, and serialized again, so every field it does not
touch, unknown ones included, survives in its order. A serialized sub-message
may come in several occurrences, which protobuf merges: it is read joined and
written back as one.
"""

from __future__ import annotations

from collections.abc import Iterable, MutableSequence, Sequence

from google.protobuf.message import DecodeError, Message

from vppctl.mesh import Mesh
from vppctl.program._proto import program_pb2 as pb
from vppctl.program._proto import view_pb2 as view
from vppctl.program.load import Block, corrupt_op, corrupt_var
from vppctl.program.reads import CALLSTACK_NAME, is_callstack


def encode_mesh(mesh: Mesh) -> bytes:
    return pb.ProcessMesh(
        shape=mesh.shape, process_ids=mesh.process_ids, dim_names=mesh.dim_names
    ).SerializeToString()


def rewrite_ops(block: Block, edits: Iterable[tuple[int, bytes | None, int]]) -> int:
    """Set (mesh, chunk id) on ops: (op index, raw mesh or None to keep, chunk id).

    A mesh also replaces the meshes in the op's per-input and per-output tensor
    dist attrs. Those stay serialized, and a program has few distinct ones, so
    each is rewritten once and then looked up. Returns the number of ops that
    changed: read as protobuf reads them, whatever their encoding (an op whose
    values stay the same keeps its bytes, in the encoding it came in).
    """
    ops = block.ops
    parse = view.EditOp.FromString
    by_mesh: dict[bytes, dict[bytes, bytes]] = {}  # mesh -> old tensor attr -> new
    plain_mesh, plain_tensor = _Canonical(pb.ProcessMesh), _Canonical(pb.TensorDistAttr)
    n = i = 0
    try:
        for i, mesh, chunk in edits:
            old = ops[i]
            op = parse(old)
            before = op.SerializeToString()  # `old` as the view writes it (usually `old`)
            d = op.dist_attr
            plain = before == old and _one_plain(d.process_mesh, plain_mesh)
            if mesh is not None:
                _set_one(d.process_mesh, mesh)
                done = by_mesh.get(mesh)
                if done is None:
                    done = by_mesh[mesh] = {}
                for entries in (d.input_dist_attrs, d.output_dist_attrs):
                    for entry in entries:
                        occurrences = entry.tensor_dist_attr
                        t = b"".join(occurrences)
                        if t:
                            plain = plain and _one_plain(occurrences, plain_tensor)
                            new_t = done.get(t)
                            if new_t is None:
                                new_t = done[t] = _retensored(t, mesh, None)
                            _set_one(occurrences, new_t)
            d.chunk_id = chunk
            new = op.SerializeToString()
            if new != before if plain else _differ(pb.OpDesc, new, old):
                ops[i] = new
                n += 1
    except DecodeError:  # the write view reads fields the scan view skips
        raise corrupt_op(block.idx, i) from None
    return n


def rewrite_vars(block: Block, edits: Iterable[tuple[int, bytes | None, int | None]]) -> int:
    """Set (mesh, chunk id) on variables: (var index, raw mesh or None, chunk or None).
    Returns the number of variables that changed (as `rewrite_ops` counts ops).

    A variable usually starts with its name, and the rest of its bytes (type, shape, dist
    attr) is shared by many variables: that rest is rewritten once per distinct value
    and the name put back in front, which gives exactly the bytes rewriting the whole
    variable gives (the name is field 1, written first)."""
    vars_ = block.vars
    parse = view.EditVar.FromString
    retensor = _Rewriter()
    rests: dict[tuple[bytes, bytes | None, int | None], bytes | None] = {}
    plain_tensor = _Canonical(pb.TensorDistAttr)
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
                    rest = rests[key] = _rewritten_rest(key[0], mesh, chunk, retensor, plain_tensor)
                if rest is not None:
                    new = old[:cut] + rest
            if new is None:
                new = _rewritten(parse(old), old, mesh, chunk, retensor, plain_tensor)
            if new != old:
                vars_[i] = new
                n += 1
    except DecodeError:  # the write view reads fields the scan view skips
        raise corrupt_var(block.idx, i) from None
    return n


def _set_one(occurrences: MutableSequence[bytes], value: bytes) -> None:
    """Replace every occurrence of a singular message field (view.proto) with one."""
    del occurrences[:]
    occurrences.append(value)


_NOT_YET = b"not yet rewritten"  # compared by identity only


def _rewritten_rest(
    rest: bytes,
    mesh: bytes | None,
    chunk: int | None,
    retensor: _Rewriter,
    plain_tensor: _Canonical,
) -> bytes | None:
    """A variable's bytes after its name field, rewritten; None when they name it again
    (then the whole variable is rewritten, which keeps one name field)."""
    v = view.EditVar.FromString(rest)
    if v.HasField("name"):
        return None
    return _rewritten(v, rest, mesh, chunk, retensor, plain_tensor)


def _rewritten(
    v: view.EditVar,
    old: bytes,
    mesh: bytes | None,
    chunk: int | None,
    retensor: _Rewriter,
    plain_tensor: _Canonical,
) -> bytes:
    """The variable (or its bytes after the name) `old`, parsed as `v`, with a new mesh
    and/or chunk id; `old` itself when that changes no value (whatever its encoding)."""
    before = v.SerializeToString()
    plain = before == old and _one_plain(v.dist_attr, plain_tensor)
    _set_one(v.dist_attr, retensor(b"".join(v.dist_attr), mesh, chunk))
    new = v.SerializeToString()
    changed = new != before if plain else _differ(pb.VarDesc, new, old)
    return new if changed else old


class _Canonical:
    """Whether serialized messages of one type are in protobuf's own encoding, memoised
    (a program has few distinct dist attrs and meshes)."""

    def __init__(self, message: type[Message]) -> None:
        self.parse = message.FromString
        self.seen: dict[bytes, bool] = {}

    def __call__(self, raw: bytes) -> bool:
        plain = self.seen.get(raw)
        if plain is None:
            plain = self.seen[raw] = self.parse(raw).SerializeToString() == raw
        return plain


def _one_plain(occurrences: Sequence[bytes], canonical: _Canonical) -> bool:
    """Whether a singular sub-message kept serialized (view.proto) is absent or one
    occurrence in protobuf's own encoding: then comparing bytes compares values."""
    return not occurrences or (len(occurrences) == 1 and canonical(occurrences[0]))


def _differ(message: type[Message], new: bytes, old: bytes) -> bool:
    """Whether two serialized messages hold different values (for bytes in another encoding
    than protobuf's own, where comparing bytes would not say)."""
    return bool(message.FromString(new) != message.FromString(old))


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
        _set_one(t.process_mesh, mesh)
    if chunk is not None:
        t.chunk_id = chunk
    return t.SerializeToString()


def strip_callstack(block: Block) -> int:
    """Drop `op_callstack` attrs from every op of `block`, however they are encoded;
    returns the bytes saved."""
    ops = block.ops
    saved = 0
    for i, blob in enumerate(ops):
        if CALLSTACK_NAME not in blob:
            continue
        try:
            op = view.EditOp.FromString(blob)
        except DecodeError:
            raise corrupt_op(block.idx, i) from None
        kept = [a for a in op.attrs if not is_callstack(a)]
        if len(kept) == len(op.attrs):
            continue
        del op.attrs[:]
        op.attrs.extend(kept)
        new = op.SerializeToString()
        saved += len(blob) - len(new)
        ops[i] = new
    return saved
