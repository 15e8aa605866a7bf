"""Find the repeated layers of a program (rules 2 and 3), by regex or by detection.

A layer is named by a component of the forward ops' struct names
(`/GPTModel/DecoderLayer_3/MLP/` -> `DecoderLayer_3`). Each layer's ops must be
one contiguous run of the global block on one mesh. Forward ops inside the
layer region that belong to no layer ("stray" ops, e.g. reshard `assign`s)
join the next layer, with a warning, or are refused under --strict.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from array import array
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from vppctl import validate
from vppctl.engine.index import ProgramIndex
from vppctl.errors import ConversionError, UsageError
from vppctl.mesh import NO_MESH
from vppctl.program import is_forward

NO_LAYER = -1
_SUFFIX = re.compile(r"_\d+$")


@dataclass(frozen=True)
class Layer:
    name: str
    first: int  # first global-block op of the layer (joined stray ops included)
    last: int  # last global-block op of the layer
    mesh: int  # mesh-class id


@dataclass(frozen=True)
class LayerSet:
    """The layers of a program, in program order."""

    seg_method: str  # the regex the layers were found with (given or detected)
    layer_class: str  # e.g. "DecoderLayer"
    detected: bool
    layers: tuple[Layer, ...]
    op_layer: array[int]  # global-block op -> layer index, NO_LAYER outside layers
    strays: tuple[int, ...]  # forward ops in the region that matched no layer
    warnings: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.layers)

    @property
    def names(self) -> tuple[str, ...]:
        """The layer names in program order."""
        return tuple(layer.name for layer in self.layers)


# A layer regex is the user's (or a recorded plan's): Python's engine can take
# exponential time on some patterns, so matching struct names gets this budget: one per
# command in all (`regex_budget`), however many times it matches (its input, a recorded
# plan, its own output), and one per matching outside a command.
#
# How the budget is enforced: on the main thread, SIGALRM interrupts the match (CPython's
# engine checks for signals as it backtracks). Anywhere else (a thread of the user's
# program, a process whose SIGALRM is taken, a platform without it) a signal cannot reach
# the match, and the match holds the GIL, so no watchdog thread can run: there the
# struct names are matched in a child Python process that is killed when the budget runs
# out, a guard that needs neither the GIL nor signals. A pattern of word characters only
# (a class name: the usual case) cannot backtrack and is matched in process everywhere.
REGEX_SECONDS = 5.0
MAX_PATTERN = 1000  # characters
_LITERAL = re.compile(r"\w+")


_now = time.monotonic  # the budget's clock (a name tests can replace)


class _Budget(threading.local):
    """The seconds left to the current command's layer regexes (None: no command), per
    thread: commands run in two threads at once have a budget each."""

    left: float | None = None


_BUDGET = _Budget()


@contextmanager
def regex_budget() -> Iterator[None]:
    """One REGEX_SECONDS budget for every layer regex matched inside (vppctl.commands opens
    one per command); nested, the outer one counts."""
    if _BUDGET.left is not None:
        yield
        return
    _BUDGET.left = REGEX_SECONDS
    try:
        yield
    finally:
        _BUDGET.left = None


def compile_seg_method(pattern: str, name: str = "--seg-method") -> re.Pattern[str]:
    """The layer regex (case-insensitive, as Paddle's); UsageError (exit 2) if it is invalid.
    `name` is how the message names where it came from."""
    if len(pattern) > MAX_PATTERN:
        raise UsageError(
            f"{name} is {len(pattern)} characters long (at most {MAX_PATTERN}); pass the "
            "layer's class name, e.g. DecoderLayer"
        )
    try:
        return re.compile(pattern, re.IGNORECASE)
    except (re.error, RecursionError, OverflowError) as e:
        raise UsageError(
            f"{name} {_shown(pattern)} is not a valid regular expression: {e}"
        ) from None


def check_seg_method(options: validate.Options, field: str) -> None:
    """An options object's layer regex: None (detect the layer) or one that compiles."""
    validate.text(options, field, "a regular expression naming the repeated layer, or None")
    pattern = getattr(options, field)
    if pattern is not None:
        compile_seg_method(pattern, validate.where(options, field))


class _OutOfTime(Exception):
    pass


def _alarm_usable() -> bool:
    """Whether SIGALRM can interrupt a match here: the main thread, and no timer running."""
    return (
        threading.current_thread() is threading.main_thread()
        and hasattr(signal, "setitimer")
        and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    )


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Raise _OutOfTime in the block after `seconds` (SIGALRM; CPython's regex engine checks
    for signals as it backtracks). Only where `_alarm_usable()`."""

    def expire(signum: int, frame: object) -> None:
        raise _OutOfTime

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _shown(text: str, limit: int = 80) -> str:
    """A user string as messages quote it: repr, cut to `limit` characters."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"... ({len(text)} chars)"


def find_layers(
    index: ProgramIndex,
    pattern: str,
    *,
    strict: bool = False,
    detected: bool = False,
    layer_class: str = "",
) -> LayerSet:
    """Rule 2 and 3: the layers named by `pattern` in the global block's forward ops."""
    regex = compile_seg_method(pattern)
    names = _layer_names(index, regex, pattern)
    try:
        return _collect(index, names, pattern, strict, detected, layer_class)
    except ConversionError as e:
        if detected or not names:  # detection names its own candidate; no match says so
            raise
        matched = _matched_in_order(index, names)
        what = "layer" if len(matched) == 1 else "layers"
        raise ConversionError(
            f"--seg-method {pattern!r} matches {what} {few(matched)}: {e}"
        ) from None


def with_matches(layers: LayerSet, error: ConversionError) -> ConversionError:
    """`error` (e.g. a layer count that does not divide) preceded by the layers a given
    regex matched, first and last few: the likeliest cause is a regex that matched too
    much (`Layer` also matches `LayerNorm`) or too little. Detected layers: as is."""
    if layers.detected:
        return error
    what = "layer" if len(layers) == 1 else "layers"
    return ConversionError(
        f"--seg-method {layers.seg_method!r} matches {what} {few(layers.names)}: {error}"
    )


def few(names: Sequence[str], head: int = 3, tail: int = 2) -> str:
    """The first and last few names and how many: `A, B, C, …, Y, Z (26)`."""
    if len(names) <= head + tail + 1:
        return ", ".join(names)
    return f"{', '.join(names[:head])}, …, {', '.join(names[-tail:])} ({len(names)})"


def _matched_in_order(index: ProgramIndex, names: dict[bytes, str]) -> list[str]:
    """The distinct layer names `names` gives, in order of their first forward op (for
    messages only: one pass over the forward ops)."""
    block = index.global_block
    struct = block.ops.struct
    seen: dict[str, None] = {}
    for i in block.forward_ops:
        name = names.get(struct[i])
        if name is not None:
            seen.setdefault(name, None)
    return list(seen)


def _collect(
    index: ProgramIndex,
    names: dict[bytes, str],
    pattern: str,
    strict: bool,
    detected: bool,
    layer_class: str,
) -> LayerSet:
    """The layers given struct name -> layer name, with their runs checked (rules 2, 3)."""
    block = index.global_block
    n_ops = block.n_ops
    op_layer = array("q", [NO_LAYER]) * n_ops
    order: dict[str, int] = {}
    firsts: list[int] = []
    lasts: list[int] = []
    meshes: list[int] = []
    current = NO_LAYER
    struct, op_mesh = block.ops.struct, block.op_mesh
    for i in block.forward_ops:
        name = names.get(struct[i])
        if name is None:
            continue
        k = order.get(name)
        if k is None:
            k = order[name] = len(firsts)
            firsts.append(i)
            lasts.append(i)
            meshes.append(_mesh_of(index, name, i))
        elif k != current:
            _not_contiguous(index, name, i, lasts[k], list(order)[current])
        elif op_mesh[i] != meshes[k]:
            _two_meshes(index, name, firsts[k], i, meshes[k])
        lasts[k] = i
        op_layer[i] = k
        current = k
    if not firsts:
        raise ConversionError(_no_match_message(index, pattern))
    layer_names = list(order)
    strays = _join_strays(index, op_layer, firsts[0], lasts[-1], strict, layer_names)
    for k in range(1, len(firsts)):  # strays before a layer's first op belong to it
        while op_layer[firsts[k] - 1] == k:
            firsts[k] -= 1
    layers = tuple(
        Layer(name=layer_names[k], first=firsts[k], last=lasts[k], mesh=meshes[k])
        for k in range(len(layer_names))
    )
    unexpected = tuple(i for i in strays if not inserted_by_paddle(index, i))
    warnings = (_stray_warning(index, unexpected, op_layer, layer_names),) if unexpected else ()
    return LayerSet(
        seg_method=pattern,
        layer_class=layer_class or _class_of(layer_names[0]),
        detected=detected,
        layers=layers,
        op_layer=op_layer,
        strays=strays,
        warnings=warnings,
    )


# The child that matches off the main thread: reads {"pattern", "flags", "texts"} as JSON
# on stdin, writes the start of each text's first match (-1: none). -I -S: no user site,
# no environment, so it starts in tens of milliseconds and imports nothing of the user's.
_CHILD = (
    "import json, re, sys\n"
    "job = json.load(sys.stdin)\n"
    "search = re.compile(job['pattern'], job['flags']).search\n"
    "json.dump([-1 if (m := search(t)) is None else m.start() for t in job['texts']], "
    "sys.stdout)\n"
)


def _starts_in_child(regex: re.Pattern[str], texts: list[str], seconds: float) -> list[int]:
    """Where `regex` first matches each of `texts` (-1: nowhere), matched in a child
    process killed after `seconds` (then _OutOfTime)."""
    job = json.dumps({"pattern": regex.pattern, "flags": int(regex.flags), "texts": texts})
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", _CHILD],
            input=job.encode("ascii"),  # json.dumps escapes all else (lone surrogates too)
            capture_output=True,
            timeout=seconds,
            check=False,
        )
    except subprocess.TimeoutExpired:  # run() has killed and reaped the child
        raise _OutOfTime from None
    except OSError as e:
        raise UsageError(
            f"cannot start a Python process ({sys.executable!r}) to match the layer regex "
            f"in, off the main thread: {e.strerror or e}; pass a plain layer class name, "
            "e.g. DecoderLayer (matched in process), or run vppctl on the main thread"
        ) from None
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["killed"]
        raise UsageError(
            f"matching the layer regex {_shown(regex.pattern)} failed ({why[0]}); use a "
            "plain one, e.g. the layer's class name DecoderLayer"
        )
    starts: list[int] = json.loads(done.stdout)
    return starts


