"""Fuzzing: mutated programs through `convert`, `verify` and `inspect`; no traceback, nothing lost.

Each input is a small program (samples built in code, a hand-built program with
sub-blocks, a converted program with its recorded plan, a text-format program)
with one to three mutations: byte flips, truncations, spliced or inserted
bytes, wire-level field deletions, duplications and random values at any depth,
and structural mutations through the generated messages (ops deleted,
duplicated, reordered or moved between blocks; variables deleted, duplicated
or renamed; blank or shuffled struct names; random process ids, mesh shapes,
chunk ids, op roles, sub_block indices, op ids, blocks and recorded plans;
odd op types and names, rich markup included). One binary input in twenty is
then re-encoded (tests/support/reencode.py: the same message with its fields
reordered, split, packed, given twice, with long lengths).

Every input runs through `convert --json` (and, for one input in twenty, the
table renderers of all three commands), `verify --json` and `inspect --json`,
in-process through click's CliRunner with `--debug`, and must give:

- an exit code in {0, 1, 2, 3, 4}: 70 is an internal error, i.e. a bug, and the
  failure shows the traceback;
- on an error exit, one `Error: ...` line on stderr and nothing on stdout;
  with `--json`, stdout otherwise holds one JSON object;
- no output file after a failed conversion, no stray file in the directory,
  and the input file unchanged (bytes and mtime);
- after a successful conversion, an output program that `verify` accepts;
- no SelfCheckError: convert refusing its own result is a bug, or an input
  problem convert should have refused up front with its own message;
- a re-encoded input converts exactly as its canonical encoding (protobuf's
  own serialization of it) does: exit code, report or error, output program.

The CI round runs once per session; one test per kind of failure checks it, so
a known bug of one kind does not hide a new one of another.

PIR programs (Paddle 3.x JSON, `vppctl.program.pir`) get a round of their own
(tests/support/fuzz_pir.py): small programs built in code (tests/support/pir_json.py) and
real ones Paddle built (in CI two reference programs; in the long round every reference
program and the generated matrix's), with JSON mutations (keys deleted, values replaced
by odd JSON, ops deleted, duplicated or swapped, value ids, chunk ids, meshes, versions
changed; NULL, null or nothing in a dist-attr slot of each kind; NULL or null for a
string; lone surrogates and non-characters in names) or byte mutations, and now and then
a hostile document (deep nesting, a huge number, a cut); each through `convert` (always
refused: exit 3 or 4, nothing written), `verify`, `inspect` and `simulate` (with
`--vpp`, and with vpp from the chunk ids), with the same checks. CI runs PIR_CI_INPUTS
of them; the long round as many again as a tenth of its inputs.

Rounds (inputs are numbered; input n of seed s is rebuilt by `mutant(s, n)`):

    # CI round: fixed seed, 1,200 inputs, about 20 s on a quiet 2-core machine
    /tmp/venv/bin/python -m pytest tests/contract/test_fuzz.py -q

    # long round: 50,000 inputs (VPPCTL_SLOW=1), about 10 minutes; -s shows
    # progress every 5,000 inputs; or any count and seed
    VPPCTL_SLOW=1 /tmp/venv/bin/python -m pytest tests/contract/test_fuzz.py -q -s -k long
    VPPCTL_FUZZ_ROUNDS=200000 VPPCTL_FUZZ_SEED=7 \
        /tmp/venv/bin/python -m pytest tests/contract/test_fuzz.py -q -k long

A failing input is saved as `fuzz-<seed>-<n>.pb` (or `.pbtxt`) in the test's
temporary directory, or in $VPPCTL_FUZZ_SAVE when set (pytest keeps only its
last few temporary directories), and the failure message lists the mutations
applied, the command and its stderr.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fuzz_pir import AIMED, pir_mutant
from fuzzing import (
    CI_INPUTS,
    CI_SEED,
    CRASH,
    ENCODING,
    FILES,
    HOSTILE,
    KINDS,
    LONG_INPUTS,
    LONG_SEED,
    SELF_CHECK,
    SLOW,
    UNVERIFIED,
    Outcome,
    bases,
    join_fields,
    mutant,
    pir_plan_problems,
    run_round,
    wire_fields,
)

pytestmark = pytest.mark.heavy  # tens of seconds: started first (tests/conftest.py)

_ROUNDS: dict[int, Outcome] = {}  # the CI round's outcome, once it has run


def _ci_round(tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    if CI_SEED not in _ROUNDS:
        outcome = run_round(tmp_path_factory.mktemp("fuzz"), CI_SEED, CI_INPUTS)
        print(outcome.report())
        _ROUNDS[CI_SEED] = outcome
    return _ROUNDS[CI_SEED]


def test_ci_round_runs_every_input(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The CI round itself, as a test of its own so that `--durations` shows its cost (a
    quarter of the suite); the tests below read its outcome."""
    assert _ci_round(tmp_path_factory).inputs == CI_INPUTS


