"""`--costs-from` on simulate, plan and convert -m: measured costs in, seconds everywhere,
the prediction's error stated, and what cannot be used refused in one line.

The importers themselves are tests/planner/test_importers.py's; the fitting to a plan
tests/planner/test_measured.py's. Here: the commands, their tables and JSON (checked
against the shipped schemas), the pictures in seconds, and acceptance 3 of issue 36:
measured costs that reverse the FLOP-based choice in plan's ranking and convert -m's
notes.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import paths
import pytest
from commandline import invoke

from vppctl.sample import SampleOptions, build_sample
from vppctl.schedule.simulation import simulate

MEASURED = paths.MEASURED
SAMPLE = paths.SAMPLE  # the README tour's 8 layers on pp 4: its head is heavy in FLOPs


def checked(name: str, data: dict[str, Any]) -> dict[str, Any]:
    text = resources.files("vppctl.report").joinpath("schemas", f"{name}.json").read_text()
    jsonschema.Draft202012Validator(json.loads(text)).validate(data)
    return data


def run_json(*args: object, exit_code: int = 0) -> dict[str, Any]:
    return json.loads(invoke(*args, "--json", exit_code=exit_code).stdout)  # type: ignore[no-any-return]


def stage_csv(tmp_path: Path, rows: list[tuple[str, ...]], name: str = "costs.csv") -> Path:
    header = ["stage", "forward_s", "backward_s", "weight_s"][: len(rows[0]) + 1]
    lines = [",".join(header), *(",".join((str(k), *r)) for k, r in enumerate(rows))]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def layer_csv(tmp_path: Path, costs: dict[str, tuple[str, str]], name: str = "l.csv") -> Path:
    path = tmp_path / name
    rows = [f"{k},{f},{b}" for k, (f, b) in costs.items()]
    path.write_text("layer,forward_s,backward_s\n" + "\n".join(rows) + "\n")
    return path


FOUR = [("0.010", "0.001", "0.019"), ("0.012", "0.012", "0.012"), ("0.011", "0.011", "0.011")]
FOUR += [("0.020", "0.020", "0.020")]


# -- simulate -------------------------------------------------------------------------------


def test_simulate_without_a_program_runs_each_stage_on_its_measured_seconds(
    tmp_path: Path,
) -> None:
    costs = stage_csv(tmp_path, FOUR)
    args = ("simulate", "--pp", "2", "--vpp", "2", "-m", "4", "--costs-from", costs)
    data = checked("simulate", run_json(*args, "--measured-step", "0.42"))
    f = [Fraction(r[0]) for r in FOUR]
    i = [Fraction(r[1]) for r in FOUR]
    w = [Fraction(r[2]) for r in FOUR]
    for result in data["results"]:
        expected = simulate(2, 2, 4, result["schedule"], f, i, weight=w).makespan
        assert result["exact"]["makespan"] == str(expected)
        assert result["predicted_step_s"] == pytest.approx(float(expected))
        assert result["measured_step_s"] == 0.42
        assert result["error"] == pytest.approx(float(expected) / 0.42 - 1, abs=1e-6)
        assert result["costs_source"] == {"path": str(costs), "format": "csv", "unit": "s"}
    assert data["time_unit"] == "seconds"
    assert data["measured"]["measured_step_from"] == "--measured-step"
    table = invoke(*args, "--measured-step", "0.42").stdout
    assert f"costs: measured, from {costs} (csv, seconds)" in table
    assert re.search(r"^makespan +\d+ ms +\d+ ms$", table, re.M)
    assert re.search(r"^idle per stage \(mean\) +\d+ ms +\d+ ms$", table, re.M)
    assert re.search(r"^  0 +\d+\.\d% \(\d+ ms\)", table, re.M)  # each stage's idle time
    predicted = float(simulate(2, 2, 4, "1f1b", f, i, weight=w).makespan)
    assert f"1F1B (v=1): predicted {predicted * 1000:.4g} ms, measured 420 ms" in table
    assert f"error {predicted / 0.42 - 1:+.1%}" in table
    assert "one column = " in table and " ms" in table.split("one column = ")[1][:12]


def test_a_torch_trace_of_real_steps_gives_the_measured_step() -> None:
    trace = MEASURED / "torch-zbv-step-pp2.json"
    args = ("simulate", "--pp", "2", "--vpp", "2", "--placement", "v", "--schedule", "zbv")
    data = checked("simulate", run_json(*args, "-m", "4", "--costs-from", trace))
    (result,) = data["results"]
    assert data["measured"]["measured_step_from"] == f"the profiler steps of {trace}"
    assert result["measured_step_s"] > 0 and result["error"] is not None
    assert result["costs_source"]["format"] == "torch-trace"
    assert result["costs_source"]["unit"] == "us"
    assert any("other PP: events" in n for n in data["measured"]["notes"])


def test_simulate_without_costs_from_says_no_seconds() -> None:
    data = checked("simulate", run_json("simulate", "--pp", "2", "--vpp", "2", "-m", "4"))
    assert data["time_unit"] == "the unit of --costs" and data["measured"] is None
    assert all(r["predicted_step_s"] is None and r["costs_source"] is None for r in data["results"])


def test_per_layer_costs_are_the_plans_segments_summed(tmp_path: Path) -> None:
    """The same step from per-layer costs and from their per-segment sums given per stage."""
    layers = {"pre": ("0.002", "0.004"), "post": ("0.030", "0.050")}
    layers |= {str(k): (f"0.0{k + 1}", f"0.0{2 * k + 1}") for k in range(8)}
    by_layer = layer_csv(tmp_path, layers)
    args = ("simulate", SAMPLE, "--vpp", "2", "--split", "uniform", "-m", "8")
    from_layers = checked("simulate", run_json(*args, "--costs-from", by_layer))
    seg = [[k] for k in range(8)]
    seg[0].insert(0, "pre")
    seg[-1].append("post")
    sums = [
        tuple(str(sum(Fraction(layers[str(k)][j]) for k in keys)) for j in (0, 1)) for keys in seg
    ]
    by_stage = stage_csv(
        tmp_path, [(str(float(Fraction(f))), str(float(Fraction(b)))) for f, b in sums]
    )
    from_stages = run_json(*args, "--costs-from", by_stage)
    assert [r["exact"] for r in from_layers["results"]] == [
        r["exact"] for r in from_stages["results"]
    ]
    assert from_layers["measured"]["weight_measured"] is False


def test_measured_activation_bytes_size_the_memory_table(tmp_path: Path) -> None:
    """With activation_bytes for every part, each chunk's bytes per micro-batch are its
    layers' sum (pre on the first segment, post on the last), and the peaks follow."""
    stash = {"pre": 1000, "post": 7000} | {str(k): 100 * (k + 1) for k in range(8)}
    path = tmp_path / "bytes.csv"
    rows = [f"{k},0.01,0.02,{b}" for k, b in stash.items()]
    path.write_text("layer,forward_s,backward_s,activation_bytes\n" + "\n".join(rows) + "\n")
    args = ("simulate", SAMPLE, "--vpp", "2", "--split", "uniform", "-m", "8")
    modelled = run_json(
        *args, "--costs-from", layer_csv(tmp_path, {k: ("0.01", "0.02") for k in stash})
    )
    data = checked("simulate", run_json(*args, "--costs-from", path))
    expected = [stash[str(k)] for k in range(8)]  # uniform on pp 4 x vpp 2: a layer each
    expected[0] += stash["pre"]
    expected[-1] += stash["post"]
    for result, before in zip(data["results"], modelled["results"]):
        chunks = [c for stage in result["per_stage"] for c in stage["chunks"]]
        got = {c["virtual_stage"]: c["activation_bytes_per_micro_batch"] for c in chunks}
        assert [got[k] for k in range(8)] == expected
        for stage, other in zip(result["per_stage"], before["per_stage"]):
            memory = stage
            assert all(
                c["activation_bytes"] == c["activation_bytes_per_micro_batch"] * c["peak_in_flight"]
                for c in memory["chunks"]
            )
            assert (
                0
                < memory["peak_activation_bytes"]
                <= sum(c["activation_bytes"] for c in memory["chunks"])
            )
            assert memory["params_bytes"] == other["params_bytes"]  # static: modelled
            assert memory["peak_activation_bytes"] != other["peak_activation_bytes"]


