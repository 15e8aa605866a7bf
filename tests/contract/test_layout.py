"""The house's floor plan: modules stay small, every package shows its face and is
entered through it, every list of names a user picks from is one `Literal` type's
values everywhere, and tests/ mirrors vppctl/ (each module's tests found by their path).

The layering itself (which package may import which, no import cycle) is import-linter's
contracts in pyproject.toml, and protobuf only under program/ is ruff's banned-api there,
both run by .ci/run.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest's own dependency
    import tomli as tomllib

import click
import paths
import pytest
from commandline import invoke

from vppctl import choices
from vppctl.cli.program import convert, sample, verify
from vppctl.cli.schedule import plan, simulate
from vppctl.planner import PlanSearchOptions
from vppctl.verify import segments

PACKAGE = paths.PACKAGE
MAX_LINES = 800
FACES = ["vppctl", *(f"vppctl.{p.parent.name}" for p in sorted(PACKAGE.glob("*/__init__.py")))]


def _modules() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if not p.name.endswith("_pb2.py")]


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_over_800_lines(path: Path) -> None:
    n = len(path.read_text().splitlines())
    assert n <= MAX_LINES, f"{path.name} has {n} lines: split it by job"


@pytest.mark.parametrize("name", FACES)
def test_every_package_face_lists_names_it_has(name: str) -> None:
    package = importlib.import_module(name)
    public = getattr(package, "__all__", None)
    assert public, f"{name} has no __all__"
    assert list(public) == sorted(set(public), key=list(public).index), "a name twice"
    for attr in public:
        assert getattr(package, attr) is not None, f"{name}.{attr}"


# The modules another package may import by name, past the package's face, and why.
BEHIND_FACES = {
    # the engine's decisions stay out of its face, so that the verifier (which imports the
    # face) cannot judge a program by them; the pipeline in one call is their one caller
    "vppctl.engine.apply": {"vppctl/convert.py"},
}


def _banned() -> tuple[str, ...]:
    """The modules ruff's banned-api bans (the generated protobuf modules): who imports them
    is that table's to say, with its per-file-ignores, not the faces'."""
    with (PACKAGE.parent / "pyproject.toml").open("rb") as f:
        config = tomllib.load(f)
    return tuple(config["tool"]["ruff"]["lint"]["flake8-tidy-imports"]["banned-api"])


def _imported(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return names


def test_other_packages_import_a_package_s_names_from_its_face() -> None:
    """`from vppctl.schedule import PADDLE_MODES`, never `from vppctl.schedule.runtimes
    import ...` outside schedule/: a package's modules can move without its users."""
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    banned = _banned()
    past: list[str] = []
    for path in _modules():
        where = path.relative_to(PACKAGE.parent)
        own = where.parts[1] if len(where.parts) > 2 else None
        for module in _imported(ast.parse(path.read_text())):
            parts = module.split(".")
            if parts[0] != "vppctl" or len(parts) < 3 or parts[1] not in packages:
                continue
            if any(module == b or module.startswith(f"{b}.") for b in banned):
                continue
            if parts[1] != own and str(where) not in BEHIND_FACES.get(module, ()):
                past.append(f"{where} imports {module}")
    assert not past, "import these from the package's face:\n" + "\n".join(past)


def _choices(command: click.Command, option: str) -> tuple[str, ...]:
    param = next(p for p in command.params if p.name == option)
    assert isinstance(param.type, click.Choice), f"{command.name} --{option}"
    return tuple(param.type.choices)


def test_the_cli_offers_each_choice_type_s_names() -> None:
    for command in (convert, simulate):
        assert _choices(command, "placement") == choices.PLACEMENTS
        assert _choices(command, "split") == choices.SPLITS
        assert _choices(command, "cost") == choices.COST_KINDS
    assert _choices(verify, "placement") == choices.PLACEMENTS
    assert _choices(simulate, "schedule") == choices.SCHEDULES
    assert _choices(plan, "cost") == choices.COST_KINDS
    assert _choices(sample, "layout") == choices.LAYOUTS
    assert _choices(sample, "optimizer") == choices.OPTIMIZERS


@pytest.mark.parametrize(
    ("option", "names"),
    [
        ("--placement", choices.PLACEMENTS),
        ("--split", choices.SEARCHED_SPLITS),
        ("--schedule", choices.SCHEDULES),
    ],
)
def test_plan_s_lists_take_exactly_the_searched_names(option: str, names: tuple[str, ...]) -> None:
    """plan's comma-separated options accept each name (then fail on the missing program,
    exit 3) and refuse any other, listing the names."""
    for name in names:
        r = invoke("plan", "missing.pb", "-m", "8", option, name, exit_code=3)
    r = invoke("plan", "missing.pb", "-m", "8", option, "bogus", exit_code=2)
    assert f"'bogus' is not one of {', '.join(names)}" in r.stderr


