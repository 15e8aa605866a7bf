"""Backward: which forward op each backward op of the global block belongs to.

A backward op belongs to a forward op in one of four ways, tried in order:

1. a recompute copy: Paddle's recompute pass copies forward ops into the backward
   section (backward role, struct name `/`, no `forward_op_id`); the copy has the
   forward op's type and writes the forward op's outputs renamed `NAME.subprog_K`
   (one K), reading the forward op's inputs or their `.subprog_K` copies. Paddle
   gives it the forward op's mesh and chunk.
2. `forward_op_id` naming a forward op's `id` (precheck refuses one that shares no
   variable with the op: a link the data flow contradicts).
3. a `T_grad` op reading `o@GRAD` for an output `o` of a forward op of type `T`.
4. the data flow: the op reads `o@GRAD...` for an output `o` of a forward op F and
   writes `i@GRAD...` for an input `i` of F (`scale` and `cast` as their own grads,
   `concat` as `split`'s, the AMP pass's backward casts, reshard `assign`s); or it
   reads what the loss-grad op wrote (the AMP pass's loss-scaling grad): the loss op.

What is left (the recompute pass's dependency `nop`s, and anything unknown) has
no forward op; `nop`s are recognised by type.
"""

from __future__ import annotations

import re

from vppctl.engine.flow import first_forward_writers
from vppctl.engine.index import ProgramIndex, loss_op, named
from vppctl.program import EMPTY_VAR, NO_VAR, SCOPE_VAR, is_backward, is_loss_grad

NOP = b"nop"
_SENTINELS = (NO_VAR, EMPTY_VAR, SCOPE_VAR)  # argument ids naming no variable
_SUBPROG = re.compile(rb"^(.*)\.subprog_(\d+)$", re.S)
_GRAD = b"@GRAD"


class ForwardOps:
    """The forward op of each backward op of the global block (see the module docstring)."""

    def __init__(self, index: ProgramIndex) -> None:
        self.index = index
        block = self.block = index.global_block
        ids = block.ops.op_id
        self.by_id = {ids[i]: i for i in block.forward_ops if ids[i] >= 0}
        self.recomputed = recompute_copies(index)
        self._by_output: dict[tuple[bytes, bytes], int] | None = None
        self._writers: dict[int, int] | None = None
        self._loss: tuple[int | None, set[int]] | None = None

    def of(self, op: int) -> int | None:
        f = self.recomputed.get(op)
        if f is not None:
            return f
        f = self.by_id.get(self.block.ops.forward_op_id[op])
        return f if f is not None else self.infer(op)

    def infer(self, op: int) -> int | None:
        """The forward op from the program's names and data flow alone (rules 3 and 4)."""
        return self._by_type(op) or self._by_flow(op)

    def shares_a_variable(self, op: int, f: int) -> bool:
        """Whether backward op `op` reads or writes an input or output of forward op `f`,
        or a gradient of one: a `forward_op_id` that does not is contradicted by the data
        flow."""
        block = self.block
        o = block.ops
        at = o.in_off[op]
        if at < o.in_off[op + 1] and 0 <= o.in_var[at] in block.inputs(f):
            return True  # the usual case, tested first: it reads what `f` reads (X)
        mine = set(block.inputs(op))
        mine.update(block.outputs(op))
        mine.difference_update(_SENTINELS)
        if not mine.isdisjoint(block.inputs(f)) or not mine.isdisjoint(block.outputs(f)):
            return True
        theirs = {*block.inputs(f), *block.outputs(f)}
        forward_var = self.index.forward_var
        return any(forward_var(v) in theirs for v in mine)

    def _by_type(self, op: int) -> int | None:
        block = self.block
        t = block.ops.type[op]
        if not t.endswith(b"_grad"):
            return None
        if self._by_output is None:
            self._by_output = self._forward_outputs()
        fwd_type = t[:-5]
        for v in block.inputs(op):
            name = self.index.var_name_bytes(v) if v >= 0 else b""
            if name.endswith(_GRAD):
                f = self._by_output.get((fwd_type, name[:-5]))
                if f is not None:
                    return f
        return None

    def _by_flow(self, op: int) -> int | None:
        block, index = self.block, self.index
        if self._writers is None:
            self._writers = first_forward_writers(index)
        written = {index.forward_var(v) for v in block.outputs(op) if v >= 0}
        for v in block.inputs(op):
            if v < 0:
                continue
            x = index.forward_var(v)
            f = self._writers.get(x) if x is not None else None
            if f is not None and written.intersection(block.inputs(f)):
                return f
        return self._loss_scaling(op)

    def _loss_scaling(self, op: int) -> int | None:
        if self._loss is None:
            block = self.block
            grads = [i for i in range(block.n_ops) if is_loss_grad(block.ops.role[i])]
            self._loss = (loss_op(self.index), {v for i in grads for v in block.outputs(i)})
        loss, written = self._loss
        if loss is not None and written.intersection(self.block.inputs(op)):
            return loss
        return None

    def _forward_outputs(self) -> dict[tuple[bytes, bytes], int]:
        block, index = self.block, self.index
        out: dict[tuple[bytes, bytes], int] = {}
        for i in block.forward_ops:
            t = block.ops.type[i]
            for v in block.outputs(i):
                if v >= 0:
                    out.setdefault((t, index.var_name_bytes(v)), i)
        return out


def recompute_copies(index: ProgramIndex) -> dict[int, int]:
    """Backward op -> the forward op it recomputes (rule 1 of the module docstring).

    Only programs whose global block declares a `.subprog_` variable are searched, and
    then only the backward ops writing one."""
    block = index.global_block
    if not named(block.vars.name, b".subprog_"):
        return {}
    by_first_output: dict[tuple[bytes, int], int] = {}
    for f in block.forward_ops:
        outs = block.outputs(f)
        if len(outs) and outs[0] >= 0:
            by_first_output.setdefault((block.ops.type[f], outs[0]), f)
    pairs: dict[int, int] = {}
    roles, types = block.ops.role, block.ops.type
    for op in range(block.n_ops):
        if not is_backward(roles[op]) or types[op].endswith(b"_grad"):
            continue
        source = _copied(index, op, by_first_output)
        if source is not None:
            pairs[op] = source
    return pairs


def _copied(
    index: ProgramIndex,
    op: int,
    by_first_output: dict[tuple[bytes, int], int],
) -> int | None:
    """The forward op `op` is a recompute copy of, or None."""
    block = index.global_block
    outs = block.outputs(op)
    if not len(outs) or min(outs) < 0:
        return None
    bases: list[int] = []
    suffix = None
    for v in outs:
        m = _SUBPROG.match(index.var_name_bytes(v))
        if m is None or (suffix is not None and m[2] != suffix):
            return None
        suffix = m[2]
        bases.append(index.lookup(0, m[1]))
    f = by_first_output.get((block.ops.type[op], bases[0]))
    if f is None or list(block.outputs(f)) != bases:
        return None
    ins, f_ins = block.inputs(op), block.inputs(f)
    if len(ins) != len(f_ins):
        return None
    copy_of = b".subprog_" + (suffix or b"")
    for v, w in zip(ins, f_ins):  # each input: the forward op's, or its copy
        if v != w and (
            v < 0 or w < 0 or index.var_name_bytes(v) != index.var_name_bytes(w) + copy_of
        ):
            return None
    return f
