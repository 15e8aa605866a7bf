"""Rule selection (issue 32): `--select`, `--ignore`, VerifyOptions(select=, ignore=).

Was: nothing could waive a rule, so a CI gate on Paddle's own PIR completion (which
breaks V009 once per chunk boundary of stage 0) always failed. The selection follows
ruff's (vppctl/verify/selection.py): ids, prefixes and ALL, the more specific selector
winning. Every format still counts what was ignored: full, concise, json, github,
junit and --statistics are each checked on one seeded program.
"""

from __future__ import annotations

import json
import lzma
from pathlib import Path
from xml.etree import ElementTree

import paths
import pytest
from commandline import invoke
from verifykit import grads_moved

import vppctl
from vppctl.errors import UsageError
from vppctl.verify import RULES
from vppctl.verify.selection import enforced, selectors

ALL_RULES = tuple(RULES)


@pytest.mark.parametrize(
    ("select", "ignore", "expected"),
    [
        (None, (), ALL_RULES),
        (("ALL",), (), ALL_RULES),
        (None, ("V009",), tuple(r for r in ALL_RULES if r != "V009")),
        (None, ("V00",), tuple(r for r in ALL_RULES if not r.startswith("V00"))),
        (("V00",), ("V009",), tuple(f"V00{i}" for i in range(1, 9))),
        (("V009",), ("V00",), ("V009",)),  # the more specific wins
        (("V009",), ("V009",), ()),  # a tie goes to ignore
        (("V",), ("ALL",), ALL_RULES),  # V is more specific than ALL
        (("V01", "V020"), ("V019",), (*(f"V01{i}" for i in range(9)), "V020")),
        ((), (), ()),  # an empty select enforces nothing
    ],
)
def test_selection_as_ruff_resolves_it(
    select: tuple[str, ...] | None, ignore: tuple[str, ...], expected: tuple[str, ...]
) -> None:
    assert enforced(select, ignore) == expected


@pytest.mark.parametrize(
    ("value", "codes"),
    [
        ("V009", ("V009",)),
        ("v009, V011,", ("V009", "V011")),
        (["V009", "v0"], ("V009", "V0")),
        ("all", ("ALL",)),
        ("V009,V009", ("V009",)),
        ("", ()),
        ("V999", None),
        ("E501", None),
        (["V009", 3], None),
        (9, None),
        ("V009\x00", None),
    ],
)
def test_selectors_read_comma_lists_and_sequences(
    value: object, codes: tuple[str, ...] | None
) -> None:
    assert selectors(value) == codes


@pytest.mark.parametrize("field", ["select", "ignore"])
def test_verify_options_refuse_a_selector_of_no_rule(field: str) -> None:
    with pytest.raises(UsageError, match=rf"--{field} \(VerifyOptions.{field}\).*'V999' names no"):
        vppctl.VerifyOptions(**{field: "V009,V999"})
    assert getattr(vppctl.VerifyOptions(**{field: "v009"}), field) == ("V009",)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 8-layer sample at vpp 2 with two transpose2_grad ops moved to their stage's
    other chunk: each breaks V008 and V011."""
    tmp = tmp_path_factory.mktemp("selection")
    good = tmp / "good.pb"
    invoke("convert", str(paths.SAMPLE), "--vpp", "2", "-o", str(good))
    bad = tmp / "bad.pb"
    bad.write_bytes(grads_moved(good.read_bytes()))
    return bad


def test_the_api_keeps_ignored_violations_apart(seeded: Path) -> None:
    full = vppctl.verify_file(seeded)
    assert {v.rule for v in full.violations} == {"V008", "V011"} and not full.ignored
    waived = vppctl.verify_file(seeded, vppctl.VerifyOptions(ignore=("V008", "V011")))
    assert waived.valid and waived.ignored == full.violations
    assert "V008" not in waived.rules and len(waived.rules) == len(RULES) - 2
    one = vppctl.verify_file(seeded, vppctl.VerifyOptions(select="V008"))
    assert {v.rule for v in one.violations} == {"V008"} and one.rules == ("V008",)
    assert {v.rule for v in one.ignored} == {"V011"}


def _isolated(*args: object, code: int) -> str:
    r = invoke("verify", *args, "--isolated", exit_code=code)
    return r.stdout


def test_every_format_counts_the_ignored(seeded: Path) -> None:
    waive = ("--ignore", "V008,V011")
    full = _isolated(seeded, *waive, code=0)
    assert "valid:" in full and "ignored 4 violation(s) of rules not enforced: V008 2, V011 2" in (
        " ".join(full.split())
    )
    concise = _isolated(seeded, *waive, "--output-format", "concise", code=0)
    assert "ignored 4 violation(s)" in concise
    document = json.loads(_isolated(seeded, *waive, "--json", code=0))
    assert document["valid"] is True and document["violations"] == []
    assert document["ignored"] == [{"rule": "V008", "count": 2}, {"rule": "V011", "count": 2}]
    assert "V008" not in document["rules"]
    github = _isolated(seeded, *waive, "--output-format", "github", code=0).splitlines()
    assert len(github) == 1 and github[0].startswith("::notice ") and "V008 2" in github[0]
    root = ElementTree.fromstring(_isolated(seeded, *waive, "--output-format", "junit", code=0))
    suite = root.find("testsuite")
    assert suite is not None and suite.get("skipped") == "2" and suite.get("failures") == "0"
    skipped = {c.get("classname"): c.find("skipped") for c in suite.findall("testcase")}
    v008 = skipped["vppctl.verify.V008"]
    assert v008 is not None and "2 violation(s)" in (v008.get("message") or "")
    stats = _isolated(seeded, *waive, "--statistics", code=0)
    assert "(ignored)" in stats and "valid:" in stats


def test_a_selected_rule_still_fails_and_the_rest_are_counted(seeded: Path) -> None:
    out = _isolated(seeded, "--select", "V008", "--output-format", "concise", code=1)
    broken = {line.split(": ")[1].split()[0] for line in out.splitlines() if ":block" in line}
    assert broken == {"V008"} and "ignored 2 violation(s) of rules not enforced: V011 2" in out
    stats = _isolated(seeded, "--select", "V008", "--statistics", code=1)
    assert "(ignored)" in stats
    junit = ElementTree.fromstring(
        _isolated(seeded, "--select", "V008", "--output-format", "junit", code=1)
    )
    suite = junit.find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    assert suite.get("skipped") == str(len(RULES) - 1)


def test_a_selector_of_no_rule_is_a_usage_error(seeded: Path) -> None:
    r = invoke("verify", seeded, "--ignore", "V99", "--isolated", exit_code=2)
    assert "'V99' names no rule" in r.stderr


def test_paddles_own_pir_completion_passes_with_v009_ignored(tmp_path: Path) -> None:
    """The CI gate docs/ci.md shows: V009 is the only rule Paddle's completion breaks."""
    completed = tmp_path / "completed.json"
    completed.write_bytes(
        lzma.decompress((paths.PIR_REFERENCE / "gpt_keep_pp2_v2_paddlevpp.json.xz").read_bytes())
    )
    report = vppctl.verify_file(completed)
    assert {v.rule for v in report.violations} == {"V009"}
    waived = vppctl.verify_file(completed, vppctl.VerifyOptions(ignore="V009"))
    assert waived.valid and len(waived.ignored) == len(report.violations)
