"""Sections: the sample program written section by section, and `build_sample`.

The data variables and parameters, the forward ops (the last one is the loss
op), the loss-grad op and one grad op per forward op in reverse order (with
`sum` ops where a variable has several gradient contributions), optional
global-norm clipping, and one optimizer update per parameter. Each section is
written unit by unit (`stamp.write_units`).
"""

from __future__ import annotations

from vppctl import progress
from vppctl.gcpause import paused_gc
from vppctl.program import BACKWARD, FORWARD, LOSS, OPTIMIZE
from vppctl.sample.encode import Writer
from vppctl.sample.model import Model, SampleOptions, Unit
from vppctl.sample.stamp import write_units

_NO_GRAD = frozenset({"input_ids", "position_ids", "labels"})


def _grad_name(name: str) -> str:
    return name + "@GRAD"


def _variables(w: Writer, check: bool) -> None:
    """The data variables and the parameters come first, before any op names them."""
    model = w.model
    for name in model.data_vars:
        w.var(name)

    def write(unit: Unit) -> None:
        for k in unit.params:
            w.var(model.params[k])

    write_units(w, model.units, write, check)


def _forward(w: Writer, check: bool) -> None:
    """The forward ops in model order; the last one is the loss op."""
    ops, last = w.model.ops, len(w.model.ops) - 1

    def write(unit: Unit) -> None:
        for i in unit.ops:
            op = ops[i]
            role = LOSS if i == last else FORWARD
            w.emit(op.type, op.inputs, op.outputs, role, op.stage, op.struct, op.attrs)

    write_units(w, w.model.units, write, check)


class _Backward:
    """The loss-grad op, grad ops in reverse order and `sum` ops, as Paddle's backward writes them.

    A variable read by several ops gets one `x@GRAD@RENAME@block0@k` per reader and
    a `sum` into `x@GRAD` after the last of them. The forward op `i` has id i + 1
    (the forward ops are written first).
    """

    def __init__(self, w: Writer) -> None:
        self.w, self.model = w, w.model
        self.consumers: dict[str, int] = {}
        for op in self.model.ops:
            for _, names in op.inputs:
                for n in names:
                    if n not in _NO_GRAD:
                        self.consumers[n] = self.consumers.get(n, 0) + 1
        self.contributions: dict[str, list[str]] = {}
        self.params = set(self.model.params)

    def write(self, check: bool) -> dict[str, str]:
        """Append the backward section; returns param -> grad."""
        w, model = self.w, self.model
        loss_op = model.ops[-1]
        loss_grad = _grad_name(loss_op.outputs[0][1][0])
        w.emit("fill_constant", (), (("Out", (loss_grad,)),), LOSS | BACKWARD, loss_op.stage)
        w.var_stage[loss_grad] = loss_op.stage
        model.dims[loss_grad] = ()
        write_units(w, model.units[::-1], self.write_unit, check)
        return {p: _grad_name(p) for p in model.params}

    def write_unit(self, unit: Unit) -> None:
        for i in reversed(unit.ops):
            self.grad_op(i)

    def grad_op(self, i: int) -> None:
        """The grad op of forward op `i`, then the `sum` ops its gradients complete."""
        op, dims, consumers = self.model.ops[i], self.model.dims, self.consumers
        ins = [(slot, names) for slot, names in op.inputs]
        ins += [(slot + "@GRAD", tuple(_grad_name(n) for n in names)) for slot, names in op.outputs]
        outs, role_var, complete = [], [], []
        for slot, names in op.inputs:
            gnames = []
            for n in names:
                if n in _NO_GRAD:
                    continue
                g = _grad_name(n)
                dims[g] = dims[n]
                if consumers[n] > 1:
                    contrib = self.contributions.setdefault(n, [])
                    g = f"{g}@RENAME@block0@{len(contrib)}"
                    dims[g] = dims[n]
                    contrib.append(g)
                    if len(contrib) == consumers[n]:
                        complete.append(n)
                gnames.append(g)
                if n in self.params:
                    role_var += [n, g]
            if gnames:
                outs.append((slot + "@GRAD", tuple(gnames)))
        self.w.emit(
            op.type + "_grad",
            ins,
            outs,
            BACKWARD,
            op.stage,
            attrs_key=op.attrs,
            forward_op_id=i + 1,
            role_var=role_var,
        )
        for n in complete:
            # Paddle's backward completion (complete_backward_annotation) puts a sum's
            # output on its forward variable's mesh, while the sum op itself runs where
            # the last contribution was written: across a stage boundary they differ.
            self.w.var_stage[_grad_name(n)] = self.w.var_stage[n]
            self.w.emit(
                "sum",
                (("X", tuple(self.contributions.pop(n))),),
                (("Out", (_grad_name(n),)),),
                BACKWARD,
                op.stage,
            )


