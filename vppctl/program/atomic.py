"""Replace one regular file atomically: it holds either its old bytes or all of the new ones.

`replace_file(path, data)` writes `data` once, syncs it once, and only then
gives it `path`'s name. On Linux the bytes go to an unnamed file (`O_TMPFILE`)
in `path`'s directory, linked into place through `/proc/self/fd` with
`linkat(..., AT_SYMLINK_FOLLOW)`: until then it has no name, so SIGKILL while
writing leaves nothing behind. Replacing an existing file takes a hidden name
`.NAME.PID.RANDOM.tmp` for a moment (linkat never replaces; rename does), and
where the file system cannot link an unnamed file (no `O_TMPFILE`, no `/proc`)
the bytes go to such a hidden file from the start, renamed over `path` when
complete. SIGKILL can leave that hidden file; the next run that writes into the
directory removes leftovers of ours older than it that no live writer holds
(`remove_stale`). Which file systems cannot is remembered per device, so the
fallback never costs a second write more than once per device.

The new file gets the old file's permission bits without set-uid, set-gid or
sticky, and (best effort, as `sed -i` does) its owner and group and its
extended attributes, POSIX ACLs (`system.posix_acl_access`) included; a
missing file gets 0666 minus the umask. Other hard links to the old file keep
the old bytes: the new file is another file (the caller warns). After the
rename the directory is synced so the new name survives a crash.

The caller has resolved symbolic links: `path` is missing or a regular file.
OSError propagates (the caller names the path in its message); Ctrl-C and
SIGTERM remove the temporary file before they propagate, wherever they land
(as the system call creating it returns, before Python stores its result, too:
its name is noted first, and `terminating_cleanly` discards whatever was staged
inside it). An interrupt may also
come just after the new file got its name: `holds_new_file(path)` says whether
it did, so that the message can tell the truth (vppctl.program.files).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # not on this platform: leftovers are judged by age alone
    fcntl = None  # type: ignore[assignment]

# The bytes, or a function giving them in pieces (called again if writing must start over).
Data = bytes | bytearray | memoryview | Callable[[], Iterable[bytes | memoryview]]

# Where locks cannot tell whether a writer is alive, a hidden temporary file of ours is
# left alone while it may still be written: removed once its writer is gone and it is this
# old, or when it is this old anyway (see remove_stale).
STALE_SECONDS = 600.0
ABANDONED_SECONDS = 86400.0

_PIECE = 1 << 26  # bytes per write call


def replace_file(path: Path, data: Data) -> None:
    """Write `data` to the regular (or missing) file `path` atomically; OSError on failure."""
    with terminating_cleanly():
        stage(path, data).commit()


def stage(path: Path, data: Data, *, clean: bool = True) -> Staged:
    """`data` written and synced for the regular (or missing) file `path`, not yet given its
    name: `commit()` gives it (atomically), `discard()` drops it. Several outputs are
    written all or nothing by staging each, then committing all (vppctl.program.files),
    whose caller cleans each directory once (`remove_stale`) and stages with `clean`
    False. Call it inside `terminating_cleanly()`. OSError on failure, nothing left behind."""
    directory = path.parent
    _naming.pop(path.absolute(), None)  # an earlier write's file is not this one's
    old = _lstat(path)
    mode = stat.S_IMODE(old.st_mode) & 0o777 if old else 0o666 & ~_umask()
    owner = (old.st_uid, old.st_gid) if old else None
    if clean:
        remove_stale(directory)
    staged = Staged(path, data, mode, owner, exists=old is not None)
    staged.xattrs = _xattrs(path) if old is not None else []
    device = os.stat(directory).st_dev
    if device not in _named_only:
        try:
            staged.write_unnamed()
            return staged
        except _NoUnnamedFiles:
            _named_only.add(device)
    staged.write_named()
    return staged


def temp_name(directory: Path, name: str) -> Path:
    """A fresh hidden temporary name for `name` in `directory` (the pattern remove_stale knows)."""
    return directory / f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"


def remove_stale(directory: Path) -> list[str]:
    """Remove our leftover temporary files in `directory` (any output's); returns their names.

    SIGKILL can leave one (on the named-file path, or between the link and the rename of
    an unnamed file). A file is removed only when its name has exactly our pattern
    (`.NAME.PID.RANDOM.tmp`), it is a regular file owned by this user, and it is stale:
    older than this run (modified before this process started) and not held by a live
    writer (every writer holds a shared lock on its temporary file until it has its name;
    this one takes an exclusive lock without waiting, so another live run's file, in
    another pid namespace too, is never taken). Where the file system has no locks, the
    old rule stands: older than STALE_SECONDS with its writer's pid gone, or older than
    ABANDONED_SECONDS. Errors are ignored: cleaning up is a courtesy, never a reason to
    fail."""
    removed = []
    me = os.geteuid()
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                match = _TEMP.match(entry.name)
                if match is None:
                    continue
                st = entry.stat(follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode) or st.st_uid != me:
                    continue
                if st.st_mtime < _RUN_STARTED and _stale(entry.path, st, int(match[1])):
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
                        removed.append(entry.name)
    except OSError:
        pass
    return removed


_TEMP = re.compile(r"\..+\.(\d+)\.[0-9a-f]{8}\.tmp\Z")  # temp_name's pattern
_RUN_STARTED = time.time()  # when this run (process) loaded its writing code


def _stale(path: str, st: os.stat_result, pid: int) -> bool:
    """Whether no live writer holds the temporary file at `path` (see remove_stale)."""
    held = _held(path)
    age = time.time() - st.st_mtime
    if held is None:  # no locks here: by age and pid alone
        return age > ABANDONED_SECONDS or (age > STALE_SECONDS and not _alive(pid))
    # Unheld: its writer is gone, unless it is still opening it (a moment): its pid running
    # here says so (or, pids being reused, for STALE_SECONDS at most).
    return not held and (age > STALE_SECONDS or not _alive(pid))


def _held(path: str) -> bool | None:
    """Whether a process holds a lock on the file (None: locks cannot tell here)."""
    if fcntl is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:  # ENOLCK and the like: no locks on this file system
        return None
    finally:
        os.close(fd)  # also drops the lock, if taken
    return False


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists, owned by someone else
        return True
    return True


def _hold(fd: int) -> None:
    """Mark a temporary file as this live writer's (see remove_stale); best effort."""
    if fcntl is not None:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _umask() -> int:
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


class _NoUnnamedFiles(Exception):
    """This file system (or a missing /proc) cannot give an unnamed file a name."""


# Devices on which O_TMPFILE or linking it failed: written through a named file from then on.
_named_only: set[int] = set()

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


class Staged:
    """A file written and synced for `path`, waiting for its name (see `stage`): an unnamed
    file (`fd`, Linux O_TMPFILE) or a hidden named one (`tmp`)."""

    def __init__(
        self, path: Path, data: Data, mode: int, owner: tuple[int, int] | None, *, exists: bool
    ) -> None:
        self.path, self.data, self.mode, self.owner, self.exists = path, data, mode, owner, exists
        self.fd = -1  # the unnamed file
        self.proc = -1  # /proc/self/fd, to link the unnamed file by
        self.tmp: Path | None = None  # the hidden named file
        self.named = -1  # the hidden named file, open
        self.identity = (0, 0)  # (st_dev, st_ino) of the file written
        self.xattrs: list[tuple[str, bytes]] = []  # the old file's, to carry over
        scope = getattr(_scope, "staged", None)
        if scope is not None:  # before any file exists: see terminating_cleanly
            scope.append(self)

    def write_unnamed(self) -> None:
        flag = getattr(os, "O_TMPFILE", 0)
        if not flag:
            raise _NoUnnamedFiles
        try:
            self.proc = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            raise _NoUnnamedFiles from None
        try:
            try:
                self.fd = os.open(self.path.parent, flag | os.O_WRONLY, self.mode)
            except OSError as e:
                if e.errno in _UNSUPPORTED:
                    raise _NoUnnamedFiles from None
                raise
            _hold(self.fd)  # it gets a hidden name before its own: see remove_stale
            self._write(self.fd)
        except BaseException:
            self.discard()
            raise

    def write_named(self) -> None:
        # The name is noted before the file exists, so that an interrupt arriving as it is
        # created (open returned, its descriptor not yet stored) still finds the name to
        # remove (tempfile.mkstemp would not say it).
        self.tmp = tmp = temp_name(self.path.parent, self.path.name)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
        try:
            try:
                self.named = os.open(tmp, flags, 0o600)
            except FileExistsError:  # that file is not ours: not ours to remove
                self.tmp = None
                raise
            _hold(self.named)  # open, and held, until it has its name: see remove_stale
            self._write(self.named)
        except BaseException:
            self.discard()
            raise

    def _write(self, fd: int) -> None:
        _prepare(fd, self.mode, self.owner, self.xattrs)
        _write_all(fd, self.data)
        st = os.fstat(fd)
        self.identity = (st.st_dev, st.st_ino)

    def commit(self) -> None:
        """Give the file its name (replacing what was there), then sync the directory."""
        directory = self.path.parent
        try:
            _naming[self.path.absolute()] = self.identity
            if self.fd >= 0:
                try:
                    _link_into_place(self.proc, self.fd, directory, self.path, self.exists)
                except _NoUnnamedFiles:  # the link was refused: write a named file after all
                    _named_only.add(os.stat(directory).st_dev)
                    self.discard()
                    self.write_named()
                    self.commit()
                    return
            elif self.tmp is not None:
                os.replace(self.tmp, self.path)
                self.tmp = None
        except BaseException:  # an error, Ctrl-C or SIGTERM before the name was given
            self.discard()
            raise
        self.discard()  # closes what is open; the file now has its name
        _sync_directory(directory)

    def discard(self) -> None:
        """Drop the file (an unnamed one vanishes when closed; a named one is removed)."""
        for fd in (self.fd, self.proc, self.named):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.fd = self.proc = self.named = -1
        if self.tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.tmp)
            self.tmp = None


