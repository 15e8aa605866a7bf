"""Hints that show a command cannot destroy (issue 32): followed literally, none loses a file.

Was: at a terminal, `vppctl convert prog.pb --vpp 2 -o -` said "redirect stdout (-o - >
prog.pb, ...)", and `... -o - > prog.pb` emptied the tour's own input before vppctl
started; vppctl then suggested --in-place for the empty file. Hints now name no path the
user has (OUT, CMD stand for one of theirs), and an output stream that is the emptied
input says the shell emptied it.

The rule, for every hint: every string in vppctl/ that shows a command (a redirection
into or out of a file, `-o` with a file, a `vppctl` command line, `--in-place`; docstrings,
--help texts and bare option names aside) is found in the source here, and must have an
entry in HINTS: the command that gets it (run, its message checked to hold the hint) and
the commands a user typing the hint runs. Each runs in bash, as the docs test runs a
block, in a scratch directory holding the README tour's files; afterwards every file is
still there, none is empty, and each keeps its bytes, but the one a hint overwrites on
purpose (--in-place), which must still hold a program. A new hint fails this test until
it has an entry, and its command has run.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import paths
import pytest
from iohelpers import child, run_in_pty, terminal_env

import vppctl
from vppctl.cli import cli

ROOT = paths.ROOT
PACKAGE = paths.PACKAGE

pytestmark = pytest.mark.heavy  # a process per hint and per command: started first

# What shows a command: `> OUT`, `< prog.pb`, `| CMD` (a placeholder in capitals, or a file
# name), `-o -`, `-o OUT`, `vppctl CMD -...` or `vppctl CMD FILE`, and `--in-place`.
_FILE = r"(?:[A-Z]{2,}\b|[\w./-]+\.[a-z]{2,}\b)"
SHOWS = re.compile(
    rf"(?<![\w<>=-])[<>|] {_FILE}"
    rf"|-o (?:-(?!\w)|{_FILE})"
    rf"|vppctl (?:{'|'.join(cli.commands)}) (?:-|[\w./]+\.\w+)"
    r"|--in-place"
)
_OPTION_NAME = re.compile(r"--?[\w-]+")


def _skipped_strings(tree: ast.AST) -> set[int]:
    """Docstrings, and the help texts of click's options and commands."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            skipped.add(id(first.value))
        if isinstance(node, ast.keyword) and node.arg in ("help", "epilog", "short_help"):
            skipped.update(id(n) for n in ast.walk(node.value))
    return skipped


def shown_commands() -> set[tuple[str, str]]:
    """(module, fragment) of every string in vppctl/ that shows a command."""
    found: set[tuple[str, str]] = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        if "_proto" in path.parts:
            continue
        tree = ast.parse(path.read_text())
        skipped = _skipped_strings(tree)
        module = str(path.relative_to(ROOT))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            if id(node) in skipped or _OPTION_NAME.fullmatch(node.value):
                continue
            found.update((module, m.group()) for m in SHOWS.finditer(node.value))
    return found


@dataclass(frozen=True)
class Hint:
    """How a hint is met and followed: `trigger` gets it (`pty`: at a terminal), and each
    of `runs` is what a user typing it runs; `rewrites` the file one of them overwrites
    on purpose; `code` the exit code each run must have (None: any, for a placeholder
    command such as CMD)."""

    trigger: str
    runs: tuple[str, ...]
    pty: bool = False
    rewrites: str = ""
    code: int | None = 0
    trigger_code: int = 2  # a usage error, but a note of a report


_TERMINAL = Hint(
    "vppctl convert prog.pb --vpp 2 -o -",
    ("vppctl convert prog.pb --vpp 2 -o OUT", "vppctl convert prog.pb --vpp 2 -o - > OUT"),
    pty=True,
)
_PIPE = Hint(
    "vppctl convert prog.pb --vpp 2 -o -",
    ("vppctl convert prog.pb --vpp 2 -o - | CMD",),
    pty=True,
    code=None,
)
_STDIN = Hint("vppctl inspect -", ("vppctl inspect - < prog.pb",), pty=True)
_EMPTIED = Hint(
    "vppctl convert prog.pb --vpp 2 -o - > prog.pb",
    ("vppctl convert prog.pb --vpp 2 -o - > OUT",),
    code=0,
)

