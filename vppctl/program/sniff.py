"""Sniff: the format of a program's bytes, told by their content, and the check that refuses a
stream as soon as its bytes cannot begin a program.

A program is a serialized ProgramDesc (binary protobuf), protobuf text format, or a Paddle
3.x PIR program's JSON; any of them may be compressed with xz or gzip. The content says
which, for a file as for stdin, a FIFO or a device:

- compressed: the bytes begin with xz's magic (FD 37 7A 58 5A 00) or gzip's (1F 8B): they
  are decompressed, at most MAX_PROGRAM_BYTES of them, and the rules below apply to what
  they hold. No binary program begins so (gzip's first byte is a tag of wire type 7, which
  protobuf has not; xz's magic is a fixed32 field followed by a tag of field 0, which is
  invalid), and no text or JSON either.
- JSON: the first non-blank byte opens an object (`{`) and no byte is 0xFF. Every binary
  program holds a 0xFF (block 0's `parent_idx` is -1, a varint of ten bytes, nine of
  them 0xFF) and UTF-8 never does, so a binary program is never taken for JSON, even one
  whose first block is 123 bytes long (it begins 0A 7B, `\\n{`).
- text: UTF-8 without NUL bytes beginning (after blanks) with a field name or a `#`
  comment (`looks_like_text`; a file: its first 64 KiB). 0xFF rules out a binary program
  here too.
- binary: anything else.

A stream is checked after every piece it delivers (`StreamCheck`), each format on its
own: it is refused once it can be none of them, so /dev/zero, /dev/urandom or `{"base_code":
{` followed by gigabytes of NUL bytes cost one piece, not 2 GiB. A stream that began as a
PIR program's JSON is refused with the reason it cannot be one (a byte JSON never holds,
bytes that are not UTF-8, a header that is not PIR's); any other one that began with `{` is
no program, as random bytes are.
"""

from __future__ import annotations

import codecs
import json
import lzma
import mmap
import re
import zlib
from typing import Literal

from vppctl.errors import ProgramFileError
from vppctl.program import pir  # its reader loads on use: most programs are not PIR
from vppctl.program.wire import varint_at

Format = Literal["binary", "text", "json"]
Compression = Literal["xz", "gzip"]
# Whole bytes of a file: read, or mapped (`files.read_input(mapped=True)`).
Whole = bytes | bytearray | mmap.mmap

# protobuf refuses to parse or serialize a message of 2 GiB or more.
MAX_PROGRAM_BYTES = 2**31 - 1
# upb's nesting limit: the program is depth 0, each message or group inside one more.
MAX_DEPTH = 100

_MAGICS: dict[Compression, bytes] = {"xz": b"\xfd7zXZ\x00", "gzip": b"\x1f\x8b"}
_MAGIC_BYTES = max(len(m) for m in _MAGICS.values())
# Magic bytes of compressions vppctl does not read, named when such bytes are no program.
_OTHER_MAGICS = {b"BZh": "bzip2", b"\x28\xb5\x2f\xfd": "zstd", b"PK\x03\x04": "zip"}

# Bytes of a regular file whose content decides between text and binary (its first bytes
# are enough: a binary program has a NUL or bytes that are not UTF-8 within its first
# block's header).
SNIFF_BYTES = 1 << 16


def compression(data: Whole) -> Compression | None:
    """The compression whose magic bytes `data` begins with, if any."""
    for kind, magic in _MAGICS.items():
        if data[: len(magic)] == magic:
            return kind
    return None


def other_compression(data: bytes | bytearray) -> str | None:
    """The name of a compression vppctl does not read whose magic `data` begins with."""
    for magic, name in _OTHER_MAGICS.items():
        if data[: len(magic)] == magic:
            return name
    return None


def file_format(data: Whole, text: bool | None) -> Format:
    """The format of a whole program's (decompressed) bytes; `text` as asked (None:
    detected)."""
    if text:
        return "text"
    if looks_like_json(data):
        return "json"
    if text is None and starts_like_text(data):
        return "text"
    return "binary"


