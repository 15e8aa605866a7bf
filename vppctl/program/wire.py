"""Wire: protobuf's encoding at the byte level, for the paths that frame bytes themselves.

Loading keeps ops and variables as serialized messages and saving writes them
back framed by hand (tag, length, payload), so the few wire-format facts those
paths need live here: varints, the tags of the repeated fields a program is
made of, and the size and pieces of such a field.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain, repeat
from operator import ge
from typing import NamedTuple

from vppctl.program._proto import view_pb2 as view

# Tags of BlockDesc.vars (3) and BlockDesc.ops (4), length-delimited, and of ProgramDesc.blocks.
VAR_TAG, OP_TAG, BLOCK_TAG = b"\x1a", b"\x22", b"\x0a"
_PIECE_ITEMS = 1 << 13  # ops or vars joined per piece when saving
# An op this large (a huge attr) is read and edited by its fields (`field_spans`), never
# parsed whole: the scan leaves its attrs out, the rewrite splices its dist attr in place.
BIG_OP = 1 << 20


def varint(n: int) -> bytes:
    """Protobuf's base-128 encoding of a non-negative int (short ones without a loop)."""
    if n < 0x80:
        return _SMALL[n]
    if n < 0x4000:
        return bytes(((n & 0x7F) | 0x80, n >> 7))
    if n < 0x200000:
        return bytes(((n & 0x7F) | 0x80, ((n >> 7) & 0x7F) | 0x80, n >> 14))
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def varint_at(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int] | None:
    """(value, end) of the varint at `pos`; None when `buf` ends inside it; ValueError when it
    is longer than 10 bytes."""
    value = shift = 0
    for i in range(pos, min(len(buf), pos + 10)):
        byte = buf[i]
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i + 1
    if len(buf) >= pos + 10:
        raise ValueError("varint longer than 10 bytes")
    return None


_SMALL = [bytes((n,)) for n in range(0x80)]
_PREFIXED = 1 << 14  # lengths below this are looked up in _PREFIXES (nearly all of them)


class _Prefixes(dict[int, bytes]):
    """Tag and length of a var or op field of n bytes, made the first time n is asked for:
    a table of every length below _PREFIXED cost 15 ms to build, more than the rest of
    the module's import, and a program uses a few hundred distinct lengths."""

    def __init__(self, tag: bytes) -> None:
        super().__init__()
        self.tag = tag

    def __missing__(self, n: int) -> bytes:
        made = self[n] = self.tag + varint(n)
        return made


_PREFIXES = {tag: _Prefixes(tag) for tag in (VAR_TAG, OP_TAG)}


class Span(NamedTuple):
    """One top-level field of a serialized message: bytes [start, end), its value from
    `value` (after the tag, and the length of a length-delimited field)."""

    number: int
    start: int
    value: int
    end: int


def field_spans(buf: bytes | memoryview) -> list[Span] | None:
    """The top-level fields of a serialized message, without parsing their values (a large
    op is edited by its spans: vppctl.program.rewrite); None when the bytes do not split
    into fields (or hold a group, which this does not walk)."""
    spans = []
    pos = 0
    try:
        while pos < len(buf):
            got = varint_at(buf, pos)
            if got is None:
                return None
            key, at = got
            number, wire = key >> 3, key & 7
            if number == 0:
                return None
            if wire == 0:
                got = varint_at(buf, at)
                if got is None:
                    return None
                value, end = at, got[1]
            elif wire in (1, 5):
                value, end = at, at + (8 if wire == 1 else 4)
            elif wire == 2:
                got = varint_at(buf, at)
                if got is None:
                    return None
                value, end = got[1], got[1] + got[0]
            else:
                return None
            if end > len(buf):
                return None
            spans.append(Span(number, pos, value, end))
            pos = end
    except ValueError:  # a varint over 10 bytes
        return None
    return spans


def block_head(idx: int, parent_idx: int) -> bytes:
    """The serialized fields a block starts with (idx, parent_idx)."""
    return view.LazyBlock(idx=idx, parent_idx=parent_idx).SerializeToString()


def block_field_start(head: bytes, size: int) -> bytes:
    """The start of a `ProgramDesc.blocks` field of `size` bytes that begins with `head`;
    the block's `vars` and `ops` fields follow (the sample generator frames blocks so too)."""
    return BLOCK_TAG + varint(size) + head


def fields_size(items: list[bytes]) -> int:
    """Bytes of a repeated length-delimited field with one-byte tags: per item the tag, the
    varint of its length (one byte, plus one per 7 bits past the first 7), and the item."""
    lengths = list(map(len, items))
    total = 2 * len(items) + sum(lengths)  # tag, first length byte, payload
    for bound in (1 << 7, 1 << 14, 1 << 21, 1 << 28):
        total += sum(map(ge, lengths, repeat(bound)))  # extra length bytes
    return total


def prefixed(tag: bytes, n: int) -> bytes:
    """The tag (VAR_TAG or OP_TAG) and length of a var or op field of n bytes."""
    return _PREFIXES[tag][n] if n < _PREFIXED else tag + varint(n)


def field_pieces(tag: bytes, items: list[bytes]) -> Iterator[bytes]:
    """A repeated length-delimited field (VAR_TAG or OP_TAG) of `items`, framed, in pieces of
    a few thousand items each."""
    prefix = _PREFIXES[tag].__getitem__
    for start in range(0, len(items), _PIECE_ITEMS):
        piece = items[start : start + _PIECE_ITEMS]
        # Each item's prefix, then the item, joined in C: no Python step per item.
        yield b"".join(chain.from_iterable(zip(map(prefix, map(len, piece)), piece)))
