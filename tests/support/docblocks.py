"""The fenced blocks of the docs, read as the docs test runs them.

A page's blocks are its ``` fences, each with its language and the directive on the line
before it, if any: `<!-- not run: why -->` (the block cannot run here) or
`<!-- run with: NAME -->` (the test supplies NAME first). A console block is `$ `
commands, each followed by what it prints (`...` standing for any lines). The matching
and the slugs of headings are GitHub's rules as far as the docs use them.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import paths

ROOT = paths.ROOT

# The pages the docs test reads. docs/api.md is generated from the docstrings by
# docs/make_api.py (its fences are signatures) and checked by tests/contract/test_api_reference.py.
PAGES = (
    "README.md",
    "CONTRIBUTING.md",
    *(str(p.relative_to(ROOT)) for p in sorted((ROOT / "docs").glob("*.md")) if p.name != "api.md"),
)

_OPEN = re.compile(r"^```(\S*)\s*$")
_DIRECTIVE = re.compile(r"^<!-- (not run|run with): (.*?) -->$")


@dataclass(frozen=True)
class Fence:
    page: str  # path from the repository root
    line: int  # the opening fence's line, from 1
    lang: str
    body: str
    directive: tuple[str, str] | None  # ("not run", why) or ("run with", NAME)

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def fences(page: str) -> list[Fence]:
    """Every fenced block of a page, in order."""
    lines = (ROOT / page).read_text().splitlines()
    found: list[Fence] = []
    i = 0
    while i < len(lines):
        opening = _OPEN.match(lines[i])
        if not opening:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
        assert end is not None, f"{page}:{i + 1}: a fence that never closes"
        before = _DIRECTIVE.match(lines[i - 1].strip()) if i else None
        body = "\n".join(lines[i + 1 : end]) + "\n"
        directive = (before.group(1), before.group(2).strip()) if before else None
        found.append(Fence(page, i + 1, opening.group(1), body, directive))
        i = end + 1
    return found


def all_fences() -> list[Fence]:
    return [fence for page in PAGES for fence in fences(page)]


@dataclass(frozen=True)
class Step:
    command: str
    shown: tuple[str, ...]  # what the block says it prints; empty: not said


def console_steps(body: str) -> list[Step]:
    """A console block's commands, each with the lines shown under it."""
    steps: list[Step] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            steps.append(Step(line[2:], ()))
        else:
            assert steps, f"output before any command: {line!r}"
            last = steps[-1]
            steps[-1] = Step(last.command, (*last.shown, line))
    return [Step(s.command, _trimmed(s.shown)) for s in steps]


def _trimmed(lines: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    out = [line.rstrip() for line in lines]
    while out and not out[-1]:
        out.pop()
    return tuple(out)


def shows(shown: tuple[str, ...], printed: str) -> bool:
    """Whether `printed` is what `shown` says: the same lines (trailing spaces aside), a
    `...` line standing for any number of lines."""
    actual = _trimmed(printed.splitlines())
    parts: list[list[str]] = [[]]
    for line in shown:
        if line == "...":
            parts.append([])
        else:
            parts[-1].append(line)
    if len(parts) == 1:
        return actual == tuple(parts[0])
    head, *middle, tail = parts
    if tuple(actual[: len(head)]) != tuple(head):
        return False
    at = len(head)
    for part in middle:
        at = _find(actual, part, at)
        if at < 0:
            return False
        at += len(part)
    return len(actual) - len(tail) >= at and (not tail or actual[-len(tail) :] == tuple(tail))


def _find(lines: tuple[str, ...], part: list[str], start: int) -> int:
    for i in range(start, len(lines) - len(part) + 1):
        if list(lines[i : i + len(part)]) == part:
            return i
    return -1


def in_process_args(command: str) -> list[str] | None:
    """The arguments of a plain `vppctl ...` line (no pipe, redirection, `$` or glob),
    which the test runs in-process; None for a line for the shell."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    tokens = list(lexer)
    if not tokens or tokens[0] != "vppctl":
        return None
    if any(set(t) <= set("|&;<>()") or "$" in t or "*" in t or "?" in t for t in tokens):
        return None
    return tokens[1:]


def slug(heading: str) -> str:
    """A heading's anchor, as GitHub makes it."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {slug(m) for m in re.findall(r"^#{1,6} (.*)$", text, re.M)}


# -- the Paddle script of docs/paddle.md -------------------------------------------------

# `model_loss` for the script: the small GPT of the bridge tests.
MODEL_LOSS = """
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


def paddle_script() -> str:
    """docs/paddle.md's training script, with the bridge tests' small GPT as `model_loss`
    (tests/support/job_plan_300.py runs it on Paddle 3.0.0)."""
    block = next(f for f in fences("docs/paddle.md") if f.directive == ("run with", "model_loss"))
    conftest = paths.TESTS / "paddle" / "conftest.py"
    return MODEL_LOSS.format(conftest=str(conftest)) + block.body


# `make_job` for docs/paddle.md's PIR script: the job of the PIR program the docs name
# (prog.json: tests/data/pir_reference/gpt_keep_pp2_v2), built by tests/support/pir_programs.py;
# Paddle's communication init, the build's first step that needs CUDA, stops it.
PIR_PRELUDE = """
import json
import paddle.distributed.auto_parallel.static.engine as _engine_module
from pir_programs import CASES as _CASES, _job
from pir_plan_builds import for_vpp as _for_vpp, job_plan as _job_plan, numpy2_shim as _shim

_case = _for_vpp(_CASES["gpt_keep_pp2_v2"])


def make_job():
    return _job(_case)


class _NeedsGPU(Exception):
    pass


def _init_comm(self):
    print("FACTS " + json.dumps(_job_plan(self, _case)))
    raise _NeedsGPU


_engine_module.Engine._init_comm = _init_comm
"""


def pir_script() -> str:
    """docs/paddle.md's PIR training script, `make_job` supplied, up to Paddle's
    communication init (where it prints what it built and stops)."""
    block = next(f for f in fences("docs/paddle.md") if f.directive == ("run with", "make_job"))
    return (
        PIR_PRELUDE
        + "try:\n"
        + "".join(f"    {line}\n" if line else "\n" for line in block.body.splitlines())
        + "except _NeedsGPU:\n    pass\n"
    )
