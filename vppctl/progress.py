"""Progress: long work says which phase it is in and how far it got, to an observer.

The library never prints. A caller that wants signs of life installs an `Observer` for
the duration of a call (`with observing(observer): ...`, or the `progress=` argument of
the `vppctl.commands` functions); the work then reports, through `phase` and `advance`,
the phases of the pipeline:

    reading     bytes of the input read (then parsed)
    indexing    ops scanned into the side tables
    planning    layers found, refusals checked, the plan made (no count)
    searching   candidates of `plan`'s search timed (or refused)
    building    `sample`'s program made (no count)
    applying    ops given their new mesh and chunk
    verifying   rule checks run
    writing     bytes of the output written

A phase ends when the next begins or when `observing` ends. Without an observer every
call is one context-variable lookup, so the hot loops report once per piece of work (a
few hundred ops, a megabyte), never per op. The command line's observers (a rich bar at
a terminal, phase lines in a log) are `vppctl.cli.progress`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Literal, Protocol

Phase = Literal[
    "reading",
    "indexing",
    "planning",
    "searching",
    "building",
    "applying",
    "verifying",
    "writing",
]

# What each phase counts (None: it reports no count).
UNITS: dict[Phase, str | None] = {
    "reading": "bytes",
    "indexing": "ops",
    "planning": None,
    "searching": "candidates",
    "building": None,
    "applying": "ops",
    "verifying": "checks",
    "writing": "bytes",
}


class Observer(Protocol):
    """Told what long work is doing; each method returns quickly."""

    def phase(self, name: Phase, total: int | None) -> None:
        """A phase begins (the previous one, if any, has ended); `total` of its unit, if
        known."""

    def advance(self, done: int) -> None:
        """The current phase has done `done` of its unit so far."""

    def close(self) -> None:
        """The work is over (successfully or not)."""


_current: ContextVar[Observer | None] = ContextVar("vppctl_progress", default=None)
_done: ContextVar[int] = ContextVar("vppctl_progress_done", default=0)


@contextmanager
def observing(observer: Observer | None) -> Iterator[None]:
    """Report the progress of the work inside the block to `observer` (None: to nobody,
    or to the observer already installed)."""
    if observer is None:
        yield
        return
    token = _current.set(observer)
    try:
        yield
    finally:
        _current.reset(token)
        observer.close()


def phase(name: Phase, total: int | None = None) -> None:
    """Tell the observer, if any, that phase `name` begins."""
    observer = _current.get()
    if observer is not None:
        _done.set(0)
        observer.phase(name, total)


def advance(done: int) -> None:
    """Tell the observer, if any, that the current phase has done `done` so far."""
    observer = _current.get()
    if observer is not None:
        _done.set(done)
        observer.advance(done)


def step(count: int) -> None:
    """Tell the observer, if any, that the current phase has done `count` more."""
    observer = _current.get()
    if observer is not None:
        done = _done.get() + count
        _done.set(done)
        observer.advance(done)
