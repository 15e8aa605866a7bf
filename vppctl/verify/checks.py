"""Checks: an annotated VPP program against the numbered rules; every violation collected.

Each rule has a stable id (`vppctl.verify.rules.RULES`, and the README). `verify`
returns data, one `Violation` per problem, never stops at the first, and runs
in one linear pass per rule family. `convert` runs the same checks on its own
result before writing and never writes a program that fails them.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from itertools import chain, compress, repeat
from operator import sub as minus

from vppctl.choices import COST_KINDS, MODES, PLACEMENTS, SPLITS
from vppctl.engine import (
    GRAD_SUMS,
    ForwardOps,
    GradientFlow,
    LayerSet,
    ProgramIndex,
    first_forward_writers,
    loss_op,
    recomputed_ops,
)
from vppctl.mesh import NO_MESH, mesh_text, wide_meshes
from vppctl.plan import place, virtual_stage
from vppctl.program import (
    BACKWARD,
    FORWARD_ROLES,
    LOSS_GRAD,
    NO_CHUNK_NAME,
    NO_VAR,
    OPTIMIZE,
    RecordedPlan,
    decode_mesh,
    is_backward,
    is_forward,
    op_arguments,
    tensor_mesh_conflicts,
)
from vppctl.verify.rules import Cause, Expectation, Violation


class _Checker:
    def __init__(self, index: ProgramIndex, expect: Expectation) -> None:
        self.index, self.expect = index, expect
        self.out: list[Violation] = []
        self.stage_of = {m: s for s, m in enumerate(expect.stage_mesh_ids)}
        self.executed = executed_blocks(index)
        self._first_read: dict[int, int] | None = None
        self._first_written: dict[int, int] | None = None
        self._vstages: list[int | None] | None = None  # per global-block op, on first use

    def add(self, cause: Cause, block: int, op: int, message: str) -> None:
        t = self.index.op_type(block, op) if op >= 0 else ""
        self.out.append(Violation(cause, block, op, t, message))

    def op_vstage(self, op: int) -> int | None:
        """Virtual stage of a global-block op from its mesh and chunk, if it has one."""
        if self._vstages is None:
            # One entry per (mesh, chunk) pair the ops use: never more than the ops
            # (20,000 stage meshes times 4,096 chunks must not be a table).
            e, get = self.expect, self.stage_of.get
            block = self.index.global_block
            pairs = list(zip(block.op_mesh, block.ops.chunk))
            of: dict[tuple[int, int], int | None] = {}
            for m, chunk in set(pairs):
                s = get(m)
                if s is None or not 0 <= chunk < e.vpp:
                    of[m, chunk] = None
                else:
                    of[m, chunk] = virtual_stage(s, chunk, e.pp, e.placement)
            self._vstages = list(map(of.__getitem__, pairs))
        return self._vstages[op]

    def valid_chunk(self, chunk: int) -> bool:
        """A chunk id V001 and V002 accept (other rules leave the rest to them)."""
        return 0 <= chunk < self.expect.vpp

    def mesh_str(self, mesh: int) -> str:
        if mesh == NO_MESH:
            return "no mesh"
        return mesh_text(self.index.meshes[mesh])

    def where(self, block: int, op: int) -> str:
        """An op's placement as messages show it: `[1] chunk 0`."""
        bi = self.index.blocks[block]
        return f"{self.mesh_str(bi.op_mesh[op])} chunk {bi.ops.chunk[op]}"

    def first_read(self) -> dict[int, int]:
        """Variable -> the first global-block op that reads it, a sub-block's reads counted
        at the op running it (memoised: V011 and V018 share it)."""
        if self._first_read is None:
            o = self.index.global_block.ops
            self._first_read = _first_positions(o.in_var, o.in_off)
            _read_in_sub_blocks(self.index, self._first_read)
        return self._first_read

    def first_written(self) -> dict[int, int]:
        """Variable -> the first global-block op that lists it as an output (memoised)."""
        if self._first_written is None:
            o = self.index.global_block.ops
            self._first_written = _first_positions(o.out_var, o.out_off)
        return self._first_written


