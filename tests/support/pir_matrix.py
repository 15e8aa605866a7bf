"""The PIR matrix: which training programs Paddle 3.3.1 is asked to build, and reading them.

Not six hand-picked jobs: a covering design over the axes a real PIR job varies on,

- model kind: GPT and Llama decoders, a post-LN encoder with dropout (BERT-like), a conv
  patch embedding (ViT-like), MoE with two layer classes (dense and MoE layers
  alternating), tied input/output embeddings, parallel residual blocks, attention biases;
- optimizer (every one in `paddle.optimizer` that static auto-parallel accepts; LBFGS,
  dygraph only, is not), gradient clipping (global norm, value), weight decay (the
  optimizer's coefficient, an L1 or L2 regularizer) and an LR scheduler;
- AMP: off, O1 or O2 in bfloat16, O1 or O2 in float16 (with loss scaling);
- mesh: 1-D (a rank a stage), dp 2 x pp with the ranks stage-major (Paddle's order) and
  dp-major, TP 2 inside a stage, dp 2 x TP 2;
- pp 2, 3, 4, 8 and vpp 1 to 4, and the layer counts per stage: even, uneven (earlier
  stages one more on every other stage), short (a stage with fewer layers than vpp);
- and two things Paddle's completion refuses: an op between two layers that belongs to
  none (`between`), and the dp-major mesh at vpp > 1 (above).

`matrix()` chooses the cases greedily (AETG-like, deterministic): every value of every
axis in a case Paddle takes, and every pair of (pp, vpp), (mesh, vpp), (layers, vpp),
(model, AMP) and (optimizer, AMP level) in some case. `tests/paddle/test_pir_matrix.py`
checks that it does. `tests/support/pir_matrix_build.py` builds them with Paddle (it
imports this module for the cases); `tests/data/pir_matrix/` holds what it built.

Here: the cases and the checked-in programs, without Paddle.
"""

from __future__ import annotations

import hashlib
import json
import lzma
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import cache
from itertools import product
from typing import Any

import paths

from vppctl.program import Program, parse_program

MATRIX = paths.PIR_MATRIX
MANIFEST = MATRIX / "MANIFEST.json"

MODELS = ("gpt", "llama", "bert", "vit", "moe", "tied", "parallel", "attnbias")
# Every `paddle.optimizer` class Paddle 3.3.1's static auto-parallel builds a pipeline program
# with. Not: LBFGS (dygraph only: its `minimize` raises NotImplementedError), ASGD (its state
# of batch_num copies of a parameter gets the parameter's dims mapping: "The global ddim size
# must equal to dim_mapping's size, but bot 3 vs 2"), Rprop (its update reads a tensor made
# on the first stage's mesh: "operand_dist_attrs element's mesh ... not belong to input
# mesh"), RMSProp (the process aborts: std::length_error "cannot create std::vector larger
# than max_size()").
OPTIMIZERS = (
    "SGD",
    "Momentum",
    "Adam",
    "AdamW",
    "Adagrad",
    "Adamax",
    "Lamb",
    "Adadelta",
    "NAdam",
    "RAdam",
)
NOT_BUILT = ("LBFGS", "ASGD", "Rprop", "RMSProp")
CLIPS = ("none", "global_norm", "norm")  # ClipGradByValue has no PIR path in 3.3.1
DECAYS = ("none", "coeff", "l1", "l2")
SCHEDULERS = ("none", "cosine", "warmup")
# O2 in float16 cannot be traced on Paddle's CPU wheel: O2 makes the weights float16 and the
# CPU matmul has no float16 kernel ("Check data type error for op: matmul"), whatever the
# black list; O2's program shape is bfloat16's, float16's loss scaling O1's.
AMPS = ("fp32", "o1_bf16", "o2_bf16", "o1_fp16")
MESHES = ("pp", "dp2", "dp2_dp_major", "tp2", "dp2_tp2")
PPS = (2, 3, 4, 8)
VPPS = (1, 2, 3, 4)
LAYOUTS = ("even", "uneven", "short")
BETWEEN = ("none", "scale")  # "scale": an op between two layers belonging to none
RECOMPUTE = ("off", "on")

