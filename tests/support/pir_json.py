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

import copy
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


NULL: dict[str, Any] = {"#": "NULL"}  # Paddle's null attribute, type or dist attr
# The dist attr Paddle writes for a null operand, and adam_'s for an absent result.
EMPTY_DIST: dict[str, Any] = {
    "#": "4.a_tensor_dist",
    "D": [{"#": "4.a_process_mesh", "D": [[], [], []]}, [], []],
}

# Paddle 3.3.1's optimizer ops as its `paddle.optimizer` classes append them in a static
# auto-parallel program (read from programs Paddle built, one per class: Momentum, Adagrad,
# Lamb, Adamax, Adadelta, NAdam, RAdam, SGD, Adam, AdamW): the operand and result slots in
# order, an optional one absent without multi-precision, AMSGrad or a skip-update tensor
# marked `?`, and how the dist attr of an absent result is written. Paddle writes a null
# operand (%0, its dist attr an empty tensor dist attr) and a result typed NULL whose dist
# attr is NULL (momentum_ and the others) or an empty tensor dist attr (sgd_, adam_, adamw_).
OPTIMIZERS: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {
    "momentum_": (
        ("param", "grad", "velocity", "learning_rate", "master_param?"),
        ("param_out", "velocity_out", "master_param_out?"),
        "NULL",
    ),
    "adagrad_": (
        ("param", "grad", "moment", "learning_rate", "master_param?"),
        ("param_out", "moment_out", "master_param_out?"),
        "NULL",
    ),
    "lamb_": (
        ("param", "grad", "learning_rate", "moment1", "moment2", "beta1_pow", "beta2_pow",
         "master_param?", "skip_update?"),
        ("param_out", "moment1_out", "moment2_out", "beta1_pow_out", "beta2_pow_out",
         "master_param_outs?"),
        "NULL",
    ),
    "adamax_": (
        ("param", "grad", "learning_rate", "moment", "inf_norm", "beta1_pow", "master_param?"),
        ("param_out", "moment_out", "inf_norm_out", "master_param_outs?"),
        "NULL",
    ),
    "adadelta_": (
        ("param", "grad", "avg_squared_grad", "avg_squared_update", "learning_rate",
         "master_param?"),
        ("param_out", "moment_out", "inf_norm_out", "master_param_outs?"),
        "NULL",
    ),
    "nadam_": (
        ("param", "grad", "learning_rate", "momentum_decay_pow", "beta2_pow", "mu_product",
         "moment1", "moment2", "master_param?"),
        ("param_out", "momentum_decay_pow_out", "beta2_pow_out", "mu_product_out",
         "moment1_out", "moment2_out", "master_param_outs?"),
        "NULL",
    ),
    "radam_": (
        ("param", "grad", "learning_rate", "beta1_pow", "beta2_pow", "rho", "moment1",
         "moment2", "master_param?"),
        ("param_out", "beta1_pow_out", "beta2_pow_out", "rho_out", "moment1_out",
         "moment2_out", "master_param_outs?"),
        "NULL",
    ),
    "sgd_": (
        ("param", "learning_rate", "grad", "master_param?"),
        ("param_out", "master_param_out?"),
        "empty",
    ),
    "adam_": (
        ("param", "grad", "learning_rate", "moment1", "moment2", "moment2_max?", "beta1_pow",
         "beta2_pow", "master_param?", "skip_update?", "beta1", "beta2", "epsilon"),
        ("param_out", "moment1_out", "moment2_out", "moment2_max_out?", "beta1_pow_out",
         "beta2_pow_out", "master_param_out?"),
        "empty",
    ),
}  # fmt: skip
_SCALARS = ("pow", "rho", "mu_product", "beta1", "beta2", "epsilon")  # states of shape [1]


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
        absent_dist: str = "NULL",
    ) -> list[int]:
        """Append op `name` (`1.matmul`, `dist_op.reshard`, ...) reading `ins` and defining
        one result per dims in `outs`, on mesh `on`; its result ids. An operand 0 is an
        absent optional one (its dist attr an empty one, as Paddle writes it), a result
        None one the op does not produce: its type NULL, its dist attr NULL or, with
        `absent_dist` "empty", an empty one."""
        results = [self._value(d, on) if d is not None else self._null() for d in outs]
        operands = [
            tensor_dist(self.meshes.get(v, on), len(self.dims.get(v, []))) if v else EMPTY_DIST
            for v in ins
        ]
        absent = NULL if absent_dist == "NULL" else EMPTY_DIST
        dist_outs = [tensor_dist(on, len(d)) if d is not None else absent for d in outs]
        operands, dist_outs = copy.deepcopy(operands), copy.deepcopy(dist_outs)
        dist = [mesh(on), operands, dist_outs, chunk]
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

    def _null(self) -> dict[str, Any]:
        v = self.next_id
        self.next_id += 1
        return {"%": v, "TT": dict(NULL)}

    def optimizer(self, kind: str, param: int, grad: int, lr: int, on: Sequence[int]) -> None:
        """One optimizer op of Paddle 3.3.1 (`OPTIMIZERS`) updating `param`: its states are
        declared as `pd_op.data`, as the engine declares them; every optional slot absent."""
        operands, results, absent = OPTIMIZERS[kind]
        dims = self.dims[param]
        ins = []
        for slot in operands:
            if slot == "param":
                ins.append(param)
            elif slot == "grad":
                ins.append(grad)
            elif slot == "learning_rate":
                ins.append(lr)
            elif slot.endswith("?"):
                ins.append(0)
            else:
                shape = [1] if any(s in slot for s in _SCALARS) else dims
                ins.append(self.data(f"{kind}_{slot}_{param}", shape, on))
        outs = [
            None if r.endswith("?") else [1] if any(s in r for s in _SCALARS) else dims
            for r in results
        ]
        self.op(f"1.{kind}", ins, outs, on=on, role=2, absent_dist=absent)

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
    stages: Sequence[int],
    chunks: Sequence[int] | None = None,
    *,
    dims: int = 4,
    optimizer: str | None = None,
) -> PirJson:
    """A GPT-like training program: layer i (`/Model/Layer_i/`) on stage `stages[i]` (a
    one-rank mesh `[stage]`), with chunk id `chunks[i]` on its forward and backward ops
    (-1 everywhere without `chunks`: a plain-PP program before Paddle's completion); its
    weights updated by `optimizer` (an op of `OPTIMIZERS` with its states), or by an
    `adamw_` reading the weight, its gradient and the learning rate."""
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
        if optimizer is None:
            p.op("1.adamw_", [w, gw, rate[s]], [[dims, dims]], on=[s], role=2)
        else:
            p.optimizer(optimizer, w, gw, rate[s], [s])
    return p