_JSON_BLANKS = b" \t\n\r"


def looks_like_json(data: Whole) -> bool:
    """JSON (a PIR program, `vppctl.program.pir`): the first non-blank byte opens an object,
    and no byte is 0xFF, which every binary program holds and UTF-8 never does."""
    return data[:64].lstrip(_JSON_BLANKS)[:1] == b"{" and b"\xff" not in data


# How every PIR program's JSON begins.
PIR_START = re.compile(rb'[ \t\n\r]*\{[ \t\n\r]*"base_code"[ \t\n\r]*:[ \t\n\r]*\{')


def begins_as_pir(data: bytes | bytearray) -> bool:
    """The bytes begin as a PIR program's JSON does (its header's key), whatever follows."""
    return PIR_START.match(data[:4096]) is not None


def starts_like_text(data: Whole) -> bool:
    """The format rule of `looks_like_text` on the start of a file: text when its first
    SNIFF_BYTES are UTF-8 (a character cut at the end allowed) without NUL bytes and
    begin with a field name or a comment."""
    check = StreamCheck("<file>", None)
    check.feed_text(bytes(data[:SNIFF_BYTES]))
    return check.may_be_text and bool(check.starts_like_text)


def looks_like_text(data: bytes | bytearray) -> bool:
    """The format rule for bytes of unknown format: text when UTF-8 without NUL bytes whose
    first non-blank character starts a field name or a comment, else binary."""
    check = StreamCheck("<memory>", None)
    check.feed_text(bytes(data))
    return check.is_text()


def not_protobuf(source: str, data: bytes | bytearray = b"") -> ProgramFileError:
    other = other_compression(data)
    if other is not None:
        return ProgramFileError(
            f"cannot load {source}: not a program vppctl reads: it is {other}-compressed, and "
            "vppctl reads xz and gzip; decompress it first"
        )
    return ProgramFileError(
        f"cannot load {source}: not a program (not a valid protobuf message: truncated "
        "or corrupt bytes); check that it is a serialized ProgramDesc"
    )


def too_deep(source: str) -> ProgramFileError:
    return ProgramFileError(
        f"cannot load {source}: not a program: its messages are nested too deeply (more than "
        f"{MAX_DEPTH} levels, protobuf's limit)"
    )


def not_pir(source: str, reason: str) -> ProgramFileError:
    return ProgramFileError(f"cannot load {source}: not a PIR program: {reason}")


TEXT_BYTES = "text format must be UTF-8 without NUL bytes"


# -- compressed bytes -------------------------------------------------------------------------


class Unpacking:
    """xz or gzip bytes decompressed as they arrive (concatenated streams too), at most
    `limit` bytes of output: more is refused before it is made, so a small file that
    decompresses to terabytes costs `limit`."""

    def __init__(self, kind: Compression, shown: str, limit: int = MAX_PROGRAM_BYTES) -> None:
        self.kind, self.shown, self.limit = kind, shown, limit
        self.out = bytearray()
        self._engine: lzma.LZMADecompressor | zlib._Decompress | None = self._new()
        self._pending = b""  # bytes after a finished stream: the next one's start

    def _new(self) -> lzma.LZMADecompressor | zlib._Decompress:
        if self.kind == "xz":
            return lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
        return zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)

    def feed(self, data: bytes) -> None:
        data = self._pending + data
        self._pending = b""
        while data:
            if self._engine is None:  # a stream ended: another may follow
                magic = _MAGICS[self.kind]
                if len(data) < len(magic) and magic.startswith(data):
                    self._pending = data
                    return
                if not data.startswith(magic):
                    raise self._error(f"bytes after its {self.kind} data")
                self._engine = self._new()
            data = self._step(self._engine, data)

    def _step(self, engine: lzma.LZMADecompressor | zlib._Decompress, data: bytes) -> bytes:
        room = self.limit + 1 - len(self.out)
        try:
            piece = engine.decompress(data, room)
        except (lzma.LZMAError, zlib.error) as e:
            raise self._error(f"corrupt {self.kind} data ({e})") from None
        self.out += piece
        if len(self.out) > self.limit:
            raise ProgramFileError(
                f"cannot read {self.shown}: it decompresses ({self.kind}) to more than "
                f"{(self.limit + 1) / 2**30:.0f} GiB, and protobuf cannot parse a message of "
                "2 GiB or more"
            )
        if not engine.eof:
            return b""
        self._engine = None
        return bytes(engine.unused_data)

    def finish(self) -> bytearray:
        """The whole output, once the input has ended."""
        if self._engine is not None or self._pending:
            raise self._error(f"{self.kind} data that ends early (is the file truncated?)")
        return self.out

    def _error(self, what: str) -> ProgramFileError:
        return ProgramFileError(
            f"cannot load {self.shown}: not a program: it is {self.kind}-compressed, with {what}"
        )