def test_the_verifier_knows_the_names_the_plan_can_record() -> None:
    assert segments._KNOWN == {
        "placement": choices.PLACEMENTS,
        "mode": choices.MODES,
        "split": choices.SPLITS,
        "cost": choices.COST_KINDS,
    }


def test_the_planner_searches_every_placement_and_every_split_but_explicit() -> None:
    search = PlanSearchOptions(micro_batches=(8,))
    assert search.placements == choices.PLACEMENTS
    assert search.splits == choices.SEARCHED_SPLITS == ("uniform", "keep", "balanced")
    assert search.schedules == ()  # every one of the runtime's, decided with the program
    assert search.searched("any") == choices.SCHEDULES


# -- the tests' house ------------------------------------------------------------------------

TESTS = paths.TESTS
# Test files live in these family folders, named for what they test; everything else in
# support/ (helpers, on pytest's pythonpath), data/ (fixtures) or benchmarks/.
FAMILIES = ("program", "convert", "verify", "schedule", "planner", "sample", "cli", "contract")
FAMILIES += ("paddle",)
HOMES = ("support", "data", "benchmarks")
# The family folder of each package's tests (the engine's are convert/'s: they test the
# conversion's rules); a module outside the packages has its tests in `TOP_LEVEL`'s folder.
PACKAGE_TESTS = {
    "program": "program",
    "engine": "convert",
    "verify": "verify",
    "schedule": "schedule",
    "planner": "planner",
    "sample": "sample",
    "cli": "cli",
    "report": "cli",
    "outcomes": "contract",
    "plan": "convert",
    "paddle": "paddle",
}
TOP_LEVEL = {"convert": "convert", "mesh": "convert"}

# A module whose tests are not in a file of its own name (tests/<family>/test_<module>.py)
# is covered by the file named here, which names the module in its text (its path or its
# dotted name), so that `grep -rl vppctl/x/y.py tests` finds its tests. Package faces
# (`__init__.py`) are the face tests' (above).
COVERED_BY = {
    "vppctl/__main__.py": "cli/test_io.py",
    "vppctl/_lazy.py": "contract/test_api.py",
    "vppctl/_version.py": "cli/test_conventions.py",
    "vppctl/choices.py": "contract/test_layout.py",
    "vppctl/cli/base.py": "cli/test_errors.py",
    "vppctl/cli/options.py": "cli/test_conventions.py",
    "vppctl/cli/program.py": "cli/test_convert.py",
    "vppctl/cli/schedule.py": "cli/test_simulate.py",
    "vppctl/commands.py": "contract/test_api.py",
    "vppctl/engine/index.py": "program/test_scan.py",
    "vppctl/errors.py": "cli/test_errors.py",
    "vppctl/escape.py": "cli/test_control_characters.py",
    "vppctl/gcpause.py": "contract/test_scaling.py",
    "vppctl/outcomes/memory.py": "planner/test_memory.py",
    "vppctl/outcomes/program.py": "contract/test_api_json.py",
    "vppctl/outcomes/schedule.py": "contract/test_api_json.py",
    "vppctl/outcomes/verify.py": "cli/test_verify_output.py",
    "vppctl/paddle/errors.py": "paddle/test_bridge.py",
    "vppctl/paddle/legacy.py": "paddle/test_bridge.py",
    "vppctl/plan/partition.py": "convert/test_plan.py",
    "vppctl/plan/placement.py": "convert/test_plan.py",
    "vppctl/planner/simulate.py": "cli/test_simulate.py",
    "vppctl/program/_proto/__init__.py": "program/test_format.py",
    "vppctl/program/limits.py": "cli/test_errors.py",
    "vppctl/program/load.py": "program/test_files.py",
    "vppctl/program/destinations.py": "program/test_files.py",
    "vppctl/program/pir/cursor.py": "program/test_pir.py",
    "vppctl/program/pir/encode.py": "program/test_pir.py",
    "vppctl/program/pir/grads.py": "program/test_pir.py",
    "vppctl/program/pir/parse.py": "program/test_pir.py",
    "vppctl/program/pir/tables.py": "program/test_pir.py",
    "vppctl/program/reads.py": "program/test_scan.py",
    "vppctl/program/record.py": "convert/test_convert.py",
    "vppctl/program/roles.py": "convert/test_convert.py",
    "vppctl/program/save.py": "program/test_files.py",
    "vppctl/program/wire.py": "program/test_encodings.py",
    "vppctl/progress.py": "cli/test_progress.py",
    "vppctl/report/common.py": "cli/test_tables.py",
    "vppctl/report/program.py": "cli/test_tables.py",
    "vppctl/report/schedule.py": "cli/test_simulate.py",
    "vppctl/report/verify.py": "cli/test_verify_output.py",
    "vppctl/sample/encode.py": "sample/test_stamp.py",
    "vppctl/sample/model.py": "sample/test_sample.py",
    "vppctl/sample/sections.py": "sample/test_stamp.py",
    "vppctl/sample/size.py": "sample/test_sample.py",
    "vppctl/schedule/actions.py": "schedule/test_orders.py",
    "vppctl/schedule/arguments.py": "schedule/test_simulation.py",
    "vppctl/schedule/interleaving.py": "schedule/test_orders.py",
    "vppctl/schedule/refusal.py": "schedule/test_orders.py",
    "vppctl/schedule/results.py": "schedule/test_simulation.py",
    "vppctl/schedule/torchcsv.py": "schedule/test_orders.py",
    "vppctl/schedule/vshape.py": "schedule/test_orders.py",
    "vppctl/schedule/zbvpp.py": "schedule/test_goldens.py",
    "vppctl/shapes.py": "contract/test_json.py",
    "vppctl/summary.py": "cli/test_inspect_dump.py",
    "vppctl/units.py": "cli/test_errors.py",
    "vppctl/validate.py": "contract/test_api.py",
    "vppctl/verify/checker.py": "verify/test_checks.py",
    "vppctl/verify/expectation.py": "verify/test_verify.py",
    "vppctl/verify/outcome.py": "cli/test_verify_output.py",
    "vppctl/verify/refusals.py": "convert/test_precheck.py",
    "vppctl/verify/rules.py": "verify/test_checks.py",
    "vppctl/verify/segments.py": "verify/test_checks.py",
}


