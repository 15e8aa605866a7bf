"""Segments: the layers, the segments they form and the recorded plan (V004, V005, V006,
V012), checked against the placement the plan and the rules give.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from vppctl.choices import COST_KINDS, MODES, PLACEMENTS, SPLITS
from vppctl.engine import (
    LayerSet,
)
from vppctl.mesh import mesh_text
from vppctl.plan import cannot_fill, place
from vppctl.program import (
    RecordedPlan,
)
from vppctl.verify.checker import Checker, chunk_text
from vppctl.verify.rules import Cause


def check_layers(c: Checker, layers: LayerSet) -> list[tuple[int, int, list[int]]] | None:
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
                    f"layer {layer.name} is on {c.placed(*where)} but this op is on "
                    f"{c.placed(meshes[i], chunks[i])}",
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
    c: Checker, layers: LayerSet, places: Sequence[tuple[int, int]]
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
                f"layers of stage {stage} {chunk_text(chunk)} form two "
                f"segments (again from layer {first.name}); a segment is one run of layers",
            )
        seen.setdefault((stage, chunk), r)
    want_of, n_held = _held(c)
    empty = exp.empty_segments
    if n_held > len(layers):  # listing every empty pair could run to millions
        c.add(
            Cause.EMPTY_SEGMENT,
            0,
            -1,
            f"{cannot_fill(len(layers), n_held, exp.pp)}: some (stage, chunk) holds no layer",
        )
    else:
        for s in range(exp.pp):
            for ch in range(exp.vpp):
                if (s, ch) not in seen and (s, ch) not in empty:
                    c.add(Cause.EMPTY_SEGMENT, 0, -1, f"stage {s} chunk {ch} holds no layer")
    for k, (stage, chunk, ks) in enumerate(runs[:n_held]):
        want = want_of(k)
        if (stage, chunk) != want:
            where = f"{exp.placement} placement"
            if empty:
                where = f"the PIR plan ({where}, its empty virtual stages left out)"
            c.add(
                Cause.SEGMENT_MISPLACED,
                0,
                layers.layers[ks[0]].first,
                f"segment {k} (from layer {layers.layers[ks[0]].name}) is on stage {stage} "
                f"{chunk_text(chunk)}, but {where} puts it on stage {want[0]} chunk {want[1]}",
            )
    return runs


def _held(c: Checker) -> tuple[Callable[[int], tuple[int, int]], int]:
    """(where segment k sits, how many segments hold layers): every virtual stage in order
    but those a PIR plan declares empty (its first, embedding only, or last, head only)."""
    exp = c.expect
    n = exp.pp * exp.vpp
    if not exp.empty_segments:  # no list of pp*vpp places to build
        return (lambda k: place(k, exp.pp, exp.placement)), n
    places = (place(k, exp.pp, exp.placement) for k in range(n))
    held = [p for p in places if p not in exp.empty_segments]
    return held.__getitem__, len(held)


def check_plan(c: Checker, runs: list[tuple[int, int, list[int]]]) -> None:
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
    c: Checker, plan: RecordedPlan, runs: list[tuple[int, int, list[int]]], layers: LayerSet
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


def check_plan_record(c: Checker, plan: RecordedPlan) -> None:
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
