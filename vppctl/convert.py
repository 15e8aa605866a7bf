"""Convert: load -> index -> layers -> plan -> apply -> verify, as one library call.

`convert_program` runs the whole pipeline on a loaded program, modifying it in
place, and returns a `ConvertResult` (the plan plus what changed) from which
the CLI renders the table and the JSON. It never returns a program that fails
its own verifier: that raises SelfCheckError and the CLI writes nothing.

A PIR program (Paddle 3.x) is converted the same way in memory, and its result also
holds the plan as Paddle's PIR completion takes it (`ConvertResult.pir_plan`, a
`vppctl.plan.PirPlan`): that plan, not the program, is what `convert` writes for it,
since Paddle cannot load a distributed PIR program back and builds its own under
`vppctl.paddle.pir_plan`.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from itertools import compress, count
from typing import TYPE_CHECKING, ClassVar

from vppctl import plan as plans  # the PIR plan's names load on use (a PIR program's)
from vppctl import progress, validate
from vppctl.choices import LINKS, MAX_MICRO_BATCHES, RUNTIMES, Fill, Link, Runtime
from vppctl.engine import (
    NO_LAYER,
    ForwardOps,
    LayerCosts,
    LayerSet,
    Move,
    ProgramIndex,
    build_index,
    check_seg_method,
    cross_stage_edges,
    layer_costs,
    param_elements,
    parameter_moves,
    parameter_places,
    parameter_vars,
    precheck,
    resolve_layers,
    with_matches,
)
from vppctl.engine.apply import assign, write
from vppctl.errors import ConversionError, SelfCheckError, UsageError
from vppctl.gcpause import gc_paused
from vppctl.mesh import NO_MESH, MeshId
from vppctl.plan import (
    LayerFacts,
    Plan,
    PlanOptions,
    PlanSpec,
    make_plan,
    virtual_stages,
)
from vppctl.program import (
    FORWARD_ROLES,
    Program,
    RecordedPlan,
    kind,
    read_plan,
    strip_callstack,
    write_plan,
)
from vppctl.verify import Expectation, Violation, refuse_input_problems, verify

if TYPE_CHECKING:
    from vppctl.plan import PirPlan

# vppctl reads PIR programs but writes none: Paddle 3.3.1 cannot load a distributed PIR program
# it serialized itself ("Unknown id dist_op"), and its PIR VPP completion rewrites the graph
# (reshards), which Paddle's own pass does for the program it holds. What vppctl gives it is
# the plan that pass follows under vppctl.paddle.pir_plan.
PIR_CANNOT = "cannot make a plan for Paddle's PIR completion of {source}: "


@validate.named_fields
@dataclass(frozen=True)
class ConvertOptions:
    """What `convert` is asked: the plan (`plan.vpp` is required, or `plan.layout`), how to
    find the layers, and what else to do. `convert_program` takes the first four;
    `micro_batches`, `in_place`, `runtime`, `costs_from` and `moves` are `convert_file`'s.
    Checked when made (UsageError, exit 2)."""

    plan: PlanOptions
    seg_method: str | None = None  # regex naming the repeated layer; None: detected
    strict: bool = False  # refuse forward ops in the layer region that match no layer
    strip_callstack: bool = False  # drop op_callstack attributes
    micro_batches: int | None = None  # also simulate the converted plan's bubble at m
    in_place: bool = False  # write over the input (no `out`)
    # Measured costs to simulate the bubble with, in seconds (vppctl.planner.measured): a
    # costs CSV/JSON or a profiler trace; `fill` "estimate" takes what it does not measure
    # from the program's estimate. Only with `micro_batches`.
    costs_from: str | os.PathLike[str] | None = None
    fill: Fill = "none"
    # Whose schedules and rules that bubble is simulated under (None: Paddle 3.0.0's, the
    # runtime of the legacy programs vppctl writes).
    runtime: Runtime | None = None
    # What a hop between stages costs in that bubble: given, in units of the mean stage's
    # forward (seconds with `costs_from`; 0 leaves hops out), or None: the program's
    # boundary bytes over `link` (None: h100-ib), as `simulate` times it.
    p2p_cost: float | Fraction | None = None
    link: Link | None = None
    # Also write every parameter's (stage, chunk) before and after there, as JSON.
    moves: str | os.PathLike[str] | None = None

    FLAGS: ClassVar[Mapping[str, str]] = {
        "seg_method": "--seg-method",
        "strict": "--strict",
        "strip_callstack": "--strip-callstack",
        "micro_batches": "--micro-batches",
        "in_place": "--in-place",
        "costs_from": "--costs-from",
        "fill": "--fill",
        "runtime": "--runtime",
        "p2p_cost": "--p2p-cost",
        "link": "--link",
        "moves": "--moves",
    }
    NESTED: ClassVar[Mapping[str, type]] = {"plan": PlanOptions}

    def __post_init__(self) -> None:
        validate.nested(self, "plan", PlanOptions)
        if self.plan.layout is None:
            self.plan.spec()  # vpp is required, or a layout that gives it
        check_seg_method(self, "seg_method")
        for name in ("strict", "strip_callstack", "in_place"):
            validate.flag(self, name)
        validate.integer(self, "micro_batches", 1, MAX_MICRO_BATCHES, optional=True)
        validate.measured_costs(self)
        if self.costs_from is not None and self.micro_batches is None:
            raise UsageError(
                f"{validate.where(self, 'costs_from')} times the simulated bubble, which "
                f"{validate.where(self, 'micro_batches')} asks for: pass --micro-batches M, "
                "or drop --costs-from"
            )
        validate.choice(self, "runtime", RUNTIMES, optional=True)
        if self.moves is not None and not isinstance(self.moves, (str, os.PathLike)):
            raise validate.refuse(self, "moves", "a path (str or os.PathLike), '-' or None")
        if self.p2p_cost is not None:
            validate.number(self, "p2p_cost")
        validate.choice(self, "link", LINKS, optional=True)
        if self.p2p_cost is not None and self.link is not None:
            raise UsageError(
                f"{validate.where(self, 'p2p_cost')} gives a hop's cost itself, and "
                f"{validate.where(self, 'link')} would time it from the program's bytes: "
                "pass one of them"
            )
        for name, what in (
            ("runtime", "names whose schedules simulate"),
            ("p2p_cost", "is a hop's cost in"),
            ("link", "times the hops of"),
        ):
            if getattr(self, name) is not None and self.micro_batches is None:
                flag = validate.where(self, name)
                raise UsageError(
                    f"{flag} {what} the bubble of "
                    f"{validate.where(self, 'micro_batches')}: pass both, or drop "
                    f"{flag.split(' ')[0]}"
                )


@dataclass(frozen=True)
class SegmentStats:
    """One segment's ops by role and its parameter elements, after the conversion."""

    forward: int = 0
    backward: int = 0
    optimizer: int = 0
    params: int = 0  # parameter elements on this segment