def executed_blocks(index: ProgramIndex) -> set[int]:
    """Block 0 and every block an op of an executed block names as its sub_block. Paddle
    runs no other block: the recompute pass's scratch block, which no op names, holds
    copies of forward ops that are never executed."""
    seen = {0}
    todo = [0]
    n = len(index.blocks)
    while todo:
        for subs in index.blocks[todo.pop()].ops.sub_blocks.values():
            for b in subs:
                if 0 <= b < n and b not in seen:
                    seen.add(b)
                    todo.append(b)
    return seen


def verify(index: ProgramIndex, expect: Expectation) -> list[Violation]:
    """Every violation of RULES in `index` (empty: the program is valid)."""
    c = _Checker(index, expect)
    _check_structure(c)
    _check_placements(c)
    _check_sub_blocks(c)
    _check_tensor_meshes(c)
    if expect.recorded is not None:
        _check_plan_record(c, expect.recorded)
    if expect.layers is not None:
        segments = _check_layers(c, expect.layers)
        if segments is not None:
            _check_plan(c, segments)
    _check_forward_flow(c)
    _check_backward(c)
    _check_recomputed(c)
    _check_optimizer(c)
    _check_parameters(c)
    _check_variables(c)
    return c.out


def _check_structure(c: _Checker) -> None:
    """V013 and V014."""
    index = c.index
    for bi in index.blocks:
        for col in (bi.ops.in_var, bi.ops.out_var):
            if NO_VAR in col:
                _undeclared(c, bi.idx)
                break
        for op, subs in bi.ops.sub_blocks.items():
            for sub in subs:
                if not bi.idx < sub < len(index.blocks):
                    c.add(
                        Cause.BAD_SUB_BLOCK,
                        bi.idx,
                        op,
                        f"sub_block {sub} does not exist or is not a "
                        f"later block (the program has {len(index.blocks)} blocks)",
                    )
    for problem in index.problems:
        c.add(Cause.DUPLICATE_VAR, -1, -1, problem)


def _undeclared(c: _Checker, b: int) -> None:
    bi = c.index.blocks[b]
    o = bi.ops
    for op in range(bi.n_ops):
        if (
            NO_VAR in o.in_var[o.in_off[op] : o.in_off[op + 1]]
            or NO_VAR in o.out_var[o.out_off[op] : o.out_off[op + 1]]
        ) and not _only_reader_queues(c.index, b, op):
            c.add(
                Cause.UNDECLARED_VAR,
                b,
                op,
                "names a variable that is not declared in its block or an ancestor",
            )


def _only_reader_queues(index: ProgramIndex, b: int, op: int) -> bool:
    """Whether every undeclared name of an op is a reader queue: `DataLoader.from_generator`
    puts `lod_tensor_blocking_queue_N` in the Scope and declares it in no block, and Paddle
    accepts the program (its chunk-id step skips exactly these names)."""
    ins, outs = op_arguments(index.program.blocks[b], op)  # in the index's order
    bi = index.blocks[b]
    ids = (*bi.inputs(op), *bi.outputs(op))
    return all(NO_CHUNK_NAME in n for n, v in zip((*ins, *outs), ids) if v == NO_VAR)


def _check_placements(c: _Checker) -> None:
    """V001, V002, V003 over every op of every executed block."""
    vpp = c.expect.vpp
    stage_set = set(c.expect.stage_mesh_ids)
    wide = _wide_meshes(c)
    for bi in c.index.blocks:
        if bi.idx not in c.executed:
            continue
        roles, chunks, meshes = bi.ops.role, bi.ops.chunk, bi.op_mesh
        for op in range(bi.n_ops):
            mesh, chunk = meshes[op], chunks[op]
            if mesh == NO_MESH:
                c.add(Cause.NO_MESH, bi.idx, op, "has no process mesh")
            elif chunk == -1:
                c.add(Cause.NO_CHUNK, bi.idx, op, "has no chunk id")
            elif not 0 <= chunk < vpp:
                c.add(
                    Cause.CHUNK_OUT_OF_RANGE,
                    bi.idx,
                    op,
                    f"chunk id {chunk} is outside [0, {vpp})",
                )
            if mesh != NO_MESH and mesh not in stage_set:
                role = roles[op]
                may_be_wide = not is_forward(role) and not is_backward(role)
                if not (mesh in wide and may_be_wide):
                    c.add(
                        Cause.NOT_STAGE_MESH,
                        bi.idx,
                        op,
                        f"mesh {c.mesh_str(mesh)} is not a stage mesh",
                    )


