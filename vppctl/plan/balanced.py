"""Balanced splits: contiguous segments whose costs are as even as the layers allow.

`balanced_sizes` minimises the costliest segment (exact: a binary search on the
bottleneck with a greedy feasibility check); `stage_balanced_split`, what `--split
balanced` makes, minimises the busiest stage's load (the sum of its segments) and then
the costliest segment: starts, a local improvement and a bounded exact search, each
keeping the best split seen. Pure functions over layer costs.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from vppctl.choices import Placement
from vppctl.plan.placement import place, refuse_too_few, stage_loads


def balanced_sizes(costs: Sequence[int], parts: int, pre: int = 0, post: int = 0) -> list[int]:
    """Min-max split: contiguous, non-empty segments minimising the most expensive one.

    `pre` (ops before the first layer) counts in segment 0 and `post` (ops after
    the last layer) in the last segment. Exact: binary search on the bottleneck
    with a greedy feasibility check, O(L log(total cost)).
    """
    n = len(costs)
    if n < parts:
        raise refuse_too_few(n, parts)
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


# -- stage-balanced split ------------------------------------------------------
#
# A stage runs all of its chunks, so what the schedule sees is the stage's load,
# the sum of its segments. Minimising the costliest segment (balanced_sizes) leaves
# that sum free: on the 126-layer sample at pp 8, vpp 2 the busiest stage carries
# 1.11x the mean. stage_balanced_split minimises the busiest stage's load instead.


@dataclass(frozen=True)
class StageSplit:
    """A split, its segment costs and stage loads; `proven` when the search proved
    that no contiguous split has a lower (busiest stage, costliest segment)."""

    sizes: tuple[int, ...]
    segment_costs: tuple[int, ...]
    stage_loads: tuple[int, ...]
    proven: bool


# The exact search's budget, in segment ends tried: enough to prove small cases
# outright, small enough to keep any input in a fraction of a second.
PROOF_BUDGET = 50_000
# The local improvement's budget, in segment costs evaluated over all starts: the
# 126-layer sample needs at most 35,000 at any vpp; 10,000 layers at pp 16 x vpp 4
# about 400,000. It bounds the split's time (about 0.25 s) for any number of segments.
IMPROVE_BUDGET = 500_000


def stage_balanced_sizes(
    costs: Sequence[int], pp: int, vpp: int, placement: Placement, pre: int = 0, post: int = 0
) -> list[int]:
    """`--split balanced`: contiguous, non-empty segments in virtual-stage order that
    minimise the busiest stage's load, ties broken by the costliest segment."""
    return list(stage_balanced_split(costs, pp, vpp, placement, pre, post).sizes)


def stage_balanced_split(
    costs: Sequence[int], pp: int, vpp: int, placement: Placement, pre: int = 0, post: int = 0
) -> StageSplit:
    """Minimise (busiest stage's load, costliest segment) over contiguous splits.

    `pre` counts in segment 0 and `post` in the last one. Per-stage sums are not
    decomposable over segments (a stage's chunks lie far apart), so no interval DP
    applies. Three steps, each keeping the best split seen:

    1. starts: the uniform split when it is legal, the min-max-segment split
       (`balanced_sizes`) and cuts at the equal-cost prefix points;
    2. local improvement from each start: move one layer off a segment of the
       busiest stage (or off the costliest segment) to any other segment, shifting
       the segments in between by one layer, while the objective drops, within
       `IMPROVE_BUDGET` segment costs evaluated;
    3. an exact branch-and-bound over segment ends, seeded with that bound (a
       partial split whose stage already exceeds it, or whose remaining layers cannot
       fit under it, is cut), within `PROOF_BUDGET` segment ends tried; `proven` says it finished.

    Never worse than the uniform split or the min-max-segment split, since both are
    starts; equal to the exhaustive optimum whenever `proven` (tested on small inputs).
    """
    parts = pp * vpp
    n = len(costs)
    if n < parts:
        raise refuse_too_few(n, parts)
    if any(c < 0 for c in costs) or pre < 0 or post < 0:
        raise ValueError("layer costs must not be negative")
    split = _Splitter(costs, pp, parts, placement, pre, post)
    best = min(
        (split.improve(split.bounds(start)) for start in split.starts()), key=split.objective
    )
    proven_best, proven = split.prove(best)
    sizes = tuple(b - a for a, b in zip(proven_best, proven_best[1:]))
    seg = split.seg_costs(proven_best)
    return StageSplit(sizes, tuple(seg), tuple(stage_loads(seg, pp, placement)), proven)


