"""Placement: which stage and chunk each segment sits on, and what each stage carries.

Segment k (its virtual stage) sits on stage/chunk `place(k)`: "loop" deals segments
round-robin (stage k % pp, chunk k // pp); "v" runs stages 0..pp-1 for even chunks and
pp-1..0 for odd ones. A stage runs all of its chunks, so what a schedule sees is the
stage's load, the sum of its segments' costs. Every segment needs a layer: `cannot_fill`
is the one wording of too few.
"""

from __future__ import annotations

from collections.abc import Sequence

from vppctl.choices import Placement
from vppctl.errors import ConversionError


def place(k: int, pp: int, placement: Placement) -> tuple[int, int]:
    """(stage, chunk) of segment k."""
    chunk, pos = divmod(k, pp)
    if placement == "v" and chunk % 2:
        return pp - 1 - pos, chunk
    return pos, chunk


def virtual_stage(stage: int, chunk: int, pp: int, placement: Placement) -> int:
    """The virtual stage (segment index) at (stage, chunk): the inverse of `place`."""
    if placement == "v" and chunk % 2:
        return chunk * pp + pp - 1 - stage
    return chunk * pp + stage


def virtual_stages(pp: int, vpp: int, placement: Placement) -> dict[tuple[int, int], int]:
    """(stage, chunk) -> virtual stage for every pair: the inverse of `place` as a table
    (pp*vpp entries: only for a plan's or a simulation's own sizes)."""
    return {place(k, pp, placement): k for k in range(pp * vpp)}


def stage_loads(seg_costs: Sequence[int], pp: int, placement: Placement) -> list[int]:
    """Each stage's load: the sum of its segments' costs (segments in virtual-stage order)."""
    loads = [0] * pp
    for k, cost in enumerate(seg_costs):
        loads[place(k, pp, placement)[0]] += cost
    return loads


def stage_imbalance(seg_costs: Sequence[int], pp: int, placement: Placement) -> float:
    """Busiest stage's load over the mean stage load (1.0 = perfectly even)."""
    loads = stage_loads(seg_costs, pp, placement)
    mean = sum(loads) / pp if pp else 0
    return max(loads) / mean if mean else 1.0


def cannot_fill(n_layers: int, parts: int, pp: int | None = None) -> str:
    """Too few layers for the segments, in the one wording the planner and the verifier
    share: `3 layers cannot fill pp*vpp = 2*2 = 4 segments (every segment needs a layer)`,
    pp*vpp spelled out when `pp` is known."""
    product = f"{pp}*{parts // pp} = {parts}" if pp else str(parts)
    return (
        f"{n_layers} layers cannot fill pp*vpp = {product} segments (every segment needs a layer)"
    )


def refuse_too_few(n_layers: int, parts: int, pp: int | None = None) -> ConversionError:
    """The plan's refusal of too few layers (`cannot_fill`), with its fix."""
    return ConversionError(f"{cannot_fill(n_layers, parts, pp)}; lower --vpp")
