"""Where things are, in one place: the repository's folders and every fixture the tests read.

`tests/` mirrors `vppctl/` (CONTRIBUTING.md, "The tests"): test files in family folders,
helpers here in `support/` (on pytest's `pythonpath`), fixtures in `data/`.
"""

from __future__ import annotations

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
TESTS = SUPPORT.parent
ROOT = TESTS.parent
PACKAGE = ROOT / "vppctl"
DOCS = ROOT / "docs"
SAMPLES = ROOT / "samples"
BENCHMARKS = TESTS / "benchmarks"

DATA = TESTS / "data"
GOLDEN = DATA / "golden"  # whole-sample conversions (convert/test_golden.py)
SCHEDULE_GOLDENS = DATA / "schedules.json"  # the references' schedule orders
PADDLE_REFERENCE = DATA / "paddle_reference"  # legacy programs and Paddle's VPP answers
PIR_REFERENCE = DATA / "pir_reference"  # PIR programs and Paddle's PIR completions
PIR_MATRIX = DATA / "pir_matrix"  # the PIR matrix: programs Paddle built (pir_matrix.py)
LAYOUTS = DATA / "layouts"  # Megatron's layout parser, torchtitan's and DeepSpeed's splits
TYPED = DATA / "typed"  # a user's script, type-checked against the wheel
MEASURED = DATA / "measured"  # profiler traces (torch, Paddle) and the program traced

SAMPLE = SAMPLES / "gpt-8l-pp4.pb"  # the README tour's 8-layer program
