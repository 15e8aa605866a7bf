"""Items: ops and variables kept as ranges of the bytes read, edited beside them, streamed out.

An `Items` over a buffer must read, edit and write exactly as the list of bytes it
stands for: every item, every slice, and above all its framed bytes (`pieces`,
`field_size`), whatever mix of whole replacements and field splices it holds, with
lengths on either side of the varint boundaries (127/128, 16383/16384 bytes).
"""

from __future__ import annotations

import random
from array import array

import pytest

from vppctl.program.items import Items
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


def test_empty_and_out_of_range() -> None:
    items = spans([])
    assert len(items) == 0 and list(items.pieces(VAR_TAG)) == [] and items.field_size() == 0
    with pytest.raises(IndexError):
        items[0]
    with pytest.raises(IndexError):
        items[0] = b"x"
