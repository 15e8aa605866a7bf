"""Where the command line's text goes: one console for stdout, one for stderr, and what
happens when a stream is a pipe, a log or cannot be written.

The one rendering policy. A terminal gets tables at its width (rich measures it). Anything
else (a pipe, a file, a CI log) gets whole records: a width no line reaches, so that a
line is never split, and no trailing whitespace (rich pads table cells to their column).
The policy follows the real stream (`isatty`), not rich's colour detection, so that
FORCE_COLOR in a CI job still gets whole lines.

Streams that fail. A *report* stream (the table or JSON a command prints) that cannot be
written is a `ReportStreamError` (exit 3), never an internal error; the error handler says
whether the program was written. A *diagnostics* stream (progress, warnings, `wrote`
lines) that cannot be written is given up quietly: losing a warning must not fail a run
that did its work. A reader that leaves a pipe early raises BrokenPipeError unchanged
(the one pipe policy, `vppctl.cli.base`). A stream that failed is pointed at /dev/null so
that the interpreter's last flush cannot fail the exit code either.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import IO, TYPE_CHECKING, Any, Literal

from vppctl.errors import ProgramFileError, os_reason
from vppctl.escape import printable

if TYPE_CHECKING:
    from rich.console import Console

StreamName = Literal["stdout", "stderr"]

# Wide enough that no record is ever split; tables still take only their natural width.
PIPE_WIDTH = 1 << 16
# A picture (the timeline) is scaled to fit a terminal; in a pipe it gets these columns.
PIPE_PICTURE_COLUMNS = 80


class ReportStreamError(ProgramFileError):
    """stdout (or stderr, when it carries the report) cannot be written: exit 3."""


def _target(name: StreamName) -> IO[str] | None:
    return sys.stdout if name == "stdout" else sys.stderr


def is_terminal(name: StreamName) -> bool:
    """Whether the stream is a terminal (a closed or odd stream is not)."""
    stream = _target(name)
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def silence(name: StreamName) -> None:
    """Point the stream's file descriptor at /dev/null and drop what it holds, so that
    nothing more (the interpreter's last flush included) fails on it."""
    stream = _target(name)
    try:
        fd = stream.fileno() if stream is not None else (1 if name == "stdout" else 2)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
    if stream is not None:
        with contextlib.suppress(OSError, ValueError):
            stream.flush()  # what was buffered goes to /dev/null now


class Stream:
    """A text stream as rich writes it: stdout or stderr as it is when the stream is made
    (not as a live display may redirect it later), with trailing whitespace stripped off
    each line when the stream is not a terminal. `report`: a failure raises
    ReportStreamError (exit 3); otherwise the stream is given up quietly."""

    def __init__(self, name: StreamName, *, report: bool) -> None:
        self.name = name
        self.report = report
        self._stream = _target(name)
        self.failed = False
        self._strip = not is_terminal(name)
        self._tail = ""  # the last, unfinished line (not yet stripped)

    @property
    def encoding(self) -> str:
        return getattr(self._stream, "encoding", None) or "utf-8"

    def isatty(self) -> bool:
        return not self._strip

    def fileno(self) -> int:
        stream = self._stream
        if stream is None:
            raise OSError(f"{self.name} is closed")
        return stream.fileno()

    def write(self, text: str) -> int:
        if self._strip:
            head, newline, self._tail = (self._tail + text).rpartition("\n")
            if newline:
                self._emit("\n".join(line.rstrip() for line in head.split("\n")) + "\n")
        else:
            self._emit(text)
        return len(text)

    def flush(self) -> None:
        if self._tail:
            tail, self._tail = self._tail, ""
            self._emit(tail)
        self._do(lambda stream: stream.flush())

    def _emit(self, text: str) -> None:
        self._do(lambda stream: stream.write(text))

    def _do(self, action: Any) -> None:
        if self.failed:
            return
        stream = self._stream
        try:
            if stream is None:
                raise ReportStreamError(f"cannot write the report to {self.name}: it is closed")
            action(stream)
        except BrokenPipeError:
            raise
        except (OSError, ReportStreamError) as e:
            self.failed = True
            silence(self.name)
            if self.report:
                if isinstance(e, ReportStreamError):
                    raise
                raise ReportStreamError(
                    f"cannot write the report to {self.name}: {os_reason(e)}"
                ) from None


def console(name: StreamName, *, report: bool, quiet: bool = False) -> Console:
    """A rich console on `name` under the rendering policy (module docstring)."""
    from rich.console import Console

    class PipeConsole(Console):
        picture_columns: int | None = None  # read by vppctl.report.picture_columns

        def on_broken_pipe(self) -> None:
            raise BrokenPipeError  # rich would exit 1: leave it to the one pipe policy

    stream = Stream(name, report=report)
    terminal = stream.isatty()
    made = PipeConsole(
        file=stream,  # type: ignore[arg-type]  # a text stream as rich uses one
        width=None if terminal else PIPE_WIDTH,
        quiet=quiet,
        highlight=False,
        soft_wrap=name == "stderr",
    )
    made.picture_columns = None if terminal else PIPE_PICTURE_COLUMNS
    return made


def plain(name: StreamName) -> bool:
    """Whether rich would print to `name` without styles, as plain text: the stream is no
    terminal and the environment does not say it is one (rich's rule: TTY_COMPATIBLE=1, or
    FORCE_COLOR set and not empty, unless TTY_COMPATIBLE=0). There a report may be written
    as lines (`vppctl.report.plain`), without loading rich."""
    said = os.environ.get("TTY_COMPATIBLE", "")
    if said in ("0", "1"):
        forced = said == "1"
    else:
        forced = os.environ.get("FORCE_COLOR", "") != ""
    return not forced and not is_terminal(name)


def write_lines(name: StreamName, lines: list[str], *, report: bool) -> None:
    """Plain lines on `name` (`report`: a failure is a ReportStreamError, as rich's)."""
    stream = Stream(name, report=report)
    stream.write("".join(line + "\n" for line in lines))
    stream.flush()


class Diagnostics:
    """Where `wrote` lines, warnings and a log's phase lines go: stderr, through rich at a
    terminal (in colour), as plain lines elsewhere (without loading rich); nowhere when
    quiet."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        self.plain = not quiet and plain("stderr")
        self._console: Console | None = None

    def say(self, text: str, style: str | None = None) -> None:
        """One line of text (escaped here), in `style` where styles show."""
        if self.quiet:
            return
        if self.plain:
            write_lines("stderr", [printable(text)], report=False)
            return
        from rich.text import Text

        if self._console is None:
            self._console = stderr_console()
        self._console.print(Text(printable(text), style=style or ""))


def diagnostics(quiet: bool = False) -> Diagnostics:
    """stderr's diagnostics (`Diagnostics`), for a command run with `quiet` or not."""
    return Diagnostics(quiet)


def stdout_console() -> Console:
    """The report on stdout."""
    return console("stdout", report=True)


def stderr_console(quiet: bool = False) -> Console:
    """Progress, warnings and `wrote` lines on stderr (given up quietly if it fails)."""
    return console("stderr", report=False, quiet=quiet)


def report_console(to_stderr: bool) -> Console:
    """The report: on stdout, or on stderr when the program itself goes to stdout."""
    return console("stderr" if to_stderr else "stdout", report=True)


def print_json(data: dict[str, Any], *, to_stderr: bool = False) -> None:
    """One JSON object, as the whole of its stream's report."""
    stream = Stream("stderr" if to_stderr else "stdout", report=True)
    stream.write(json.dumps(data, indent=2) + "\n")
    stream.flush()


def echo_error(text: str) -> None:
    """One error line on stderr; a stderr that cannot take it loses it (the exit code
    still says what happened)."""
    stream = Stream("stderr", report=False)
    stream.write(text + "\n")
    stream.flush()
