"""The index's scan reads many ops (or variables) in one parse (scan.scan_ops and
scan_vars, the ScanMerge and ScanVarMerge views).

Whatever the encoding, it must read exactly what parsing each op or variable alone
through ScanOp or ScanVar reads: the same columns, or the same error naming the same
corrupt op. Each test builds an odd encoding and compares the two readings.

The tests here also cover vppctl/program/reads.py, which has no test file of its own.
"""

from __future__ import annotations

import random
from array import array

import paths
import pytest
from fuzzing import mutant
from programs import layered

from vppctl.engine import index as index_module
from vppctl.engine.index import build_index
from vppctl.errors import ProgramFileError
from vppctl.program import reads, scan
from vppctl.program._proto import program_pb2 as pb
from vppctl.program._proto import view_pb2 as view
from vppctl.program.items import Patch
from vppctl.program.load import Program, parse_program, read_program
from vppctl.program.reads import MeshKey, decode_mesh
from vppctl.program.roles import BACKWARD
from vppctl.program.splice import DIST_TAG
from vppctl.program.wire import field_spans, varint

ROOT = paths.ROOT


def _columns(program: Program) -> object:
    try:
        index = build_index(program)
    except ProgramFileError as e:
        return ("refused", str(e))
    out = []
    for bi in index.blocks:
        o, v = bi.ops, bi.vars
        out.append(
            (
                v.name,
                v.mesh,
                list(v.chunk),
                bytes(v.is_parameter),
                o.type,
                list(o.role),
                o.struct,
                o.mesh,
                list(o.chunk),
                list(o.op_id),
                list(o.forward_op_id),
                sorted(o.sub_blocks.items()),
                list(o.in_off),
                list(o.in_var),
                list(o.out_off),
                list(o.out_var),
                sorted(o.param.items()),
            )
        )
    return out


def _both(data: bytes, monkeypatch: pytest.MonkeyPatch, piece: int = 3) -> tuple[object, object]:
    """(merged reading, op-by-op reading) of a serialized program, in pieces of `piece` ops
    (small, so that pieces start and end everywhere)."""
    monkeypatch.setattr(scan, "PIECE_ITEMS", piece)
    merged = _columns(parse_program(data))
    with monkeypatch.context() as m:
        m.setattr(scan._OpScan, "merged", lambda self, ops: False)
        m.setattr(scan, "_merged_vars", lambda piece: None)
        alone = _columns(parse_program(data))
    return merged, alone


def _merges(piece: list[bytes]) -> bool:
    return scan._OpScan({}.get).merged(piece)  # names resolve to no variable


def _program(ops: list[bytes], extra_vars: list[bytes] = ()) -> bytes:  # type: ignore[assignment]
    """A one-block program holding `ops` (serialized OpDescs), the variables x and y, and
    `extra_vars` (serialized VarDescs)."""
    block = pb.BlockDesc(idx=0, parent_idx=-1)
    for name in ("x", "y"):
        v = block.vars.add(name=name, is_parameter=name == "y")
        v.type.type = pb.VarType.DENSE_TENSOR
        v.dist_attr.process_mesh.shape.append(1)
        v.dist_attr.process_mesh.process_ids.append(0)
        v.dist_attr.chunk_id = 0
    tail = b"".join(_field(3, v) for v in extra_vars) + b"".join(_field(4, op) for op in ops)
    return _field(1, block.SerializeToString() + tail)


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _int_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _op(op_type: str = "relu", role: int = 0, **extra: bytes) -> bytes:
    op = pb.OpDesc(type=op_type, struct_name="/M/L_0/")
    op.inputs.add(parameter="X", arguments=["x"])
    op.outputs.add(parameter="Out", arguments=["y"])
    op.attrs.add(name="op_role", type=pb.INT, i=role)
    op.dist_attr.process_mesh.shape.append(1)
    op.dist_attr.process_mesh.process_ids.append(0)
    op.dist_attr.chunk_id = 0
    op.id = 7
    return op.SerializeToString() + b"".join(extra.values())


def test_a_sample_reads_the_same_merged_and_op_by_op(monkeypatch: pytest.MonkeyPatch) -> None:
    data = (ROOT / "samples" / "gpt-8l-pp4.pb").read_bytes()
    merged, alone = _both(data, monkeypatch)
    assert merged == alone
    assert isinstance(merged, list) and len(merged[0][0]) > 100


