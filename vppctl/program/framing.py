"""Framing: where each block, variable and op lies in the bytes of a program protobuf wrote.

A program protobuf (or Paddle, or `vppctl sample`) wrote is its blocks, then its
other fields; a block is its `idx` and `parent_idx`, its variables, its ops, then
the rest, each variable and op framed by a one-byte tag and the shortest varint of
its length. That is exactly what saving writes (`Block.pieces`), so a program read
in that layout is kept as ranges of its bytes (`vppctl.program.items`), and saving
it unchanged copies them. `find_framing` walks the framing of the program and of its
blocks (never inside an op or variable) and returns None on anything else: fields
in another order, a length written in more bytes than needed, a group, a block whose
numbering `vppctl.program.load` refuses. The loader then parses the program whole,
as it always has, and says why when it is not a program.
"""

from __future__ import annotations

import mmap
import struct
from array import array
from dataclasses import dataclass

from vppctl.program.items import Buffer, release
from vppctl.program.wire import block_head

_BLOCK, _IDX, _PARENT, _VARS, _OPS = 0x0A, 0x08, 0x10, 0x1A, 0x22
_INT32 = 1 << 32
_RELEASE = 1 << 24  # bytes walked between two releases of a mapped file's pages behind


@dataclass(frozen=True)
class Span:
    """A run of one repeated field's items: item k is buf[starts[k]:ends[k]], framed one
    after the other from `region` on."""

    region: int
    starts: array[int]
    ends: array[int]


@dataclass(frozen=True)
class BlockFraming:
    idx: int
    parent_idx: int
    head: bytes  # idx and parent_idx, as saving writes them
    vars: Span
    ops: Span
    tail: bytes  # the block's fields after its ops


@dataclass(frozen=True)
class Framing:
    blocks: list[BlockFraming]
    header: bytes  # every field after the blocks


def find_framing(buf: Buffer, max_blocks: int) -> Framing | None:
    """The framing of the program in `buf`, or None when it is not the one protobuf writes
    (module docstring), or has more than `max_blocks` blocks."""
    blocks: list[BlockFraming] = []
    pos, size = 0, len(buf)
    try:
        while pos < size and buf[pos] == _BLOCK:
            got = _length(buf, pos + 1)
            if got is None or len(blocks) == max_blocks:
                return None
            n, start = got
            end = start + n
            if end > size:
                return None
            block = _block(buf, start, end, len(blocks))
            if block is None:
                return None
            blocks.append(block)
            pos = end
    except IndexError:  # a frame cut short by the end of the bytes
        return None
    if not blocks:
        return None
    return Framing(blocks, bytes(buf[pos:]))


def _block(buf: Buffer, start: int, end: int, idx: int) -> BlockFraming | None:
    """Block number `idx` in buf[start:end], when laid out as saving writes it."""
    got = _head(buf, start, end, idx)
    if got is None:
        return None
    head, parent = got
    pos = start + len(head)
    vars_ = _items(buf, pos, end, _VARS)
    if vars_ is None:
        return None
    pos = vars_.ends[-1] if vars_.ends else pos
    ops = _items(buf, pos, end, _OPS)
    if ops is None:
        return None
    pos = ops.ends[-1] if ops.ends else pos
    return BlockFraming(idx, parent, head, vars_, ops, bytes(buf[pos:end]))


def _head(buf: Buffer, start: int, end: int, idx: int) -> tuple[bytes, int] | None:
    """(the block's first two fields, its parent), when they are its idx (`idx`) and a
    parent_idx the loader accepts, written as saving writes them."""
    if start >= end or buf[start] != _IDX:
        return None
    value, pos = _varint(buf, start + 1)
    if pos >= end or buf[pos] != _PARENT or _int32(value) != idx:
        return None
    parent, pos = _varint(buf, pos + 1)
    parent = _int32(parent)
    if not (parent == -1 if idx == 0 else 0 <= parent < idx):
        return None
    head = block_head(idx, parent)
    return (head, parent) if buf[start : start + len(head)] == head else None


def _items(buf: Buffer, pos: int, end: int, tag: int) -> Span | None:
    """The run of fields with one-byte tag `tag` from `pos` on (None when one is cut short
    or its length is not written in the fewest bytes)."""
    region = pos
    starts, ends = array("q"), array("q")
    # Collected in lists and moved into the arrays every _RELEASE bytes: a list takes an int
    # in one step, an array in several (`_flush`).
    got_starts: list[int] = []
    got_ends: list[int] = []
    add_start, add_end = got_starts.append, got_ends.append
    mapped = isinstance(buf, mmap.mmap)
    mark = released = pos
    while pos < end and buf[pos] == tag:
        if pos > mark:
            _flush(starts, got_starts)
            _flush(ends, got_ends)
            if mapped:  # the pages behind given back (`items.release`)
                assert isinstance(buf, mmap.mmap)
                released = release(buf, released, pos)
            mark = pos + _RELEASE
        n = buf[pos + 1]
        if n < 0x80:
            s = pos + 2
        else:
            n2 = buf[pos + 2]
            if n2 == 0:  # a longer varint than needed
                return None
            if n2 < 0x80:
                n = (n & 0x7F) | n2 << 7
                s = pos + 3
            else:
                got = _length(buf, pos + 1)
                if got is None:
                    return None
                n, s = got
        pos = s + n
        if pos > end:
            return None
        add_start(s)
        add_end(pos)
    _flush(starts, got_starts)
    _flush(ends, got_ends)
    return Span(region, starts, ends)


def _flush(into: array[int], values: list[int]) -> None:
    """`values` appended to `into` (in one C call: struct-packed), and cleared."""
    into.frombytes(struct.pack(f"{len(values)}q", *values))
    values.clear()


def _length(buf: Buffer, pos: int) -> tuple[int, int] | None:
    """(value, end) of the varint length at `pos`, None when longer than needed or than
    the 5 bytes a length can take."""
    value, end = _varint(buf, pos)
    if end - pos > 5 or (end - pos > 1 and buf[end - 1] == 0):
        return None
    return value, end


def _varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """(value, end) of the varint at `pos` (IndexError when the bytes end inside it)."""
    value = shift = 0
    while True:
        byte = buf[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise IndexError("varint longer than 10 bytes")


def _int32(value: int) -> int:
    """A varint read as protobuf reads an int32 field: its low 32 bits, signed."""
    value &= _INT32 - 1
    return value - _INT32 if value >= _INT32 >> 1 else value
