"""The docs stay true: every block of README.md, docs/*.md and CONTRIBUTING.md runs (or
says why it cannot), prints what it shows, and the tables the code holds are written
from the code.

How each kind of block runs is in CONTRIBUTING.md ("The docs test"). Every block runs
in a fresh directory holding the tour's programs, the PIR programs of docs/paddle.md and
a link to the shipped samples, built once.
"""

from __future__ import annotations

import doctest
import importlib.util
import io
import lzma
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import redirect_stdout
from pathlib import Path

import paths
import pytest
from commandline import invoke
from docblocks import (
    PAGES,
    ROOT,
    Fence,
    all_fences,
    anchors,
    console_steps,
    fences,
    in_process_args,
    paddle_script,
    pir_script,
    shows,
)

from vppctl import errors
from vppctl.cli import cli

README = (ROOT / "README.md").read_text()
PIR = paths.PIR_REFERENCE
RUNS = ("console", "sh", "python", "pycon", "yaml")
# The Paddle scripts of docs/paddle.md, and what the test supplies each.
SCRIPTS = (("run with", "model_loss"), ("run with", "make_job"))


def _is_setup(fence: Fence) -> bool:
    return fence.page == "README.md" and fence == fences("README.md")[0]


def _runnable() -> Iterator[object]:
    for fence in all_fences():
        if fence.directive and fence.directive[0] == "not run":
            continue
        marks = [pytest.mark.paddle] if fence.directive in SCRIPTS else []
        yield pytest.param(fence, id=fence.id, marks=marks)


# -- the directory a block runs in ------------------------------------------------------


@pytest.fixture(scope="session")
def stage(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What the docs' examples name: the tour's prog.pb and its conversion, the PIR
    prog.json and completed.json of docs/paddle.md, and samples/."""
    from vppctl import ConvertOptions, PlanOptions, convert_file

    base = tmp_path_factory.mktemp("docs-stage")
    shutil.copy(ROOT / "samples" / "gpt-8l-pp4.pb", base / "prog.pb")
    convert_file(base / "prog.pb", base / "prog.vpp.pb", ConvertOptions(plan=PlanOptions(vpp=2)))
    for kind, name in (("plain", "prog.json"), ("paddlevpp", "completed.json")):
        data = lzma.decompress((PIR / f"gpt_keep_pp2_v2_{kind}.json.xz").read_bytes())
        (base / name).write_bytes(data)
    (base / "samples").symlink_to(ROOT / "samples")
    return base


@pytest.fixture
def workdir(stage: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh copy of the stage, as the working directory. Output goes to a pipe, which
    gets whole lines (at a terminal long lines would wrap at its width)."""
    work = tmp_path / "work"
    shutil.copytree(stage, work, symlinks=True)
    monkeypatch.chdir(work)
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("TERM", "dumb")
    monkeypatch.setenv("HOME", str(work))
    return work


def _shell_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def _bash(command: str, cwd: Path, *, strict: bool) -> tuple[int, str]:
    script = ("set -euo pipefail\n" if strict else "") + command
    run = subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=_shell_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
        check=False,
    )
    return run.returncode, run.stdout


def _vppctl(args: list[str]) -> tuple[int, str]:
    result = invoke(*args, exit_code=None)
    return result.exit_code, result.output


# -- the runners --------------------------------------------------------------------------


def run_console(fence: Fence, work: Path) -> None:
    code = 0
    for step in console_steps(fence.body):
        if step.command.strip() == "echo $?":
            printed = f"{code}\n"
        else:
            args = in_process_args(step.command)
            if args is not None:
                code, printed = _vppctl(args)
            else:
                code, printed = _bash(step.command, work, strict=False)
            follows = _next_is_exit_code(fence, step.command)
            assert code == 0 or follows, f"{fence.id}: `{step.command}` exited {code}:\n{printed}"
        if step.shown:
            assert shows(step.shown, printed), (
                f"{fence.id}: `{step.command}` printed\n{printed}\nwhile the doc shows\n"
                + "\n".join(step.shown)
            )


def _next_is_exit_code(fence: Fence, command: str) -> bool:
    steps = [s.command.strip() for s in console_steps(fence.body)]
    after = steps[steps.index(command.strip()) + 1 :]
    return bool(after) and after[0] == "echo $?"


