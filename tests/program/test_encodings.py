"""Every valid encoding of a program is read as protobuf reads it (issue 21, docs/io.md).

protobuf lets a message's fields come in any order, a singular message field be
split over several occurrences (they merge), a singular field be given twice
(the last counts), repeated numbers be packed or not, and a length be written
in more bytes than needed; Paddle's C++ parser reads every such encoding of a
program as the same program. vppctl reads ops and variables through narrow
views and a few byte-level shortcuts (vppctl/program/), which must read the
same values or parse.

Here each shipped program (samples/ and every Paddle export in
tests/data/paddle_reference/) is re-encoded (tests/support/reencode.py) and must give exactly
what its canonical encoding gives: the same `convert` exit code, report and
output program (compared as parsed messages: ops that the conversion does not
change keep the encoding they came in), the same `inspect` and `verify` reports.
One variant per sample and plain-PP export in CI, with a twentieth of its ops
and variables re-encoded, compared by `convert` (which reads what the other two
read, and verifies its result; the samples are compared by all three); the long
round re-encodes all of each program, Paddle's VPP answers too, many times:

    VPPCTL_SLOW=1 python -m pytest tests/program/test_encodings.py -q -k long
    VPPCTL_ENCODING_ROUNDS=50 python -m pytest tests/program/test_encodings.py -q -k long

Then one test per value the fast paths read (`op_role`, `sub_block`,
`struct_name`, `op_callstack`, the dist attrs, `forward_op_id`) written in an
unusual encoding: attrs type-first, op fields ahead of the op's type, given
twice, split.

The tests here also cover vppctl/program/wire.py, which has no test file of its own.
"""

from __future__ import annotations

import functools
import json
import lzma
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import paths
import pytest
from commandline import invoke
from programs import layered
from reencode import KINDS, any_encoding, fields, reencode, varint

from vppctl.program._proto import program_pb2 as pb
from vppctl.program.load import parse_program
from vppctl.program.wire import field_pieces, fields_size

ROOT = paths.ROOT
SAMPLES = ROOT / "samples"
REFERENCE = paths.PADDLE_REFERENCE
SHIPPED = sorted(p.name for p in SAMPLES.iterdir() if p.suffix in (".pb", ".pbtxt")) + sorted(
    p.name for p in REFERENCE.iterdir() if p.name.endswith((".pb", ".pb.xz"))
)
# The CI round: the samples and the Paddle exports that are inputs (a plain-PP program);
# Paddle's own VPP answers join them in the long round.
CI_ROUND = [name for name in SHIPPED if "_paddle" not in name]
# The samples' own vpp: as many chunks as their layers allow.
SAMPLE_VPP = {
    "gpt-8l-pp4.pb": 2,
    "gpt-12l-pp4-2ranks-sgd.pb": 3,
    "gpt-16l-pp4-h4096.pb": 2,
    "tiny-2l-pp2.pbtxt": 1,
}
CI_SHARE = {"vppctl.OpDesc": 0.05, "vppctl.VarDesc": 0.05}
LONG_ROUNDS = int(os.environ.get("VPPCTL_ENCODING_ROUNDS") or 20)
LONG = pytest.mark.skipif(
    not (os.environ.get("VPPCTL_SLOW") == "1" or os.environ.get("VPPCTL_ENCODING_ROUNDS")),
    reason="long re-encoding round; set VPPCTL_SLOW=1 or VPPCTL_ENCODING_ROUNDS=N to run it",
)


def shipped(name: str) -> bytes:
    """A shipped program's binary bytes (a text sample parsed and serialized)."""
    if name in SAMPLE_VPP:
        data = (SAMPLES / name).read_bytes()
        if name.endswith(".pbtxt"):
            from google.protobuf import text_format

            return text_format.Parse(data.decode(), pb.ProgramDesc()).SerializeToString()
        return data
    data = (REFERENCE / name).read_bytes()
    return lzma.decompress(data) if name.endswith(".xz") else data


