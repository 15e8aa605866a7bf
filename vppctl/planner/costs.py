"""Costs: a program -> the plan to simulate, the forward cost of each of its segments and
the cost of a hop between stages.

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

A hop between stages costs, unless given (`--p2p-cost`), what the plan's largest cut
carries (`MemoryModel.hop_bytes`: one micro-batch's boundary activations) over a named
device and link (`LINKS`, vendor peak figures; `--link`), in that time unit: the mean
stage's forward FLOPs at the device's peak. With measured costs (seconds) a hop is in
seconds too: its bytes over the link (bytes / bandwidth + latency), and a `--p2p-cost`
given is read in seconds. `Communication` is the one place a hop's cost comes from, as
`CostModel` is for a segment's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Literal

from vppctl.choices import Link
from vppctl.convert import ConvertOptions, Planned, plan_program, replan
from vppctl.engine import LayerSet, ProgramIndex, build_index, layer_costs, resolve_layers
from vppctl.errors import ConversionError, UsageError
from vppctl.mesh import MeshId
from vppctl.plan import MAX_DEGREE, Placement, Plan, PlanOptions, segment_costs
from vppctl.planner.measured import NS, Estimate
from vppctl.planner.memory import MemoryModel, iec
from vppctl.program import Program, RecordedPlan, read_plan
from vppctl.units import seconds_text

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
    if request.vpp is None and request.layout is None:
        index = build_index(program)
        vpp = _chunk_vpp(index)
        if vpp < 2:
            raise UsageError(
                "--vpp is required: the program carries no recorded plan (it was not written "
                "by vppctl convert) and no chunk ids past 0, so pass --vpp (or --layout), or "
                "simulate the converted program"
            )
        as_ids = request.split is None and not request.layers_per_chunk
        if as_ids and request.placement in (None, "loop"):
            return _as_chunked(program, index, request, seg_method, vpp)
        request = replace(request, vpp=vpp)  # the split, or the placement, as asked
    convert_opts = ConvertOptions(plan=request, seg_method=seg_method)
    if request.split is not None or request.layers_per_chunk or request.layout:
        planned = plan_program(program, convert_opts)
        return ResolvedPlan(planned, False, planned.plan.split, ())
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
        "--layout": (_layout_counts(request, recorded.pp, sum(counts)), counts),
    }
    conflicts = [
        f"{flag} {repr(request.layout) if flag == '--layout' else _text(given)}"
        for flag, (given, had) in asked.items()
        if given not in (None, had)
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


def _layout_counts(request: PlanOptions, pp: int, n_layers: int) -> tuple[int, ...] | None:
    """The layers per segment a layout asks for (None: no layout)."""
    if request.layout is None:
        return None
    return request.resolved(pp, n_layers)[0].layers_per_chunk


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


# -- a pipeline hop --------------------------------------------------------------------


@dataclass(frozen=True)
class LinkProfile:
    """A device and the link between two pipeline stages: the vendor's peak figures
    (docs/plan.md lists each with its source). A hop of `b` bytes takes `latency + b /
    bandwidth` seconds; the program's forward FLOPs at `flops` give the time unit."""

    name: Link
    device: str
    flops: float  # dense BF16 tensor FLOP/s, peak
    link: str
    bandwidth: float  # bytes/s in one direction, peak
    latency: float  # seconds per message (a modelling choice, docs/plan.md)

    def text(self) -> str:
        """`h100-ib (H100 SXM5 989.4 TFLOP/s, 50 GB/s + 20 us, vendor peaks)`."""
        return (
            f"{self.name} ({self.device} {self.flops / 1e12:g} TFLOP/s, "
            f"{self.bandwidth / 1e9:g} GB/s + {self.latency * 1e6:g} us, vendor peaks)"
        )


LINKS: dict[Link, LinkProfile] = {
    "h100-nvlink": LinkProfile(
        "h100-nvlink", "H100 SXM5", 989.4e12, "NVLink 4 (NVSwitch)", 450e9, 10e-6
    ),
    "h100-ib": LinkProfile(
        "h100-ib", "H100 SXM5", 989.4e12, "InfiniBand NDR 400 Gb/s", 50e9, 20e-6
    ),
    "a100-nvlink": LinkProfile(
        "a100-nvlink", "A100 SXM4", 312e12, "NVLink 3 (NVSwitch)", 300e9, 10e-6
    ),
    "a100-ib": LinkProfile("a100-ib", "A100 SXM4", 312e12, "InfiniBand HDR 200 Gb/s", 25e9, 20e-6),
}
# Pipeline neighbours sit on different nodes in the usual rank order (Megatron's
# "tp-cp-ep-dp-pp" varies pp slowest), so a hop crosses the network by default.
DEFAULT_LINK: Link = "h100-ib"
# The denominator a hop's cost is rounded to (the simulator's ticks grow with it).
_HOP_DENOMINATOR = 10_000


