"""`vppctl inspect`: what a program holds, summarised as plain values.

Blocks, ops by role, variables, parameters, stage meshes, per stage its layers
and op counts, the chunk ids present, and whether the layout looks like plain
PP, interleaved VPP, or is not annotated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vppctl import fields
from vppctl.cost import param_elements
from vppctl.detect import detect_layers
from vppctl.errors import ConversionError
from vppctl.gcpause import gc_paused
from vppctl.index import NO_MESH, ProgramIndex, build_index
from vppctl.layers import LayerSet, find_layers
from vppctl.load import Program
from vppctl.mesh import Mesh
from vppctl.roles import KINDS, kind


@dataclass(frozen=True)
class StageSummary:
    stage: int
    mesh: Mesh
    layers: tuple[str, ...]
    ops: dict[str, int]
    chunks: tuple[int, ...]


@dataclass(frozen=True)
class Summary:
    source: str
    size: int
    blocks: int
    ops: dict[str, int]
    vars: int
    params: int
    param_elements: int
    stage_meshes: tuple[Mesh, ...]
    global_meshes: tuple[Mesh, ...]
    stages: tuple[StageSummary, ...]
    chunks: tuple[int, ...]
    layout: str  # "plain PP", "interleaved VPP", "unannotated"
    layer_class: str
    n_layers: int
    layers_note: str
    plan: fields.RecordedPlan | None
    callstack_ops: int
    unplaced_ops: int = field(default=0)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "bytes": self.size,
            "blocks": self.blocks,
            "ops": {"total": sum(self.ops.values()), **self.ops},
            "vars": self.vars,
            "params": {"count": self.params, "elements": self.param_elements},
            "stage_meshes": [list(m.process_ids) for m in self.stage_meshes],
            "global_meshes": [list(m.process_ids) for m in self.global_meshes],
            "stages": [
                {
                    "stage": s.stage,
                    "mesh": list(s.mesh.process_ids),
                    "layers": list(s.layers),
                    "ops": s.ops,
                    "chunks": list(s.chunks),
                }
                for s in self.stages
            ],
            "chunks": list(self.chunks),
            "layout": self.layout,
            "layers": {"class": self.layer_class, "count": self.n_layers, "note": self.layers_note},
            "plan": None
            if self.plan is None
            else {
                "pp": self.plan.pp,
                "vpp": self.plan.vpp,
                "placement": self.plan.placement,
                "mode": self.plan.mode,
                "split": self.plan.split,
                "vppctl_version": self.plan.vppctl_version,
            },
            "ops_with_callstack": self.callstack_ops,
            "ops_without_mesh": self.unplaced_ops,
        }


@gc_paused
def summarize(program: Program, seg_method: str | None = None) -> Summary:
    index = build_index(program)
    stages, globals_ = index.stage_meshes()
    layers, note = _layers(index, seg_method)
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
        layer_class=layers.layer_class if layers else "",
        n_layers=len(layers) if layers else 0,
        layers_note=note,
        plan=fields.read_plan(program.header),
        callstack_ops=sum(map(fields.callstack_ops, program.blocks)),
        unplaced_ops=unplaced,
    )


def _layers(index: ProgramIndex, seg_method: str | None) -> tuple[LayerSet | None, str]:
    try:
        if seg_method:
            return find_layers(index, seg_method), f"--seg-method {seg_method}"
        return detect_layers(index), "detected"
    except ConversionError as e:
        return None, str(e)


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
    names: list[list[str]] = [[] for _ in stages]
    for layer in layers.layers if layers else ():
        s = stage_of.get(layer.mesh)
        if s is not None:
            names[s].append(layer.name)
    return [
        StageSummary(
            s,
            index.meshes[m],
            tuple(names[s]),
            counts[s],
            tuple(sorted(c for c in chunks[s] if c >= 0)),
        )
        for s, m in enumerate(stages)
    ]


def _layout(
    index: ProgramIndex, stages: list[int], layers: LayerSet | None, chunks: set[int]
) -> str:
    if not stages:
        return "unannotated"
    if any(c > 0 for c in chunks):
        return "interleaved VPP"
    if layers is not None:
        stage_of = {m: s for s, m in enumerate(stages)}
        seq = [stage_of.get(layer.mesh, -1) for layer in layers.layers]
        if any(a > b for a, b in zip(seq, seq[1:])):
            return "interleaved VPP"
    return "plain PP"
