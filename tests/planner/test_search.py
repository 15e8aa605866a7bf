"""`vppctl plan`: candidates sorted, each reproducible with its convert command, the
memory limit, the Megatron layout, and nothing a runtime would refuse."""

from __future__ import annotations

import json
import re
import shlex
import time
from dataclasses import replace
from pathlib import Path

import pytest
from commandline import invoke

from vppctl.choices import SCHEDULES
from vppctl.planner.memory import MemoryOptions
from vppctl.planner.search import PlanSearchOptions, megatron_layout, search_plans
from vppctl.program.load import parse_program
from vppctl.sample import SampleOptions, build_sample
from vppctl.schedule.orders import legal_group_sizes
from vppctl.verify.expectation import verify_program


@pytest.fixture(scope="module")
def src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("plan") / "p.pb"
    path.write_bytes(build_sample(SampleOptions(layers=10, pp=4, hidden=64, vocab=1000)))
    return path


def plan_json(args: list[str]) -> dict:  # type: ignore[type-arg]
    result = invoke("plan", *args, "--json")
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def parse_layout(layout: str) -> list[list[str]]:
    """Megatron-Core's grammar: commas are cosmetic, `(...)*n` and `x*n` repeat, `|`
    separates virtual stages (as its PipelineParallelLayerLayout.parse_str_to_list)."""
    text = layout.replace(",", "")
    text = re.sub(r"\(([^)]+)\)\*(\d+)", lambda m: m.group(1) * int(m.group(2)), text)
    text = re.sub(r"(.)\*(\d+)", lambda m: m.group(1) * int(m.group(2)), text)
    return [list(stage) for stage in text.split("|")]


def test_candidates_are_sorted_by_time_per_micro_batch(src: Path) -> None:
    data = plan_json([str(src), "-m", "4,8,12"])
    candidates = data["candidates"]
    assert len(candidates) > 10
    times = [c["time_per_micro_batch"] for c in candidates]
    assert times == sorted(times)
    assert candidates[0]["relative"] == 1
    for m in (4, 8, 12):  # with one m, the order is the makespan order
        spans = [c["makespan"] for c in candidates if c["micro_batches"] == m]
        assert spans == sorted(spans)
    assert {c["micro_batches"] for c in candidates} == {4, 8, 12}
    keys = {
        "command", "vpp", "placement", "split", "schedule", "micro_batches", "makespan",
        "bubble", "per_stage", "layers_per_segment", "megatron_layout",
    }  # fmt: skip
    assert keys <= set(candidates[0])
    assert set(candidates[0]["per_stage"][0]) >= {
        "stage", "params_bytes", "grads_bytes", "optimizer_bytes", "peak_bytes",
    }  # fmt: skip


