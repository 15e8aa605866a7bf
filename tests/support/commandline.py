"""The command line, run in-process: `invoke("convert", prog, "--vpp", 2, exit_code=4)`.

One helper for every test that runs `vppctl`: click's CliRunner (stdout and stderr kept
apart, as a pipe gets them), arguments turned to strings, the exit code checked. A test
that must see a real process (signals, terminals, file descriptors) runs `python -m
vppctl` instead (tests/support/iohelpers.py).
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from typing import IO, Any

from click.testing import CliRunner, Result

from vppctl.cli import cli


def invoke(
    *args: object,
    exit_code: int | None = 0,
    input: str | bytes | IO[Any] | None = None,
    env: Mapping[str, str | None] | None = None,
    catch_exceptions: bool = True,
) -> Result:
    """`vppctl ARGS`; fails the test unless it exits with `exit_code` (None: any code)."""
    result = CliRunner().invoke(
        cli,
        [str(a) for a in args],
        input=input,
        env=env,
        catch_exceptions=catch_exceptions,
        prog_name="vppctl",  # usage lines name the command as a shell runs it
    )
    if exit_code is not None:
        assert result.exit_code == exit_code, describe(result, f"expected exit {exit_code}")
    return result


def describe(result: Result, why: str = "") -> str:
    """What a run printed, for a failing assertion: the exit code, both streams and, for an
    exception that escaped the command, its traceback."""
    parts = [f"exit {result.exit_code}" + (f" ({why})" if why else "")]
    parts += [f"stdout:\n{result.stdout}", f"stderr:\n{result.stderr}"]
    if result.exc_info is not None and not isinstance(result.exception, SystemExit):
        parts.append("".join(traceback.format_exception(*result.exc_info)))
    return "\n".join(parts)
