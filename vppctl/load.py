"""Load: program bytes on disk -> a `Program` in memory.

A program is loaded through the lazy view (`view.proto`): blocks are decoded,
their ops and variables stay serialized, one `bytes` per op or variable in a
Python list, until the engine needs them. A rewritten op replaces its list
entry (the old bytes are freed), and saving writes the lists back out in
protobuf's canonical order. Saving an unchanged program therefore gives back
the bytes it was loaded from, fields vppctl does not know included, and memory
stays near the file size.

Binary protobuf by default; protobuf text format when the path ends in
`.pbtxt`, `.textproto` or `.txtpb`. Anything that is not a program is a
ProgramFileError (exit 3) with a one-line reason.
"""

from __future__ import annotations

import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import repeat
from operator import ge
from pathlib import Path

from google.protobuf import text_format
from google.protobuf.message import DecodeError

from vppctl import program_pb2 as pb
from vppctl import view_pb2 as view
from vppctl.errors import ProgramFileError
from vppctl.gcpause import gc_paused

TEXT_SUFFIXES = (".pbtxt", ".textproto", ".txtpb")
# protobuf refuses to parse or serialize a message of 2 GiB or more.
MAX_PROGRAM_BYTES = 2**31 - 1
# Each block costs vppctl a few KB of side tables whatever its size: a bound keeps a small
# file of empty blocks from taking seconds and gigabytes.
MAX_BLOCKS = 1 << 14


# Tags of BlockDesc.vars (3) and BlockDesc.ops (4), length-delimited, and of ProgramDesc.blocks.
_VAR_TAG, _OP_TAG, _BLOCK_TAG = b"\x1a", b"\x22", b"\x0a"
_PIECE_ITEMS = 1 << 13  # ops or vars joined per piece when saving


@dataclass
class Block:
    """One block: its ops and variables as serialized messages, and its other fields."""

    idx: int
    parent_idx: int
    ops: list[bytes]
    vars: list[bytes]
    head: bytes  # the serialized fields before `vars` (idx, parent_idx)
    tail: bytes  # the serialized fields after `ops` (forward_block_idx, unknown fields)

    def size(self) -> int:
        """Bytes of this block's serialized message."""
        return len(self.head) + _fields_size(self.vars) + _fields_size(self.ops) + len(self.tail)

    def pieces(self, size: int | None = None) -> Iterator[bytes]:
        """The block as a `ProgramDesc.blocks` field, in pieces (`size`: its size, if known)."""
        yield block_field_start(self.head, self.size() if size is None else size)
        for prefixes, items in ((_VAR_PREFIX, self.vars), (_OP_PREFIX, self.ops)):
            for start in range(0, len(items), _PIECE_ITEMS):
                parts: list[bytes] = []
                add = parts.append
                for item in items[start : start + _PIECE_ITEMS]:
                    n = len(item)
                    add(prefixes[n] if n < _PREFIXED else prefixes[0][:1] + varint(n))
                    add(item)
                yield b"".join(parts)
        yield self.tail


@dataclass
class Program:
    """A loaded program: its blocks, its other fields, and where it came from."""

    blocks: list[Block]
    header: view.LazyProgram  # every ProgramDesc field but `blocks`
    source: str = "<memory>"
    size: int = 0
    warnings: list[str] = field(default_factory=list)

    def pieces(self, sizes: list[int] | None = None) -> Iterator[bytes]:
        """The serialized program, in pieces (protobuf's canonical field order); `sizes`:
        the blocks' sizes, if known."""
        for k, block in enumerate(self.blocks):
            yield from block.pieces(None if sizes is None else sizes[k])
        yield self.header.SerializeToString()

    def byte_size(self, sizes: list[int] | None = None) -> int:
        sizes = [b.size() for b in self.blocks] if sizes is None else sizes
        return sum(1 + len(varint(n)) + n for n in sizes) + self.header.ByteSize()

    def to_bytes(self) -> bytes:
        return b"".join(self.pieces())


