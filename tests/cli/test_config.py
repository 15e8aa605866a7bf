"""A repository's verify policy in pyproject.toml (vppctl/cli/config.py; issue 32).

`[tool.vppctl.verify]` select/ignore, found as ruff finds its configuration: the nearest
pyproject.toml with a [tool.vppctl] table from the program's directory upwards (the
current directory for stdin); the command line's --select replaces it, --ignore adds
to it, --isolated reads none; a file that cannot work is a usage error naming it.
"""

from __future__ import annotations

from pathlib import Path

import paths
import pytest
from commandline import invoke
from verifykit import grads_moved


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A converted sample with two grad ops moved: V008 and V011, twice each."""
    tmp = tmp_path_factory.mktemp("config")
    good = tmp / "good.pb"
    invoke("convert", str(paths.SAMPLE), "--vpp", "2", "-o", str(good))
    return grads_moved(good.read_bytes())


@pytest.fixture
def repo(tmp_path: Path, seeded: bytes) -> Path:
    """repo/pyproject.toml (ignore V008) and repo/models/deep/bad.pb."""
    root = tmp_path / "repo"
    (root / "models" / "deep").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[tool.vppctl.verify]\nignore = ["V008"]\n')
    (root / "models" / "deep" / "bad.pb").write_bytes(seeded)
    return root


def rules_failed(out: str) -> set[str]:
    """The rules of the violations a concise report lists (not those it says it ignored)."""
    return {line.split(": ")[1].split()[0] for line in out.splitlines() if ":block" in line}


def test_the_nearest_config_from_the_programs_directory_applies(repo: Path) -> None:
    r = invoke(
        "verify", repo / "models" / "deep" / "bad.pb", "--output-format", "concise", exit_code=1
    )
    assert rules_failed(r.stdout) == {"V011"} and "ignored 2 violation(s)" in r.stdout


def test_a_pyproject_without_a_vppctl_table_is_passed_over(repo: Path) -> None:
    (repo / "models" / "pyproject.toml").write_text("[tool.ruff]\nline-length = 99\n")
    r = invoke(
        "verify", repo / "models" / "deep" / "bad.pb", "--output-format", "concise", exit_code=1
    )
    assert rules_failed(r.stdout) == {"V011"}
    (repo / "models" / "pyproject.toml").write_text('[tool.vppctl.verify]\nignore = ["V011"]\n')
    r = invoke(
        "verify", repo / "models" / "deep" / "bad.pb", "--output-format", "concise", exit_code=1
    )
    assert rules_failed(r.stdout) == {"V008"}  # the nearest one, not both


def test_stdin_reads_the_config_of_the_current_directory(
    repo: Path, seeded: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo / "models")
    r = invoke("verify", "-", "--output-format", "concise", input=seeded, exit_code=1)
    assert rules_failed(r.stdout) == {"V011"}


def test_the_command_line_over_the_config(repo: Path) -> None:
    bad = repo / "models" / "deep" / "bad.pb"
    concise = ("--output-format", "concise")
    both = invoke("verify", bad, "--ignore", "V011", *concise, exit_code=0)  # adds
    assert "ignored 4 violation(s)" in both.stdout
    only = invoke("verify", bad, "--select", "V008", *concise, exit_code=1)  # replaces
    assert rules_failed(only.stdout) == {"V008"}
    isolated = invoke("verify", bad, "--isolated", *concise, exit_code=1)
    assert rules_failed(isolated.stdout) == {"V008", "V011"}


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('[tool.vppctl.verify]\nignore = ["V999"]\n', "'V999' names no rule"),
        ('[tool.vppctl.verify]\nignore = "V009"\n', "is not a list"),
        ('[tool.vppctl.verify]\nignored = ["V009"]\n', "'ignored'"),
        ("[tool.vppctl]\nverify = 3\n", "is not a table"),
        ('[tool.vppctl]\nselect = ["V009"]\n', "only a [tool.vppctl.verify] table"),
        ("[tool.vppctl.verify\n", "cannot read"),
    ],
)
def test_a_config_that_cannot_work_is_a_usage_error_naming_it(
    repo: Path, text: str, said: str
) -> None:
    (repo / "pyproject.toml").write_text(text)
    r = invoke("verify", repo / "models" / "deep" / "bad.pb", exit_code=2)
    assert said in r.stderr and "pyproject.toml" in r.stderr, r.stderr
    invoke("verify", repo / "models" / "deep" / "bad.pb", "--isolated", exit_code=1)
