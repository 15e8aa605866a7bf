"""Outcomes serialise like the command line: for every command, `outcome.to_json()` of the
library call equals the object `--json` prints for the same input and options (the
command line calls `to_json()`: one builder per shape), and it goes through `json.dumps`
as it is (no Fraction, no tuple keys).

The tests here also cover vppctl/outcomes/program.py and vppctl/outcomes/schedule.py, which
have no test file of their own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import paths
import pytest
from commandline import invoke

import vppctl

SAMPLE = paths.SAMPLE


def cli_json(*args: object, exit_code: int = 0) -> dict[str, Any]:
    result = invoke(*args, exit_code=exit_code)
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data


def same(outcome_json: dict[str, Any], printed: dict[str, Any]) -> None:
    assert json.loads(json.dumps(outcome_json)) == printed
    assert outcome_json["error"] is None or "exit_code" in outcome_json["error"]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample converted (prog.vpp.pb) and a copy with one chunk id wrong (bad.pb)."""
    tmp = tmp_path_factory.mktemp("api-json")
    vppctl.convert_file(
        SAMPLE, tmp / "prog.vpp.pb", vppctl.ConvertOptions(plan=vppctl.PlanOptions(vpp=2))
    )
    from vppctl.program._proto import program_pb2 as pb

    msg = pb.ProgramDesc.FromString((tmp / "prog.vpp.pb").read_bytes())
    grad = next(op for op in msg.blocks[0].ops if op.type == "transpose2_grad")
    grad.dist_attr.chunk_id = 1 - grad.dist_attr.chunk_id
    (tmp / "bad.pb").write_bytes(msg.SerializeToString())
    return tmp


def test_convert(work: Path) -> None:
    out = work / "c.pb"
    plan = vppctl.PlanOptions(vpp=2, placement="v", split="balanced", cost="flops")
    options = vppctl.ConvertOptions(
        plan=plan, micro_batches=8, strip_callstack=True, runtime="torch"
    )
    outcome = vppctl.convert_file(SAMPLE, out, options)
    args = ["--placement", "v", "--split", "balanced", "--cost", "flops", "-m", "8"]
    args += ["--runtime", "torch"]
    printed = cli_json("convert", SAMPLE, "--vpp", "2", *args, "--strip-callstack", "-o", out,
                       "--json")  # fmt: skip
    same(outcome.to_json(), printed)
    assert printed["bubble"]["schedules"].keys() == {"1f1b", "zbv"}
    assert outcome.bubble is not None and set(outcome.bubble.schedules) == {"1f1b", "zbv"}


def test_verify_valid_and_invalid(work: Path) -> None:
    valid = vppctl.verify_file(work / "prog.vpp.pb")
    same(valid.to_json(), cli_json("verify", work / "prog.vpp.pb", "--json"))
    options = vppctl.VerifyOptions(pp=4, vpp=2, placement="loop")
    bad = vppctl.verify_file(work / "bad.pb", options)
    printed = cli_json("verify", work / "bad.pb", "--pp", "4", "--vpp", "2", "--placement", "loop",
                       "--json", exit_code=1)  # fmt: skip
    same(bad.to_json(), printed)
    assert not bad.valid and {v["rule"] for v in printed["violations"]} == {"V008", "V011"}


def test_inspect(work: Path) -> None:
    options = vppctl.InspectOptions(seg_method="DecoderLayer")
    summary = vppctl.inspect_file(work / "prog.vpp.pb", options)
    printed = cli_json("inspect", work / "prog.vpp.pb", "--seg-method", "DecoderLayer", "--json")
    same(summary.to_json(), printed)


def test_dump(work: Path) -> None:
    out = work / "d.pbtxt"
    outcome = vppctl.dump_file(SAMPLE, out, vppctl.DumpOptions(strip_callstack=True))
    printed = cli_json("dump", SAMPLE, "-o", out, "--strip-callstack", "--json")
    same(outcome.to_json(), printed)


def test_sample(work: Path) -> None:
    out = work / "s.pb"
    options = vppctl.SampleOptions(layers=4, pp=2, optimizer="sgd", hidden=64, vocab=1000)
    outcome = vppctl.sample_file(out, options)
    printed = cli_json("sample", "--layers", "4", "--pp", "2", "--optimizer", "sgd",
                       "--hidden", "64", "--vocab", "1000", "-o", out, "--json")  # fmt: skip
    same(outcome.to_json(), printed)


def test_simulate_a_program_with_memory_and_pictures(work: Path) -> None:
    svg, csv = work / "t.svg", work / "t.csv"
    options = vppctl.SimulateOptions(
        micro_batches=8,
        plan=vppctl.PlanOptions(vpp=2),
        memory=vppctl.MemoryOptions(micro_batch_size=2, seq_len=128, limit=1 << 40),
        p2p_cost=0.1,
    )
    outcome = vppctl.simulate_run(SAMPLE, vppctl.Pictures(svg=svg, csv=csv), options)
    printed = cli_json("simulate", SAMPLE, "--vpp", "2", "-m", "8", "--micro-batch-size", "2",
                       "--seq-len", "128", "--memory-limit", "1TiB", "--p2p-cost", "0.1",
                       "--svg", svg, "--csv", csv, "--json")  # fmt: skip
    same(outcome.to_json(), printed)
    assert printed["over_memory_limit"] is False and len(printed["written"]) == 2


def test_simulate_without_a_program() -> None:
    plan = vppctl.PlanOptions(pp=4, vpp=2)
    options = vppctl.SimulateOptions(micro_batches=8, plan=plan, schedule="interleaved",
                                     costs=(1, 2, 0), group_size=4)  # fmt: skip
    outcome = vppctl.simulate_run(None, None, options)
    args = ["--schedule", "interleaved", "--costs", "1,2,0", "--group-size", "4"]
    printed = cli_json("simulate", "--pp", "4", "--vpp", "2", "-m", "8", *args, "--json")
    same(outcome.to_json(), printed)


def test_plan(work: Path) -> None:
    options = vppctl.PlanSearchOptions(
        micro_batches=(8, 16), schedules=("1f1b", "interleaved"), runtime="megatron"
    )
    outcome = vppctl.plan_run(SAMPLE, options)
    args = ("-m", "8,16", "--schedule", "1f1b,interleaved", "--runtime", "megatron")
    printed = cli_json("plan", SAMPLE, *args, "--json")
    same(outcome.to_json(), printed)
    assert printed["candidates"]


def test_plan_that_finds_nothing_under_the_limit(work: Path) -> None:
    limit = vppctl.MemoryOptions(limit=1 << 20)
    options = vppctl.PlanSearchOptions(micro_batches=(8,), vpp=(2,), memory=limit)
    with pytest.raises(vppctl.NoConversionFits) as e:
        vppctl.plan_run(SAMPLE, options)
    printed = cli_json("plan", SAMPLE, "-m", "8", "--vpp", "2", "--memory-limit", "1MiB",
                       "--json", exit_code=4)  # fmt: skip
    same(e.value.to_json(), printed)
    assert printed["error"]["kind"] == "convert" and printed["over_limit_candidates"]
