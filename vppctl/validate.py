"""Validate: the checks an options object runs when it is made, and their one wording.

Every options object of the Python API (`PlanOptions`, `ConvertOptions`, ...) checks its
fields in `__post_init__`, before any work, and refuses a value that cannot work with a
UsageError (exit 2) that names the field twice, as the command line and as the Python
API spell it, says the value given and what it may be:

    --placement (PlanOptions.placement): 'V2' is not one of loop, v

The command line builds the same objects from its flags, so a bad value reads the same
whichever way it came in. Each options class maps its fields to their flags in `FLAGS`
(a field without a flag is the API's alone) and names its nested options classes in
`NESTED`. An error raised deeper is worded in flags (`use --split balanced`): the public
calls (`api_names`) add a note naming the API's fields for the flags it mentions.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any, ClassVar, ParamSpec, Protocol, TypeVar

from vppctl.choices import FILLS
from vppctl.errors import ProgramFileError, UsageError, VppctlError


class Options(Protocol):
    """An options object: a dataclass whose fields map to the command line's flags."""

    FLAGS: ClassVar[Mapping[str, str]]


_C = TypeVar("_C", bound=type)


def named_fields(cls: _C) -> _C:
    """An options class (a dataclass) whose constructor says a wrong argument as a
    UsageError naming the field meant, not a bare TypeError: `MemoryOptions(memory_limit=
    ...)` -> `MemoryOptions has no field 'memory_limit': --memory-limit is
    MemoryOptions.limit`; a required field missing, too many positional arguments, or
    one given twice, too."""
    init = cls.__dict__["__init__"]  # the dataclass's own
    fields = [f.name for f in dataclasses.fields(cls) if f.init]
    required = [
        f.name
        for f in dataclasses.fields(cls)
        if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]

    @functools.wraps(init)
    def __init__(self: object, *args: object, **kwargs: object) -> None:
        name = cls.__name__
        if len(args) > len(fields):
            raise UsageError(
                f"{name} takes at most {len(fields)} arguments ({', '.join(fields)}), got "
                f"{len(args)}; name them: {name}({fields[0]}=...)"
            )
        for key in kwargs:
            if key not in fields:
                raise UsageError(_unknown_field(cls, key, fields))
            if key in fields[: len(args)]:
                raise UsageError(f"{name} got {key} twice: by position and by name")
        missing = [f for f in required if f not in fields[: len(args)] and f not in kwargs]
        if missing:
            raise UsageError(f"{name} needs {', '.join(missing)}: {name}({missing[0]}=...)")
        init(self, *args, **kwargs)

    setattr(cls, "__init__", __init__)  # noqa: B010 - a method is not assigned directly
    return cls


def _unknown_field(cls: type, key: str, fields: Sequence[str]) -> str:
    flag = "--" + key.replace("_", "-")
    meant = flag_table([(cls, cls.__name__)], {}).get(flag)
    text = f"{cls.__name__} has no field {key!r}"
    if meant:
        text += f": {flag} is {meant}"
    else:
        close = difflib.get_close_matches(key, fields, 1)
        if close:
            text += f"; did you mean {close[0]!r}?"
    return text + f" (its fields: {', '.join(fields)})"


def where(options: Options, field: str) -> str:
    """`--placement (PlanOptions.placement)`: a field as both spellings name it."""
    name = f"{type(options).__name__}.{field}"
    flag = options.FLAGS.get(field)
    return f"{flag} ({name})" if flag else name


def bad_value(place: str, value: object, legal: str) -> str:
    """The one wording of a value that cannot work, for the command line and the API."""
    return f"{place}: {value!r} is not {legal}"


def refuse(options: Options, field: str, legal: str, value: object = None) -> UsageError:
    """The UsageError for `field`'s value (or `value`, an item of it)."""
    shown = getattr(options, field) if value is None else value
    return UsageError(bad_value(where(options, field), shown, legal))


def _set(options: Options, field: str, value: object) -> None:
    # Options are frozen dataclasses; a value normalised when it is made (a list to a
    # tuple, a float to its exact fraction) is set once, here.
    object.__setattr__(options, field, value)


def choice(options: Options, field: str, legal: Sequence[str], *, optional: bool = False) -> None:
    """One of `legal`, exactly (None too when `optional`)."""
    value = getattr(options, field)
    if value is None and optional:
        return
    if not isinstance(value, str) or value not in legal:
        raise refuse(options, field, one_of(legal, value))


def one_of(legal: Sequence[str], value: object) -> str:
    """`one of loop, v`, with the token meant when only the case differs."""
    text = f"one of {', '.join(legal)}"
    if isinstance(value, str) and value.lower() in legal:
        text += f" (the names are lower case: {value.lower()!r})"
    return text


