"""Files: the bytes of an input read whole, the bytes of an output written, and what an
interrupt left.

Outputs. An `Output` (what `vppctl.program.destinations.resolve_output` made of what the
user typed) is written by `Output.write(data)`, several at once all or nothing by
`write_all`:

    a regular file               replaced atomically (vppctl.program.atomic): old bytes or all new
    one of vppctl's own files    written into that file descriptor (fd 1 is stdout)
    char or block device, FIFO   written straight into (O_WRONLY|O_TRUNC, never created or
                                 replaced), as cp and `>` do: /dev/null stays /dev/null,
                                 /dev/full says "no space left on device"; a FIFO waits
                                 WAIT_SECONDS for a reader; binary onto a terminal is
                                 refused when it is opened, before any byte is written
    stdout                       sys.stdout.buffer, after what was printed there

A replaced file keeps its mode, its owner and group where permitted, its extended
attributes and ACLs; its other hard links keep the old bytes (`Output.warnings`
says so, once written). A new file never gets a set-uid, set-gid or sticky bit.
Writing into a device,
a FIFO or stdout cannot be atomic: what was written before a failure stays.
A reader that closes a pipe early raises BrokenPipeError unchanged, so that the
CLI applies its one pipe policy. Every write is noted, so that `interrupted` can say
what an interrupt left.

Inputs. `read_input(spec, limit=...)` returns the whole content of a regular
file, of stdin ("-"), or of a FIFO or device given by name (`<(cmd)` gives
/dev/fd/N, a pipe), reading at most `limit` bytes: more is refused, so memory
stays bounded. A FIFO waits WAIT_SECONDS for a process to open it for writing,
then reads until the writer closes it (a stream lasts as long as its writer,
as with `cat`; only a FIFO nobody opens is given up on). Streams (anything but a regular file)
are passed to `check` after every piece, so that garbage (/dev/zero,
/dev/urandom) is refused after its first bytes instead of after `limit` of them.
A terminal as input is refused (UsageError): nobody types a program.

Every failure is one ProgramFileError (exit 3) or UsageError (exit 2) naming
the path as the user gave it.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import select
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

from vppctl import progress, validate
from vppctl.errors import ProgramFileError, UsageError, os_reason
from vppctl.program import atomic
from vppctl.program.atomic import Data

STDIO = "-"
# How long a FIFO may wait for the process at its other end to open it.
WAIT_SECONDS = 10.0
_PIECE = 1 << 20  # bytes per read of a stream
_REPORTED_PIECE = 1 << 26  # bytes per read of a regular file, between progress reports

OutputKind = Literal["file", "device", "fd", "stdout"]
Check = Callable[[bytearray], None]


# -- outputs -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Output:
    """A resolved output: where `write` puts the bytes."""

    shown: str  # the path as the user gave it ("-" for stdout)
    kind: OutputKind
    target: Path | None  # file: the regular file replaced (links followed); device: its path
    fd: int = -1  # kind "fd": vppctl's own file descriptor
    binary: bool = True  # what will be written (binary is refused on a terminal)
    links: int = 1  # kind "file": the names (hard links) the file being replaced has

    def warnings(self) -> list[str]:
        """What to tell once written: replacing a file that has other names (hard links)
        leaves them the old bytes, as `sed -i` does."""
        if self.links < 2:
            return []
        others = self.links - 1
        names = "hard link" if others == 1 else "hard links"
        keep = "it keeps" if others == 1 else "they keep"
        return [
            f"{self.name} had {others} other {names}: {keep} the old bytes, and {self.name} "
            "is now a new file (as with sed -i)"
        ]

    def same_file(self, other: Output) -> bool:
        """Whether `other` replaces the same regular file by another path: the same final
        path (`o.svg`, `../here/o.svg`, a link to it), or the same existing file (a hard
        link), as `check_not_input` compares an output with an input."""
        if self.kind != "file" or other.kind != "file":
            return False
        assert self.target is not None and other.target is not None
        if os.path.realpath(self.target) == os.path.realpath(other.target):
            return True
        identity = file_identity(self)
        return identity is not None and identity == file_identity(other)

    @property
    def is_stdout(self) -> bool:
        """True when the bytes go to stdout (so the report should go to stderr)."""
        return self.kind == "stdout"

    def write(self, data: Data) -> None:
        """Write all of `data` here. ProgramFileError (exit 3) on failure, UsageError (exit 2)
        for binary onto a terminal; BrokenPipeError when a pipe's reader went away. The
        write is noted, for `interrupted` to tell what an interrupt left."""
        note = _note(self)
        with self._errors():
            if self.kind == "file":
                assert self.target is not None
                atomic_replace(self.target, data)
            elif self.kind == "stdout":
                _write_stdout(data)
            elif self.kind == "fd":
                _write_fd(self.fd, data, close=False)
            else:
                assert self.target is not None
                _write_fd(_open_device(self), data, close=True)
        note.done = True

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """OSError said as ProgramFileError naming this output."""
        try:
            yield
        except (BrokenPipeError, ProgramFileError, UsageError):
            raise
        except PermissionError:
            raise ProgramFileError(f"cannot write {self.name}: permission denied") from None
        except OSError as e:
            raise ProgramFileError(f"cannot write {self.name}: {os_reason(e)}") from None

    @property
    def name(self) -> str:
        return "stdout" if self.shown == STDIO else self.shown


def write_all(writes: Sequence[tuple[Output, Data]]) -> None:
    """Write several outputs all or nothing, as far as the outputs allow: every device or
    FIFO is opened first (a FIFO waits for its reader, a terminal refuses binary), then
    every regular file is written to its temporary file, then the devices, FIFOs and stdout
    (which cannot be taken back) are written, and only when all of that worked are the
    regular files given their names. A failure replaces no file. Errors as `Output.write`."""
    if len(writes) == 1:
        writes[0][0].write(writes[0][1])
        return
    with atomic.terminating_cleanly(), contextlib.ExitStack() as opened:
        fds = {}
        for output, _ in writes:
            if output.kind == "device":
                with output._errors():
                    fds[output.shown] = _open_device(output)
                opened.callback(os.close, fds[output.shown])
        staged: list[tuple[Output, atomic.Staged]] = []
        files = [(output, data) for output, data in writes if output.kind == "file"]
        # Each directory's leftovers are removed once, not once per output written into it.
        targets = [output.target for output, _ in files if output.target is not None]
        for directory in dict.fromkeys(target.parent for target in targets):
            atomic.remove_stale(directory)
        try:
            for output, data in files:
                assert output.target is not None
                _note(output)  # its state is whether it got its name (atomic)
                with output._errors():
                    staged.append((output, atomic.stage(output.target, data, clean=False)))
            for output, data in writes:
                if output.kind != "file":
                    _write_stream(output, data, fds.get(output.shown))
            for output, file in staged:
                with output._errors():
                    file.commit()
        finally:
            for _, file in staged:
                file.discard()  # those not committed (a no-op for the others)


def _write_stream(output: Output, data: Data, fd: int | None) -> None:
    note = _note(output)
    with output._errors():
        if output.kind == "stdout":
            _write_stdout(data)
        else:
            _write_fd(output.fd if fd is None else fd, data, close=False)
    note.done = True


# -- what an interrupt left -------------------------------------------------------------------


@dataclass
class _Written:
    output: Output
    started: float  # time.monotonic() when the write began
    done: bool = False

    def state(self) -> Literal["whole", "part", "none"]:
        """What the output holds of this write now."""
        if self.output.kind == "file":  # atomic: the old bytes or all the new ones
            assert self.output.target is not None
            return "whole" if atomic.holds_new_file(self.output.target) else "none"
        return "whole" if self.done else "part"


_LEDGER: list[_Written] = []  # this process's writes, the last _LEDGER_SIZE of them
_LEDGER_SIZE = 64


def _note(output: Output) -> _Written:
    note = _Written(output, time.monotonic())
    _LEDGER.append(note)
    del _LEDGER[:-_LEDGER_SIZE]
    return note


def interrupted(since: float) -> str:
    """What to say when a command that started at `since` (time.monotonic()) is interrupted:
    which of its outputs were written, whole or in part, before the interrupt. An output
    replaced atomically counts as written once it has its new name, however soon after
    that the interrupt came."""
    states: dict[str, list[str]] = {"whole": [], "part": []}
    for note in _LEDGER:
        state = note.state() if note.started >= since else "none"
        if state != "none":
            states[state].append(note.output.name)
    whole, part = states["whole"], states["part"]
    if not whole and not part:
        return "interrupted; nothing was written"
    said = []
    if whole:
        said.append(f"{_names(whole)} {'was' if len(whole) == 1 else 'were'} written whole")
    if part:
        said.append(f"{_names(part)} may hold part of the output")
    return f"interrupted; {' and '.join(said)}, nothing else was written"


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


# The atomic replacement of a regular file (a name tests can replace).
atomic_replace = atomic.replace_file


def first_non_directory(path: Path) -> Path:
    for parent in reversed(path.parents):
        if parent.exists() and not parent.is_dir():
            return parent
    return path.parent


def terminal_refusal(shown: str) -> str:
    """Binary onto a terminal (`-`: stdout). The hint names no file the user may have:
    a redirection into a file that is the input would empty it before vppctl starts."""
    where = "a terminal" if shown == STDIO else f"the terminal {shown}"
    return (
        f"refusing to write a binary program to {where}; name a new file with -o OUT, or "
        "redirect stdout to one (-o - > OUT) or into another command (-o - | CMD)"
    )


def file_identity(output: Output) -> tuple[int, int] | None:
    try:
        if output.kind == "stdout":
            st = os.fstat(sys.stdout.fileno())
        elif output.kind == "fd":
            st = os.fstat(output.fd)
        else:
            assert output.target is not None
            st = os.stat(output.target)
    except (OSError, ValueError, AttributeError):  # missing, or a stdout without a descriptor
        return None
    return st.st_dev, st.st_ino


def _pieces(data: Data) -> Iterable[bytes | bytearray | memoryview]:
    return data() if callable(data) else (data,)


def _write_stdout(data: Data) -> None:
    sys.stdout.flush()  # what was printed before comes first
    stream: BinaryIO | None = getattr(sys.stdout, "buffer", None)
    if stream is None:
        reason = "it is closed" if sys.stdout is None else "it does not take bytes"
        raise ProgramFileError(f"cannot write to stdout: {reason}")
    try:
        for piece in _pieces(data):
            view = memoryview(piece).cast("B")
            while view:  # a large write may return short (a reader leaving), not raise
                view = view[stream.write(view) :]
        stream.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        raise ProgramFileError(f"cannot write to stdout: {os_reason(e)}") from None


def _open_device(out: Output) -> int:
    """Open a device or FIFO for writing, never creating or replacing it. A FIFO waits up to
    WAIT_SECONDS for a reader (opening it blocks until one comes)."""
    assert out.target is not None
    flags = os.O_WRONLY | os.O_TRUNC | os.O_NOCTTY
    if not stat.S_ISFIFO(os.stat(out.target).st_mode):
        fd = os.open(out.target, flags)
    else:
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            try:
                fd = os.open(out.target, flags | os.O_NONBLOCK)
                break
            except OSError as e:
                if e.errno != errno.ENXIO:  # ENXIO: no reader yet
                    raise
                if time.monotonic() >= deadline:
                    raise ProgramFileError(
                        f"cannot write {out.name}: it is a FIFO and no process opened it for "
                        f"reading within {WAIT_SECONDS:g} s; start the reader first"
                    ) from None
                time.sleep(0.02)
        os.set_blocking(fd, True)
    if out.binary and os.isatty(fd):
        os.close(fd)
        raise UsageError(terminal_refusal(out.name))
    return fd


def _write_fd(fd: int, data: Data, *, close: bool) -> None:
    try:
        for piece in _pieces(data):
            view = memoryview(piece).cast("B")
            while view:
                n = os.write(fd, view[: 1 << 26])
                view = view[n:]
    finally:
        if close:
            os.close(fd)


# -- inputs --------------------------------------------------------------------------------


@dataclass
class Input:
    """An input's whole content, and whether it came from a stream (not a regular file)."""

    shown: str  # the path as the user gave it, or "stdin"
    data: bytearray | mmap.mmap  # mmap: a regular file mapped (read_input's `mapped`)
    stream: bool


