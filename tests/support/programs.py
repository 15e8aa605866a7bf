"""Build small programs in code for tests: a few ops, meshes and layers, spelled out.

    p = Prog(stages=2)                       # stage meshes [0] and [1]
    p.var("x", stage=0)
    p.op("matmul_v2", {"X": ["x"]}, {"Out": ["y"]}, struct="/M/Layer/", stage=0)
    data = p.bytes()                         # a serialized program
    program = p.program()                    # loaded, ready for the engine

Variables named by ops are declared automatically (on the op's stage, chunk 0)
unless declared first with `var`.
"""

from __future__ import annotations

from collections.abc import Sequence

from vppctl.program._proto import program_pb2 as pb
from vppctl.program.load import Program, parse_program
from vppctl.program.roles import BACKWARD, FORWARD, LOSS, LOSS_GRAD, OPTIMIZE

# Bytes per element of each VarType, from Paddle's own table: the tests' independent count
# (never vppctl.program.scan's).
DTYPE_BYTES = {
    pb.VarType.BOOL: 1,
    pb.VarType.INT32: 4,
    pb.VarType.INT64: 8,
    pb.VarType.FP16: 2,
    pb.VarType.FP32: 4,
    pb.VarType.FP64: 8,
    pb.VarType.UINT8: 1,
    pb.VarType.BF16: 2,
}


class Prog:
    def __init__(
        self,
        stages: int = 2,
        ranks_per_stage: int = 1,
        *,
        global_mesh: bool = False,
        record_meshes: bool = True,
    ) -> None:
        self.msg = pb.ProgramDesc()
        self.msg.blocks.add(idx=0, parent_idx=-1)
        k = ranks_per_stage
        self.meshes = [
            pb.ProcessMesh(shape=[k], process_ids=range(s * k, s * k + k), dim_names=["x"])
            for s in range(stages)
        ]
        self.global_mesh = pb.ProcessMesh(
            shape=[stages * k], process_ids=range(stages * k), dim_names=["x"]
        )
        if record_meshes:
            self.msg.process_meshes.extend(self.meshes)
            if global_mesh:
                self.msg.process_meshes.append(self.global_mesh)
        self._declared: list[set[str]] = [set()]
        self._next_id = 1

    # -- structure -------------------------------------------------------------
    def mesh_of(self, stage: int | None) -> pb.ProcessMesh | None:
        if stage is None:
            return None
        return self.global_mesh if stage == -1 else self.meshes[stage]

    def sub_block(self, parent: int = 0) -> int:
        b = len(self.msg.blocks)
        self.msg.blocks.add(idx=b, parent_idx=parent)
        self._declared.append(set())
        return b

    def var(
        self,
        name: str,
        stage: int | None = 0,
        chunk: int | None = 0,
        *,
        block: int = 0,
        param: bool = False,
        dims: Sequence[int] = (4, 4),
    ) -> None:
        v = self.msg.blocks[block].vars.add(name=name)
        v.type.type = pb.VarType.DENSE_TENSOR
        v.type.dense_tensor.tensor.data_type = pb.VarType.FP32
        v.type.dense_tensor.tensor.dims.extend(dims)
        if param:
            v.persistable = True
            v.is_parameter = True
        mesh = self.mesh_of(stage)
        if mesh is not None:
            v.dist_attr.process_mesh.CopyFrom(mesh)
            v.dist_attr.dims_mapping.extend([-1] * len(dims))
        if chunk is not None:
            v.dist_attr.chunk_id = chunk
        self._declared[block].add(name)

    def op(
        self,
        type_: str,
        ins: dict[str, Sequence[str]] | None = None,
        outs: dict[str, Sequence[str]] | None = None,
        *,
        role: int | None = FORWARD,
        struct: str | None = "/",
        stage: int | None = 0,
        chunk: int | None = 0,
        block: int = 0,
        op_id: int | None = -1,
        forward_op_id: int | None = None,
        sub_block: int | None = None,
        declare: bool = True,
    ) -> int:
        """Append an op; returns its index in the block. op_id=-1 means "assign one"."""
        blk = self.msg.blocks[block]
        op = blk.ops.add(type=type_)
        for slot, names in (ins or {}).items():
            op.inputs.add(parameter=slot, arguments=names)
        for slot, names in (outs or {}).items():
            op.outputs.add(parameter=slot, arguments=names)
        if role is not None:
            op.attrs.add(name="op_role", type=pb.INT, i=role)
        if sub_block is not None:
            op.attrs.add(name="sub_block", type=pb.BLOCK, block_idx=sub_block)
        if struct is not None:
            op.struct_name = struct
        mesh = self.mesh_of(stage)
        if mesh is not None:
            op.dist_attr.process_mesh.CopyFrom(mesh)
            for entries, group in (
                (op.dist_attr.input_dist_attrs, ins),
                (op.dist_attr.output_dist_attrs, outs),
            ):
                for names in (group or {}).values():
                    for n in names:
                        entries.add(
                            name=n,
                            tensor_dist_attr=pb.TensorDistAttr(
                                process_mesh=mesh, dims_mapping=[-1, -1]
                            ),
                        )
        if chunk is not None:
            op.dist_attr.chunk_id = chunk
        if op_id == -1:
            op.id = self._next_id
            self._next_id += 1
        elif op_id is not None:
            op.id = op_id
        if forward_op_id is not None:
            op.forward_op_id = forward_op_id
        if declare:
            for group in (ins or {}), (outs or {}):
                for names in group.values():
                    for n in names:
                        if n and n != "@EMPTY@" and not self._visible(block, n):
                            self.var(n, stage if stage is not None else 0, 0, block=block)
        return len(blk.ops) - 1

    def _visible(self, block: int, name: str) -> bool:
        b = block
        while b >= 0:
            if name in self._declared[b]:
                return True
            b = self.msg.blocks[b].parent_idx
        return False

    def last_id(self) -> int:
        return self._next_id - 1

    # -- output ----------------------------------------------------------------
    def bytes(self) -> bytes:
        return self.msg.SerializePartialToString()

    def program(self) -> Program:
        return parse_program(self.bytes(), source="test")


