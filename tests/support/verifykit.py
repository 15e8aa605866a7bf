"""Helpers for the verifier's tests: a program converted in memory, its violations and rule ids,
and two programs to break one thing at a time: `Broken` (4 layers converted to pp 2 x
vpp 2, with backward and optimizer ops; `Broken.move` moves a layer's forward op, its
grad op and the variables they first write together) and `fan` (a hand-built VPP program).
"""

from __future__ import annotations

from programs import LOSS, Prog, layered

from vppctl.convert import ConvertOptions, convert_program
from vppctl.plan import PlanOptions
from vppctl.program._proto import program_pb2 as pb
from vppctl.program.load import parse_program
from vppctl.verify import VerifyOptions, Violation
from vppctl.verify.expectation import verify_program

# -- helpers ---------------------------------------------------------------------------


def converted(data: bytes, vpp: int, **plan: object) -> bytes:
    program = parse_program(data)
    convert_program(program, ConvertOptions(plan=PlanOptions(vpp=vpp, **plan)))  # type: ignore[arg-type]
    return program.to_bytes()


def violations(data: bytes, **kw: object) -> list[Violation]:
    return list(verify_program(parse_program(data), VerifyOptions(**kw)).violations)  # type: ignore[arg-type]


def rules(data: bytes, **kw: object) -> set[str]:
    return {v.rule for v in violations(data, **kw)}


def op_names(op: pb.OpDesc, outputs: bool = True) -> list[str]:
    return [a for v in (op.outputs if outputs else op.inputs) for a in v.arguments]


class Broken:
    """The converted 4-layer program (pp 2, vpp 2), to break one rule at a time.

    Layer k sits on stage k % 2, chunk k // 2; op 0 is the embedding, ops 1..8 the
    layers (two matmuls each), 9 the head, 10 the loss, 11 the loss-grad op, then
    one grad op per forward op and one sgd op per parameter.
    """

    SOURCE = layered([0, 0, 1, 1], backward=True, optimizer=True).bytes()
    DATA = converted(SOURCE, 2)

    def __init__(self) -> None:
        self.msg = pb.ProgramDesc.FromString(self.DATA)
        self.ops = self.msg.blocks[0].ops

    def bytes(self) -> bytes:
        return self.msg.SerializeToString()

    def rules(self, **kw: object) -> set[str]:
        return rules(self.bytes(), **kw)

    def index(self, type_: str, nth: int = 0) -> int:
        return [i for i, op in enumerate(self.ops) if op.type == type_][nth]

    def grad_of(self, i: int) -> int:
        fid = self.ops[i].id
        return next(j for j, op in enumerate(self.ops) if op.forward_op_id == fid)

    def var(self, name: str) -> pb.VarDesc:
        return next(v for v in self.msg.blocks[0].vars if v.name == name)

    def place_op(self, i: int, stage: int, chunk: int) -> None:
        d = self.ops[i].dist_attr
        d.process_mesh.CopyFrom(self.msg.process_meshes[stage])
        for entry in (*d.input_dist_attrs, *d.output_dist_attrs):
            entry.tensor_dist_attr.process_mesh.CopyFrom(self.msg.process_meshes[stage])
        d.chunk_id = chunk

    def place_var(self, name: str, stage: int, chunk: int) -> None:
        v = self.var(name)
        v.dist_attr.process_mesh.CopyFrom(self.msg.process_meshes[stage])
        v.dist_attr.chunk_id = chunk

    def move(self, i: int, stage: int, chunk: int) -> None:
        """Move forward op i, its grad op, the variables they write first, and the
        parameters op i reads with their updates (each layer op has its own)."""
        for j in (i, self.grad_of(i)):
            self.place_op(j, stage, chunk)
            for name in op_names(self.ops[j]):
                self.place_var(name, stage, chunk)
        params = {v.name for v in self.msg.blocks[0].vars if v.is_parameter}
        for name in set(op_names(self.ops[i], outputs=False)) & params:
            self.place_var(name, stage, chunk)
            for j, op in enumerate(self.ops):
                if op.type == "sgd" and op_names(op, outputs=False)[0] == name:
                    self.place_op(j, stage, chunk)


def fan(places: list[tuple[int, int]], head: tuple[int, int]) -> Prog:
    """A forward-only VPP program whose layers do not feed each other.

    The embedding (stage 0, chunk 0) feeds every layer; the head, on `head`, reads
    every layer's output. Layer k is one op on places[k]; every variable is declared
    on the place of the op that writes it.
    """
    pp = 1 + max(s for s, _ in (*places, head))
    p = Prog(stages=pp)
    p.var("ids", 0, 0)
    p.var("h0", 0, 0)
    p.op("lookup_table_v2", {"Ids": ["ids"]}, {"Out": ["h0"]}, struct="/M/Embedding/")
    outs = []
    for k, (stage, chunk) in enumerate(places):
        name = "Layer" if k == 0 else f"Layer_{k}"
        out = f"{name}.out"
        p.var(out, stage, chunk)
        p.op(
            "relu",
            {"X": ["h0"]},
            {"Out": [out]},
            struct=f"/M/{name}/",
            stage=stage,
            chunk=chunk,
        )
        outs.append(out)
    p.var("logits", *head)
    p.var("loss", *head)
    p.op(
        "concat", {"X": outs}, {"Out": ["logits"]}, struct="/M/Head/", stage=head[0], chunk=head[1]
    )
    p.op(
        "mean",
        {"X": ["logits"]},
        {"Out": ["loss"]},
        struct="/M/Loss/",
        role=LOSS,
        stage=head[0],
        chunk=head[1],
    )
    return p


def grads_moved(good: bytes, op_type: str = "transpose2_grad", count: int = 2) -> bytes:
    """`good` (a converted vpp-2 program) with its first `count` ops of `op_type` moved to
    their stage's other chunk: each breaks V008 and V011."""
    msg = pb.ProgramDesc.FromString(good)
    moved = 0
    for op in msg.blocks[0].ops:
        if op.type == op_type and moved < count:
            op.dist_attr.chunk_id = 1 - op.dist_attr.chunk_id
            moved += 1
    return msg.SerializeToString()
