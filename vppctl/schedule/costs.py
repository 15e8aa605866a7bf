"""Costs: a program -> the forward cost of each virtual stage, for the simulator.

The program is planned exactly as `vppctl convert` plans it (`convert.plan_program`:
the same layer resolution, cost measures and split functions): a converted
program by its recorded plan (its placement and layer counts), any other with
the uniform split when the layers divide, else the balanced one. The cost is
each segment's forward FLOP estimate, or its forward op count when the program
has no matmul shapes, scaled so that the mean is 1.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction

from vppctl import fields
from vppctl.convert import ConvertOptions, plan_program, replan
from vppctl.load import Program
from vppctl.plan import Placement, Plan, PlanOptions


@dataclass(frozen=True)
class ProgramCosts:
    plan: Plan  # the plan simulated
    forward: tuple[Fraction, ...]  # forward cost per virtual stage, mean 1


def program_costs(
    program: Program, *, pp: int | None, vpp: int, seg_method: str | None = None
) -> ProgramCosts:
    """The plan `convert --vpp vpp` would make (or the recorded one) and its segment costs."""
    recorded = fields.read_plan(program.header)
    if recorded and recorded.vpp == vpp and len(recorded.segments) == recorded.pp * vpp:
        placement: Placement = "v" if recorded.placement == "v" else "loop"
        counts = tuple(len(layers) for _, _, layers in recorded.segments)
        opts = PlanOptions(vpp, pp, placement, "explicit", counts, cost="flops")
    else:
        opts = PlanOptions(vpp, pp, split="balanced", cost="flops")
    planned = plan_program(program, ConvertOptions(plan=opts, seg_method=seg_method))
    if opts.split == "balanced" and planned.plan.n_layers % (planned.plan.pp * vpp) == 0:
        opts = replace(opts, split="uniform")
        planned = replan(planned, opts)
    if not any(s.cost for s in planned.plan.segments):  # no matmul shapes: count forward ops
        planned = replan(planned, replace(opts, cost="ops"))
    costs = [s.cost for s in planned.plan.segments]
    mean = Fraction(sum(costs), len(costs)) or Fraction(1)
    return ProgramCosts(planned.plan, tuple(Fraction(c) / mean for c in costs))
