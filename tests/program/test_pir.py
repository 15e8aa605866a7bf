"""Reading PIR programs (Paddle 3.x JSON): what is read, how, and what is refused.

The programs here are built in code (tests/support/pir_json.py) in the layout Paddle 3.3.1's
`serialize_pir_program` writes; tests/paddle/test_pir_reference.py reads the ones Paddle built.

The tests here also cover vppctl/program/pir/cursor.py, vppctl/program/pir/encode.py,
vppctl/program/pir/grads.py, vppctl/program/pir/parse.py and vppctl/program/pir/tables.py,
which have no test file of their own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from commandline import invoke
from pir_json import (
    NULL,
    OPTIMIZERS,
    PirJson,
    delete_at,
    dist_slots,
    set_at,
    shared_vector,
    training,
)

from vppctl.engine import build_index
from vppctl.errors import ConversionError, ProgramFileError
from vppctl.program import op_arguments, op_slots, parse_program, read_program, write_program
from vppctl.program.pir import cursor
from vppctl.program.pir import grads as grads_module
from vppctl.program.pir import parse as parse_module


def names(data: bytes) -> tuple[Any, list[str], list[tuple[list[str], list[str]]]]:
    """(index, op types, per op its input and output names) of a PIR program's bytes."""
    program = parse_program(data, source="t.json")
    index = build_index(program)
    b = index.global_block
    types = [t.decode() for t in b.ops.type]
    args = []
    for op in range(b.n_ops):
        ins, outs = op_arguments(program.blocks[0], op)
        args.append(([n.decode() for n in ins], [n.decode() for n in outs]))
    return index, types, args


# -- what is read ------------------------------------------------------------------------------


def test_ops_keep_their_pir_names_roles_meshes_and_chunk_ids() -> None:
    index, types, _ = names(training([0, 0, 1, 1], [0, 0, 1, 1]).bytes())
    b = index.global_block
    assert types[:2] == ["pd_op.matmul", "pd_op.add"]  # "1.matmul": dialect 1 is pd_op
    forward = [t for t, r in zip(types, b.ops.role) if r == 0]
    assert forward == ["pd_op.matmul", "pd_op.add"] * 4 + ["pd_op.mean"]
    assert types.count("pd_op.adamw_") == 4 and types.count("pd_op.add_n") == 4
    assert [index.meshes[m].process_ids for m in b.op_mesh[:8:2]] == [(0,), (0,), (1,), (1,)]
    assert list(b.ops.chunk[:8:2]) == [0, 0, 1, 1]
    assert b.ops.struct[0] == b"/Model/Layer/Linear/" and b.ops.struct[3] == b"/Model/Layer_1/"
    # Paddle's stage meshes: the pd_op meshes, by first process id
    stages, _ = index.stage_mesh_ids()
    assert [index.meshes[m].process_ids for m in stages] == [(0,), (1,)]


def test_declarations_are_variables_and_plumbing_is_read_through() -> None:
    p = training([0, 0, 1, 1])
    program = parse_program(p.bytes(), source="t.json")
    assert program.is_pir and program.pir is not None
    assert dict(program.pir.folded) == {
        "builtin.parameter": 4,  # declare the weights
        "pd_op.data": 3,  # the input and each stage's learning rate
        "builtin.combine": 4,  # pack two gradient parts for add_n
        "dist_op.reshard": 2,  # the hidden state to stage 1, its gradient back
    }
    index, types, args = names(p.bytes())
    assert "builtin.parameter" not in types and "dist_op.reshard" not in types
    params = [
        n.decode()
        for n, f in zip(index.global_block.vars.name, index.global_block.vars.is_parameter)
        if f
    ]
    assert params == ["linear_0.w_0", "linear_1.w_0", "linear_2.w_0", "linear_3.w_0"]
    # Layer 2 (stage 1) reads what layer 1 (stage 0) wrote, not the reshard's copy.
    assert args[4][0][0] == args[3][1][0]
    # add_n reads the two parts the combine packed
    add_n = types.index("pd_op.add_n")
    assert len(args[add_n][0]) == 2


def test_a_name_given_twice_is_kept_with_its_id() -> None:
    index, _, _ = names(training([0, 1]).bytes())
    declared = [n.decode() for n in index.global_block.vars.name if b"learning_rate" in n]
    assert declared[0] == "learning_rate_0" and declared[1].startswith("learning_rate_0%")


