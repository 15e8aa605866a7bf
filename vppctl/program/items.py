"""Items: one block's ops or variables, each a serialized message, kept where they were read.

A program read in protobuf's own layout (`vppctl.program.framing`) is never copied
into one `bytes` per op: its ops and variables stay ranges of the bytes read (a
mapped file), `Items` reads one on demand, and an edit is kept beside the range:
the whole item replaced, or one field of it spliced (the `dist_attr` the engine
rewrites: `vppctl.program.rewrite`). Saving streams the ranges nothing touched as
they are and writes the edited items with new length prefixes (`pieces`), so that a
conversion costs a copy of the bytes plus its edits, not a serialization. Items
built from a list (a program parsed whole, a PIR program, a test) are that list.

Edits are held without a Python object per item: four integer arrays (the item, the
bytes [lo, hi) of it replaced, and what replaces them) and a table of the distinct
replacements, which a program shares widely (a variable's rewritten rest after its
name). A replacement is bytes, or a `Patch`: the bytes as read with one pattern
replaced and their last bytes swapped, applied while writing (an op's dist attr given
a new mesh and chunk id), so that the new dist attrs of a million ops are never held
at once.

Either way an `Items` reads like a list of bytes: `len`, `items[i]`, `items[i:j]`
(a list), `items + other` (a list), iteration, and `items[i] = new` to replace one.
"""

from __future__ import annotations

import mmap
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from itertools import chain, compress, islice
from operator import add, lt, sub
from typing import NamedTuple, overload

from vppctl.program.wire import field_pieces, field_spans, fields_size, prefixed, varint

Buffer = bytes | mmap.mmap
_JOIN = 1 << 22  # bytes joined into one piece of output
# A pass over the items of a mapped file gives back the pages behind it every this many
# bytes (`Items.release`).
_RELEASE = 1 << 24
_WHOLE = -1  # an edit's `lo` when it replaces the whole item
_RESIZED = 2  # `Items._edited` of an item framed anew: its size changed, or it was replaced
_CHUNK = 1 << 12  # edits written at once (`Items.pieces`)


class Patch(NamedTuple):
    """A replacement computed from the bytes it replaces, of their length: their last bytes
    `last` replaced by `now` (of its length), and every `old` before them by `new` (of its
    length, and not overlapping itself). The writer gives the bytes before the last ones,
    patched, and `now` as two pieces (`Items._spliced`)."""

    old: bytes
    new: bytes
    last: bytes
    now: bytes

    def apply(self, field: bytes) -> bytes:
        cut = len(field) - len(self.last)
        head = field[:cut]
        if self.old != self.new:
            head = head.replace(self.old, self.new)
        return head + (self.now if self.last != self.now else field[cut:])


# A Patch unpacked for writing: (old, new, bytes of last, now, whether the pattern and the
# last bytes change).
_Fix = tuple[bytes, bytes, int, bytes, bool, bool]


