"""Verify: check an annotated VPP program against numbered rules; collect every violation.

Each rule has a stable id, listed in `RULES` (and in the README). `verify`
returns data, one `Violation` per problem, never stops at the first, and runs
in one linear pass per rule family. `convert` runs the same checks on its own
result before writing and never writes a program that fails them.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from itertools import chain, repeat
from operator import sub as minus

from vppctl import fields
from vppctl.backward import ForwardOps
from vppctl.fields import NO_VAR
from vppctl.flow import first_forward_writers
from vppctl.index import ProgramIndex, loss_op
from vppctl.layers import LayerSet
from vppctl.mesh import NO_MESH, MeshId
from vppctl.plan import Placement, place, virtual_stage
from vppctl.roles import BACKWARD, FORWARD_ROLES, LOSS_GRAD, OPTIMIZE, is_backward, is_forward

RULES: dict[str, str] = {
    "V001": "every op in every block has a process mesh and a chunk id",
    "V002": "every chunk id lies in [0, vpp)",
    "V003": "every op's mesh is a stage mesh (a global mesh only for optimizer and other "
    "non-forward, non-backward ops)",
    "V004": "all ops of a layer share one stage and one chunk",
    "V005": "every layer lies in exactly one segment and every (stage, chunk) holds a layer",
    "V006": "segment k sits on the stage and chunk the placement gives (loop: k % pp, k // pp)",
    "V007": "forward data flow never runs backwards through the virtual stages",
    "V008": "every grad op sits on its forward op's mesh and chunk (the loss-grad op on the "
    "loss op's)",
    "V009": "every sum/grad_add op sits on the mesh and chunk of the nearest earlier backward "
    "op that writes one of its inputs",
    "V010": "every optimizer op with a Param input sits on its parameter's mesh",
    "V011": "every variable first written by a forward or backward op has that op's mesh and "
    "chunk (a sum/grad_add output: its forward variable's)",
    "V012": "the pipeline plan recorded in the program agrees with the ops",
    "V013": "every variable an op names is declared in its block or an ancestor",
    "V014": "every sub_block attribute names an existing later block, without cycles",
    "V015": "the program has the stage and chunk counts asked for (--pp, --vpp, the recorded plan)",
}


class Cause(str, Enum):
    """Why a rule failed, for programs (the message is for people and may be reworded)."""

    NO_MESH = "no_mesh"  # an op without a process mesh
    NO_CHUNK = "no_chunk"  # an op without a chunk id
    CHUNK_OUT_OF_RANGE = "chunk_out_of_range"
    NOT_STAGE_MESH = "not_stage_mesh"
    LAYER_SPLIT = "layer_split"  # a layer's ops on more than one (stage, chunk)
    LAYER_OFF_STAGE = "layer_off_stage"  # a layer not on a stage mesh
    LAYERS_NOT_FOUND = "layers_not_found"
    SEGMENT_TWICE = "segment_twice"  # one (stage, chunk) holds two runs of layers
    EMPTY_SEGMENT = "empty_segment"
    SEGMENT_MISPLACED = "segment_misplaced"
    BACKWARD_FLOW = "backward_flow"  # forward data flow runs to an earlier virtual stage
    GRAD_MISPLACED = "grad_misplaced"
    SUM_MISPLACED = "sum_misplaced"
    UPDATE_MISPLACED = "update_misplaced"
    VAR_MISPLACED = "var_misplaced"  # a variable not where its first writer is
    PLAN_MISMATCH = "plan_mismatch"
    PLAN_CORRUPT = "plan_corrupt"
    UNDECLARED_VAR = "undeclared_var"
    DUPLICATE_VAR = "duplicate_var"
    BAD_SUB_BLOCK = "bad_sub_block"
    COUNT_MISMATCH = "count_mismatch"  # stage or chunk counts differ from those asked for


@dataclass(frozen=True)
class Violation:
    rule: str
    block: int
    op: int  # -1 when the violation is not about one op
    type: str
    message: str
    cause: Cause


@dataclass(frozen=True)
class Expectation:
    """What the program is checked against (from options, the recorded plan, or the program)."""

    pp: int
    vpp: int
    placement: Placement
    stage_mesh_ids: tuple[MeshId, ...]  # in stage order
    global_mesh_ids: tuple[MeshId, ...]
    layers: LayerSet | None
    plan_segments: tuple[tuple[int, int, tuple[str, ...]], ...] | None = (
        None  # (stage, chunk, layers)
    )


GRAD_SUMS = (b"sum", b"grad_add")


class _Checker:
    def __init__(self, index: ProgramIndex, expect: Expectation) -> None:
        self.index, self.expect = index, expect
        self.out: list[Violation] = []
        self.stage_of = {m: s for s, m in enumerate(expect.stage_mesh_ids)}

    def add(self, rule: str, cause: Cause, block: int, op: int, message: str) -> None:
        t = self.index.op_type(block, op) if op >= 0 else ""
        self.out.append(Violation(rule, block, op, t, message, cause))

    def op_vstage(self, op: int) -> int | None:
        """Virtual stage of a global-block op from its mesh and chunk, if it has one."""
        stage = self.stage_of.get(self.index.global_block.op_mesh[op])
        if stage is None:
            return None
        chunk = self.index.global_block.ops.chunk[op]
        if not 0 <= chunk < self.expect.vpp:
            return None
        return virtual_stage(stage, chunk, self.expect.pp, self.expect.placement)

    def mesh_str(self, mesh: int) -> str:
        if mesh == NO_MESH:
            return "no mesh"
        m = self.index.meshes[mesh]
        # Meshes with the same ids but different shapes differ: show any unusual shape.
        flat = m.shape == (len(m.process_ids),)
        return str(m) if flat else f"{m} (shape {list(m.shape)})"


def verify(index: ProgramIndex, expect: Expectation) -> list[Violation]:
    """Every violation of RULES in `index` (empty: the program is valid)."""
    c = _Checker(index, expect)
    _check_structure(c)
    _check_placements(c)
    if expect.layers is not None:
        segments = _check_layers(c, expect.layers)
        if segments is not None:
            _check_plan(c, segments)
    _check_forward_flow(c)
    _check_backward(c)
    _check_optimizer(c)
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
                        "V014",
                        Cause.BAD_SUB_BLOCK,
                        bi.idx,
                        op,
                        f"sub_block {sub} does not exist or is not a "
                        f"later block (the program has {len(index.blocks)} blocks)",
                    )
    for problem in index.problems:
        c.add("V013", Cause.DUPLICATE_VAR, -1, -1, problem)


def _undeclared(c: _Checker, b: int) -> None:
    bi = c.index.blocks[b]
    o = bi.ops
    for op in range(bi.n_ops):
        if (
            NO_VAR in o.in_var[o.in_off[op] : o.in_off[op + 1]]
            or NO_VAR in o.out_var[o.out_off[op] : o.out_off[op + 1]]
        ):
            c.add(
                "V013",
                Cause.UNDECLARED_VAR,
                b,
                op,
                "names a variable that is not declared in its block or an ancestor",
            )


def _check_placements(c: _Checker) -> None:
    """V001, V002, V003 over every op of every block."""
    vpp = c.expect.vpp
    stage_set = set(c.expect.stage_mesh_ids)
    global_set = set(c.expect.global_mesh_ids)
    for bi in c.index.blocks:
        roles, chunks, meshes = bi.ops.role, bi.ops.chunk, bi.op_mesh
        for op in range(bi.n_ops):
            mesh, chunk = meshes[op], chunks[op]
            if mesh == NO_MESH:
                c.add("V001", Cause.NO_MESH, bi.idx, op, "has no process mesh")
            elif chunk == -1:
                c.add("V001", Cause.NO_CHUNK, bi.idx, op, "has no chunk id")
            elif not 0 <= chunk < vpp:
                c.add(
                    "V002",
                    Cause.CHUNK_OUT_OF_RANGE,
                    bi.idx,
                    op,
                    f"chunk id {chunk} is outside [0, {vpp})",
                )
            if mesh != NO_MESH and mesh not in stage_set:
                role = roles[op]
                may_be_global = not is_forward(role) and not is_backward(role)
                if not (mesh in global_set and may_be_global):
                    c.add(
                        "V003",
                        Cause.NOT_STAGE_MESH,
                        bi.idx,
                        op,
                        f"mesh {c.mesh_str(mesh)} is not a stage mesh",
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
                    "V004",
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
            "V005",
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
                "V005",
                Cause.SEGMENT_TWICE,
                0,
                first.first,
                f"layers of stage {stage} chunk {chunk} form two "
                f"segments (again from layer {first.name}); a segment is one run of layers",
            )
        seen.setdefault((stage, chunk), r)
    if exp.pp * exp.vpp > len(layers):  # listing every empty pair could run to millions
        c.add(
            "V005",
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
                    c.add(
                        "V005", Cause.EMPTY_SEGMENT, 0, -1, f"stage {s} chunk {ch} holds no layer"
                    )
    for k, (stage, chunk, ks) in enumerate(runs[: exp.pp * exp.vpp]):
        want = place(k, exp.pp, exp.placement)
        if (stage, chunk) != want:
            c.add(
                "V006",
                Cause.SEGMENT_MISPLACED,
                0,
                layers.layers[ks[0]].first,
                f"segment {k} (from layer {layers.layers[ks[0]].name}) is on stage {stage} "
                f"chunk {chunk}, but {exp.placement} placement puts it on stage {want[0]} "
                f"chunk {want[1]}",
            )
    return runs


def _check_plan(c: _Checker, runs: list[tuple[int, int, list[int]]]) -> None:
    """V012: the recorded plan's segments are the segments the ops form."""
    recorded = c.expect.plan_segments
    layers = c.expect.layers
    if recorded is None or layers is None:
        return
    actual = [(s, ch, tuple(layers.layers[k].name for k in ks)) for s, ch, ks in runs]
    if len(recorded) != len(actual):
        c.add(
            "V012",
            Cause.PLAN_MISMATCH,
            0,
            -1,
            f"the plan records {len(recorded)} segments but the ops form {len(actual)}",
        )
        return
    for k, (want, got) in enumerate(zip(recorded, actual)):
        if want != got:
            c.add(
                "V012",
                Cause.PLAN_MISMATCH,
                0,
                -1,
                f"segment {k}: the plan records stage {want[0]} chunk "
                f"{want[1]} with {_names(want[2])}, the ops have stage {got[0]} chunk "
                f"{got[1]} with {_names(got[2])}",
            )


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
                    "V007",
                    Cause.BACKWARD_FLOW,
                    0,
                    op,
                    f"reads {c.index.var_name(v)} from "
                    f"{c.index.op_label(0, p)} on virtual stage {theirs}, later than its own "
                    f"virtual stage {mine}",
                )
                break


