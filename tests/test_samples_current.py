"""The shipped samples are exactly what the commands in samples/README.md write."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from vppctl.cli import cli

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
COMMANDS = re.findall(r"^vppctl (sample .*)$", (SAMPLES / "README.md").read_text(), re.M)


def test_readme_lists_a_command_for_every_sample() -> None:
    outputs = {shlex.split(c)[-1] for c in COMMANDS}
    shipped = {p.name for p in SAMPLES.iterdir() if p.name != "README.md"}
    assert outputs == shipped


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: shlex.split(c)[-1])
def test_sample_is_current(command: str, tmp_path: Path) -> None:
    args = shlex.split(command)
    name = args[-1]
    args[-1] = str(tmp_path / name)
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert (tmp_path / name).read_bytes() == (SAMPLES / name).read_bytes(), (
        f"samples/{name} is stale: regenerate it with the command in samples/README.md"
    )