def _link_into_place(proc: int, fd: int, directory: Path, path: Path, exists: bool) -> None:
    """Give the unnamed file `fd` the name `path`: directly when `path` is missing (linkat
    never replaces), else through a hidden name renamed over `path`."""
    if not exists:
        try:
            _link(proc, fd, path)
            return
        except FileExistsError:  # created meanwhile: replace it as below
            pass
    tmp = temp_name(directory, path.name)
    try:
        _link(proc, fd, tmp)
        os.replace(tmp, path)
    except BaseException:  # an error, Ctrl-C or SIGTERM from the link (as it returns) to the rename
        _remove_if_ours(tmp, fd)
        raise


def _remove_if_ours(name: Path, fd: int) -> None:
    """Remove `name` if it is the open file `fd` (not another's file of that name, nor a name
    renamed away already); best effort."""
    with contextlib.suppress(OSError):
        st, ours = os.lstat(name), os.fstat(fd)
        if (st.st_dev, st.st_ino) == (ours.st_dev, ours.st_ino):
            os.unlink(name)


# The file each path is being given, by (st_dev, st_ino), noted just before the link or
# rename that gives it the name: after an interrupt, the path holding that file means the
# name was given (a rename is atomic: the path holds the old file or this one).
_naming: dict[Path, tuple[int, int]] = {}


