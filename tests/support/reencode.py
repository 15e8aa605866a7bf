"""Re-encoding: the same protobuf message written in another valid wire encoding.

protobuf's wire format lets one message be written many ways, and every parser
(upb, Paddle's C++) reads them all as the same message:

    reorder   a message's fields in any order (occurrences of one field keep theirs)
    split     a singular message field as several occurrences, which merge
    pack      a repeated scalar field packed into one or more length-delimited runs,
              or a packed one unpacked
    shadow    a singular scalar or string field given an earlier value that the last
              occurrence overrides
    overlong  a length written as a longer varint than needed (padded with 0x80 bytes)

`reencode(rng, data, descriptor, kinds)` walks a serialized message with its
descriptor (program.proto's `ProgramDesc`) and applies the chosen kinds at random
places at every depth; the result parses to a message equal to the input's. The
fuzzer (tests/contract/test_fuzz.py) and tests/program/test_encodings.py use it: whatever the
encoding, vppctl must read what protobuf reads.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from google.protobuf.descriptor import FieldDescriptor as FD

KINDS = ("reorder", "split", "pack", "shadow", "overlong")

_LENGTH_BYTES = 5  # the longest length varint upb accepts
Field = tuple[int, int, bytes]  # (field number, wire type, payload: the value's bytes)

_SCALAR_WIRE = {
    FD.TYPE_DOUBLE: 1,
    FD.TYPE_FLOAT: 5,
    FD.TYPE_INT64: 0,
    FD.TYPE_UINT64: 0,
    FD.TYPE_INT32: 0,
    FD.TYPE_FIXED64: 1,
    FD.TYPE_FIXED32: 5,
    FD.TYPE_BOOL: 0,
    FD.TYPE_UINT32: 0,
    FD.TYPE_ENUM: 0,
    FD.TYPE_SFIXED32: 5,
    FD.TYPE_SFIXED64: 1,
    FD.TYPE_SINT32: 0,
    FD.TYPE_SINT64: 0,
}


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _varint_at(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = data[pos]
        value |= (b & 0x7F) << shift
        pos += 1
        if b < 0x80:
            return value, pos
        shift += 7


def fields(data: bytes) -> list[Field]:
    """The top-level fields of a serialized message (no groups: program.proto has none)."""
    out = []
    pos = 0
    while pos < len(data):
        key, pos = _varint_at(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, end = _varint_at(data, pos)
        elif wire == 1:
            end = pos + 8
        elif wire == 5:
            end = pos + 4
        elif wire == 2:
            size, pos = _varint_at(data, pos)
            end = pos + size
        else:
            raise ValueError(f"wire type {wire} (a group) is not re-encoded")
        if end > len(data):
            raise ValueError("truncated message")
        out.append((number, wire, data[pos:end]))
        pos = end
    return out


class _Encoder:
    def __init__(
        self, rng: random.Random, kinds: Sequence[str], rate: float, share: Mapping[str, float]
    ) -> None:
        self.rng = rng
        self.kinds = frozenset(kinds)
        self.rate = rate  # chance of each applicable change at each place
        self.share = share  # message type -> share of its messages re-encoded (default all)
        unknown = self.kinds - set(KINDS)
        if unknown:
            raise ValueError(f"unknown kinds {sorted(unknown)}")

    def chance(self, kind: str) -> bool:
        return kind in self.kinds and self.rng.random() < self.rate

    def message(self, data: bytes, desc: Any) -> bytes:
        fs = fields(data)
        packing = self.to_pack(fs, desc)
        out: list[tuple[int, bytes | list[bytes]]] = []  # a list: the values of a packed field
        runs: dict[int, list[bytes]] = {}
        for number, wire, payload in fs:
            if number in packing:
                if number not in runs:
                    runs[number] = []
                    out.append((number, runs[number]))  # all its values go where it first was
                runs[number].append(payload)
                continue
            fd = desc.fields_by_number.get(number) if desc is not None else None
            out.extend((number, enc) for enc in self.field(fd, number, wire, payload))
        encoded: list[tuple[int, bytes]] = []
        for number, enc in out:
            if isinstance(enc, bytes):
                encoded.append((number, enc))
            else:
                wire = _SCALAR_WIRE[desc.fields_by_number[number].type]
                encoded.extend((number, e) for e in self.runs(number, wire, enc))
        if self.chance("reorder"):
            encoded = self.interleave(encoded)
        return b"".join(enc for _, enc in encoded)

    def to_pack(self, fs: list[Field], desc: Any) -> set[int]:
        """The repeated scalar fields written unpacked that are to be packed."""
        if desc is None or "pack" not in self.kinds:
            return set()
        candidates = set()
        for number, wire, _ in fs:
            fd = desc.fields_by_number.get(number)
            if fd is not None and fd.is_repeated and fd.type in _SCALAR_WIRE and wire != 2:
                candidates.add(number)
        return {n for n in sorted(candidates) if self.chance("pack")}

    def runs(self, number: int, wire: int, values: list[bytes]) -> list[bytes]:
        """A repeated scalar field's values, in order, cut into runs each written packed
        (one length-delimited occurrence) or unpacked."""
        cuts = sorted({0, len(values), *(self.rng.randint(0, len(values)) for _ in range(2))})
        out = []
        for lo, hi in zip(cuts, cuts[1:]):
            if self.rng.random() < 0.5:
                out.append(self.encode(number, 2, b"".join(values[lo:hi])))
            else:
                out.extend(self.encode(number, wire, v) for v in values[lo:hi])
        return out

    def field(self, fd: Any, number: int, wire: int, payload: bytes) -> list[bytes]:
        """The encodings of one field occurrence (several when split or unpacked)."""
        if fd is None:  # unknown to program.proto: kept as it is
            return [self.encode(number, wire, payload)]
        repeated = fd.is_repeated
        if fd.type == FD.TYPE_MESSAGE:
            share = self.share.get(fd.message_type.full_name, 1.0)
            if share < 1.0 and self.rng.random() >= share:
                return [self.encode(number, 2, payload)]  # this one as it is
            inner = self.message(payload, fd.message_type)
            if not repeated and self.chance("split"):
                return [self.encode(number, 2, part) for part in self.split(inner)]
            return [self.encode(number, 2, inner)]
        if fd.type in _SCALAR_WIRE:
            scalar_wire = _SCALAR_WIRE[fd.type]
            if repeated and wire == 2:  # packed: unpack it
                values = _unpacked(payload, scalar_wire)
                if self.chance("pack"):
                    return [self.encode(number, scalar_wire, v) for v in values]
                return [self.encode(number, 2, payload)]
            out = [self.encode(number, wire, payload)]
            if not repeated and self.chance("shadow"):
                out.insert(0, self.encode(number, wire, self.other_scalar(fd, wire, payload)))
            return out
        # string or bytes
        out = [self.encode(number, wire, payload)]
        if not repeated and self.chance("shadow"):
            out.insert(0, self.encode(number, 2, self.rng.choice((b"", b"shadowed", payload))))
        return out

    def encode(self, number: int, wire: int, payload: bytes) -> bytes:
        tag = varint(number << 3 | wire)
        if wire != 2:
            return tag + payload
        length = varint(len(payload))
        if self.chance("overlong") and len(length) < _LENGTH_BYTES:  # upb reads at most 5
            pad = self.rng.randint(1, _LENGTH_BYTES - len(length))
            length = bytes(b | 0x80 for b in length) + b"\x80" * (pad - 1) + b"\x00"
        return tag + length + payload

    def split(self, payload: bytes) -> list[bytes]:
        """A message's bytes cut at field boundaries into 2-4 pieces (empty ones allowed):
        parsed one after another, they merge into the message."""
        encoded = _field_spans(payload)
        cuts = sorted(self.rng.randint(0, len(encoded)) for _ in range(self.rng.randint(1, 3)))
        parts, prev = [], 0
        for cut in [*cuts, len(encoded)]:
            parts.append(b"".join(encoded[prev:cut]))
            prev = cut
        return parts

    def other_scalar(self, fd: Any, wire: int, payload: bytes) -> bytes:
        if fd.type == FD.TYPE_ENUM:  # an unknown value would be kept apart, not overridden
            return varint(self.rng.choice(fd.enum_type.values).number)
        if wire == 0:
            return varint(self.rng.choice((0, 1, 2, 7, 300, 2**31 - 1)))
        return bytes(self.rng.randrange(256) for _ in payload)

    def interleave(self, out: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
        """A random order of the fields that keeps each field number's occurrences in
        their order (repeated elements, and the parts of a split or shadowed field)."""
        queues: dict[int, list[bytes]] = {}
        for number, enc in out:
            queues.setdefault(number, []).append(enc)
        order = [n for n, _ in out]
        self.rng.shuffle(order)
        taken: dict[int, int] = dict.fromkeys(queues, 0)
        result = []
        for n in order:
            result.append((n, queues[n][taken[n]]))
            taken[n] += 1
        return result


def _field_spans(data: bytes) -> list[bytes]:
    """The encoded fields of a message, each as its bytes (tag included)."""
    spans = []
    pos = 0
    for number, wire, payload in fields(data):
        start = pos
        key, pos = _varint_at(data, pos)
        assert key >> 3 == number
        if wire == 2:
            _, pos = _varint_at(data, pos)
        pos += len(payload)
        spans.append(data[start:pos])
    return spans


def _unpacked(payload: bytes, wire: int) -> list[bytes]:
    values = []
    pos = 0
    while pos < len(payload):
        if wire == 0:
            _, end = _varint_at(payload, pos)
        else:
            end = pos + (8 if wire == 1 else 4)
        values.append(payload[pos:end])
        pos = end
    return values


def any_encoding(report: dict[str, Any]) -> dict[str, Any]:
    """A `convert --json` report as every encoding of its input must give it: without how
    the changes were written (`spliced` or `rewritten` whole), which depends on the input's
    encoding by design."""
    for key in ("ops", "vars"):
        counts = report.get(key)
        if isinstance(counts, dict):
            counts.pop("spliced", None)
            counts.pop("rewritten", None)
    return report


def reencode(
    rng: random.Random,
    data: bytes,
    descriptor: Any,
    kinds: Sequence[str] = KINDS,
    rate: float = 0.3,
    share: Mapping[str, float] | None = None,
) -> bytes:
    """`data` (a serialized message of type `descriptor`) in another valid encoding: each
    applicable change of `kinds` made at each place with chance `rate`. `share` limits
    the work on big programs: message type (full name, "vppctl.OpDesc") -> the share of
    its messages re-encoded (the others are kept as they are)."""
    return _Encoder(rng, kinds, rate, share or {}).message(data, descriptor)
