"""Report streams (issue 22): one document per stream, and streams that cannot be written.

One stream, one document: two outputs on stdout (`simulate --svg - --trace -`) are
refused (exit 2, naming both); a stream that carries JSON carries nothing else
(`convert -o - --json` puts the program on stdout and only the JSON on stderr).

Failing streams, decided and documented (docs/ci.md: Streams that fail): a report stream (stdout,
or stderr when it carries the report) that cannot be written is an I/O error, exit 3,
never 70 and never a traceback, and the message says whether the program was written;
stderr carries diagnostics only (progress, warnings, `wrote` lines), so a run that did
its work exits 0 when stderr cannot take them. --help and --version onto /dev/full are
exit 3 too. Each case runs in a child process whose stdout or stderr is /dev/full or
closed (`>&-`), as a shell leaves them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from commandline import invoke
from iohelpers import child
from programs import layered

from vppctl.program._proto import program_pb2 as pb

PROGRAM = layered([0, 0, 1, 1], backward=True, optimizer=True).bytes()
SEG = ("--seg-method", "DecoderLayer")


@pytest.fixture
def prog(tmp_path: Path) -> Path:
    path = tmp_path / "prog.pb"
    path.write_bytes(PROGRAM)
    return path


# -- one stream, one document ------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second"),
    [("--svg", "--trace"), ("--trace", "--csv"), ("--svg", "--csv")],
)
def test_simulate_refuses_two_pictures_on_stdout(first: str, second: str) -> None:
    args = ["simulate", "--pp", "2", "--vpp", "2", "-m", "4", first, "-", second, "/dev/stdout"]
    result = invoke(*args, exit_code=2)
    assert f"{first} and {second} both write to stdout" in result.stderr
    assert result.stdout == ""


def test_simulate_picture_on_stdout_puts_only_the_json_on_stderr() -> None:
    result = invoke("simulate", "--pp", "2", "--vpp", "2", "-m", "4", "--svg", "-", "--json")
    assert result.stdout.startswith("<svg ") and result.stdout.rstrip().endswith("</svg>")
    data = json.loads(result.stderr)  # the whole of stderr is the JSON
    assert data["written"] == [{"path": "-", "bytes": len(result.stdout.encode())}]


def test_convert_program_on_stdout_puts_only_the_json_on_stderr(prog: Path) -> None:
    result = invoke("convert", prog, "--vpp", "2", *SEG, "-o", "-", "--json")
    pb.ProgramDesc.FromString(result.stdout_bytes)  # the whole of stdout is the program
    data = json.loads(result.stderr)  # and of stderr the JSON: no `wrote stdout` line
    assert data["output"] == "-" and data["bytes_written"] == len(result.stdout_bytes)


def test_convert_program_on_stdout_puts_the_table_and_wrote_line_on_stderr(prog: Path) -> None:
    result = invoke("convert", prog, "--vpp", "2", *SEG, "-o", "-")
    pb.ProgramDesc.FromString(result.stdout_bytes)
    assert result.stderr.startswith("pp 2 x vpp 2") and "wrote stdout" in result.stderr


def test_sample_program_on_stdout_puts_only_the_json_on_stderr() -> None:
    result = invoke("sample", "--layers", "2", "--pp", "2", "-o", "-", "--json")
    pb.ProgramDesc.FromString(result.stdout_bytes)
    assert json.loads(result.stderr)["output"] == "-"


def test_dump_json_needs_a_file_output(prog: Path) -> None:
    for args in ((), ("-o", "-")):
        result = invoke("dump", prog, *args, "--json", exit_code=2)
        assert "--json describes the file written, so it needs -o OUT" in result.stderr


# -- streams that cannot be written --------------------------------------------------------


def run_cases(cases: list[dict[str, Any]], tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases))
    run = subprocess.run(
        child("cli-streams", str(path)), capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)  # type: ignore[no-any-return]


REPORT = "cannot write the report to stdout"


def report_cases(prog: Path, converted: Path, out: Path) -> list[tuple[list[str], int, str]]:
    """(args, exit code, what stderr says) of each command when stdout fails."""
    p, c, o = str(prog), str(converted), str(out)
    return [
        (["convert", p, "--vpp", "2", *SEG, "-o", o], 3, f"{REPORT}: {{}}; {o} was written"),
        (["convert", p, "--vpp", "2", *SEG, "-o", "-"], 3, "cannot write to stdout: {}"),
        (["verify", c], 3, f"{REPORT}: {{}}"),
        (["verify", c, "--output-format", "junit"], 3, f"{REPORT}: {{}}"),
        (["inspect", p], 3, f"{REPORT}: {{}}"),
        (["dump", p], 3, "cannot write to stdout: {}"),
        (["simulate", "--pp", "2", "--vpp", "2", "-m", "4"], 3, f"{REPORT}: {{}}"),
        (["simulate", c, "-m", "4", "--json"], 3, f"{REPORT}: {{}}"),
        (["plan", p, "-m", "4"], 3, f"{REPORT}: {{}}"),
        (["sample", "--layers", "2", "--pp", "2", "-o", str(out.with_name("s.pb"))], 0, ""),
        (["--help"], 3, "Error: cannot write the report to stdout: {}"),
        (["--version"], 3, "Error: cannot write the report to stdout: {}"),
        (["convert", "--help"], 3, "Error: cannot write the report to stdout: {}"),
    ]


@pytest.mark.parametrize("mode", ["full", "closed"])
def test_an_unwritable_stdout_is_exit_3_and_says_what_was_written(
    prog: Path, tmp_path: Path, mode: str
) -> None:
    converted = tmp_path / "prog.vpp.pb"
    invoke("convert", prog, "--vpp", "2", *SEG, "-o", converted, "-q")
    out = tmp_path / "out.pb"
    cases = report_cases(prog, converted, out)
    results = run_cases(
        [{"args": a, "stdout": mode, "stderr": "pipe"} for a, _, _ in cases], tmp_path
    )
    reason = "no space left on device" if mode == "full" else "it is closed"
    for (args, code, said), got in zip(cases, results):
        assert got["code"] == code, (args, got)
        assert "Traceback" not in got["stderr"], (args, got)
        if said:
            assert said.format(reason) in got["stderr"], (args, got["stderr"])
            assert got["stderr"].count("Error: ") == 1, (args, got["stderr"])
    assert out.exists()  # convert wrote its program before its report failed, and says so
    if mode == "closed":  # `-o -` onto a closed stdout is refused before any work
        assert "cannot write to stdout: it is closed" in results[1]["stderr"]


@pytest.mark.parametrize("mode", ["full", "closed"])
def test_an_unwritable_stderr_loses_only_diagnostics(prog: Path, tmp_path: Path, mode: str) -> None:
    converted = tmp_path / "prog.vpp.pb"
    invoke("convert", prog, "--vpp", "2", *SEG, "-o", converted, "-q")
    p, c = str(prog), str(converted)
    cases: list[tuple[list[str], int]] = [
        (["convert", p, "--vpp", "2", *SEG, "-o", str(tmp_path / "a.pb")], 0),
        (["convert", p, "--vpp", "3", *SEG, "-o", str(tmp_path / "b.pb")], 4),
        (["convert", p, "--vpp", "2", *SEG, "-o", "-"], 3),  # its report is on stderr
        (["verify", c], 0),
        (["inspect", p], 0),
        (["dump", p, "-o", str(tmp_path / "d.pbtxt")], 0),
        (["sample", "--layers", "2", "--pp", "2", "-o", str(tmp_path / "s.pb")], 0),
        (["simulate", c, "-m", "4"], 0),
        (["plan", p, "-m", "4"], 0),
        (["inspect", str(tmp_path / "missing.pb"), "--json"], 3),
    ]
    results = run_cases([{"args": a, "stdout": "pipe", "stderr": mode} for a, _ in cases], tmp_path)
    for (args, code), got in zip(cases, results):
        assert got["code"] == code, (args, got)
    assert (tmp_path / "a.pb").exists() and not (tmp_path / "b.pb").exists()
    assert results[3]["stdout"].startswith("valid: ")
    assert json.loads(results[-1]["stdout"])["error"]["exit_code"] == 3


def test_help_onto_dev_full_in_a_real_process() -> None:
    with open("/dev/full", "w") as full:
        run = subprocess.run(
            [sys.executable, "-m", "vppctl", "--help"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    assert run.returncode == 3
    assert run.stderr == "Error: cannot write the report to stdout: no space left on device\n"
