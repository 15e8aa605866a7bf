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
"""

from __future__ import annotations

import builtins
import dis
import sys
from array import array
from collections.abc import Callable
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import vppctl
from vppctl.convert import ConvertOptions, convert_program
from vppctl.plan import PlanOptions
from vppctl.program.load import parse_program
from vppctl.sample import SampleOptions, build_sample

MAX_RATIO = 2.5
PACKAGE = str(Path(vppctl.__file__).parent)
# Methods that scan their container: their cost is counted as its length.
LINEAR_METHODS = frozenset(
    {"index", "count", "remove", "insert", "find", "rfind", "rindex", "startswith", "endswith"}
)
SIZED = (list, tuple, array, bytes, bytearray, str)


class WorkCounter:
    """Counts lines executed in vppctl code and elements scanned by `in` and linear methods."""

    def __init__(self) -> None:
        self.lines = 0
        self.scanned = 0
        self._ours: dict[str, bool] = {}
        self._contains: dict[CodeType, dict[int, Callable[[FrameType], object]]] = {}

    @property
    def work(self) -> int:
        return self.lines + self.scanned

    def __enter__(self) -> WorkCounter:
        self._saved = sys.gettrace(), sys.getprofile()
        sys.setprofile(self._profile)
        sys.settrace(self._call)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.settrace(self._saved[0])
        sys.setprofile(self._saved[1])

    def _is_ours(self, frame: FrameType) -> bool:
        name = frame.f_code.co_filename
        ours = self._ours.get(name)
        if ours is None:
            ours = self._ours[name] = name.startswith(PACKAGE) or name == __file__
        return ours

    def _call(self, frame: FrameType, event: str, arg: Any) -> Any:
        if not self._is_ours(frame):
            return None
        code = frame.f_code
        if code not in self._contains:
            self._contains[code] = _containers(code)
        if self._contains[code]:
            frame.f_trace_opcodes = True
        return self._line

    def _line(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            self.lines += 1
        elif event == "opcode":
            container = self._contains[frame.f_code].get(frame.f_lasti)
            if container is not None:
                value = container(frame)
                if isinstance(value, SIZED):
                    self.scanned += len(value)
        return self._line

    def _profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "c_call" or not self._is_ours(frame):
            return
        owner = getattr(arg, "__self__", None)
        if isinstance(owner, SIZED) and arg.__name__ in LINEAR_METHODS:
            self.scanned += len(owner)


def _containers(code: CodeType) -> dict[int, Callable[[FrameType], object]]:
    """For each `x in y` of `code` (by offset), how to find `y` in the frame about to run it.

    `y` is on the stack then, pushed by the instruction before: a local, a free or
    global variable, or an attribute of a local (`self.items`). Other forms are
    not followed.
    """
    found: dict[int, Callable[[FrameType], object]] = {}
    ins = list(dis.get_instructions(code))
    for i, op in enumerate(ins):
        if op.opname != "CONTAINS_OP" or i == 0:
            continue
        load = ins[i - 1]
        name = load.argval
        if load.opname in ("LOAD_FAST", "LOAD_DEREF"):
            found[op.offset] = lambda f, n=name: f.f_locals.get(n)
        elif load.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            found[op.offset] = lambda f, n=name: f.f_globals.get(n, getattr(builtins, n, None))
        elif load.opname == "LOAD_ATTR" and i > 1 and ins[i - 2].opname == "LOAD_FAST":
            obj = ins[i - 2].argval
            found[op.offset] = lambda f, o=obj, n=name: getattr(f.f_locals.get(o), n, None)
    return found


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
    with WorkCounter() as counter:
        fn(n)
    return counter.work


def test_the_counter_sees_quadratic_loops_and_scans() -> None:
    for fn in (_nested_loops, _index_in_a_loop, _in_list_in_a_loop):
        assert _work(fn, 200) / _work(fn, 100) > 3.5, fn.__name__