def decompressed(data: Whole, shown: str) -> Whole:
    """`data`, decompressed when it begins with xz's or gzip's magic."""
    kind = compression(data)
    if kind is None:
        return data
    unpacking = Unpacking(kind, shown)
    unpacking.feed(bytes(data))
    out = unpacking.finish()
    again = compression(out)
    if again is not None:
        raise compressed_twice(shown, again)
    return out


def compressed_twice(shown: str, kind: Compression) -> ProgramFileError:
    return ProgramFileError(
        f"cannot load {shown}: not a program vppctl reads: what it decompresses to is "
        f"{kind}-compressed again, and vppctl decompresses once"
    )


# -- the check of a stream ----------------------------------------------------------------------


class StreamCheck:
    """Called with a stream's bytes so far after each piece: refuses the stream as soon as
    they cannot begin a program in the format asked (any format, when detecting), and says
    at the end which format they are in. Compressed bytes are decompressed as they come,
    and their content is checked (`unpacking`, `inner`)."""

    def __init__(self, shown: str, text: bool | None, *, unpack: bool = True) -> None:
        self.shown = shown
        self.text = text
        self.unpack = unpack  # False inside compressed bytes: compressed again is refused
        self.seen = 0
        self.may_be_text = text is not False
        self.may_be_binary = text is not True
        self.may_be_json = text is not True
        self.starts_like_text: bool | None = None
        self.utf8 = codecs.getincrementaldecoder("utf-8")()
        self.frames = _Frames()
        self.json = _JsonStart()
        self.unpacking: Unpacking | None = None
        self.inner: StreamCheck | None = None
        self._compressed: bool | None = None  # decided by the first bytes

    def __call__(self, buf: bytearray) -> None:
        if self._compressed is None:
            kind = compression(buf)
            if kind is None and len(buf) < _MAGIC_BYTES and _magic_prefix(buf):
                return  # too few bytes to tell yet
            self._compressed = kind is not None
            if kind is not None and not self.unpack:
                raise compressed_twice(self.shown, kind)
            if kind is not None:
                self.unpacking = Unpacking(kind, self.shown)
                self.inner = StreamCheck(self.shown, self.text, unpack=False)
        if self.unpacking is not None and self.inner is not None:
            self.unpacking.feed(bytes(buf[self.seen :]))
            self.seen = len(buf)
            if self.unpacking.out:
                self.inner(self.unpacking.out)
            return
        new = bytes(buf[self.seen :])
        self.seen = len(buf)
        if self.may_be_json:
            self.may_be_json = self.json.feed(buf)
        if self.may_be_text:
            self.feed_text(new)
        if self.may_be_binary:
            self.may_be_binary = self.frames.feed(buf)
        if not (self.may_be_text or self.may_be_binary or self.may_be_json):
            raise self._refusal(buf)

    def _refusal(self, buf: bytearray) -> ProgramFileError:
        if self.json.reason is not None:
            return not_pir(self.shown, self.json.reason)
        if self.text:
            return ProgramFileError(f"cannot load {self.shown}: {TEXT_BYTES}")
        if self.frames.deep:
            return too_deep(self.shown)
        return not_protobuf(self.shown, buf)

    def feed_text(self, new: bytes) -> None:
        if self.starts_like_text is None:
            first = new.lstrip()[:1]
            if first:
                self.starts_like_text = bool(_TEXT_START.match(first))
                if self.text is None and not self.starts_like_text:
                    self.may_be_text = False
                    return
        try:
            self.utf8.decode(new)
        except UnicodeDecodeError:
            self.may_be_text = False
            return
        if b"\x00" in new:
            self.may_be_text = False

    def is_text(self) -> bool:
        if not (self.may_be_text and self.starts_like_text):
            return False
        try:
            self.utf8.decode(b"", final=True)
        except UnicodeDecodeError:
            return False
        return True

    def finish(self, data: bytearray) -> tuple[bytes | bytearray, Format]:
        """The stream's content (decompressed) and its format, once it has ended."""
        if self._compressed is None:  # fewer bytes than a magic: check them now
            self._compressed = False
            if data:
                self(data)
        if self.unpacking is not None and self.inner is not None:
            return self.inner.finish(self.unpacking.finish())
        if self.may_be_json and self.json.opened:
            return data, "json"
        if self.text is not None:
            return data, "text" if self.text else "binary"
        return data, "text" if self.is_text() else "binary"


