"""Shapes: what every command's JSON object shares, below every outcome that builds one.

The version of each JSON shape, the envelope each object opens with, the `error`
object a failure gives, and the words several shapes carry (the bubble's definition).
The outcomes build their own JSON (`to_json()`), each in its own layer; they all take
the envelope from here, and so does the command line for a failure's object
(`failure_document`). A failure of `verify --output-format junit` or `github` is said in
that format too (`failure_junit`, `failure_github`): a CI job that uploads the report
`when: always` gets one error test case, and GitHub one `::error` annotation.
"""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree

from vppctl._version import __version__
from vppctl.errors import VppctlError
from vppctl.escape import github_data, github_property, printable

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

# The schemas of files vppctl reads, shipped beside the output shapes: the measured costs
# of `--costs-from` (vppctl/report/schemas/costs.json).
INPUT_SCHEMAS = ("costs",)

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


def failure_junit(command: str, source: str | None, failure: dict[str, Any]) -> str:
    """A failure (`failure_object`) of `vppctl COMMAND` on `source` (None: before one was
    known, a usage error) as a JUnit XML document: one test suite, one test case, in
    error (not a failure: nothing was checked). Deterministic, as the report is."""
    counts = {"tests": "1", "failures": "0", "errors": "1"}
    name = f"vppctl {command}" + (f" {printable(source)}" if source is not None else "")
    suites = ElementTree.Element("testsuites", {"name": f"vppctl {command}", **counts})
    suite = ElementTree.SubElement(suites, "testsuite", {"name": name, **counts, "skipped": "0"})
    case = ElementTree.SubElement(
        suite, "testcase", classname=f"vppctl.{command}", name=f"{command}: {failure['kind']}"
    )
    error = ElementTree.SubElement(
        case,
        "error",
        type=f"exit {failure['exit_code']} ({failure['kind']})",
        message=printable(failure["message"]),
    )
    hint = failure["hint"]
    error.text = printable(failure["message"] + (f"; {hint}" if hint else ""))
    ElementTree.indent(suites)
    body = ElementTree.tostring(suites, encoding="unicode")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{body}\n'


def failure_github(command: str, source: str | None, failure: dict[str, Any]) -> str:
    """The same failure as one GitHub Actions `::error` workflow command (a line)."""
    title = github_property(f"vppctl {command}: {failure['kind']}")
    properties = [f"title={title}"]
    if source is not None and source != "-":
        properties.insert(0, f"file={github_property(printable(source))}")
    hint = failure["hint"]
    message = printable(failure["message"] + (f"; {hint}" if hint else ""))
    return f"::error {','.join(properties)}::{github_data(message)}\n"
