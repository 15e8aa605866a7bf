"""`plan` says how to launch: one row per conversion, and each runtime's settings.

The launch settings (vppctl.planner.launch) are checked against the runtimes' own
rules: Paddle's values round-trip into a real `paddle.distributed.Strategy` and name a
registered pipeline scheduler pass; Megatron's flags and torch's classes appear only
where those runtimes run the very order that was simulated.
"""

from __future__ import annotations

import json
from pathlib import Path

import paths
import pytest
from commandline import invoke

from vppctl.choices import SCHEDULES
from vppctl.plan import parse_layout, place
from vppctl.planner.launch import (
    LaunchCandidate,
    deepspeed_uniform,
    launch_settings,
    layouts,
    megatron_layout,
    torchtitan_fqns,
)
from vppctl.sample import SampleOptions, build_sample
from vppctl.schedule.interleaving import legal_group_sizes
from vppctl.schedule.orders import order_names, stage_orders
from vppctl.schedule.runtimes import (
    HOME,
    PADDLE_MODES,
    PADDLE_SCHEDULE_MODES,
    RUNTIME_SCHEDULES,
    paddle_legacy_refusal,
)


@pytest.fixture(scope="module")
def src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("launch") / "p.pb"
    path.write_bytes(build_sample(SampleOptions(layers=8, pp=4, hidden=64, vocab=1000)))
    return path


@pytest.fixture(scope="module")
def planned(src: Path) -> dict:  # type: ignore[type-arg]

    result = invoke("plan", str(src), "-m", "4,8,16", "--json")
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def candidate(schedule: str, vpp: int = 2, m: int = 8, **kw: object) -> LaunchCandidate:
    placement = "v" if schedule in ("zbvpp", "zbv", "dualpipev") else "loop"
    fields: dict[str, object] = dict(
        schedule=schedule,
        pp=4,
        vpp=vpp,
        placement=placement,
        micro_batches=m,
        group_size=4 if schedule == "interleaved" else None,
        layers_per_segment=(1,) * (4 * vpp),
        layer_class="DecoderLayer",
    )
    fields.update(kw)
    return LaunchCandidate(**fields)  # type: ignore[arg-type]


# -- plan: one row per conversion -------------------------------------------------


def test_plan_prints_one_row_per_distinct_conversion(src: Path) -> None:
    result = invoke("plan", str(src), "-m", "8,16")
    commands = [line.strip() for line in result.stdout.splitlines() if "vppctl convert" in line]
    assert commands and len(commands) == len(set(commands))
    simulated = [line for line in result.stdout.splitlines() if "simulated:" in line]
    assert len(simulated) == len(commands)
    assert "fthenb, 1f1b, eager1f1b, zbh1 at m 8, 16" in result.stdout  # Paddle's


def test_conversions_in_json_list_what_each_was_simulated_under(planned: dict) -> None:  # type: ignore[type-arg]
    conversions, candidates = planned["conversions"], planned["candidates"]
    assert len({c["command"] for c in conversions}) == len(conversions)
    assert {c["command"] for c in conversions} == {c["command"] for c in candidates}
    for conversion in conversions:
        mine = [c for c in candidates if c["command"] == conversion["command"]]
        assert candidates[conversion["best"]] == mine[0]  # the best of its own candidates
        assert set(conversion["schedules"]) == {c["schedule"] for c in mine}
        assert conversion["micro_batches"] == sorted({c["micro_batches"] for c in mine})
    bests = [conversion["best"] for conversion in conversions]
    assert bests == sorted(bests)  # ranked by their best candidate


def test_the_table_shows_the_launch_settings_of_the_top_conversions(src: Path) -> None:
    result = invoke("plan", str(src), "-m", "8", "--vpp", "2", "--schedule", "vpp")
    out = result.stdout
    assert "to launch #1 (vpp, m 8):" in out
    assert "strategy.pipeline: enable=True, schedule_mode='VPP', pp_degree=4, vpp_degree=2" in out
    assert "vpp_seg_method='DecoderLayer', accumulate_steps=8, micro_batch_size=1" in out
    # pp divides m and m > pp: Megatron's and torch's interleaved run this very order.
    assert "--microbatch-group-size-per-virtual-pipeline-stage 4" in out
    assert "ScheduleInterleaved1F1B(stages, n_microbatches=8)" in out


