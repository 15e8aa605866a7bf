"""`plan` on a PIR program (issue 25, item 2): the Paddle PIR strategy of each candidate.

vppctl writes no PIR program; Paddle's own completion splits it (`complete_chunk_id`),
alone or under `vppctl.paddle.pir_plan`. So for a PIR program every row of `plan` says
how Paddle launches its split (issue 35, item 3): strategy only (and where the model puts
its layers), with `pir_plan` (the command writing the plan file, and two lines of Python),
or cannot and why; every candidate's Paddle launch settings are the PIR strategy that
runs it, or why Paddle cannot. The facts are checked
against the reference: the schedule_modes Paddle 3.3.1 runs on a PIR program are read
from its passes, the strategy round-trips into a real `paddle.distributed.Strategy`, and
on the checked-in programs (tests/data/pir_reference/) the strategy `plan` gives is the one
Paddle's own completion was built with, and its plan is that completion, op by op.
"""

from __future__ import annotations

import itertools
import json
from functools import cache
from pathlib import Path
from typing import Any

import paths
import pytest
from commandline import invoke
from pir_cases import CASES, PARITY, PP, launched, parity, planned, program, reference
from pir_programs import CASES as BUILDS

from vppctl.convert import Planned
from vppctl.plan import PlanOptions, paddle_layer, paddle_seg_method, place
from vppctl.planner import (
    PIR_HOWS,
    PIR_MODES,
    PIR_SCHEDULE_MODES,
    PirInput,
    PirMismatch,
    PirStrategy,
    pir_split,
    pir_split_launch,
)
from vppctl.planner.pir import (
    candidate_strategy,
    dealt_layers,
    pir_paddle_settings,
)
from vppctl.schedule.runtimes import PADDLE_MODES

PIPELINE = "strategy.pipeline."
# The pipeline fields Paddle's PIR completion reads (`pir_pass.complete_chunk_id`).
COMPLETION_FIELDS = ("enable", "schedule_mode", "pp_degree", "vpp_degree", "vpp_seg_method")