def options(name: str) -> list[str]:
    if name in SAMPLE_VPP:
        return ["--vpp", str(SAMPLE_VPP[name])]
    vpp = name.split("_v")[1].split("_")[0]
    seg = "LlamaDecoderLayer" if name.startswith("llama_") else "DecoderLayer"
    return ["--vpp", vpp, "--seg-method", seg]


# -- what a program gives ----------------------------------------------------------------


@dataclass
class Outcome:
    """What the commands give for one input: exit codes, reports (JSON, or the error line),
    and the converted program parsed."""

    convert: tuple[int, Any]
    program: pb.ProgramDesc | None
    inspect: tuple[int, Any]
    verify: tuple[int, Any]

    def differences(self, other: Outcome) -> list[str]:
        return [
            part for part in ("convert", "program", "inspect", "verify")
            if getattr(self, part) != getattr(other, part)
        ]  # fmt: skip


def _report(result: Any, drop: tuple[str, ...]) -> tuple[int, Any]:
    if result.exit_code not in (0, 1):
        return result.exit_code, result.stderr
    report = json.loads(result.stdout)
    for key in drop:  # where the file is and its size: not what it holds
        report.pop(key, None)
    return result.exit_code, any_encoding(report)


def outcome(
    work: Path, data: bytes, args: list[str], extra: tuple[str, ...] = ("inspect", "verify")
) -> Outcome:
    src, out = work / "in.pb", work / "out.pb"
    src.write_bytes(data)
    out.unlink(missing_ok=True)
    converted = invoke("convert", str(src), "-o", str(out), "--json", *args, exit_code=None)
    program = pb.ProgramDesc.FromString(out.read_bytes()) if converted.exit_code == 0 else None
    seg = args[args.index("--seg-method") :][:2] if "--seg-method" in args else []
    inspected = verified = (0, None)
    if "inspect" in extra:
        inspected = _report(invoke("inspect", str(src), "--json", *seg, exit_code=None), _FILE)
    if "verify" in extra:
        verified = _report(invoke("verify", str(src), "--json", exit_code=None), _FILE)
    return Outcome(_report(converted, ("output", "bytes_written")), program, inspected, verified)


_FILE = ("source", "bytes")


def assert_read_alike(
    work: Path,
    canonical: bytes,
    variant: bytes,
    args: list[str],
    extra: tuple[str, ...] = ("inspect", "verify"),
) -> Outcome:
    """The variant is another encoding of the canonical program, and gives what it gives."""
    assert variant != canonical
    assert pb.ProgramDesc.FromString(variant) == pb.ProgramDesc.FromString(canonical)
    expected = outcome(work, canonical, args, extra)
    got = outcome(work, variant, args, extra)
    assert not expected.differences(got), (
        f"read differently: {expected.differences(got)}\n"
        f"canonical: {expected.convert}\nvariant:   {got.convert}"
    )
    return expected


# -- the re-encoder ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_each_reencoding_changes_the_bytes_not_the_message(kind: str) -> None:
    data = layered([0, 0, 1, 1], backward=True, optimizer=True).bytes()
    variant = reencode(random.Random(kind), data, pb.ProgramDesc.DESCRIPTOR, (kind,))
    assert variant != data
    assert pb.ProgramDesc.FromString(variant) == pb.ProgramDesc.FromString(data)


def test_the_comparison_sees_a_changed_value(tmp_path: Path) -> None:
    """A seeded fault: one op's role really changed (not re-encoded) is told apart, so the
    tests below can fail."""
    data = shipped("gpt-8l-pp4.pb")
    msg = pb.ProgramDesc.FromString(data)
    op = msg.blocks[0].ops[-1]  # an optimizer op
    next(a for a in op.attrs if a.name == "op_role").i = 0  # now a forward op
    args = options("gpt-8l-pp4.pb")
    assert outcome(tmp_path, data, args).differences(
        outcome(tmp_path, msg.SerializeToString(), args)
    )