def test_no_candidate_is_one_a_runtime_would_refuse(src: Path) -> None:
    candidates = plan_json([str(src), "-m", "2,4,6,7,8", "--runtime", "any"])["candidates"]
    pp = 4
    for c in candidates:
        m, vpp = c["micro_batches"], c["vpp"]
        assert m >= pp
        if c["schedule"] in ("zbvpp", "zbv", "dualpipev"):
            assert vpp == 2 and c["placement"] == "v"
        elif c["schedule"] in ("interleaved", "vpp", "interleaved-zb"):
            assert vpp > 1 and c["placement"] == "loop"
        else:
            assert vpp == 1
        if c["schedule"] == "interleaved":
            assert c["group_size"] == pp and pp in legal_group_sizes(pp, m)
        if c["schedule"] == "eager1f1b":
            assert m >= 2 * pp - 1
        if c["schedule"] == "dualpipev":
            assert m >= 2 * pp
        if c["schedule"] == "zbvpp":
            assert m == pp
        if c["schedule"] in ("zb1p", "interleaved-zb"):
            assert m % max(1, m // pp) == 0  # torch's rounds divide m
    assert {c["schedule"] for c in candidates} == set(SCHEDULES)
    # m = 6 and 7 at pp 4 are refused by interleaved's default group size, 2 by every one
    assert not [
        c for c in candidates if c["schedule"] == "interleaved" and c["micro_batches"] in (6, 7)
    ]


def test_each_command_converts_to_what_the_candidate_simulated(src: Path, tmp_path) -> None:
    data = plan_json([str(src), "-m", "8"])
    done: dict[str, Path] = {}
    for i, c in enumerate(data["candidates"]):
        argv = shlex.split(c["command"])
        assert argv == c["argv"] and argv[:3] == ["vppctl", "convert", str(src)]
        if c["command"] not in done:
            out = tmp_path / f"c{i}.pb"
            result = invoke(*argv[1:], "-o", str(out))
            assert verify_program(parse_program(out.read_bytes())).valid
            done[c["command"]] = out
        out = done[c["command"]]
        args = ["simulate", str(out), "-m", "8", "--schedule", c["schedule"], "--json"]
        sim = json.loads(invoke(*args).stdout)
        (result,) = sim["results"]
        assert sim["plan"]["layers_per_segment"] == c["layers_per_segment"]
        assert result["bubble"] == pytest.approx(c["bubble"], abs=1e-6)
        assert [s["peak_bytes"] for s in result["per_stage"]] == [
            s["peak_bytes"] for s in c["per_stage"]
        ]
        assert result["p2p_messages"] == c["p2p_messages"]


def test_the_megatron_layout_parses_back_to_the_layer_counts(src: Path) -> None:
    candidates = plan_json([str(src), "-m", "8"])["candidates"]
    for c in candidates:
        if c["placement"] == "v":  # Megatron's layout is loop-placed: none for V
            assert c["megatron_layout"] is None
            continue
        stages = parse_layout(c["megatron_layout"])
        assert [s.count("t") for s in stages] == c["layers_per_segment"]
        flat = [x for s in stages for x in s]
        assert flat[0] == "E" and flat[-1] == "L"
        assert flat.count("E") == 1 and flat.count("L") == 1
        assert set(flat) <= {"E", "t", "L"}


def test_layout_strings_follow_megatrons_example() -> None:
    assert megatron_layout([3, 4, 4, 3]) == "Et*3|(t*4|)*2t*3L"
    assert megatron_layout([1, 1]) == "Et|tL"
    assert parse_layout("Et*3|(tt|)*2,tL") == [
        ["E", "t", "t", "t"],
        ["t", "t"],
        ["t", "t"],
        ["t", "L"],
    ]


def test_the_memory_limit_leaves_out_and_refuses(src: Path) -> None:
    free = plan_json([str(src), "-m", "8"])
    peaks = sorted(c["peak_bytes"] for c in free["candidates"])
    limit = peaks[len(peaks) // 2]
    limited = plan_json([str(src), "-m", "8", "--memory-limit", str(limit)])
    assert all(c["peak_bytes"] <= limit for c in limited["candidates"])
    assert limited["over_limit"] == sum(p > limit for p in peaks) > 0
    assert len(limited["candidates"]) + limited["over_limit"] == len(peaks)
    smallest = min(free["candidates"], key=lambda c: c["peak_bytes"])
    result = invoke("plan", str(src), "-m", "8", "--memory-limit", str(peaks[0] - 1), exit_code=4)
    assert "no candidate fits --memory-limit" in result.stderr
    assert f"on stage {smallest['worst_stage']}" in result.stderr
    from vppctl.planner.memory import iec

    assert f"the smallest peak is {iec(peaks[0])}" in result.stderr


def test_the_count_over_the_memory_limit_is_the_candidates_left_out(src: Path) -> None:
    program = parse_program(src.read_bytes())
    free = search_plans(program, "p.pb", PlanSearchOptions(micro_batches=(8,)))
    limit = sorted(c.worst.peak_bytes for c in free.candidates)[len(free.candidates) // 2]
    memory = MemoryOptions(limit=limit)
    limited = search_plans(program, "p.pb", PlanSearchOptions(micro_batches=(8,), memory=memory))
    assert limited.over_limit == len(limited.over) > 0
    assert replace(limited, over=limited.over[:1]).over_limit == 1  # one fact, never two


def test_the_table_fits_80_columns_with_a_command_per_candidate(src: Path) -> None:
    args = ["plan", str(src), "-m", "8,16", "--top", "5", "--runtime", "any"]
    result = invoke(*args, env={"COLUMNS": "80"})
    lines = result.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("#  vpp"))
    table = lines[header : header + 7]
    assert all(len(line) <= 80 for line in table)
    commands = [line for line in lines if re.match(r"^\s*\d+\s+vppctl convert ", line)]
    assert len(commands) == 5
    assert "1.000x" in table[2]


def test_plan_refuses_a_converted_program(src: Path, tmp_path: Path) -> None:
    out = tmp_path / "o.pb"
    invoke("convert", str(src), "--vpp", "2", "--split", "balanced", "-o", str(out))
    result = invoke("plan", str(out), "-m", "8", exit_code=4)
    assert "already converted" in result.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["-m", "8,x"], "comma-separated list of integers"),
        (["-m", "0"], "0 is not an integer between 1 and 65,536"),
        (["-m", "8", "--schedule", "gpipe"], "'gpipe' is not one of fthenb"),
        (["-m", "8", "--memory-limit", "lots"], "is not a size"),
    ],
)
def test_bad_options_are_usage_errors(src: Path, args: list[str], words: str) -> None:
    result = invoke("plan", str(src), *args, exit_code=2)
    assert words in result.stderr


