"""Stamping: decoder layers formatted from a template instead of encoded op by op.

Encoding every op field by field costs ~40 µs of Python per op. Consecutive
layers of one section (forward, backward, clipping, optimizer) differ only by
the numbers in their names (`linear_12.w_0`, `DecoderLayer_3`) and their op
ids, each growing by a fixed step per layer. Two consecutive layers encoded op
by op give a bytes template with a `%d` or `%c` placeholder wherever they
differ; the following layers are formatted from it in C, until a number would
gain a digit or the layer's stage changes, and then two layers are encoded op
by op again. The output is exactly what encoding every layer op by op gives
(tests compare both, and digests).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from functools import partial
from operator import itemgetter
from typing import Generic, NamedTuple, TypeVar

from vppctl.program import varint
from vppctl.sample.encode import Fragment, UnitBytes, Writer
from vppctl.sample.model import DIGITS, Unit

Number = tuple[bool, int, int]  # (a varint?, value in the first probe, step per layer)


class Numbers:
    """The numbers that differ between two probes, each with its step per layer.

    A number in a name is rendered with `%d`; an op id, a varint, with one `%c`
    per byte (computing the bytes in list comprehensions is quicker than calling
    an encoder per id). Equal numbers share their values, computed once per
    stamped layer; within a run every number keeps its width.
    """

    def __init__(self) -> None:
        self.found: dict[Number, None] = {}

    def add(self, as_varint: bool, a: int, b: int) -> Number:
        number = (as_varint, a, b - a)
        self.found[number] = None
        return number

    def freeze(self) -> dict[Number, list[int]]:
        """Each number's positions in `values()`: one per decimal, one per varint byte."""
        self.decimals = [(a, d) for as_varint, a, d in self.found if not as_varint]
        positions = {n: [i] for i, n in enumerate(n for n in self.found if not n[0])}
        by_width: dict[int, list[Number]] = {}
        for n in self.found:
            if n[0]:
                by_width.setdefault(len(varint(n[1])), []).append(n)
        self.varints: list[tuple[int, list[tuple[int, int]]]] = []  # (width, numbers)
        base = len(self.decimals)
        for width, numbers in sorted(by_width.items()):
            self.varints.append((width, [(a, d) for _, a, d in numbers]))
            for j, n in enumerate(numbers):
                positions[n] = [base + i * len(numbers) + j for i in range(width)]
            base += width * len(numbers)
        return positions

    def values(self, k: int) -> list[int]:
        """Every value `k` layers after the first probe: the decimals, then the varint bytes."""
        out = [a + k * d for a, d in self.decimals]
        for width, numbers in self.varints:
            ids = [a + k * d for a, d in numbers]
            for shift in range(0, 7 * (width - 1), 7):
                out += [(v >> shift) & 0x7F | 0x80 for v in ids]
            shift = 7 * (width - 1)
            out += [v >> shift for v in ids]
        return out

    def last_step(self) -> int:
        """The last `k` at which every number still takes as many bytes as in the probes."""
        last = 1 << 62
        for as_varint, a, d in self.found:
            if d:
                lo, hi = _same_width_range(a, as_varint)
                last = min(last, (hi - a) // d if d > 0 else (a - lo) // -d)
        return last


def _same_width_range(n: int, as_varint: bool) -> tuple[int, int]:
    """The values that take as many bytes as `n` in decimal (or as a varint)."""
    base = 128 if as_varint else 10
    width = len(varint(n)) if as_varint else len(str(n))
    return (base ** (width - 1) if width > 1 else 0), base**width - 1


class _NoTemplate(Exception):
    """Two probes differ in more than numbers: they cannot make a template."""


_Text = TypeVar("_Text", bytes, str)


class _Format(Generic[_Text]):
    """A %-format string and the positions of the values that fill it, in order."""

    def __init__(
        self, text: _Text, numbers: list[Number], positions: dict[Number, list[int]]
    ) -> None:
        self.text: _Text = text
        self.positions = [p for n in numbers for p in positions[n]]
        self.pick = itemgetter(*self.positions) if len(self.positions) > 1 else None

    def render(self, values: list[int]) -> _Text:
        args = (
            self.pick(values) if self.pick is not None else tuple(values[i] for i in self.positions)
        )
        out: _Text = self.text % args
        return out


class Template:
    """One section's unit for any decoder layer of a run, built from two probes.

    The fragments of two consecutive layers' units are lined up: bytes must be
    equal, names equal up to their numbers, ids may differ. Every number that
    differs becomes a placeholder whose value grows by the same step per layer.
    """

    def __init__(self, a: UnitBytes, b: UnitBytes) -> None:
        dims = [d for _, d in a.registered]
        if (
            a.n_ops != b.n_ops
            or len(a.names) != len(b.names)
            or dims != [d for _, d in b.registered]
        ):
            raise _NoTemplate
        # The registered names are new variables of the unit (gradients, moments):
        # a stamped unit takes them from its new names, by position.
        self.registered = _positions([n for n, _ in a.registered], a.names)
        if self.registered != _positions([n for n, _ in b.registered], b.names):
            raise _NoTemplate
        self.registered_dims = dims
        numbers = Numbers()
        ops = _bytes_format(a.ops.parts, b.ops.parts, numbers)
        vars_ = _bytes_format(a.vars.parts, b.vars.parts, numbers)
        names = _names_format(a.names, b.names, numbers)
        positions = numbers.freeze()
        self.ops = _Format(*ops, positions)
        self.vars = _Format(*vars_, positions)
        self.names = _Format(*names, positions)
        self.numbers, self.n_ops = numbers, a.n_ops
        self.last = numbers.last_step()

    @classmethod
    def pair(cls, a: UnitBytes, b: UnitBytes) -> Template | None:
        try:
            return cls(a, b)
        except _NoTemplate:
            return None

    def render(self, k: int) -> Stamp:
        """The unit of the layer `k` steps after the first probe."""
        values = self.numbers.values(k)
        names = self.names.render(values)
        new = names.split("\0") if names else []
        return Stamp(
            self.ops.render(values),
            self.vars.render(values),
            new,
            [new[i] for i in self.registered],
        )


class Stamp(NamedTuple):
    """A stamped unit: what `UnitBytes` would hold, rendered."""

    ops: bytes
    vars: bytes
    names: list[str]
    registered: list[str]  # names whose dims the unit registers (`Template.registered_dims`)


def _positions(names: list[str], new: list[str]) -> list[int]:
    """Where each of `names` is among the `new` names; _NoTemplate if one is not."""
    where = {n: i for i, n in enumerate(new)}
    if any(n not in where for n in names):
        raise _NoTemplate
    return [where[n] for n in names]


def _bytes_format(
    a: list[Fragment], b: list[Fragment], numbers: Numbers
) -> tuple[bytes, list[Number]]:
    if len(a) != len(b):
        raise _NoTemplate
    parts: list[bytes] = []
    found: list[Number] = []
    for fa, fb in zip(a, b):
        if isinstance(fa, bytes) and isinstance(fb, bytes):
            if fa != fb:
                raise _NoTemplate
            parts.append(fa.replace(b"%", b"%%"))
        elif isinstance(fa, int) and isinstance(fb, int):
            if fa == fb:
                parts.append(varint(fa).replace(b"%", b"%%"))
                continue
            width = len(varint(fa))
            if width != len(varint(fb)):
                raise _NoTemplate
            parts.append(b"%c" * width)
            found.append(numbers.add(True, fa, fb))
        elif isinstance(fa, str) and isinstance(fb, str):
            text, in_name = _name_format(fa, fb, numbers)
            parts.append(text.encode())
            found += in_name
        else:
            raise _NoTemplate
    return b"".join(parts), found


def _names_format(a: list[str], b: list[str], numbers: Numbers) -> tuple[str, list[Number]]:
    parts: list[str] = []
    found: list[Number] = []
    for na, nb in zip(a, b):
        text, in_name = _name_format(na, nb, numbers)
        parts.append(text)
        found += in_name
    return "\0".join(parts), found


def _name_format(a: str, b: str, numbers: Numbers) -> tuple[str, list[Number]]:
    """`linear_12.w_0` and `linear_16.w_0` -> `linear_%d.w_0` and the number 12 (+4)."""
    pa, pb_ = DIGITS.split(a), DIGITS.split(b)
    if len(pa) != len(pb_):
        raise _NoTemplate
    parts: list[str] = []
    found: list[Number] = []
    for i, (sa, sb) in enumerate(zip(pa, pb_)):
        if sa == sb:
            parts.append(sa.replace("%", "%%"))
        elif i % 2 == 0 or len(sa) != len(sb) or (len(sa) > 1 and "0" in (sa[0], sb[0])):
            raise _NoTemplate  # different text, a number that changes width, or leading zeros
        else:
            parts.append("%d")
            found.append(numbers.add(False, int(sa), int(sb)))
    return "".join(parts), found


class Stamper:
    """Writes one section's decoder layers, stamping those a template covers.

    Layers are probed (encoded op by op) until two consecutive ones with the same
    key make a template; the template then writes every following layer with the
    same key until one of its numbers would change width, and probing resumes.
    With `check`, every stamped layer is also encoded op by op and compared.
    """

    def __init__(self, w: Writer, check: bool, remember: bool) -> None:
        self.w, self.check, self.remember = w, check, remember
        self.probe: tuple[int, Hashable, UnitBytes] | None = None
        self.template: tuple[int, Hashable, Template] | None = None

    def write(
        self, step: int, key: Hashable, write_layer: Callable[[], object], ahead: int
    ) -> None:
        """Write the layer at `step`; `ahead` layers with the same key follow it."""
        if self.template is not None:
            first, tkey, template = self.template
            k = step - first
            if tkey == key and 2 <= k <= template.last:
                if self.check:
                    self._check(template, k, write_layer)
                else:
                    stamp_unit(self.w, template, k, self.remember)
                return
        unit = self.w.record(write_layer)
        probe, self.probe, self.template = self.probe, (step, key, unit), None
        # A template costs about as much as encoding a layer: worth it for a few layers.
        if probe is not None and probe[0] == step - 1 and probe[1] == key and ahead >= 3:
            paired = Template.pair(probe[2], unit)
            if paired is not None:
                self.template = (step - 1, key, paired)

    def _check(self, template: Template, k: int, write_layer: Callable[[], object]) -> None:
        stamped = template.render(k)
        unit = self.w.record(write_layer)
        encoded = Stamp(
            unit.ops.render(), unit.vars.render(), unit.names, [n for n, _ in unit.registered]
        )
        if stamped != encoded or template.registered_dims != [d for _, d in unit.registered]:
            raise AssertionError(f"a stamped layer differs from the encoded one (k={k})")


def stamp_unit(w: Writer, template: Template, step: int, remember: bool = True) -> None:
    """Write a unit from `template` without encoding its ops one by one.

    With `remember`, the unit's new variables and their dims are recorded for the units
    encoded op by op after it.
    """
    if w.unit.ops.parts or w.unit.vars.parts:
        w.flush()
    stamp = template.render(step)
    if stamp.ops:
        w.ops_out.add(stamp.ops)
    if stamp.vars:
        w.vars_out.add(stamp.vars)
    if remember:
        w.seen.update(stamp.names)
        w.model.dims.update(zip(stamp.registered, template.registered_dims))
    w.next_id += template.n_ops


def write_units(
    w: Writer,
    units: Sequence[Unit],
    write_unit: Callable[[Unit], object],
    check: bool,
    last: bool = False,
) -> None:
    """Write one section unit by unit; decoder layers go through a `Stamper`.

    `last`: no op follows this section, so its new variables need not be remembered.
    """
    stamper = Stamper(w, check, remember=not last)
    ahead = [0] * len(units)  # how many units with the same key follow each unit
    for i in range(len(units) - 2, -1, -1):
        if units[i].key is not None and units[i].key == units[i + 1].key:
            ahead[i] = ahead[i + 1] + 1
    for step, unit in enumerate(units):
        if unit.key is None:
            write_unit(unit)
        else:
            stamper.write(step, unit.key, partial(write_unit, unit), ahead[step])