def run_sh(fence: Fence, work: Path) -> None:
    for line in fence.body.replace("\\\n", " ").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        code, printed = _bash(line, work, strict=True)
        assert code == 0, f"{fence.id}: `{line}` exited {code}:\n{printed}"


def run_python(fence: Fence, work: Path) -> None:
    with redirect_stdout(io.StringIO()):
        exec(compile(fence.body, fence.id, "exec"), {"__name__": "__docs__"})


def run_pycon(fence: Fence, work: Path) -> None:
    test = doctest.DocTestParser().get_doctest(fence.body, {}, fence.id, fence.page, fence.line)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    report = io.StringIO()
    runner.run(test, out=report.write)
    assert runner.failures == 0, report.getvalue()


def run_yaml(fence: Fence, work: Path) -> None:
    """A CI job's vppctl lines, in order, as its shell runs them."""
    commands = [
        line.strip().removeprefix("- ").strip()
        for line in fence.body.splitlines()
        if line.strip().removeprefix("- ").startswith("vppctl ")
    ]
    assert commands, f"{fence.id}: a CI job without a vppctl line"
    for command in commands:
        code, printed = _bash(command, work, strict=True)
        assert code == 0, f"{fence.id}: `{command}` exited {code}:\n{printed}"


def run_setup(fence: Fence, work: Path) -> None:
    """The README's set-up block: its main job runs on the shipped sample (into the
    work directory); the test command is .ci/run's (test_ci_runs_the_readme_test_command);
    a clean clone runs both whole (see the closing notes of issue 24)."""
    install_run, _ = setup_commands()
    args = shlex.split(install_run.rsplit("&& ", 1)[1])[1:]
    args[args.index("-o") + 1] = str(work / "out.pb")
    code, printed = _vppctl(args)
    assert code == 0, printed
    assert (work / "out.pb").stat().st_size > 0


RUNNERS = {
    "console": run_console,
    "sh": run_sh,
    "python": run_python,
    "pycon": run_pycon,
    "yaml": run_yaml,
}


@pytest.mark.parametrize("fence", list(_runnable()))
def test_the_block_runs_as_the_docs_show_it(fence: Fence, workdir: Path) -> None:
    if _is_setup(fence):
        run_setup(fence, workdir)
    elif fence.directive == ("run with", "model_loss"):
        run_paddle_script(fence, workdir)
    elif fence.directive == ("run with", "make_job"):
        run_pir_script(fence, workdir)
    else:
        RUNNERS[fence.lang](fence, workdir)


def test_every_block_is_run_or_says_why_not() -> None:
    for fence in all_fences():
        if _is_setup(fence):
            continue
        if fence.directive is None:
            assert fence.lang in RUNS, f"{fence.id}: a {fence.lang or 'plain'} block: mark it"
        elif fence.directive[0] == "not run":
            assert len(fence.directive[1]) > 10, f"{fence.id}: say why it is not run"
        else:
            assert fence.directive in SCRIPTS, fence.id


# -- what the blocks cannot say for themselves ----------------------------------------------


def setup_commands() -> list[str]:
    return fences("README.md")[0].body.strip().splitlines()


def test_readme_opens_with_the_two_setup_commands() -> None:
    first = fences("README.md")[0]
    assert first.lang == "sh" and README.splitlines()[: first.line - 1] == ["# vppctl", ""]
    install_run, install_test = setup_commands()
    venv = "python3 -m venv .venv && . .venv/bin/activate && "
    assert install_run.startswith(venv + "pip install . && vppctl convert samples/")
    assert install_test == venv + "pip install -e '.[test,paddle,dev]' && python -m pytest"
    prose = README.split("```\n", 1)[1].split("\n## ")[0]
    assert "requires-python" in prose and "pipx install ." in prose
    assert 'requires-python = ">=3.10"' in (ROOT / "pyproject.toml").read_text()


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "set -euo pipefail" in ci
    at = ci.index(setup_commands()[1])
    # The gates run after it, in the venv it activated.
    assert ci[at + 1 :] == ["ruff check .", "ruff format --check .", "mypy", "lint-imports"]
    assert any(line.startswith("export VPPCTL_REQUIRE_PADDLE=1") for line in ci[:at])


def test_readme_is_the_first_hour() -> None:
    assert len(README.splitlines()) <= 300
    titles = re.findall(r"^## (.*)$", README, re.M)
    assert titles[:3] == ["What vppctl is", "A short tour", "Commands"]
    for page in PAGES[2:]:
        assert f"({page})" in README, f"the README does not link {page}"


