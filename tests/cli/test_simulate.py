"""`vppctl simulate` and `convert --micro-batches` on the command line.

One bubble: convert's line, simulate's table and both JSONs give the same idle share
of the step for the same program and options. A converted program is simulated as
it was converted (no --vpp, its placement, its split). Schedules, group sizes, unit
costs, torch CSV and the size limit are reachable from the command line.

The tests here also cover vppctl/planner/costs.py, vppctl/report/schedule.py and
vppctl/planner/simulate.py, which have no test file of their own.
"""

from __future__ import annotations

import json
import os
import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import click
import pytest
from commandline import invoke

from vppctl.sample import SampleOptions, build_sample
from vppctl.schedule.orders import MERGED, SCHEDULES, V_SHAPED
from vppctl.schedule.simulation import simulate
from vppctl.schedule.torchcsv import parse_csv, to_ops

# convert --json's bubble: the measured costs' keys are null without --costs-from
BUBBLE_KEYS = {"definition", "micro_batches", "costs", "schedules", "steps_s", "costs_source"}
BUBBLE_KEYS |= {"filled", "runtime", "p2p_cost", "hop_bytes", "stage_loads", "why"}


def sample(tmp_path: Path, layers: int = 8, pp: int = 4, name: str = "p.pb") -> Path:
    src = tmp_path / name
    src.write_bytes(build_sample(SampleOptions(layers=layers, pp=pp, hidden=64, vocab=1000)))
    return src


def run_json(args: list[str], exit_code: int = 0) -> dict:  # type: ignore[type-arg]
    result = invoke(*args, "--json", exit_code=exit_code)
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_unit_cost_simulation_prints_both_schedules() -> None:
    result = invoke("simulate", "--pp", "8", "--vpp", "2", "-m", "32")
    assert "1F1B" in result.stdout and "interleaved" in result.stdout
    assert "idle share of the step" in result.stdout
    assert result.stderr == ""


def test_json_has_the_closed_form_bubbles() -> None:
    data = run_json(["simulate", "--pp", "8", "--vpp", "4", "-m", "32"])
    text = json.dumps(data)
    # (p-1)/m = 7/32 for 1F1B and (p-1)/(v*m) = 7/128 for interleaved, relative to ideal.
    assert "7/32" in text and "7/128" in text
    # The bubble itself is the idle share: (p-1)/(m+p-1) and (p-1)/(v*m+p-1).
    assert [r["exact"]["bubble"] for r in data["results"]] == ["7/39", "7/135"]
    assert data["bubble_definition"].startswith("idle time of all stages over pp x makespan")


def test_svg_and_trace_files(tmp_path: Path) -> None:
    svg, trace = tmp_path / "t.svg", tmp_path / "t.json"
    args = ["simulate", "--pp", "4", "--vpp", "2", "-m", "8", "--svg", str(svg)]
    invoke(*args, "--trace", str(trace))
    # Both schedules: 1F1B over merged chunks (4 x 8 x 2 steps) and interleaved (x 2 chunks).
    cells = [
        e for e in ET.parse(svg).iter() if e.tag.endswith("}g") and "step" in e.get("class", "")
    ]
    assert len(cells) == 4 * 8 * 2 + 4 * 2 * 8 * 2
    events = [e for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "X"]
    assert len(events) == 4 * 8 * 2 + 4 * 2 * 8 * 2


def test_costs_from_a_program(tmp_path: Path) -> None:
    src = sample(tmp_path)
    data = run_json(["simulate", str(src), "--vpp", "2", "-m", "8"])
    assert data["plan"]["costs"]["measure"] == "flops"
    assert data["plan"]["layers_per_segment"] == [1] * 8
    mismatch = invoke("simulate", str(src), "--pp", "2", "--vpp", "2", "-m", "8", exit_code=4)
    assert "--pp 2" in mismatch.stderr


def test_simulate_needs_pp_and_vpp_without_a_program() -> None:
    result = invoke("simulate", "--vpp", "2", "-m", "8", exit_code=2)
    assert "--pp is required" in result.stderr
    result = invoke("simulate", "--pp", "2", "-m", "8", exit_code=2)
    assert "--vpp is required" in result.stderr


def test_plan_and_memory_options_need_a_program() -> None:
    for extra in (["--split", "balanced"], ["--memory-limit", "1GiB"], ["--seg-method", "x"]):
        result = invoke("simulate", "--pp", "2", "--vpp", "2", "-m", "4", *extra, exit_code=2)
        assert "pass the program" in result.stderr, extra


def test_an_unconverted_program_needs_vpp(tmp_path: Path) -> None:
    result = invoke("simulate", str(sample(tmp_path)), "-m", "8", exit_code=2)
    assert "--vpp is required" in result.stderr and "no recorded plan" in result.stderr


