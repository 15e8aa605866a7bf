"""The JSON contract (issue 22): every command's `--json` is one object that its shipped
JSON Schema (vppctl/report/schemas/<command>.json) accepts, and a failure with `--json` is
one object too, on stdout, whatever the exit code.

Every object carries `vppctl_version`, `schema` (the version of its shape) and `error`
(null, or the failure). The schemas say `additionalProperties: false` and require every
key, so a key that is absent in one case and present in another fails here; they type
numbers as numbers and enums as their tokens. They are checked with `jsonschema`, the
reference validator of Draft 2020-12.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import paths
import pytest
from click.testing import Result
from commandline import invoke

from vppctl import __version__, commands
from vppctl.plan import PIR_PLAN_FORMAT, PIR_PLAN_VERSION
from vppctl.program._proto import program_pb2 as pb
from vppctl.shapes import ERROR_SCHEMA, INPUT_SCHEMAS, SCHEMAS

SAMPLE = paths.SAMPLE


def schema(name: str) -> dict[str, Any]:
    text = resources.files("vppctl.report").joinpath("schemas", f"{name}.json").read_text()
    return json.loads(text)  # type: ignore[no-any-return]


def check(name: str, data: dict[str, Any]) -> dict[str, Any]:
    """`data` is valid under schema `name`, and carries the envelope every object has."""
    jsonschema.Draft202012Validator(schema(name)).validate(data)
    assert data["vppctl_version"] == __version__
    return data


def one_object(result: Result) -> dict[str, Any]:
    """stdout holds one JSON object and nothing else."""
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 8-layer sample, converted with --micro-batches, and a copy with seeded faults."""
    tmp = tmp_path_factory.mktemp("json")
    invoke("convert", SAMPLE, "--vpp", "2", "-o", tmp / "prog.vpp.pb", "-q")
    msg = pb.ProgramDesc.FromString((tmp / "prog.vpp.pb").read_bytes())
    grad = next(op for op in msg.blocks[0].ops if op.type == "transpose2_grad")
    grad.dist_attr.chunk_id = 1 - grad.dist_attr.chunk_id  # V008 and V011
    (tmp / "bad.pb").write_bytes(msg.SerializeToString())
    return tmp


# -- the schemas themselves -------------------------------------------------------------


def test_every_shape_has_a_valid_schema_whose_version_is_the_one_its_objects_carry() -> None:
    shipped = {
        p.name.removesuffix(".json")
        for p in resources.files("vppctl.report").joinpath("schemas").iterdir()
        if p.name.endswith(".json")
    }
    assert shipped == {*SCHEMAS, "error", *INPUT_SCHEMAS, "pir-plan"}  # pir-plan: below
    for name in INPUT_SCHEMAS:  # an input's schema: valid, and as strict as the outputs'
        s = schema(name)
        jsonschema.Draft202012Validator.check_schema(s)
        assert s["additionalProperties"] is False
    for name, version in {**SCHEMAS, "error": ERROR_SCHEMA}.items():
        s = schema(name)
        jsonschema.Draft202012Validator.check_schema(s)
        assert s["properties"]["schema"] == {"const": version, **_description(s)}, name
        assert s["additionalProperties"] is False and set(s["required"]) == set(s["properties"])
    # the PIR plan file `convert` writes (a file, not a --json output): its own format and
    # version (tests/convert/test_pirplan.py validates the files against it)
    s = schema("pir-plan")
    jsonschema.Draft202012Validator.check_schema(s)
    assert s["properties"]["format"]["const"] == PIR_PLAN_FORMAT
    assert s["properties"]["version"]["const"] == PIR_PLAN_VERSION
    assert s["additionalProperties"] is False and set(s["required"]) == set(s["properties"])


def _description(s: dict[str, Any]) -> dict[str, Any]:
    described = s["properties"]["schema"].get("description")
    return {"description": described} if described else {}


def test_a_schema_refuses_a_missing_key_a_string_number_and_a_prose_enum(work: Path) -> None:
    data = one_object(invoke("inspect", work / "prog.vpp.pb", "--json"))
    check("inspect", data)
    validator = jsonschema.Draft202012Validator(schema("inspect"))
    assert not validator.is_valid({k: v for k, v in data.items() if k != "plan"})
    assert not validator.is_valid({**data, "bytes": str(data["bytes"])})
    assert not validator.is_valid({**data, "layout": "interleaved VPP"})


# -- each command's JSON ------------------------------------------------------------------