def test_every_candidate_says_how_each_runtime_runs_it_or_why_not(planned: dict) -> None:  # type: ignore[type-arg]
    for c in planned["candidates"]:
        assert set(c["launch"]) == {"paddle", "megatron", "torch", "paddle_pir"}
        assert c["launch"]["paddle_pir"] is None  # a legacy program
        for runtime in (c["launch"][r] for r in ("paddle", "megatron", "torch")):
            assert runtime["runs"] == bool(runtime["settings"])
            assert runtime["runs"] or runtime["note"]
        if c["placement"] == "v":
            assert not c["launch"]["megatron"]["runs"]
            assert "V placement" in c["launch"]["megatron"]["note"]


# -- the settings, runtime by runtime ---------------------------------------------


def test_paddle_runs_its_own_schedules_and_says_which_release_takes_a_legacy_program() -> None:
    for schedule, mode in [("vpp", "VPP"), ("zbh1", "ZBH1"), ("eager1f1b", "Eager1F1B")]:
        paddle = launch_settings(candidate(schedule, vpp=2 if schedule == "vpp" else 1))[0]
        assert paddle.runs and dict(paddle.settings)["strategy.pipeline.schedule_mode"] == mode
        assert "Paddle 3.0.0" in paddle.note
    zb1p = launch_settings(candidate("zb1p", vpp=1))[0]
    assert not zb1p.runs and "Paddle has no zb1p schedule" in zb1p.note


def test_megatron_layout_or_layers_per_virtual_stage_by_split() -> None:
    uniform = dict(launch_settings(candidate("interleaved"))[1].settings)
    assert uniform["--num-layers-per-virtual-pipeline-stage"] == 1
    uneven = candidate("interleaved", layers_per_segment=(2, 1, 1, 1, 1, 1, 1, 2))
    flags = dict(launch_settings(uneven)[1].settings)
    assert flags["--pipeline-model-parallel-layout"] == "Et*2|(t|)*6t*2L"
    assert "--num-layers-per-virtual-pipeline-stage" not in flags


@pytest.mark.parametrize(("m", "same"), [(8, True), (12, True), (4, False), (6, False)])
def test_paddle_vpp_runs_under_megatron_exactly_where_the_orders_are_equal(
    m: int, same: bool
) -> None:
    paddle = order_names(stage_orders("vpp", 4, 2, m), 2, "loop")
    if 4 in legal_group_sizes(4, m):  # Megatron refuses a group of 4 at m 6
        megatron = order_names(stage_orders("interleaved", 4, 2, m, 4), 2, "loop")
        assert (paddle == megatron) == same
    assert launch_settings(candidate("vpp", m=m))[1].runs == same


def test_torch_runs_interleaved_only_with_its_own_round_size() -> None:
    # pp 4, m 10: torch's rounds are 2 of 5; Megatron's group of 5 is legal too.
    assert launch_settings(candidate("interleaved", m=10, group_size=5))[2].runs
    assert not launch_settings(candidate("interleaved", m=12, group_size=6))[2].runs
    zbv = launch_settings(candidate("zbv"))[2]
    assert zbv.runs and "ScheduleZBVZeroBubble" in dict(zbv.settings)["class"]


def test_the_paddle_version_matrix_for_legacy_programs() -> None:
    assert paddle_legacy_refusal("3.0.0", "VPP") is None
    assert paddle_legacy_refusal("3.0.0", "ZBH1") is None
    assert "has no VPP completion or scheduler" in (paddle_legacy_refusal("2.6.2", "VPP") or "")
    for version in ("3.1.0", "3.2.2", "3.3.1"):
        refusal = paddle_legacy_refusal(version, "1F1B") or ""
        assert "schedules PIR programs only" in refusal and "Paddle 3.0.0" in refusal


# -- Paddle itself ---------------------------------------------------------------


@pytest.mark.paddle
def test_paddles_schedule_modes_are_its_registered_pipeline_schedulers() -> None:
    """One list: a schedule_mode for each of vppctl's schedules that is Paddle's order,
    and those are every pipeline scheduler pass Paddle 3.3.1 registers."""
    import paddle.distributed.passes.pipeline_scheduler_pass  # noqa: F401  (registers them)
    from paddle.distributed.passes.pass_base import PassBase

    import vppctl.paddle

    prefix = "pipeline_scheduler_"
    registered = {
        n.removeprefix(prefix) for n in PassBase._REGISTERED_PASSES if n.startswith(prefix)
    }
    assert registered == set(PADDLE_SCHEDULE_MODES)
    assert tuple(PADDLE_MODES.values()) == vppctl.paddle.PADDLE_SCHEDULE_MODES
    for mode in PADDLE_SCHEDULE_MODES:  # 3.0.0's legacy scheduler runs each
        assert paddle_legacy_refusal("3.0.0", mode) is None


