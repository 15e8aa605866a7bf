"""The README stays true: its set-up commands, rule list and exit codes match the code."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
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
        errors.EXIT_MEMORY,
        errors.EXIT_INTERNAL,
        errors.EXIT_INTERRUPTED,
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


# -- the Paddle section, shell completion, reporting a bug ---------------------------

# `model_loss` for the README's Paddle block: the small GPT of the bridge tests.
_MODEL_LOSS = """
import importlib.util, sys
def model_loss(ids, labels, meshes):
    path = {conftest!r}
    spec = importlib.util.spec_from_file_location("bridge_conftest", path)
    bridge = importlib.util.module_from_spec(spec)
    sys.modules["bridge_conftest"] = bridge
    spec.loader.exec_module(bridge)
    classes = bridge._model_classes()
    logits = classes["GPTModel"](32, 8, 8, meshes)(ids)
    with meshes[-1]:
        return classes["Criterion"]()(logits, labels)
"""

# What the README says of the result, measured after the block has run.
_FACTS = """
import json
from paddle.distributed.passes.pipeline_scheduler_pass import apply_pass
ops = dist_main.global_block().ops
attrs = [dist_context.get_op_dist_attr_for_program(op) for op in ops]
facts = {
    "chunks": sorted({a.chunk_id for a in attrs}),
    "meshes": sorted({tuple(a.process_mesh.process_ids) for a in attrs}),
    "send_v2": sum(op.type == "send_v2" for op in ops),
    "recv_v2": sum(op.type == "recv_v2" for op in ops),
    "adamw": sum(op.type == "adamw" for op in ops),
    "rank_params": sum(1 for p in dist_main.all_parameters()),
}
opt = {"schedule_mode": "VPP", "num_micro_batches": 8, "pp_degree": pp, "pp_stage": 0,
       "vpp_degree": vpp, "dist_context": dist_context, "enable_send_recv_overlap": False}
try:
    apply_pass(dist_main, dist_startup, "VPP", opt)
    facts["scheduler"] = "applied"
except NotImplementedError as e:
    facts["scheduler"] = str(e)