def _wide_meshes(c: _Checker) -> set[int]:
    """The meshes non-forward, non-backward ops may run on besides the stage meshes (Paddle's
    update completion puts the learning rate and global-norm clipping on an earlier
    program's world and keeps them in its VPP answer)."""
    return wide_meshes(c.index.meshes, c.expect.stage_mesh_ids) | set(c.expect.global_mesh_ids)


_ANY = -2  # a running op's mesh or chunk that V001/V002 report: not compared


def _check_sub_blocks(c: _Checker) -> None:
    """V016: rule 8, sub-blocks inherit the mesh and chunk of the op that runs them.

    Each op of an executed sub-block is compared with the ops naming its block (a block
    two ops name may sit with either); the comparison is per level, so a nested
    block's op is compared with its op in the enclosing sub-block, itself compared
    with its own. What V001 and V002 report (no mesh, no valid chunk, on either side) is
    not compared.
    """
    index = c.index
    runners: dict[int, tuple[int, int]] = {}  # block -> the first op naming it
    places: dict[int, set[tuple[int, int]]] = {}  # block -> its runners' (mesh, chunk)
    for b in sorted(c.executed):
        bi = index.blocks[b]
        for op, subs in sorted(bi.ops.sub_blocks.items()):
            mesh, chunk = bi.op_mesh[op], bi.ops.chunk[op]
            where = (mesh if mesh != NO_MESH else _ANY, chunk if c.valid_chunk(chunk) else _ANY)
            for sub in subs:
                if sub in c.executed and sub != b:
                    runners.setdefault(sub, (b, op))
                    places.setdefault(sub, set()).add(where)
    for sub, (b, runner) in sorted(runners.items()):
        bi, allowed = index.blocks[sub], places[sub]
        for op in range(bi.n_ops):
            mesh, chunk = bi.op_mesh[op], bi.ops.chunk[op]
            if mesh == NO_MESH or not c.valid_chunk(chunk):
                continue  # V001, V002
            if not allowed.isdisjoint(((mesh, chunk), (_ANY, chunk), (mesh, _ANY), (_ANY, _ANY))):
                continue
            c.add(
                Cause.SUB_BLOCK_MISPLACED,
                sub,
                op,
                f"is on {c.where(sub, op)}, but its block {sub} runs at "
                f"{index.op_label(b, runner)} on {c.where(b, runner)}",
            )


def _check_tensor_meshes(c: _Checker) -> None:
    """V017: rule 6, an op's per-input/output tensor dist attrs are on the op's mesh
    (Paddle's `OperatorDistAttr.process_mesh` setter sets them all)."""
    index = c.index
    keys = [m.key for m in index.meshes]
    for b in sorted(c.executed):
        bi = index.blocks[b]
        for op, entry, raw in tensor_mesh_conflicts(index.program.blocks[b], bi.op_mesh, keys):
            c.add(
                Cause.TENSOR_MESH_MISMATCH,
                b,
                op,
                f"its {entry} has a tensor dist attr on {mesh_text(decode_mesh(raw))}, "
                f"but the op is on {c.mesh_str(index.blocks[b].op_mesh[op])}",
            )


