"""The API says what is wrong with its arguments, as a VppctlError (issue 32, docs/python.md).

Was: paths with NUL or lone surrogates, bytes or a Program where a path goes raised
ValueError, UnicodeEncodeError or TypeError; `convert_file(src, ConvertOptions(...),
out)` said the options must be one ConvertOptions, `simulate_run(prog,
SimulateOptions(...))` that it takes its options as one Pictures; `MemoryOptions(
memory_limit=...)` was a bare TypeError and `limit="80GiB"` (what the CLI takes) was
refused; `PlanSearchOptions(micro_batches=8)` refused an int. Each case below is one of
a class tested whole: every call with every path argument (tests/support/optionfuzz.py
fuzzes them with every hostile name), every options class with a field it lacks.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import paths
import pytest
from optionfuzz import OPTIONS_CLASSES

import vppctl
from vppctl.errors import ProgramFileError, UsageError, VppctlError

SAMPLE = paths.ROOT / "samples" / "gpt-8l-pp4.pb"
CONVERT = vppctl.ConvertOptions(plan=vppctl.PlanOptions(vpp=2))


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda t: vppctl.inspect_file("a\x00b.pb"), ProgramFileError),
        (lambda t: vppctl.convert_file(SAMPLE, str(t / "o\x00.pb"), CONVERT), ProgramFileError),
        (lambda t: vppctl.Pictures(svg="s\x00.svg"), ProgramFileError),
        (
            lambda t: vppctl.sample_file(str(t / "\ud800.pb"), vppctl.SampleOptions(4, 2)),
            ProgramFileError,
        ),
        (lambda t: vppctl.verify_file(vppctl.read_program(SAMPLE)), UsageError),  # type: ignore[arg-type]
        (lambda t: vppctl.inspect_file(bytes(SAMPLE)), UsageError),  # type: ignore[arg-type]
        (lambda t: vppctl.read_program(b"prog.pb"), UsageError),  # type: ignore[arg-type]
        (lambda t: vppctl.write_program(vppctl.read_program(SAMPLE), b"o.pb"), UsageError),  # type: ignore[arg-type]
        (lambda t: vppctl.plan_run(3, vppctl.PlanSearchOptions(micro_batches=8)), UsageError),  # type: ignore[arg-type]
    ],
    ids=[
        "inspect NUL",
        "convert out NUL",
        "Pictures NUL",
        "sample surrogate",
        "Program as path",
        "bytes path",
        "read_program bytes",
        "write_program bytes",
        "plan int",
    ],
)
def test_a_path_that_cannot_be_one_is_a_vppctl_error(
    call: object, error: type[VppctlError], tmp_path: Path
) -> None:
    with pytest.raises(error) as e:
        call(tmp_path)  # type: ignore[operator]
    assert "\x00" not in str(e.value)  # the message shows it escaped
    assert not list(tmp_path.iterdir())  # nothing written


def test_a_program_where_a_path_goes_says_which_call_takes_one() -> None:
    with pytest.raises(UsageError, match="verify_program"):
        vppctl.verify_file(vppctl.read_program(SAMPLE))  # type: ignore[arg-type]


def test_arguments_in_the_wrong_order_are_said_as_such(tmp_path: Path) -> None:
    out = tmp_path / "o.pb"
    with pytest.raises(UsageError, match="wrong order: the ConvertOptions came as out"):
        vppctl.convert_file(SAMPLE, CONVERT, out)  # type: ignore[arg-type]
    simulate = vppctl.SimulateOptions(micro_batches=8)
    with pytest.raises(UsageError, match="wrong order: the SimulateOptions came as pictures"):
        vppctl.simulate_run(SAMPLE, simulate)  # type: ignore[call-arg, arg-type]
    with pytest.raises(UsageError, match="wrong order"):
        vppctl.verify_file(vppctl.VerifyOptions(), SAMPLE)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="wrong order"):
        vppctl.plan_run(vppctl.PlanSearchOptions(micro_batches=8), SAMPLE)  # type: ignore[arg-type]
    assert not out.exists()


OPTIONS = OPTIONS_CLASSES  # every options class of the API (optionfuzz keeps the list)


def test_the_list_holds_every_options_class_the_api_exports() -> None:
    exported = {name for name in vppctl.__all__ if name.endswith("Options")}
    assert exported <= {cls.__name__ for cls in OPTIONS}, exported


@pytest.mark.parametrize("cls", OPTIONS, ids=lambda c: c.__name__)
def test_every_options_class_names_the_field_meant(cls: type) -> None:
    with pytest.raises(UsageError, match=f"{cls.__name__} has no field 'no_such_field'"):
        cls(no_such_field=1)
    fields = [f.name for f in dataclasses.fields(cls)]
    with pytest.raises(UsageError, match="takes at most"):
        cls(*([None] * (len(fields) + 1)))
    with pytest.raises(UsageError, match="twice"):
        cls(None, **{fields[0]: None})


def test_a_flag_spelled_as_a_field_names_the_field() -> None:
    with pytest.raises(UsageError, match="--memory-limit is MemoryOptions.limit"):
        vppctl.MemoryOptions(memory_limit="80GiB")  # type: ignore[call-arg]
    with pytest.raises(UsageError, match="--memory-limit is PlanSearchOptions.memory.limit"):
        vppctl.PlanSearchOptions(micro_batches=8, memory_limit=1)  # type: ignore[call-arg]
    with pytest.raises(UsageError, match="did you mean 'micro_batches'"):
        vppctl.SimulateOptions(micro_batch=8)  # type: ignore[call-arg]


def test_options_take_what_their_flags_take() -> None:
    assert vppctl.MemoryOptions(limit="80GiB").limit == 80 << 30
    assert vppctl.MemoryOptions(limit="80GB").limit == 80 * 10**9
    with pytest.raises(UsageError, match="MemoryOptions.limit"):
        vppctl.MemoryOptions(limit="80 parsecs")
    with pytest.raises(UsageError, match="MemoryOptions.limit"):
        vppctl.MemoryOptions(limit="1e308TiB")
    assert vppctl.PlanSearchOptions(micro_batches=8).micro_batches == (8,)
    assert vppctl.PlanSearchOptions(micro_batches=8, vpp=2).vpp == (2,)


def test_an_output_that_is_the_input_names_the_api_field(tmp_path: Path) -> None:
    src = tmp_path / "prog.pb"
    src.write_bytes(SAMPLE.read_bytes())
    with pytest.raises(UsageError, match="pass --in-place") as e:
        vppctl.convert_file(src, src, CONVERT)
    assert "--in-place is ConvertOptions.in_place" in " ".join(e.value.__notes__)
    assert src.read_bytes() == SAMPLE.read_bytes()


def test_outcomes_numbers_are_exact_fractions_that_act_as_numbers() -> None:
    """docs/python.md: Numbers are exact. A Fraction compares with floats, float() gives
    one, and to_json() holds floats."""
    from fractions import Fraction

    options = vppctl.SimulateOptions(micro_batches=8, plan=vppctl.PlanOptions(vpp=2))
    outcome = vppctl.simulate_run(SAMPLE, None, options)
    result = outcome.results[-1]
    assert isinstance(result.bubble, Fraction) and 0 < result.bubble < 1.0
    assert isinstance(float(result.makespan), float)
    assert all(isinstance(r["bubble"], float) for r in outcome.to_json()["results"])
    assert vppctl.SimulateOptions(micro_batches=8, p2p_cost=0.1).p2p_cost == Fraction(1, 10)