# -- one bubble --------------------------------------------------------------------


def percents(line: str) -> list[str]:
    return re.findall(r"\d+\.\d%", line)


@pytest.mark.parametrize("placement", ["loop", "v"])
def test_convert_and_simulate_give_the_same_bubble(tmp_path: Path, placement) -> None:
    src, out = sample(tmp_path), tmp_path / "o.pb"
    args = ["convert", str(src), "--vpp", "2", "--placement", placement, "-m", "8"]
    args += ["--runtime", "any"]
    converted = invoke(*args, "-o", str(out), env={"COLUMNS": "80"})
    line = next(x for x in converted.stdout.splitlines() if x.startswith("bubble at m=8"))
    assert "(FLOP costs, --runtime any)" in line and line.endswith("of the step")
    shown = percents(line)
    assert len(shown) == 2
    # simulate of the converted program and of the input with the same options
    from_output = run_json(["simulate", str(out), "-m", "8", "--runtime", "any"])
    from_input = run_json(
        [
            "simulate",
            str(src),
            "--vpp",
            "2",
            "--placement",
            placement,
            "-m",
            "8",
            "--runtime",
            "any",
        ]
    )
    for data in (from_output, from_input):
        assert [f"{r['bubble']:.1%}" for r in data["results"]] == shown
    table = invoke("simulate", str(out), "-m", "8", "--runtime", "any").stdout
    row = next(x for x in table.splitlines() if x.startswith("bubble (idle share of the step)"))
    assert percents(row) == shown
    convert_json = run_json([*args, "-o", str(tmp_path / "o2.pb")])["bubble"]
    second = "interleaved" if placement == "loop" else "zbv"
    assert set(convert_json) == BUBBLE_KEYS
    assert convert_json["steps_s"] is None and convert_json["costs_source"] is None
    assert list(convert_json["schedules"]) == ["1f1b", second]
    assert convert_json["p2p_cost"] == from_output["p2p"]["cost"] > 0
    assert [convert_json["schedules"]["1f1b"], convert_json["schedules"][second]] == [
        r["bubble"] for r in from_output["results"]
    ]
    assert convert_json["definition"] == from_output["bubble_definition"]
    # and the same bytes per stage (micro-batch size 1)
    memory = run_json([*args, "-o", str(tmp_path / "o3.pb")])["memory"]
    for schedule, result in zip(("1f1b", second), from_output["results"]):
        assert [s["peak_bytes"] for s in memory["per_schedule"][schedule]] == [
            s["peak_bytes"] for s in result["per_stage"]
        ]


def test_convert_with_a_micro_batch_count_interleaving_refuses_still_converts(
    tmp_path: Path,
) -> None:
    src, out = sample(tmp_path), tmp_path / "o.pb"
    # m = 6 at pp 4: Megatron's default group size 4 leaves a last group of 2 < pp.
    megatron = ["--runtime", "megatron"]
    result = invoke("convert", str(src), "--vpp", "2", "-m", "6", *megatron, "-o", str(out))
    assert out.stat().st_size > 0
    line = next(x for x in result.stdout.splitlines() if x.startswith("bubble at m=6"))
    assert "1F1B" in line and "interleaved" not in line
    assert "no interleaved bubble at --micro-batches 6" in result.stderr
    assert "legal --group-size values: 6" in result.stderr
    assert "the conversion is unaffected" in result.stderr
    data = run_json(["convert", str(src), "--vpp", "2", "-m", "6", *megatron, "-o", str(out)])
    assert set(data["bubble"]) == BUBBLE_KEYS
    assert list(data["bubble"]["schedules"]) == ["1f1b"] and data["bubble"]["why"] is None


def test_fewer_micro_batches_than_stages_warn_in_convert(tmp_path: Path) -> None:
    src = sample(tmp_path)
    args = ["convert", str(src), "--vpp", "2", "-m", "2", "--runtime", "megatron"]
    result = invoke(*args, "-o", str(tmp_path / "o.pb"))
    assert "micro-batches (2) < pp (4)" in result.stderr  # Megatron's 1F1B takes any m
    assert "no interleaved bubble" in result.stderr


# -- a converted program is simulated as converted ---------------------------------


