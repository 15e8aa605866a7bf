"""Write tests/data/layouts/megatron.json: layouts parsed by Megatron-Core itself.

Not collected by pytest (no ``test_`` prefix); opt-in, in a venv of its own holding
torch (CPU) and megatron-core installed with ``--no-deps`` (plus numpy and packaging):

    python -m venv /tmp/ref && /tmp/ref/bin/pip install torch numpy packaging
    /tmp/ref/bin/pip install --no-deps megatron-core==0.16.1
    /tmp/ref/bin/python tests/support/layout_goldens.py

`tests/convert/test_layout.py` compares vppctl's parser (`vppctl/plan/layout.py`) with
every case, and the versions recorded here.

Every case goes through the path a training run takes:
``TransformerConfig.__post_init__`` (megatron/core/transformer/transformer_config.py), which
parses the string with ``PipelineParallelLayerLayout.from_str`` (parse_str_to_list, then the
1-D -> [pp_rank][vpp_rank] reshaping in ``__init__``), checks the user's
virtual_pipeline_model_parallel_size against the detected one, and calls
``validate_layer_layout(num_layers, mtp_num_layers)``. For each case the JSON holds the input
(layout, pp, vpp, num_layers, mtp_num_layers), the string-order stage lists
(``parse_str_to_list``, or its error), and either the per-(pp_rank, vpp_rank) layer-type
lists exactly as ``layout.layout`` holds them (LayerType names) plus the decoder / MTP layer
ids per (pp_rank, vpp_rank) from ``get_layer_id_list``, or the exception type and message.

Only ``parallel_state.get_virtual_pipeline_model_parallel_world_size`` is patched (it is a
global set by initialize_model_parallel; get_layer_offset reads it); nothing else is mocked.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import sys
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")
logging.disable(logging.CRITICAL)

import torch  # noqa: E402
from megatron.core import package_info, parallel_state  # noqa: E402
from megatron.core.transformer.enums import LayerType  # noqa: E402
from megatron.core.transformer.pipeline_parallel_layer_layout import (  # noqa: E402
    PipelineParallelLayerLayout,
)
from megatron.core.transformer.transformer_config import TransformerConfig  # noqa: E402

# (id, layout, pp, vpp passed by the user (None = not set), num_layers, mtp_num_layers, note)
CASES: list[tuple[str, str, int, int | None, int, int | None, str]] = [
    # ---- valid --------------------------------------------------------------------------
    (
        "vppctl-plan-example-pp4",
        "Et*2|t*2|t*3|tL",
        4,
        None,
        8,
        None,
        "docs/plan.md's balanced split, pp 4",
    ),
    (
        "same-string-pp2-vpp2",
        "Et*2|t*2|t*3|tL",
        2,
        None,
        8,
        None,
        "4 stages on pp 2: vpp 2 detected",
    ),
    ("same-string-vpp-given", "Et*2|t*2|t*3|tL", 2, 2, 8, None, "user vpp equals detected"),
    ("plain-pp1", "Et*4L", 1, None, 4, None, "pp 1, one stage"),
    (
        "pp1-two-stages",
        "Et*2|t*2L",
        1,
        None,
        4,
        None,
        "pp 1 with 2 stages: vpp 2 (runtime refuses pp 1 + vpp)",
    ),
    ("vpp4", "Et|t|t|t|t|t|t|tL", 2, None, 8, None, "8 stages on pp 2"),
    (
        "docstring-mtp",
        "Ettt|(tt|)*29,m|L",
        16,
        None,
        61,
        1,
        "parse_str_to_list docstring example, MTP standalone",
    ),
    ("issue1852-balanced", "Et|(tt|)*30L", 16, None, 61, None, "Megatron-LM#1852's working layout"),
    (
        "issue1852-empty-stage",
        "Et|(tt|)*29|L",
        16,
        None,
        59,
        None,
        "Megatron-LM#1852: reported to fail at run time; parser accepts",
    ),
    (
        "mcore-test-list-as-string",
        "E|t|tt|t||t|t|ttL",
        4,
        2,
        8,
        None,
        "tests/unit_tests/pipeline_parallel/test_pipeline_layout.py layout, empty stage",
    ),
    ("mcore-test-mtp-last", "E|t*3|(t|)*5mL", 4, 2, 8, 1, "Megatron's test: mtp in the last stage"),
    (
        "mcore-test-mtp-2nd-last",
        "E|t*3|(t|)*4tm|L",
        4,
        2,
        8,
        1,
        "Megatron's test: mtp with a decoder in 2nd-last stage",
    ),
    (
        "mcore-test-mtp-alone",
        "E|t*3|(t|)*3tt|m|L",
        4,
        2,
        8,
        1,
        "Megatron's test: mtp alone in 2nd-last stage",
    ),
    ("plain-pp4-uneven", "Et*3|t*4|t*4|t*4L", 4, None, 15, None, "uneven plain PP"),
    ("commas-cosmetic", "E,t,t|t,t|t,t|t,t,L", 4, None, 8, None, "commas anywhere are dropped"),
    (
        "comma-inside-count",
        "Et*1,2|t*12L",
        2,
        None,
        24,
        None,
        "quirk: commas dropped first, so t*1,2 is t*12",
    ),
    ("group-then-count", "E(t)*2*3|tL", 2, None, 5, None, "quirk: (t)*2*3 -> tt*3 -> 4 t, not 6"),
    (
        "pipe-repeated",
        "Et*2|*2t*2L",
        3,
        None,
        4,
        None,
        "quirk: |*2 is two separators (an empty stage)",
    ),
    ("group-count-zero", "E(t|)*0t*4|t*4L", 2, None, 8, None, "(...)*0 vanishes"),
    (
        "bad-char-times-zero",
        "E(x)*0t|tL",
        2,
        None,
        2,
        None,
        "quirk: an unknown char under *0 vanishes before the check",
    ),
    ("leading-zero-count", "Et*04|t*04L", 2, None, 8, None, "t*04 is 4"),
    (
        "leading-empty-stage",
        "|Et*3|t*4|t*4L",
        4,
        None,
        11,
        None,
        "rank 0 holds nothing; E is still first in order",
    ),
    (
        "trailing-empty-stage",
        "Et*4|t*4L|",
        3,
        None,
        8,
        None,
        "last rank holds nothing; L still last in order",
    ),
    (
        "last-rank-only-loss",
        "Et*3|t*3|t*2|L",
        4,
        None,
        8,
        None,
        "last rank: no transformer layer (issue 33's hang rule)",
    ),
    (
        "group-with-inner-count",
        "E|(t*2|)*3tL",
        5,
        None,
        7,
        None,
        "x*n inside a group expands after the group",
    ),
    ("group-chain-pipe", "E(tt|)*1*2tL", 3, None, 3, None, "quirk: (tt|)*1*2 -> tt|*2 -> tt||"),
    ("pp8-long", "Et*3|(t*4|)*6,t*3L", 8, None, 30, None, "plain pp 8"),
    ("mtp-zero-declared", "Et|t|t|tL", 4, None, 4, 0, "mtp_num_layers 0 and no m"),
    ("large-count", "Et*63|t*64|t*64|t*63L", 4, None, 254, None, "multi-digit counts"),
    ("many-groups", "(Et|)*1(t|)*5,tL", 7, None, 7, None, "two groups"),
    # ---- invalid ------------------------------------------------------------------------
    ("stages-not-multiple-of-pp", "Et*2|t*2|t*3|tL", 3, None, 8, None, "4 stages, pp 3"),
    ("vpp-conflict", "Et|t|t|tL", 2, 3, 4, None, "4 stages / pp 2 = 2, user vpp 3"),
    ("vpp-conflict-given-1", "Et|t|t|tL", 2, 1, 4, None, "user vpp 1 but 2 stages per rank"),
    ("stage-count-vs-pp-vpp", "Et|t|t|t|t|tL", 2, 2, 6, None, "6 stages, pp 2 x vpp 2 = 4"),
    ("decoder-count-mismatch", "Et*2|t*2|t*3|tL", 4, None, 9, None, "8 t, num_layers 9"),
    ("first-not-embedding", "tE|t|t|tL", 4, None, 4, None, "t before E"),
    ("last-not-loss", "Et|t|t|Lt", 4, None, 4, None, "t after L"),
    ("no-loss", "Et|t|t|t", 4, None, 4, None, "no L"),
    ("no-embedding", "t|t|t|tL", 4, None, 4, None, "no E"),
    ("two-embeddings", "EEt|t|t|tL", 4, None, 4, None, "E twice"),
    ("two-losses", "Et|tL|t|tL", 4, None, 4, None, "L twice"),
    ("space", "Et | t|t|tL", 4, None, 4, None, "whitespace"),
    ("newline", "Et|t\n|t|tL", 4, None, 4, None, "newline"),
    ("tab", "\tEt|t|t|tL", 4, None, 4, None, "tab"),
    ("lowercase", "et|t|t|tl", 4, None, 4, None, "e and l are not layer chars"),
    ("uppercase-t", "ET|T|T|TL", 4, None, 4, None, "T is not a layer char"),
    ("unknown-char", "Ex|t|t|tL", 4, None, 4, None, "x"),
    ("nested-parens", "E((t|)*2)*2tL", 5, None, 5, None, "nested (...)*n"),
    ("unclosed-paren", "E(t|*2tL", 3, None, 3, None, "( never closed"),
    ("stray-close-paren", "Et)|t|t|tL", 4, None, 4, None, ") without ("),
    ("empty-group", "E()*2|t|t|tL", 4, None, 3, None, "()*2"),
    ("group-without-count", "E(t|)t|tL", 3, None, 3, None, "(...) not followed by *n"),
    ("star-without-count", "Et*|t|t|tL", 4, None, 4, None, "t*"),
    ("chained-count", "Et*2*2|t|t|tL", 4, None, 7, None, "t*2*2"),
    ("star-at-start", "*2Et|t|t|tL", 4, None, 4, None, "*2 with nothing before"),
    ("double-star", "E|t**2|t|tL", 4, None, 4, None, "t**2"),
    ("digit-without-star", "Et2|t|t|tL", 4, None, 5, None, "t2"),
    ("negative-count", "Et*-1|t|t|tL", 4, None, 3, None, "t*-1"),
    ("decimal-count", "Et*2.0|t|t|tL", 4, None, 5, None, "t*2.0"),
    ("empty-string", "", 1, None, 0, None, "no layers at all"),
    ("only-separators", "|||", 4, None, 0, None, "four empty stages"),
    ("mtp-undeclared", "Et|t|tm|L", 4, None, 3, None, "m but mtp_num_layers None"),
    ("mtp-count-mismatch", "Et|t|tm|L", 4, None, 3, 2, "one m, mtp_num_layers 2"),
    ("decoder-after-mtp", "Et|m|t|tL", 4, None, 3, 1, "t after m"),
    ("mtp-not-last-chunk", "Ett|tm|L|", 2, None, 3, 1, "m on rank 1 chunk 0 of 2"),
    ("mtp-split", "Et|t|tm|mL", 4, None, 3, 2, "2 MTP layers in two virtual stages"),
    (
        "megatron-help-example-pp4",
        "E|(t|)*3,m|m||L",
        4,
        None,
        3,
        2,
        "--pipeline-model-parallel-layout help text's own example",
    ),
    ("megatron-help-example-pp8", "E|(t|)*3,m|m||L", 8, None, 3, 2, "same, pp 8"),
    ("pp-zero", "Et|tL", 0, None, 2, None, "pp 0"),
    ("count-mismatch-large", "Et*100|tL", 2, None, 8, None, "101 t, num_layers 8"),
]

NAMES = {t: t.name for t in LayerType}


def config_for(
    layout: str, pp: int, vpp: int | None, num_layers: int, mtp: int | None
) -> TransformerConfig:
    return TransformerConfig(
        num_layers=num_layers,
        hidden_size=64,
        num_attention_heads=4,
        pipeline_model_parallel_size=pp,
        virtual_pipeline_model_parallel_size=vpp,
        pipeline_dtype=torch.float32,
        pipeline_model_parallel_layout=layout,
        mtp_num_layers=mtp,
    )


def run_case(
    cid: str, layout: str, pp: int, vpp: int | None, num_layers: int, mtp: int | None, note: str
) -> dict:
    out: dict = {
        "id": cid,
        "layout": layout,
        "pp": pp,
        "vpp": vpp,
        "num_layers": num_layers,
        "mtp_num_layers": mtp,
        "note": note,
    }
    try:
        out["stages"] = [
            [NAMES[t] for t in st] for st in PipelineParallelLayerLayout.parse_str_to_list(layout)
        ]
    except Exception as e:
        out["stages"] = None
        out["parse_error"] = {"type": type(e).__name__, "message": str(e)}
    PipelineParallelLayerLayout.from_str.cache_clear()
    try:
        cfg = config_for(layout, pp, vpp, num_layers, mtp)
    except Exception as e:
        out["valid"] = False
        out["error"] = {"type": type(e).__name__, "message": str(e)}
        return out
    lay = cfg.pipeline_model_parallel_layout
    v = lay.virtual_pipeline_model_parallel_size
    original = parallel_state.get_virtual_pipeline_model_parallel_world_size
    parallel_state.get_virtual_pipeline_model_parallel_world_size = lambda: v if v > 1 else None
    try:
        ids = {
            kind: [
                [lay.get_layer_id_list(layer_type=lt, vp_stage=c, pp_rank=r) for c in range(v)]
                for r in range(pp)
            ]
            for kind, lt in (("decoder", LayerType.decoder), ("mtp", LayerType.mtp))
        }
    finally:
        parallel_state.get_virtual_pipeline_model_parallel_world_size = original
    out.update(
        valid=True,
        detected_vpp=v,
        config_vpp=cfg.virtual_pipeline_model_parallel_size,
        mtp_standalone=cfg.mtp_standalone,
        layout_by_rank=[
            [[NAMES[t] for t in lay.layout[r][c]] for c in range(v)] for r in range(pp)
        ],
        decoder_ids=ids["decoder"],
        mtp_ids=ids["mtp"],
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = Path(__file__).resolve().parents[1] / "data" / "layouts" / "megatron.json"
    ap.add_argument("-o", "--output", default=str(default))
    args = ap.parse_args()
    ids = [c[0] for c in CASES]
    assert len(ids) == len(set(ids)), "duplicate case id"
    cases = [run_case(*c) for c in CASES]
    data = {
        "generator": "tests/support/layout_goldens.py",
        "versions": {
            "megatron-core": package_info.__version__,
            "torch": torch.__version__,
            "python": platform.python_version(),
        },
        "source": (
            "megatron/core/transformer/transformer_config.py TransformerConfig.__post_init__; "
            "megatron/core/transformer/pipeline_parallel_layer_layout.py "
            "PipelineParallelLayerLayout.parse_str_to_list/__init__/validate_layer_layout/get_layer_id_list"
        ),
        "counts": {
            "cases": len(cases),
            "valid": sum(c["valid"] for c in cases),
            "invalid": sum(not c["valid"] for c in cases),
        },
        "cases": cases,
    }
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {args.output}: {data['counts']}", file=sys.stderr)
    for c in cases:
        tag = "ok " if c["valid"] else "ERR"
        extra = (
            c["layout_by_rank"]
            if c["valid"]
            else f"{c['error']['type']}: {c['error']['message'][:90]}"
        )
        print(f"{tag} {c['id']:<28} {extra}", file=sys.stderr)


if __name__ == "__main__":
    main()
