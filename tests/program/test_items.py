"""Items: ops and variables kept as ranges of the bytes read, edited beside them, streamed out.

An `Items` over a buffer must read, edit and write exactly as the list of bytes it
stands for: every item, every slice, and above all its framed bytes (`pieces`,
`field_size`), whatever mix of whole replacements and field splices it holds, with
lengths on either side of the varint boundaries (127/128, 16383/16384 bytes).
"""

from __future__ import annotations

import mmap
import random
from array import array
from pathlib import Path

import pytest

from vppctl.program import items as items_module
from vppctl.program.items import Items, Patch
from vppctl.program.wire import VAR_TAG, field_pieces, fields_size, varint


def framed(items: list[bytes], tag: bytes = VAR_TAG) -> bytes:
    return b"".join(field_pieces(tag, items))


def spans(items: list[bytes], lead: bytes = b"head") -> Items:
    """`items` framed one after the other after `lead`, as Items over those bytes."""
    buf = bytearray(lead)
    starts, ends = array("q"), array("q")
    for item in items:
        buf += VAR_TAG + varint(len(item))
        starts.append(len(buf))
        buf += item
        ends.append(len(buf))
    return Items(buf=bytes(buf + b"tail"), starts=starts, ends=ends, region=len(lead))


# Lengths around the varint boundaries of a length prefix.
LENGTHS = (0, 1, 126, 127, 128, 129, 300, 16383, 16384, 16385)


def item(rng: random.Random, n: int) -> bytes:
    return rng.randbytes(n)


@pytest.mark.parametrize("seed", range(12))
def test_edited_spans_write_what_the_edited_list_writes(seed: int) -> None:
    rng = random.Random(seed)
    old = [item(rng, rng.choice(LENGTHS)) for _ in range(rng.randint(1, 40))]
    new = list(old)
    items = spans(old)
    for i in rng.sample(range(len(old)), rng.randint(0, len(old))):  # in any order
        if rng.random() < 0.4:
            new[i] = item(rng, rng.choice(LENGTHS))
            items[i] = new[i]
        else:  # a field spliced: bytes [lo, hi) of the item as read replaced
            lo = rng.randint(0, len(old[i]))
            hi = rng.randint(lo, len(old[i]))
            field = item(rng, rng.choice(LENGTHS) if rng.random() < 0.3 else hi - lo)
            new[i] = old[i][:lo] + field + old[i][hi:]
            items.splice(i, lo, hi, field)
    assert list(items) == new and items == new
    assert [items[i] for i in range(len(new))] == new
    assert items[2:7] == new[2:7] and items[-1] == new[-1]
    assert [items.original(i) for i in range(len(old))] == old
    out = b"".join(items.pieces(VAR_TAG))
    assert out == framed(new)
    assert items.field_size() == len(out) == fields_size(new)
    _runs_read_as(items, new, rng)


def _runs_read_as(items: Items, now: list[bytes], rng: random.Random) -> None:
    """Every run of `items` (all of them, the empty ones, and some at random) reads, framed
    and sized, as the same run of the items `now` (what a reader of many items takes)."""
    n = len(now)
    runs = [(0, n), (0, 0), (n, n), *((rng.randint(0, n), rng.randint(0, n)) for _ in range(30))]
    for lo, hi in runs:
        lo, hi = min(lo, hi), max(lo, hi)
        assert items.framed(lo, hi, VAR_TAG) == framed(now[lo:hi]), (lo, hi)
        assert items.nbytes(lo, hi) == sum(map(len, now[lo:hi])), (lo, hi)


def test_unedited_spans_write_the_bytes_read() -> None:
    old = [b"a" * n for n in LENGTHS]
    items = spans(old)
    assert b"".join(items.pieces(VAR_TAG)) == framed(old)
    assert items.field_size() == fields_size(old)
    assert items.spans and items[3:5] == old[3:5]


