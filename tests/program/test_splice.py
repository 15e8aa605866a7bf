"""Splice: new dist attrs written into ops kept as ranges of the bytes read.

An op of a program read as ranges of its bytes (`vppctl.program.items`) is edited by
splicing its new dist attr in (`vppctl.program.splice`) wherever that gives the bytes the
whole rewrite gives, and rewritten whole otherwise. Either way the program written and the
count of ops changed must be exactly those of the same program parsed whole (a list of
ops, rewritten one by one): checked here over a generator of edits (new meshes of the same
and of another size, kept meshes, chunk ids of one, two and ten bytes, runs and scattered
ops, ops edited before) on the shipped programs, Paddle exports, re-encodings of ops and
their dist attrs, and ops with unknown fields at every level.
"""

from __future__ import annotations

import lzma
import random

import paths
import pytest
from programs import layered
from reencode import KINDS, reencode, varint

from vppctl.program._proto import program_pb2 as pb
from vppctl.program.load import Program, _parse, _split, parse_program
from vppctl.program.rewrite import rewrite_ops, rewrite_vars, strip_callstack

Edit = tuple[int, bytes | None, int]


def whole(data: bytes) -> Program:
    """The program parsed whole: its ops a list, rewritten op by op."""
    return _split(_parse(data, source="<memory>", text=False), source="<memory>", size=len(data))


def _unknown(number: int, value: int) -> bytes:
    """A varint field of a number no message here declares."""
    return varint(number << 3) + varint(value)


def _training() -> bytes:
    return layered([0, 0, 1, 1, 2, 2, 3, 3], backward=True, optimizer=True).bytes()


def _with_unknowns() -> bytes:
    """Unknown fields in some ops, in some ops' dist attrs and in one per-tensor dist attr."""
    msg = pb.ProgramDesc.FromString(_training())
    ops = msg.blocks[0].ops
    for k, op in enumerate(ops):
        if k % 7 == 3:
            op.MergeFromString(_unknown(777, k))
        if k % 5 == 1:
            op.dist_attr.MergeFromString(_unknown(103, k))
        if k % 11 == 2 and op.dist_attr.input_dist_attrs:
            op.dist_attr.input_dist_attrs[0].tensor_dist_attr.MergeFromString(_unknown(104, k))
    return msg.SerializeToString()


def _dist_unknowns() -> bytes:
    """Unknown fields in the dist attrs of some ops only (the ops otherwise as protobuf
    writes them): after the chunk id, where a splice of the chunk id must not go."""
    msg = pb.ProgramDesc.FromString(_training())
    for k, op in enumerate(msg.blocks[0].ops):
        if k % 3 == 1:
            op.dist_attr.MergeFromString(_unknown(103, 0x30))
    return msg.SerializeToString()


def _reencoded(kinds: tuple[str, ...], seed: int) -> bytes:
    """Half the ops and variables re-encoded, each framed in the program as protobuf frames
    it (so that they stay ranges of the bytes read)."""
    rng = random.Random(seed)
    program = parse_program(_training())
    for block in program.blocks:
        for items, desc in ((block.ops, pb.OpDesc), (block.vars, pb.VarDesc)):
            for i in range(len(items)):
                if rng.random() < 0.5:
                    items[i] = reencode(rng, items[i], desc.DESCRIPTOR, kinds, 0.5)
    return program.to_bytes()


def programs() -> list[tuple[str, bytes]]:
    out = [("training", _training()), ("unknown fields", _with_unknowns())]
    out.append(("unknown fields in dist attrs", _dist_unknowns()))
    out += [(p.name, p.read_bytes()) for p in sorted(paths.SAMPLES.glob("*.pb"))[:3]]
    for p in sorted(paths.PADDLE_REFERENCE.glob("*.pb.xz"))[:3]:
        out.append((p.name, lzma.decompress(p.read_bytes())))
    out += [(f"{kind} {seed}", _reencoded((kind,), seed)) for kind in KINDS for seed in range(2)]
    out.append(("all kinds", _reencoded(KINDS, 7)))
    return out


PROGRAMS = programs()


def meshes(data: bytes) -> list[bytes]:
    """The program's op meshes, and new ones: of the same size as its first, and of others."""
    msg = pb.ProgramDesc.FromString(data)
    seen = sorted(
        {
            op.dist_attr.process_mesh.SerializeToString()
            for b in msg.blocks
            for op in b.ops
            if op.dist_attr.HasField("process_mesh")
        }
    )
    first = (
        pb.ProcessMesh.FromString(seen[0]) if seen else pb.ProcessMesh(shape=[1], process_ids=[0])
    )
    same = pb.ProcessMesh()
    same.CopyFrom(first)
    same.process_ids[:] = [p + 1 if p < 100 else p for p in first.process_ids]
    bigger = pb.ProcessMesh(shape=[2], process_ids=[300, 301], dim_names=["pp"])
    return [*seen, same.SerializeToString(), bigger.SerializeToString()]


