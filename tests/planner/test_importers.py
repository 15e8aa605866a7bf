"""Measured costs read from a file (vppctl/planner/importers.py): the costs CSV and JSON,
torch's and Paddle's profiler traces (tests/data/measured/, made by
tests/support/measured_traces.py with torch 2.13.0 and Paddle 3.3.1), and every malformed
file refused in one line (exit 3)."""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from fractions import Fraction
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import paths
import pytest

from vppctl.convert import ConvertOptions, plan_program
from vppctl.errors import EXIT_FILE, ProgramFileError
from vppctl.plan import PlanOptions
from vppctl.planner.importers import MAX_COSTS_BYTES, PaddleTrace, read_costs
from vppctl.planner.measured import NS, MeasuredCosts, Timing
from vppctl.program import read_program

MEASURED = paths.MEASURED
TORCH_ISOLATED = MEASURED / "torch-isolated-pp2-v2.json"
TORCH_STEP = MEASURED / "torch-zbv-step-pp2.json"
PADDLE_PROGRAM = MEASURED / "paddle-gpt-pp2.pb"
PADDLE_TRACE = MEASURED / "paddle-gpt-pp2.trace.json"


def costs_schema() -> dict[str, Any]:
    text = resources.files("vppctl.report").joinpath("schemas", "costs.json").read_text()
    return json.loads(text)  # type: ignore[no-any-return]


def read(path: Path) -> MeasuredCosts:
    found = read_costs(str(path))
    assert isinstance(found, MeasuredCosts)
    return found


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


# -- the costs CSV and JSON ---------------------------------------------------------------


def test_a_stage_csv_is_read_exactly_in_seconds(tmp_path: Path) -> None:
    text = (
        "# measured on rank 0 and 1\n"
        "stage,forward_s,backward_s,weight_s,activation_bytes\n"
        "0,0.0123,0,0.0246,1048576\n"
        "\n"
        "1, 0.02 ,0.021,0.019,2097152\n"
    )
    costs = read(write(tmp_path, "costs.csv", text))
    assert (costs.source.format, costs.source.unit, costs.per) == ("csv", "s", "stage")
    assert costs.stage_count == 2
    assert costs.timings[0] == Timing(Fraction("0.0123"), Fraction(0), Fraction("0.0246"), 1048576)
    assert costs.timings[1].whole == Fraction("0.04")
    assert costs.step is None


def test_a_layer_csv_takes_pre_and_post_and_empty_optional_cells(tmp_path: Path) -> None:
    text = "layer,backward_s,forward_s,weight_s\npre,0.002,0.001,\n0,0.02,0.01,\nPOST,0.04,0.03,\n"
    costs = read(write(tmp_path, "layers.csv", text))
    assert costs.per == "layer" and set(costs.timings) == {"pre", 0, "post"}
    assert costs.timings["post"] == Timing(Fraction("0.03"), Fraction("0.04"))
    assert not costs.has_weight


def test_seconds_are_kept_to_the_nanosecond(tmp_path: Path) -> None:
    costs = read(write(tmp_path, "c.csv", "stage,forward_s,backward_s\n0,1.0000000004,2e-10\n"))
    assert costs.timings[0].forward == 1 and costs.timings[0].backward == 0
    assert all(t.forward.denominator <= NS for t in costs.timings.values())


