"""Importers: measured costs read from a file, whatever the format.

This module's one job is reading what `--costs-from` names into `MeasuredCosts`
(`vppctl.planner.measured` says what they mean and how they fit a plan). The format is
recognised by the content:

* a costs CSV or JSON (the schema in docs/schedules.md and vppctl/report/schemas/costs.json);
* a Chrome trace of torch's profiler: the events torch.distributed.pipelining records
  around each action, `PP:<stage><F|B|I|W><mb>` (`_get_profiler_function_name`); a
  stage's cost of each kind is the median duration of its events (isolated timings are
  the reliable input: spans inside a real step include the wait for a receive). With I
  and W events the backward is I and the weight gradient W (B events are then not
  read); with B alone the backward is whole. The runtime's own posts of a stage's
  point-to-point messages, `PP:<stage><RECV_F|SEND_F|RECV_B|SEND_B><mb>`, run on the rank
  beside each action and are part of its cost: their medians are added to the stage's
  forward (RECV_F, SEND_F) and backward (RECV_B, SEND_B). Other `PP:` actions
  (OVERLAP_F_B pairs, UNSHARD, RESHARD, REDUCE_GRAD) are counted and not read;
  `ProfilerStep#N` events give the measured step (their median);
* a Chrome trace of Paddle's profiler of the program's own run (one micro-batch per
  profiler step): each `Operator` event is matched to the program's op of its type and
  occurrence within the step (the k-th `matmul_v2` event of a step is the program's k-th
  `matmul_v2`; an inplace `add_` is `add`), and so to a layer: a forward op's layer, a
  backward op's forward op's layer (`pre` and `post` before and after the layers). A
  layer's forward and backward are the sums of its ops' medians over the steps. Events
  of types the program lacks (the executor's `feed` and `fetch`), occurrences beyond the
  program's, and the optimizer's ops are counted and not read; so are program ops that
  no event matched.

A file that cannot be read, or is none of these, is a ProgramFileError (exit 3) naming
the line or entry at fault.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from vppctl.choices import MAX_LAYERS
from vppctl.convert import Planned
from vppctl.engine import NO_LAYER
from vppctl.errors import ProgramFileError
from vppctl.planner.measured import (
    MAX_SECONDS,
    POST,
    PRE,
    CostsSource,
    Key,
    MeasuredCosts,
    Per,
    Timing,
    Unit,
    key_text,
    median_seconds,
    seconds,
)
from vppctl.planner.realstep import (
    ACTION_EVENT,
    POST_EVENT,
    Slot,
    Span,
    inside,
    overhead,
    posted,
    slots,
    step_windows,
)
from vppctl.program import FORWARD_ROLES, Bound, is_backward, read_input
from vppctl.schedule import MAX_UNITS

# A costs file or trace is read whole and parsed as JSON; a profile of a few steps with
# record_function events stays far below this.
MAX_COSTS_BYTES = 256 * 2**20
BOUND = Bound(
    MAX_COSTS_BYTES,
    noun="costs file",
    fix="profile fewer steps, or without record_shapes and stacks, or write a costs CSV",
)
COLUMNS = ("forward_s", "backward_s", "weight_s", "activation_bytes")
REQUIRED = ("forward_s", "backward_s")


def read_costs(spec: str) -> MeasuredCosts | PaddleTrace:
    """The costs `spec` names (a path, or "-" for stdin), recognised by their content: a
    Paddle profiler trace is returned as a `PaddleTrace`, to be matched to the program."""
    got = read_input(spec, limit=BOUND)
    shown = got.shown
    try:
        text = bytes(got.data).decode("utf-8-sig")
    except UnicodeDecodeError:
        raise _malformed(shown, "it is not UTF-8 text") from None
    try:
        if text.lstrip()[:1] in ("{", "["):
            data = _json(text)
            if isinstance(data, list) or (isinstance(data, dict) and "traceEvents" in data):
                return read_trace(data, shown)
            return from_json(data, shown)
        return from_csv(text, shown)
    except ValueError as e:
        raise _malformed(shown, str(e)) from None


def _malformed(shown: str, reason: str) -> ProgramFileError:
    return ProgramFileError(
        f"cannot read costs from {shown}: {reason} (the formats: docs/schedules.md#measured-costs)"
    )


def _json(text: str) -> Any:
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("its JSON nests too deeply") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"it is not JSON (line {e.lineno}: {e.msg})") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"its JSON holds {name}, which is no number")


# -- the costs CSV and JSON ----------------------------------------------------------------


def _number(text: object, what: str) -> Fraction:
    """A finite number >= 0 from a CSV cell or a JSON value."""
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise ValueError(f"{what} must be a number, not {text!r}")
    try:
        value = Fraction(repr(text) if isinstance(text, float) else str(text).strip())
    except (ValueError, ZeroDivisionError, OverflowError):
        raise ValueError(f"{what} must be a number, not {text!r}") from None
    if value < 0:
        raise ValueError(f"{what} must not be negative (got {text})")
    return value


def _bytes(text: object, what: str) -> int:
    value = _number(text, what)
    if value.denominator != 1:
        raise ValueError(f"{what} must be a whole number of bytes (got {text})")
    if value > 2**62:
        raise ValueError(f"{what} is more bytes than any device holds (got {text})")
    return int(value)


def _row(cells: Mapping[str, object], unit: Unit, where: str) -> Timing:
    """One stage's or layer's cells -> its Timing (ValueError naming the cell)."""
    times: dict[str, Fraction | None] = {}
    for name in ("forward_s", "backward_s", "weight_s"):
        cell = cells.get(name)
        if cell is None or cell == "":
            if name in REQUIRED:
                raise ValueError(f"{where} has no {name}")
            times[name] = None
            continue
        value = seconds(_number(cell, f"{where}'s {name}"), unit)
        if value > MAX_SECONDS:
            raise ValueError(
                f"{where}'s {name} is {float(value):g} s, more than {MAX_SECONDS:,} s: give seconds"
            )
        times[name] = value
    cell = cells.get("activation_bytes")
    stash = None if cell is None or cell == "" else _bytes(cell, f"{where}'s activation_bytes")
    forward, backward = times["forward_s"], times["backward_s"]
    assert forward is not None and backward is not None  # required above
    return Timing(forward, backward, times["weight_s"], stash)


def _key(text: object, per: Per, where: str) -> Key:
    """A stage index, or a layer index / `pre` / `post`."""
    if per == "layer" and isinstance(text, str) and text.strip().lower() in (PRE, POST):
        return text.strip().lower()
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        raise ValueError(f"{where}: {per} must be an integer, not {text!r}")
    try:
        value = int(str(text).strip())
    except ValueError:
        legal = "an integer" if per == "stage" else "an integer, pre or post"
        raise ValueError(f"{where}: {per} must be {legal}, not {text!r}") from None
    high = MAX_UNITS if per == "stage" else MAX_LAYERS
    if not 0 <= value < high:
        raise ValueError(f"{where}: {per} {value} is outside 0..{high - 1}")
    return value


def measured(
    source: CostsSource,
    per: Per,
    rows: Iterable[tuple[str, object, Mapping[str, object]]],
    notes: Sequence[str] = (),
) -> MeasuredCosts:
    """Rows `(where, key, cells)` -> the costs (ValueError on a bad or repeated row)."""
    timings: dict[Key, Timing] = {}
    for where, raw, cells in rows:
        key = _key(raw, per, where)
        if key in timings:
            raise ValueError(f"{where}: {key_text(per, key)} is listed twice")
        timings[key] = _row(cells, source.unit, where)
    if not timings:
        raise ValueError(f"no {per} is measured: give one row per {per}")
    count = 1 + max(k for k in timings if isinstance(k, int)) if per == "stage" else 0
    return MeasuredCosts(source, per, timings, count, notes=tuple(notes))


def from_csv(text: str, shown: str) -> MeasuredCosts:
    """A costs CSV: header `stage|layer,forward_s,backward_s[,weight_s][,activation_bytes]`."""
    lines = [
        (n, line)
        for n, line in enumerate(io.StringIO(text), start=1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not lines:
        raise ValueError("it is empty: give a header line and one row per stage or layer")
    head_line, header_text = lines[0]
    header = [h.strip().lower() for h in next(csv.reader([header_text]))]
    per = _per(header[0] if header else "", f"line {head_line}")
    columns = header[1:]
    unknown = [c for c in columns if c not in COLUMNS]
    if unknown or len(set(columns)) != len(columns) or not set(REQUIRED) <= set(columns):
        raise ValueError(
            f"line {head_line}: the header is {','.join(header)}; it must be {per},forward_s,"
            "backward_s, then weight_s and activation_bytes if known"
        )
    rows = []
    for n, line in lines[1:]:
        cells = [c.strip() for c in next(csv.reader([line]))]
        if len(cells) != len(header):
            raise ValueError(f"line {n} has {len(cells)} cells, the header {len(header)}")
        rows.append((f"line {n}", cells[0], dict(zip(columns, cells[1:]))))
    return measured(CostsSource(shown, "csv", "s"), per, rows)


def _per(name: str, where: str) -> Per:
    if name in ("stage", "layer"):
        return "stage" if name == "stage" else "layer"
    raise ValueError(f"{where}: the first column is {name!r}; it must be stage or layer")


def from_json(data: Any, shown: str) -> MeasuredCosts:
    """`{"unit": "s", "stages": [...]}` or `{"unit": "s", "layers": [...]}`."""
    if not isinstance(data, dict):
        raise ValueError('its JSON is not an object {"unit": "s", "stages": [...]}')
    lists = [k for k in ("stages", "layers") if k in data]
    extra = sorted(set(data) - {"unit", "stages", "layers"})
    if len(lists) != 1 or extra:
        raise ValueError(
            'its JSON must hold "unit" and one of "stages" or "layers"'
            + (f", not {', '.join(map(repr, extra))}" if extra else "")
        )
    unit = data.get("unit", "s")
    if unit not in ("s", "ms", "us"):
        raise ValueError(f'"unit" is {unit!r}; it must be one of s, ms, us')
    per: Per = "stage" if lists[0] == "stages" else "layer"
    entries = data[lists[0]]
    if not isinstance(entries, list):
        raise ValueError(f'"{lists[0]}" must be a list of objects')
    rows = []
    for i, entry in enumerate(entries):
        where = f"{lists[0]}[{i}]"
        if not isinstance(entry, dict):
            raise ValueError(f"{where} is not an object")
        unknown = sorted(set(entry) - {per, *COLUMNS})
        if unknown:
            raise ValueError(f"{where} holds {', '.join(map(repr, unknown))}: no such key")
        key = entry.get(per)
        if isinstance(key, float) and key.is_integer():  # JSON Schema's integer: 1.0 is 1
            key = int(key)
        if isinstance(key, bool) or not (isinstance(key, int) or key in (PRE, POST)):
            legal = "an integer" if per == "stage" else 'an integer, "pre" or "post"'
            raise ValueError(f'{where}\'s "{per}" is {key!r}; it must be {legal}')
        if per == "stage" and key in (PRE, POST):
            raise ValueError(f'{where}\'s "stage" is {key!r}; it must be an integer')
        for name in COLUMNS:
            value = entry.get(name, 0)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f'{where}\'s "{name}" is {value!r}; it must be a number')
        rows.append((where, key, entry))
    return measured(CostsSource(shown, "json", unit), per, rows)


# -- Chrome traces -------------------------------------------------------------------------

_PADDLE_NAME = re.compile(r"([^\[]*)(?:\[.*)?", re.S)


def _spans(data: Any) -> list[Span]:
    """The complete ("X") events of a Chrome trace: a list, or an object's traceEvents."""
    events = data if isinstance(data, list) else data.get("traceEvents")
    if not isinstance(events, list):
        raise ValueError('"traceEvents" is not a list of events')
    out = []
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            raise ValueError(f"traceEvents[{i}] is not an object")
        if e.get("ph") != "X":
            continue
        name, cat = e.get("name"), e.get("cat", "")
        if not isinstance(name, str) or not isinstance(cat, str):
            raise ValueError(f"traceEvents[{i}] has no name")
        ts, dur = _finite(e.get("ts")), _finite(e.get("dur"))
        if ts is None or dur is None or not 0 <= dur <= MAX_SECONDS * 1e6:  # microseconds
            raise ValueError(
                f"traceEvents[{i}] ({name[:40]!r}) has no time, or a duration of "
                f"{e.get('dur')!r} microseconds"
            )
        out.append(Span(name, cat, ts, dur, str(e.get("pid", ""))))
    return out


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def read_trace(data: Any, shown: str) -> MeasuredCosts | PaddleTrace:
    """A torch or Paddle profiler trace, told apart by its events."""
    spans = _spans(data)
    torch = [(m, s) for s in spans if (m := ACTION_EVENT.fullmatch(s.name))]
    if torch:
        return _torch(torch, spans, CostsSource(shown, "torch-trace", "us"))
    if any(s.cat == "Operator" for s in spans):
        return PaddleTrace(CostsSource(shown, "paddle-trace", "us"), _paddle_steps(spans))
    raise ValueError(
        "its trace holds no PP:<stage><F|B|I|W><mb> events (torch.distributed.pipelining's "
        "actions) and no Operator events (Paddle's profiler)"
    )


