"""Atomic writes: an interrupted conversion leaves no partial output and spares an earlier OUT.

vppctl writes the output into an unnamed file (Linux `O_TMPFILE`) in the target
directory, or, where that is not available, into a hidden `.OUT.<random>.tmp`
file there, and renames it over OUT only once complete and synced.

(a) In process: the low-level write fails midway (no space left after half the
    bytes), or a later step fails (fchmod, fsync, link, rename), on both paths.
    The result must be exit 3 with one `Error:` line, OUT holding its earlier
    bytes (same mtime), and nothing else in the directory.

(b) In a subprocess: a real `vppctl convert` of a large program (200 layers,
    about 15 MB) is killed with SIGKILL, SIGTERM or SIGINT while it writes. The
    test needs no hook in vppctl: it watches the child's open files
    (`/proc/PID/fd`) and sends the signal the moment the output's temporary file
    is open, so the signal lands inside the write (the size of the temporary file
    at that moment is recorded to show it). After the child is gone, OUT must
    hold its earlier bytes and no temporary file may be left, with one exception:
    SIGKILL on the hidden-file path leaves `.OUT.<random>.tmp` behind (nothing can
    run after SIGKILL; `O_TMPFILE`, used on Linux, is immune). That leftover is
    hidden, never has OUT's name, and the test checks exactly that.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from programs import layered

from vppctl import save
from vppctl.cli import cli
from vppctl.errors import ProgramFileError

SRC = layered([0, 0, 1, 1], backward=True, optimizer=True).bytes()
OLD = b"an earlier output that must survive"
HAS_TMPFILE = bool(getattr(os, "O_TMPFILE", 0)) and os.path.isdir("/proc/self/fd")
PATHS = ["unnamed", "named"] if HAS_TMPFILE else ["named"]


def _force_path(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    if path == "named":
        monkeypatch.delattr(os, "O_TMPFILE", raising=False)
    else:  # forget an earlier test's failed link: save stops trying unnamed files after one
        monkeypatch.setattr(save, "_unnamed_failed", False)


def _setup(tmp_path: Path) -> tuple[Path, Path, int]:
    src = tmp_path / "in.pb"
    src.write_bytes(SRC)
    out = tmp_path / "out.pb"
    out.write_bytes(OLD)
    stamp = out.stat().st_mtime_ns
    return src, out, stamp


def _assert_intact(tmp_path: Path, out: Path, stamp: int) -> None:
    assert out.read_bytes() == OLD
    assert out.stat().st_mtime_ns == stamp
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.pb", "out.pb"]
    assert (tmp_path / "in.pb").read_bytes() == SRC


# -- (a) failures inside the process ------------------------------------------------------


def _failing_write(after: int) -> Callable[[int, object], int]:
    """os.write that writes `after` bytes, then fails as a full disk does."""
    written = [0]
    real = os.write

    def write(fd: int, data: object) -> int:
        view = memoryview(data)  # type: ignore[arg-type]
        room = after - written[0]
        if room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = real(fd, view[:room])
        written[0] += n
        return n

    return write


@pytest.mark.parametrize("path", PATHS)
def test_write_failing_midway_leaves_the_earlier_output(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    src, out, stamp = _setup(tmp_path)
    _force_path(monkeypatch, path)
    monkeypatch.setattr(save.os, "write", _failing_write(len(SRC) // 2))
    r = runner.invoke(cli, ["convert", str(src), "--vpp", "2", "-o", str(out)])
    assert r.exit_code == 3, r.output
    assert r.stderr.strip() == f"Error: cannot write {out}: No space left on device"
    _assert_intact(tmp_path, out, stamp)


# Only the unnamed-file path links; the hidden-file path goes straight to replace.
FAILING_STEPS = [
    (p, s)
    for p in PATHS
    for s in ("fchmod", "fsync", "replace", "link")
    if (p, s) != ("named", "link")
]


@pytest.mark.parametrize(("path", "step"), FAILING_STEPS)
def test_failure_after_writing_leaves_the_earlier_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str, step: str
) -> None:
    _, out, stamp = _setup(tmp_path)
    _force_path(monkeypatch, path)

    def fail(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(save.os, step, fail)
    with pytest.raises(ProgramFileError, match="Input/output error"):
        save.write_atomic(out, b"new" * 1000)
    _assert_intact(tmp_path, out, stamp)


@pytest.mark.parametrize("path", PATHS)
def test_interrupt_while_writing_leaves_the_earlier_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    _, out, stamp = _setup(tmp_path)
    _force_path(monkeypatch, path)
    real = os.write

    def write(fd: int, data: object) -> int:
        real(fd, memoryview(data)[:10])  # type: ignore[arg-type]
        raise KeyboardInterrupt

    monkeypatch.setattr(save.os, "write", write)
    with pytest.raises(KeyboardInterrupt):
        save.write_atomic(out, b"new" * 1000)
    _assert_intact(tmp_path, out, stamp)


@pytest.mark.parametrize("path", PATHS)
def test_interrupt_between_link_and_rename_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    _, out, stamp = _setup(tmp_path)
    _force_path(monkeypatch, path)

    def replace(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(save.os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        save.write_atomic(out, b"new" * 1000)
    _assert_intact(tmp_path, out, stamp)


@pytest.mark.parametrize("path", PATHS)
def test_successful_write_replaces_and_keeps_the_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    _, out, _ = _setup(tmp_path)
    out.chmod(0o640)
    _force_path(monkeypatch, path)
    save.write_atomic(out, b"new")
    assert out.read_bytes() == b"new"
    assert out.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.pb", "out.pb"]


def test_failed_conversion_never_touches_an_earlier_output(
    runner: CliRunner, tmp_path: Path
) -> None:
    src, out, stamp = _setup(tmp_path)
    r = runner.invoke(cli, ["convert", str(src), "--vpp", "3", "-o", str(out)])
    assert r.exit_code == 4, r.output
    _assert_intact(tmp_path, out, stamp)


# -- (b) a real process killed while it writes --------------------------------------------

LAYERS = 200
_LAUNCH_NAMED = (
    "import os, sys; del os.O_TMPFILE; from vppctl.cli import main; sys.argv[0] = 'vppctl'; main()"
)


@pytest.fixture(scope="module")
def big_program(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    from vppctl.sample import SampleOptions, build_sample

    data = build_sample(SampleOptions(layers=LAYERS, pp=4))
    assert len(data) > 10 << 20
    return data


def _temp_files(pid: int, directory: Path) -> list[str]:
    """The child's open files in `directory` other than its input (its output in progress)."""
    found = []
    fd_dir = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return []
    prefix = f"{directory}/"
    for fd in fds:
        try:
            target = os.readlink(f"{fd_dir}/{fd}")
        except OSError:
            continue
        if target.startswith(prefix) and not target.endswith("/in.pb"):
            found.append(f"{fd_dir}/{fd}")
    return found