def test_a_converted_program_needs_no_vpp_and_prints_its_plan(tmp_path: Path) -> None:
    src, out = sample(tmp_path, layers=10), tmp_path / "o.pb"
    convert = ["convert", str(src), "--vpp", "2", "--split", "balanced", "-o", str(out)]
    invoke(*convert)
    result = invoke("simulate", str(out), "-m", "8")
    first = result.stdout.splitlines()[0]
    assert first.startswith("plan: pp 4 x vpp 2, loop placement, as converted (layers ")
    data = run_json(["simulate", str(out), "-m", "8"])
    assert data["plan"]["recorded"] is True and data["plan"]["split"] == "balanced"
    assert sum(data["plan"]["layers_per_segment"]) == 10
    conflict = invoke("simulate", str(out), "-m", "8", "--vpp", "4", exit_code=2)
    assert "simulated as converted" in conflict.stderr and "drop --vpp 4" in conflict.stderr


def test_a_v_placed_program_runs_the_v_order(tmp_path: Path) -> None:
    src, out = sample(tmp_path), tmp_path / "o.pb"
    args = ["convert", str(src), "--vpp", "2", "--placement", "v", "-o", str(out)]
    invoke(*args)
    data = run_json(["simulate", str(out), "-m", "8", "--runtime", "torch"])
    assert [r["schedule"] for r in data["results"]] == ["1f1b", "zbv"]
    zbv = data["results"][1]
    assert zbv["placement"] == "v"
    # stage 0 holds virtual stages 0 and 2pp-1 = 7; stage 3 holds 3 and 4
    stage0 = {a[: a.index(next(c for c in a if c.isalpha()))] for a in zbv["per_stage"][0]["order"]}
    stage3 = {a[: a.index(next(c for c in a if c.isalpha()))] for a in zbv["per_stage"][3]["order"]}
    assert stage0 == {"0", "7"} and stage3 == {"3", "4"}
    args = ["simulate", str(out), "-m", "8", "--schedule", "interleaved", "--runtime", "torch"]
    interleaved = invoke(*args, exit_code=2)
    assert "V-placed" in interleaved.stderr
    paddle = invoke("simulate", str(out), "-m", "8", exit_code=2)  # Paddle: ZBVPP, m == pp
    assert "breaks rule P6" in paddle.stderr
    assert [r["schedule"] for r in run_json(["simulate", str(out), "-m", "4"])["results"]] == [
        "1f1b",
        "zbvpp",
    ]


def test_uniform_impossible_falls_back_to_balanced_with_a_warning(tmp_path: Path) -> None:
    src = sample(tmp_path, layers=10)
    result = invoke("simulate", str(src), "--vpp", "2", "-m", "8")
    assert "10 layers do not divide" in result.stderr and "--split balanced" in result.stderr
    assert "split balanced (layers " in result.stdout.splitlines()[0]
    assert "warning" not in result.stdout
    explicit = run_json(
        ["simulate", str(src), "--vpp", "2", "-m", "8", "--layers-per-chunk", "1,1,1,1,1,1,2,2"],
    )
    assert explicit["plan"]["layers_per_segment"] == [1, 1, 1, 1, 1, 1, 2, 2]
    assert explicit["plan"]["split"] == "explicit" and explicit["warnings"] == []


# -- schedules, group sizes, costs, CSV ---------------------------------------------


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_every_schedule_runs_from_the_command_line(schedule: str) -> None:
    extra = ["--placement", "v"] if schedule in V_SHAPED else []
    vpp = "1" if schedule in MERGED else "2"
    m = "4" if schedule == "zbvpp" else "8"  # Paddle runs ZBVPP at m == pp only
    data = run_json(
        ["simulate", "--pp", "4", "--vpp", vpp, "-m", m, "--schedule", schedule, *extra]
    )
    (result,) = data["results"]
    assert result["schedule"] == schedule
    per_stage = result["per_stage"]
    assert len(per_stage) == 4
    for stage in per_stage:
        assert stage["order"] and re.fullmatch(r"\d+[FBIW]\d+", stage["order"][0])
        assert stage["idle"] >= 0 and stage["peak_in_flight_per_chunk"]
    kinds = {
        a[-2] if a[-2].isalpha() else re.sub(r"\d", "", a) for s in per_stage for a in s["order"]
    }
    assert kinds <= {"F", "B", "I", "W"}


def test_group_size_is_checked_and_recorded() -> None:
    args = ["simulate", "--pp", "4", "--vpp", "2", "-m", "10", "--schedule", "interleaved"]
    data = run_json([*args, "--group-size", "5"])
    assert data["results"][0]["group_size"] == 5
    bad = invoke(*args, "--group-size", "4", exit_code=2)
    assert "legal --group-size values: 5, 6, 10" in bad.stderr
    wrong = invoke(
        "simulate",
        "--pp",
        "4",
        "--vpp",
        "1",
        "-m",
        "8",
        "--schedule",
        "1f1b",
        "--group-size",
        "4",
        exit_code=2,
    )
    assert "drop --group-size" in wrong.stderr