def layered(
    layer_stages: Sequence[int],
    *,
    stages: int | None = None,
    ops_per_layer: int = 2,
    backward: bool = False,
    optimizer: bool = False,
    ids: bool = True,
    layer: str = "DecoderLayer",
) -> Prog:
    """A chain: embedding on stage 0, one layer per entry of `layer_stages`, head + loss last.

    Each layer has `ops_per_layer` matmul ops and one parameter; with `backward`
    the loss-grad op and one grad op per forward op follow in reverse order, and
    with `optimizer` one sgd op per parameter.
    """
    pp = stages or (max(layer_stages) + 1)
    p = Prog(stages=pp)
    last_stage = layer_stages[-1]
    fwd: list[tuple[int, str, dict[str, list[str]], dict[str, list[str]], int]] = []

    def forward(
        type_: str,
        ins: dict[str, list[str]],
        outs: dict[str, list[str]],
        *,
        struct: str,
        stage: int,
        role: int = FORWARD,
    ) -> None:
        i = p.op(type_, ins, outs, role=role, struct=struct, stage=stage, op_id=-1 if ids else None)
        fwd.append((i, type_, ins, outs, stage))

    p.var("ids", 0)
    p.var("emb.w", 0, param=True)
    forward(
        "lookup_table_v2",
        {"Ids": ["ids"], "W": ["emb.w"]},
        {"Out": ["h0"]},
        struct="/Model/Embedding/",
        stage=0,
    )
    h = "h0"
    params = ["emb.w"]
    for k, s in enumerate(layer_stages):
        name = layer if k == 0 else f"{layer}_{k}"
        for j in range(ops_per_layer):
            w = f"{name}.w{j}"
            p.var(w, s, param=True)
            params.append(w)
            out = f"{name}.out{j}"
            forward(
                "matmul_v2",
                {"X": [h], "Y": [w]},
                {"Out": [out]},
                struct=f"/Model/{name}/Linear{'_' + str(j) if j else ''}/",
                stage=s,
            )
            h = out
    p.var("head.w", last_stage, param=True)
    params.append("head.w")
    forward(
        "matmul_v2",
        {"X": [h], "Y": ["head.w"]},
        {"Out": ["logits"]},
        struct="/Model/Head/",
        stage=last_stage,
    )
    forward(
        "mean",
        {"X": ["logits"]},
        {"Out": ["loss"]},
        struct="/Model/Loss/",
        stage=last_stage,
        role=LOSS,
    )
    if backward:
        p.op(
            "fill_constant",
            {},
            {"Out": ["loss@GRAD"]},
            role=LOSS_GRAD,
            stage=last_stage,
            op_id=-1 if ids else None,
        )
        for i, type_, ins, outs, stage in reversed(fwd):
            grad_ins = {**ins, **{f"{k}@GRAD": [f"{n}@GRAD" for n in v] for k, v in outs.items()}}
            grad_outs = {
                f"{k}@GRAD": [f"{n}@GRAD" for n in v] for k, v in ins.items() if k != "Ids"
            }
            fid = p.msg.blocks[0].ops[i].id if ids else None
            p.op(
                f"{type_}_grad",
                grad_ins,
                grad_outs,
                role=BACKWARD,
                stage=stage,
                op_id=-1 if ids else None,
                forward_op_id=fid,
            )
    if optimizer and backward:
        p.var("lr", 0)
        for w in params:
            stage = _stage_of(p, w)
            p.op(
                "sgd",
                {"Param": [w], "Grad": [f"{w}@GRAD"], "LearningRate": ["lr"]},
                {"ParamOut": [w]},
                role=OPTIMIZE,
                stage=stage,
                op_id=-1 if ids else None,
            )
    return p


def _stage_of(p: Prog, name: str) -> int:
    for v in p.msg.blocks[0].vars:
        if v.name == name:
            ids = list(v.dist_attr.process_mesh.process_ids)
            for s, m in enumerate(p.meshes):
                if list(m.process_ids) == ids:
                    return s
    return 0