def _starts(regex: re.Pattern[str], texts: list[str], seconds: float) -> list[int]:
    """Where `regex` first matches each of `texts` (-1: nowhere), within `seconds` (else
    _OutOfTime), on any thread: see REGEX_SECONDS for how."""
    if seconds <= 0:
        raise _OutOfTime
    literal = _LITERAL.fullmatch(regex.pattern) is not None
    if not literal and not _alarm_usable():
        return _starts_in_child(regex, texts, seconds)
    search = regex.search
    with _time_limit(seconds) if not literal else _no_limit():
        return [-1 if (m := search(t)) is None else m.start() for t in texts]


@contextmanager
def _no_limit() -> Iterator[None]:
    yield


def _layer_names(index: ProgramIndex, regex: re.Pattern[str], pattern: str) -> dict[bytes, str]:
    """Distinct struct name -> layer name, for struct names the regex matches (within
    REGEX_SECONDS in all, else UsageError)."""
    found: dict[bytes, int] = {}
    structs = list(dict.fromkeys(index.global_block.ops.struct))
    left = REGEX_SECONDS if _BUDGET.left is None else _BUDGET.left
    start = _now()
    try:
        texts = [raw.decode("utf-8", "replace") for raw in structs]
        for raw, at in zip(structs, _starts(regex, texts, left), strict=True):
            if at >= 0:
                found[raw] = at
    except _OutOfTime:
        raise UsageError(
            f"--seg-method {_shown(pattern)} takes over {REGEX_SECONDS:g} s to match the "
            f"program's {len(structs)} struct names (a regex that backtracks "
            "exponentially; the budget is for all the command's matching); use a plain one, "
            "e.g. the layer's class name DecoderLayer"
        ) from None
    finally:
        if _BUDGET.left is not None:
            _BUDGET.left -= _now() - start
    names: dict[bytes, str] = {}
    for raw, start in found.items():
        struct = raw.decode("utf-8", "replace")
        name = struct[start:].split("/")[0]
        if not name:
            raise UsageError(
                f"--seg-method {_shown(pattern)} matches an empty layer name in struct name "
                f"{_shown(struct)}; make it match the layer's class name, e.g. DecoderLayer"
            )
        names[raw] = name
    return names


