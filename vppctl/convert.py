"""Convert: load -> index -> layers -> plan -> apply -> verify, as one library call.

`convert_program` runs the whole pipeline on a loaded program, modifying it in
place, and returns a `ConvertResult` (the plan plus what changed) from which
the CLI renders the table and the JSON. It never returns a program that fails
its own verifier: that raises SelfCheckError and the CLI writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from vppctl import fields
from vppctl.apply import assign, write
from vppctl.cost import LayerCosts, layer_costs, param_elements
from vppctl.detect import detect_layers
from vppctl.errors import ConversionError, SelfCheckError
from vppctl.fields import NO_VAR
from vppctl.gcpause import gc_paused
from vppctl.index import NO_MESH, ProgramIndex, build_index
from vppctl.layers import LayerSet, find_layers, is_forward
from vppctl.load import Program
from vppctl.plan import LayerFacts, Plan, PlanOptions, make_plan, virtual_stages
from vppctl.verify import Expectation, Violation, cross_stage_edges, verify


@dataclass(frozen=True)
class ConvertOptions:
    plan: PlanOptions
    seg_method: str | None = None  # None: detect the repeated layer
    strict: bool = False
    strip_callstack: bool = False


@dataclass(frozen=True)
class SegmentStats:
    forward: int = 0
    backward: int = 0
    optimizer: int = 0
    params: int = 0  # parameter elements on this segment


@dataclass(frozen=True)
class ConvertResult:
    plan: Plan
    stats: tuple[SegmentStats, ...]
    n_ops: int
    n_vars: int
    ops_changed: int
    vars_changed: int
    edges_before: int
    edges_after: int
    callstack_bytes_saved: int | None
    warnings: tuple[str, ...] = field(default=())


@gc_paused
def convert_program(program: Program, opts: ConvertOptions) -> ConvertResult:
    """Convert `program` in place; see the module docstring."""
    opts.plan.check()
    index = build_index(program)
    _check_structure(index)
    stages, globals_ = index.stage_meshes()
    _check_pp(stages, opts.plan)
    _check_meshes(index, stages, globals_)
    layers = _layers(index, opts)
    costs = layer_costs(index, layers, opts.plan.cost)
    plan = make_plan(
        _facts(index, layers, stages, costs),
        [index.meshes[m] for m in stages],
        opts.plan,
        warnings=layers.warnings,
    )
    _check_strays(index, layers, plan)
    edges_before = cross_stage_edges(index, stages)
    assignment = assign(index, plan, layers)
    applied = write(index, assignment)
    violations = verify(index, expectation(index, plan, layers, stages, globals_))
    _refuse_input_problems(index, violations)
    if violations:
        raise SelfCheckError(_self_check_message(violations))
    fields.write_plan(program.header, plan)
    saved = None
    if opts.strip_callstack:
        saved = sum(fields.strip_callstack(b) for b in program.blocks)
    return ConvertResult(
        plan=plan,
        stats=segment_stats(index, plan, stages),
        n_ops=sum(b.n_ops for b in index.blocks),
        n_vars=index.n_vars,
        ops_changed=applied.ops_changed,
        vars_changed=applied.vars_changed,
        edges_before=edges_before,
        edges_after=cross_stage_edges(index, stages),
        callstack_bytes_saved=saved,
        warnings=(*plan.warnings, *applied.warnings),
    )


def _check_structure(index: ProgramIndex) -> None:
    """Refuse malformed programs up front (what verify reports as V013 and V014), and
    programs whose global block has forward ops after its backward section starts."""
    n_blocks = len(index.blocks)
    if index.problems:
        raise ConversionError(f"the program is malformed: {index.problems[0]}")
    _check_sections(index)
    for bi in index.blocks:
        o = bi.ops
        if NO_VAR in o.in_var or NO_VAR in o.out_var:
            op, name = _first_undeclared(index, bi.idx)
            raise ConversionError(
                f"{index.op_label(bi.idx, op)} names variable {name!r}, which is not declared "
                f"in block {bi.idx} or its ancestors; the program is malformed (export it again)"
            )
        for op, subs in sorted(o.sub_blocks.items()):
            bad = [s for s in subs if not bi.idx < s < n_blocks]
            if bad:
                why = (
                    f"which does not exist (the program has {n_blocks} blocks)"
                    if not 0 <= bad[0] < n_blocks
                    else f"which is not a later block than {bi.idx} (a cycle)"
                )
                raise ConversionError(
                    f"{index.op_label(bi.idx, op)} has sub_block {bad[0]}, {why}; the program "
                    "is malformed"
                )


def _check_meshes(index: ProgramIndex, stages: Sequence[int], globals_: Sequence[int]) -> None:
    """Every op and variable is on a stage mesh, a global mesh, or none (V003's premise)."""
    allowed = {*stages, *globals_, NO_MESH}
    for bi in index.blocks:
        odd = set(bi.op_mesh) - allowed
        if odd:
            op = next(i for i, m in enumerate(bi.op_mesh) if m in odd)
            raise ConversionError(
                f"{index.op_label(bi.idx, op)} is on {_mesh_text(index, bi.op_mesh[op])}, "
                f"which is neither a stage mesh ({_stage_list(index, stages)}) nor a global "
                "mesh; annotate every op with its stage's mesh"
            )
    odd = set(index.var_mesh) - allowed
    if odd:
        v = next(i for i, m in enumerate(index.var_mesh) if m in odd)
        raise ConversionError(
            f"variable {index.var_name(v)} is on {_mesh_text(index, index.var_mesh[v])}, which "
            f"is neither a stage mesh ({_stage_list(index, stages)}) nor a global mesh; "
            "annotate every variable with its stage's mesh"
        )


def _mesh_text(index: ProgramIndex, mesh: int) -> str:
    m = index.meshes[mesh]
    return f"mesh {m} (shape {list(m.shape)})"


def _stage_list(index: ProgramIndex, stages: Sequence[int]) -> str:
    return " ".join(str(index.meshes[m]) for m in stages)


def _check_sections(index: ProgramIndex) -> None:
    roles = index.global_block.ops.role
    first_backward = next((i for i, r in enumerate(roles) if r & 1), None)
    if first_backward is None:
        return
    for i in range(first_backward + 1, len(roles)):
        if is_forward(roles[i]):
            raise ConversionError(
                f"{index.op_label(0, i)} is a forward op after the backward section starts at "
                f"{index.op_label(0, first_backward)}; vppctl expects the forward ops, then the "
                "backward ops, then the optimizer ops (check the ops' op_role)"
            )


def _first_undeclared(index: ProgramIndex, b: int) -> tuple[int, str]:
    bi = index.blocks[b]
    for op in range(bi.n_ops):
        if NO_VAR in bi.inputs(op) or NO_VAR in bi.outputs(op):
            ins, outs = fields.op_arguments(index.program.blocks[b], op)
            for name in (*ins, *outs):
                if index.lookup(b, name) == NO_VAR:
                    return op, name.decode("utf-8", "backslashreplace")
    return 0, "?"


def _check_strays(index: ProgramIndex, layers: LayerSet, plan: Plan) -> None:
    """In manual mode meshes are kept, so a stray op must already be on its layer's mesh."""
    if plan.mode != "manual":
        return
    meshes = index.global_block.op_mesh
    for i in layers.strays:
        layer = layers.layers[layers.op_layer[i]]
        if meshes[i] != layer.mesh:
            got = index.meshes[meshes[i]] if meshes[i] != NO_MESH else "no mesh"
            raise ConversionError(
                f"{index.op_label(0, i)} matches no layer and joins layer {layer.name}, but it "
                f"is on {got} and the layer on {index.meshes[layer.mesh]}; the program is "
                "already interleaved (manual mode keeps meshes), so put it on its layer's mesh "
                "or give it the layer's struct name"
            )


def _check_pp(stages: Sequence[int], opts: PlanOptions) -> None:
    pp = len(stages)
    if opts.pp is not None and opts.pp != pp:
        raise ConversionError(
            f"--pp {opts.pp} does not match the program, which has {pp} stage meshes; "
            f"drop --pp or pass --pp {pp}"
        )
    if pp == 0:
        raise ConversionError(
            "the program has no stage meshes (no process_meshes and no op carries a mesh); "
            "annotate it for pipeline parallelism first"
        )
    if pp < 2 and opts.vpp > 1:
        raise ConversionError(
            f"the program has only {pp} stage mesh, so there is no pipeline to interleave; "
            "annotate it with one process mesh per stage, or use --vpp 1"
        )


def _layers(index: ProgramIndex, opts: ConvertOptions) -> LayerSet:
    if opts.seg_method is None:
        return detect_layers(index, strict=opts.strict)
    return find_layers(index, opts.seg_method, strict=opts.strict)


def _facts(
    index: ProgramIndex, layers: LayerSet, stages: Sequence[int], costs: LayerCosts
) -> LayerFacts:
    stage_of = {m: s for s, m in enumerate(stages)}
    layer_stages = []
    for layer in layers.layers:
        s = stage_of.get(layer.mesh)
        if layer.mesh == NO_MESH:
            raise ConversionError(
                f"{index.op_label(0, layer.first)} of layer {layer.name} has no process mesh; "
                "annotate the program for pipeline parallelism (every forward op on its stage "
                "mesh) first"
            )
        if s is None:
            raise ConversionError(
                f"layer {layer.name} is on mesh {index.meshes[layer.mesh]}, which is not a "
                f"stage mesh (stage meshes: {' '.join(str(index.meshes[m]) for m in stages)}); "
                "put each layer on one stage's mesh"
            )
        layer_stages.append(s)
    forward_end = 1 + index.global_block.forward_ops[-1]
    return LayerFacts(
        names=tuple(layer.name for layer in layers.layers),
        first_ops=tuple(layer.first for layer in layers.layers),
        stages=tuple(layer_stages),
        costs=costs.layers,
        pre_cost=costs.pre,
        post_cost=costs.post,
        forward_end=forward_end,
        seg_method=layers.seg_method,
        layer_class=layers.layer_class,
        detected=layers.detected,
    )


def expectation(
    index: ProgramIndex,
    plan: Plan,
    layers: LayerSet,
    stages: Sequence[int],
    globals_: Sequence[int],
) -> Expectation:
    return Expectation(
        pp=plan.pp,
        vpp=plan.vpp,
        placement=plan.placement,
        stage_meshes=tuple(stages),
        global_meshes=tuple(globals_),
        layers=layers,
        plan_segments=tuple((s.stage, s.chunk, s.layers) for s in plan.segments),
    )


def _refuse_input_problems(index: ProgramIndex, violations: Sequence[Violation]) -> None:
    """Violations on a converted program that come from the input, not from a bug.

    V001 "no process mesh": an op the rules keep on its mesh had none in the input.
    V007: layers are placed in program order, but ops outside the layers keep their
    mesh (rule 6), so an input with the embedding or head on another stage makes the
    forward pass run backwards. V011 at a forward op: the op kept its mesh (outside the
    layers, or manual mode) and the input had its output variable on another mesh.
    """
    for v in violations:
        where = f"block {v.block} op #{v.op} ({v.type})"
        if v.rule == "V001" and "process mesh" in v.message:
            raise ConversionError(
                f"{where} has no process mesh and no rule gives it one; annotate the program "
                "for pipeline parallelism first (every forward op on its stage mesh)"
            )
        if (
            v.rule == "V011"
            and "writes" in v.message
            and v.type
            and not v.type.endswith(("_grad", "sum", "grad_add"))
        ):
            raise ConversionError(
                f"{where} {v.message}: the input's annotation is inconsistent (a variable "
                "should sit on the mesh of the op that writes it, and ops outside the layers "
                "or in an interleaved program keep their mesh); fix the variable's dist_attr"
            )
        if v.rule == "V007":
            raise ConversionError(
                f"the forward pass would run backwards through the pipeline: {where} "
                f"{v.message}; ops outside the layers keep their mesh, so put the ops before "
                "the first layer on the first stage and those after the last layer on the "
                "last segment's stage"
            )


def _self_check_message(violations: Sequence[Violation]) -> str:
    v = violations[0]
    where = f" at block {v.block} op #{v.op} ({v.type})" if v.op >= 0 else ""
    more = f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""
    return (
        f"internal check failed, nothing written: rule {v.rule}{where}: {v.message}{more}. "
        "This is a bug in vppctl; please report it with the input program"
    )


def segment_stats(
    index: ProgramIndex, plan: Plan, stages: Sequence[int]
) -> tuple[SegmentStats, ...]:
    """Per virtual stage: forward, backward and optimizer ops and parameter elements."""
    n = len(plan.segments)
    counts = [[0, 0, 0, 0] for _ in range(n)]
    vstage = virtual_stages(plan.pp, plan.vpp, plan.placement)
    stage_of = {m: s for s, m in enumerate(stages)}
    block = index.global_block
    roles, chunks, meshes = block.ops.role, block.ops.chunk, block.op_mesh
    for op in range(block.n_ops):
        s = stage_of.get(meshes[op])
        k = vstage.get((s, chunks[op])) if s is not None else None
        if k is None:
            continue
        role = roles[op]
        col = 0 if is_forward(role) else 1 if role & 1 else 2 if role & 2 else -1
        if col >= 0:
            counts[k][col] += 1
    for bi in index.blocks:
        for pos, is_param in enumerate(bi.vars.is_parameter):
            if not is_param:
                continue
            v = bi.var_base + pos
            s = stage_of.get(index.var_mesh[v])
            k = vstage.get((s, max(index.var_chunks[v], 0))) if s is not None else None
            if k is not None:
                counts[k][3] += param_elements(index, v)
    return tuple(SegmentStats(*c) for c in counts)