def test_grad_ops_name_their_forward_ops_and_gradients() -> None:
    index, types, args = names(training([0, 0, 1, 1]).bytes())
    b = index.global_block
    by_id = {b.ops.op_id[op]: op for op in b.forward_ops}
    for op, t in enumerate(types):
        if t.endswith("_grad"):
            f = by_id[b.ops.forward_op_id[op]]
            assert types[f] == t.removesuffix("_grad")
    # matmul_grad of the first layer differentiates the first matmul
    first_grad = len(types) - 1 - types[::-1].index("pd_op.matmul_grad")
    assert by_id[b.ops.forward_op_id[first_grad]] == 0
    # each weight's gradient is P@GRAD, and adamw_ reads it with the weight (Param slot)
    program = parse_program(training([0, 0, 1, 1]).bytes(), source="t.json")
    for op, t in enumerate(types):
        if t == "pd_op.adamw_":
            slots = op_slots(program.blocks[0], op)
            assert slots["in1"] == [slots["Param"][0] + b"@GRAD"]
            assert b.ops.param[op] >= 0
    # a value read by two ops has two gradient parts, added up by add_n into X@GRAD
    add_n = types.index("pd_op.add_n")
    (ins, (out,)) = args[add_n]
    assert out.endswith("@GRAD") and ins == [f"{out}@RENAME@0", f"{out}@RENAME@1"]
    # the loss's gradient (full_like) is named from the op that reads it (mean_grad)
    loss_grad = args[types.index("pd_op.full_like")][1][0]
    assert loss_grad == args[types.index("pd_op.mean")][1][0] + "@GRAD"


def test_a_null_result_defines_no_variable() -> None:
    p = training([0, 1])
    grad = next(o for o in p.ops if o["#"] == "1.add_grad")
    grad["O"].append({"%": 999, "TT": {"#": "NULL"}})  # a result the op does not produce
    index, types, args = names(p.bytes())
    assert len(args[types.index("pd_op.add_grad")][1]) == 2
    assert b"%999" not in index.global_block.vars.name


# -- NULL and absent slots ------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
def test_every_optimizer_reads_with_its_absent_optional_slots(kind: str) -> None:
    """Was: momentum_, adagrad_, lamb_ and adamax_ (which write the dist attr of an absent
    optional operand or result as NULL) exit 3, "op N of block 0 is not a JSON array"."""
    p = training([0, 1], [0, 1], optimizer=kind)
    index, types, args = names(p.bytes())
    program = parse_program(p.bytes(), source="t.json")
    updates = [op for op, t in enumerate(types) if t == f"pd_op.{kind}"]
    assert len(updates) == 2
    for op in updates:
        slots = op_slots(program.blocks[0], op)
        weight = slots["Param"][0]
        assert weight.startswith(b"linear_") and slots[_slot(kind, "grad")] == [weight + b"@GRAD"]
        absent = [k for k, slot in enumerate(OPTIMIZERS[kind][0]) if slot.endswith("?")]
        assert all(slots[f"in{k}"] == [] for k in absent)  # a null operand reads nothing
        assert len(args[op][1]) == sum(not r.endswith("?") for r in OPTIMIZERS[kind][1])
        assert index.meshes[index.global_block.op_mesh[op]].process_ids in ((0,), (1,))


def _slot(kind: str, name: str) -> str:
    return f"in{OPTIMIZERS[kind][0].index(name)}"


FOLDED = ("1.data", "dist_op.reshard", "0.combine", "0.split", "p")
NULL_DOC = training([0, 1, 0, 1], [0, 0, 1, 1], optimizer="momentum_").document()


def _one_per_op_type(doc: dict[str, Any]) -> list[tuple[str, tuple[Any, ...]]]:
    """`dist_slots`, the last slot of each kind per op type (an optimizer's last operand and
    result: its absent ones): the class of slots over the class of ops, at a fraction of
    the program's paths."""
    ops = doc["program"]["regions"][0]["blocks"][0]["ops"]
    seen: dict[tuple[str, str], tuple[str, tuple[Any, ...]]] = {}
    for kind, path in dist_slots(doc):
        seen[kind, ops[path[6]]["#"]] = (kind, path)
    return list(seen.values())


SLOTS = _one_per_op_type(NULL_DOC)
NULL_TEXT = json.dumps(NULL_DOC)


def _read_doc(doc: dict[str, Any]) -> tuple[list[bytes], list[tuple[int, ...] | None]]:
    """(op types, each op's process ids or None) of block 0 of a PIR document."""
    index = build_index(parse_program(json.dumps(doc).encode(), source="t.json"))
    b = index.global_block
    meshes = [index.meshes[m].process_ids if m >= 0 else None for m in b.op_mesh]
    return list(b.ops.type), meshes


