"""Units: a byte count said to a person, in one style for every message and report.

It sits at the bottom of the layers so that the program layer's out-of-memory message and
the reports above it say sizes alike. (The planner's memory figures are in IEC units,
`vppctl.planner.memory.iec`, as `--memory-limit` takes them.)
"""

from __future__ import annotations


def human_bytes(n: int) -> str:
    """1536 -> `1.5 KB`, 209715200 -> `200.0 MB`; under a kilobyte, `512 B`."""
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"
