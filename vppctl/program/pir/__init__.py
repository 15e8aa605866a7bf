"""PIR: a Paddle 3.x program (PIR, serialized as JSON) read into vppctl's `Program`.

`parse` reads the JSON op by op (walking it with `cursor`) into integer side tables
(`tables`), `grads` links each
grad op to the forward op it differentiates and names the gradients, and `encode`
writes the tables as the `Program` every command reads. vppctl writes no PIR. Names
load on first use: a binary or text program never loads the reader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vppctl._lazy import face

_NAMES = {
    "header_problem": "parse",
    "parse_pir": "parse",
    "PirOrigin": "tables",
}
__all__ = ["PirOrigin", "header_problem", "parse_pir"]
__getattr__, __dir__ = face(__name__, _NAMES, globals())

if TYPE_CHECKING:
    from vppctl.program.pir.parse import header_problem, parse_pir
    from vppctl.program.pir.tables import PirOrigin
