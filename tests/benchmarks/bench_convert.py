"""Benchmark `vppctl convert` against protobuf's own parse + serialize of the same file.

Run by hand from the repository root (pytest does not collect it):

    python tests/benchmarks/bench_convert.py                  # 10k, 100k, 1M ops; 3 runs
    python tests/benchmarks/bench_convert.py --quick          # 10k, 100k ops; 1 run
    python tests/benchmarks/bench_convert.py --sizes 100k,1m --runs 5
    python tests/benchmarks/bench_convert.py --markdown       # the table for docs/performance.md

The 1M-op rows take GBs of memory and minutes: run them on a quiet machine.

It generates GPT-like programs with `vppctl sample` (plain PP over 8 stages, and a
callstack-heavy variant like real Paddle programs up to 100k ops; at 1M ops that
variant would pass protobuf's 2 GiB limit), caches them in the work directory
(default `bench-out/`, git-ignored), and prints one table. Each figure is the median
of --runs runs; every measurement runs in a fresh interpreter so that one
measurement's memory does not pollute another's:

- floor: `ProgramDesc.FromString` + `SerializeToString` of the file's bytes with the
  full schema (vppctl/program_pb2.py), the limit for a Python tool;
- ratio: the median over rounds of convert / floor, where each round's floor is the
  mean of the floor runs just before and just after its conversion (these shared
  machines speed up and slow down by 30% within minutes);
- convert: in-process `read_program` + `convert_program` + `write_program`
  (load, index, plan, apply, verify, save), `--vpp 2 --seg-method DecoderLayer`;
- peak RSS: of the process that ran the conversion (its VmHWM: ru_maxrss would
  include the parent's size, which Linux carries over fork and exec);
- verify: in-process `read_program` + `verify_program` of the converted file, and its
  ratio to the floor (measured between the same two floor runs as the conversion's);
- one pass: the floor plus one Python loop that reads every op's type, argument names
  and attribute names through protobuf's API, and its ratio to the floor: what reading
  the data flow once costs a Python tool, before it plans, applies or verifies anything
  (a reference point for the targets, not a bound on every possible design);
- CLI: wall time of `vppctl convert` as a subprocess, interpreter start included;
- `vppctl --help` and `vppctl convert --vpp 2` of the 126-layer sample, wall times with
  interpreter start (median of 10 and more).

Then it checks the speed and memory targets (issue 34's acceptance: convert within 1.2x
the floor at 1M ops and 1.5x at 100k, scaling 100k->1M within 10.5x, the small CLI
conversion within 0.3 s and --help under 0.1 s, peak RSS within 1.3x the file at 1M ops,
verify of the 1M-op output within the floor) and prints PASS or FAIL for each.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

OPS_PER_LAYER = 92  # ops of one decoder layer in a sample (forward, backward, optimizer)
PP, VPP = 8, 2
SEG_METHOD = "DecoderLayer"
SIZES = {"10k": 10_000, "100k": 100_000, "1m": 1_000_000}
CALLSTACK_MAX_OPS = 100_000  # a 1M-op callstack program would exceed protobuf's 2 GiB
MB = 1 << 20

# Targets (issue 34).
FLOOR_RATIO_MAX = {"1m": 1.2, "100k": 1.5}  # convert time / floor, by size
SCALING_MAX = 10.5  # convert(1M) / convert(100k)
SMALL_CLI_MAX = 0.3  # seconds: `vppctl convert` of the 126-layer sample (median of 10)
SMALL_CLI_RUNS = 10
HELP_MAX = 0.1  # seconds: `vppctl --help`
RSS_FACTOR = 1.3  # 1M-op peak RSS <= 1.3x the file size
VERIFY_RATIO_MAX = 1.0  # verify of the 1M-op output / floor


@dataclass(frozen=True)
class Case:
    """One benchmark program: a sample of about `target_ops` ops."""

    size: str  # "10k", "100k", "1m"
    callstack: bool

    @property
    def layers(self) -> int:
        # A multiple of pp*vpp, so that the uniform split divides.
        per = PP * VPP
        return max(per, round(SIZES[self.size] / OPS_PER_LAYER / per) * per)

    @property
    def label(self) -> str:
        return f"{self.size}{' callstack' if self.callstack else ''}"

    def sample_args(self) -> list[str]:
        return ["--layers", str(self.layers), "--pp", str(PP)] + (
            ["--callstack"] if self.callstack else []
        )

    def file_name(self) -> str:
        return f"gpt-{self.layers}l-pp{PP}{'-callstack' if self.callstack else ''}.pb"


@dataclass(frozen=True)
class Row:
    case: Case
    size: int  # bytes
    ops: int
    floor: float  # seconds
    convert: float  # seconds
    rss: int  # bytes
    cli: float  # seconds
    verify: float  # seconds
    one_pass: float  # seconds
    ratios: tuple[float, ...] = ()  # per round: convert / mean of the floors around it
    verify_ratios: tuple[float, ...] = ()  # per round: verify / mean of the floors around it
    pass_ratios: tuple[float, ...] = ()  # per round: one pass / mean of the floors around it

    @property
    def ratio(self) -> float:
        """The median of the rounds' ratios: each is measured between two floor runs, so a
        machine that slows down or speeds up during the benchmark cancels out."""
        return statistics.median(self.ratios) if self.ratios else self.convert / self.floor

    @property
    def verify_ratio(self) -> float:
        return (
            statistics.median(self.verify_ratios)
            if self.verify_ratios
            else self.verify / self.floor
        )

    @property
    def pass_ratio(self) -> float:
        return (
            statistics.median(self.pass_ratios) if self.pass_ratios else self.one_pass / self.floor
        )


# -- child processes: one measurement each, JSON on stdout -------------------------


def child_floor(path: Path) -> dict[str, float]:
    """Parse + serialize with the full schema (file read not timed)."""
    from vppctl.program._proto import program_pb2 as pb

    data = path.read_bytes()
    t0 = time.perf_counter()
    msg = pb.ProgramDesc.FromString(data)
    out = msg.SerializeToString()
    seconds = time.perf_counter() - t0
    ops = sum(len(b.ops) for b in msg.blocks)
    assert len(out) == len(data)
    return {"seconds": seconds, "ops": ops}


def child_pass(path: Path, out: Path | None = None) -> dict[str, float]:
    """The floor plus one Python loop over every op's type, argument and attribute names
    (file read not timed); with `out`, the file is read and written too."""
    from vppctl.program._proto import program_pb2 as pb

    t0 = time.perf_counter()
    data = path.read_bytes()
    t1 = time.perf_counter()
    msg = pb.ProgramDesc.FromString(data)
    ops, names = 0, []
    for block in msg.blocks:
        for op in block.ops:
            ops += 1
            names.append(op.type)
            for slot in op.inputs:
                names.extend(slot.arguments)
            for slot in op.outputs:
                names.extend(slot.arguments)
            names.extend([attr.name for attr in op.attrs])
    serialized = msg.SerializeToString()
    if out is not None:
        out.write_bytes(serialized)
        return {"seconds": time.perf_counter() - t0, "ops": ops}
    return {"seconds": time.perf_counter() - t1, "ops": ops}


def peak_rss() -> int:
    """This process's peak resident bytes since it started (VmHWM)."""
    with open("/proc/self/status") as f:
        kb = next(line.split()[1] for line in f if line.startswith("VmHWM:"))
    return int(kb) * 1024


