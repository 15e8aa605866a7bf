"""Cursor: the PIR reader's walk over a program's JSON text, and its typed access to what it
decodes.

`JsonCursor` walks the containers the reader descends into (the document, the program, its
region and block, the list of ops) and decodes everything else one item at a time, each
at most MAX_ITEM_CHARS characters, so that the Python objects of one op stay small
whatever the file holds. `obj`, `arr`, `integer`, `string`, `integers` check a decoded
value's JSON type (and an integer's range); `is_null` and `optional` say what Paddle
leaves out; `name` is a string the reader keeps (no lone surrogate), and `shown` is how an
error quotes a value from the file (a short prefix of it). A value that is not what a PIR
program holds is `Malformed`, whose message says where and why.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from json.decoder import JSONDecodeError
from typing import Any

# JSON characters of one op (or block argument, or the header): decoded, an item's Python
# objects take up to about 25 bytes a character (a list of empty lists), so 4 MiB keeps one
# item near 100 MB whatever the file holds; a real op is a few KB.
MAX_ITEM_CHARS = 4 << 20
_FIRST_WINDOW = 1 << 14  # characters decoded at first for an item; doubled while too few

_WHITESPACE = re.compile(r"[ \t\n\r]*")
# A lone surrogate: what a JSON `\ud800` escape decodes to without its pair. It has no UTF-8
# form, so Paddle (whose JSON writer writes UTF-8) never writes one, and protobuf, which
# holds vppctl's names, refuses it.
_SURROGATE = re.compile("[\ud800-\udfff]")
SHOWN_CHARS = 40  # characters of a value from the file an error quotes
_DECODER = json.JSONDecoder()


class Malformed(Exception):
    """The JSON is not a PIR program; the message says where and why."""


class OverBound(Malformed):
    """A PIR program over one of the reader's bounds (docs/io.md: Bounds)."""


class JsonCursor:
    """A cursor over JSON text that walks the containers vppctl descends into and decodes
    everything else one item at a time (each at most MAX_ITEM_CHARS characters)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.window = _FIRST_WINDOW

    def where(self, pos: int | None = None) -> str:
        pos = self.pos if pos is None else pos
        line = self.text.count("\n", 0, pos) + 1
        column = pos - self.text.rfind("\n", 0, pos)
        return f"line {line} column {column}"

    def peek(self) -> str:
        match = _WHITESPACE.match(self.text, self.pos)
        self.pos = match.end() if match else self.pos
        if self.pos >= len(self.text):
            raise Malformed(f"the JSON ends early at {self.where()} (is the file truncated?)")
        return self.text[self.pos]

    def expect(self, char: str, what: str) -> None:
        found = self.peek()
        if found != char:
            raise Malformed(
                f"invalid JSON in {what} at {self.where()}: expected {char!r}, found {found!r}"
            )
        self.pos += 1

    def string(self, what: str) -> str:
        if self.peek() != '"':
            raise Malformed(f"invalid JSON in {what} at {self.where()}: expected a key")
        try:
            value, self.pos = _DECODER.raw_decode(self.text, self.pos)
        except JSONDecodeError as e:
            raise self._bad(e, what) from None
        return str(value)

    def members(self, what: str) -> Iterator[str]:
        """The keys of the object at the cursor; the caller reads each key's value."""
        self.expect("{", what)
        if self.peek() == "}":
            self.pos += 1
            return
        while True:
            key = self.string(what)
            self.expect(":", what)
            yield key
            if self.peek() == ",":
                self.pos += 1
                continue
            self.expect("}", what)
            return

    def elements(self, what: str) -> Iterator[int]:
        """The positions of the elements of the array at the cursor; the caller reads each."""
        self.expect("[", what)
        if self.peek() == "]":
            self.pos += 1
            return
        k = 0
        while True:
            self.peek()
            yield k
            k += 1
            if self.peek() == ",":
                self.pos += 1
                continue
            self.expect("]", what)
            return

    def value(self, what: str) -> Any:
        """Decode the value at the cursor, at most MAX_ITEM_CHARS characters of it: the text
        is decoded in a window that doubles while the value does not fit in it."""
        self.peek()
        start, window = self.pos, self.window
        while True:
            end = start + window
            try:
                if end >= len(self.text):
                    value, stop = _DECODER.raw_decode(self.text, start)
                else:
                    value, stop = _DECODER.raw_decode(self.text[start:end])
                    stop += start
            except JSONDecodeError as e:
                if end < len(self.text) and window < MAX_ITEM_CHARS:
                    window *= 2
                    continue
                if end < len(self.text):
                    raise Malformed(
                        f"{what} at {self.where(start)} is invalid JSON or longer than "
                        f"{MAX_ITEM_CHARS >> 20} MiB, the most vppctl reads of one item ({e.msg})"
                    ) from None
                raise self._bad(e, what) from None
            except ValueError as e:  # an integer with too many digits
                raise Malformed(f"{what} at {self.where(start)} is invalid: {e}") from None
            self.pos = stop
            self.window = max(_FIRST_WINDOW, min(MAX_ITEM_CHARS, 4 * (stop - start)))
            return value

    def skip(self, what: str) -> None:
        self.value(what)

    def end(self) -> None:
        match = _WHITESPACE.match(self.text, self.pos)
        if match and match.end() < len(self.text):
            raise Malformed(f"extra data after the JSON object at {self.where(match.end())}")

    def _bad(self, e: JSONDecodeError, what: str) -> Malformed:
        """Why decoding the text failed (from the end of the text: it was cut short)."""
        pos = e.pos
        tail = self.text[pos:] if len(self.text) - pos < 64 else "x"
        if not tail.strip() or e.msg.startswith("Unterminated"):
            return Malformed(f"the JSON ends early inside {what} (is the file truncated?)")
        return Malformed(f"invalid JSON in {what} at {self.where(pos)}: {e.msg}")