@dataclass(frozen=True)
class HopCost:
    """What one hop between two stages costs, in the simulator's time unit (`unit`
    "forward": the mean stage's forward of one micro-batch; "s": seconds, with measured
    costs), and where that comes from: the program's bytes over a link (`link`), a number
    given (`--p2p-cost`), or nothing (`none`: no program, or nothing to time it with)."""

    cost: Fraction
    source: Literal["link", "given", "none"]
    hop_bytes: int | None = None  # one micro-batch's forward across the plan's largest cut
    link: LinkProfile | None = None
    seconds: float | None = None  # of one hop
    unit_seconds: float | None = None  # of the time unit (None in seconds: it is 1 s)
    why: str = ""  # why it is not counted (source "none")
    unit: Literal["forward", "s"] = "forward"

    def text(self) -> str:
        """The header line: `p2p: 64.0 KiB per hop ..., a hop costs 0.93 x ...`."""
        if self.source == "given":
            if not self.cost:
                return "p2p: not counted (--p2p-cost 0)"
            if self.unit == "s":
                return (
                    f"p2p: {seconds_text(float(self.cost))} per hop (--p2p-cost, in seconds "
                    "as the measured costs)"
                )
            return f"p2p: {float(self.cost):.4g} x the mean stage's forward per hop (--p2p-cost)"
        if self.source == "none" or self.link is None:
            return f"p2p: not counted ({self.why}); pass --p2p-cost to count it"
        assert self.hop_bytes is not None and self.seconds is not None
        if self.unit == "s":
            return (
                f"p2p: {iec(self.hop_bytes)} per hop over {self.link.text()}: "
                f"{seconds_text(float(self.cost))} per hop (bytes / bandwidth + latency); "
                "--p2p-cost 0 leaves it out"
            )
        return (
            f"p2p: {iec(self.hop_bytes)} per hop over {self.link.text()}: "
            f"{self.seconds * 1e6:.3g} us, {float(self.cost):.3g}x a stage's forward; "
            "--p2p-cost 0 leaves it out"
        )


class Communication:
    """A hop's cost for any plan of one program: the one place it comes from. Given
    (`--p2p-cost`), that number; else the bytes the plan's largest cut carries
    (`MemoryModel.hop_bytes`, at the memory options' micro-batch size and sequence length)
    over `link`, in units of the mean stage's forward, timed at the device's peak FLOP/s
    with the program's matmul FLOPs at the same sizes. With measured costs (`seconds`),
    the hop is in seconds: the number given, or the bytes over `link`, to the nanosecond."""

    def __init__(
        self,
        planned: Planned,
        memory: MemoryModel,
        given: float | Fraction | None,
        link: Link | None,
        seconds: bool = False,
    ) -> None:
        self.memory = memory
        self.given = None if given is None else Fraction(given)
        self.link = LINKS[link or DEFAULT_LINK]
        self.unit: Literal["forward", "s"] = "s" if seconds else "forward"
        self.unit_seconds: float | None = None
        self.why = ""
        if self.given is None and memory.unknown_later and memory.opts.seq_len is None:
            what = (
                "a hop's bytes are" if seconds else "neither a hop's bytes nor a forward's time is"
            )
            self.why = (
                f"the program leaves the sequence length unknown (a later -1 dimension), so "
                f"{what} known: pass --seq-len"
            )
        elif self.given is None and not seconds:
            opts = memory.opts
            sizes = (opts.micro_batch_size, opts.seq_len or 1)
            costs = layer_costs(planned.index, planned.layers, "flops", sizes)
            flops = sum(costs.layers) + costs.pre + costs.post
            if flops:
                self.unit_seconds = flops / planned.plan.pp / self.link.flops
            else:
                self.why = "the program has no matmul shapes to time a forward with"

    def hop(self, plan: Plan) -> HopCost:
        if self.given is not None:
            return HopCost(self.given, "given", unit=self.unit)
        if self.why:
            return HopCost(Fraction(0), "none", why=self.why, unit=self.unit)
        size = self.memory.hop_bytes(plan)
        seconds = self.link.latency + size / self.link.bandwidth
        if self.unit == "s":
            cost = Fraction(round(seconds * NS), NS)
            return HopCost(cost, "link", size, self.link, seconds, unit="s")
        assert self.unit_seconds is not None
        cost = Fraction(seconds / self.unit_seconds).limit_denominator(_HOP_DENOMINATOR)
        return HopCost(cost, "link", size, self.link, seconds, self.unit_seconds)


def no_program_hop(given: float | Fraction | None, seconds: bool = False) -> HopCost:
    """A hop without a program: the number given (in seconds with measured costs), else
    nothing (no bytes to size it)."""
    unit: Literal["forward", "s"] = "s" if seconds else "forward"
    if given is not None:
        return HopCost(Fraction(given), "given", unit=unit)
    return HopCost(Fraction(0), "none", why="no program to size a hop from", unit=unit)