@pytest.mark.parametrize("null", [NULL, None], ids=["NULL", "null"])
@pytest.mark.parametrize("kind", sorted({k for k, _ in SLOTS}))
def test_every_dist_attr_slot_may_be_null(kind: str, null: Any) -> None:
    """Each dist-attr slot of every op (the class of the momentum_ case: `dist_slots`) set
    to Paddle's NULL or JSON's null is read: the same ops, each on its mesh unless the slot
    was its mesh or its whole dist attr."""
    types, meshes = _read_doc(NULL_DOC)
    paths = [path for k, path in SLOTS if k == kind]
    assert paths
    for path in paths:
        doc = json.loads(NULL_TEXT)  # a copy (json is quicker than deepcopy)
        set_at(doc, path, null)
        got_types, got_meshes = _read_doc(doc)
        assert got_types == types, path
        if kind not in ("op dist attr", "op dist attr data", "op mesh"):
            assert got_meshes == meshes, path
        else:  # the op has no mesh now, unless it is read as something else than an op
            folded = NULL_DOC["program"]["regions"][0]["blocks"][0]["ops"][path[6]]["#"] in FOLDED
            assert got_meshes.count(None) == meshes.count(None) + (not folded), path


@pytest.mark.parametrize("kind", sorted({k for k, _ in SLOTS}))
def test_every_dist_attr_slot_may_be_left_out(kind: str) -> None:
    """Each dist-attr slot left out (a key deleted, an entry dropped from a list) is read,
    or refused as no PIR program with one clean reason (a positional part missing)."""
    for _, path in [s for s in SLOTS if s[0] == kind]:
        doc = json.loads(NULL_TEXT)
        delete_at(doc, path)
        try:
            types, _ = _read_doc(doc)
        except ProgramFileError as e:
            assert "not a PIR program" in str(e) and "\n" not in str(e), (path, e)
            continue
        assert types


def test_a_result_typed_null_reads_as_a_null_operand() -> None:
    p = training([0, 1], optimizer="momentum_")
    op = next(o for o in p.ops if o["#"] == "1.momentum_")
    null = next(r["%"] for r in op["O"] if r["TT"] == NULL)
    p.op("1.scale", [null], [[4, 4]], on=[0], role=2)
    _, types, args = names(p.bytes())
    assert types[-1] == "pd_op.scale" and args[-1][0] == []


def test_regions_are_sub_blocks_and_their_values_resolve() -> None:
    p = training([0, 1])
    x = p.ops[-1]["I"][0]["%"]  # a weight
    inner = PirJson()
    inner.next_id = 1000
    inner.op("1.scale", [x], [[4, 4]], on=[0], chunk=0, struct="/Model/Layer/")
    region = {"#": "region_1", "blocks": [{"#": "block_1", "args": [], "ops": inner.ops}]}
    p.op("1.if", [x], [[4, 4]], on=[0], chunk=0, struct="/Model/Layer/")
    p.ops[-1]["regions"] = [region]
    program = parse_program(p.bytes(), source="t.json")
    assert len(program.blocks) == 2 and program.blocks[1].parent_idx == 0
    index = build_index(program)
    assert list(index.global_block.ops.sub_blocks.values()) == [[1]]
    ins, _ = op_arguments(program.blocks[1], 0)
    assert index.lookup(1, ins[0]) >= 0  # the weight, declared in block 0


def test_the_in_memory_bytes_read_as_the_file(tmp_path: Path) -> None:
    data = training([0, 0, 1, 1], [0, 1, 0, 1]).bytes()
    path = tmp_path / "prog.json"
    path.write_bytes(data)
    from_file, from_bytes = read_program(path), parse_program(data, source=str(path))
    assert [b.ops for b in from_file.blocks] == [b.ops for b in from_bytes.blocks]
    assert [b.vars for b in from_file.blocks] == [b.vars for b in from_bytes.blocks]


def test_stdin_json_is_sniffed_by_content() -> None:
    data = training([0, 0, 1, 1], [0, 0, 1, 1]).bytes()
    r = invoke("inspect", "-", "--json", input=data)
    out = json.loads(r.stdout)
    assert out["pir"]["version"] == 4 and out["layers"]["count"] == 4


# -- what is refused -----------------------------------------------------------------------


