"""Writing new placements into serialized variables and ops (vppctl.program.rewrite).

A variable's bytes after its name field are rewritten once per distinct value; the
result must be byte for byte what rewriting the whole variable gives. An op or variable
in another encoding than protobuf's gets the values protobuf reads, edited.
"""

from __future__ import annotations

import random

import pytest
from programs import layered

from vppctl.program import rewrite, splice
from vppctl.program._proto import program_pb2 as pb
from vppctl.program._proto import view_pb2 as view
from vppctl.program.load import Block, Program, _parse, _split, parse_program
from vppctl.program.wire import varint

MESH = pb.ProcessMesh(shape=[1], process_ids=[3], dim_names=["x"]).SerializeToString()


def _var(name: str, dims: tuple[int, ...] = (4, 4)) -> bytes:
    v = pb.VarDesc(name=name)
    v.type.type = pb.VarType.DENSE_TENSOR
    v.type.dense_tensor.tensor.data_type = pb.VarType.FP32
    v.type.dense_tensor.tensor.dims.extend(dims)
    v.dist_attr.process_mesh.shape.append(1)
    v.dist_attr.process_mesh.process_ids.append(0)
    v.dist_attr.dims_mapping.extend([-1] * len(dims))
    return v.SerializeToString()


def _whole(old: bytes, mesh: bytes | None, chunk: int | None) -> bytes:
    """What rewriting the whole variable gives."""
    v = view.EditVar.FromString(old)
    t = view.EditTensorDist.FromString(v.dist_attr)
    if mesh is not None:
        t.process_mesh = mesh
    if chunk is not None:
        t.chunk_id = chunk
    v.dist_attr = t.SerializeToString()
    return v.SerializeToString()


def _rewrite(vars_: list[bytes], mesh: bytes | None, chunk: int | None) -> list[bytes]:
    block = Block(idx=0, parent_idx=-1, ops=[], vars=list(vars_), head=b"", tail=b"")
    rewrite.rewrite_vars(block, [(i, mesh, chunk) for i in range(len(vars_))])
    return block.vars


@pytest.mark.parametrize(("mesh", "chunk"), [(MESH, 1), (MESH, None), (None, 1)])
def test_variables_sharing_their_rest_get_what_a_whole_rewrite_gives(
    mesh: bytes | None, chunk: int | None
) -> None:
    olds = [_var(f"v{k}", (4, 4) if k % 2 else (8,)) for k in range(6)]
    assert _rewrite(olds, mesh, chunk) == [_whole(v, mesh, chunk) for v in olds]


@pytest.mark.parametrize(
    ("what", "old"),
    [
        ("a name given twice", _var("a") + pb.VarDesc(name="b").SerializePartialToString()),
        ("a name of 200 bytes", _var("n" * 200)),
        ("no name", _var("x")[len(b"\n\x01x") :]),
        ("an unknown field last", _var("u") + b"\xb8\x3e\x07"),  # field 999, varint 7
    ],
)
def test_odd_variables_get_what_a_whole_rewrite_gives(what: str, old: bytes) -> None:
    assert _rewrite([old, old], MESH, 1) == [_whole(old, MESH, 1)] * 2, what


def _split_dist(name: str) -> bytes:
    """A variable whose dist attr comes in two occurrences, which protobuf merges: the mesh
    in the first, the dims mapping in the second (the write view alone would keep only the
    second)."""
    v = pb.VarDesc.FromString(_var(name))
    mesh = v.dist_attr.process_mesh.SerializeToString()
    v.ClearField("dist_attr")
    first = pb.TensorDistAttr(process_mesh=pb.ProcessMesh.FromString(mesh))
    second = pb.TensorDistAttr(dims_mapping=[-1, -1])
    tag = b"\xca\x3e"  # field 1001, length-delimited
    return b"".join(
        (
            v.SerializeToString(),
            *(tag + bytes([t.ByteSize()]) + t.SerializeToString() for t in (first, second)),
        )
    )


@pytest.mark.parametrize(("mesh", "chunk"), [(MESH, 1), (None, 1), (MESH, None)])
def test_a_dist_attr_in_two_occurrences_is_rewritten_as_protobuf_reads_it(
    mesh: bytes | None, chunk: int | None
) -> None:
    old = _split_dist("s")
    expected = pb.VarDesc.FromString(old)  # merged: the mesh and the dims mapping
    assert expected.dist_attr.process_mesh.process_ids == [0]
    if mesh is not None:
        expected.dist_attr.process_mesh.ParseFromString(mesh)
    if chunk is not None:
        expected.dist_attr.chunk_id = chunk
    (new,) = _rewrite([old], mesh, chunk)
    assert pb.VarDesc.FromString(new) == expected