def test_a_paddle_trace_of_the_programs_own_run(tmp_path: Path) -> None:
    program, trace = MEASURED / "paddle-gpt-pp2.pb", MEASURED / "paddle-gpt-pp2.trace.json"
    args = ("simulate", program, "--vpp", "2", "-m", "4", "--costs-from", trace)
    data = checked("simulate", run_json(*args))
    notes = " | ".join(data["measured"]["notes"])
    assert "matched" in notes and "not matched: feed" in notes
    assert all(r["costs_source"]["format"] == "paddle-trace" for r in data["results"])
    table = invoke(*args).stdout
    assert "paddle-trace, microseconds" in table and "not matched: feed" in table


def test_the_pictures_are_in_seconds(tmp_path: Path) -> None:
    costs = stage_csv(tmp_path, FOUR)
    args = ("simulate", "--pp", "2", "--vpp", "2", "-m", "2", "--schedule", "interleaved")
    invoke(
        *args, "--costs-from", costs, "--trace", tmp_path / "t.json", "--svg", tmp_path / "t.svg"
    )
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    forward0 = next(e for e in events if e.get("ph") == "X" and e["args"]["kind"] == "F")
    assert forward0["dur"] == pytest.approx(Fraction(FOUR[0][0]) * 10**6)  # microseconds
    svg = (tmp_path / "t.svg").read_text()
    assert "time (seconds)" in svg and f"measured costs from {costs}" in svg