def _not_contiguous(index: ProgramIndex, name: str, op: int, last: int, other: str) -> None:
    raise ConversionError(
        f"layer {name} is not contiguous: {index.op_label(0, op)} belongs to it but comes "
        f"after layer {other} started (its previous op is #{last}); vppctl needs each layer's "
        "forward ops in one run, so check the struct names or the --seg-method regex"
    )


def _join_strays(
    index: ProgramIndex,
    op_layer: array[int],
    first: int,
    last: int,
    strict: bool,
    layer_names: list[str],
) -> tuple[int, ...]:
    """Rule 3: forward ops in [first, last] outside every layer join the next layer."""
    roles = index.global_block.ops.role
    strays: list[int] = []
    next_layer = NO_LAYER
    for i in range(last, first - 1, -1):
        if op_layer[i] != NO_LAYER:
            next_layer = op_layer[i]
        elif is_forward(roles[i]):
            strays.append(i)
            op_layer[i] = next_layer
    strays.reverse()
    unexpected = [i for i in strays if not inserted_by_paddle(index, i)]
    if unexpected and strict:
        i = unexpected[0]
        raise ConversionError(
            f"{index.op_label(0, i)} lies inside the layer region but matches no layer "
            f"(struct name {index.global_block.ops.struct[i].decode(errors='replace')!r}); "
            f"drop --strict to let it join the next layer, {layer_names[op_layer[i]]}"
        )
    return tuple(strays)