# -- slots ------------------------------------------------------------------------------------

OPS = ("program", "regions", 0, "blocks", 0, "ops")  # block 0's ops, from the document's root
Path = tuple[Any, ...]


def dist_slots(doc: dict[str, Any]) -> list[tuple[str, Path]]:
    """(kind, path from the root) of every dist-attr slot of every op of block 0, each a
    place Paddle may write NULL: an op's `op_dist_attr` (the attribute, its data, its mesh,
    its operand and result lists, each entry of them and of a vector's entry, each tensor
    dist attr's data and mesh, its chunk id) and each result's type (the type, its dense
    and dist parts, the dist part's data and mesh, the dense part's data type and dims)."""
    out: list[tuple[str, Path]] = []
    for i, op in enumerate(_at(doc, OPS)):
        at = (*OPS, i)
        attrs = op.get("A")
        for k, a in enumerate(attrs if isinstance(attrs, list) else []):
            if isinstance(a, dict) and a.get("N") == "op_dist_attr":
                out += _op_dist_slots(a, (*at, "A", k))
        results = op.get("O")
        listed = isinstance(results, list)
        for r, result in enumerate(results if listed else [results]):
            where = (*at, "O", r) if listed else (*at, "O")
            if isinstance(result, dict) and isinstance(result.get("TT"), dict):
                out += _type_slots(result["TT"], (*where, "TT"))
    return out


def _op_dist_slots(a: dict[str, Any], at: Path) -> list[tuple[str, Path]]:
    out = [("op dist attr", (*at, "AT"))]
    data = a["AT"].get("D")
    if not isinstance(data, list) or len(data) != 4:
        return out
    d = (*at, "AT", "D")
    out += [("op dist attr data", d), ("op mesh", (*d, 0)), ("chunk id", (*d, 3))]
    for part, kind in ((1, "operand"), (2, "result")):
        out.append((f"{kind} dist attrs", (*d, part)))
        for j, entry in enumerate(data[part] if isinstance(data[part], list) else []):
            out += _entry_slots(entry, (*d, part, j), kind)
    return out


