"""PIR gradients: which forward op each grad op differentiates, and the gradient values' names.

A PIR program records neither: Paddle's PIR backward (`paddle.autograd.ir_backward`)
knows each grad op's forward op while it builds them (it copies the forward op's
chunk id onto them), but nothing of it is serialized, and values have no names. A
legacy program says both (`forward_op_id`, `X@GRAD`), and vppctl's rules read them, so
the PIR reader recovers them from the data flow, in program order:

- a backward op `T_grad` (or `T_grad_`) differentiates the forward op of type `T` that
  reads or writes every forward value it reads (a value a forward op or a declaration
  defines), the latest such op no grad op took yet; a backward op of another type, or
  one reading no forward value, differentiates the forward op of its own base type that
  defined a value whose gradient it reads (a cast's gradient is a cast);
- its results are the gradients of that op's operands, and the gradients it reads, of
  that op's results: matched in order, each to the next one of the same dims (a grad op
  leaves out the operands that get no gradient, as `embedding_grad` leaves the ids);
- a backward `pd_op.add_n` (or `pd_op.add_n_`) whose operands are all gradients of one
  value adds up its parts: its result is that value's gradient;
- a backward op that carries a layer's struct name is a recompute copy (Paddle's PIR
  recompute pass copies a layer's forward ops into the backward, struct names kept): it
  copies the forward op of its type and struct name that reads the same values (or their
  copies), the first such op not yet copied, and its results are copies of that op's.

A value X's gradient is named `X@GRAD`; when parts of it are added up, the parts are
`X@GRAD@RENAME@k` (k in program order) and the sum `X@GRAD`, as legacy Paddle names them;
a recomputed copy of X is `X.subprog_0`, as Paddle's legacy recompute pass names it (so
vppctl's recompute rule, V021, reads it).
The walk is linear in the program: a grad op's forward op is looked for among the readers
of the forward value it reads that the fewest ops read, latest first, the readers already
taken at the end of that list passed once for all; results are matched through each wide
op's operand positions by dims, built once. It takes at most SEARCH_STEPS_PER_ENTRY steps
per operand of the program in all: a program shaped to need more (thousands of forward ops
of one type reading the very same values) has its later grad ops left unlinked (their
gradients named `%N`), never a quadratic walk.

Every other value is `%N` (its PIR id) unless the program names it (parameters, data; a
name given twice, as the per-stage copies of `learning_rate_0`, is `NAME%N` the second
time).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import deque
from collections.abc import Sequence
from itertools import chain

from vppctl.program.pir.tables import NO_OP, NO_VALUE, PirTables
from vppctl.program.roles import BACKWARD, FORWARD_ROLES, GRAD_SUM_TYPES

NO_LINK = -1


class Flow:
    """Every op's operands and results as value numbers (folded ops looked through; -1 for a
    null one), and each value's readers: CSR arrays, built once."""

    def __init__(self, t: PirTables) -> None:
        self.in_off, self.ins = array("q", [0]), array("q")
        self.out_off, self.outs = array("q", [0]), array("q")
        at = t.value_at
        for op in range(t.n_ops):
            for pir_id in t.operands(op):
                for p in t.expand(pir_id) if pir_id != NO_VALUE else (NO_VALUE,):
                    self.ins.append(at.get(p, -1))
            self.in_off.append(len(self.ins))
            for pir_id in t.results(op):
                for p in t.split.get(pir_id, (pir_id,)) if pir_id != NO_VALUE else (NO_VALUE,):
                    self.outs.append(at.get(p, -1))
            self.out_off.append(len(self.outs))
        n = len(t.v_id)
        counts = array("q", bytes(8 * (n + 1)))
        for v in self.ins:
            if v >= 0:
                counts[v + 1] += 1
        for v in range(n):
            counts[v + 1] += counts[v]
        self.reader_off = counts
        self.readers = array("q", bytes(8 * len(self.ins)))
        fill = array("q", counts[:-1])
        for op in range(t.n_ops):
            for v in self.inputs(op):
                if v >= 0:
                    self.readers[fill[v]] = op
                    fill[v] += 1

    def inputs(self, op: int) -> array[int]:
        return self.ins[self.in_off[op] : self.in_off[op + 1]]

    def outputs(self, op: int) -> array[int]:
        return self.outs[self.out_off[op] : self.out_off[op + 1]]

    def n_readers(self, v: int) -> int:
        return self.reader_off[v + 1] - self.reader_off[v]


def link_gradients(t: PirTables) -> tuple[list[str], array[int]]:
    """(each value's name, each op's forward op or NO_LINK) of a read program."""
    links = _Links(t, Flow(t))
    for op in range(t.n_ops):
        if t.op_role[op] & BACKWARD:
            links.visit(op)
    return _names(t, links.grad_of, links.sum_of, links.copy_of), links.forward_of


def forward_type(kind: str) -> str:
    """The forward op type a backward op type differentiates: `pd_op.matmul_grad` ->
    `pd_op.matmul`; a type without `_grad` is its own (a cast's gradient is a cast)."""
    for suffix in ("_grad", "_grad_"):
        if kind.endswith(suffix):
            return kind[: -len(suffix)]
    return kind