_AMP_CAST = re.compile(rb"\.cast_(?:fp16|fp32|bf16)(?:_\d+)?")


def inserted_by_paddle(index: ProgramIndex, op: int) -> bool:
    """A forward op that one of Paddle's own passes puts inside the layer region, so it is
    expected there: a `dist.reshard` `assign` (output `reshard_api.tmp_N`, which Paddle's
    chunk step accepts there, and only those), or a cast the AMP pass inserted before its
    consumer (struct name `/`, `X` -> `X.cast_fp16`/`fp32`/`bf16`, maybe with `_N`)."""
    block = index.global_block
    t, outs = block.ops.type[op], block.outputs(op)
    if not len(outs) or outs[0] < 0:
        return False
    out = index.var_name_bytes(outs[0])
    if t == b"assign":
        return b"reshard_api" in out
    ins = block.inputs(op)
    if t != b"cast" or block.ops.struct[op] != b"/" or len(ins) != 1 or len(outs) != 1:
        return False
    x = index.var_name_bytes(ins[0]) if ins[0] >= 0 else b""
    return out.startswith(x) and _AMP_CAST.fullmatch(out, len(x)) is not None


def _mesh_of(index: ProgramIndex, name: str, op: int) -> int:
    """A layer's mesh is its first op's (NO_MESH in an unannotated program: layers are
    still found, for `inspect`; `convert` refuses them)."""
    return index.global_block.op_mesh[op]


def _two_meshes(index: ProgramIndex, name: str, first: int, op: int, mesh: int) -> None:
    other = index.global_block.op_mesh[op]
    where = index.meshes[other] if other != NO_MESH else "no mesh"
    raise ConversionError(
        f"layer {name} spans two meshes: {index.op_label(0, first)} is on "
        f"{index.meshes[mesh]} but {index.op_label(0, op)} is on {where}; "
        "put all of a layer's ops on one stage mesh"
    )


def _stray_warning(
    index: ProgramIndex, strays: tuple[int, ...], op_layer: array[int], layer_names: list[str]
) -> str:
    shown = ", ".join(f"{index.op_label(0, i)} -> {layer_names[op_layer[i]]}" for i in strays[:3])
    more = f" and {len(strays) - 3} more" if len(strays) > 3 else ""
    return (
        f"{len(strays)} forward op(s) inside the layer region match no layer and join "
        f"the next layer: {shown}{more} (use --strict to refuse)"
    )


def _no_match_message(index: ProgramIndex, pattern: str) -> str:
    block = index.global_block
    example = next(
        (
            s.decode(errors="replace")
            for s, r in zip(block.ops.struct, block.ops.role)
            if is_forward(r) and s.strip(b"/")
        ),
        None,
    )
    hint = (
        f"; struct names look like {_shown(example)}"
        if example
        else "; the forward ops carry no struct names beyond '/' (Paddle records a layer "
        "path only for ops made inside a paddle.nn.Layer call)"
    )
    return (
        f"no forward op's struct name matches --seg-method {_shown(pattern)}{hint}; pass the "
        "repeated layer's class name, e.g. --seg-method DecoderLayer"
    )


def _class_of(layer_name: str) -> str:
    return _SUFFIX.sub("", layer_name)