def _magic_prefix(buf: bytearray) -> bool:
    return any(magic.startswith(bytes(buf)) for magic in _MAGICS.values())


_TEXT_START = re.compile(rb"[A-Za-z_#]")
# Bytes JSON text never holds: control characters but its blanks (they must be escaped in a
# string), and 0xFF, which no UTF-8 holds (what makes a binary program no JSON).
_NOT_JSON = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\xff]")
_HEADER_BYTES = 1 << 16  # bytes a stream's PIR header is looked for in; the reader checks later
_HEADER_KEY = re.compile(r'[ \t\n\r]*\{[ \t\n\r]*"base_code"[ \t\n\r]*:[ \t\n\r]*')


class _JsonStart:
    """Whether a stream's bytes so far can begin a PIR program's JSON; once they cannot,
    why (`reason`), when they began as one."""

    def __init__(self) -> None:
        self.opened = False  # the first non-blank byte was `{`
        self.header = False  # they begin as PIR's header, {"base_code": {
        self.header_read = False
        self.tried = 0  # bytes the header was last decoded from
        self.seen = 0
        self.utf8 = codecs.getincrementaldecoder("utf-8")()
        self.reason: str | None = None

    def feed(self, buf: bytearray) -> bool:
        start, self.seen = self.seen, len(buf)
        if not self.opened:
            first = buf[:_HEADER_BYTES].lstrip(_JSON_BLANKS)[:1]
            if not first:
                return True
            if first != b"{":
                return False
            self.opened = True
        if not self.header:
            self.header = begins_as_pir(buf)
        new = bytes(buf[start:])
        bad = _NOT_JSON.search(new)
        if bad:
            return self._refuse(
                f"byte {start + bad.start():,} is 0x{new[bad.start()]:02x}, which JSON text "
                "never holds"
            )
        try:
            self.utf8.decode(new)
        except UnicodeDecodeError as e:
            return self._refuse(f"its JSON is not UTF-8 (byte {start + e.start:,})")
        if not self.header and len(buf) >= 64:
            self.reason = (
                'the JSON does not begin with PIR\'s header ({"base_code": {"magic": "pir", ...)'
            )
            return False
        if self.header and not self.header_read:
            return self._check_header(buf)
        return True

    def _refuse(self, reason: str) -> bool:
        if self.header:  # it began as a PIR program: say why it is none
            self.reason = reason
        return False

    def _check_header(self, buf: bytearray) -> bool:
        """The header's magic and version, once its object has arrived (decoded again only
        when the bytes have doubled: linear however the stream is cut)."""
        if len(buf) < 2 * self.tried and len(buf) < _HEADER_BYTES:
            return True
        self.tried = len(buf)
        text = bytes(buf[:_HEADER_BYTES]).decode("utf-8", "ignore")
        at = _HEADER_KEY.match(text)
        if at is None:  # cannot be: begins_as_pir matched the same (ASCII) bytes
            return True
        try:
            header, _ = json.JSONDecoder().raw_decode(text, at.end())
        except (ValueError, RecursionError):  # not whole yet (or too long: the reader judges)
            self.header_read = len(buf) >= _HEADER_BYTES
            return True
        self.header_read = True
        problem = pir.header_problem(header)
        if problem is not None:
            self.reason = problem
            return False
        return True