class _Splitter:
    """The search state of one stage-balanced split: prefix sums and the stage map.

    A split is its list of `parts + 1` boundaries, 0 = b[0] < b[1] < ... = n.
    """

    def __init__(
        self,
        costs: Sequence[int],
        pp: int,
        parts: int,
        placement: Placement,
        pre: int,
        post: int,
    ) -> None:
        self.costs, self.pp, self.parts = list(costs), pp, parts
        self.pre, self.post, self.n = pre, post, len(costs)
        self.work = 0  # segment costs evaluated by the local improvement
        self.stage = [place(k, pp, placement)[0] for k in range(parts)]
        self.prefix = [0]
        for c in costs:
            self.prefix.append(self.prefix[-1] + c)

    # -- evaluation

    def seg_cost(self, k: int, a: int, b: int) -> int:
        extra = (self.pre if k == 0 else 0) + (self.post if k == self.parts - 1 else 0)
        return self.prefix[b] - self.prefix[a] + extra

    def seg_costs(self, bounds: Sequence[int]) -> list[int]:
        return [self.seg_cost(k, bounds[k], bounds[k + 1]) for k in range(self.parts)]

    def objective(self, bounds: Sequence[int]) -> tuple[int, int, int]:
        """(busiest stage, costliest segment, how many stages carry the busiest load);
        the count lets the descent leave plateaus where two stages tie at the top."""
        seg = self.seg_costs(bounds)
        loads = [0] * self.pp
        for k, c in enumerate(seg):
            loads[self.stage[k]] += c
        top = max(loads)
        return top, max(seg), loads.count(top)

    # -- starts

    def bounds(self, sizes: Sequence[int]) -> list[int]:
        out = [0]
        for size in sizes:
            out.append(out[-1] + size)
        return out

    def starts(self) -> list[list[int]]:
        starts = [balanced_sizes(self.costs, self.parts, self.pre, self.post)]
        if self.n % self.parts == 0:
            starts.append([self.n // self.parts] * self.parts)
        starts.append(self._prefix_cuts())
        return starts

    def _prefix_cuts(self) -> list[int]:
        """Cut where the running cost (pre included) is nearest k/parts of the total."""
        total = self.pre + self.prefix[-1] + self.post
        cuts = [0]
        for k in range(1, self.parts):
            target = total * k / self.parts - self.pre
            i = bisect.bisect_left(self.prefix, target)
            if i > 0 and (i > self.n or target - self.prefix[i - 1] <= self.prefix[i] - target):
                i -= 1
            cuts.append(min(max(i, cuts[-1] + 1), self.n - (self.parts - k)))
        cuts.append(self.n)
        return [b - a for a, b in zip(cuts, cuts[1:])]

    # -- local improvement

    def improve(self, bounds: list[int]) -> list[int]:
        """Descent over one-layer transfers, lightest target stages tried first; each
        accepted move lowers the objective, and the moves are bounded in number."""
        for _ in range(4 * self.n + 4 * self.parts):
            moved = self._better(bounds)
            if moved is None:
                break
            bounds = moved
        return bounds

    def _better(self, bounds: list[int]) -> list[int] | None:
        """The first transfer that lowers the objective, or None."""
        seg = self.seg_costs(bounds)
        loads = [0] * self.pp
        for k, c in enumerate(seg):
            loads[self.stage[k]] += c
        top, worst = max(loads), max(seg)
        score = (top, worst, loads.count(top))
        # Costliest segment outside [lo, hi], from prefix and suffix maxima.
        before = list(itertools.accumulate(seg, max))
        after = list(itertools.accumulate(reversed(seg), max))[::-1]
        sources = [k for k in range(self.parts) if loads[self.stage[k]] == top or seg[k] == worst]
        targets = sorted(range(self.parts), key=lambda k: (loads[self.stage[k]], k))
        for source in sources:
            if bounds[source + 1] - bounds[source] < 2:
                continue
            for target in targets:
                if target == source:
                    continue
                if self.work >= IMPROVE_BUDGET:
                    return None
                moved = self._transfer(bounds, source, target)
                lo, hi = min(source, target), max(source, target)
                self.work += hi - lo + 1
                new_loads = list(loads)
                changed = 0
                for k in range(lo, hi + 1):
                    c = self.seg_cost(k, moved[k], moved[k + 1])
                    new_loads[self.stage[k]] += c - seg[k]
                    changed = max(changed, c)
                outside = max(
                    before[lo - 1] if lo else 0, after[hi + 1] if hi + 1 < self.parts else 0
                )
                new_top = max(new_loads)
                if (new_top, max(changed, outside), new_loads.count(new_top)) < score:
                    return moved
        return None

    def _transfer(self, bounds: list[int], source: int, target: int) -> list[int]:
        """Move one layer from segment `source` (of two or more layers) towards
        `target`, shifting the segments in between by one layer."""
        moved = list(bounds)
        if source < target:  # source gives its last layer: boundaries shift left
            for k in range(source + 1, target + 1):
                moved[k] -= 1
        else:  # source gives its first layer: boundaries shift right
            for k in range(target + 1, source + 1):
                moved[k] += 1
        return moved

    # -- exact search

    def prove(self, bounds: list[int]) -> tuple[list[int], bool]:
        """Branch and bound for a split better than `bounds` in (stage, segment)."""
        top, worst = self.objective(bounds)[:2]
        search = _Search(self, top, worst)
        search.run()
        if search.found is not None:
            return search.found, not search.exhausted
        return bounds, not search.exhausted


class _Search:
    """Depth-first search over segment ends, cut by the best (stage, segment) so far.

    Iterative (an explicit stack of levels, one per segment), so any number of segments
    runs without recursion; the ends are tried in the same order a recursive search
    would try them, and each try costs one unit of the budget.
    """

    def __init__(self, split: _Splitter, top: int, worst: int) -> None:
        self.split, self.top, self.worst = split, top, worst
        self.found: list[int] | None = None
        self.budget = PROOF_BUDGET
        self.exhausted = False
        # After segment k: how many stages still have a segment, and whether segment k
        # is its stage's last one (the stage's load is then final). Linear in segments.
        last = {stage: k for k, stage in enumerate(split.stage)}
        self.closes = [last[stage] == k for k, stage in enumerate(split.stage)]
        self.open = []
        still = len(last)
        for closes in self.closes:
            still -= closes
            self.open.append(still)
        self.bounds = [0] * (split.parts + 1)

    def run(self) -> None:
        s = self.split
        n, parts, prefix = s.n, s.parts, s.prefix
        stage_of, open_, closes, bounds = s.stage, self.open, self.closes, self.bounds
        loads = [0] * s.pp
        bounds[parts] = n
        # Per level k: the last end it may take, the ops outside the layers it carries
        # (pre in segment 0, post in the last), the end tried last, the cost applied, and
        # what the levels above hand down (busiest stage, costliest segment, total and
        # closed load so far).
        last_end = [n - (parts - 1 - k) for k in range(parts)]
        extra = [0] * parts
        extra[0] += s.pre
        extra[-1] += s.post
        end = [0] * parts
        cost = [0] * parts
        top_in, worst_in = [0] * (parts + 1), [0] * (parts + 1)
        total_in, closed_in = [0] * (parts + 1), [0] * (parts + 1)
        remaining = prefix[n] + s.post
        final = parts - 1
        best_top, best_worst, budget = self.top, self.worst, self.budget
        k = 0
        end[0] = (n if parts == 1 else 1) - 1
        while k >= 0:
            e = end[k] + 1
            if e > last_end[k]:  # level k is done: back to k - 1, undoing its segment
                k -= 1
                if k >= 0:
                    loads[stage_of[k]] -= cost[k]
                continue
            budget -= 1
            if budget < 0:
                self.exhausted = True
                break
            end[k] = e
            c = prefix[e] - prefix[bounds[k]] + extra[k]
            load = loads[stage_of[k]] + c
            top = top_in[k] if top_in[k] > load else load
            worst = worst_in[k] if worst_in[k] > c else c
            # No completion can beat the bound; ends further right only cost more.
            if top > best_top or (top == best_top and worst >= best_worst):
                k -= 1
                if k >= 0:
                    loads[stage_of[k]] -= cost[k]
                continue
            if k == final:
                best_top, best_worst = top, worst
                self.found = list(bounds)
                continue
            total = total_in[k] + c
            closed = closed_in[k] + (load if closes[k] else 0)
            # Can the layers after e (and post) fit under the bound on the stages that
            # still have segments?
            if remaining - prefix[e] <= open_[k] * best_top - (total - closed):
                loads[stage_of[k]] = load
                cost[k] = c
                bounds[k + 1] = e
                top_in[k + 1], worst_in[k + 1] = top, worst
                total_in[k + 1], closed_in[k + 1] = total, closed
                k += 1
                end[k] = (n if k == final else e + 1) - 1
        self.top, self.worst, self.budget = best_top, best_worst, budget
