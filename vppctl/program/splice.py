"""Splice: new dist attrs written into ops kept as ranges of the bytes read, a field at a time.

`vppctl.program.rewrite` edits an op by parsing it through a write view, changing
its dist attr and serializing it again. For an op in protobuf's own encoding that
gives the op's bytes with its dist attr field replaced, so an op kept as a range of
the bytes read (`vppctl.program.items`) is edited here by replacing that field
alone (`Items.splice`), with the very bytes the rewrite gives; an op in any other
encoding is rewritten whole, as before, and counted (`Items.rewritten`).

It runs on the ops edited, in runs of up to `_RUN` ops and `BIG_OP` bytes (all the
work below is a few C calls per run, and little Python per op; an op of more than
`BIG_OP` bytes is edited alone, by its fields, as `rewrite` edits it):

- the run is parsed at once (`view.PlainOps`) and serialized again without unknown
  fields: when that gives its bytes back, every op in it is in protobuf's own
  encoding, its dist attr (if any) followed by nothing but its id and forward_op_id;
- two more parses of the run (`DistOnlyOps`, `TailOps`) give each op's dist attr
  field and those last fields as protobuf writes them, which are then its own last
  bytes: where its dist attr lies follows from their sizes; the dist attrs parsed
  through the write view (`DistViewOps`) and serialized again give them back when
  each is in protobuf's own encoding without unknown fields (its chunk id, if any,
  then its last field), which the group edit below needs;
- the ops given one new mesh are a group: their dist attr fields, joined, parse as
  one (`view.DistGroup`) into every op mesh, chunk id and per-tensor dist attr of the
  group. When each op has one mesh, the same old mesh, of the new mesh's size, one
  chunk id, and each per-tensor dist attr is canonical and starts with that mesh, the
  rewrite replaces exactly the mesh's occurrences there: a `bytes.replace`, checked
  first by counting them over the group (the mesh's bytes, length included, must occur
  exactly once per op and per tensor dist attr, and cannot overlap themselves). The
  chunk id, a canonical dist attr's last field, is then swapped. Both are recorded as
  an `items.Patch` (one per change of mesh and chunk id) and applied to each op's dist
  attr while the output is written, so the new dist attrs are never held at once
  (a chunk id whose varint changes length is applied at once). A group that does not
  qualify is edited op by op (`rewrite`'s dist attr edit, spliced in the same way).
- An op of more than `BIG_OP` bytes (a huge attr) gets its dist attr spliced in where it
  lies in the bytes read (`splice_big`): it is never copied whole.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from itertools import compress, islice
from operator import lt, ne, not_, sub
from typing import NamedTuple, Protocol

from google.protobuf.message import DecodeError, Message

from vppctl.program._proto import program_pb2 as pb
from vppctl.program._proto import view_pb2 as view
from vppctl.program.items import Patch
from vppctl.program.load import Block, corrupt_op
from vppctl.program.wire import BIG_OP, field_spans, varint

Edit = tuple[int, bytes | None, int]  # (op index, raw mesh or None to keep, chunk id)
_DIST_ATTR = 1002  # OpDesc.dist_attr
DIST_TAG = varint(_DIST_ATTR << 3 | 2)
_CHUNK_TAG = b"\x30"  # OperatorDistAttr.chunk_id (6), a varint
_MESH_TAG, _TENSOR_MESH_TAG = b"\x1a", b"\x0a"  # OperatorDistAttr / TensorDistAttr.process_mesh
_RUN = 256  # ops checked at once
_BATCH = 4096  # edits taken at once (cut into runs)


class OpEditor(Protocol):
    """What `vppctl.program.rewrite` edits an op with."""

    @property
    def plain_mesh(self) -> Callable[[bytes], bool]:
        """Whether a serialized ProcessMesh is in protobuf's own encoding."""

    @property
    def plain_tensor(self) -> Callable[[bytes], bool]:
        """Likewise a TensorDistAttr (noting one that is not: `rewrite._Canonical`)."""

    def __call__(self, old: bytes, mesh: bytes | None, chunk: int) -> bytes: ...

    def dist_edit(
        self, was: bytes, mesh: bytes | None, chunk: int
    ) -> tuple[bytes, bool] | None: ...

    def dist_value(self, was: bytes, mesh: bytes | None, chunk: int) -> bytes | None: ...


def splice_ops(block: Block, edits: Iterable[Edit], editor: OpEditor) -> int:
    """Set (mesh, chunk id) on the ops of `block` (kept as ranges) as `editor` would;
    returns the number of ops that changed."""
    return _OpSplicer(block, editor).run(edits)