def child_convert(path: Path, out: Path) -> dict[str, float]:
    """read_program + convert_program + write_program, with per-stage times and peak RSS."""
    from vppctl.convert import ConvertOptions, convert_program
    from vppctl.plan import PlanOptions
    from vppctl.program.load import read_program
    from vppctl.program.save import write_program

    opts = ConvertOptions(plan=PlanOptions(vpp=VPP), seg_method=SEG_METHOD)
    t0 = time.perf_counter()
    program = read_program(path)
    t1 = time.perf_counter()
    convert_program(program, opts)
    t2 = time.perf_counter()
    write_program(program, out)
    t3 = time.perf_counter()
    rss = peak_rss()
    return {
        "seconds": t3 - t0,
        "load": t1 - t0,
        "convert": t2 - t1,
        "save": t3 - t2,
        "rss": rss,
    }


def child_verify(path: Path) -> dict[str, float]:
    """read_program + verify_program of a converted program (what `vppctl verify` does)."""
    from vppctl.program.load import read_program
    from vppctl.verify import verify_program

    t0 = time.perf_counter()
    report = verify_program(read_program(path))
    seconds = time.perf_counter() - t0
    assert report.valid, "the converted program does not verify"
    return {"seconds": seconds}


def run_child(kind: str, *args: Path) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--child", kind, *map(str, args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr}")
    result: dict[str, float] = json.loads(proc.stdout)
    return result


