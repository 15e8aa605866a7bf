"""Load: program bytes on disk -> a `Program` in memory.

A binary program in the layout protobuf writes (`vppctl.program.framing`) is kept
as the bytes read, a regular file mapped (`mmap`) rather than read: its ops and
variables are ranges of them (`vppctl.program.items`), edited beside them and
streamed back out. Any other program is loaded through the lazy view
(`view.proto`): blocks are decoded, their ops and variables stay serialized, one
`bytes` per op or variable in a Python list, until the engine needs them; a
rewritten op replaces its list entry. Either way saving writes the ops and
variables back out in protobuf's canonical order, so saving an unchanged program
gives back the bytes it was loaded from, fields vppctl does not know included.

Where the bytes come from (a file, "-" for stdin, a FIFO or device) is
`vppctl.program.files`'s job; which format they are in (binary protobuf, protobuf
text, a PIR program's JSON, any of them compressed with xz or gzip) is
`vppctl.program.sniff`'s, told by their content (or by a text file's name, `.pbtxt`,
`.textproto` or `.txtpb`, or asked: `text=True`); this module parses them.

Anything that is not a program is a ProgramFileError (exit 3) with a one-line
reason: at most about 200 characters of a text parse error's context are
quoted, and nesting deeper than protobuf's limit of 100 is said as such. A
stream is refused as soon as its first bytes cannot begin a program, so
/dev/zero or /dev/urandom cost a few bytes, not 2 GiB.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from google.protobuf import text_format
from google.protobuf.message import DecodeError

from vppctl import validate
from vppctl.errors import ProgramFileError
from vppctl.gcpause import gc_paused
from vppctl.program import pir  # its reader loads on use: most programs are not PIR
from vppctl.program._proto import program_pb2 as pb
from vppctl.program._proto import view_pb2 as view
from vppctl.program.files import STDIO, read_input
from vppctl.program.framing import Framing, find_framing
from vppctl.program.items import Buffer, Items
from vppctl.program.literals import cut_long_literals
from vppctl.program.sniff import (
    MAX_DEPTH,
    MAX_PROGRAM_BYTES,
    TEXT_BYTES,
    Format,
    StreamCheck,
    Whole,
    begins_as_pir,
    decompressed,
    file_format,
    not_protobuf,
    too_deep,
)
from vppctl.program.wire import (
    OP_TAG,
    VAR_TAG,
    block_field_start,
    block_head,
    varint,
    varint_at,
)

if TYPE_CHECKING:  # a PIR program's origin: its reader loads on use
    from vppctl.program.pir import PirOrigin

TEXT_SUFFIXES = (".pbtxt", ".textproto", ".txtpb")
# Each block costs vppctl a few KB of side tables whatever its size: a bound keeps a small
# file of empty blocks from taking seconds and gigabytes.
MAX_BLOCKS = 1 << 14


class Block:
    """One block: its ops and variables, each a serialized message (`Items`: ranges of the
    bytes read, or a list), and its other fields. A list assigned to `ops` or `vars`
    becomes their Items."""

    def __init__(
        self,
        idx: int,
        parent_idx: int,
        ops: Sequence[bytes],
        vars: Sequence[bytes],
        head: bytes,
        tail: bytes,
    ) -> None:
        self.idx = idx
        self.parent_idx = parent_idx
        self._ops = Items.of(ops)
        self._vars = Items.of(vars)
        self.head = head  # the serialized fields before `vars` (idx, parent_idx)
        self.tail = tail  # the serialized fields after `ops` (forward_block_idx, unknown fields)

    @property
    def ops(self) -> Items:
        return self._ops

    @ops.setter
    def ops(self, items: Sequence[bytes]) -> None:
        self._ops = Items.of(items)

    @property
    def vars(self) -> Items:
        return self._vars

    @vars.setter
    def vars(self, items: Sequence[bytes]) -> None:
        self._vars = Items.of(items)

    def size(self) -> int:
        """Bytes of this block's serialized message."""
        return len(self.head) + self.vars.field_size() + self.ops.field_size() + len(self.tail)

    def pieces(self, size: int | None = None) -> Iterator[bytes | memoryview]:
        """The block as a `ProgramDesc.blocks` field, in pieces (`size`: its size, if known)."""
        yield block_field_start(self.head, self.size() if size is None else size)
        yield from self.vars.pieces(VAR_TAG)
        yield from self.ops.pieces(OP_TAG)
        yield self.tail


