"""Clean failure, checked: the directory a command ran in is as it was (`nothing_written`),
and a refusal is its exit code with one `Error:` line naming the problem (`refuse`,
`assert_error`). Used by the tests of every refusal (tests/cli/test_errors.py,
tests/convert/test_precheck.py).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from click.testing import Result
from commandline import invoke
from programs import layered

# -- helpers ---------------------------------------------------------------------------


def snapshot(directory: Path) -> dict[str, tuple[int, int, bytes | None]]:
    """Every file in `directory` (hidden ones too): size, mtime and, when small, the bytes."""
    out = {}
    for p in sorted(directory.iterdir()):
        st = p.lstat()
        small = stat.S_ISREG(st.st_mode) and st.st_size < 1 << 24 and os.access(p, os.R_OK)
        out[p.name] = (st.st_size, st.st_mtime_ns, _read(p) if small else None)
    return out


def _read(path: Path) -> bytes:
    with open(path, "rb") as f:  # not Path.read_bytes, which some tests replace
        return f.read()


@contextmanager
def nothing_written(directory: Path) -> Iterator[None]:
    before = snapshot(directory)
    yield
    assert snapshot(directory) == before, "a file was written, removed or changed"


def args_for(command: str, src: Path, out: Path | None = None) -> list[str]:
    if command == "convert":
        return ["convert", str(src), "--vpp", "2", "-o", str(out or src.with_name("out.pb"))]
    if command == "dump":
        return ["dump", str(src), "-o", str(out or src.with_name("out.pbtxt"))]
    return [command, str(src)]


def assert_error(r: Result, code: int, *phrases: str) -> str:
    """Exit `code`, one `Error:` line on stderr naming the problem, no traceback, no stdout."""
    assert r.exit_code == code, (r.exit_code, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("Error")]
    assert len(errors) == 1, r.stderr
    if code != 2:  # click's own usage errors print the usage line first; ours do not
        assert lines == errors, r.stderr
    message = errors[0]
    assert message.startswith("Error: ")
    for phrase in phrases:
        assert phrase in message, (phrase, message)
    return message


def write(tmp_path: Path, data: bytes, name: str = "prog.pb") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def refuse(tmp_path: Path, command: str, src: Path, code: int, *phrases: str) -> str:
    with nothing_written(tmp_path):
        r = invoke(*args_for(command, src), exit_code=None)
    return assert_error(r, code, *phrases)


SAMPLE = layered([0, 0, 1, 1], backward=True, optimizer=True).bytes()
