"""Telling a program's format by its content (vppctl/program/sniff.py): binary, text, a PIR
program's JSON, compressed with xz or gzip; and refusing a stream as soon as it can be none.

The class a sniffing bug belongs to is every way a valid program can begin: a binary
ProgramDesc begins with one of its fields (in practice `blocks`, tag 0x0A, then the first
block's length as a varint), so every second byte is possible, `{` (a first block of 123
bytes) and the JSON blanks among them. Each is built here and read, from a file, from
bytes and from a stream cut into pieces.
"""

from __future__ import annotations

import gzip
import json
import lzma
import os
from pathlib import Path

import pytest
from iohelpers import FifoWriter
from pir_json import training
from programs import layered

from vppctl.errors import ProgramFileError
from vppctl.program import parse_program, read_program
from vppctl.program._proto import program_pb2 as pb
from vppctl.program.sniff import (
    MAX_PROGRAM_BYTES,
    StreamCheck,
    Unpacking,
    file_format,
    looks_like_json,
)
from vppctl.program.wire import varint

PROGRAM = layered([0, 0, 1, 1], backward=True, optimizer=True).bytes()
PIR = training([0, 1]).bytes()

# -- every way a binary program begins ----------------------------------------------------------

IDX_0 = b"\x08\x00"
PARENT = b"\x10" + b"\xff" * 9 + b"\x01"  # parent_idx -1, as protobuf writes it
PARENT_SHORT = b"\x10\xff\xff\xff\xff\x0f"  # the same as a 5-byte varint, which parsers take


def block0(size: int) -> bytes:
    """A valid block 0 (idx 0, parent -1) of exactly `size` bytes: its fields as protobuf
    writes them or as longer varints, padded with forward_block_idx or a field vppctl does
    not know (field 100, kept as it is)."""
    overlong = b"\x08\x80\x00"  # idx 0 in two bytes
    for head in (IDX_0 + PARENT, overlong + PARENT, IDX_0 + PARENT_SHORT, overlong + PARENT_SHORT):
        rest = size - len(head)
        if rest == 0:
            return head
        if rest == 2:
            return head + b"\x28\x00"  # forward_block_idx 0
        for n in (1, 2, 3):
            payload = rest - 2 - n
            if payload >= 0 and len(varint(payload)) == n:
                return head + b"\xa2\x06" + varint(payload) + b"p" * payload
    raise ValueError(f"no block 0 of {size} bytes")


def program_with_block0(size: int) -> bytes:
    """A binary program whose first field is block 0 of `size` bytes, then a block 1 with
    the ops and variables of PROGRAM's block 0."""
    block = block0(size)
    assert len(block) == size
    body = pb.ProgramDesc.FromString(PROGRAM)
    rest = pb.ProgramDesc()
    b1 = rest.blocks.add(idx=1, parent_idx=0)
    b1.vars.extend(body.blocks[0].vars)
    return b"\x0a" + varint(size) + block + rest.SerializeToString()


def _sizes() -> dict[int, list[int]]:
    """Second byte -> first-block sizes giving it: a one-byte length (8 to 127: a valid
    block 0 takes 8 bytes at least), and for each byte with the high bit, a two- and a
    three-byte length (up to 2^21)."""
    out: dict[int, list[int]] = {}
    for b in range(256):
        if b < 0x80:
            out[b] = [b] if b >= 8 else []
        else:
            out[b] = [(1 << 7) + (b & 0x7F), (1 << 14) + (b & 0x7F)]
    return out


SIZES = _sizes()


@pytest.mark.parametrize("second", [b for b in range(256) if SIZES[b]], ids=lambda b: f"0a{b:02x}")
def test_every_first_block_length_reads_as_binary(second: int, tmp_path: Path) -> None:
    """Was: a first block of 123 bytes (0A 7B, `\\n{`) read as JSON and refused. (Second
    bytes 00 to 07 begin no valid program: block 0 needs its idx and its parent_idx -1,
    8 bytes at the least.)"""
    for size in SIZES[second]:
        data = program_with_block0(size)
        assert data[:2] == bytes((0x0A, second))
        path = tmp_path / "p.pb"
        path.write_bytes(data)
        for program in (read_program(path), parse_program(data)):
            assert not program.is_pir and [b.idx for b in program.blocks] == [0, 1]
        assert _stream_format(data) == "binary"


