"""Apply: give every op and variable its stage mesh and chunk id (rules 6-10), then write.

The rules run as a fixed sequence of passes over integer side tables
(`Assignment`); each pass is one function named by what it does. Only then
does one write pass touch the serialized ops and variables, and only those
whose mesh or chunk id changed.

Variables follow "first writer wins": a variable that already got a mesh (or a
chunk id) keeps it; the two are tracked separately, as in Paddle.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from itertools import chain, compress, count, islice
from operator import and_
from typing import TypeVar

from vppctl import progress
from vppctl.engine.backward import NOP, ForwardOps
from vppctl.engine.index import ProgramIndex, loss_op, named
from vppctl.engine.layers import NO_LAYER, LayerSet
from vppctl.errors import ConversionError
from vppctl.mesh import NO_MESH
from vppctl.plan import Plan
from vppctl.program import (
    BACKWARD,
    FORWARD_ROLES,
    GRAD_SUMS,
    LOSS_GRAD,
    NO_CHUNK_NAME,
    OPTIMIZE,
    encode_mesh,
    rewrite_ops,
    rewrite_vars,
)

T = TypeVar("T")


@dataclass
class Assignment:
    """The new mesh class and chunk id of every op and variable (copied from the index)."""

    op_mesh: list[array[int]]
    op_chunk: list[array[int]]
    moved: list[bytearray]  # op got a new mesh (its tensor dist attrs follow)
    var_mesh: array[int]
    var_chunk: array[int]
    mesh_set: bytearray  # var already has its mesh (first writer wins)
    chunk_set: bytearray  # var already has its chunk id
    no_chunk: frozenset[int]  # vars that never get a chunk id
    vpp: int
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, index: ProgramIndex, vpp: int) -> Assignment:
        return cls(
            op_mesh=[array("q", b.op_mesh) for b in index.blocks],
            op_chunk=[array("q", b.ops.chunk) for b in index.blocks],
            moved=[bytearray(b.n_ops) for b in index.blocks],
            var_mesh=array("q", index.var_mesh),
            var_chunk=array("q", index.var_chunks),
            mesh_set=bytearray(index.n_vars),
            chunk_set=bytearray(index.n_vars),
            no_chunk=_no_chunk_vars(index),
            vpp=vpp,
        )

    def place_op(self, block: int, op: int, mesh: int | None, chunk: int) -> None:
        """Give an op a chunk and, unless `mesh` is None, a mesh.

        An op given a mesh is rewritten even when the mesh is its old one: the
        meshes of its per-input and per-output tensor dist attrs follow it, as
        Paddle's `OperatorDistAttr.process_mesh` setter does.
        """
        if mesh is not None:
            self.op_mesh[block][op] = mesh
            self.moved[block][op] = 1
        self.op_chunk[block][op] = chunk

    def copied_chunk(self, index: ProgramIndex, v: int) -> int:
        """A variable's chunk id for an op that follows it (none = 0); refuses a chunk id
        outside [0, vpp), which only a broken annotation can leave on a variable."""
        c = self.var_chunk[v]
        if c >= self.vpp:
            raise ConversionError(
                f"variable {index.var_name(v)} has chunk id {c}, outside [0, {self.vpp}), and "
                "no rule gives it a new one; fix its dist_attr (plain-PP programs have chunk 0)"
            )
        return max(c, 0)

    def set_var(self, v: int, mesh: int, chunk: int) -> None:
        """An output takes (mesh, chunk) unless an earlier writer set them."""
        if v < 0:
            return
        if not self.mesh_set[v]:
            self.var_mesh[v] = mesh
            self.mesh_set[v] = 1
        if not self.chunk_set[v] and v not in self.no_chunk:
            self.var_chunk[v] = chunk
            self.chunk_set[v] = 1

    def outputs_setter(self) -> Callable[[Iterable[int], int, int], None]:
        """`set_var` for each of an op's outputs, as a function holding the tables in its
        closure: the rule passes call it once per op, not a method per variable."""
        var_mesh, mesh_set, var_chunk, chunk_set = (
            self.var_mesh,
            self.mesh_set,
            self.var_chunk,
            self.chunk_set,
        )
        chunked = self.no_chunk.__contains__ if self.no_chunk else None

        def set_outputs(outs: Iterable[int], mesh: int, chunk: int) -> None:
            for v in outs:
                if v >= 0:
                    if not mesh_set[v]:
                        var_mesh[v] = mesh
                        mesh_set[v] = 1
                    if not chunk_set[v] and (chunked is None or not chunked(v)):
                        var_chunk[v] = chunk
                        chunk_set[v] = 1

        return set_outputs


def _no_chunk_vars(index: ProgramIndex) -> frozenset[int]:
    """Variables whose name contains lod_tensor_blocking_queue (searched in C)."""
    found: set[int] = set()
    for bi in index.blocks:
        found.update(bi.var_base + i for i in named(bi.vars.name, NO_CHUNK_NAME))
    return frozenset(found)


@dataclass(frozen=True)
class ApplyResult:
    ops_changed: int  # ops whose bytes changed
    vars_changed: int
    warnings: tuple[str, ...]


def assign(
    index: ProgramIndex, plan: Plan, layers: LayerSet, forward: ForwardOps, *, pir: bool = False
) -> Assignment:
    """Run the rule passes in order; returns the assignment (nothing written yet). `pir`:
    a program read from Paddle's PIR, whose values are where the op computing them runs
    (a sum's output too: PIR_RULES' V011)."""
    a = Assignment.start(index, plan.vpp)
    walker = _SubBlocks(index, a)
    AssignForward(index, plan, layers, a, walker).run()
    AssignBackward(index, a, walker, forward, pir=pir).run()
    AssignOptimizer(index, a, walker).run()
    _chunk_unreached(index, a, walker.done)
    _report_odd_meshes(index, a)
    return a


def _report_odd_meshes(index: ProgramIndex, a: Assignment) -> None:
    """One warning line for variables and (optimizer) ops left on meshes that are neither a
    stage mesh nor this program's world: precheck let them through, the rules kept them."""
    stages, globals_ = index.stage_mesh_ids()
    usual = {*stages, *globals_, NO_MESH}
    if usual.issuperset(a.var_mesh) and usual.issuperset(a.op_mesh[0]):  # in C: the usual case
        return
    known = usual.__contains__  # counted with map: the loops run in C
    odd_vars = len(a.var_mesh) - sum(map(known, a.var_mesh))
    odd_ops = len(a.op_mesh[0]) - sum(map(known, a.op_mesh[0]))
    if not odd_vars and not odd_ops:
        return
    odd = sorted({m for m in (*a.var_mesh, *a.op_mesh[0]) if m not in usual})
    meshes = " ".join(str(index.meshes[m]) for m in odd[:3]) + (" ..." if len(odd) > 3 else "")
    a.warnings.append(
        f"{odd_vars} variable(s) and {odd_ops} optimizer op(s) are on {meshes}, neither a "
        "stage mesh nor this program's world (a mesh an earlier program in the same process "
        "left?); they keep it, with chunk 0, as Paddle does"
    )


