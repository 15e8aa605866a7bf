"""The program format and reading/writing it without losing a byte.

A program is a superset of Paddle's ProgramDesc: every Paddle field keeps Paddle's
name, label and number, vppctl's own fields are numbered from 1001, and the lazy
views in view.proto declare the same numbers as their program.proto counterparts.
Bytes written by Paddle load, and `vppctl dump IN -o OUT.pb` writes them back
byte for byte, fields vppctl does not know included. Text format cannot carry
unknown fields, and says so on stderr.

"Paddle-serialized" bytes are built here with vppctl's own program_pb2 (Paddle's
numbers) plus unknown fields encoded by hand, so the tests do not need Paddle.

The tests here also cover vppctl/program/_proto/__init__.py, which has no test file of its
own.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from commandline import invoke
from google.protobuf import text_format
from google.protobuf.descriptor import FieldDescriptor

from vppctl.program._proto import program_pb2 as pb
from vppctl.program._proto import view_pb2 as view
from vppctl.program.load import parse_program, read_program
from vppctl.program.save import serialize, write_program

REQ, OPT, REP = "required", "optional", "repeated"

# -- a tiny protobuf wire encoder, for fields program.proto does not declare -------


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def tag(number: int, wire_type: int) -> bytes:
    return varint(number << 3 | wire_type)


def f_varint(number: int, value: int) -> bytes:
    return tag(number, 0) + varint(value)


def f_fixed64(number: int, value: float) -> bytes:
    return tag(number, 1) + struct.pack("<d", value)


def f_bytes(number: int, payload: bytes) -> bytes:
    return tag(number, 2) + varint(len(payload)) + payload


def f_group(number: int, body: bytes) -> bytes:
    return tag(number, 3) + body + tag(number, 4)


def f_fixed32(number: int, value: float) -> bytes:
    return tag(number, 5) + struct.pack("<f", value)


def with_unknown(msg, *fields: bytes):  # type: ignore[no-untyped-def]
    """Add hand-encoded fields (unknown to program.proto) to `msg`, as a newer Paddle would."""
    msg.MergeFromString(b"".join(fields))
    return msg


# -- the format: Paddle's framework.proto, field by field --------------------------

PADDLE_MESSAGES: dict[str, dict[str, tuple[int, str, str]]] = {
    "Version": {"version": (1, OPT, "int64")},
    "Complex": {"r": (1, REQ, "double"), "i": (2, REQ, "double")},
    "Scalar": {
        "type": (1, REQ, "Scalar.Type"),
        "b": (2, OPT, "bool"),
        "i": (3, OPT, "int64"),
        "r": (4, OPT, "double"),
        "c": (5, OPT, "Complex"),
    },
    "OpDesc": {
        "inputs": (1, REP, "OpDesc.Var"),
        "outputs": (2, REP, "OpDesc.Var"),
        "type": (3, REQ, "string"),
        "attrs": (4, REP, "OpDesc.Attr"),
        "is_target": (5, OPT, "bool"),
    },
    "OpDesc.Attr": {
        "name": (1, REQ, "string"),
        "type": (2, REQ, "AttrType"),
        "i": (3, OPT, "int32"),
        "f": (4, OPT, "float"),
        "s": (5, OPT, "string"),
        "ints": (6, REP, "int32"),
        "floats": (7, REP, "float"),
        "strings": (8, REP, "string"),
        "b": (10, OPT, "bool"),
        "bools": (11, REP, "bool"),
        "block_idx": (12, OPT, "int32"),
        "l": (13, OPT, "int64"),
        "blocks_idx": (14, REP, "int32"),
        "longs": (15, REP, "int64"),
        "float64s": (16, REP, "double"),
        "var_name": (17, OPT, "string"),
        "vars_name": (18, REP, "string"),
        "float64": (19, OPT, "double"),
        "scalar": (20, OPT, "Scalar"),
        "scalars": (21, REP, "Scalar"),
    },
    "OpDesc.Var": {"parameter": (1, REQ, "string"), "arguments": (2, REP, "string")},
    "VarType": {
        "type": (1, REQ, "VarType.Type"),
        "selected_rows": (2, OPT, "VarType.TensorDesc"),
        "dense_tensor": (3, OPT, "VarType.DenseTensorDesc"),
        "tensor_array": (4, OPT, "VarType.DenseTensorArrayDesc"),
        "reader": (5, OPT, "VarType.ReaderDesc"),
        "tuple": (7, OPT, "VarType.Tuple"),
        "string": (8, OPT, "VarType.TensorDesc"),
        "strings": (9, OPT, "VarType.TensorDesc"),
        "vocab": (10, OPT, "VarType.TensorDesc"),
        "sparse_coo": (11, OPT, "VarType.TensorDesc"),
        "sparse_csr": (12, OPT, "VarType.TensorDesc"),
    },
    "VarType.TensorDesc": {"data_type": (1, REQ, "VarType.Type"), "dims": (2, REP, "int64")},
    "VarType.DenseTensorDesc": {
        "tensor": (1, REQ, "VarType.TensorDesc"),
        "legacy_lod_level": (2, OPT, "int32"),
    },
    "VarType.DenseTensorArrayDesc": {
        "tensor": (1, REQ, "VarType.TensorDesc"),
        "legacy_lod_level": (2, OPT, "int32"),
    },
    "VarType.ReaderDesc": {"dense_tensor": (1, REP, "VarType.DenseTensorDesc")},
    "VarType.Tuple": {"element_type": (1, REP, "VarType.Type")},
    "VarDesc": {
        "name": (1, REQ, "string"),
        "type": (2, REQ, "VarType"),
        "persistable": (3, OPT, "bool"),
        "need_check_feed": (4, OPT, "bool"),
        "is_parameter": (5, OPT, "bool"),
        "stop_gradient": (6, OPT, "bool"),
        "attrs": (7, REP, "VarDesc.Attr"),
    },
    "VarDesc.Attr": {
        "name": (1, REQ, "string"),
        "type": (2, REQ, "AttrType"),
        "i": (3, OPT, "int32"),
        "s": (4, OPT, "string"),
        "ints": (5, REP, "int32"),
    },
    "BlockDesc": {
        "idx": (1, REQ, "int32"),
        "parent_idx": (2, REQ, "int32"),
        "vars": (3, REP, "VarDesc"),
        "ops": (4, REP, "OpDesc"),
        "forward_block_idx": (5, OPT, "int32"),
    },
    "OpVersion": {"version": (1, REQ, "int32")},
    "OpVersionMap": {"pair": (1, REP, "OpVersionMap.OpVersionPair")},
    "OpVersionMap.OpVersionPair": {
        "op_name": (1, REQ, "string"),
        "op_version": (2, REQ, "OpVersion"),
    },
    "ProgramDesc": {
        "blocks": (1, REP, "BlockDesc"),
        "version": (4, OPT, "Version"),
        "op_version_map": (5, OPT, "OpVersionMap"),
    },
}

# vppctl's own fields on Paddle's messages, and the auto_parallel.proto shapes.
VPPCTL_FIELDS: dict[str, dict[str, tuple[int, str, str]]] = {
    "OpDesc": {
        "struct_name": (1001, OPT, "string"),
        "dist_attr": (1002, OPT, "OperatorDistAttr"),
        "id": (1003, OPT, "int64"),
        "forward_op_id": (1004, OPT, "int64"),
    },
    "VarDesc": {"dist_attr": (1001, OPT, "TensorDistAttr")},
    "ProgramDesc": {"process_meshes": (1001, REP, "ProcessMesh")},
}

AUTO_PARALLEL_MESSAGES: dict[str, dict[str, tuple[int, str, str]]] = {
    "ProcessMesh": {
        "shape": (1, REP, "int64"),
        "process_ids": (2, REP, "int64"),
        "dim_names": (3, REP, "string"),
    },
    "TensorDistAttr": {
        "process_mesh": (1, OPT, "ProcessMesh"),
        "dims_mapping": (2, REP, "int64"),
        "batch_dim": (3, OPT, "int64"),
        "dynamic_dims": (4, REP, "bool"),
        "chunk_id": (5, OPT, "int64"),
    },
    "OperatorDistAttr": {
        "input_dist_attrs": (1, REP, "<entry>"),
        "output_dist_attrs": (2, REP, "<entry>"),
        "process_mesh": (3, OPT, "ProcessMesh"),
        "impl_type": (4, OPT, "string"),
        "impl_idx": (5, OPT, "int64"),
        "chunk_id": (6, OPT, "int64"),
    },
}

_TYPE_NAMES = {
    getattr(FieldDescriptor, n): n[5:].lower()
    for n in dir(FieldDescriptor)
    if n.startswith("TYPE_")
}


def _descriptor(dotted: str):  # type: ignore[no-untyped-def]
    obj = pb
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj.DESCRIPTOR


def _label(f: FieldDescriptor) -> str:
    return REQ if f.is_required else REP if f.is_repeated else OPT


def _type(f: FieldDescriptor) -> str:
    named = f.message_type or f.enum_type
    if named is not None:
        return named.full_name.removeprefix(pb.DESCRIPTOR.package + ".")
    return _TYPE_NAMES[f.type]


def _fields(dotted: str, below: int | None = None) -> dict[str, tuple[int, str, str]]:
    return {
        f.name: (f.number, _label(f), _type(f))
        for f in _descriptor(dotted).fields
        if below is None or f.number < below
    }


@pytest.mark.parametrize("message", sorted(PADDLE_MESSAGES))
def test_every_paddle_field_keeps_paddles_name_label_number_and_type(message: str) -> None:
    assert _fields(message, below=1001) == PADDLE_MESSAGES[message]


@pytest.mark.parametrize("message", sorted(VPPCTL_FIELDS))
def test_vppctl_fields_are_numbered_from_1001(message: str) -> None:
    own = _fields(message)
    for name in PADDLE_MESSAGES[message]:
        del own[name]
    assert {k: v for k, v in own.items() if k != "pipeline_plan"} == VPPCTL_FIELDS[message]
    assert all(number >= 1001 for number, _, _ in own.values())


def test_program_field_1002_holds_the_pipeline_plan_message() -> None:
    plan = pb.ProgramDesc.DESCRIPTOR.fields_by_name["pipeline_plan"]
    assert (plan.number, _label(plan), plan.type) == (1002, OPT, FieldDescriptor.TYPE_MESSAGE)


def test_op_struct_name_is_field_1001_as_the_spec_examples_say() -> None:
    assert pb.OpDesc.DESCRIPTOR.fields_by_name["struct_name"].number == 1001
    assert pb.VarDesc.DESCRIPTOR.fields_by_name["dist_attr"].number == 1001


@pytest.mark.parametrize("message", sorted(AUTO_PARALLEL_MESSAGES))
def test_dist_attr_messages_have_paddles_auto_parallel_shapes(message: str) -> None:
    got = _fields(message)
    for name, (_, _, type_) in AUTO_PARALLEL_MESSAGES[message].items():
        if type_ == "<entry>":  # the map entry {name=1, tensor_dist_attr=2}
            entry = _descriptor(message).fields_by_name[name].message_type
            assert {f.name: f.number for f in entry.fields} == {"name": 1, "tensor_dist_attr": 2}
            assert entry.fields_by_name["tensor_dist_attr"].message_type.name == "TensorDistAttr"
            got[name] = (got[name][0], got[name][1], "<entry>")
    assert got == AUTO_PARALLEL_MESSAGES[message]


def test_program_desc_reserves_fields_2_and_3_like_paddle() -> None:
    from google.protobuf import descriptor_pb2

    proto = descriptor_pb2.DescriptorProto()
    pb.ProgramDesc.DESCRIPTOR.CopyToProto(proto)
    reserved = {n for r in proto.reserved_range for n in range(r.start, r.end)}
    assert reserved == {2, 3}


def test_attr_type_values_are_paddles() -> None:
    assert dict(pb.AttrType.items()) == {
        "INT": 0,
        "FLOAT": 1,
        "STRING": 2,
        "INTS": 3,
        "FLOATS": 4,
        "STRINGS": 5,
        "BOOLEAN": 6,
        "BOOLEANS": 7,
        "BLOCK": 8,
        "LONG": 9,
        "BLOCKS": 10,
        "LONGS": 11,
        "FLOAT64S": 12,
        "VAR": 13,
        "VARS": 14,
        "FLOAT64": 15,
        "SCALAR": 16,
        "SCALARS": 17,
    }


def test_var_type_values_are_paddles_including_uint16() -> None:
    assert dict(pb.VarType.Type.items()) == {
        "BOOL": 0,
        "INT16": 1,
        "INT32": 2,
        "INT64": 3,
        "FP16": 4,
        "FP32": 5,
        "FP64": 6,
        "SIZE_T": 19,
        "UINT8": 20,
        "INT8": 21,
        "BF16": 22,
        "COMPLEX64": 23,
        "COMPLEX128": 24,
        "FP8_E4M3FN": 32,
        "FP8_E5M2": 33,
        "UINT16": 36,
        "UINT32": 37,
        "UINT64": 38,
        "DENSE_TENSOR": 7,
        "SELECTED_ROWS": 8,
        "FEED_MINIBATCH": 9,
        "FETCH_LIST": 10,
        "STEP_SCOPES": 11,
        "LOD_RANK_TABLE": 12,
        "DENSE_TENSOR_ARRAY": 13,
        "PLACE_LIST": 14,
        "READER": 15,
        "RAW": 17,
        "TUPLE": 18,
        "STRING": 25,
        "STRINGS": 26,
        "VOCAB": 27,
        "FEED_LIST": 28,
        "PSTRING": 29,
        "SPARSE_COO": 30,
        "SPARSE_CSR": 31,
    }


def test_scalar_type_values_are_paddles() -> None:
    assert dict(pb.Scalar.Type.items()) == {
        "BOOLEAN": 1,
        "LONG": 2,
        "FLOAT64": 3,
        "COMPLEX128": 4,
    }


def test_paddle_defaults_are_kept() -> None:
    assert pb.BlockDesc().forward_block_idx == -1
    assert pb.OpDesc().is_target is False
    assert pb.VarType.DenseTensorDesc().legacy_lod_level == 0
    assert pb.VarDesc().persistable is False


def test_repeated_numbers_are_unpacked_like_paddles_proto2() -> None:
    # Packed and unpacked encodings differ on the wire; a re-encoded Paddle field
    # must come out as Paddle wrote it.
    for message, fields_ in {**PADDLE_MESSAGES, **AUTO_PARALLEL_MESSAGES}.items():
        for name in fields_:
            f = _descriptor(message).fields_by_name[name]
            assert not f.is_packed, f"{message}.{name} is packed"


# -- the lazy views declare the same numbers as their counterparts ----------------

# view message -> program.proto message whose numbers it declares exactly.
EXACT_VIEWS = {
    "LazyProgram": "ProgramDesc",
    "LazyBlock": "BlockDesc",
    "EditOp": "OpDesc",
    "EditOpDist": "OperatorDistAttr",
    "EditEntry": "TensorDistAttrMappingEntry",
    "EditTensorDist": "TensorDistAttr",
    "EditVar": "VarDesc",
}
# Read-only views: may declare fewer fields, never other ones.
READ_VIEWS = {
    "ScanOp": "OpDesc",
    "ScanArgs": "OpDesc.Var",
    "ScanOpDist": "OperatorDistAttr",
    "ScanVar": "VarDesc",
    "ScanTensorDist": "TensorDistAttr",
    "SlotOp": "OpDesc",
    "SlotOp.Var": "OpDesc.Var",
}
# Read views may declare a repeated message field singular: protobuf merges the
# occurrences, which is how ScanOp reads all of an op's argument names at once.
MERGED = {("ScanOp", 1), ("ScanOp", 2)}

_WIRE = {
    **dict.fromkeys(
        ("int32", "int64", "uint32", "uint64", "sint32", "sint64", "bool", "enum"), "varint"
    ),
    **dict.fromkeys(("string", "bytes", "message"), "length-delimited"),
    **dict.fromkeys(("double", "fixed64", "sfixed64"), "64-bit"),
    **dict.fromkeys(("float", "fixed32", "sfixed32"), "32-bit"),
}


def _wire_fields(desc) -> dict[int, tuple[str, bool, str, bool]]:  # type: ignore[no-untyped-def]
    """number -> (name, repeated, wire type, packed)."""
    return {
        f.number: (f.name, f.is_repeated, _WIRE[_TYPE_NAMES[f.type]], f.is_packed)
        for f in desc.fields
    }


def _kept_as_occurrences(view_desc, full_desc, *, required: bool = True):  # type: ignore[no-untyped-def]
    """The view's fields, each singular message field it keeps serialized (as `bytes`)
    shown as its counterpart declares it, after checking (`required`) that the view
    declares it repeated.

    protobuf merges the occurrences of a singular message field; a view keeping it as a
    singular `bytes` would read only the last one, and write only that one back (issue 21).
    As `repeated bytes` it keeps every occurrence, and readers join them. The Edit* views
    may keep them singular: vppctl/program/rewrite.py edits through them only bytes they
    re-serialize unchanged (tests/program/test_encodings.py)."""
    mine = _wire_fields(view_desc)
    for f in full_desc.fields:
        kept = view_desc.fields_by_number.get(f.number)
        if f.is_repeated or f.type != f.TYPE_MESSAGE or kept is None:
            continue
        if kept.type == kept.TYPE_BYTES:
            assert kept.is_repeated or not required, (
                f"{view_desc.name}.{kept.name} keeps a singular message as singular bytes: "
                "declare it repeated (its occurrences merge)"
            )
            mine[f.number] = (kept.name, False, "length-delimited", False)
    return mine


def _view(dotted: str):  # type: ignore[no-untyped-def]
    obj = view
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj.DESCRIPTOR


@pytest.mark.parametrize(("lazy", "full"), sorted(EXACT_VIEWS.items()))
def test_write_views_declare_exactly_their_counterparts_numbers(lazy: str, full: str) -> None:
    # The program's header is written back whole, every time: it keeps every occurrence.
    required = lazy == "LazyProgram"
    mine = _kept_as_occurrences(_view(lazy), _descriptor(full), required=required)
    assert mine == _wire_fields(_descriptor(full))


@pytest.mark.parametrize(("lazy", "full"), sorted(READ_VIEWS.items()))
def test_read_views_declare_a_subset_of_their_counterparts_numbers(lazy: str, full: str) -> None:
    mine = _kept_as_occurrences(_view(lazy), _descriptor(full))
    theirs = _wire_fields(_descriptor(full))
    assert mine
    for n in mine:
        if (lazy, n) in MERGED:
            name, repeated, wire, packed = mine[n]
            assert not repeated and theirs[n] == (name, True, wire, packed)
        else:
            assert theirs.get(n) == mine[n]


# Views that read many ops in one parse (see view.proto): each field has its
# counterpart's number and wire type, declared repeated (or a singular message, to
# merge), so that every occurrence is kept in order.
MERGE_VIEWS = {
    "ScanMerge": "OpDesc",
    "ScanMergeDist": "OperatorDistAttr",
    "ScanVarMerge": "VarDesc",
}
# The probes declare the int fields length-delimited: they find packed occurrences.
PROBED = {("ScanProbe", 1003), ("ScanProbe", 1004), ("ScanProbeDist", 6), ("ScanVarProbe", 5)}


@pytest.mark.parametrize(("merged", "full"), sorted(MERGE_VIEWS.items()))
def test_merge_views_keep_their_counterparts_numbers_and_wire_types(merged: str, full: str) -> None:
    mine, theirs = _wire_fields(_view(merged)), _wire_fields(_descriptor(full))
    for n, (name, repeated, wire, _) in mine.items():
        assert (theirs[n][0], theirs[n][2]) == (name, wire)
        assert repeated or wire == "length-delimited"


def test_the_probe_reads_the_scanned_ints_length_delimited() -> None:
    for view_name, n in PROBED:
        field = _view(view_name).fields_by_number[n]
        assert field.is_repeated and _WIRE[_TYPE_NAMES[field.type]] == "length-delimited"
    scanned = _wire_fields(_view("ScanMerge"))
    assert {n for n, f in scanned.items() if f[2] == "varint"} == {1003, 1004}
    assert {n for n, f in _wire_fields(_view("ScanMergeDist")).items() if f[2] == "varint"} == {6}
    assert {n for n, f in _wire_fields(_view("ScanVarMerge")).items() if f[2] == "varint"} == {5}


def test_views_nest_the_views_their_counterparts_nest() -> None:
    blocks = view.LazyProgram.DESCRIPTOR.fields_by_name["blocks"]
    assert blocks.message_type.name == "LazyBlock"
    assert view.EditOp.DESCRIPTOR.fields_by_name["dist_attr"].message_type.name == "EditOpDist"
    # EditVar.dist_attr and EditEntry.tensor_dist_attr stay serialized (bytes); they
    # are rewritten through EditTensorDist, which declares TensorDistAttr's numbers.
    assert view.EditVar.DESCRIPTOR.fields_by_name["dist_attr"].message_type is None


# -- a program serialized by Paddle ----------------------------------------------


def paddle_program(*, unknown: bool, annotated: bool = False) -> pb.ProgramDesc:
    """A program using every kind of Paddle field; with `unknown`, fields program.proto
    does not declare at every nesting level (as a newer Paddle would write them)."""

    def u(msg, *fields: bytes):  # type: ignore[no-untyped-def]
        return with_unknown(msg, *fields) if unknown else msg

    p = pb.ProgramDesc()
    u(p.version, f_varint(2, 7)).version = 3003001
    pair = u(p.op_version_map.pair.add(op_name="matmul_v2"), f_bytes(3, b"x"))
    u(pair.op_version, f_varint(2, 1)).version = 1
    p.op_version_map.pair.add(op_name="layer_norm").op_version.version = 0
    u(p.op_version_map, f_varint(2, 9))

    b0 = u(p.blocks.add(idx=0, parent_idx=-1), f_fixed64(6, 2.5), f_bytes(1500, b"block"))
    b1 = p.blocks.add(idx=1, parent_idx=0, forward_block_idx=0)

    def dense(name: str, dtype: int, dims: list[int], **kw: object) -> pb.VarDesc:
        v = b0.vars.add(name=name, **kw)
        v.type.type = pb.VarType.DENSE_TENSOR
        v.type.dense_tensor.tensor.data_type = dtype
        v.type.dense_tensor.tensor.dims.extend(dims)
        return v

    x = dense("x", pb.VarType.INT64, [-1, 16], need_check_feed=True, stop_gradient=True)
    u(x, f_varint(8, 1), f_bytes(1500, b"var"))
    u(x.type, f_varint(13, 3))
    u(x.type.dense_tensor, f_varint(3, 1))
    u(x.type.dense_tensor.tensor, f_fixed32(3, 0.5))
    w = dense("linear_0.w_0", pb.VarType.BF16, [16, 8], persistable=True, is_parameter=True)
    u(w.attrs.add(name="trainable", type=pb.BOOLEAN, i=1), f_varint(6, 2))
    w.attrs.add(name="tags", type=pb.STRINGS, s="x", ints=[1, 2, -3])
    dense("u16", pb.VarType.UINT16, [4])
    dense("f8", pb.VarType.FP8_E4M3FN, [4, 4]).type.dense_tensor.legacy_lod_level = 1
    rows = b0.vars.add(name="rows")
    rows.type.type = pb.VarType.SELECTED_ROWS
    rows.type.selected_rows.data_type = pb.VarType.FP16
    rows.type.selected_rows.dims.extend([100, 8])
    arr = b0.vars.add(name="arr")
    arr.type.type = pb.VarType.DENSE_TENSOR_ARRAY
    arr.type.tensor_array.tensor.data_type = pb.VarType.FP32
    reader = b0.vars.add(name="reader")
    reader.type.type = pb.VarType.READER
    reader.type.reader.dense_tensor.add().tensor.data_type = pb.VarType.INT32
    tup = b0.vars.add(name="tup")
    tup.type.type = pb.VarType.TUPLE
    tup.type.tuple.element_type.extend([pb.VarType.FP32, pb.VarType.UINT64])
    for name, kind in (("feed", pb.VarType.FEED_MINIBATCH), ("fetch", pb.VarType.FETCH_LIST)):
        b0.vars.add(name=name, persistable=True).type.type = kind
    b0.vars.add(name="vocab").type.vocab.data_type = pb.VarType.PSTRING
    b0.vars[-1].type.type = pb.VarType.VOCAB

    op = u(b0.ops.add(type="matmul_v2", is_target=False), f_varint(6, 5), f_bytes(1500, b"op"))
    u(op.inputs.add(parameter="X", arguments=["x"]), f_varint(3, 1))
    op.inputs.add(parameter="Y", arguments=["linear_0.w_0"])
    op.outputs.add(parameter="Out", arguments=["y"])
    a = op.attrs
    u(a.add(name="op_role", type=pb.INT, i=0), f_varint(22, 4), f_bytes(1500, b"attr"))
    a.add(name="epsilon", type=pb.FLOAT, f=1e-5)
    a.add(name="alpha", type=pb.FLOAT, f=0.1)
    a.add(name="neg_inf", type=pb.FLOAT, f=float("-inf"))
    a.add(name="op_namescope", type=pb.STRING, s='/ünïcode\t"quoted"/')
    a.add(name="shape", type=pb.INTS, ints=[0, -1, 2**31 - 1, -(2**31)])
    a.add(name="scales", type=pb.FLOATS, floats=[0.5, 1e-30, 3.4e38])
    a.add(name="op_callstack", type=pb.STRINGS, strings=['  File "a.py", line 1\n    f()', ""])
    a.add(name="trans_x", type=pb.BOOLEAN, b=True)
    a.add(name="flags", type=pb.BOOLEANS, bools=[True, False])
    a.add(name="padding_idx", type=pb.LONG, l=-(2**63))
    a.add(name="sub_blocks", type=pb.BLOCKS, blocks_idx=[1])
    a.add(name="longs", type=pb.LONGS, longs=[2**40, -1])
    a.add(name="f64s", type=pb.FLOAT64S, float64s=[0.1 + 0.2, -0.0])
    a.add(name="v", type=pb.VAR, var_name="x")
    a.add(name="vs", type=pb.VARS, vars_name=["x", "y"])
    a.add(name="d", type=pb.FLOAT64, float64=1 / 3)
    u(a.add(name="sc", type=pb.SCALAR).scalar, f_varint(6, 1)).type = pb.Scalar.LONG
    a[-1].scalar.i = -5
    sc = a.add(name="scs", type=pb.SCALARS).scalars
    sc.add(type=pb.Scalar.BOOLEAN, b=True)
    sc.add(type=pb.Scalar.FLOAT64, r=2.5)
    sc.add(type=pb.Scalar.COMPLEX128, c=pb.Complex(r=1.0, i=-1.0))

    cond = b0.ops.add(type="conditional_block")
    cond.attrs.add(name="sub_block", type=pb.BLOCK, block_idx=1)
    cond.attrs.add(name="is_scalar_condition", type=pb.BOOLEAN, b=True)
    b1.ops.add(type="scale").outputs.add(parameter="Out", arguments=["y"])

    if annotated:
        mesh = pb.ProcessMesh(shape=[2], process_ids=[0, 1], dim_names=["x"])
        p.process_meshes.append(mesh)
        op.struct_name = "/Model/Linear/"
        op.dist_attr.process_mesh.CopyFrom(mesh)
        op.dist_attr.chunk_id = 0
        op.id, op.forward_op_id = 7, 3
        x.dist_attr.process_mesh.CopyFrom(mesh)
        x.dist_attr.dims_mapping.extend([-1, -1])
    if unknown:
        # Newer-Paddle fields on the program, of every wire type, after the known ones.
        with_unknown(
            p,
            f_varint(6, 1),
            f_fixed64(7, 1.5),
            f_fixed32(8, 2.5),
            f_group(9, f_varint(1, 3)),
            f_bytes(1500, b"program"),
        )
    return p


def _unknown_size(msg: pb.ProgramDesc) -> int:
    stripped = pb.ProgramDesc()
    stripped.CopyFrom(msg)
    stripped.DiscardUnknownFields()
    return msg.ByteSize() - stripped.ByteSize()


PADDLE_VARIANTS = {
    "plain": {"unknown": False},
    "unknown-fields": {"unknown": True},
    "annotated-unknown-fields": {"unknown": True, "annotated": True},
}


@pytest.fixture(params=sorted(PADDLE_VARIANTS))
def paddle_bytes(request: pytest.FixtureRequest) -> bytes:
    return paddle_program(**PADDLE_VARIANTS[request.param]).SerializeToString()


def test_the_paddle_program_is_complete_and_its_extra_fields_are_unknown() -> None:
    """The premise of the byte-identity tests: a valid program, with real unknown fields."""
    p = paddle_program(unknown=True)
    assert p.FindInitializationErrors() == []
    assert p.IsInitialized()
    assert _unknown_size(paddle_program(unknown=False)) == 0
    assert _messages_with_unknown_fields(p) == {
        "ProgramDesc",
        "Version",
        "OpVersionMap",
        "OpVersionMap.OpVersionPair",
        "OpVersion",
        "BlockDesc",
        "VarDesc",
        "VarDesc.Attr",
        "VarType",
        "VarType.DenseTensorDesc",
        "VarType.TensorDesc",
        "OpDesc",
        "OpDesc.Var",
        "OpDesc.Attr",
        "Scalar",
    }


def _messages_with_unknown_fields(msg) -> set[str]:  # type: ignore[no-untyped-def]
    from google.protobuf.unknown_fields import UnknownFieldSet

    found = set()
    if len(UnknownFieldSet(msg)):
        found.add(msg.DESCRIPTOR.full_name.removeprefix(pb.DESCRIPTOR.package + "."))
    for f, value in msg.ListFields():
        if f.message_type is not None:
            for sub in value if f.is_repeated else [value]:
                found |= _messages_with_unknown_fields(sub)
    return found


def test_a_program_written_by_paddle_loads(paddle_bytes: bytes, tmp_path: Path) -> None:
    src = tmp_path / "paddle.pdmodel"
    src.write_bytes(paddle_bytes)
    program = read_program(src)
    assert len(program.blocks) == 2
    assert len(program.blocks[0].ops) == 2


@pytest.mark.parametrize("out_name", ["out.pb", "out", "out.pdmodel"])
def test_dump_to_binary_writes_paddles_bytes_back_byte_for_byte(
    paddle_bytes: bytes, tmp_path: Path, out_name: str
) -> None:
    src, out = tmp_path / "in.pb", tmp_path / out_name
    src.write_bytes(paddle_bytes)
    result = invoke("dump", str(src), "-o", str(out))
    assert out.read_bytes() == paddle_bytes
    assert src.read_bytes() == paddle_bytes
    assert result.stdout == ""


def test_loading_and_saving_unchanged_is_byte_identical(
    paddle_bytes: bytes, tmp_path: Path
) -> None:
    src, out = tmp_path / "in.pb", tmp_path / "out.pb"
    src.write_bytes(paddle_bytes)
    written, warnings = write_program(read_program(src), out)
    assert out.read_bytes() == paddle_bytes
    assert (written, warnings) == (len(paddle_bytes), [])
    data, warnings = serialize(parse_program(paddle_bytes), text=False)
    assert (data, warnings) == (paddle_bytes, [])


def test_every_nesting_level_keeps_its_unknown_fields(tmp_path: Path) -> None:
    """Checked message by message, so a loss says where it happened."""
    original = paddle_program(unknown=True, annotated=True)
    src, out = tmp_path / "in.pb", tmp_path / "out.pb"
    src.write_bytes(original.SerializeToString())
    write_program(read_program(src), out)
    saved = pb.ProgramDesc.FromString(out.read_bytes())
    pairs = [
        ("program", original, saved),
        ("version", original.version, saved.version),
        ("op_version_map", original.op_version_map, saved.op_version_map),
        ("block", original.blocks[0], saved.blocks[0]),
        ("var", original.blocks[0].vars[0], saved.blocks[0].vars[0]),
        ("var type", original.blocks[0].vars[0].type, saved.blocks[0].vars[0].type),
        ("var attr", original.blocks[0].vars[1].attrs[0], saved.blocks[0].vars[1].attrs[0]),
        ("op", original.blocks[0].ops[0], saved.blocks[0].ops[0]),
        ("op input", original.blocks[0].ops[0].inputs[0], saved.blocks[0].ops[0].inputs[0]),
        ("op attr", original.blocks[0].ops[0].attrs[0], saved.blocks[0].ops[0].attrs[0]),
    ]
    for where, a, b in pairs:
        assert b.SerializeToString() == a.SerializeToString(), where


def test_text_format_round_trip_is_identical_without_unknown_fields(tmp_path: Path) -> None:
    data = paddle_program(unknown=False, annotated=True).SerializeToString()
    src = tmp_path / "in.pb"
    src.write_bytes(data)
    for suffix in (".pbtxt", ".textproto", ".txtpb"):
        text, back = tmp_path / f"prog{suffix}", tmp_path / f"back{suffix}.pb"
        first = invoke("dump", str(src), "-o", str(text), "-q", exit_code=None)
        second = invoke("dump", str(text), "-o", str(back), "-q", exit_code=None)
        assert (first.exit_code, second.exit_code) == (0, 0), first.output + second.output
        assert first.stderr == second.stderr == ""
        parsed = text_format.Parse(text.read_text(encoding="utf-8"), pb.ProgramDesc())
        assert parsed.SerializeToString() == data, suffix
        assert back.read_bytes() == data, suffix


def test_writing_text_warns_that_unknown_fields_are_left_out(tmp_path: Path) -> None:
    original = paddle_program(unknown=True)
    src, text = tmp_path / "in.pb", tmp_path / "prog.pbtxt"
    src.write_bytes(original.SerializeToString())
    result = invoke("dump", str(src), "-o", str(text))
    assert result.stdout == ""
    said = " ".join(result.stderr.split())  # the console may wrap the line
    assert "text" in said.lower()
    assert "left out" in said or "not know" in said
    known = pb.ProgramDesc()
    known.CopyFrom(original)
    known.DiscardUnknownFields()
    parsed = text_format.Parse(text.read_text(encoding="utf-8"), pb.ProgramDesc())
    assert parsed == known


def test_writing_text_via_the_library_reports_the_warning(tmp_path: Path) -> None:
    program = parse_program(paddle_program(unknown=True).SerializeToString())
    _, warnings = write_program(program, tmp_path / "prog.txtpb")
    assert len(warnings) == 1
    _, warnings = write_program(
        parse_program(paddle_program(unknown=False).SerializeToString()), tmp_path / "ok.txtpb"
    )
    assert warnings == []


def test_dump_to_stdout_of_unknown_fields_warns_on_stderr_only(tmp_path: Path) -> None:
    src = tmp_path / "in.pb"
    src.write_bytes(paddle_program(unknown=True).SerializeToString())
    result = invoke("dump", str(src))
    assert result.stderr.strip()
    text_format.Parse(result.stdout, pb.ProgramDesc())  # stdout is the text, nothing else


# -- after convert, fields vppctl does not touch survive ---------------------------

OP_EXTRA = f_varint(6, 42) + f_bytes(1500, b"op-extra")
VAR_EXTRA = f_varint(8, 1) + f_bytes(1500, b"var-extra")
PROGRAM_EXTRA = f_bytes(1500, b"program-extra")


def _by_id(block: pb.BlockDesc) -> dict[int, pb.OpDesc]:
    return {op.id: op for op in block.ops}


def test_convert_keeps_unknown_fields_on_ops_vars_and_the_program(
    sample_bytes, tmp_path: Path
) -> None:
    p = pb.ProgramDesc.FromString(sample_bytes[(4, 2)])
    block = p.blocks[0]
    # An op and a var of the last layer, which convert moves to another stage.
    op = next(o for o in block.ops if o.struct_name.startswith("/GPTModel/DecoderLayer_3/"))
    name = op.outputs[0].arguments[0]
    var = next(v for v in block.vars if v.name == name)
    with_unknown(op, OP_EXTRA)
    with_unknown(var, VAR_EXTRA)
    with_unknown(block.vars[0], VAR_EXTRA)  # a var convert leaves alone
    with_unknown(p, PROGRAM_EXTRA)
    src, out = tmp_path / "in.pb", tmp_path / "out.pb"
    src.write_bytes(p.SerializeToString())

    invoke("convert", str(src), "--vpp", "2", "-o", str(out), "-q")

    q = pb.ProgramDesc.FromString(out.read_bytes())
    new_op = _by_id(q.blocks[0])[op.id]
    new_var = next(v for v in q.blocks[0].vars if v.name == name)
    assert new_op.dist_attr != op.dist_attr, "premise: convert re-meshed this op"
    assert OP_EXTRA in new_op.SerializeToString()
    assert VAR_EXTRA in new_var.SerializeToString()
    assert VAR_EXTRA in q.blocks[0].vars[0].SerializeToString()
    assert PROGRAM_EXTRA in q.SerializeToString()


def test_convert_leaves_every_paddle_field_of_an_op_and_var_as_it_was(
    sample_bytes, tmp_path: Path
) -> None:
    p = pb.ProgramDesc.FromString(sample_bytes[(4, 2)])
    src, out = tmp_path / "in.pb", tmp_path / "out.pb"
    src.write_bytes(p.SerializeToString())
    invoke("convert", str(src), "--vpp", "2", "-o", str(out), "-q")
    q = pb.ProgramDesc.FromString(out.read_bytes())

    def paddle_part(msg):  # type: ignore[no-untyped-def]
        copy = type(msg)()
        copy.CopyFrom(msg)
        copy.ClearField("dist_attr")
        return copy

    old_ops, new_ops = p.blocks[0].ops, q.blocks[0].ops
    assert [o.id for o in new_ops] == [o.id for o in old_ops]
    for a, b in zip(old_ops, new_ops):
        assert paddle_part(b) == paddle_part(a), a.type
    assert [paddle_part(v) for v in q.blocks[0].vars] == [paddle_part(v) for v in p.blocks[0].vars]