class _OpSplicer:
    def __init__(self, block: Block, editor: OpEditor) -> None:
        self.block, self.ops, self.editor = block, block.ops, editor
        self.changed = 0
        self.at = -1  # the op being edited, for the error naming a corrupt one

    def run(self, edits: Iterable[Edit]) -> int:
        """Edits taken _BATCH at a time, each batch cut into runs (module docstring): up to
        _RUN ops, within 2 * _RUN ops of the first and BIG_OP bytes of its start."""
        _, starts, ends = self.ops.ranges()
        flow = iter(edits)
        try:
            while batch := list(islice(flow, _BATCH)):
                at, meshes, chunks = (list(column) for column in zip(*batch))
                if not all(map(lt, at, islice(at, 1, None))) or at[0] < 0:
                    for e in batch:  # not ascending: op by op, each on the op as it is now
                        self.at = e[0]
                        self.edit_one(*e)
                    continue
                p, n = 0, len(at)
                while p < n:
                    q = min(n, p + _RUN, bisect_left(at, at[p] + 2 * _RUN, p + 1))
                    q = bisect_right(at, starts[at[p]] + BIG_OP, p + 1, q, key=ends.__getitem__)
                    self.edit_run(at[p:q], meshes[p:q], chunks[p:q])
                    self.ops.release(at[q - 1] + 1)  # a mapped file's pages behind given back
                    p = q
        except DecodeError:  # the write view reads fields the scan view skips
            raise corrupt_op(self.block.idx, self.at) from None
        return self.changed

    def edit_run(self, at: list[int], meshes: list[bytes | None], chunks: list[int]) -> None:
        """The edits of one run (ascending ops): the ops of each group given one mesh edited at
        once where they qualify, every other op alone, all recorded in op order."""
        ops = self.ops
        _, starts, ends = ops.ranges()
        first, last = at[0], at[-1] + 1
        # A run of more than BIG_OP bytes is one big op: edited alone, by its fields.
        small = ends[last - 1] - starts[first] <= BIG_OP
        fields = _run_fields(ops.framed_run(first, last)) if small else None
        done = _Done()  # the edits of the ops the groups handled
        alone: Sequence[int] = range(len(at))  # positions in the run of the ops edited alone
        if fields is not None and fields.plain_dists:
            dists, tails = fields.dists, fields.tails
            olds = [dists[i - first] for i in at]
            grouped: list[int] = []
            if ops.follows(at):  # no op of the run edited before
                ok = list(map(bool, olds))
            else:  # an op edited before this pass is edited alone
                ok = [bool(d) and not ops.edited(i) for i, d in zip(at, olds)]
            if len(set(meshes)) == 1:
                groups = {meshes[0]: list(compress(range(len(at)), ok))}
            else:
                groups = {}
                for k in compress(range(len(at)), ok):
                    groups.setdefault(meshes[k], []).append(k)
            for mesh, members in groups.items():
                if members and self.edit_group(mesh, members, at, chunks, olds, tails, first, done):
                    grouped += members
            if grouped:
                taken = bytearray(len(at))
                for k in grouped:
                    taken[k] = 1
                alone = list(compress(range(len(at)), map(not_, taken)))
                if len(groups) > 1:
                    done.sort()
        p = 0  # the next of the group edits to record
        for k in alone:  # in op order, between the group edits before and after them
            i = at[k]
            q = bisect_left(done.at, i, p)
            self.record(done, p, q)
            p = q
            self.at = i
            self.edit_one(i, meshes[k], chunks[k])
        self.record(done, p, len(done.at))

    def record(self, done: _Done, p: int, q: int) -> None:
        """Group edits p..q-1 recorded."""
        if q > p:
            self.ops.splice_run(done.at[p:q], done.lo[p:q], done.hi[p:q], done.what[p:q])
            self.ops.spliced += q - p
            self.changed += q - p

    def edit_group(
        self,
        mesh: bytes | None,
        members: list[int],
        at: list[int],
        chunks: list[int],
        olds: list[bytes],
        tails: list[bytes],
        first: int,
        done: _Done,
    ) -> bool:
        """The ops at positions `members` of the run (`at`, their new `chunks`, their dist attr
        fields `olds` and tails, by op less `first`), all given `mesh`, edited at once when
        they qualify (module docstring), their edits added to `done`; False (nothing added)
        when they do not: they are then edited alone."""
        ops = self.ops
        mine = [olds[k] for k in members]
        joined = b"".join(mine)
        group = view.DistGroup.FromString(joined).dist_attr
        was = list(group.chunk_id)
        if len(was) != len(members):  # an op without a chunk id (or a corrupt one)
            return False
        pattern = remeshed = b""
        if mesh is not None:
            patterns = self.remeshed(joined, mesh, group, len(members))
            if patterns is None:
                return False
            pattern, remeshed = patterns
        now = [chunks[k] for k in members]
        idx = [at[k] for k in members]
        _, starts, ends = ops.ranges()
        his = [ends[i] - starts[i] - len(tails[i - first]) for i in idx]
        los = list(map(sub, his, map(len, mine)))
        pairs = list(zip(was, now))
        patches: dict[tuple[int, int], int] = {}  # (old chunk, new chunk) -> the Patch's number
        for old, new in set(pairs):
            patch = Patch(pattern, remeshed, _chunk_field(old), _chunk_field(new))
            if len(patch.last) == len(patch.now):  # applied as the output is written
                patches[old, new] = ops.shared(patch)
        if len(patches) == len(set(pairs)):
            whats = list(map(patches.__getitem__, pairs))
        else:  # the chunk id's varint changes length (and so may the field's): applied now
            whats = []
            for field, (old, new) in zip(mine, pairs):
                w = patches.get((old, new))
                if w is None:
                    if pattern != remeshed:
                        field = field.replace(pattern, remeshed)
                    w = ops.shared(_rechunked(field, old, new))
                whats.append(w)
        if pattern == remeshed:  # an op whose chunk id stays keeps its bytes
            keep = list(map(ne, was, now))
            idx, los, his, whats = (list(compress(c, keep)) for c in (idx, los, his, whats))
        done.add(idx, los, his, whats)
        return True

    def remeshed(
        self, joined: bytes, mesh: bytes, group: view.DistGroupFields, n: int
    ) -> tuple[bytes, bytes] | None:
        """(old, new): replacing `old` by `new` in the group's dist attr fields (`joined`),
        and so in each op's (an occurrence cannot span two: their count is exactly the
        meshes'), replaces the op mesh and every per-tensor mesh by `mesh`, when it does
        exactly that; else None."""
        meshes = list(group.process_mesh)
        old = meshes[0] if meshes else b""
        if len(meshes) != n or meshes.count(old) != n or len(old) != len(mesh):
            return None
        editor = self.editor
        if not old or not editor.plain_mesh(old):
            return None
        pattern = varint(len(old)) + old  # a mesh field's length and bytes
        if _overlaps(pattern):
            return None
        ins = group.input_dist_attrs.tensor_dist_attr
        outs = group.output_dist_attrs.tensor_dist_attr
        distinct = set(ins)
        distinct.update(outs)
        start = _TENSOR_MESH_TAG + pattern
        for t in distinct:
            if t and not (t.startswith(start) and editor.plain_tensor(t)):
                return None
        tensors = len(ins) + len(outs)
        if b"" in distinct:  # a tensor dist attr without a mesh
            tensors -= [*ins, *outs].count(b"")
        if joined.count(pattern) != n + tensors:
            return None
        return pattern, varint(len(mesh)) + mesh

    def edit_one(self, i: int, mesh: bytes | None, chunk: int) -> None:
        """Op i edited alone: its dist attr spliced in when the op is in protobuf's own
        encoding, else the op rewritten whole."""
        ops = self.ops
        if not ops.edited(i):
            _, starts, ends = ops.ranges()
            if ends[i] - starts[i] > BIG_OP:
                if self.splice_big(i, mesh, chunk):
                    return
            elif self.splice_one(i, ops[i], mesh, chunk):
                return
        old = ops[i]
        new = self.editor(old, mesh, chunk)
        if new is not old:
            ops[i] = new
            ops.rewritten += 1
            self.changed += 1

    def splice_one(self, i: int, old: bytes, mesh: bytes | None, chunk: int) -> bool:
        """Op i with its new dist attr spliced in; False when the op or its dist attr is not
        in the encoding the write view reads exactly (then it is rewritten whole)."""
        fields = _run_fields(_framed(old))
        if fields is None:
            return False
        dist, tail = fields.dists[0], fields.tails[0]
        was = dist[_header(dist) :] if dist else b""
        got = self.editor.dist_edit(was, mesh, chunk)
        if got is None:
            return False
        now, plain = got
        if now == was:
            return True
        hi = len(old) - len(tail)
        lo = hi - len(dist)
        field = DIST_TAG + varint(len(now)) + now
        if not plain and not _differ(pb.OpDesc, old[:lo] + field + old[hi:], old):
            return True  # the same values in another encoding: the op keeps its bytes
        self.ops.splice(i, lo, hi, field)
        self.ops.spliced += 1
        self.changed += 1
        return True

    def splice_big(self, i: int, mesh: bytes | None, chunk: int) -> bool:
        """Op i, of more than BIG_OP bytes (a huge attr), with its dist attr spliced in as
        `rewrite` edits a large op by its fields, read in place: the op is never copied.
        False when its bytes do not split into fields or hold its dist attr more than once
        (then it is rewritten as a large op is)."""
        buf, starts, ends = self.ops.ranges()
        op = memoryview(buf)[starts[i] : ends[i]]
        spans = field_spans(op)
        if spans is None:
            return False
        dists = [s for s in spans if s.number == _DIST_ATTR]
        if len(dists) > 1:
            return False
        if dists:
            lo, hi = dists[0].start, dists[0].end
            was = bytes(op[dists[0].value : hi])
        else:  # none: where protobuf writes it, before the first field numbered after it
            later = [s.start for s in spans if s.number > _DIST_ATTR]
            lo = hi = later[0] if later else len(op)
            was = b""
        now = self.editor.dist_value(was, mesh, chunk)
        if now is not None:
            self.ops.splice(i, lo, hi, DIST_TAG + varint(len(now)) + now)
            self.ops.spliced += 1
            self.changed += 1
        return True


