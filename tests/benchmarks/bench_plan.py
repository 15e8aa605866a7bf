"""Benchmark `vppctl plan` against `vppctl convert`, and the simulator's linearity.

Run by hand from the repository root (pytest does not collect it):

    python tests/benchmarks/bench_plan.py              # 5 rounds
    python tests/benchmarks/bench_plan.py --runs 9

Target 1: `vppctl plan` of the 126-layer, pp 8 sample with m in {16, 32, 64} and every
schedule takes at most 3x the time of `vppctl convert` of the same program (with
`--split balanced`: 126 layers do not divide into 8 x vpp equal segments). Both are
whole CLI runs, interpreter start included; each round runs convert, plan, convert,
and its ratio is plan over the mean of the two converts (the shared machine's speed
drifts within minutes); the median ratio over the rounds is the figure.

Target 2: the simulator's cost grows linearly in pp x vpp x m: for the interleaved
schedule (timed with every step, as `simulate` does) and for the planner's timing
pass, the work (actions examined) and time per action at 1x, 4x and 16x the size.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from vppctl.schedule.execute import Pipeline
from vppctl.schedule.simulation import simulate

RATIO_MAX = 3.0
SIZES = ((4, 2, 32), (8, 2, 64), (16, 2, 128), (16, 8, 128))  # pp, vpp, m


def vppctl_cmd() -> list[str]:
    script = Path(sys.executable).with_name("vppctl")
    return [str(script)] if script.exists() else [sys.executable, "-m", "vppctl"]


def wall(cmd: Sequence[str]) -> float:
    began = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - began


def plan_vs_convert(work: Path, runs: int) -> bool:
    src = work / "gpt-126l-pp8.pb"
    if not src.exists():
        subprocess.run(
            [*vppctl_cmd(), "sample", "--layers", "126", "--pp", "8", "-o", str(src)], check=True
        )
    convert = [*vppctl_cmd(), "convert", str(src), "--vpp", "2", "--split", "balanced"]
    convert += ["-o", str(work / "out.pb")]
    plan = [*vppctl_cmd(), "plan", str(src), "-m", "16,32,64"]
    wall(plan)  # warm the page cache and the bytecode
    converts, plans, ratios = [], [], []
    for _ in range(runs):
        before, p, after = wall(convert), wall(plan), wall(convert)
        converts += [before, after]
        plans.append(p)
        ratios.append(p / ((before + after) / 2))
    ratio = statistics.median(ratios)
    print(
        "126 layers, pp 8, m 16,32,64, every schedule: "
        f"convert {statistics.median(converts):.3f} s, plan {statistics.median(plans):.3f} s, "
        f"ratio {ratio:.2f}x "
        f"(rounds {min(ratios):.2f}-{max(ratios):.2f}; target <= {RATIO_MAX:g}x)"
    )
    return ratio <= RATIO_MAX


def linearity(runs: int) -> None:
    print(
        f"{'pp':>3} {'vpp':>3} {'m':>4} {'units':>7} {'actions':>8} {'work/act':>8} "
        f"{'simulate us/act':>15} {'timing us/act':>13}"
    )
    for pp, vpp, m in SIZES:
        sims, timings = [], []
        for _ in range(runs):
            began = time.perf_counter()
            result = simulate(pp, vpp, m, "interleaved")
            sims.append(time.perf_counter() - began)
            pipe, _ = Pipeline.of("interleaved", pp, vpp, m)
            costs = [1] * (pp * vpp)
            began = time.perf_counter()
            pipe.makespan(costs, costs, costs)
            timings.append(time.perf_counter() - began)
        actions = len(result.steps)
        print(
            f"{pp:>3} {vpp:>3} {m:>4} {pp * vpp * m:>7} {actions:>8} "
            f"{result.work / actions:>8.3f} {statistics.median(sims) / actions * 1e6:>15.2f} "
            f"{statistics.median(timings) / actions * 1e6:>13.2f}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--work-dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work_dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        ok = plan_vs_convert(work, args.runs)
    linearity(max(3, args.runs // 2))
    print("PASS" if ok else "FAIL", "plan <= 3x convert")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