def block_head(idx: int, parent_idx: int) -> bytes:
    """The serialized fields a block starts with (idx, parent_idx)."""
    return view.LazyBlock(idx=idx, parent_idx=parent_idx).SerializeToString()


def block_field_start(head: bytes, size: int) -> bytes:
    """The start of a `ProgramDesc.blocks` field of `size` bytes that begins with `head`;
    the block's `vars` and `ops` fields follow (the sample generator frames blocks so too)."""
    return _BLOCK_TAG + varint(size) + head


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


_SMALL = [bytes((n,)) for n in range(0x80)]
# Tag and length of a var or op field of n bytes, for n < _PREFIXED (nearly all of them).
_PREFIXED = 1 << 14
_VAR_PREFIX = [_VAR_TAG + varint(n) for n in range(_PREFIXED)]
_OP_PREFIX = [_OP_TAG + varint(n) for n in range(_PREFIXED)]


def _fields_size(items: list[bytes]) -> int:
    """Bytes of a repeated length-delimited field with one-byte tags: per item the tag, the
    varint of its length (one byte, plus one per 7 bits past the first 7), and the item."""
    lengths = list(map(len, items))
    total = 2 * len(items) + sum(lengths)  # tag, first length byte, payload
    for bound in (1 << 7, 1 << 14, 1 << 21, 1 << 28):
        total += sum(map(ge, lengths, repeat(bound)))  # extra length bytes
    return total


def is_text_path(path: Path) -> bool:
    return path.suffix.lower() in TEXT_SUFFIXES


@gc_paused
def read_program(path: Path) -> Program:
    """Load a program file (binary or text by extension); ProgramFileError (exit 3) if not."""
    data = _read_bytes(path)
    size = len(data)
    msg = _parse(data, source=str(path), text=is_text_path(path))
    del data  # the lazy message holds its own copy; free the file's before splitting it
    return _split(msg, source=str(path), size=size)


def _read_bytes(path: Path) -> bytes:
    try:
        st = path.stat()
        size = st.st_size
        if stat.S_ISDIR(st.st_mode):
            raise ProgramFileError(f"cannot read {path}: it is a directory, not a program file")
        if not stat.S_ISREG(st.st_mode):
            # A FIFO or device would block or never end; its size cannot be checked first.
            raise ProgramFileError(
                f"cannot read {path}: it is not a regular file (a pipe or device); write the "
                "program to a file first"
            )
        if size > MAX_PROGRAM_BYTES:
            raise ProgramFileError(
                f"cannot read {path}: it is {size / 2**30:.1f} GiB and protobuf cannot parse a "
                "message of 2 GiB or more; strip op_callstack attributes when exporting "
                "(or split the program)"
            )
        return path.read_bytes()
    except FileNotFoundError:
        raise ProgramFileError(f"cannot read {path}: no such file") from None
    except PermissionError:
        raise ProgramFileError(f"cannot read {path}: permission denied") from None
    except OSError as e:
        raise ProgramFileError(f"cannot read {path}: {e.strerror or e}") from None


@gc_paused
def parse_program(data: bytes, *, source: str = "<memory>", text: bool = False) -> Program:
    """Parse program bytes; ProgramFileError (exit 3) when they do not hold a program."""
    return _split(_parse(data, source=source, text=text), source=source, size=len(data))


def _split(msg: view.LazyProgram, *, source: str, size: int) -> Program:
    """Move each block's ops and variables out of the lazy message into Python lists."""
    blocks = []
    for lazy in msg.blocks:
        ops, vars_ = list(lazy.ops), list(lazy.vars)
        del lazy.ops[:]
        del lazy.vars[:]
        head = block_head(lazy.idx, lazy.parent_idx)
        rest = lazy.SerializeToString()
        if not rest.startswith(head):  # pragma: no cover - protobuf writes fields in order
            raise AssertionError("idx and parent_idx are not the first fields of a block")
        blocks.append(
            Block(
                idx=lazy.idx,
                parent_idx=lazy.parent_idx,
                ops=ops,
                vars=vars_,
                head=head,
                tail=rest[len(head) :],
            )
        )
    del msg.blocks[:]
    header = view.LazyProgram()
    header.CopyFrom(msg)  # a fresh, small message: the big one's memory is freed with it
    return Program(blocks=blocks, header=header, source=source, size=size)