def _check_layers(c: _Checker, layers: LayerSet) -> list[tuple[int, int, list[int]]] | None:
    """V004, V005, V006: returns the segments found, as (stage, chunk, layer indices)."""
    block = c.index.global_block
    meshes, chunks = block.op_mesh, block.ops.chunk
    places: list[tuple[int, int] | None] = []
    for k, layer in enumerate(layers.layers):
        first = next(i for i in range(layer.first, layer.last + 1) if layers.op_layer[i] == k)
        where = (meshes[first], chunks[first])
        for i in range(first, layer.last + 1):
            if layers.op_layer[i] == k and (meshes[i], chunks[i]) != where:
                c.add(
                    Cause.LAYER_SPLIT,
                    0,
                    i,
                    f"layer {layer.name} is on {c.mesh_str(where[0])} chunk "
                    f"{where[1]} but this op is on {c.mesh_str(meshes[i])} chunk {chunks[i]}",
                )
                break
        stage = c.stage_of.get(where[0])
        places.append((stage, where[1]) if stage is not None else None)
    if any(p is None for p in places):
        k = places.index(None)
        c.add(
            Cause.LAYER_OFF_STAGE,
            0,
            layers.layers[k].first,
            f"layer {layers.layers[k].name} is not on a stage mesh",
        )
        return None
    return _segments_of(c, layers, places)  # type: ignore[arg-type]


def _segments_of(
    c: _Checker, layers: LayerSet, places: Sequence[tuple[int, int]]
) -> list[tuple[int, int, list[int]]]:
    exp = c.expect
    runs: list[tuple[int, int, list[int]]] = []
    for k, p in enumerate(places):
        if runs and (runs[-1][0], runs[-1][1]) == p:
            runs[-1][2].append(k)
        else:
            runs.append((p[0], p[1], [k]))
    seen: dict[tuple[int, int], int] = {}
    for r, (stage, chunk, ks) in enumerate(runs):
        first = layers.layers[ks[0]]
        if (stage, chunk) in seen:
            c.add(
                Cause.SEGMENT_TWICE,
                0,
                first.first,
                f"layers of stage {stage} chunk {chunk} form two "
                f"segments (again from layer {first.name}); a segment is one run of layers",
            )
        seen.setdefault((stage, chunk), r)
    if exp.pp * exp.vpp > len(layers):  # listing every empty pair could run to millions
        c.add(
            Cause.EMPTY_SEGMENT,
            0,
            -1,
            f"{len(layers)} layers cannot fill pp*vpp = {exp.pp}*{exp.vpp} segments, "
            "so some (stage, chunk) holds no layer",
        )
    else:
        for s in range(exp.pp):
            for ch in range(exp.vpp):
                if (s, ch) not in seen:
                    c.add(Cause.EMPTY_SEGMENT, 0, -1, f"stage {s} chunk {ch} holds no layer")
    for k, (stage, chunk, ks) in enumerate(runs[: exp.pp * exp.vpp]):
        want = place(k, exp.pp, exp.placement)
        if (stage, chunk) != want:
            c.add(
                Cause.SEGMENT_MISPLACED,
                0,
                layers.layers[ks[0]].first,
                f"segment {k} (from layer {layers.layers[ks[0]].name}) is on stage {stage} "
                f"chunk {chunk}, but {exp.placement} placement puts it on stage {want[0]} "
                f"chunk {want[1]}",
            )
    return runs


def _check_plan(c: _Checker, runs: list[tuple[int, int, list[int]]]) -> None:
    """V012: the recorded plan's segments are the segments the ops form, on the stage
    meshes, over the op ranges the layers give."""
    recorded = c.expect.plan_segments
    layers = c.expect.layers
    if recorded is None or layers is None:
        return
    actual = [(s, ch, tuple(layers.layers[k].name for k in ks)) for s, ch, ks in runs]
    if len(recorded) != len(actual):
        c.add(
            Cause.PLAN_MISMATCH,
            0,
            -1,
            f"the plan records {len(recorded)} segments but the ops form {len(actual)}",
        )
        return
    for k, (want, got) in enumerate(zip(recorded, actual)):
        if want != got:
            c.add(
                Cause.PLAN_MISMATCH,
                0,
                -1,
                f"segment {k}: the plan records stage {want[0]} chunk "
                f"{want[1]} with {_names(want[2])}, the ops have stage {got[0]} chunk "
                f"{got[1]} with {_names(got[2])}",
            )
    if c.expect.recorded is not None:
        _check_plan_spans(c, c.expect.recorded, runs, layers)