@dataclass(frozen=True)
class ConvertResult:
    """What a conversion did: the plan it applied, each segment's ops and parameters (in
    virtual-stage order), how many ops and variables changed, and the point-to-point
    edges between stages per micro-batch before and after."""

    plan: Plan
    stats: tuple[SegmentStats, ...]
    n_ops: int
    n_vars: int
    ops_changed: int
    vars_changed: int
    # How the changed ops and variables were written: spliced (the new fields put where
    # the old ones were, the rest kept as read) or rewritten whole (an encoding the splice
    # does not edit in place, or a program not held as the bytes read: text, PIR).
    ops_spliced: int
    ops_rewritten: int
    vars_spliced: int
    vars_rewritten: int
    edges_before: int
    edges_after: int
    callstack_bytes_saved: int | None
    warnings: tuple[str, ...] = field(default=())
    # Every parameter once: its (stage, chunk) before and after, and its bytes.
    moves: tuple[Move, ...] = field(default=())
    pir_plan: PirPlan | None = None  # a PIR program's: the plan Paddle's completion takes


@dataclass(frozen=True)
class Planned:
    """A program's index, layers and plan: everything decided, nothing written yet."""

    index: ProgramIndex
    forward: ForwardOps
    layers: LayerSet
    facts: LayerFacts
    plan: Plan
    stages: tuple[MeshId, ...]
    globals_: tuple[MeshId, ...]