def _chunk_unreached(index: ProgramIndex, a: Assignment, reached: set[int]) -> None:
    """Ops of sub-blocks that no op names keep their mesh and get chunk 0 (the rule for
    ops of any other role), so that every op ends with a valid chunk id."""
    for bi in index.blocks[1:]:
        if bi.idx not in reached:
            chunks = a.op_chunk[bi.idx]
            for op in range(bi.n_ops):
                chunks[op] = 0


class _SubBlocks:
    """Rule 8: an op with a sub_block passes its mesh and chunk id to every op inside,
    recursively (Paddle goes one level deep), with rule 7 for their variables.

    Each sub-block is walked once, by the first op naming it, depth first in op
    order, with an explicit stack: nesting depth is not limited by Python's.
    """

    def __init__(self, index: ProgramIndex, a: Assignment) -> None:
        self.index, self.a = index, a
        self.done: set[int] = set()

    def enter(self, block: int, op: int, mesh: int | None, chunk: int) -> None:
        # precheck.check_structure refused sub_blocks that are not later blocks, so
        # there are no cycles: each block is entered once, by the first op naming it.
        stack = [iter(self.index.blocks[block].ops.sub_blocks.get(op, ()))]
        while stack:
            sub = next(stack[-1], None)
            if sub is None:
                stack.pop()
            elif sub not in self.done:
                self.done.add(sub)
                stack.append(self._ops(sub, mesh, chunk))

    def _ops(self, sub: int, mesh: int | None, chunk: int) -> Iterator[int]:
        """Place each op of `sub`, yielding the sub-blocks it names before the next op."""
        bi = self.index.blocks[sub]
        place = placer(self.index, self.a, sub)
        for op in range(bi.n_ops):
            place(op, mesh, chunk)
            yield from bi.ops.sub_blocks.get(op, ())


