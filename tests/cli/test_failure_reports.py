"""Every failure of `verify --output-format junit|github` is a report in that format (issue 32).

Was: `verify --output-format junit > verify.xml` on a missing program exited 3 and left
verify.xml empty (a CI job uploading it `when: always` got nothing), and `github` printed
no `::error` for it. Now each failure path (the program cannot be loaded, a usage error of
vppctl's or of click's, out of memory, an interrupt, an internal error) writes, where the
report goes, one well-formed JUnit document with one test case in error, or one GitHub
workflow command; the `Error:` line still goes to stderr, with the same exit code.
JUnit is parsed with xml.etree; GitHub lines are matched against the workflow-command
grammar (`::error file=F,title=T::MESSAGE`: `%`, CR and LF escaped everywhere, `:` and `,`
in properties too).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from xml.etree import ElementTree

import pytest
from commandline import invoke

import vppctl
from vppctl.errors import OutOfMemoryError
from vppctl.escape import printable

FORMATS = ("junit", "github")


def _not_a_program(tmp_path: Path) -> list[str]:
    bad = tmp_path / "garbage.pb"
    bad.write_bytes(b"\xff\x00 not a program")
    return [str(bad)]


def _raises(error: BaseException) -> Callable[..., object]:
    def verify_file(*args: object, **kwargs: object) -> object:
        raise error

    return verify_file


# name -> (arguments after `verify`, the exit code, a word the message holds, what
# vppctl.verify_file raises instead of running (None: it runs))
PATHS: dict[str, tuple[Callable[[Path], list[str]], int, str, BaseException | None]] = {
    "missing": (lambda t: [str(t / "missing.pb")], 3, "missing.pb", None),
    "directory": (lambda t: [str(t)], 3, "director", None),
    "not a program": (_not_a_program, 3, "garbage.pb", None),
    "hostile name": (lambda t: [str(t / "a,b:c%d\r\ne\ufffe.pb")], 3, "no such file", None),
    "usage, options": (lambda t: [str(t / "p.pb"), "--pp", "0"], 2, "--pp", None),
    "usage, click": (lambda t: [str(t / "p.pb"), "--no-such-flag"], 2, "no-such-flag", None),
    "usage, no program": (lambda t: [], 2, "PROG", None),
    "usage, statistics": (lambda t: [str(t / "p.pb"), "--statistics"], 2, "statistics", None),
    "out of memory": (lambda t: [str(t / "p.pb")], 5, "memory", MemoryError()),
    "out of memory, sized": (
        lambda t: [str(t / "p.pb")],
        5,
        "memory",
        OutOfMemoryError("out of memory reading p.pb"),
    ),
    "interrupt": (lambda t: [str(t / "p.pb")], 130, "interrupted", KeyboardInterrupt()),
    "internal": (lambda t: [str(t / "p.pb")], 70, "internal", RuntimeError("boom")),
}


# GitHub's workflow-command grammar: `::NAME key=value,key=value::MESSAGE`, one line;
# values escape %, CR, LF, `:` and `,`; the message escapes %, CR and LF.
_VALUE = r"(?:[^%:,\r\n]|%25|%0D|%0A|%3A|%2C)*"
_COMMAND = re.compile(
    rf"::error(?: (?P<props>\w+={_VALUE}(?:,\w+={_VALUE})*))?"
    r"::(?P<message>(?:[^%\r\n]|%25|%0D|%0A)*)"
)


def _unescape(text: str) -> str:
    for code, char in (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%")):
        text = text.replace(code, char)
    return text


def run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, case: str, form: str
) -> tuple[str, str, int]:
    args, code, _, raised = PATHS[case]
    if raised is not None:
        monkeypatch.setattr(vppctl, "verify_file", _raises(raised))
    r = invoke("verify", *args(tmp_path), "--output-format", form, exit_code=code)
    return r.stdout, r.stderr, code


@pytest.mark.parametrize("case", list(PATHS))
def test_junit_on_every_failure_path_is_one_well_formed_error_test_case(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, case: str
) -> None:
    stdout, stderr, code = run(monkeypatch, tmp_path, case, "junit")
    root = ElementTree.fromstring(stdout)  # the whole of stdout: one document
    assert root.tag == "testsuites" and root.get("errors") == "1", stdout
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == 1, stdout
    errors = cases[0].findall("error")
    assert len(errors) == 1 and not cases[0].findall("failure"), stdout
    said = (errors[0].get("message") or "") + (errors[0].text or "")
    assert PATHS[case][2].lower() in said.lower(), stdout
    assert f"exit {code}" in (errors[0].get("type") or ""), stdout
    assert stderr.startswith("Error:") or "Error:" in stderr, stderr


@pytest.mark.parametrize("case", list(PATHS))
def test_github_on_every_failure_path_is_one_error_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, case: str
) -> None:
    stdout, stderr, _ = run(monkeypatch, tmp_path, case, "github")
    lines = stdout.splitlines()
    assert len(lines) == 1 and stdout.endswith("\n"), stdout
    m = _COMMAND.fullmatch(lines[0])
    assert m is not None, lines[0]
    props = dict(p.split("=", 1) for p in m["props"].split(","))
    assert _unescape(props["title"]).startswith("vppctl verify: "), props
    assert PATHS[case][2].lower() in _unescape(m["message"]).lower(), lines[0]
    given = PATHS[case][0](tmp_path)
    if given and "file" in props:  # a failure on a named program annotates that file
        assert _unescape(props["file"]) == printable(given[0])
    assert "Error:" in stderr


def test_a_hostile_program_path_stays_one_line_and_one_document(tmp_path: Path) -> None:
    name = str(tmp_path / "a,b:c%d\r\ne\ufffe\x01.pb")
    line = invoke("verify", name, "--output-format", "github", exit_code=3).stdout
    assert line.count("\n") == 1 and "\\r\\n" in line and "\\ufffe" in line  # escaped
    assert "%2C" in line and "%25" in line  # and what the workflow command reads
    xml = invoke("verify", name, "--output-format", "junit", exit_code=3).stdout
    suite = ElementTree.fromstring(xml).find("testsuite")
    assert suite is not None and printable(name) in (suite.get("name") or "")


def test_a_report_already_written_gets_no_second_document(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A failure after the report was printed (an interrupt as it ends) adds no second
    document to stdout: the one there is whole."""
    from vppctl.cli import program

    def render_then_interrupt(*args: object, **kwargs: object) -> None:
        real(*args, **kwargs)
        raise KeyboardInterrupt

    real = program._render_verify
    monkeypatch.setattr(program, "_render_verify", render_then_interrupt)
    src = tmp_path / "prog.pb"
    vppctl.sample_file(src, vppctl.SampleOptions(layers=4, pp=2))
    out = invoke("verify", src, "--output-format", "junit", exit_code=130).stdout
    root = ElementTree.fromstring(out)
    assert root.get("errors") == "0" and len(root.findall("./testsuite/testcase")) > 1


@pytest.mark.parametrize("form", ["full", "concise"])
def test_people_s_formats_say_a_failure_once_on_stderr(tmp_path: Path, form: str) -> None:
    r = invoke("verify", tmp_path / "missing.pb", "--output-format", form, exit_code=3)
    assert r.stdout == "" and r.stderr.count("Error:") == 1