def _torch(
    actions: Sequence[tuple[re.Match[str], Span]], spans: Sequence[Span], source: CostsSource
) -> MeasuredCosts:
    """Per stage, the median duration of its F, B, I and W events timed alone, plus the
    medians of the runtime's posts around them (`_posts`); with a real step profiled in the
    same trace, the runtime's per-action overhead read from it (`vppctl.planner.realstep`)."""
    posts = [(m, s) for s in spans if (m := POST_EVENT.fullmatch(s.name))]
    windows = step_windows(spans)
    alone = [(m, s) for m, s in actions if not inside(windows, s)]
    has_step = bool(alone) and len(alone) < len(actions)  # timings alone, and a real step
    found: list[Slot] = slots(spans, windows) if has_step else []
    stepped = 0  # the step's actions and posts, read through `found`
    if has_step:
        posts_alone = [(m, s) for m, s in posts if not inside(windows, s)]
        stepped = len(actions) - len(alone) + len(posts) - len(posts_alone)
        actions, posts = alone, posts_alone
    durations: dict[tuple[int, str], list[float]] = {}
    for m, span in (*actions, *posts):
        stage = int(m[1])
        if stage >= MAX_UNITS:
            raise ValueError(f"{span.name}: stage {stage} is outside 0..{MAX_UNITS - 1}")
        durations.setdefault((stage, m[2]), []).append(span.dur)
    stages = sorted({stage for stage, kind in durations if len(kind) == 1})
    in_step = posted(found)
    timings: dict[Key, Timing] = {}
    both: list[int] = []  # stages with B events beside their I and W
    for stage in stages:
        has = {kind: durations.get((stage, kind)) for kind in "FBIW"}
        if not has["F"]:
            raise ValueError(f"stage {stage} has backward events but no forward (PP:{stage}F<mb>)")
        if bool(has["I"]) != bool(has["W"]):
            present, absent = ("I", "W") if has["I"] else ("W", "I")
            raise ValueError(
                f"stage {stage} has {present} events but no {absent}: a split backward needs both"
            )
        forward = median_seconds(has["F"] or (), "us")
        full: Fraction | None = None
        sent_f = _posts(durations, in_step, stage, "F")
        sent_b = _posts(durations, in_step, stage, "B")
        if has["I"]:
            backward = median_seconds(has["I"] or (), "us")
            weight: Fraction | None = median_seconds(has["W"] or (), "us")
            if has["B"]:
                both.append(stage)
                full = median_seconds(has["B"] or (), "us") + sent_b
        elif has["B"]:
            backward, weight = median_seconds(has["B"] or (), "us"), None
        else:
            raise ValueError(f"stage {stage} has forward events but no backward (B, or I and W)")
        timings[stage] = Timing(forward + sent_f, backward + sent_b, weight, None, full)
    notes = [
        f"read {len(actions)} PP: events of stages {_ranges(stages)}"
        + (" timed alone" if has_step else "")
        + " (the median per stage and kind)"
    ]
    if posts:
        notes.append(
            f"read {len(posts)} SEND/RECV posts: each stage's median RECV_F and SEND_F added "
            "to its forward, RECV_B and SEND_B to its backward"
        )
    per_kind: dict[str, Fraction] = {}
    if has_step:
        read = overhead(found, durations)
        timings = {k: read.folded(k, t) for k, t in timings.items() if isinstance(k, int)}
        per_kind = dict(read.per_kind)
        notes += read.notes()
    elif windows and all(inside(windows, s) for _, s in actions):
        notes.append(
            "every PP: event lies inside a profiled step (ProfilerStep#): their spans include "
            "waits for messages, so the costs read high; time each stage alone in the same "
            "trace and the step gives the per-action overhead instead"
        )
    if both:
        notes.append(
            f"stages {_ranges(both)} have B events beside their I and W: a whole backward "
            "(B) runs its own median, the split ones I and W"
        )
    counted = len(actions) + len(posts) + stepped
    others = sum(1 for s in spans if s.name.startswith("PP:")) - counted
    if others:
        notes.append(f"{others} other PP: events (overlapped pairs, unshard, ...) not read")
    steps = [s.dur for s in spans if s.name.startswith("ProfilerStep#")]
    step = median_seconds(steps, "us") if steps else None
    return MeasuredCosts(source, "stage", timings, 1 + stages[-1], step, tuple(notes), per_kind)