@dataclass(frozen=True)
class Bound:
    """How much of one kind of input is read: `limit` bytes at most; `noun` names the kind
    in messages, and `fix` says what to do about one over the limit (None: a program's
    protobuf limit, and the fix for it)."""

    limit: int
    noun: str = "program file"
    fix: str | None = None

    def too_big(self, shown: str, size: int | None) -> ProgramFileError:
        if self.fix is None:
            return _too_big(shown, size, self.limit)
        amount = f"it is {size / 2**20:.1f} MiB" if size is not None else "it holds more"
        return ProgramFileError(
            f"cannot read {shown}: {amount}, more than a {self.noun} may be "
            f"({self.limit / 2**20:.0f} MiB); {self.fix}"
        )


def read_input(
    spec: str | os.PathLike[str],
    *,
    limit: int | Bound,
    check: Check | None = None,
    mapped: bool = False,
) -> Input:
    """The whole content of `spec` (a path, or "-" for stdin), at most `limit` bytes (a
    `Bound` names the kind of file in messages).

    `mapped`: a regular file is mapped read-only (mmap) instead of read, where the system
    lets it: its pages are read when used and cost no copy, and the process holds none
    it does not touch. (A file truncated by another process while mapped ends vppctl with
    SIGBUS when a page past its new end is touched; replacing it, as editors and vppctl
    --in-place do, leaves the mapping whole.)

    ProgramFileError (exit 3): missing, unreadable, a directory or socket, more than
    `limit` bytes, a FIFO nobody opens for writing within WAIT_SECONDS, or whatever
    `check` raises (it sees the bytes so far after every piece of a stream). UsageError
    (exit 2): a terminal, or not a path (`validate.file_name`)."""
    bound = limit if isinstance(limit, Bound) else Bound(limit)
    shown = validate.file_name(spec, "the input")
    if shown == STDIO:
        return _read_stdin(bound, check)
    fd = _open_for_reading(shown, bound.noun)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise ProgramFileError(f"cannot read {shown}: it is a directory, not a {bound.noun}")
        if stat.S_ISREG(st.st_mode):
            if st.st_size > bound.limit:
                raise bound.too_big(shown, st.st_size)
            progress.phase("reading", st.st_size)
            mapping = _map(fd) if mapped and st.st_size else None
            if mapping is not None and len(mapping) <= bound.limit:
                progress.advance(len(mapping))
                return Input(shown, mapping, stream=False)
            return Input(shown, _read_regular(fd, st.st_size, shown, bound), stream=False)
        if stat.S_ISFIFO(st.st_mode):
            fd = _wait_for_writer(fd, shown)
        os.set_blocking(fd, True)
        if os.isatty(fd):
            raise UsageError(_terminal_input(shown))
        progress.phase("reading")
        return Input(shown, _read_stream(fd, shown, bound, check), stream=True)
    except PermissionError:
        raise ProgramFileError(f"cannot read {shown}: permission denied") from None
    except (ProgramFileError, UsageError):
        raise
    except OSError as e:
        raise ProgramFileError(f"cannot read {shown}: {os_reason(e)}") from None
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)