# -- every shipped program ---------------------------------------------------------------


@pytest.mark.parametrize("name", CI_ROUND)
def test_a_reencoded_shipped_program_reads_as_its_canonical_encoding(
    tmp_path: Path, name: str
) -> None:
    data = shipped(name)
    variant = reencode(random.Random(name), data, pb.ProgramDesc.DESCRIPTOR, share=CI_SHARE)
    extra = ("inspect", "verify") if name in SAMPLE_VPP else ()
    assert_read_alike(tmp_path, data, variant, options(name), extra)


@LONG
@pytest.mark.parametrize("name", SHIPPED)
def test_long_round(tmp_path: Path, name: str) -> None:
    """LONG_ROUNDS variants of each program, every op and variable re-encoded, each kind
    alone and all together."""
    data = shipped(name)
    args = options(name)
    expected = outcome(tmp_path, data, args)
    kinds = [(k,) for k in KINDS] + [KINDS]
    for n in range(LONG_ROUNDS):
        chosen = kinds[n % len(kinds)]
        variant = reencode(random.Random(f"{name}:{n}"), data, pb.ProgramDesc.DESCRIPTOR, chosen)
        got = outcome(tmp_path, variant, args)
        assert not expected.differences(got), (name, n, chosen, expected.differences(got))


def test_a_reordered_program_is_read_from_stdin(tmp_path: Path) -> None:
    """A stream is checked as it arrives (its first block must start with a block field):
    a block that starts with its variables, not its idx, is a program too."""
    data = small_sample()
    fs = fields(data)
    block = [f for f in fields(fs[0][2]) if f[0] != 1] + [f for f in fields(fs[0][2]) if f[0] == 1]
    variant = join([(1, 2, join(block)), *fs[1:]])  # idx last
    assert fields(fields(variant)[0][2])[0][0] != 1
    result = invoke("inspect", "-", "--json", input=variant)
    assert json.loads(result.stdout)["ops"]["total"] == len(
        pb.ProgramDesc.FromString(data).blocks[0].ops
    )


# -- each value the fast paths read, in an unusual encoding -------------------------------


def field_bytes(number: int, wire: int, payload: bytes) -> bytes:
    tag = varint(number << 3 | wire)
    return tag + (varint(len(payload)) if wire == 2 else b"") + payload


def join(fs: list[tuple[int, int, bytes]]) -> bytes:
    return b"".join(field_bytes(*f) for f in fs)


def edit_ops(data: bytes, edit: Callable[[bytes], bytes]) -> bytes:
    """The program with each op's bytes replaced by `edit(op)` (the rest kept as it is)."""
    program = parse_program(data)
    for block in program.blocks:
        block.ops = [edit(op) for op in block.ops]
    return program.to_bytes()


def edit_vars(data: bytes, edit: Callable[[bytes], bytes]) -> bytes:
    program = parse_program(data)
    for block in program.blocks:
        block.vars = [edit(v) for v in block.vars]
    return program.to_bytes()


def attrs_type_first(name: str) -> Callable[[bytes], bytes]:
    """An op edit: its attrs named `name` written with their type before their name."""

    def edit(op: bytes) -> bytes:
        out = []
        for number, wire, payload in fields(op):
            if number == 4 and pb.OpDesc.Attr.FromString(payload).name == name:
                payload = join(sorted(fields(payload), key=lambda f: f[0] != 2))
                assert payload[0] == 0x10  # type (field 2) first
            out.append((number, wire, payload))
        return join(out)

    return edit


def op_field_first(number: int, shadow: bytes | None = None) -> Callable[[bytes], bytes]:
    """An op edit: its field `number` moved ahead of everything (of its type too), and, with
    `shadow`, given first with that payload, which the real one then overrides."""

    def edit(op: bytes) -> bytes:
        fs = fields(op)
        moved = [f for f in fs if f[0] == number]
        if moved and shadow is not None:
            moved.insert(0, (number, moved[0][1], shadow))
        return join(moved + [f for f in fs if f[0] != number])

    return edit


