"""Conventions of the command line (issue 22): choices in any case, `-V`, `-q` meaning the
same on every command, each command's --help listing only the exit codes it can return,
shell completion of every choice (the comma lists of `plan` too), and a program's format
told by its content whatever its name.

The tests here also cover vppctl/_version.py and vppctl/cli/options.py, which have no test
file of their own.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import paths
import pytest
from commandline import invoke

from vppctl import __version__
from vppctl.cli import cli

SAMPLE = paths.SAMPLE
TEXT_SAMPLE = SAMPLE.with_name("tiny-2l-pp2.pbtxt")


# -- choices in any case -------------------------------------------------------------------


def test_choices_take_any_case_and_mean_the_token(tmp_path: Path) -> None:
    out = tmp_path / "v.pb"
    data = json.loads(
        invoke("convert", SAMPLE, "--vpp", "2", "--placement", "V", "--split", "UNIFORM",
               "--cost", "Flops", "-o", out, "--json").stdout
    )  # fmt: skip
    assert (data["placement"], data["split"], data["cost"]) == ("v", "uniform", "flops")
    sim = invoke("simulate", out, "-m", "8", "--schedule", "ZBV", "--runtime", "Torch", "--json")
    sim = json.loads(sim.stdout)
    assert [r["schedule"] for r in sim["results"]] == ["zbv"]
    plan = invoke("plan", SAMPLE, "-m", "8", "--schedule", "ZBV,1F1B", "--placement", "V,Loop",
                  "--runtime", "ANY", "--json").stdout  # fmt: skip
    assert {c["schedule"] for c in json.loads(plan)["candidates"]} <= {"zbv", "1f1b"}
    bad = invoke("plan", SAMPLE, "-m", "8", "--schedule", "zbv,gpipe", exit_code=2)
    assert "'gpipe' is not one of fthenb, 1f1b" in bad.stderr


@pytest.mark.parametrize(
    ("args", "flag", "example"),
    [
        (["convert", str(SAMPLE), "--vpp", "2"], "--layers-per-chunk", "3,4,4,5"),
        (["simulate", str(SAMPLE), "-m", "8", "--vpp", "2"], "--layers-per-chunk", "3,4,4,5"),
        (["plan", str(SAMPLE)], "--micro-batches", "16,32,64"),
        (["plan", str(SAMPLE), "-m", "8"], "--vpp", "1,2,4"),
    ],
)
def test_every_list_of_integers_is_parsed_alike(
    args: list[str], flag: str, example: str, tmp_path: Path
) -> None:
    """One parser for the comma-separated integers: the flag named, an example of its own;
    the values' range is the options object's to check."""
    for value in ("3,x", "", "3,,4"):
        bad = invoke(*args, flag, value, exit_code=2)
        assert f"Invalid value for '{flag}'" in bad.stderr
        assert f"{value!r} is not a comma-separated list of integers, e.g. {example}" in bad.stderr
    spaced = invoke(*args, flag, "0, 1", exit_code=2)  # parsed, then refused by the options
    assert "0 is not an integer between 1 and" in spaced.stderr


# -- -V, -q -----------------------------------------------------------------------------


def test_dash_capital_v_is_the_version() -> None:
    for flag in ("-V", "--version"):
        assert invoke(flag).stdout == f"vppctl, version {__version__}\n"


QUIET_HELP = "Nothing on stderr but errors: no progress, warnings or `wrote` lines."


def test_every_command_takes_q_with_one_meaning() -> None:
    for name, command in cli.commands.items():
        quiet = [p for p in command.params if "-q" in getattr(p, "opts", ())]
        assert len(quiet) == 1, name
        assert quiet[0].help == QUIET_HELP, name


# -- exit codes in --help --------------------------------------------------------------------

EXITS = {
    "convert": {0, 2, 3, 4, 5, 70, 130, 143},
    "verify": {0, 1, 2, 3, 5, 70, 130},
    "inspect": {0, 2, 3, 5, 70, 130},
    "dump": {0, 2, 3, 4, 5, 70, 130, 143},
    "sample": {0, 2, 3, 4, 5, 70, 130, 143},
    "simulate": {0, 1, 2, 3, 4, 5, 70, 130, 143},
    "plan": {0, 2, 3, 4, 5, 70, 130},
}


@pytest.mark.parametrize("command", sorted(EXITS))
def test_help_lists_only_the_exit_codes_the_command_returns(command: str) -> None:
    text = " ".join(invoke(command, "--help").stdout.split())
    listed = text.split("Exit codes: ")[1]
    assert {int(c) for c in re.findall(r"(?:^|, )(\d+) ", listed)} == EXITS[command]


# -- shell completion ------------------------------------------------------------------------


def complete(words: str) -> list[str]:
    env = {
        **os.environ,
        "_VPPCTL_COMPLETE": "bash_complete",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1)),
    }
    run = subprocess.run(
        [sys.executable, "-m", "vppctl"], env=env, capture_output=True, text=True, timeout=60
    )
    return [line.split(",", 1)[1] for line in run.stdout.splitlines()]


def test_completion_offers_choice_values_and_the_next_of_a_list() -> None:
    assert complete("vppctl verify x.pb --output-format ") == [
        "full", "concise", "json", "github", "junit"
    ]  # fmt: skip
    from vppctl.choices import SCHEDULES

    after = complete("vppctl plan x.pb --schedule 1f1b,zb")
    assert after == [f"1f1b,{s}" for s in SCHEDULES if s.startswith("zb")]
    assert "1f1b,zbh1" in after
    assert complete("vppctl plan x.pb --placement ") == ["loop", "v"]


# -- a program's format by its content -----------------------------------------------------


def test_a_text_program_not_named_pbtxt_is_read_as_text(tmp_path: Path) -> None:
    renamed = tmp_path / "tiny.pb"
    renamed.write_bytes(TEXT_SAMPLE.read_bytes())
    by_name = json.loads(invoke("inspect", TEXT_SAMPLE, "--json").stdout)
    by_content = json.loads(invoke("inspect", renamed, "--json").stdout)
    piped = json.loads(invoke("inspect", "-", "--json", input=TEXT_SAMPLE.read_bytes()).stdout)
    for data in (by_content, piped):
        assert {k: v for k, v in data.items() if k not in ("source", "bytes")} == {
            k: v for k, v in by_name.items() if k not in ("source", "bytes")
        }


def test_a_binary_program_named_pbtxt_is_still_refused_as_text(tmp_path: Path) -> None:
    misnamed = tmp_path / "prog.pbtxt"
    misnamed.write_bytes(SAMPLE.read_bytes())
    result = invoke("inspect", misnamed, exit_code=3)  # the name says text: it must be
    assert "text format must be UTF-8 without NUL bytes" in result.stderr