@pytest.mark.paddle
def test_the_paddle_strategy_values_round_trip_into_a_real_strategy(planned: dict) -> None:  # type: ignore[type-arg]
    import paddle
    from paddle.distributed.passes.pass_base import PassBase

    defaults = paddle.distributed.Strategy().pipeline.to_dict()
    checked = 0
    for c in planned["candidates"]:
        paddle_launch = c["launch"]["paddle"]
        if not paddle_launch["runs"]:
            continue
        fields = {
            k.removeprefix("strategy.pipeline."): v for k, v in paddle_launch["settings"].items()
        }
        assert set(fields) <= set(defaults)  # Paddle ignores unknown keys: none may be
        strategy = paddle.distributed.Strategy({"pipeline": fields})
        assert {k: strategy.pipeline.to_dict()[k] for k in fields} == fields
        # The mode names a pipeline scheduler pass Paddle has registered.
        assert f"pipeline_scheduler_{fields['schedule_mode']}" in PassBase._REGISTERED_PASSES
        checked += 1
    assert checked >= 5


def test_zbvpp_launches_under_paddle_with_the_runtimes_its_greedy_ran_with() -> None:
    paddle, megatron, torch = launch_settings(candidate("zbvpp", m=4))
    settings = dict(paddle.settings)
    assert settings["strategy.pipeline.schedule_mode"] == "ZBVPP"
    assert settings["strategy.pipeline.program_runtimes"] == (61, 72, 71, 34, 3)
    assert "3.3.1 cannot" in paddle.note and "_get_max_memory" in paddle.note
    assert not megatron.runs and not torch.runs


# -- under a runtime, every row runs there (issue 33, acceptance 1) ----------------------


def plan_under(path: Path, *args: str) -> dict:  # type: ignore[type-arg]
    return json.loads(invoke("plan", str(path), "-m", "4,6,8,12,16", *args, "--json").stdout)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def pir_program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pir_cases import reference

    path = tmp_path_factory.mktemp("launch-pir") / "gpt_keep_plain.json"
    path.write_bytes(reference("gpt_keep_pp2_v2", "plain"))  # 7 + 5 layers on pp 2
    return path


@pytest.mark.parametrize("runtime", [None, "megatron", "torch"])
def test_every_row_of_a_legacy_program_runs_in_its_runtime(src: Path, runtime: str | None) -> None:
    """Default: the legacy program's own runtime, Paddle 3.0.0; every candidate is one of
    its schedules at counts its rules accept, and its launch settings there run."""
    data = plan_under(src, *(["--runtime", runtime] if runtime else []))
    expected = runtime or "paddle"
    assert data["runtime"] == expected
    schedules = {c["schedule"] for c in data["candidates"]}
    assert schedules <= set(RUNTIME_SCHEDULES[expected]) and len(schedules) > 1
    for c in data["candidates"]:
        assert c["launch"][expected]["runs"], (c["schedule"], c["micro_batches"], c["launch"])
    if expected == "paddle":
        assert "zbvpp" not in schedules or all(
            c["micro_batches"] == 4 for c in data["candidates"] if c["schedule"] == "zbvpp"
        )


def test_every_row_of_a_pir_program_runs_on_paddles_pir_pipeline(pir_program: Path) -> None:
    data = plan_under(pir_program, "--vpp", "1,2,4")
    assert data["runtime"] == "paddle-pir" and data["pir"] is not None
    assert {c["schedule"] for c in data["candidates"]} <= {"fthenb", "1f1b", "vpp"}
    hows = set()
    for c in data["candidates"]:
        paddle, how = c["launch"]["paddle"], c["launch"]["paddle_pir"]["how"]
        assert paddle["runs"], (c["schedule"], c["split"], paddle["note"])
        assert paddle["settings"]["strategy.pipeline.schedule_mode"] in ("FThenB", "1F1B", "VPP")
        assert how in ("strategy", "pir_plan")
        # a command exactly where vppctl.paddle.pir_plan needs the plan file it writes
        assert (c["argv"] is not None) == (how == "pir_plan"), c
        hows.add(how)
    # the splits Paddle's completion does not make itself (R8) run with the plan: kept
    assert hows == {"strategy", "pir_plan"}
    assert not any(r["reason"].startswith(("R6: ", "R8: ")) for r in data["refused"])