def test_unit_costs_reproduce_the_published_makespans() -> None:
    base = ["simulate", "--pp", "4", "--vpp", "1", "-m", "8", "--costs", "1,1,1"]
    one_f_one_b = run_json([*base, "--schedule", "1f1b"])["results"][0]
    zb1p = run_json([*base, "--schedule", "zb1p"])["results"][0]
    assert one_f_one_b["makespan"] == 33 and zb1p["makespan"] == 27
    assert [s["idle"] for s in one_f_one_b["per_stage"]] == [9] * 4
    assert [s["idle"] for s in zb1p["per_stage"]] == [3] * 4
    bad = invoke(*base, "--costs", "1,x,1", exit_code=2)
    assert "--costs takes three" in bad.stderr


def test_csv_is_torch_notation_and_parses_back(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    args = ["simulate", "--pp", "4", "--vpp", "2", "-m", "8", "--schedule", "zbv"]
    data = run_json([*args, "--csv", str(path)])
    rows = parse_csv(path.read_text())
    orders = [list(s["order"]) for s in data["results"][0]["per_stage"]]
    assert [[f"{v}{k}{m}" for v, k, m in row] for row in rows] == orders
    expected = simulate(4, 2, 8, "zbv").ops
    assert to_ops(rows, 2, "v") == expected
    assert data["written"] == [{"path": str(path), "bytes": path.stat().st_size}]


def test_outputs_never_overwrite_the_input_or_each_other(tmp_path: Path) -> None:
    src = sample(tmp_path)
    before = src.read_bytes()
    for flag in ("--csv", "--svg", "--trace"):
        result = invoke("simulate", str(src), "--vpp", "2", "-m", "8", flag, str(src), exit_code=2)
        assert "is the input" in result.stderr
    same = tmp_path / "x"
    args = [
        "simulate",
        "--pp",
        "2",
        "--vpp",
        "2",
        "-m",
        "4",
        "--svg",
        str(same),
        "--csv",
        str(same),
    ]
    result = invoke(*args, exit_code=2)
    assert "name the same file" in result.stderr
    assert src.read_bytes() == before and not same.exists()


@pytest.mark.parametrize("how", ["absolute", "relative", "symbolic link", "hard link"])
def test_two_pictures_by_different_paths_to_one_file_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    (here / "o.svg").write_text("kept")
    other = {
        "absolute": str(here / "o.svg"),
        "relative": f"../{here.name}/o.svg",
        "symbolic link": "link.svg",
        "hard link": "hard.svg",
    }[how]
    if how == "symbolic link":
        os.symlink("o.svg", "link.svg")
    if how == "hard link":
        os.link("o.svg", "hard.svg")
    base = ["simulate", "--pp", "2", "--vpp", "2", "-m", "4", "--svg", "o.svg"]
    for flag in ("--trace", "--csv"):
        result = invoke(*base, flag, other, exit_code=2)
        assert f"--svg and {flag} name the same file" in result.stderr
        assert (here / "o.svg").read_text() == "kept"  # nothing written


def test_an_absurd_simulation_is_refused_at_once() -> None:
    began = time.perf_counter()
    args = ["simulate", "--pp", "4096", "--vpp", "4096", "-m", "65536"]
    result = invoke(*args, exit_code=None)
    assert time.perf_counter() - began < 5
    assert result.exit_code == 2
    assert "more than the simulator's limit of 131,072" in result.stderr
    assert "lower --micro-batches" in result.stderr


def test_memory_per_stage_is_in_the_table_and_the_json(tmp_path: Path, terminal) -> None:
    src = sample(tmp_path)
    base = ["simulate", str(src), "--vpp", "2", "-m", "8", "--micro-batch-size", "2"]
    table = invoke(*base)
    assert "memory per stage (micro-batch size 2)" in table.stdout
    assert all(len(line) <= 80 for line in table.stdout.splitlines()[:40])
    data = run_json(base)
    stage = data["results"][1]["per_stage"][0]
    for key in ("params_bytes", "grads_bytes", "optimizer_bytes", "peak_activation_bytes"):
        assert stage[key] > 0, key
    assert stage["peak_bytes"] == (
        stage["params_bytes"]
        + stage["grads_bytes"]
        + stage["optimizer_bytes"]
        + stage["peak_activation_bytes"]
    )
    for chunk in stage["chunks"]:
        assert chunk["activation_bytes"] == (
            chunk["activation_bytes_per_micro_batch"] * chunk["peak_in_flight"]
        )
    assert stage["peak_activation_bytes"] <= sum(c["activation_bytes"] for c in stage["chunks"])


def test_memory_limit_flags_the_stages_over_it(tmp_path: Path) -> None:
    src = sample(tmp_path)
    base = ["simulate", str(src), "--vpp", "2", "-m", "8", "--schedule", "interleaved"]
    base += ["--runtime", "any"]
    peaks = [s["peak_bytes"] for s in run_json(base)["results"][0]["per_stage"]]
    limit = sorted(peaks)[1]  # between the lowest and the highest peak
    data = run_json([*base, "--memory-limit", str(limit)], exit_code=1)
    flags = [s["over_limit"] for s in data["results"][0]["per_stage"]]
    assert flags == [p > limit for p in peaks] and any(flags) and not all(flags)
    assert data["over_memory_limit"] is True
    table = invoke(*base, "--memory-limit", str(limit), exit_code=1)
    assert "over the limit: stage" in table.stdout
    over = [str(stage) for stage, flag in enumerate(flags) if flag]
    noun = "stage" if len(over) == 1 else "stages"
    assert "over --memory-limit" in table.stderr and f"{noun} {', '.join(over)}" in table.stderr
    fits = run_json([*base, "--memory-limit", str(max(peaks))])
    assert fits["over_memory_limit"] is False
    bad = invoke(*base, "--memory-limit", "lots", exit_code=2)
    assert "is not a size" in bad.stderr


@pytest.mark.parametrize(
    "options",
    [
        ["--split", "balanced", "--cost", "flops"],
        ["--split", "keep"],
        ["--split", "balanced", "--placement", "v"],
        ["--layers-per-chunk", "2,1,1,1,1,1,1,2"],
    ],
)
def test_simulate_plans_as_convert_does_with_the_same_options(
    tmp_path: Path, options: list[str]
) -> None:
    src, out = sample(tmp_path, layers=10), tmp_path / "o.pb"
    converted = run_json(["convert", str(src), "--vpp", "2", *options, "-o", str(out)])
    simulated = run_json(
        ["simulate", str(src), "--vpp", "2", "-m", "8", *options, "--runtime", "any"]
    )
    as_converted = run_json(["simulate", str(out), "-m", "8", "--runtime", "any"])
    counts = [len(s["layers"]) for s in converted["segments"]]
    assert simulated["plan"]["layers_per_segment"] == counts
    assert as_converted["plan"]["layers_per_segment"] == counts
    assert simulated["plan"]["placement"] == converted["placement"]
    assert [r["bubble"] for r in simulated["results"]] == [
        r["bubble"] for r in as_converted["results"]
    ]


def test_the_cli_offers_every_schedule_without_importing_the_simulator() -> None:
    import subprocess
    import sys

    from vppctl.cli.schedule import simulate

    choices = next(p.type for p in simulate.params if p.name == "schedule")
    assert isinstance(choices, click.Choice) and tuple(choices.choices) == SCHEDULES
    code = "import sys, vppctl.cli; print('vppctl.schedule.simulation' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "False"


# -- several outputs: all or nothing (issue 21 item 5) -------------------------------------

OLD_PICTURE = b"an earlier picture that must survive"
PICTURES = ["simulate", "--pp", "4", "--vpp", "2", "-m", "8"]


def _earlier(tmp_path: Path, *names: str) -> dict[Path, tuple[bytes, int]]:
    olds = {}
    for name in names:
        path = tmp_path / name
        path.write_bytes(OLD_PICTURE)
        olds[path] = (OLD_PICTURE, path.stat().st_mtime_ns)
    return olds


def _untouched(olds: dict[Path, tuple[bytes, int]]) -> bool:
    return all((p.read_bytes(), p.stat().st_mtime_ns) == old for p, old in olds.items())


def test_an_output_that_cannot_be_written_replaces_no_other(tmp_path: Path) -> None:
    """Was: `simulate --svg OLD --csv /dev/full` exit 3 after replacing OLD."""
    olds = _earlier(tmp_path, "old.svg", "old.json")
    args = ["--svg", str(tmp_path / "old.svg"), "--trace", str(tmp_path / "old.json")]
    result = invoke(*PICTURES, *args, "--csv", "/dev/full", exit_code=3)
    assert "no space left on device" in result.stderr
    assert _untouched(olds)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.json", "old.svg"]


def test_a_file_that_cannot_be_renamed_into_place_replaces_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files are given their names last, in the order of the options, once every output
    was written: the first rename failing leaves the second file unrenamed too. (A rename
    failing after another succeeded would leave both new and old files: renames are
    atomic one by one, not together; docs/io.md.)"""
    from vppctl.program import atomic

    olds = _earlier(tmp_path, "a.svg", "b.csv")
    commit = atomic.Staged.commit

    def refuse_the_svg(self: atomic.Staged) -> None:
        if self.path.name == "a.svg":
            raise OSError(5, "Input/output error")
        commit(self)

    monkeypatch.setattr(atomic.Staged, "commit", refuse_the_svg)
    args = ["--svg", str(tmp_path / "a.svg"), "--csv", str(tmp_path / "b.csv")]
    result = invoke(*PICTURES, *args, exit_code=3)
    assert result.stderr.startswith(f"Error: cannot write {tmp_path / 'a.svg'}: input/output")
    assert _untouched(olds)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.svg", "b.csv"]


def test_a_fifo_nobody_reads_is_refused_before_any_output_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vppctl.program import files

    monkeypatch.setattr(files, "WAIT_SECONDS", 0.2)
    olds = _earlier(tmp_path, "old.svg")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    args = ["--svg", str(tmp_path / "old.svg"), "--csv", str(fifo)]
    result = invoke(*PICTURES, *args, exit_code=3)
    assert "no process opened it for reading" in result.stderr
    assert _untouched(olds)


def test_every_output_is_written_when_all_can_be(tmp_path: Path) -> None:
    olds = _earlier(tmp_path, "old.svg", "old.csv")
    args = ["--svg", str(tmp_path / "old.svg"), "--csv", str(tmp_path / "old.csv")]
    invoke(*PICTURES, *args, "--trace", os.devnull)
    assert not any(p.read_bytes() == OLD_PICTURE for p in olds)
    assert (tmp_path / "old.svg").read_bytes().startswith(b"<svg")


@pytest.mark.parametrize(
    ("given", "canonical"), [("VPP", "vpp"), ("ZBH1", "zbh1"), ("FThenB", "fthenb")]
)
def test_schedule_takes_paddles_schedule_mode_names_in_any_case(given: str, canonical: str) -> None:
    vpp = "2" if canonical == "vpp" else "1"
    data = run_json(["simulate", "--pp", "4", "--vpp", vpp, "-m", "8", "--schedule", given])
    assert data["results"][0]["schedule"] == canonical


# -- a program carrying chunk ids (Paddle's own completion) ---------------------------------


def _pir(tmp_path: Path, stages: list[int], chunks: list[int] | None, name: str) -> Path:
    from pir_json import training

    src = tmp_path / name
    src.write_bytes(training(stages, chunks).bytes())
    return src


@pytest.mark.parametrize(
    ("stages", "chunks", "split", "counts"),
    [
        ([0, 1, 0, 1], [0, 0, 1, 1], "keep", [1, 1, 1, 1]),  # as Paddle's PIR completion deals
        ([0, 0, 1, 1, 0, 1], [0, 0, 0, 0, 1, 1], "keep", [2, 2, 1, 1]),
        ([0, 1, 0, 0, 1, 1], [0, 0, 1, 1, 1, 1], "explicit", [1, 1, 2, 2]),  # another split
    ],
)
def test_a_program_with_chunk_ids_is_simulated_as_they_split_it(
    tmp_path: Path, stages: list[int], chunks: list[int], split: str, counts: list[int]
) -> None:
    """Was: `simulate` on Paddle's completed VPP program asked for --vpp, although `verify`
    reads vpp from the same chunk ids."""
    src = _pir(tmp_path, stages, chunks, "completed.json")
    # a split Paddle's PIR completion does not make runs under its runtime with pir_plan (R8)
    runtime = ["--runtime", "any"] if split == "explicit" else []
    plan = run_json(["simulate", str(src), "-m", "4", *runtime])["plan"]
    assert (plan["pp"], plan["vpp"], plan["placement"]) == (2, 2, "loop")
    assert (plan["split"], plan["layers_per_segment"], plan["recorded"]) == (split, counts, False)
    if split == "keep":  # asked for by name: the vpp of the chunk ids, the split asked
        plan = run_json(["simulate", str(src), "-m", "4", "--split", "keep"])["plan"]
        assert (plan["vpp"], plan["split"], plan["layers_per_segment"]) == (2, "keep", counts)


@pytest.mark.parametrize(
    ("args", "split"),
    [(["--split", "uniform"], "uniform"), (["--layers-per-chunk", "1,1,1,1"], "explicit")],
)
def test_plan_options_plan_at_the_chunk_ids_vpp(
    tmp_path: Path, args: list[str], split: str
) -> None:
    """--split or --layers-per-chunk: the plan asked, at the ids' vpp."""
    src = _pir(tmp_path, [0, 1, 0, 1], [0, 0, 1, 1], "completed.json")
    plan = run_json(["simulate", str(src), "-m", "4", *args])["plan"]
    assert (plan["vpp"], plan["split"], plan["layers_per_segment"]) == (2, split, [1, 1, 1, 1])


def test_a_placement_the_chunk_ids_contradict_is_refused(tmp_path: Path) -> None:
    """--placement v on a program its chunk ids lay out loop: convert's refusal, exit 4."""
    src = _pir(tmp_path, [0, 1, 0, 1], [0, 0, 1, 1], "completed.json")
    r = invoke("simulate", str(src), "-m", "4", "--placement", "v", exit_code=4)
    assert "already has an interleaved layout" in r.stderr


def test_chunk_ids_that_split_no_loop_placed_plan_need_vpp(tmp_path: Path) -> None:
    src = _pir(tmp_path, [0, 1, 0, 1], [1, 1, 0, 0], "odd.json")  # chunk 1 before chunk 0
    r = invoke("simulate", str(src), "-m", "4", exit_code=2)
    assert "do not split its layers into loop-placed segments" in r.stderr
    assert "--vpp" in r.stderr
    invoke("simulate", str(src), "-m", "4", "--vpp", "2")


def test_a_pir_program_without_chunk_ids_needs_vpp(tmp_path: Path) -> None:
    src = _pir(tmp_path, [0, 0, 1, 1], None, "plain.json")
    r = invoke("simulate", str(src), "-m", "4", exit_code=2)
    assert "--vpp is required" in r.stderr and "no chunk ids" in r.stderr


# -- under a runtime (issue 33) ---------------------------------------------------------


def test_a_programs_own_runtime_is_the_default_and_the_header_says_it(tmp_path: Path) -> None:
    src = sample(tmp_path)
    data = run_json(["simulate", str(src), "--vpp", "2", "-m", "8"])
    assert data["runtime"] == "paddle"
    assert [r["schedule"] for r in data["results"]] == ["1f1b", "vpp"]  # Paddle's VPP
    out = invoke("simulate", str(src), "--vpp", "2", "-m", "8").stdout
    assert "runtime: Paddle 3.0.0 (legacy ProgramDesc)" in out and "--runtime any" in out
    widened = run_json(["simulate", str(src), "--vpp", "2", "-m", "8", "--runtime", "any"])
    assert [r["schedule"] for r in widened["results"]] == ["1f1b", "interleaved"]
    assert run_json(["simulate", "--pp", "4", "--vpp", "2", "-m", "8"])["runtime"] == "any"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--schedule", "zbv"], "has no zbv schedule (rule P1"),
        (["--schedule", "eager1f1b", "-m", "6"], "breaks rule P4"),
        (["--runtime", "torch", "--schedule", "1f1b", "-m", "3"], "breaks rule T2"),
        (["--runtime", "megatron", "--schedule", "interleaved", "-m", "6"], "breaks rule M2"),
        (["--runtime", "paddle-pir", "--schedule", "zbh1"], "has no zbh1 schedule (rule R1"),
    ],
)
def test_what_the_runtime_refuses_is_exit_2_in_its_words(
    tmp_path: Path, args: list[str], words: str
) -> None:
    src = sample(tmp_path)
    m = [] if "-m" in args else ["-m", "8"]
    result = invoke(
        "simulate",
        str(src),
        "--vpp",
        "1" if "1f1b" in args or "eager1f1b" in args or "zbh1" in args else "2",
        *m,
        *args,
        exit_code=2,
    )
    assert words in result.stderr and "--runtime any" in result.stderr
    assert result.stderr.count("\n") == 1  # one Error: line


