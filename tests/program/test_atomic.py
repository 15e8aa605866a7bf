"""Atomic writes: an interrupted write leaves no partial output and spares an earlier OUT.

vppctl writes a regular output into an unnamed file (Linux `O_TMPFILE`) in the
target directory and links it into place once complete and synced (linkat
through /proc/self/fd); where that is not available, into a hidden
`.OUT.PID.RANDOM.tmp` file there, renamed over OUT once complete.

(a) In process: the low-level write fails midway (no space left after half the
    bytes), or a later step fails (fchmod, fsync, link, rename), on both paths.
    The result must be exit 3 with one `Error:` line, OUT holding its earlier
    bytes (same mtime), and nothing else in the directory.

(b) In a subprocess: a real `vppctl convert` of a large program (200 layers,
    about 15 MB) is killed with SIGKILL, SIGTERM or SIGINT while it writes, and a
    slow writer (a producer pausing between pieces, about 1.5 s in all) is killed
    with SIGKILL at ten points of its write. The tests need no hook in vppctl:
    they watch the child's open files (`/proc/PID/fd`) and send the signal when
    the output's temporary file is open (and, for the ten points, has reached
    k/10 of its size). After the child is gone, OUT must hold its earlier bytes
    and nothing else may be left, with one exception: SIGKILL on the hidden-file
    path leaves `.OUT.PID.RANDOM.tmp` (nothing can run after SIGKILL; the unnamed
    file, used on Linux, has no name to leave until the moment between its link
    and its rename, tried too). That leftover is hidden, never has OUT's name,
    and the next run writing into the directory removes it.

(c) The program is written once: a child process counts the bytes it passes to
    write(2) (`wchar` in /proc/self/io) while writing a program of N bytes and
    must find N, not 2N, on both paths.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import pytest
from commandline import invoke
from iohelpers import child, open_files_in
from programs import layered

from vppctl.errors import ProgramFileError
from vppctl.program import atomic
from vppctl.program.destinations import resolve_output
from vppctl.program.files import interrupted, write_all

pytestmark = pytest.mark.heavy  # tens of seconds: started first (tests/conftest.py)

SRC = layered([0, 0, 1, 1], backward=True, optimizer=True).bytes()
OLD = b"an earlier output that must survive"
HAS_TMPFILE = bool(getattr(os, "O_TMPFILE", 0)) and os.path.isdir("/proc/self/fd")
PATHS = ["unnamed", "named"] if HAS_TMPFILE else ["named"]


def _force_path(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    if path == "named":
        monkeypatch.delattr(os, "O_TMPFILE", raising=False)
    else:  # forget an earlier test's failed link: a device that failed once is not retried
        monkeypatch.setattr(atomic, "_named_only", set())


def _write(path: Path, data: bytes) -> None:
    resolve_output(path, binary=True).write(data)


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
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    src, out, stamp = _setup(tmp_path)
    _force_path(monkeypatch, path)
    monkeypatch.setattr(atomic.os, "write", _failing_write(len(SRC) // 2))
    r = invoke("convert", str(src), "--vpp", "2", "-o", str(out), exit_code=3)
    assert r.stderr.strip() == f"Error: cannot write {out}: no space left on device"
    _assert_intact(tmp_path, out, stamp)


# Only the unnamed-file path links; the hidden-file path goes straight to replace. OUT exists,
# so the unnamed file is linked to a hidden name and renamed over OUT.
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

    monkeypatch.setattr(atomic.os, step, fail)
    with pytest.raises(ProgramFileError, match="input/output error"):
        _write(out, b"new" * 1000)
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

    monkeypatch.setattr(atomic.os, "write", write)
    with pytest.raises(KeyboardInterrupt):
        _write(out, b"new" * 1000)
    _assert_intact(tmp_path, out, stamp)


@pytest.mark.parametrize("path", PATHS)
def test_interrupt_between_link_and_rename_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    _, out, stamp = _setup(tmp_path)
    _force_path(monkeypatch, path)

    def replace(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic.os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        _write(out, b"new" * 1000)
    _assert_intact(tmp_path, out, stamp)


# Where a signal's Python handler may run: between bytecode instructions of vppctl's code, or
# of contextlib's (its `with` blocks run vppctl's cleanup).
_INTERRUPTIBLE = (str(Path(atomic.__file__).parents[1]) + os.sep, contextlib.__file__)


class _InterruptAt:
    """A trace function (sys.settrace) raising `error` before the `point`-th bytecode
    instruction run in _INTERRUPTIBLE code, counting from 1: one signal, its handler raising,
    arriving there. CPython runs a signal's Python handler between instructions, and the
    handler of one arriving during a C call (the open(2) or link(2) creating a temporary
    file) runs once the call has returned, before its result is stored: as if raised before
    the next instruction. An exception raised inside other code (pathlib's) leaves it as one
    raised just after the call would. It raises once, as one signal does; `seen` counts the
    instructions run, `where` says where it raised."""

    def __init__(self, point: int, error: BaseException) -> None:
        self.point, self.error, self.seen, self.where = point, error, 0, ""

    def __call__(self, frame: FrameType, event: str, arg: object) -> _InterruptAt | None:
        if event == "call":
            if not frame.f_code.co_filename.startswith(_INTERRUPTIBLE):
                return None
            frame.f_trace_opcodes = True
        elif event == "opcode":
            self.seen += 1
            if self.seen == self.point:
                code = frame.f_code
                self.where = f"{Path(code.co_filename).name}:{frame.f_lineno} in {code.co_name}"
                raise self.error
        return self


# The named path's windows are its own (open, stage's return) and write_all's (its list of
# staged files); the unnamed path's is the link to a hidden name, the same for two outputs.
# SIGTERM raises atomic.Terminated where Ctrl-C raises KeyboardInterrupt, cleaned up alike.
INTERRUPTED_WRITES = [
    ("named", 1, "SIGINT"),
    ("named", 1, "SIGTERM"),
    ("named", 2, "SIGINT"),
    *([("unnamed", 1, "SIGINT")] if HAS_TMPFILE else []),
]


@pytest.mark.parametrize(("path", "outputs", "sig"), INTERRUPTED_WRITES)
def test_an_interrupt_at_any_point_of_a_write_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str, outputs: int, sig: str
) -> None:
    """Ctrl-C (KeyboardInterrupt) or SIGTERM (atomic.Terminated) before each instruction of
    a write in turn, until one runs to its end. Was (issue 30, SIGINT-named): a `.tmp` file
    left under "nothing was written" when the signal came as open(2) created the hidden file
    (before its descriptor was stored), as a written file was handed to the caller (stage's
    return, write_all's list), or as link(2) gave the unnamed file its hidden name."""
    _force_path(monkeypatch, path)
    monkeypatch.setattr(atomic.os, "fsync", lambda fd: None)  # thousands of writes: no disk
    names = ["a.pb", "b.pb"][:outputs]
    new = b"new" * 1000
    handler = signal.getsignal(signal.SIGTERM)
    wrong: list[str] = []  # what each point left wrong
    point = 0
    while True:
        point += 1
        for name in names:
            (tmp_path / name).write_bytes(OLD)
        outs = [resolve_output(tmp_path / name, binary=True) for name in names]
        error = KeyboardInterrupt() if sig == "SIGINT" else atomic.Terminated(signal.SIGTERM)
        interrupt = _InterruptAt(point, error)
        since = time.monotonic()
        tracing = sys.gettrace()
        sys.settrace(interrupt)
        try:
            if outputs == 1:
                outs[0].write(new)
            else:
                write_all([(out, new) for out in outs])
        except (KeyboardInterrupt, atomic.Terminated) as e:
            assert e is error
        finally:
            sys.settrace(tracing)
        at = f"{point} ({interrupt.where})"
        # One landing in terminating_cleanly's own entry or exit (contextlib's) can leave its
        # SIGTERM handler, harmless as the process exits; the next point starts without it.
        signal.signal(signal.SIGTERM, handler)
        left = sorted(p.name for p in tmp_path.iterdir() if p.name not in names)
        for name in left:
            wrong.append(f"{at}: left {name}")
            (tmp_path / name).unlink()
        held = [(tmp_path / name).read_bytes() for name in names]
        assert all(data in (OLD, new) for data in held), at
        if interrupt.seen < point:  # the write ran to its end: every point was tried
            assert held == [new] * outputs
            break
        whole = [out.name for out, data in zip(outs, held, strict=True) if data == new]
        said = "nothing was written"
        if whole:
            was = "was" if len(whole) == 1 else "were"
            said = f"{' and '.join(whole)} {was} written whole, nothing else was written"
        if interrupted(since) != f"interrupted; {said}":
            wrong.append(f"{at}: said {interrupted(since)!r}, not {said!r}")
    assert point > 300, point  # the write's instructions were counted
    assert wrong == [], "\n".join([f"{len(wrong)} of {point - 1} points:", *wrong])


@pytest.mark.parametrize("path", PATHS)
def test_successful_write_replaces_and_keeps_the_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    _, out, _ = _setup(tmp_path)
    out.chmod(0o640)
    _force_path(monkeypatch, path)
    _write(out, b"new")
    assert out.read_bytes() == b"new"
    assert out.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.pb", "out.pb"]


def test_failed_conversion_never_touches_an_earlier_output(tmp_path: Path) -> None:
    src, out, stamp = _setup(tmp_path)
    invoke("convert", str(src), "--vpp", "3", "-o", str(out), exit_code=4)
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
    return [fd for fd, _ in open_files_in(pid, directory, skip=("in.pb",))]


def _default_sigint() -> None:
    """A shell without job control starts background commands with SIGINT ignored, and
    their children inherit that (Python then installs no Ctrl-C handler): give the child
    the default, as a terminal would."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _kill_while_writing(
    directory: Path, args: list[str], sig: int, timeout: float = 60
) -> tuple[subprocess.Popen[bytes], int]:
    """Start the child, send `sig` once its temporary output file is open; returns the
    child and the temporary file's size at that moment."""
    child = subprocess.Popen(
        args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=_default_sigint
    )
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


# The child sends itself SIG as CALL (os.open of the hidden file, os.link of the unnamed file's
# hidden name) returns: the handler runs before the result is stored, as for a signal that
# arrived during the system call (what test_killed_while_writing[SIGINT-named] once hit).
_SIGNAL_AS_CREATED = """
import os, signal, sys
sig, call = getattr(signal, sys.argv[1]), sys.argv[2]
del sys.argv[1:3]
if call == "open":
    del os.O_TMPFILE
real = getattr(os, call)
def created(*args, **kwargs):
    result = real(*args, **kwargs)
    if os.fspath(args[0 if call == "open" else 1]).endswith(".tmp"):
        os.kill(os.getpid(), sig)
        raise RuntimeError("the signal was not handled as the call returned")
    return result
setattr(os, call, created)
from vppctl.cli import main
sys.argv[0] = "vppctl"
main()
"""


@pytest.mark.parametrize(
    "call", ["open", "link"] if HAS_TMPFILE else ["open"], ids=lambda c: f"as-{c}-returns"
)
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_as_the_temporary_file_is_created_leaves_nothing(
    tmp_path: Path, sig: str, call: str
) -> None:
    """Was: exit 130 (143), "nothing was written", and the hidden `.out.pb.PID.RANDOM.tmp`
    left, its descriptor (or name) not yet noted for the cleanup."""
    src, out, stamp = _setup(tmp_path)
    args = [sys.executable, "-c", _SIGNAL_AS_CREATED, sig, call, "convert", str(src), "--vpp", "2"]
    done = subprocess.run(
        [*args, "-o", str(out), "-q"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=_default_sigint,
    )
    said = "interrupted" if sig == "SIGINT" else "terminated (SIGTERM)"
    assert (done.returncode, done.stderr) == (
        128 + getattr(signal, sig),
        f"Error: {said}; nothing was written\n",
    )
    _assert_intact(tmp_path, out, stamp)


# -- (b') SIGKILL at ten points of a slow write --------------------------------------------

PIECES, PIECE, DELAY = 30, 1 << 18, 0.1  # 7.5 MiB in about 3 s: a loaded watcher still sees it
TOTAL = PIECES * PIECE
POINTS = 10


def _kill_at_points(base: Path, path: str) -> list[tuple[Path, int, str]]:
    """Start one slow writer per point, all at once; kill writer k with SIGKILL once its
    temporary file holds k/10 of the bytes. Returns (directory, size at the kill, the
    temporary file's name as /proc shows it) per point."""
    children = []
    for k in range(POINTS):
        directory = base / f"point{k}"
        directory.mkdir()
        (directory / "out.pb").write_bytes(OLD)
        args = child("slow-write", str(directory / "out.pb"), str(PIECES), str(PIECE), str(DELAY))
        proc = subprocess.Popen([*args, *(["named"] if path == "named" else [])])
        children.append((k, directory, proc))
    seen: dict[int, tuple[int, str]] = {}
    deadline = time.monotonic() + 60
    try:
        while len(seen) < POINTS and time.monotonic() < deadline:
            for k, directory, proc in children:
                if k in seen:
                    continue
                assert proc.poll() is None, f"writer {k} finished before its kill point"
                for fd, target in open_files_in(proc.pid, directory, skip=("out.pb",)):
                    with contextlib.suppress(OSError):
                        size = os.stat(fd).st_size
                        if size >= k * TOTAL // POINTS:
                            proc.send_signal(signal.SIGKILL)
                            seen[k] = (size, target)
            time.sleep(0.002)
    finally:
        for _, _, proc in children:
            if proc.poll() is None and len(seen) < POINTS:
                proc.kill()
            proc.wait()
    assert len(seen) == POINTS, "some writers were never seen writing"
    for _, _, proc in children:
        assert proc.returncode == -signal.SIGKILL
    return [(directory, *seen[k]) for k, directory, _ in children]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc to watch the child")
@pytest.mark.parametrize("path", PATHS)
def test_sigkill_at_ten_points_of_a_write_leaves_only_the_previous_output(
    tmp_path: Path, path: str
) -> None:
    results = _kill_at_points(tmp_path, path)
    sizes = [size for _, size, _ in results]
    # ten points inside the write: writer k killed at k/10 of it or later, never at its end
    # (not sizes in order: on a loaded machine the watcher may see writer k late)
    assert all(k * TOTAL // POINTS <= size < TOTAL for k, size in enumerate(sizes)), sizes
    for directory, size, target in results:
        assert (directory / "out.pb").read_bytes() == OLD, (directory, size)
        left = sorted(p.name for p in directory.iterdir() if p.name != "out.pb")
        if path == "unnamed":
            assert target.endswith(" (deleted)"), target  # it had no name while written
            assert left == [], (directory, size, left)
        else:
            assert len(left) == 1 and re.fullmatch(r"\.out\.pb\.\d+\.[0-9a-f]{8}\.tmp", left[0])
    if path == "named":
        _next_write_removes_the_leftover(results[0][0])


def _next_write_removes_the_leftover(directory: Path) -> None:
    (leftover,) = (p for p in directory.iterdir() if p.name != "out.pb")
    old = time.time() - atomic.STALE_SECONDS - 60
    os.utime(leftover, (old, old))  # its writer is dead (SIGKILL) and it is stale
    _write(directory / "out.pb", b"new")
    assert sorted(p.name for p in directory.iterdir()) == ["out.pb"]
    assert (directory / "out.pb").read_bytes() == b"new"


# -- (b'') a signal just after the rename ---------------------------------------------------

# The child renames as vppctl does, then pauses (touching FLAG) when the name given is OUT.
_PAUSE_AFTER_RENAME = """
import os, sys, time
flag, out = sys.argv[1], sys.argv[2]
del sys.argv[1:3]
if os.environ.get("VPPCTL_TEST_NAMED"):
    del os.O_TMPFILE
rename = os.replace
def replace(src, dst, *args, **kwargs):
    rename(src, dst, *args, **kwargs)
    if os.path.abspath(dst) == out:
        open(flag, "w").close()
        time.sleep(60)
os.replace = replace
from vppctl.cli import main
sys.argv[0] = "vppctl"
main()
"""


@pytest.mark.parametrize(
    ("sig", "path", "said", "kind"),
    [
        ("SIGINT", PATHS[0], "interrupted", "interrupted"),
        ("SIGTERM", "named", "terminated (SIGTERM)", "terminated"),
    ],
)
def test_a_signal_just_after_the_rename_says_the_file_was_written(
    tmp_path: Path, sig: str, path: str, said: str, kind: str
) -> None:
    """Was: "interrupted; nothing was written" (exit 130) with the file already replaced.
    With --json the failure is also the JSON error object, SIGTERM's (exit 143) too."""
    prog = tmp_path / "prog.pb"
    prog.write_bytes(SRC)
    flag = tmp_path / "renamed"
    env = {**os.environ, "VPPCTL_TEST_NAMED": "1" if path == "named" else ""}
    args = [str(flag), str(prog.absolute()), "convert", str(prog), "--in-place", "--vpp", "2"]
    child = subprocess.Popen(
        [sys.executable, "-c", _PAUSE_AFTER_RENAME, *args, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=_default_sigint,
    )
    try:
        deadline = time.monotonic() + 60
        while not flag.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert flag.exists(), "the child never renamed its output into place"
        child.send_signal(getattr(signal, sig))
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    stderr = child.stderr.read().decode() if child.stderr else ""
    stdout = child.stdout.read().decode() if child.stdout else ""
    assert child.returncode == 128 + getattr(signal, sig), stderr
    message = f"{said}; {prog} was written whole, nothing else was written"
    assert stderr == f"Error: {message}\n"
    error = json.loads(stdout)["error"]
    assert error == {"exit_code": child.returncode, "kind": kind, "message": message, "hint": None}
    assert prog.read_bytes() != SRC  # it was: the converted program
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prog.pb", "renamed"]


_PAUSE_AFTER_LINK = """
import os, sys, time
flag = sys.argv[1]
del sys.argv[1]
link = os.link
def paused(src, dst, *args, **kwargs):
    link(src, dst, *args, **kwargs)
    if os.path.basename(dst).startswith("."):  # the hidden name, before the rename
        open(flag, "w").close()
        time.sleep(60)
os.link = paused
from vppctl.cli import main
sys.argv[0] = "vppctl"
main()
"""


@pytest.mark.skipif(not HAS_TMPFILE, reason="the unnamed-file path needs O_TMPFILE and /proc")
def test_sigkill_between_link_and_rename_leaves_a_file_the_next_run_removes(
    tmp_path: Path,
) -> None:
    """The one leftover SIGKILL can make on Linux (docs/io.md): the whole
    new file under its hidden name. The next run writing into the directory, for any
    output, removes it."""
    src, out = tmp_path / "in.pb", tmp_path / "out.pb"
    src.write_bytes(SRC)
    out.write_bytes(OLD)
    flag = tmp_path / "linked"
    args = [str(flag), "convert", str(src), "--vpp", "2", "-o", str(out), "-q"]
    child = subprocess.Popen([sys.executable, "-c", _PAUSE_AFTER_LINK, *args])
    try:
        deadline = time.monotonic() + 60
        while not flag.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert flag.exists(), "the child never linked its output"
    finally:
        child.kill()
        child.wait()
    flag.unlink()
    (leftover,) = (p for p in tmp_path.iterdir() if p.name.startswith("."))
    assert re.fullmatch(r"\.out\.pb\.\d+\.[0-9a-f]{8}\.tmp", leftover.name)
    assert out.read_bytes() == OLD and leftover.stat().st_size > len(SRC) // 2
    time.sleep(0.01)  # the next run starts after the leftover was last written
    other = tmp_path / "other.pb"
    done = subprocess.run(
        [sys.executable, "-m", "vppctl", "convert", str(src), "--vpp", "2", "-o", str(other)],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.pb", "other.pb", "out.pb"]


# -- (c) written once ----------------------------------------------------------------------


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs /proc/self/io")
@pytest.mark.parametrize("existing", [False, True], ids=["new", "replacing"])
@pytest.mark.parametrize("path", PATHS)
def test_the_program_is_written_once(
    tmp_path: Path, big_program: bytes, path: str, existing: bool
) -> None:
    src, out = tmp_path / "in.pb", tmp_path / "out.pb"
    src.write_bytes(big_program)
    if existing:
        out.write_bytes(OLD)
    args = child("count-write", str(src), str(out), *(["named"] if path == "named" else []))
    r = subprocess.run(args, capture_output=True, text=True, timeout=60, check=True)
    counts = json.loads(r.stdout)
    assert counts["written"] == len(big_program)
    # wchar counts every byte handed to write(2): a second write of the file would double it
    assert len(big_program) <= counts["wchar"] < len(big_program) + 4096, counts
    assert out.read_bytes() == big_program
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.pb", "out.pb"]


@pytest.mark.skipif(not HAS_TMPFILE, reason="needs O_TMPFILE")
def test_unnamed_files_are_linked_into_place_on_linux(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No fallback: the unnamed file is linked (linkat through /proc/self/fd), no hidden file
    is ever created, and the device is not marked as needing one."""
    _force_path(monkeypatch, "unnamed")
    created = []
    real_open = os.open

    def open_(path: object, flags: int, *args: object, **kwargs: object) -> int:
        if flags & os.O_CREAT:
            created.append(path)
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(atomic.os, "open", open_)
    for name in ("new.pb", "new.pb"):  # creating, then replacing
        _write(tmp_path / name, b"data" * 1000)
    assert created == []
    assert atomic._named_only == set()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.pb"]


@pytest.mark.skipif(not HAS_TMPFILE, reason="needs O_TMPFILE")
def test_a_device_that_cannot_link_falls_back_once_and_is_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _force_path(monkeypatch, "unnamed")
    tries = []
    real_open = os.open

    def open_(path: object, flags: int, *args: object, **kwargs: object) -> int:
        if flags & os.O_TMPFILE == os.O_TMPFILE:
            tries.append(path)
            raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(atomic.os, "open", open_)
    _write(tmp_path / "a.pb", b"a")
    _write(tmp_path / "b.pb", b"b")
    assert tries == [tmp_path]  # the second write did not try again
    assert atomic._named_only == {tmp_path.stat().st_dev}
    assert (tmp_path / "a.pb").read_bytes() == b"a" and (tmp_path / "b.pb").read_bytes() == b"b"
    other = Path("/dev/shm")
    if other.is_dir() and other.stat().st_dev != tmp_path.stat().st_dev:
        target = other / f"vppctl-test-{os.getpid()}.pb"
        try:
            _write(target, b"c")  # another device is tried on its own
            assert tries == [tmp_path, other]
        finally:
            target.unlink(missing_ok=True)


# -- stale temporary files -----------------------------------------------------------------


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _leftover(directory: Path, name: str, age: float, uid: int | None = None) -> Path:
    path = directory / name
    path.write_bytes(b"partial")
    then = time.time() - age
    os.utime(path, (then, then))
    if uid is not None:
        os.chown(path, uid, -1)
    return path


def _held_by_a_live_writer(path: Path) -> subprocess.Popen[bytes]:
    """A process holding `path` open with a shared lock, as a live writer does (one in
    another pid namespace: the pid in the name says nothing)."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); "
            "fcntl.flock(fd, fcntl.LOCK_SH); print('held', flush=True); sys.stdin.read()",
            str(path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
    return holder


def test_stale_temporary_files_of_ours_are_removed_by_the_next_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any output's leftovers in the directory go, once older than this run and held by no
    live writer; a live writer's file is never taken."""
    monkeypatch.setattr(atomic, "_RUN_STARTED", time.time())  # this run starts now
    dead, alive = _dead_pid(), os.getppid()
    before_the_run = 60.0  # an age: modified a minute before the run started
    recent = atomic.STALE_SECONDS / 2
    removed = [
        _leftover(tmp_path, f".out.pb.{dead}.0123abcd.tmp", before_the_run),  # SIGKILLed
        _leftover(tmp_path, f".other.pb.{dead}.0123abd1.tmp", before_the_run),  # another's
        _leftover(tmp_path, f".out.pb.{alive}.0123abce.tmp", atomic.STALE_SECONDS + 60),
    ]
    held = _leftover(tmp_path, f".out.pb.{dead}.0123abd6.tmp", atomic.ABANDONED_SECONDS + 60)
    kept = [
        held,  # a live writer holds it, whatever its name and age say
        _leftover(tmp_path, f".out.pb.{dead}.0123abcf.tmp", 0),  # newer than this run
        _leftover(tmp_path, f".out.pb.{alive}.0123abd0.tmp", recent),  # may be opening it
        _leftover(tmp_path, f".out.pb.{dead}.0123abd2.tmp.keep", before_the_run),  # not ours
        _leftover(tmp_path, f".out.pb.{dead}.XYZ.tmp", before_the_run),
        _leftover(tmp_path, f"out.pb.{dead}.0123abd3.tmp", before_the_run),  # not hidden
    ]
    if os.geteuid() == 0:
        kept.append(_leftover(tmp_path, f".out.pb.{dead}.0123abd4.tmp", before_the_run, 12345))
    (tmp_path / f".out.pb.{dead}.0123abd5.tmp").mkdir()  # not a regular file
    holder = _held_by_a_live_writer(held)
    try:
        _write(tmp_path / "out.pb", b"new")
    finally:
        holder.communicate()
    assert not any(p.exists() for p in removed)
    assert all(p.exists() for p in kept)
    assert (tmp_path / f".out.pb.{dead}.0123abd5.tmp").is_dir()
    assert (tmp_path / "out.pb").read_bytes() == b"new"


def test_outputs_written_together_clean_their_directory_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several outputs into one directory (simulate's pictures): its leftovers are looked for
    once, not once per output, and still removed."""
    from vppctl.program.files import write_all

    monkeypatch.setattr(atomic, "_RUN_STARTED", time.time())
    stale = _leftover(tmp_path, f".a.svg.{_dead_pid()}.0123abcd.tmp", 60.0)
    scans: list[Path] = []
    clean = atomic.remove_stale
    monkeypatch.setattr(atomic, "remove_stale", lambda d: scans.append(d) or clean(d))
    names = ("a.svg", "b.json", "c.csv")
    write_all([(resolve_output(tmp_path / n, binary=False), n.encode()) for n in names])
    assert scans == [tmp_path] and not stale.exists()
    assert [(tmp_path / n).read_bytes() for n in names] == [n.encode() for n in names]