class _Done:
    """The edits of the ops a run's groups handled, as `Items.splice_run` takes them."""

    def __init__(self) -> None:
        self.at: list[int] = []
        self.lo: list[int] = []
        self.hi: list[int] = []
        self.what: list[int] = []

    def add(self, at: list[int], lo: list[int], hi: list[int], what: list[int]) -> None:
        self.at += at
        self.lo += lo
        self.hi += hi
        self.what += what

    def sort(self) -> None:
        """In op order (the groups' edits interleave)."""
        rows = sorted(zip(self.at, self.lo, self.hi, self.what))
        if rows:
            self.at, self.lo, self.hi, self.what = (list(c) for c in zip(*rows))


class _RunFields(NamedTuple):
    """Per op of a run: its dist attr field and its id and forward_op_id fields, as protobuf
    writes them (b"" for none); and whether every op's dist attr is in protobuf's own encoding
    without unknown fields (the write view's), so that its chunk id is its last field."""

    dists: list[bytes]
    tails: list[bytes]
    plain_dists: bool


def _run_fields(run: bytes) -> _RunFields | None:
    """The fields of the ops of `run` (a block's ops framed as read) when every op of the run
    is in protobuf's own encoding (module docstring); else None."""
    try:
        plain = view.PlainOps.FromString(run)
    except DecodeError:
        return None
    plain.DiscardUnknownFields()
    if plain.SerializeToString() != run:
        return None
    dist_only = _only(view.DistOnlyOps.FromString(run))
    tails = _only(view.TailOps.FromString(run))
    try:
        checked = view.DistViewOps.FromString(dist_only)
    except DecodeError:  # a corrupt dist attr: edited op by op, which names it
        plain_dists = False
    else:
        checked.DiscardUnknownFields()
        plain_dists = checked.SerializeToString() == dist_only
    framed = view.FramedOps.FromString
    return _RunFields(list(framed(dist_only).ops), list(framed(tails).ops), plain_dists)