def test_a_pir_split_paddle_does_not_make_is_counted_by_its_rule(pir_program: Path) -> None:
    """Keep on the program's 7 + 5 layers: vpp 5 is dealt, vpp 6 leaves stage 1 short (R6:
    keep itself cannot split it); a balanced split at vpp 4 gives a stage's chunks other
    counts than Paddle deals (R8): it runs with vppctl.paddle.pir_plan."""
    data = plan_under(pir_program, "--vpp", "5,6", "--split", "keep")
    assert {c["vpp"] for c in data["candidates"]} == {5}
    (reason,) = [r["reason"] for r in data["refused"]]
    assert reason.startswith("R6: VPP needs every stage mesh to hold at least vpp layers"), reason
    assert "stage 1 holds 5 layers" in reason and reason.endswith("e.g. 6, 6"), reason
    balanced = plan_under(
        pir_program, "--vpp", "4", "--split", "balanced,keep", "--schedule", "vpp"
    )
    reasons = {r["reason"] for r in balanced["refused"]}
    assert not any(r.startswith("R8: ") for r in reasons), reasons
    (row,) = [c for c in balanced["candidates"] if c["split"] == "balanced"][:1]
    launch = row["launch"]["paddle_pir"]
    assert (launch["how"], launch["rule"], launch["reason"]) == ("pir_plan", "R8", None)
    assert row["argv"][-2:] == ["-o", str(pir_program.with_name("gpt_keep_plain.vpp.json"))]


def test_under_any_every_row_runs_in_the_runtime_whose_order_it_is(src: Path) -> None:
    data = plan_under(src, "--runtime", "any")
    assert data["runtime"] == "any"
    assert {c["schedule"] for c in data["candidates"]} == set(SCHEDULES)
    for c in data["candidates"]:
        home = HOME[c["schedule"]]
        runtime = "paddle" if home == "paddle-pir" else home
        assert c["launch"][runtime]["runs"], (c["schedule"], c["micro_batches"], c["launch"])


@pytest.mark.parametrize("runtime", ["any", "torch", "megatron"])
def test_under_another_runtime_a_legacy_plan_names_the_best_paddle_runs(
    src: Path, runtime: str
) -> None:
    """A legacy program's own runtime is Paddle 3.0.0: searched under another, the plan
    still says which row Paddle runs best, and how (the issue: a PIR program had such a
    line, a legacy program none)."""
    data = plan_under(src, "--runtime", runtime)
    runs = [c for c in data["candidates"] if c["launch"]["paddle"]["runs"]]
    out = invoke("plan", str(src), "-m", "4,6,8,12,16", "--runtime", runtime).stdout
    line = next(x for x in out.splitlines() if x.startswith("best in Paddle 3.0.0: "))
    best = runs[0]
    mode = best["launch"]["paddle"]["settings"]["strategy.pipeline.schedule_mode"]
    if "launched above" in line:
        shown = int(line.split("#")[1].split(",")[0])
        assert f"to launch #{shown} ({best['schedule']}, m {best['micro_batches']}):" in out
    else:
        assert f"{best['schedule']} at m {best['micro_batches']}" in line
        assert f"schedule_mode='{mode}'" in out.split(line)[1].splitlines()[2]
    default = invoke("plan", str(src), "-m", "4,6,8,12,16").stdout
    assert "best in Paddle" not in default  # every row is Paddle's there


def test_a_schedule_outside_the_runtime_is_refused_naming_it(src: Path) -> None:
    result = invoke("plan", str(src), "-m", "8", "--schedule", "interleaved", exit_code=2)
    assert "has no interleaved schedule (rule P1" in result.stderr
    assert "--runtime any" in result.stderr


@pytest.mark.paddle
@pytest.mark.parametrize("which", ["legacy", "pir"])
def test_every_paddle_row_round_trips_into_a_real_strategy(
    src: Path, pir_program: Path, which: str
) -> None:
    import paddle

    data = plan_under(src if which == "legacy" else pir_program, "--vpp", "1,2")
    defaults = paddle.distributed.Strategy().pipeline.to_dict()
    for c in data["candidates"]:
        launch = c["launch"]["paddle"]
        assert launch["runs"]
        fields = {k.removeprefix("strategy.pipeline."): v for k, v in launch["settings"].items()}
        assert set(fields) <= set(defaults)
        strategy = paddle.distributed.Strategy({"pipeline": fields})
        assert {k: strategy.pipeline.to_dict()[k] for k in fields} == fields
        if fields["vpp_degree"] > 1:  # Paddle reads vpp_degree under VPP and ZBVPP only
            assert fields["schedule_mode"] in ("VPP", "ZBVPP") and fields["vpp_seg_method"]