def choices(options: Options, field: str, legal: Sequence[str], *, empty: str = "") -> None:
    """A sequence of names from `legal`, stored as a tuple; an empty one is `legal` itself
    (everything) unless `empty` says why it cannot be empty."""
    items = sequence(options, field, f"a sequence of names, each one of {', '.join(legal)}")
    if not items and empty:
        raise refuse(options, field, empty)
    for item in items:
        if not isinstance(item, str) or item not in legal:
            raise refuse(options, field, one_of(legal, item), item)
    _set(options, field, tuple(dict.fromkeys(items)) or tuple(legal))


def sequence(options: Options, field: str, legal: str) -> tuple[Any, ...]:
    """A field that holds several values: any sequence but a string (which would be read
    letter by letter), as a tuple."""
    value = getattr(options, field)
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise refuse(options, field, legal)
    return tuple(value)


def is_int(value: object) -> bool:
    """An integer, and not a bool (which Python counts as one)."""
    return isinstance(value, int) and not isinstance(value, bool)


def integer(options: Options, field: str, low: int, high: int, *, optional: bool = False) -> None:
    """An integer in [low, high] (None too when `optional`)."""
    value = getattr(options, field)
    if value is None and optional:
        return
    if not is_int(value) or not low <= value <= high:
        raise refuse(options, field, between(low, high))


def between(low: int, high: int) -> str:
    return f"an integer between {low:,} and {high:,}"


def integers(
    options: Options, field: str, low: int, high: int, *, empty: str = "", example: str = ""
) -> None:
    """A sequence of integers in [low, high], or one integer (as the command line takes
    `--micro-batches 8`), stored as a tuple; empty only without `empty`."""
    legal = f"a sequence of integers between {low:,} and {high:,}" + (
        f", e.g. {example}" if example else ""
    )
    value = getattr(options, field)
    if is_int(value):
        _set(options, field, (value,))
    items = sequence(options, field, legal)
    if not items and empty:
        raise refuse(options, field, empty)
    for item in items:
        if not is_int(item) or not low <= item <= high:
            raise refuse(options, field, between(low, high), item)
    _set(options, field, items)


def flag(options: Options, field: str) -> None:
    """True or False."""
    if not isinstance(getattr(options, field), bool):
        raise refuse(options, field, "True or False")


def text(options: Options, field: str, legal: str) -> None:
    """A string or None."""
    value = getattr(options, field)
    if value is not None and not isinstance(value, str):
        raise refuse(options, field, legal)


# The numbers a cost or time takes (in any unit: only their ratios matter): 0, or within
# twelve orders of magnitude of 1 either way. Beyond, the simulation's sums and ratios of
# them would leave what a float holds (`--p2p-cost 1e307` overflowed when drawn or said
# in JSON) or its precision, and no real cost is 10^24 times another.
NUMBER_RANGE = (Fraction(1, 10**12), Fraction(10**12))
NUMBER_LEGAL = "a number 0 or between 1e-12 and 1e12"


