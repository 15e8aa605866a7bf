"""The fuzzer: mutated programs and the round that runs them through the commands.

`mutant(seed, n)` rebuilds input n of round `seed` (a base program with one to three
mutations, or now and then an input of a hostile class, tests/support/hostile.py), and
`fuzz_pir.pir_mutant` the same for PIR programs; `run_round` runs a round through `convert`,
`verify`, `inspect` (and `simulate` for PIR) and sorts what went wrong into `KINDS`.
tests/contract/test_fuzz.py says what each round checks, and runs them.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import hostile
import pytest
from click.testing import CliRunner
from google.protobuf.message import DecodeError
from programs import Prog, layered
from reencode import any_encoding, reencode

from vppctl.cli import cli
from vppctl.engine import layers
from vppctl.errors import VppctlError
from vppctl.plan import read_pir_plan
from vppctl.program._proto import program_pb2 as pb

CI_SEED = 20251130
CI_INPUTS = 1200
LONG_INPUTS = int(os.environ.get("VPPCTL_FUZZ_ROUNDS") or 50_000)
LONG_SEED = int(os.environ.get("VPPCTL_FUZZ_SEED") or 1)
TABLE_EVERY = 20  # one input in twenty also goes through the table renderers
OK_CODES = frozenset({0, 1, 2, 3, 4})


# -- base programs ------------------------------------------------------------


@dataclass(frozen=True)
class Base:
    name: str
    data: bytes
    weight: int = 1  # small programs are drawn more often: they are fast to run
    text: bool = False  # protobuf text format (.pbtxt)
    pir: bool = False  # a PIR program's JSON (.json)


def _with_sub_blocks() -> bytes:
    """A layered program whose forward and backward sections hold control-flow ops."""
    p = layered([0, 0, 1, 1], backward=True, optimizer=True)
    b1 = p.sub_block(0)
    b2 = p.sub_block(b1)
    p.var("cond", 0)
    p.op("assign", {"X": ["h0"]}, {"Out": ["inner"]}, block=b1, stage=0)
    p.op("scale", {"X": ["inner"]}, {"Out": ["inner2"]}, block=b2, stage=0)
    p.op("while", {"X": ["inner"]}, {"Out": ["inner3"]}, block=b1, stage=0, sub_block=b2)
    i = p.op(
        "conditional_block",
        {"Cond": ["cond"], "Input": ["h0"]},
        {"Out": ["cb_out"]},
        struct="/Model/DecoderLayer/Cond/",
        stage=0,
        sub_block=b1,
    )
    # Move the new op into the first layer, right after its first op.
    ops = p.msg.blocks[0].ops
    op = pb.OpDesc()
    op.CopyFrom(ops[i])
    del ops[i]
    ops.insert(2, op)
    return p.bytes()


def _converted(data: bytes, vpp: int) -> bytes:
    """`data` converted by vppctl (a VPP program with a recorded plan)."""
    from vppctl.convert import ConvertOptions, convert_program
    from vppctl.plan import PlanOptions
    from vppctl.program.load import parse_program

    program = parse_program(data)
    convert_program(program, ConvertOptions(plan=PlanOptions(vpp=vpp)))
    return program.to_bytes()


def _text(data: bytes) -> bytes:
    from google.protobuf import text_format

    return text_format.MessageToString(pb.ProgramDesc.FromString(data)).encode()


def build_bases() -> list[Base]:
    from vppctl.sample import SampleOptions, build_sample

    small = build_sample(
        SampleOptions(layers=4, pp=2, hidden=64, vocab=64, optimizer="sgd", grad_clip=False)
    )
    clipped = build_sample(SampleOptions(layers=4, pp=4, hidden=64, vocab=64))
    interleaved = build_sample(
        SampleOptions(layers=4, pp=2, layout="interleaved", vpp=2, hidden=64, vocab=64)
    )
    lay = layered([0, 0, 1, 1], backward=True, optimizer=True).bytes()
    no_ids = layered([0, 0, 1, 1, 2, 2], backward=True, optimizer=True, ids=False).bytes()
    forward_only = layered([0, 0, 1, 1, 2, 2, 3, 3], ops_per_layer=1).bytes()
    global_mesh = Prog(stages=2, global_mesh=True)
    global_mesh.op("fill_constant", {}, {"Out": ["g"]}, role=2, stage=-1)
    return [
        Base("sample", small),
        Base("sample_clip", clipped),
        Base("interleaved", interleaved),
        Base("converted_sample", _converted(small, 2)),
        Base("layered", lay, weight=4),
        Base("no_ids", no_ids, weight=3),
        Base("forward_only", forward_only, weight=3),
        Base("sub_blocks", _with_sub_blocks(), weight=4),
        Base("converted", _converted(lay, 2), weight=4),
        Base("text", _text(forward_only), weight=2, text=True),
        Base("global_only", global_mesh.bytes()),
    ]


# -- mutations ---------------------------------------------------------------------

# Values that tend to break things: signed/unsigned edges, off-by-one, huge.
EDGE_INTS = (0, 1, 2, 3, -1, -2, 7, 255, 256, 257, 4096, 2**31 - 1, -(2**31), 2**62, -(2**63))
ROLES = (0, 1, 2, 4, 8, 16, 256, 257, 258, 4096, -1, 3, 2**31 - 1)
ODD_STRINGS = (
    "",
    "/",
    "///",
    "[/]",
    "[bold]x[/bold]",
    "[/x]",
    "DecoderLayer",
    "/GPTModel/DecoderLayer_99/",
    "/Model/DecoderLayer/",
    "/Model/DecoderLayer_1/Linear/",
    "sum",
    "grad_add",
    "matmul_v2_grad",
    "x@GRAD",
    "@EMPTY@",
    "lod_tensor_blocking_queue_0",
    "é\u202e\x00",
    "a\nb",
    "/Model/DecoderLayer_1\r\n/Linear/",
    "a" * 300,
)


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("bad varint")
        b = data[pos]
        result |= (b & 0x7F) << shift
        pos += 1
        if b < 0x80:
            return result, pos
        shift += 7


def wire_fields(data: bytes) -> list[tuple[int, int, bytes, bytes]] | None:
    """Top-level fields of a serialized message: (field number, wire type, tag, payload).

    None when `data` does not split cleanly into fields (then it is no message).
    """
    out = []
    pos = 0
    try:
        while pos < len(data):
            start = pos
            key, pos = _read_varint(data, pos)
            number, wt = key >> 3, key & 7
            if number == 0:
                return None
            tag = data[start:pos]
            if wt == 0:
                _, end = _read_varint(data, pos)
            elif wt == 1:
                end = pos + 8
            elif wt == 5:
                end = pos + 4
            elif wt == 2:
                n, pos = _read_varint(data, pos)
                end = pos + n
            else:
                return None
            if end > len(data):
                return None
            out.append((number, wt, tag, data[pos:end]))
            pos = end
    except ValueError:
        return None
    return out


def join_fields(fields_: list[tuple[int, int, bytes, bytes]]) -> bytes:
    parts = []
    for _, wt, tag, payload in fields_:
        parts.append(tag + (_varint(len(payload)) if wt == 2 else b"") + payload)
    return b"".join(parts)


def mutate_wire(rng: random.Random, data: bytes, depth: int = 0) -> tuple[bytes, str]:
    """Delete, duplicate or randomise one field somewhere in the message tree."""
    fs = wire_fields(data)
    if not fs:
        return data, "wire: no fields"
    i = rng.randrange(len(fs))
    number, wt, tag, payload = fs[i]
    if wt == 2 and depth < 8 and rng.random() < 0.75:
        sub = wire_fields(payload)
        if sub:
            new, what = mutate_wire(rng, payload, depth + 1)
            fs[i] = (number, wt, tag, new)
            return join_fields(fs), f"{number}.{what}"
    action = rng.choice(("delete", "duplicate", "random"))
    if action == "delete":
        del fs[i]
    elif action == "duplicate":
        fs.insert(i + rng.choice((0, 1)), fs[i])
    elif wt == 0:
        fs[i] = (number, wt, tag, _varint(rng.choice(EDGE_INTS)))
    elif wt == 2:
        fs[i] = (number, wt, tag, rng.randbytes(rng.randrange(12)))
    else:
        fs[i] = (number, wt, tag, rng.randbytes(len(payload)))
    return join_fields(fs), f"{number}:{action}"


def mutate_bytes(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    b = bytearray(data)
    kind = rng.choice(("flip", "truncate", "delete", "duplicate", "insert"))
    if not b:
        return rng.randbytes(8), "bytes: random"
    if kind == "flip":
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    elif kind == "truncate":
        del b[rng.randrange(len(b)) :]
    elif kind == "delete":
        at = rng.randrange(len(b))
        del b[at : at + rng.randint(1, 64)]
    elif kind == "duplicate":
        at = rng.randrange(len(b))
        b[at:at] = b[at : at + rng.randint(1, 64)]
    else:
        at = rng.randrange(len(b) + 1)
        b[at:at] = rng.randbytes(rng.randint(1, 16))
    return bytes(b), f"bytes: {kind}"


def _all_ops(msg: pb.ProgramDesc) -> list[tuple[int, int]]:
    return [(b, i) for b, blk in enumerate(msg.blocks) for i in range(len(blk.ops))]


def _random_mesh(rng: random.Random, mesh: pb.ProcessMesh, stages: int) -> str:
    kind = rng.choice(("ids", "shape", "clear", "negative", "repeat", "empty", "stage"))
    if kind == "ids":
        n = rng.randint(0, 4)
        mesh.ClearField("process_ids")
        mesh.process_ids.extend(rng.choice(EDGE_INTS) for _ in range(n))
    elif kind == "shape":
        mesh.ClearField("shape")
        mesh.shape.extend(rng.choice((0, 1, 2, 3, -1, 2**40)) for _ in range(rng.randint(0, 3)))
    elif kind == "clear":
        mesh.Clear()
    elif kind == "negative":
        mesh.ClearField("process_ids")
        mesh.ClearField("shape")
        mesh.process_ids.append(-rng.randint(1, 5))
        mesh.shape.append(1)
    elif kind == "repeat":
        mesh.ClearField("process_ids")
        mesh.ClearField("shape")
        mesh.process_ids.extend([0, 0])
        mesh.shape.append(2)
    elif kind == "empty":
        mesh.ClearField("process_ids")
        mesh.ClearField("shape")
    else:  # a valid-looking mesh of another stage: a layout change, not corruption
        s = rng.randrange(max(stages, 1) + 1)
        mesh.ClearField("process_ids")
        mesh.ClearField("shape")
        mesh.process_ids.append(s)
        mesh.shape.append(1)
    return kind


def _set_role(op: pb.OpDesc, rng: random.Random) -> str:
    attrs = [a for a in op.attrs if a.name == "op_role"]
    kind = rng.choice(("value", "delete", "long", "string", "twice"))
    if kind == "delete" or (not attrs and kind != "value"):
        kept = [a for a in op.attrs if a.name != "op_role"]
        del op.attrs[:]
        op.attrs.extend(kept)
        return "role deleted"
    attr = attrs[0] if attrs else op.attrs.add(name="op_role", type=pb.INT)
    if kind == "value":
        attr.type = pb.INT
        attr.i = rng.choice(ROLES)
    elif kind == "long":
        attr.type = pb.LONG
        attr.l = rng.choice(ROLES)
    elif kind == "string":
        attr.type = pb.STRING
        attr.s = "forward"
    else:
        op.attrs.add(name="op_role", type=pb.INT, i=rng.choice(ROLES))
    return f"role {kind}"


def mutate_struct(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """A structural mutation through the generated messages."""
    msg = pb.ProgramDesc.FromString(data)
    ops = _all_ops(msg)
    stages = len(msg.process_meshes)
    kind = rng.choice(STRUCT_KINDS)
    if not ops and kind not in ("add_block", "plan", "program_meshes", "blocks"):
        kind = "add_block"
    what = kind
    if kind == "delete_ops":
        for _ in range(rng.randint(1, 5)):
            ops = _all_ops(msg)
            if ops:
                b, i = rng.choice(ops)
                del msg.blocks[b].ops[i]
    elif kind == "duplicate_op":
        b, i = rng.choice(ops)
        op = pb.OpDesc()
        op.CopyFrom(msg.blocks[b].ops[i])
        msg.blocks[b].ops.insert(rng.randrange(len(msg.blocks[b].ops) + 1), op)
    elif kind == "reorder_ops":
        b, i = rng.choice(ops)
        blk = msg.blocks[b]
        j = rng.randrange(len(blk.ops))
        a, c = pb.OpDesc(), pb.OpDesc()
        a.CopyFrom(blk.ops[i])
        c.CopyFrom(blk.ops[j])
        blk.ops[i].CopyFrom(c)
        blk.ops[j].CopyFrom(a)
    elif kind == "shuffle_ops":
        blk = msg.blocks[0]
        copies = [pb.OpDesc() for _ in blk.ops]
        for c, o in zip(copies, blk.ops):
            c.CopyFrom(o)
        lo = rng.randrange(len(copies) + 1)
        hi = min(len(copies), lo + rng.randint(2, 12))
        part = copies[lo:hi]
        rng.shuffle(part)
        copies[lo:hi] = part
        del blk.ops[:]
        blk.ops.extend(copies)
    elif kind == "move_op":
        b, i = rng.choice(ops)
        target = rng.randrange(len(msg.blocks))
        op = pb.OpDesc()
        op.CopyFrom(msg.blocks[b].ops[i])
        del msg.blocks[b].ops[i]
        msg.blocks[target].ops.append(op)
    elif kind in ("delete_var", "duplicate_var", "rename_var"):
        b = rng.randrange(len(msg.blocks))
        vs = msg.blocks[b].vars
        if vs:
            i = rng.randrange(len(vs))
            if kind == "delete_var":
                del vs[i]
            elif kind == "duplicate_var":
                v = pb.VarDesc()
                v.CopyFrom(vs[i])
                vs.append(v)
            else:
                vs[i].name = rng.choice(ODD_STRINGS)
    elif kind == "struct_names":
        value = rng.choice(("", "/", "///", rng.choice(ODD_STRINGS)))
        chosen = ops if rng.random() < 0.3 else rng.sample(ops, min(len(ops), rng.randint(1, 6)))
        for b, i in chosen:
            msg.blocks[b].ops[i].struct_name = value
        what = f"struct_names {value!r} on {len(chosen)} ops"
    elif kind == "swap_struct":
        (b1, i1), (b2, i2) = rng.choice(ops), rng.choice(ops)
        o1, o2 = msg.blocks[b1].ops[i1], msg.blocks[b2].ops[i2]
        o1.struct_name, o2.struct_name = o2.struct_name, o1.struct_name
    elif kind == "role":
        chosen = ops if rng.random() < 0.1 else [rng.choice(ops)]
        for b, i in chosen:
            what = _set_role(msg.blocks[b].ops[i], rng)
        what = f"{what} on {len(chosen)} ops"
    elif kind == "op_mesh":
        b, i = rng.choice(ops)
        what = "op_mesh " + _random_mesh(rng, msg.blocks[b].ops[i].dist_attr.process_mesh, stages)
    elif kind == "var_mesh":
        b = rng.randrange(len(msg.blocks))
        if msg.blocks[b].vars:
            v = rng.choice(msg.blocks[b].vars)
            what = "var_mesh " + _random_mesh(rng, v.dist_attr.process_mesh, stages)
    elif kind == "chunk":
        value = rng.choice(EDGE_INTS)
        chosen = ops if rng.random() < 0.2 else [rng.choice(ops)]
        for b, i in chosen:
            msg.blocks[b].ops[i].dist_attr.chunk_id = value
        what = f"chunk {value} on {len(chosen)} ops"
    elif kind == "var_chunk":
        for blk in msg.blocks:
            for v in blk.vars:
                if rng.random() < 0.1:
                    v.dist_attr.chunk_id = rng.choice(EDGE_INTS)
    elif kind == "clear_dist":
        b, i = rng.choice(ops)
        msg.blocks[b].ops[i].ClearField("dist_attr")
    elif kind == "program_meshes":
        pm = msg.process_meshes
        action = rng.choice(("delete", "duplicate", "reverse", "random", "clear", "global"))
        if action == "delete" and pm:
            del pm[rng.randrange(len(pm))]
        elif action == "duplicate" and pm:
            pm.add().CopyFrom(pm[rng.randrange(len(pm))])
        elif action == "reverse":
            copies = [pb.ProcessMesh() for _ in pm]
            for c, m in zip(copies, pm):
                c.CopyFrom(m)
            del pm[:]
            pm.extend(reversed(copies))
        elif action == "random" and pm:
            action += " " + _random_mesh(rng, pm[rng.randrange(len(pm))], stages)
        elif action == "clear":
            del pm[:]
        else:
            ids = sorted({i for m in pm for i in m.process_ids})
            pm.add(shape=[len(ids)], process_ids=ids)
        what = f"program_meshes {action}"
    elif kind == "sub_block":
        b, i = rng.choice(ops)
        op = msg.blocks[b].ops[i]
        target = rng.choice((-1, 0, 1, b, b + 1, len(msg.blocks), len(msg.blocks) - 1, 2**31 - 1))
        if rng.random() < 0.8:
            op.attrs.add(name="sub_block", type=pb.BLOCK, block_idx=target)
        else:
            op.attrs.add(name="sub_block", type=pb.BLOCKS, blocks_idx=[target, 0])
        what = f"sub_block -> {target}"
    elif kind == "add_block":
        parent = rng.choice((-1, 0, len(msg.blocks) - 1, len(msg.blocks), 5))
        blk = msg.blocks.add(idx=len(msg.blocks), parent_idx=parent)
        if ops and rng.random() < 0.7:
            b, i = rng.choice(ops)
            blk.ops.add().CopyFrom(msg.blocks[b].ops[i])
        what = f"add_block parent {parent}"
    elif kind == "blocks":
        b = rng.randrange(len(msg.blocks))
        field_ = rng.choice(("idx", "parent_idx", "forward_block_idx"))
        setattr(msg.blocks[b], field_, rng.choice((-1, 0, 1, 2, 100, -(2**31))))
        what = f"block {b} {field_}"
    elif kind == "ids":
        for b, i in rng.sample(ops, min(len(ops), rng.randint(1, 8))):
            op = msg.blocks[b].ops[i]
            if rng.random() < 0.5:
                op.id = rng.choice(EDGE_INTS)
            else:
                op.forward_op_id = rng.choice((*EDGE_INTS, op.id, op.id + 1))
    elif kind == "clear_ids":
        for b, i in ops:
            msg.blocks[b].ops[i].ClearField("id")
    elif kind == "op_type":
        b, i = rng.choice(ops)
        msg.blocks[b].ops[i].type = rng.choice(ODD_STRINGS)
    elif kind == "arguments":
        b, i = rng.choice(ops)
        op = msg.blocks[b].ops[i]
        group = op.inputs if rng.random() < 0.5 else op.outputs
        slot = group.add(parameter=rng.choice(("X", "Param", "Out", "")))
        slot.arguments.extend(rng.choice(ODD_STRINGS) for _ in range(rng.randint(0, 3)))
    elif kind == "var_flags":
        for blk in msg.blocks:
            for v in blk.vars:
                if rng.random() < 0.2:
                    v.is_parameter = not v.is_parameter
                if rng.random() < 0.1 and v.type.HasField("dense_tensor"):
                    dims = v.type.dense_tensor.tensor.dims
                    dims.append(rng.choice((-1, 0, 2**40, -(2**63))))
    elif kind == "plan":
        _mutate_plan(rng, msg)
    return msg.SerializePartialToString(), f"struct: {what}"


def _mutate_plan(rng: random.Random, msg: pb.ProgramDesc) -> None:
    plan = msg.pipeline_plan
    action = rng.choice(("pp", "vpp", "segments", "placement", "seg_method", "clear"))
    if action == "pp":
        plan.pp = rng.choice(EDGE_INTS[:12])
    elif action == "vpp":
        plan.vpp = rng.choice(EDGE_INTS[:12])
    elif action == "segments":
        seg = plan.segments.add(stage=rng.choice((0, 1, -1, 99)), chunk=rng.choice((0, 1, -1)))
        seg.layers.append(rng.choice(ODD_STRINGS))
        if len(plan.segments) > 1 and rng.random() < 0.5:
            del plan.segments[0]
    elif action == "placement":
        plan.placement = rng.choice(("v", "loop", "", "zigzag"))
    elif action == "seg_method":
        plan.seg_method = rng.choice(("(", "", "/", ".*", "DecoderLayer", "[/]", "a{99999}"))
    else:
        msg.ClearField("pipeline_plan")


STRUCT_KINDS = (
    "delete_ops",
    "duplicate_op",
    "reorder_ops",
    "shuffle_ops",
    "move_op",
    "delete_var",
    "duplicate_var",
    "rename_var",
    "struct_names",
    "swap_struct",
    "role",
    "op_mesh",
    "var_mesh",
    "chunk",
    "var_chunk",
    "clear_dist",
    "program_meshes",
    "sub_block",
    "add_block",
    "blocks",
    "ids",
    "clear_ids",
    "op_type",
    "arguments",
    "var_flags",
    "plan",
)


def mutate_text(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    lines = data.split(b"\n")
    kind = rng.choice(("delete", "duplicate", "edit"))
    i = rng.randrange(len(lines))
    if kind == "delete":
        del lines[i]
    elif kind == "duplicate":
        lines.insert(i, lines[i])
    else:
        lines[i] = lines[i].replace(b":", rng.choice((b"::", b": -1", b"", b": 99999999999")), 1)
    return b"\n".join(lines), f"text: {kind}"


_BASES: list[Base] | None = None


def bases() -> list[Base]:
    global _BASES
    if _BASES is None:
        _BASES = build_bases()
    return _BASES


# One class of input per generator of tests/support/hostile.py, at sizes where the old unbounded
# code took tens of seconds or gigabytes and the bounded code takes about a second.
HOSTILE: dict[str, Callable[[random.Random], bytes]] = {
    "stage_meshes": lambda rng: hostile.many_stage_meshes(
        rng.randrange(2_000, 6_000), chunk=rng.choice((0, 4095, 2**31 - 1))
    ),
    "deep_sub_blocks": lambda rng: hostile.deep_sub_blocks(rng.randrange(500, 3000), 100),
    "empty_blocks": lambda rng: hostile.empty_blocks(rng.choice((20_000, 200_000))),
    "recorded_regex": lambda rng: hostile.recorded_regex(
        _named("converted_sample"), rng.choice(hostile.EVIL_REGEXES)
    ),
    "huge_dims": lambda rng: hostile.huge_dims(_named("sample"), rng.randrange(1, 400)),
    "odd_callstacks": lambda rng: hostile.odd_callstacks(_named("layered")),
    "deep_nesting": lambda rng: hostile.deep_nesting(rng.randrange(95, 400)),
    "huge_attr": lambda rng: hostile.huge_string_attr(
        _named("sample"), rng.randrange(1 << 20, 3 << 20)
    ),
    "escaped_text": lambda rng: hostile.escaped_text(
        rng.randrange(200_000, 1_000_000), rng.choice(("\\000", "\\n", "\\x41"))
    ),
}
TEXT_HOSTILE = frozenset({"escaped_text"})  # written as .pbtxt
HOSTILE_SHARE = 0.015  # of the inputs; each class is drawn 2-3 times in the CI round


def _named(name: str) -> bytes:
    return next(b.data for b in bases() if b.name == name)


def mutant(seed: int, n: int) -> tuple[Base, bytes, list[str]]:
    """Input n of round `seed`: a base program with 1-3 mutations, and what they were (or,
    now and then, an input of one of the hostile classes, as it is)."""
    rng = random.Random(f"{seed}:{n}")
    if rng.random() < HOSTILE_SHARE:
        kind = rng.choice(sorted(HOSTILE))
        base = Base(f"hostile:{kind}", b"", text=kind in TEXT_HOSTILE)
        return base, HOSTILE[kind](rng), [f"hostile {kind}"]
    all_ = bases()
    base = rng.choices(all_, weights=[b.weight for b in all_])[0]
    data = base.data
    done: list[str] = []
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3))):
        if base.text:
            data, what = mutate_text(rng, data) if rng.random() < 0.7 else mutate_bytes(rng, data)
        else:
            r = rng.random()
            if r < 0.55:
                try:
                    data, what = mutate_struct(rng, data)
                except Exception:  # an earlier mutation broke the message: mutate bytes
                    data, what = mutate_bytes(rng, data)
            elif r < 0.8:
                data, what = mutate_wire(rng, data)
                what = "wire " + what
            else:
                data, what = mutate_bytes(rng, data)
        done.append(what)
    if not base.text:
        variant = _reencoded(seed, n, data)
        if variant is not None:
            data = variant
            done.append(REENCODED)
    return base, data, done


REENCODE_SHARE = 0.07  # of the binary inputs: re-encoded after their mutations
REENCODED = "re-encoded"  # the last mutation, when it is one (tests/support/reencode.py)


def _reencoded(seed: int, n: int, data: bytes) -> bytes | None:
    """`data` in another valid encoding of the same message (tests/support/reencode.py), now and
    then; None otherwise, or when `data` is no message to re-encode. Drawn apart from the
    other mutations, so that adding it changed none of them."""
    rng = random.Random(f"{seed}:{n}:encoding")
    if rng.random() >= REENCODE_SHARE:
        return None
    try:
        variant = reencode(rng, data, pb.ProgramDesc.DESCRIPTOR)
        same = pb.ProgramDesc.FromString(variant) == pb.ProgramDesc.FromString(data)
    except (ValueError, IndexError, DecodeError):  # not a message (or with groups)
        return None
    return variant if same and variant != data else None


# -- the round -----------------------------------------------------------------------

# Kinds of failure, so that a known bug of one kind does not hide a new one of another.
CRASH = "crash"  # exit 70, a traceback, a messy error, bad JSON
FILES = "files"  # output left after a failure, input changed, stray files
UNVERIFIED = "unverified"  # verify rejects a program convert wrote
SELF_CHECK = "self-check"  # convert refused its own result (SelfCheckError: a bug)
SLOW = "slow"  # one input took longer than SLOW_SECONDS in all (unbounded work)
ENCODING = "encoding"  # a re-encoded input converted otherwise than its canonical encoding
KINDS = (CRASH, FILES, UNVERIFIED, SELF_CHECK, SLOW, ENCODING)
SLOW_SECONDS = 30.0


@dataclass
class Outcome:
    inputs: int = 0
    seconds: float = 0.0
    codes: Counter[tuple[str, int]] = field(default_factory=Counter)
    bases: Counter[str] = field(default_factory=Counter)  # inputs per base program or class
    reencoded: int = 0  # inputs re-encoded after their mutations
    mutations: Counter[str] = field(default_factory=Counter)  # inputs per mutation made
    failures: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in KINDS})

    def report(self, kind: str | None = None) -> str:
        codes = ", ".join(f"{c} {k}: {n}" for (c, k), n in sorted(self.codes.items()))
        head = (
            f"{self.inputs} inputs ({self.reencoded} re-encoded) in {self.seconds:.1f} s; "
            f"exit codes: {codes}"
        )
        counts = ", ".join(f"{k}: {len(v)}" for k, v in self.failures.items())
        shown = self.failures[kind][:6] if kind else []
        body = "\n\n".join(shown)
        return f"{head}\nfailing inputs by kind: {counts}" + (f"\n\n{body}" if body else "")


def _check_error_json(stdout: str, code: int, lines: list[str]) -> str | None:
    try:
        error = json.loads(stdout)["error"]
    except (ValueError, KeyError, TypeError) as e:
        return f"exit {code} without one JSON error object ({e}): {stdout[:200]!r}"
    if error["exit_code"] != code or lines != [f"Error: {error['message']}"]:
        return f"exit {code}: the JSON error {error!r} is not the Error line {lines!r}"
    return None


def _check_json(stdout: str) -> str | None:
    try:
        json.loads(stdout)
    except ValueError as e:
        return f"stdout is not one JSON object ({e}): {stdout[:200]!r}"
    return None


def pir_plan_problems(out: Path, report: str) -> list[tuple[str, str]]:
    """What is wrong with the plan file convert wrote for a PIR program: it must read back
    as a plan (its schema's checks) of the conversion convert reported, every layer once."""
    try:
        plan = read_pir_plan(out.read_bytes(), out.name)
    except VppctlError as e:
        return [(UNVERIFIED, f"the plan convert wrote does not read back: {e}")]
    said = json.loads(report)
    layers = [name for stage in plan.virtual_stages for name in stage]
    if (plan.pp, plan.vpp) != (said["pp"], said["vpp"]) or len(set(layers)) != len(layers):
        return [(UNVERIFIED, f"the plan convert wrote is not the one it reported: {plan}")]
    return []


class Round:
    """Runs inputs through the CLI in one work directory and records every failure."""

    def __init__(
        self,
        tmp: Path,
        seed: int,
        make: Callable[[int, int], tuple[Base, bytes, list[str]]] | None = None,
    ) -> None:
        self.seed = seed
        self.make = make or mutant
        self.work = tmp / "work"
        self.work.mkdir(parents=True)
        self.saved = Path(os.environ.get("VPPCTL_FUZZ_SAVE") or tmp)
        self.saved.mkdir(parents=True, exist_ok=True)
        self.runner = CliRunner()
        self.outcome = Outcome()

    def run(self, n: int) -> None:
        start = time.perf_counter()
        base, data, what = self.make(self.seed, n)
        self.outcome.bases[base.name] += 1
        self.outcome.mutations.update(set(what))
        suffix = ".json" if base.pir else ".pbtxt" if base.text else ".pb"
        src = self.work / f"in{suffix}"
        out = self.work / f"out{suffix}"
        src.write_bytes(data)
        stamp = src.stat().st_mtime_ns
        tables = n % TABLE_EVERY == 0
        problems: list[tuple[str, str]] = []
        check = self._invoke(problems)
        code, report = check("convert", [str(src), "--vpp", "2", "-o", str(out), "--json"])
        if what[-1] == REENCODED:
            self.outcome.reencoded += 1
            problems.extend(self._as_canonical(data, code, report, out))
        if out.exists() and code != 0:
            problems.append((FILES, f"convert exited {code} but left {out.name}"))
        if code == 0:
            if not out.exists():
                problems.append((FILES, "convert exited 0 but wrote nothing"))
            elif base.pir:  # a PIR program's conversion writes the plan for pir_plan
                problems.extend(pir_plan_problems(out, report))
            else:
                vcode, vout = check("verify", [str(out), "--json"])
                if vcode != 0:
                    problems.append(
                        (UNVERIFIED, f"verify rejects what convert wrote (exit {vcode}): {vout}")
                    )
        if tables:
            check("convert", [str(src), "--vpp", "2", "-o", str(out)])
        check("verify", [str(src), "--json"])
        check("inspect", [str(src), "--json"])
        if base.pir:
            check("simulate", [str(src), "--vpp", "2", "-m", "4", "--json"])
            check("simulate", [str(src), "-m", "4", "--json"])  # vpp from the chunk ids
        if tables:
            check("verify", [str(src)])
            check("inspect", [str(src)])
        if src.read_bytes() != data or src.stat().st_mtime_ns != stamp:
            problems.append((FILES, "the input file changed"))
        out.unlink(missing_ok=True)
        src.unlink()
        stray = sorted(p.name for p in self.work.iterdir())
        if stray:
            problems.append((FILES, f"stray files left: {stray}"))
            for p in self.work.iterdir():
                p.unlink()
        self.outcome.inputs += 1
        took = time.perf_counter() - start
        if took > SLOW_SECONDS:
            problems.append((SLOW, f"took {took:.1f} s (budget {SLOW_SECONDS:g} s)"))
        if problems:
            saved = self.saved / f"fuzz-{self.seed}-{n}{suffix}"
            saved.write_bytes(data)
            head = (
                f"input {n} (seed {self.seed}, base {base.name}, mutations {what}; "
                f"saved as {saved})"
            )
            for kind in dict.fromkeys(k for k, _ in problems):
                lines = [text for k, text in problems if k == kind]
                self.outcome.failures[kind].append(head + ":\n  " + "\n  ".join(lines))

    def _as_canonical(
        self, data: bytes, code: int, report: str, out: Path
    ) -> list[tuple[str, str]]:
        """A re-encoded input must convert as its canonical encoding (protobuf's own) does:
        the same exit code, report or error, and output program."""
        src, canon_out = self.work / "canonical.pb", self.work / "canonical.out.pb"
        src.write_bytes(pb.ProgramDesc.FromString(data).SerializePartialToString())
        r = self.runner.invoke(
            cli, ["convert", str(src), "--vpp", "2", "-o", str(canon_out), "--json"]
        )
        got = (code, _comparable(report, self.work / "in.pb"), _program(out))
        expected = (r.exit_code, _comparable(r.stdout or r.stderr, src), _program(canon_out))
        src.unlink()
        canon_out.unlink(missing_ok=True)
        if got == expected:
            return []
        return [
            (
                ENCODING,
                f"read otherwise than its canonical encoding:\n  {got[:2]}\n  {expected[:2]}",
            )
        ]

    def _invoke(
        self, problems: list[tuple[str, str]]
    ) -> Callable[[str, list[str]], tuple[int, str]]:
        def invoke(command: str, args: list[str]) -> tuple[int, str]:
            r = self.runner.invoke(cli, ["--debug", command, *args])
            code = r.exit_code
            self.outcome.codes[command, code] += 1
            where = f"vppctl {command} {' '.join(args)}"
            if code not in OK_CODES:
                problems.append((CRASH, f"{where}: exit {code}\n{r.stderr}{_exc(r)}"))
                return code, r.stdout
            if "Traceback" in r.stderr:
                problems.append((CRASH, f"{where}: traceback on stderr\n{r.stderr}"))
            if "internal check failed" in r.stderr:
                problems.append((SELF_CHECK, f"{where}: {r.stderr.strip()}"))
            if code in (2, 3, 4):
                lines = r.stderr.strip().splitlines()
                if len(lines) != 1 or not lines[0].startswith("Error: "):
                    problems.append(
                        (CRASH, f"{where}: exit {code} without one Error line: {r.stderr!r}")
                    )
                if "--json" in args:  # the failure as one JSON object, saying what the line says
                    bad = _check_error_json(r.stdout, code, lines)
                    if bad:
                        problems.append((CRASH, f"{where}: {bad}"))
                elif r.stdout:
                    problems.append((CRASH, f"{where}: exit {code} with stdout {r.stdout[:200]!r}"))
            elif "--json" in args:
                bad = _check_json(r.stdout)
                if bad:
                    problems.append((CRASH, f"{where}: {bad}"))
            return code, r.stdout or r.stderr  # the report, or the error

        return invoke


def _comparable(report: str, src: Path) -> object:
    """A convert report without where its files are and how its changes were written
    (spliced or rewritten whole: that depends on the encoding by design), or its error, as
    a line or a JSON error object, the input named alike."""
    try:
        data = json.loads(report)
    except ValueError:
        return report.replace(str(src), "IN")
    data.pop("output", None)
    data.pop("bytes_written", None)
    any_encoding(data)
    if isinstance(data.get("error"), dict):
        data["error"]["message"] = data["error"]["message"].replace(str(src), "IN")
    return data


def _program(path: Path) -> pb.ProgramDesc | None:
    return pb.ProgramDesc.FromString(path.read_bytes()) if path.exists() else None


def _exc(r: object) -> str:
    exc = getattr(r, "exception", None)
    if exc is None or isinstance(exc, SystemExit):
        return ""
    import traceback

    return "".join(traceback.format_exception(exc))


def run_round(
    tmp: Path,
    seed: int,
    inputs: int,
    make: Callable[[int, int], tuple[Base, bytes, list[str]]] | None = None,
) -> Outcome:
    """Run inputs 0..inputs-1 of round `seed` (made by `make`, default `mutant`), with fsync
    off and address space capped."""
    rnd = Round(tmp, seed, make)
    start = time.perf_counter()
    with pytest.MonkeyPatch.context() as mp, _memory_cap():
        # Durability is not under test here; syncing every output would dominate the round.
        mp.setattr(os, "fsync", lambda fd: None)
        # The same bound on regexes, at a fraction of the time (tests/contract/test_bounds.py runs
        # the real one).
        mp.setattr(layers, "REGEX_SECONDS", 0.3)
        for n in range(inputs):
            rnd.run(n)
            if inputs > CI_INPUTS and (n + 1) % 5000 == 0:  # progress of a long round (-s)
                found = sum(map(len, rnd.outcome.failures.values()))
                print(f"fuzz seed {seed}: {n + 1}/{inputs} inputs, {found} failing", flush=True)
    rnd.outcome.seconds = time.perf_counter() - start
    return rnd.outcome


@contextlib.contextmanager
def _memory_cap(extra: int = 3 << 30) -> Iterator[None]:
    """Cap the address space so that a runaway allocation is a MemoryError (exit 5, which
    the round counts as a crash), not the OOM killer taking the test run down."""
    try:
        import resource
    except ImportError:  # not on this platform: run uncapped
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    try:
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        yield
        return
    cap = used + extra
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
