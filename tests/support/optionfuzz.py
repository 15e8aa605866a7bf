"""The option fuzz: hostile values in every option, path and name the CLI and the API take.

`cli_cases(work)` makes, for every command and every option of it that takes a value
(found from the click commands, so a new option is fuzzed without an entry here), one
command line per hostile value of the classes below: the numeric classes go into every
option but paths, the name class into every path and free-text option (a program, an
output, `--svg`, `--seg-method`, `--select`). `api_cases()` does the same for the
Python API: every field of every options class, and every path argument of every call.
tests/contract/test_optionfuzz.py runs them: no exit 70 and no traceback anywhere, and
prints the count tried per class.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import click

import vppctl
from vppctl.cli import cli

# Hostile values by class, as the command line gives them (strings).
NUMBERS: dict[str, tuple[str, ...]] = {
    "float limits": (
        "1e307",
        "1e308",
        "1.7976931348623157e308",
        "-1e308",
        "5e-324",
        "2.2250738585072014e-308",
        "1e-320",
    ),
    "nan and infinities": ("nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e400"),
    "negative zero": ("-0", "-0.0", "-0e0"),
    "huge ints": (
        "9" * 400,
        "-" + "9" * 400,
        "9" * 5000,  # past Python's 4,300 digits of int()
        str(2**63),
        str(2**64),
        str(-(2**63) - 1),
    ),
    "in lists and sizes": (
        "1e307,1,1",
        "1,nan,1",
        "inf,1,1",
        "1e-999999999,1,1",
        "1,1e999999999,1",
        "1e308TiB",
        "nanGiB",
        "-0GiB",
        "1e-999999999GiB",
    ),
}
# File and free-text names: NUL, lone surrogates (as Python decodes a non-UTF-8 name,
# and not), the non-characters XML forbids, controls.
NAMES: tuple[str, ...] = (
    "a\x00b",
    "\x00",
    "\ud800",
    "x\udcff.pb",
    "\ufffe",
    "y\uffff.svg",
    "\x1b[2J\r\n",
    "",
)

# A command line of each command that works on the fuzz's programs (PROG: a plain
# program; VPROG: a converted one; OUT/: the scratch directory).
BASES: dict[str, tuple[str, ...]] = {
    "convert": ("convert", "PROG", "--vpp", "2", "-o", "OUT/c.pb"),
    "verify": ("verify", "VPROG"),
    "inspect": ("inspect", "PROG"),
    "dump": ("dump", "PROG", "-o", "OUT/d.pbtxt"),
    "sample": ("sample", "--layers", "4", "--pp", "2", "--hidden", "64", "-o", "OUT/s.pb"),
    "simulate": ("simulate", "VPROG", "-m", "4"),
    "simulate (no program)": ("simulate", "--pp", "2", "--vpp", "2", "-m", "4"),
    "plan": ("plan", "PROG", "-m", "4"),
}


@dataclass(frozen=True)
class Case:
    klass: str  # the hostile class
    where: str  # `simulate --p2p-cost`
    args: tuple[str, ...]


def _option_values(cmd: click.Command) -> Iterator[tuple[str, click.Parameter]]:
    for p in cmd.params:
        if isinstance(p, click.Option) and (p.is_flag or p.count):
            continue
        yield (p.opts[-1] if isinstance(p, click.Option) else p.name or "?"), p


def _is_path(p: click.Parameter) -> bool:
    return isinstance(p.type, click.Path)


def _is_text(p: click.Parameter) -> bool:
    return isinstance(p.type, click.types.StringParamType) and (p.name or "") in (
        "seg_method",
        "select",
        "ignore",
    )


def _replace(base: tuple[str, ...], p: click.Parameter, flag: str, value: str) -> tuple[str, ...]:
    """`base` with parameter `p` given `value`: an argument replaced, an option's earlier
    value dropped and the option added."""
    args = list(base)
    if isinstance(p, click.Argument):
        for i, a in enumerate(args[1:], 1):
            if a in ("PROG", "VPROG"):
                args[i] = value
                return tuple(args)
        return tuple(args)  # a command without its argument here (simulate without one)
    names = set(p.opts) | set(getattr(p, "secondary_opts", ()))
    out: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in names:
            skip = True
            continue
        out.append(a)
    return (*out, flag, value)


def cli_cases(work: Path) -> list[Case]:
    """Every command's every valued option and argument, with every hostile value of the
    classes that fit it."""
    cases: list[Case] = []
    for base in BASES.values():
        cmd = cli.commands[base[0]]
        for flag, p in _option_values(cmd):
            where = f"{base[0]} {flag}"
            if isinstance(p, click.Argument) and not {"PROG", "VPROG"} & set(base):
                continue  # simulate without a program: its argument is fuzzed with one
            if _is_path(p) or _is_text(p):
                for name in NAMES:
                    value = str(work / "hostile" / name) if _is_path(p) else name
                    cases.append(Case("names", where, _replace(base, p, flag, value)))
                if _is_path(p):
                    continue
            for klass, values in NUMBERS.items():
                for value in values:
                    cases.append(Case(klass, where, _replace(base, p, flag, value)))
    return cases


def resolve(args: tuple[str, ...], prog: Path, vprog: Path, out: Path) -> list[str]:
    table = {"PROG": str(prog), "VPROG": str(vprog)}
    return [table.get(a, a.replace("OUT/", f"{out}{os.sep}")) for a in args]


# -- the Python API ---------------------------------------------------------------------

# Python values by class for the API's fields.
API_NUMBERS: dict[str, tuple[object, ...]] = {
    "float limits": (1e307, 1e308, -1e308, 5e-324, 1.7976931348623157e308),
    "nan and infinities": (float("nan"), float("inf"), float("-inf")),
    "negative zero": (-0.0,),
    "huge ints": (10**400, -(10**400), 2**63, 2**64),
}
OPTIONS_CLASSES = (
    vppctl.PlanOptions,
    vppctl.ConvertOptions,
    vppctl.VerifyOptions,
    vppctl.InspectOptions,
    vppctl.DumpOptions,
    vppctl.SampleOptions,
    vppctl.MemoryOptions,
    vppctl.SimulateOptions,
    vppctl.PlanSearchOptions,
    vppctl.Pictures,
)


def api_field_cases() -> Iterator[tuple[str, str, Callable[[], object]]]:
    """(class, `Options.field`, make): every field of every options class set to every
    hostile value (numbers, names, a tuple of a number: a sequence field gets it too)."""
    for cls in OPTIONS_CLASSES:
        for f in dataclasses.fields(cls):
            where = f"{cls.__name__}.{f.name}"
            for klass, values in API_NUMBERS.items():
                for value in values:
                    for given in (value, (value,), (1, value, 1)):
                        yield klass, where, _maker(cls, f.name, given)
            for name in NAMES:
                yield "names", where, _maker(cls, f.name, name)


# What the classes require, so that the hostile field is the one checked.
_REQUIRED: dict[type, dict[str, object]] = {
    vppctl.ConvertOptions: {"plan": vppctl.PlanOptions(vpp=2)},
    vppctl.SampleOptions: {"layers": 4, "pp": 2},
    vppctl.SimulateOptions: {"micro_batches": 4},
    vppctl.PlanSearchOptions: {"micro_batches": (4,)},
}


def _maker(cls: type, field: str, value: object) -> Callable[[], object]:
    def make() -> object:
        return cls(**{**_REQUIRED.get(cls, {}), field: value})

    return make


def api_path_cases(
    prog: Path, vprog: Path, out: Path
) -> Iterator[tuple[str, str, Callable[[], object]]]:
    """(class, `call(argument)`, call): every path argument of every call given every
    hostile name, and bytes and a Program where a path goes."""
    convert = vppctl.ConvertOptions(plan=vppctl.PlanOptions(vpp=2))
    simulate = vppctl.SimulateOptions(micro_batches=4)
    search = vppctl.PlanSearchOptions(micro_batches=(4,))
    sample = vppctl.SampleOptions(layers=4, pp=2, hidden=64)
    program = vppctl.read_program(prog)
    calls: dict[str, Callable[[object], object]] = {
        "convert_file(src)": lambda p: vppctl.convert_file(p, out / "c.pb", convert),  # type: ignore[arg-type]
        "convert_file(out)": lambda p: vppctl.convert_file(prog, p, convert),  # type: ignore[arg-type]
        "verify_file(path)": lambda p: vppctl.verify_file(p),  # type: ignore[arg-type]
        "inspect_file(path)": lambda p: vppctl.inspect_file(p),  # type: ignore[arg-type]
        "dump_file(src)": lambda p: vppctl.dump_file(p, out / "d.pbtxt"),  # type: ignore[arg-type]
        "dump_file(out)": lambda p: vppctl.dump_file(prog, p),  # type: ignore[arg-type]
        "sample_file(out)": lambda p: vppctl.sample_file(p, sample),  # type: ignore[arg-type]
        "simulate_run(prog)": lambda p: vppctl.simulate_run(p, None, simulate),  # type: ignore[arg-type]
        "Pictures(svg)": lambda p: vppctl.simulate_run(vprog, vppctl.Pictures(svg=p), simulate),  # type: ignore[arg-type]
        "Pictures(trace)": lambda p: vppctl.Pictures(trace=p),  # type: ignore[arg-type]
        "plan_run(prog)": lambda p: vppctl.plan_run(p, search),  # type: ignore[arg-type]
        "read_program(path)": lambda p: vppctl.read_program(p),  # type: ignore[arg-type]
        "write_program(out)": lambda p: vppctl.write_program(program, p),  # type: ignore[arg-type]
    }
    hostile: list[tuple[str, object]] = [("names", str(out / "hostile" / n)) for n in NAMES]
    hostile += [("names", n) for n in NAMES]
    hostile += [
        ("not a path", os.fsencode(str(prog))),
        ("not a path", program),
        ("not a path", 3),
    ]
    for where, call in calls.items():
        for klass, value in hostile:
            yield klass, where, (lambda c=call, v=value: c(v))  # type: ignore[misc]
