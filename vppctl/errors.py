"""The exception hierarchy: every failure a user can cause, each with its exit code.

Library code raises these; the CLI turns them into one `Error: ...` line on
stderr and the class's exit code, in one place (`vppctl.cli`).

Exit codes (the README's table; tests/contract/test_docs.py checks it lists these):

    0   success
    1   verification found problems (`vppctl verify`)
    2   usage error (bad option value, bad regex, conflicting options)
    3   a file cannot be read or written, or is not a program; a report stream (stdout,
        or stderr when it carries the report) cannot be written
    4   the program cannot be converted as asked
    5   out of memory (the message says how much the command needs)
    70  internal error (a bug in vppctl; please report it)
    130 interrupted (Ctrl-C); a reader that closes a pipe early is exit 0
    143 terminated (SIGTERM while a file is replaced: the cleanup runs first)

Each class also names its `kind`, the token `--json` gives for a failure, and may carry
a `hint`: what to do about it, when that is not already part of the message.
"""

from __future__ import annotations

from vppctl.escape import printable

EXIT_OK = 0
EXIT_VIOLATIONS = 1
EXIT_USAGE = 2
EXIT_FILE = 3
EXIT_CONVERT = 4
EXIT_MEMORY = 5
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it
EXIT_TERMINATED = 143  # 128 + SIGTERM (vppctl.program.atomic.terminating_cleanly)


# The `kind` of each failure exit code, as the JSON error object names it.
KINDS = {
    EXIT_USAGE: "usage",
    EXIT_FILE: "file",
    EXIT_CONVERT: "convert",
    EXIT_MEMORY: "memory",
    EXIT_INTERNAL: "internal",
    EXIT_INTERRUPTED: "interrupted",
    EXIT_TERMINATED: "terminated",
}


class VppctlError(Exception):
    """Base class of every error vppctl reports to the user."""

    exit_code = EXIT_INTERNAL

    def __init__(self, message: str = "", *, hint: str | None = None) -> None:
        # Messages quote names and text from programs: their control characters are
        # escaped here, once, for every place a message is shown (the Error: line, JSON).
        super().__init__(printable(message))
        self.hint = None if hint is None else printable(hint)

    @property
    def kind(self) -> str:
        return KINDS.get(self.exit_code, "internal")


class UsageError(VppctlError):
    """An option value that cannot work, whatever the program (bad regex, --vpp 0)."""

    exit_code = EXIT_USAGE


class ProgramFileError(VppctlError):
    """A file that cannot be read or written, or that does not hold a program."""

    exit_code = EXIT_FILE


class ConversionError(VppctlError):
    """The program cannot be converted as asked (layout, layer count, annotations)."""

    exit_code = EXIT_CONVERT


OUT_OF_MEMORY = "out of memory; raise the limit (ulimit -v) or run it where there is more memory"


class OutOfMemoryError(VppctlError):
    """The command needs more memory than the machine or its limits (`ulimit -v`) give.

    Neither the file's fault (3) nor the options' (4), nor a bug (70): the same command
    works with more memory, so it has a code of its own."""

    exit_code = EXIT_MEMORY


class SelfCheckError(VppctlError):
    """`convert` produced a program its own verifier rejects: a bug, nothing is written.

    Input problems the verifier finds are refused as ConversionError (exit 4) before
    this is raised (`precheck.refuse_input_problems`); what is left is vppctl's fault,
    so it exits with the internal-error code."""

    exit_code = EXIT_INTERNAL


def os_reason(e: OSError) -> str:
    """An OS error's reason in vppctl's one style, lower case like every message of
    vppctl's own: `no space left on device`, `permission denied`."""
    reason = e.strerror or str(e)
    return reason[:1].lower() + reason[1:]