def placer(
    index: ProgramIndex, a: Assignment, block: int
) -> Callable[[int, int | None, int], None]:
    """Rules 6 and 7 for the ops of one block: `place(op, mesh, chunk)` moves an op to `mesh`
    (None: keep) and gives it `chunk`. When it moves, each input variable on the op's old
    mesh and every output variable take the new mesh; then each input and output variable
    on the op's (new) mesh takes the chunk id. First writer wins for both. The block's
    tables are held in the function's closure (the forward pass calls it once per op: no
    attribute lookups, no method call per argument)."""
    o = index.blocks[block].ops
    in_off, in_var, out_off, out_var = o.in_off, o.in_var, o.out_off, o.out_var
    var_mesh, mesh_set, var_chunk, chunk_set = a.var_mesh, a.mesh_set, a.var_chunk, a.chunk_set
    op_mesh, op_chunk, moved = a.op_mesh[block], a.op_chunk[block], a.moved[block]
    no_chunk = a.no_chunk
    chunked = no_chunk.__contains__ if no_chunk else None

    def place(op: int, mesh: int | None, chunk: int) -> None:
        # One loop over the outputs, then one over the inputs, each variable given its mesh
        # and then its chunk id: what the rule's order (every mesh, then every chunk id)
        # gives, since a variable's mesh is final for this op once it was looked at (an
        # input that is also an output took the op's mesh as an output, first).
        old = op_mesh[op]
        if mesh is not None:
            op_mesh[op] = own = mesh
            moved[op] = 1
        else:
            own = old
        op_chunk[op] = chunk
        for v in out_var[out_off[op] : out_off[op + 1]]:
            if v >= 0:
                # an output takes the op's new mesh; without one, if it has none, the op's
                if not mesh_set[v] and (mesh is not None or var_mesh[v] == NO_MESH):
                    var_mesh[v] = own
                    mesh_set[v] = 1
                if not chunk_set[v] and var_mesh[v] == own and (chunked is None or not chunked(v)):
                    var_chunk[v] = chunk
                    chunk_set[v] = 1
        for v in in_var[in_off[op] : in_off[op + 1]]:
            if v >= 0:
                if mesh is not None and not mesh_set[v] and var_mesh[v] == old:
                    var_mesh[v] = mesh
                    mesh_set[v] = 1
                if not chunk_set[v] and var_mesh[v] == own and (chunked is None or not chunked(v)):
                    var_chunk[v] = chunk
                    chunk_set[v] = 1

    return place


class AssignForward:
    """Rules 6-8: forward ops of the global block get their segment's chunk id.

    Ops before the first layer belong to segment 0 and ops after the last layer
    to the last segment; these keep their mesh, except that with V placement and
    an even vpp the ops after the last layer follow the last segment to stage 0
    (as Paddle's ZBVPP mode does). In auto mode each layer op moves to its
    segment's stage mesh.
    """

    def __init__(
        self, index: ProgramIndex, plan: Plan, layers: LayerSet, a: Assignment, walker: _SubBlocks
    ) -> None:
        self.index, self.plan, self.layers, self.a, self.walker = index, plan, layers, a, walker

    def run(self) -> None:
        index, plan, a = self.index, self.plan, self.a
        block = index.global_block
        op_layer = self.layers.op_layer
        layer_segment = plan.layer_segment()
        seg_mesh = [index.add_mesh(s.mesh, encode_mesh(s.mesh)) for s in plan.segments]
        seg_chunk = [s.chunk for s in plan.segments]
        auto = plan.mode == "auto"
        last = len(plan.segments) - 1
        move_tail = auto and plan.placement == "v" and plan.vpp % 2 == 0
        first_op = self.layers.layers[0].first
        subs = block.ops.sub_blocks
        # Each layer's (mesh or None, chunk), looked up once per op.
        layer_mesh = [seg_mesh[seg] if auto else None for seg in layer_segment]
        layer_chunk = [seg_chunk[seg] for seg in layer_segment]
        tail_mesh = seg_mesh[last] if move_tail else None
        place = placer(index, a, 0)
        for i in block.forward_ops:
            k = op_layer[i]
            if k != NO_LAYER:
                mesh, chunk = layer_mesh[k], layer_chunk[k]
            elif i < first_op:
                mesh, chunk = None, seg_chunk[0]
            else:
                mesh, chunk = tail_mesh, seg_chunk[last]
            place(i, mesh, chunk)
            if subs and i in subs:
                self.walker.enter(0, i, mesh, chunk)