def holds_new_file(path: Path) -> bool:
    """Whether `path` now holds the file `replace_file` wrote for it (the rename or link
    happened), as far as this process knows."""
    identity = _naming.get(path.absolute())
    if identity is None:
        return False
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == identity


def _link(proc: int, fd: int, name: Path) -> None:
    # linkat(proc, "N", AT_FDCWD, name, AT_SYMLINK_FOLLOW): follows the /proc magic link to
    # the open file itself (os.link on the string "/proc/self/fd/N" does not: CPython
    # gh-81793, EXDEV).
    try:
        os.link(str(fd), name, src_dir_fd=proc, follow_symlinks=True)
    except FileExistsError:
        raise
    except OSError as e:
        if e.errno in _UNSUPPORTED:
            raise _NoUnnamedFiles from None
        raise


def _prepare(
    fd: int, mode: int, owner: tuple[int, int] | None, xattrs: list[tuple[str, bytes]]
) -> None:
    """The old file's owner (when allowed), permission bits and extended attributes (those
    this user may set), before any byte is written."""
    if owner is not None and owner != (os.geteuid(), os.getegid()):
        with contextlib.suppress(PermissionError):
            os.fchown(fd, *owner)
    os.fchmod(fd, mode)  # after fchown, which may clear bits
    for name, value in xattrs:  # after fchmod: an ACL sets the group bits (its mask) itself
        with contextlib.suppress(OSError):  # security.*, trusted.*: not ours to set
            os.setxattr(fd, name, value)


def _xattrs(path: Path) -> list[tuple[str, bytes]]:
    """A file's extended attributes (none where the system or file system has none)."""
    if not hasattr(os, "listxattr"):
        return []
    out = []
    try:
        for name in os.listxattr(path):
            with contextlib.suppress(OSError):
                out.append((name, os.getxattr(path, name)))
    except OSError:  # ENOTSUP: a file system without them
        return []
    return out


def _write_all(fd: int, data: Data) -> None:
    pieces = data() if callable(data) else (data,)
    for piece in pieces:
        view = memoryview(piece).cast("B")
        while view:
            n = os.write(fd, view[:_PIECE])
            view = view[n:]
    os.fsync(fd)


def _sync_directory(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class Terminated(SystemExit):
    """SIGTERM while a file is being replaced: exits 128 + the signal number, like the
    signal itself would, after the cleanup code ran."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum


# Per thread, the files staged inside the innermost terminating_cleanly() (Staged registers).
_scope = threading.local()


@contextlib.contextmanager
def terminating_cleanly() -> Iterator[None]:
    """While a temporary file exists, SIGTERM exits through the cleanup code (as Ctrl-C does)
    instead of killing the process on the spot and leaving the file behind. Every file
    staged inside is discarded on the way out (a no-op once it has its name): Ctrl-C or
    SIGTERM can land where no other code holds it to discard it, as `stage` returns it."""
    outer = getattr(_scope, "staged", None)
    _scope.staged = []
    try:
        with _raising_on_sigterm():
            yield
    finally:
        staged, _scope.staged = _scope.staged, outer
        for file in staged:
            file.discard()


@contextlib.contextmanager
def _raising_on_sigterm() -> Iterator[None]:
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
        raise Terminated(signum)

    signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