def _check_plan_spans(
    c: _Checker, plan: RecordedPlan, runs: list[tuple[int, int, list[int]]], layers: LayerSet
) -> None:
    """V012: each recorded segment's mesh is its stage's, and its op range runs from its
    first layer's first op (segment 0: from op 0) to the next segment's (the last: to
    one past the last forward op)."""
    if len(plan.details) != len(runs):
        return  # reported above
    forward = c.index.global_block.forward_ops
    begins = [0, *(layers.layers[ks[0]].first for _, _, ks in runs[1:])]
    ends = [*begins[1:], 1 + forward[-1] if forward else 0]
    stages = c.expect.stage_mesh_ids
    for k, seg in enumerate(plan.details):
        if 0 <= seg.stage < len(stages):
            mesh = c.index.meshes[stages[seg.stage]]
            if seg.mesh is None or seg.mesh.key != mesh.key:
                shown = "no mesh" if seg.mesh is None else mesh_text(seg.mesh)
                c.add(
                    Cause.PLAN_MISMATCH,
                    0,
                    -1,
                    f"segment {k}: the plan records mesh {shown} for stage {seg.stage}, "
                    f"whose mesh is {mesh_text(mesh)}",
                )
        if (seg.op_begin, seg.op_end) != (begins[k], ends[k]):
            c.add(
                Cause.PLAN_MISMATCH,
                0,
                -1,
                f"segment {k}: the plan records ops [{seg.op_begin}, {seg.op_end}), but its "
                f"layers give [{begins[k]}, {ends[k]})",
            )


_KNOWN: dict[str, tuple[str, ...]] = {
    "placement": PLACEMENTS,
    "mode": MODES,
    "split": SPLITS,
    "cost": COST_KINDS,
}


def _check_plan_record(c: _Checker, plan: RecordedPlan) -> None:
    """V012, what a recorded plan says of itself: known names, pp*vpp segments in order,
    and layer counts the split allows."""
    values = {"placement": plan.placement, "mode": plan.mode, "split": plan.split}
    values["cost"] = plan.cost_kind
    for what, value in values.items():
        if value not in _KNOWN[what]:
            message = f"the plan records {what} {value!r}, not {'/'.join(_KNOWN[what])}"
            c.add(Cause.PLAN_CORRUPT, 0, -1, message)
    if plan.mode == "manual" and plan.vpp == 1:
        message = "the plan records manual mode (an interleaved input) with vpp 1"
        c.add(Cause.PLAN_MISMATCH, 0, -1, message)
    if plan.vpp and len(plan.details) != plan.pp * plan.vpp:
        message = (
            f"the plan records {len(plan.details)} segments, but pp*vpp = "
            f"{plan.pp}*{plan.vpp} = {plan.pp * plan.vpp}"
        )
        c.add(Cause.PLAN_MISMATCH, 0, -1, message)
        return
    for k, seg in enumerate(plan.details):
        if seg.virtual_stage != k or not 0 <= seg.cost < float("inf"):
            message = f"segment {k} records virtual stage {seg.virtual_stage} and cost {seg.cost}"
            c.add(Cause.PLAN_CORRUPT, 0, -1, message)
    problem = _split_problem(plan)
    if problem:
        c.add(Cause.PLAN_MISMATCH, 0, -1, problem)


def _split_problem(plan: RecordedPlan) -> str:
    """Why the recorded layer counts are not what the recorded split gives ("" if they are)."""
    counts = [len(s.layers) for s in plan.details]
    if plan.split == "uniform" and len(set(counts)) > 1:
        return f"the plan records the uniform split, but its segments hold {_counts(counts)} layers"
    if plan.split == "keep":
        by_stage: dict[int, list[int]] = {}
        for seg, n in zip(plan.details, counts):
            by_stage.setdefault(seg.stage, []).append(n)  # in virtual-stage order: by chunk
        for stage, ns in sorted(by_stage.items()):
            base, extra = divmod(sum(ns), len(ns))
            if ns != [base + 1] * extra + [base] * (len(ns) - extra):
                return (
                    f"the plan records the keep split, but stage {stage}'s chunks hold "
                    f"{_counts(ns)} layers (its {sum(ns)} layers dealt over {len(ns)} chunks, "
                    "earlier chunks taking the extras)"
                )
    return ""