def _posts(
    alone: Mapping[tuple[int, str], list[float]],
    stepped: Mapping[tuple[int, str], list[float]],
    stage: int,
    kind: str,
) -> Fraction:
    """The median time a rank spends posting the receive before and the send after one of
    the stage's forwards ("F") or backwards ("B"): in the profiled step where the trace has
    one (a post does not wait), else timed alone; 0 where the trace has none (a first or
    last stage, a neighbour on the same rank, or timings taken without the runtime)."""
    total = Fraction(0)
    for post in (f"RECV_{kind}", f"SEND_{kind}"):
        values = stepped.get((stage, post)) or alone.get((stage, post))
        if values:
            total += median_seconds(values, "us")
    return total


def _ranges(values: Sequence[int]) -> str:
    """`0-3, 5`: sorted integers as runs."""
    parts: list[str] = []
    for v in values:
        if parts and parts[-1].split("-")[-1] == str(v - 1):
            parts[-1] = f"{parts[-1].split('-')[0]}-{v}"
        else:
            parts.append(str(v))
    return ", ".join(parts)


# -- Paddle: the profiler's op events matched to the program's ops -------------------------


def _paddle_steps(spans: Sequence[Span]) -> tuple[tuple[tuple[str, float], ...], ...]:
    """Per profiler step (`ProfileStep#N`; the whole trace when there is none), its
    Operator events as (op type, microseconds), in time order."""
    ops = sorted((s for s in spans if s.cat == "Operator"), key=lambda s: s.ts)
    windows = sorted((s.ts, s.ts + s.dur) for s in spans if s.cat == "ProfileStep")
    if not windows:
        windows = [(float("-inf"), float("inf"))]
    steps: list[list[tuple[str, float]]] = [[] for _ in windows]
    w = 0
    for s in ops:
        while w < len(windows) and s.ts >= windows[w][1]:
            w += 1
        if w == len(windows):
            break
        if s.ts >= windows[w][0]:
            steps[w].append((_PADDLE_NAME.fullmatch(s.name)[1].strip(), s.dur))  # type: ignore[index]
    return tuple(tuple(step) for step in steps if step)


