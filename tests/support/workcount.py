"""Counting work instead of timing it: lines of vppctl code executed, plus the elements its
one-line scans touch (`x in list`, `list.index`, ...), for the linearity tests
(tests/contract/test_scaling.py, tests/verify/test_scaling.py).

Timing ratios are noisy on a shared machine; counted work is deterministic. A step that
is quadratic in the program gives about 4x the work for twice the input, a linear one 2x.
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

MAX_RATIO = 2.5
PACKAGE = str(Path(vppctl.__file__).parent)
# Methods that scan their container: their cost is counted as its length.
LINEAR_METHODS = frozenset(
    {"index", "count", "remove", "insert", "find", "rfind", "rindex", "startswith", "endswith"}
)
SIZED = (list, tuple, array, bytes, bytearray, str)


class WorkCounter:
    """Counts lines executed in vppctl code (and in the files named in `also`) and elements
    scanned by `in` and linear methods."""

    def __init__(self, also: tuple[str, ...] = ()) -> None:
        self.also = frozenset(also)
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
            ours = self._ours[name] = name.startswith(PACKAGE) or name in self.also
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