class _Links:
    """The walk of the module docstring over the backward ops, in program order."""

    def __init__(self, t: PirTables, flow: Flow) -> None:
        self.t, self.flow = t, flow
        n = len(t.v_id)
        self.forward_of = array("q", [NO_LINK]) * t.n_ops
        self.grad_of = array("q", [-1]) * n  # value -> the forward value it is the gradient of
        self.sum_of: dict[int, int] = {}  # forward value -> the sum of its gradient parts
        self.claimed = bytearray(t.n_ops)
        self.forward_value = bytearray(
            p == NO_OP or t.op_role[p] in FORWARD_ROLES for p in t.v_producer
        )
        self.copy_of: dict[int, int] = {}  # recomputed value -> the forward value it copies
        self._copyable: dict[tuple[str, str, tuple[int, ...]], deque[int]] | None = None
        self._sources: dict[tuple[int, bool], dict[tuple[int, ...], list[int]]] = {}
        self._free_top: dict[int, int] = {}  # value -> index in readers past which none is free
        # Steps the search for forward ops may take in all: linear in the program whatever
        # its shape; past them a grad op is left unlinked (its gradients named %N).
        self.budget = (
            SEARCH_STEPS_PER_ENTRY * (len(flow.ins) + len(flow.outs) + t.n_ops) + BUDGET_SLACK
        )

    def visit(self, op: int) -> None:
        t, flow = self.t, self.flow
        ins, outs = flow.inputs(op), flow.outputs(op)
        kind = t.op_type[op]
        if kind in GRAD_SUM_TYPES:
            self._sum(ins, outs)
            return
        if t.op_struct[op] and forward_type(kind) == kind:
            self._copy(op, kind, ins, outs)
            return
        f = self._forward_op(op, forward_type(kind), ins)
        if f == NO_LINK:
            return
        self.forward_of[op] = f
        self.claimed[f] = 1
        for r, x in self._match(outs, f, inputs=True):
            if self.grad_of[r] < 0:
                self.grad_of[r] = x
        read = [
            v
            for v in ins
            if v >= 0
            and not self.forward_value[v]
            and self.grad_of[v] < 0
            and v not in self.copy_of
        ]
        for g, y in self._match(read, f, inputs=False):
            self.grad_of[g] = y

    def _copy(self, op: int, kind: str, ins: Sequence[int], outs: Sequence[int]) -> None:
        """A recompute copy: its results copy those of the forward op it recomputes."""
        if self._copyable is None:
            t, flow = self.t, self.flow
            self._copyable = {}
            for f in range(t.n_ops):
                if t.op_role[f] in FORWARD_ROLES:
                    key = (t.op_type[f], t.op_struct[f], tuple(flow.inputs(f)))
                    self._copyable.setdefault(key, deque()).append(f)
        key = (kind, self.t.op_struct[op], tuple(self.copy_of.get(v, v) for v in ins))
        waiting = self._copyable.get(key)
        if not waiting:
            return
        f = waiting.popleft()  # copies come in the order of the ops they copy
        for r, x in zip(outs, self.flow.outputs(f)):
            if r >= 0 and x >= 0:
                self.copy_of[r] = x

    def _sum(self, ins: Sequence[int], outs: Sequence[int]) -> None:
        of = {self.grad_of[v] if v >= 0 else -1 for v in ins}
        if len(outs) == 1 and outs[0] >= 0 and len(of) == 1 and -1 not in of:
            x = of.pop()
            self.grad_of[outs[0]] = x
            self.sum_of[x] = outs[0]

    def _forward_op(self, op: int, base: str, ins: Sequence[int]) -> int:
        t = self.t
        forward = [v for v in ins if v >= 0 and self.forward_value[v]]
        if forward and base != t.op_type[op]:
            return self._latest_user(forward, base)
        candidates = []
        for v in ins:
            x = self.grad_of[v] if v >= 0 else -1
            p = t.v_producer[x] if x >= 0 else NO_OP
            if p != NO_OP and t.op_type[p] == base and t.op_role[p] in FORWARD_ROLES:
                candidates.append(p)
        if not candidates:
            return NO_LINK
        free = [f for f in candidates if not self.claimed[f]]
        return max(free or candidates)

    def _latest_user(self, values: list[int], base: str) -> int:
        """The latest forward op of type `base` no grad op took yet that reads or defines
        every value of `values`, else the latest such op taken, else NO_LINK. The readers
        of the value read by the fewest ops are searched, latest first; readers no longer
        free at the end of that list (taken, or no forward op) are passed once for all."""
        t, flow = self.t, self.flow
        # The readers are indexed in place, never sliced: a copy of a value's readers
        # for each grad op reading it would be quadratic in them.
        pivot = min(values, key=flow.n_readers)
        readers, first, end = flow.readers, flow.reader_off[pivot], flow.reader_off[pivot + 1]
        wanted = set(values)
        top = self._free_top.get(pivot, end)
        while top > first and not self._free(readers[top - 1]):
            top -= 1
        self._free_top[pivot] = top
        producer = t.v_producer[pivot]
        for f in chain((readers[k] for k in range(top - 1, first - 1, -1)), (producer,)):
            if f != NO_OP and self._free(f) and self._uses_all(f, base, wanted):
                return f
            if self.budget < 0:
                return NO_LINK
        for f in chain((readers[k] for k in range(end - 1, first - 1, -1)), (producer,)):
            if f != NO_OP and t.op_role[f] in FORWARD_ROLES and self._uses_all(f, base, wanted):
                return f  # every such op is taken: the latest
            if self.budget < 0:
                break
        return NO_LINK

    def _free(self, f: int) -> bool:
        return not self.claimed[f] and self.t.op_role[f] in FORWARD_ROLES

    def _uses_all(self, f: int, base: str, wanted: set[int]) -> bool:
        """Op `f` is of type `base` and reads or defines every value of `wanted`; the work
        is charged to the search's budget."""
        self.budget -= 1
        if self.t.op_type[f] != base:
            return False
        ins, outs = self.flow.inputs(f), self.flow.outputs(f)
        self.budget -= len(ins) + len(outs)
        return len(wanted.intersection(ins) | wanted.intersection(outs)) == len(wanted)

    def _match(self, targets: Sequence[int], f: int, *, inputs: bool) -> list[tuple[int, int]]:
        """Targets paired in order with the inputs (or outputs) of op `f` of the same dims,
        each used once: the next one of its dims after the last paired."""
        t, flow = self.t, self.flow
        sources = flow.inputs(f) if inputs else flow.outputs(f)
        if len(sources) <= _SCANNED:
            return _scan_match(t, targets, sources)
        at = self._positions(f, inputs, sources)
        pairs, j = [], 0
        for r in targets:
            if r < 0 or t.v_dtype[r] < 0:
                continue
            found = at.get(t.v_dims[r])
            if found is None:
                continue
            i = bisect_left(found, j)
            if i < len(found):
                pairs.append((r, sources[found[i]]))
                j = found[i] + 1
        return pairs

    def _positions(
        self, f: int, inputs: bool, sources: Sequence[int]
    ) -> dict[tuple[int, ...], list[int]]:
        """The positions of op `f`'s typed inputs (or outputs) by dims, built once per op."""
        at = self._sources.get((f, inputs))
        if at is None:
            at = {}
            t = self.t
            for k, x in enumerate(sources):
                if x >= 0 and t.v_dtype[x] >= 0:
                    at.setdefault(t.v_dims[x], []).append(k)
            self._sources[f, inputs] = at
        return at