def test_a_note_the_runtime_runs_anyway_is_a_warning(tmp_path: Path) -> None:
    src = sample(tmp_path)
    result = invoke("simulate", str(src), "--vpp", "2", "-m", "6")  # pp 4 does not divide 6
    assert "P13" in result.stderr and "prune_by_vpp" in result.stderr


def test_torch_runs_its_own_group_size(tmp_path: Path) -> None:
    src = sample(tmp_path)
    data = run_json(["simulate", str(src), "--vpp", "2", "-m", "7", "--runtime", "torch"])
    assert [r["group_size"] for r in data["results"]] == [None, 7]  # Megatron's default refuses
    invoke("simulate", str(src), "--vpp", "2", "-m", "7", "--runtime", "megatron", exit_code=2)


# -- --layout -------------------------------------------------------------------------


def test_a_layout_is_simulated_as_its_split(tmp_path: Path) -> None:
    src = sample(tmp_path)
    data = run_json(["simulate", str(src), "--layout", "Et*3|t|t*2|t*2L", "-m", "8"])
    assert data["plan"]["vpp"] == 1 and data["plan"]["split"] == "explicit"
    assert data["plan"]["layers_per_segment"] == [3, 1, 2, 2]
    uneven = run_json(
        [
            "simulate",
            str(sample(tmp_path, 12, name="q.pb")),
            "--layout",
            "Et*2|(t|)*2t*2|t|t*2|t*2|tL",
            "-m",
            "8",
        ]
    )
    assert uneven["plan"]["vpp"] == 2 and uneven["plan"]["layers_per_segment"] == [
        2,
        1,
        1,
        2,
        1,
        2,
        2,
        1,
    ]
    refused = invoke("simulate", str(src), "--layout", "Et*3|t|t*2|t*3L", "-m", "8", exit_code=2)
    assert (
        "--layout 'Et*3|t|t*2|t*3L': the layout has 9 transformer layers (t) but the model has 8"
        in refused.stderr
    )
    no_program = invoke(
        "simulate", "--pp", "4", "--vpp", "1", "-m", "8", "--layout", "Et|t|t|tL", exit_code=2
    )
    assert "--layout" in no_program.stderr and "pass the program" in no_program.stderr


