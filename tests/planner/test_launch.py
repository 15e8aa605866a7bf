"""`plan` says how to launch: one row per conversion, and each runtime's settings.

The launch settings (vppctl.planner.launch) are checked against the runtimes' own
rules: Paddle's values round-trip into a real `paddle.distributed.Strategy` and name a
registered pipeline scheduler pass; Megatron's flags and torch's classes appear only
where those runtimes run the very order that was simulated.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from commandline import invoke

from vppctl.planner.launch import LaunchCandidate, launch_settings
from vppctl.sample import SampleOptions, build_sample
from vppctl.schedule.interleaving import legal_group_sizes
from vppctl.schedule.orders import order_names, stage_orders
from vppctl.schedule.runtimes import PADDLE_MODES, PADDLE_SCHEDULE_MODES, paddle_legacy_refusal


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
    assert "fthenb, 1f1b, eager1f1b, zbh1, zb1p at m 8, 16" in result.stdout


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
        assert set(c["launch"]) == {"paddle", "megatron", "torch"}
        for runtime in c["launch"].values():
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
    assert flags["--pipeline-model-parallel-layout"] == "Et*2|t|t|t|t|t|t|t*2L"
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
