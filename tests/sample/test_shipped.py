"""`samples/`: a few small generated programs (binary and one tiny `.pbtxt`)
with a README saying what each is and the command that regenerates it; this test
runs those commands and checks the files are current (byte-identical).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import paths
import pytest
from commandline import invoke

from vppctl.program.load import read_program

SAMPLES = paths.SAMPLES
README = SAMPLES / "README.md"


def readme_commands() -> dict[str, list[str]]:
    """Output file name -> the `vppctl ...` arguments that write it, from the README."""
    if not README.is_file():
        return {}
    commands = {}
    for block in re.findall(r"```(?:sh|bash|console)?\n(.*?)```", README.read_text(), re.S):
        for line in block.splitlines():
            line = line.strip().removeprefix("$ ")
            if not line.startswith("vppctl "):
                continue
            args = shlex.split(line)[1:]
            flag = "-o" if "-o" in args else "--output"
            out = args[args.index(flag) + 1]
            assert out not in commands, f"{out} is written by two commands"
            commands[out] = args
    return commands


COMMANDS = readme_commands()
FILES = (
    sorted(p.name for p in SAMPLES.iterdir() if p.name != "README.md") if SAMPLES.is_dir() else []
)


def test_readme_lists_a_command_for_every_sample() -> None:
    assert README.is_file()
    assert FILES
    assert sorted(COMMANDS) == FILES


def test_the_readme_says_what_each_sample_is() -> None:
    text = README.read_text()
    for name in FILES:
        described = [p for p in text.split("\n\n") if f"`{name}`" in p and "vppctl " not in p]
        assert described, f"no paragraph describes {name}"


def test_samples_are_binary_and_one_tiny_text_program() -> None:
    text = [n for n in FILES if n.endswith((".pbtxt", ".textproto", ".txtpb"))]
    assert len(text) == 1
    assert len(FILES) > len(text)
    assert (SAMPLES / text[0]).stat().st_size < 1 << 20
    for name in FILES:
        assert (SAMPLES / name).stat().st_size < 8 << 20, f"{name} is not small"


@pytest.mark.parametrize("name", FILES)
def test_each_sample_is_a_program(name: str) -> None:
    program = read_program(SAMPLES / name)
    assert len(program.blocks[0].ops) > 0


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_sample_is_current(name: str, tmp_path: Path) -> None:
    args = list(COMMANDS[name])
    flag = "-o" if "-o" in args else "--output"
    args[args.index(flag) + 1] = str(tmp_path / name)
    invoke(*args)
    assert (tmp_path / name).read_bytes() == (SAMPLES / name).read_bytes(), (
        f"samples/{name} is stale; regenerate it in samples/ with: "
        f"vppctl {shlex.join(COMMANDS[name])}"
    )


@pytest.mark.parametrize(
    ("name", "verdict", "why"),
    [
        ("gpt-8l-pp4.pb", "interleaving does not pay here", "the LM head makes stage 3 carry"),
        ("gpt-16l-pp4-h4096.pb", "interleaving pays here", "the stages are balanced"),
    ],
)
def test_the_tour_samples_say_what_interleaving_buys_and_why(
    name: str, verdict: str, why: str, tmp_path: Path
) -> None:
    """One shipped sample where interleaving pays and one where it does not, each with
    its reason (README's tour): `convert -m 8`'s why line, from the simulated bubbles."""
    out = invoke("convert", SAMPLES / name, "--vpp", "2", "-m", "8", "-o", tmp_path / "o.pb")
    line = next(x for x in out.stdout.splitlines() if x.startswith("why: "))
    assert line.startswith(f"why: {verdict}") and why in line
    shares = re.findall(r"bubble ([\d.]+)% -> ([\d.]+)%", line)[0]
    paid = float(shares[1]) < float(shares[0])
    assert paid == ("pays" in verdict)