@pytest.mark.parametrize(("unit", "scale"), [("s", 1), ("ms", 1000), ("us", 1_000_000)])
def test_json_costs_in_each_unit(tmp_path: Path, unit: str, scale: int) -> None:
    data = {
        "unit": unit,
        "layers": [
            {"layer": 0, "forward_s": 12 * scale // 1000, "backward_s": 24 * scale // 1000},
            {"layer": "post", "forward_s": 0.5 * scale, "backward_s": scale},
        ],
    }
    jsonschema.validate(data, costs_schema())
    costs = read(write(tmp_path, "c.json", json.dumps(data)))
    assert (costs.source.format, costs.source.unit) == ("json", unit)
    assert costs.timings[0].forward == Fraction(12 * scale // 1000, scale)
    assert costs.timings["post"] == Timing(Fraction(1, 2), Fraction(1))


# -- torch's profiler -----------------------------------------------------------------------


def _torch_medians(path: Path) -> dict[tuple[int, str], float]:
    """Independently of the importer: each stage's median per action kind (F, I, SEND_F,
    ...), in microseconds; 0 for a kind the stage has no event of."""
    found: dict[tuple[int, str], list[float]] = {}
    for event in json.loads(path.read_text())["traceEvents"]:
        got = re.fullmatch(r"PP:(\d+)([A-Z_]+?)(\d+)", event.get("name", ""))
        if event.get("ph") == "X" and got:
            found.setdefault((int(got[1]), got[2]), []).append(event["dur"])
    medians = {k: statistics.median(v) for k, v in found.items()}
    kinds = ("F", "B", "I", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B")
    return {(s, k): medians.get((s, k), 0.0) for s in range(4) for k in kinds}


@pytest.mark.parametrize("trace", [TORCH_ISOLATED, TORCH_STEP], ids=["isolated", "zbv-step"])
def test_a_torch_trace_gives_each_stage_its_median_f_i_and_w(trace: Path) -> None:
    """Each stage's F, I and W; in a real step's trace with the runtime's posts around them
    (a receive before, a send after), which the isolated timings have none of."""
    costs = read(trace)
    m = _torch_medians(trace)
    assert (costs.source.format, costs.source.unit, costs.per) == ("torch-trace", "us", "stage")
    assert costs.stage_count == 4 and set(costs.timings) == {0, 1, 2, 3}
    for s, t in costs.timings.items():  # the split backward is read: I and W
        forward = m[s, "F"] + m[s, "RECV_F"] + m[s, "SEND_F"]
        backward = m[s, "I"] + m[s, "RECV_B"] + m[s, "SEND_B"]
        assert abs(t.forward * 10**6 - Fraction(forward)) <= Fraction(3, 1000)
        assert abs(t.backward * 10**6 - Fraction(backward)) <= Fraction(3, 1000)
        assert t.weight is not None
        assert abs(t.weight * 10**6 - Fraction(m[s, "W"])) <= Fraction(1, 1000)
    assert costs.has_weight
    posts = sum(m[s, k] for s in range(4) for k in ("SEND_F", "RECV_F", "SEND_B", "RECV_B"))
    assert (posts > 0) == (trace == TORCH_STEP)
    assert any("SEND/RECV posts" in n for n in costs.notes) == (trace == TORCH_STEP)


def test_a_stages_posts_are_added_where_the_trace_has_them(tmp_path: Path) -> None:
    """The class of posts: each of the four kinds on a stage, alone, adds to its own side."""
    base = [("PP:1F0", 1000), ("PP:1B0", 2000)]
    for post, side in (("RECV_F", 0), ("SEND_F", 0), ("RECV_B", 1), ("SEND_B", 1)):
        events = [
            {"ph": "X", "name": name, "ts": 0, "dur": dur}
            for name, dur in (*base, (f"PP:1{post}0", 100))
        ]
        t = read(write(tmp_path, f"{post}.json", json.dumps(events))).timings[1]
        assert (t.forward, t.backward) == (
            (Fraction(11, 10000), Fraction(2, 1000))
            if side == 0
            else (Fraction(1, 1000), Fraction(21, 10000))
        )


def test_the_isolated_trace_says_its_whole_backwards_are_not_read() -> None:
    costs = read(TORCH_ISOLATED)
    assert any("B events of stages 0-3 not read" in n for n in costs.notes)
    # torch skips the first stage's input gradient: its I is near 0, its W the backward
    assert costs.timings[0].backward < costs.timings[0].weight / 10  # type: ignore[operator]


def test_a_real_step_trace_gives_the_measured_step_and_counts_what_it_skips() -> None:
    costs = read(TORCH_STEP)
    steps = [
        e["dur"]
        for e in json.loads(TORCH_STEP.read_text())["traceEvents"]
        if e.get("name", "").startswith("ProfilerStep#")
    ]
    assert len(steps) == 4  # two steps on each of two ranks
    assert costs.step is not None
    assert abs(costs.step * 10**6 - Fraction(statistics.median(steps))) <= Fraction(1, 1000)
    skipped = next(n for n in costs.notes if "other PP: events" in n)
    assert int(skipped.split()[0]) > 0  # UNSHARD, RESHARD, REDUCE_GRAD


def test_a_trace_as_a_bare_event_list_and_whole_backwards_alone(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "name": f"PP:{s}{k}{mb}", "ts": 10 * mb, "dur": d}
        for s, k, d in ((0, "F", 1000), (0, "B", 3000), (1, "F", 2000), (1, "B", 4000))
        for mb in range(3)
    ]
    events.append({"ph": "X", "name": "PP:(0F1;1B0)OVERLAP_F_B", "ts": 0, "dur": 9})
    costs = read(write(tmp_path, "t.json", json.dumps(events)))
    assert costs.timings[1] == Timing(Fraction(2, 1000), Fraction(4, 1000))
    assert any("1 other PP: events" in n for n in costs.notes)


# -- Paddle's profiler ----------------------------------------------------------------------


def _paddle_match() -> MeasuredCosts:
    trace = read_costs(str(PADDLE_TRACE))
    assert isinstance(trace, PaddleTrace)
    planned = plan_program(read_program(PADDLE_PROGRAM), ConvertOptions(plan=PlanOptions(vpp=1)))
    return trace.match(planned)


def test_a_paddle_trace_matches_the_programs_ops_and_so_its_layers() -> None:
    costs = _paddle_match()
    assert (costs.source.format, costs.per) == ("paddle-trace", "layer")
    assert set(costs.timings) == {"pre", 0, 1, 2, 3, "post"}
    assert all(t.forward > 0 and t.backward > 0 for t in costs.timings.values())
    assert all(t.weight is None for t in costs.timings.values())  # matmul_grad does both


def test_a_paddle_trace_says_what_it_did_not_match() -> None:
    events = json.loads(PADDLE_TRACE.read_text())["traceEvents"]
    ops = Counter(e["name"].split("[")[0] for e in events if e.get("cat") == "Operator")
    steps = sum(1 for e in events if e.get("cat") == "ProfileStep" and e["dur"] > 1000)
    notes = " | ".join(_paddle_match().notes)
    unmatched = ops["feed"] + ops["fetch_v2"]  # the executor's own, not the program's
    assert f"matched {sum(ops.values()) - unmatched} of {sum(ops.values())} op events" in notes
    assert f"in {steps} profiler steps" in notes
    assert f"feed x{ops['feed']}" in notes and f"fetch_v2 x{ops['fetch_v2']}" in notes


def test_paddle_names_an_inplace_op_as_the_program_does(tmp_path: Path) -> None:
    """PIR's executor runs `pd_op.add_` for the program's `pd_op.add`: the trailing `_` is
    dropped when the program has no such type (here the legacy `gelu_` -> `gelu`)."""
    events = json.loads(PADDLE_TRACE.read_text())["traceEvents"]
    for e in events:
        if e.get("cat") == "Operator" and e["name"].startswith("gelu["):
            e["name"] = "gelu_" + e["name"][4:]
    path = write(tmp_path, "inplace.json", json.dumps({"traceEvents": events}))
    trace = read_costs(str(path))
    assert isinstance(trace, PaddleTrace)
    planned = plan_program(read_program(PADDLE_PROGRAM), ConvertOptions(plan=PlanOptions(vpp=1)))
    assert trace.match(planned).timings == _paddle_match().timings


# -- malformed files: exit 3, one line ------------------------------------------------------

GOOD_CSV = "stage,forward_s,backward_s,weight_s,activation_bytes\n0,0.01,0.02,0.01,100\n"
BAD_CELLS = {  # column -> values it must refuse
    "stage": ["-1", "x", "1.5", "131072", ""],
    "forward_s": ["", "-0.1", "nan", "inf", "1e7", "0x10", "1/0", "true"],
    "backward_s": ["", "-1e-3", "abc"],
    "weight_s": ["-2", "NaN"],
    "activation_bytes": ["1.5", "-1", "1e30", "x"],
}


def bad_csvs() -> list[tuple[str, str]]:
    """Every column of a good row given each value it must refuse, and broken layouts."""
    header = GOOD_CSV.splitlines()[0].split(",")
    row = GOOD_CSV.splitlines()[1].split(",")
    cases = []
    for column, values in BAD_CELLS.items():
        i = header.index(column)
        for value in values:
            cells = [*row[:i], value, *row[i + 1 :]]
            cases.append((f"{column}={value!r}", f"{','.join(header)}\n{','.join(cells)}\n"))
    cases += [
        ("empty", ""),
        ("comments only", "# nothing\n\n"),
        ("no rows", "stage,forward_s,backward_s\n"),
        ("first column", "rank,forward_s,backward_s\n0,1,1\n"),
        ("unknown column", "stage,forward_s,backward_s,flops\n0,1,1,3\n"),
        ("missing column", "stage,forward_s\n0,1\n"),
        ("repeated column", "stage,forward_s,backward_s,forward_s\n0,1,1,1\n"),
        ("short row", "stage,forward_s,backward_s\n0,1\n"),
        ("long row", "stage,forward_s,backward_s\n0,1,1,1\n"),
        ("repeated stage", "stage,forward_s,backward_s\n0,1,1\n0,1,1\n"),
        ("pre as a stage", "stage,forward_s,backward_s\npre,1,1\n"),
        ("repeated layer", "layer,forward_s,backward_s\npost,1,1\nPost,1,1\n"),
    ]
    return cases


def bad_jsons() -> list[tuple[str, Any]]:
    good = {"unit": "s", "stages": [{"stage": 0, "forward_s": 1, "backward_s": 2}]}
    entry = good["stages"][0]  # type: ignore[index]
    return [
        ("a list of numbers", [1, 2]),
        ("a number", 3),
        ("both lists", {**good, "layers": []}),
        ("neither list", {"unit": "s"}),
        ("unknown key", {**good, "ranks": 2}),
        ("unit", {**good, "unit": "seconds"}),
        ("stages not a list", {"stages": {"0": entry}}),
        ("entry not an object", {"stages": [[0, 1, 2]]}),
        ("unknown entry key", {"stages": [{**entry, "forward": 1}]}),
        ("no stage", {"stages": [{"forward_s": 1, "backward_s": 1}]}),
        ("stage as text", {"stages": [{**entry, "stage": "0"}]}),
        ("stage a bool", {"stages": [{**entry, "stage": True}]}),
        ("layer a fraction", {"layers": [{"layer": 1.5, "forward_s": 1, "backward_s": 1}]}),
        ("no forward", {"stages": [{"stage": 0, "backward_s": 1}]}),
        ("a bool time", {"stages": [{**entry, "forward_s": True}]}),
        ("a text time", {"stages": [{**entry, "forward_s": "1"}]}),
        ("a null time", {"stages": [{**entry, "backward_s": None}]}),
        ("negative", {"stages": [{**entry, "weight_s": -1}]}),
        ("empty list", {"stages": []}),
    ]


@pytest.mark.parametrize(("case", "text"), bad_csvs(), ids=[c for c, _ in bad_csvs()])
def test_a_malformed_csv_is_one_line_exit_3(tmp_path: Path, case: str, text: str) -> None:
    refused(write(tmp_path, "bad.csv", text))


@pytest.mark.parametrize(("case", "data"), bad_jsons(), ids=[c for c, _ in bad_jsons()])
def test_a_malformed_costs_json_is_one_line_exit_3_and_the_schema_agrees(
    tmp_path: Path, case: str, data: Any
) -> None:
    assert not jsonschema.Draft202012Validator(costs_schema()).is_valid(data), case
    refused(write(tmp_path, "bad.json", json.dumps(data)))


def bad_traces() -> list[tuple[str, Any]]:
    ok = {"ph": "X", "name": "PP:0F0", "ts": 0, "dur": 5}
    back = {**ok, "name": "PP:0B0"}
    return [
        ("events not a list", {"traceEvents": {"a": ok}}),
        ("an event not an object", {"traceEvents": [ok, back, 7]}),
        ("no duration", {"traceEvents": [{**ok, "dur": None}, back]}),
        ("negative duration", {"traceEvents": [{**ok, "dur": -1}, back]}),
        ("a bool time", {"traceEvents": [{**ok, "ts": True}, back]}),
        ("no name", {"traceEvents": [{**ok, "name": 3}, back]}),
        ("nothing to read", {"traceEvents": [{**ok, "name": "aten::mm"}]}),
        ("no forward", {"traceEvents": [back]}),
        ("no backward", {"traceEvents": [ok]}),
        ("I without W", {"traceEvents": [ok, {**ok, "name": "PP:0I0"}]}),
        ("W without I", {"traceEvents": [ok, back, {**ok, "name": "PP:0W0"}]}),
        ("a huge stage", {"traceEvents": [{**ok, "name": "PP:999999999F0"}]}),
    ]


@pytest.mark.parametrize(("case", "data"), bad_traces(), ids=[c for c, _ in bad_traces()])
def test_a_malformed_trace_is_one_line_exit_3(tmp_path: Path, case: str, data: Any) -> None:
    refused(write(tmp_path, "trace.json", json.dumps(data)))


@pytest.mark.parametrize(
    ("case", "content"),
    [
        ("not UTF-8", b"\xff\xfe\x00stage"),
        ("binary", bytes(range(256))),
        ("broken JSON", b'{"stages": [}'),
        ("NaN in JSON", b'{"stages": [{"stage": 0, "forward_s": NaN, "backward_s": 1}]}'),
        ("deep JSON", b"[" * 100_000 + b"]" * 100_000),
    ],
)
def test_a_file_that_is_no_costs_at_all_is_one_line_exit_3(
    tmp_path: Path, case: str, content: bytes
) -> None:
    refused(write(tmp_path, "junk", content))


def test_a_missing_file_a_directory_and_one_too_large_are_exit_3(tmp_path: Path) -> None:
    refused(tmp_path / "absent.csv", "no such file")
    refused(tmp_path, "directory, not a costs file")
    big = tmp_path / "big.csv"
    with big.open("wb") as f:
        f.truncate(MAX_COSTS_BYTES + 1)
    refused(big, "more than a costs file may be")


def refused(path: Path, words: str = "") -> None:
    with pytest.raises(ProgramFileError) as caught:
        read_costs(str(path))
    message = str(caught.value)
    assert caught.value.exit_code == EXIT_FILE
    assert "\n" not in message and str(path) in message and words in message, message
