"""Save: a `Program` in memory -> bytes on disk, atomically.

Writes are atomic: the bytes go to an unnamed (Linux O_TMPFILE) or hidden
temporary file in the target directory, which is renamed over the target only
once complete and synced. A failed or interrupted run never leaves a partial
output and never touches the input; an earlier file at the target stays intact.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from google.protobuf import text_format
from google.protobuf.message import EncodeError

from vppctl.errors import ProgramFileError
from vppctl.gcpause import gc_paused
from vppctl.load import MAX_PROGRAM_BYTES, Program, has_unknown_fields, is_text_path, to_full


def serialize(program: Program, path: Path) -> tuple[bytes, list[str]]:
    """The bytes to write for `path` (binary or text by extension), and any warnings."""
    try:
        if not is_text_path(path):
            _check_size(program, path)
            return program.to_bytes(), []
        full = to_full(program)
        warnings = []
        if has_unknown_fields(full):
            where = "text output" if path.name.startswith("<stdout>") else str(path)
            warnings.append(
                f"{where} is text format, which cannot carry fields vppctl does not know; they "
                "are left out (write a binary file to keep them)"
            )
        return text_format.MessageToString(full).encode("utf-8"), warnings
    except (EncodeError, ValueError) as e:
        raise ProgramFileError(
            f"cannot write {path}: the program cannot be serialized ({e}); protobuf limits a "
            "message to 2 GiB"
        ) from None


@gc_paused
def write_program(program: Program, path: Path) -> tuple[int, list[str]]:
    """Serialize and write atomically; returns (bytes written, warnings).

    A binary program is written in pieces straight from its blocks, never held
    whole in memory a second time.
    """
    if is_text_path(path):
        data, warnings = serialize(program, path)
        write_atomic(path, data)
        return len(data), warnings
    sizes = [b.size() for b in program.blocks]
    size = _check_size(program, path, sizes)
    write_atomic(path, lambda: program.pieces(sizes))
    return size, []


def _check_size(program: Program, path: Path, sizes: list[int] | None = None) -> int:
    size = program.byte_size(sizes)
    if size > MAX_PROGRAM_BYTES:
        raise ProgramFileError(
            f"cannot write {path}: the program would be {size / 2**30:.1f} GiB and protobuf "
            "cannot read a message of 2 GiB or more; use --strip-callstack"
        )
    return size


Data = bytes | Callable[[], Iterable[bytes]]  # the bytes, or a function giving them in pieces


def write_atomic(path: Path, data: Data) -> None:
    """Write `data` to `path` so that `path` holds either its old content or all of `data`.

    `data` is bytes, or a function returning the bytes in pieces (called again if
    the first way of writing has to fall back to the second)."""
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        what = "is not a directory" if directory.exists() else "does not exist"
        raise ProgramFileError(f"cannot write {path}: directory {directory} {what}")
    if path.is_dir():
        raise ProgramFileError(f"cannot write {path}: it is a directory")
    mode = _mode_for(path)
    try:
        with _terminate_cleanly():
            try:
                _write_unnamed(directory, path, data, mode)
            except _NoUnnamedFiles:
                _write_named(directory, path, data, mode)
    except PermissionError:
        raise ProgramFileError(f"cannot write {path}: permission denied") from None
    except OSError as e:
        raise ProgramFileError(f"cannot write {path}: {e.strerror or e}") from None


class _NoUnnamedFiles(Exception):
    pass


@contextlib.contextmanager
def _terminate_cleanly() -> Iterator[None]:
    """While a temporary file exists, SIGTERM exits through the cleanup code (as Ctrl-C does)
    instead of killing the process on the spot and leaving the file behind."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    try:
        old = signal.getsignal(signal.SIGTERM)
    except (AttributeError, ValueError):
        old = None
    if old is not signal.SIG_DFL:  # someone else handles SIGTERM: leave it to them
        yield
        return

    def terminate(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _mode_for(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0o022)
        os.umask(umask)
        return 0o666 & ~umask


def _write_unnamed(directory: Path, path: Path, data: Data, mode: int) -> None:
    """Linux O_TMPFILE: the data has no name until complete, so even SIGKILL leaves nothing."""
    flag = getattr(os, "O_TMPFILE", 0)
    if not flag or _unnamed_failed or not os.path.isdir("/proc/self/fd"):
        raise _NoUnnamedFiles
    try:
        fd = os.open(directory, flag | os.O_WRONLY, mode)
    except OSError as e:
        if e.errno in _UNSUPPORTED:
            raise _NoUnnamedFiles from None
        raise
    tmp = _unique_name(directory, path)
    linking = False
    try:
        _write_all(fd, data)
        os.fchmod(fd, mode)
        linking = True
        try:
            os.link(f"/proc/self/fd/{fd}", tmp, follow_symlinks=True)
        except OSError as e:
            linking = False  # no name was made
            if e.errno in _UNSUPPORTED:
                _remember_unnamed_failed()
                raise _NoUnnamedFiles from None
            raise
        os.close(fd)
        fd = -1
        os.replace(tmp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        if linking:  # named but not yet renamed (an error, Ctrl-C or SIGTERM in between)
            with contextlib.suppress(OSError):
                tmp.unlink()
        raise


_unnamed_failed = False  # set once linking an unnamed file failed: do not write twice again


def _remember_unnamed_failed() -> None:
    global _unnamed_failed
    _unnamed_failed = True


# Errors meaning "this file system or kernel cannot do O_TMPFILE + link": fall back.
_UNSUPPORTED = frozenset(
    {
        errno.EOPNOTSUPP,
        errno.EISDIR,
        errno.EINVAL,
        errno.ENOENT,
        errno.EXDEV,
        errno.EPERM,
        errno.ENOSYS,
    }
)


def _write_named(directory: Path, path: Path, data: Data, mode: int) -> None:
    # The name is chosen before the file exists, so that an interrupt arriving just after
    # it is created still finds the name to remove (tempfile.mkstemp would not say it).
    tmp = _unique_name(directory, path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    fd = -1
    opening = True
    try:
        fd = os.open(tmp, flags, 0o600)
        opening = False
        _write_all(fd, data)
        os.fchmod(fd, mode)
        os.close(fd)
        fd = -1
        os.replace(tmp, path)
    except BaseException as e:
        if fd >= 0:
            os.close(fd)
        if not (opening and isinstance(e, FileExistsError)):  # that file is not ours
            with contextlib.suppress(OSError):
                tmp.unlink()
        raise


def _write_all(fd: int, data: Data) -> None:
    for piece in (data,) if isinstance(data, bytes) else data():
        view_ = memoryview(piece)
        while view_:
            n = os.write(fd, view_[: 1 << 26])
            view_ = view_[n:]
    os.fsync(fd)


def _unique_name(directory: Path, path: Path) -> Path:
    return directory / f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