@dataclass
class Program:
    """A loaded program: its blocks, its other fields, and where it came from."""

    blocks: list[Block]
    header: view.LazyProgram  # every ProgramDesc field but `blocks`
    source: str = "<memory>"
    size: int = 0
    warnings: list[str] = field(default_factory=list)
    pir: PirOrigin | None = None  # set when read from a PIR program (JSON), which is not written

    @property
    def is_pir(self) -> bool:
        return self.pir is not None

    def pieces(self, sizes: list[int] | None = None) -> Iterator[bytes | memoryview]:
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


def corrupt_op(block: int, op: int) -> ProgramFileError:
    return ProgramFileError(
        f"not a program: op {op} of block {block} is corrupt (not a valid OpDesc)"
    )


def corrupt_var(block: int, pos: int) -> ProgramFileError:
    return ProgramFileError(
        f"not a program: variable {pos} of block {block} is corrupt (not a valid VarDesc)"
    )


def is_text_path(path: Path) -> bool:
    return path.suffix.lower() in TEXT_SUFFIXES


def is_text_name(spec: str | os.PathLike[str]) -> bool:
    """True when a path's extension says text format (.pbtxt, .textproto, .txtpb); "-" is not."""
    name = os.fspath(spec)
    return name != STDIO and is_text_path(Path(name))


@gc_paused
def read_program(spec: str | os.PathLike[str], *, text: bool | None = None) -> Program:
    """Load a program from a path, or "-" for stdin; ProgramFileError (exit 3) if it is not one.

    `text`: True for text format, False for binary; None decides by extension for a
    regular file and detects the format for stdin, FIFOs and devices (module docstring)."""
    spec = validate.file_name(spec, "the program")  # a name no file can have: refused, not a crash
    if text is None and is_text_name(spec):
        text = True
    check = StreamCheck("stdin" if os.fspath(spec) == STDIO else os.fspath(spec), text)
    source = read_input(spec, limit=MAX_PROGRAM_BYTES, check=check, mapped=text is not True)
    shown = source.shown
    data: Whole
    if source.stream:  # told apart by content, the same way for a file and for stdin
        assert isinstance(source.data, bytearray)  # a stream is read, never mapped
        data, found = check.finish(source.data)
    else:
        data = decompressed(source.data, shown)
        found = file_format(data, text)
    del source
    if found == "binary":
        return _binary(data, source=shown)
    data = in_memory(data)  # the text and PIR readers take bytes, not a mapped file
    if found == "json":
        return _parse_pir(data, source=shown)
    size = len(data)
    msg = _parse_protobuf(data, shown, found)
    del data  # the lazy message holds its own copy; free the file's before splitting it
    return _split(msg, source=shown, size=size)


def _parse_protobuf(data: bytes | bytearray, shown: str, found: Format) -> view.LazyProgram:
    """`_parse`, or, for bytes that began as PIR's JSON but hold a 0xFF (so are no JSON),
    the PIR reader's reason they are no PIR program."""
    try:
        return _parse(data, source=shown, text=found == "text")
    except ProgramFileError as e:
        if found != "binary" or not begins_as_pir(data):
            raise
        error = e
    try:
        pir.parse_pir(data, source=shown, max_blocks=MAX_BLOCKS)
    except ProgramFileError as e:
        error = e
    raise error