def test_the_json_blanks_and_brace_after_0a_are_covered() -> None:
    """The second bytes the old rule misread (after `\\n`, a JSON blank: `{` or more
    blanks) all get a program above, `{` with a one-byte length."""
    for b in (0x7B, 0x09, 0x0A, 0x0D, 0x20):
        assert SIZES[b] == [b]
    assert looks_like_json(b'\n{"base_code": {}}') and not looks_like_json(
        program_with_block0(0x7B)
    )


def _reordered(first: int) -> bytes:
    """PROGRAM with its field `first` moved to the front (protobuf reads fields in any
    order): a program beginning with `version`, `op_version_map` or a vppctl field."""
    msg = pb.ProgramDesc.FromString(PROGRAM)
    msg.version.version = 7
    msg.op_version_map.pair.add(op_name="matmul").op_version.version = 1
    msg.process_meshes.add(shape=[1], process_ids=[0])
    msg.pipeline_plan.pp = 2
    name = msg.DESCRIPTOR.fields_by_number[first].name
    alone = pb.ProgramDesc()
    if first == 1001:
        alone.process_meshes.extend(msg.process_meshes)
    else:
        getattr(alone, name).CopyFrom(getattr(msg, name))
    msg.ClearField(name)
    return alone.SerializePartialToString() + msg.SerializePartialToString()


@pytest.mark.parametrize(
    ("first", "head"), [(4, b"\x22"), (5, b"\x2a"), (1001, b"\xca\x3e"), (1002, b"\xd2\x3e")]
)
def test_a_program_beginning_with_another_field_reads_as_binary(
    first: int, head: bytes, tmp_path: Path
) -> None:
    data = _reordered(first)
    assert data.startswith(head)
    path = tmp_path / "p.pb"
    path.write_bytes(data)
    assert not read_program(path).is_pir and not parse_program(data).is_pir
    assert _stream_format(data) == "binary"


def _stream_format(data: bytes) -> str:
    """The format a stream check finds, the bytes arriving in pieces of 1, 2, 3, ... bytes
    and then the rest (a pipe may cut them anywhere)."""
    found = set()
    for cut in (1, 7, 64, 4096):
        check = StreamCheck("<stream>", None)
        buf = bytearray()
        step = 1
        while len(buf) < len(data):
            buf += data[len(buf) : len(buf) + (step if len(buf) < cut else len(data))]
            check(buf)
            step += 1
        found.add(check.finish(buf)[1])
    (one,) = found
    return one


# -- the formats ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "text", "found"),
    [
        (PROGRAM, None, "binary"),
        (PIR, None, "json"),
        (b"  \n" + PIR, None, "json"),
        (PIR, False, "json"),
        (PIR, True, "text"),
        (b"blocks { idx: 0 parent_idx: -1 }", None, "text"),
        (b"{ blocks }", None, "json"),  # JSON's way to begin: the PIR reader says why not
        (b"{\xff", None, "binary"),  # 0xFF: no JSON
    ],
)
def test_the_format_rule(data: bytes, text: bool | None, found: str) -> None:
    assert file_format(data, text) == found


# -- compressed ---------------------------------------------------------------------------------

COMPRESSORS = {"xz": lzma.compress, "gzip": gzip.compress}


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
@pytest.mark.parametrize("what", ["binary", "pir", "text"])
def test_compressed_programs_read_by_content(kind: str, what: str, tmp_path: Path) -> None:
    """Was: the project's own .json.xz fixtures got "not a valid protobuf message", with no
    word about compression."""
    plain = {"binary": PROGRAM, "pir": PIR, "text": b"blocks { idx: 0 parent_idx: -1 }"}[what]
    data = COMPRESSORS[kind](plain)
    path = tmp_path / f"p.{kind}"
    path.write_bytes(data)
    for program in (read_program(path), parse_program(data, text=what == "text")):
        assert program.is_pir == (what == "pir")
        assert program.to_bytes() == parse_program(plain, text=what == "text").to_bytes()
    assert _stream_format(data) == {"binary": "binary", "pir": "json", "text": "text"}[what]


