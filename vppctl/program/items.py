"""Items: one block's ops or variables, each a serialized message, kept where they were read.

A program read in protobuf's own layout (`vppctl.program.framing`) is never copied
into one `bytes` per op: its ops and variables stay ranges of the bytes read (a
mapped file), `Items` reads one on demand, and an edit is kept beside the range:
the whole item replaced, or one field of it spliced (the `dist_attr` the engine
rewrites: `vppctl.program.rewrite`). Saving streams the ranges nothing touched as
they are and writes the edited items with new length prefixes (`pieces`), so that a
conversion costs a copy of the bytes plus its edits, not a serialization. Items
built from a list (a program parsed whole, a PIR program, a test) are that list.

Either way an `Items` reads like a list of bytes: `len`, `items[i]`, `items[i:j]`
(a list), `items + other` (a list), iteration, and `items[i] = new` to replace one.
"""

from __future__ import annotations

import mmap
from array import array
from collections.abc import Iterable, Iterator, Sequence
from operator import gt
from typing import overload

from vppctl.program.wire import field_pieces, fields_size, prefixed, varint

Buffer = bytes | mmap.mmap
# An edit: the item's new bytes, or (lo, hi, field): the item with bytes [lo, hi) (relative
# to its start) replaced by `field`.
Edit = bytes | tuple[int, int, bytes]
_JOIN = 1 << 22  # bytes joined into one piece of output