def _terminal_input(shown: str) -> str:
    return f"{shown} is a terminal; pipe a program in (vppctl inspect - < prog.pb) or name a file"


def _open_for_reading(shown: str, noun: str) -> int:
    # O_NONBLOCK: opening a FIFO must not block before its kind is known (it is waited for
    # with a time limit); it is cleared before reading.
    try:
        return _open_read(shown)
    except FileNotFoundError:
        raise ProgramFileError(f"cannot read {shown}: no such file") from None
    except PermissionError:
        raise ProgramFileError(f"cannot read {shown}: permission denied") from None
    except OSError as e:
        if e.errno == errno.ENXIO and _is_socket(shown):
            raise ProgramFileError(f"cannot read {shown}: it is a socket, not a {noun}") from None
        if e.errno == errno.ENOTDIR:
            raise ProgramFileError(
                f"cannot read {shown}: {first_non_directory(Path(shown))} is not a directory"
            ) from None
        raise ProgramFileError(f"cannot read {shown}: {os_reason(e)}") from None


def _open_read(path: str) -> int:
    return os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def _too_big(shown: str, size: int | None, limit: int) -> ProgramFileError:
    amount = f"it is {size / 2**30:.1f} GiB" if size is not None else "it holds more"
    return ProgramFileError(
        f"cannot read {shown}: {amount} and protobuf cannot parse a message of "
        f"{(limit + 1) / 2**30:.0f} GiB or more; strip op_callstack attributes when exporting "
        "(or split the program)"
    )