@cache
def plan_json(case: str, *args: str) -> dict[str, Any]:
    """`vppctl plan CASE_plain.json -m 8 --vpp 2 ARGS --json` (run once per arguments)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{case}_plain.json"
        path.write_bytes(reference(case, "plain"))
        r = invoke("plan", str(path), "-m", "8", "--vpp", "2", *args, "--json", exit_code=None)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)  # type: ignore[no-any-return]


def pipeline_fields(launch: dict[str, Any]) -> dict[str, Any]:
    return {k.removeprefix(PIPELINE): v for k, v in launch["settings"].items()}


def as_built(case: str, data: dict[str, Any]) -> dict[str, Any]:
    """The candidate of `plan`'s JSON whose strategy is the one Paddle's completion in
    tests/data/pir_reference/ was built with: VPP at vpp 2, the layers where the model puts
    them (no move)."""
    split = {(v["vpp"], v["placement"], v["split"]): v["paddle_pir"] for v in data["conversions"]}
    found = []
    for c in data["candidates"]:
        paddle = c["launch"]["paddle"]
        if paddle["runs"] and not split[c["vpp"], c["placement"], c["split"]]["moves_layers"]:
            fields = pipeline_fields(paddle)
            if fields["schedule_mode"] == "VPP" and fields["vpp_degree"] == 2:
                found.append(c)
    assert found, case
    return found[0]


# -- which schedule_modes Paddle runs on a PIR program -----------------------------------------


@pytest.mark.paddle
def test_paddle_runs_fthenb_1f1b_and_vpp_on_a_pir_program_only() -> None:
    """Read from Paddle 3.3.1 itself: the engine's PIR pipeline pass refuses every other
    schedule_mode, and only those three passes split a PIR program into jobs (the others
    inherit the base's `_partial_pir_programs`, which returns nothing), though every pass
    builds a job list."""
    import paddle
    from paddle.distributed.auto_parallel.static import pir_pass
    from paddle.distributed.passes.pass_base import PassBase
    from paddle.distributed.passes.pipeline_scheduler_pass.pipeline_pass_base import (
        PipelinePassBase,
    )

    taken, splits = set(), set()
    for mode in set(PADDLE_MODES.values()):
        strategy = paddle.distributed.Strategy()
        strategy.pipeline.schedule_mode = mode
        try:
            pir_pass.pipeline_pass([None], [None], strategy.pipeline)
        except AssertionError as e:
            assert "only support FThenB, 1F1B and VPP" in str(e)
        except Exception:  # past the mode check, on a program that is no program
            taken.add(mode)
        scheduler = PassBase._REGISTERED_PASSES[f"pipeline_scheduler_{mode}"]
        assert scheduler._create_job_list is not PipelinePassBase._create_job_list
        if scheduler._partial_pir_programs is not PipelinePassBase._partial_pir_programs:
            splits.add(mode)
    assert taken == splits == set(PIR_MODES)
    assert set(PIR_SCHEDULE_MODES.values()) == set(PIR_MODES)
    assert PIR_SCHEDULE_MODES["vpp"] == "VPP"  # Paddle's VPP order: vppctl's vpp


# -- plan's JSON on the checked-in programs ----------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_plans_strategy_is_paddles_completion_op_by_op(case: str) -> None:
    """The strategy `plan` gives for the program as it is placed (VPP, vpp 2, no layer
    moved) is the one Paddle's completion in tests/data/pir_reference/ was built with, and the
    candidate's plan is that completion: every layer op, grad op and recompute copy on the
    stage and chunk Paddle gave it."""
    data = plan_json(case)
    assert data["pir"]["stage_layers"] == list(BUILDS[case].stage_counts())
    c = as_built(case, data)
    fields = pipeline_fields(c["launch"]["paddle"])
    assert fields == {
        "enable": True,
        "schedule_mode": "VPP",
        "pp_degree": PP[case],
        "vpp_degree": 2,
        "vpp_seg_method": data["pir"]["vpp_seg_method"],
        "accumulate_steps": 8,
        "micro_batch_size": 1,
    }
    assert (
        data["pir"]["vpp_seg_method"]
        == {"gpt": "DecoderLayer", "llama": "LlamaDecoderLayer"}[BUILDS[case].model]
    )  # the layer class, as tests/support/pir_programs.py set it
    assert c["command"] is None and c["argv"] is None
    p = planned(program(case, "plain"), 2, c["split"])
    assert [len(s.layers) for s in p.plan.segments] == c["layers_per_segment"]
    result = parity(program(case, "plain"), program(case, "paddlevpp"), split=c["split"])
    assert not result.differ and (result.forward, result.backward) == PARITY[case]


@pytest.mark.paddle
@pytest.mark.parametrize("case", CASES)
def test_plans_strategy_round_trips_into_the_strategy_paddle_was_built_with(case: str) -> None:
    """Set on a real `paddle.distributed.Strategy`, the settings read back as given, and the
    fields Paddle's completion reads equal those of the strategy tests/support/pir_programs.py built
    the checked-in completion with."""
    import paddle
    from pir_programs import _strategy

    fields = pipeline_fields(as_built(case, plan_json(case))["launch"]["paddle"])
    defaults = paddle.distributed.Strategy().pipeline.to_dict()
    assert set(fields) <= set(defaults)  # Paddle ignores an unknown key: none may be
    ours = paddle.distributed.Strategy({"pipeline": fields}).pipeline.to_dict()
    assert {k: ours[k] for k in fields} == fields
    built = _strategy(BUILDS[case], 2).pipeline.to_dict()
    assert {k: ours[k] for k in COMPLETION_FIELDS} == {k: built[k] for k in COMPLETION_FIELDS}


def test_every_candidate_of_a_pir_program_says_how_paddle_runs_it_or_why_not() -> None:
    data = plan_json("gpt_keep_pp2_v2", "--placement", "loop,v")
    assert data["candidates"]
    for c in data["candidates"]:
        paddle, how = c["launch"]["paddle"], c["launch"]["paddle_pir"]
        assert paddle["runs"] == bool(paddle["settings"]) and paddle["note"]
        assert how["how"] in PIR_HOWS and how["text"]
        if paddle["runs"]:
            assert pipeline_fields(paddle)["schedule_mode"] in PIR_MODES
            assert c["placement"] == "loop" and how["how"] != "cannot"
        # a command exactly where the split needs the plan file vppctl.paddle.pir_plan reads
        assert (c["command"] is not None) == (how["how"] == "pir_plan")
        assert set(c["launch"]) == {"paddle", "megatron", "torch", "paddle_pir"}  # one structure
    best = data["pir"]["best"]
    assert data["candidates"][best]["launch"]["paddle"]["runs"]
    assert not any(c["launch"]["paddle"]["runs"] for c in data["candidates"][:best])


# -- each row of a PIR program says how Paddle launches it (issue 35, item 3) ------------------


@cache
def keep_plan() -> tuple[dict[str, Any], str, str]:
    """`plan` of gpt_keep (7 + 5 layers on pp 2) at vpp 2 and 4, every runtime's schedule:
    its JSON, its table and the program's path (the table and the commands name it)."""
    import tempfile

    tmp = tempfile.mkdtemp(prefix="vppctl-pir-rows-")
    path = Path(tmp) / "gpt_keep.json"
    path.write_bytes(reference("gpt_keep_pp2_v2", "plain"))
    args = ["plan", str(path), "-m", "8", "--vpp", "2,4", "--runtime", "any", "--p2p-cost", "0"]
    data = json.loads(invoke(*args, "--json").stdout)
    return data, invoke(*args, "--top", "100").stdout, str(path)


def keep_row(vpp: int, placement: str, split: str) -> dict[str, Any]:
    data = keep_plan()[0]
    (row,) = [
        v
        for v in data["conversions"]
        if (v["vpp"], v["placement"], v["split"]) == (vpp, placement, split)
    ]
    return row  # type: ignore[no-any-return]


def test_a_row_paddles_own_completion_makes_says_strategy_only_and_each_layers_mesh() -> None:
    data, out, _ = keep_plan()
    keep = keep_row(2, "loop", "keep")
    assert keep["paddle_pir"] == {
        "takes": True,
        "reason": None,
        "stage_layers": [7, 5],
        "chunk_layers": [[4, 3], [3, 2]],
        "moves_layers": False,
        "launch": "strategy",
        "python": [],
    }
    assert keep["command"] is None and keep["argv"] is None  # no plan file: the strategy only
    best = data["candidates"][keep["best"]]
    assert best["launch"]["paddle_pir"]["how"] == "strategy"
    assert best["layouts"]["paddle_stage_per_layer"] == [0] * 7 + [1] * 5  # what the row says
    assert (
        "Paddle (PIR), strategy only: layers 0-6 on stage 0's mesh, 7-11 on stage 1's; "
        "vpp_degree 2 deals them 4+3 | 3+2; Paddle runs it best as vpp at m 8" in out
    )
    uniform = keep_row(2, "loop", "uniform")["paddle_pir"]
    assert uniform["launch"] == "strategy" and uniform["moves_layers"]
    assert (
        "strategy only: layers 0-5 on stage 0's mesh, 6-11 on stage 1's; vpp_degree 2 deals "
        "them 3+3 | 3+3 (the program's stage meshes hold 7, 5: move layers in the model)" in out
    )


def test_a_row_paddles_completion_cannot_make_runs_with_pir_plan_and_says_its_two_lines(
    tmp_path: Path,
) -> None:
    """Balanced at vpp 4 deals stage 0's 6 layers 1+2+2+1, not 2+2+1+1 (R8): the row gives
    the `vppctl convert` that writes the plan file and the two lines of Python, and the plan
    file that command writes holds the row's split."""
    data, out, path = keep_plan()
    row = keep_row(4, "loop", "balanced")
    split = row["paddle_pir"]
    assert not split["takes"] and "deals a stage's 6 layers as 2+2+1+1" in split["reason"]
    assert split["chunk_layers"][0] == [1, 2, 2, 1] and split["launch"] == "pir_plan"
    plan_file = path.removesuffix(".json") + ".vpp.json"
    assert row["argv"][:2] == ["vppctl", "convert"] and row["argv"][-2:] == ["-o", plan_file]
    lines = [f'with vppctl.paddle.pir_plan("{plan_file}"):', "    dist_model.train()"]
    assert split["python"] == lines
    best = data["candidates"][row["best"]]
    launch = best["launch"]["paddle_pir"]
    assert (launch["how"], launch["python"], launch["rule"], launch["reason"]) == (
        "pir_plan",
        lines,
        "R8",
        None,
    )
    # the best Paddle runs is now this split (Paddle's strategy alone reached 1.060x)
    paddles = data["candidates"][data["pir"]["best"]]
    assert (paddles["vpp"], paddles["split"], paddles["schedule"]) == (4, "balanced", "vpp")
    assert paddles["launch"]["paddle"]["runs"]
    assert paddles["launch"]["paddle_pir"] == launch
    text = (
        "Paddle (PIR), with vppctl.paddle.pir_plan (Paddle's completion alone cannot make this "
        "split: R8); Paddle runs it best as vpp at m 8"
    )
    assert text in out
    at = out.index(text)
    shown = out[at:].splitlines()[1:4]
    assert shown == [f"    {row['command']}", *(f"    {x}" for x in lines)]
    # the command writes the plan of this very split
    written = tmp_path / "plan.json"
    invoke(*row["argv"][1:-1], str(written))
    plan = json.loads(written.read_text())
    sizes = [len(vs["layers"]) for vs in plan["virtual_stages"]]
    assert (plan["pp"], plan["vpp"], sizes) == (2, 4, row["layers_per_segment"])


def test_a_row_nothing_runs_says_cannot_and_why() -> None:
    data, out, _ = keep_plan()
    row = keep_row(2, "v", "uniform")
    assert row["paddle_pir"]["launch"] == "cannot" and row["paddle_pir"]["python"] == []
    assert row["command"] is None and row["argv"] is None
    for c in data["candidates"]:
        if c["placement"] == "v":
            launch = c["launch"]["paddle_pir"]
            assert launch["how"] == "cannot" and "no V-shaped schedule" in launch["reason"]
            assert not c["launch"]["paddle"]["runs"]
    assert (
        "Paddle (PIR) cannot: Paddle's PIR VPP pass runs virtual stage k on stage k % pp, chunk "
        "k // pp (loop placement) and has no V-shaped schedule: it cannot take v placement, "
        "nor can vppctl.paddle.pir_plan" in out
    )


HELD = PirInput(stage_layers=(4, 4), vpp_seg_method="DecoderLayer")


@pytest.mark.parametrize("placement", ["loop", "v"])
@pytest.mark.parametrize("vpp", [1, 2, 4])
def test_every_split_of_8_layers_on_pp_2_launches_the_way_its_rule_gives(
    vpp: int, placement: str
) -> None:
    """Over every split of 8 layers into pp * vpp segments (empty ones too): strategy only
    exactly where Paddle deals each stage's layers so (loop at vpp >= 2; any split at vpp 1);
    cannot for V placement (at vpp >= 2) and for an empty middle virtual stage; pir_plan
    otherwise."""
    n = 2 * vpp
    seen: set[str] = set()
    for cuts in itertools.combinations_with_replacement(range(9), n - 1):
        sizes = [b - a for a, b in zip((0, *cuts), (*cuts, 8))]
        got = pir_split_launch(2, vpp, placement, sizes, HELD)  # type: ignore[arg-type]
        by_chunk = [[0] * vpp, [0] * vpp]
        for k, size in enumerate(sizes):
            stage, chunk = place(k, 2, placement)  # type: ignore[arg-type]
            by_chunk[stage][chunk] = size
        paddle = all(c == dealt_layers(sum(c), vpp) for c in by_chunk)
        if vpp == 1 or (placement == "loop" and paddle):
            want = "strategy"
        elif placement == "v" or 0 in sizes[1:-1]:
            want = "cannot"
        else:
            want = "pir_plan"
        assert got.how == want, (sizes, got)
        assert bool(got.python) == (want == "pir_plan") and (got.reason is None) == got.runs
        seen.add(want)
    if vpp == 1:
        assert seen == {"strategy"}
    else:
        assert seen == ({"cannot"} if placement == "v" else set(PIR_HOWS))


def test_paddles_own_refusals_of_the_program_are_cannot_whatever_the_split() -> None:
    """Stage meshes that are not rank blocks: Paddle refuses before any split, and
    vppctl.paddle.pir_plan keeps its refusal."""
    swapped = PirInput(stage_layers=(4, 4), vpp_seg_method="DecoderLayer", stage_ranks=((1,), (0,)))
    for sizes in ((2, 2, 2, 2), (1, 3, 3, 1)):
        got = pir_split_launch(2, 2, "loop", sizes, swapped)
        assert got.how == "cannot" and got.reason and "get_pp_stage_by_rank" in got.reason
    ok = pir_split_launch(2, 2, "loop", (1, 3, 3, 1), HELD)
    assert ok.how == "pir_plan" and ok.rule == "R8"
    assert pir_split_launch(2, 2, "loop", (0, 4, 4, 4), HELD).how == "pir_plan"  # empty first
    assert pir_split_launch(2, 2, "loop", (4, 4, 4, 0), HELD).how == "pir_plan"  # empty last
    middle = pir_split_launch(2, 2, "loop", (4, 0, 4, 4), HELD)
    assert middle.how == "cannot" and "virtual stage 1 (stage 1, chunk 0) holds no layer" in (
        middle.reason or ""
    )


def test_a_legacy_programs_plan_has_no_pir_part() -> None:
    sample = paths.SAMPLE
    r = invoke("plan", str(sample), "-m", "8", "--vpp", "2", "--json")
    data = json.loads(r.stdout)
    assert data["pir"] is None and all(v["paddle_pir"] is None for v in data["conversions"])
    assert all(c["argv"][:2] == ["vppctl", "convert"] for c in data["candidates"])


# -- the PIR strategy of one candidate, as plan gives it and prints it -------------------------


def strategy(p: Planned, schedule: str, m: int) -> PirStrategy | PirMismatch:
    """Whether Paddle's PIR pipeline runs the candidate (`Candidate.runs_on_pir`)."""
    return candidate_strategy(*launched(p, schedule, m))


def printed(p: Planned, schedule: str, m: int) -> tuple[bool, dict[str, Any], str]:
    """Paddle's launch settings `plan` prints for the candidate: runs, fields, note."""
    shown = pir_paddle_settings(*launched(p, schedule, m))
    return shown.runs, {k.removeprefix(PIPELINE): v for k, v in shown.settings}, shown.note


def test_the_pir_strategy_of_a_plan_paddle_takes() -> None:
    p = planned(program("gpt_keep_pp2_v2", "plain"), 2, "keep")
    got = strategy(p, "vpp", 8)
    assert isinstance(got, PirStrategy)
    assert (got.stage_layers, got.segment_layers, got.moves_layers) == ((7, 5), (4, 3, 3, 2), False)
    runs, fields, note = printed(p, "vpp", 8)
    assert runs and fields == {
        "enable": True,
        "schedule_mode": "VPP",
        "pp_degree": 2,
        "vpp_degree": 2,
        "vpp_seg_method": "DecoderLayer",
        "accumulate_steps": 8,
        "micro_batch_size": 1,
    }
    assert note == (
        "a PIR program: the stage meshes hold 7, 5 layers, as the program's do; "
        "vpp_degree 2 deals them 4+3 | 3+2"
    )


def test_a_uniform_plan_needs_the_layers_moved_between_stages() -> None:
    p = planned(program("gpt_keep_pp2_v2", "plain"), 2, "uniform")
    got = strategy(p, "vpp", 4)
    assert isinstance(got, PirStrategy)
    assert (got.stage_layers, got.segment_layers, got.moves_layers) == ((6, 6), (3, 3, 3, 3), True)
    runs, _, note = printed(p, "vpp", 4)
    assert (
        runs
        and "the model must put 6, 6 layers on the stage meshes, not the program's 7, 5" in note
    )


def test_megatrons_interleaved_runs_as_vpp_where_the_orders_are_one() -> None:
    """At pp 2: Paddle's VPP is Megatron's interleaved 1F1B (groups of pp) when pp divides
    m and m > pp; elsewhere Paddle has no such schedule."""
    p = planned(program("gpt_keep_pp2_v2", "plain"), 2, "keep")
    same = strategy(p, "interleaved", 8)
    assert isinstance(same, PirStrategy) and same.schedule_mode == "VPP"
    runs, fields, note = printed(p, "interleaved", 8)
    assert runs and fields["schedule_mode"] == "VPP"
    assert note.startswith("the same order as Megatron's interleaved 1F1B here; a PIR program")
    for m in (2, 5):
        other = strategy(p, "interleaved", m)
        assert isinstance(other, PirMismatch) and "no interleaved schedule" in other.reason
        assert printed(p, "interleaved", m) == (False, {}, other.reason)


@pytest.mark.parametrize(
    ("split", "placement", "schedule", "m", "reason"),
    [
        ("keep", "loop", "zbv", 8, "Paddle has no zbv schedule"),
        ("keep", "loop", "zbh1", 8, "runs no ZBH1 on a PIR program"),
        ("keep", "loop", "eager1f1b", 8, "runs no Eager1F1B on a PIR program"),
        ("keep", "loop", "zbvpp", 2, "runs no ZBVPP on a PIR program"),
        ("keep", "loop", "1f1b", 8, "vpp_degree > 1 with schedule_mode VPP only"),
        ("keep", "loop", "vpp", 1, "accumulate_steps >= pp"),
    ],
)
def test_why_paddles_pir_pipeline_cannot_run_a_plan(
    split: str, placement: str, schedule: str, m: int, reason: str
) -> None:
    from vppctl.convert import ConvertOptions, plan_program

    sizes = (2, 4, 3, 3) if split == "explicit" else ()  # stage 0: 2 + 3, Paddle deals 3 + 2
    opts = PlanOptions(vpp=2, split=split, placement=placement, layers_per_chunk=sizes)  # type: ignore[arg-type]
    p = plan_program(program("gpt_keep_pp2_v2", "plain"), ConvertOptions(plan=opts))
    got = strategy(p, schedule, m)
    assert isinstance(got, PirMismatch) and reason in got.reason, got
    assert printed(p, schedule, m) == (False, {}, got.reason)  # the reason, as plan prints it


def test_a_split_only_pir_plan_makes_runs_and_a_v_placed_one_does_not() -> None:
    """A split Paddle's completion does not make itself: its strategy alone cannot run it,
    the settings `plan` prints can, with vppctl.paddle.pir_plan; V placement runs neither."""
    from vppctl.convert import ConvertOptions, plan_program

    source = program("gpt_keep_pp2_v2", "plain")
    sizes = (2, 4, 3, 3)  # stage 0: 2 + 3, Paddle deals 3 + 2
    opts = PlanOptions(vpp=2, split="explicit", layers_per_chunk=sizes)
    p = plan_program(source, ConvertOptions(plan=opts))
    alone = strategy(p, "vpp", 8)
    assert isinstance(alone, PirMismatch) and "deals a stage's 5 layers as 3+2" in alone.reason
    runs, fields, note = printed(p, "vpp", 8)
    assert runs and (fields["schedule_mode"], fields["vpp_degree"]) == ("VPP", 2)
    assert note.startswith("a PIR program: with vppctl.paddle.pir_plan: ")
    assert 'with vppctl.paddle.pir_plan("PLAN.json"): dist_model.train()' in note
    assert printed(p, "vpp", 1)[0] is False  # its schedule still needs accumulate_steps >= pp
    v = plan_program(source, ConvertOptions(plan=PlanOptions(vpp=2, placement="v")))
    alone = strategy(v, "vpp", 8)
    assert isinstance(alone, PirMismatch) and "loop placement" in alone.reason
    runs, fields, note = printed(v, "vpp", 8)
    assert (runs, fields) == (False, {}) and "no V-shaped schedule" in note


def test_a_plain_pp_plan_runs_1f1b_without_vpp() -> None:
    p = planned(program("gpt_pp4_v2", "plain"), 1, "uniform")
    got = strategy(p, "1f1b", 8)
    assert isinstance(got, PirStrategy) and got.schedule_mode == "1F1B"
    assert got.segment_layers == got.stage_layers == (2, 2, 2, 2) and not got.moves_layers
    runs, fields, _ = printed(p, "1f1b", 8)
    assert runs and (fields["vpp_degree"], fields["vpp_seg_method"]) == (1, "")  # Paddle's default
    one = strategy(p, "vpp", 8)
    assert isinstance(one, PirMismatch) and "needs vpp_degree > 1" in one.reason


def test_paddle_deals_a_stages_layers_evenly_earlier_chunks_first() -> None:
    assert dealt_layers(7, 2) == [4, 3] and dealt_layers(5, 3) == [2, 2, 1]
    assert dealt_layers(1, 2) == [1, 0]  # a chunk without a layer: Paddle refuses it
    split = pir_split(2, 2, "loop", (4, 3, 3, 2), (7, 5))
    assert split.takes and split.chunk_layers == ((4, 3), (3, 2)) and not split.moves_layers
    wrong = pir_split(2, 2, "loop", (3, 3, 4, 2), (7, 5))  # stage 0: 3 + 4
    assert not wrong.takes and wrong.stage_layers == (7, 5)


# -- vpp_seg_method: the layer class where Paddle reads it as vppctl's layers ------------------


def test_vpp_seg_method_is_the_layer_class_unless_paddle_would_read_it_otherwise() -> None:
    import re

    regex = r"(?<=^/GPTModel/)DecoderLayer(?:_\d+)?(?=/)"
    structs = ["/GPTModel/DecoderLayer_3/MLP/", "/GPTModel/Embedding/", "/"]
    assert paddle_seg_method("DecoderLayer", regex, structs) == "DecoderLayer"
    # A final norm whose path holds the class name: Paddle would take it for a layer.
    extra = [*structs, "/GPTModel/FinalDecoderLayerNorm/"]
    assert paddle_layer(re.compile("DecoderLayer", re.I), extra[-1]) == "DecoderLayerNorm"
    assert paddle_seg_method("DecoderLayer", regex, extra) == regex
    assert paddle_seg_method("Decoder.Layer", regex, structs) == regex  # not a class name


def test_the_table_names_the_best_candidate_paddle_runs(tmp_path: Path) -> None:
    path = tmp_path / "gpt_pp4.json"
    path.write_bytes(reference("gpt_pp4_v2", "plain"))
    args = ["plan", str(path), "-m", "4", "--vpp", "2", "--runtime", "any"]
    out = invoke(*args, "--schedule", "vpp,zbh1").stdout
    assert "best in Paddle (PIR): #1, launched above" in out
    assert "Paddle (PIR): strategy.pipeline: enable=True, schedule_mode='VPP'" in out
    out = invoke(*args, "--schedule", "zbv,interleaved-zb").stdout
    assert "Paddle (PIR) runs none of these candidates: it runs fthenb, 1f1b, vpp" in out
    data = json.loads(invoke(*args, "--schedule", "zbv", "--json").stdout)
    assert data["pir"]["best"] is None


def test_a_results_conversions_and_best_on_pir_are_found_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The table, the JSON and the notes each read them: derived on first use, then kept."""
    from vppctl.planner import search

    opts = search.PlanSearchOptions(
        micro_batches=(8,), vpp=(2,), schedules=("zbv", "vpp"), runtime="any"
    )
    result = search.search_plans(program("gpt_keep_pp2_v2", "plain"), "p.json", opts)
    grouped, asked = [], []
    group, runs = search.group_conversions, search.Candidate.runs_on_pir
    monkeypatch.setattr(search, "group_conversions", lambda c: grouped.append(1) or group(c))
    monkeypatch.setattr(
        search.Candidate, "runs_on_pir", lambda self, pir: asked.append(1) or runs(self, pir)
    )
    conversions = result.conversions
    for _ in range(3):
        assert result.conversions is conversions and len(conversions) > 1
        best = result.best_on_pir
        assert best is not None and result.candidates[best].schedule == "vpp"
    assert len(grouped) == 1 and 1 <= len(asked) <= len(result.candidates)


def test_the_schedules_paddle_runs_on_pir_are_said_in_one_spelling(tmp_path: Path) -> None:
    """By the names `--schedule` takes, in the row whose split Paddle takes and in the note
    under the table alike (Paddle's launch settings say its schedule_modes, FThenB...)."""
    path = tmp_path / "gpt_pp4.json"
    path.write_bytes(reference("gpt_pp4_v2", "plain"))
    args = ["plan", str(path), "-m", "4", "--vpp", "2", "--split", "keep", "--runtime", "any"]
    out = invoke(*args, "--schedule", "interleaved-zb").stdout.replace("\n", " ")
    assert (
        "none of its schedules simulated runs on Paddle's PIR pipeline (it runs fthenb, 1f1b, vpp)"
        in out
    )
    assert "Paddle (PIR) runs none of these candidates: it runs fthenb, 1f1b, vpp" in out


# -- what Paddle's completion refuses in the program itself (issue 31, item 3) ------------------


def test_paddle_reads_a_meshs_stage_from_its_ranks() -> None:
    """get_pp_stage_by_rank: rank r is on stage r // (world // pp); a mesh whose ranks
    disagree is on none."""
    from vppctl.planner.pir import paddle_stage

    assert [paddle_stage(m, 4, 2) for m in ([0, 1], [2, 3], [0, 2], [1, 3])] == [0, 1, None, None]
    assert paddle_stage([4, 5, 6, 7], 8, 2) == 1 and paddle_stage([3], 4, 4) == 3


@pytest.mark.parametrize(
    ("ranks", "words"),
    [
        (((0, 1), (2, 3)), None),  # stage-major: Paddle's order
        (((0,), (1,), (2,)), None),
        (((0, 2), (1, 3)), "stage mesh 0's ranks [0, 2] are on stages 0, 1"),
        (((2, 3), (0, 1)), "stage mesh 0's ranks [2, 3] are on stage 1"),
    ],
)
def test_a_rank_order_paddle_reads_otherwise_is_refused_with_the_order_it_reads(
    ranks: tuple[tuple[int, ...], ...], words: str | None
) -> None:
    from vppctl.planner.pir import completion_refusal, rank_order_refusal

    got = rank_order_refusal(ranks)
    assert (got is None) == (words is None)
    if words is not None:
        assert got is not None and words in got and "r // (world / pp) = r // 2" in got
        assert "give stage s the ranks 2*s to 2*s+1" in got
        pir = PirInput((2, 2), "DecoderLayer", stage_ranks=ranks)
        assert completion_refusal(pir, 2) == got and completion_refusal(pir, 1) is None


def test_an_op_between_layers_is_refused_naming_the_op_and_the_fix() -> None:
    from vppctl.planner.pir import StrayOp, completion_refusal

    scale = StrayOp("op #57 (pd_op.scale)", "pd_op.scale", "/GPTModel/", "L", "L_1", None)
    pir = PirInput((2, 2), "DecoderLayer", strays=(scale, scale))
    got = completion_refusal(pir, 2)
    assert got is not None and completion_refusal(pir, 1) is None  # vpp 1: no completion
    assert "raises ValueError on op #57 (pd_op.scale) (and 1 more) between layers L and L_1" in got
    assert (
        '"The op pd_op.scale without seg_method in its struct_name should only be reshard"' in got
    )
    assert got.endswith("move it into a layer's forward (or out of the layers' span)")
    dense = [
        StrayOp(f"op #{k}", "pd_op.matmul", f"/M/{part}/", "MoE", "MoE_1", part)
        for k, part in enumerate(("DenseLayer", "DenseLayer_1"))
    ]
    got = completion_refusal(PirInput((2, 2), "MoELayer", strays=tuple(dense)), 3)
    assert got is not None and "plan with `--seg-method 'MoELayer|DenseLayer'`" in got
    once = completion_refusal(PirInput((2, 2), "MoELayer", strays=(dense[0],)), 3)
    assert once is not None and "--seg-method" not in once  # one instance: no layer class


@pytest.mark.parametrize(
    ("held", "vpp", "counts"),
    [
        ((3, 3, 1, 1), 2, (2, 2, 2, 2)),
        ((5, 1), 2, (4, 2)),
        ((4, 3, 3, 2), 3, (3, 3, 3, 3)),
        ((7, 5), 2, (7, 5)),  # nothing to move
        ((2, 1), 2, None),  # 3 layers cannot fill 2 stages of 2
    ],
)
def test_the_layers_per_stage_paddle_would_take(
    held: tuple[int, ...], vpp: int, counts: tuple[int, ...] | None
) -> None:
    from vppctl.planner.pir import stage_counts_paddle_takes

    got = stage_counts_paddle_takes(held, vpp)
    assert got == counts
    if got is not None:
        assert sum(got) == sum(held) and min(got) >= vpp


def test_a_split_paddle_does_not_make_names_keep_or_why_keep_cannot() -> None:
    """Where every stage holds vpp layers the fix is keep, with its counts; where one holds
    fewer, keep is no fix: the reason says why and which counts Paddle would take."""
    v = pir_split(2, 2, "v", (3, 3, 3, 3), (7, 5))
    assert (
        v.reason is not None
        and "use `--split keep` (the stage meshes' 7, 5 layers, dealt 4+3 | 3+2)" in v.reason
    )
    short = pir_split(4, 2, "v", (1,) * 8, (3, 3, 1, 1))
    assert (
        short.reason is not None
        and "`--split keep` cannot: stage 2 holds 1 layer, fewer" in short.reason
    )
    assert "put at least 2 on each stage mesh, e.g. 2, 2, 2, 2" in short.reason
    assert "use `--split keep`" not in short.reason
    uniform = pir_split(4, 2, "loop", (1,) * 8, (3, 3, 1, 1))
    assert uniform.takes and uniform.moves_layers and uniform.stage_layers == (2, 2, 2, 2)


def test_every_split_plan_refuses_says_why(tmp_path: Path) -> None:
    """8 layers on pp 4 cannot fill 4 chunks a stage: every split is refused, and the exit-4
    message and each refused row say why (issue 31: "refused by convert" and no why)."""
    path = tmp_path / "gpt_pp4.json"
    path.write_bytes(reference("gpt_pp4_v2", "plain"))
    r = invoke("plan", str(path), "-m", "8", "--vpp", "4", "--runtime", "any", exit_code=4)
    assert "refused by convert" not in r.output
    for split in ("uniform", "keep", "balanced"):
        assert f"split {split} refused at vpp 4: " in r.stderr, r.stderr
    assert "8 layers" in r.stderr
    # keep: convert's reason, then Paddle's completion's, with the counts it would take
    assert "and Paddle's PIR completion: stage 0 holds 2 layers, fewer than vpp_degree 4" in (
        " ".join(r.stderr.split())
    )
    # under Paddle's PIR runtime (the program's own) keep is rule R6, with those counts too
    r = invoke("plan", str(path), "-m", "8", "--vpp", "4", exit_code=4)
    said = " ".join(r.stderr.split())
    assert "R6: " in said and "the program's 8 layers are fewer than pp x vpp = 16" in said
    r = invoke("plan", str(path), "-m", "8", "--vpp", "2,4", "--json")
    refused = json.loads(r.stdout)["refused"]
    assert refused and all(
        ": " in x["reason"] and "refused by convert" not in x["reason"] for x in refused
    )


def test_simulate_says_why_paddle_cannot_run_what_it_simulates(tmp_path: Path) -> None:
    path = tmp_path / "gpt_keep.json"
    path.write_bytes(reference("gpt_keep_pp2_v2", "plain"))
    # --runtime any: under Paddle's PIR runtime (the program's own) what it cannot run is
    # refused (exit 2); under any, simulated, with why Paddle cannot
    args = ["simulate", str(path), "--vpp", "2", "-m", "8", "--runtime", "any"]
    r = invoke(*args, "--split", "uniform", "--json")  # uniform: Paddle takes it (moving layers)
    assert not any("Paddle (PIR)" in w for w in json.loads(r.stdout)["warnings"])
    r = invoke(*args, "--split", "balanced", "--placement", "v", "--schedule", "zbv", "--json")
    said = [w for w in json.loads(r.stdout)["warnings"] if w.startswith("Paddle (PIR) cannot")]
    assert said and "loop placement" in said[0]
    one = ["simulate", str(path), "--vpp", "1", "--split", "keep", "-m", "1", "--runtime", "any"]
    one.append("--schedule")
    r = invoke(*one, "1f1b")  # m < pp: Paddle's 1F1B job list asserts, FThenB's does not
    assert (
        "Paddle (PIR) cannot run 1F1B (v=1) on this plan: Paddle's PIR 1F1B schedule " in r.stderr
    )
    assert "needs accumulate_steps >= pp (1 < 2" in r.stderr
    assert "Paddle (PIR)" not in invoke(*one, "fthenb").stderr
    done = tmp_path / "done.json"
    done.write_bytes(reference("gpt_keep_pp2_v2", "paddlevpp"))  # completed: nothing to say
    r = invoke("simulate", str(done), "--vpp", "2", "--split", "keep", "-m", "8", "--json")
    assert not any("Paddle (PIR)" in w for w in json.loads(r.stdout)["warnings"])
