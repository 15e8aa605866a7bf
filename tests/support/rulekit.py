"""Helpers for the convert-engine tests: run a conversion, read the result back in plain terms.

    c = convert(layered([0, 0, 1, 1]), vpp=2)
    c.where(5)              # ((1,), 0): op 5 of the global block is on mesh [1], chunk 0
    c.var_where("h0")       # the same for a variable
    msg = refusal(prog, vpp=3)   # the ConversionError message of a refused conversion

Meshes are compared as tuples of process ids (the tests build one-dimensional
meshes, so shape adds nothing). The read-back goes through the full
`program_pb2.ProgramDesc`, independently of the engine's lazy views.

The running example of the rule tests (tests/convert/, one file per module that holds a
rule of docs/conversion.md) is `layered(stages)` (tests/support/programs.py): an
embedding op (stage 0), two matmul ops per layer `DecoderLayer`, `DecoderLayer_1`, ...
on the given stages, then the head and the loss (role 256) on the last layer's stage;
optionally the loss-grad op, one grad op per forward op in reverse order, and one sgd op
per parameter. With four layers on stages [0, 0, 1, 1], pp 2 and V 2 the segments are

    segment 0: DecoderLayer   -> stage 0 chunk 0   (stays on stage 0)
    segment 1: DecoderLayer_1 -> stage 1 chunk 0   (moves 0 -> 1)
    segment 2: DecoderLayer_2 -> stage 0 chunk 1   (moves 1 -> 0)
    segment 3: DecoderLayer_3 -> stage 1 chunk 1   (stays on stage 1)

(`running()`, with its op indices `EMB`, `HEAD`, `LOSS`, `LOSS_GRAD_OP`). Meshes are
written as their process ids: stage s of a `Prog` is mesh (s,).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from programs import Prog, layered

from vppctl.convert import ConvertOptions, ConvertResult, convert_program
from vppctl.errors import ConversionError
from vppctl.plan import PlanOptions
from vppctl.program._proto import program_pb2 as pb
from vppctl.program.load import parse_program
from vppctl.program.roles import is_forward
from vppctl.sample import SampleOptions, build_sample

Where = tuple[tuple[int, ...], int | None]  # (process ids, chunk id or None)


def role(op: pb.OpDesc) -> int:
    """The op's `op_role` attr (absent = 0)."""
    for a in op.attrs:
        if a.name == "op_role":
            return a.i
    return 0


def op_where(op: pb.OpDesc) -> Where:
    d = op.dist_attr
    return tuple(d.process_mesh.process_ids), d.chunk_id if d.HasField("chunk_id") else None


def var_where_of(var: pb.VarDesc) -> Where:
    d = var.dist_attr
    return tuple(d.process_mesh.process_ids), d.chunk_id if d.HasField("chunk_id") else None


@dataclass
class Converted:
    result: ConvertResult
    before: pb.ProgramDesc
    after: pb.ProgramDesc
    data: bytes  # the converted program, serialized

    @property
    def warnings(self) -> tuple[str, ...]:
        return self.result.warnings

    @property
    def plan(self) -> pb.PipelinePlan:
        return self.after.pipeline_plan

    def op(self, i: int, block: int = 0) -> pb.OpDesc:
        return self.after.blocks[block].ops[i]

    def where(self, i: int, block: int = 0) -> Where:
        return op_where(self.op(i, block))

    def var(self, name: str, block: int = 0) -> pb.VarDesc:
        return find_var(self.after, name, block)

    def var_where(self, name: str, block: int = 0) -> Where:
        return var_where_of(self.var(name, block))

    def index_of(self, type_: str, nth: int = 0, block: int = 0) -> int:
        """Index of the nth op of a type in a block."""
        hits = [i for i, o in enumerate(self.after.blocks[block].ops) if o.type == type_]
        return hits[nth]

    def layer_ops(self, layer: str) -> list[int]:
        """Global-block forward ops whose struct name has the component `layer`."""
        return [
            i
            for i, o in enumerate(self.after.blocks[0].ops)
            if is_forward(role(o)) and f"/{layer}/" in o.struct_name
        ]


