"""Config: a repository's verify policy, stated once in `pyproject.toml`, as ruff finds its.

    [tool.vppctl.verify]
    ignore = ["V009"]        # rule ids or prefixes, as --ignore takes them
    select = ["ALL"]         # as --select (default: every rule)

`verify` reads the nearest `pyproject.toml` that has a `[tool.vppctl]` table: from the
program's directory upwards (for stdin, `-`, from the current directory upwards), as
ruff does; a `pyproject.toml` without one is passed over. On the command line,
`--select` replaces the file's `select` and `ignore` (the command line states the whole
selection), and `--ignore` adds to the file's `ignore`; `--isolated` reads no file. The
Python API reads no file: `VerifyOptions(select=..., ignore=...)` says it all.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import vppctl
from vppctl.errors import UsageError
from vppctl.escape import printable

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

CONFIG_NAME = "pyproject.toml"
_KEYS = ("select", "ignore")


@dataclass(frozen=True)
class VerifyPolicy:
    """The selection a file states (None: it states none), and the file."""

    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    path: Path | None = None


def find_config(program: str) -> Path | None:
    """The nearest pyproject.toml with a [tool.vppctl] table, from the program's directory
    (the current one for `-`) upwards; None when there is none."""
    start = Path.cwd() if program == "-" else Path(os.path.abspath(program)).parent
    for directory in (start, *start.parents):
        candidate = directory / CONFIG_NAME
        try:
            if not candidate.is_file():
                continue
            data = tomllib.loads(candidate.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError) as e:
            if candidate.exists():
                raise UsageError(
                    f"cannot read {printable(str(candidate))}: {e}; fix it, or pass "
                    "--isolated to read no configuration"
                ) from None
            continue
        tool = data.get("tool")
        if isinstance(tool, dict) and "vppctl" in tool:
            return candidate
    return None


def verify_policy(program: str) -> VerifyPolicy:
    """The [tool.vppctl.verify] selection of the config `find_config` finds."""
    path = find_config(program)
    if path is None:
        return VerifyPolicy()
    table = tomllib.loads(path.read_text(encoding="utf-8"))["tool"]["vppctl"]
    where = f"{printable(str(path))} [tool.vppctl"
    if not isinstance(table, dict):
        raise UsageError(f"{where}] is not a table; write [tool.vppctl.verify] in it")
    unknown = sorted(set(table) - {"verify"})
    if unknown:
        raise UsageError(f"{where}] has {', '.join(unknown)}: only a [tool.vppctl.verify] table")
    verify = table.get("verify", {})
    if not isinstance(verify, dict):
        raise UsageError(f"{where}.verify] is not a table of select and ignore")
    extra = sorted(set(verify) - set(_KEYS))
    if extra:
        raise UsageError(
            f"{where}.verify] has {', '.join(map(repr, extra))}: it takes select and ignore "
            "(lists of rule ids or prefixes, as --select and --ignore)"
        )
    values: dict[str, Any] = {}
    for key in _KEYS:
        value = verify.get(key)
        if value is None:
            continue
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise UsageError(
                f"{where}.verify] {key} = {value!r} is not a list of rule ids or prefixes, "
                'e.g. ["V009"]'
            )
        try:  # the codes checked as the API checks them
            checked = (
                vppctl.VerifyOptions(select=tuple(value))
                if key == "select"
                else vppctl.VerifyOptions(ignore=tuple(value))
            )
            values[key] = getattr(checked, key)
        except UsageError as e:
            raise UsageError(f"{where}.verify] {key}: {e}") from None
    return VerifyPolicy(values.get("select"), values.get("ignore", ()), path)


def selection(
    program: str, select: str | None, ignore: str | None, isolated: bool
) -> tuple[tuple[str, ...] | str | None, tuple[str, ...] | str]:
    """The select and ignore `verify` passes to VerifyOptions: the command line's over
    the file's (module docstring); VerifyOptions checks the codes and names the flag."""
    policy = VerifyPolicy() if isolated else verify_policy(program)
    if select is not None:
        return select, ignore or ()
    if ignore is None:
        return policy.select, policy.ignore
    return policy.select, (*policy.ignore, *ignore.split(","))