def test_convert_json_with_and_without_the_bubble(work: Path) -> None:
    plain = check(
        "convert",
        one_object(invoke("convert", SAMPLE, "--vpp", "2", "-o", work / "a.pb", "--json")),
    )
    assert plain["bubble"] is None and plain["memory"] is None
    assert plain["callstack_bytes_saved"] is None
    args = ("convert", SAMPLE, "--vpp", "2", "-m", "8", "--strip-callstack", "-o", work / "b.pb")
    full = check("convert", one_object(invoke(*args, "--json")))
    assert set(full["bubble"]["schedules"]) == {"1f1b", "vpp"}  # Paddle's, the default
    assert all(isinstance(v, float) for v in full["bubble"]["schedules"].values())
    assert full["callstack_bytes_saved"] == 0


def test_verify_json_valid_invalid_and_the_rules(work: Path) -> None:
    valid = check("verify", one_object(invoke("verify", work / "prog.vpp.pb", "--json")))
    assert valid["valid"] and valid["violations"] == [] and valid["statistics"] == []
    bad = check("verify", one_object(invoke("verify", work / "bad.pb", "--json", exit_code=1)))
    assert not bad["valid"] and bad["cross_stage_edges"] is None
    assert {s["rule"]: s["count"] for s in bad["statistics"]} == {"V008": 1, "V011": 1}
    # A violation of the whole program names no block, op or type: null, not -1 or "".
    counts = one_object(invoke("verify", work / "prog.vpp.pb", "--pp", "3", "--json", exit_code=1))
    check("verify", counts)
    whole = [v for v in counts["violations"] if v["rule"] == "V015"]
    assert whole and all(v["block"] is None and v["op"] is None for v in whole)
    assert all(v["type"] is None for v in whole)
    rules = check("verify-rules", one_object(invoke("verify", "--rules", "--json")))
    assert [r["rule"] for r in rules["rules"]][:2] == ["V001", "V002"]


def test_inspect_dump_and_sample_json(work: Path) -> None:
    summary = check("inspect", one_object(invoke("inspect", work / "prog.vpp.pb", "--json")))
    assert summary["layout"] == "interleaved" and summary["plan"]["vpp"] == 2
    plain = check("inspect", one_object(invoke("inspect", SAMPLE, "--json")))
    assert plain["layout"] == "plain" and plain["plan"] is None
    dumped = one_object(invoke("dump", SAMPLE, "-o", work / "x.pbtxt", "--json", "-q"))
    assert check("dump", dumped)["callstack_bytes_saved"] is None
    made = one_object(invoke("sample", "--layers", "2", "--pp", "2", "-o", work / "s.pb", "--json"))
    assert check("sample", made)["bytes_written"] == (work / "s.pb").stat().st_size


def test_simulate_json_with_and_without_a_program(work: Path) -> None:
    alone = check(
        "simulate", one_object(invoke("simulate", "--pp", "4", "--vpp", "2", "-m", "8", "--json"))
    )
    assert alone["plan"] is None and alone["over_memory_limit"] is None
    assert alone["results"][0]["per_stage"][0]["peak_bytes"] is None
    args = ("simulate", work / "prog.vpp.pb", "-m", "8", "--costs", "1,2,1.5", "--json")
    run = check("simulate", one_object(invoke(*args)))
    assert run["plan"]["costs"]["ratios"] == {"forward": 1, "backward": 2, "weight": 1.5}
    assert run["over_memory_limit"] is None
    over = one_object(invoke(*args, "--memory-limit", "1GiB", exit_code=1))
    assert check("simulate", over)["over_memory_limit"] is True


def test_plan_json_and_plan_that_finds_nothing_under_the_limit(work: Path) -> None:
    found = check("plan", one_object(invoke("plan", SAMPLE, "-m", "8", "--json")))
    assert found["candidates"] and found["error"] is None
    result = invoke("plan", SAMPLE, "-m", "8", "--memory-limit", "1GiB", "--json", exit_code=4)
    nothing = check("plan", one_object(result))
    assert nothing["candidates"] == [] and nothing["error"]["exit_code"] == 4
    assert nothing["error"]["kind"] == "convert"
    assert nothing["over_limit"] == len(nothing["over_limit_candidates"]) > 0
    for c in nothing["over_limit_candidates"]:  # why each was left out
        assert c["reason"].startswith("over --memory-limit 1.0 GiB: stage ")
        assert c["stages_over_limit"] == [s["stage"] for s in c["per_stage"] if s["over_limit"]]
    assert result.stderr == f"Error: {nothing['error']['message']}\n"