def _entry_slots(entry: Any, at: Path, kind: str) -> list[tuple[str, Path]]:
    out = [(f"{kind} dist attr", at)]
    if not isinstance(entry, dict):
        return out
    data = entry.get("D")
    if str(entry.get("#", "")).endswith("a_array"):
        out.append((f"{kind} vector dist attrs", (*at, "D")))
        for m, element in enumerate(data if isinstance(data, list) else []):
            out += _entry_slots(element, (*at, "D", m), f"{kind} vector element")
    elif isinstance(data, list) and data:
        out += [(f"{kind} tensor dist data", (*at, "D")), (f"{kind} tensor mesh", (*at, "D", 0))]
    return out


def _type_slots(type_: dict[str, Any], at: Path) -> list[tuple[str, Path]]:
    out = [("result type", at)]
    if type_.get("#") == "4.t_dist_dtensor":
        out += [("dense type", (*at, "D", 0)), ("type dist attr", (*at, "D", 1))]
        out += [("type dist data", (*at, "D", 1, "D")), ("type mesh", (*at, "D", 1, "D", 0))]
        out += [("data type", (*at, "D", 0, "D", 0)), ("dims", (*at, "D", 0, "D", 1))]
    return out


def _at(doc: Any, path: Path) -> Any:
    for key in path:
        doc = doc[key]
    return doc


def set_at(doc: dict[str, Any], path: Path, value: Any) -> None:
    _at(doc, path[:-1])[path[-1]] = value


def delete_at(doc: dict[str, Any], path: Path) -> None:
    del _at(doc, path[:-1])[path[-1]]


# -- hostile programs (tests/contract/test_bounds.py, the fuzzer) ---------------------------------


def shared_vector(width: int, readers: int) -> bytes:
    """One op's `width` results packed by one `builtin.combine`, and the vector read by
    `readers` ops, forward `concat`s and (every other one) backward `concat_grad`s: each
    reader reads all `width` values, so the values read grow as width x readers from a file
    of width + readers. (Was: 20,000 x 1,000 took 17-25 s and 1.33 GB.)"""
    head = [{"#": "1.unbind", "I": [], "O": [{"%": 1 + k} for k in range(width)]}]
    vector = width + 1
    combine = {"#": "0.combine", "I": [{"%": 1 + k} for k in range(width)], "O": [{"%": vector}]}
    ops = [*head, combine]
    for r in range(readers):
        grad = r % 2 == 1
        role = [attr("op_role", "0.a_i32", 1 if grad else 0)]
        name = "1.concat_grad" if grad else "1.concat"
        ops.append({"#": name, "A": role, "I": [{"%": vector}], "O": [{"%": vector + 1 + r}]})
    return _document(ops)


def _document(ops: list[dict[str, Any]]) -> bytes:
    p = PirJson()
    p.ops = ops
    return p.bytes()


def shared_reads(n: int) -> bytes:
    """One value read by `n` forward `scale` ops, then `n` backward `scale_grad` ops reading
    it (and a gradient): each grad op's forward op is the latest scale no grad op took yet,
    found among the value's 2n readers. (Was: every grad op looked at all of them, n x 2n
    steps.)"""
    p = PirJson()
    x = p.data("x", [2, 4], [0])
    for k in range(n):
        p.op("1.scale", [x], [[2, 4]], on=[0], struct=f"/M/Layer_{k}/")
    (g,) = p.op("1.full", [], [[2, 4]], on=[0], role=1)
    for _ in range(n):
        p.op("1.scale_grad", [x, g], [[2, 4]], on=[0], role=1)
    return p.bytes()


def unmatched_grad(n: int) -> bytes:
    """A forward `concat` of `n` values (one `builtin.combine`) and its `concat_grad`, whose
    `n` results have dims none of the operands has: matching each result to the next
    operand of its dims finds none. (Was: each result scanned every operand, n x n.)"""
    p = PirJson()
    xs = [p.data(f"x{k}", [2, 1 + k % 5], [0]) for k in range(n)]
    vector = p.combine(xs, role=0)
    p.op("1.concat", [vector], [[2, 3 * n]], on=[0], struct="/M/Layer/")
    (g,) = p.op("1.full", [], [[2, 3 * n]], on=[0], role=1)
    p.op("1.concat_grad", [vector, g], [[9, 9]] * n, on=[0], role=1)
    return p.bytes()
