"""Framing: a program in protobuf's own layout is read as ranges of its bytes; any other is parsed.

The loader keeps a program's ops and variables as ranges of the bytes read when
`find_framing` recognises the layout protobuf writes, and parses it whole otherwise.
Either way it must read the same program (or refuse it with the same error): every
shipped program is read both ways and compared, and so is each departure from the
layout in the table below, built on a small program, and every re-encoding of the
program's and blocks' fields (tests/support/reencode.py).
"""

from __future__ import annotations

import lzma
import random
from collections.abc import Callable
from typing import Any

import paths
import pytest
from programs import layered
from reencode import KINDS, fields, reencode, varint

from vppctl.errors import ProgramFileError
from vppctl.program._proto import program_pb2 as pb
from vppctl.program.framing import find_framing
from vppctl.program.load import MAX_BLOCKS, Program, _parse, _split, parse_program


def _two_blocks() -> bytes:
    """A small training program with a sub-block (a copy of its first variable and op)."""
    msg = pb.ProgramDesc.FromString(layered([0, 0, 1, 1], backward=True, optimizer=True).bytes())
    sub = msg.blocks.add(idx=1, parent_idx=0)
    sub.vars.add().CopyFrom(msg.blocks[0].vars[0])
    sub.ops.add().CopyFrom(msg.blocks[0].ops[0])
    return msg.SerializeToString()


DATA = _two_blocks()


def shipped() -> list[tuple[str, bytes]]:
    out = [(p.name, p.read_bytes()) for p in sorted(paths.SAMPLES.glob("*.pb"))]
    for p in sorted(paths.PADDLE_REFERENCE.glob("*.pb.xz"))[:6]:
        out.append((p.name, lzma.decompress(p.read_bytes())))
    return out


def whole(data: bytes) -> Program:
    """The program parsed whole (the loader's other path)."""
    return _split(_parse(data, source="<memory>", text=False), source="<memory>", size=len(data))


def read(parse: Callable[[bytes], Program], data: bytes) -> Any:
    """What a reading gives: the program's fields, or the error's words."""
    try:
        p = parse(data)
    except ProgramFileError as e:
        return str(e)
    return (
        [(b.idx, b.parent_idx, list(b.ops), list(b.vars), b.head, b.tail) for b in p.blocks],
        p.header.SerializeToString(),
        p.to_bytes(),
    )


def framed(data: bytes) -> bool:
    return all(b.ops.spans for b in parse_program(data).blocks)


@pytest.mark.parametrize(("name", "data"), shipped(), ids=lambda v: v if isinstance(v, str) else "")
def test_a_shipped_program_is_read_framed_as_whole(name: str, data: bytes) -> None:
    assert find_framing(data, MAX_BLOCKS) is not None and framed(data)
    assert read(parse_program, data) == read(whole, data)
    assert parse_program(data).to_bytes() == data  # unchanged: the bytes read


# -- departures from the layout -----------------------------------------------------------


def blocks_fields(data: bytes) -> list[list[tuple[int, int, bytes]]]:
    return [fields(payload) for number, _, payload in fields(data) if number == 1]


def rebuild(blocks: list[list[tuple[int, int, bytes]]], extra: bytes = b"") -> bytes:
    out = b""
    for fs in blocks:
        block = b"".join(_field(*f) for f in fs)
        out += _field(1, 2, block)
    return out + extra


def _field(number: int, wire: int, payload: bytes, overlong: bool = False) -> bytes:
    tag = varint(number << 3 | wire)
    if wire != 2:
        return tag + payload
    length = varint(len(payload))
    if overlong:
        length = bytes(b | 0x80 for b in length) + b"\x00"
    return tag + length + payload


def _header(data: bytes) -> bytes:
    return b"".join(_field(n, w, p) for n, w, p in fields(data) if n != 1)


def _edit_block(edit: Callable[[list[tuple[int, int, bytes]]], list[Any]]) -> bytes:
    blocks = blocks_fields(DATA)
    blocks[0] = edit(blocks[0])
    return rebuild(blocks, _header(DATA))


def _move_first(fs: list[Any], number: int, after: int) -> list[Any]:
    """The first field `number` moved after the last field `after`."""
    k = next(i for i, f in enumerate(fs) if f[0] == number)
    moved = fs.pop(k)
    last = max(i for i, f in enumerate(fs) if f[0] == after)
    fs.insert(last + 1, moved)
    return fs


def _overlong_item(fs: list[Any], number: int) -> bytes:
    k = next(i for i, f in enumerate(fs) if f[0] == number)
    out = b"".join(_field(*f, overlong=(i == k)) for i, f in enumerate(fs))
    return _field(1, 2, out) + _field(1, 2, b"".join(_field(*f) for f in blocks_fields(DATA)[1]))


