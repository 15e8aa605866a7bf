"""Rule 11 of docs/conversion.md: a conversion records its plan in the program, and nothing
else changes (vppctl/convert.py, the pipeline as one call; the plan written by
vppctl/program/record.py; unchanged ops and variables byte-identical through
vppctl/program/rewrite.py). The running example is tests/support/rulekit.py's.

The tests here also cover vppctl/program/roles.py, which has no test file of its own.
"""

from __future__ import annotations

import json
import lzma
import random
from pathlib import Path

import paths
import pytest
from commandline import invoke
from google.protobuf import text_format
from programs import BACKWARD, FORWARD, LOSS_GRAD, OPTIMIZE, layered
from reencode import KINDS, reencode
from rulekit import (
    EMB,
    HEAD,
    LOSS,
    LOSS_GRAD_OP,
    S0,
    S1,
    convert,
    find_var,
    layer_op,
    op_where,
    role,
    running,
    without_placements,
)

from vppctl import __version__
from vppctl.convert import ConvertOptions, ConvertResult, convert_program
from vppctl.plan import PlanOptions
from vppctl.program._proto import program_pb2 as pb
from vppctl.program.load import parse_program

# ---------------------------------------------------------------------------------
# Rule 11: the plan, and nothing else changes


def test_rule11_plan_records_pp_vpp_regex_placement_mode_segments_and_version() -> None:
    c = convert(running(backward=True), vpp=2)
    plan = pb.ProgramDesc.FromString(c.data).pipeline_plan
    assert (plan.pp, plan.vpp, plan.seg_method) == (2, 2, "DecoderLayer")
    assert (plan.placement, plan.mode) == ("loop", "auto")
    assert plan.vppctl_version == __version__
    got = [
        (s.virtual_stage, s.stage, s.chunk, tuple(s.mesh.process_ids), list(s.layers))
        for s in plan.segments
    ]
    assert got == [
        (0, 0, 0, S0, ["DecoderLayer"]),
        (1, 1, 0, S1, ["DecoderLayer_1"]),
        (2, 0, 1, S0, ["DecoderLayer_2"]),
        (3, 1, 1, S1, ["DecoderLayer_3"]),
    ]


def test_rule11_plan_op_ranges_cover_the_forward_ops_in_segment_order() -> None:
    c = convert(running(backward=True, optimizer=True), vpp=2)
    segs = c.plan.segments
    assert segs[0].op_begin == 0
    for a, b in zip(segs, segs[1:]):
        assert a.op_end == b.op_begin
    assert segs[-1].op_end == LOSS + 1  # one past the last forward op
    for k, s in enumerate(segs):
        assert s.op_begin <= layer_op(k) and layer_op(k, 1) < s.op_end
        for i in range(s.op_begin, s.op_end):
            assert c.where(i)[1] == s.chunk


def test_rule11_plan_records_manual_mode() -> None:
    c = convert(layered([0, 1, 0, 1]), vpp=2)
    assert c.plan.mode == "manual"
    assert [(s.stage, s.chunk) for s in c.plan.segments] == [(0, 0), (1, 0), (0, 1), (1, 1)]


def test_rule11_only_meshes_chunks_and_the_plan_change(sample_bytes: dict) -> None:
    data = sample_bytes[(8, 4)]
    c = convert(data, vpp=2)
    assert c.result.ops_changed > 0
    assert (
        without_placements(c.before).SerializeToString()
        == without_placements(c.after).SerializeToString()
    )


def test_rule11_unchanged_ops_and_vars_are_byte_identical(sample_bytes: dict) -> None:
    c = convert(sample_bytes[(8, 4)], vpp=2)
    same_ops = 0
    for a, b in zip(c.before.blocks[0].ops, c.after.blocks[0].ops):
        if op_where(a) == op_where(b):
            assert a.SerializeToString() == b.SerializeToString()
            same_ops += 1
    assert same_ops > 0


def test_rule11_program_already_in_its_final_layout_is_byte_identical_but_for_the_plan() -> None:
    data = layered([0, 1], backward=True, optimizer=True).bytes()
    c = convert(data, vpp=1)
    assert c.result.ops_changed == 0 and c.result.vars_changed == 0
    after = pb.ProgramDesc.FromString(c.data)
    assert after.HasField("pipeline_plan")
    after.ClearField("pipeline_plan")
    assert after.SerializeToString() == data
    assert c.data.startswith(data)  # the plan is appended as one field; nothing else moves


def _unknown(field: int, value: int) -> bytes:
    """A varint field protobuf does not know, as wire bytes."""
    out = bytearray()
    for n in (field << 3, value):
        while True:
            b = n & 0x7F
            n >>= 7
            out.append(b | (0x80 if n else 0))
            if not n:
                break
    return bytes(out)