def test_the_same_costs_give_the_same_bytes(tmp_path: Path) -> None:
    costs = stage_csv(tmp_path, FOUR)
    args = ("simulate", "--pp", "2", "--vpp", "2", "-m", "4", "--costs-from", costs)
    assert invoke(*args).stdout == invoke(*args).stdout
    assert invoke(*args, "--json").stdout == invoke(*args, "--json").stdout


# -- what cannot be used: one line, the documented code, nothing written -------------------


@pytest.mark.parametrize(
    ("extra", "code", "words"),
    [
        (
            ("--pp", "2", "--vpp", "1"),
            2,
            "measures 4 virtual stages (0..3), but the plan has pp 2 x vpp 1 = 2",
        ),
        (("--pp", "4", "--vpp", "2"), 2, "but the plan has pp 4 x vpp 2 = 8"),
        (("--pp", "2", "--vpp", "2", "--costs", "1,1,1"), 2, "drop one of them"),
        (("--pp", "2", "--vpp", "2", "--measured-step", "0"), 2, "a number of seconds > 0"),
    ],
)
def test_costs_that_do_not_fit_are_refused(
    tmp_path: Path, extra: tuple[str, ...], code: int, words: str
) -> None:
    costs = stage_csv(tmp_path, FOUR)
    svg = tmp_path / "t.svg"
    result = invoke(
        "simulate", "-m", "4", "--costs-from", costs, *extra, "--svg", svg, exit_code=code
    )
    assert words in result.stderr and result.stderr.count("\n") == 1
    assert not svg.exists()


def test_options_that_need_measured_costs_are_refused_without_them(tmp_path: Path) -> None:
    base = ("simulate", "--pp", "2", "--vpp", "2", "-m", "4")
    for extra, words in (
        (("--fill", "estimate"), "fills what --costs-from (SimulateOptions.costs_from) does not"),
        (("--measured-step", "1.5"), "is compared with a step predicted in seconds"),
    ):
        result = invoke(*base, *extra, exit_code=2)
        assert words in result.stderr
    costs = stage_csv(tmp_path, FOUR)
    both = invoke(
        "simulate", "-", "-m", "4", "--costs-from", "-", input=costs.read_bytes(), exit_code=2
    )
    assert "both read stdin" in both.stderr


def test_costs_that_need_the_program_say_so(tmp_path: Path) -> None:
    layers = layer_csv(tmp_path, {"0": ("1", "1")})
    base = ("simulate", "--pp", "2", "--vpp", "1", "-m", "4", "--costs-from")
    assert "measures layers: pass the program" in invoke(*base, layers, exit_code=2).stderr
    paddle = invoke(*base, MEASURED / "paddle-gpt-pp2.trace.json", exit_code=2)
    assert "is a Paddle trace, matched to a program's ops: pass the program" in paddle.stderr


