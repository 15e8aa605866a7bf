"""What the progress display costs: `vppctl convert` with its progress shown and with -q.

Run by hand from the repository root (pytest does not collect it):

    python tests/benchmarks/bench_progress.py                    # 100k ops, 10 rounds
    python tests/benchmarks/bench_progress.py --sizes 10k,100k --rounds 20

Each round converts the cached sample (see bench_convert.py) four times, in turns, as
separate processes: stderr a file (a CI log: phase lines), stderr a pseudo-terminal (the
rich bar), and each of them again with -q (no observer). Printed per size and display:
the median of the CPU time (user + system of the process) with progress over without,
so that the machine's drift hits both alike. The library's own cost without an
observer (the calls into `vppctl.progress` in the hot loops) is bench_versions.py's to
measure, against a checkout from before them.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import bench_convert as bench

HERE = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(HERE / "tests" / "support"))

from iohelpers import run_in_pty, terminal_env  # noqa: E402


def cpu_of(
    display: Callable[[Path, Path, bool], None], path: Path, out: Path, quiet: bool
) -> float:
    """CPU seconds (user + system) the children spent in `display(path, out, quiet)`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    display(path, out, quiet)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def convert_argv(path: Path, out: Path, quiet: bool) -> list[str]:
    argv = [sys.executable, "-m", "vppctl", "convert", str(path), "--vpp", str(bench.VPP)]
    argv += ["--seg-method", bench.SEG_METHOD, "-o", str(out)]
    return [*argv, "-q"] if quiet else argv


def in_log(path: Path, out: Path, quiet: bool) -> None:
    with tempfile.TemporaryFile() as log:
        env = {k: v for k, v in os.environ.items() if k != "VPPCTL_PROGRESS"}
        subprocess.run(
            convert_argv(path, out, quiet), stdout=subprocess.DEVNULL, stderr=log, env=env,
            check=True, cwd=HERE,
        )  # fmt: skip


def at_terminal(path: Path, out: Path, quiet: bool) -> None:
    code, _ = run_in_pty(convert_argv(path, out, quiet), env=terminal_env(), timeout=600)
    if code != 0:
        raise SystemExit(f"convert failed at the terminal (exit {code})")


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="100k", help="comma-separated: 10k, 100k, 1m")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--work-dir", type=Path, default=Path("bench-out"), help="sample cache")
    args = p.parse_args(argv)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    out = (args.work_dir / "out-progress.pb").resolve()
    print("size   display   with progress  with -q  ratio (median of rounds)")
    for size in (s.strip().lower() for s in args.sizes.split(",") if s.strip()):
        case = bench.Case(size, False)
        path = bench.ensure_sample(args.work_dir, case.file_name(), case.sample_args(), False)
        path = path.resolve()
        for name, display in (("log", in_log), ("terminal", at_terminal)):
            shown, quiet = [], []
            for r in range(args.rounds + 1):
                pair = [(False, shown), (True, quiet)]
                for is_quiet, times in pair if r % 2 else pair[::-1]:
                    t = cpu_of(display, path, out, is_quiet)
                    if r:  # round 0 warms the page cache
                        times.append(t)
            ratio = statistics.median(a / b for a, b in zip(shown, quiet))
            print(
                f"{case.label:6s} {name:9s} {statistics.median(shown):10.3f} s "
                f"{statistics.median(quiet):8.3f} s  {ratio:.3f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