def test_a_pir_program_runs_only_the_splits_paddle_or_pir_plan_makes(tmp_path: Path) -> None:
    """Under Paddle's PIR runtime: keep (Paddle's completion deals it) runs; balanced at
    vpp 4 (R8: not dealt so) runs with vppctl.paddle.pir_plan, said in a warning; V
    placement (R7) is refused: neither makes it."""
    from pir_cases import reference

    path = tmp_path / "gpt_keep.json"  # 7 + 5 layers on pp 2
    path.write_bytes(reference("gpt_keep_pp2_v2", "plain"))
    keep = run_json(["simulate", str(path), "--vpp", "4", "--split", "keep", "-m", "8"])
    assert keep["runtime"] == "paddle-pir"
    assert [r["schedule"] for r in keep["results"]] == ["1f1b", "vpp"]
    assert not any("pir_plan" in w for w in keep["warnings"])
    args = ["simulate", str(path), "--vpp", "4", "--split", "balanced", "-m", "8"]
    balanced = run_json(args)
    assert [r["schedule"] for r in balanced["results"]] == ["1f1b", "vpp"]
    (said,) = [w for w in balanced["warnings"] if "pir_plan" in w]
    assert "runs Paddle VPP (v=4) on this plan with vppctl.paddle.pir_plan only" in said
    assert "R8" in said and 'with vppctl.paddle.pir_plan("PLAN.json"): dist_model.train()' in said
    v = ["simulate", str(path), "--vpp", "2", "--placement", "v", "-m", "8", "--schedule", "vpp"]
    refused = invoke(*v, exit_code=2)
    assert "Paddle 3.3.1 (PIR) cannot make this split for VPP (rule R7" in refused.stderr
    assert "nor can vppctl.paddle.pir_plan" in refused.stderr


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_without_a_program_every_run_is_one_its_home_runtime_runs(schedule: str) -> None:
    """No program: the runtime is `any`, each schedule under its home runtime's rules. At
    every m up to 3pp, simulate runs exactly what those rules accept (and what Paddle's VPP
    job list does not deadlock on), and refuses the rest in the runtime's words, exit 2."""
    from vppctl.schedule import ScheduleRefused
    from vppctl.schedule.runtimes import Counts, default_group_size, preflight

    pp = 4
    placement = "v" if schedule in V_SHAPED else "loop"
    vpp = 1 if schedule in MERGED else 2
    ran = refused = 0
    for m in range(1, 3 * pp + 1):
        args = ["simulate", "--pp", str(pp), "--vpp", str(vpp), "-m", str(m)]
        args += ["--placement", placement, "--schedule", schedule]
        counts = Counts(schedule, pp, vpp, m, placement)  # type: ignore[arg-type]
        rule = preflight("any", counts)[0]
        if rule is None:
            group = default_group_size("any", schedule, pp, m)  # type: ignore[arg-type]
            try:
                simulate(pp, vpp, m, schedule, placement=placement, group_size=group)  # type: ignore[arg-type]
            except ScheduleRefused:  # Paddle's VPP job list deadlocks (P8): refused as a cycle
                assert "(rule P8, pipeline_vpp.py" in invoke(*args, exit_code=2).stderr
                refused += 1
                continue
            data = run_json(args)
            assert data["runtime"] == "any" and data["results"][0]["schedule"] == schedule
            ran += 1
        else:
            result = invoke(*args, exit_code=2)
            assert f"breaks rule {rule.reason.split(':')[0]}" in result.stderr, result.stderr
            refused += 1
    assert ran and ran + refused == 3 * pp  # each schedule runs somewhere, every m is decided
