"""The command group, its one error handler and the helpers every command shares.

The command line is thin click commands over the library (`vppctl.commands`).

Each command parses its options, calls one library function and renders the
outcome: tables and JSON on stdout (on stderr when the program itself goes to
stdout, `-o -`); warnings, progress and `wrote PATH (size)` lines on stderr.
Errors are turned into one `Error: ...` line and the documented exit code in
one place, `_Group.invoke`, which also holds the pipe policy: a reader that
closes the pipe early (`| head`) is not an error (exit 0). Output that an
encoding cannot show (`…`, `─`, `×` under PYTHONIOENCODING=ascii) falls back
to ASCII instead of failing after the work is done. Heavy modules are imported
inside the commands so that `vppctl --help` starts fast.
"""

from __future__ import annotations

import codecs
import json
import os
import sys
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from vppctl._version import __version__
from vppctl.errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_MEMORY,
    EXIT_OK,
    OUT_OF_MEMORY,
    VppctlError,
)

if TYPE_CHECKING:
    from rich.console import Console


EXIT_CODES_HELP = """Exit codes: 0 success, 1 verification found problems, 2 usage error,
3 file cannot be read or written (or is not a program), 4 program cannot be converted as
asked, 5 out of memory, 70 internal error (a bug: please report it), 130 interrupted."""


BUG_REPORT = (
    "this is a bug in vppctl; please report it with the command line and the input program "
    "(README: Reporting a bug)"
)


class _Group(click.Group):
    """Turns vppctl's exceptions into one clean stderr line and the class's exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        _ascii_fallback()
        started = time.monotonic()
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            _silence_stdout()  # the reader left: say nothing, and nothing at exit either
            ctx.exit(EXIT_OK)
        except VppctlError as e:
            click.echo(f"Error: {e}", err=True)
            ctx.exit(e.exit_code)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except KeyboardInterrupt:
            click.echo(f"Error: {_interrupted(started)}", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except SystemExit as e:  # SIGTERM while a file was replaced (vppctl.program.atomic)
            signum = getattr(e, "signum", None)
            if signum is not None:
                what = _interrupted(started).replace("interrupted", "terminated (SIGTERM)", 1)
                click.echo(f"Error: {what}", err=True)
            raise
        except MemoryError:  # outside a command's own guard (vppctl.program.memory_guarded)
            click.echo(f"Error: {OUT_OF_MEMORY}", err=True)
            ctx.exit(EXIT_MEMORY)
        except Exception as e:  # a bug: say so, traceback only under --debug
            if ctx.obj and ctx.obj.get("debug"):
                traceback.print_exc()
            click.echo(
                f"Error: internal error ({type(e).__name__}: {e}); {BUG_REPORT}; --debug "
                "shows the traceback",
                err=True,
            )
            ctx.exit(EXIT_INTERNAL)


def _interrupted(since: float) -> str:
    """What an interrupt left: the outputs written before it, whole or in part (nothing,
    when vppctl has not even loaded its writing code)."""
    if "vppctl.program.files" not in sys.modules:
        return "interrupted; nothing was written"
    from vppctl.program.files import interrupted

    return interrupted(since)


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


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
@click.version_option(__version__, prog_name="vppctl")
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

    from vppctl.report import human_bytes

    where = "stdout" if output == "-" else output
    console.print(Text(f"wrote {where} ({human_bytes(size)})"))


def _console(**kwargs: Any) -> Console:
    from rich.console import Console

    class PipeConsole(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError  # rich would exit 1: leave it to the one pipe policy

    return PipeConsole(**kwargs)


def stdout_console() -> Console:
    return _console(soft_wrap=False)


def stderr_console(quiet: bool = False) -> Console:
    return _console(stderr=True, quiet=quiet, highlight=False, soft_wrap=True)


def print_json(data: dict[str, Any], console: Console | None = None) -> None:
    text = json.dumps(data, indent=2, sort_keys=False)
    if console is None:
        click.echo(text)
    else:
        console.out(text, highlight=False)


def warn(console: Console, warnings: Iterator[str] | list[str] | tuple[str, ...]) -> None:
    from rich.text import Text

    for w in warnings:
        console.print(Text(f"warning: {w}", style="yellow"))


@contextmanager
def status(console: Console, quiet: bool, text: str) -> Iterator[None]:
    """A spinner on stderr for long work, only when stderr is a terminal."""
    if quiet or not console.is_terminal:
        yield
        return
    with console.status(text):
        yield
