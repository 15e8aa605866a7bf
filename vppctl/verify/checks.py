"""Checks: an annotated VPP program against the numbered rules; every violation collected.

Each rule has a stable id (`vppctl.verify.rules.RULES`, and docs/verify.md). `verify`
returns data, one `Violation` per problem, never stops at the first, and runs
in one linear pass per rule family. `convert` runs the same checks on its own
result before writing and never writes a program that fails them.
"""

from __future__ import annotations

from array import array
from collections.abc import Collection, Sequence
from itertools import compress
from operator import lt

from vppctl import progress
from vppctl.engine import (
    ForwardOps,
    GradientFlow,
    ProgramIndex,
    first_forward_writers,
    loss_op,
    recomputed_ops,
)
from vppctl.mesh import NO_MESH, mesh_text, wide_meshes
from vppctl.program import (
    BACKWARD,
    FORWARD_ROLES,
    GRAD_SUMS,
    LOSS_GRAD,
    NO_CHUNK_NAME,
    NO_VAR,
    OPTIMIZE,
    decode_mesh,
    is_backward,
    is_forward,
    op_arguments,
    tensor_mesh_conflicts,
)
from vppctl.verify.checker import Checker
from vppctl.verify.rules import Cause, Expectation, Violation
from vppctl.verify.segments import check_layers, check_plan, check_plan_record


def verify(index: ProgramIndex, expect: Expectation) -> list[Violation]:
    """Every violation of RULES in `index` (empty: the program is valid)."""
    c = Checker(index, expect)
    progress.phase("verifying", CHECKS)
    _check_structure(c)
    _check_placements(c)
    _check_sub_blocks(c)
    _check_tensor_meshes(c)
    progress.advance(4)
    if expect.recorded is not None:
        check_plan_record(c, expect.recorded)
    if expect.layers is not None:
        segments = check_layers(c, expect.layers)
        if segments is not None:
            check_plan(c, segments)
    progress.advance(5)
    _check_forward_flow(c)
    _check_backward(c)
    progress.advance(7)
    _check_recomputed(c)
    _check_optimizer(c)
    _check_parameters(c)
    progress.advance(10)
    _check_variables(c)
    progress.advance(CHECKS)
    return c.out


# The checks `verify` runs, as its progress counts them (the layers and the plan's as one).
CHECKS = 11


def _check_structure(c: Checker) -> None:
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


def _undeclared(c: Checker, b: int) -> None:
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


def _check_placements(c: Checker) -> None:
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
                if not c.expect.pir:  # PIR_RULES
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


def _wide_meshes(c: Checker) -> set[int]:
    """The meshes non-forward, non-backward ops may run on besides the stage meshes (Paddle's
    update completion puts the learning rate and global-norm clipping on an earlier
    program's world and keeps them in its VPP answer)."""
    return wide_meshes(c.index.meshes, c.expect.stage_mesh_ids) | set(c.expect.global_mesh_ids)


_ANY = -2  # a running op's mesh or chunk that V001/V002 report: not compared


def _check_sub_blocks(c: Checker) -> None:
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


def _check_tensor_meshes(c: Checker) -> None:
    """V017: rule 6, an op's per-input/output tensor dist attrs are on the op's mesh
    (Paddle's `OperatorDistAttr.process_mesh` setter sets them all)."""
    index = c.index
    keys = [m.key for m in index.meshes]
    wide = _wide_meshes(c) if c.expect.pir else set()
    for b in sorted(c.executed):
        bi = index.blocks[b]
        for op, entry, raw in tensor_mesh_conflicts(index.program.blocks[b], bi.op_mesh, keys):
            role = bi.ops.role[op]
            if bi.op_mesh[op] in wide and not (is_forward(role) or is_backward(role)):
                continue  # PIR_RULES
            c.add(
                Cause.TENSOR_MESH_MISMATCH,
                b,
                op,
                f"its {entry} has a tensor dist attr on {mesh_text(decode_mesh(raw))}, "
                f"but the op is on {c.mesh_str(index.blocks[b].op_mesh[op])}",
            )


def _check_forward_flow(c: Checker) -> None:
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


