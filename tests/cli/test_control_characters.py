"""Names cannot drive the terminal (issue 22): control characters in layer names and op
types are printed as visible escapes by every command, in tables, messages and errors;
JSON keeps the exact names (it escapes control characters itself).

The program is a small chain whose layer class is `Dec ESC ]0;owned BEL CR NUL Layer`
(an xterm "set the window title" sequence, a carriage return that would overwrite the
line in a CI log, and a NUL) and two of whose ops have the type `matmul ESC [2J _v2`
(clear the screen).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import Result
from commandline import invoke
from programs import layered

from vppctl.escape import printable
from vppctl.program._proto import program_pb2 as pb

LAYER = "Dec\x1b]0;owned\x07\r\x00Layer"
OP_TYPE = "matmul\x1b[2J_v2"
# What may reach a stream raw: printable text and the newline ending each line.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
SHOWN_LAYER = "Dec\\x1b]0;owned\\x07\\r\\x00Layer"
SHOWN_TYPE = "matmul\\x1b[2J_v2"


@pytest.fixture(scope="module")
def evil(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("evil")
    p = layered([0, 0, 1, 1], backward=True, optimizer=True, layer=LAYER)
    ops = p.msg.blocks[0].ops
    ops[1].type = OP_TYPE  # the first op of layer 0
    ops[3].type = OP_TYPE  # the first op of layer 1
    plain = tmp / "evil.pb"
    plain.write_bytes(p.bytes())
    converted = tmp / "evil.vpp.pb"
    invoke("convert", plain, "--vpp", "2", "-o", converted)
    msg = pb.ProgramDesc.FromString(converted.read_bytes())
    msg.blocks[0].ops[1].dist_attr.chunk_id = 1  # layer 0 split over two chunks: V004
    broken = tmp / "broken.pb"
    broken.write_bytes(msg.SerializeToString())
    return {"plain": plain, "converted": converted, "broken": broken, "dir": tmp}


def no_raw_controls(result: Result) -> str:
    """Both streams are free of raw control characters; returns them joined."""
    text = result.stdout + result.stderr
    assert RAW.search(text) is None, RAW.findall(text)
    return text


def test_printable_shows_each_control_character_as_an_escape() -> None:
    assert printable(LAYER) == SHOWN_LAYER
    assert printable("a\tb\nc\u202ed\x9b\\") == "a\\tb\\nc\\u202ed\\x9b\\"
    assert printable("DecoderLayer_12 (ok: …)") == "DecoderLayer_12 (ok: …)"


@pytest.mark.parametrize("char", ["\ud800", "\udbff", "\udc00", "\udfff"])
def test_printable_escapes_a_lone_surrogate(char: str) -> None:
    """No stream can encode a lone surrogate (a JSON `\\ud800` escape's): printed raw, it
    would crash the print. U+FFFE is escaped too (XML 1.0 forbids it); other
    non-characters are characters, and kept."""
    shown = printable(f"a{char}b\ufffe\U0010ffff")
    assert shown == f"a\\u{ord(char):04x}b\\ufffe\U0010ffff"
    shown.encode("utf-8")  # no UnicodeEncodeError


def test_inspect(evil: dict[str, Path]) -> None:
    text = no_raw_controls(invoke(*["inspect", evil["plain"]]))
    assert f"layers: {SHOWN_LAYER} x 4 (detected)" in text
    names = json.loads(invoke(*["inspect", evil["plain"], "--json"]).stdout)["layers"]["names"]
    assert names[0] == LAYER  # JSON: the exact name


def test_convert(evil: dict[str, Path]) -> None:
    out = evil["dir"] / "again.pb"
    text = no_raw_controls(invoke(*["convert", evil["plain"], "--vpp", "2", "-o", out]))
    assert f"{SHOWN_LAYER}_1 " in text


def test_convert_error_message(evil: dict[str, Path]) -> None:
    args = ["convert", evil["plain"], "--vpp", "2", "--seg-method", "Linear"]
    result = invoke(*args, exit_code=4)
    text = no_raw_controls(result)
    assert f"({SHOWN_TYPE})" in text and text.startswith("Error: ")
    # The library builds such messages with the same escaping: the JSON's is the line's.
    data = json.loads(invoke(*args, "--json", exit_code=4).stdout)
    assert result.stderr == f"Error: {data['error']['message']}\n"


@pytest.mark.parametrize("form", ["full", "concise", "github", "junit"])
def test_verify(evil: dict[str, Path], form: str) -> None:
    result = invoke(*["verify", evil["broken"], "--output-format", form], exit_code=1)
    text = no_raw_controls(result)
    assert SHOWN_TYPE in text or SHOWN_LAYER in text
    if form == "junit":
        from xml.etree import ElementTree

        ElementTree.fromstring(result.stdout.encode())  # XML 1.0 holds no control characters


def test_verify_of_a_valid_program(evil: dict[str, Path]) -> None:
    assert f"4 layers ({SHOWN_LAYER})" in no_raw_controls(invoke(*["verify", evil["converted"]]))


def test_plan(evil: dict[str, Path]) -> None:
    text = no_raw_controls(invoke(*["plan", evil["plain"], "-m", "4"]))
    assert f"4 layers ({SHOWN_LAYER}) on pp 2" in text


def test_simulate(evil: dict[str, Path]) -> None:
    no_raw_controls(invoke(*["simulate", evil["converted"], "-m", "4"]))
    args = ["simulate", evil["plain"], "--vpp", "2", "-m", "4", "--seg-method", "Linear"]
    assert SHOWN_TYPE in no_raw_controls(invoke(*args, exit_code=4))


def test_dump(evil: dict[str, Path]) -> None:
    # protobuf text format escapes what a string holds: \033 for ESC
    text = no_raw_controls(invoke(*["dump", evil["plain"]]))
    assert 'type: "matmul\\033[2J_v2"' in text


# Every character XML 1.0 forbids: C0 controls but tab, LF and CR; lone surrogates (a file
# name that is not UTF-8, as Python decodes it); U+FFFE and U+FFFF.
XML_FORBIDDEN = [
    *(chr(c) for c in range(0x20) if chr(c) not in "\t\n\r"),
    *(chr(c) for c in (0xD800, 0xDBFF, 0xDC00, 0xDC80, 0xDCFF, 0xDFFF)),
    "\ufffe",
    "\uffff",
]


def test_printable_leaves_nothing_xml_or_utf8_cannot_hold() -> None:
    text = "".join(XML_FORBIDDEN)
    shown = printable(text)
    assert all(c not in shown for c in XML_FORBIDDEN)
    shown.encode("utf-8")  # no lone surrogate left
    assert printable("\udcff.pb") == "\\udcff.pb" and printable("a\ufffeb") == "a\\ufffeb"


@pytest.mark.parametrize("char", ["\ufffe", "\uffff", "\x01"], ids=ascii)
def test_junit_of_names_holding_what_xml_forbids_is_well_formed(tmp_path: Path, char: str) -> None:
    """Was: U+FFFE or U+FFFF in an op type or a layer name made the JUnit report malformed."""
    from xml.etree import ElementTree

    p = layered([0, 0, 1, 1], backward=True, optimizer=True, layer=f"Dec{char}Layer")
    p.msg.blocks[0].ops[1].type = f"matmul{char}"
    plain = tmp_path / f"p{char}.pb"
    plain.write_bytes(p.bytes())
    converted = tmp_path / "c.pb"
    invoke("convert", plain, "--vpp", "2", "-o", converted)
    msg = pb.ProgramDesc.FromString(converted.read_bytes())
    msg.blocks[0].ops[1].dist_attr.chunk_id = 1
    broken = tmp_path / f"b{char}.pb"
    broken.write_bytes(msg.SerializeToString())
    text = invoke("verify", broken, "--output-format", "junit", exit_code=1).stdout
    assert ElementTree.fromstring(text.encode()).findall(".//failure")