def _parse(data: bytes, *, source: str, text: bool) -> view.LazyProgram:
    empty = not data.strip() if text else not data
    if empty:
        raise ProgramFileError(f"cannot load {source}: the file is empty, not a program")
    if text:
        data = _text_to_binary(data, source)
    try:
        msg = view.LazyProgram.FromString(data)
    except DecodeError:
        raise ProgramFileError(
            f"cannot load {source}: not a program (not a valid protobuf message: truncated "
            "or corrupt bytes); check that it is a serialized ProgramDesc"
        ) from None
    _check_blocks(msg, source)
    return msg


def _text_to_binary(data: bytes, source: str) -> bytes:
    try:
        msg = text_format.Parse(data.decode("utf-8"), pb.ProgramDesc())
    except UnicodeDecodeError:
        raise ProgramFileError(f"cannot load {source}: text format must be UTF-8") from None
    except text_format.ParseError as e:
        reason = " ".join(str(e).split())  # it quotes the offending line, control characters too
        raise ProgramFileError(
            f"cannot load {source}: not a program in text format: {reason}"
        ) from None
    missing = msg.FindInitializationErrors()  # type: ignore[attr-defined]
    if missing:
        raise ProgramFileError(
            f"cannot load {source}: required field {missing[0]} is missing"
            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
        )
    return msg.SerializeToString()


def _check_blocks(msg: view.LazyProgram, source: str) -> None:
    if not msg.blocks:
        raise ProgramFileError(
            f"cannot load {source}: not a program (it has no blocks); check that it is a "
            "serialized ProgramDesc"
        )
    if len(msg.blocks) > MAX_BLOCKS:
        raise ProgramFileError(
            f"cannot load {source}: it has {len(msg.blocks):,} blocks and vppctl reads at most "
            f"{MAX_BLOCKS:,} (Paddle makes one per control-flow op); check how it was exported"
        )
    for i, block in enumerate(msg.blocks):
        if not block.HasField("idx") or not block.HasField("parent_idx"):
            raise ProgramFileError(
                f"cannot load {source}: not a program (block {i} has no idx or parent_idx)"
            )
        if block.idx != i:
            raise ProgramFileError(
                f"cannot load {source}: not a program (block {i} says it is block {block.idx}; "
                "blocks must be numbered 0..n-1 in order)"
            )
        if (i == 0 and block.parent_idx != -1) or (i > 0 and not 0 <= block.parent_idx < i):
            raise ProgramFileError(
                f"cannot load {source}: not a program (block {i} has parent {block.parent_idx}; "
                "the global block's parent is -1 and a sub-block's parent is an earlier block)"
            )


def to_full(program: Program) -> pb.ProgramDesc:
    """The whole program decoded through program.proto (for text output and inspection)."""
    try:
        return pb.ProgramDesc.FromString(program.to_bytes())
    except DecodeError:
        # The lazy view leaves ops and variables serialized; decoding them all finds the damage.
        raise ProgramFileError(
            f"not a program: {program.source} holds a corrupt op or variable (not a valid "
            "OpDesc or VarDesc)"
        ) from None


def has_unknown_fields(msg: pb.ProgramDesc) -> bool:
    """True when some message in the program holds fields program.proto does not declare."""
    stripped = pb.ProgramDesc()
    stripped.CopyFrom(msg)
    stripped.DiscardUnknownFields()
    return stripped.ByteSize() != msg.ByteSize()