AXES: dict[str, tuple[Any, ...]] = {
    "pp": PPS,
    "vpp": VPPS,
    "layout": LAYOUTS,
    "mesh": MESHES,
    "model": MODELS,
    "amp": AMPS,
    "optimizer": OPTIMIZERS,
    "clip": CLIPS,
    "decay": DECAYS,
    "scheduler": SCHEDULERS,
    "recompute": RECOMPUTE,
    "between": BETWEEN,
}
# The pairs every one of whose combinations is in some case (the rest: every value once).
PAIRS = (
    ("pp", "vpp"),
    ("mesh", "vpp"),
    ("layout", "vpp"),
    ("model", "amp"),
    ("model", "mesh"),
    ("optimizer", "level"),
)
# Optimizers whose own weight decay is a coefficient (decoupled), not a regularizer.
COEFF_ONLY = ("AdamW", "Lamb")
# The layer classes each model repeats (Paddle's `vpp_seg_method` names them all).
LAYER_CLASSES = {
    "gpt": ("DecoderLayer",),
    "llama": ("LlamaDecoderLayer",),
    "bert": ("EncoderLayer",),
    "vit": ("ViTBlock",),
    "moe": ("DenseLayer", "MoELayer"),
    "tied": ("TiedDecoderLayer",),
    "parallel": ("ParallelBlock",),
    "attnbias": ("BiasedAttentionLayer",),
}
MAX_LAYERS = 40


@dataclass(frozen=True)
class Case:
    """One job of the matrix."""

    name: str
    model: str
    optimizer: str
    clip: str
    decay: str
    scheduler: str
    amp: str
    mesh: str
    pp: int
    vpp: int
    layout: str
    recompute: bool
    between: str

    @property
    def stage_layers(self) -> tuple[int, ...]:
        return stage_layers(self.layout, self.pp, self.vpp)

    @property
    def layers(self) -> int:
        return sum(self.stage_layers)

    @property
    def dp(self) -> int:
        return 2 if self.mesh.startswith("dp2") else 1

    @property
    def tp(self) -> int:
        return 2 if self.mesh.endswith("tp2") else 1

    @property
    def world(self) -> int:
        return self.pp * self.dp * self.tp

    @property
    def seg_method(self) -> str:
        """The `vpp_seg_method` Paddle is given: the layer class, or both of them."""
        return "|".join(LAYER_CLASSES[self.model])

    @property
    def accumulate_steps(self) -> int:
        return 2 * self.pp

    @property
    def refused_by_paddle(self) -> str | None:
        """Which of Paddle's completion's refusals the case meets (None: it takes it)."""
        return refusal(self.vpp, self.layout, self.mesh, self.between)

    def fields(self) -> dict[str, Any]:
        return {**asdict(self), "stage_layers": list(self.stage_layers)}


def stage_layers(layout: str, pp: int, vpp: int) -> tuple[int, ...]:
    """Layers per stage: `even` vpp a stage (2 at vpp 1), `uneven` one more on every
    other stage from the first, `short` the last stage one fewer than vpp (and the first
    one more): Paddle's completion refuses it."""
    base = max(vpp, 2) if layout == "even" else vpp
    if layout == "even":
        return (base,) * pp
    if layout == "uneven":
        return tuple(base + (s % 2 == 0) for s in range(pp))
    assert layout == "short" and vpp >= 2, (layout, vpp)
    return (base + 1, *([base] * (pp - 2)), base - 1)


def refusal(vpp: int, layout: str, mesh: str, between: str) -> str | None:
    """The refusal a case meets in Paddle's PIR completion (which runs at vpp > 1 only)."""
    if vpp < 2:
        return None
    if between != "none":
        return "between"  # _get_seg_struct_names: ValueError
    if mesh == "dp2_dp_major":
        return "rank_order"  # get_pp_stage_by_process_mesh: None, then the layer-count assert
    if layout == "short":
        return "short"  # the layer-count assert
    return None


def _level(amp: str) -> str:
    return amp.split("_")[0] if amp != "fp32" else "none"


# ---------------------------------------------------------------------------------------------
# The covering design


Row = dict[str, Any]
Item = tuple[tuple[str, Any], ...]


def valid(row: Mapping[str, Any]) -> bool:
    """Whether a (partial) row is a job the builder can make."""
    get = row.get
    causes = (get("between") == "scale", get("mesh") == "dp2_dp_major", get("layout") == "short")
    return not (
        (get("vpp") == 1 and (get("layout") == "short" or get("between") == "scale"))
        # one refusal at a time: Paddle's error must be that one's
        or (get("vpp", 2) > 1 and sum(causes) > 1)
        or (get("optimizer") in COEFF_ONLY and get("decay") in ("l1", "l2"))
        # dropout / many experts under recompute: not what this matrix tests
        or (get("recompute") == "on" and get("model") in ("bert", "moe"))
        or _too_many_layers(row)
    )