_SCANNED = 64  # sources matched by a scan; an op with more is matched through its positions
SEARCH_STEPS_PER_ENTRY = 32  # what the search for forward ops may take, per operand ...
BUDGET_SLACK = 1 << 16  # ... plus this, in all


def _scan_match(
    t: PirTables, targets: Sequence[int], sources: Sequence[int]
) -> list[tuple[int, int]]:
    """`_Links._match` on few sources: each target scans them from the last paired one."""
    pairs, j = [], 0
    for r in targets:
        if r < 0 or t.v_dtype[r] < 0:
            continue
        k = j
        while k < len(sources) and (
            sources[k] < 0 or t.v_dtype[sources[k]] < 0 or t.v_dims[sources[k]] != t.v_dims[r]
        ):
            k += 1
        if k < len(sources):
            pairs.append((r, sources[k]))
            j = k + 1
    return pairs


def _names(
    t: PirTables, grad_of: array[int], sum_of: dict[int, int], copy_of: dict[int, int]
) -> list[str]:
    """Every value's name (see the module docstring); names are unique."""
    n = len(t.v_id)
    names = [""] * n
    taken: set[str] = set()
    for v in range(n):  # the program's own names first (a repeated one: NAME%N), then %N
        name = t.v_name[v]
        if name and grad_of[v] < 0 and v not in copy_of:
            names[v] = _unique(name, v, t, taken)
    for v in range(n):
        if not names[v] and grad_of[v] < 0 and v not in copy_of:
            names[v] = _unique(f"%{t.v_id[v]}", v, t, taken)
    for v, x in copy_of.items():
        names[v] = _unique(f"{names[x] or '%' + str(t.v_id[x])}.subprog_0", v, t, taken)
    parts: dict[int, list[int]] = {}
    for v in range(n):
        x = grad_of[v]
        if x >= 0 and sum_of.get(x) != v:
            parts.setdefault(x, []).append(v)
    for x, grads in parts.items():
        base = (names[x] or f"%{t.v_id[x]}") + "@GRAD"
        if len(grads) == 1 and x not in sum_of:
            names[grads[0]] = _unique(base, grads[0], t, taken)
            continue
        for k, g in enumerate(grads):
            names[g] = _unique(f"{base}@RENAME@{k}", g, t, taken)
    for x, s in sum_of.items():
        names[s] = _unique((names[x] or f"%{t.v_id[x]}") + "@GRAD", s, t, taken)
    return names


def _unique(name: str, v: int, t: PirTables, taken: set[str]) -> str:
    if name in taken:
        name = f"{name}%{t.v_id[v]}"
    taken.add(name)
    return name
