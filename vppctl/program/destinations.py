"""Destinations: where an output named on the command line goes, decided before any work.

`resolve_output(spec, binary=..., inputs=[...])` turns what the user typed into an
`Output` (`vppctl.program.files`, which writes it), refusing what cannot work before
the program is even read:

    "-"                          stdout (sys.stdout.buffer); binary refused on a terminal
    missing, or a regular file   replaced atomically (vppctl.program.atomic): old bytes or all new
    symbolic link (or a chain)   written through to the final target, atomically in the
                                 target's directory; the links stay links; a dangling link
                                 creates its target
    /dev/stdout, /dev/fd/N,      one of vppctl's own open files: written into that file
    /proc/self/fd/N              descriptor, as shell redirection does (fd 1 is stdout)
    char or block device, FIFO   written straight into (`vppctl.program.files`)
    socket, directory, "x/",     refused (ProgramFileError, exit 3)
    a path under a non-directory
    any input of the command     refused (UsageError, exit 2), by any path, symlink or hard
                                 link (same st_dev and st_ino), or by the same final path;
                                 for "-", the same open file as stdin (/dev/stdin, <>IN)

Every failure is one ProgramFileError (exit 3) or UsageError (exit 2) naming the path as
the user gave it.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterable
from pathlib import Path

from vppctl import validate
from vppctl.errors import ProgramFileError, UsageError, os_reason
from vppctl.program.files import (
    STDIO,
    Output,
    file_identity,
    first_non_directory,
    terminal_refusal,
)

_MAX_LINKS = 40  # as Linux's MAXSYMLINKS


def resolve_output(
    spec: str | os.PathLike[str],
    *,
    binary: bool,
    inputs: Iterable[str | os.PathLike[str] | None] = (),
    fix: str = "write to another path",
) -> Output:
    """Decide where the output named `spec` goes, refusing what cannot work (see the module
    docstring): ProgramFileError (exit 3) for a path that cannot be written, UsageError
    (exit 2) for an output that is one of `inputs` (the message ends with `fix`) or binary
    onto a terminal. `binary`: whether binary protobuf will be written (False for text,
    SVG, JSON)."""
    shown = validate.file_name(spec, "the output")
    if shown == STDIO:
        if sys.stdout is None:  # started with stdout closed (`>&-`)
            raise ProgramFileError("cannot write to stdout: it is closed")
        out = Output(shown, "stdout", None, binary=binary)
        if binary and _stdout_is_terminal():
            raise UsageError(terminal_refusal("-"))
    else:
        out = _resolve_path(shown, binary)
    check_not_input(out, inputs, fix=fix)
    return out


def _resolve_path(shown: str, binary: bool) -> Output:
    if not shown:
        raise ProgramFileError("cannot write to an empty path; name a file")
    if shown.endswith(("/", os.sep)):
        raise ProgramFileError(
            f"cannot write {shown}: the path ends with '/', so it names a directory; name a "
            "file (drop the '/')"
        )
    path = Path(shown)
    for _ in range(_MAX_LINKS):
        st = _lstat_for_writing(path, shown)
        if st is None:
            return _file_output(shown, path, binary)
        if stat.S_ISLNK(st.st_mode):
            own = _own_fd(path)
            if own is not None:
                return _fd_output(shown, own, binary)
            text = os.readlink(path)
            if text.endswith("/"):
                raise ProgramFileError(
                    f"cannot write {shown}: it is a link to {text}, a directory path; name a file"
                )
            path = path.parent / text  # an absolute `text` replaces the parent
            continue
        if stat.S_ISREG(st.st_mode):
            return _file_output(shown, path, binary)
        if stat.S_ISDIR(st.st_mode):
            raise ProgramFileError(f"cannot write {shown}: it is a directory")
        if stat.S_ISSOCK(st.st_mode):
            raise ProgramFileError(
                f"cannot write {shown}: it is a socket, which cannot be opened as a file"
            )
        return Output(shown, "device", path, binary=binary)  # char, block device or FIFO
    raise ProgramFileError(f"cannot write {shown}: too many levels of symbolic links")


def _lstat_for_writing(path: Path, shown: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise ProgramFileError(
            f"cannot write {shown}: {first_non_directory(path)} is not a directory"
        ) from None
    except PermissionError:
        raise ProgramFileError(f"cannot write {shown}: permission denied") from None
    except OSError as e:
        raise ProgramFileError(f"cannot write {shown}: {os_reason(e)}") from None


def _file_output(shown: str, target: Path, binary: bool) -> Output:
    directory = target.parent
    where = f"directory {directory}"
    if target != Path(shown):
        where += f" (where the link {shown} points)"
    try:
        st = os.stat(directory)
    except FileNotFoundError:
        raise ProgramFileError(f"cannot write {shown}: {where} does not exist") from None
    except NotADirectoryError:
        raise ProgramFileError(
            f"cannot write {shown}: {first_non_directory(target)} is not a directory"
        ) from None
    except OSError as e:
        raise ProgramFileError(f"cannot write {shown}: {os_reason(e)}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise ProgramFileError(f"cannot write {shown}: {directory} is not a directory")
    try:
        links = os.stat(target).st_nlink
    except OSError:  # missing: a new file
        links = 1
    return Output(shown, "file", target, binary=binary, links=links)


def _own_fd(link: Path) -> int | None:
    """N when `link` is /proc/self/fd/N (or /proc/<our pid>/fd/N, /dev/fd/N, /dev/stdout:
    the links that lead there): one of this process's open files."""
    if not link.name.isdigit():
        return None
    try:
        parent = os.path.realpath(link.parent)
    except OSError:
        return None
    if parent not in (f"/proc/{os.getpid()}/fd", "/proc/self/fd"):
        return None
    return int(link.name)


