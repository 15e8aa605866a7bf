"""Benchmark the stage-balanced split: stage imbalance before and after, and its time.

Run by hand from the repository root (pytest does not collect it):

    python tests/benchmarks/bench_balanced.py

Prints, for the 126-layer sample's flop costs (tests/data/s126-flops-costs.json) at
pp 8, vpp 2, the busiest stage over the mean stage load for the min-max-segment split
(`balanced_sizes`) and the stage-balanced split (`stage_balanced_split`), loop and V,
with the median time of 5 runs; then the time for 10,000 layers of random costs at a
few pp x vpp.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from vppctl.plan import (
    balanced_sizes,
    segment_costs,
    stage_balanced_split,
    stage_imbalance,
)

DATA = Path(__file__).parent.parent / "data" / "s126-flops-costs.json"


def timed(run: Callable[[], object], runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        run()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def main() -> None:
    data = json.loads(DATA.read_text())
    costs, pre, post = data["layers"], data["pre"], data["post"]
    old = balanced_sizes(costs, 16, pre, post)
    print("126 layers, pp 8, vpp 2, --cost flops: busiest stage / mean stage load")
    for placement in ("loop", "v"):
        before = stage_imbalance(segment_costs(old, costs, pre, post), 8, placement)
        split = stage_balanced_split(costs, 8, 2, placement, pre, post)
        after = stage_imbalance(split.segment_costs, 8, placement)
        seconds = timed(lambda p=placement: stage_balanced_split(costs, 8, 2, p, pre, post))
        print(
            f"  {placement:<4} min-max segment {before:.4f}  stage-balanced {after:.4f}  "
            f"sizes {','.join(map(str, split.sizes))}  proven {split.proven}  {seconds:.3f}s"
        )
    rng = random.Random(1)
    layers = [rng.randint(50, 150) for _ in range(10_000)]
    print("10,000 layers, random costs 50..150, pre 5000, post 20000 (loop)")
    for pp, vpp in ((8, 2), (16, 4), (32, 4)):
        split = stage_balanced_split(layers, pp, vpp, "loop", 5000, 20000)
        seconds = timed(lambda a=pp, b=vpp: stage_balanced_split(layers, a, b, "loop", 5000, 20000))
        imbalance = stage_imbalance(split.segment_costs, pp, "loop")
        print(f"  pp {pp:>2} vpp {vpp}: imbalance {imbalance:.5f}  {seconds:.3f}s")


if __name__ == "__main__":
    main()
