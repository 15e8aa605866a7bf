"""Units: numbers said to a person, in one style for every message and report: a byte
count, a time in seconds, and a sequence whose runs of one value are said once with
their length.

It sits at the bottom of the layers so that the program layer's out-of-memory message and
the reports above it say sizes alike, and the plan's messages and the simulation's plan
line say runs alike. (The planner's memory figures are in IEC units,
`vppctl.planner.memory.iec`, as `--memory-limit` takes them.)
"""

from __future__ import annotations

from collections.abc import Sequence


def human_bytes(n: int) -> str:
    """1536 -> `1.5 KB`, 209715200 -> `200.0 MB`; under a kilobyte, `512 B`."""
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def seconds_text(seconds: float) -> str:
    """A time: `1.234 s`, `12.35 ms`, `123.5 us` (four significant digits), `0 s`."""
    for unit, size in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= size:
            return f"{seconds / size:.4g} {unit}"
    return "0 s" if seconds == 0 else f"{seconds * 1e9:.4g} ns"


def runs_text(values: Sequence[object], run: str = "{value}x{count}", separator: str = ",") -> str:
    """`values` with each run of one value said once with its length: `0x2,1,0x3`; `run`
    says a run of more than one (`{value}`, `{count}`), `separator` goes between."""
    parts: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j < len(values) and values[j] == values[i]:
            j += 1
        parts.append(run.format(value=values[i], count=j - i) if j - i > 1 else str(values[i]))
        i = j
    return separator.join(parts)