def _fd_output(shown: str, fd: int, binary: bool) -> Output:
    try:
        os.fstat(fd)
    except OSError:
        raise ProgramFileError(f"cannot write {shown}: file descriptor {fd} is not open") from None
    if fd == 1:  # stdout: through sys.stdout, in order with everything else printed there
        out = Output(shown, "stdout", None, binary=binary)
        if binary and _stdout_is_terminal():
            raise UsageError(terminal_refusal(shown))
        return out
    if binary and os.isatty(fd):
        raise UsageError(terminal_refusal(shown))
    return Output(shown, "fd", None, fd=fd, binary=binary)


def _stdout_is_terminal() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def check_not_input(
    output: Output, inputs: Iterable[str | os.PathLike[str] | None], *, fix: str
) -> None:
    """UsageError (exit 2) when `output` is one of `inputs`: the same file by any path,
    symbolic link or hard link, or the same final path when it does not exist yet; for
    "-", the same open file as stdin (`-o /dev/stdin` with `<>IN`, or `-o IN` with `<IN`).
    None in `inputs` is skipped."""
    identity = file_identity(output)
    real = os.path.realpath(output.target) if output.target is not None else None
    for spec in inputs:
        if spec is None:
            continue
        if os.fspath(spec) == STDIO:
            if identity is not None and identity == _stdin_identity():
                said = _emptied(output) if output.is_stdout else "; write to another path"
                raise UsageError(
                    f"the output {output.name} is the file stdin reads (the input '-'){said}"
                )
            continue
        same = real is not None and os.path.realpath(spec) == real
        if not same and identity is not None:
            try:
                st = os.stat(spec)
                same = (st.st_dev, st.st_ino) == identity
            except (OSError, ValueError):
                pass
        if same:
            name = os.fspath(spec)
            if output.is_stdout:  # the shell opened it for a redirection
                raise UsageError(f"the output {output.name} is the input {name}" + _emptied(output))
            if _is_empty_file(name):  # no hint may send the user on to overwrite it
                raise UsageError(
                    f"the output {output.name} is the input {name}, and it is empty: there is "
                    "no program to read (a shell redirection into a file empties it before "
                    "the command starts); restore it from a copy or version control"
                )
            raise UsageError(f"the output {output.name} is the input {name}; {fix}")


def _is_empty_file(name: str) -> bool:
    try:
        st = os.stat(name)
    except (OSError, ValueError):
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size == 0


def _emptied(output: Output) -> str:
    """The rest of the message for stdout (`output`) when it is the input file: when that file
    is empty, the shell emptied it (`> prog.pb` truncates before vppctl starts), and no
    hint may send the user on to lose more (`--in-place` on an empty file); otherwise,
    write elsewhere."""
    try:
        st = os.fstat(sys.stdout.fileno())
        empty = stat.S_ISREG(st.st_mode) and st.st_size == 0
    except (OSError, ValueError, AttributeError):
        empty = False
    if empty:
        return (
            ", and that file is empty: the shell emptied it when it opened it for the "
            "redirection, before vppctl started, so its program is gone; restore it from a "
            "copy or version control, then redirect the output to a new file (> OUT)"
        )
    return "; redirect the output to a new file (> OUT), not to the input"


def _stdin_identity() -> tuple[int, int] | None:
    try:
        st = os.fstat(sys.stdin.fileno())
    except (OSError, ValueError, AttributeError):  # closed (None), or without a descriptor
        return None
    return st.st_dev, st.st_ino