def test_readme_python_example_prints_the_plan(workdir: Path) -> None:
    block = next(f for f in fences("README.md") if f.lang == "python")
    printed = io.StringIO()
    with redirect_stdout(printed):
        exec(compile(block.body, block.id, "exec"), {})
    lines = printed.getvalue().splitlines()
    assert lines[0].startswith("0 0 0 ")  # segment 0: stage 0, chunk 0
    assert len(lines) == 1 + 8 and lines[-1] == "valid"  # pp 4 x vpp 2 segments, then valid


def test_the_tables_are_written_from_the_code() -> None:
    make = _load(ROOT / "docs" / "make_tables.py")
    assert make.main(["--check"]) == 0, "run python docs/make_tables.py"
    from vppctl.verify import PIR_RULES, RULES

    verify = (ROOT / "docs" / "verify.md").read_text()
    assert all(f"| {rule} | " in verify for rule in RULES)
    assert all(f"| {rule} | " in (ROOT / "docs" / "paddle.md").read_text() for rule in PIR_RULES)


def test_a_stale_table_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make = _load(ROOT / "docs" / "make_tables.py")
    for page, _, _ in make.TABLES:
        shutil.copy(ROOT / "docs" / page, tmp_path / page)
    stale = (tmp_path / "verify.md").read_text().replace("| V002 |", "| V099 |")
    (tmp_path / "verify.md").write_text(stale)
    monkeypatch.setattr(make, "DOCS", tmp_path)
    assert make.main(["--check"]) == 1
    assert make.main([]) == 0 and make.main(["--check"]) == 0
    assert "| V002 |" in (tmp_path / "verify.md").read_text()


def _load(path: Path):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_exit_code_table_is_the_codes() -> None:
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
        errors.EXIT_TERMINATED,
    }


def _commands_table() -> dict[str, str]:
    block = README.split("<!-- commands:begin -->")[1].split("<!-- commands:end -->")[0]
    return dict(re.findall(r"^\| `(vppctl [^`]*)` \| (.*) \|$", block, re.M))


def _options(command: str | None) -> set[str]:
    params = cli.params if command is None else cli.commands[command].params
    found = {"-h", "--help"}
    for param in params:
        found.update(getattr(param, "opts", ()))
        found.update(getattr(param, "secondary_opts", ()))
    return found


def test_readme_command_table_names_every_command_once() -> None:
    listed = [usage.split()[1] for usage in _commands_table()]
    assert sorted(listed) == sorted(cli.commands)


def test_every_command_takes_json_and_shows_examples_as_the_readme_says() -> None:
    said = " ".join(README.split())
    assert "Every command takes `--json`" in said
    assert "Every command's `--help` shows examples and the exit codes" in said
    for command in cli.commands:
        assert "--json" in _options(command), command
        help_text = invoke(command, "--help").stdout
        assert f"\n  vppctl {command} " in help_text and "Exit codes: 0 success" in help_text


def _inline_vppctl() -> Iterator[tuple[str, str]]:
    for page in PAGES:
        text = re.sub(r"```.*?```", "", (ROOT / page).read_text(), flags=re.S)
        for span in re.findall(r"`(vppctl [^`]+)`", text.replace("\n", " ")):
            yield page, span.replace("\\|", "|")


def test_every_vppctl_command_named_in_the_prose_exists_with_its_options() -> None:
    """`vppctl CMD --opt ...` in running text: the command and every option exist."""
    seen = 0
    for page, span in _inline_vppctl():
        words = span.split()
        command = words[1] if len(words) > 1 and words[1].isalpha() else None
        assert command is None or command in cli.commands, (page, span)
        for word in words[1:]:
            option = word.split("=")[0].rstrip(",;:.)")
            if re.fullmatch(r"--?[a-zA-Z][\w-]*", option):
                assert option in _options(command) | _options(None), (page, span, option)
        seen += 1
    assert seen >= 40


_PATH = re.compile(r"(?<![\w./-])((?:tests|docs|samples|vppctl|proto)/[\w./-]*[\w/])")


