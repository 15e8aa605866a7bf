"""Costs: a program -> the plan to simulate and the forward cost of each of its segments.

The plan is made exactly as `vppctl convert` makes it (`convert.plan_program` and
`replan`: the same layer resolution, options, defaults and split functions), so
that `simulate` and `convert --micro-batches` see the same segments:

* a converted program is simulated as it was converted: pp, vpp, placement and each
  segment's layers come from its recorded plan, and plan options that contradict
  it are refused;
* any other program takes `convert`'s plan options (`--vpp` is then required); with
  no split given, the uniform split when the layers divide, else the stage-balanced
  one, with a warning saying so.

A segment's cost is its forward FLOP estimate (`cost.matmul_flops`), or its forward op
count when the program has no matmul shapes. The simulator's costs are scaled so that
the mean stage's forward of one micro-batch costs 1, whatever vpp
(`vppctl.planner.simulate.SizedPlan`): plans of one program then share one time unit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from vppctl.convert import ConvertOptions, Planned, plan_program, replan
from vppctl.engine import layer_costs
from vppctl.errors import ConversionError, UsageError
from vppctl.plan import Placement, Plan, PlanOptions, segment_costs
from vppctl.planner.measured import Estimate
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
        raise UsageError(
            "--vpp is required: the program carries no recorded plan (it was not written "
            "by vppctl convert), so pass --vpp, or simulate the converted program"
        )
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
        self.planned = planned
        costs = layer_costs(planned.index, planned.layers, "flops")
        measure: Measure = "flops"
        if not any(costs.layers) and not costs.pre and not costs.post:
            costs = layer_costs(planned.index, planned.layers, "ops")
            measure = "ops"
        self.layers, self.pre, self.post = costs.layers, costs.pre, costs.post
        self.measure: Measure = measure

    def estimate(self) -> Estimate:
        """The layers' forward costs as measured costs are filled from: `pre` and `post`
        None where the program has no forward op before the first layer or after the last
        (measured costs need not give them then)."""
        ops = layer_costs(self.planned.index, self.planned.layers, "ops")
        return Estimate(
            layers=self.layers,
            pre=self.pre if ops.pre else None,
            post=self.post if ops.post else None,
            measure=self.measure,
        )

    def segments(self, plan: Plan) -> tuple[int, ...]:
        """Each segment's forward cost (integer FLOPs or ops), in virtual-stage order."""
        sizes = [len(s.layers) for s in plan.segments]
        return tuple(segment_costs(sizes, self.layers, self.pre, self.post))
