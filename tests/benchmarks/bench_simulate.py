"""Benchmark the schedule simulator: its work and time grow linearly in pp x vpp x m.

Run by hand from the repository root (pytest does not collect it):

    python tests/benchmarks/bench_simulate.py            # every schedule, three sizes
    python tests/benchmarks/bench_simulate.py --runs 5

For each schedule it simulates a base size and sizes 4x and 16x larger in pp x vpp x m
and prints the steps, the executor's work (actions examined; at most twice the steps)
and the median wall time. The figures to read are the ratios: work per step stays
constant (the event loop is linear), and time per step stays near constant (the only
super-linear part is one C-level sort of the steps by start time).
"""

from __future__ import annotations

import argparse
import statistics
import time

from vppctl.schedule.orders import MERGED
from vppctl.schedule.simulation import SCHEDULES, Schedule, simulate

# (pp, m) per size; vpp is 2 for the interleaving schedules, 1 for the others.
SIZES = ((4, 32), (8, 64), (16, 128))


def vpp_of(schedule: Schedule) -> int:
    return 1 if schedule in MERGED else 2


def measure(schedule: Schedule, pp: int, m: int, runs: int) -> tuple[int, int, float]:
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        result = simulate(pp, vpp_of(schedule), m, schedule)
        times.append(time.perf_counter() - began)
    return len(result.steps), result.work, statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(
        f"{'schedule':<14} {'pp':>3} {'m':>4} {'steps':>7} {'work':>7} {'work/step':>9} "
        f"{'time':>8} {'us/step':>8}"
    )
    for schedule in SCHEDULES:
        for pp, count in SIZES:
            m = pp if schedule == "zbvpp" else count  # Paddle runs ZBVPP at m == pp only
            steps, work, seconds = measure(schedule, pp, m, args.runs)
            print(
                f"{schedule:<14} {pp:>3} {m:>4} {steps:>7} {work:>7} {work / steps:>9.3f} "
                f"{seconds:>7.3f}s {seconds / steps * 1e6:>8.2f}"
            )


if __name__ == "__main__":
    main()
