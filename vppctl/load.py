"""Load: program bytes on disk -> a `Program` in memory.

A program is loaded through the lazy view (`view.proto`): blocks are decoded,
their ops and variables stay serialized until the engine needs them. Saving an
unchanged program therefore gives back the bytes it was loaded from, fields
vppctl does not know included.

Binary protobuf by default; protobuf text format when the path ends in
`.pbtxt`, `.textproto` or `.txtpb`. Anything that is not a program is a
ProgramFileError (exit 3) with a one-line reason.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf import text_format
from google.protobuf.message import DecodeError

from vppctl import program_pb2 as pb
from vppctl import view_pb2 as view
from vppctl.errors import ProgramFileError

TEXT_SUFFIXES = (".pbtxt", ".textproto", ".txtpb")
# protobuf refuses to parse or serialize a message of 2 GiB or more.
MAX_PROGRAM_BYTES = 2**31 - 1


@dataclass
class Program:
    """A loaded program: the lazy message, and where it came from."""

    msg: view.LazyProgram
    source: str = "<memory>"
    size: int = 0
    warnings: list[str] = field(default_factory=list)


def is_text_path(path: Path) -> bool:
    return path.suffix.lower() in TEXT_SUFFIXES


def read_program(path: Path) -> Program:
    """Load a program file (binary or text by extension); ProgramFileError (exit 3) if not."""
    data = _read_bytes(path)
    return parse_program(data, source=str(path), text=is_text_path(path))


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


def parse_program(data: bytes, *, source: str = "<memory>", text: bool = False) -> Program:
    """Parse program bytes; ProgramFileError (exit 3) when they do not hold a program."""
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
    return Program(msg=msg, source=source, size=len(data))


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
        return pb.ProgramDesc.FromString(program.msg.SerializeToString())
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