class Items(Sequence[bytes]):
    """A block's ops or variables (see the module docstring)."""

    __slots__ = (
        "_buf",
        "_delta",
        "_edits",
        "_ends",
        "_list",
        "_region",
        "_starts",
        "rewritten",
        "spliced",
    )

    def __init__(
        self,
        items: list[bytes] | None = None,
        *,
        buf: Buffer | None = None,
        starts: array[int] | None = None,
        ends: array[int] | None = None,
        region: int = 0,
    ) -> None:
        """A list of items, or (`buf`, `starts`, `ends`): item k is buf[starts[k]:ends[k]],
        framed in `buf` as protobuf frames a repeated field (a one-byte tag and the length's
        shortest varint), one after the other from `region` on."""
        self._list = items
        self._buf = buf
        self._starts = starts if starts is not None else array("q")
        self._ends = ends if ends is not None else array("q")
        self._region = region
        self._edits: dict[int, Edit] = {}
        self._delta = 0  # bytes the edits add to the field (negative: remove)
        # Counted by the editors (vppctl.program.rewrite): items edited by splicing one field
        # in, and items rewritten whole where a splice would not give the same bytes.
        self.spliced = 0
        self.rewritten = 0

    @classmethod
    def of(cls, items: Sequence[bytes]) -> Items:
        """`items` as Items: an Items itself, a list wrapped (not copied), else a list of them."""
        if isinstance(items, Items):
            return items
        return cls(items if isinstance(items, list) else list(items))

    # -- reading -----------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._list) if self._list is not None else len(self._starts)

    @overload
    def __getitem__(self, i: int) -> bytes: ...
    @overload
    def __getitem__(self, i: slice) -> list[bytes]: ...
    def __getitem__(self, i: int | slice) -> bytes | list[bytes]:
        if isinstance(i, slice):
            return self._slice(i)
        if self._list is not None:
            return self._list[i]
        if i < 0:
            i += len(self._starts)
        if not 0 <= i < len(self._starts):
            raise IndexError("item index out of range")
        return self._item(i)

    def _slice(self, s: slice) -> list[bytes]:
        if self._list is not None:
            return self._list[s]
        start, stop, step = s.indices(len(self._starts))
        if step != 1 or self._edits:
            return [self._item(i) for i in range(start, stop, step)]
        buf = self._buf
        assert buf is not None
        return [buf[a:b] for a, b in zip(self._starts[start:stop], self._ends[start:stop])]

    def _item(self, i: int) -> bytes:
        edit = self._edits.get(i)
        if edit is None:
            return self._old(i)
        if isinstance(edit, bytes):
            return edit
        lo, hi, field = edit
        old = self._old(i)
        return old[:lo] + field + old[hi:]

    def _old(self, i: int) -> bytes:
        """Item i as it was read (before any edit)."""
        if self._list is not None:
            return self._list[i]
        buf = self._buf
        assert buf is not None
        return buf[self._starts[i] : self._ends[i]]

    def __eq__(self, other: object) -> bool:
        """Equal to Items or a list holding the same bytes in the same order."""
        if isinstance(other, Items | list):
            return len(self) == len(other) and all(map(bytes.__eq__, self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, as a list

    def __add__(self, other: Sequence[bytes]) -> list[bytes]:
        """A list of these items, then `other`'s (as `list + list`)."""
        return [*self, *other]

    def __radd__(self, other: Sequence[bytes]) -> list[bytes]:
        return [*other, *self]

    def __repr__(self) -> str:
        where = "spans" if self._list is None else "list"
        return f"Items({len(self)} {where}, {len(self._edits)} edited)"

    def __iter__(self) -> Iterator[bytes]:
        if self._list is not None:
            return iter(self._list)
        return (self._item(i) for i in range(len(self._starts)))

    def original(self, i: int) -> bytes:
        """Item i as it was read, whatever edit it has had since."""
        return self._old(i)

    def framed_run(self, lo: int, hi: int) -> bytes:
        """Items lo..hi-1 as read, framed as they lie in the bytes read (items over a buffer)."""
        buf = self._buf
        assert buf is not None
        return buf[self._ends[lo - 1] if lo else self._region : self._ends[hi - 1]]

    def edited(self, i: int) -> bool:
        """Whether item i has been replaced or spliced since it was read (Items over a buffer)."""
        return i in self._edits

    def field_of(self, i: int) -> tuple[int, int, bytes] | None:
        """Item i's spliced field (lo, hi, new field bytes), or None when it has none."""
        edit = self._edits.get(i)
        return edit if isinstance(edit, tuple) else None

    @property
    def spans(self) -> bool:
        """Whether the items are ranges of the bytes read (not a list)."""
        return self._list is None

    # -- editing -----------------------------------------------------------------------------

    def __setitem__(self, i: int, new: bytes) -> None:
        """Replace item i (with bytes: a bytearray would change under the items' feet)."""
        if self._list is not None:
            self._list[i] = new
            return
        if not 0 <= i < len(self._starts):
            raise IndexError("item index out of range")
        new = bytes(new)
        self._record(i, new, len(new))

    def splice(self, i: int, lo: int, hi: int, field: bytes) -> None:
        """Replace bytes [lo, hi) of item i as it was read by `field` (i: never replaced)."""
        if self._list is not None:
            old = self._list[i]
            self._list[i] = old[:lo] + field + old[hi:]
            return
        grow = len(field) - (hi - lo)
        if grow or i in self._edits:
            self._record(i, (lo, hi, field), self._ends[i] - self._starts[i] + grow)
        else:  # the usual edit: a field of the same size, once
            self._edits[i] = (lo, hi, field)

    def splice_all(self, splices: Iterable[tuple[int, int, int, bytes]]) -> None:
        """`splice(i, lo, hi, field)` for each (i, lo, hi, field), in one call."""
        edits = self._edits
        for i, lo, hi, field in splices:
            if self._list is not None or len(field) != hi - lo or i in edits:
                self.splice(i, lo, hi, field)
            else:
                edits[i] = (lo, hi, field)

    @property
    def has_edits(self) -> bool:
        return bool(self._edits)

    def ranges(self) -> tuple[Buffer, array[int], array[int]]:
        """(buf, starts, ends): item i as read is buf[starts[i]:ends[i]] (Items over a buffer;
        for editors that read many items)."""
        assert self._buf is not None
        return self._buf, self._starts, self._ends

    def _record(self, i: int, edit: Edit, size: int) -> None:
        was = self._edits.get(i)
        old = self._ends[i] - self._starts[i]
        if was is not None:  # edited again: its earlier edit's size no longer counts
            self._delta -= _framed(self._size(i, was)) - _framed(old)
        self._delta += _framed(size) - _framed(old)
        self._edits[i] = edit

    def _size(self, i: int, edit: Edit) -> int:
        if isinstance(edit, bytes):
            return len(edit)
        lo, hi, field = edit
        return self._ends[i] - self._starts[i] - (hi - lo) + len(field)

    # -- writing ---------------------------------------------------------------------------------

    def field_size(self) -> int:
        """Bytes of the items written as a repeated length-delimited field (one-byte tag)."""
        if self._list is not None:
            return fields_size(self._list)
        return (self._ends[-1] - self._region if self._starts else 0) + self._delta

    def pieces(self, tag: bytes) -> Iterator[bytes | memoryview]:
        """The items as a repeated length-delimited field with one-byte tag `tag`, in pieces
        of a few MiB: each untouched run of the bytes read as it is, each edited item
        framed anew where its length changed."""
        if self._list is not None:
            yield from field_pieces(tag, self._list)
            return
        if not self._starts:
            return
        buf = self._buf
        assert buf is not None
        view = memoryview(buf)
        starts, ends, edits = self._starts, self._ends, self._edits
        parts: list[bytes | memoryview] = []
        add = parts.append
        pos = self._region  # the first byte of the input not yet written
        flush = pos + _JOIN  # where the parts are joined and yielded
        for i in self._edit_order():
            edit = edits[i]
            s = starts[i]
            if isinstance(edit, bytes):
                lo, hi, field = 0, ends[i] - s, edit
            else:
                lo, hi, field = edit
            if len(field) != hi - lo:  # a new length prefix: the run before ends at the old one
                add(view[pos : ends[i - 1] if i else self._region])
                add(prefixed(tag, ends[i] - s - (hi - lo) + len(field)))
                pos = s
            add(view[pos : s + lo])
            add(field)
            pos = s + hi
            if pos >= flush:
                yield b"".join(parts)
                parts.clear()
                flush = pos + _JOIN
        add(view[pos : ends[-1]])
        yield b"".join(parts)

    def _edit_order(self) -> list[int]:
        keys = list(self._edits)
        if any(map(gt, keys, keys[1:])):  # edited out of order (a second pass): sort once
            keys.sort()
        return keys


def _framed(n: int) -> int:
    """Bytes of an item of n bytes with its length prefix (its one-byte tag aside)."""
    return n + (1 if n < 0x80 else 2 if n < 0x4000 else len(varint(n)))