def test_convert_writes_a_plan_for_a_pir_program_not_the_program(tmp_path: Path) -> None:
    src, out = tmp_path / "prog.json", tmp_path / "out.pb"
    data = training([0, 0, 1, 1]).bytes()
    src.write_bytes(data)
    invoke("convert", str(src), "--vpp", "2", "-o", str(out), "-q")
    plan = json.loads(
        out.read_text()
    )  # the plan (tests/convert/test_pirplan.py), whatever the name
    assert plan["format"] == "vppctl-pir-plan" and plan["program"]["layers"] == 4
    assert src.read_bytes() == data


def test_a_program_read_from_pir_is_not_written(tmp_path: Path) -> None:
    src = tmp_path / "prog.json"
    src.write_bytes(training([0, 1]).bytes())
    r = invoke("dump", str(src), "-o", str(tmp_path / "out.pbtxt"), exit_code=4)
    assert "writes no PIR" in r.stderr
    with pytest.raises(ConversionError, match="writes no PIR"):
        write_program(read_program(src), tmp_path / "x.pb")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prog.json"]


def _header(version: Any = 4, magic: Any = "pir") -> str:
    return json.dumps({"magic": magic, "trainable": True, "version": version})


GOOD = training([0, 1]).bytes()
BAD: dict[str, tuple[bytes, str]] = {
    "not JSON": (
        b'{"base_code": {"magic": "pir", "version": 4}, "program": {oops}}',
        "invalid JSON",
    ),
    "truncated": (GOOD[: len(GOOD) // 2], "ends early"),
    "truncated in a string": (GOOD[: GOOD.index(b'"1.add"') + 4], "ends early"),
    "version 5": (b'{"base_code": ' + _header(5).encode() + b', "program": {}}', "version 5"),
    "version -1": (b'{"base_code": ' + _header(-1).encode() + b', "program": {}}', "version -1"),
    "version as text": (b'{"base_code": ' + _header("4").encode() + b"}", "integer version"),
    "another magic": (b'{"base_code": ' + _header(magic="onnx").encode() + b"}", "'onnx'"),
    "not PIR at all": (b'{"name": "model", "layers": 3}', "PIR's header"),
    "extra data": (GOOD + b' {"more": 1}', "extra data"),
    "deep nesting": (GOOD.replace(b'"ops":[', b'"ops":[' + b"[" * 100_000, 1), "nested too deeply"),
    "a value used first": (GOOD.replace(b'"I":[{"%":', b'"I":[{"%":9999', 1), "%9999"),
    "not UTF-8": (b'{"base_code": {"magic": "pir\xff"}}', "not UTF-8"),
    "a 5000-digit integer": (GOOD.replace(b'"version":4', b'"version":' + b"4" * 5000), "digits"),
    "an op that is no object": (GOOD.replace(b'"ops":[', b'"ops":[7,', 1), "not a JSON object"),
    "no program": (b'{"base_code": ' + _header().encode() + b"}", '"program"'),
    # found by the fuzzer: a type name that is a list (it was a dict key), dims past int64
    "a type named by a list": (GOOD.replace(b'"#":"0.t_dtensor"', b'"#":["x"]', 1), "string"),
    "dims past int64": (
        GOOD.replace(b'[2,4],"NCHW"', b"[2," + b"9" * 20 + b'],"NCHW"', 1),
        "64 bits",
    ),
    "a role past int32": (
        GOOD.replace(b'"D":1},"N":"op_role"', b'"D":4294967296},"N":"op_role"', 1),
        "out of range",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_file_that_is_no_pir_program_is_exit_3_with_one_line(tmp_path: Path, case: str) -> None:
    data, reason = BAD[case]
    path = tmp_path / "bad.json"
    path.write_bytes(data)
    r = invoke("verify", str(path), "--json", exit_code=3)
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"Error: cannot load {path}: not a ") and reason in line, line
    assert "Traceback" not in r.stderr
    assert json.loads(r.stdout)["error"]["exit_code"] == 3  # --json: the failure as JSON too
    assert path.read_bytes() == data


def test_a_value_defined_twice_is_refused() -> None:
    p = training([0, 1])
    first = next(o for o in p.ops if o["#"] == "1.matmul")
    again = next(o for o in p.ops if o["#"] == "1.add")
    again["O"][0]["%"] = first["O"][0]["%"]
    with pytest.raises(ProgramFileError, match="twice"):
        parse_program(p.bytes(), source="t.json")


def test_one_op_larger_than_the_item_bound_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cursor, "MAX_ITEM_CHARS", 1 << 16)
    monkeypatch.setattr(cursor, "_FIRST_WINDOW", 1 << 12)
    p = training([0, 1])
    p.ops[5]["A"].append({"AT": {"#": "0.a_str", "D": "x" * (1 << 17)}, "N": "huge"})
    with pytest.raises(ProgramFileError, match="longer than"):
        parse_program(p.bytes(), source="t.json")
    p.ops[5]["A"][-1]["AT"]["D"] = "x" * (1 << 15)  # within the bound: read
    assert parse_program(p.bytes(), source="t.json").is_pir


# -- the rules that apply in part still fail -------------------------------------------------


def _verified(p: PirJson) -> set[str]:
    from vppctl.verify import verify_program

    return {v.rule for v in verify_program(parse_program(p.bytes(), source="t.json")).violations}


def test_a_completed_program_built_right_is_valid() -> None:
    assert _verified(training([0, 1, 0, 1], [0, 0, 1, 1])) == set()


@pytest.mark.parametrize(
    ("fault", "rule"),
    [
        ("an op without a mesh", "V001"),
        ("a value on another mesh than its op", "V011"),
        ("a weight on another mesh than its first reader", "V018"),
        ("a layer op's operand dist attr on another mesh", "V017"),
    ],
)
def test_the_mesh_part_of_a_rule_that_applies_in_part_still_fails(fault: str, rule: str) -> None:
    p = training([0, 1, 0, 1], [0, 0, 1, 1])
    matmul = next(o for o in p.ops if o["#"] == "1.matmul")
    dist = next(a for a in matmul["A"] if a["N"] == "op_dist_attr")
    if fault == "an op without a mesh":
        matmul["A"].remove(dist)
    elif fault == "a value on another mesh than its op":
        matmul["O"][0]["TT"]["D"][1]["D"][0]["D"][1] = [1]
    elif fault == "a weight on another mesh than its first reader":
        weight = next(o for o in p.ops if o["#"] == "p")
        weight["O"]["TT"]["D"][1]["D"][0]["D"][1] = [1]
    else:
        dist["AT"]["D"][1][1]["D"][0]["D"][1] = [1]
    assert rule in _verified(p)


def test_a_stream_of_json_garbage_is_refused_after_its_first_piece() -> None:
    import io

    class Stream(io.BytesIO):
        def read(self, size: int | None = -1) -> bytes:
            data = super().read(size)
            self.taken = getattr(self, "taken", 0) + len(data)
            return data

    stream = Stream(b"{" + b"x" * (64 << 20))
    r = invoke("inspect", "-", input=stream, exit_code=3)
    assert "does not begin with PIR's header" in r.stderr
    assert stream.taken <= 4 << 20  # a piece or so, not the 64 MB


# -- names and what errors quote -------------------------------------------------------------


def _named(slot: str, name: str) -> bytes:
    """training([0, 1]) with one name the reader keeps set to `name`: JSON-escaped as
    Python writes it (`\\ud800` for a lone surrogate)."""
    doc = training([0, 1]).document()
    ops = doc["program"]["regions"][0]["blocks"][0]["ops"]
    matmul = next(o for o in ops if o["#"] == "1.matmul")
    if slot == "op type":
        matmul["#"] = "1." + name
    elif slot == "struct name":
        next(a for a in matmul["A"] if a["N"] == "struct_name")["AT"]["D"] = name
    elif slot == "parameter name":
        next(o for o in ops if o["#"] == "p")["A"][3] = name
    elif slot == "data name":
        data = next(o for o in ops if o["#"] == "1.data")
        next(a for a in data["A"] if a["N"] == "name")["AT"]["D"] = name
    else:  # a mesh's dim name
        dist = next(a for a in matmul["A"] if a["N"] == "op_dist_attr")["AT"]["D"]
        dist[0]["D"][2] = [name]
    return json.dumps(doc).encode()


NAME_SLOTS = ("op type", "struct name", "parameter name", "data name", "mesh dim name")


@pytest.mark.parametrize("char", ["\ud800", "\udbff", "\udc00", "\udfff"])
@pytest.mark.parametrize("slot", NAME_SLOTS)
def test_a_lone_surrogate_in_a_name_is_exit_3_with_the_name_escaped(
    tmp_path: Path, slot: str, char: str
) -> None:
    """Was: exit 70 (UnicodeEncodeError) for a struct name, op type, parameter or data
    name holding a lone surrogate, which no UTF-8 (Paddle's) can hold."""
    path = tmp_path / "p.json"
    path.write_bytes(_named(slot, f"/Model/x{char}y/"))
    for command in ("inspect", "verify"):
        r = invoke(command, str(path), exit_code=3)
        (line,) = r.stderr.splitlines()
        assert "not a PIR program" in line and "lone surrogate" in line, line
        assert f"\\u{ord(char):04x}" in line and char not in line
        r = invoke(command, str(path), "--json", exit_code=3)
        assert "lone surrogate" in json.loads(r.stdout)["error"]["message"]


@pytest.mark.parametrize("char", ["\ufffe", "\uffff", "\ufdd0", "\U0010ffff", "\U0001fffe"])
@pytest.mark.parametrize("slot", NAME_SLOTS)
def test_non_characters_in_names_are_read(tmp_path: Path, slot: str, char: str) -> None:
    """Non-characters are characters: UTF-8 holds them, and so does every name."""
    path = tmp_path / "p.json"
    name = f"/Model/x{char}y/"
    path.write_bytes(_named(slot, name))
    r = invoke("inspect", str(path), "--json")
    assert json.loads(r.stdout)["pir"]["version"] == 4
    invoke("inspect", str(path))
    assert invoke("verify", str(path), exit_code=None).exit_code in (0, 1)
    program = parse_program(path.read_bytes(), source="p.json")
    assert name.encode() in b"".join(b"".join(b.ops + b.vars) for b in program.blocks)


LONG = "m" * 200_000
QUOTED: dict[str, bytes] = {
    "a long magic": GOOD.replace(b'"magic":"pir"', b'"magic":"' + LONG.encode() + b'"', 1),
    "a long version": GOOD.replace(b'"version":4', b'"version":' + b"7" * 4000, 1),
    "a long integer out of range": GOOD.replace(
        b'"D":1},"N":"op_role"', b'"D":' + b"9" * 4000 + b'},"N":"op_role"', 1
    ),
    "a long key skipped badly": GOOD.replace(
        b'"program":{', b'"program":{"' + LONG.encode() + b'":[1,},', 1
    ),
    "a long attribute name": GOOD.replace(
        b'{"AT":{"#":"0.a_i32","D":1},"N":"op_role"}', b'{"AT":5,"N":"' + LONG.encode() + b'"}', 1
    ),
    "a long name with a surrogate": _named("struct name", "\ud800" + LONG),
}


@pytest.mark.parametrize("case", sorted(QUOTED))
def test_reader_errors_quote_a_short_prefix(tmp_path: Path, case: str) -> None:
    """Was: a 200,000-character magic string quoted whole in the error."""
    data = QUOTED[case]
    assert data != GOOD
    path = tmp_path / "p.json"
    path.write_bytes(data)
    r = invoke("inspect", str(path), exit_code=3)
    (line,) = r.stderr.splitlines()
    assert "not a PIR program" in line and len(line) < 400, line[:1000]


# -- linear in the file ---------------------------------------------------------------------


def test_values_read_again_through_vectors_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each op reading a combine's vector reads all its values: the values read again by its
    later readers are at most the operands the file writes plus MAX_REREAD, else exit 3.
    (Was: a 20,000-value combine read by 1,000 ops took 17-25 s and 1.33 GB.)"""
    monkeypatch.setattr(parse_module, "MAX_REREAD", 1000)
    program = parse_program(shared_vector(100, 10), source="v.json")  # 900 read again
    index = build_index(program)
    assert (
        sum(len(op_arguments(program.blocks[0], k)[0]) for k in range(index.global_block.n_ops))
        == 1000
    )
    with pytest.raises(ProgramFileError, match="values read again so number over 1,"):
        parse_program(shared_vector(100, 30), source="v.json")  # 2,900 > 1,000 + 130


@pytest.mark.parametrize("case", ["llama_rc_pp2_v2_paddlevpp", "llama_amp_pp4_v2_plain"])
def test_the_forward_op_search_has_room_on_paddles_programs(
    monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """The search for grad ops' forward ops stops after 32 steps per operand in all: on
    Paddle's programs (recompute, AMP) one step per operand links every op the same."""
    import lzma

    import paths

    data = lzma.decompress((paths.PIR_REFERENCE / f"{case}.json.xz").read_bytes())
    linked = [b.ops for b in parse_program(data, source="r.json").blocks]
    monkeypatch.setattr(grads_module, "SEARCH_STEPS_PER_ENTRY", 1)
    monkeypatch.setattr(grads_module, "BUDGET_SLACK", 0)
    assert [b.ops for b in parse_program(data, source="r.json").blocks] == linked
