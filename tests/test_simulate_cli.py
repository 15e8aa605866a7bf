"""`vppctl simulate` and `convert --micro-batches` on the command line."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from vppctl.cli import cli
from vppctl.sample import SampleOptions, build_sample


def test_unit_cost_simulation_prints_both_schedules(runner) -> None:
    result = runner.invoke(cli, ["simulate", "--pp", "8", "--vpp", "2", "-m", "32"])
    assert result.exit_code == 0, result.output
    assert "1F1B" in result.stdout and "interleaved" in result.stdout
    assert result.stderr == ""


def test_json_has_the_closed_form_bubbles(runner) -> None:
    result = runner.invoke(cli, ["simulate", "--pp", "8", "--vpp", "4", "-m", "32", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    text = json.dumps(data)
    # (p-1)/m = 7/32 for 1F1B and (p-1)/(v*m) = 7/128 for interleaved, relative to ideal.
    assert "7/32" in text and "7/128" in text


def test_svg_and_trace_files(runner, tmp_path: Path) -> None:
    svg, trace = tmp_path / "t.svg", tmp_path / "t.json"
    args = ["simulate", "--pp", "4", "--vpp", "2", "-m", "8", "--svg", str(svg)]
    result = runner.invoke(cli, [*args, "--trace", str(trace)])
    assert result.exit_code == 0, result.output
    # Both schedules: 1F1B over merged chunks (4 x 8 x 2 steps) and interleaved (x 2 chunks).
    cells = [
        e for e in ET.parse(svg).iter() if e.tag.endswith("}g") and "step" in e.get("class", "")
    ]
    assert len(cells) == 4 * 8 * 2 + 4 * 2 * 8 * 2
    events = [e for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "X"]
    assert len(events) == 4 * 8 * 2 + 4 * 2 * 8 * 2


def test_costs_from_a_program(runner, tmp_path: Path) -> None:
    src = tmp_path / "p.pb"
    src.write_bytes(build_sample(SampleOptions(layers=8, pp=4, hidden=64, vocab=1000)))
    result = runner.invoke(cli, ["simulate", str(src), "--vpp", "2", "-m", "8", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)
    mismatch = runner.invoke(cli, ["simulate", str(src), "--pp", "2", "--vpp", "2", "-m", "8"])
    assert mismatch.exit_code == 4 and "--pp 2" in mismatch.stderr


def test_simulate_needs_pp_without_a_program(runner) -> None:
    result = runner.invoke(cli, ["simulate", "--vpp", "2", "-m", "8"])
    assert result.exit_code == 2 and "--pp is required" in result.stderr


def test_convert_adds_the_bubble_line(runner, tmp_path: Path) -> None:
    src = tmp_path / "p.pb"
    src.write_bytes(build_sample(SampleOptions(layers=8, pp=4, hidden=64, vocab=1000)))
    result = runner.invoke(cli, ["convert", str(src), "--vpp", "2", "--micro-batches", "8"])
    assert result.exit_code == 0, result.output
    # 1F1B: (p-1)/(m+p-1) = 3/11; interleaved: (p-1)/(v*m+p-1) = 3/19 of the step.
    assert "27.3% -> 15.8%" in result.stdout
    out = tmp_path / "o.pb"
    args = ["convert", str(src), "--vpp", "2", "--micro-batches", "8", "--json", "-o", str(out)]
    data = json.loads(runner.invoke(cli, args).stdout)
    assert data["bubble"] == {"1f1b": round(3 / 11, 6), "interleaved": round(3 / 19, 6)}