class AssignBackward:
    """Rule 9: backward ops follow the forward ops they belong to.

    The loss-grad op takes the loss op's mesh and chunk id; a grad op, a recompute
    copy or another op the data flow ties to a forward op takes that op's
    (`vppctl.engine.backward.ForwardOps`); `sum`/`grad_add` take the nearest earlier
    backward op that writes one of their inputs (Paddle skips the first grad op
    after the loss-grad op; vppctl does not). Any other backward op (the recompute
    pass's dependency `nop`s among them) takes the op that wrote its first input,
    else the first input variable that has a mesh. Outputs take the op's mesh and
    chunk id, except a `sum`/`grad_add` output, which takes its forward variable's
    (the name before `@GRAD`); in a PIR program (`pir`) it too takes the op's, as a PIR
    value is where the op computing it runs.
    """

    def __init__(
        self,
        index: ProgramIndex,
        a: Assignment,
        walker: _SubBlocks,
        forward: ForwardOps,
        *,
        pir: bool = False,
    ) -> None:
        self.index, self.a, self.walker = index, a, walker
        self.pir = pir
        self.block = index.global_block
        self.forward = forward
        self.unmapped: list[int] = []
        self.nops: list[int] = []

    def run(self) -> None:
        block, a, index = self.block, self.a, self.index
        o = block.ops
        roles, types, subs = o.role, o.type, o.sub_blocks
        out_off, out_var = o.out_off, o.out_var
        loss = loss_op(index)
        last_writer: dict[int, int] = {}
        mesh0, chunk0, moved0 = a.op_mesh[0], a.op_chunk[0], a.moved[0]
        var_mesh, var_chunk, set_outputs = a.var_mesh, a.var_chunk, a.outputs_setter()
        # The grad ops' usual source, inline (ForwardOps.of): a recompute copy's forward
        # op, else the op its forward_op_id names, else the one inferred.
        recomputed, by_id, fids, infer = (
            self.forward.recomputed.get,
            self.forward.by_id.get,
            o.forward_op_id,
            self.forward.infer,
        )
        sums = not self.pir
        # The section from the first backward op to the last, walked by zipping its columns'
        # slices (one step per op, no index per column).
        lo, hi = _span(roles, partial(and_, BACKWARD))
        for i, role, t, fid, start, end in zip(
            range(lo, hi),
            roles[lo:hi],
            types[lo:hi],
            fids[lo:hi],
            out_off[lo:hi],
            out_off[lo + 1 : hi + 1],
        ):
            if not role & BACKWARD:  # is_backward, inline
                continue
            is_sum = t in GRAD_SUMS
            if role == LOSS_GRAD and loss is not None:
                mesh, chunk = mesh0[loss], chunk0[loss]
            elif is_sum:
                mesh, chunk = self._sum_source(i, last_writer)
            else:
                f = recomputed(i)
                if f is None:
                    f = by_id(fid)
                    if f is None:
                        f = infer(i)
                if f is not None:
                    mesh, chunk = mesh0[f], chunk0[f]
                else:
                    mesh, chunk = self._unmapped_source(i, last_writer)
            if mesh != NO_MESH:  # Assignment.place_op, inline
                mesh0[i] = mesh
                moved0[i] = 1
            chunk0[i] = chunk
            outs = out_var[start:end]
            if is_sum and sums:
                for v in outs:
                    if v >= 0:
                        f = index.forward_var(v)
                        fm, fc = (var_mesh[f], var_chunk[f]) if f is not None else (NO_MESH, -1)
                        a.set_var(v, fm if fm != NO_MESH else mesh, fc if fc >= 0 else chunk)
                    last_writer[v] = i
            else:
                set_outputs(outs, mesh, chunk)
                for v in outs:
                    last_writer[v] = i
            if subs and i in subs:
                self.walker.enter(0, i, mesh if mesh != NO_MESH else None, chunk)
        self._warn()

    def _warn(self) -> None:
        a, index = self.a, self.index
        if self.unmapped:
            a.warnings.append(
                f"{_count_ops(index, self.unmapped, 'backward op')} belong to no forward op "
                "vppctl can find (no forward_op_id, and the data flow names none), so they "
                "follow the op that wrote their first input; check that they belong there"
            )
        here = (a.op_mesh[0], a.op_chunk[0])
        apart = [
            i
            for i in self.nops
            if i + 1 < self.block.n_ops
            and (here[0][i], here[1][i]) != (here[0][i + 1], here[1][i + 1])
        ]
        if apart:
            a.warnings.append(
                f"{_count_ops(index, apart, 'dependency nop')} of the recompute pass now "
                "order ops on different stages or chunks; each stays with the op it waits "
                "for (the writer of its input), and the order it enforced is kept"
            )

    def _sum_source(self, i: int, last_writer: dict[int, int]) -> tuple[int, int]:
        j = max((last_writer.get(v, -1) for v in self.block.inputs(i)), default=-1)
        if j < 0:
            raise ConversionError(
                f"{self.index.op_label(0, i)} accumulates gradients, but no earlier backward op "
                "writes any of its inputs; check the backward section of the program"
            )
        return self.a.op_mesh[0][j], self.a.op_chunk[0][j]

    def _unmapped_source(self, i: int, last_writer: dict[int, int]) -> tuple[int, int]:
        """A backward op that belongs to no forward op: the op that wrote its first input,
        else the first input variable that has a mesh."""
        a = self.a
        (self.nops if self.block.ops.type[i] == NOP else self.unmapped).append(i)
        for v in self.block.inputs(i):
            j = last_writer.get(v, -1) if v >= 0 else -1
            if j >= 0:
                return a.op_mesh[0][j], a.op_chunk[0][j]
            if v >= 0 and a.var_mesh[v] != NO_MESH:
                return a.var_mesh[v], a.copied_chunk(self.index, v)
        return a.op_mesh[0][i], 0


