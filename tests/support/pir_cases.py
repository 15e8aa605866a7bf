"""The PIR programs of tests/data/pir_reference/ (built by Paddle 3.3.1, see its README), and the
op-by-op comparison of vppctl's plan with Paddle's own PIR VPP completion.

`parity(plain, paddle_vpp, ...)` plans Paddle's plain-PP program with vppctl and reads
Paddle's VPP completion of the same model: for every forward op inside a layer, vppctl's
(stage, chunk) is the segment its plan gives the op's layer, Paddle's is the op's stage
mesh (as an index into the stage meshes) and chunk id. Ops are matched by layer path,
type and occurrence: Paddle's completion adds and removes only reshards, which the PIR
reader reads through. The grad ops of those ops are compared too (Paddle copies a
forward op's chunk id to its grad ops), and their recompute copies (its recompute pass
copies the forward op's placement).
"""

from __future__ import annotations

import lzma
from collections import Counter
from dataclasses import dataclass
from functools import cache

import paths

from vppctl.convert import ConvertOptions, Planned, plan_program
from vppctl.engine import ProgramIndex, build_index
from vppctl.engine.apply import assign
from vppctl.engine.backward import recompute_copies
from vppctl.plan import PlanOptions
from vppctl.planner.launch import LaunchCandidate
from vppctl.planner.pir import PirInput, held_layers
from vppctl.program import Program, kind, parse_program

REFERENCE = paths.PIR_REFERENCE
CASES = (
    "gpt_pp2_v2",
    "gpt_pp4_v2",
    "gpt_keep_pp2_v2",
    "llama_tp2_pp2_v2",
    "llama_amp_pp4_v2",
    "llama_rc_pp2_v2",
)
PP = dict(zip(CASES, (2, 4, 2, 2, 4, 2)))
LAYERS = dict(zip(CASES, (8, 8, 12, 4, 8, 4)))
# Forward layer ops and their grad ops the parity compares, per case (all are equal).
PARITY = {
    "gpt_pp2_v2": (56, 56),
    "gpt_pp4_v2": (56, 56),
    "gpt_keep_pp2_v2": (84, 84),
    "llama_tp2_pp2_v2": (176, 128),  # full_int_array and the like have no grad op
    "llama_amp_pp4_v2": (504, 256),  # nor do casts: a cast's gradient is a cast
    "llama_rc_pp2_v2": (176, 128),  # and 172 recompute copies (every layer op but the reshard)
}
RECOMPUTED = {"llama_rc_pp2_v2": 172}


def reference(case: str, kind: str) -> bytes:
    """A checked-in program: kind "plain" (vppctl's input) or "paddlevpp" (Paddle's VPP)."""
    return lzma.decompress((REFERENCE / f"{case}_{kind}.json.xz").read_bytes())


@cache
def program(case: str, kind: str) -> Program:
    """A checked-in program, read once (planning, verifying and inspecting change nothing)."""
    return parse_program(reference(case, kind), source=f"{case}_{kind}.json")


Place = tuple[int, int]  # (stage, chunk)
OpKey = tuple[bytes, bytes, int]  # (layer path, op type, occurrence)


@dataclass(frozen=True)
class Parity:
    forward: int  # forward layer ops compared
    backward: int  # their grad ops compared
    recomputed: int  # their recompute copies compared
    differ: tuple[tuple[OpKey, Place, Place | None], ...]  # (op, vppctl's, Paddle's)


def planned(
    plain: Program, vpp: int, split: str = "keep", seg_method: str | None = None
) -> Planned:
    plan = PlanOptions(vpp=vpp, split=split)  # type: ignore[arg-type]
    return plan_program(plain, ConvertOptions(plan=plan, seg_method=seg_method))


def launched(p: Planned, schedule: str, m: int) -> tuple[LaunchCandidate, PirInput]:
    """The candidate `plan` times for plan `p` run with `schedule` over `m` (`interleaved`
    at Megatron's default group size, pp), and what Paddle's completion reads from the
    program (`vpp_seg_method` the layer class): the inputs of the PIR strategy `plan`
    gives (`candidate_strategy`) and prints (`pir_paddle_settings`)."""
    plan = p.plan
    candidate = LaunchCandidate(
        schedule=schedule,  # type: ignore[arg-type]
        pp=plan.pp,
        vpp=plan.vpp,
        placement=plan.placement,
        micro_batches=m,
        group_size=plan.pp if schedule == "interleaved" else None,
        layers_per_segment=tuple(len(s.layers) for s in plan.segments),
        layer_class=plan.layer_class,
    )
    return candidate, PirInput(held_layers(p.facts.stages, plan.pp), plan.layer_class)


def parity(
    plain: Program,
    paddle_vpp: Program,
    vpp: int = 2,
    split: str = "keep",
    seg_method: str | None = None,
) -> Parity:
    ours = _vppctl_places(planned(plain, vpp, split, seg_method))
    theirs = _paddle_places(paddle_vpp, vpp)
    differ = []
    for key, place in ours.items():
        if theirs.get(key) != place:
            differ.append((key, place, theirs.get(key)))
    recomputed = sum(1 for k in ours if k[0].startswith(_COPY))
    forward = sum(1 for k in ours if not k[1].endswith(b"_grad") and not k[0].startswith(_COPY))
    return Parity(forward, len(ours) - forward - recomputed, recomputed, tuple(differ))