MALFORMED = {  # one broken file of each format, and what its one line names
    "csv": ("stage,forward_s,backward_s\n0,fast,1\n", "line 2"),
    "json": ('{"stages": [{"stage": 0, "forward_s": -1, "backward_s": 1}]}', "stages[0]"),
    "torch-trace": ('{"traceEvents": [{"ph": "X", "name": "PP:0F0", "ts": 0}]}', "traceEvents[0]"),
    "paddle-trace": (
        '{"traceEvents": [{"ph": "X", "cat": "Operator", "name": "matmul_v2", "ts": 0, '
        '"dur": -5}]}',
        "traceEvents[0]",
    ),
    "no costs": ("\x00\x01binary", "line"),
}


@pytest.mark.parametrize("kind", MALFORMED)
def test_a_malformed_costs_file_writes_nothing(tmp_path: Path, kind: str) -> None:
    text, words = MALFORMED[kind]
    bad = tmp_path / "bad"
    bad.write_text(text)
    out, svg = tmp_path / "out.pb", tmp_path / "t.svg"
    for args in (
        ("convert", SAMPLE, "--vpp", "2", "-m", "8", "-o", out),
        ("simulate", SAMPLE, "--vpp", "2", "-m", "8", "--svg", svg),
        ("plan", SAMPLE, "-m", "8"),
    ):
        result = invoke(*args, "--costs-from", bad, exit_code=3)
        assert result.stderr.count("\n") == 1 and words in result.stderr, result.stderr
        assert result.stderr.startswith("Error: ") and result.stdout == ""
    assert not out.exists() and not svg.exists()
    assert bad.read_text() == text  # the input untouched


def test_convert_refuses_costs_that_do_not_fit_before_writing(tmp_path: Path) -> None:
    out = tmp_path / "out.pb"
    costs = stage_csv(tmp_path, FOUR)  # 4 virtual stages; pp 4 x vpp 2 has 8
    args = ("convert", SAMPLE, "--vpp", "2", "-m", "8", "-o", out, "--costs-from", costs)
    assert "pp 4 x vpp 2 = 8" in invoke(*args, exit_code=2).stderr
    assert not out.exists()
    no_m = invoke("convert", SAMPLE, "--vpp", "2", "-o", out, "--costs-from", costs, exit_code=2)
    assert "pass --micro-batches M" in no_m.stderr


# -- what is not measured: refused, or filled and said --------------------------------------


def test_a_layer_not_measured_is_refused_or_filled_and_named(tmp_path: Path) -> None:
    layers = {"pre": ("0.001", "0.002"), "post": ("0.01", "0.02")}
    layers |= {str(k): ("0.01", "0.02") for k in range(6)}  # layers 6 and 7 not measured
    costs = layer_csv(tmp_path, layers)
    args = (
        "simulate",
        SAMPLE,
        "--vpp",
        "2",
        "--split",
        "uniform",
        "-m",
        "8",
        "--costs-from",
        costs,
    )
    refused = invoke(*args, exit_code=2)
    assert "does not measure layers 6, 7" in refused.stderr and "--fill estimate" in refused.stderr
    data = checked("simulate", run_json(*args, "--fill", "estimate"))
    assert data["measured"]["filled"] == ["layer 6", "layer 7"]
    table = invoke(*args, "--fill", "estimate").stdout
    assert "not measured, filled from the program's estimate: layer 6, layer 7" in table


# -- plan and convert -m: measured costs decide (acceptance 3) ------------------------------


def flat_layers(tmp_path: Path) -> Path:
    """What a user might measure on the tour's program: its head costs a tenth of a layer,
    not the five layers its FLOPs say."""
    layers = {"pre": ("0.001", "0.001"), "post": ("0.001", "0.002")}
    return layer_csv(tmp_path, layers | {str(k): ("0.010", "0.020") for k in range(8)})


def test_measured_costs_reverse_plans_flop_based_ranking(tmp_path: Path) -> None:
    # Every schedule searched (--runtime any), as the reversal is about the costs.
    every = ("--runtime", "any")
    flops = checked("plan", run_json("plan", SAMPLE, "-m", "8", *every))
    measured = checked(
        "plan",
        run_json("plan", SAMPLE, "-m", "8", "--costs-from", flat_layers(tmp_path), *every),
    )
    first, then = flops["candidates"][0], measured["candidates"][0]
    assert (first["vpp"], first["split"]) == (1, "balanced")  # the FLOPs' heavy head
    assert then["vpp"] == 2 and then["split"] == "uniform"  # measured: interleaving pays
    assert measured["costs"] == "measured" and measured["time_unit"] == "seconds"
    assert then["predicted_step_s"] == then["makespan"] and then["error"] is None
    assert flops["candidates"][0]["predicted_step_s"] is None
    # the FLOP choice, timed with the measured costs, is slower than the measured choice
    same = next(
        c
        for c in measured["candidates"]
        if (c["vpp"], c["split"], c["schedule"]) == (1, "balanced", first["schedule"])
    )
    assert same["time_per_micro_batch"] > then["time_per_micro_batch"]

    costs = flat_layers(tmp_path)
    table = invoke("plan", SAMPLE, "-m", "8", "--costs-from", costs).stdout
    assert re.search(r"^#.* time +step +bubble", table, re.M)
    assert f"costs: measured, from {costs} (csv, seconds)" in table  # the header names them
    assert re.search(r"^1 .* \d+(\.\d+)? ms +\d+\.\d%", table, re.M)  # the step in seconds