def plan_program(program: Program, opts: ConvertOptions) -> Planned:
    """Load -> index -> layers -> plan: refusals up front, then the pure plan (rules 1-5).
    A layout (`PlanOptions.layout`) is resolved once the stages and layers are known."""
    asked = opts.plan
    index = build_index(program)
    progress.phase("planning")
    precheck.check_structure(index)
    stages, globals_ = index.stage_mesh_ids()
    precheck.check_pp(
        stages, (replace(asked, layout=None, vpp=1, split=None) if asked.layout else asked).spec()
    )
    precheck.check_meshes(index, stages, globals_)
    forward = ForwardOps(index)
    precheck.check_forward_links(index, forward)
    layers = resolve_layers(index, opts.seg_method, read_plan(program.header), strict=opts.strict)
    resolved, warnings = asked.resolved(len(stages), len(layers))
    spec = resolved.spec()
    if asked.layout:
        precheck.check_pp(stages, spec)
    facts = _facts(index, layers, stages, layer_costs(index, layers, spec.cost))
    plan = _plan(index, layers, facts, stages, spec, warnings)
    return Planned(index, forward, layers, facts, plan, tuple(stages), tuple(globals_))


def replan(planned: Planned, opts: PlanOptions) -> Planned:
    """The same program planned with other options (index and layers reused)."""
    opts, warnings = opts.resolved(planned.plan.pp, planned.plan.n_layers)
    spec = opts.spec()
    index, layers, facts = planned.index, planned.layers, planned.facts
    if spec.cost != planned.plan.cost_kind:
        costs = layer_costs(index, layers, spec.cost)
        facts = replace(facts, costs=costs.layers, pre_cost=costs.pre, post_cost=costs.post)
    plan = _plan(index, layers, facts, planned.stages, spec, warnings)
    return replace(planned, facts=facts, plan=plan)


def _plan(
    index: ProgramIndex,
    layers: LayerSet,
    facts: LayerFacts,
    stages: Sequence[MeshId],
    opts: PlanSpec,
    warnings: Sequence[str] = (),
) -> Plan:
    said = (*layers.warnings, *warnings)
    try:
        plan = make_plan(facts, [index.meshes[m] for m in stages], opts, warnings=said)
    except ConversionError as e:
        raise with_matches(layers, e) from None
    precheck.check_strays(index, layers, plan)
    return plan


@validate.api_names(validate.flags_of((ConvertOptions, "ConvertOptions")))
@gc_paused
def convert_program(program: Program, options: ConvertOptions) -> ConvertResult:
    """Convert `program` in memory, in place: its ops and variables are given their new
    stage mesh and chunk and its plan is recorded, so the `Program` passed in is the
    converted one afterwards (a program of a million ops is not copied; read the file
    again for the original). Returns the plan and what changed; nothing is changed when
    it raises. `options.micro_batches` and `options.in_place` are `convert_file`'s."""
    if not isinstance(options, ConvertOptions):
        raise UsageError(validate.wrong_options("convert_program", "ConvertOptions", options))
    for name in ("micro_batches", "in_place", "moves"):
        if getattr(options, name):
            raise UsageError(
                f"{validate.where(options, name)} is convert_file's (a Program in memory has "
                "no file to write over, bubble to report or move map to write): drop it, or "
                "call convert_file"
            )
    return converted(program, options)[0]


@gc_paused
def converted(program: Program, opts: ConvertOptions) -> tuple[ConvertResult, Planned]:
    """`convert_program`, with the plan it was converted with and the index and layers it
    was planned from (`convert --micro-batches` simulates that plan without planning the
    converted program again)."""
    planned = plan_program(program, opts)
    index, layers, plan, stages = planned.index, planned.layers, planned.plan, planned.stages
    pir = pir_plan_of(planned, program.source) if program.is_pir else None
    edges_before = cross_stage_edges(index, stages)
    params = parameter_vars(index)
    before = parameter_places(index, stages, params)
    progress.phase("applying", sum(b.n_ops for b in index.blocks))
    applied = write(index, assign(index, plan, layers, planned.forward, pir=program.is_pir))
    violations = verify(index, expectation(planned, pir=program.is_pir))
    refuse_input_problems(index, violations)
    if violations:
        raise SelfCheckError(_self_check_message(violations))
    write_plan(program.header, plan)
    saved = None
    if opts.strip_callstack:
        saved = sum(strip_callstack(b) for b in program.blocks)
    result = ConvertResult(
        plan=plan,
        stats=segment_stats(index, plan, stages),
        n_ops=sum(b.n_ops for b in index.blocks),
        n_vars=index.n_vars,
        ops_changed=applied.ops_changed,
        vars_changed=applied.vars_changed,
        ops_spliced=sum(b.ops.spliced for b in program.blocks),
        ops_rewritten=sum(b.ops.rewritten for b in program.blocks),
        vars_spliced=sum(b.vars.spliced for b in program.blocks),
        vars_rewritten=sum(b.vars.rewritten for b in program.blocks),
        edges_before=edges_before,
        edges_after=cross_stage_edges(index, stages),
        callstack_bytes_saved=saved,
        # A PIR program's conversion here only counts what the plan moves: Paddle builds
        # its backward itself, so where vppctl put backward ops warns of nothing it builds.
        warnings=(*plan.warnings, *(() if pir else applied.warnings)),
        moves=parameter_moves(index, params, before, parameter_places(index, stages, params)),
        pir_plan=pir,
    )
    return result, planned


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


