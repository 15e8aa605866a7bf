"""PIR plan: which layers each virtual stage holds, as Paddle's PIR VPP completion takes them.

Paddle 3.x's PIR completion (`complete_chunk_id`, Paddle 3.3.1) is driven by one list,
the layers of each virtual stage k = chunk * pp + stage; it deals each stage's layers
round-robin over its chunks itself. A `PirPlan` gives that list instead, for every split
vppctl makes: `vppctl convert PROG.json ... -o PLAN.json` writes it (`vppctl.convert`),
`vppctl.paddle.pir_plan` makes Paddle's completion follow it, and `vppctl verify --plan`
checks a program against it. Pure: plain values in and out, the file's JSON included
(its schema: vppctl/report/schemas/pir-plan.json).

Layer names are Paddle's: what its `_extract_seg_method` reads from an op's struct name
with `seg_method` (a case-insensitive search, then the path component where the match
starts: `DecoderLayer` on `/M/Qwen2DecoderLayer_3/Attn/` gives `DecoderLayer_3`). The
program's identity is each layer's forward op count (ops whose struct name `seg_method`
matches, but those of `UNCOUNTED_OPS`) and a digest of names and counts, so that a plan
applied to another program is refused naming the first layer that differs.

Only loop placement exists here: Paddle's PIR VPP pass runs virtual stage k on stage
k % pp, chunk k // pp, and has no V-shaped schedule. The first virtual stage may hold no
layer (embedding only) and so may the last (head only); an empty middle one is refused.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vppctl.choices import MAX_DEGREE
from vppctl.errors import ProgramFileError, UsageError

# The ops a layer's op count leaves out: those vppctl's PIR reader reads as values (a
# parameter, a feed), as packing (a vector made or taken apart) or as communication (a
# reshard), so that vppctl counts, in the program Paddle saved, what `pir_plan` counts in
# the program Paddle's completion is given (whose reshards it folds first).
UNCOUNTED_OPS = frozenset(
    {"builtin.parameter", "pd_op.data", "builtin.combine", "builtin.split", "dist_op.reshard"}
)
PIR_PLAN_FORMAT = "vppctl-pir-plan"
PIR_PLAN_VERSION = 1
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_KEYS = (
    "format",
    "version",
    "pp",
    "vpp",
    "placement",
    "seg_method",
    "split",
    "program",
    "virtual_stages",
)
_PROGRAM_KEYS = ("source", "layers", "layer_ops", "digest")
_STAGE_KEYS = ("index", "stage", "chunk", "layers")


@dataclass(frozen=True)
class PirPlan:
    """The layers of each virtual stage (k = chunk * pp + stage, loop placement), for
    Paddle's PIR completion; with the program's identity when it is known (a plan
    `convert` wrote: `layer_ops` and `digest`). Checked when made (UsageError)."""

    pp: int
    vpp: int
    seg_method: str  # strategy.pipeline.vpp_seg_method, as Paddle reads it
    virtual_stages: tuple[tuple[str, ...], ...]  # each virtual stage's layers, in program order
    split: str | None = None  # how vppctl made it (informational)
    source: str | None = None  # the program file it was made from (informational)
    layer_ops: tuple[int, ...] | None = None  # each layer's forward ops, in program order
    digest: str | None = None  # program_digest(seg_method, names, layer_ops)

    def __post_init__(self) -> None:
        problem = _problem(self)
        if problem:
            raise UsageError(f"not a PIR plan Paddle's completion can take: {problem}")

    @property
    def names(self) -> tuple[str, ...]:
        """Every layer, in program order."""
        return tuple(name for stage in self.virtual_stages for name in stage)

    def place(self, k: int) -> tuple[int, int]:
        """(stage, chunk) of virtual stage k (loop placement)."""
        return k % self.pp, k // self.pp

    @property
    def segments(self) -> tuple[tuple[int, int, tuple[str, ...]], ...]:
        """(stage, chunk, layers) of each virtual stage that holds a layer, in order."""
        return tuple((*self.place(k), vs) for k, vs in enumerate(self.virtual_stages) if vs)

    @property
    def empty(self) -> tuple[tuple[int, int], ...]:
        """(stage, chunk) of each virtual stage that holds no layer (only the ends may)."""
        return tuple(self.place(k) for k, vs in enumerate(self.virtual_stages) if not vs)

    def to_json(self) -> dict[str, Any]:
        """The plan file's object (vppctl/report/schemas/pir-plan.json)."""
        names = self.names
        return {
            "format": PIR_PLAN_FORMAT,
            "version": PIR_PLAN_VERSION,
            "pp": self.pp,
            "vpp": self.vpp,
            "placement": "loop",
            "seg_method": self.seg_method,
            "split": self.split,
            "program": {
                "source": self.source,
                "layers": len(names),
                "layer_ops": None if self.layer_ops is None else list(self.layer_ops),
                "digest": self.digest,
            },
            "virtual_stages": [
                {"index": k, "stage": k % self.pp, "chunk": k // self.pp, "layers": list(vs)}
                for k, vs in enumerate(self.virtual_stages)
            ],
        }

    def dumps(self) -> str:
        """The plan file's text: deterministic, one line per virtual stage (easy to read
        and to edit by hand)."""
        data = self.to_json()
        stages = data.pop("virtual_stages")
        counts = data["program"].pop("layer_ops")
        program = json.dumps(data["program"], indent=2).replace("\n", "\n  ")
        program = program[: -len("\n  }")] + f',\n    "layer_ops": {json.dumps(counts)}\n  }}'
        data["program"] = None
        head = json.dumps(data, indent=2).replace('"program": null', f'"program": {program}')
        rows = ",\n".join("    " + json.dumps(v) for v in stages)
        return head[: -len("\n}")] + ',\n  "virtual_stages": [\n' + rows + "\n  ]\n}\n"


def read_pir_plan(data: bytes | str | Mapping[str, Any], source: str) -> PirPlan:
    """A plan file's bytes (or its parsed object) as a `PirPlan`; ProgramFileError (exit
    3) naming `source` and what is wrong when it is not one."""
    try:
        obj = data if isinstance(data, Mapping) else json.loads(data)
    except (ValueError, RecursionError) as e:
        raise ProgramFileError(f"cannot read {source} as a PIR plan: not JSON ({e})") from None
    try:
        return _from_json(obj)
    except UsageError as e:
        raise ProgramFileError(f"cannot read {source} as a PIR plan: {_reason(e)}") from None


def _reason(e: UsageError) -> str:
    return str(e).removeprefix("not a PIR plan Paddle's completion can take: ")


def _from_json(obj: object) -> PirPlan:
    if not isinstance(obj, Mapping):
        raise UsageError(f"a plan file holds a JSON object, not {type(obj).__name__}")
    if obj.get("format") != PIR_PLAN_FORMAT or obj.get("version") != PIR_PLAN_VERSION:
        raise UsageError(
            f"it is not a {PIR_PLAN_FORMAT} file of version {PIR_PLAN_VERSION} (format "
            f"{obj.get('format')!r}, version {obj.get('version')!r}); write it with "
            "vppctl convert PROG.json --vpp V -o PLAN.json"
        )
    _keys(obj, _KEYS, "the plan")
    program = obj.get("program")
    if not isinstance(program, Mapping):
        raise UsageError("its program is not an object")
    _keys(program, _PROGRAM_KEYS, "its program")
    stages = obj.get("virtual_stages")
    if not isinstance(stages, list):
        raise UsageError("its virtual_stages are not a list")
    pp, vpp = obj.get("pp"), obj.get("vpp")
    if obj.get("placement") != "loop":
        raise UsageError(_placement_refusal(obj.get("placement")))
    layers: list[tuple[str, ...]] = []
    for k, entry in enumerate(stages):
        if not isinstance(entry, Mapping):
            raise UsageError(f"virtual stage {k} is not an object")
        _keys(entry, _STAGE_KEYS, f"virtual stage {k}")
        if entry.get("index") != k:
            raise UsageError(f"virtual stage {k} is listed as index {entry.get('index')!r}")
        if isinstance(pp, int) and pp > 0:
            want = (k % pp, k // pp)
            if (entry.get("stage"), entry.get("chunk")) != want:
                raise UsageError(
                    f"virtual stage {k} is on stage {entry.get('stage')!r}, chunk "
                    f"{entry.get('chunk')!r}; loop placement puts it on stage {want[0]}, "
                    f"chunk {want[1]} (Paddle's PIR VPP pass runs no other)"
                )
        names = entry.get("layers")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise UsageError(f"virtual stage {k}'s layers are not a list of names")
        layers.append(tuple(names))
    counts = program.get("layer_ops")
    if counts is not None and not isinstance(counts, list):
        raise UsageError("its program's layer_ops are not a list")
    if program.get("layers") != sum(len(vs) for vs in layers):
        raise UsageError(
            f"its program has {program.get('layers')!r} layers, its virtual stages list "
            f"{sum(len(vs) for vs in layers)}"
        )
    return PirPlan(
        pp=pp,  # type: ignore[arg-type]  # checked by PirPlan
        vpp=vpp,  # type: ignore[arg-type]
        seg_method=obj.get("seg_method"),  # type: ignore[arg-type]
        virtual_stages=tuple(layers),
        split=obj.get("split"),
        source=program.get("source"),
        layer_ops=None if counts is None else tuple(counts),
        digest=program.get("digest"),
    )


def _keys(obj: Mapping[str, Any], known: Sequence[str], what: str) -> None:
    missing = [k for k in known if k not in obj]
    extra = sorted(str(k) for k in obj if k not in known)
    if missing:
        raise UsageError(f"{what} has no {missing[0]!r}")
    if extra:
        raise UsageError(f"{what} has an unknown key {extra[0]!r}")


def _placement_refusal(placement: object) -> str:
    return (
        f"placement {placement!r}: Paddle's PIR VPP pass runs virtual stage k on stage k % pp, "
        "chunk k // pp (loop placement) and has no V-shaped schedule"
    )


def _problem(p: PirPlan) -> str:
    """Why `p` is not a plan Paddle's completion can take ("" if it is)."""
    for what in ("pp", "vpp"):
        value = getattr(p, what)
        if not isinstance(value, int) or isinstance(value, bool) or not 2 <= value <= MAX_DEGREE:
            return (
                f"{what} is {value!r}: Paddle runs its PIR VPP completion for pp >= 2 and "
                "vpp >= 2 only (schedule_mode 'VPP'); a plain-PP program needs no plan"
            )
    if not isinstance(p.seg_method, str) or not p.seg_method:
        return f"seg_method is {p.seg_method!r}, not the regex naming the layer"
    try:
        re.compile(p.seg_method, re.IGNORECASE)
    except (re.error, RecursionError, OverflowError) as e:
        return f"seg_method {p.seg_method!r} is not a regular expression: {e}"
    n = p.pp * p.vpp
    stages = p.virtual_stages
    if not isinstance(stages, tuple) or not all(isinstance(vs, tuple) for vs in stages):
        return "virtual_stages is not a tuple of tuples of layer names"
    if len(stages) != n:
        return f"it lists {len(stages)} virtual stages, but pp*vpp = {p.pp}*{p.vpp} = {n}"
    for k in range(1, n - 1):
        if not stages[k]:
            return (
                f"virtual stage {k} (stage {k % p.pp}, chunk {k // p.pp}) holds no layer: only "
                "the first (embedding only) or the last (head only) may be empty"
            )
    seen: set[str] = set()
    for name in p.names:
        if not isinstance(name, str) or not name:
            return f"a layer is named {name!r}"
        if name in seen:
            return f"layer {name} is listed twice"
        seen.add(name)
    if not seen:
        return "it lists no layer"
    return _identity_problem(p)


def _identity_problem(p: PirPlan) -> str:
    for what in ("split", "source"):
        value = getattr(p, what)
        if value is not None and not isinstance(value, str):
            return f"{what} is {value!r}, not a string or None"
    if p.layer_ops is not None:
        ok = isinstance(p.layer_ops, tuple) and all(
            isinstance(c, int) and not isinstance(c, bool) and c > 0 for c in p.layer_ops
        )
        if not ok:
            return "layer_ops are not positive op counts"
        if len(p.layer_ops) != len(p.names):
            return f"it lists {len(p.names)} layers but op counts for {len(p.layer_ops)}"
    if p.digest is not None and (not isinstance(p.digest, str) or not _DIGEST.fullmatch(p.digest)):
        return f"digest {p.digest!r} is not sha256: and 64 hex digits"
    return ""


def program_digest(seg_method: str, names: Sequence[str], layer_ops: Sequence[int]) -> str:
    """The identity of a program's layers in one string: sha256 over `seg_method`, then
    NUL, name, NUL, forward op count for each layer in program order."""
    h = hashlib.sha256(seg_method.encode())
    for name, count in zip(names, layer_ops):
        h.update(f"\0{name}\0{count}".encode())
    return "sha256:" + h.hexdigest()


def paddle_layer(seg_method: re.Pattern[str], struct: str) -> str | None:
    """The layer Paddle's PIR completion (`_extract_seg_method`) reads from a struct name:
    from the first match of `vpp_seg_method` (case-insensitive) to the next `/`."""
    m = seg_method.search(struct)
    return None if m is None else struct[m.start() :].split("/")[0]


def paddle_seg_method(layer_class: str, seg_method: str, structs: Iterable[str]) -> str:
    """The `vpp_seg_method` to give Paddle: the layer class (as a user writes it) when
    Paddle reads it as it reads vppctl's layer regex on every forward op's struct name,
    else that regex, which Paddle's reading also takes."""
    if not layer_class.isidentifier():  # Paddle would read it as a regex: give the regex
        return seg_method
    by_class = re.compile(layer_class, re.IGNORECASE)
    by_regex = re.compile(seg_method, re.IGNORECASE)
    for struct in set(structs):
        if paddle_layer(by_class, struct) != paddle_layer(by_regex, struct):
            return seg_method
    return layer_class
