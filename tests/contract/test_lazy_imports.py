"""Lazy loading, held: which of vppctl's modules a command loads.

What a command may not need loads on first use, through its package's lazy face
(`vppctl._lazy`); ruff keeps imports out of functions (pyproject.toml). These tests
pin the result where it matters most: a plain `vppctl convert` loads exactly the
modules below, and `vppctl --help` loads no library module at all. A new import shows
up here by name: load it on use, through its package's face, or add it to the set
when the command needs it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import paths

ROOT = paths.ROOT
SAMPLE = ROOT / "samples" / "gpt-8l-pp4.pb"

# Runs the command line in a fresh interpreter, then writes the vppctl modules it
# loaded (and the exit code) to the file named first.
CHILD = """
import json, sys
report, args = sys.argv[1], sys.argv[2:]
sys.argv = ["vppctl", *args]
from vppctl.cli import main
try:
    main()
    code = 0
except SystemExit as e:
    code = e.code
loaded = sorted(m for m in sys.modules if m == "vppctl" or m.startswith("vppctl."))
with open(report, "w") as f:
    json.dump({"exit": code, "modules": loaded}, f)
"""

# A plain `vppctl convert PROG --vpp 2`: the command line, the call, reading, indexing,
# planning, writing, the self-check and the table. No simulator, planner or sample
# generator module (only their packages' faces), no renderer but convert's, no PIR reader.
CONVERT = {
    "vppctl",
    "vppctl._lazy",
    "vppctl._version",
    "vppctl.choices",
    "vppctl.cli",
    "vppctl.cli.base",
    "vppctl.cli.config",
    "vppctl.cli.options",
    "vppctl.cli.program",
    "vppctl.cli.progress",
    "vppctl.cli.schedule",
    "vppctl.cli.streams",
    "vppctl.commands",
    "vppctl.convert",
    "vppctl.engine",
    "vppctl.engine.apply",
    "vppctl.engine.backward",
    "vppctl.engine.cost",
    "vppctl.engine.detect",
    "vppctl.engine.flow",
    "vppctl.engine.index",
    "vppctl.engine.layers",
    "vppctl.engine.moves",
    "vppctl.engine.precheck",
    "vppctl.errors",
    "vppctl.escape",
    "vppctl.gcpause",
    "vppctl.mesh",
    "vppctl.outcomes",
    "vppctl.outcomes.memory",
    "vppctl.outcomes.program",
    "vppctl.plan",
    "vppctl.plan.balanced",
    "vppctl.plan.layout",
    "vppctl.plan.partition",
    "vppctl.plan.pirplan",
    "vppctl.plan.placement",
    "vppctl.planner",
    "vppctl.program",
    "vppctl.program._proto",
    "vppctl.program._proto.program_pb2",
    "vppctl.program._proto.view_pb2",
    "vppctl.program.atomic",
    "vppctl.program.destinations",
    "vppctl.program.files",
    "vppctl.program.framing",
    "vppctl.program.items",
    "vppctl.program.limits",
    "vppctl.program.literals",
    "vppctl.program.load",
    "vppctl.program.pir",
    "vppctl.program.pir.tables",
    "vppctl.program.planfile",
    "vppctl.program.reads",
    "vppctl.program.record",
    "vppctl.program.rewrite",
    "vppctl.program.roles",
    "vppctl.program.save",
    "vppctl.program.scan",
    "vppctl.program.sniff",
    "vppctl.program.splice",
    "vppctl.program.wire",
    "vppctl.progress",
    "vppctl.report",
    "vppctl.report.common",
    "vppctl.report.program",
    "vppctl.sample",
    "vppctl.schedule",
    "vppctl.shapes",
    "vppctl.summary",
    "vppctl.units",
    "vppctl.validate",
    "vppctl.verify",
    "vppctl.verify.checker",
    "vppctl.verify.checks",
    "vppctl.verify.expectation",
    "vppctl.verify.outcome",
    "vppctl.verify.refusals",
    "vppctl.verify.rules",
    "vppctl.verify.segments",
    "vppctl.verify.selection",
}

# `vppctl --help`: the command line and the bottom layer, and the library's faces only.
HELP = {
    "vppctl",
    "vppctl._lazy",
    "vppctl._version",
    "vppctl.choices",
    "vppctl.cli",
    "vppctl.cli.base",
    "vppctl.cli.config",
    "vppctl.cli.options",
    "vppctl.cli.program",
    "vppctl.cli.progress",
    "vppctl.cli.schedule",
    "vppctl.cli.streams",
    "vppctl.errors",
    "vppctl.escape",
    "vppctl.outcomes",
    "vppctl.planner",
    "vppctl.progress",
    "vppctl.report",
    "vppctl.schedule",
    "vppctl.shapes",
    "vppctl.units",
    "vppctl.validate",  # the PATH type refuses a name no file can have (file_name)
}


def _loaded(tmp_path: Path, *args: str) -> set[str]:
    report = tmp_path / "modules.json"
    run = subprocess.run(
        [sys.executable, "-c", CHILD, str(report), *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert report.exists(), run.stderr
    found = json.loads(report.read_text())
    assert found["exit"] == 0, run.stderr
    return set(found["modules"])


def _differences(loaded: set[str], expected: set[str]) -> str:
    said = []
    if loaded - expected:
        said.append("loaded but not expected: " + ", ".join(sorted(loaded - expected)))
    if expected - loaded:
        said.append("expected but not loaded: " + ", ".join(sorted(expected - loaded)))
    return "; ".join(said)


def test_a_plain_convert_loads_only_what_it_uses(tmp_path: Path) -> None:
    loaded = _loaded(tmp_path, "convert", str(SAMPLE), "--vpp", "2", "-o", "out.pb", "-q")
    assert loaded == CONVERT, _differences(loaded, CONVERT)


def test_help_loads_no_library_module(tmp_path: Path) -> None:
    loaded = _loaded(tmp_path, "--help")
    assert loaded == HELP, _differences(loaded, HELP)