def _check_backward(c: _Checker) -> None:
    """V008 and V009 over the global block's backward ops."""
    index = c.index
    block = index.global_block
    roles, types = block.ops.role, block.ops.type
    meshes, chunks = block.op_mesh, block.ops.chunk
    forward = ForwardOps(index)
    loss = loss_op(index)
    last_writer: dict[int, int] = {}
    for op in range(block.n_ops):
        role = roles[op]
        if not role & BACKWARD:  # is_backward, inline: once per op
            continue
        here = (meshes[op], chunks[op])
        if types[op] in GRAD_SUMS:
            src = max((last_writer.get(v, -1) for v in block.inputs(op)), default=-1)
            if src >= 0 and (meshes[src], chunks[src]) != here:
                c.add(
                    "V009",
                    Cause.SUM_MISPLACED,
                    0,
                    op,
                    f"is on {c.mesh_str(here[0])} chunk {here[1]} but its "
                    f"nearest earlier producer {index.op_label(0, src)} is on "
                    f"{c.mesh_str(meshes[src])} chunk {chunks[src]}",
                )
        else:
            f = loss if role == LOSS_GRAD else forward.of(op)
            if f is not None and (meshes[f], chunks[f]) != here:
                c.add(
                    "V008",
                    Cause.GRAD_MISPLACED,
                    0,
                    op,
                    f"is on {c.mesh_str(here[0])} chunk {here[1]} but its "
                    f"forward op {index.op_label(0, f)} is on {c.mesh_str(meshes[f])} "
                    f"chunk {chunks[f]}",
                )
        for v in block.outputs(op):
            last_writer[v] = op


def _check_optimizer(c: _Checker) -> None:
    """V010: parameter updates run where the parameter lives."""
    index = c.index
    block = index.global_block
    for op, p in block.ops.param.items():
        if p < 0 or not block.ops.role[op] & OPTIMIZE:
            continue
        if block.op_mesh[op] != index.var_mesh[p]:
            c.add(
                "V010",
                Cause.UPDATE_MISPLACED,
                0,
                op,
                f"updates {index.var_name(p)} (on "
                f"{c.mesh_str(index.var_mesh[p])}) from {c.mesh_str(block.op_mesh[op])}",
            )


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
    first_read = _first_positions(o.in_var, o.in_off)
    _read_in_sub_blocks(index, first_read)
    roles, types = o.role, o.type
    meshes, chunks = block.op_mesh, o.chunk
    never = block.n_ops
    for v, op in _first_positions(o.out_var, o.out_off).items():
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
                "V011",
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
    return got[0] == want[0] and fields.NO_CHUNK_NAME in index.var_name_bytes(v)