def test_an_item_edited_twice_counts_once() -> None:
    old = [b"x" * 10, b"y" * 200]
    items = spans(old)
    items.splice(1, 0, 200, b"z" * 5)
    items[1] = b"w" * 20000  # a second pass replaces the spliced item
    assert items[1] == b"w" * 20000 and items.field_of(1) is None
    assert items.field_size() == fields_size([old[0], b"w" * 20000])
    assert b"".join(items.pieces(VAR_TAG)) == framed([old[0], b"w" * 20000])


def test_list_items_are_the_list() -> None:
    listed = [b"a", b"bb"]
    items = Items.of(listed)
    items[0] = b"c"
    items.splice(1, 0, 1, b"zz")
    assert listed == [b"c", b"zzb"] == items and not items.spans
    assert Items.of(items) is items
    assert b"".join(items.pieces(VAR_TAG)) == framed(listed)
    _runs_read_as(items, listed, random.Random(0))


def test_empty_and_out_of_range() -> None:
    items = spans([])
    assert len(items) == 0 and list(items.pieces(VAR_TAG)) == [] and items.field_size() == 0
    with pytest.raises(IndexError):
        items[0]
    with pytest.raises(IndexError):
        items[0] = b"x"


# -- patches: replacements computed from the bytes they replace, as the output is written --


MESH, OTHER_MESH = b"\x05MESH1", b"\x05MESH2"


def _patchable(rng: random.Random, most: int) -> list[bytes]:
    """1 to `most` random items, each holding MESH twice and ending in a chunk id field."""
    return [
        rng.randbytes(rng.randint(0, 40)) + MESH + rng.randbytes(3) + MESH + b"\x30\x00"
        for _ in range(rng.randint(1, most))
    ]


@pytest.mark.parametrize("seed", range(8))
def test_patched_spans_write_what_the_patched_list_writes(seed: int) -> None:
    """A Patch replaces a pattern and the last bytes of the field it is given, at write time;
    mixed with fields and whole replacements, in any order, and edited twice."""
    rng = random.Random(seed)
    mesh, other = MESH, OTHER_MESH
    old = _patchable(rng, 30)
    new = list(old)
    items = spans(old)
    for i in rng.sample(range(len(old)), rng.randint(0, len(old))) * 2:  # some twice
        kind = rng.random()
        if kind < 0.6:
            patch = Patch(mesh, rng.choice((mesh, other)), b"\x30\x00", rng.choice(CHUNKS))
            lo = rng.randint(0, old[i].index(mesh))
            field = old[i][lo:].replace(patch.old, patch.new)[:-2] + patch.now
            new[i] = old[i][:lo] + field
            items.splice(i, lo, len(old[i]), patch)
            assert items.field_of(i) == (lo, len(old[i]), field)
        elif kind < 0.8:
            new[i] = item(rng, rng.choice(LENGTHS))
            items[i] = new[i]
        else:
            new[i] = old[i][:3] + b"spliced" + old[i][5:]
            items.splice(i, 3, 5, b"spliced")
    assert list(items) == new
    out = b"".join(items.pieces(VAR_TAG))
    assert out == framed(new)
    assert items.field_size() == len(out) == fields_size(new)
    _runs_read_as(items, new, rng)


CHUNKS = (b"\x30\x00", b"\x30\x01", b"\x30\x7f")


def test_a_patch_is_held_once_for_every_item_it_edits() -> None:
    old = [b"\x02ab" + bytes([k]) + b"\x30\x00" for k in range(100)]
    items = spans(old)
    for i in range(100):
        items.splice(i, 0, len(old[i]), Patch(b"\x02ab", b"\x02cd", b"\x30\x00", b"\x30\x01"))
    assert items[7] == b"\x02cd\x07\x30\x01"
    assert len(items._table) == 1  # one Patch for the 100 items, ints for each edit


# -- a mapped file: its pages behind a pass given back, the bytes unchanged ----------------


