"""Lazy loading, held: which of vppctl's modules a command loads.

What a command may not need loads on first use, through its package's lazy face
(`vppctl._lazy`); ruff keeps imports out of functions (pyproject.toml). These tests
pin the result where it matters most: a plain `vppctl convert` loads exactly the
modules below, and `vppctl --help` loads no library module at all; neither loads rich
where stdout and stderr are pipes (what they print there is plain text:
tests/cli/test_plain.py). A new import shows
up here by name: load it on use, through its package's face, or add it to the set
when the command needs it.
"""

from __future__ import annotations

import json
import os
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
watched = ("rich", "tomllib", "tomli", "xml", "hashlib")
others = sorted(m for m in sys.modules if m.split(".")[0] in watched)
with open(report, "w") as f:
    json.dump({"exit": code, "modules": loaded, "others": others}, f)
"""

# A plain `vppctl convert PROG --vpp 2`: the command line, the call, reading, indexing,
# planning, writing, the self-check and the table. No simulator, planner or sample
# generator module (only their packages' faces), no renderer but the plain one (stdout is
# a pipe), no PIR reader or PIR plan, no layout language or balanced search (not asked for).
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
    "vppctl.plan.partition",
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
    "vppctl.report.plain",
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


def _loaded(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, rich: bool = False
) -> set[str]:
    """The vppctl modules the command line loaded. It must not load rich (stdout and stderr
    are pipes here) unless `rich` says it may, nor TOML, XML or hashlib (verify's
    policy file, a JUnit failure, a PIR plan's digest)."""
    report = tmp_path / "modules.json"
    run = subprocess.run(
        [sys.executable, "-c", CHILD, str(report), *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
        env=env,
    )
    assert report.exists(), run.stderr
    found = json.loads(report.read_text())
    assert found["exit"] == 0, run.stderr
    if not rich:  # rich where nothing is styled, the readers of what no plain run reads
        assert found["others"] == [], "loaded, and not needed"
    return set(found["modules"]) | {f"other: {m}" for m in found["others"]}


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


def test_a_convert_to_a_pipe_loads_no_renderer_but_the_plain_one(tmp_path: Path) -> None:
    """Its table on stdout, the `wrote` line and the log's phase lines on stderr (a pipe
    each): plain lines, no rich (tests/cli/test_plain.py holds them to rich's)."""
    env = {**os.environ, "VPPCTL_PROGRESS": "on"}
    env.pop("FORCE_COLOR", None)
    env.pop("TTY_COMPATIBLE", None)
    args = ("convert", str(SAMPLE), "--vpp", "2", "-o", "out.pb")
    loaded = _loaded(tmp_path, *args, env=env)
    assert loaded == CONVERT, _differences(loaded, CONVERT)
    forced = {**env, "FORCE_COLOR": "1"}  # a terminal, says the environment: rich draws
    loaded = _loaded(tmp_path, *args, env=forced, rich=True)
    assert {"vppctl.report.program", "other: rich.table"} <= loaded


def test_help_loads_no_library_module(tmp_path: Path) -> None:
    loaded = _loaded(tmp_path, "--help")
    assert loaded == HELP, _differences(loaded, HELP)
