"""Flow: data-flow facts about a program, from its index.

Which forward op first writes each variable, how many variables travel between
stages in the forward pass, which forward op a backward op differentiates and
which forward op a recomputed op copies, all from the variables ops read and
write (never from op ids). They depend on the program's structure and
placements only; the verifier's rules and the reports read them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from itertools import chain, compress, count, repeat
from operator import add, and_

from vppctl.engine.index import ProgramIndex, named
from vppctl.mesh import MeshId
from vppctl.program import BACKWARD, is_backward, is_loss_grad


def first_forward_writers(index: ProgramIndex) -> dict[int, int]:
    """Variable -> the first forward op of the global block that writes it (memoised: it
    depends on the program's structure only, not on placements)."""
    if index.first_writers is None:
        block = index.global_block
        o = block.ops
        out: dict[int, int] = {}
        setdefault = out.setdefault
        for op in block.forward_ops:
            for v in o.out_var[o.out_off[op] : o.out_off[op + 1]]:
                if v >= 0:
                    setdefault(v, op)
        index.first_writers = out
    return index.first_writers


def cross_stage_edges(index: ProgramIndex, stage_mesh_ids: Sequence[MeshId]) -> int:
    """Variables that travel between stages in the forward pass, per micro-batch.

    Counted as distinct (variable, consuming stage) pairs where a forward op on
    one stage reads a variable first written by a forward op on another.
    """
    block = index.global_block
    stage_of = {m: s for s, m in enumerate(stage_mesh_ids)}
    stage = list(map(stage_of.get, block.op_mesh))  # op -> its stage, None: on no stage's
    producer = first_forward_writers(index).get  # variables only: a sentinel gets -1
    o = block.ops
    in_off, in_var = o.in_off, o.in_var
    edges: set[tuple[int, int]] = set()
    for op in block.forward_ops:
        dst = stage[op]
        if dst is None:
            continue
        for v in in_var[in_off[op] : in_off[op + 1]]:
            p = producer(v, -1)
            if 0 <= p < op and (src := stage[p]) is not None and src != dst:
                edges.add((v, dst))
    return len(edges)


# -- gradients and recomputed ops: which forward op a backward op belongs to ----------


_GRAD = b"@GRAD"
_SMALL = 8  # forward ops with at most this many inputs are not given a cached input set


class GradientFlow:
    """Which forward op a backward op of the global block differentiates, from the data
    flow alone (no op ids): B differentiates F when B reads the gradient `o@GRAD...` of an
    output `o` of F and writes the gradient `i@GRAD...` of an input `i` of F.

    That covers `T_grad` ops and the grads named otherwise (`scale` for scale, `concat`
    for split, `cast` for AMP's casts, `assign` for reshard's). Outputs that several
    forward ops write (in place) are left out: which writer a gradient belongs to is
    then not a data-flow fact.
    """

    def __init__(self, index: ProgramIndex) -> None:
        block = self.block = index.global_block
        o = block.ops
        base = self.base = gradient_bases(index)
        writer = _single_forward_writers(index)
        # Per argument position of the backward section, in C: the forward op writing the
        # variable an input is the gradient of, and the forward variable an output is the
        # gradient of (-1: none). Positions count from the section's first op.
        first = next(compress(count(), map(and_, o.role, repeat(BACKWARD))), block.n_ops)
        self.in_start, self.out_start = o.in_off[first], o.out_off[first]
        ins, outs = o.in_var[self.in_start :], o.out_var[self.out_start :]
        self.grad_of_writer = list(map(writer.get, map(base.__getitem__, ins), repeat(-1)))
        self.grad_base = list(map(base.__getitem__, outs))
        self._input_sets: dict[int, set[int]] = {}
        self._argument_sets: dict[int, set[int]] = {}
        self._columns = o.in_off, o.out_off, o.in_var  # read once per call of differentiates

    # The methods take a backward op `op` (at or after the section's first op). They test
    # membership in a forward op's cached variable set, iterating only `op`'s own
    # arguments: many backward ops naming one huge forward op stay linear.

    def differentiates(self, op: int, f: int) -> bool:
        """Whether `op` reads the gradient of an output of forward op `f` and writes the
        gradient of one of its inputs."""
        in_off, out_off, in_var = self._columns
        at = in_off[op]
        i = at - self.in_start
        if f not in self.grad_of_writer[i : i + in_off[op + 1] - at]:
            return False
        j = out_off[op] - self.out_start
        written = self.grad_base[j : j + out_off[op + 1] - out_off[op]]
        start, end = in_off[f], in_off[f + 1]
        if end - start <= _SMALL:  # most forward ops: their few inputs, read in place
            return not set(written).isdisjoint(in_var[start:end])
        return not self._inputs(f).isdisjoint(written)

    def of(self, op: int) -> list[int]:
        """The forward ops `op` differentiates, in op order (usually one; none for an op
        the data flow shows as no gradient of anything)."""
        o = self.block.ops
        i, j = o.in_off[op] - self.in_start, o.out_off[op] - self.out_start
        fs = set(self.grad_of_writer[i : i + o.in_off[op + 1] - o.in_off[op]])
        fs.discard(-1)
        if not fs:
            return []
        written = self.grad_base[j : j + o.out_off[op + 1] - o.out_off[op]]
        return sorted(f for f in fs if not self._inputs(f).isdisjoint(written))

    def shares(self, op: int, f: int) -> bool:
        """Whether backward op `op` names a variable of op `f` or the gradient of one."""
        block, base = self.block, self.base
        theirs = self._arguments(f)
        mine = (*block.inputs(op), *block.outputs(op))
        return not theirs.isdisjoint(mine) or not theirs.isdisjoint(map(base.__getitem__, mine))

    def _inputs(self, f: int) -> set[int]:
        """A forward op's input variables (no sentinels), cached."""
        found = self._input_sets.get(f)
        if found is None:
            found = self._input_sets[f] = {v for v in self.block.inputs(f) if v >= 0}
        return found

    def _arguments(self, f: int) -> set[int]:
        found = self._argument_sets.get(f)
        if found is None:
            found = {v for v in (*self.block.inputs(f), *self.block.outputs(f)) if v >= 0}
            self._argument_sets[f] = found
        return found


def gradient_bases(index: ProgramIndex) -> list[int]:
    """Variable id -> the global-block variable whose gradient it is (`x` for a global
    `x@GRAD...`), or -1. Indexed by any argument id: the table ends with two -1 entries,
    so the sentinels NO_VAR (-1) and EMPTY_VAR (-2) map to -1. Only global-block names
    are resolved (the rules that use this read the global block's ops), in one dict
    lookup each however deep the blocks nest."""
    base = [-1] * (index.n_vars + 2)
    block = index.global_block
    get, first = block.names.get, block.var_base
    for i, name in enumerate(block.vars.name):
        head, grad, _ = name.partition(_GRAD)
        if grad and head:
            f = get(head, -1)
            if f >= 0:
                base[first + i] = f
    return base


def _single_forward_writers(index: ProgramIndex) -> dict[int, int]:
    """Variable -> the forward op of the global block that writes it, for variables
    exactly one forward op writes."""
    block = index.global_block
    first = first_forward_writers(index)
    o = block.ops
    starts = list(map(o.out_off.__getitem__, block.forward_ops))
    ends = list(map(o.out_off.__getitem__, map(add, block.forward_ops, repeat(1))))
    if sum(ends) - sum(starts) == len(first):  # each output position a distinct variable
        return first
    slices = map(o.out_var.__getitem__, map(slice, starts, ends))
    counts = Counter(chain.from_iterable(slices))
    return {v: op for v, op in first.items() if counts[v] == 1}


_SUBPROG = re.compile(rb"(.*)(\.subprog_\d+)", re.DOTALL)


def recomputed_ops(index: ProgramIndex) -> dict[int, int]:
    """Recomputed op -> the forward op it recomputes, in the global block.

    Paddle's recompute pass copies a recomputed forward op F into the backward section
    as R: a backward op that is no gradient, every output renamed `NAME.subprog_K` for
    F's output NAME at the same position (one K per op), each input F's input at the
    same position or that input + `.subprog_K` (the output of an earlier copy), and
    the same type. Found from names alone, so without op ids too.
    """
    block = index.global_block
    if not named(block.vars.name, b".subprog_"):  # no copies: nothing to pair
        return {}
    by_output: dict[tuple[bytes, int], int] = {}
    o = block.ops
    for f in block.forward_ops:
        outs = block.outputs(f)
        if outs:
            by_output.setdefault((o.type[f], outs[0]), f)
    found: dict[int, int] = {}
    for r in range(block.n_ops):
        role = o.role[r]
        if is_backward(role) and not is_loss_grad(role):
            copied = _recomputed_from(index, r, by_output)
            if copied is not None:
                found[r] = copied
    return found


def _recomputed_from(
    index: ProgramIndex, r: int, by_output: dict[tuple[bytes, int], int]
) -> int | None:
    block = index.global_block
    outs = block.outputs(r)
    if not outs or min(outs) < 0 or b".subprog_" not in index.var_name_bytes(outs[0]):
        return None
    suffix = b""
    stripped: list[int] = []
    for v in outs:
        m = _SUBPROG.fullmatch(index.var_name_bytes(v))
        if m is None or (suffix and m.group(2) != suffix):
            return None
        suffix = m.group(2)
        stripped.append(index.lookup(0, m.group(1)))
    f = by_output.get((block.ops.type[r], stripped[0]), -1) if min(stripped) >= 0 else -1
    if f < 0 or list(block.outputs(f)) != stripped:
        return None
    ins, f_ins = block.inputs(r), block.inputs(f)
    if len(ins) != len(f_ins):
        return None
    for mine, theirs in zip(ins, f_ins):
        if mine != theirs and (
            mine < 0
            or theirs < 0
            or index.var_name_bytes(mine) != index.var_name_bytes(theirs) + suffix
        ):
            return None
    return f
