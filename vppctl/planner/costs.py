"""Costs: a program -> the plan to simulate and the forward cost of each of its segments.

The plan is made exactly as `vppctl convert` makes it (`convert.plan_program` and
`replan`: the same layer resolution, options, defaults and split functions), so
that `simulate` and `convert --micro-batches` see the same segments:

* a converted program is simulated as it was converted: pp, vpp, placement and each
  segment's layers come from its recorded plan, and plan options that contradict
  it are refused;
* a program whose ops carry chunk ids past 0 but no recorded plan (Paddle's own VPP
  completion) is simulated as its chunk ids split it: vpp from them, as `verify` reads
  it, and each segment's layers; with `--split`, `--layers-per-chunk` or `--placement`,
  as those ask at that vpp;
* any other program takes `convert`'s plan options (`--vpp` is then required); with
  no split given, the uniform split when the layers divide, else the stage-balanced
  one, with a warning saying so.

A segment's cost is its forward FLOP estimate (`cost.matmul_flops`), or its forward op
count when the program has no matmul shapes. The simulator's costs are scaled so that
the mean stage's forward of one micro-batch costs 1, whatever vpp
(`vppctl.planner.simulate.SizedPlan`): plans of one program then share one time unit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from vppctl.convert import ConvertOptions, Planned, plan_program, replan
from vppctl.engine import LayerSet, ProgramIndex, build_index, layer_costs, resolve_layers
from vppctl.errors import ConversionError, UsageError
from vppctl.mesh import MeshId
from vppctl.plan import MAX_DEGREE, Placement, Plan, PlanOptions, segment_costs
from vppctl.program import Program, RecordedPlan, read_plan

Measure = Literal["flops", "ops"]


@dataclass(frozen=True)
class ResolvedPlan:
    """The plan a program is simulated with, and where it came from."""

    planned: Planned
    recorded: bool  # taken from the program's recorded plan
    split: str  # the split's name as converted or asked ("balanced", "uniform", ...)
    warnings: tuple[str, ...]

    @property
    def plan(self) -> Plan:
        return self.planned.plan


def resolve_plan(program: Program, request: PlanOptions, seg_method: str | None) -> ResolvedPlan:
    """The plan to simulate (see the module docstring); `request`'s fields are None where
    not given."""
    recorded = read_plan(program.header)
    if recorded is not None:
        return _recorded(program, request, seg_method, recorded)
    if request.vpp is None:
        index = build_index(program)
        vpp = _chunk_vpp(index)
        if vpp < 2:
            raise UsageError(
                "--vpp is required: the program carries no recorded plan (it was not written "
                "by vppctl convert) and no chunk ids past 0, so pass --vpp, or simulate the "
                "converted program"
            )
        as_ids = request.split is None and not request.layers_per_chunk
        if as_ids and request.placement in (None, "loop"):
            return _as_chunked(program, index, request, seg_method, vpp)
        request = replace(request, vpp=vpp)  # the split, or the placement, as asked
    convert_opts = ConvertOptions(plan=request, seg_method=seg_method)
    spec = request.spec()
    if request.split is not None or request.layers_per_chunk:
        return ResolvedPlan(plan_program(program, convert_opts), False, spec.split, ())
    return _default_split(program, convert_opts)


def _default_split(program: Program, convert_opts: ConvertOptions) -> ResolvedPlan:
    """Uniform when the layers divide into pp*vpp, else stage-balanced (with a warning).

    A one-chunk balanced plan (always quick) tells how many layers and stages there
    are; when even it is refused, the uniform plan's own refusal is the answer."""
    opts = convert_opts.plan
    spec = opts.spec()
    try:
        probe = plan_program(
            program, replace(convert_opts, plan=replace(opts, vpp=1, split="balanced"))
        )
    except ConversionError:
        return ResolvedPlan(plan_program(program, convert_opts), False, "uniform", ())
    n, pp = probe.plan.n_layers, probe.plan.pp
    if n % (pp * spec.vpp) == 0:
        return ResolvedPlan(replan(probe, opts), False, "uniform", ())
    warning = (
        f"{n} layers do not divide into pp*vpp = {pp}*{spec.vpp} equal segments: "
        f"simulating --split balanced (--cost {spec.cost}); pass --split to choose"
    )
    planned = replan(probe, replace(opts, split="balanced"))
    return ResolvedPlan(planned, False, "balanced", (warning,))


def _chunk_vpp(index: ProgramIndex) -> int:
    """vpp as the global block's chunk ids say it (1 + the largest; ids past any sane
    degree ignored): 0 when no op carries one, as in a PIR program Paddle has not
    completed."""
    chunks = index.global_block.ops.chunk
    return 1 + max((c for c in chunks if 0 <= c < MAX_DEGREE), default=-1)