@dataclass(frozen=True)
class PaddleTrace:
    """A Paddle profiler trace, per profiler step its op events in time order: costs per
    layer once matched to a program's ops (`match`)."""

    source: CostsSource
    steps: tuple[tuple[tuple[str, float], ...], ...]

    def match(self, planned: Planned) -> MeasuredCosts:
        """Each event matched to the program's op of its type and occurrence in the step,
        and the ops' medians summed per layer (module docstring)."""
        slots, kinds, by_type = _program_ops(planned)
        durations: dict[int, list[float]] = {}
        unmatched: Counter[str] = Counter()
        for step in self.steps:
            seen: Counter[str] = Counter()
            for name, dur in step:
                op_type = _op_type(name, by_type)
                ops = by_type.get(op_type) if op_type is not None else None
                if not ops or seen[op_type or ""] >= len(ops):
                    unmatched[name] += 1
                    continue
                op = ops[seen[op_type or ""]]
                seen[op_type or ""] += 1
                durations.setdefault(op, []).append(dur)
        forward: dict[Key, Fraction] = {}
        backward: dict[Key, Fraction] = {}
        outside: Counter[str] = Counter()  # timed ops of no layer's forward or backward
        types = planned.index.global_block.ops.type
        for op, values in durations.items():
            key, kind = slots.get(op), kinds[op]
            if key is None or kind is None:
                outside[types[op].decode(errors="replace")] += 1
                continue
            table = forward if kind == "F" else backward
            table[key] = table.get(key, Fraction(0)) + median_seconds(values, "us")
        timings = {k: Timing(forward[k], backward.get(k, Fraction(0))) for k in forward}
        if not timings:
            raise ProgramFileError(
                f"cannot read costs from {self.source.path}: none of its Operator events "
                "matches an op of the program by type; profile the program's own run"
            )
        missed = sum(1 for op in slots if op not in durations)
        notes = [
            f"matched {sum(len(v) for v in durations.values())} of "
            f"{sum(len(s) for s in self.steps)} op events in {len(self.steps)} profiler "
            f"steps to {len(durations)} of the program's ops"
        ]
        if unmatched:
            shown = ", ".join(f"{name} x{n}" for name, n in unmatched.most_common(5))
            more = ", ..." if len(unmatched) > 5 else ""
            notes.append(f"not matched: {shown}{more}")
        if missed:
            notes.append(f"{missed} forward and backward ops of the program had no event")
        if outside:
            shown = ", ".join(f"{name} x{n}" for name, n in outside.most_common(5))
            more = ", ..." if len(outside) > 5 else ""
            notes.append(
                f"not counted (of no layer's forward or backward: the optimizer, gradient "
                f"sums): {shown}{more}"
            )
        return MeasuredCosts(self.source, "layer", timings, notes=tuple(notes))