# -- the parent ----------------------------------------------------------------------


def vppctl_cmd() -> list[str]:
    """The installed console script next to this interpreter, else `python -m vppctl`."""
    script = Path(sys.executable).with_name("vppctl")
    return [str(script)] if script.exists() else [sys.executable, "-m", "vppctl"]


def wall(cmd: Sequence[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def ensure_sample(work: Path, name: str, args: Sequence[str], regen: bool) -> Path:
    path = work / name
    if regen or not path.exists():
        print(f"generating {path} (vppctl sample {' '.join(args)}) ...", file=sys.stderr)
        t = wall([*vppctl_cmd(), "sample", *args, "-o", str(path)])
        print(f"  {path.stat().st_size / MB:.0f} MB in {t:.1f} s", file=sys.stderr)
    return path


def measure(case: Case, path: Path, work: Path, runs: int) -> Row:
    """Median of `runs` rounds; each round runs the floor, the conversion and the CLI."""
    out = work / f"out-{path.name}"
    floors, converts, rss, clis, ratios, ops = [], [], [], [], [], 0
    verifies, verify_ratios, passes, pass_ratios = [], [], [], []
    f = run_child("floor", path)
    for r in range(runs):
        print(f"  {case.label}: run {r + 1}/{runs}", file=sys.stderr)
        floors.append(f["seconds"])
        ops = int(f["ops"])
        c = run_child("convert", path, out)
        converts.append(c["seconds"])
        rss.append(int(c["rss"]))
        v = run_child("verify", out)
        verifies.append(v["seconds"])
        one = run_child("pass", path)
        passes.append(one["seconds"])
        after = run_child("floor", path)
        around = (f["seconds"] + after["seconds"]) / 2
        ratios.append(c["seconds"] / around)
        verify_ratios.append(v["seconds"] / around)
        pass_ratios.append(one["seconds"] / around)
        print(
            f"    floor {f['seconds']:.3f} s; convert {c['seconds']:.3f} s (load "
            f"{c['load']:.3f}, convert {c['convert']:.3f}, save {c['save']:.3f}), "
            f"peak RSS {c['rss'] / MB:.0f} MB; verify {v['seconds']:.3f} s; one pass "
            f"{one['seconds']:.3f} s",
            file=sys.stderr,
        )
        clis.append(wall(convert_cmd(path, out)))
        f = after
    out.unlink(missing_ok=True)
    return Row(
        case=case,
        size=path.stat().st_size,
        ops=ops,
        floor=statistics.median(floors),
        convert=statistics.median(converts),
        rss=int(statistics.median(rss)),
        ratios=tuple(ratios),
        cli=statistics.median(clis),
        verify=statistics.median(verifies),
        verify_ratios=tuple(verify_ratios),
        one_pass=statistics.median(passes),
        pass_ratios=tuple(pass_ratios),
    )


def convert_cmd(src: Path, out: Path) -> list[str]:
    return [
        *vppctl_cmd(),
        "convert",
        str(src),
        "--vpp",
        str(VPP),
        "--seg-method",
        SEG_METHOD,
        "-o",
        str(out),
    ]


def human_size(n: float) -> str:
    return f"{n / MB:.1f} MB" if n < 10 * MB else f"{n / MB:.0f} MB"


def human_count(n: int) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}k"


def print_table(rows: Sequence[Row], markdown: bool = False) -> None:
    header = (
        "program",
        "size",
        "ops",
        "floor",
        "convert",
        "ratio",
        "peak RSS",
        "RSS/size",
        "verify",
        "ratio",
        "one pass",
        "CLI",
    )
    lines = [
        (
            r.case.label,
            human_size(r.size),
            human_count(r.ops),
            f"{r.floor:.3f} s",
            f"{r.convert:.3f} s",
            f"{r.ratio:.2f}x",
            human_size(r.rss),
            f"{r.rss / r.size:.2f}x",
            f"{r.verify:.3f} s",
            f"{r.verify_ratio:.2f}x",
            f"{r.pass_ratio:.2f}x",
            f"{r.cli:.3f} s",
        )
        for r in rows
    ]
    if markdown:  # the table of docs/performance.md
        for line in (header, ("---",) * len(header), *lines):
            print(f"| {' | '.join(line)} |")
        return
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:{'<' if i == 0 else '>'}{w}}}" for i, w in enumerate(widths))
    print(fmt.format(*header))
    print(fmt.format(*("-" * w for w in widths)))
    for line in lines:
        print(fmt.format(*line))