def test_measured_costs_reverse_the_split_under_the_programs_own_runtime(tmp_path: Path) -> None:
    # Under Paddle 3.0.0 (the legacy program's own runtime) the FLOPs' heavy head asks for a
    # balanced split; measured, the head is light and the uniform split wins.
    flops = run_json("plan", SAMPLE, "-m", "8")
    measured = run_json("plan", SAMPLE, "-m", "8", "--costs-from", flat_layers(tmp_path))
    assert flops["runtime"] == measured["runtime"] == "paddle"
    assert flops["candidates"][0]["split"] == "balanced"
    assert measured["candidates"][0]["split"] == "uniform"


def test_measured_costs_reverse_convert_ms_notes(tmp_path: Path) -> None:
    """Segments whose measured costs make interleaved 1F1B slower than 1F1B, where the
    FLOPs say it is faster; the notes and --json say the measured figures, the same
    `simulate OUT --costs-from` gives."""
    seconds = ["0.096", "0.057", "0.070", "0.001", "0.010", "0.017", "0.004", "0.093"]
    layers = {"pre": ("0", "0"), "post": ("0", "0")}
    costs = layer_csv(
        tmp_path, layers | {str(k): (f, str(2 * Fraction(f))) for k, f in enumerate(seconds)}
    )
    out = tmp_path / "o.pb"
    # Hops left out: the costs alone reverse the choice (a hop counted by default, 1.19x a
    # stage's forward here, makes interleaving lose under the FLOPs too).
    convert = ("convert", SAMPLE, "--vpp", "2", "-m", "8", "-o", out, "--p2p-cost", "0")
    plain = run_json(*convert)["bubble"]
    assert plain["costs"] == "flops" and plain["steps_s"] is None
    data = checked("convert", run_json(*convert, "--costs-from", costs))
    bubble = data["bubble"]
    assert bubble["costs"] == "measured" and bubble["p2p_cost"] == 0
    assert bubble["steps_s"]["vpp"] > bubble["steps_s"]["1f1b"]  # interleaving (Paddle's VPP) loses
    sim = run_json("simulate", out, "-m", "8", "--costs-from", costs, "--p2p-cost", "0")
    assert [r["predicted_step_s"] for r in sim["results"]] == list(bubble["steps_s"].values())
    flop_sim = run_json("simulate", out, "-m", "8", "--p2p-cost", "0")
    assert flop_sim["results"][1]["makespan"] < flop_sim["results"][0]["makespan"]
    notes = invoke(*convert, "--costs-from", costs)
    line = next(x for x in notes.stdout.splitlines() if x.startswith("bubble at m=8"))
    assert f"(measured costs, {costs}, --runtime paddle)" in line and "; step " in line
    assert "p2p: not counted (--p2p-cost 0)" in notes.stdout


def test_plan_takes_per_stage_costs_of_one_named_split(tmp_path: Path) -> None:
    src = tmp_path / "p.pb"
    src.write_bytes(build_sample(SampleOptions(layers=8, pp=2, hidden=64, vocab=1000)))
    costs = stage_csv(tmp_path, FOUR)
    refused = invoke("plan", src, "-m", "4", "--costs-from", costs, exit_code=2)
    assert "pass --vpp 2 and the one --split they were measured on" in refused.stderr
    data = run_json("plan", src, "-m", "4", "--costs-from", costs, "--split", "uniform")
    assert {c["vpp"] for c in data["candidates"]} == {2}
    assert {c["split"] for c in data["candidates"]} == {"uniform"}