def test_rule11_unknown_fields_survive_on_changed_and_unchanged_messages() -> None:
    p = running(backward=True)
    ops, vars_ = p.msg.blocks[0].ops, p.msg.blocks[0].vars
    moved, kept = layer_op(2), layer_op(0)
    tags = {
        "moved op": _unknown(777, 1),
        "kept op": _unknown(777, 2),
        "moved op dist attr": _unknown(777, 3),
        "moved var": _unknown(777, 4),
        "program": _unknown(777, 5),
        "block": _unknown(777, 6),
    }
    ops[moved].MergeFromString(tags["moved op"])
    ops[kept].MergeFromString(tags["kept op"])
    ops[moved].dist_attr.MergeFromString(tags["moved op dist attr"])
    w = next(v for v in vars_ if v.name == "DecoderLayer_2.w0")
    w.MergeFromString(tags["moved var"])
    p.msg.blocks[0].MergeFromString(tags["block"])
    p.msg.MergeFromString(tags["program"])
    c = convert(p, vpp=2)
    assert c.where(moved) == (S0, 1)
    out = c.after
    assert tags["moved op"] in out.blocks[0].ops[moved].SerializeToString()
    assert tags["kept op"] in out.blocks[0].ops[kept].SerializeToString()
    assert tags["moved op dist attr"] in out.blocks[0].ops[moved].dist_attr.SerializeToString()
    assert tags["moved var"] in find_var(out, "DecoderLayer_2.w0").SerializeToString()
    assert c.var_where("DecoderLayer_2.w0") == (S0, 1)
    for name in ("block", "program"):
        assert tags[name] in c.data, name


def test_rule11_conversion_counts_what_changed() -> None:
    c = convert(running(backward=True, optimizer=True), vpp=2)
    ops_changed = sum(
        op_where(a) != op_where(b) for a, b in zip(c.before.blocks[0].ops, c.after.blocks[0].ops)
    )
    vars_changed = sum(
        a.dist_attr != b.dist_attr for a, b in zip(c.before.blocks[0].vars, c.after.blocks[0].vars)
    )
    assert c.result.ops_changed == ops_changed > 0
    assert c.result.vars_changed == vars_changed > 0


def test_forward_backward_and_optimizer_roles_are_recognised() -> None:
    # Guards the test builder: the running example has the roles the rules talk about.
    p = running(backward=True, optimizer=True)
    roles = [role(o) for o in p.msg.blocks[0].ops]
    assert roles[EMB] == FORWARD and roles[LOSS] == 256 and roles[LOSS_GRAD_OP] == LOSS_GRAD
    assert BACKWARD in roles and OPTIMIZE in roles
    assert p.msg.blocks[0].ops[HEAD].struct_name == "/Model/Head/"


# -- how the changes were written: spliced or rewritten whole ----------------------------------


def _counts(r: ConvertResult) -> tuple[int, int, int, int]:
    return r.ops_spliced, r.ops_rewritten, r.vars_spliced, r.vars_rewritten


def test_a_program_protobuf_wrote_has_every_changed_op_and_variable_spliced() -> None:
    r = convert(running(backward=True, optimizer=True), vpp=2).result
    assert r.ops_changed > 0 and r.vars_changed > 0
    assert _counts(r) == (r.ops_changed, 0, r.vars_changed, 0)


def test_a_text_program_has_every_change_rewritten_whole() -> None:
    msg = pb.ProgramDesc.FromString(running(backward=True, optimizer=True).bytes())
    text = text_format.MessageToString(msg).encode()
    r = convert_program(parse_program(text, text=True), ConvertOptions(plan=PlanOptions(vpp=2)))
    assert r.ops_changed > 0 and r.vars_changed > 0
    assert _counts(r) == (0, r.ops_changed, 0, r.vars_changed)


@pytest.mark.parametrize("kind", KINDS)
def test_reencoded_ops_and_variables_are_rewritten_the_rest_spliced(kind: str) -> None:
    """Half the ops and variables in another valid encoding: each changed one is counted
    once, spliced or rewritten. Packed repeated fields are spliced like protobuf's own
    encoding; any other re-encoding has some ops or variables rewritten whole."""
    plain = running(backward=True, optimizer=True).bytes()
    rng = random.Random(kind)
    program = parse_program(plain)
    for block in program.blocks:
        for items, desc in ((block.ops, pb.OpDesc), (block.vars, pb.VarDesc)):
            for i in range(0, len(items), 2):
                items[i] = reencode(rng, items[i], desc.DESCRIPTOR, (kind,), 1.0)
    odd = convert(program.to_bytes(), vpp=2)
    r = odd.result
    assert r.ops_spliced + r.ops_rewritten == r.ops_changed == convert(plain).result.ops_changed
    assert r.vars_spliced + r.vars_rewritten == r.vars_changed
    assert r.ops_spliced > 0
    assert (r.ops_rewritten + r.vars_rewritten > 0) == (kind != "pack")


def test_convert_json_says_how_the_changes_were_written(tmp_path: Path) -> None:
    src = tmp_path / "in.pb"
    src.write_bytes(running(backward=True, optimizer=True).bytes())
    out = invoke("convert", str(src), "--vpp", "2", "-o", str(tmp_path / "out.pb"), "--json")
    data = json.loads(out.stdout)
    for key in ("ops", "vars"):
        assert data[key]["spliced"] == data[key]["changed"] > 0 and data[key]["rewritten"] == 0


def test_a_pir_program_has_every_change_rewritten_whole() -> None:
    """A PIR program's ops and values are held as a list, not as the bytes read: every
    change is written whole, and counted so."""
    data = lzma.decompress((paths.PIR_REFERENCE / "gpt_pp2_v2_plain.json.xz").read_bytes())
    r = convert_program(parse_program(data), ConvertOptions(plan=PlanOptions(vpp=2)))
    assert r.ops_changed > 0 and r.vars_changed > 0
    assert _counts(r) == (0, r.ops_changed, 0, r.vars_changed)
