"""Digest every command's output on every shipped program, to compare two checkouts.

Run by hand from the repository root (pytest does not collect it):

    python tests/benchmarks/digest_outputs.py > before.txt            # this checkout
    python tests/benchmarks/digest_outputs.py --checkout ../other > after.txt
    diff before.txt after.txt                                          # empty: identical

It runs the CLI (`python -m vppctl`, with the checkout on PYTHONPATH) over the shipped
samples, the Paddle exports in tests/data/paddle_reference and, with --bench, the benchmark's
10k- and 100k-op samples (cached in bench-out/), with the options each command takes,
and prints one line per run: the command, its exit code and the SHA-256 of its stdout,
its stderr and every file it wrote. A refactoring that changes no behaviour leaves the
output unchanged, byte for byte.
"""

from __future__ import annotations

import argparse
import hashlib
import lzma
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
PADDLE = ROOT / "tests" / "data" / "paddle_reference"


def programs(work: Path, bench: bool) -> Iterator[tuple[str, Path]]:
    """(name, path) of every program digested, decompressed into `work`."""
    for path in sorted(SAMPLES.iterdir()):
        if path.suffix in (".pb", ".pbtxt"):
            yield path.name, path
    for path in sorted(PADDLE.iterdir()):
        if path.name.endswith(".pb.xz"):
            out = work / path.name[: -len(".xz")]
            out.write_bytes(lzma.decompress(path.read_bytes()))
            yield path.name, out
        elif path.suffix == ".pb":
            yield path.name, path
    if bench:
        sys.path.insert(0, str(Path(__file__).parent))
        import bench_convert

        (ROOT / "bench-out").mkdir(exist_ok=True)
        for size in ("10k", "100k"):
            for callstack in (False, True):
                case = bench_convert.Case(size, callstack)
                cached = bench_convert.ensure_sample(
                    ROOT / "bench-out", case.file_name(), case.sample_args(), False
                )
                yield case.file_name(), cached


def runs(name: str, src: Path, out: Path) -> Iterator[list[str]]:
    """The command lines run on one program (`out`: the converted file's path)."""
    s, o = str(src), str(out)
    plain = "paddlevpp" not in name and "paddlezbvpp" not in name
    yield ["inspect", s]
    yield ["inspect", s, "--json"]
    yield ["verify", s, "--json"]
    yield ["dump", s, "-o", o + ".pbtxt", "--json"]
    if not plain:
        return
    for vpp in ("1", "2", "3", "4"):
        yield ["convert", s, "--vpp", vpp, "-o", o]
    yield ["convert", s, "--vpp", "2", "-o", o, "--json", "-m", "8"]
    yield ["convert", s, "--vpp", "2", "--placement", "v", "-o", o, "--json"]
    yield ["convert", s, "--vpp", "2", "--split", "balanced", "--cost", "flops", "-o", o]
    yield ["convert", s, "--vpp", "2", "--split", "keep", "-o", o, "--json"]
    yield ["convert", s, "--vpp", "2", "--strip-callstack", "-o", o]
    yield ["verify", o, "--json"]
    yield ["simulate", o, "-m", "8", "--json"]
    yield ["simulate", s, "--vpp", "2", "-m", "8", "--svg", o + ".svg", "--csv", o + ".csv"]
    yield ["plan", s, "-m", "8,16", "--json"]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def digest(checkout: Path, bench: bool) -> Iterator[str]:
    # No progress lines: a phase's line appears when it takes over a second, which depends on
    # the machine's load, not on the checkout.
    env = {
        **os.environ,
        "PYTHONPATH": str(checkout),
        "COLUMNS": "100",
        "NO_COLOR": "1",
        "VPPCTL_PROGRESS": "off",
    }
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name, src in programs(work, bench):
            out = work / "out.pb"
            for args in runs(name, src, out):
                # What this run writes (the converted file stays for the runs that read it).
                written = [Path(v) for k, v in zip(args, args[1:]) if k in ("-o", "--svg", "--csv")]
                for path in written:
                    path.unlink(missing_ok=True)
                cmd = [sys.executable, "-m", "vppctl", *args]
                p = subprocess.run(cmd, env=env, capture_output=True, cwd=work)
                files = " ".join(
                    f"{f.name}={sha(_neutral(f.read_bytes(), work))}"
                    for f in written
                    if str(f) in args and f.exists()
                )
                shown = " ".join(a.replace(str(work), "W").replace(str(ROOT), "R") for a in args)
                yield (
                    f"{shown} | exit {p.returncode} | out {sha(_neutral(p.stdout, work))} | "
                    f"err {sha(_neutral(p.stderr, work))} | {files}"
                )


def _neutral(data: bytes, work: Path) -> bytes:
    """Output with the temporary directory's and the checkout's paths made constant (the
    SVG's caption names its program, for one)."""
    return data.replace(str(work).encode(), b"W").replace(str(ROOT).encode(), b"R")


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkout", type=Path, default=ROOT, help="the vppctl checkout to run")
    p.add_argument("--bench", action="store_true", help="also the 10k- and 100k-op samples")
    args = p.parse_args(argv)
    if shutil.which(sys.executable) is None:  # pragma: no cover
        raise SystemExit("no interpreter")
    for line in digest(args.checkout.resolve(), args.bench):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