def expectation(planned: Planned, *, pir: bool = False) -> Expectation:
    """What the converted program must satisfy: the plan it was converted with (`pir`: a
    program read from Paddle's PIR, whose rules of PIR_RULES apply in part)."""
    plan = planned.plan
    return Expectation(
        pp=plan.pp,
        vpp=plan.vpp,
        placement=plan.placement,
        stage_mesh_ids=planned.stages,
        global_mesh_ids=planned.globals_,
        layers=planned.layers,
        plan_segments=tuple((s.stage, s.chunk, s.layers) for s in plan.segments),
        recorded=RecordedPlan.of(plan),
        pir=pir,
    )


def _self_check_message(violations: Sequence[Violation]) -> str:
    v = violations[0]
    where = f" at block {v.block} op #{v.op} ({v.type})" if v.op >= 0 else ""
    more = f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""
    return (
        f"internal check failed, nothing written: rule {v.rule}{where}: {v.message}{more}. "
        "This is a bug in vppctl; please report it with the input program"
    )


_STATS_COLUMN = {"forward": 0, "backward": 1, "optimizer": 2}


def segment_stats(
    index: ProgramIndex, plan: Plan, stages: Sequence[int]
) -> tuple[SegmentStats, ...]:
    """Per virtual stage: forward, backward and optimizer ops and parameter elements."""
    n = len(plan.segments)
    counts = [[0, 0, 0, 0] for _ in range(n)]
    vstage = virtual_stages(plan.pp, plan.vpp, plan.placement)
    stage_of = {m: s for s, m in enumerate(stages)}
    block = index.global_block
    places = Counter(zip(block.op_mesh, block.ops.chunk, block.ops.role))  # counted in C
    for (mesh, chunk, role), n_ops in places.items():
        s = stage_of.get(mesh)
        k = vstage.get((s, chunk)) if s is not None else None
        col = _STATS_COLUMN.get(kind(role))
        if k is not None and col is not None:
            counts[k][col] += n_ops
    var_mesh, var_chunks, elements = index.var_mesh, index.var_chunks, index.elements
    for bi in index.blocks:
        for v in compress(count(bi.var_base), bi.vars.is_parameter):  # the parameters, in C
            s = stage_of.get(var_mesh[v])
            if s is not None:
                c = var_chunks[v]
                k = vstage.get((s, c if c > 0 else 0))
                if k is not None:
                    known = elements.get(v)  # param_elements' memo, read inline
                    counts[k][3] += known if known is not None else param_elements(index, v)
    return tuple(SegmentStats(*c) for c in counts)


# -- the plan of a PIR program ------------------------------------------------------------