def test_the_usual_piece_is_read_merged() -> None:
    program = read_program(ROOT / "samples" / "gpt-8l-pp4.pb")
    assert _merges(program.blocks[0].ops[:256])


@pytest.mark.parametrize(
    ("what", "tail"),
    [
        ("id packed", _field(1003, _varint(5))),
        ("forward_op_id packed", _field(1004, _varint(5))),
        ("chunk_id packed", _field(1002, _field(6, _varint(1)))),
    ],
)
def test_a_packed_int_is_skipped_as_alone_and_read_op_by_op(
    what: str, tail: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ScanOp declares the ints singular, so a length-delimited occurrence is an unknown
    field; ScanMerge declares them repeated and would read it as packed."""
    ops = [_op(), _op(role=BACKWARD, extra=tail), _op()]
    assert not _merges(ops), what
    merged, alone = _both(_program(ops), monkeypatch)
    assert merged == alone


@pytest.mark.parametrize(
    ("what", "tail"),
    [
        ("type twice: the last counts", _field(3, b"gelu")),
        (
            "a second dist_attr merges, its mesh counts",
            _field(1002, _field(3, b"\x08\x01\x10\x01")),
        ),
        ("a second chunk id", _field(1002, _int_field(6, 1))),
        ("id twice", _int_field(1003, 9)),
        ("a second input slot", _field(1, _field(1, b"Y") + _field(2, b"y"))),
        ("an unknown field", _field(77, b"?")),
        ("a varint where bytes belong", _int_field(3, 5)),
        (
            "a sub_block attr",
            _field(
                4, pb.OpDesc.Attr(name="sub_block", type=pb.BLOCK, block_idx=0).SerializeToString()
            ),
        ),
        (
            "a role of 256",
            _field(4, pb.OpDesc.Attr(name="op_role", type=pb.INT, i=256).SerializeToString()),
        ),
        (
            "a role as a long",
            _field(4, pb.OpDesc.Attr(name="op_role", type=pb.LONG, l=2).SerializeToString()),
        ),
    ],
)
def test_odd_but_valid_encodings_read_as_alone(
    what: str, tail: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    ops = [_op(), _op(extra=tail), _op(op_type="gelu")]
    merged, alone = _both(_program(ops), monkeypatch, piece=256)
    assert merged == alone, what


def test_absent_fields_read_as_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    bare = pb.OpDesc(type="relu").SerializeToString()
    ops = [bare, _op(), b"", bare]
    assert _merges(ops)
    merged, alone = _both(_program(ops), monkeypatch, piece=256)
    assert merged == alone


def test_an_argument_named_like_the_sentinel_is_read_op_by_op(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    odd = _field(1, _field(1, b"X") + _field(2, scan._SENTINEL_NAME)) + _field(3, b"relu")
    ops = [_op(), odd, _op()]
    assert not _merges(ops)
    merged, alone = _both(_program(ops), monkeypatch, piece=256)
    assert merged == alone


@pytest.mark.parametrize("cut", [1, 2, 5, len(_op())])
def test_a_corrupt_op_cannot_swallow_the_separator(cut: int) -> None:
    """An op whose last field claims more bytes than it has is corrupt alone; joined, it
    would swallow the separator after it (and, with the largest cut, the whole next op,
    leaving a clean parse one separator short). The scan must name it as corrupt."""
    good = _op()
    corrupt = good + _varint(77 << 3 | 2) + _varint(len(scan._SCAN_SEPARATOR) + cut)
    assert not _merges([good, corrupt, good])
    with pytest.raises(ProgramFileError, match="op 1 of block 0 is corrupt"):
        build_index(parse_program(_program([good, corrupt, good])))


def test_a_truncated_varint_cannot_borrow_the_separators_bytes() -> None:
    good = _op()
    corrupt = good + b"\x08"  # field 1 varint, its value missing
    assert not _merges([good, corrupt])
    with pytest.raises(ProgramFileError, match="op 1 of block 0 is corrupt"):
        build_index(parse_program(_program([good, corrupt])))


def test_a_layered_program_with_backward_and_optimizer_reads_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    p = layered([0, 0, 1, 1], backward=True, optimizer=True)
    merged, alone = _both(p.bytes(), monkeypatch, piece=2)
    assert merged == alone


def test_fuzzed_programs_read_the_same_merged_and_op_by_op(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fuzzer's mutants (wire, byte and structure mutations of every base program):
    both readings agree, refusals included."""
    seed = random.Random(5).randrange(1 << 30)
    compared = 0
    for n in range(150):
        base, data, _ = mutant(seed, n)
        if base.text:
            continue
        try:
            parse_program(data)
        except ProgramFileError:
            continue
        merged, alone = _both(data, monkeypatch)
        assert merged == alone, (seed, n)
        compared += 1
    assert compared > 50


def _var(name: bytes = b"z", **extra: bytes) -> bytes:
    v = pb.VarDesc(is_parameter=True)
    v.type.type = pb.VarType.DENSE_TENSOR
    v.dist_attr.process_mesh.shape.append(1)
    v.dist_attr.process_mesh.process_ids.append(1)
    return _field(1, name) + v.SerializePartialToString() + b"".join(extra.values())


@pytest.mark.parametrize(
    ("what", "tail"),
    [
        ("is_parameter packed: skipped alone", _field(5, _varint(0))),
        ("is_parameter packed, its tag in two bytes", b"\xaa\x00" + _varint(1) + b"\x01"),
        ("is_parameter twice: the last counts", _int_field(5, 0)),
        ("is_parameter as a large varint: true", _int_field(5, 1 << 40)),
        ("name twice", _field(1, b"w")),
        ("dist_attr twice: the last whole, not merged", _field(1001, _int_field(5, 1))),
        ("no dist_attr chunk", b""),
    ],
)
def test_odd_variable_encodings_read_as_alone(
    what: str, tail: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _program([_op()], [_var(b"z", extra=tail), _var(b"w2")])
    merged, alone = _both(data, monkeypatch, piece=256)
    assert merged == alone, what


@pytest.mark.parametrize("tag", [b"\x2a", b"\xaa\x00", b"\xaa\x80\x00"])
def test_a_packed_flag_is_looked_for_only_where_its_tag_byte_is(tag: bytes) -> None:
    """The probe for a length-delimited is_parameter runs only on a piece whose variables hold
    its tag's first byte; one that does is read variable by variable."""
    usual = read_program(ROOT / "samples" / "gpt-8l-pp4.pb").blocks[0].vars[:256]
    data = scan._VAR_SEPARATOR.join(usual) + scan._VAR_SEPARATOR
    assert not scan._may_hold_packed_flag(data, len(usual))
    odd = [*usual[:3], _var(b"z") + tag + _varint(1) + b"\x01", *usual[3:]]
    data = scan._VAR_SEPARATOR.join(odd) + scan._VAR_SEPARATOR
    assert scan._may_hold_packed_flag(data, len(odd))
    assert scan._merged_vars(odd) is None


def test_a_variable_named_like_the_sentinel_is_read_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    assert scan._merged_vars([_var(scan._SENTINEL_NAME)]) is None
    merged, alone = _both(_program([_op()], [_var(scan._SENTINEL_NAME)]), monkeypatch, 256)
    assert merged == alone


def test_a_corrupt_variable_cannot_swallow_the_separator() -> None:
    corrupt = _var() + _varint(77 << 3 | 2) + _varint(200)
    assert scan._merged_vars([corrupt, _var(b"w")]) is None
    with pytest.raises(ProgramFileError, match="variable 2 of block 0 is corrupt"):
        build_index(parse_program(_program([_op()], [corrupt, _var(b"w")])))


def test_a_corrupt_dist_attr_names_its_variable() -> None:
    bad = _field(1, b"z") + _field(1001, b"\x0a\x05")  # a mesh field cut short
    with pytest.raises(ProgramFileError, match="variable 2 of block 0 is corrupt"):
        build_index(parse_program(_program([_op()], [bad, _var(b"w")])))


@pytest.mark.parametrize("piece", [1, 2, 256])
def test_a_corrupt_dist_attr_is_named_after_every_variable_is_read(
    piece: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dist attrs are decoded piece by piece, but a variable that does not parse is named
    before any dist attr that does not decode, and of those the first variable's."""
    monkeypatch.setattr(scan, "PIECE_ITEMS", piece)
    bad = _field(1, b"z") + _field(1001, b"\x0a\x05")  # a mesh field cut short
    worse = _field(1, b"v") + _field(1001, b"\x0a\x07")
    good = [_var(b"a"), _var(b"b")]
    with pytest.raises(ProgramFileError, match="variable 3 of block 0 is corrupt"):
        build_index(parse_program(_program([_op()], [good[0], bad, worse, *good[1:]])))
    corrupt = _var(b"w") + _varint(77 << 3 | 2) + _varint(200)
    with pytest.raises(ProgramFileError, match="variable 5 of block 0 is corrupt"):
        build_index(parse_program(_program([_op()], [good[0], bad, good[1], corrupt])))


def test_a_piece_too_large_to_join_is_read_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Joining holds a second copy of a piece: one of huge ops (megabytes of callstack) is
    read op by op instead, and reads the same."""
    data = (ROOT / "samples" / "gpt-8l-pp4.pb").read_bytes()
    usual = _columns(parse_program(data))
    monkeypatch.setattr(scan, "_PIECE_BYTES", 1000)

    def refuse(*args: object) -> object:
        raise AssertionError("a large piece was joined")

    monkeypatch.setattr(scan._OpScan, "merged", refuse)
    monkeypatch.setattr(scan, "_merged_vars", refuse)
    monkeypatch.setattr(reads, "_run_on", refuse)
    program = parse_program(data)
    assert _columns(program) == usual
    index = build_index(program)
    keys = [m.key for m in index.meshes]
    assert reads.tensor_mesh_conflicts(program.blocks[0], index.blocks[0].op_mesh, keys) == []


@pytest.mark.parametrize("sample", ["gpt-8l-pp4.pb", "gpt-12l-pp4-2ranks-sgd.pb"])
def test_a_variable_shape_reads_as_its_tensor(sample: str) -> None:
    """`var_shape` (the splits' and the moves' one read of a parameter) gives each variable's
    bytes per element and dims as the whole VarDesc read gives them (`var_tensor`), and
    (0, ()) for a variable that is no tensor; `var_dims` its dims."""
    program = parse_program((ROOT / "samples" / sample).read_bytes())
    kinds = set()
    for block in program.blocks:
        for pos in range(len(block.vars)):
            tensor = reads.var_tensor(block, pos)
            want = (0, ()) if tensor is None else (tensor.dtype_bytes, tensor.dims)
            assert reads.var_shape(block, pos) == want
            assert reads.var_dims(block, pos) == want[1]
            kinds.add(want[0])
    assert 4 in kinds  # FP32 tensors among them


# -- V017's reading: per-tensor meshes of ops as they are now, edits included ----------------


def _tensor_conflicts_one_by_one(ops: list[bytes]) -> tuple[list[int], list[MeshKey], list]:
    """What V017's reading must give, from each op parsed alone, as protobuf reads it: each
    op's mesh class, the classes' keys, and the ops whose tensor dist attrs name another
    mesh (the first such entry, its raw mesh), in op order."""
    keys: list[MeshKey] = []
    classes, conflicts = [], []
    for i, blob in enumerate(ops):
        d = pb.OpDesc.FromString(blob).dist_attr
        if not d.HasField("process_mesh"):
            classes.append(-1)
            continue
        own = decode_mesh(d.process_mesh.SerializeToString()).key
        if own not in keys:
            keys.append(own)
        classes.append(keys.index(own))
        for side, entries in (("input", d.input_dist_attrs), ("output", d.output_dist_attrs)):
            raws = [e.tensor_dist_attr.process_mesh.SerializeToString() for e in entries]
            bad = [
                (e.name, raw)
                for e, raw in zip(entries, raws)
                if e.tensor_dist_attr.HasField("process_mesh") and decode_mesh(raw).key != own
            ]
            if bad:
                conflicts.append((i, f"{side} {bad[0][0]}", bad[0][1]))
                break
    return classes, keys, conflicts


@pytest.mark.parametrize(("seed", "piece"), [(s, p) for s in range(6) for p in (1, 7, 256)])
def test_tensor_meshes_are_read_from_the_ops_as_edited(
    seed: int, piece: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """V017 reads many ops at once (`tensor_mesh_conflicts`, edited ones as the output holds
    them, `Items.framed`): each op reads as it is now, whatever its edit (a Patch moving
    every mesh, only the op's or only its tensors', a field spliced in of the same size or
    another, the op replaced whole), as protobuf reads the op alone: the same conflicts,
    in op order, in pieces of any size, however few of the distinct per-tensor dist attrs
    read are kept."""
    monkeypatch.setattr(reads, "PIECE_ITEMS", piece)
    monkeypatch.setattr(reads, "_KEPT", 1 + seed % 3)
    rng = random.Random(seed)
    program = parse_program((ROOT / "samples" / "gpt-8l-pp4.pb").read_bytes())
    ops = program.blocks[0].ops
    assert ops.spans
    meshes = list(program.header.process_meshes)[:4]  # the stage meshes: one size
    seeded = 0
    for i in sorted(rng.sample(range(len(ops)), len(ops) // 2)):
        op = ops[i]
        span = [f for f in field_spans(op) or () if f.number == 1002]
        if len(span) != 1:
            continue
        lo, hi = span[0].start, span[0].end
        field = op[lo:hi]
        mine = next((m for m in meshes if bytes([len(m)]) + m in field), None)
        if mine is None:  # on the 4-rank mesh
            continue
        other = rng.choice([m for m in meshes if m != mine])
        tag = rng.choice((b"", b"\x1a", b"\x0a"))  # every mesh, the op's, its tensors'
        old, new = tag + bytes([len(mine)]) + mine, tag + bytes([len(other)]) + other
        seeded += tag != b"" and field.count(old) > 0
        kind = rng.randrange(4)
        if kind == 0:
            ops.splice(i, lo, hi, Patch(old, new, b"", b""))
        elif kind == 1:
            ops.splice(i, lo, hi, field.replace(old, new))  # the same size
        elif kind == 2:  # another size: a tensor dist attr on the 4-rank mesh
            d = pb.OpDesc.FromString(op).dist_attr
            entries = [*d.input_dist_attrs, *d.output_dist_attrs]
            if entries:
                wide = pb.ProcessMesh.FromString(program.header.process_meshes[4])
                rng.choice(entries).tensor_dist_attr.process_mesh.CopyFrom(wide)
                seeded += 1
            body = d.SerializeToString()
            ops.splice(i, lo, hi, DIST_TAG + varint(len(body)) + body)
        else:
            ops[i] = op[:lo] + field.replace(old, new) + op[hi:]
    now = list(ops)
    classes, keys, want = _tensor_conflicts_one_by_one(now)
    assert seeded and want  # some conflicts were seeded
    assert reads.tensor_mesh_conflicts(program.blocks[0], classes, keys) == want


def _attr(**fields: object) -> bytes:
    return _field(4, pb.OpDesc.Attr(**fields).SerializeToString())  # type: ignore[arg-type]


def _role_attr(value: int) -> bytes:
    return _attr(name="op_role", type=pb.INT, i=value)


_ROLE_BYTES = b"\n\x07op_role\x10\x00\x18\x05"  # the bytes of a usual role attr (role 5)


@pytest.mark.parametrize(
    ("what", "attrs", "usual"),
    [
        ("roles 0-2 as Paddle writes them", [_role_attr(1)], True),
        ("the loss role (256: two bytes)", [_role_attr(256)], True),
        ("the loss-grad role", [_role_attr(257)], True),
        ("the largest role read at once", [_role_attr(0x1FF)], True),
        ("a larger role", [_role_attr(0x200)], False),
        ("a negative role (ten bytes)", [_role_attr(-1)], False),
        ("two role attrs: the last counts", [_role_attr(1), _role_attr(2)], True),
        ("op_role_var (a longer name)", [_attr(name="op_role_var", type=pb.STRINGS)], True),
        (
            "a string holding a role attr's bytes",
            [_attr(name="s", type=pb.STRING, s=_ROLE_BYTES)],
            False,
        ),
        (
            "an attr named op_role that is not an int",
            [_attr(name="op_role", type=pb.STRING)],
            False,
        ),
        ("a role as a long", [_attr(name="op_role", type=pb.LONG, l=2)], False),
        (
            "the role's fields in another order",
            [_field(4, _int_field(3, 1) + b"\n\x07op_role")],
            False,
        ),
        ("a sub_block", [_attr(name="sub_block", type=pb.BLOCK, block_idx=0)], False),
        ("an attr named sub_blocks", [_attr(name="sub_blocks", type=pb.BLOCKS)], True),
        ("a string holding sub_block", [_attr(name="s", type=pb.STRING, s=b"\tsub_block")], False),
        ("no role attr", [], True),
    ],
)
def test_roles_are_read_at_once_only_from_attrs_in_the_usual_encoding(
    what: str, attrs: list[bytes], usual: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The merged scan reads the roles of a piece at once when every attr that may be a role or
    a sub-block is a role attr in the usual encoding (`_canonical_roles`); any other piece is
    read attr by attr. Either way the roles are those each op alone reads."""
    plain = pb.OpDesc(type="relu").SerializeToString()
    odd = plain + b"".join(attrs)
    ops = [_op(role=1), odd, plain, _op(role=2)]
    merged = view.ScanMerge.FromString(scan._SCAN_SEPARATOR.join(ops) + scan._SCAN_SEPARATOR)
    got = scan._canonical_roles(list(merged.attrs), len(ops))
    assert (got is not None) == usual, what
    if got is not None:
        alone = [scan._OpScan({}.get)._role(view.ScanOp.FromString(op).attrs, 0) for op in ops]
        assert got == alone, what
    merged_cols, alone_cols = _both(_program(ops), monkeypatch, piece=256)
    assert merged_cols == alone_cols, what


def _slot(name: bytes, *args: bytes) -> bytes:
    """An input slot (OpDesc.Var) as Paddle writes it."""
    return _field(1, _field(1, name) + b"".join(_field(2, a) for a in args))


@pytest.mark.parametrize(
    ("what", "slots", "param"),
    [
        ("Param as Paddle writes it", [_slot(b"Grad", b"x"), _slot(b"Param", b"y")], "y"),
        ("MasterParam before Param", [_slot(b"MasterParam", b"x"), _slot(b"Param", b"y")], "y"),
        ("Param with two arguments: the first", [_slot(b"Param", b"x", b"y")], "x"),
        ("Param without arguments, then one with", [_slot(b"Param"), _slot(b"Param", b"x")], "x"),
        (
            "the first Param with arguments counts",
            [_slot(b"Param", b"y"), _slot(b"Param", b"x")],
            "y",
        ),
        ("an undeclared argument", [_slot(b"Param", b"nowhere")], None),
        ("no Param slot", [_slot(b"Grad", b"x")], None),
        ("Param only in an output slot", [_field(2, _field(1, b"Param") + _field(2, b"x"))], None),
        ("Param only in an attr", [_attr(name="Param", type=pb.STRING, s=b"x")], None),
        (
            "the name after the arguments",
            [_field(1, _field(2, b"x") + _field(1, b"Param"))],
            "x",
        ),
        (
            "the name given twice: the last counts",
            [_field(1, _field(1, b"Param") + _field(1, b"Grad") + _field(2, b"x"))],
            None,
        ),
        (
            "the name's length in two bytes",
            [_field(1, b"\x0a\x85\x00Param" + _field(2, b"x"))],
            "x",
        ),
        ("a long argument", [_slot(b"Param", b"x" * 200)], None),
    ],
)
def test_an_optimizer_ops_param_reads_as_alone(
    what: str, slots: list[bytes], param: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Optimize-role ops' Param inputs are read in runs of ops (`scan._params`): the first input
    slot named Param with arguments, whatever the slots' encoding."""
    odd = pb.OpDesc(type="sgd").SerializeToString() + b"".join(slots) + _role_attr(2)
    ops = [_op(role=2), odd, _op(role=2, extra=_slot(b"Param", b"y")), odd]
    merged, alone = _both(_program(ops), monkeypatch, piece=256)
    assert merged == alone, what
    index = build_index(parse_program(_program(ops)))
    names = {b"x": 0, b"y": 1}
    want = scan.NO_VAR if param is None else names[param.encode()]
    assert index.blocks[0].ops.param == {0: scan.NO_VAR, 1: want, 2: 1, 3: want}, what


def test_a_piece_is_read_through_its_framing_as_a_slice_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`_piece` splits unedited ranges of the bytes read by parsing their framing; edited items,
    a run too large to copy again and items framed under another tag are sliced."""
    program = read_program(ROOT / "samples" / "gpt-8l-pp4.pb")
    ops, vars_ = program.blocks[0].ops, program.blocks[0].vars
    assert ops.spans and not ops.has_edits
    for lo, hi in ((0, 256), (3, 4), (len(ops) - 5, len(ops) + 300)):
        assert scan._piece(ops, lo, hi, scan._framed_ops) == ops[lo:hi]
        assert scan._piece(vars_, lo, hi, scan._framed_vars) == vars_[lo:hi]
    calls: list[int] = []

    def framed(run: bytes) -> list[bytes]:
        calls.append(len(run))
        return scan._framed_ops(run)

    assert scan._piece(vars_, 0, 10, framed) == vars_[:10]  # vars are not field 4: sliced
    monkeypatch.setattr(scan, "_PIECE_BYTES", 100)
    calls.clear()
    assert scan._piece(ops, 0, 10, framed) == ops[:10] and not calls
    monkeypatch.undo()
    ops[1] = b"\x1a\x01x"
    assert ops.has_edits
    assert scan._piece(ops, 0, 10, framed) == ops[:10] and not calls


@pytest.mark.parametrize(
    ("positions", "most", "runs"),
    [
        ([], 4, []),
        ([5], 4, [(5, 6)]),
        ([0, 1, 2, 5, 6, 9], 4, [(0, 3), (5, 7), (9, 10)]),
        ([0, 1, 2, 3, 4, 5, 6, 7, 8], 4, [(0, 4), (4, 8), (8, 9)]),
        ([3, 4, 6], 1, [(3, 4), (4, 5), (6, 7)]),
    ],
)
def test_optimizer_ops_are_read_in_runs(
    positions: list[int], most: int, runs: list[tuple[int, int]]
) -> None:
    assert scan._runs(positions, most) == runs
    assert [p for lo, hi in runs for p in range(lo, hi)] == positions


def test_a_merged_list_is_split_at_its_sentinels_as_a_loop_splits_it() -> None:
    """`_last_each` and `_joined_each` against the runs a list was made of, on random runs (empty
    runs, the first one included, and runs of several values), and refusing a list whose
    sentinels are not one per op."""
    rng = random.Random(7)
    for _ in range(300):
        n = rng.randrange(0, 6)
        runs = [
            [rng.choice([b"a", b"bc", b""]) for _ in range(rng.choice([0, 1, 1, 2, 3]))]
            for _ in range(n)
        ]
        values: list[bytes] = [v for run in runs for v in (*run, b"S")]
        assert scan._last_each(values, n, b"S", b"-") == [r[-1] if r else b"-" for r in runs]
        assert scan._joined_each(values, n, b"S") == [b"".join(r) for r in runs]
        ints = [len(v) if v != b"S" else -7 for v in values]
        want = [len(r[-1]) if r else 99 for r in runs]
        assert scan._last_each(ints, n, -7, 99) == want
        assert scan._last_each(values, n + 1, b"S", b"-") is None
        assert scan._joined_each([*values, b"S"], n, b"S") is None


def test_an_undeclared_reader_queue_names_no_variable_and_any_other_name_is_unknown() -> None:
    """`_accept_reader_queues` finds NO_VAR arguments by a byte search of the columns: a
    column where -1's bytes appear only across two ids (-2 then an id whose low byte is
    0xff) holds no NO_VAR and is left alone."""
    names = [f"v{i}".encode() for i in range(300)]
    queue = b"lod_tensor_blocking_queue_9"
    read = pb.OpDesc(type="read")
    read.inputs.add(parameter="Reader", arguments=[queue, "nowhere", "x"])
    odd = pb.OpDesc(type="relu")
    odd.inputs.add(parameter="X", arguments=["@EMPTY@", "v253"])  # -2, then id 255 (0xff)
    ops = [read.SerializeToString(), odd.SerializeToString()]
    index = build_index(parse_program(_program(ops, [_var(n) for n in names])))
    o = index.blocks[0].ops
    assert list(o.in_var) == [scan.SCOPE_VAR, scan.NO_VAR, 0, scan.EMPTY_VAR, 255]
    alone = _program([odd.SerializeToString()], [_var(n) for n in names])  # no NO_VAR at all
    assert list(build_index(parse_program(alone)).blocks[0].ops.in_var) == [scan.EMPTY_VAR, 255]


@pytest.mark.parametrize("at", [0, 3, 4, 5, 8, 9])
def test_no_var_is_found_in_any_run_of_a_column(at: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """`_holds_no_var` searches a column a run of ids at a time: NO_VAR is found wherever it
    lies, a run's first and last id included."""
    monkeypatch.setattr(index_module, "_SEARCHED", 4)
    column = array("q", range(10))
    assert not index_module._holds_no_var(column)
    column[at] = scan.NO_VAR
    assert index_module._holds_no_var(column)
    assert not index_module._holds_no_var(array("q"))