def print_extras(
    rows: Sequence[Row], small_cli: float, help_time: float, small_pass: float
) -> None:
    """The scaling ratios between sizes, and the start-up figures."""
    plain = [r for r in rows if not r.case.callstack]
    for small, big in zip(plain, plain[1:]):
        print(
            f"scaling convert({big.case.size})/convert({small.case.size}): "
            f"{big.convert / small.convert:.2f}x for {big.ops / small.ops:.2f}x the ops"
        )
    print(
        f"vppctl --help: {help_time:.3f} s; vppctl convert --vpp 2 of the 126-layer pp 7 "
        f"sample: {small_cli:.3f} s (CLI wall times, interpreter start included); a "
        f"process that only reads, parses, passes over every op once and writes it: "
        f"{small_pass:.3f} s"
    )


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def print_targets(rows: Sequence[Row], small_cli: float, help_time: float) -> bool:
    """Prints the targets with PASS/FAIL (n/a without the sizes they need); True if none fail."""
    by = {(r.case.size, r.case.callstack): r for r in rows}
    big, mid = by.get(("1m", False)), by.get(("100k", False))
    results: list[tuple[str, str, bool | None]] = []
    for size, row in (("1m", big), ("100k", mid)):
        name = f"1. {size} convert <= {FLOOR_RATIO_MAX[size]:g}x floor"
        if row is None:
            results.append((name, f"n/a (no {size})", None))
            continue
        results.append(
            (
                name,
                f"{row.ratio:.2f}x (median of rounds; convert {row.convert:.2f} s, floor "
                f"{row.floor:.2f} s)",
                row.ratio <= FLOOR_RATIO_MAX[size],
            )
        )
    name = f"1. convert(1M) <= {SCALING_MAX:g}x convert(100k)"
    if big and mid:
        scaling = big.convert / mid.convert
        results.append(
            (
                name,
                f"{big.convert:.2f} s / {mid.convert:.2f} s = {scaling:.2f}x "
                f"(ops ratio {big.ops / mid.ops:.2f}x)",
                scaling <= SCALING_MAX,
            )
        )
    else:
        results.append((name, "n/a", None))
    results.append(
        (
            f"2. 126-layer CLI convert <= {SMALL_CLI_MAX:g} s, --help < {HELP_MAX:g} s",
            f"convert {small_cli:.3f} s, --help {help_time:.3f} s (medians)",
            small_cli <= SMALL_CLI_MAX and help_time < HELP_MAX,
        )
    )
    name = f"3. 1M-op peak RSS <= {RSS_FACTOR:g}x file size"
    if big:
        limit = RSS_FACTOR * big.size
        results.append(
            (
                name,
                f"{human_size(big.rss)} <= {human_size(limit)} ({big.rss / big.size:.2f}x)",
                big.rss <= limit,
            )
        )
    else:
        results.append((name, "n/a (no 1m)", None))
    name = f"5. verify of the 1M-op output <= {VERIFY_RATIO_MAX:g}x floor"
    if big:
        results.append(
            (
                name,
                f"{big.verify_ratio:.2f}x (verify {big.verify:.2f} s)",
                big.verify_ratio <= VERIFY_RATIO_MAX,
            )
        )
    else:
        results.append((name, "n/a (no 1m)", None))
    width = max(len(name) for name, _, _ in results)
    for name, detail, ok in results:
        mark = "n/a " if ok is None else verdict(ok)
        print(f"{mark}  {name:<{width}}  {detail}")
    return all(ok is not False for _, _, ok in results)