def _tests_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def test_every_test_file_sits_in_a_family_folder() -> None:
    """tests/<family>/test_*.py; helpers in support/, fixtures in data/, benchmarks apart;
    the one conftest.py of the suite, and one of a family's own."""
    misplaced = []
    for path in _tests_files():
        rel = path.relative_to(TESTS)
        top = rel.parts[0]
        if rel.name.startswith("test_") and rel.suffix == ".py":
            ok = len(rel.parts) == 2 and top in FAMILIES
        elif rel.name == "conftest.py":
            ok = len(rel.parts) == 1 or (len(rel.parts) == 2 and top in FAMILIES)
        else:  # helpers, fixtures, benchmarks (and the fixtures' READMEs): in their homes
            ok = len(rel.parts) > 1 and top in HOMES
        if not ok:
            misplaced.append(str(rel))
    assert not misplaced, "move these into a family folder, support/, data/ or benchmarks/:\n" + (
        "\n".join(misplaced)
    )


def test_tests_import_their_helpers_by_name() -> None:
    """Helpers are found on pytest's pythonpath (pyproject: tests/support), never through a
    path a test file adds; and a test file imports no other test file (a shared helper
    belongs in support/)."""
    offenders = []
    for path in _tests_files():
        rel = path.relative_to(TESTS)
        if path.suffix != ".py" or rel.parts[0] in HOMES:
            continue
        tree = ast.parse(path.read_text())
        if any(_is_path_insert(node) for node in ast.walk(tree)):
            offenders.append(f"{rel}: sys.path.insert")
        offenders += [f"{rel}: imports {m}" for m in _imported(tree) if m.startswith("test_")]
    assert not offenders, "\n".join(offenders)


def _is_path_insert(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and ast.unparse(node.func) == "sys.path.insert"


def _test_family(module: Path) -> str:
    rel = module.relative_to(PACKAGE)
    if len(rel.parts) == 1:
        return TOP_LEVEL.get(module.stem, "contract")
    return PACKAGE_TESTS[rel.parts[0]]


def test_every_module_has_a_test_file_or_a_named_one() -> None:
    """`vppctl/engine/flow.py` -> tests/convert/test_flow.py, or the file COVERED_BY names,
    which must name the module; an entry for a module with a file of its own is stale."""
    problems = []
    modules = {str(p.relative_to(PACKAGE.parent)): p for p in _modules()}
    for rel, module in sorted(modules.items()):
        if module.name == "__init__.py" and rel not in COVERED_BY:
            continue
        own = TESTS / _test_family(module) / f"test_{module.stem}.py"
        cover = COVERED_BY.get(rel)
        if own.exists():
            if cover:
                problems.append(f"{rel} has {own.relative_to(TESTS)}: drop its COVERED_BY entry")
        elif cover is None:
            problems.append(f"{rel}: no {own.relative_to(TESTS)} and no COVERED_BY entry")
        else:
            text = (TESTS / cover).read_text() if (TESTS / cover).exists() else ""
            dotted = rel.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
            if rel not in text and dotted not in text:
                problems.append(f"{rel}: {cover} does not name it ({rel} or {dotted})")
    problems += [
        f"COVERED_BY names {rel}, which is no module" for rel in COVERED_BY.keys() - modules.keys()
    ]
    assert not problems, "\n".join(problems)