# -- typed access to decoded JSON ------------------------------------------------------------


def obj(x: Any, what: str) -> dict[str, Any]:
    if not isinstance(x, dict):
        raise Malformed(f"{what} is not a JSON object")
    return x


def arr(x: Any, what: str) -> list[Any]:
    if not isinstance(x, list):
        raise Malformed(f"{what} is not a JSON array")
    return x


INT64 = range(-(1 << 63), 1 << 63)  # ids, dims and chunk ids are int64 in Paddle
INT32 = range(-(1 << 31), 1 << 31)  # op_role is an int32 attribute


def integer(x: Any, what: str, bounds: range = INT64) -> int:
    if not isinstance(x, int) or isinstance(x, bool):
        raise Malformed(f"{what} is not an integer")
    if x not in bounds:
        raise Malformed(f"{what} ({shown(x)}) is out of range")
    return x


def string(x: Any, what: str) -> str:
    if not isinstance(x, str):
        raise Malformed(f"{what} is not a string")
    return x


def name(x: Any, what: str) -> str:
    """A string the reader keeps (an op type, struct name, parameter or data name, mesh dim
    name): any Unicode text, non-characters included, but no lone surrogate."""
    text = string(x, what)
    if not text.isascii():
        found = _SURROGATE.search(text)
        if found:
            raise Malformed(
                f"{what} {shown(text)} holds a lone surrogate (\\u{ord(found.group()):04x} at "
                f"character {found.start():,}), which is no Unicode character: Paddle writes "
                "names as UTF-8, which cannot hold one"
            )
    return text


def shown(value: Any) -> str:
    """A value from the file as an error quotes it: at most SHOWN_CHARS characters of it,
    escaped (repr), with the length of a longer one."""
    if isinstance(value, str):
        if len(value) <= SHOWN_CHARS:
            return repr(value)
        return f"{value[:SHOWN_CHARS]!r}... ({len(value):,} characters)"
    if isinstance(value, int) and not isinstance(value, bool):
        digits = str(value)
        if len(digits) <= SHOWN_CHARS:
            return digits
        return f"{digits[:SHOWN_CHARS]}... ({len(digits):,} digits)"
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "an array"
    return repr(value)


def integers(x: Any, what: str) -> tuple[int, ...]:
    values = tuple(arr(x, what))
    if not all(type(v) is int and v in INT64 for v in values):  # bools are no ints here
        raise Malformed(f"{what} holds a value that is not an integer of 64 bits")
    return values


def optional(x: Any, what: str) -> list[Any]:
    """An optional array: [] when left out or NULL."""
    return [] if is_null(x) else arr(x, what)


def is_null(x: Any) -> bool:
    """Paddle's NULL (`{"#": "NULL"}`: an absent attribute, type or dist attr) or JSON's
    null: every optional slot of an op may be either, or left out (None)."""
    return x is None or (isinstance(x, dict) and x.get("#") == "NULL")