class Items(Sequence[bytes]):
    """A block's ops or variables (see the module docstring)."""

    __slots__ = (
        "_at",
        "_buf",
        "_delta",
        "_edited",
        "_ends",
        "_fixes",
        "_hi",
        "_ids",
        "_list",
        "_lo",
        "_region",
        "_released",
        "_sorted",
        "_starts",
        "_table",
        "_what",
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
        self._released = 0  # the mapped bytes before this were given back (`release`)
        # The edits: item _at[k] has bytes [_lo[k], _hi[k]) as read replaced by
        # _table[_what[k]] (lo _WHOLE: the whole item), sorted by item unless `_sorted` is
        # False (then sorted when next read); `_edited[i]`: item i has an edit (_RESIZED: one
        # that changes its size, or replaces it whole, so that it is framed anew). Four bytes
        # each: a program is under 2 GiB.
        self._at, self._lo, self._hi, self._what = (array("i") for _ in range(4))
        self._sorted = True
        self._edited = bytearray()
        self._table: list[bytes | Patch] = []
        self._fixes: list[_Fix | None] = []  # each Patch of the table unpacked (`_unpacked`)
        self._ids: dict[bytes | Patch, int] = {}  # shared replacements -> their table index
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
        if step != 1:
            return [self._item(i) for i in range(start, stop, step)]
        buf = self._buf
        assert buf is not None
        out = [buf[a:b] for a, b in zip(self._starts[start:stop], self._ends[start:stop])]
        if self._at:  # the edits in the slice
            k = self._find(start)
            q = bisect_left(self._at, stop, k)
            edited = self._edited
            if k < q and _RESIZED not in bytes([edited[i] for i in self._at[k:q]]):
                # Every edit keeps its item's size: all of them in a few C calls.
                items, firsts, lows, highs, heads, lasts = self._spliced(k, q)
                ends = self._ends
                for i, a, lo, hi, head, last in zip(items, firsts, lows, highs, heads, lasts):
                    out[i - start] = b"".join((buf[a:lo], head, last, buf[hi : ends[i]]))
            else:
                for e in range(k, q):
                    j = self._at[e] - start
                    out[j] = self._edited_item(e, out[j])
        return out

    def _item(self, i: int) -> bytes:
        if not self.edited(i):
            return self._old(i)
        return self._edited_item(self._find(i), self._old(i))

    def _edited_item(self, k: int, old: bytes) -> bytes:
        """Edit k applied to its item as read (`old`)."""
        lo, hi, what = self._lo[k], self._hi[k], self._table[self._what[k]]
        if lo == _WHOLE:
            assert isinstance(what, bytes)
            return what
        field = what.apply(old[lo:hi]) if isinstance(what, Patch) else what
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
        return f"Items({len(self)} {where}, {len(self._at)} edited)"

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

    def framed(self, lo: int, hi: int, tag: bytes) -> bytes:
        """Items lo..hi-1 as they are now, framed as `pieces` writes them (tag `tag`): the bytes
        the output holds for them. Where every edit among them keeps its item's size (the
        usual), the run as read with the edited fields put in, in a few C calls, as the writer
        puts them (`_spliced`); no item is rebuilt alone."""
        if hi <= lo:
            return b""
        if self._list is not None:
            return b"".join(field_pieces(tag, self._list[lo:hi]))
        k = self._find(lo) if self._at else 0
        q = bisect_left(self._at, hi, k)
        if k == q:
            return self.framed_run(lo, hi)
        if _RESIZED in bytes([self._edited[i] for i in self._at[k:q]]):
            return b"".join(prefixed(tag, len(item)) + item for item in self[lo:hi])
        start = self._ends[lo - 1] if lo else self._region
        return self._chunk(k, q, start, self._ends[hi - 1])[0]

    def nbytes(self, lo: int, hi: int) -> int:
        """Bytes of items lo..hi-1 as they are now (their frames aside), without a step per
        item where they are ranges of the bytes read."""
        if self._list is not None:
            return sum(map(len, self._list[lo:hi]))
        starts, ends = self._starts, self._ends
        n: int = sum(map(sub, ends[lo:hi], starts[lo:hi]))
        if self._at and _RESIZED in self._edited[lo:hi]:
            k = self._find(lo)
            for e in range(k, bisect_left(self._at, hi, k)):
                i = self._at[e]
                n += self._size(e) - (ends[i] - starts[i])
        return n

    def size(self, i: int) -> int:
        """Bytes of item i as it was read."""
        if self._list is not None:
            return len(self._list[i])
        return self._ends[i] - self._starts[i]

    def fields(self, i: int, number: int) -> bytes | None:
        """The top-level fields numbered `number` of item i (a serialized message) as they
        are now, joined, read where the item lies without copying it whole (for an item too
        large to copy: an op with a huge attr); None when its bytes do not split into
        fields."""
        if self._list is not None or (self.edited(i) and self._lo[self._find(i)] == _WHOLE):
            return _fields(self[i], number)
        buf = self._buf
        assert buf is not None
        item = memoryview(buf)[self._starts[i] : self._ends[i]]
        if not self.edited(i):
            return _fields(item, number)
        k = self._find(i)
        lo, hi = self._lo[k], self._hi[k]
        what = self._table[self._what[k]]
        field = what.apply(bytes(item[lo:hi])) if isinstance(what, Patch) else what
        parts = [_fields(item[:lo], number), _fields(field, number), _fields(item[hi:], number)]
        if None in parts:  # the edit does not lie between fields: the item, edited
            return _fields(self._item(i), number)
        return b"".join(p for p in parts if p is not None)

    def edited(self, i: int) -> bool:
        """Whether item i has been replaced or spliced since it was read (Items over a buffer)."""
        return bool(self._edited) and self._edited[i] != 0

    def field_of(self, i: int) -> tuple[int, int, bytes] | None:
        """Item i's spliced field (lo, hi, new field bytes), or None when it has none."""
        if not self.edited(i):
            return None
        k = self._find(i)
        lo, hi = self._lo[k], self._hi[k]
        if lo == _WHOLE:
            return None
        what = self._table[self._what[k]]
        field = what.apply(self._old(i)[lo:hi]) if isinstance(what, Patch) else what
        return lo, hi, field

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
        self._table.append(new)  # an item rewritten whole is its own: not looked up
        self._record(i, _WHOLE, 0, len(self._table) - 1, len(new))

    def splice(self, i: int, lo: int, hi: int, field: bytes | Patch) -> None:
        """Replace bytes [lo, hi) of item i as it was read by `field` (a Patch: computed
        from those bytes, of their length)."""
        if self._list is not None:
            old = self._list[i]
            new = field.apply(old[lo:hi]) if isinstance(field, Patch) else field
            self._list[i] = old[:lo] + new + old[hi:]
            return
        size = self._ends[i] - self._starts[i]
        if not isinstance(field, Patch):
            size += len(field) - (hi - lo)
        self._record(i, lo, hi, self._id(field), size)

    def shared(self, field: bytes | Patch) -> int:
        """The number `splice_run` knows `field` by (a replacement many items share)."""
        return self._id(field)

    def splice_run(
        self, at: Sequence[int], lo: Sequence[int], hi: Sequence[int], what: Sequence[int]
    ) -> None:
        """`splice(at[k], lo[k], hi[k], field)` for each k, `field` the replacement numbered
        `what[k]` (`shared`). Items following one another after every item edited so far
        (as a pass gives them) get their edits appended as they are, in a few C calls and
        no Python per item; any others are spliced one by one."""
        n = len(at)
        if not n:
            return
        if self._list is not None or not self.follows(at):
            table = self._table
            for i, a, b, w in zip(at, lo, hi, what):
                self.splice(i, a, b, table[w])
            return
        if not self._edited:
            self._edited = bytearray(len(self._starts))
        self._at.extend(at)
        self._lo.extend(lo)
        self._hi.extend(hi)
        self._what.extend(what)
        edited = self._edited
        for i in at:
            edited[i] = 1
        # Only a replacement in bytes of another length than what it replaces (never a Patch)
        # changes an item's size, and so the field's: the few that do are counted here.
        table = self._table
        used = set(what)
        lengths = {w: len(f) for w in used if isinstance(f := table[w], bytes)}
        if not lengths:
            return
        grows = list(
            map(sub, map(lengths.__getitem__, what), map(sub, hi, lo))
            if len(lengths) == len(used)
            else (lengths[w] - (b - a) if w in lengths else 0 for a, b, w in zip(lo, hi, what))
        )
        starts, ends = self._starts, self._ends
        for i, grow in compress(zip(at, grows), grows):
            old = ends[i] - starts[i]
            self._delta += _framed(old + grow) - _framed(old)
            edited[i] = _RESIZED

    def follows(self, at: Sequence[int]) -> bool:
        """Whether items `at` ascend, each after every item edited so far (so none of them
        has been edited: `splice_run` appends their edits)."""
        if not at:
            return True
        if not self._sorted or (self._at and at[0] <= self._at[-1]) or at[0] < 0:
            return False
        return at[-1] < len(self._starts) and all(map(lt, at, islice(at, 1, None)))

    @property
    def has_edits(self) -> bool:
        return bool(self._at)

    def ranges(self) -> tuple[Buffer, array[int], array[int]]:
        """(buf, starts, ends): item i as read is buf[starts[i]:ends[i]] (Items over a buffer;
        for editors that read many items)."""
        assert self._buf is not None
        return self._buf, self._starts, self._ends

    def release(self, upto: int) -> None:
        """A pass over the items (reading, editing) is past item `upto - 1`: when they are
        ranges of a mapped file, the pages behind it are given back every _RELEASE bytes
        (they are read again from the page cache if touched), so that the file is never
        resident whole in the process, only the pages its passes are at."""
        if upto and isinstance(self._buf, mmap.mmap):
            self._release_to(self._ends[upto - 1])

    def _release_to(self, end: int) -> None:
        if end < self._released:  # a new pass
            self._released = 0
        if end - self._released >= _RELEASE:
            assert isinstance(self._buf, mmap.mmap)
            self._released = release(self._buf, max(self._released, self._region), end)

    def _id(self, field: bytes | Patch) -> int:
        """The table index of a shared replacement (added when new)."""
        k = self._ids.get(field)
        if k is None:
            k = self._ids[field] = len(self._table)
            self._table.append(field)
        return k

    def _record(self, i: int, lo: int, hi: int, what: int, size: int) -> None:
        """Item i's edit is now (lo, hi, what), `size` bytes once applied."""
        if not self._edited:
            self._edited = bytearray(len(self._starts))
        old = self._ends[i] - self._starts[i]
        if self._edited[i]:  # edited again: its earlier edit no longer counts
            k = self._find(i)
            self._delta -= _framed(self._size(k)) - _framed(old)
            self._lo[k], self._hi[k], self._what[k] = lo, hi, what
        else:
            at = self._at
            if at and i < at[-1]:
                self._sorted = False
            at.append(i)
            self._lo.append(lo)
            self._hi.append(hi)
            self._what.append(what)
        self._edited[i] = 1 if lo != _WHOLE and size == old else _RESIZED
        if size != old:
            self._delta += _framed(size) - _framed(old)

    def _size(self, k: int) -> int:
        """Bytes of edit k's item once edited."""
        i, lo, hi, what = self._at[k], self._lo[k], self._hi[k], self._table[self._what[k]]
        if lo == _WHOLE:
            return len(what)
        old = self._ends[i] - self._starts[i]
        return old if isinstance(what, Patch) else old - (hi - lo) + len(what)

    def _find(self, i: int) -> int:
        """The index of item i's edit (it has one)."""
        if not self._sorted:
            self._sort()
        return bisect_left(self._at, i)

    def _sort(self) -> None:
        order = sorted(range(len(self._at)), key=self._at.__getitem__)
        for name in ("_at", "_lo", "_hi", "_what"):
            column = getattr(self, name)
            setattr(self, name, array("i", map(column.__getitem__, order)))
        self._sorted = True

    # -- writing ---------------------------------------------------------------------------------

    def field_size(self) -> int:
        """Bytes of the items written as a repeated length-delimited field (one-byte tag)."""
        if self._list is not None:
            return fields_size(self._list)
        return (self._ends[-1] - self._region if self._starts else 0) + self._delta

    def pieces(self, tag: bytes) -> Iterator[bytes | memoryview]:
        """The items as a repeated length-delimited field with one-byte tag `tag`, in pieces
        of a few MiB: each untouched run of the bytes read as it is, each edited item
        framed anew where its length changed. A run of more than a piece's size is given
        as a view of the bytes read, never copied.

        Edits that keep their item's size, close together (the usual: an op's dist attr
        patched, a variable's rest replaced), are written up to _CHUNK at a time, with a
        few C calls for them all (`_chunk`); any other edit one at a time."""
        if self._list is not None:
            yield from field_pieces(tag, self._list)
            return
        if not self._starts:
            return
        if not self._sorted:
            self._sort()
        buf = self._buf
        assert buf is not None
        view = memoryview(buf)
        starts, ends, table, edited = self._starts, self._ends, self._table, self._edited
        at, los, his, whats = self._at, self._lo, self._hi, self._what
        parts: list[bytes | memoryview] = []
        add = parts.append
        pos = self._region  # the first byte of the input not yet written
        flush = pos + _JOIN  # where the parts are joined and yielded
        mapped = isinstance(buf, mmap.mmap)
        fixes = self._unpacked()
        k, n = 0, len(at)
        while k < n:
            # The edits from k on that keep their item's size, whose items start within a
            # piece's size of pos, go together.
            q = bisect_right(at, pos + _JOIN, k, min(n, k + _CHUNK), key=starts.__getitem__)
            resized = bytes([edited[i] for i in at[k:q]]).find(_RESIZED)
            if resized >= 0:
                q = k + resized
            if q > k:
                if parts:
                    yield b"".join(parts)
                    parts.clear()
                piece, pos = self._chunk(k, q, pos)
                yield piece
                flush = pos + _JOIN
                if mapped:  # what was yielded has been written
                    self._release_to(pos)
                k = q
                continue
            i, lo, hi, what = at[k], los[k], his[k], whats[k]
            k += 1
            s = starts[i]
            if fixes[what] is not None:  # a Patch: the field keeps its length (the usual edit)
                field = Patch.apply(table[what], buf[s + lo : s + hi])  # type: ignore[arg-type]
            else:
                new = table[what]
                assert isinstance(new, bytes)
                field = new
                if lo == _WHOLE:
                    lo, hi = 0, ends[i] - s
                if len(field) != hi - lo:  # a new length prefix: the run before ends at the old one
                    run_end = ends[i - 1] if i else self._region
                    if run_end - pos > _JOIN:
                        yield from _flushed(parts, view[pos:run_end])
                    else:
                        add(view[pos:run_end])
                    add(prefixed(tag, ends[i] - s - (hi - lo) + len(field)))
                    pos = s
            if s + lo - pos > _JOIN:
                yield from _flushed(parts, view[pos : s + lo])
            else:
                add(view[pos : s + lo])
            if len(field) > _JOIN:
                yield from _flushed(parts, field)
            else:
                add(field)
            pos = s + hi
            if pos >= flush:
                yield b"".join(parts)
                parts.clear()
                flush = pos + _JOIN
                if mapped:  # what was yielded has been written
                    self._release_to(pos)
        if ends[-1] - pos > _JOIN:
            yield from _flushed(parts, view[pos : ends[-1]])
        else:
            add(view[pos : ends[-1]])
        if parts:
            yield b"".join(parts)
        if mapped:
            self._release_to(pos)

    def _chunk(self, k: int, q: int, pos: int, end: int | None = None) -> tuple[bytes, int]:
        """Edits k..q-1 (of items that keep their size, not replaced whole) written from byte
        `pos` of the bytes read on, up to the last edit's end or, given, to byte `end`: (the
        bytes, where they end in the bytes read)."""
        view = memoryview(self._buf)  # type: ignore[arg-type]
        _, _, lows, highs, heads, lasts = self._spliced(k, q)
        gaps = [view[a:b] for a, b in zip(chain((pos,), highs), lows)]
        parts = chain.from_iterable(zip(gaps, heads, lasts))
        if end is None:
            return b"".join(parts), highs[-1]
        return b"".join(chain(parts, (view[highs[-1] : end],))), end

    def _spliced(
        self, k: int, q: int
    ) -> tuple[array[int], list[int], list[int], list[int], list[bytes | memoryview], list[bytes]]:
        """For edits k..q-1 (each splicing a field into an item, none replacing it whole):
        their items, where each starts, its field's start and end in the bytes read, and
        the field's new bytes in two pieces (a Patch's patched head and its new last bytes;
        bytes and b""). Array slices and comprehensions: no call per edit."""
        buf = self._buf
        assert buf is not None
        view = memoryview(buf)
        items = self._at[k:q]
        starts, table = self._starts, self._table
        firsts = [starts[i] for i in items]
        lows = list(map(add, firsts, self._lo[k:q]))  # each field's bytes in the bytes read
        highs = list(map(add, firsts, self._hi[k:q]))
        whats = self._what[k:q]
        heads: list[bytes | memoryview] = [table[w] for w in whats]  # type: ignore[misc]
        lasts = [b""] * (q - k)
        fixes = self._unpacked()
        kinds = set(whats)
        patches = [w for w in kinds if fixes[w] is not None]
        if patches and len(kinds) > 1:  # each Patch's edits found in the edits sorted by kind
            order = sorted(range(q - k), key=whats.__getitem__)
            by_kind = [whats[j] for j in order]
        for w in patches:
            fix = fixes[w]
            assert fix is not None
            old, new, cut, now, pattern, _ = fix
            mine: Sequence[int] = range(q - k)
            if len(kinds) > 1:
                mine = order[bisect_left(by_kind, w) : bisect_right(by_kind, w)]
            if pattern:
                got: list[bytes | memoryview] = [
                    buf[lows[j] : highs[j] - cut].replace(old, new) for j in mine
                ]
            else:  # the head as it lies in the bytes read
                got = [view[lows[j] : highs[j] - cut] for j in mine]
            for j, head in zip(mine, got):
                heads[j] = head
                lasts[j] = now  # the field's last bytes, if they do not change (`Patch`)
        return items, firsts, lows, highs, heads, lasts

    def _unpacked(self) -> list[_Fix | None]:
        """Each Patch of the table unpacked (None for bytes), kept as the table grows."""
        fixes, table = self._fixes, self._table
        for p in table[len(fixes) :]:
            fixes.append(
                (p.old, p.new, len(p.last), p.now, p.old != p.new, p.last != p.now)
                if isinstance(p, Patch)
                else None
            )
        return fixes


def _fields(message: bytes | memoryview, number: int) -> bytes | None:
    """The top-level fields numbered `number` of `message`, joined (None: not fields)."""
    spans = field_spans(message)
    if spans is None:
        return None
    return b"".join(bytes(message[f.start : f.end]) for f in spans if f.number == number)


def release(buf: mmap.mmap, start: int, end: int) -> int:
    """Give back the pages of `buf` (a mapped file) that lie within bytes [start, end),
    the first one's included; returns where they end. They stay readable: the system
    reads them again from its page cache (or the file) when touched."""
    lo = start - start % mmap.PAGESIZE
    hi = end - end % mmap.PAGESIZE
    if hi > lo:
        buf.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
    return hi


def _flushed(
    parts: list[bytes | memoryview], big: bytes | memoryview
) -> Iterator[bytes | memoryview]:
    """The parts so far joined (then cleared), and `big` as it is (a run too large to copy)."""
    if parts:
        yield b"".join(parts)
        parts.clear()
    yield big


def _framed(n: int) -> int:
    """Bytes of an item of n bytes with its length prefix (its one-byte tag aside)."""
    return n + (1 if n < 0x80 else 2 if n < 0x4000 else len(varint(n)))