def _clip(w: Writer, grads: dict[str, str], check: bool) -> dict[str, str]:
    """Global-norm gradient clipping: per-grad ops on the grad's stage, the norm on all ranks."""
    model = w.model
    params = model.params
    sq_names = [model.var(f"squared_l2_norm_{k}.tmp_0", (1,)) for k in range(len(params))]
    clipped = {p: model.var(f"{g}@CLIP", model.dims[p]) for p, g in grads.items()}

    def squares(unit: Unit) -> None:
        for k in unit.params:
            p = params[k]
            w.emit(
                "squared_l2_norm",
                (("X", (grads[p],)),),
                (("Out", (sq_names[k],)),),
                OPTIMIZE,
                w.var_stage[p],
            )

    write_units(w, model.units, squares, check)
    w.uses_global = True
    total = model.var("sum_clip.tmp_0", (1,))
    norm = model.var("sqrt_0.tmp_0", (1,))
    max_norm = model.var("fill_constant_clip.tmp_0", (1,))
    denom = model.var("elementwise_max_0.tmp_0", (1,))
    coef = model.var("elementwise_div_0.tmp_0", (1,))
    w.emit("sum", (("X", tuple(sq_names)),), (("Out", (total,)),), OPTIMIZE, -1)
    w.emit("sqrt", (("X", (total,)),), (("Out", (norm,)),), OPTIMIZE, -1)
    w.emit("fill_constant", (), (("Out", (max_norm,)),), OPTIMIZE, -1)
    w.emit(
        "elementwise_max", (("X", (norm,)), ("Y", (max_norm,))), (("Out", (denom,)),), OPTIMIZE, -1
    )
    w.emit(
        "elementwise_div", (("X", (max_norm,)), ("Y", (denom,))), (("Out", (coef,)),), OPTIMIZE, -1
    )

    def scale(unit: Unit) -> None:
        for k in unit.params:
            p = params[k]
            w.emit(
                "elementwise_mul",
                (("X", (grads[p],)), ("Y", (coef,))),
                (("Out", (clipped[p],)),),
                OPTIMIZE,
                w.var_stage[p],
            )

    write_units(w, model.units, scale, check)
    return clipped


def _optimizer(w: Writer, grads: dict[str, str], check: bool) -> None:
    """One update op per parameter, on the parameter's stage."""
    opts, model = w.opts, w.model
    lr = model.var("learning_rate_0", (1,))
    w.var_stage[lr] = -1
    w.uses_global = True

    def update(unit: Unit) -> None:
        for k in unit.params:
            p = model.params[k]
            stage = w.var_stage[p]
            ins = [("Param", (p,)), ("Grad", (grads[p],)), ("LearningRate", (lr,))]
            outs = [("ParamOut", (p,))]
            if opts.optimizer == "adamw":
                acc = {
                    k: model.var(f"{p}_{k}_0", model.dims[p] if k.startswith("moment") else (1,))
                    for k in ("moment1", "moment2", "beta1_pow_acc", "beta2_pow_acc")
                }
                for a in acc.values():
                    w.var_stage[a] = stage
                ins += [
                    ("Moment1", (acc["moment1"],)),
                    ("Moment2", (acc["moment2"],)),
                    ("Beta1Pow", (acc["beta1_pow_acc"],)),
                    ("Beta2Pow", (acc["beta2_pow_acc"],)),
                ]
                outs += [
                    ("Moment1Out", (acc["moment1"],)),
                    ("Moment2Out", (acc["moment2"],)),
                    ("Beta1PowOut", (acc["beta1_pow_acc"],)),
                    ("Beta2PowOut", (acc["beta2_pow_acc"],)),
                ]
            w.emit(opts.optimizer, ins, outs, OPTIMIZE, stage, role_var=(p, grads[p]))

    write_units(w, model.units, update, check, last=True)


def build_sample(opts: SampleOptions) -> bytes:
    """The serialized GPT-like program described by `opts` (deterministic)."""
    progress.phase("building")
    return _build(opts)


def _build(opts: SampleOptions, *, check: bool = False) -> bytes:
    """`build_sample`; with `check`, every stamped layer is also encoded op by op and compared."""
    with paused_gc():  # the model allocates millions of small objects, none in a cycle
        # The model and the writer are gone once `_write` returns, before the
        # collector is back on (it would traverse them all once more).
        return _write(opts, check)


def _write(opts: SampleOptions, check: bool) -> bytes:
    model = Model(opts)
    model.build()
    w = Writer(opts, model)
    _variables(w, check)
    _forward(w, check)
    if opts.backward:
        grads = _Backward(w).write(check)
        # Nothing reads the forward graph after the backward section; dropping it
        # lowers the peak memory (by ~200 MB at 10,000 layers).
        model.ops.clear()
        if opts.optimizer != "none":
            if opts.grad_clip:
                grads = _clip(w, grads, check)
            _optimizer(w, grads, check)
    return w.write_program()
