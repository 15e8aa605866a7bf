"""PIR programs built in code, in the JSON layout Paddle 3.3.1 writes (`serialize_pir_program`).

`PirJson` appends ops and values as Paddle's serializer writes them (dialect ids, `"I"`,
`"O"` with dist types, `"A"` attributes with `op_dist_attr` and `op_role`; a parameter as
`"p"`); `training()` builds a small GPT-like training program with it: an input, one
`matmul` + residual `add` per layer on the layer's stage mesh, `dist_op.reshard` where the
stage changes, a mean loss, the backward Paddle's PIR backward makes (a `full_like` of
the loss, `mean_grad`, `add_grad` and `matmul_grad` per layer, the two gradient parts of
a layer's input added by `builtin.combine` + `pd_op.add_n`) and one `adamw_` per weight.
Small enough for unit tests and the fuzzer; `tests/data/pir_reference/` holds real ones.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

F32 = "t_f32"


def mesh(ids: Sequence[int]) -> dict[str, Any]:
    return {"#": "4.a_process_mesh", "D": [[len(ids)], list(ids), ["x"]]}


def tensor_dist(ids: Sequence[int], ndim: int) -> dict[str, Any]:
    return {"#": "4.a_tensor_dist", "D": [mesh(ids), [-1] * ndim, []]}


def dist_type(dims: Sequence[int], ids: Sequence[int], dtype: str = F32) -> dict[str, Any]:
    dense = {"#": "0.t_dtensor", "D": [{"#": f"0.{dtype}"}, list(dims), "NCHW", [], 0]}
    return {"#": "4.t_dist_dtensor", "D": [dense, tensor_dist(ids, len(dims)), list(dims)]}


def attr(name: str, kind: str, data: Any) -> dict[str, Any]:
    return {"AT": {"#": kind, "D": data}, "N": name}


class PirJson:
    """A PIR program's JSON, op by op."""

    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []
        self.next_id = 1
        self.dims: dict[int, list[int]] = {}
        self.meshes: dict[int, list[int]] = {}

    def _value(self, dims: Sequence[int], ids: Sequence[int], dtype: str = F32) -> dict[str, Any]:
        v = self.next_id
        self.next_id += 1
        self.dims[v], self.meshes[v] = list(dims), list(ids)
        return {"%": v, "TT": dist_type(dims, ids, dtype)}

    def op(
        self,
        name: str,
        ins: Sequence[int],
        outs: Sequence[Sequence[int]],
        *,
        on: Sequence[int],
        role: int = 0,
        chunk: int = -1,
        struct: str | None = None,
        extra: Sequence[dict[str, Any]] = (),
    ) -> list[int]:
        """Append op `name` (`1.matmul`, `dist_op.reshard`, ...) reading `ins` and defining
        one result per dims in `outs`, on mesh `on`; its result ids."""
        results = [self._value(d, on) for d in outs]
        operands = [tensor_dist(self.meshes.get(v, on), len(self.dims.get(v, []))) for v in ins]
        dist = [mesh(on), operands, [tensor_dist(on, len(d)) for d in outs], chunk]
        attrs = [*extra, attr("op_dist_attr", "4.a_op_dist", dist)]
        attrs.append(attr("op_role", "0.a_i32", role))
        if struct is not None:
            attrs.append(attr("struct_name", "0.a_str", struct))
        flags = [{"#": "0.a_bool", "D": False} for _ in outs]
        self.ops.append(
            {
                "#": name,
                "A": attrs,
                "I": [{"%": v} for v in ins],
                "O": results,
                "OA": [attr("stop_gradient", "0.a_array", flags)],
            }
        )
        return [r["%"] for r in results]

    def parameter(self, name: str, dims: Sequence[int], on: Sequence[int]) -> int:
        value = self._value(dims, on)
        dist = attr("op_dist_attr", "4.a_op_dist", [mesh(on), [], [tensor_dist(on, len(dims))], 0])
        self.ops.append(
            {
                "#": "p",
                "A": [0, 1, 1, name],
                "DA": [dist, attr("op_role", "0.a_i32", 0)],
                "O": value,
                "OA": [1, 0, 1],
                "QA": [],
            }
        )
        return int(value["%"])

    def data(self, name: str, dims: Sequence[int], on: Sequence[int], chunk: int = -1) -> int:
        persistable = attr("persistable", "0.a_array", [{"#": "0.a_bool", "D": True}])
        (v,) = self.op(
            "1.data", [], [dims], on=on, chunk=chunk, extra=[attr("name", "0.a_str", name)]
        )
        self.ops[-1]["OA"] = [persistable]
        return v

    def combine(self, ins: Sequence[int], role: int = 1) -> int:
        v = self.next_id
        self.next_id += 1
        self.ops.append(
            {
                "#": "0.combine",
                "A": [attr("op_role", "0.a_i32", role)],
                "I": [{"%": i} for i in ins],
                "O": [{"%": v, "TT": {"#": "0.t_vec", "D": []}}],
                "OA": [],
            }
        )
        return v

    def reshard(self, x: int, to: Sequence[int], role: int = 0, chunk: int = -1) -> int:
        merged = sorted({*self.meshes[x], *to})
        (v,) = self.op("dist_op.reshard", [x], [self.dims[x]], on=merged, role=role, chunk=chunk)
        self.meshes[v] = list(to)
        self.ops[-1]["O"][0]["TT"] = dist_type(self.dims[x], to)
        return v

    def document(self, *, version: int = 4, magic: str = "pir") -> dict[str, Any]:
        block = {"#": "block_0", "args": [], "ops": self.ops}
        return {
            "base_code": {"magic": magic, "trainable": True, "version": version},
            "program": {"regions": [{"#": "region_0", "blocks": [block]}]},
        }

    def bytes(self, **kwargs: Any) -> bytes:
        return json.dumps(self.document(**kwargs), separators=(",", ":")).encode()