def _counts(counts: Sequence[int]) -> str:
    shown = ", ".join(map(str, counts[:8]))
    return shown + (", ..." if len(counts) > 8 else "")


def _names(names: Sequence[str]) -> str:
    if len(names) <= 2:
        return ", ".join(names) or "no layers"
    return f"{names[0]} ... {names[-1]} ({len(names)})"


def _check_forward_flow(c: _Checker) -> None:
    """V007: a forward op never reads a variable made on a later virtual stage."""
    block = c.index.global_block
    producer = first_forward_writers(c.index)
    for op in block.forward_ops:
        mine = c.op_vstage(op)
        if mine is None:
            continue
        for v in block.inputs(op):
            p = producer.get(v, -1) if v >= 0 else -1
            if not 0 <= p < op:  # a variable written later is no flow into this op
                continue
            theirs = c.op_vstage(p)
            if theirs is not None and theirs > mine:
                c.add(
                    Cause.BACKWARD_FLOW,
                    0,
                    op,
                    f"reads {c.index.var_name(v)} from "
                    f"{c.index.op_label(0, p)} on virtual stage {theirs}, later than its own "
                    f"virtual stage {mine}",
                )
                break


def _check_backward(c: _Checker) -> None:
    """V008, V009, V019 and V020 over the global block's backward ops."""
    index = c.index
    block = index.global_block
    o = block.ops
    roles, types, ids = o.role, o.type, o.forward_op_id
    out_off, out_var = o.out_off, o.out_var
    meshes, chunks = block.op_mesh, o.chunk
    forward = ForwardOps(index)
    flow = GradientFlow(index)
    by_id, recomputed, differentiates = forward.by_id.get, forward.recomputed, flow.differentiates
    loss = loss_op(index)
    last_writer: dict[int, int] = {}
    for op in range(block.n_ops):
        role = roles[op]
        if not role & BACKWARD:  # is_backward, inline: once per op
            continue
        if types[op] in GRAD_SUMS:
            here = (meshes[op], chunks[op])
            src = max((last_writer.get(v, -1) for v in block.inputs(op)), default=-1)
            if src >= 0 and (meshes[src], chunks[src]) != here:
                c.add(
                    Cause.SUM_MISPLACED,
                    0,
                    op,
                    f"is on {c.mesh_str(here[0])} chunk {here[1]} but its "
                    f"nearest earlier producer {index.op_label(0, src)} is on "
                    f"{c.mesh_str(meshes[src])} chunk {chunks[src]}",
                )
        elif role == LOSS_GRAD:
            if loss is not None and (meshes[loss], chunks[loss]) != (meshes[op], chunks[op]):
                _grad_misplaced(c, op, loss)
        elif op not in recomputed:  # a recompute copy: V021 judges it, by its own pairing
            # The usual case, inline: the op's forward op (its forward_op_id, or inferred)
            # is one the data flow says it differentiates; one comparison.
            claimed = by_id(ids[op])
            f = claimed if claimed is not None else forward.of(op)
            if f is not None and differentiates(op, f):
                if meshes[f] != meshes[op] or chunks[f] != chunks[op]:
                    _grad_misplaced(c, op, f)
            else:
                _check_grad(c, op, claimed, f, flow)
        last_writer.update(dict.fromkeys(out_var[out_off[op] : out_off[op + 1]], op))


