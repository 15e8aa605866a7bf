"""`vppctl inspect`: what a program holds, summarised as plain values.

Blocks, ops by role, variables, parameters, stage meshes, per stage its layers
and op counts, the chunk ids present, and whether the layout looks like plain
PP, interleaved VPP, or is not annotated.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from vppctl import validate
from vppctl.choices import ProgramLayout
from vppctl.engine import (
    LayerSet,
    ProgramIndex,
    build_index,
    check_seg_method,
    param_elements,
    resolve_layers,
)
from vppctl.errors import ConversionError
from vppctl.gcpause import gc_paused
from vppctl.mesh import NO_MESH, Mesh
from vppctl.program import (
    KINDS,
    OpKind,
    PirOrigin,
    Program,
    RecordedPlan,
    callstack_ops,
    kind,
    read_plan,
)
from vppctl.shapes import document
from vppctl.verify import layers_json, recorded_plan_json


@dataclass(frozen=True)
class ChunkLayers:
    """The layers one stage holds in one chunk: their program-order numbers (indices
    into `Summary.layers`) and names."""

    chunk: int  # -1: the layers' ops carry no chunk id
    numbers: tuple[int, ...]
    names: tuple[str, ...]


@dataclass(frozen=True)
class StageSummary:
    """One stage: its mesh, layers, ops by role and chunk ids."""

    stage: int
    mesh: Mesh
    layers: tuple[str, ...]
    ops: dict[OpKind, int]
    chunks: tuple[int, ...]  # the chunk ids of the stage's ops
    layers_by_chunk: tuple[ChunkLayers, ...] = ()  # in chunk order


@dataclass(frozen=True)
class Summary:
    """What `inspect` finds in a program: blocks, ops by role, variables, parameters,
    meshes, each stage's layers by chunk, the chunk ids present, the layout, the layers
    and the recorded plan."""

    source: str
    size: int
    blocks: int
    ops: dict[OpKind, int]
    vars: int
    params: int
    param_elements: int
    stage_meshes: tuple[Mesh, ...]
    global_meshes: tuple[Mesh, ...]
    stages: tuple[StageSummary, ...]
    chunks: tuple[int, ...]
    layout: ProgramLayout
    layers: LayerSet | None  # None when they cannot be found (`layers_note` says why)
    layers_note: str
    plan: RecordedPlan | None
    callstack_ops: int
    unplaced_ops: int = field(default=0)
    pir: PirOrigin | None = None  # read from a PIR program (JSON)

    def to_json(self) -> dict[str, Any]:
        """The object `vppctl inspect --json` prints."""
        return summary_json(self)


def summary_json(s: Summary) -> dict[str, Any]:
    return document(
        "inspect",
        {
            "source": s.source,
            "bytes": s.size,
            "blocks": s.blocks,
            "ops": {"total": sum(s.ops.values()), **s.ops},
            "vars": s.vars,
            "params": {"count": s.params, "elements": s.param_elements},
            "stage_meshes": [list(m.process_ids) for m in s.stage_meshes],
            "global_meshes": [list(m.process_ids) for m in s.global_meshes],
            "stages": [
                {
                    "stage": s.stage,
                    "mesh": list(s.mesh.process_ids),
                    "layers": list(s.layers),
                    "ops": s.ops,
                    "chunks": list(s.chunks),
                    "layers_by_chunk": [
                        {"chunk": c.chunk, "layers": list(c.names), "numbers": list(c.numbers)}
                        for c in s.layers_by_chunk
                    ],
                }
                for s in s.stages
            ],
            "chunks": list(s.chunks),
            "layout": s.layout,
            "layers": {
                **layers_json(s.layers),
                "note": s.layers_note,
                "names": list(s.layers.names) if s.layers else [],
            },
            "plan": recorded_plan_json(s.plan),
            "ops_with_callstack": s.callstack_ops,
            "ops_without_mesh": s.unplaced_ops,
            "pir": None
            if s.pir is None
            else {"version": s.pir.version, "folded": dict(s.pir.folded)},
        },
    )


@validate.named_fields
@dataclass(frozen=True)
class InspectOptions:
    """What `inspect` is asked. Checked when made (UsageError, exit 2)."""

    seg_method: str | None = None  # regex naming the repeated layer; None: detected

    FLAGS: ClassVar[Mapping[str, str]] = {"seg_method": "--seg-method"}

    def __post_init__(self) -> None:
        check_seg_method(self, "seg_method")


@gc_paused
def summarize(program: Program, seg_method: str | None = None) -> Summary:
    index = build_index(program)
    stages, globals_ = index.stage_mesh_ids()
    recorded = read_plan(program.header)
    layers, note = _layers(index, seg_method, recorded)
    ops = dict.fromkeys(KINDS, 0)
    chunks: set[int] = set()
    unplaced = 0
    for bi in index.blocks:
        for role in bi.ops.role:
            ops[kind(role)] += 1
        chunks.update(c for c in bi.ops.chunk if c >= 0)
        unplaced += sum(1 for m in bi.op_mesh if m == NO_MESH)
    params = [
        bi.var_base + i for bi in index.blocks for i, p in enumerate(bi.vars.is_parameter) if p
    ]
    return Summary(
        source=program.source,
        size=program.size,
        blocks=len(index.blocks),
        ops=ops,
        vars=index.n_vars,
        params=len(params),
        param_elements=sum(param_elements(index, v) for v in params),
        stage_meshes=tuple(index.meshes[m] for m in stages),
        global_meshes=tuple(index.meshes[m] for m in globals_),
        stages=tuple(_stages(index, stages, layers)),
        chunks=tuple(sorted(chunks)),
        layout=_layout(index, stages, layers, chunks),
        layers=layers,
        layers_note=note,
        plan=recorded,
        callstack_ops=sum(map(callstack_ops, program.blocks)),
        unplaced_ops=unplaced,
        pir=program.pir,
    )


def _layers(
    index: ProgramIndex, seg_method: str | None, recorded: RecordedPlan | None
) -> tuple[LayerSet | None, str]:
    try:
        layers = resolve_layers(index, seg_method, recorded)
    except ConversionError as e:
        return None, str(e)
    if seg_method:
        return layers, f"--seg-method {seg_method}"
    return layers, "detected" if layers.detected else "the recorded seg_method"


def _stages(index: ProgramIndex, stages: list[int], layers: LayerSet | None) -> list[StageSummary]:
    block = index.global_block
    stage_of = {m: s for s, m in enumerate(stages)}
    counts = [dict.fromkeys(KINDS, 0) for _ in stages]
    chunks: list[set[int]] = [set() for _ in stages]
    for op in range(block.n_ops):
        s = stage_of.get(block.op_mesh[op])
        if s is not None:
            counts[s][kind(block.ops.role[op])] += 1
            chunks[s].add(block.ops.chunk[op])
    held: list[dict[int, list[int]]] = [{} for _ in stages]  # stage -> chunk -> layers
    for k, layer in enumerate(layers.layers if layers else ()):
        s = stage_of.get(layer.mesh)
        if s is not None:
            held[s].setdefault(block.ops.chunk[layer.first], []).append(k)
    names = layers.names if layers else ()
    return [
        StageSummary(
            s,
            index.meshes[m],
            tuple(names[k] for k in sorted(k for ks in held[s].values() for k in ks)),
            counts[s],
            tuple(sorted(c for c in chunks[s] if c >= 0)),
            tuple(
                ChunkLayers(c, tuple(held[s][c]), tuple(names[k] for k in held[s][c]))
                for c in sorted(held[s])
            ),
        )
        for s, m in enumerate(stages)
    ]


def _layout(
    index: ProgramIndex, stages: list[int], layers: LayerSet | None, chunks: set[int]
) -> ProgramLayout:
    if not stages:
        return "unannotated"
    if any(c > 0 for c in chunks):
        return "interleaved"
    if layers is not None:
        stage_of = {m: s for s, m in enumerate(stages)}
        seq = [stage_of.get(layer.mesh, -1) for layer in layers.layers]
        if any(a > b for a, b in zip(seq, seq[1:])):
            return "interleaved"
    return "plain"