CHUNKS = (0, 1, 2, 3, 300, -1)  # varints of one, two and ten bytes


def edits(rng: random.Random, n: int, raws: list[bytes]) -> list[Edit]:
    """Ascending ops (runs and scattered ones, as the engine gives them), each given a mesh
    (or None: kept) and a chunk id; one mesh for most, as a conversion gives a stage's ops."""
    main_mesh = rng.choice(raws)
    picked = sorted(rng.sample(range(n), rng.randint(0, n)))
    out: list[Edit] = []
    for i in picked:
        r = rng.random()
        mesh = main_mesh if r < 0.6 else None if r < 0.8 else rng.choice(raws)
        chunk = rng.choice(CHUNKS[:2]) if rng.random() < 0.7 else rng.choice(CHUNKS)
        out.append((i, mesh, chunk))
    return out


def edited(program: Program, rng: random.Random, raws: list[bytes], strip: bool) -> tuple[int, int]:
    """Edit every block of `program` as a conversion does: (ops changed, vars changed)."""
    n_ops = n_vars = 0
    for block in program.blocks:
        if strip:
            strip_callstack(block)
        n_ops += rewrite_ops(block, edits(rng, len(block.ops), raws))
        var_edits = [
            (i, m, c if c != 300 else None) for i, m, c in edits(rng, len(block.vars), raws)
        ]
        n_vars += rewrite_vars(block, var_edits)
    return n_ops, n_vars


@pytest.mark.parametrize(("name", "data"), PROGRAMS, ids=[n for n, _ in PROGRAMS])
@pytest.mark.parametrize("seed", range(3))
def test_a_spliced_program_is_the_program_rewritten_whole(
    name: str, data: bytes, seed: int
) -> None:
    raws = meshes(data)
    spans, listed = parse_program(data), whole(data)
    assert all(b.ops.spans for b in spans.blocks) and not any(b.ops.spans for b in listed.blocks)
    strip = seed == 2  # ops replaced whole before (a callstack stripped), then spliced
    got = edited(spans, random.Random(seed), raws, strip)
    want = edited(listed, random.Random(seed), raws, strip)
    assert got == want
    assert spans.to_bytes() == listed.to_bytes()
    assert [list(b.ops) for b in spans.blocks] == [list(b.ops) for b in listed.blocks]


def test_ops_in_protobufs_own_encoding_are_spliced_others_rewritten() -> None:
    """The counters say how each op changed was edited: every one of a program protobuf wrote
    is spliced; re-encoded ops (a field out of order) are rewritten whole."""
    data = _training()
    raws = meshes(data)
    program = parse_program(data)
    block = program.blocks[0]
    n = len(block.ops)
    changed = rewrite_ops(block, [(i, raws[-2], 1) for i in range(n)])
    assert changed == n == block.ops.spliced and block.ops.rewritten == 0
    odd = _reencoded(("reorder",), 0)
    program = parse_program(odd)
    block = program.blocks[0]
    changed = rewrite_ops(block, [(i, raws[-2], 1) for i in range(len(block.ops))])
    assert block.ops.rewritten > 0 and block.ops.spliced + block.ops.rewritten == changed
    assert changed == rewrite_ops(
        whole(odd).blocks[0], [(i, raws[-2], 1) for i in range(len(block.ops))]
    )


def test_a_second_edit_of_an_op_gives_the_last_values() -> None:
    data = _training()
    raws = meshes(data)
    spans, listed = parse_program(data), whole(data)
    for program in (spans, listed):
        block = program.blocks[0]
        rewrite_ops(block, [(i, raws[-1], 2) for i in range(0, len(block.ops), 2)])
        rewrite_ops(block, [(i, raws[-2], 300) for i in range(0, len(block.ops), 3)])
    assert spans.to_bytes() == listed.to_bytes()
    op = pb.OpDesc.FromString(spans.blocks[0].ops[0])
    assert op.dist_attr.chunk_id == 300
    assert op.dist_attr.process_mesh.SerializeToString() == raws[-2]


@pytest.mark.parametrize(("name", "data"), PROGRAMS, ids=[n for n, _ in PROGRAMS])
def test_ops_given_one_mesh_or_none_are_edited_as_the_whole_rewrite(name: str, data: bytes) -> None:
    """As a conversion edits them: every op of a stretch given one new mesh, or its mesh kept
    and a new chunk id (the ops edited as a group when they qualify)."""
    raws = meshes(data)
    results = []
    for program in (parse_program(data), whole(data)):
        counts = []
        for mesh in (None, raws[-2], raws[0], raws[-1]):
            for block in program.blocks:
                n = len(block.ops)
                counts.append(rewrite_ops(block, [(i, mesh, 1 + n % 3) for i in range(n)]))
        results.append((counts, program.to_bytes()))
    assert results[0] == results[1]