def _check_grad(
    c: _Checker, op: int, claimed: int | None, f: int | None, flow: GradientFlow
) -> None:
    """A grad op whose forward op (`claimed` by its forward_op_id, else the inferred `f`)
    is not one the data flow says it differentiates: V019 when the forward_op_id
    contradicts the data flow, V008 against `f` otherwise, and V020 against the forward
    ops the data flow names, where V008 does not already compare with one of them."""
    block = c.index.global_block
    meshes, chunks = block.op_mesh, block.ops.chunk
    here = (meshes[op], chunks[op])
    by_flow = flow.of(op)
    if claimed is not None and not flow.shares(op, claimed):
        c.add(
            Cause.FORWARD_LINK_CONTRADICTED,
            0,
            op,
            f"its forward_op_id names {c.index.op_label(0, claimed)}, which shares no "
            "variable (nor the gradient of one) with it",
        )
        f = None
    if f is not None and (meshes[f], chunks[f]) != here:
        _grad_misplaced(c, op, f)
    if by_flow and all((meshes[g], chunks[g]) != here for g in by_flow):
        g = by_flow[0]
        # With a forward_op_id naming another op, the grad op sits where its link says: the
        # input's link and its data flow disagree (an input problem, not a misplacement).
        linked = claimed is not None and claimed not in by_flow
        c.add(
            Cause.LINK_OFF_DATA_FLOW if linked else Cause.GRAD_OFF_DATA_FLOW,
            0,
            op,
            f"is on {c.where(0, op)}, but it differentiates {c.index.op_label(0, g)} (it reads "
            f"the gradient of its output and writes that of its input), on {c.where(0, g)}"
            + (
                f"; its forward_op_id names {c.index.op_label(0, claimed)} instead"
                if linked and claimed is not None
                else ""
            ),
        )


def _grad_misplaced(c: _Checker, op: int, f: int) -> None:
    c.add(
        Cause.GRAD_MISPLACED,
        0,
        op,
        f"is on {c.where(0, op)} but its forward op {c.index.op_label(0, f)} is on {c.where(0, f)}",
    )


def _check_recomputed(c: _Checker) -> None:
    """V021: a recomputed op runs where its forward op runs (Paddle's recompute pass gives
    each copy its forward op's mesh and chunk id)."""
    block = c.index.global_block
    meshes, chunks = block.op_mesh, block.ops.chunk
    for r, f in recomputed_ops(c.index).items():
        if (meshes[r], chunks[r]) != (meshes[f], chunks[f]):
            c.add(
                Cause.RECOMPUTE_MISPLACED,
                0,
                r,
                f"recomputes {c.index.op_label(0, f)}, which is on {c.where(0, f)}, but is on "
                f"{c.where(0, r)}",
            )


def _check_optimizer(c: _Checker) -> None:
    """V010: parameter updates run where the parameter lives (rule 10: its mesh and chunk).

    Paddle leaves optimizer chunk ids at 0, so in a program without a recorded vppctl
    plan (Paddle's own answers) chunk 0 is accepted too. Chunk ids V001 and V002
    reject are left to them.
    """
    index = c.index
    block = index.global_block
    vppctl_plan = c.expect.plan_segments is not None
    for op, p in block.ops.param.items():
        if p < 0 or not block.ops.role[op] & OPTIMIZE:
            continue
        if block.op_mesh[op] != index.var_mesh[p]:
            c.add(
                Cause.UPDATE_MISPLACED,
                0,
                op,
                f"updates {index.var_name(p)} (on "
                f"{c.mesh_str(index.var_mesh[p])}) from {c.mesh_str(block.op_mesh[op])}",
            )
            continue
        chunk, want = block.ops.chunk[op], max(index.var_chunks[p], 0)
        if c.valid_chunk(chunk) and chunk != want and (vppctl_plan or chunk != 0):
            c.add(
                Cause.UPDATE_OFF_CHUNK,
                0,
                op,
                f"updates {index.var_name(p)} (chunk {want}) from chunk {chunk}",
            )


def _check_parameters(c: _Checker) -> None:
    """V018: a parameter lives with the first forward op that reads it (rule 7: the first
    reader moves it and gives it its chunk). A tied weight read on two stages lives with
    the first reader; the later ones read it across stages. A parameter some op writes
    before anything reads it is placed by its writer instead (V011)."""
    index = c.index
    block = index.global_block
    roles = block.ops.role
    first, written = c.first_read(), c.first_written()
    never = block.n_ops
    ids = range(block.var_base, block.var_base + len(block.vars))
    params = compress(ids, block.vars.is_parameter)
    later: list[int] = []  # first read by an op that is not forward
    for v in params:
        op = first.get(v, -1)
        if op < 0 or written.get(v, never) < op:
            continue
        if is_forward(roles[op]):
            _param_at(c, v, op)
        else:
            later.append(v)
    if later:
        readers = _first_forward_readers(c, set(later))
        for v in later:
            if v in readers:
                _param_at(c, v, readers[v])