def exact_number(options: Options, field: str, value: object) -> Fraction | None:
    """`value` as an exact fraction when it is 0 or a number in NUMBER_RANGE (a float
    through its shortest decimal form, so that 0.1 is one tenth), else None (NaN, an
    infinity, a negative or out-of-range number, not a number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, int) and value.bit_length() > 64:  # no 10^4000-digit int to parse
        return None
    exact = Fraction(repr(value)) if isinstance(value, float) else Fraction(value)
    low, high = NUMBER_RANGE
    return exact if exact == 0 or low <= exact <= high else None


def number(options: Options, field: str) -> None:
    """0 or a number in NUMBER_RANGE, stored as an exact fraction."""
    exact = exact_number(options, field, getattr(options, field))
    if exact is None:
        raise refuse(options, field, NUMBER_LEGAL)
    _set(options, field, exact)


# -- paths -----------------------------------------------------------------------------


def file_name(spec: object, role: str = "a path") -> str:
    """`spec` as the file name it is, refusing what cannot be one before anything is
    opened: UsageError (exit 2) for what is not a path at all (bytes, a Program, a
    number; `role` names the argument), ProgramFileError (exit 3) for a name no file can
    have (a NUL; a lone surrogate the file system's encoding cannot hold: Python's own
    escapes of a non-UTF-8 name, U+DC80 to U+DCFF, are names as they came)."""
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if not isinstance(spec, str):
        kind = type(spec).__name__
        hint = {
            "bytes": "; decode it first, os.fsdecode(name)",
            "bytearray": "; decode it first, os.fsdecode(bytes(name))",
            "Program": "; a Program in memory goes to the *_program calls (verify_program, "
            "convert_program, write_program), a file's path to the *_file ones",
        }.get(kind, "")
        raise UsageError(f"{role} must be a path (str or os.PathLike) or '-', not {kind}{hint}")
    if "\x00" in spec:
        raise ProgramFileError(f"{spec!r} cannot be a file name: it holds a NUL character")
    try:
        os.fsencode(spec)
    except UnicodeEncodeError as e:
        bad = spec[e.start : e.end]
        raise ProgramFileError(
            f"{spec!r} cannot be a file name: {bad!r} is not a character the file system's "
            f"encoding ({sys.getfilesystemencoding()}) can hold"
        ) from None
    return spec


def path(options: Options, field: str, *, optional: bool = False) -> None:
    """A path (str or os.PathLike; "-" is stdin), None too when `optional`."""
    value = getattr(options, field)
    if value is None and optional:
        return
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
        _set(options, field, value)
    if not isinstance(value, str) or not value:
        raise refuse(options, field, "a path (str or os.PathLike), or '-' for stdin")


def measured_costs(options: Options) -> None:
    """`costs_from` (a path or None) and `fill` (one of FILLS), which fills only what
    measured costs leave out: an options object that takes `--costs-from`."""
    path(options, "costs_from", optional=True)
    choice(options, "fill", FILLS)
    fill, costs_from = (getattr(options, name) for name in ("fill", "costs_from"))
    if fill != "none" and costs_from is None:
        raise UsageError(
            f"{where(options, 'fill')} fills what {where(options, 'costs_from')} does not "
            "measure: pass --costs-from FILE, or drop --fill"
        )


def nested(options: Options, field: str, kind: type, *, optional: bool = False) -> None:
    """Another options object of type `kind` (None too when `optional`)."""
    value = getattr(options, field)
    if value is None and optional:
        return
    if not isinstance(value, kind):
        raise refuse(options, field, f"a {kind.__name__}")


def wrong_options(call: str, expected: str, given: object) -> str:
    """The message for options of the wrong kind (a `PlanOptions` where `convert_file`
    takes a `ConvertOptions`)."""
    return f"{call} takes its options as one {expected}, got {type(given).__name__}" + (
        ": wrap it, ConvertOptions(plan=PlanOptions(...))" if expected == "ConvertOptions" else ""
    )


def flag_names(options_type: type, prefix: str) -> dict[str, str]:
    """Flag -> the API's name for it (`--split` -> `ConvertOptions.plan.split`), for an
    options class and the options classes nested in it."""
    names: dict[str, str] = {}
    flags: Mapping[str, str] = getattr(options_type, "FLAGS", {})
    nested_types: Mapping[str, type] = getattr(options_type, "NESTED", {})
    for f in dataclasses.fields(options_type):
        path = f"{prefix}.{f.name}"
        if f.name in nested_types:
            names.update(flag_names(nested_types[f.name], path))
        elif f.name in flags:
            names[flags[f.name]] = path
    return names


# -- the API's names of the flags an error mentions -----------------------------------

_P = ParamSpec("_P")
_R = TypeVar("_R")
# A flag in an error message: `--split`, `-o`.
_FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-z])(?![\w-])")


def api_names(
    names: Callable[[], Mapping[str, str]],
) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """A public call whose errors worded in the command line's flags also name the API's
    fields: a note (PEP 678, shown under the traceback) such as `in the Python API:
    --split is ConvertOptions.plan.split`. The message itself stays as the command line
    shows it. `names` (flag -> API name) is asked on the first error only."""

    def decorate(run: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(run)
        def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            try:
                return run(*args, **kwargs)
            except VppctlError as e:
                _note_api_names(e, names())
                raise

        return call

    return decorate


def _note_api_names(e: VppctlError, names: Mapping[str, str]) -> None:
    message = str(e)
    said = [
        f"{flag} is {names[flag]}"
        for flag in dict.fromkeys(_FLAG.findall(message))
        if flag in names and names[flag] not in message
    ]
    if not said:
        return
    note = "in the Python API: " + ", ".join(said)
    if note in getattr(e, "__notes__", ()):  # a public call inside another one said it
        return
    add_note = getattr(e, "add_note", None)
    if add_note is not None:
        add_note(note)
    else:  # Python 3.10: kept where 3.11's tracebacks look for it
        e.__notes__ = [*getattr(e, "__notes__", []), note]  # type: ignore[attr-defined]


def flags_of(
    *options: tuple[type, str], outputs: Mapping[str, str] | None = None
) -> Callable[[], dict[str, str]]:
    """Flag -> API name for a call's options classes (each with its name in the call) and
    its output arguments, made on first use."""
    return functools.cache(lambda: flag_table(options, outputs or {}))


def flag_table(options: Sequence[tuple[type, str]], outputs: Mapping[str, str]) -> dict[str, str]:
    names: dict[str, str] = {}
    for options_type, prefix in options:
        for flags, name in flag_names(options_type, prefix).items():
            for flag in flags.split("/"):
                names[flag] = name
    names.update(outputs)
    return names