def _too_many_layers(row: Mapping[str, Any]) -> bool:
    if not {"pp", "vpp", "layout"} <= set(row):
        return False
    return sum(stage_layers(row["layout"], row["pp"], row["vpp"])) > MAX_LAYERS


def _value(row: Mapping[str, Any], axis: str) -> Any:
    return _level(row["amp"]) if axis == "level" else row[axis]


def _covers(row: Mapping[str, Any], items: Iterable[Item]) -> set[Item]:
    """The items a full row covers: pairs always; single values only in a case Paddle
    takes (each value must be seen completed), but for the values that make it refuse."""
    taken = refusal(row["vpp"], row["layout"], row["mesh"], row["between"]) is None
    out = set()
    for item in items:
        holds = all(_value(row, a) == v for a, v in item)
        if holds and (len(item) > 1 or taken or item[0] in _REFUSING):
            out.add(item)
    return out


_REFUSING = {("layout", "short"), ("mesh", "dp2_dp_major"), ("between", "scale")}


def _required() -> list[Item]:
    items: list[Item] = [((a, v),) for a, values in AXES.items() for v in values]
    values = {**AXES, "level": ("none", "o1", "o2")}
    for a, b in PAIRS:
        for va, vb in product(values[a], values[b]):
            if valid({a: va, b: vb}):
                items.append(((a, va), (b, vb)))
    return items


def _consistent(row: Mapping[str, Any], item: Item) -> bool:
    """Whether `item` can still hold in `row` (its axes unset, or set to its values)."""
    for a, v in item:
        if a == "level":
            if "amp" in row and _level(row["amp"]) != v:
                return False
        elif a in row and row[a] != v:
            return False
    return True


def _axes_of(item: Item) -> set[str]:
    return {"amp" if a == "level" else a for a, _ in item}


def _fill(seed: Item, uncovered: Sequence[Item], used: Mapping[tuple[str, Any], int]) -> Row | None:
    """A full row holding `seed`, each other axis the valid value covering the most
    uncovered items (ties: the least used value, then the axis's order)."""
    row: Row = {}
    for a, v in seed:
        if a == "level":
            row["amp"] = next(x for x in AMPS if _level(x) == v)
        else:
            row[a] = v
    if not valid(row):
        return None
    for axis, options in AXES.items():
        if axis in row:
            continue
        mine = [item for item in uncovered if axis in _axes_of(item) and _consistent(row, item)]
        best: tuple[int, bool, int, int] | None = None
        choice = None
        for i, value in enumerate(options):
            trial = {**row, axis: value}
            if not valid(trial):
                continue
            gain = sum(1 for item in mine if _consistent(trial, item))
            key = (-gain, _refuses(trial), used.get((axis, value), 0), i)
            if best is None or key < best:
                best, choice = key, value
        if choice is None:
            return None
        row[axis] = choice
    return row


def _refuses(row: Mapping[str, Any]) -> bool:
    """Whether a (partial) row already meets a refusal: cases Paddle takes are preferred."""
    get = row.get
    return (
        refusal(get("vpp", 2), get("layout", "even"), get("mesh", "pp"), get("between", "none"))
        is not None
    )


SEEDS = 12  # uncovered items tried as a row's seed at each step (pairs first)


@cache
def matrix() -> tuple[Case, ...]:
    """The cases, in the order chosen (deterministic)."""
    uncovered = set(_required())
    rows: list[Row] = []
    used: dict[tuple[str, Any], int] = {}
    while uncovered:
        best: tuple[int, Row] | None = None
        pending = sorted(uncovered, key=lambda i: (-len(i), repr(i)))
        for seed in pending[:SEEDS]:
            row = _fill(seed, pending, used)
            if row is None:
                continue
            gain = len(_covers(row, uncovered))
            if best is None or gain > best[0]:
                best = (gain, row)
        if best is None or best[0] == 0:
            raise AssertionError(f"cannot cover {sorted(uncovered, key=repr)[:5]}")
        row = best[1]
        uncovered -= _covers(row, uncovered)
        for axis in AXES:
            used[axis, row[axis]] = used.get((axis, row[axis]), 0) + 1
        rows.append(row)
    rows.sort(key=lambda r: (r["pp"], r["vpp"], MODELS.index(r["model"]), MESHES.index(r["mesh"])))
    return tuple(_case(i, r) for i, r in enumerate(rows))