print("FACTS " + json.dumps(facts))
"""


def _section(title: str) -> str:
    return README.split(f"\n## {title}\n")[1].split("\n## ")[0]


@pytest.mark.paddle
def test_readme_paddle_script_runs_and_gives_what_it_says(tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    section = _section("From and back to Paddle").split("### A training script, end to end")[1]
    block = section.split("```python\n")[1].split("```")[0]
    conftest = ROOT / "tests" / "paddle_bridge" / "conftest.py"
    script = _MODEL_LOSS.format(conftest=str(conftest)) + block + _FACTS
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    run = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    line = next(x for x in run.stdout.splitlines() if x.startswith("FACTS "))
    facts = json.loads(line.removeprefix("FACTS "))
    assert facts["chunks"] == [0, 1] and facts["meshes"] == [[0]]
    assert facts["send_v2"] == facts["recv_v2"] == 3
    assert facts["adamw"] == facts["rank_params"] > 0
    assert facts["scheduler"] == "Not support for old IR"
    for said in (
        "chunks 0 and 1 on mesh [0], three `send_v2`",
        "three `recv_v2`, and one `adamw` per parameter of the rank",
        'NotImplementedError("Not support for old IR")',
    ):
        assert said in " ".join(section.split()), said
    assert (tmp_path / "prog.vpp.pb").stat().st_size > 0


def test_readme_shell_completion_commands_work() -> None:
    import os
    import subprocess
    import sys

    section = _section("Shell completion")
    shells = re.findall(r"_VPPCTL_COMPLETE=(\w+_source) vppctl", section)
    assert shells == ["bash_source", "zsh_source", "fish_source"]
    vppctl = [sys.executable, "-m", "vppctl"]
    for shell in shells:
        env = {**os.environ, "_VPPCTL_COMPLETE": shell}
        run = subprocess.run(vppctl, env=env, capture_output=True, text=True, timeout=60)
        assert run.returncode == 0 and "_VPPCTL_COMPLETE" in run.stdout, (shell, run.stderr)
    # What bash asks for when the user presses tab after `vppctl con` and `--placement`.
    asked = {"_VPPCTL_COMPLETE": "bash_complete", "COMP_WORDS": "vppctl con", "COMP_CWORD": "1"}
    run = subprocess.run(
        vppctl, env={**os.environ, **asked}, capture_output=True, text=True, timeout=60
    )
    assert run.stdout.splitlines() == ["plain,convert"]
    asked.update(COMP_WORDS="vppctl convert x.pb --placement ", COMP_CWORD="4")
    run = subprocess.run(
        vppctl, env={**os.environ, **asked}, capture_output=True, text=True, timeout=60
    )
    assert run.stdout.splitlines() == ["plain,loop", "plain,v"]


def test_readme_bug_report_names_options_that_exist() -> None:
    section = _section("Reporting a bug")
    assert "Exit code 70" in section and errors.EXIT_INTERNAL == 70
    assert "`vppctl --version`" in section and "vppctl --debug" in section
    top = {o for p in cli.params for o in getattr(p, "opts", ())}
    assert {"--version", "--debug"} <= top
    assert "--json" in _options("inspect")
    assert {"--strip-callstack", "-o"} <= _options("dump")


def test_license_file_is_the_apache_license_pyproject_names() -> None:
    assert 'license = "Apache-2.0"' in (ROOT / "pyproject.toml").read_text()
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "END OF TERMS AND CONDITIONS" in text


# -- In CI scripts ---------------------------------------------------------------------------


def _ci_section() -> str:
    return _section("In CI scripts")


def test_readme_ci_jobs_run_as_written(tmp_path: Path) -> None:
    """The vppctl lines of the GitHub Actions step and the GitLab job, run in order on the
    shipped sample as prog.pb, in a shell that stops at the first failure."""
    import json
    import os
    import subprocess
    import sys
    from xml.etree import ElementTree

    blocks = re.findall(r"```yaml\n(.*?)```", _ci_section(), re.S)
    assert len(blocks) == 2
    commands = [
        line.strip().removeprefix("- ").strip()
        for block in blocks
        for line in block.splitlines()
        if line.strip().removeprefix("- ").startswith("vppctl ")
    ]
    assert any("--output-format github" in c for c in commands)
    assert any("--output-format junit > verify.xml" in c for c in commands)
    (tmp_path / "prog.pb").write_bytes((ROOT / "samples" / "gpt-8l-pp4.pb").read_bytes())
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    for command in commands:
        run = subprocess.run(
            ["bash", "-c", f"set -euo pipefail; {command}"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, (command, run.stderr)
    root = ElementTree.parse(tmp_path / "verify.xml").getroot()
    assert root.tag == "testsuites" and root.get("failures") == "0"
    assert json.loads((tmp_path / "simulate.json").read_text())["over_memory_limit"] is False


def test_readme_json_error_example_is_what_vppctl_prints(tmp_path: Path, monkeypatch) -> None:
    import json

    from vppctl import __version__

    shown = _ci_section().split("```console\n")[1].split("```")[0]
    command, _, body = shown.partition("\n")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prog.pb").write_bytes((ROOT / "samples" / "gpt-8l-pp4.pb").read_bytes())
    result = CliRunner().invoke(cli, shlex.split(command.removeprefix("$ vppctl ")))
    assert result.exit_code == 4
    said = json.loads(body)
    assert said["vppctl_version"] == __version__  # the README shows this version's
    assert json.loads(result.stdout) == said
    assert result.stderr == f"Error: {said['error']['message']}\n"


def test_readme_schema_snippet_runs() -> None:
    code = _ci_section().split("```python\n")[1].split("```")[0]
    namespace: dict[str, object] = {}
    exec(code, namespace)
    assert namespace["schema"]["properties"]["schema"]["const"] == 1  # type: ignore[index]


def test_readme_lists_each_commands_exit_codes() -> None:
    table = README.split("<!-- exit-codes:begin -->")[1].split("<!-- exit-codes:end -->")[0]
    rows = dict(re.findall(r"^\| `(\w+)` \| ([\d, ]+) \|", table, re.M))
    assert sorted(rows) == sorted(cli.commands)
    for command, codes in rows.items():
        text = " ".join(CliRunner().invoke(cli, [command, "--help"]).stdout.split())
        listed = text.split("Exit codes: ")[1]
        helped = {int(c) for c in re.findall(r"(?:^|, )(\d+) ", listed)}
        assert {int(x) for x in codes.split(", ")} == helped, command