def _check_backward(c: Checker) -> None:
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
    # The latest backward op writing each variable, one 4-byte entry per variable (ids
    # below 0, names that resolve to no variable, in a dict: they are few).
    last_writer = array("i", [-1]) * index.n_vars
    unresolved: dict[int, int] = {}

    def writer(v: int) -> int:
        return last_writer[v] if v >= 0 else unresolved.get(v, -1)

    for op in range(block.n_ops):
        role = roles[op]
        if not role & BACKWARD:  # is_backward, inline: once per op
            continue
        if types[op] in GRAD_SUMS:
            here = (meshes[op], chunks[op])
            src = max(map(writer, block.inputs(op)), default=-1)
            if src >= 0 and (meshes[src], chunks[src]) != here:
                c.add(
                    Cause.SUM_MISPLACED,
                    0,
                    op,
                    f"is on {c.placed(*here)} but its nearest earlier producer "
                    f"{index.op_label(0, src)} is on {c.placed(meshes[src], chunks[src])}",
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
        for v in out_var[out_off[op] : out_off[op + 1]]:
            if v >= 0:
                last_writer[v] = op
            else:
                unresolved[v] = op


def _check_grad(
    c: Checker, op: int, claimed: int | None, f: int | None, flow: GradientFlow
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


def _grad_misplaced(c: Checker, op: int, f: int) -> None:
    c.add(
        Cause.GRAD_MISPLACED,
        0,
        op,
        f"is on {c.where(0, op)}, its forward {c.index.op_label(0, f)} on {c.where(0, f)}",
    )


def _check_recomputed(c: Checker) -> None:
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


def _check_optimizer(c: Checker) -> None:
    """V010: parameter updates run where the parameter lives (rule 10: its mesh and chunk).

    Paddle leaves optimizer chunk ids at 0, so in a program without a recorded vppctl
    plan (Paddle's own answers) chunk 0 is accepted too. Chunk ids V001 and V002
    reject are left to them.
    """
    index = c.index
    block = index.global_block
    vppctl_plan = c.expect.recorded is not None  # a plan vppctl recorded in the program
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


def _check_parameters(c: Checker) -> None:
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


def _param_at(c: Checker, v: int, op: int) -> None:
    index = c.index
    block = index.global_block
    want = (block.op_mesh[op], block.ops.chunk[op])
    if want[0] == NO_MESH or not c.valid_chunk(want[1]):
        return
    got = (index.var_mesh[v], index.var_chunks[v])
    if c.expect.pir:  # PIR_RULES: a value has no chunk id
        got, want = (got[0], -1), (want[0], -1)
    if got != want:
        c.add(
            Cause.PARAM_MISPLACED,
            0,
            op,
            f"is the first forward op to read parameter {index.var_name(v)}, which is on "
            f"{_place(c, *got)}, not {_place(c, *want)}",
        )


def _place(c: Checker, mesh: int, chunk: int) -> str:
    """A variable's placement as messages show it: `[1] chunk 0`, or `[1]` when only meshes
    are compared (a PIR value has no chunk id)."""
    return c.mesh_str(mesh) if c.expect.pir else f"{c.mesh_str(mesh)} chunk {chunk}"


def _first_forward_readers(c: Checker, wanted: set[int]) -> dict[int, int]:
    """For the variables `wanted`, the first global-block forward op that reads each."""
    block = c.index.global_block
    out: dict[int, int] = {}
    for op in block.forward_ops:
        for v in block.inputs(op):
            if v in wanted and v not in out:
                out[v] = op
    return out


def _check_variables(c: Checker) -> None:
    """V011: variables first written (before any read) by forward and backward ops.

    A variable is first written by op k when k is the first op listing it as an
    output and no op up to k (k's own inputs, and any sub-block of an op up to k,
    which runs at that op) reads it. An optimizer op's outputs are never looked at; the
    violations are reported latest-listed variable first (by where the ops' outputs name
    each last), the order V011 has always used. The variables are found from the first
    positions in a few C calls, and only those off their writer's place (or a sum's
    output) are judged one by one.
    """
    index = c.index
    block = index.global_block
    o = block.ops
    read_at, written_at = c.first_read().first, c.first_written().first
    roles, types, out_var = o.role, o.type, o.out_var
    meshes, chunks = block.op_mesh, o.chunk
    var_mesh, var_chunks = index.var_mesh, index.var_chunks
    pir = c.expect.pir
    # The variables written before any read, found in C: read as unsigned, the entry of
    # none (-1) is the largest, so that `written < read` says written and then read later
    # or never (a read up to the writer, its own inputs included, is no first write).
    first = compress(range(len(written_at)), map(lt, _unsigned(written_at), _unsigned(read_at)))
    # Of those, the ones whose writer's placement differs from theirs (the rule's usual
    # comparison, one step each), and every one a sum op writes (its own comparison):
    # each then judged below as the rule says.
    sums = set(compress(range(block.n_ops), map(GRAD_SUMS.__contains__, types)))
    if pir:
        odd = [v for v in first if var_mesh[v] != meshes[written_at[v]]]
    else:
        odd = [
            v
            for v in first
            if var_mesh[v] != meshes[op := written_at[v]]
            or var_chunks[v] != chunks[op]
            or op in sums
        ]
    found: dict[int, tuple[int, tuple[int, int], tuple[int, int]]] = {}
    for v in odd:
        op = written_at[v]
        role = roles[op]
        if not (role in FORWARD_ROLES or role & BACKWARD):
            continue  # an optimizer op's outputs are never looked at
        want = (meshes[op], chunks[op])
        got = (var_mesh[v], var_chunks[v])
        if pir:  # PIR_RULES: a value has no chunk id and is where its op computes it
            got, want = (got[0], -1), (want[0], -1)
        elif types[op] in GRAD_SUMS and role & BACKWARD:
            fwd = index.forward_var(v)
            if fwd is not None:
                want = (var_mesh[fwd], var_chunks[fwd])
        if got != want and not _no_chunk_ok(index, v, got, want):
            found[v] = (op, got, want)
    for v in _latest_listed_first(found, out_var):
        op, got, want = found[v]
        c.add(
            Cause.VAR_MISPLACED,
            0,
            op,
            f"writes {index.var_name(v)} first, but the variable is on "
            f"{_place(c, *got)}, not {_place(c, *want)}",
        )


def _unsigned(column: array[int]) -> memoryview:
    """A column of 4-byte ints read as unsigned (-1, none, the largest), in place: no copy
    (the verifier runs at a conversion's peak of memory)."""
    return memoryview(column).cast("B").cast("I")


def _latest_listed_first(wanted: Collection[int], var: Sequence[int]) -> list[int]:
    """`wanted`, latest-listed first: by where the column `var` names each last, from its
    end (one pass from the end, stopping once all are placed; none for a single one)."""
    if len(wanted) < 2:
        return list(wanted)
    order: dict[int, None] = {}
    for at in range(len(var) - 1, -1, -1):
        v = var[at]
        if v in wanted and v not in order:
            order[v] = None
            if len(order) == len(wanted):
                break
    return list(order)


def _no_chunk_ok(index: ProgramIndex, v: int, got: tuple[int, int], want: tuple[int, int]) -> bool:
    """Reader-queue variables never get a chunk id (Paddle's rule); only their mesh counts."""
    return got[0] == want[0] and NO_CHUNK_NAME in index.var_name_bytes(v)