@functools.cache
def small_sample(**kwargs: Any) -> bytes:
    from vppctl.sample import SampleOptions, build_sample

    return build_sample(SampleOptions(layers=4, pp=2, hidden=64, vocab=64, **kwargs))


def _roles(data: bytes) -> dict[str, int]:
    result = invoke("inspect", "-", "--json", input=data)
    return json.loads(result.stdout)["ops"]


def test_op_role_written_type_first(tmp_path: Path) -> None:
    """Was: optimizer ops counted as forward by `inspect`, and `convert` refusing for a
    wrong reason."""
    data = small_sample()
    variant = edit_ops(data, attrs_type_first("op_role"))
    assert_read_alike(tmp_path, data, variant, ["--vpp", "2"])
    roles = _roles(variant)
    assert roles["optimizer"] > 0 and roles["backward"] > 0, roles


def _conditional_block_program() -> bytes:
    """Layers [0, 0, 1, 1]: at vpp 2 layer 1 (DecoderLayer_1) moves to stage 1, and with it
    the ops of block 1, the sub-block of a conditional_block in that layer."""
    p = layered([0, 0, 1, 1], backward=True, optimizer=True)
    b1 = p.sub_block(0)
    p.var("cond", 0)
    p.op("assign", {"X": ["DecoderLayer_1.out0"]}, {"Out": ["inner"]}, block=b1, stage=0)
    i = p.op(
        "conditional_block",
        {"Cond": ["cond"], "Input": ["DecoderLayer_1.out0"]},
        {"Out": ["cb_out"]},
        struct="/Model/DecoderLayer_1/Cond/",
        stage=0,
        sub_block=b1,
    )
    ops = p.msg.blocks[0].ops
    op = pb.OpDesc()
    op.CopyFrom(ops[i])
    del ops[i]
    at = next(k for k, o in enumerate(ops) if o.struct_name.startswith("/Model/DecoderLayer_1/"))
    ops.insert(at + 1, op)  # inside layer 1, after its first op
    return p.bytes()


def test_sub_block_written_type_first(tmp_path: Path) -> None:
    """Was: block 1 left on the old stage, `convert` exit 0 and `verify` calling it valid."""
    data = _conditional_block_program()
    variant = edit_ops(data, attrs_type_first("sub_block"))
    expected = assert_read_alike(tmp_path, data, variant, ["--vpp", "2"])
    assert expected.program is not None
    inner = expected.program.blocks[1].ops[0].dist_attr
    assert list(inner.process_mesh.process_ids) == [1]  # it moved with its layer


def test_struct_name_ahead_of_the_type_and_given_twice(tmp_path: Path) -> None:
    data = small_sample()
    shadow = b"/GPTModel/Wrong_7/"  # the real struct name comes after it: that one counts
    variant = edit_ops(data, op_field_first(1001, shadow))
    assert_read_alike(tmp_path, data, variant, ["--vpp", "2"])


def test_op_callstack_written_type_first(tmp_path: Path) -> None:
    data = small_sample(callstack=True)
    variant = edit_ops(data, attrs_type_first("op_callstack"))
    expected = assert_read_alike(tmp_path, data, variant, ["--vpp", "2"])
    assert expected.inspect[1]["ops_with_callstack"] > 0
    stripped = []
    for k, source in enumerate((data, variant)):
        src, out = tmp_path / f"s{k}.pb", tmp_path / f"s{k}.out.pb"
        src.write_bytes(source)
        invoke("dump", str(src), "-o", str(out), "--strip-callstack")
        stripped.append(pb.ProgramDesc.FromString(out.read_bytes()))
    assert stripped[0] == stripped[1]
    assert not any(a.name == "op_callstack" for o in stripped[1].blocks[0].ops for a in o.attrs)