def test_plan_json_of_a_pir_program(tmp_path: Path) -> None:
    """A PIR program's plan: no commands, Paddle's PIR strategy, each split's verdict."""
    from pir_cases import reference

    path = tmp_path / "gpt_keep.json"
    path.write_bytes(reference("gpt_keep_pp2_v2", "plain"))
    args = ("plan", path, "-m", "8", "--vpp", "2", "--runtime", "any")
    data = check("plan", one_object(invoke(*args, "--json")))
    assert data["pir"]["stage_layers"] == [7, 5]
    assert {v["paddle_pir"]["takes"] for v in data["conversions"]} == {True, False}
    over = invoke(
        "plan", path, "-m", "8", "--vpp", "2", "--memory-limit", "1KiB", "--json", exit_code=4
    )
    assert check("plan", one_object(over))["over_limit_candidates"][0]["command"] is None


# -- failures: one JSON object on stdout for every failing exit code --------------------


def _interrupt(*args: object, **kwargs: object) -> None:
    raise KeyboardInterrupt


def _bug(*args: object, **kwargs: object) -> None:
    raise RuntimeError("a bug")


def _terminate(*args: object, **kwargs: object) -> None:
    import signal

    from vppctl.program.atomic import Terminated

    raise Terminated(signal.SIGTERM)  # what SIGTERM raises while a file is replaced


def _out_of_memory(*args: object, **kwargs: object) -> None:
    raise MemoryError


@pytest.mark.parametrize(
    ("args", "code", "kind"),
    [
        pytest.param(["convert", SAMPLE, "--vpp", "x", "--json"], 2, "usage", id="click-usage"),
        pytest.param(["verify", "--output-format", "JSON"], 2, "usage", id="missing-prog"),
        pytest.param(
            ["convert", SAMPLE, "--vpp", "2", "--in-place", "-o", "x.pb", "--json"],
            2,
            "usage",
            id="library-usage",
        ),
        pytest.param(["inspect", "missing.pb", "--json"], 3, "file", id="file"),
        pytest.param(["convert", SAMPLE, "--vpp", "3", "--json"], 4, "convert", id="convert"),
        pytest.param(["inspect", SAMPLE, "--json"], 5, "memory", id="memory"),
        pytest.param(["inspect", SAMPLE, "--json"], 70, "internal", id="internal"),
        pytest.param(["inspect", SAMPLE, "--json"], 130, "interrupted", id="interrupted"),
        pytest.param(
            ["convert", SAMPLE, "--vpp", "2", "-o", "x.pb", "--json"],
            143,
            "terminated",
            id="terminated",
        ),
    ],
)
def test_a_failure_with_json_is_one_json_object_on_stdout(
    args: list[object], code: int, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if code in (5, 70, 130):
        fault = {5: _out_of_memory, 70: _bug, 130: _interrupt}[code]
        monkeypatch.setattr(commands, "inspect_file", fault)
    if code == 143:
        from vppctl.program import files

        monkeypatch.setattr(files, "atomic_replace", _terminate)
    monkeypatch.chdir(tmp_path)
    result = invoke(*args, exit_code=code)
    data = check("error", one_object(result))
    assert data["error"]["exit_code"] == code and data["error"]["kind"] == kind
    assert data["error"]["message"] and "\n" not in data["error"]["message"]
    assert "Error: " in result.stderr and "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written
    if args[2:4] == ["--vpp", "x"]:  # click's own usage error: its hint too
        assert data["error"]["hint"] == "Try 'vppctl convert --help' for help."
        assert "Invalid value for '--vpp'" in data["error"]["message"]


def test_without_json_a_failure_prints_nothing_on_stdout(tmp_path: Path) -> None:
    result = invoke("convert", SAMPLE, "--vpp", "3", "-o", tmp_path / "x.pb", exit_code=4)
    assert result.stdout == "" and result.stderr.startswith("Error: ")


def test_json_after_double_dash_is_not_an_option() -> None:
    from vppctl.cli.base import json_requested

    assert json_requested(["convert", "x", "--json"])
    assert json_requested(["verify", "x", "--output-format=Json"])
    assert json_requested(["verify", "x", "--output-format", "json"])
    assert not json_requested(["verify", "x", "--output-format", "junit"])
    assert not json_requested(["inspect", "--", "--json"])


def test_the_schemas_enums_are_the_choices() -> None:
    """A name added to vppctl.choices must reach the schemas (and this test says where)."""
    from vppctl.choices import COST_KINDS, PLACEMENTS, PROGRAM_LAYOUTS, SCHEDULES, SPLITS

    convert = schema("convert")["properties"]
    assert tuple(convert["placement"]["enum"]) == PLACEMENTS
    assert tuple(convert["split"]["enum"]) == SPLITS
    assert tuple(convert["cost"]["enum"]) == COST_KINDS
    result = schema("simulate")["properties"]["results"]["items"]["properties"]
    assert tuple(result["schedule"]["enum"]) == SCHEDULES
    assert tuple(schema("inspect")["properties"]["layout"]["enum"]) == PROGRAM_LAYOUTS