_NOT_A_PLAN = Hint(  # a PIR program given where its plan goes
    "vppctl verify completed.json --plan prog.json",
    ("vppctl convert prog.json --vpp 2 -o PLAN.json",),
    trigger_code=3,
)

HINTS: dict[tuple[str, str], Hint] = {
    ("vppctl/program/files.py", "-o OUT"): _TERMINAL,
    ("vppctl/program/files.py", "-o -"): _TERMINAL,
    ("vppctl/program/files.py", "> OUT"): _TERMINAL,
    ("vppctl/program/files.py", "| CMD"): _PIPE,
    ("vppctl/program/files.py", "vppctl inspect -"): _STDIN,
    ("vppctl/program/files.py", "< prog.pb"): _STDIN,
    ("vppctl/program/destinations.py", "> OUT"): _EMPTIED,
    ("vppctl/commands.py", "-o OUT"): Hint(
        "vppctl convert - --vpp 2 --in-place < prog.pb",
        ("vppctl convert - --vpp 2 -o OUT < prog.pb",),
    ),
    ("vppctl/commands.py", "--in-place"): Hint(
        "vppctl convert prog.pb --vpp 2 -o prog.pb",
        ("vppctl convert prog.pb --vpp 2 --in-place",),
        rewrites="prog.pb",
    ),
    ("vppctl/cli/program.py", "-o OUT"): Hint(
        "vppctl dump prog.pb --json", ("vppctl dump prog.pb --json -o OUT",)
    ),
    ("vppctl/commands.py", "-o PLAN"): Hint(
        "vppctl convert prog.json --vpp 2 --in-place",
        ("vppctl convert prog.json --vpp 2 -o PLAN.json",),
    ),
    ("vppctl/plan/pirplan.py", "-o PLAN"): _NOT_A_PLAN,
    ("vppctl/plan/pirplan.py", "vppctl convert PROG.json"): _NOT_A_PLAN,
    ("vppctl/report/verify.py", "vppctl verify -"): Hint(
        "vppctl verify completed.json", ("vppctl verify --rules",), trigger_code=1
    ),
}


def test_every_hint_that_shows_a_command_has_an_entry() -> None:
    found = shown_commands()
    assert found == set(HINTS), (
        f"new hints (give each an entry): {sorted(found - set(HINTS))}; "
        f"stale entries: {sorted(set(HINTS) - found)}"
    )


def test_no_hint_names_a_tour_file_as_a_destination() -> None:
    """`> prog.pb`, `-o prog.pb` or `-o - > X.pb` in a hint would destroy a file the user
    has: a destination is a placeholder (OUT, CMD)."""
    for _, fragment in shown_commands():
        assert not re.match(r"(?:>|-o) [\w./-]+\.[a-z]{2,}", fragment), fragment


# -- the scratch directory: the README tour's files ---------------------------------------