def test_the_placement_help_names_every_v_shaped_schedule() -> None:
    from vppctl.schedule import V_SHAPED

    said = " ".join(invoke("plan", "--help").stdout.split())
    placement = said.split("--placement loop,v")[1].split("--split")[0]
    assert all(schedule in placement for schedule in V_SHAPED), placement


def test_nothing_to_simulate_is_exit_4_with_the_reasons(src: Path) -> None:
    result = invoke("plan", str(src), "-m", "2", exit_code=4)
    assert "m 2 < pp 4" in result.stderr


def test_a_refusal_is_counted_by_the_rule_that_refused_it(tmp_path: Path) -> None:
    # zbvpp at m == pp runs on Paddle, but the simulator runs its greedy for at most 64
    # stages: at pp 65 that bound, not the micro-batch rule, is the reason.
    program = parse_program(build_sample(SampleOptions(layers=130, pp=65, hidden=64, vocab=1000)))
    opts = PlanSearchOptions(
        micro_batches=(65,), vpp=(2,), schedules=("zbvpp", "zbv"), runtime="any"
    )
    result = search_plans(program, "p.pb", opts)
    assert [c.schedule for c in result.candidates] == ["zbv"]
    assert result.refused == (("zbvpp at pp 65: simulated for at most 64 stages", 1),)


def test_a_schedule_asked_at_a_vpp_it_never_runs_names_each_familys_plans(src) -> None:
    args = ["plan", str(src), "-m", "8", "--vpp", "1", "--schedule", "zbv", "--runtime", "any"]
    result = invoke(*args, exit_code=4)
    said = result.stderr.split("asked for (", 1)[1].split(")", 1)[0]
    families = dict(part.split(": ") for part in said.split("; "))
    assert families == {
        "zbvpp, zbv, dualpipev": "V with vpp 2",
        "vpp, interleaved, interleaved-zb": "loop with vpp > 1",
        "fthenb, 1f1b, eager1f1b, zbh1, zb1p": "vpp 1",
    }
    named = [s for family in families for s in family.split(", ")]
    assert sorted(named) == sorted(SCHEDULES)  # every schedule, once


def test_restricting_the_search(src: Path) -> None:
    args = [str(src), "-m", "8", "--vpp", "2", "--schedule", "interleaved", "--split", "balanced"]
    args += ["--runtime", "any"]
    candidates = plan_json(args)["candidates"]
    assert [(c["vpp"], c["schedule"], c["split"]) for c in candidates] == [
        (2, "interleaved", "balanced")
    ]


def test_a_search_too_large_is_refused_at_once(src: Path) -> None:
    began = time.perf_counter()
    result = invoke("plan", str(src), "-m", "65536,65535", exit_code=None)
    assert time.perf_counter() - began < 10
    assert result.exit_code == 2 and "over the simulator's limit" in result.stderr


def test_candidates_over_the_simulator_limit_are_left_out_with_the_reason(src) -> None:
    # pp 4 x vpp 2 x 20000 is over 131,072 units; vpp 1 is not.
    args = [str(src), "-m", "20000", "--vpp", "1,2", "--schedule", "1f1b,interleaved"]
    data = plan_json([*args, "--runtime", "any"])
    assert {c["vpp"] for c in data["candidates"]} == {1}
    reasons = {r["reason"] for r in data["refused"]}
    assert "pp x vpp x m over the simulator's limit of 131,072" in reasons


def test_a_layout_is_searched_alone_and_converts_as_given(src: Path, tmp_path: Path) -> None:
    layout = "Et*2|t|t*2|t*2|t|t|tL"  # 7 stages on pp 4: refused
    invoke("plan", str(src), "-m", "8", "--layout", layout, exit_code=2)
    layout = "Et*2|t|t*2|t|t|t|t|tL"  # 10 layers on pp 4 x vpp 2
    data = plan_json([str(src), "-m", "8,16", "--layout", layout])
    assert {(c["vpp"], c["placement"], c["split"]) for c in data["candidates"]} == {
        (2, "loop", "explicit")
    }
    (conversion,) = data["conversions"]
    assert conversion["argv"] == ["vppctl", "convert", str(src), "--layout", layout]
    out = tmp_path / "o.pb"
    invoke(*conversion["argv"][1:], "-o", str(out))
    simulated = json.loads(invoke("simulate", str(out), "-m", "8", "--json").stdout)
    assert simulated["plan"]["layers_per_segment"] == [2, 1, 2, 1, 1, 1, 1, 1]
    both = invoke("plan", str(src), "-m", "8", "--layout", layout, "--vpp", "2", exit_code=2)
    assert "fixes vpp, placement and split" in both.stderr
