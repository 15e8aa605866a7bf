"""PIR encode: the side tables of a read PIR program written as vppctl's `Program`.

Each op becomes an OpDesc: its type, one input slot per operand and one output slot
per result (`in0`, `out0`, ...; a vector's values share its slot), its `op_role`, a
`sub_block` attribute naming its regions' blocks, its struct name (`/` without one),
its dist attr (mesh, chunk id, and the mesh of each operand and result dist attr,
named by the value), a program-unique `id` (its number) and, on a grad op, the
`forward_op_id` `grads` found. The few slots vppctl reads by name get the names a
legacy program gives them: `X` and `Y` of `pd_op.matmul` (FLOP estimates) and `Param`,
an optimizer op's first operand when it is a parameter. Each value becomes a VarDesc
in the block that defines it.

The program's process meshes are those Paddle takes as the pipeline's stage meshes
(`get_sub_process_mesh_by_program`): the distinct meshes of `pd_op` ops in order of
their first process id.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass

from vppctl.program._proto import program_pb2 as pb
from vppctl.program.pir.tables import PirOrigin, PirTables
from vppctl.program.roles import OPTIMIZE

_SLOTS = {"pd_op.matmul": ("X", "Y")}  # operand slots vppctl reads by their legacy names


@dataclass
class EncodedPir:
    """A PIR program as vppctl's program: per block (parent, serialized ops, serialized
    variables), the process meshes, and where it came from (`vppctl.program.load` makes
    the `Program`)."""

    blocks: list[tuple[int, list[bytes], list[bytes]]]
    process_meshes: list[bytes]
    origin: PirOrigin


def encode_program(
    t: PirTables, names: list[str], forward_of: array[int], *, version: int
) -> EncodedPir:
    ops: list[list[bytes]] = [[] for _ in t.block_parent]
    vars_: list[list[bytes]] = [[] for _ in t.block_parent]
    types: dict[tuple[int, tuple[int, ...]], bytes] = {}
    for v in range(len(t.v_id)):
        vars_[t.v_block[v]].append(_var(t, v, names[v], types))
    for op in range(t.n_ops):
        ops[t.op_block[op]].append(_op(t, names, forward_of, op))
    blocks = [(p, ops[b], vars_[b]) for b, p in enumerate(t.block_parent)]
    origin = PirOrigin(version=version, folded=tuple(sorted(t.folded.items())))
    return EncodedPir(blocks, stage_meshes(t), origin)


def stage_meshes(t: PirTables) -> list[bytes]:
    """The distinct meshes of `pd_op` ops, ordered by their first process id (ties: first
    seen), as Paddle lists the pipeline's meshes."""
    seen: dict[bytes, tuple[int, int]] = {}
    for op, raw in enumerate(t.op_mesh):
        if raw and raw not in seen and t.op_type[op].startswith("pd_op."):
            ids = pb.ProcessMesh.FromString(raw).process_ids
            seen[raw] = (ids[0] if ids else 0, len(seen))
    return sorted(seen, key=seen.__getitem__)


def _var(t: PirTables, v: int, name: str, types: dict[tuple[int, tuple[int, ...]], bytes]) -> bytes:
    msg = pb.VarDesc(name=name)
    key = (t.v_dtype[v], t.v_dims[v])
    raw = types.get(key)
    if raw is None:
        if key[0] < 0:
            vt = pb.VarType(type=pb.VarType.RAW)
        else:
            vt = pb.VarType(type=pb.VarType.DENSE_TENSOR)
            vt.dense_tensor.tensor.data_type = key[0]  # type: ignore[assignment]
            vt.dense_tensor.tensor.dims.extend(key[1])
        raw = types[key] = vt.SerializeToString()
    msg.type.MergeFromString(raw)
    if t.v_persistable[v]:
        msg.persistable = True
    if t.v_parameter[v]:
        msg.is_parameter = True
    if t.v_mesh[v]:
        msg.dist_attr.process_mesh.MergeFromString(t.v_mesh[v])
    return msg.SerializeToString()


def _op(t: PirTables, names: list[str], forward_of: array[int], op: int) -> bytes:
    msg = pb.OpDesc(type=t.op_type[op])
    slots = _SLOTS.get(t.op_type[op], ())
    role = t.op_role[op]
    ins: list[int] = []
    for k, pir_id in enumerate(t.operands(op)):
        values = _values(t, pir_id, expand=True)
        slot = slots[k] if k < len(slots) else f"in{k}"
        if k == 0 and role & OPTIMIZE and len(values) == 1 and values[0] >= 0:
            slot = "Param" if t.v_parameter[values[0]] else slot
        msg.inputs.add(parameter=slot, arguments=[names[v] for v in values if v >= 0])
        ins.extend(values)
    outs: list[int] = []
    for k, pir_id in enumerate(t.results(op)):
        values = _values(t, pir_id, expand=False)
        msg.outputs.add(parameter=f"out{k}", arguments=[names[v] for v in values if v >= 0])
        outs.extend(values)
    attr = msg.attrs.add(name="op_role", type=pb.INT)
    attr.i = role
    subs = t.sub_blocks.get(op)
    if subs:
        msg.attrs.add(name="sub_block", type=pb.BLOCKS).blocks_idx.extend(subs)
    msg.struct_name = t.op_struct[op] or "/"
    if t.op_mesh[op]:
        _dist(msg.dist_attr, t, op, names, ins, outs)
    msg.id = op
    if forward_of[op] >= 0:
        msg.forward_op_id = forward_of[op]
    return msg.SerializeToString()


def _values(t: PirTables, pir_id: int, *, expand: bool) -> tuple[int, ...]:
    """Value numbers an operand (`expand`: through folded ops) or a result stands for."""
    if pir_id == 0:
        return (-1,)
    ids = t.expand(pir_id) if expand else t.split.get(pir_id, (pir_id,))
    return tuple(t.value_at.get(p, -1) for p in ids)


def _dist(
    out: pb.OperatorDistAttr,
    t: PirTables,
    op: int,
    names: list[str],
    ins: Sequence[int],
    outs: Sequence[int],
) -> None:
    out.process_mesh.MergeFromString(t.op_mesh[op])
    if t.op_chunk[op] >= 0:
        out.chunk_id = t.op_chunk[op]
    for entries, values, meshes in (
        (out.input_dist_attrs, ins, t.in_mesh[op]),
        (out.output_dist_attrs, outs, t.out_mesh[op]),
    ):
        if len(values) != len(meshes):
            continue  # a vector whose elements have no dist attrs of their own
        for v, raw in zip(values, meshes):
            if v >= 0 and raw:
                entry = entries.add(name=names[v])
                entry.tensor_dist_attr.process_mesh.MergeFromString(raw)
