"""Where a conversion's memory goes: resident memory per phase, in one process.

Run by hand from the repository root (pytest does not collect it):

    python tests/benchmarks/memory_phases.py bench-out/gpt-1088l-pp8.pb     # the 100k sample
    python tests/benchmarks/memory_phases.py FILE --tracemalloc             # + Python's heap

It converts FILE in process (`read_program`, `convert_program --vpp 2 --seg-method
DecoderLayer`, `write_program` to a temporary file), as `bench_convert.py`'s child does,
and reads /proc/self/status at every report of progress (`vppctl.progress`: each phase
and every piece of work in it). It prints, per phase, the largest resident memory seen
and what it was made of: RssAnon (the process's own memory: Python objects, arrays,
protobuf's arenas) and RssFile (pages of mapped files: the input, when mapped, and the
interpreter's libraries), then the process's peak (VmHWM) against the file's size. With
--tracemalloc it also prints the peak of Python's heap per phase (slower: for where,
not for how fast).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

MB = 1 << 20
_FIELDS = ("VmRSS", "RssAnon", "RssFile", "VmHWM")


def status() -> dict[str, int]:
    """The fields of /proc/self/status this probe reads, in bytes."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in _FIELDS:
                out[key] = int(rest.split()[0]) * 1024
    return out


class Probe:
    """A `vppctl.progress` observer that keeps each phase's largest resident memory."""

    def __init__(self, heap: bool) -> None:
        self.heap = heap
        self.current = "start"
        self.order: list[str] = []
        self.peaks: dict[str, dict[str, int]] = {}
        self.started = time.perf_counter()
        self.seconds: dict[str, float] = {}

    def sample(self) -> None:
        now = status()
        if self.heap:
            now["heap"] = tracemalloc.get_traced_memory()[1]
        peak = self.peaks.setdefault(self.current, {})
        if now["VmRSS"] >= peak.get("VmRSS", -1):
            peak.update(now)
        elif self.heap:
            peak["heap"] = max(peak.get("heap", 0), now["heap"])

    def phase(self, name: str, total: int | None = None) -> None:
        self.sample()
        t = time.perf_counter()
        self.seconds[self.current] = self.seconds.get(self.current, 0.0) + t - self.started
        self.started = t
        self.current = name
        if name not in self.order:
            self.order.append(name)
        if self.heap:
            tracemalloc.reset_peak()
        self.sample()

    def advance(self, done: int) -> None:
        self.sample()

    def close(self) -> None:
        self.sample()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path, help="a binary program (e.g. a bench-out/ sample)")
    parser.add_argument("--tracemalloc", action="store_true", help="also Python's heap peak")
    args = parser.parse_args(argv)

    from vppctl import progress
    from vppctl.convert import ConvertOptions, convert_program
    from vppctl.plan import PlanOptions
    from vppctl.program.load import read_program
    from vppctl.program.save import write_program

    size = args.file.stat().st_size
    probe = Probe(args.tracemalloc)
    if args.tracemalloc:
        tracemalloc.start()
    probe.phase("start")
    base = status()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, progress.observing(probe):  # type: ignore[arg-type]
        program = read_program(args.file)
        probe.phase("indexing")  # a mapped program is not parsed: its reading ends here
        convert_program(program, ConvertOptions(plan=PlanOptions(vpp=2), seg_method="DecoderLayer"))
        write_program(program, os.path.join(tmp, "out.pb"))
        probe.phase("end")
    seconds = time.perf_counter() - t0
    print(
        f"{args.file}: {size / MB:.0f} MB; {seconds:.2f} s; start RSS {base['VmRSS'] / MB:.0f} MB"
    )
    print(
        f"{'phase':<12} {'RSS':>8} {'anon':>8} {'file':>8}" + ("  heap" if args.tracemalloc else "")
    )
    for name in probe.order:
        p = probe.peaks.get(name, {})
        if not p:
            continue
        line = (
            f"{name:<12} {p['VmRSS'] / MB:>6.0f}MB {p['RssAnon'] / MB:>6.0f}MB "
            f"{p['RssFile'] / MB:>6.0f}MB"
        )
        if args.tracemalloc:
            line += f" {p.get('heap', 0) / MB:>6.0f}MB"
        print(f"{line}  {probe.seconds.get(name, 0.0):6.2f} s")
    hwm = status()["VmHWM"]
    print(f"peak (VmHWM) {hwm / MB:.0f} MB = {hwm / size:.2f}x the file")
    return 0


if __name__ == "__main__":
    sys.exit(main())