def _param_at(c: _Checker, v: int, op: int) -> None:
    index = c.index
    block = index.global_block
    want = (block.op_mesh[op], block.ops.chunk[op])
    if want[0] == NO_MESH or not c.valid_chunk(want[1]):
        return
    got = (index.var_mesh[v], index.var_chunks[v])
    if got != want:
        c.add(
            Cause.PARAM_MISPLACED,
            0,
            op,
            f"is the first forward op to read parameter {index.var_name(v)}, which is on "
            f"{c.mesh_str(got[0])} chunk {got[1]}, not {c.mesh_str(want[0])} chunk {want[1]}",
        )


def _first_forward_readers(c: _Checker, wanted: set[int]) -> dict[int, int]:
    """For the variables `wanted`, the first global-block forward op that reads each."""
    block = c.index.global_block
    out: dict[int, int] = {}
    for op in block.forward_ops:
        for v in block.inputs(op):
            if v in wanted and v not in out:
                out[v] = op
    return out


def _check_variables(c: _Checker) -> None:
    """V011: variables first written (before any read) by forward and backward ops.

    A variable is first written by op k when k is the first op listing it as an
    output and no op up to k (k's own inputs, and any sub-block of an op up to k,
    which runs at that op) reads it. The first positions are found with C-level
    dict building, so the Python loop runs once per written variable.
    """
    index = c.index
    block = index.global_block
    o = block.ops
    first_read = c.first_read()
    roles, types = o.role, o.type
    meshes, chunks = block.op_mesh, o.chunk
    never = block.n_ops
    for v, op in c.first_written().items():
        if v < 0 or first_read.get(v, never) <= op:
            continue
        role = roles[op]
        if not (role in FORWARD_ROLES or role & BACKWARD):
            continue
        want = (meshes[op], chunks[op])
        if types[op] in GRAD_SUMS and role & BACKWARD:
            fwd = index.forward_var(v)
            if fwd is not None:
                want = (index.var_mesh[fwd], index.var_chunks[fwd])
        got = (index.var_mesh[v], index.var_chunks[v])
        if got != want and not _no_chunk_ok(index, v, got, want):
            c.add(
                Cause.VAR_MISPLACED,
                0,
                op,
                f"writes {index.var_name(v)} first, but the variable is on "
                f"{c.mesh_str(got[0])} chunk {got[1]}, not {c.mesh_str(want[0])} chunk "
                f"{want[1]}",
            )


def _first_positions(var: array[int], off: array[int]) -> dict[int, int]:
    """Variable -> the first op that lists it, from flattened per-op argument columns."""
    counts = map(minus, off[1:], off[:-1])
    owners = list(chain.from_iterable(map(repeat, range(len(off) - 1), counts)))
    return dict(zip(reversed(var), reversed(owners)))  # the earliest op is written last


def _read_in_sub_blocks(index: ProgramIndex, first_read: dict[int, int]) -> None:
    """Count a sub-block's variables (nested ones included) as read at the earliest
    global-block op that runs it. Ops are taken in order and every block is walked
    once, by the first op reaching it: linear however the sub-blocks nest or are shared."""
    seen = {0}
    for op, subs in sorted(index.global_block.ops.sub_blocks.items()):
        todo = list(subs)  # a stack, not recursion: sub-blocks may nest thousands deep
        while todo:
            b = todo.pop()
            if not 0 <= b < len(index.blocks) or b in seen:
                continue
            seen.add(b)
            bi = index.blocks[b]
            for v in (*bi.ops.in_var, *bi.ops.out_var):
                if first_read.get(v, op) >= op:
                    first_read[v] = op
            for more in bi.ops.sub_blocks.values():
                todo.extend(more)


def _no_chunk_ok(index: ProgramIndex, v: int, got: tuple[int, int], want: tuple[int, int]) -> bool:
    """Reader-queue variables never get a chunk id (Paddle's rule); only their mesh counts."""
    return got[0] == want[0] and NO_CHUNK_NAME in index.var_name_bytes(v)