def _op_type(name: str, by_type: Mapping[str, Sequence[int]]) -> str | None:
    """An event's op type as the program spells it: an inplace `add_` is `add`."""
    if name in by_type:
        return name
    if name.endswith("_") and name[:-1] in by_type:
        return name[:-1]
    return None


def _program_ops(
    planned: Planned,
) -> tuple[dict[int, Key], list[str | None], dict[str, list[int]]]:
    """Per global-block op: the layer it counts for (forward ops by their layer, backward
    ops by their forward op's), whether it is forward ("F") or backward ("B"), and the
    ops of each type in program order."""
    index, layers, forward_ops = planned.index, planned.layers, planned.forward
    block = index.global_block
    ops = block.ops
    first = layers.layers[0].first
    slots: dict[int, Key] = {}
    kinds: list[str | None] = [None] * len(ops)
    for op in block.forward_ops:
        k = layers.op_layer[op]
        slots[op] = k if k != NO_LAYER else (PRE if op < first else POST)
        kinds[op] = "F"
    for op in range(len(ops)):
        if ops.role[op] in FORWARD_ROLES or not is_backward(ops.role[op]):
            continue
        f = forward_ops.of(op)
        if f is not None and f in slots:
            slots[op] = slots[f]
            kinds[op] = "B"
    by_type: dict[str, list[int]] = {}
    for op, t in enumerate(ops.type):
        by_type.setdefault(t.decode(errors="replace"), []).append(op)
    return slots, kinds, by_type