def find_var(prog: pb.ProgramDesc, name: str, block: int = 0) -> pb.VarDesc:
    for v in prog.blocks[block].vars:
        if v.name == name:
            return v
    raise KeyError(f"no variable {name!r} in block {block}")


def _bytes(src: Prog | bytes) -> bytes:
    return src.bytes() if isinstance(src, Prog) else src


def convert(
    src: Prog | bytes,
    vpp: int = 2,
    *,
    seg: str | None = "DecoderLayer",
    strict: bool = False,
    placement: str = "loop",
    pp: int | None = None,
) -> Converted:
    """Convert a program built in code (or serialized) through the library call."""
    data = _bytes(src)
    program = parse_program(data, source="test")
    result = convert_program(
        program,
        ConvertOptions(
            plan=PlanOptions(vpp=vpp, pp=pp, placement=placement),  # type: ignore[arg-type]
            seg_method=seg,
            strict=strict,
        ),
    )
    out = program.to_bytes()
    return Converted(
        result=result,
        before=pb.ProgramDesc.FromString(data),
        after=pb.ProgramDesc.FromString(out),
        data=out,
    )


def convert_bytes(data: bytes, **plan: object) -> tuple[bytes, ConvertResult]:
    """Convert serialized program bytes in memory: (the converted bytes, the result)."""
    program = parse_program(data)
    seg = plan.pop("seg_method", None)
    result = convert_program(
        program,
        ConvertOptions(plan=PlanOptions(**plan), seg_method=seg),  # type: ignore[arg-type]
    )
    return program.to_bytes(), result


def small(layers: int, pp: int, **kw: object) -> bytes:
    """A small `vppctl sample` program (hidden 64, vocabulary 1000), serialized."""
    return build_sample(SampleOptions(layers=layers, pp=pp, hidden=64, vocab=1000, **kw))  # type: ignore[arg-type]


def refusal(src: Prog | bytes, vpp: int = 2, **kw: object) -> str:
    """The message of the ConversionError (exit 4) a conversion must raise."""
    with pytest.raises(ConversionError) as info:
        convert(src, vpp, **kw)  # type: ignore[arg-type]
    return str(info.value)


def without_placements(prog: pb.ProgramDesc) -> pb.ProgramDesc:
    """A copy with every mesh and chunk id cleared (ops, their tensor attrs, vars) and no plan."""
    out = pb.ProgramDesc()
    out.CopyFrom(prog)
    out.ClearField("pipeline_plan")
    for block in out.blocks:
        for op in block.ops:
            d = op.dist_attr
            d.ClearField("process_mesh")
            d.ClearField("chunk_id")
            for e in (*d.input_dist_attrs, *d.output_dist_attrs):
                e.tensor_dist_attr.ClearField("process_mesh")
        for v in block.vars:
            v.dist_attr.ClearField("process_mesh")
            v.dist_attr.ClearField("chunk_id")
    return out


def placements(prog: pb.ProgramDesc) -> dict[str, Where]:
    """Every op (`b0 op 3 matmul_v2`) and var (`b0 var x`) -> (mesh, chunk), for comparisons."""
    out: dict[str, Where] = {}
    for b, block in enumerate(prog.blocks):
        for i, op in enumerate(block.ops):
            out[f"b{b} op {i} {op.type}"] = op_where(op)
        for v in block.vars:
            out[f"b{b} var {v.name}"] = var_where_of(v)
    return out


