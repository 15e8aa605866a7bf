"""The command group, its one error handler and the helpers every command shares.

The command line is thin click commands over the library (`vppctl.commands`).

Each command parses its options, calls one library function and renders the
outcome: tables and JSON on stdout (on stderr when the program itself goes to
stdout, `-o -`); warnings, progress and `wrote PATH (size)` lines on stderr.
Where text goes and how a pipe gets whole lines is `vppctl.cli.streams`.
Errors are turned into one `Error: ...` line and the documented exit code in
one place, `_Group.invoke`, which also holds the pipe policy: a reader that
closes the pipe early (`| head`) is not an error (exit 0). With `--json` (or
`--output-format json`) on the command line a failure is also one JSON object,
`{"error": {"exit_code", "kind", "message", "hint"}, ...}`, on stdout (on stderr when
stdout already holds the program). Output that an encoding cannot show (`…`, `─`, `×`
under PYTHONIOENCODING=ascii) falls back to ASCII instead of failing after the work
is done. What a command may not need loads on first use, through the lazy faces of the
library's packages (`vppctl._lazy`), so that `vppctl --help` starts fast.
"""

from __future__ import annotations

import codecs
import json
import os
import stat
import sys
import time
import traceback
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import click

from vppctl._version import __version__
from vppctl.cli.streams import (
    ReportStreamError,
    Stream,
    echo_error,
    print_json,
    report_console,
    silence,
    stderr_console,
    stdout_console,
)
from vppctl.errors import (
    EXIT_CONVERT,
    EXIT_FILE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_MEMORY,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
    EXIT_VIOLATIONS,
    KINDS,
    OUT_OF_MEMORY,
    VppctlError,
)
from vppctl.escape import printable
from vppctl.shapes import failure_document, failure_github, failure_junit, failure_object
from vppctl.units import human_bytes

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "BUG_REPORT",
    "EXIT_CODES_HELP",
    "cli",
    "exit_codes",
    "expect_outputs",
    "json_printed",
    "main",
    "outputs_written",
    "print_json",
    "report_console",
    "same_as_stdout",
    "stderr_console",
    "stdout_console",
    "warn",
    "write_text",
    "wrote",
]

_MEANINGS = {
    EXIT_OK: "success",
    EXIT_USAGE: "usage error",
    EXIT_FILE: "a file or stream cannot be read or written (or is not a program)",
    EXIT_CONVERT: "the program cannot be converted as asked",
    EXIT_MEMORY: "out of memory",
    EXIT_INTERNAL: "internal error (a bug: please report it)",
    EXIT_INTERRUPTED: "interrupted",
    EXIT_TERMINATED: "terminated (SIGTERM) while a file was replaced",
}


def exit_codes(*codes: int, found: str | None = None) -> str:
    """A command's --help epilog: the exit codes it can return; `found` is what exit 1
    means for it (verify: violations; simulate: a stage over --memory-limit)."""
    meanings = {**_MEANINGS, EXIT_VIOLATIONS: found or ""}
    listed = ", ".join(f"{code} {meanings[code]}" for code in sorted({EXIT_OK, *codes}))
    return f"Exit codes: {listed}."


EXIT_CODES_HELP = exit_codes(
    EXIT_VIOLATIONS,
    EXIT_USAGE,
    EXIT_FILE,
    EXIT_CONVERT,
    EXIT_MEMORY,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    found="verify found problems, or simulate a stage over --memory-limit",
)

BUG_REPORT = (
    "this is a bug in vppctl; please report it with the command line and the input program "
    "(CONTRIBUTING.md: Reporting a bug)"
)


class _Command(click.Command):
    """A command whose --help and --version cannot end in a traceback: text that stdout
    cannot take is a ReportStreamError (exit 3), like any report."""

    def get_help_option(self, ctx: click.Context) -> click.Option | None:
        option = super().get_help_option(ctx)
        if option is not None:
            option.callback = _show_help
        return option


