"""`plan` on a PIR program (issue 25, item 2): the Paddle PIR strategy of each candidate.

vppctl converts no PIR program; Paddle's own completion does (`complete_chunk_id`). So
for a PIR program every row of `plan` says whether Paddle's PIR completion makes its
split (and where the model must put its layers), and every candidate's Paddle launch
settings are the PIR strategy that runs it, or why Paddle cannot. The facts are checked
against the reference: the schedule_modes Paddle 3.3.1 runs on a PIR program are read
from its passes, the strategy round-trips into a real `paddle.distributed.Strategy`, and
on the checked-in programs (tests/data/pir_reference/) the strategy `plan` gives is the one
Paddle's own completion was built with, and its plan is that completion, op by op.
"""

from __future__ import annotations

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
from vppctl.plan import PlanOptions
from vppctl.planner import (
    PIR_MODES,
    PIR_SCHEDULE_MODES,
    PirMismatch,
    PirStrategy,
    pir_split,
)
from vppctl.planner.pir import (
    candidate_strategy,
    dealt_layers,
    paddle_layer,
    pir_paddle_settings,
    seg_method_for,
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
    assert data["candidates"] and all(c["command"] is None for c in data["candidates"])
    assert all(v["command"] is None and v["argv"] is None for v in data["conversions"])
    for c in data["candidates"]:
        paddle = c["launch"]["paddle"]
        assert paddle["runs"] == bool(paddle["settings"]) and paddle["note"]
        if paddle["runs"]:
            assert pipeline_fields(paddle)["schedule_mode"] in PIR_MODES
            assert c["placement"] == "loop"
        assert set(c["launch"]) == {"paddle", "megatron", "torch"}  # one structure
    best = data["pir"]["best"]
    assert data["candidates"][best]["launch"]["paddle"]["runs"]
    assert not any(c["launch"]["paddle"]["runs"] for c in data["candidates"][:best])


def test_a_split_paddles_completion_cannot_make_is_said_in_json_and_table(tmp_path: Path) -> None:
    """gpt_keep: 7 + 5 layers. V placement, and a balanced split that is not dealt as Paddle
    deals a stage's layers, are refused with the reason; uniform (6 + 6) is taken, with the
    layers to move."""
    path = tmp_path / "gpt_keep.json"
    path.write_bytes(reference("gpt_keep_pp2_v2", "plain"))
    args = ["plan", str(path), "-m", "8", "--vpp", "2,4", "--runtime", "any", "--p2p-cost", "0"]
    data = json.loads(invoke(*args, "--json").stdout)
    by = {(v["vpp"], v["placement"], v["split"]): v["paddle_pir"] for v in data["conversions"]}
    assert by[2, "loop", "keep"] == {
        "takes": True,
        "reason": None,
        "stage_layers": [7, 5],
        "chunk_layers": [[4, 3], [3, 2]],
        "moves_layers": False,
    }
    assert by[2, "loop", "uniform"]["takes"] and by[2, "loop", "uniform"]["moves_layers"]
    assert "loop placement" in by[2, "v", "uniform"]["reason"]
    balanced = by[4, "loop", "balanced"]
    assert not balanced["takes"] and balanced["chunk_layers"][0] == [1, 2, 2, 1]
    assert "deals a stage's 6 layers as 2+2+1+1" in balanced["reason"]
    r = invoke(*args, "--top", "100")
    out = r.stdout
    assert "vppctl convert " not in out and "to convert:" not in out
    assert "a PIR program (Paddle 3.x), its stage meshes holding 7, 5 layers" in out
    assert "in Paddle (PIR):" in out
    assert "Paddle (PIR) cannot: Paddle's PIR completion places segment k" in out
    assert "deals a stage's 6 layers as 2+2+1+1" in out
    assert (
        "Paddle (PIR) takes it: the stage meshes hold 7, 5 layers, as the program's do; "
        "vpp_degree 2 deals them 4+3 | 3+2; Paddle runs it best as vpp at m 8" in out
    )
    assert "the model must put 6, 6 layers on the stage meshes, not the program's 7, 5" in out
    assert "best in Paddle (PIR): vpp " in out and "schedule_mode='VPP'" in out


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
        ("explicit", "loop", "vpp", 8, "deals a stage's 5 layers as 3+2"),
        ("uniform", "v", "vpp", 8, "loop placement"),
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
    assert seg_method_for("DecoderLayer", regex, structs) == "DecoderLayer"
    # A final norm whose path holds the class name: Paddle would take it for a layer.
    extra = [*structs, "/GPTModel/FinalDecoderLayerNorm/"]
    assert paddle_layer(re.compile("DecoderLayer", re.I), extra[-1]) == "DecoderLayerNorm"
    assert seg_method_for("DecoderLayer", regex, extra) == regex
    assert seg_method_for("Decoder.Layer", regex, structs) == regex  # not a class name


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