def nested_too_deeply(data: bytes | bytearray, descriptor: Any) -> bool:
    """True when `data`, read as the message type `descriptor`, nests messages and groups
    deeper than MAX_DEPTH (what upb refuses as "corrupt"). False for bytes that are corrupt
    for another reason. Linear in the bytes; meant for explaining a decode error."""
    # (message type, or None inside an unknown group; where it ends; its group field or 0)
    stack: list[tuple[Any, int, int]] = [(descriptor, len(data), 0)]
    pos = 0
    try:
        while stack:
            _, end, group = stack[-1]
            if pos >= end:
                if group or pos > end:
                    return False
                stack.pop()
                continue
            pos = _next_level(data, pos, stack)
            if pos < 0:
                return False
            if len(stack) - 1 > MAX_DEPTH:
                return True
    except ValueError:
        return False
    return False


def _next_level(data: bytes | bytearray, pos: int, stack: list[tuple[Any, int, int]]) -> int:
    """Step over the field at `pos` inside the message on top of `stack`, entering it when it
    is a message or group; returns where to go on, -1 when the bytes are corrupt."""
    desc, end, group = stack[-1]
    got = varint_at(data, pos)
    if got is None:
        return -1
    tag, pos = got
    number, wire = tag >> 3, tag & 7
    if wire == 0:
        got = varint_at(data, pos)
        return -1 if got is None else got[1]
    if wire in (1, 5):
        return pos + (8 if wire == 1 else 4)
    if wire == 2:
        got = varint_at(data, pos)
        if got is None or got[1] + got[0] > end:
            return -1
        size, pos = got
        field_ = desc.fields_by_number.get(number) if desc is not None else None
        if field_ is not None and field_.message_type is not None:
            stack.append((field_.message_type, pos + size, 0))
            return pos
        return pos + size
    if wire == 3:
        stack.append((None, end, number))
        return pos
    if wire == 4 and group == number:
        stack.pop()
        return pos
    return -1


@gc_paused
def parse_program(
    data: bytes | bytearray, *, source: str = "<memory>", text: bool = False
) -> Program:
    """Parse program bytes (a PIR program's JSON too, and either compressed with xz or
    gzip); ProgramFileError (exit 3) when they do not hold a program."""
    data = in_memory(decompressed(data, source))
    found = file_format(data, bool(text))
    if found == "json":
        return _parse_pir(data, source=source)
    if found == "binary":
        return _binary(bytes(data), source=source)  # a copy: the caller may change `data`
    return _split(_parse_protobuf(data, source, found), source=source, size=len(data))


def _binary(data: Buffer | bytearray, *, source: str) -> Program:
    """A binary program: kept as ranges of `data` when protobuf framed it (`framing`),
    else parsed whole (which says why when it is not a program)."""
    if isinstance(data, bytearray):
        data = bytes(data)
    framing = find_framing(data, MAX_BLOCKS) if data else None
    program = _from_framing(data, framing, source) if framing is not None else None
    if program is not None:
        return program
    size = len(data)
    msg = _parse_protobuf(in_memory(data), source, "binary")
    del data  # the lazy message holds its own copy
    return _split(msg, source=source, size=size)


def in_memory(data: Buffer | bytearray) -> bytes | bytearray:
    """`data` as bytes in memory (a mapped file copied)."""
    return data[:] if isinstance(data, mmap.mmap) else data


def _from_framing(buf: Buffer, framing: Framing, source: str) -> Program | None:
    """The program whose blocks `framing` found in `buf`, or None when its other fields are
    not what the whole parse would read (then the program is parsed whole)."""
    try:
        header = view.LazyProgram.FromString(framing.header)
    except DecodeError:
        return None
    if header.blocks:
        return None
    blocks = []
    for b in framing.blocks:
        rest = b.head + b.tail  # what the block holds besides its vars and ops
        try:  # as a block of a program: nesting counts from the program, as the whole parse's
            lazy = view.LazyProgram.FromString(block_field_start(rest, len(rest))).blocks[0]
        except DecodeError:
            return None
        if lazy.vars or lazy.ops or lazy.SerializeToString() != rest:
            return None
        ops = Items(buf=buf, starts=b.ops.starts, ends=b.ops.ends, region=b.ops.region)
        vars_ = Items(buf=buf, starts=b.vars.starts, ends=b.vars.ends, region=b.vars.region)
        blocks.append(Block(b.idx, b.parent_idx, ops, vars_, head=b.head, tail=b.tail))
    return Program(blocks=blocks, header=header, source=source, size=len(buf))


