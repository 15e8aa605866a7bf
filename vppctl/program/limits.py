"""Limits: running out of memory said as such (exit 5), never as a corrupt file or a bug.

Memory runs out in two guises: Python's MemoryError, and protobuf's (upb's)
DecodeError "Arena alloc failed" when a parse cannot get memory, which the
loader would otherwise report as a corrupt program. `memory_guarded` wraps a
command: either guise, anywhere below it, becomes one OutOfMemoryError whose
message says what the command needs (the documented bound: about 3x the
program's size plus 200 MB, docs/io.md: Bounds) and what limits it (`ulimit -v`).
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from google.protobuf.message import DecodeError

from vppctl.errors import OUT_OF_MEMORY, OutOfMemoryError, VppctlError
from vppctl.units import human_bytes

_P = ParamSpec("_P")
_R = TypeVar("_R")

# What the bound promises: peak memory within this many times the file, plus BASE_BYTES.
PER_FILE_BYTE = 3
BASE_BYTES = 200 << 20
_UPB_OUT_OF_MEMORY = "alloc failed"  # upb's "Arena alloc failed"


def memory_guarded(command: Callable[_P, _R], source: str | None = None) -> Callable[_P, _R]:
    """`command` with running out of memory turned into OutOfMemoryError (exit 5). `source`
    is the name of its parameter that, when a path, names the program read: the message
    sizes the need from it (None: the command reads no program, as `sample` writes one)."""

    # Read once, when the command is wrapped: not while memory has just run out.
    signature = None if source is None else inspect.signature(command)

    def read_from(args: tuple[object, ...], kwargs: dict[str, object]) -> object:
        if signature is None or source is None:
            return None
        try:
            return signature.bind_partial(*args, **kwargs).arguments.get(source)
        except TypeError:  # called with arguments that do not fit: nothing to size
            return None

    @functools.wraps(command)
    def guarded(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return command(*args, **kwargs)
        except MemoryError:
            raise out_of_memory(read_from(args, kwargs)) from None
        except VppctlError as e:
            if isinstance(e, OutOfMemoryError) or not ran_out_of_memory(e):
                raise
            raise out_of_memory(read_from(args, kwargs)) from None

    return guarded


def ran_out_of_memory(error: BaseException) -> bool:
    """Whether `error` was raised while handling a failure to get memory (a MemoryError, or
    protobuf failing to allocate while it parsed or serialized)."""
    seen = 0
    cause: BaseException | None = error
    while cause is not None and seen < 20:
        if isinstance(cause, MemoryError):
            return True
        if isinstance(cause, DecodeError) and _UPB_OUT_OF_MEMORY in str(cause):
            return True
        cause = cause.__cause__ or cause.__context__
        seen += 1
    return False


def raise_if_out_of_memory(error: DecodeError) -> None:
    """For the few places that take a decode failure for an answer (not a program, not this
    kind of attr): a failure to get memory is no answer, so raise it as one."""
    if _UPB_OUT_OF_MEMORY in str(error):
        raise MemoryError(str(error)) from error


def out_of_memory(spec: object) -> OutOfMemoryError:
    """The error for a command that ran out of memory, with what it needs and what limits it
    when known."""
    need = ""
    name = os.fspath(spec) if isinstance(spec, (str, os.PathLike)) else None
    size = _input_size(name) if isinstance(name, str) else None
    if size is not None:
        shown = "stdin" if name == "-" else name
        need = (
            f": vppctl may need up to {human_bytes(PER_FILE_BYTE * size + BASE_BYTES)} for {shown} "
            f"({human_bytes(size)}; its bound is {PER_FILE_BYTE}x the program plus "
            f"{human_bytes(BASE_BYTES)})"
        )
    limit = _address_space_limit()
    if not need and not limit:
        return OutOfMemoryError(OUT_OF_MEMORY)
    limited = ""
    if limit:
        limited = f", and the address space is limited to {human_bytes(limit)} (ulimit -v)"
    return OutOfMemoryError(
        f"out of memory{need}{limited}; raise the limit or run it where there is more memory"
    )


def _input_size(spec: str) -> int | None:
    try:
        if os.fspath(spec) == "-":
            size = os.fstat(0).st_size
        else:
            size = os.stat(spec).st_size
    except (OSError, TypeError, ValueError):
        return None
    return size or None  # 0: a pipe or device, whose size is not known


def _address_space_limit() -> int | None:
    try:
        import resource
    except ImportError:  # not on this platform
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else soft
