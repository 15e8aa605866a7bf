"""`vppctl/plan/layout.py`: Megatron-Core's layout language, against Megatron-Core itself.

tests/data/layouts/megatron.json holds 70 layouts (valid and invalid) as Megatron-Core
0.16.1's `TransformerConfig` parsed them (`tests/support/layout_goldens.py`, opt-in): vppctl
gives the same stages, ranks and layer ids, and refuses exactly what Megatron refuses, in
one line naming the fix.
"""

from __future__ import annotations

import json
import random
import re

import paths
import pytest

from vppctl.errors import UsageError
from vppctl.plan import layout as L

GOLDEN = json.loads((paths.LAYOUTS / "megatron.json").read_text(encoding="utf-8"))
CASES = GOLDEN["cases"]
VALID = [c for c in CASES if c["valid"]]


def _args(c: dict) -> dict:  # type: ignore[type-arg]
    return dict(
        pp=c["pp"], vpp=c["vpp"], num_layers=c["num_layers"], mtp_num_layers=c["mtp_num_layers"]
    )


def test_the_goldens_are_megatrons_and_cover_both_sides() -> None:
    assert GOLDEN["versions"]["megatron-core"] == "0.16.1"
    assert GOLDEN["counts"] == {"cases": 70, "valid": 30, "invalid": 40}
    assert len({c["id"] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("c", CASES, ids=[c["id"] for c in CASES])
def test_expansion_is_megatrons(c: dict) -> None:  # type: ignore[type-arg]
    """expand() gives parse_str_to_list's stages, and fails where it fails."""
    if c["stages"] is None:
        with pytest.raises(L.LayoutError):
            L.expand(c["layout"])
    else:
        assert L.expand(c["layout"]) == c["stages"]


@pytest.mark.parametrize("c", CASES, ids=[c["id"] for c in CASES])
def test_validation_is_megatrons(c: dict) -> None:  # type: ignore[type-arg]
    if not c["valid"]:
        with pytest.raises(L.LayoutError) as refused:
            L.parse(c["layout"], **_args(c))
        message = str(refused.value)
        assert isinstance(refused.value, UsageError)  # exit 2: the option is wrong
        assert message and "\n" not in message and ":" in message  # one line: problem: fix
        return
    layout = L.parse(c["layout"], **_args(c))
    assert layout.by_rank == c["layout_by_rank"]
    assert layout.vpp == c["detected_vpp"]
    assert layout.layer_ids("decoder") == c["decoder_ids"]
    assert layout.layer_ids("mtp") == c["mtp_ids"]
    assert layout.mtp_standalone == c["mtp_standalone"]


@pytest.mark.parametrize("c", VALID, ids=[c["id"] for c in VALID])
def test_a_written_layout_parses_back_to_its_stages(c: dict) -> None:  # type: ignore[type-arg]
    layout = L.parse(c["layout"], **_args(c))
    again = L.parse(L.format_layout(layout.stages), **_args(c))
    assert again.stages == layout.stages


@pytest.mark.parametrize(
    ("counts", "text"),
    [
        ([3, 4, 4, 3], "Et*3|(t*4|)*2t*3L"),
        ([1, 1], "Et|tL"),
        ([2, 1, 1, 1, 1, 1, 1, 2], "Et*2|(t|)*6t*2L"),
        ([5], "Et*5L"),
        ([2] * 64, "Et*2|(t*2|)*62t*2L"),
    ],
)
def test_a_plans_layout_is_compact_and_parses_back(counts: list[int], text: str) -> None:
    assert L.layout_of_counts(counts) == text
    pp = 2 if len(counts) % 2 == 0 else 1
    assert list(L.parse(text, pp).decoders_per_stage()) == counts


@pytest.mark.parametrize(
    ("text", "pp", "rule", "words"),
    [
        ("Et | t|t|tL", 4, "whitespace", "column 3"),
        ("et|t|t|tl", 4, "unknown-layer", "did you mean 'E'"),
        ("Ex|t|t|tL", 4, "unknown-layer", "E (embedding)"),
        ("E((t|)*2)*2tL", 5, "nested-group", "one level"),
        ("E(t|*2tL", 3, "unclosed-group", "never closed"),
        ("E()*2|t|t|tL", 4, "empty-group", "empty group"),
        ("E(t|)t|tL", 3, "group-without-count", "'(t|)*2'"),
        ("Et)|t|t|tL", 4, "unmatched-paren", "column 3"),
        ("Et*|t|t|tL", 4, "missing-count", "count"),
        ("Et*2*2|t|t|tL", 4, "chained-count", "product"),
        ("*2Et|t|t|tL", 4, "nothing-to-repeat", "repeats nothing"),
        ("Et2|t|t|tL", 4, "count-without-star", "'t*2'"),
        ("Et*2.0|t|t|tL", 4, "unexpected-char", "'.'"),
        ("E|t**2|t|tL", 4, "double-star", "single '*'"),
        ("Et*-1|t|t|tL", 4, "signed-count", "without sign"),
        ("Et|t|t\n|tL", 4, "whitespace", "'\\n'"),
        ("Et*2|t*2|t*3|tL", 3, "stages-vs-pp", "e.g. 3 or 6"),
        ("tE|t|t|tL", 4, "first-not-embedding", "start the layout with E"),
        ("|||", 4, "no-layers", "no layers"),
        ("Et*10000000|tL", 2, "too-large", "expands past"),
    ],
)
def test_each_refusal_names_the_problem_and_the_fix(
    text: str, pp: int, rule: str, words: str
) -> None:
    with pytest.raises(L.LayoutError) as refused:
        L.parse(text, pp)
    assert refused.value.rule == rule
    assert words in str(refused.value) and "\n" not in str(refused.value)


def test_validation_refusals_quote_megatrons_own_words() -> None:
    with pytest.raises(
        L.LayoutError, match=r"has 8 transformer layers \(t\) but the model has 9: add 1 't'"
    ):
        L.parse("Et*2|t*2|t*3|tL", 4, num_layers=9)
    with pytest.raises(
        L.LayoutError, match="use vpp 2 .*'virtual_pipeline_model_parallel_size conflicts"
    ):
        L.parse("Et|t|t|tL", 2, vpp=3)
    golden = {c["id"]: c for c in CASES}
    said = golden["first-not-embedding"]["error"]["message"]
    assert L.MEGATRON_WORDS["first-not-embedding"] in said


def test_lint_says_what_megatrons_runtime_refuses_or_is_reported_to_hang_on() -> None:
    def rules(text: str, pp: int, **kw: bool) -> set[str]:
        return {f.rule for f in L.lint(L.parse(text, pp), **kw)}

    assert rules("Et*2|t*2|t*3|tL", 4) == set()
    assert "vpp-needs-pp" in rules("Et*2|t*2L", 1)
    assert "vpp-needs-pp3" in rules("Et|t|t|tL", 2, overlap_p2p_comm=False)
    assert "vpp-needs-pp3" not in rules("Et|t|t|tL", 2)
    assert {"embedding-not-first-stage", "empty-stage"} <= rules("|Et*3|t*4|t*4L", 4)
    assert {"loss-not-last-stage", "empty-stage", "last-rank-no-layer"} <= rules("Et*4|t*4L|", 3)
    assert "last-rank-no-layer" in rules("Et*3|t*3|t*2|L", 4)
    assert "empty-stage" in rules("Et|(tt|)*29|L", 16)
    assert "comma-in-count" in rules("Et*1,2|t*12L", 2)
    assert "count-after-group-count" in rules("E(t)*2*3|tL", 2)
    hang = next(f for f in L.lint(L.parse("Et*3|t*3|t*2|L", 4)) if f.rule == "last-rank-no-layer")
    assert hang.severity == "warning" and "Megatron-LM#1852" in hang.source  # reported, not proven


def test_megatrons_quirks_are_kept() -> None:
    assert L.expand("t*1,2") == [["decoder"] * 12]
    assert L.expand("(t)*2*3") == [["decoder"] * 4]
    assert L.expand("t|*3") == [["decoder"], [], [], []]
    assert L.expand("E(x)*0L") == [["embedding", "loss"]]
    assert L.expand("") == [[]]


# -- --layout as vppctl's explicit split ------------------------------------------------


def test_a_layout_is_an_explicit_split_with_its_warnings() -> None:
    layout, warnings = L.layout_split("Et*3|t*4|t*4|t*3L", 4, None, 14)
    assert layout.decoders_per_stage() == (3, 4, 4, 3) and layout.vpp == 1
    assert warnings == []
    layout, warnings = L.layout_split("Et*1,2|t*2|t*2|t*2L", 2, 2, 18)
    assert layout.decoders_per_stage() == (12, 2, 2, 2)
    assert warnings and "sits inside a count" in warnings[0]


@pytest.mark.parametrize(
    ("text", "pp", "vpp", "n", "words"),
    [
        (
            "Et*3|t*3|t*2|L",
            4,
            None,
            8,
            "virtual stage 3 (rank 3, chunk 0) holds no transformer layer",
        ),
        # the last rank without a transformer layer: the reported hang, with its source
        ("Et*3|t*3|t*2|L", 4, None, 8, "last rank 3 then holds no transformer or MTP layer"),
        ("Et*3|t*3|t*2|L", 4, None, 8, "Megatron-LM#1852"),
        # an empty stage elsewhere: Megatron runs it, vppctl's segments are never empty
        ("Et*4|t*4||tL", 4, None, 9, "virtual stage 2 (rank 2, chunk 0) holds no"),
        ("Et*4|t*4||tL", 4, None, 9, "Megatron runs that, and vppctl"),
        ("Et*2|t*2L", 1, None, 4, "Megatron refuses interleaving without pipeline parallelism"),
        ("Et*2|t*2|t*3|tL", 4, None, 9, "the model has 9"),
        ("Et*2|t*2|t*3|tL", 4, 2, 8, "use vpp 1"),
    ],
)
def test_a_layout_vppctl_cannot_split_by_is_refused_naming_the_option(
    text: str, pp: int, vpp: int | None, n: int, words: str
) -> None:
    with pytest.raises(L.LayoutError) as refused:
        L.layout_split(text, pp, vpp, n)
    assert str(refused.value).startswith(f"--layout {text!r}: ") and words in str(refused.value)


def test_random_strings_against_a_live_megatron() -> None:
    """Opt-in (megatron-core installed, as for tests/support/layout_goldens.py): 5,000
    random strings expand as Megatron's own parse_str_to_list expands them."""
    mod = pytest.importorskip("megatron.core.transformer.pipeline_parallel_layer_layout")
    reference = mod.PipelineParallelLayerLayout.parse_str_to_list
    rng = random.Random(33)
    alphabet = "EtmL|||((()))***,,0123456789 xT\n٣"
    for _ in range(5_000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        if re.search(r"\d{4,}", s.replace(",", "")):
            continue  # Megatron's own expansion has no bound
        try:
            want = [[t.name for t in stage] for stage in reference(s)]
        except AssertionError:
            want = None
        try:
            got = L.expand(s)
        except L.LayoutError:
            got = None
        assert got == want, s