def test_mapped_items_given_back_behind_each_pass_read_and_write_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(items_module, "_RELEASE", 1)  # give back at every call
    rng = random.Random(7)
    old = [item(rng, rng.choice(LENGTHS)) for _ in range(300)]
    plain = spans(old)
    path = tmp_path / "items.bin"
    assert isinstance(plain._buf, bytes)
    path.write_bytes(plain._buf)
    with path.open("rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    items = Items(buf=mapped, starts=plain._starts, ends=plain._ends, region=plain._region)
    for i in range(0, 300, 7):
        items.release(i)
        assert items[i] == old[i]
    items[5] = b"new"
    old[5] = b"new"
    for _ in range(2):  # two passes: the second starts over
        assert b"".join(items.pieces(VAR_TAG)) == framed(old)
    assert list(items) == old


# -- edits recorded together (`splice_run`) and written a chunk at a time -------------------


@pytest.mark.parametrize(("chunk", "join"), [(1, 1 << 22), (3, 64), (4096, 1 << 22), (4096, 300)])
@pytest.mark.parametrize("seed", range(6))
def test_edits_recorded_together_read_and_write_as_edits_made_one_by_one(
    chunk: int, join: int, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`splice_run` appends a pass's edits when they follow every edit so far and splices
    them one by one otherwise; the writer takes up to `_CHUNK` edits that keep their item's
    size, within `_JOIN` bytes, together. Whatever the mix (Patches, fields of the same and
    of another size, whole replacements, items edited twice), the items, their slices and
    their framed bytes are those of the same edits made one by one on a list."""
    monkeypatch.setattr(items_module, "_CHUNK", chunk)
    monkeypatch.setattr(items_module, "_JOIN", join)
    rng = random.Random(seed)
    mesh, other = MESH, OTHER_MESH
    old = _patchable(rng, 60)
    new = list(old)
    items = spans(old)
    patches = [Patch(mesh, m, b"\x30\x00", c) for m in (mesh, other) for c in CHUNKS]
    for _ in range(rng.randint(1, 5)):  # passes: ascending, or in any order
        picked = sorted(rng.sample(range(len(old)), rng.randint(0, len(old))))
        if rng.random() < 0.3:
            rng.shuffle(picked)
        at, lo, hi, what = [], [], [], []
        for i in picked:
            if rng.random() < 0.6:
                patch = rng.choice(patches)
                a = rng.randint(0, old[i].index(mesh))
                b = len(old[i])
                new[i] = old[i][:a] + patch.apply(old[i][a:])
                field: bytes | Patch = patch
            else:
                a = rng.randint(0, len(old[i]))
                b = rng.randint(a, len(old[i]))
                field = rng.randbytes(b - a if rng.random() < 0.7 else rng.randint(0, 200))
                new[i] = old[i][:a] + field + old[i][b:]
            at.append(i)
            lo.append(a)
            hi.append(b)
            what.append(items.shared(field))
        items.splice_run(at, lo, hi, what)
        if rng.random() < 0.2 and old:  # a whole replacement between passes
            i = rng.randrange(len(old))
            new[i] = rng.randbytes(rng.choice(LENGTHS))
            items[i] = new[i]
    assert list(items) == new and items[1:-1] == new[1:-1]
    out = b"".join(items.pieces(VAR_TAG))
    assert out == framed(new)
    assert items.field_size() == len(out) == fields_size(new)


def test_follows_says_whether_edits_can_be_appended() -> None:
    items = spans([b"abc"] * 10)
    assert items.follows([0, 3, 9]) and not items.follows([3, 3]) and not items.follows([4, 2])
    assert not items.follows([9, 10])  # past the last item
    items.splice_run([2, 5], [0, 0], [1, 1], [items.shared(b"z")] * 2)
    assert items[2] == items[5] == b"zbc" and items[4] == b"abc"
    assert items.follows([6]) and not items.follows([5]) and not items.follows([1, 7])
