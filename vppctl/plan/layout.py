"""Layout: Megatron-Core's pipeline layout language, parsed and written without Megatron.

This module's one job is the text of ``--pipeline-model-parallel-layout`` (Megatron-Core
0.16.1), which vppctl takes as `--layout` (an explicit split) and writes for every
loop-placed plan. ``E`` is the embedding, ``t`` a transformer (decoder) layer, ``m`` an
MTP layer, ``L`` the loss; ``|`` ends a virtual stage; ``x*n`` repeats one character and
``(...)*n`` a group; commas are dropped. Stage i of the string is virtual stage i, held by
pp rank ``i % pp`` as its chunk ``i // pp`` (loop placement: a layout cannot say V).

Acceptance and results follow Megatron-Core's own parser exactly, quirks included, since
they are facts about the runtime a user launches (the goldens in tests/data/layouts/ were
made by Megatron-Core itself):

* commas are removed first, so ``t*1,2`` means ``t*12``;
* groups expand first, left to right, one level deep (a group's body runs to the first
  ``)``, so nested parentheses fail), then single-character repeats; a repeat written after
  a group's count applies to the group's last character (``(t)*2*3`` is four ``t``);
* any character may be repeated, ``|`` included, and anything repeated zero times
  disappears before the characters are checked;
* no whitespace anywhere.

`parse` then validates as ``TransformerConfig.__post_init__`` and
``PipelineParallelLayerLayout.validate_layer_layout`` do, in their order; its errors are
one line naming the problem and the fix, then Megatron's own words. `lint` reports what
Megatron's parser accepts but its runtime refuses, is reported to hang on, or reads in a
way that surprises. Pure: plain values in and out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vppctl.errors import UsageError

__all__ = [
    "KINDS",
    "MAX_EXPANDED",
    "Finding",
    "Layout",
    "LayoutError",
    "expand",
    "format_layout",
    "layout_of_counts",
    "layout_split",
    "lint",
    "parse",
]

# Layer character -> Megatron's LayerType name.
KINDS = {"E": "embedding", "t": "decoder", "m": "mtp", "L": "loss"}
_CHAR_OF = {v: k for k, v in KINDS.items()}
# The longest expanded layout: Megatron has no bound, and a typo such as t*10000000000
# would exhaust memory (the largest real models have a few hundred layers).
MAX_EXPANDED = 1_000_000
_MEGATRON = "megatron/core/transformer/pipeline_parallel_layer_layout.py"
# Megatron-Core's own words for each validation rule (its assertion messages), said after
# vppctl's fix so that a user who searches for the runtime's message finds this one.
MEGATRON_WORDS = {
    "stages-vs-pp": "pipeline_model_parallel_layout must be divisible by "
    "pipeline_model_parallel_size",
    "vpp-conflict": "virtual_pipeline_model_parallel_size conflicts with "
    "pipeline_model_parallel_layout",
    "first-not-embedding": "The first layer must be embedding",
    "last-not-loss": "The last layer must be loss",
    "embedding-count": "Embedding must be specified exactly once",
    "loss-count": "Loss must be specified exactly once",
    "decoder-count": "Number of decoder layers ... must match num_layers",
    "mtp-count": "Number of mtp layers in layout must match mtp_num_layers",
    "decoder-after-mtp": "decoder layers must be placed before MTP layers",
    "mtp-not-last-chunk": "Currently we restrict that the MTP should be always in the last",
    "mtp-split": "All of the MTP layers must be in the same one virtual pipeline stage",
    "no-layers": "list index out of range",
}


class LayoutError(UsageError):
    """A layout Megatron-Core refuses (or one longer than MAX_EXPANDED), exit 2: one line,
    the problem, then the fix (and Megatron's words where it has its own)."""

    def __init__(self, rule: str, message: str, column: int | None = None) -> None:
        words = MEGATRON_WORDS.get(rule)
        super().__init__(message + (f" (Megatron-Core: '{words}')" if words else ""))
        self.rule = rule
        self.column = column  # 1-based, in the text as given, where it applies


@dataclass(frozen=True)
class Finding:
    """Something Megatron's parser accepts that its runtime refuses (`error`), is reported
    to hang on or reads surprisingly (`warning`), with where that is said."""

    rule: str
    severity: str  # "error" or "warning"
    message: str
    source: str


@dataclass(frozen=True)
class Layout:
    """A parsed layout: its virtual stages in string (pipeline) order, each a tuple of
    LayerType names, on `pp` ranks of `vpp` chunks."""

    text: str
    pp: int
    vpp: int
    stages: tuple[tuple[str, ...], ...]
    mtp_standalone: bool = False

    def chunk(self, rank: int, chunk: int) -> tuple[str, ...]:
        return self.stages[chunk * self.pp + rank]

    @property
    def by_rank(self) -> list[list[list[str]]]:
        """[pp_rank][vpp_rank] -> layer kinds, as Megatron's ``layout.layout`` holds them."""
        return [[list(self.chunk(r, c)) for c in range(self.vpp)] for r in range(self.pp)]

    def layer_ids(self, kind: str = "decoder") -> list[list[list[int]]]:
        """[pp_rank][vpp_rank] -> global ids of that kind (Megatron's get_layer_id_list)."""
        starts, n = [], 0
        for stage in self.stages:
            starts.append(n)
            n += stage.count(kind)
        ids: list[list[list[int]]] = []
        for r in range(self.pp):
            row = []
            for c in range(self.vpp):
                first = starts[c * self.pp + r]
                row.append(list(range(first, first + self.chunk(r, c).count(kind))))
            ids.append(row)
        return ids

    def decoders_per_stage(self) -> tuple[int, ...]:
        """Transformer layers of each virtual stage, in pipeline order: vppctl's layer counts
        per segment."""
        return tuple(stage.count("decoder") for stage in self.stages)


# -- expansion ----------------------------------------------------------------------

_Item = tuple[str, int]  # a character and its column in the text as given


def _digits_end(items: Sequence[_Item], k: int) -> int:
    while k < len(items) and items[k][0].isdecimal():
        k += 1
    return k


def _repeat(chunk: list[_Item], times: int, room: int, column: int) -> list[_Item]:
    if len(chunk) * times > room:
        raise LayoutError(
            "too-large",
            f"the repeat at column {column + 1} expands past {MAX_EXPANDED:,} characters: "
            "check the count (a missing '|' or a stray digit?)",
            column + 1,
        )
    return chunk * times


def _expand_groups(items: list[_Item]) -> list[_Item]:
    out: list[_Item] = []
    i, n = 0, len(items)
    while i < n:
        if items[i][0] == "(":
            close = next((k for k in range(i + 1, n) if items[k][0] == ")"), None)
            if (
                close is not None
                and close > i + 1
                and close + 2 < n
                and items[close + 1][0] == "*"
                and items[close + 2][0].isdecimal()
            ):
                end = _digits_end(items, close + 2)
                times = int("".join(ch for ch, _ in items[close + 2 : end]))
                out += _repeat(items[i + 1 : close], times, MAX_EXPANDED - len(out), items[i][1])
                i = end
                continue
        out.append(items[i])
        i += 1
    return out


def _expand_chars(items: list[_Item]) -> list[_Item]:
    out: list[_Item] = []
    i, n = 0, len(items)
    while i < n:
        counted = i + 2 < n and items[i + 1][0] == "*" and items[i + 2][0].isdecimal()
        if items[i][0] != "\n" and counted:
            end = _digits_end(items, i + 2)
            times = int("".join(c for c, _ in items[i + 2 : end]))
            out += _repeat([items[i]], times, MAX_EXPANDED - len(out), items[i][1])
            i = end
            continue
        out.append(items[i])
        i += 1
    return out


def expand(text: str) -> list[list[str]]:
    """The virtual stages of `text` in string order, each a list of LayerType names: the
    lists Megatron's ``PipelineParallelLayerLayout.parse_str_to_list`` gives. A string it
    refuses raises LayoutError naming the first offending character."""
    if not isinstance(text, str):
        raise LayoutError("not-a-string", f"a layout is a string, got {type(text).__name__}")
    items = [(ch, col) for col, ch in enumerate(text) if ch != ","]
    stages: list[list[str]] = [[]]
    for ch, col in _expand_chars(_expand_groups(items)):
        if ch == "|":
            stages.append([])
        elif ch in KINDS:
            stages[-1].append(KINDS[ch])
        else:
            raise _diagnose(text, ch, col)
    return stages


# -- what a leftover character means ---------------------------------------------------


def _next_char(text: str, col: int) -> str:
    return text[col + 1 :].replace(",", "")[:1]


def _prev_char(text: str, col: int) -> str:
    return text[:col].replace(",", "")[-1:]


def _diagnose(text: str, ch: str, col: int) -> LayoutError:
    """The problem behind a character left over after expansion (col 0-based)."""
    at, column = f"column {col + 1}", col + 1
    if ch.isspace():
        return LayoutError(
            "whitespace",
            f"whitespace {ch!r} at {at}: a layout takes no spaces; delete it (commas are the "
            "only cosmetic separator)",
            column,
        )
    if ch in "()":
        return _paren_problem(text, ch, col)
    if ch == "*":
        return _star_problem(text, col)
    if ch.isdecimal():
        prv = _prev_char(text, col)
        hint = f"'{prv}*{ch}'" if prv in KINDS or prv == "|" else f"'x*{ch}'"
        return LayoutError(
            "count-without-star", f"count {ch!r} at {at} has no '*' before it: write {hint}", column
        )
    if ch.isalpha():
        if ch.swapcase() in KINDS:
            fix = f"layer letters are case-sensitive; did you mean {ch.swapcase()!r}?"
        else:
            fix = "use E (embedding), t (transformer layer), m (MTP layer), L (loss)"
        return LayoutError("unknown-layer", f"unknown layer {ch!r} at {at}: {fix}", column)
    return LayoutError(
        "unexpected-char",
        f"unexpected {ch!r} at {at}: a layout holds E, t, m, L, '|', '(...)*n', 'x*n' (n a "
        "whole number) and commas",
        column,
    )


def _paren_problem(text: str, ch: str, col: int) -> LayoutError:
    at, column = f"column {col + 1}", col + 1
    if ch == ")":
        return LayoutError(
            "unmatched-paren", f"')' at {at} closes no group: delete it or add its '('", column
        )
    close = text.find(")", col + 1)
    if close < 0:
        return LayoutError(
            "unclosed-group", f"'(' at {at} is never closed: write '(...)*n' or drop it", column
        )
    body = text[col + 1 : close]
    if "(" in body or text[:col].count("(") > text[:col].count(")"):
        return LayoutError(
            "nested-group",
            f"nested parentheses at {at}: Megatron expands only one level of '(...)*n'; write "
            "the inner group out by hand",
            column,
        )
    if not body.replace(",", ""):
        return LayoutError(
            "empty-group",
            f"empty group '()' at {at}: put layers or '|' in it, or delete it",
            column,
        )
    after = text[close + 1 :].replace(",", "")
    if not (after[:1] == "*" and after[1:2].isdecimal()):
        return LayoutError(
            "group-without-count",
            f"the group at {at} is not followed by '*n': add a count, e.g. '({body})*2', or "
            "drop the parentheses",
            column,
        )
    return LayoutError("bad-group", f"the group at {at} cannot be expanded: write it out", column)


def _star_problem(text: str, col: int) -> LayoutError:
    at, column = f"column {col + 1}", col + 1
    nxt, prv = _next_char(text, col), _prev_char(text, col)
    if nxt == "*" or prv == "*":
        return LayoutError(
            "double-star", f"'**' at {at}: write a single '*' before the count", column
        )
    if nxt in ("-", "+"):
        return LayoutError(
            "signed-count",
            f"signed count '*{nxt}...' at {at}: a count is a whole number >= 0, without sign",
            column,
        )
    if not nxt.isdecimal():
        return LayoutError(
            "missing-count",
            f"'*' at {at} is not followed by a whole-number count: write e.g. 't*3' or '(t|)*3'",
            column,
        )
    if prv == "":
        return LayoutError(
            "nothing-to-repeat",
            f"'*{nxt}...' at {at} repeats nothing: put a layer or a group before it",
            column,
        )
    if prv.isdecimal():
        return LayoutError(
            "chained-count",
            f"a second count at {at} ('x*a*b'): Megatron repeats one character or one group "
            "once; write the product as one count",
            column,
        )
    return LayoutError("bad-repeat", f"the repeat at {at} cannot be expanded: write it out", column)


# -- validation --------------------------------------------------------------------


def _stage_name(index: int, pp: int) -> str:
    return f"virtual stage {index} (rank {index % pp}, chunk {index // pp})"


def parse(
    text: str,
    pp: int,
    vpp: int | None = None,
    num_layers: int | None = None,
    mtp_num_layers: int | None = None,
) -> Layout:
    """Parse and validate `text` as Megatron-Core 0.16.1's TransformerConfig does.

    `vpp`: the vpp also asked for (None: the layout's, as Megatron detects it);
    `num_layers`: the model's transformer layers (None: not checked);
    `mtp_num_layers`: its MTP layers (None and 0 both mean none)."""
    if not isinstance(pp, int) or isinstance(pp, bool) or pp < 1:
        raise LayoutError("bad-pp", f"pp is {pp!r}: give the pipeline ranks, a whole number >= 1")
    stages = expand(text)
    detected = _stages_per_rank(len(stages), pp, vpp)
    flat = [(kind, i) for i, stage in enumerate(stages) for kind in stage]
    _check_ends(flat, pp)
    kinds = [kind for kind, _ in flat]
    _check_counts(kinds, num_layers, mtp_num_layers)
    if "mtp" in kinds:
        _check_mtp(stages, kinds, pp, detected, mtp_num_layers or 0)
    last = (detected - 1) * pp
    standalone = any("mtp" in stages[last + r] for r in range(pp - 1))
    return Layout(text, pp, detected, tuple(tuple(s) for s in stages), standalone)


def _stages_per_rank(n: int, pp: int, vpp: int | None) -> int:
    if n % pp:
        options = " or ".join(str(k) for k in ((n // pp) * pp, (n // pp + 1) * pp) if k > 0)
        raise LayoutError(
            "stages-vs-pp",
            f"the layout has {n} stages ('|'-separated) but pp is {pp}: it needs pp x vpp "
            f"stages, e.g. {options}",
        )
    detected = n // pp
    if vpp is not None and vpp != detected:
        raise LayoutError(
            "vpp-conflict",
            f"the layout has {detected} stage(s) per rank ({n} stages / pp {pp}) but vpp is "
            f"{vpp}: write {pp * vpp} stages or use vpp {detected}",
        )
    return detected


def _check_ends(flat: Sequence[tuple[str, int]], pp: int) -> None:
    if not flat:
        raise LayoutError(
            "no-layers", "the layout holds no layers: it needs at least 'E...L', e.g. 'Et*4|t*4L'"
        )
    (first, first_at), (last, last_at) = flat[0], flat[-1]
    if first != "embedding":
        raise LayoutError(
            "first-not-embedding",
            f"the first layer in pipeline order must be E, got {_CHAR_OF[first]!r} in "
            f"{_stage_name(first_at, pp)}: start the layout with E",
        )
    if last != "loss":
        raise LayoutError(
            "last-not-loss",
            f"the last layer in pipeline order must be L, got {_CHAR_OF[last]!r} in "
            f"{_stage_name(last_at, pp)}: end the layout with L",
        )


def _check_counts(kinds: Sequence[str], num_layers: int | None, mtp_num_layers: int | None) -> None:
    for kind, char, where in (("embedding", "E", "the start"), ("loss", "L", "the end")):
        if kinds.count(kind) != 1:
            raise LayoutError(
                f"{kind}-count",
                f"{char} appears {kinds.count(kind)} times: write it once, at {where}",
            )
    n_dec = kinds.count("decoder")
    if num_layers is not None and n_dec != num_layers:
        diff = num_layers - n_dec
        fix = f"add {diff} 't'" if diff > 0 else f"remove {-diff} 't'"
        raise LayoutError(
            "decoder-count",
            f"the layout has {n_dec} transformer layers (t) but the model has {num_layers}: {fix}",
        )
    n_mtp = kinds.count("mtp")
    if n_mtp != (mtp_num_layers or 0):
        unset = " (mtp_num_layers not set)" if mtp_num_layers is None else ""
        raise LayoutError(
            "mtp-count",
            f"the layout has {n_mtp} MTP layers (m) but the model has {mtp_num_layers or 0}"
            f"{unset}: make them equal",
        )


def _check_mtp(
    stages: Sequence[Sequence[str]], kinds: Sequence[str], pp: int, vpp: int, n_mtp: int
) -> None:
    if "decoder" in kinds[kinds.index("mtp") :]:
        raise LayoutError(
            "decoder-after-mtp",
            "a transformer layer (t) follows an MTP layer (m): put every t before the first m",
        )
    for i, stage in enumerate(stages):
        if "mtp" in stage and i // pp != vpp - 1:
            raise LayoutError(
                "mtp-not-last-chunk",
                f"MTP layers in {_stage_name(i, pp)}: Megatron takes them only in a rank's last "
                f"chunk (chunk {vpp - 1}); move them to a stage index >= {pp * (vpp - 1)}",
            )
    for r in range(pp):
        last = stages[(vpp - 1) * pp + r]
        if "mtp" in last and last.count("mtp") != n_mtp:
            raise LayoutError(
                "mtp-split",
                f"the {n_mtp} MTP layers are spread over several stages: put them in one "
                "virtual stage",
            )


# -- what the parser accepts but the runtime refuses, hangs on, or reads surprisingly -------

_ISSUE_1852 = (
    "NVIDIA/Megatron-LM#1852 (open: empty pipeline stages reported to deadlock with a custom "
    "layout; not found in Megatron-Core 0.16.1's code, whose own test runs one)"
)
_TRAINING = "megatron/training/training.py get_model"


def lint(layout: Layout, *, overlap_p2p_comm: bool = True) -> list[Finding]:
    """What Megatron's parser accepts but its runtime refuses (errors) or is reported to
    hang on or reads surprisingly (warnings)."""
    out = _runtime_refusals(layout, overlap_p2p_comm)
    out += _placement_warnings(layout)
    out += _spelling_warnings(layout.text)
    return out


def _runtime_refusals(layout: Layout, overlap_p2p_comm: bool) -> list[Finding]:
    pp, vpp = layout.pp, layout.vpp
    if vpp > 1 and pp == 1:
        return [
            Finding(
                "vpp-needs-pp",
                "error",
                f"{vpp} stages on pp 1: Megatron refuses interleaving without pipeline "
                "parallelism; use pp >= 2 or one stage",
                "megatron/core/parallel_state.py initialize_model_parallel: 'pipeline-model-"
                "parallel size should be greater than 1 with interleaved schedule'",
            )
        ]
    if vpp > 1 and pp <= 2 and not overlap_p2p_comm:
        return [
            Finding(
                "vpp-needs-pp3",
                "error",
                f"vpp {vpp} on pp {pp} with --no-overlap-p2p-communication: Megatron-LM asks "
                "for pp > 2 then; drop that flag or use pp >= 3",
                "megatron/training/arguments.py validate_args: 'pipeline-model-parallel size "
                "should be greater than 2'",
            )
        ]
    return []


def _placement_warnings(layout: Layout) -> list[Finding]:
    pp, vpp, stages = layout.pp, layout.vpp, layout.stages
    out: list[Finding] = []
    e_at = next(i for i, stage in enumerate(stages) if "embedding" in stage)
    l_at = next(i for i, stage in enumerate(stages) if "loss" in stage)
    if e_at != 0:
        out.append(
            Finding(
                "embedding-not-first-stage",
                "warning",
                f"E is in {_stage_name(e_at, pp)}, but Megatron builds the embedding on rank "
                "0, chunk 0 whatever the layout says: move E to the first stage",
                f"{_TRAINING}: pre_process = is_pp_first_stage and is_vp_first_stage",
            )
        )
    if l_at != len(stages) - 1:
        out.append(
            Finding(
                "loss-not-last-stage",
                "warning",
                f"L is in {_stage_name(l_at, pp)}, but Megatron builds the output layer and loss "
                f"on rank {pp - 1}, chunk {vpp - 1}: move L to the last stage",
                f"{_TRAINING}: post_process = is_pp_last_stage and is_vp_last_stage",
            )
        )
    empty = [i for i, stage in enumerate(stages) if not stage]
    if empty:
        names = ", ".join(_stage_name(i, pp) for i in empty)
        out.append(
            Finding(
                "empty-stage",
                "warning",
                f"empty {names}: reported to deadlock with a custom layout; give each stage a "
                "layer if you can",
                _ISSUE_1852,
            )
        )
    last_rank = [k for c in range(vpp) for k in layout.chunk(pp - 1, c)]
    if pp > 1 and not any(k in ("decoder", "mtp") for k in last_rank):
        out.append(
            Finding(
                "last-rank-no-layer",
                "warning",
                f"rank {pp - 1} holds no transformer or MTP layer: such layouts are reported "
                "to fail or hang; move a 't' there",
                _ISSUE_1852,
            )
        )
    return out


def _spelling_warnings(text: str) -> list[Finding]:
    out: list[Finding] = []
    for i, ch in enumerate(text):
        if ch == "," and i and text[i - 1].isdecimal() and text[i + 1 : i + 2].isdecimal():
            out.append(
                Finding(
                    "comma-in-count",
                    "warning",
                    f"the comma at column {i + 1} sits inside a count: Megatron drops commas "
                    "first, so the digits join into one number",
                    f"{_MEGATRON} parse_str_to_list: commas removed before expansion",
                )
            )
            break
    plain = text.replace(",", "")
    for i in range(len(plain) - 2):
        if plain[i] == ")" and plain[i + 1] == "*":
            j = _digit_run_end(plain, i + 2)
            if j > i + 2 and plain[j : j + 1] == "*":
                out.append(
                    Finding(
                        "count-after-group-count",
                        "warning",
                        "a count follows a group's count ('(...)*a*b'): Megatron applies the "
                        "second count to the group's last character only",
                        f"{_MEGATRON} parse_str_to_list: groups expand before characters",
                    )
                )
                break
    return out


def _digit_run_end(text: str, j: int) -> int:
    while j < len(text) and text[j].isdecimal():
        j += 1
    return j


# -- writing ----------------------------------------------------------------------


def _stage_text(stage: Sequence[str]) -> str:
    out, i = [], 0
    while i < len(stage):
        j = i
        while j < len(stage) and stage[j] == stage[i]:
            j += 1
        ch = _CHAR_OF[stage[i]]
        out.append(ch if j - i == 1 else f"{ch}*{j - i}")
        i = j
    return "".join(out)


def format_layout(stages: Sequence[Sequence[str]]) -> str:
    """A compact layout for `stages` (virtual-stage order): runs of equal stages as
    `(t*4|)*6`, the last stage kept out of a group (a group's trailing `|` would add an
    empty stage). `expand` gives the stages back."""
    texts = [_stage_text(s) for s in stages]
    out: list[str] = []
    i = 0
    while i < len(texts) - 1:
        j = i
        while j < len(texts) - 1 and texts[j] == texts[i]:
            j += 1
        run = j - i
        out.append(f"({texts[i]}|)*{run}" if run >= 2 else texts[i] + "|")
        i = j
    if texts:
        out.append(texts[-1])
    return "".join(out)


def layout_of_counts(layers_per_segment: Sequence[int]) -> str:
    """The layout of a loop-placed plan: segment k's transformer layers as virtual stage k,
    the embedding in the first and the loss in the last."""
    last = len(layers_per_segment) - 1
    stages = [
        (["embedding"] if k == 0 else []) + ["decoder"] * n + (["loss"] if k == last else [])
        for k, n in enumerate(layers_per_segment)
    ]
    return format_layout(stages)


# -- a layout as vppctl's explicit split ------------------------------------------------


def layout_split(text: str, pp: int, vpp: int | None, n_layers: int) -> tuple[Layout, list[str]]:
    """`--layout` as vppctl's explicit split of a program's `n_layers` layers on `pp`
    stages: the parsed layout (its `decoders_per_stage()` are the counts per segment) and
    the warnings Megatron's runtime gives reason for. Refused (exit 2): what Megatron's
    parser refuses, what its runtime refuses (`lint` errors), and a virtual stage without
    a transformer layer, which Megatron allows but vppctl's segments never are (every
    segment holds a layer; Paddle's completion needs one per chunk)."""
    try:
        layout = parse(text, pp, vpp, num_layers=n_layers)
    except LayoutError as e:
        raise LayoutError(e.rule, f"--layout {text!r}: {_bare(e)}", e.column) from None
    findings = lint(layout)
    for f in findings:
        if f.severity == "error":
            raise LayoutError(f.rule, f"--layout {text!r}: {f.message} ({f.source})")
    empty = [k for k, n in enumerate(layout.decoders_per_stage()) if n == 0]
    if empty:
        hang = any(f.rule == "last-rank-no-layer" for f in findings)
        megatron = (
            f"Megatron's parser takes it, but its last rank {pp - 1} then holds no "
            f"transformer or MTP layer, reported to hang ({_ISSUE_1852})"
            if hang
            else "Megatron runs that"
        )
        raise LayoutError(
            "empty-segment",
            f"--layout {text!r}: {_stage_name(empty[0], pp)} holds no transformer layer (t); "
            f"{megatron}, and vppctl gives every segment at least one layer (Paddle's VPP "
            "completion needs one per chunk): move a 't' there",
        )
    return layout, [f"--layout: {f.message} ({f.source})" for f in findings]


def _bare(e: LayoutError) -> str:
    """The message of `e` without the Megatron words `LayoutError` adds (added again)."""
    words = MEGATRON_WORDS.get(e.rule)
    text = str(e)
    suffix = f" (Megatron-Core: '{words}')"
    return text[: -len(suffix)] if words and text.endswith(suffix) else text
