"""Plan files: the PIR plan `convert` writes for a PIR program, read back from a path or "-".

The bytes are read as any input is (`files.read_input`: a file, stdin, a FIFO; refused
when missing or unreadable), at most MAX_PLAN_BYTES, and parsed and checked by
`vppctl.plan.read_pir_plan` (ProgramFileError, exit 3, naming the file and what is wrong).
"""

from __future__ import annotations

import os
import stat

from vppctl.errors import ProgramFileError
from vppctl.plan import PirPlan, read_pir_plan
from vppctl.program.files import STDIO, read_input

# A plan names each layer once: even a million layers of 40-character names fit.
MAX_PLAN_BYTES = 64 << 20


def read_pir_plan_file(spec: str | os.PathLike[str]) -> PirPlan:
    """The PIR plan in `spec` (a path, or "-" for stdin)."""
    shown = os.fspath(spec)
    if shown != STDIO:
        try:
            st = os.stat(shown)
        except OSError:
            st = None  # read_input says why it cannot be read
        if st is not None and stat.S_ISREG(st.st_mode) and st.st_size > MAX_PLAN_BYTES:
            raise ProgramFileError(
                f"cannot read {shown} as a PIR plan: it holds {st.st_size} bytes, and a plan "
                f"file holds at most {MAX_PLAN_BYTES} (vppctl convert writes a few per layer)"
            )
    source = read_input(spec, limit=MAX_PLAN_BYTES)
    return read_pir_plan(bytes(source.data), source.shown)
