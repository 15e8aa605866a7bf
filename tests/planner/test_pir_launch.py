"""How a split runs on Paddle's PIR pipeline (vppctl/planner/pir_launch.py): by Paddle's
strategy alone (the stage mesh of each layer said), with `vppctl.paddle.pir_plan` (the
convert command and the two lines of Python said), or not (the reason said); per
candidate, Paddle's launch settings for a split that needs the plan.

The family: every split of 8 and 12 layers at pp 2, vpp 1, 2 and 4, loop and V placed,
from stage meshes holding the layers evenly or not, is classified, and the class is the
one its rule gives: Paddle's round-robin deal of the stage's layers (strategy), any other
loop-placed split at vpp >= 2 (pir_plan), V placement (cannot).
"""

from __future__ import annotations

import itertools

import pytest

from vppctl.planner import PIR_HOWS, LaunchCandidate, PirInput, pir_split, pir_split_launch
from vppctl.planner.pir import dealt_layers
from vppctl.planner.pir_launch import (
    pir_plan_lines,
    pir_plan_settings,
    plan_file_of,
    stage_mesh_text,
)


def splits(n: int, parts: int) -> list[tuple[int, ...]]:
    """Every split of n layers over `parts` virtual stages, at least one each."""
    return [
        tuple(b - a for a, b in zip((0, *cuts), (*cuts, n)))
        for cuts in itertools.combinations(range(1, n), parts - 1)
    ]


def expected(counts: tuple[int, ...], pp: int, vpp: int, placement: str) -> str:
    if vpp > 1 and placement != "loop":
        return "cannot"
    per_stage = [list(counts[s::pp]) for s in range(pp)]  # loop: stage s's chunks in order
    if all(chunks == dealt_layers(sum(chunks), vpp) for chunks in per_stage):
        return "strategy"
    return "pir_plan" if vpp >= 2 else "cannot"


@pytest.mark.parametrize("layers", [8, 12])
@pytest.mark.parametrize("vpp", [1, 2, 4])
@pytest.mark.parametrize("placement", ["loop", "v"])
def test_every_split_runs_the_one_way_its_rule_gives(layers: int, vpp: int, placement: str) -> None:
    pp = 2
    seen = set()
    for counts in splits(layers, pp * vpp):
        for held in ((layers // 2, layers // 2), (layers // 2 + 1, layers // 2 - 1)):
            split = pir_split(pp, vpp, placement, counts, held)  # type: ignore[arg-type]
            launch = pir_split_launch(split, "p.vpp.json", ("vppctl", "convert", "p.json"))
            assert launch.how == expected(counts, pp, vpp, placement), (counts, placement)
            assert launch.how in PIR_HOWS and launch.runs == (launch.how != "cannot")
            seen.add(launch.how)
            if launch.how == "strategy":
                assert launch.text.startswith("strategy only: layers 0") and not launch.python
                assert ("not the program's" in launch.text) == (split.stage_layers != held)
            elif launch.how == "pir_plan":
                assert launch.python == pir_plan_lines("p.vpp.json")
                assert "`vppctl convert p.json`" in launch.text and launch.reason is None
            else:
                assert launch.reason and launch.text == f"cannot: {launch.reason}"
    if placement == "loop" and vpp > 1 and layers > pp * vpp:  # else one split: 1 layer each
        assert seen == {"strategy", "pir_plan"}
    elif placement == "v" and vpp > 1:
        assert seen == {"cannot"}


def test_the_stage_mesh_of_each_layer_and_the_plan_s_file() -> None:
    assert stage_mesh_text((6, 6)) == "layers 0–5 on stage 0's mesh, 6–11 on stage 1's"
    assert stage_mesh_text((1, 3, 0)) == (
        "layers 0 on stage 0's mesh, 1–3 on stage 1's, none on stage 2's"
    )
    assert plan_file_of("prog.json") == "prog.vpp.json"
    assert plan_file_of("runs/prog") == "runs/prog.vpp"
    assert pir_plan_lines("p.json") == (
        'with vppctl.paddle.pir_plan("p.json"):',
        "    dist_model.train()",
    )


def candidate(schedule: str, counts: tuple[int, ...], m: int = 8) -> LaunchCandidate:
    return LaunchCandidate(
        schedule=schedule,  # type: ignore[arg-type]
        pp=2,
        vpp=len(counts) // 2,
        placement="loop",
        micro_batches=m,
        group_size=2,
        layers_per_segment=counts,
        layer_class="DecoderLayer",
        micro_batch_size=1,
    )


def test_a_candidate_that_needs_the_plan_gets_the_strategy_and_the_two_lines() -> None:
    pir = PirInput(stage_layers=(4, 4), vpp_seg_method="DecoderLayer")
    command = ("vppctl", "convert", "p.json", "--vpp", "2", "--split", "balanced")
    got = pir_plan_settings(candidate("vpp", (1, 3, 3, 1)), pir, "p.vpp.json", command)
    assert got is not None and got.runs
    fields = dict(got.settings)
    assert fields["strategy.pipeline.schedule_mode"] == "VPP"
    assert (
        fields["strategy.pipeline.vpp_degree"] == 2
        and fields["strategy.pipeline.accumulate_steps"] == 8
    )
    assert 'with vppctl.paddle.pir_plan("p.vpp.json"): dist_model.train()' in got.note
    # its schedule still has to be one Paddle's PIR pipeline runs, at m >= pp
    for schedule, m, why in (
        ("interleaved-zb", 8, "no interleaved-zb"),
        ("vpp", 1, "accumulate_steps >= pp"),
    ):
        refused = pir_plan_settings(
            candidate(schedule, (1, 3, 3, 1), m), pir, "p.vpp.json", command
        )
        assert refused is not None and not refused.runs and why in refused.note
    # Paddle's own split needs no plan: the PIR strategy says it (vppctl.planner.pir)
    assert pir_plan_settings(candidate("vpp", (2, 2, 2, 2)), pir, "p.vpp.json", command) is None
