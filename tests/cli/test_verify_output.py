"""verify in CI (issue 22): `--rules` without a program, and `--output-format
full|concise|json|github|junit` and `--statistics` on a program with seeded violations.

The seeded program is the 8-layer sample converted to vpp 2 with two transpose2_grad
ops moved to the other chunk of their stage: each breaks V008 (a grad op away from its
forward op) and V011 (the gradient it writes first stays where it was).

The tests here also cover vppctl/verify/outcome.py, vppctl/outcomes/verify.py and the
formats of vppctl/report/verify.py, which have no test file of their own.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from xml.etree import ElementTree

import paths
import pytest
from click.testing import Result
from commandline import invoke

from vppctl.program._proto import program_pb2 as pb
from vppctl.verify import PIR_RULES, RULES

SAMPLE = paths.SAMPLE


def verify(*args: object, exit_code: int = 1) -> Result:
    return invoke("verify", *args, exit_code=exit_code)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[tuple[int, int]]]:
    """(the program, [(grad op index, its forward op's id)] of the two ops moved)."""
    tmp = tmp_path_factory.mktemp("verify")
    good = tmp / "good.pb"
    invoke("convert", str(SAMPLE), "--vpp", "2", "-o", str(good))
    msg = pb.ProgramDesc.FromString(good.read_bytes())
    moved = []
    for i, op in enumerate(msg.blocks[0].ops):
        if op.type == "transpose2_grad" and len(moved) < 2:
            op.dist_attr.chunk_id = 1 - op.dist_attr.chunk_id
            moved.append((i, op.forward_op_id))
    bad = tmp / "bad.pb"
    bad.write_bytes(msg.SerializeToString())
    return bad, moved


# -- --rules -------------------------------------------------------------------------------


def test_rules_need_no_program() -> None:
    listed = verify("--rules", exit_code=0).stdout.splitlines()
    rows = [line for line in listed if re.match(r"V\d{3}  ", line)]
    # the rules, then how some of them apply in part to a PIR program
    assert [row.split()[0] for row in rows] == [*RULES, *PIR_RULES]
    assert all(row.split(None, 1)[1] == RULES[row.split()[0]] for row in rows[: len(RULES)])
    assert all(row.split(None, 1)[1] == PIR_RULES[row.split()[0]] for row in rows[len(RULES) :])


def test_rules_as_json() -> None:
    for args in (["--rules", "--json"], ["--rules", "--output-format", "json"]):
        data = json.loads(verify(*args, exit_code=0).stdout)
        assert {r["rule"]: r["checks"] for r in data["rules"]} == RULES
        assert {r["rule"]: r["checks"] for r in data["pir_rules"]} == PIR_RULES


def test_rules_refuse_a_program_which_they_would_not_check(seeded) -> None:
    """`verify --rules prog.pb` in a CI step would always pass without checking prog.pb."""
    bad, _ = seeded
    for extra in ([], ["--json"]):
        result = verify("--rules", bad, *extra, exit_code=2)
        assert result.stderr.splitlines()[-1] == (
            f"Error: --rules lists the rules and checks no program, and {bad} was given: "
            "drop --rules to check it, or the program to list the rules"
        )


def test_a_program_is_still_needed_without_rules() -> None:
    result = verify(exit_code=2)
    assert "Missing argument 'PROG'" in result.stderr and "--rules" in result.stderr


# -- the formats ---------------------------------------------------------------------------


def test_full_is_a_compact_table_one_row_per_violation(seeded) -> None:
    bad, _ = seeded
    out = verify(bad).stdout.splitlines()
    assert out[0] == f"4 violation(s) in {bad}"
    assert out[1].split() == ["Rule", "Block", "Op", "Type", "Message"]
    assert set(out[2]) == {"─"}  # one light rule under the header, as every other table
    rows = out[3:]
    assert len(rows) == 4 and all(
        re.match(r"V0(08|11) +0 +\d+ +transpose2_grad +\S", r) for r in rows
    )


def test_concise_is_one_line_per_violation(seeded) -> None:
    bad, moved = seeded
    lines = verify(bad, "--output-format", "concise").stdout.splitlines()
    (i, _), _ = moved
    v008 = [line for line in lines if " V008 " in line]
    assert len(v008) == 2
    first = re.fullmatch(
        rf"{re.escape(str(bad))}:block0:op{i}: V008 transpose2_grad is on \[(\d)\] chunk (\d), "
        r"its forward op #(\d+) \(transpose2\) on \[(\d)\] chunk (\d)",
        v008[0],
    )
    assert first is not None, v008[0]
    stage, chunk, _, forward_stage, forward_chunk = first.groups()
    assert stage == forward_stage and chunk != forward_chunk
    assert lines[-1] == "Found 4 violation(s) of 2 rule(s)"
    assert len(lines) == 5


def test_forward_op_is_named_once() -> None:
    # the V008 message once read "its forward op op #146"
    from vppctl.verify import checks

    source = Path(checks.__file__).read_text()
    assert "forward op {c.index.op_label" not in source


def test_github_is_one_workflow_command_per_violation(seeded) -> None:
    bad, moved = seeded
    out = verify(bad, "--output-format", "github").stdout
    lines = out.splitlines()
    assert len(lines) == 4 and out.endswith("\n") and not out.endswith("\n\n")
    for line in lines:
        command = re.fullmatch(r"::error file=([^,]+),title=(V0\d\d)::block0:op(\d+): (.+)", line)
        assert command is not None, line
        assert command[1] == str(bad).replace(":", "%3A")
        assert command[2] in ("V008", "V011")
        assert int(command[3]) in {i for i, _ in moved}


def test_github_escapes_what_workflow_commands_read_as_syntax() -> None:
    from vppctl.escape import github_data, github_property

    assert github_data("50%\r\nx") == "50%25%0D%0Ax"
    assert github_property("a:b,c") == "a%3Ab%2Cc"


def test_junit_is_a_report_junit_readers_take(seeded) -> None:
    bad, _ = seeded
    text = verify(bad, "--output-format", "junit").stdout
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n')
    root = ElementTree.fromstring(text.encode())
    # The elements and counts JUnit readers (GitLab, Jenkins' JUnit plugin) require.
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == len(RULES) == int(suite.get("tests", "")) == int(root.get("tests", ""))
    failed = [c for c in cases if c.find("failure") is not None]
    assert int(suite.get("failures", "")) == int(root.get("failures", "")) == len(failed) == 2
    assert suite.get("errors") == "0" and suite.get("name")
    assert all(c.get("name") and c.get("classname") for c in cases)
    by_rule = {c.get("classname", "").rsplit(".", 1)[1]: c for c in cases}
    failure = by_rule["V008"].find("failure")
    assert failure is not None and failure.get("type") == "V008"
    assert (failure.get("message") or "").startswith("2 violation(s): transpose2_grad is on")
    assert len((failure.text or "").splitlines()) == 2
    assert by_rule["V001"].find("failure") is None


def test_junit_of_a_valid_program_has_no_failure() -> None:
    text = verify(SAMPLE, "--output-format", "junit", exit_code=0).stdout
    root = ElementTree.fromstring(text.encode())
    assert root.get("failures") == "0" and root.findall(".//failure") == []
    assert len(root.findall(".//testcase")) == len(RULES)


def test_json_format_is_the_json_option(seeded) -> None:
    bad, _ = seeded
    a = json.loads(verify(bad, "--output-format", "json").stdout)
    b = json.loads(verify(bad, "--json").stdout)
    assert a == b and len(a["violations"]) == 4


def test_formats_are_deterministic(seeded) -> None:
    bad, _ = seeded
    for form in ("full", "concise", "github", "junit", "json"):
        first = verify(bad, "--output-format", form).stdout
        assert verify(bad, "--output-format", form).stdout == first, form


# -- --statistics --------------------------------------------------------------------------


def test_statistics_count_each_rule(seeded) -> None:
    bad, _ = seeded
    lines = verify(bad, "--statistics").stdout.splitlines()
    counts = [line.split(None, 2) for line in lines[2:]]
    assert [(n, rule) for n, rule, _ in counts] == [("2", "V008"), ("2", "V011")]
    assert counts[0][2] == RULES["V008"]
    data = json.loads(verify(bad, "--statistics", "--json").stdout)
    assert data["statistics"] == [{"rule": "V008", "count": 2}, {"rule": "V011", "count": 2}]


def test_the_json_holds_statistics_and_violations_with_or_without_statistics(seeded) -> None:
    bad, _ = seeded
    data = json.loads(verify(bad, "--json").stdout)
    assert len(data["violations"]) == 4 and sum(s["count"] for s in data["statistics"]) == 4
    assert verify(bad, "--statistics", "--json").stdout == verify(bad, "--json").stdout
    said = " ".join(verify(SAMPLE, "--help", exit_code=0).stdout.split())
    assert "instead of listing them (full, concise; the JSON always holds both" in said


def test_statistics_of_a_valid_program_is_its_valid_line() -> None:
    assert verify(SAMPLE, "--statistics", exit_code=0).stdout.startswith("valid: pp 4 x vpp 1")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--statistics", "--output-format", "junit"], "--statistics counts the violations"),
        (["--json", "--output-format", "concise"], "--json is --output-format json"),
        (["--output-format", "xml"], "Invalid value for '--output-format'"),
    ],
)
def test_conflicting_format_options_are_usage_errors(args: list[str], said: str) -> None:
    assert said in verify(SAMPLE, *args, exit_code=2).stderr


def test_output_format_takes_any_case(seeded) -> None:
    bad, _ = seeded
    assert verify(bad, "--output-format", "GitHub").stdout.startswith("::error ")


# -- PIR programs: what verify says it checked ------------------------------------------------


def _pir_file(tmp_path: Path, name: str, stages: list[int], chunks: list[int] | None) -> Path:
    from pir_json import training

    p = training(stages, chunks)
    if name == "faulty.json":  # one matmul moved to the other chunk: V004 and more
        matmul = next(o for o in p.ops if o["#"] == "1.matmul")
        dist = next(a for a in matmul["A"] if a["N"] == "op_dist_attr")["AT"]["D"]
        dist[3] = 1 - dist[3]
    path = tmp_path / name
    path.write_bytes(p.bytes())
    return path


def test_a_plain_pir_program_is_one_chunk_per_stage(tmp_path: Path) -> None:
    """Was: "pp 2 x vpp 0", and V006 "segment 0 ... is on stage 0 chunk -1" on Paddle's
    plain pipeline program, whose ops carry no chunk id: now it is checked as vpp 1, its
    ops in chunk 0, as Paddle runs it (valid), and with --vpp 2 as a legacy program is."""
    path = _pir_file(tmp_path, "plain.json", [0, 0, 1, 1], None)
    r = verify(path, exit_code=0)
    assert r.stdout.startswith("valid: pp 2 x vpp 1, loop placement, 4 layers"), r.stdout
    assert json.loads(verify(path, "--json", exit_code=0).stdout)["vpp"] == 1
    out = verify(path, "--vpp", "2").stdout.replace("\n", " ")
    assert "chunk -1" not in out and "V005" in out and "stage 0 chunk 1 holds no layer" in out
    assert "(vpp from --vpp; no op carries a chunk id past 0: each is checked as chunk 0)" in out
    assert "needs Paddle's PIR completion (vpp_degree > 1) first" in out


def test_an_op_without_a_chunk_id_is_said_so(tmp_path: Path) -> None:
    """In a completed program, an op of a layer left without a chunk id: "without a chunk
    id", not "chunk -1"."""
    path = _pir_file(tmp_path, "unplaced.json", [0, 1, 0, 1], [0, 0, 1, 1])
    doc = json.loads(path.read_bytes())
    ops = doc["program"]["regions"][0]["blocks"][0]["ops"]
    add = next(o for o in ops if o["#"] == "1.add")
    next(a for a in add["A"] if a["N"] == "op_dist_attr")["AT"]["D"][3] = -1
    path.write_text(json.dumps(doc))
    out = verify(path).stdout.replace("\n", " ")
    assert "chunk -1" not in out and "[0] without a chunk id" in out, out


def test_a_completed_pir_program_is_not_sent_to_paddles_completion(tmp_path: Path) -> None:
    """Was: "a program not yet converted needs Paddle's PIR completion first" on a program
    Paddle's completion had made."""
    path = _pir_file(tmp_path, "faulty.json", [0, 1, 0, 1], [0, 0, 1, 1])
    out = verify(path).stdout.replace("\n", " ")
    assert "pp 2 x vpp 2 (vpp from --vpp or the chunk ids Paddle's PIR completion wrote)" in out
    assert "needs Paddle's PIR completion" not in out