def _map(fd: int) -> mmap.mmap | None:
    """The file open as `fd` mapped read-only; None where it cannot be (then it is read)."""
    try:
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # a file system without mmap; a file emptied meanwhile
        return None


def _read_regular(fd: int, size: int, shown: str, bound: Bound) -> bytearray:
    os.set_blocking(fd, True)
    buf = bytearray(size)
    got = 0
    with memoryview(buf) as view:
        while got < size:
            n = os.readv(fd, [view[got : got + _REPORTED_PIECE]])
            if n == 0:
                break
            got += n
            progress.advance(got)
    del buf[got:]  # the file shrank while being read: what is there
    rest = os.read(fd, _PIECE)
    while rest:  # it grew: read on, within the limit
        buf += rest
        if len(buf) > bound.limit:
            raise bound.too_big(shown, None)
        rest = os.read(fd, _PIECE)
    return buf


def _read_stream(fd: int, shown: str, bound: Bound, check: Check | None) -> bytearray:
    buf = bytearray()
    while True:
        piece = os.read(fd, _PIECE)
        if not piece:
            return buf
        buf += piece
        progress.advance(len(buf))
        if len(buf) > bound.limit:
            raise bound.too_big(shown, None)
        if check is not None:
            check(buf)


def _read_stdin(bound: Bound, check: Check | None) -> Input:
    stream: BinaryIO | None = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise ProgramFileError("cannot read stdin: it is closed")
    with contextlib.suppress(AttributeError, ValueError):
        if sys.stdin.isatty():
            raise UsageError(_terminal_input("stdin"))
    with contextlib.suppress(AttributeError, OSError, ValueError):  # `< file`: its size is known
        st = os.fstat(sys.stdin.fileno())
        if stat.S_ISREG(st.st_mode) and st.st_size > bound.limit:
            raise bound.too_big("stdin", st.st_size)
    buf = bytearray()
    progress.phase("reading")
    try:
        while True:
            piece = stream.read(_PIECE)
            if not piece:
                break
            buf += piece
            progress.advance(len(buf))
            if len(buf) > bound.limit:
                raise bound.too_big("stdin", None)
            if check is not None:
                check(buf)
    except OSError as e:
        raise ProgramFileError(f"cannot read stdin: {os_reason(e)}") from None
    return Input("stdin", buf, stream=True)