@pytest.fixture
def ci_round(tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    return _ci_round(tmp_path_factory)


def test_mutants_are_reproducible() -> None:
    assert mutant(CI_SEED, 5) == mutant(CI_SEED, 5)
    assert len({mutant(CI_SEED, n)[1] for n in range(50)}) > 40


def test_wire_fields_roundtrip() -> None:
    for base in bases():
        if not base.text:
            fs = wire_fields(base.data)
            assert fs is not None
            assert join_fields(fs) == base.data


def test_ci_round_covers_every_outcome(ci_round: Outcome) -> None:
    assert ci_round.inputs == CI_INPUTS
    # The round must reach the engine, not only the loader's refusals.
    for command, code in (("convert", 0), ("convert", 3), ("convert", 4), ("verify", 1)):
        assert ci_round.codes[command, code] > 20, ci_round.report()


def test_ci_round_fails_cleanly(ci_round: Outcome) -> None:
    """No traceback or exit 70, one Error line, JSON or nothing on stdout."""
    assert not ci_round.failures[CRASH], ci_round.report(CRASH)


def test_ci_round_loses_nothing(ci_round: Outcome) -> None:
    """No output after a failure, no stray temporary file, the input untouched."""
    assert not ci_round.failures[FILES], ci_round.report(FILES)


def test_ci_round_convert_output_verifies(ci_round: Outcome) -> None:
    assert not ci_round.failures[UNVERIFIED], ci_round.report(UNVERIFIED)


def test_ci_round_finishes_every_input_in_bounded_time(ci_round: Outcome) -> None:
    assert not ci_round.failures[SLOW], ci_round.report(SLOW)


def test_ci_round_reads_every_encoding_as_protobuf_does(ci_round: Outcome) -> None:
    """A re-encoded input (fields reordered, split, packed, given twice: tests/support/reencode.py)
    converts exactly as its canonical encoding does."""
    assert ci_round.reencoded > 30, ci_round.report()
    assert not ci_round.failures[ENCODING], ci_round.report(ENCODING)


def test_ci_round_meets_every_hostile_class(ci_round: Outcome) -> None:
    assert {f"hostile:{kind}" for kind in HOSTILE} <= set(ci_round.bases), ci_round.bases


def test_ci_round_convert_never_fails_its_self_check(ci_round: Outcome) -> None:
    """A SelfCheckError means convert built a program its verifier rejects: a bug, or an
    input problem that convert should have refused up front with its own message."""
    assert not ci_round.failures[SELF_CHECK], ci_round.report(SELF_CHECK)


@pytest.mark.skipif(
    not (os.environ.get("VPPCTL_SLOW") == "1" or os.environ.get("VPPCTL_FUZZ_ROUNDS")),
    reason="long fuzz round; set VPPCTL_SLOW=1 or VPPCTL_FUZZ_ROUNDS=N to run it",
)
def test_long_round(tmp_path: Path) -> None:
    outcome = run_round(tmp_path, LONG_SEED, LONG_INPUTS)
    print(outcome.report())
    for kind in KINDS:
        assert not outcome.failures[kind], outcome.report(kind)
    pir = run_round(tmp_path / "pir", LONG_SEED, LONG_INPUTS // 10, pir_mutant)
    print(pir.report())
    for kind in KINDS:
        assert not pir.failures[kind], pir.report(kind)


# -- PIR programs (JSON) -----------------------------------------------------------------

PIR_CI_INPUTS = 80


_PIR_ROUNDS: dict[int, Outcome] = {}


@pytest.fixture
def pir_round(tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    if CI_SEED not in _PIR_ROUNDS:
        outcome = run_round(tmp_path_factory.mktemp("fuzz_pir"), CI_SEED, PIR_CI_INPUTS, pir_mutant)
        print(outcome.report())
        _PIR_ROUNDS[CI_SEED] = outcome
    return _PIR_ROUNDS[CI_SEED]


def test_pir_round_reaches_the_commands_and_the_refusals(pir_round: Outcome) -> None:
    assert pir_round.inputs == PIR_CI_INPUTS
    for command, code in (("convert", 4), ("convert", 3), ("verify", 1), ("simulate", 0)):
        assert pir_round.codes[command, code] > 3, pir_round.report()


def test_pir_round_mutates_real_programs_with_every_aimed_mutation(pir_round: Outcome) -> None:
    """Real programs Paddle built are mutated, not only small ones built in code, with NULL
    in dist-attr slots and strings, and odd characters in names (fuzz_pir.AIMED)."""
    real = sum(n for name, n in pir_round.bases.items() if name.startswith("pir:"))
    assert real >= 8, pir_round.bases
    for aimed in AIMED:
        made = sum(
            n for what, n in pir_round.mutations.items() if what.startswith(f"pir: {aimed} (")
        )
        assert made >= 3, (aimed, pir_round.mutations)


def test_pir_round_fails_cleanly_and_loses_nothing(pir_round: Outcome) -> None:
    for kind in KINDS:
        assert not pir_round.failures[kind], pir_round.report(kind)


def test_the_pir_round_checks_the_plan_convert_wrote(tmp_path: Path) -> None:
    """A PIR program's conversion writes a plan, not a program: the round reads it back and
    holds it to what convert reported (seeded: a program, another vpp, a layer twice)."""
    import json

    from vppctl.plan import PirPlan

    plan = PirPlan(
        pp=2, vpp=2, seg_method="L", virtual_stages=(("L_0",), ("L_1",), ("L_2",), ("L_3",))
    )
    out = tmp_path / "plan.json"
    said = json.dumps({"pp": 2, "vpp": 2})
    out.write_text(plan.dumps())
    assert pir_plan_problems(out, said) == []
    assert pir_plan_problems(out, json.dumps({"pp": 2, "vpp": 3}))  # not what it reported
    twice = json.loads(plan.dumps())
    twice["virtual_stages"][3]["layers"] = ["L_0"]
    out.write_text(json.dumps(twice))
    assert pir_plan_problems(out, said)  # read back, or a layer twice: flagged either way
    out.write_text('{"base_code": {"magic": "pir"}}')
    ((kind, why),) = pir_plan_problems(out, said)
    assert kind == "unverified" and "does not read back" in why, why
