"""Plan: which layers form which segment, and where each segment goes (rules 4 and 5).

Pure functions over plain values; nothing here sees protobuf or ops. The plan's
size depends on layers and stages, not on ops. The table, the JSON, the plan
written into the program and the verifier all read the same `Plan`.

Terms: `pp` stages, `vpp` chunks per stage, `pp*vpp` segments. Segment k (its
virtual stage) holds a contiguous run of layers in program order and sits on
stage/chunk `place(k)`: "loop" deals segments round-robin (stage k % pp, chunk
k // pp); "v" runs stages 0..pp-1 for even chunks and pp-1..0 for odd ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from vppctl.errors import ConversionError, UsageError
from vppctl.mesh import Mesh

Placement = Literal["loop", "v"]
Split = Literal["uniform", "keep", "balanced", "explicit"]
CostKind = Literal["params", "ops", "flops"]
Mode = Literal["auto", "manual"]  # manual: the input is already interleaved (Paddle's term)

MAX_DEGREE = 4096  # no real job has more stages or chunks; larger values are typos


@dataclass(frozen=True)
class PlanOptions:
    """What the user asked for."""

    vpp: int
    pp: int | None = None  # None: derive from the program
    placement: Placement = "loop"
    split: Split = "uniform"
    layers_per_chunk: tuple[int, ...] = ()  # with split="explicit"
    cost: CostKind = "params"

    def check(self) -> None:
        """Refuse options that cannot work whatever the program (UsageError, exit 2)."""
        if not 1 <= self.vpp <= MAX_DEGREE:
            raise UsageError(f"--vpp must be between 1 and {MAX_DEGREE}, got {self.vpp}")
        if self.pp is not None and not 1 <= self.pp <= MAX_DEGREE:
            raise UsageError(f"--pp must be between 1 and {MAX_DEGREE}, got {self.pp}")
        if self.layers_per_chunk and self.split != "explicit":
            raise UsageError(
                f"--layers-per-chunk sets the split itself, but --split {self.split} was given; "
                "drop --split"
            )
        if self.split == "explicit" and not self.layers_per_chunk:
            raise UsageError("--split explicit needs the counts: pass --layers-per-chunk N,N,...")


@dataclass(frozen=True)
class Segment:
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


def place(k: int, pp: int, placement: Placement) -> tuple[int, int]:
    """(stage, chunk) of segment k."""
    chunk, pos = divmod(k, pp)
    if placement == "v" and chunk % 2:
        return pp - 1 - pos, chunk
    return pos, chunk


def virtual_stages(pp: int, vpp: int, placement: Placement) -> dict[tuple[int, int], int]:
    """(stage, chunk) -> virtual stage: the inverse of `place`."""
    return {place(k, pp, placement): k for k in range(pp * vpp)}


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


def balanced_sizes(costs: Sequence[int], parts: int, pre: int = 0, post: int = 0) -> list[int]:
    """Min-max split: contiguous, non-empty segments minimising the most expensive one.

    `pre` (ops before the first layer) counts in segment 0 and `post` (ops after
    the last layer) in the last segment. Exact: binary search on the bottleneck
    with a greedy feasibility check, O(L log(total cost)).
    """
    n = len(costs)
    if n < parts:
        raise ConversionError(
            f"{n} layers cannot fill pp*vpp = {parts} segments (every segment needs a layer); "
            "lower --vpp"
        )
    lo = max(max(costs), pre + costs[0], costs[-1] + post)
    hi = pre + sum(costs) + post
    while lo < hi:
        mid = (lo + hi) // 2
        if _greedy_count(costs, mid, pre, post) <= parts:
            hi = mid
        else:
            lo = mid + 1
    return _split_to(_greedy_sizes(costs, lo, pre, post), parts)


def _greedy_sizes(costs: Sequence[int], bound: int, pre: int, post: int) -> list[int]:
    sizes: list[int] = []
    load, count = pre, 0
    for i, c in enumerate(costs):
        extra = post if i == len(costs) - 1 else 0
        if count and load + c + extra > bound:
            sizes.append(count)
            load, count = 0, 0
        load += c
        count += 1
    sizes.append(count)
    return sizes


def _greedy_count(costs: Sequence[int], bound: int, pre: int, post: int) -> int:
    sizes = _greedy_sizes(costs, bound, pre, post)
    return len(sizes) if _max_load(costs, sizes, pre, post) <= bound else len(costs) + 1


def _max_load(costs: Sequence[int], sizes: Sequence[int], pre: int, post: int) -> int:
    loads, i = [], 0
    for n in sizes:
        loads.append(sum(costs[i : i + n]))
        i += n
    loads[0] += pre
    loads[-1] += post
    return max(loads)


def _split_to(sizes: list[int], parts: int) -> list[int]:
    """Split segments (largest first, then earliest) until there are `parts`; max never grows."""
    sizes = list(sizes)
    while len(sizes) < parts:
        k = max(range(len(sizes)), key=lambda j: (sizes[j] > 1, sizes[j], -j))
        half = sizes[k] // 2
        sizes[k : k + 1] = [sizes[k] - half, half]
    return sizes


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
            f"{_runs(layer_stages)}, expected {_runs(expected)}; convert the plain-PP program "
            "instead, or pass the --vpp/--split that produced this layout"
        )


def _runs(stages: Sequence[int]) -> str:
    """Stage sequence, compressed: 0x2,1x2,0x2 ..."""
    out: list[str] = []
    i = 0
    while i < len(stages):
        j = i
        while j < len(stages) and stages[j] == stages[i]:
            j += 1
        out.append(f"{stages[i]}x{j - i}" if j - i > 1 else str(stages[i]))
        i = j
    text = ",".join(out)
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
    facts: LayerFacts, stage_meshes: Sequence[Mesh], opts: PlanOptions, warnings: Sequence[str] = ()
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


def _sizes(facts: LayerFacts, pp: int, opts: PlanOptions) -> list[int]:
    n, vpp = len(facts.names), opts.vpp
    if opts.split == "explicit":
        return explicit_sizes(opts.layers_per_chunk, n, pp, vpp)
    if opts.split == "uniform":
        return uniform_sizes(n, pp, vpp)
    if n < pp * vpp:
        raise ConversionError(
            f"{n} layers cannot fill pp*vpp = {pp}*{vpp} = {pp * vpp} segments (every "
            "segment needs a layer); lower --vpp"
        )
    if opts.split == "keep":
        return keep_sizes(facts.stages, pp, vpp, opts.placement)
    return balanced_sizes(facts.costs, pp * vpp, facts.pre_cost, facts.post_cost)