def _wait_for_writer(fd: int, shown: str) -> int:
    """The FIFO opened (non-blocking) as `fd`, opened again so that reading waits for data:
    a blocking open returns once a writer has opened it, which may take WAIT_SECONDS at
    most. (Polling cannot tell a quiet writer from none.)"""
    opened: list[int] = []
    errors: list[OSError] = []

    def open_blocking() -> None:
        try:
            opened.append(os.open(shown, os.O_RDONLY | os.O_NOCTTY))
        except OSError as e:
            errors.append(e)

    if _has_data(fd):  # the writer is there already (process substitution, a shell pipe)
        return fd
    opener = threading.Thread(target=open_blocking, daemon=True)
    opener.start()
    opener.join(WAIT_SECONDS)
    if opener.is_alive():
        # Nobody came: unblock our own opener by playing the writer for a moment.
        with contextlib.suppress(OSError):
            os.close(os.open(shown, os.O_WRONLY | os.O_NONBLOCK))
        opener.join(1.0)
        for extra in opened:
            os.close(extra)
        raise ProgramFileError(
            f"cannot read {shown}: it is a FIFO and no process opened it for writing within "
            f"{WAIT_SECONDS:g} s; start the writer first"
        )
    if errors:
        raise errors[0]
    os.close(fd)
    return opened[0]


def _has_data(fd: int) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))
