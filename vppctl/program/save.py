"""Save: a `Program` in memory -> bytes in an output (`vppctl.program.files.Output`).

    out = resolve_output(spec, binary=not text, inputs=[src])   # vppctl.program.destinations
    written, warnings = write_program(program, out)

`write_program` writes binary protobuf or protobuf text as `out.binary` says
(decided by the caller, e.g. with `is_text_name(spec)` for the extension
rule). A binary program is written in pieces straight from its blocks, never
held whole in memory a second time; its size is known before the first byte is
written, and a program of 2 GiB or more (which protobuf cannot read back) is
refused then (`check_size`, ConversionError, exit 4). Text output must read
back to the same program: a string that is not UTF-8 (which text format cannot
hold) is refused, not written. Where the bytes go, atomically or straight into
a device, is `vppctl.program.files`'s job.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence

from google.protobuf import text_format
from google.protobuf.message import EncodeError

from vppctl import progress, validate
from vppctl.errors import ConversionError, UsageError
from vppctl.gcpause import gc_paused
from vppctl.program.destinations import resolve_output
from vppctl.program.files import Output, write_all
from vppctl.program.load import (
    Program,
    has_unknown_fields,
    is_text_name,
    to_full,
)
from vppctl.program.sniff import MAX_PROGRAM_BYTES

UNKNOWN_FIELDS_WARNING = (
    "text format cannot carry fields vppctl does not know; they are left out (write a binary "
    "file to keep them)"
)


STRIP_FIX = "drop op_callstack attributes (--strip-callstack) or use fewer layers"


def check_size(size: int, *, text: bool = False, fix: str = STRIP_FIX) -> None:
    """ConversionError (exit 4) when a program of `size` bytes could not be read back:
    protobuf parses no message of 2 GiB or more (and vppctl reads no file that large)."""
    if size <= MAX_PROGRAM_BYTES:
        return
    what = "its text" if text else "it"
    raise ConversionError(
        f"the program cannot be written: {what} would be {size / 2**30:.2f} GiB and protobuf "
        f"cannot read a message of 2 GiB or more; {fix}"
    )


def serialize(program: Program, *, text: bool) -> tuple[bytes, list[str]]:
    """The program's bytes, binary or text, and any warnings. ConversionError (exit 4) when
    they could not be read back (2 GiB or more, or a string that is not UTF-8 as text)."""
    try:
        if not text:
            check_size(program.byte_size())
            return program.to_bytes(), []
        full = to_full(program)
        warnings = [UNKNOWN_FIELDS_WARNING] if has_unknown_fields(full) else []
        data = text_format.MessageToString(full).encode("utf-8")
    except EncodeError as e:
        # The size was checked first: what is left is upb failing to get memory.
        raise MemoryError(f"serializing the program: {e}") from e
    except ValueError as e:
        raise ConversionError(
            f"the program cannot be serialized ({e}); protobuf limits a message to 2 GiB"
        ) from None
    check_size(len(data), text=True)
    _check_strings_are_utf8(data)
    return data, warnings


# In printed protobuf text, a run of escaped bytes >= 0x80 inside a quoted string; an escaped
# backslash is matched first so that `\\303` is not taken for a byte.
_HIGH_ESCAPES = re.compile(rb"\\\\|((?:\\[23][0-7][0-7])+)")


def _check_strings_are_utf8(text: bytes) -> None:
    """ConversionError unless every string in printed text format is UTF-8 once unescaped.

    program.proto has no bytes fields, so every quoted literal is a string. The printer
    writes valid UTF-8 as it is and escapes other bytes >= 0x80 as \\ooo (all of them, with
    as_utf8=False); the parser unescapes a string and decodes it as UTF-8, which succeeds
    exactly when each run of escaped high bytes decodes (what lies between is ASCII or
    whole UTF-8 characters)."""
    for match in _HIGH_ESCAPES.finditer(text):
        run = match.group(1)
        if run is None:
            continue
        raw = bytes(int(run[i + 1 : i + 4], 8) for i in range(0, len(run), 4))
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            start = max(0, text.rfind(b'"', 0, match.start()) + 1)
            shown = text[start : match.end() + 20].split(b'"')[0][:80].decode("utf-8", "replace")
            raise ConversionError(
                f'the program cannot be written as text: the string "{shown}" is not UTF-8, '
                "and text format holds only UTF-8 strings; write a binary file instead"
            ) from None


@gc_paused
def write_program(
    program: Program,
    output: Output | str | os.PathLike[str],
    *,
    text: bool | None = None,
    beside: Sequence[tuple[Output, bytes]] = (),
) -> tuple[int, list[str]]:
    """Serialize and write; returns (bytes written, warnings).

    With an `Output` the format is `not output.binary` (`text` must agree if given).
    With a path the output is resolved here, and `text` None means by its extension.
    `beside`: other files written with it, all or nothing (`write_all`).
    ConversionError (exit 4) for a program that could not be read back, nothing written;
    ProgramFileError (exit 3) when the output cannot be written."""
    if not isinstance(program, Program):
        raise UsageError(
            f"write_program takes a Program first, not {type(program).__name__}: "
            "write_program(program, out); read one with read_program(path)"
        )
    if program.is_pir:
        raise ConversionError(
            f"{program.source} is a PIR program (Paddle 3.x JSON), and vppctl writes no PIR: "
            "Paddle cannot load a distributed PIR program back; `vppctl inspect` shows what "
            "vppctl read of it"
        )
    if not isinstance(output, Output):
        output = validate.file_name(output, "write_program's output")
        text = is_text_name(output) if text is None else text
        output = resolve_output(output, binary=not text)
    elif text is None:
        text = not output.binary
    elif text == output.binary:
        raise ValueError("write_program: text= contradicts the output's binary flag")
    if text:
        progress.phase("writing")  # most of it is the text serialization
        data, warnings = serialize(program, text=True)
        write_all([(output, data), *beside])
        progress.advance(len(data))
        return len(data), warnings + output.warnings()
    sizes = [b.size() for b in program.blocks]
    size = program.byte_size(sizes)
    check_size(size)
    progress.phase("writing", size)
    write_all([(output, lambda: _reported(program.pieces(sizes))), *beside])
    return size, output.warnings()


def write_serialized(data: bytes, output: Output) -> tuple[int, list[str]]:
    """A binary program already serialized in protobuf's canonical form (`vppctl sample`'s
    bytes), written as it is, the writing phase reported as `write_program` reports it;
    returns (bytes written, warnings). The caller has checked its size (`check_size`)."""
    progress.phase("writing", len(data))
    view = memoryview(data)
    output.write(lambda: _reported(view[i : i + _PIECE] for i in range(0, len(view), _PIECE)))
    return len(data), output.warnings()


# The piece of already serialized bytes written between two reports of progress.
_PIECE = 16 << 20


def _reported(pieces: Iterator[bytes | memoryview]) -> Iterator[bytes | memoryview]:
    """`pieces`, telling the progress observer the bytes written so far."""
    done = 0
    for piece in pieces:
        yield piece
        done += len(piece)
        progress.advance(done)
