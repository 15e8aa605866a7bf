"""Shapes: what every command's JSON object shares, below every outcome that builds one.

The version of each JSON shape, the envelope each object opens with, the `error`
object a failure gives, and the words several shapes carry (the bubble's definition).
The outcomes build their own JSON (`to_json()`), each in its own layer; they all take
the envelope from here, and so does the command line for a failure's object
(`failure_document`).
"""

from __future__ import annotations

from typing import Any

from vppctl._version import __version__
from vppctl.errors import VppctlError

# The version of each JSON shape, one per command (`verify --rules` has its own): the
# `schema` every object carries, and the `const` of its file in vppctl/report/schemas/.
# Raise one when a key of that shape changes meaning or goes away.
SCHEMAS = {
    "convert": 1,
    "moves": 1,
    "verify": 1,
    "verify-rules": 1,
    "inspect": 1,
    "dump": 1,
    "sample": 1,
    "simulate": 1,
    "plan": 1,
}

# The version of a failure's JSON shape, any command's (vppctl/report/schemas/error.json).
ERROR_SCHEMA = 1

BUBBLE_DEFINITION = "idle time of all stages over pp x makespan (the idle share of the step)"


def document(shape: str, body: dict[str, Any]) -> dict[str, Any]:
    """A command's JSON object: the version that wrote it, its shape's version, `error`
    (null: the command did its work; a failure's object is `vppctl.cli`'s) and `body`."""
    return {"vppctl_version": __version__, "schema": SCHEMAS[shape], "error": None, **body}


def failure_document(exit_code: int, kind: str, message: str, hint: str | None) -> dict[str, Any]:
    """The JSON object of a failure with `--json` (vppctl/report/schemas/error.json): the
    envelope, and the `error` object alone."""
    return {
        "vppctl_version": __version__,
        "schema": ERROR_SCHEMA,
        "error": failure_object(exit_code, kind, message, hint),
    }


def error_object(e: VppctlError) -> dict[str, Any]:
    """A failure as the JSON `error` object says it (vppctl/report/schemas/error.json)."""
    return failure_object(e.exit_code, e.kind, str(e), e.hint)


def failure_object(exit_code: int, kind: str, message: str, hint: str | None) -> dict[str, Any]:
    """The JSON `error` object of any failure, vppctl's own or not (an interrupt)."""
    return {"exit_code": exit_code, "kind": kind, "message": message, "hint": hint}