def _span(roles: array[int], test: Callable[[int], object]) -> tuple[int, int]:
    """(first, last + 1) of the ops whose role passes `test`, found in C; (0, 0) for none."""
    first = next(compress(count(), map(test, roles)), None)
    if first is None:
        return 0, 0
    return first, len(roles) - next(compress(count(), map(test, reversed(roles))))


def _count_ops(index: ProgramIndex, ops: list[int], what: str) -> str:
    """`3 backward op(s) (op #12 (cast), ...)`: the count and the first few, for warnings."""
    shown = ", ".join(index.op_label(0, i) for i in ops[:3])
    more = f" and {len(ops) - 3} more" if len(ops) > 3 else ""
    return f"{len(ops)} {what}(s) ({shown}{more})"


class AssignOptimizer:
    """Rule 10: an op with a `Param` input takes the parameter's mesh and chunk id
    (vppctl; Paddle leaves optimizer chunk ids at 0). Other optimizer ops
    (gradient clipping) take their first input on a stage mesh; ops on a global
    mesh keep it with chunk 0. Outputs follow their op (first writer wins). Ops of
    any other role keep their mesh, chunk 0."""

    def __init__(self, index: ProgramIndex, a: Assignment, walker: _SubBlocks) -> None:
        self.index, self.a, self.walker = index, a, walker

    def run(self) -> None:
        index, a = self.index, self.a
        block = index.global_block
        o = block.ops
        stage_set = set(index.stage_mesh_ids()[0])
        roles, params, subs = o.role, o.param, o.sub_blocks
        in_off, in_var, out_off, out_var = o.in_off, o.in_var, o.out_off, o.out_var
        mesh0, chunk0, moved0 = a.op_mesh[0], a.op_chunk[0], a.moved[0]
        var_mesh, var_chunk, set_outputs = a.var_mesh, a.var_chunk, a.outputs_setter()
        vpp = a.vpp
        pir = index.program.is_pir
        constants: list[int] = []
        # The ops of this pass: neither forward nor backward (their roles tested once each).
        mine = {r: r not in FORWARD_ROLES and not r & BACKWARD for r in set(roles)}
        lo, hi = _span(roles, mine.__getitem__)
        for i, role, start, end in zip(
            range(lo, hi), roles[lo:hi], out_off[lo:hi], out_off[lo + 1 : hi + 1]
        ):
            if not mine[role]:
                continue
            optimize = role & OPTIMIZE
            if not optimize:
                mesh, chunk = mesh0[i], 0
            elif pir and self._is_constant(i, stage_set):
                constants.append(i)  # placed with its first reader, below
                continue
            elif (p := params.get(i, -1)) >= 0:
                mesh, chunk = var_mesh[p], var_chunk[p]
                if chunk >= vpp or chunk < 0:  # Assignment.copied_chunk, inline
                    chunk = a.copied_chunk(index, p)
                if pir:
                    self._states_follow(i, p, mesh, chunk)
            else:  # _clip_source's usual case inline: its first input on a stage mesh
                own = mesh0[i]
                if own != NO_MESH and own not in stage_set:
                    mesh, chunk = own, 0
                elif pir and own in stage_set:
                    mesh, chunk = self._pir_clip_source(i, own, stage_set)
                else:
                    mesh, chunk = own, 0
                    for v in in_var[in_off[i] : in_off[i + 1]]:
                        if v >= 0 and var_mesh[v] in stage_set:
                            mesh, chunk = var_mesh[v], a.copied_chunk(index, v)
                            break
            if mesh != NO_MESH:  # Assignment.place_op, inline
                mesh0[i] = mesh
                moved0[i] = 1
            chunk0[i] = chunk
            if optimize:
                set_outputs(out_var[start:end], mesh0[i], chunk)
            if subs and i in subs:
                self.walker.enter(0, i, mesh if mesh != NO_MESH else None, chunk)
        if constants:
            self._place_constants(constants)

    def _is_constant(self, i: int, stage_set: set[int]) -> bool:
        """An op on a stage mesh reading nothing (`pd_op.full`): in a PIR program it makes
        a value for the op that reads it (L2 decay's coefficient for its `scale`)."""
        block = self.index.global_block
        return self.a.op_mesh[0][i] in stage_set and all(v < 0 for v in block.inputs(i))

    def _place_constants(self, constants: list[int]) -> None:
        """Each constant where its first reader runs (Paddle makes it for that op, after
        its completion moved the layers), else where it is."""
        a, block = self.a, self.index.global_block
        made = {v: i for i in constants for v in block.outputs(i) if v >= 0}
        reader: dict[int, int] = {}
        for j in range(block.n_ops):
            for v in block.inputs(j):
                if v in made and made[v] not in reader:
                    reader[made[v]] = j
        for i in constants:
            mesh = a.op_mesh[0][reader.get(i, i)]
            a.place_op(0, i, mesh if mesh != NO_MESH else None, 0)
            for v in block.outputs(i):
                a.set_var(v, a.op_mesh[0][i], 0)

    def _states_follow(self, i: int, p: int, mesh: int, chunk: int) -> None:
        """A PIR update op writes its states as new values (a legacy one writes them in
        place: they follow it as its outputs), so the states it reads, named after its
        parameter (`P_beta1_pow_acc_0`), follow the parameter: the ops that update them
        apart (Adamax's `scale_` of its beta1 power) run where it went."""
        index = self.index
        prefix = index.var_name_bytes(p) + b"_"
        for v in index.global_block.inputs(i):
            if v >= 0 and v != p and index.var_name_bytes(v).startswith(prefix):
                self.a.set_var(v, mesh, chunk)

    def _pir_clip_source(self, i: int, own: int, stage_set: set[int]) -> tuple[int, int]:
        """A PIR program says where each op runs, and moves a value read elsewhere with an
        explicit reshard (which the reader reads through: the value is then on its
        source's mesh). So an op on rank 0's stage mesh reading values of several stages
        stays there (the global norm: Paddle's `ClipGradByGlobalNorm._pir_clip` reshards
        every squared norm to the parameters' mesh holding rank 0); another follows an
        input it reads on its own mesh (a gradient, wherever its layer went), and without
        one stays too."""
        a, index = self.a, self.index
        inputs = [v for v in index.global_block.inputs(i) if v >= 0]
        several = len({index.var_mesh[v] for v in inputs} & stage_set) > 1
        if several and 0 in index.meshes[own].process_ids:
            return own, 0
        for v in inputs:
            if index.var_mesh[v] == own:
                return a.var_mesh[v], a.copied_chunk(index, v)
        return own, 0