def test_paths_modules_and_links_the_docs_name_exist() -> None:
    for page in PAGES:
        text = (ROOT / page).read_text()
        for path in _PATH.findall(text):
            assert (ROOT / path).exists(), f"{page} names {path}, which does not exist"
        for module in re.findall(r"python -m ([\w.]+)", text):
            assert importlib.util.find_spec(module) is not None, (page, module)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith(("http://", "https://")):
                continue
            file, _, anchor = target.partition("#")
            where = (ROOT / page).parent / file if file else ROOT / page
            assert where.exists(), f"{page} links {target}, which does not exist"
            if anchor:
                assert anchor in anchors(where), f"{page} links {target}: no such heading"


def test_shell_completion_completes_as_the_readme_says() -> None:
    vppctl = [sys.executable, "-m", "vppctl"]
    asked = {"_VPPCTL_COMPLETE": "bash_complete", "COMP_WORDS": "vppctl con", "COMP_CWORD": "1"}
    run = subprocess.run(
        vppctl, env={**os.environ, **asked}, capture_output=True, text=True, timeout=60
    )
    assert run.stdout.splitlines() == ["plain,convert"]
    asked.update(COMP_WORDS="vppctl convert x.pb --placement V", COMP_CWORD="4")
    run = subprocess.run(
        vppctl, env={**os.environ, **asked}, capture_output=True, text=True, timeout=60
    )
    assert run.stdout.splitlines() == ["plain,v"]  # choices take any case


def test_bug_report_section_names_the_exit_code_and_the_message_points_to_it() -> None:
    from vppctl.cli.base import BUG_REPORT

    section = (ROOT / "CONTRIBUTING.md").read_text().split("\n## Reporting a bug\n")[1]
    assert "Exit code 70" in section and errors.EXIT_INTERNAL == 70
    assert "(CONTRIBUTING.md: Reporting a bug)" in BUG_REPORT


def test_license_file_is_the_apache_license_pyproject_names() -> None:
    assert 'license = "Apache-2.0"' in (ROOT / "pyproject.toml").read_text()
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "END OF TERMS AND CONDITIONS" in text


# -- the Paddle script of docs/paddle.md -------------------------------------------------

# What docs/paddle.md says of the result, measured after the script has run.
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


def run_paddle_script(fence: Fence, work: Path) -> None:
    import json

    run = subprocess.run(
        [sys.executable, "-c", paddle_script() + _FACTS],
        cwd=work,
        env=_shell_env(),
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
    said = " ".join((ROOT / fence.page).read_text().split())
    for claim in (
        "chunks 0 and 1 on mesh [0], three `send_v2`",
        "three `recv_v2`, and one `adamw` per parameter of the rank",
        'NotImplementedError("Not support for old IR")',
    ):
        assert claim in said, claim
    assert (work / "prog.vpp.pb").stat().st_size > 0


def run_pir_script(fence: Fence, work: Path) -> None:
    """docs/paddle.md's PIR script on Paddle 3.3.1 (CPU, PIR mode, rank 0 of 2), up to the
    engine's communication init: Paddle built the train program under pir_plan, with the
    plan's layers in each chunk of rank 0."""
    import json
    from collections import Counter

    env = {**_shell_env(), "FLAGS_enable_pir_api": "1", "GLOG_minloglevel": "2"}
    env.update(PADDLE_TRAINERS_NUM="2", PADDLE_TRAINER_ID="0")
    env["PYTHONPATH"] = os.pathsep.join([str(paths.SUPPORT), env.get("PYTHONPATH", "")])
    run = subprocess.run(
        ["nice", "-n", "15", sys.executable, "-c", pir_script()],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    line = next(x for x in run.stdout.splitlines() if x.startswith("FACTS "))
    built = json.loads(line.removeprefix("FACTS "))
    plan = json.loads((work / "plan.json").read_text())
    stages = [v["layers"] for v in plan["virtual_stages"]]
    assert [len(v) for v in stages] == [3, 3, 3, 3]
    programs = built["programs"]
    assert programs["forward0"]["layers"] == stages[0]  # rank 0: stage 0, chunks 0 and 1
    assert programs["forward1"]["layers"] == stages[2]
    kinds = Counter(kind for kind, _ in built["jobs"])  # 4 micro-batches through each chunk
    assert [kinds[f"{j}{c}"] for j in ("forward", "backward") for c in (0, 1)] == [4, 4, 4, 4]
    assert kinds["optimizer"] == 1
    said = " ".join((ROOT / fence.page).read_text().split())
    assert "runs the script above up to `_init_comm`" in said