def pir_plan_of(planned: Planned, source: str) -> PirPlan:
    """The plan Paddle's PIR completion takes for a PIR program so planned: each virtual
    stage's layers by the names Paddle reads (`vpp_seg_method` as `plan` gives it), and the
    program's identity (each layer's forward ops, their digest). ConversionError (exit 4)
    when Paddle's completion cannot follow it, saying why."""
    plan, index, layers = planned.plan, planned.index, planned.layers
    cannot = PIR_CANNOT.format(source=source)
    _refuse_for_pir(planned, cannot)
    block = index.global_block
    structs, roles = block.ops.struct, block.ops.role
    texts = {raw: raw.decode("utf-8", "replace") for raw in {structs[i] for i in block.forward_ops}}
    seg_method = plans.paddle_seg_method(layers.layer_class, layers.seg_method, texts.values())
    regex = re.compile(seg_method, re.IGNORECASE)
    named = {raw: plans.paddle_layer(regex, text) for raw, text in texts.items()}
    names = [""] * len(layers)  # Paddle's name of each of vppctl's layers
    counts = [0] * len(layers)
    matched = [i for i in block.forward_ops if named[structs[i]] is not None]
    for i in matched:
        k, name = layers.op_layer[i], named[structs[i]]
        assert name is not None
        if k == NO_LAYER or names[k] not in ("", name):
            where = "no layer" if k == NO_LAYER else f"layer {layers.layers[k].name}"
            raise ConversionError(
                f"{cannot}Paddle reads {index.op_label(0, i)} as part of layer {name} "
                f"(vpp_seg_method {seg_method!r}), vppctl as part of {where}; pass "
                "--seg-method with the layer's class name, which both read alike"
            )
        names[k] = name
        counts[k] += 1
    if "" in names:
        k = names.index("")
        raise ConversionError(
            f"{cannot}Paddle's vpp_seg_method {seg_method!r} reads no layer in layer "
            f"{layers.layers[k].name}; pass --seg-method with the layer's class name"
        )
    if len(set(names)) != len(names):
        twice = next(n for n, times in Counter(names).items() if times > 1)
        raise ConversionError(
            f"{cannot}Paddle reads two of vppctl's layers as one, {twice} (vpp_seg_method "
            f"{seg_method!r}); pass --seg-method with the layer's class name"
        )
    for i in range(matched[0], matched[-1] + 1):
        if named.get(structs[i]) is None and roles[i] in FORWARD_ROLES:
            _refuse_stray(index, i, cannot)
    by_name = iter(names)
    return plans.PirPlan(
        pp=plan.pp,
        vpp=plan.vpp,
        seg_method=seg_method,
        virtual_stages=tuple(tuple(next(by_name) for _ in s.layers) for s in plan.segments),
        split=plan.split if plan.split != "balanced" else f"balanced by {plan.cost_kind}",
        source=source,
        layer_ops=tuple(counts),
        digest=plans.program_digest(seg_method, names, counts),
    )


def _refuse_for_pir(planned: Planned, cannot: str) -> None:
    """What Paddle's PIR completion cannot take, whatever the layers are called."""
    plan = planned.plan
    if plan.placement != "loop":
        raise ConversionError(
            f"{cannot}--placement {plan.placement}: Paddle's PIR VPP pass runs segment k on "
            "stage k % pp, chunk k // pp (loop placement) and has no V-shaped schedule; drop "
            "--placement"
        )
    if plan.pp < 2 or plan.vpp < 2:
        raise ConversionError(
            f"{cannot}pp {plan.pp}, vpp {plan.vpp}: Paddle runs its PIR VPP completion for pp "
            ">= 2 and vpp >= 2 only; a plain-PP program needs no plan"
        )
    if plan.mode != "auto":
        raise ConversionError(
            f"{cannot}its layers' stages already interleave (a program Paddle completed for "
            "VPP); Paddle's completion places the layers of a plain-PP program: convert the "
            "plain-PP program"
        )
    meshes = [planned.index.meshes[m] for m in planned.stages]
    world = len({p for mesh in meshes for p in mesh.process_ids})
    group = max(world // plan.pp, 1)
    for s, mesh in enumerate(meshes):
        if any(p // group != s for p in mesh.process_ids):
            raise ConversionError(
                f"{cannot}stage mesh {s} holds ranks {list(mesh.process_ids)}, not the rank "
                f"block of stage {s} of {plan.pp} (Paddle reads a rank's stage as rank // "
                f"(world / pp) = rank // {group}); give stage s the ranks "
                f"[s*{group}, (s+1)*{group})"
            )


def _refuse_stray(index: ProgramIndex, op: int, cannot: str) -> None:
    """Paddle's completion refuses an op between the layers that is in no layer, unless it
    is a reshard or has no dist attr (`_get_seg_struct_names`)."""
    block = index.global_block
    if block.ops.type[op] == b"dist_op.reshard" or block.op_mesh[op] == NO_MESH:
        return
    raise ConversionError(
        f"{cannot}{index.op_label(0, op)} lies between the layers but in none of them, and "
        "Paddle's completion allows only reshards there (\"The op ... without seg_method in "
        'its struct_name should only be reshard"); move it into a layer, or out of the '
        "layers' region"
    )