def write(index: ProgramIndex, a: Assignment) -> ApplyResult:
    """The one write pass: rewrite the ops and variables whose mesh or chunk id changed,
    then make `index` describe the written program (it now holds the new placements)."""
    program = index.program
    n_ops = n_vars = done = 0
    for bi, block in zip(index.blocks, program.blocks):
        n_ops += rewrite_ops(block, _op_edits(index, a, bi.idx, done))
        done += bi.n_ops
        progress.advance(done)
        n_vars += rewrite_vars(block, _var_edits(index, a, bi.var_base, len(bi.vars)))
    _adopt(index, a)
    return ApplyResult(ops_changed=n_ops, vars_changed=n_vars, warnings=tuple(a.warnings))


def _adopt(index: ProgramIndex, a: Assignment) -> None:
    """The index takes the assignment's placements: exactly what `write` put in the bytes
    (the tests re-read written programs to check that)."""
    for bi in index.blocks:
        bi.op_mesh = a.op_mesh[bi.idx]
        bi.ops.chunk = a.op_chunk[bi.idx]
        n = len(bi.vars)
        bi.vars.chunk = a.var_chunk[bi.var_base : bi.var_base + n]
    index.var_mesh = a.var_mesh
    index.var_chunks = a.var_chunk


def _op_edits(
    index: ProgramIndex, a: Assignment, b: int, done: int = 0
) -> Iterator[tuple[int, bytes | None, int]]:
    """The (op, raw mesh or None, chunk id) edits of block `b`; progress is reported as
    `done` (the ops of earlier blocks) plus the op reached, every _REPORT_EVERY edits."""
    bi = index.blocks[b]
    old_chunk, new_mesh, new_chunk, moved = bi.ops.chunk, a.op_mesh[b], a.op_chunk[b], a.moved[b]
    raw = index.mesh_raw

    def edits(lo: int) -> list[tuple[int, bytes | None, int]]:
        hi = lo + _SPAN
        return [
            (i, raw[m] if to else None, c)
            for i, to, m, c, was in zip(
                range(lo, hi), moved[lo:hi], new_mesh[lo:hi], new_chunk[lo:hi], old_chunk[lo:hi]
            )
            if to or c != was
        ]

    def reported(batch: list[tuple[int, bytes | None, int]]) -> list[tuple[int, bytes | None, int]]:
        progress.advance(done + batch[0][0])
        return batch

    found = chain.from_iterable(map(edits, range(0, bi.n_ops, _SPAN)))
    return _batched(found, _REPORT_EVERY, reported)


