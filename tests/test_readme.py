"""The README stays true: its set-up commands, rule list and exit codes match the code."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from click.testing import CliRunner

from vppctl import errors
from vppctl.cli import cli
from vppctl.verify import RULES

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def setup_commands() -> list[str]:
    first_block = re.search(r"```sh\n(.*?)```", README, re.S)
    assert first_block is not None
    return first_block.group(1).strip().splitlines()


def test_readme_opens_with_two_setup_commands() -> None:
    assert README.index("```sh") < README.index("\n## ")
    install_run, install_test = setup_commands()
    assert install_run.startswith("pip install . && vppctl convert samples/")
    assert install_test.startswith("pip install -e '.[test")
    assert "pytest" in install_test


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "set -euo pipefail" in ci
    assert setup_commands()[1] in ci.splitlines()


def test_readme_main_job_runs_on_the_shipped_sample(tmp_path: Path, monkeypatch) -> None:
    job = setup_commands()[0].split("&& ", 1)[1]
    args = shlex.split(job)[1:]
    out = tmp_path / "out.pb"
    args[args.index("-o") + 1] = str(out)
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert out.stat().st_size > 0


def test_readme_lists_every_verify_rule() -> None:
    block = README.split("<!-- rules:begin -->")[1].split("<!-- rules:end -->")[0]
    rows = dict(re.findall(r"^\| (V\d{3}) \| (.*) \|$", block, re.M))
    assert rows == RULES


def test_readme_exit_code_table_matches_the_code() -> None:
    table = README.split("## Exit codes")[1].split("\n## ")[0]
    codes = {int(c) for c in re.findall(r"^\| (\d+) \|", table, re.M)}
    assert codes == {
        errors.EXIT_OK,
        errors.EXIT_VIOLATIONS,
        errors.EXIT_USAGE,
        errors.EXIT_FILE,
        errors.EXIT_CONVERT,
        errors.EXIT_INTERNAL,
    }


def test_readme_tour_shows_what_convert_prints(tmp_path: Path, monkeypatch) -> None:
    tour = README.split("## A short tour")[1].split("```console")[1].split("```")[0]
    shown = tour.split("$ vppctl convert prog.pb --vpp 2 --micro-batches 8\n")[1]
    shown = shown.split("$ ")[0]
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    assert (
        runner.invoke(cli, ["sample", "--layers", "8", "--pp", "4", "-o", "prog.pb"]).exit_code == 0
    )
    result = runner.invoke(
        cli, ["convert", "prog.pb", "--vpp", "2", "--micro-batches", "8"], env={"COLUMNS": "80"}
    )
    assert result.exit_code == 0, result.output
    # What a terminal shows: the report (stdout), then the `wrote` line (stderr).
    assert [line.rstrip() for line in result.output.splitlines()] == [
        line.rstrip() for line in shown.splitlines()
    ]


def _commands_table() -> dict[str, str]:
    block = README.split("<!-- commands:begin -->")[1].split("<!-- commands:end -->")[0]
    return dict(re.findall(r"^\| `(vppctl [^`]*)` \| (.*) \|$", block, re.M))


def _options(command: str) -> set[str]:
    found: set[str] = set()
    for param in cli.commands[command].params:
        found.update(getattr(param, "opts", ()))
        found.update(getattr(param, "secondary_opts", ()))
    return found


def test_readme_command_table_names_every_command_once() -> None:
    listed = [usage.split()[1] for usage in _commands_table()]
    assert sorted(listed) == sorted(cli.commands)


def test_readme_command_table_options_exist_in_each_commands_help() -> None:
    for usage, what in _commands_table().items():
        command = usage.split()[1]
        mentioned = set(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", usage + " " + what))
        assert mentioned <= _options(command), (command, mentioned - _options(command))


def test_every_command_takes_json_as_the_readme_says() -> None:
    assert "Every command takes `--json`" in README
    for command in cli.commands:
        assert "--json" in _options(command), command
        assert "--json" in CliRunner().invoke(cli, [command, "--help"]).stdout


def test_readme_use_from_python_example_runs_as_written() -> None:
    import subprocess
    import sys

    code = README.split("## Use from Python")[1].split("```python\n")[1].split("```")[0]
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[-1] == "valid"
    assert lines[0].startswith("0 0 0 ")  # segment 0: stage 0, chunk 0
    assert len(lines) == 1 + 8  # pp 4 x vpp 2 segments