@pytest.fixture(scope="module")
def tour(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What the docs test stages: the tour's prog.pb and prog.vpp.pb, PIR's prog.json and
    completed.json, a samples link."""
    import lzma

    base = tmp_path_factory.mktemp("tour")
    shutil.copy(ROOT / "samples" / "gpt-8l-pp4.pb", base / "prog.pb")
    options = vppctl.ConvertOptions(plan=vppctl.PlanOptions(vpp=2))
    vppctl.convert_file(base / "prog.pb", base / "prog.vpp.pb", options)
    for kind, name in (("plain", "prog.json"), ("paddlevpp", "completed.json")):
        data = lzma.decompress(
            (paths.PIR_REFERENCE / f"gpt_keep_pp2_v2_{kind}.json.xz").read_bytes()
        )
        (base / name).write_bytes(data)
    (base / "samples").symlink_to(ROOT / "samples")
    return base


@pytest.fixture
def scratch(tour: Path, tmp_path: Path) -> Path:
    work = tmp_path / "work"
    shutil.copytree(tour, work, symlinks=True)
    return work


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("COLUMNS", None)
    return env


def bash(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _files(directory: Path) -> dict[str, bytes]:
    return {
        p.name: p.read_bytes() for p in directory.iterdir() if p.is_file() and not p.is_symlink()
    }


def _hint_of(hint: Hint, directory: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """What the trigger printed, on either stream (at a terminal for `pty`)."""
    if hint.pty:
        monkeypatch.chdir(directory)
        argv = [*child()[:1], "-m", "vppctl", *hint.trigger.split()[1:]]
        code, out = run_in_pty(argv, env=terminal_env())
        assert code == hint.trigger_code, out
        return " ".join(out.decode(errors="replace").split())
    run = bash(hint.trigger, directory)
    assert run.returncode == hint.trigger_code, run.stderr
    return " ".join((run.stdout + run.stderr).split())


@pytest.mark.parametrize(("where", "hint"), list(HINTS.items()), ids=[f"{m}:{f}" for m, f in HINTS])
def test_each_hint_is_what_its_trigger_says_and_following_it_loses_nothing(
    where: tuple[str, str],
    hint: Hint,
    scratch: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trigger_dir = tmp_path / "trigger"
    shutil.copytree(scratch, trigger_dir, symlinks=True)  # a trigger may be the destroyer
    said = _hint_of(hint, trigger_dir, monkeypatch)
    assert where[1] in said, said
    before = _files(scratch)
    for command in hint.runs:
        run = bash(command, scratch)
        if hint.code is not None:
            assert run.returncode == hint.code, (command, run.stderr)
        after = _files(scratch)
        for name, data in before.items():
            assert name in after, f"`{command}` removed {name}"
            assert after[name], f"`{command}` emptied {name}"
            if name == hint.rewrites:
                vppctl.read_program(scratch / name)  # rewritten on purpose: still a program
            else:
                assert after[name] == data, f"`{command}` changed {name}"


def test_an_output_stream_that_is_the_emptied_input_says_the_shell_emptied_it(
    scratch: Path,
) -> None:
    """`-o - > prog.pb` (and `< prog.pb > prog.pb` for a filter): the shell emptied the
    input before vppctl started; the message says so and suggests no --in-place."""
    for command in (
        "vppctl convert prog.pb --vpp 2 -o - > prog.pb",
        "vppctl dump prog.vpp.pb > prog.vpp.pb",
        "vppctl convert - --vpp 2 < prog.json > prog.json",
        "vppctl simulate completed.json -m 8 --svg - > completed.json",
    ):
        run = bash(command, scratch)
        said = " ".join(run.stderr.split())
        assert run.returncode == 2, (command, said)
        assert "the shell emptied it" in said and "--in-place" not in said, (command, said)
    shutil.copy(ROOT / "samples" / "gpt-8l-pp4.pb", scratch / "kept.pb")
    run = bash("vppctl convert kept.pb --vpp 2 -o - >> kept.pb", scratch)  # not emptied
    said = " ".join(run.stderr.split())
    assert run.returncode == 2 and "redirect the output to a new file" in said, said
    assert "emptied" not in said
    assert (scratch / "kept.pb").read_bytes() == (ROOT / "samples" / "gpt-8l-pp4.pb").read_bytes()


def test_an_empty_input_named_as_its_own_output_gets_no_in_place_hint(scratch: Path) -> None:
    """After `-o - > prog.pb` emptied it, `-o prog.pb` must not send the user on to
    `--in-place` an empty file."""
    (scratch / "prog.pb").write_bytes(b"")
    for command in ("vppctl convert prog.pb --vpp 2 -o prog.pb", "vppctl dump prog.pb -o prog.pb"):
        run = bash(command, scratch)
        said = " ".join(run.stderr.split())
        assert run.returncode == 2 and "it is empty" in said and "--in-place" not in said, said