def _as_chunked(
    program: Program, index: ProgramIndex, request: PlanOptions, seg_method: str | None, vpp: int
) -> ResolvedPlan:
    """A program whose ops carry chunk ids but no recorded plan (Paddle's own VPP completion,
    PIR or legacy), simulated as the chunk ids split it: `vpp` from them, loop placement, and
    each segment's layers from the chunk of its first op (split `keep` when that is the
    split, as it is for Paddle's PIR completion, else `explicit`)."""
    layers = resolve_layers(index, seg_method, None)
    stages, _ = index.stage_mesh_ids()
    counts, why = _chunk_split(index, layers, stages, vpp)
    if counts is None:
        raise UsageError(
            f"the program's chunk ids (vpp {vpp}) do not split its layers into loop-placed "
            f"segments ({why}); pass --vpp and --split to simulate a split of your own"
        )
    keep = replace(request, vpp=vpp, placement="loop", split="keep")
    planned: Planned | None
    try:
        planned = plan_program(program, ConvertOptions(plan=keep, seg_method=seg_method))
    except ConversionError:
        planned = None  # keep cannot make it: the counts below do
    if planned is not None and _sizes(planned.plan) == counts:
        return ResolvedPlan(planned, False, "keep", ())
    explicit = replace(keep, split="explicit", layers_per_chunk=counts)
    if planned is not None:
        return ResolvedPlan(replan(planned, explicit), False, "explicit", ())
    planned = plan_program(program, ConvertOptions(plan=explicit, seg_method=seg_method))
    return ResolvedPlan(planned, False, "explicit", ())


def _sizes(plan: Plan) -> tuple[int, ...]:
    return tuple(len(segment.layers) for segment in plan.segments)


def _chunk_split(
    index: ProgramIndex, layers: LayerSet, stages: Sequence[MeshId], vpp: int
) -> tuple[tuple[int, ...] | None, str]:
    """(layers per segment in virtual-stage order, or None and why not) the chunk ids give
    the layers, loop-placed: segment k is chunk k // pp of stage k % pp, each layer in the
    segment of its first op, the segments in layer order and none empty."""
    block = index.global_block
    chunks = block.ops.chunk
    pp = len(stages)
    stage_of = {m: s for s, m in enumerate(stages)}
    counts = [0] * (pp * vpp)
    last = 0
    for k, layer in enumerate(layers.layers):
        first = next(i for i in range(layer.first, layer.last + 1) if layers.op_layer[i] == k)
        stage, chunk = stage_of.get(block.op_mesh[first]), chunks[first]
        if stage is None or not 0 <= chunk < vpp:
            return None, f"layer {layer.name} has no stage mesh or no chunk id"
        segment = chunk * pp + stage
        if segment < last:
            return None, f"layer {layer.name} comes after a later segment's layers"
        last = segment
        counts[segment] += 1
    if 0 in counts:
        k = counts.index(0)
        return None, f"stage {k % pp} chunk {k // pp} holds no layer"
    return tuple(counts), ""


def _recorded(
    program: Program, request: PlanOptions, seg_method: str | None, recorded: RecordedPlan
) -> ResolvedPlan:
    counts = tuple(len(layers) for _, _, layers in recorded.segments)
    if len(counts) != recorded.pp * recorded.vpp or recorded.placement not in ("loop", "v"):
        raise ConversionError(
            f"the program's recorded plan is inconsistent ({len(counts)} segments for pp "
            f"{recorded.pp} x vpp {recorded.vpp}, placement {recorded.placement!r}); run "
            "vppctl verify on it, or simulate the plain-PP program"
        )
    placement: Placement = "v" if recorded.placement == "v" else "loop"
    asked = {
        "--vpp": (request.vpp, recorded.vpp),
        "--placement": (request.placement, placement),
        "--split": (request.split, recorded.split),
        "--layers-per-chunk": (request.layers_per_chunk or None, counts),
    }
    conflicts = [
        f"{flag} {_text(given)}" for flag, (given, had) in asked.items() if given not in (None, had)
    ]
    if conflicts:
        raise UsageError(
            f"the program was converted with pp {recorded.pp} x vpp {recorded.vpp}, "
            f"{placement} placement, split {recorded.split}, and is simulated as converted; "
            f"drop {', '.join(conflicts)}, or simulate the plain-PP program it came from"
        )
    opts = PlanOptions(
        vpp=recorded.vpp,
        pp=request.pp,
        placement=placement,
        split="explicit",
        layers_per_chunk=counts,
        cost=request.cost or "params",
    )
    planned = plan_program(program, ConvertOptions(plan=opts, seg_method=seg_method))
    return ResolvedPlan(planned, True, recorded.split, ())


def _text(value: object) -> str:
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return str(value)


class CostModel:
    """Each layer's forward cost in one program, computed once: FLOPs, or forward op
    counts when no op has matmul shapes. Any plan's segment costs are sums of them."""

    def __init__(self, planned: Planned) -> None:
        costs = layer_costs(planned.index, planned.layers, "flops")
        measure: Measure = "flops"
        if not any(costs.layers) and not costs.pre and not costs.post:
            costs = layer_costs(planned.index, planned.layers, "ops")
            measure = "ops"
        self.layers, self.pre, self.post = costs.layers, costs.pre, costs.post
        self.measure: Measure = measure

    def segments(self, plan: Plan) -> tuple[int, ...]:
        """Each segment's forward cost (integer FLOPs or ops), in virtual-stage order."""
        sizes = [len(s.layers) for s in plan.segments]
        return tuple(segment_costs(sizes, self.layers, self.pre, self.post))