def training(
    stages: Sequence[int], chunks: Sequence[int] | None = None, *, dims: int = 4
) -> PirJson:
    """A GPT-like training program: layer i (`/Model/Layer_i/`) on stage `stages[i]` (a
    one-rank mesh `[stage]`), with chunk id `chunks[i]` on its forward and backward ops
    (-1 everywhere without `chunks`: a plain-PP program before Paddle's completion)."""
    p = PirJson()
    chunk_of = list(chunks) if chunks is not None else [-1] * len(stages)
    weights = [p.parameter(f"linear_{i}.w_0", [dims, dims], [s]) for i, s in enumerate(stages)]
    lr = [p.data("learning_rate_0", [1], [s]) for s in sorted(set(stages))]
    x = p.data("input0", [2, dims], [stages[0]], chunk=0)
    stage = stages[0]
    saved = []
    for i, (s, w) in enumerate(zip(stages, weights)):
        if s != stage:
            x, stage = p.reshard(x, [s]), s
        layer = f"/Model/Layer_{i}/" if i else "/Model/Layer/"
        c = chunk_of[i]
        (y,) = p.op("1.matmul", [x, w], [[2, dims]], on=[s], chunk=c, struct=layer + "Linear/")
        (z,) = p.op("1.add", [y, x], [[2, dims]], on=[s], chunk=c, struct=layer)
        saved.append((x, y, z))
        x = z
    last, c_last = stages[-1], chunk_of[-1]
    (loss,) = p.op("1.mean", [x], [[]], on=[last], chunk=c_last, struct="/Model/")
    (one,) = p.op("1.full", [], [[1]], on=[last], role=1)
    (g,) = p.op("1.full_like", [loss, one], [[]], on=[last], role=1, chunk=c_last)
    (g,) = p.op("1.mean_grad", [x, g], [[2, dims]], on=[last], role=1, chunk=c_last)
    grads = [0] * len(stages)
    for i in reversed(range(len(stages))):
        s, c = stages[i], chunk_of[i]
        if s != stage:
            g, stage = p.reshard(g, [s], role=1, chunk=c), s
        xi, y, _ = saved[i]
        gy, gx1 = p.op("1.add_grad", [y, xi, g], [[2, dims], [2, dims]], on=[s], role=1, chunk=c)
        gx2, grads[i] = p.op(
            "1.matmul_grad", [xi, weights[i], gy], [[2, dims], [dims, dims]], on=[s], role=1,
            chunk=c,
        )  # fmt: skip
        (g,) = p.op("1.add_n", [p.combine([gx1, gx2])], [[2, dims]], on=[s], role=1, chunk=c)
    rate = dict(zip(sorted(set(stages)), lr))
    for w, gw, s in zip(weights, grads, stages):
        p.op("1.adamw_", [w, gw, rate[s]], [[dims, dims]], on=[s], role=2)
    return p
