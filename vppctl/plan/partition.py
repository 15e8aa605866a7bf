"""Partition: which layers form which segment, and where each goes (rules 4 and 5).

The plan's options (`PlanOptions`, and `PlanSpec` with every default filled in), the
`Plan` and its `Segment`s, the splits by count (uniform, keep, explicit; the balanced
ones are `vppctl.plan.balanced`'s), and `make_plan`, which turns the program's layer
facts into the plan: plain PP (auto) or an interleaved layout kept as it is (manual).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar

from vppctl import validate
from vppctl.choices import (
    COST_KINDS,
    MAX_DEGREE,
    MAX_LAYERS,
    PLACEMENTS,
    SPLITS,
    CostKind,
    Mode,
    Placement,
    Split,
)
from vppctl.errors import ConversionError, UsageError
from vppctl.mesh import Mesh
from vppctl.plan.balanced import stage_balanced_sizes
from vppctl.plan.layout import layout_split
from vppctl.plan.placement import place, refuse_too_few, stage_imbalance, stage_loads
from vppctl.units import runs_text


@validate.named_fields
@dataclass(frozen=True)
class PlanOptions:
    """How the layers are split into segments and placed on stages: the `Plan` that
    `convert` makes (`vppctl plan`'s search is `PlanSearchOptions`).

    Each field left None takes the command's default: `vpp` is required to convert (a
    converted program is simulated with its recorded plan); `pp` is the program's;
    `placement` is loop (for `simulate`, a converted program's recorded one); `split` is
    explicit with `layers_per_chunk`, else uniform (`simulate`: uniform when the layers
    divide into pp*vpp segments, else balanced, with a warning); `cost` is params.
    Values are checked when the object is made (UsageError, exit 2)."""

    vpp: int | None = None
    pp: int | None = None
    placement: Placement | None = None
    split: Split | None = None
    # Layer counts per segment in virtual-stage order (Megatron's manual split).
    layers_per_chunk: tuple[int, ...] = ()
    cost: CostKind | None = None  # what a layer costs, for the balanced split
    # The split as Megatron-Core's layout (`vppctl.plan.layout`): its stages are the
    # segments, its vpp the stages over pp; resolved against the program (`resolved`).
    layout: str | None = None

    FLAGS: ClassVar[Mapping[str, str]] = {
        "vpp": "--vpp",
        "pp": "--pp",
        "placement": "--placement",
        "split": "--split",
        "layers_per_chunk": "--layers-per-chunk",
        "cost": "--cost",
        "layout": "--layout",
    }

    def __post_init__(self) -> None:
        validate.integer(self, "vpp", 1, MAX_DEGREE, optional=True)
        validate.integer(self, "pp", 1, MAX_DEGREE, optional=True)
        validate.choice(self, "placement", PLACEMENTS, optional=True)
        validate.choice(self, "split", SPLITS, optional=True)
        validate.integers(self, "layers_per_chunk", 1, MAX_LAYERS, example="(3, 4, 4, 5)")
        validate.choice(self, "cost", COST_KINDS, optional=True)
        if self.layers_per_chunk and self.split not in (None, "explicit"):
            raise UsageError(
                f"{validate.where(self, 'layers_per_chunk')} sets the split itself, but "
                f"{validate.where(self, 'split')} is {self.split!r}: drop the split"
            )
        if self.layout is not None:
            self._check_layout()
        elif self.split == "explicit" and not self.layers_per_chunk:
            raise UsageError(
                f"{validate.where(self, 'split')} 'explicit' needs the counts: pass "
                f"{validate.where(self, 'layers_per_chunk')}, e.g. 3,4,4,5"
            )

    def _check_layout(self) -> None:
        validate.text(self, "layout", "a layout string, e.g. 'Et*3|t*4|t*4|t*3L'")
        given = [
            validate.where(self, name)
            for name, value in (
                ("layers_per_chunk", self.layers_per_chunk),
                ("split", self.split not in (None, "explicit")),
                ("placement", self.placement == "v"),
            )
            if value
        ]
        if given:
            raise UsageError(
                f"{validate.where(self, 'layout')} sets the split itself, loop-placed (a "
                f"Megatron layout cannot say V): drop {', '.join(given)}"
            )

    def resolved(self, pp: int, n_layers: int) -> tuple[PlanOptions, list[str]]:
        """These options with the layout turned into the explicit split it names (its vpp
        and the layers of each segment) for a program of `pp` stages and `n_layers`
        layers, and the layout's warnings; unchanged without a layout."""
        if self.layout is None:
            return self, []
        layout, warnings = layout_split(self.layout, pp, self.vpp, n_layers)
        counts = layout.decoders_per_stage()
        options = replace(
            self, vpp=layout.vpp, split="explicit", layers_per_chunk=counts, layout=None
        )
        return options, warnings

    def spec(self) -> PlanSpec:
        """The options with `convert`'s defaults filled in; `vpp` is required (a layout
        must be `resolved` first)."""
        if self.layout is not None:
            raise ValueError("resolve the layout against the program first (resolved)")
        if self.vpp is None:
            raise UsageError(
                f"{validate.where(self, 'vpp')} is required to convert: the chunks per stage, "
                f"e.g. PlanOptions(vpp=2), or {validate.where(self, 'layout')}"
            )
        counts = self.layers_per_chunk
        return PlanSpec(
            vpp=self.vpp,
            pp=self.pp,
            placement=self.placement or "loop",
            split=self.split or ("explicit" if counts else "uniform"),
            layers_per_chunk=counts,
            cost=self.cost or "params",
        )


@dataclass(frozen=True)
class PlanSpec:
    """`PlanOptions` with every default filled in: what the planner works from."""

    vpp: int
    pp: int | None
    placement: Placement
    split: Split
    layers_per_chunk: tuple[int, ...]
    cost: CostKind


@dataclass(frozen=True)
class Segment:
    """One segment (virtual stage): a contiguous run of layers, the stage and chunk it
    is placed on, its stage's mesh, its forward ops and its cost (by the plan's cost kind)."""

    virtual_stage: int
    stage: int
    chunk: int
    mesh: Mesh
    layers: tuple[str, ...]
    first_layer: int  # index of its first layer in program order
    op_begin: int  # global-block forward ops [op_begin, op_end)
    op_end: int
    cost: int = 0


@dataclass(frozen=True)
class Plan:
    """Which layers form which segment, and where each goes: what `convert` decides and
    records in the program (`mode`: auto moves layers of a plain-PP program, manual keeps
    an already interleaved layout)."""

    pp: int
    vpp: int
    seg_method: str
    layer_class: str
    detected: bool
    placement: Placement
    mode: Mode
    split: Split
    cost_kind: CostKind
    stage_meshes: tuple[Mesh, ...]
    segments: tuple[Segment, ...]
    n_layers: int
    warnings: tuple[str, ...] = field(default=())

    def layer_segment(self) -> list[int]:
        """Layer index -> segment index."""
        out: list[int] = []
        for seg in self.segments:
            out += [seg.virtual_stage] * len(seg.layers)
        return out

    @property
    def imbalance(self) -> float:
        """Max segment cost over the mean (1.0 = perfectly even)."""
        costs = [s.cost for s in self.segments]
        mean = sum(costs) / len(costs) if costs else 0
        return max(costs) / mean if mean else 1.0

    @property
    def stage_loads(self) -> list[int]:
        """Each stage's load: the sum of its segments' costs (what a schedule sees)."""
        return stage_loads([s.cost for s in self.segments], self.pp, self.placement)

    @property
    def stage_imbalance(self) -> float:
        """Busiest stage's load over the mean stage load (1.0 = perfectly even)."""
        return stage_imbalance([s.cost for s in self.segments], self.pp, self.placement)


def uniform_sizes(n_layers: int, pp: int, vpp: int) -> list[int]:
    """Rule 5: pp*vpp segments of n_layers/(pp*vpp) layers; refuse when it does not divide."""
    parts = pp * vpp
    if n_layers % parts:
        working = [v for v in range(1, n_layers // pp + 1) if n_layers % (pp * v) == 0]
        hint = (
            f"--vpp values that divide evenly: {', '.join(map(str, working))}"
            if working
            else f"no --vpp divides {n_layers} layers evenly over pp {pp}"
        )
        raise ConversionError(
            f"{n_layers} layers do not divide into pp*vpp = {pp}*{vpp} = {parts} equal "
            f"segments; {hint}; or use --split balanced, --split keep or --layers-per-chunk"
        )
    return [n_layers // parts] * parts


def keep_sizes(layer_stages: Sequence[int], pp: int, vpp: int, placement: Placement) -> list[int]:
    """Paddle's newer rule: keep each stage's layer count, deal it over the stage's chunks.

    Each stage needs at least vpp layers; its count is split as evenly as
    possible over its chunks, earlier chunks taking the extra layers.
    """
    counts = [0] * pp
    for s in layer_stages:
        counts[s] += 1
    short = [s for s in range(pp) if counts[s] < vpp]
    if short:
        s = short[0]
        raise ConversionError(
            f"--split keep needs at least vpp = {vpp} layers on every stage, but stage {s} "
            f"has {counts[s]}; lower --vpp or use --split balanced"
        )
    sizes = []
    for k in range(pp * vpp):
        stage, chunk = place(k, pp, placement)
        base, extra = divmod(counts[stage], vpp)
        sizes.append(base + (chunk < extra))
    return sizes


def explicit_sizes(sizes: Sequence[int], n_layers: int, pp: int, vpp: int) -> list[int]:
    """--layers-per-chunk: explicit counts in virtual-stage order (Megatron's manual split)."""
    if len(sizes) != pp * vpp:
        raise UsageError(
            f"--layers-per-chunk gives {len(sizes)} counts but pp*vpp = {pp * vpp} segments "
            "need one count each, in virtual-stage order"
        )
    if any(n < 1 for n in sizes):
        raise UsageError("--layers-per-chunk counts must all be at least 1 (no empty segment)")
    if sum(sizes) != n_layers:
        raise ConversionError(
            f"--layers-per-chunk counts add up to {sum(sizes)} but the program has "
            f"{n_layers} layers; make them add up to {n_layers}"
        )
    return list(sizes)


def segment_costs(sizes: Sequence[int], costs: Sequence[int], pre: int, post: int) -> list[int]:
    out, i = [], 0
    for n in sizes:
        out.append(sum(costs[i : i + n]))
        i += n
    if out:
        out[0] += pre
        out[-1] += post
    return out


def choose_mode(layer_stages: Sequence[int]) -> Mode:
    """Rule 4: stages that never decrease in program order mean plain PP (auto)."""
    return "auto" if all(a <= b for a, b in zip(layer_stages, layer_stages[1:])) else "manual"


def check_manual_layout(
    layer_stages: Sequence[int], sizes: Sequence[int], pp: int, placement: Placement
) -> None:
    """Manual mode keeps meshes: the layout must be the one the plan would produce."""
    expected: list[int] = []
    for k, n in enumerate(sizes):
        expected += [place(k, pp, placement)[0]] * n
    if list(layer_stages) != expected:
        raise ConversionError(
            "the program already has an interleaved layout (layer stages decrease), but not "
            f"the one pp {pp} vpp {len(sizes) // pp} gives: layer stages are "
            f"{_stages_text(layer_stages)}, expected {_stages_text(expected)}; convert the "
            "plain-PP program instead, or pass the --vpp/--split that produced this layout"
        )


def _stages_text(stages: Sequence[int]) -> str:
    """A stage sequence in runs, cut at 200 characters: `[0x2,1x2,0x2]`."""
    text = runs_text(stages)
    return f"[{text}]" if len(text) < 200 else f"[{text[:200]}...]"


@dataclass(frozen=True)
class LayerFacts:
    """What the planner needs to know about the program's layers (plain values)."""

    names: tuple[str, ...]
    first_ops: tuple[int, ...]  # each layer's first global-block op
    stages: tuple[int, ...]  # each layer's stage in the input (index into stage meshes)
    costs: tuple[int, ...]  # each layer's cost under the chosen cost measure
    pre_cost: int  # ops before the first layer
    post_cost: int  # ops after the last layer
    forward_end: int  # one past the last forward op of the global block
    seg_method: str
    layer_class: str
    detected: bool


def make_plan(
    facts: LayerFacts, stage_meshes: Sequence[Mesh], opts: PlanSpec, warnings: Sequence[str] = ()
) -> Plan:
    """Rules 4 and 5 (and the split and placement options): the pure plan."""
    pp, vpp, n = len(stage_meshes), opts.vpp, len(facts.names)
    mode = choose_mode(facts.stages)
    sizes = _sizes(facts, pp, opts)
    if mode == "manual":
        check_manual_layout(facts.stages, sizes, pp, opts.placement)
    costs = segment_costs(sizes, facts.costs, facts.pre_cost, facts.post_cost)
    segments = []
    first = 0
    for k, size in enumerate(sizes):
        stage, chunk = place(k, pp, opts.placement)
        last = first + size
        segments.append(
            Segment(
                virtual_stage=k,
                stage=stage,
                chunk=chunk,
                mesh=stage_meshes[stage],
                layers=facts.names[first:last],
                first_layer=first,
                op_begin=0 if k == 0 else facts.first_ops[first],
                op_end=facts.first_ops[last] if last < n else facts.forward_end,
                cost=costs[k],
            )
        )
        first = last
    return Plan(
        pp=pp,
        vpp=vpp,
        seg_method=facts.seg_method,
        layer_class=facts.layer_class,
        detected=facts.detected,
        placement=opts.placement,
        mode=mode,
        split=opts.split,
        cost_kind=opts.cost,
        stage_meshes=tuple(stage_meshes),
        segments=tuple(segments),
        n_layers=n,
        warnings=tuple(warnings),
    )


def _sizes(facts: LayerFacts, pp: int, opts: PlanSpec) -> list[int]:
    n, vpp = len(facts.names), opts.vpp
    if opts.split == "explicit":
        return explicit_sizes(opts.layers_per_chunk, n, pp, vpp)
    if opts.split == "uniform":
        return uniform_sizes(n, pp, vpp)
    if n < pp * vpp:
        raise refuse_too_few(n, pp * vpp, pp)
    if opts.split == "keep":
        return keep_sizes(facts.stages, pp, vpp, opts.placement)
    return stage_balanced_sizes(
        facts.costs, pp, vpp, opts.placement, facts.pre_cost, facts.post_cost
    )