def test_an_unchanged_value_keeps_its_encoding_and_counts_as_no_change() -> None:
    """Rewriting a variable in another encoding with the values it has changes nothing."""
    old = _split_dist("u")
    block = Block(idx=0, parent_idx=-1, ops=[], vars=[old], head=b"", tail=b"")
    current = pb.VarDesc.FromString(old).dist_attr.process_mesh.SerializeToString()
    assert rewrite.rewrite_vars(block, [(0, current, None)]) == 0
    assert block.vars == [old]
    assert rewrite.rewrite_vars(block, [(0, MESH, None)]) == 1


# -- ops in an unusual encoding: edited as the full message ----------------------------------


def _tensor_attr_split() -> tuple[bytes, int]:
    """A small program whose op K's first input tensor dist attr comes in two occurrences,
    which protobuf merges: its dims mapping in the first, the rest in the second (the write
    view, which keeps a tensor dist attr as bytes, would keep only the second). Its other
    fields are as protobuf writes them."""
    from programs import layered

    from vppctl.program.load import parse_program

    p = layered([0, 0, 1, 1], backward=True, optimizer=True)
    ops = p.msg.blocks[0].ops
    k = next(i for i, o in enumerate(ops) if o.dist_attr.input_dist_attrs)
    op = pb.OpDesc()
    op.CopyFrom(ops[k])
    entry = op.dist_attr.input_dist_attrs[0]
    entry.tensor_dist_attr.dims_mapping[:] = [0, -1]
    rest = pb.TensorDistAttr()
    rest.CopyFrom(entry.tensor_dist_attr)
    rest.ClearField("dims_mapping")
    parts = (pb.TensorDistAttr(dims_mapping=[0, -1]), rest)
    split_entry = pb.TensorDistAttrMappingEntry(name=entry.name).SerializeToString() + b"".join(
        b"\x12" + varint(t.ByteSize()) + t.SerializeToString() for t in parts
    )  # field 2, length-delimited, twice
    others = pb.OperatorDistAttr()
    others.CopyFrom(op.dist_attr)
    del others.input_dist_attrs[0]
    dist = b"\x0a" + varint(len(split_entry)) + split_entry + others.SerializeToString()
    op.ClearField("dist_attr")
    odd = op.SerializeToString() + b"\xd2\x3e" + varint(len(dist)) + dist  # field 1002 last
    assert pb.OpDesc.FromString(odd).dist_attr.input_dist_attrs[
        0
    ].tensor_dist_attr.dims_mapping == [0, -1]
    program = parse_program(p.bytes())
    program.blocks[0].ops[k] = odd
    return program.to_bytes(), k