_MAX_FRAMES = 4096  # top-level fields a stream check walks; past them only the limit holds


class _Frames:
    """Walks the top-level fields of a binary message as its bytes arrive: False as soon as
    they cannot be protobuf (field 0, wire type 6 or 7, an end-group without its start,
    groups nested deeper than MAX_DEPTH, a varint over 10 bytes, a length over 2 GiB)."""

    def __init__(self) -> None:
        self.pos = 0
        self.fields = 0
        self.groups: list[int] = []
        self.deep = False

    def feed(self, buf: bytearray) -> bool:
        try:
            while self.pos < len(buf) and self.fields < _MAX_FRAMES:
                end = self._field(buf, self.pos)
                if end is None:
                    return True  # the field goes on in the next piece
                if end < 0:
                    return False
                self.pos = end
                self.fields += 1
        except ValueError:
            return False
        return True

    def _field(self, buf: bytearray, pos: int) -> int | None:
        """The end of the field at `pos`; None when the bytes end inside its tag or length,
        -1 when it cannot be protobuf."""
        got = varint_at(buf, pos)
        if got is None:
            return None
        tag, pos = got
        number, wire = tag >> 3, tag & 7
        if number == 0 or tag > 0xFFFFFFFF or wire > 5:
            return -1
        if self.fields == 0 and not self._first_field_ok(buf, number, wire, pos):
            return -1
        if wire == 0:
            got = varint_at(buf, pos)
            return None if got is None else got[1]
        if wire in (1, 5):
            return pos + (8 if wire == 1 else 4)
        if wire == 2:
            got = varint_at(buf, pos)
            if got is None:
                return None
            return -1 if got[0] > MAX_PROGRAM_BYTES else got[1] + got[0]
        if wire == 3:
            self.groups.append(number)
            self.deep = len(self.groups) > MAX_DEPTH
            return -1 if self.deep else pos
        if not self.groups or self.groups.pop() != number:  # wire 4: end group
            return -1
        return pos

    @staticmethod
    def _first_field_ok(buf: bytearray, number: int, wire: int, pos: int) -> bool:
        """A serialized ProgramDesc starts with one of its own fields, length-delimited, in
        practice `blocks` (protobuf writes fields in number order), and a block with one
        of BlockDesc's fields (in practice `idx`; any of them, since protobuf reads the
        fields in any order): random bytes fail this at once, not after a long field."""
        if wire != 2 or number not in _PROGRAM_FIELDS:
            return False
        if number != 1:
            return True
        got = varint_at(buf, pos)  # the block's length, then its first field's tag
        if got is None or got[1] >= len(buf):
            return True
        tag = varint_at(buf, got[1])
        return tag is None or tag[0] in _BLOCK_TAGS


_PROGRAM_FIELDS = frozenset({1, 4, 5, 1001, 1002})  # blocks, version, op_version_map, vppctl's
# BlockDesc's fields with their wire types: idx, parent_idx, vars, ops, forward_block_idx.
_BLOCK_TAGS = frozenset({1 << 3 | 0, 2 << 3 | 0, 3 << 3 | 2, 4 << 3 | 2, 5 << 3 | 0})