def listing(prog: pb.ProgramDesc) -> str:
    """A compact, diffable text form of a converted program: the plan, one line per op and var.

    Ops: `block index type role mesh chunk` and the struct name, or for a grad op
    `grad-of=N`, the index of its forward op; vars: `block name mesh chunk`.
    The vppctl version is left out so that a release does not change golden files.
    """
    lines = []
    plan = prog.pipeline_plan
    lines.append(
        f"plan pp={plan.pp} vpp={plan.vpp} seg_method={plan.seg_method} "
        f"placement={plan.placement} mode={plan.mode} split={plan.split}"
    )
    for s in plan.segments:
        lines.append(
            f"segment {s.virtual_stage} stage={s.stage} chunk={s.chunk} "
            f"mesh={_ids(s.mesh.process_ids)} ops=[{s.op_begin},{s.op_end}) "
            f"layers={','.join(s.layers)}"
        )
    lines.append("process_meshes " + " ".join(_ids(m.process_ids) for m in prog.process_meshes))
    for b, block in enumerate(prog.blocks):
        lines.append(f"block {b} ops={len(block.ops)} vars={len(block.vars)}")
        by_id = {op.id: i for i, op in enumerate(block.ops) if op.HasField("id")}
        for i, op in enumerate(block.ops):
            mesh, chunk = op_where(op)
            of = by_id.get(op.forward_op_id) if op.HasField("forward_op_id") else None
            lines.append(
                f"op {b} {i} {op.type} role={role(op)} mesh={_ids(mesh)} chunk={_chunk(chunk)} "
                + (f"grad-of={of}" if of is not None else op.struct_name or "-")
            )
        for v in block.vars:
            mesh, chunk = var_where_of(v)
            lines.append(f"var {b} {v.name} mesh={_ids(mesh)} chunk={_chunk(chunk)}")
    return "\n".join(lines) + "\n"


def _ids(ids: object) -> str:
    return "[" + ",".join(str(i) for i in ids) + "]"  # type: ignore[attr-defined]


def _chunk(chunk: int | None) -> str:
    return "-" if chunk is None else str(chunk)


# -- editing programs built with `Prog` -------------------------------------------


def layer_op(k: int, j: int = 0) -> int:
    """Global-block index of op j of layer k in a `layered(...)` program (2 ops per layer)."""
    return 1 + 2 * k + j


def move_op(p: Prog, src: int, dst: int, block: int = 0) -> None:
    """Move op `src` of a block to position `dst` (ids and forward_op_ids travel with it)."""
    ops = p.msg.blocks[block].ops
    copies = [pb.OpDesc.FromString(o.SerializePartialToString()) for o in ops]
    copies.insert(dst, copies.pop(src))
    del ops[:]
    ops.extend(copies)


def put_on(p: Prog, op: pb.OpDesc, stage: int, chunk: int | None = None) -> None:
    """Put an op on a stage mesh (-1: the global mesh), its tensor dist attrs too."""
    mesh = p.mesh_of(stage)
    op.dist_attr.process_mesh.CopyFrom(mesh)
    for e in (*op.dist_attr.input_dist_attrs, *op.dist_attr.output_dist_attrs):
        e.tensor_dist_attr.process_mesh.CopyFrom(mesh)
    if chunk is not None:
        op.dist_attr.chunk_id = chunk


def rename_arg(op: pb.OpDesc, old: str, new: str) -> None:
    for group in (op.inputs, op.outputs):
        for v in group:
            v.arguments[:] = [new if a == old else a for a in v.arguments]


def set_role(op: pb.OpDesc, value: int | None) -> None:
    """Set (or with None remove) the op's `op_role` attr."""
    kept = [a for a in op.attrs if a.name != "op_role"]
    del op.attrs[:]
    op.attrs.extend(kept)
    if value is not None:
        op.attrs.add(name="op_role", type=pb.INT, i=value)


# -- the running example of docs/conversion.md --------------------------------------------

S0, S1, S2 = (0,), (1,), (2,)

# Running example: op indices of layered([0, 0, 1, 1], backward=True).
EMB, HEAD, LOSS = 0, 9, 10
LOSS_GRAD_OP = 11


def running(**kw: bool) -> Prog:
    return layered([0, 0, 1, 1], **kw)


def grad_of(p: Prog, forward_index: int) -> int:
    """Index of the grad op whose forward_op_id names op `forward_index`."""
    fid = p.msg.blocks[0].ops[forward_index].id
    ops = p.msg.blocks[0].ops
    return next(
        i for i, o in enumerate(ops) if o.HasField("forward_op_id") and o.forward_op_id == fid
    )


def shows_stages(message: str, stages: list[int]) -> bool:
    """Whether a message prints the stage sequence, in full or run-length (`1x2,0x2`)."""
    expanded = re.sub(r"(\d+)x(\d+)", lambda m: ",".join([m[1]] * int(m[2])), message)
    return ",".join(map(str, stages)) in expanded.replace(" ", "")