def test_an_op_whose_tensor_dist_attr_is_split_keeps_what_protobuf_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nothing else is unusual about it, so the scan reads it with its neighbours (its fast
    path): only the rewrite's own check (the view gives other bytes back) finds it, and edits
    it as the full message. A gate on what the scan saw would lose the dims mapping."""
    from vppctl.program import scan
    from vppctl.program.load import parse_program

    data, k = _tensor_attr_split()
    one_by_one: list[int] = []
    alone = scan._OpScan.one
    monkeypatch.setattr(scan._OpScan, "one", lambda s, b, i: one_by_one.append(i) or alone(s, b, i))
    block = parse_program(data).blocks[0]
    scan.scan_ops(block, 0, lambda name, default: default)
    assert one_by_one == []  # read by the fast path
    assert rewrite.rewrite_ops(block, [(k, MESH, 1)]) == 1
    dist = pb.OpDesc.FromString(block.ops[k]).dist_attr
    assert dist.chunk_id == 1 and pb.ProcessMesh.FromString(MESH) == dist.process_mesh
    tensor = dist.input_dist_attrs[0].tensor_dist_attr
    assert tensor.dims_mapping == [0, -1] and tensor.process_mesh == dist.process_mesh


# -- large ops: edited by their fields (rewrite._OpEditor.spliced, scan._without_attrs) -------


def _with_huge_attr(split_dist: bool = False) -> bytes:
    """A small program whose op 5 (in layer 2, which goes to chunk 1 at vpp 2) carries a
    2 MB string attr (over BIG_OP), its dist attr split over two occurrences when asked
    (mesh, then the rest)."""
    from programs import layered

    p = layered([0, 0, 1, 1], backward=True, optimizer=True)
    op = p.msg.blocks[0].ops[5]
    op.attrs.add(name="note", type=pb.STRING, s="x" * (2 << 20))
    data = p.bytes()
    if not split_dist:
        return data
    from vppctl.program.load import parse_program

    program = parse_program(data)
    big = pb.OpDesc.FromString(program.blocks[0].ops[5])
    mesh = pb.OperatorDistAttr(process_mesh=big.dist_attr.process_mesh)
    rest = pb.OperatorDistAttr()
    rest.CopyFrom(big.dist_attr)
    rest.ClearField("process_mesh")
    big.ClearField("dist_attr")
    tag = b"\xd2\x3e"  # field 1002, length-delimited
    parts = [m.SerializeToString() for m in (mesh, rest)]
    program.blocks[0].ops[5] = big.SerializePartialToString() + b"".join(
        tag + varint(len(x)) + x for x in parts
    )
    return program.to_bytes()


def _converted(data: bytes) -> bytes:
    from vppctl.convert import ConvertOptions, convert_program
    from vppctl.plan import PlanOptions
    from vppctl.program.load import parse_program

    program = parse_program(data)
    convert_program(program, ConvertOptions(plan=PlanOptions(vpp=2)))
    return program.to_bytes()


@pytest.mark.parametrize("split_dist", [False, True])
def test_a_large_op_converts_as_the_whole_op_would(
    monkeypatch: pytest.MonkeyPatch, split_dist: bool
) -> None:
    from vppctl.program import scan

    data = _with_huge_attr(split_dist)
    by_fields = _converted(data)
    monkeypatch.setattr(rewrite, "BIG_OP", 1 << 40)
    monkeypatch.setattr(scan, "BIG_OP", 1 << 40)
    whole = _converted(data)
    assert pb.ProgramDesc.FromString(by_fields) == pb.ProgramDesc.FromString(whole)
    if not split_dist:
        assert by_fields == whole  # spliced where the whole op would write it
    big = pb.ProgramDesc.FromString(by_fields).blocks[0].ops[5]
    assert big.struct_name.startswith("/Model/DecoderLayer_2/")
    assert big.dist_attr.chunk_id == 1 and len(big.attrs[-1].s) == 2 << 20


# -- edits in any order, in batches: what the program rewritten whole gets ----------------------


def _programs_as_spans_and_whole(data: bytes) -> tuple[Program, Program]:
    """The program read as ranges of its bytes, and parsed whole (its ops and variables
    lists, rewritten one by one)."""
    listed = _split(_parse(data, source="<memory>", text=False), source="<memory>", size=len(data))
    return parse_program(data), listed


def _orders(rng: random.Random, n: int) -> list[list[int]]:
    """Items edited as a pass gives them (ascending), and in the orders no pass gives but
    the functions take: descending, shuffled, some twice, ascending after a later one."""
    some = sorted(rng.sample(range(n), n // 2))
    twice = sorted(some + rng.sample(range(n), n // 4))
    later = [*some[len(some) // 2 :], *some[: len(some) // 2]]
    shuffled = list(some)
    rng.shuffle(shuffled)
    return [list(range(n)), some, some[::-1], shuffled, twice, later]


@pytest.mark.parametrize("batch", [1, 3, 4096])
@pytest.mark.parametrize("seed", range(3))
def test_edits_in_any_order_and_batch_give_what_the_whole_rewrite_gives(
    batch: int, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Variables edited in batches (`_RELEASE_VARS`) and ops in batches and runs (`_BATCH`,
    `_RUN`) of every size, in every order: ascending ones are spliced together, any other
    one at a time on the item as it is; either way the bytes and counts of the program
    parsed whole, edited one by one."""
    monkeypatch.setattr(rewrite, "_RELEASE_VARS", batch)
    monkeypatch.setattr(splice, "_BATCH", batch)
    monkeypatch.setattr(splice, "_RUN", max(1, batch // 2))
    rng = random.Random(seed)
    data = layered([0, 0, 1, 1, 2, 2], backward=True, optimizer=True).bytes()
    other = pb.ProcessMesh(shape=[2], process_ids=[5, 6], dim_names=["pp"]).SerializeToString()
    for order in _orders(rng, len(pb.ProgramDesc.FromString(data).blocks[0].vars)):
        spans, listed = _programs_as_spans_and_whole(data)
        counts = []
        for program in (spans, listed):
            block = program.blocks[0]
            ops = [i for i in order if i < len(block.ops)]
            var_edits = [(i, MESH if i % 3 else other, i % 4 or None) for i in order]
            counts.append(
                (
                    rewrite.rewrite_vars(block, var_edits),
                    rewrite.rewrite_ops(block, [(i, other if i % 2 else None, i % 3) for i in ops]),
                )
            )
        assert counts[0] == counts[1]
        assert spans.to_bytes() == listed.to_bytes()
        assert list(spans.blocks[0].vars) == list(listed.blocks[0].vars)