_REPORT_EVERY = 1024  # ops rewritten between progress reports
_SPAN = 4096  # ops or variables whose edits are found at once


def _var_edits(
    index: ProgramIndex, a: Assignment, base: int, n: int
) -> Iterator[tuple[int, bytes | None, int | None]]:
    """The (variable of the block, raw mesh or None, chunk id or None) edits of the block
    whose variables start at `base`: each value that changed to one (a mesh, a chunk id of
    0 or more), None for the other."""
    raw = index.mesh_raw
    new_mesh, old_mesh = a.var_mesh, index.var_mesh
    new_chunk, old_chunk = a.var_chunk, index.var_chunks
    end = base + n

    def edits(lo: int) -> list[tuple[int, bytes | None, int | None]]:
        hi = min(lo + _SPAN, end)  # the block's own variables only
        return [
            (
                v - base,
                raw[m] if m != om and m >= 0 else None,
                c if c != oc and c >= 0 else None,
            )
            for v, m, om, c, oc in zip(
                range(lo, hi), new_mesh[lo:hi], old_mesh[lo:hi], new_chunk[lo:hi], old_chunk[lo:hi]
            )
            if m != om or c != oc
        ]

    return chain.from_iterable(map(edits, range(base, end, _SPAN)))


def _batched(items: Iterator[T], size: int, each: Callable[[list[T]], list[T]]) -> Iterator[T]:
    """The items, `each` called on every batch of `size` of them as it is taken (progress),
    chained: they pass through C only (islice, chain; no generator frame per item), a
    batch's worth of them held at a time."""
    batches = iter(lambda: list(islice(items, size)), [])
    return chain.from_iterable(map(each, batches))
