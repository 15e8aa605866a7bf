"""Signs of life on stderr: the observers of `vppctl.progress` that the commands install.

At a terminal, a rich progress bar (transient: it is gone when the command ends) with
the phase, the bar, what is done of what (ops or bytes), the time elapsed and the time
left. In a log (stderr not a terminal), a plain line per phase that took at least
LOG_AFTER seconds, and one every LOG_EVERY seconds while a phase runs and says how far
it got (every phase but planning does), so that a CI job shows it is alive and small
runs stay quiet:

    indexing: 3.2 s (999,500 ops)
    verifying: 50% of 11 checks, 10.0 s
    searching: 74% of 412 candidates, 10.0 s

Nothing under `-q`, nothing when stderr carries a JSON report, and nothing when the
environment says VPPCTL_PROGRESS=off (or 0, no, false): a CI job that wants no phase
lines in its log but its warnings kept.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from vppctl.cli.streams import Diagnostics, is_terminal, stderr_console
from vppctl.progress import UNITS, Observer, Phase
from vppctl.units import human_bytes

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

LOG_AFTER = 1.0  # seconds a phase must take to get its line in a log
LOG_EVERY = 10.0  # seconds between the lines of a phase still running, in a log


def observer(quiet: bool, *, json_on_stderr: bool = False) -> Observer | None:
    """The observer for a command: a bar at a terminal, lines in a log, none when quiet."""
    if quiet or json_on_stderr or not wanted():
        return None
    if is_terminal("stderr"):
        return BarObserver(stderr_console())
    return LogObserver(Diagnostics())


def wanted() -> bool:
    """Whether the environment allows progress (VPPCTL_PROGRESS, module docstring)."""
    return os.environ.get("VPPCTL_PROGRESS", "").strip().lower() not in ("0", "off", "no", "false")


def _count(n: int, unit: str | None) -> str:
    if unit == "bytes":
        return human_bytes(n)
    return f"{n:,} {unit}" if unit else f"{n:,}"


class LogObserver:
    """Plain phase lines with elapsed seconds (module docstring)."""

    def __init__(self, err: Diagnostics) -> None:
        self.err = err
        self.name: Phase | None = None
        self.total: int | None = None
        self.done = 0
        self.started = self.said = 0.0

    def phase(self, name: Phase, total: int | None) -> None:
        self._end()
        self.name, self.total, self.done = name, total, 0
        self.started = self.said = time.monotonic()

    def advance(self, done: int) -> None:
        self.done = done
        now = time.monotonic()
        if self.name is not None and now - self.said >= LOG_EVERY:
            self.said = now
            share = f"{done / self.total:.0%} of " if self.total else ""
            shown = _count(self.total if self.total else done, UNITS[self.name])
            self._say(f"{self.name}: {share}{shown}, {now - self.started:.1f} s")

    def close(self) -> None:
        self._end()
        self.name = None

    def _end(self) -> None:
        if self.name is None:
            return
        elapsed = time.monotonic() - self.started
        if elapsed >= LOG_AFTER:
            unit = UNITS[self.name]
            count = self.total if self.total is not None else self.done
            detail = f" ({_count(count, unit)})" if unit and count else ""
            self._say(f"{self.name}: {elapsed:.1f} s{detail}")

    def _say(self, text: str) -> None:
        self.err.say(text)


class BarObserver:
    """A transient rich progress bar on a terminal (module docstring)."""

    def __init__(self, console: Console) -> None:
        from rich.progress import (
            BarColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.bar: Progress = Progress(
            TextColumn("{task.description:<10}"),
            BarColumn(),
            TextColumn("{task.fields[count]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=True,
            # Each redraw of the bar costs a few ms of the conversion's CPU (the GIL is
            # shared): 4 a second keeps the elapsed and remaining seconds current at a
            # fraction of rich's default 10 (docs/performance.md has the measured cost).
            refresh_per_second=4,
            # vppctl prints through its own consoles; rich's stream proxies are not needed
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self.task: TaskID | None = None
        self.unit: str | None = None
        self.total: int | None = None

    def phase(self, name: Phase, total: int | None) -> None:
        # The bar starts with the first phase, not when the observer is made: a command
        # refused before its work, or one with no phase (simulate without a program), never
        # calls close(), and a started bar would leave the terminal's cursor hidden.
        if self.task is None:
            self.bar.start()
        else:
            self.bar.remove_task(self.task)
        self.unit, self.total = UNITS[name], total
        self.task = self.bar.add_task(name, total=total, count=self._shown(0))
        self.bar.refresh()  # every phase is on screen at least once, however short

    def advance(self, done: int) -> None:
        if self.task is not None:
            self.bar.update(self.task, completed=done, count=self._shown(done))

    def close(self) -> None:
        if self.task is not None:  # never started: nothing to stop
            self.bar.stop()
            self.task = None

    def _shown(self, done: int) -> str:
        if self.total is None:
            return _count(done, self.unit) if done else ""
        return f"{_count(done, self.unit)} / {_count(self.total, self.unit)}"