def _only(ops: Message) -> bytes:
    """The ops of a run parsed through a one-field view, serialized again: each op that
    field's bytes, framed (read them with `view.FramedOps`)."""
    ops.DiscardUnknownFields()
    return ops.SerializeToString()


def _framed(op: bytes) -> bytes:
    return b"\x22" + varint(len(op)) + op  # BlockDesc.ops


def _header(field: bytes) -> int:
    """Bytes of a dist attr field's tag and length."""
    n = len(field) - len(DIST_TAG)
    for size in (1, 2, 3, 4, 5):
        if len(varint(n - size)) == size:
            return len(DIST_TAG) + size
    raise ValueError("not a dist attr field")  # pragma: no cover - under 2 GiB


def _rechunked(field: bytes, old: int, new: int) -> bytes:
    """A dist attr field ending with chunk id `old` (canonical: its last field), with `new`."""
    before, after = _chunk_field(old), _chunk_field(new)
    if not field.endswith(before):  # pragma: no cover - the group's lists say it does
        raise AssertionError("a dist attr that does not end with its chunk id")
    if len(before) == len(after):
        return field[: -len(before)] + after
    dist = field[_header(field) : -len(before)] + after
    return DIST_TAG + varint(len(dist)) + dist


def _chunk_field(value: int) -> bytes:
    field = _CHUNK_FIELDS.get(value)
    if field is None:
        field = _CHUNK_FIELDS[value] = _CHUNK_TAG + _int64(value)
    return field


_CHUNK_FIELDS: dict[int, bytes] = {}


def _int64(value: int) -> bytes:
    """An int64's varint (a negative one in ten bytes, as protobuf writes it)."""
    return varint(value & (1 << 64) - 1)


def _overlaps(pattern: bytes) -> bool:
    """Whether two occurrences of `pattern` can overlap (it begins with one of its ends)."""
    return any(pattern[k:] == pattern[: len(pattern) - k] for k in range(1, len(pattern)))


def _differ(message: type[Message], new: bytes, old: bytes) -> bool:
    """Whether two serialized messages hold different values."""
    return bool(message.FromString(new) != message.FromString(old))
