"""Work grows linearly with the program: a structural guard against quadratic code.

Timing ratios are noisy on a shared machine, so these tests count deterministic
work instead (`WorkCounter`): every line of vppctl code executed, plus the
elements scanned where vppctl code hides an O(n) step in one line: `x in
container` on a list, tuple, array, bytes or str (the seed's `idx in seg_op_idx`),
and the linear methods `index`, `count`, `remove`, `insert`, `find`, ... of those
types. Converting (index, layers, plan, apply, verify) or generating a program
with twice the layers must not take more than 2.5x the work; a quadratic step
gives close to 4x.

Not seen: scans inside builtins called on a container (`max(column)`, `sorted`,
`sum`), whose arguments a profiler cannot see.

The tests here also cover vppctl/gcpause.py, which has no test file of its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from pir_json import shared_reads, shared_vector, unmatched_grad
from workcount import MAX_RATIO, WorkCounter

from vppctl.convert import ConvertOptions, convert_program
from vppctl.plan import PlanOptions
from vppctl.program.load import parse_program
from vppctl.sample import SampleOptions, build_sample


def _sample(layers: int) -> bytes:
    return build_sample(SampleOptions(layers=layers, pp=4, hidden=64, vocab=1000))


def _convert_work(layers: int) -> int:
    program = parse_program(_sample(layers))
    opts = ConvertOptions(plan=PlanOptions(vpp=2), seg_method="DecoderLayer")
    with WorkCounter() as counter:
        convert_program(program, opts)
    return counter.work


def _sample_work(layers: int) -> int:
    with WorkCounter() as counter:
        _sample(layers)
    return counter.work


def test_convert_work_is_linear_in_the_layers() -> None:
    small, big = _convert_work(16), _convert_work(32)
    assert big / small <= MAX_RATIO, f"convert: 16 layers {small}, 32 layers {big}"


def test_sample_work_is_linear_in_the_layers() -> None:
    # Long enough that most layers are stamped (see vppctl/sample.py).
    small, big = _sample_work(64), _sample_work(128)
    assert big / small <= MAX_RATIO, f"sample: 64 layers {small}, 128 layers {big}"


# -- the counter itself sees quadratic work ----------------------------------------


def _pir_read_work(data: bytes) -> int:
    with WorkCounter() as counter:
        parse_program(data, source="s.json")
    return counter.work


PIR_SHAPES: dict[str, tuple[Callable[[int], bytes], int]] = {
    # was quadratic: each grad op looked at every reader of the value (2n of them)
    "a value read by n forward ops and n grad ops": (shared_reads, 100),
    # a wide op's results matched by dims: was a scan of the rest per result
    "a grad op's n results matching none of its forward op's n operands": (unmatched_grad, 300),
    "a vector of n values read by a concat and its grad": (lambda n: shared_vector(n, 2), 500),
    "a vector of 100 values read by n ops": (lambda n: shared_vector(100, n), 40),
}


@pytest.mark.parametrize("shape", sorted(PIR_SHAPES))
def test_reading_a_pir_program_is_linear(shape: str) -> None:
    """The PIR reader (JSON, grad links, encoding) on twice the ops or values does at most
    2.5x the work, whatever the shape of the program (docs/io.md: Bounds)."""
    build, n = PIR_SHAPES[shape]
    small, big = _pir_read_work(build(n)), _pir_read_work(build(2 * n))
    assert big / small <= MAX_RATIO, f"{shape}: n={n} {small}, 2n={2 * n} {big}"


def test_a_vector_read_by_many_grad_ops_reads_in_linear_cpu_time() -> None:
    """Work the counter cannot see: a copy made in C. Each grad op reading a vector's values
    copied the readers of each value to find the one read least (100 values x n readers a
    grad op, n / 2 grad ops): 4x the readers took 6.0x the CPU time (2,500 -> 10,000), now
    3.8x. CPU time, not wall time, and a bound with room: the machine is shared."""
    seconds = []
    for n in (2_500, 10_000):
        data = shared_vector(100, n)
        start = time.process_time()
        parse_program(data, source="s.json")
        seconds.append(time.process_time() - start)
    assert seconds[1] / seconds[0] <= 5.0, seconds


def _nested_loops(n: int) -> None:
    total = 0
    for i in range(n):
        for j in range(n):
            total += i ^ j


def _index_in_a_loop(n: int) -> None:
    items = list(range(n))
    for i in range(n):
        items.index(i)


def _in_list_in_a_loop(n: int) -> None:
    items = list(range(n))
    for i in range(1, n):
        if -i in items:  # never found: scans the whole list
            break


def _work(fn: Any, n: int) -> int:
    with WorkCounter(also=(__file__,)) as counter:  # the loops below are this file's
        fn(n)
    return counter.work


def test_the_counter_sees_quadratic_loops_and_scans() -> None:
    for fn in (_nested_loops, _index_in_a_loop, _in_list_in_a_loop):
        assert _work(fn, 200) / _work(fn, 100) > 3.5, fn.__name__
