"""The option fuzz (tests/support/optionfuzz.py): no hostile option value, path or name is
an internal error (issue 32).

Was: `simulate --p2p-cost 1e307` (and `--costs 1e307,1,1` with --json or --svg, `plan
--p2p-cost 1e308`) was exit 70 (OverflowError); paths with NUL or lone surrogates in
the API raised ValueError or UnicodeEncodeError. Every valued option of every command
now gets floats at the limits, NaN, infinities, negative zero, huge ints and numbers in
lists and sizes; every path and name gets NUL, lone surrogates, XML's non-characters and
controls; the API's every options field and path argument the same. Each must end in a
documented exit code (a VppctlError in the API), never 70 or a traceback; `-s` prints
the count of inputs tried per class.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from optionfuzz import (
    NAMES,
    NUMBERS,
    api_field_cases,
    api_path_cases,
    cli_cases,
    resolve,
)

import vppctl
from vppctl.cli import cli

pytestmark = pytest.mark.heavy  # a minute or so: started first (tests/conftest.py)

DOCUMENTED = frozenset({0, 1, 2, 3, 4, 5})


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    work = tmp_path_factory.mktemp("optionfuzz")
    (work / "hostile").mkdir()
    prog, vprog = work / "p.pb", work / "p.vpp.pb"
    vppctl.sample_file(prog, vppctl.SampleOptions(layers=4, pp=2, hidden=64))
    vppctl.convert_file(prog, vprog, vppctl.ConvertOptions(plan=vppctl.PlanOptions(vpp=2)))
    return prog, vprog, work


def test_the_fuzz_covers_every_valued_option_of_every_command(tmp_path: Path) -> None:
    wheres = {c.where for c in cli_cases(tmp_path)}
    for name, cmd in cli.commands.items():
        for p in cmd.params:
            if getattr(p, "is_flag", False) or getattr(p, "count", False):
                continue
            flag = p.opts[-1] if p.param_type_name == "option" else p.name
            assert f"{name} {flag}" in wheres, f"{name} {flag} is not fuzzed"


def test_no_option_value_path_or_name_is_an_internal_error(
    programs: tuple[Path, Path, Path],
) -> None:
    prog, vprog, work = programs
    tried: Counter[str] = Counter()
    bad: list[str] = []
    runner = CliRunner()
    for case in cli_cases(work):  # every path is absolute, under work/
        args = resolve(case.args, prog, vprog, work)
        r = runner.invoke(cli, args, prog_name="vppctl")
        tried[case.klass] += 1
        if r.exit_code not in DOCUMENTED or "Traceback" in r.stderr:
            bad.append(f"{case.where} {case.args[-1]!r}: exit {r.exit_code}: {r.stderr[-300:]}")
        assert prog.read_bytes()[:2] and vprog.stat().st_size, "an input was damaged"
    print(f"\ncommand-line inputs tried per class: {dict(sorted(tried.items()))}")
    assert set(tried) == {*NUMBERS, "names"}
    assert not bad, "\n".join(bad[:20]) + f"\n({len(bad)} in all)"


def test_no_api_field_or_path_raises_other_than_a_vppctl_error(
    programs: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    prog, vprog, work = programs
    monkeypatch.chdir(work / "hostile")  # relative hostile names land here, not in the checkout
    tried: Counter[str] = Counter()
    bad: list[str] = []
    cases = [*api_field_cases(), *api_path_cases(prog, vprog, work)]
    for klass, where, call in cases:
        tried[klass] += 1
        try:
            made = call()
        except vppctl.VppctlError:
            continue
        except Exception as e:
            bad.append(f"{where} ({klass}): {type(e).__name__}: {e}")
            continue
        for value in vars(made).values() if hasattr(made, "__dataclass_fields__") else ():
            if isinstance(value, float) and not math.isfinite(value):
                bad.append(f"{where} ({klass}): kept {value!r}")
    print(f"\nAPI inputs tried per class: {dict(sorted(tried.items()))}")
    assert tried["names"] >= len(NAMES) and tried["not a path"] and tried["huge ints"]
    assert not bad, "\n".join(bad[:20]) + f"\n({len(bad)} in all)"


@pytest.mark.parametrize(
    "args",
    [
        ("simulate", "--pp", "2", "--vpp", "2", "-m", "4", "--p2p-cost", "1e307"),
        ("simulate", "--pp", "2", "--vpp", "2", "-m", "4", "--costs", "1e307,1,1", "--json"),
        ("simulate", "--pp", "2", "--vpp", "2", "-m", "4", "--costs", "1e307,1,1", "--svg", "-"),
    ],
)
def test_the_numbers_the_issue_names_are_usage_errors(args: tuple[str, ...]) -> None:
    r = CliRunner().invoke(cli, list(args), prog_name="vppctl")
    assert r.exit_code == 2, r.output
    assert "between 1e-12 and 1e12" in r.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("plan", "PROG", "-m", "4", "--p2p-cost", "1e308"),
        ("simulate", "VPROG", "-m", "8", "--p2p-cost", "1e307"),  # was exit 70 (OverflowError)
        ("simulate", "VPROG", "-m", "8", "--p2p-cost", "1e307", "--json"),
        ("simulate", "VPROG", "-m", "8", "--costs", "1e307,1,1", "--svg", "OUT/x.svg"),
    ],
)
def test_the_numbers_the_issue_names_with_a_program_are_usage_errors(
    programs: tuple[Path, Path, Path], args: tuple[str, ...]
) -> None:
    prog, vprog, work = programs
    r = CliRunner().invoke(cli, resolve(args, prog, vprog, work))
    assert r.exit_code == 2 and "between 1e-12 and 1e12" in r.stderr, r.output
    assert not (work / "x.svg").exists()