def _case(i: int, r: Row) -> Case:
    name = f"m{i:02d}_{r['model']}_pp{r['pp']}v{r['vpp']}"
    fields = {a: r[a] for a in AXES}
    fields["recompute"] = r["recompute"] == "on"
    return Case(name=name, **fields)


def by_name() -> dict[str, Case]:
    return {c.name: c for c in matrix()}


def uncovered_by(cases: Sequence[Case]) -> list[Item]:
    """The required items no case covers (empty for `matrix()`: the test says so)."""
    left = set(_required())
    for c in cases:
        row = {**c.fields(), "recompute": "on" if c.recompute else "off"}
        left -= _covers(row, left)
    return sorted(left, key=repr)


# ---------------------------------------------------------------------------------------------
# The checked-in programs

KINDS = ("plain", "before", "after", "vpp")
# plain: the whole training program at schedule 1F1B, vpp_degree 1 (vppctl's input);
# before / after: the forward program Paddle's completion (schedule VPP) gets and leaves;
# vpp: the whole training program after that completion (what Paddle goes on to partition).


@cache
def manifest() -> dict[str, Any]:
    return json.loads(MANIFEST.read_text())  # type: ignore[no-any-return]


def built(name: str) -> dict[str, Any]:
    """The manifest's entry of a case: its fields, Paddle's refusal, its files' digests."""
    entry: dict[str, Any] = manifest()["cases"][name]
    return entry


def path(name: str, kind: str) -> Any:
    return MATRIX / f"{name}.{kind}.json.xz"


@cache
def data(name: str, kind: str) -> bytes:
    return lzma.decompress(path(name, kind).read_bytes())


def digest(program: bytes) -> str:
    """What MANIFEST.json records of a program: the sha256 of its JSON."""
    return hashlib.sha256(program).hexdigest()


def has(name: str, kind: str) -> bool:
    """Whether Paddle built `kind` of the case (after and vpp: not where it refused)."""
    return kind in built(name)["files"]


def cases_with(kind: str, predicate: Callable[[Case], bool] = lambda c: True) -> list[str]:
    return [c.name for c in matrix() if has(c.name, kind) and predicate(c)]


@cache
def program(name: str, kind: str) -> Program:
    """A checked-in program, read by vppctl."""
    return parse_program(data(name, kind), source=f"{name}.{kind}.json")


def user_seg_method(name: str) -> str | None:
    """What a user passes to vppctl as `--seg-method`: nothing (the layer is detected), but
    for two layer classes, which no detection picks together: the regex naming both."""
    c = by_name()[name]
    return c.seg_method if len(LAYER_CLASSES[c.model]) > 1 else None


# ---------------------------------------------------------------------------------------------
# The README's table of cases


TABLE_BEGIN, TABLE_END = "<!-- cases:begin -->", "<!-- cases:end -->"


_KINDS = {
    "between": "an op between layers",
    "rank_order": "dp-major ranks",
    "short": "a stage with fewer layers than vpp",
    "": "?",
}


def cases_table(cases: Mapping[str, Mapping[str, Any]]) -> str:
    """The README's table of the built cases (from MANIFEST.json's entries)."""
    head = (
        "| case | model | optimizer | clip | decay | scheduler | amp | mesh | layers a stage "
        "| recompute | Paddle's completion |\n| --- | --- | --- | --- | --- | --- | --- | --- "
        "| --- | --- | --- |"
    )
    rows = []
    for name, c in cases.items():
        kind = refusal(c["vpp"], c["layout"], c["mesh"], c["between"])
        said = "completes" if c["paddle_refused"] is None else f"refuses ({_KINDS[kind or '']})"
        rows.append(
            f"| `{name}` | {c['model']} | {c['optimizer']} | {c['clip']} | {c['decay']} | "
            f"{c['scheduler']} | {c['amp']} | {c['mesh']} | "
            f"{', '.join(map(str, c['stage_layers']))} (vpp {c['vpp']}) | "
            f"{'yes' if c['recompute'] else ''} | "
            f"{said} |"
        )
    return "\n".join([head, *rows])


def with_table(readme: str, cases: Mapping[str, Mapping[str, Any]]) -> str:
    start, end = readme.index(TABLE_BEGIN) + len(TABLE_BEGIN), readme.index(TABLE_END)
    return f"{readme[:start]}\n{cases_table(cases)}\n{readme[end:]}"