def test_the_reference_fixtures_read_as_they_are(tmp_path: Path) -> None:
    import paths

    for path in sorted(paths.PIR_REFERENCE.glob("*.json.xz"))[:2]:
        program = read_program(path)
        assert program.is_pir and program.to_bytes()


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (lzma.compress(PROGRAM)[:-30], "ends early"),
        (gzip.compress(PROGRAM)[:-30], "ends early"),
        (lzma.compress(PROGRAM)[:20] + b"\x00" * 200, "corrupt xz data"),
        (gzip.compress(PROGRAM) + b"junk", "bytes after its gzip data"),
        (lzma.compress(lzma.compress(PROGRAM)), "compressed again"),
        (b"BZh91AY&SY" + b"\x00" * 40, "bzip2-compressed"),
        (b"\x28\xb5\x2f\xfd" + b"\x00" * 40, "zstd-compressed"),
    ],
)
def test_bad_compressed_input_is_refused_naming_the_compression(
    data: bytes, said: str, tmp_path: Path
) -> None:
    path = tmp_path / "p.bin"
    path.write_bytes(data)
    with pytest.raises(ProgramFileError, match=said):
        read_program(path)
    with pytest.raises(ProgramFileError, match=said):
        _stream(data)


def test_concatenated_streams_read_as_one() -> None:
    data = gzip.compress(PROGRAM[:100]) + gzip.compress(PROGRAM[100:])
    assert parse_program(data).to_bytes() == parse_program(PROGRAM).to_bytes()


def test_a_bomb_is_refused_before_its_output_is_made() -> None:
    """A small input that decompresses past the limit: refused once the output passes it,
    holding at most the limit (here 1 MiB of the 2 GiB)."""
    bomb = lzma.compress(b"\x00" * (8 << 20))
    unpacking = Unpacking("xz", "bomb", limit=1 << 20)
    with pytest.raises(ProgramFileError, match="decompresses"):
        unpacking.feed(bomb)
    assert len(unpacking.out) <= (1 << 20) + 1
    assert MAX_PROGRAM_BYTES == 2**31 - 1


# -- streams refused at once ------------------------------------------------------------------


def _stream(data: bytes, pieces: int = 1 << 20) -> str:
    """Reads `data` through a pipe (as stdin or `<(cmd)` are read); the format found."""
    r, w = os.pipe()
    writer = FifoWriter(w, data)
    writer.start()
    try:
        program = read_program(f"/dev/fd/{r}")
    finally:
        os.close(r)
        writer.join(5)
    return "json" if program.is_pir else "program"


def test_a_stream_beginning_as_pir_then_nul_bytes_is_refused_at_once() -> None:
    """Was: `{"base_code": {` and gigabytes of NUL bytes read to 2 GiB, then an error blaming
    protobuf. Refused at the first NUL, naming JSON."""
    check = StreamCheck("stdin", None)
    buf = bytearray(b'{"base_code": {' + b"\x00" * (1 << 20))
    with pytest.raises(ProgramFileError, match=r"not a PIR program: byte 15 is 0x00"):
        check(buf)


@pytest.mark.parametrize(
    ("header", "said"),
    [
        ({"magic": "onnx", "version": 4}, "magic is 'onnx'"),
        ({"magic": "pir", "version": 9}, "version 9"),
        ({"magic": "x" * 200_000, "version": 4}, None),  # past the bytes looked at: the reader says
    ],
)
def test_a_stream_with_a_header_that_is_not_pirs_is_refused_at_once(
    header: dict[str, object], said: str | None
) -> None:
    check = StreamCheck("stdin", None)
    buf = bytearray(
        b'{"base_code": ' + json.dumps(header).encode() + b', "program": {' + b" " * 100
    )
    if said is None:
        check(buf)
        return
    with pytest.raises(ProgramFileError, match=said):
        check(buf)


def test_random_bytes_beginning_with_a_brace_are_no_program() -> None:
    """The /dev/urandom flake: random bytes that begin with `{` are refused as any random
    bytes are ("not a program"), not as a PIR program."""
    import random

    rng = random.Random(5)
    for _ in range(200):
        data = b"{" + rng.randbytes(4096)
        with pytest.raises(ProgramFileError, match="not a program"):
            StreamCheck("stdin", None)(bytearray(data))


def test_a_json_document_that_is_not_pir_is_said_so() -> None:
    check = StreamCheck("stdin", None)
    with pytest.raises(ProgramFileError, match="does not begin with PIR's header"):
        check(bytearray(json.dumps({"name": "model", "layers": [1, 2, 3] * 30}).encode()))


def test_a_stream_cut_anywhere_reads_as_the_whole() -> None:
    for data, found in ((PROGRAM, "binary"), (PIR, "json"), (lzma.compress(PIR), "json")):
        assert _stream_format(data) == found
    assert _stream(PIR) == "json" and _stream(gzip.compress(PROGRAM)) == "program"