def _parse_pir(data: bytes | bytearray, *, source: str) -> Program:
    read = pir.parse_pir(data, source=source, max_blocks=MAX_BLOCKS)
    blocks = [
        Block(idx=b, parent_idx=p, ops=ops, vars=vars_, head=block_head(b, p), tail=b"")
        for b, (p, ops, vars_) in enumerate(read.blocks)
    ]
    header = view.LazyProgram()
    header.process_meshes.extend(read.process_meshes)
    return Program(blocks=blocks, header=header, source=source, size=len(data), pir=read.origin)


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


def _parse(data: bytes | bytearray, *, source: str, text: bool) -> view.LazyProgram:
    empty = not data.strip() if text else not data
    if empty:
        raise ProgramFileError(f"cannot load {source}: the file is empty, not a program")
    if text:
        data = _text_to_binary(data, source)
    try:
        msg = view.LazyProgram.FromString(data)  # type: ignore[arg-type]  # any buffer parses
    except DecodeError:
        if nested_too_deeply(data, view.LazyProgram.DESCRIPTOR):
            raise too_deep(source) from None
        raise not_protobuf(source, data) from None
    _check_blocks(msg, source)
    return msg


def _text_to_binary(data: bytes | bytearray, source: str) -> bytes:
    if b"\x00" in data:
        raise ProgramFileError(f"cannot load {source}: {TEXT_BYTES}")
    try:
        text = cut_long_literals(data.decode("utf-8"))  # bounded memory: see literals.py
        msg = text_format.Parse(text, pb.ProgramDesc())
    except UnicodeDecodeError:
        raise ProgramFileError(f"cannot load {source}: {TEXT_BYTES}") from None
    except text_format.ParseError as e:
        raise ProgramFileError(
            f"cannot load {source}: not a program in text format: {_short_reason(str(e))}"
        ) from None
    missing = msg.FindInitializationErrors()  # type: ignore[attr-defined]
    if missing:
        raise ProgramFileError(
            f"cannot load {source}: required field {missing[0]} is missing"
            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
        )
    return msg.SerializeToString()


_CONTEXT = 200  # characters of a text parse error's quoted line kept around the error


def _short_reason(reason: str) -> str:
    """A parse error on one line, its quoted context cut to about _CONTEXT characters around
    the column (a one-line file would otherwise be echoed whole)."""
    where, sep, message = reason.partition(" : ")
    if sep and message.startswith("'") and "': " in message:
        quoted, _, rest = message[1:].rpartition("': ")
        column_text = where.rpartition(":")[2]
        column = int(column_text) if column_text.isdigit() else 0
        if len(quoted) > _CONTEXT:
            lo = max(0, min(column - _CONTEXT // 2, len(quoted) - _CONTEXT))
            quoted = (
                ("..." if lo else "")
                + quoted[lo : lo + _CONTEXT]
                + ("..." if lo + _CONTEXT < len(quoted) else "")
            )
        reason = f"{where} : '{quoted}': {rest}"
    reason = " ".join(reason.split())  # it quotes the offending line, control characters too
    if len(reason) > 2 * _CONTEXT:
        reason = reason[: _CONTEXT + 50] + " ... " + reason[-(_CONTEXT // 2) :]
    return reason


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
    data = program.to_bytes()
    try:
        return pb.ProgramDesc.FromString(data)
    except DecodeError:
        if nested_too_deeply(data, pb.ProgramDesc.DESCRIPTOR):
            raise too_deep(program.source) from None
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
