"""The public Python API: `vppctl.__all__` names what a training script may use.

Every call has one shape (inputs, output, one options object); every options object
refuses a bad value when it is made, with a UsageError (exit 2) that names the field as
the API and the command line spell it and lists the legal values, in the words the
command line uses too; every exception a call can raise is exported.

The tests here also cover vppctl/_lazy.py, vppctl/commands.py and vppctl/validate.py, which
have no test file of their own.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import subprocess
import sys
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import paths
import pytest
from commandline import invoke

import vppctl
from vppctl import choices, commands
from vppctl.cli import cli
from vppctl.errors import VppctlError

ROOT = paths.ROOT
SAMPLE = ROOT / "samples" / "gpt-8l-pp4.pb"


@pytest.mark.parametrize("name", vppctl.__all__)
def test_every_name_in_all_imports(name: str) -> None:
    assert getattr(vppctl, name) is not None


def test_all_is_what_the_package_loads_on_use() -> None:
    names = vppctl.__all__
    assert len(set(names)) == len(names)
    assert set(names) == {"__version__", *vppctl._API}  # type: ignore[attr-defined]


def test_all_lists_one_call_per_command() -> None:
    calls = {f"{c}_file" for c in ("convert", "verify", "inspect", "dump", "sample")}
    assert calls | {"simulate_run", "plan_run"} <= set(vppctl.__all__)
    assert len(CALLS) == len(cli.commands)


def test_unknown_names_are_attribute_errors() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        vppctl.nope  # type: ignore[attr-defined]  # noqa: B018


def test_import_vppctl_stays_cheap() -> None:
    """The API is imported on first use: `import vppctl` loads neither protobuf nor rich."""
    code = (
        "import sys, vppctl; "
        "print(sorted(m for m in ('google.protobuf', 'rich') if m in sys.modules))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "[]"


def test_errors_carry_the_cli_exit_codes() -> None:
    assert vppctl.UsageError("x").exit_code == 2
    assert vppctl.ProgramFileError("x").exit_code == 3
    assert vppctl.ConversionError("x").exit_code == 4
    assert vppctl.SelfCheckError("x").exit_code == 70
    assert vppctl.SimulationError("x").exit_code == 4
    assert vppctl.OutOfMemoryError("x").exit_code == 5


# -- every exception a call can raise is exported ---------------------------------------

# VppctlError subclasses no public call lets out, and why.
NOT_RAISED_BY_THE_API = {
    # the command line's own: its report streams (stdout, stderr) failing
    "vppctl.cli.streams.ReportStreamError",
    # the planner's; plan_run turns it into NoConversionFits, which carries the outcome
    "vppctl.planner.search.NoPlanFits",
    # vppctl.paddle.pir_plan's, raised inside Paddle's build (no call of vppctl's API lets
    # them out): the bridge's face, vppctl.paddle, exports them with its other errors
    "vppctl.paddle.errors.PirPlanError",
    "vppctl.paddle.errors.PlanMismatchError",
    "vppctl.paddle.errors.PaddleInternalMissingError",
}


def _vppctl_modules() -> Iterator[str]:
    for info in pkgutil.walk_packages(vppctl.__path__, "vppctl."):
        if not info.name.startswith("vppctl.program._proto"):
            yield info.name


def _subclasses(cls: type) -> Iterator[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_every_error_a_call_can_raise_is_exported() -> None:
    for name in _vppctl_modules():
        importlib.import_module(name)
    defined = {f"{c.__module__}.{c.__qualname__}": c for c in _subclasses(VppctlError)}
    defined = {k: c for k, c in defined.items() if k.startswith("vppctl.")}
    assert set(defined) >= NOT_RAISED_BY_THE_API
    bridge = importlib.import_module("vppctl.paddle")
    for name in NOT_RAISED_BY_THE_API:
        if name.startswith("vppctl.paddle."):  # exported by the bridge's face instead
            assert getattr(bridge, name.rsplit(".", 1)[-1]) is defined[name], name
    public = [getattr(vppctl, name) for name in vppctl.__all__]
    exported = {c for c in public if isinstance(c, type)}
    missing = [
        k for k, c in defined.items() if c not in exported and k not in NOT_RAISED_BY_THE_API
    ]
    assert missing == []
    assert VppctlError in exported


# -- the calls and their options ------------------------------------------------------

# Each public call, and a valid way to make each options class it takes.
CALLS = (
    "convert_file",
    "verify_file",
    "inspect_file",
    "dump_file",
    "sample_file",
    "simulate_run",
    "plan_run",
)
IN_MEMORY = ("convert_program", "verify_program")
REQUIRED: dict[str, dict[str, Any]] = {
    "ConvertOptions": {"plan": vppctl.PlanOptions(vpp=2)},
    "SampleOptions": {"layers": 8, "pp": 4},
    "SimulateOptions": {"micro_batches": 8},
    "PlanSearchOptions": {"micro_batches": (8,)},
}


def _hints(obj: Any) -> dict[str, Any]:
    """Type hints resolved against the API's own names (modules import some of them for
    type checkers only)."""
    names = {name: getattr(vppctl, name) for name in vppctl.__all__}
    names.update(vars(choices))
    return typing.get_type_hints(obj, localns=names)


def _options_types(call: Callable[..., Any]) -> list[type]:
    """The options classes a call takes (its parameters typed with a dataclass)."""
    found = []
    for name, hint in _hints(call).items():
        if name == "return":
            continue
        for arg in (hint, *typing.get_args(hint)):
            if dataclasses.is_dataclass(arg) and isinstance(arg, type):
                found.append(arg)
    return found


def _nested(options_type: type) -> list[type]:
    out = [options_type]
    for nested in getattr(options_type, "NESTED", {}).values():
        out += _nested(nested)
    return out


def _choice_fields(options_type: type) -> list[tuple[str, tuple[str, ...]]]:
    """(field, legal names) for every field typed with a Literal, alone or in a sequence."""
    found = []
    for name, hint in _hints(options_type).items():
        if name in ("FLAGS", "NESTED"):
            continue
        literals = _literals(hint)
        if literals:
            found.append((name, literals))
    return found


def _literals(hint: Any) -> tuple[str, ...]:
    if typing.get_origin(hint) is typing.Literal:
        return typing.get_args(hint)
    for arg in typing.get_args(hint):
        found = _literals(arg)
        if found:
            return found
    return ()


CHOICES = [
    pytest.param(call, options, field, legal, id=f"{call}-{options.__name__}.{field}")
    for call in (*CALLS, *IN_MEMORY)
    for taken in _options_types(getattr(vppctl, call))
    for options in _nested(taken)
    for field, legal in _choice_fields(options)
]


def test_every_call_takes_its_options_object_and_every_one_has_choices_to_check() -> None:
    shapes = {call: [t.__name__ for t in _options_types(getattr(vppctl, call))] for call in CALLS}
    assert shapes == {
        "convert_file": ["ConvertOptions"],
        "verify_file": ["VerifyOptions"],
        "inspect_file": ["InspectOptions"],
        "dump_file": ["DumpOptions"],
        "sample_file": ["SampleOptions"],
        "simulate_run": ["Pictures", "SimulateOptions"],
        "plan_run": ["PlanSearchOptions"],
    }
    # inputs first, then the output, then the options, then the keyword progress
    for call in CALLS:
        params = list(inspect.signature(getattr(vppctl, call)).parameters.values())
        assert params[-1].name == "progress" and params[-1].kind is params[-1].KEYWORD_ONLY
        assert params[-2].name == "options", call
    with_choices = {c.values[0] for c in CHOICES}  # type: ignore[attr-defined]
    assert with_choices == {*CALLS, *IN_MEMORY} - {"inspect_file", "dump_file"}


def _bad(options_type: type, field: str, value: object) -> Any:
    kwargs = {**REQUIRED.get(options_type.__name__, {}), field: value}
    return options_type(**kwargs)


@pytest.mark.parametrize(("call", "options_type", "field", "legal"), CHOICES)
def test_a_bad_choice_is_a_usage_error_naming_the_legal_values_before_any_work(
    call: str,
    options_type: type,
    field: str,
    legal: tuple[str, ...],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_work(*args: object, **kwargs: object) -> None:
        raise AssertionError("work started before the options were checked")

    monkeypatch.setattr(commands, "read_program", no_work)
    sequence = typing.get_origin(_hints(options_type)[field]) is not typing.Literal and (
        "Sequence" in str(_hints(options_type)[field])
    )
    value: object = ("bogus",) if sequence else "bogus"
    with pytest.raises(vppctl.UsageError) as e:
        _bad(options_type, field, value)
    if (options_type, field) == (vppctl.PlanSearchOptions, "splits"):
        legal = choices.SEARCHED_SPLITS  # explicit counts are given, not searched
    assert e.value.exit_code == 2
    flag = options_type.FLAGS[field]
    assert str(e.value) == f"{flag} ({options_type.__name__}.{field}): 'bogus' is not one of " + (
        ", ".join(legal)
    )
    # The name in the wrong case says which token it is.
    with pytest.raises(vppctl.UsageError, match=f"lower case: '{legal[-1]}'"):
        _bad(options_type, field, (legal[-1].upper(),) if sequence else legal[-1].upper())


# A bad value of each choice on the command line, and the options object it goes into.
CLI_CHOICES = [
    (["convert", str(SAMPLE), "--vpp", "2"], "--placement", vppctl.PlanOptions, "placement"),
    (["convert", str(SAMPLE), "--vpp", "2"], "--split", vppctl.PlanOptions, "split"),
    (["convert", str(SAMPLE), "--vpp", "2"], "--cost", vppctl.PlanOptions, "cost"),
    (["verify", str(SAMPLE)], "--placement", vppctl.VerifyOptions, "placement"),
    (["sample", "--layers", "8", "--pp", "4", "-o", "x.pb"], "--layout", None, "layout"),
    (["sample", "--layers", "8", "--pp", "4", "-o", "x.pb"], "--optimizer", None, "optimizer"),
    (["simulate", str(SAMPLE), "-m", "8"], "--schedule", None, "schedule"),
    (["plan", str(SAMPLE), "-m", "8"], "--schedule", None, "schedules"),
    (["plan", str(SAMPLE), "-m", "8"], "--placement", None, "placements"),
    (["plan", str(SAMPLE), "-m", "8"], "--split", None, "splits"),
    (["plan", str(SAMPLE), "-m", "8"], "--cost", None, "cost"),
]
_CLASS_OF = {
    "sample": vppctl.SampleOptions,
    "simulate": vppctl.SimulateOptions,
    "plan": vppctl.PlanSearchOptions,
}


@pytest.mark.parametrize(("args", "flag", "options_type", "field"), CLI_CHOICES)
def test_the_command_line_says_a_bad_choice_in_the_apis_words(
    args: list[str], flag: str, options_type: type | None, field: str, tmp_path: Path
) -> None:
    kind = options_type or _CLASS_OF[args[0]]
    sequence = field.endswith("s") and field not in ("cost",)
    with pytest.raises(vppctl.UsageError) as e:
        _bad(kind, field, ("bogus",) if sequence else "bogus")
    out = tmp_path / "x.pb"
    args = [str(out) if a == "x.pb" else a for a in args]
    result = invoke(*args, flag, "bogus", exit_code=2)
    assert result.stderr == f"Error: {e.value}\n"
    assert not out.exists()


def _memory(**fields: Any) -> object:
    from vppctl.planner import MemoryOptions

    return MemoryOptions(**fields)


# A bad number on the command line, and the options object that refuses it in the API.
CLI_NUMBERS: list[tuple[list[str], str, str, Callable[[], object]]] = [
    (["convert", str(SAMPLE)], "--vpp", "0", lambda: vppctl.PlanOptions(vpp=0)),
    (["convert", str(SAMPLE), "--vpp", "2"], "--pp", "5000",
     lambda: vppctl.PlanOptions(vpp=2, pp=5000)),
    (["convert", str(SAMPLE), "--vpp", "2"], "-m", "0",
     lambda: vppctl.ConvertOptions(plan=vppctl.PlanOptions(vpp=2), micro_batches=0)),
    (["verify", str(SAMPLE)], "--vpp", "0", lambda: vppctl.VerifyOptions(vpp=0)),
    (["verify", str(SAMPLE)], "--pp", "-1", lambda: vppctl.VerifyOptions(pp=-1)),
    (["simulate", "--pp", "2", "--vpp", "2"], "-m", "0",
     lambda: vppctl.SimulateOptions(micro_batches=0)),
    (["simulate", "--pp", "2", "--vpp", "2"], "-m", "70000",
     lambda: vppctl.SimulateOptions(micro_batches=70000)),
    (["simulate", "--pp", "2", "--vpp", "2", "-m", "4"], "--group-size", "0",
     lambda: vppctl.SimulateOptions(micro_batches=4, group_size=0)),
    (["simulate", "--pp", "2", "--vpp", "2", "-m", "4"], "--width", "100",
     lambda: vppctl.Pictures(svg_width=100)),
    (["simulate", "--pp", "2", "--vpp", "2", "-m", "4"], "--p2p-cost", "-1",
     lambda: vppctl.SimulateOptions(micro_batches=4, p2p_cost=-1.0)),
    (["simulate", str(SAMPLE), "-m", "4"], "--micro-batch-size", "0",
     lambda: _memory(micro_batch_size=0)),
    (["simulate", str(SAMPLE), "-m", "4"], "--seq-len", "0", lambda: _memory(seq_len=0)),
    (["plan", str(SAMPLE)], "-m", "0", lambda: vppctl.PlanSearchOptions(micro_batches=(0,))),
    (["plan", str(SAMPLE)], "-m", "70000",
     lambda: vppctl.PlanSearchOptions(micro_batches=(70000,))),
    (["plan", str(SAMPLE), "-m", "8"], "--vpp", "0",
     lambda: vppctl.PlanSearchOptions(micro_batches=(8,), vpp=(0,))),
    (["plan", str(SAMPLE), "-m", "8"], "--micro-batch-size", "0",
     lambda: _memory(micro_batch_size=0)),
    (["sample", "--pp", "4", "-o", "x.pb"], "--layers", "0",
     lambda: vppctl.SampleOptions(layers=0, pp=4)),
    (["sample", "--layers", "8", "-o", "x.pb"], "--pp", "0",
     lambda: vppctl.SampleOptions(layers=8, pp=0)),
    (["sample", "--layers", "8", "--pp", "4", "-o", "x.pb"], "--vpp", "5000",
     lambda: vppctl.SampleOptions(layers=8, pp=4, vpp=5000)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "flag", "value", "api"),
    CLI_NUMBERS,
    ids=[f"{args[0]} {flag} {value}" for args, flag, value, _ in CLI_NUMBERS],
)
def test_the_command_line_says_a_bad_number_in_the_apis_words(
    args: list[str], flag: str, value: str, api: Callable[[], object], tmp_path: Path
) -> None:
    """Click parses a number; the options object alone says whether it is in range, so a
    bad value reads the same on the command line and in Python."""
    with pytest.raises(vppctl.UsageError) as e:
        api()
    out = tmp_path / "x.pb"
    args = [str(out) if a == "x.pb" else a for a in args]
    result = invoke(*args, flag, value, exit_code=2)
    assert result.stderr == f"Error: {e.value}\n"
    assert not out.exists()


def test_options_of_the_wrong_kind_are_usage_errors() -> None:
    plan = vppctl.PlanOptions(vpp=2)
    with pytest.raises(vppctl.UsageError, match=r"takes its options as one ConvertOptions, got "
                       r"PlanOptions: wrap it, ConvertOptions\(plan=PlanOptions"):  # fmt: skip
        vppctl.convert_file(SAMPLE, None, plan)  # type: ignore[arg-type]
    cases: list[Callable[[], object]] = [
        lambda: vppctl.verify_file(SAMPLE, plan),  # type: ignore[arg-type]
        lambda: vppctl.inspect_file(SAMPLE, plan),  # type: ignore[arg-type]
        lambda: vppctl.dump_file(SAMPLE, None, plan),  # type: ignore[arg-type]
        lambda: vppctl.sample_file("x.pb", plan),  # type: ignore[arg-type]
        lambda: vppctl.simulate_run(SAMPLE, None, plan),  # type: ignore[arg-type]
        lambda: vppctl.plan_run(SAMPLE, plan),  # type: ignore[arg-type]
        lambda: vppctl.convert_program(None, plan),  # type: ignore[arg-type]
        lambda: vppctl.verify_program(None, plan),  # type: ignore[arg-type]
    ]
    for case in cases:
        with pytest.raises(vppctl.UsageError, match="got PlanOptions"):
            case()


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda: vppctl.PlanOptions(vpp=0), "--vpp (PlanOptions.vpp): 0 is not an integer"),
        (lambda: vppctl.PlanOptions(vpp=True), "True is not an integer"),
        (lambda: vppctl.PlanOptions(vpp=2, layers_per_chunk=(4, 0)), "0 is not an integer"),
        (lambda: vppctl.PlanOptions(vpp=2, split="explicit"), "'explicit' needs the counts"),
        (lambda: vppctl.PlanOptions(vpp=2, split="keep", layers_per_chunk=(4, 4)), "sets the"),
        (lambda: vppctl.ConvertOptions(plan=vppctl.PlanOptions()), "is required to convert"),
        (lambda: vppctl.ConvertOptions(plan=vppctl.PlanOptions(vpp=2), seg_method="a("),
         "--seg-method (ConvertOptions.seg_method) 'a(' is not a valid regular expression"),
        (lambda: vppctl.ConvertOptions(plan=vppctl.PlanOptions(vpp=2), strict=1), "True or"),
        (lambda: vppctl.MemoryOptions(micro_batch_size=0), "--micro-batch-size (MemoryOptions"),
        (lambda: vppctl.SampleOptions(layers=8, pp=4, hidden=100), "multiple of 64"),
        (lambda: vppctl.SimulateOptions(micro_batches=0), "--micro-batches (SimulateOptions"),
        (lambda: vppctl.SimulateOptions(micro_batches=8, costs=(1, 1)), "three numbers"),
        (lambda: vppctl.SimulateOptions(micro_batches=8, costs=(0, 0, 0)), "not all zero"),
        (lambda: vppctl.SimulateOptions(micro_batches=8, p2p_cost=float("nan")), "0 or between"),
        (lambda: vppctl.SimulateOptions(micro_batches=8, schedule="1f1b", group_size=2),
         "takes none: drop --group-size"),
        (lambda: vppctl.Pictures(svg_width=10), "--width (Pictures.svg_width): 10"),
        # plan_run("prog.pb", micro_batches=8) was a bare TypeError
        (lambda: vppctl.PlanSearchOptions(micro_batches="8"), "'8' is not a sequence of integers"),
        (lambda: vppctl.PlanSearchOptions(micro_batches=()), "at least one count"),
        (lambda: vppctl.PlanSearchOptions(micro_batches=(8,), splits=("explicit",)),
         "'explicit' is not one of uniform, keep, balanced"),
        (lambda: vppctl.PlanSearchOptions(micro_batches=(8,), schedules="zbv"),  # type: ignore[arg-type]
         "'zbv' is not a sequence of names"),
        (lambda: vppctl.VerifyOptions(pp=5000), "--pp (VerifyOptions.pp): 5000"),
    ],
)  # fmt: skip
def test_other_bad_values_are_usage_errors_when_the_options_are_made(
    make: Callable[[], object], said: str
) -> None:
    with pytest.raises(vppctl.UsageError) as e:
        make()
    assert e.value.exit_code == 2 and said in str(e.value)


def test_old_call_forms_fail_before_any_work(tmp_path: Path) -> None:
    """0.x: the call forms of vppctl 0.2 are gone, with no compatibility layer."""
    out = tmp_path / "x.pb"
    with pytest.raises(vppctl.UsageError, match=r"the output first: sample_file\(out"):
        vppctl.sample_file(vppctl.SampleOptions(layers=4, pp=2), out)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="micro_batches"):
        vppctl.simulate_run(SAMPLE, micro_batches=8)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="vpp"):
        vppctl.verify_file(SAMPLE, vpp=2)  # type: ignore[call-arg]
    assert not out.exists()


def test_options_keep_sequences_as_tuples_and_costs_exact() -> None:
    from fractions import Fraction

    search = vppctl.PlanSearchOptions(micro_batches=[16, 32], placements=[], p2p_cost=0.1)
    assert search.micro_batches == (16, 32) and search.placements == ("loop", "v")
    assert search.p2p_cost == Fraction(1, 10)
    simulate = vppctl.SimulateOptions(micro_batches=8, costs=(1, 0.5, 0.5))
    assert simulate.costs == (1, Fraction(1, 2), Fraction(1, 2))


# -- side effects, and errors worded in flags ------------------------------------------


def test_convert_program_converts_the_program_in_place() -> None:
    program = vppctl.read_program(SAMPLE)
    before = program.to_bytes()
    result = vppctl.convert_program(program, vppctl.ConvertOptions(plan=vppctl.PlanOptions(vpp=2)))
    assert result.ops_changed > 0 and program.to_bytes() != before
    assert vppctl.verify_program(program).valid and vppctl.verify_program(program).vpp == 2
    with pytest.raises(vppctl.UsageError, match="is convert_file's"):
        options = vppctl.ConvertOptions(plan=vppctl.PlanOptions(vpp=2), micro_batches=8)
        vppctl.convert_program(vppctl.read_program(SAMPLE), options)


def test_an_error_worded_in_flags_names_the_api_fields_in_a_note(tmp_path: Path) -> None:
    options = vppctl.ConvertOptions(plan=vppctl.PlanOptions(vpp=3))
    with pytest.raises(vppctl.ConversionError) as e:
        vppctl.convert_file(SAMPLE, tmp_path / "out.pb", options)
    assert "use --split balanced" in str(e.value)  # the message is the command line's
    (note,) = e.value.__notes__
    assert note == (
        "in the Python API: --vpp is ConvertOptions.plan.vpp, --split is "
        "ConvertOptions.plan.split, --layers-per-chunk is ConvertOptions.plan.layers_per_chunk"
    )
    assert not (tmp_path / "out.pb").exists()
    out = str(tmp_path / "x.pb")
    result = invoke("convert", str(SAMPLE), "--vpp", "3", "-o", out, exit_code=4)
    assert result.stderr == f"Error: {e.value}\n"  # and the command line shows no note
    with pytest.raises(vppctl.ConversionError) as in_memory:
        vppctl.convert_program(vppctl.read_program(SAMPLE), options)
    assert in_memory.value.__notes__ == [note]


def test_a_call_through_another_public_call_names_the_api_fields_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """verify_file runs verify_program, both public: the error gets one note, not two."""
    from vppctl.engine import layers

    monkeypatch.setattr(layers, "REGEX_SECONDS", 0.0)  # any regex is over the budget
    with pytest.raises(vppctl.UsageError, match="--seg-method 'Decoder' takes over") as e:
        vppctl.verify_file(SAMPLE, vppctl.VerifyOptions(seg_method="Decoder"))
    assert e.value.__notes__ == ["in the Python API: --seg-method is VerifyOptions.seg_method"]


def test_simulate_without_a_program_needs_pp_and_vpp_and_refuses_a_programs_options() -> None:
    run = vppctl.simulate_run
    with pytest.raises(vppctl.UsageError, match="--pp is required") as e:
        run(None, None, vppctl.SimulateOptions(micro_batches=8, plan=vppctl.PlanOptions(vpp=2)))
    assert e.value.__notes__ == ["in the Python API: --pp is SimulateOptions.plan.pp"]
    plan = vppctl.PlanOptions(vpp=2, pp=4, split="balanced")
    with pytest.raises(vppctl.UsageError, match="--split describe a program's plan"):
        run(None, None, vppctl.SimulateOptions(micro_batches=8, plan=plan))
    plan = vppctl.PlanOptions(vpp=2, pp=4)
    outcome = run(None, None, vppctl.SimulateOptions(micro_batches=8, plan=plan))
    assert [r.schedule for r in outcome.results] == ["1f1b", "interleaved"]
