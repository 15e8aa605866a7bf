"""Rewrite: new meshes and chunk ids written into the serialized ops and variables.

Ops and variables stay serialized; an edited one is parsed through a write view
that declares every field number of its program.proto message (view.proto's
Edit* messages), changed, and serialized again, so every field it does not
touch, unknown ones included, survives in its order.
"""

from __future__ import annotations

from collections.abc import Iterable

from google.protobuf.message import DecodeError

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
        raise corrupt_op(block.idx, i) from None
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
        raise corrupt_var(block.idx, i) from None
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