def _kill_while_writing(
    directory: Path, args: list[str], sig: int, timeout: float = 60
) -> tuple[subprocess.Popen[bytes], int]:
    """Start the child, send `sig` once its temporary output file is open; returns the
    child and the temporary file's size at that moment."""
    child = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and child.poll() is None:
            open_ = _temp_files(child.pid, directory)
            if open_:
                try:
                    size = os.stat(open_[0]).st_size
                except OSError:
                    size = -1
                child.send_signal(sig)
                child.wait(timeout=30)
                return child, size
        pytest.fail(f"never saw the child write its output (exit {child.poll()})")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    raise AssertionError("unreachable")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc to watch the child")
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("sig", ["SIGKILL", "SIGTERM", "SIGINT"])
def test_killed_while_writing(tmp_path: Path, big_program: bytes, path: str, sig: str) -> None:
    src = tmp_path / "in.pb"
    src.write_bytes(big_program)
    out = tmp_path / "out.pb"
    out.write_bytes(OLD)
    stamp = out.stat().st_mtime_ns
    launcher = ["-c", _LAUNCH_NAMED] if path == "named" else ["-m", "vppctl"]
    args = [sys.executable, *launcher, "convert", str(src), "--vpp", "2", "-o", str(out), "-q"]
    child, size = _kill_while_writing(tmp_path, args, getattr(signal, sig))
    stderr = child.stderr.read().decode() if child.stderr else ""
    assert out.read_bytes() == OLD, f"OUT changed (temporary file was {size} bytes at the kill)"
    assert out.stat().st_mtime_ns == stamp
    assert src.read_bytes() == big_program
    left = sorted(p.name for p in tmp_path.iterdir() if p.name not in ("in.pb", "out.pb"))
    if sig == "SIGKILL" and path == "named":
        # Nothing runs after SIGKILL: the hidden temporary file stays (O_TMPFILE avoids it).
        assert len(left) == 1, left
        assert left[0].startswith(".out.pb.") and left[0].endswith(".tmp"), left
    else:
        assert left == [], (left, stderr)
    if sig == "SIGINT":
        assert child.returncode == 130, stderr
        assert stderr.strip().endswith("Error: interrupted; nothing was written")
    elif sig == "SIGTERM":
        assert child.returncode in (-signal.SIGTERM, 128 + signal.SIGTERM), stderr
        assert "Traceback" not in stderr
    else:
        assert child.returncode == -signal.SIGKILL