def small_program_times(work: Path, runs: int, regen: bool) -> tuple[float, float, float]:
    """Target 2: `vppctl convert` of the 126-layer pp 7 sample and `vppctl --help`; and,
    for reference, a process that reads, parses, passes over and writes that sample once
    (`child_pass` with an output)."""
    path = ensure_sample(work, "gpt-126l-pp7.pb", ["--layers", "126", "--pp", "7"], regen)
    out = work / "gpt-126l-pp7.vpp.pb"
    cmd = [*vppctl_cmd(), "convert", str(path), "--vpp", "2", "-o", str(out)]
    n = max(runs, SMALL_CLI_RUNS)
    wall(cmd)  # warm-up: the file system's caches
    convert = statistics.median(wall(cmd) for _ in range(n))
    one = [sys.executable, __file__, "--child", "pass", str(path), str(out)]
    one_pass = statistics.median(wall(one) for _ in range(n))
    out.unlink(missing_ok=True)
    help_time = statistics.median(wall([*vppctl_cmd(), "--help"]) for _ in range(max(n, 5)))
    return convert, help_time, one_pass


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sizes", default="10k,100k,1m", help="comma-separated: 10k, 100k, 1m")
    p.add_argument("--runs", type=int, default=3, help="runs per figure (the median is shown)")
    p.add_argument("--quick", action="store_true", help="sizes 10k,100k and 1 run")
    p.add_argument("--work-dir", type=Path, default=Path("bench-out"), help="sample cache")
    p.add_argument("--no-callstack", action="store_true", help="skip the callstack variant")
    p.add_argument("--regen", action="store_true", help="regenerate the cached samples")
    p.add_argument(
        "--markdown", action="store_true", help="the table as markdown (docs/performance.md)"
    )
    p.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.sizes, args.runs = "10k,100k", 1
    return args


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    if args.child:
        kind, *paths = args.child
        children: dict[str, Callable[..., dict[str, float]]] = {
            "floor": child_floor,
            "convert": child_convert,
            "verify": child_verify,
            "pass": child_pass,
        }
        print(json.dumps(children[kind](*map(Path, paths))))
        return 0
    sizes = [s.strip().lower() for s in args.sizes.split(",") if s.strip()]
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        raise SystemExit(f"unknown size {unknown[0]!r}; choose from {', '.join(SIZES)}")
    args.work_dir.mkdir(parents=True, exist_ok=True)
    cases = [Case(s, False) for s in sizes]
    if not args.no_callstack:
        cases += [Case(s, True) for s in sizes if SIZES[s] <= CALLSTACK_MAX_OPS]
    rows = []
    for case in cases:
        path = ensure_sample(args.work_dir, case.file_name(), case.sample_args(), args.regen)
        rows.append(measure(case, path, args.work_dir, args.runs))
    small_cli, help_time, small_pass = small_program_times(args.work_dir, args.runs, args.regen)
    print(
        f"vppctl convert --vpp {VPP} --seg-method {SEG_METHOD}: {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, protobuf {_protobuf_version()}; "
        f"median of {args.runs} run(s); floor = protobuf parse + serialize of the same file"
    )
    print_table(rows, args.markdown)
    print_extras(rows, small_cli, help_time, small_pass)
    ok = print_targets(rows, small_cli, help_time)
    return 0 if ok else 1


def _protobuf_version() -> str:
    from google.protobuf import __version__ as version
    from google.protobuf.internal import api_implementation

    return f"{version} ({api_implementation.Type()})"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
