"""Compare this checkout's conversion speed with another vppctl checkout's, in one run.

Run by hand from the repository root (pytest does not collect it):

    git worktree add ../vppctl-0.1.0 v0.1.0      # or any commit
    python tests/benchmarks/bench_versions.py ../vppctl-0.1.0
    python tests/benchmarks/bench_versions.py ../vppctl-0.1.0 --sizes 10k,100k --rounds 20

Both versions convert the same cached sample (see bench_convert.py) in two
long-lived worker processes of this interpreter, one importing each checkout. The
workers take turns, one conversion each per round (load + convert + save, CPU
time, after one warm-up round), so that the machine's drift, which on shared
machines moves a single figure by 30% within minutes, hits both alike. Printed per
size: each version's minimum and median, and the median over rounds of this
checkout's time over the other's (below 1: this checkout is faster).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import bench_convert as bench

HERE = Path(__file__).resolve().parents[2]  # this checkout


def worker(path: Path, out: Path) -> None:
    """Convert `path` once per line read from stdin; print each conversion's CPU ms.

    Only the top-level API is used (`vppctl.read_program`, `convert_program`, ...), which
    every version since 0.1.0 has, wherever its modules live."""
    import vppctl

    opts = vppctl.ConvertOptions(
        plan=vppctl.PlanOptions(vpp=bench.VPP), seg_method=bench.SEG_METHOD
    )
    for _ in sys.stdin:
        t0 = time.process_time()
        program = vppctl.read_program(path)
        vppctl.convert_program(program, opts)
        vppctl.write_program(program, out)
        print(f"{(time.process_time() - t0) * 1000:.2f}", flush=True)


def start(checkout: Path, path: Path, out: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    cmd = [sys.executable, __file__, "--worker", str(path), str(out)]
    return subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def one(proc: subprocess.Popen[str]) -> float:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    line = proc.stdout.readline()
    if not line:
        raise SystemExit("a worker failed (see its traceback above)")
    return float(line)


def compare(other: Path, path: Path, work: Path, rounds: int) -> tuple[list[float], list[float]]:
    """(this checkout's times, the other's), one per round, in ms."""
    procs = [start(HERE, path, work / "out-this.pb"), start(other, path, work / "out-other.pb")]
    times: tuple[list[float], list[float]] = ([], [])
    try:
        for r in range(rounds + 1):
            for k in (0, 1) if r % 2 else (1, 0):  # alternate who goes first
                t = one(procs[k])  # k: whose time it is (not the order of the round)
                if r:  # round 0 warms both up
                    times[k].append(t)
    finally:
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait()
    return times


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("other", type=Path, nargs="?", help="the other checkout (its root)")
    p.add_argument("--sizes", default="10k", help="comma-separated: 10k, 100k, 1m")
    p.add_argument("--rounds", type=int, default=30, help="conversions per version and size")
    p.add_argument("--callstack", action="store_true", help="the callstack-heavy variant")
    p.add_argument("--work-dir", type=Path, default=Path("bench-out"), help="sample cache")
    p.add_argument("--worker", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker(*args.worker)
        return 0
    if args.other is None or not (args.other / "vppctl" / "__init__.py").exists():
        p.error("give the root of another vppctl checkout (it holds vppctl/__init__.py)")
    args.work_dir.mkdir(parents=True, exist_ok=True)
    print(f"this checkout: {HERE}\nother: {args.other.resolve()}")
    print("size              this min  this median  other min  other median  this/other")
    for size in (s.strip().lower() for s in args.sizes.split(",") if s.strip()):
        case = bench.Case(size, args.callstack)
        path = bench.ensure_sample(args.work_dir, case.file_name(), case.sample_args(), False)
        mine, theirs = compare(args.other.resolve(), path.resolve(), args.work_dir, args.rounds)
        ratio = statistics.median(a / b for a, b in zip(mine, theirs))
        print(
            f"{case.label:16s} {min(mine):8.1f} ms {statistics.median(mine):8.1f} ms "
            f"{min(theirs):8.1f} ms {statistics.median(theirs):10.1f} ms  {ratio:9.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