def _split_mesh(mesh: bytes) -> tuple[bytes, bytes]:
    """A ProcessMesh's bytes in two parts that merge back into it: its shape, the rest."""
    fs = fields(mesh)
    return join([f for f in fs if f[0] == 1]), join([f for f in fs if f[0] != 1])


def _split_dist(dist: bytes, mesh_number: int) -> list[bytes]:
    """A dist attr's bytes as two occurrences that merge back into it: the first holds the
    first part of its (split) mesh, the second the rest of the mesh and every other field."""
    fs = fields(dist)
    mesh = next((f[2] for f in fs if f[0] == mesh_number), None)
    if mesh is None:
        return [dist]
    first, rest = _split_mesh(mesh)
    others = [f for f in fs if f[0] != mesh_number]
    return [field_bytes(mesh_number, 2, first), join([*others, (mesh_number, 2, rest)])]


def _split_op_dists(op: bytes) -> bytes:
    """An op edit: its dist attr split over two occurrences, one ahead of its type and one
    last, its mesh split between them, and each tensor dist attr (and mesh) split too."""
    fs = fields(op)
    dist = next((f[2] for f in fs if f[0] == 1002), None)
    if dist is None:
        return op
    entries = []
    for number, wire, payload in fields(dist):
        if number in (1, 2):  # input/output_dist_attrs: split each tensor dist attr
            entry = []
            for n, w, p in fields(payload):
                if n == 2:
                    entry.extend((2, 2, part) for part in _split_dist(p, 1))
                else:
                    entry.append((n, w, p))
            payload = join(entry)
        entries.append((number, wire, payload))
    first, *rest = _split_dist(join(entries), 3)
    others = [f for f in fs if f[0] != 1002]
    return join([(1002, 2, first), *others, *((1002, 2, r) for r in rest)])


def _split_var_dist(var: bytes) -> bytes:
    fs = fields(var)
    dist = next((f[2] for f in fs if f[0] == 1001), None)
    if dist is None:
        return var
    parts = _split_dist(dist, 1)
    return join(
        [(1001, 2, parts[0]), *[f for f in fs if f[0] != 1001], *((1001, 2, p) for p in parts[1:])]
    )


def test_dist_attrs_split_and_ahead_of_the_type(tmp_path: Path) -> None:
    """Was: the mesh read from the last occurrence only ("process mesh [] is invalid")."""
    data = _conditional_block_program()
    variant = edit_vars(edit_ops(data, _split_op_dists), _split_var_dist)
    assert_read_alike(tmp_path, data, variant, ["--vpp", "2"])


def test_forward_op_id_ahead_of_the_type_and_given_twice(tmp_path: Path) -> None:
    data = small_sample()
    variant = edit_ops(data, op_field_first(1004, varint(999_999)))
    expected = assert_read_alike(tmp_path, data, variant, ["--vpp", "2"])
    assert expected.program is not None
    assert any(o.HasField("forward_op_id") for o in expected.program.blocks[0].ops)


# Every length class of a varint length prefix: 1 to 4 bytes, each bound and its neighbours.
_FRAMED_LENGTHS = sorted({0, 1} | {b + d for b in (1 << 7, 1 << 14, 1 << 21) for d in (-1, 0, 1)})


@pytest.mark.parametrize("tag", [b"\x1a", b"\x22"], ids=["vars", "ops"])
def test_saved_items_are_framed_as_protobuf_frames_them(tag: bytes) -> None:
    """`field_pieces` (each item's tag and length, the prefixes made on first use) frames
    items of every length class as protobuf does, in pieces that join to the whole field,
    the same when a length comes again."""
    rng = random.Random(34)
    items = [rng.randbytes(n) for n in _FRAMED_LENGTHS] * 2 + [b"x"] * 10_000
    rng.shuffle(items)
    expected = b"".join(tag + varint(len(item)) + item for item in items)
    pieces = list(field_pieces(tag, items))
    assert len(pieces) > 1
    assert b"".join(pieces) == expected
    assert fields_size(items) == len(expected)