def _show_help(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    write_text(ctx.get_help())
    ctx.exit()


def _show_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    write_text(f"vppctl, version {__version__}")
    ctx.exit()


def write_text(text: str) -> None:
    """Text that is the whole report (help, the version, XML), on stdout as it is, ended
    by a newline unless it is empty or has its own."""
    stream = Stream("stdout", report=True)
    stream.write(text if not text or text.endswith("\n") else text + "\n")
    stream.flush()


class _Group(_Command, click.Group):
    """Turns vppctl's exceptions into one clean stderr line and the class's exit code."""

    command_class = _Command

    def main(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().main(*args, **kwargs)
        except VppctlError as e:  # the group's own --help or --version, unwritable
            echo_error(f"Error: {printable(str(e))}")
            sys.exit(e.exit_code)
        except OSError as e:  # a usage error of the group's own, onto an unwritable stderr
            silence("stderr")
            sys.exit(EXIT_FILE if e.errno is not None else EXIT_INTERNAL)

    def invoke(self, ctx: click.Context) -> Any:
        _ascii_fallback()
        started = time.monotonic()
        ctx.ensure_object(dict)
        args = [*ctx._protected_args, *ctx.args]  # click empties them as it invokes
        form = report_format(args)
        ctx.obj["command"] = args[0] if args else None
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            silence("stdout")  # the reader left: say nothing, and nothing at exit either
            ctx.exit(EXIT_OK)
        except VppctlError as e:
            message = str(e) + _written_note(ctx, e)
            _fail(ctx, e.exit_code, e.kind, message, e.hint, form)
        except click.exceptions.Exit:
            raise
        except click.ClickException as e:
            _usage_failure(ctx, e, form)
        except click.exceptions.Abort:
            raise
        except KeyboardInterrupt:
            _fail(ctx, EXIT_INTERRUPTED, "interrupted", _interrupted(started), None, form)
        except SystemExit as e:  # SIGTERM while a file was replaced (vppctl.program.atomic)
            signum = getattr(e, "signum", None)
            if signum is None:
                raise
            what = _interrupted(started).replace("interrupted", "terminated (SIGTERM)", 1)
            code = 128 + signum
            _fail(ctx, code, KINDS.get(code, "terminated"), what, None, form)
        except MemoryError:  # outside a command's own guard (vppctl.program.memory_guarded)
            _fail(ctx, EXIT_MEMORY, KINDS[EXIT_MEMORY], OUT_OF_MEMORY, None, form)
        except Exception as e:  # a bug: say so, traceback only under --debug
            if ctx.obj and ctx.obj.get("debug"):
                traceback.print_exc()
            message = f"internal error ({type(e).__name__}: {e})"
            _fail(
                ctx,
                EXIT_INTERNAL,
                "internal",
                message,
                f"{BUG_REPORT}; --debug shows the traceback",
                form,
            )


def _interrupted(since: float) -> str:
    """What an interrupt left: the outputs written before it, whole or in part (nothing,
    when vppctl has not even loaded its writing code)."""
    # Asked, never imported: an interrupt before the writing code loaded wrote nothing.
    interrupted = getattr(sys.modules.get("vppctl.program.files"), "interrupted", None)
    if interrupted is None:
        return "interrupted; nothing was written"
    said: str = interrupted(since)
    return said


def json_requested(args: Sequence[str]) -> bool:
    """Whether a command line asks for JSON: `--json`, or `--output-format json` (any case,
    `=` or a separate word); what follows `--` is not an option."""
    return report_format(args) == "json"


# The machine-read formats a failure is also said in: JSON (any command's --json), and
# verify's JUnit and GitHub formats (vppctl.shapes).
_FAILURE_FORMATS = ("json", "junit", "github")


def report_format(args: Sequence[str]) -> str | None:
    """The machine-read format a command line asks for (`--json`, `--output-format F` in
    any case, `=` or a separate word; the last one given), or None; what follows `--`
    is not an option."""
    found: str | None = None
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg == "--json":
            return "json"
        name, eq, value = arg.partition("=")
        if name == "--output-format":
            if not eq:
                value = args[i + 1] if i + 1 < len(args) else ""
            found = value.lower() if value.lower() in _FAILURE_FORMATS else None
    return found


def _fail(
    ctx: click.Context, code: int, kind: str, message: str, hint: str | None, form: str | None
) -> None:
    line = f"Error: {printable(message)}" + (f"; {printable(hint)}" if hint else "")
    if form == "json" and not (ctx.obj and ctx.obj.get("json_printed")):
        stdout_taken = bool(ctx.obj and ctx.obj.get("stdout_taken"))
        text = json.dumps(failure_document(code, kind, message, hint), indent=2)
        stream = Stream("stderr" if stdout_taken else "stdout", report=False)
        stream.write(text + "\n")
        stream.flush()
        if stdout_taken:  # the JSON is stderr's whole report: no line besides it
            ctx.exit(code)
    elif form in ("junit", "github"):
        _failure_report(ctx, form, failure_object(code, kind, message, hint))
    echo_error(line)
    ctx.exit(code)


def _failure_report(ctx: click.Context, form: str, failure: dict[str, Any]) -> None:
    """A failure of `verify --output-format junit|github` said in that format on stdout,
    where the report would have been (a CI job keeps it: `> verify.xml`), unless the
    report is already there; a stdout that cannot take it is not a second error."""
    obj = ctx.obj or {}
    if obj.get("report_written") or obj.get("command") != "verify":
        return  # the report is whole already; or a command with no such format
    make = failure_junit if form == "junit" else failure_github
    try:
        stream = Stream("stdout", report=False)
        stream.write(make("verify", obj.get("source"), failure))
        stream.flush()
    except (OSError, VppctlError):
        silence("stdout")


def _usage_failure(ctx: click.Context, e: click.ClickException, form: str | None) -> None:
    """click's own usage errors, shown as click shows them (usage, hint, `Error:`), on a
    stderr that may fail; with --json (junit, github), also in that format."""
    if form is not None:
        hint = None
        if isinstance(e, click.UsageError) and e.ctx is not None:
            path = " ".join(["vppctl", *e.ctx.command_path.split()[1:]])
            hint = f"Try '{path} --help' for help."
        failure = failure_object(
            e.exit_code, KINDS.get(e.exit_code, "usage"), e.format_message(), hint
        )
        if form == "json":
            text = json.dumps(failure_document(**failure), indent=2)
            stream = Stream("stdout", report=False)
            stream.write(text + "\n")
            stream.flush()
        else:
            _failure_report(ctx, form, failure)
    try:
        e.show()
    except OSError:
        silence("stderr")
    ctx.exit(e.exit_code)


def _written_note(ctx: click.Context, e: VppctlError) -> str:
    """For a report that could not be printed after the work was done: what was written."""
    if not isinstance(e, ReportStreamError) or not ctx.obj or "written" not in ctx.obj:
        return ""
    written = ctx.obj["written"]
    if not written:
        return "; nothing was written"
    return f"; {', '.join(written)} {'was' if len(written) == 1 else 'were'} written"


def outputs_written(paths: Iterable[str], *, stdout: bool = False) -> None:
    """Record what a command wrote (for the message when its report then fails), and
    whether stdout holds a program (a failure's JSON then goes to stderr)."""
    obj = click.get_current_context().ensure_object(dict)
    obj["written"] = [("stdout" if p == "-" else p) for p in paths]
    obj["stdout_taken"] = stdout


def same_as_stdout(spec: str | None) -> bool:
    """Whether an output path is stdout: `-`, or a path to the file or pipe stdout is
    (`/dev/stdout`, or the file stdout is redirected to). A device such as /dev/null
    is not: writing it twice harms nothing."""
    if spec is None:
        return False
    if spec == "-":
        return True
    try:
        named, out = os.stat(spec), os.fstat(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return not stat.S_ISCHR(out.st_mode) and (named.st_dev, named.st_ino) == (
        out.st_dev,
        out.st_ino,
    )


def json_printed() -> None:
    """The command printed its own JSON for the failure it is about to raise (plan's
    candidates with the error in them): the error handler prints only the line."""
    click.get_current_context().ensure_object(dict)["json_printed"] = True


def expect_outputs() -> None:
    """A command that writes files: until it says what it wrote, nothing was."""
    obj = click.get_current_context().ensure_object(dict)
    obj.setdefault("written", [])


_ASCII = {"…": "...", "─": "-", "━": "-", "×": "x", "–": "-", "—": "-", "→": "->", "│": "|"}


def _to_ascii(e: UnicodeError) -> tuple[str, int]:
    if not isinstance(e, UnicodeEncodeError):
        raise e
    bad = e.object[e.start : e.end]
    return "".join(_ASCII.get(ch, "?") for ch in bad), e.end


def _ascii_fallback() -> None:
    """Streams whose encoding cannot show vppctl's few non-ASCII characters get ASCII
    stand-ins for them, so that nothing fails after the work is done."""
    codecs.register_error("vppctl-ascii", _to_ascii)
    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None) or "ascii"
        try:
            "…─×".encode(encoding)
        except (UnicodeEncodeError, LookupError):
            reconfigure = getattr(stream, "reconfigure", None)
            if reconfigure is not None:
                reconfigure(errors="vppctl-ascii")


@click.group(
    cls=_Group, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_CODES_HELP
)
@click.option(
    "-V",
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_show_version,
    help="Show the version and exit.",
)
@click.option("--debug", is_flag=True, help="Show the traceback of internal errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Convert pipeline-parallel (PP) training programs to virtual pipeline parallelism (VPP).

    \b
    vppctl sample --layers 8 --pp 4 -o prog.pb     # a GPT-like plain-PP program
    vppctl convert prog.pb --vpp 2                 # -> prog.vpp.pb, and a table
    vppctl verify prog.vpp.pb                      # check the result
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="vppctl")


# -- output ---------------------------------------------------------------------


def wrote(console: Console, output: str, size: int) -> None:
    from rich.text import Text

    where = "stdout" if output == "-" else output
    console.print(Text(printable(f"wrote {where} ({human_bytes(size)})")))


def warn(console: Console, warnings: Iterator[str] | list[str] | tuple[str, ...]) -> None:
    from rich.text import Text

    for w in warnings:
        console.print(Text(printable(f"warning: {w}"), style="yellow"))