# -- the split in each runtime's own terms ------------------------------------------------

EXPORTS = json.loads((paths.LAYOUTS / "exports.json").read_text())


def test_the_exports_goldens_are_the_runtimes_own() -> None:
    assert EXPORTS["versions"]["torchtitan"] == "0.3.0"
    assert EXPORTS["versions"]["deepspeed"] == "0.19.8"


@pytest.mark.parametrize(
    "case",
    [c for c in EXPORTS["torchtitan_fqns"] if "fqns" in c],
    ids=lambda c: f"{c['num_stages']}x{c['num_layers']}",
)
def test_torchtitan_module_names_are_torchtitans(case: dict) -> None:  # type: ignore[type-arg]
    """torchtitan's own split (`_generate_llm_fqn_per_model_part`): the same counts per stage
    give the same names, and the Megatron layout of them parses back to those counts."""
    counts = [sum(n.startswith("layers.") for n in names) for names in case["fqns"]]
    assert [list(names) for names in torchtitan_fqns(counts)] == case["fqns"]
    assert list(parse_layout(megatron_layout(counts), 1).decoders_per_stage()) == counts


@pytest.mark.parametrize(
    "case", EXPORTS["torchtitan_ranks"], ids=lambda c: f"{c['schedule']}-{c['pp']}"
)
def test_torchtitans_stage_to_rank_is_vppctls_placement(case: dict) -> None:  # type: ignore[type-arg]
    placement = "v" if case["schedule"] in ("ZBVZeroBubble", "DualPipeV") else "loop"
    for rank, stages in enumerate(case["stages_of_rank"]):
        for stage in stages:
            assert place(stage, case["pp"], placement)[0] == rank  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "case", EXPORTS["deepspeed_uniform"], ids=lambda c: f"{c['num_items']}/{c['num_parts']}"
)
def test_deepspeeds_uniform_parts_are_deepspeeds(case: dict) -> None:  # type: ignore[type-arg]
    assert list(deepspeed_uniform(case["num_items"], case["num_parts"])) == case["parts"]


def test_a_candidates_split_in_every_dialect() -> None:
    sizes = (2, 1, 1, 1, 1, 1, 1, 2)
    split = layouts(candidate("interleaved", layers_per_segment=sizes))
    assert split.megatron == "Et*2|(t|)*6t*2L"
    assert split.torchtitan[0] == ("tok_embeddings", "layers.0", "layers.1")
    assert split.torchtitan[-1] == ("layers.8", "layers.9", "norm", "lm_head")
    assert split.deepspeed_parts is None  # DeepSpeed runs no loop-placed interleaving
    plain = layouts(candidate("1f1b", vpp=1, layers_per_segment=(3, 2, 2, 3)))
    assert plain.deepspeed_parts == (0, 4, 6, 8, 13) and not plain.deepspeed_uniform
    even = layouts(candidate("1f1b", vpp=1, layers_per_segment=(3, 4, 4, 2)))
    assert even.deepspeed_parts == (0, 4, 8, 12, 16) and even.deepspeed_uniform
    v = layouts(candidate("zbv", layers_per_segment=(1,) * 8))
    assert v.megatron is None and v.deepspeed_parts is not None and len(v.torchtitan) == 8
    pir = layouts(candidate("vpp", layers_per_segment=(1,) * 8), stage_layers=(2, 2, 2, 2))
    assert pir.paddle_stage_per_layer == (0, 0, 1, 1, 2, 2, 3, 3)


def test_the_launch_lines_give_each_dialects_layout(src: Path) -> None:
    out = invoke("plan", str(src), "-m", "8", "--vpp", "2", "--schedule", "vpp").stdout
    assert "layout (Megatron-Core): 'Et|(t|)*6tL'" in out
    assert (
        "layout (torchtitan module_fqns_per_model_part): tok_embeddings, layers.0 | layers.1" in out
    )
    data = plan_under(src, "--vpp", "2", "--schedule", "vpp")
    layouts_json = data["candidates"][0]["layouts"]
    assert layouts_json["megatron"] == data["candidates"][0]["megatron_layout"]
    assert layouts_json["torchtitan"][-1][-2:] == ["norm", "lm_head"]