DEPARTURES: dict[str, Callable[[], bytes]] = {
    "an op's length in a longer varint": lambda: (
        _overlong_item(blocks_fields(DATA)[0], 4) + _header(DATA)
    ),
    "a variable's length in a longer varint": lambda: (
        _overlong_item(blocks_fields(DATA)[0], 3) + _header(DATA)
    ),
    "a block's length in a longer varint": lambda: (
        _field(1, 2, b"".join(_field(*f) for f in blocks_fields(DATA)[0]), overlong=True)
        + rebuild(blocks_fields(DATA)[1:], _header(DATA))
    ),
    "a variable after the ops": lambda: _edit_block(lambda fs: _move_first(fs, 3, 4)),
    "idx after the variables": lambda: _edit_block(lambda fs: _move_first(fs, 1, 3)),
    "parent_idx first": lambda: _edit_block(lambda fs: [fs[1], fs[0], *fs[2:]]),
    "idx twice": lambda: _edit_block(lambda fs: [fs[0], *fs]),
    "an unknown field between the variables and the ops": lambda: _edit_block(
        lambda fs: _move_first([*fs, (99, 0, b"\x01")], 99, 3)
    ),
    "forward_block_idx before the variables": lambda: _edit_block(
        lambda fs: [*fs[:2], (5, 0, b"\x03"), *fs[2:]]
    ),
    "idx as a negative int64": lambda: _edit_block(
        lambda fs: [(1, 0, varint(-(1 << 40))), *fs[1:]]
    ),
    "idx 0 in ten bytes": lambda: _edit_block(lambda fs: [(1, 0, b"\x80" * 9 + b"\x00"), *fs[1:]]),
    "a header field before the blocks": lambda: _header(DATA) + rebuild(blocks_fields(DATA)),
    "a header field between the blocks": lambda: (
        rebuild(blocks_fields(DATA)[:1]) + _header(DATA) + rebuild(blocks_fields(DATA)[1:])
    ),
    "the blocks swapped": lambda: rebuild(blocks_fields(DATA)[::-1], _header(DATA)),
    "a block's parent after it": lambda: rebuild(
        [
            blocks_fields(DATA)[0],
            [(1, 0, b"\x01"), (2, 0, b"\x05"), *blocks_fields(DATA)[1][2:]],
        ],
        _header(DATA),
    ),
    "no blocks": lambda: _header(DATA),
    "cut inside an op": lambda: DATA[: len(DATA) // 2],
    "cut inside a length": lambda: rebuild(blocks_fields(DATA))[:-1],
    "a corrupt header": lambda: DATA + b"\x22\x05ab",
}


# What protobuf itself writes after a block's ops: read as ranges like any other program.
KEPT: dict[str, Callable[[], bytes]] = {
    "forward_block_idx and an unknown field last": lambda: _edit_block(
        lambda fs: [*fs, (5, 0, b"\x03"), (77, 2, b"kept")]
    ),
    "an unknown group last in a block": lambda: _edit_block(
        lambda fs: [*fs, (9, 3, b""), (9, 4, b"")]
    ),
    "unknown fields after the blocks": lambda: DATA + _field(2000, 2, b"x") + _field(7, 0, b"\x01"),
}


@pytest.mark.parametrize("case", KEPT)
def test_what_protobuf_writes_last_is_kept_framed(case: str) -> None:
    data = KEPT[case]()
    assert framed(data) and read(parse_program, data) == read(whole, data)
    assert parse_program(data).to_bytes() == data


@pytest.mark.parametrize("case", DEPARTURES)
def test_a_departure_from_the_layout_is_parsed_whole(case: str) -> None:
    data = DEPARTURES[case]()
    assert data != DATA
    got = read(parse_program, data)
    assert got == read(whole, data)
    if not isinstance(got, str):  # read: parsed whole, not kept as ranges
        assert not framed(data)


def test_the_departures_are_not_refused_alike() -> None:
    """Most departures are valid programs: the table tests the reading, not only errors."""
    refused = [c for c in DEPARTURES if isinstance(read(parse_program, DEPARTURES[c]()), str)]
    assert 3 <= len(refused) <= len(DEPARTURES) // 2, refused


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(4))
def test_a_reencoded_program_reads_as_the_whole_parse(kind: str, seed: int) -> None:
    """The program's and blocks' fields re-encoded (ops and variables as they are)."""
    share = {"vppctl.OpDesc": 0.0, "vppctl.VarDesc": 0.0}
    data = reencode(random.Random(seed), DATA, pb.ProgramDesc.DESCRIPTOR, (kind,), 0.5, share)
    assert read(parse_program, data) == read(whole, data)


def test_more_blocks_than_the_loader_reads_are_refused_as_before() -> None:
    block = _field(1, 2, b"\x08\x00\x10" + varint(-1))
    data = block + b"".join(
        _field(1, 2, b"\x08" + varint(i) + b"\x10\x00") for i in range(1, MAX_BLOCKS + 1)
    )
    assert find_framing(data, MAX_BLOCKS) is None
    assert "blocks" in read(parse_program, data) == read(whole, data)