_COPY = b"recomputed "  # the key of a recompute copy: its forward op's, marked


def _vppctl_places(p: Planned) -> dict[OpKey, Place]:
    block = p.index.global_block
    segment = {name: (s.stage, s.chunk) for s in p.plan.segments for name in s.layers}
    out: dict[OpKey, Place] = {}
    of_op: dict[int, Place] = {}
    for op, key in _keys(block.ops.struct, block.ops.type, block.forward_ops):
        k = p.layers.op_layer[op]
        if k >= 0 and block.ops.struct[op] != b"/":
            out[key] = of_op[op] = segment[p.layers.names[k]]
    by_id = {block.ops.op_id[op]: op for op in of_op}
    for op, key in _grad_keys(p.index):
        f = by_id.get(block.ops.forward_op_id[op])
        if f is not None:
            out[key] = of_op[f]
    for _, key, f in _copy_keys(p.index):
        if f in of_op:
            out[key] = of_op[f]
    return out


def _paddle_places(paddle_vpp: Program, vpp: int) -> dict[OpKey, Place]:
    """Paddle's (stage, chunk) of each op; at vpp 1 its completion gives no chunk ids (-1):
    every op is in chunk 0."""
    index = build_index(paddle_vpp)
    stages, _ = index.stage_mesh_ids()
    stage_of = {m: s for s, m in enumerate(stages)}
    block = index.global_block
    out: dict[OpKey, Place] = {}
    ops = [*_keys(block.ops.struct, block.ops.type, block.forward_ops), *_grad_keys(index)]
    ops += [(op, key) for op, key, _ in _copy_keys(index)]
    for op, key in ops:
        chunk = block.ops.chunk[op] if vpp > 1 else max(block.ops.chunk[op], 0)
        out[key] = (stage_of.get(block.op_mesh[op], -1), chunk)
    return out


Counts = Counter[tuple[tuple[int, ...], str]]  # (a stage mesh's ranks, op kind) -> ops


def stage_op_counts(p: Planned) -> Counts:
    """Each stage's forward, backward and optimizer ops as vppctl's plan places them (the
    decisions `convert` would write: `engine.apply.assign`)."""
    a = assign(p.index, p.plan, p.layers, p.forward)
    return _counts(p.index, list(a.op_mesh[0]))


def paddle_stage_op_counts(paddle_vpp: Program) -> Counts:
    """Each stage's forward, backward and optimizer ops in Paddle's program."""
    index = build_index(paddle_vpp)
    return _counts(index, list(index.global_block.op_mesh))


def _counts(index: ProgramIndex, op_mesh: list[int]) -> Counts:
    stages, _ = index.stage_mesh_ids()
    ranks = {m: tuple(index.meshes[m].process_ids) for m in stages}
    block = index.global_block
    out: Counts = Counter()
    for op, mesh in enumerate(op_mesh):
        if mesh in ranks:
            out[ranks[mesh], kind(block.ops.role[op])] += 1
    return out


def _copy_keys(index: object) -> list[tuple[int, OpKey, int]]:
    """(recompute copy, its key, the forward op it copies), keyed by that op's key."""
    block = index.global_block  # type: ignore[attr-defined]
    keyed = dict(_keys(block.ops.struct, block.ops.type, block.forward_ops))
    return [
        (op, (_COPY + keyed[f][0], keyed[f][1], keyed[f][2]), f)
        for op, f in sorted(recompute_copies(index).items())  # type: ignore[arg-type]
    ]


def _keys(structs: list[bytes], types: list[bytes], ops: list[int]) -> list[tuple[int, OpKey]]:
    seen: Counter[tuple[bytes, bytes]] = Counter()
    out = []
    for op in ops:
        seen[structs[op], types[op]] += 1
        out.append((op, (structs[op], types[op], seen[structs[op], types[op]])))
    return out


def _grad_keys(index: object) -> list[tuple[int, OpKey]]:
    """Grad ops keyed by their forward op's layer path, their type and occurrence."""
    block = index.global_block  # type: ignore[attr-defined]
    struct_of = {block.ops.op_id[op]: block.ops.struct[op] for op in block.forward_ops}
    grads = [
        op
        for op in range(block.n_ops)
        if block.ops.type[op].endswith(b"_grad") and block.ops.forward_op_id[op] in struct_of
    ]
    structs = {op: struct_of[block.ops.forward_op_id[op]] for op in grads}
    seen: Counter[tuple[bytes, bytes]] = Counter()
    out = []
    for op in grads:
        seen[structs[op], block.ops.type[op]] += 1
        out.append((op, (structs[op], block.ops.type[op], seen[structs[op], block.ops.type[op]])))
    return out
