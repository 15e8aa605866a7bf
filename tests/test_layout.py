"""The house's floor plan: modules stay small, every package shows its face and is
entered through it, and every list of names a user picks from is one `Literal` type's
values everywhere.

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
import pytest
from click.testing import CliRunner

from vppctl import choices
from vppctl.cli import cli
from vppctl.cli.program import convert, sample, verify
from vppctl.cli.schedule import plan, simulate
from vppctl.planner import PlanSearchOptions
from vppctl.verify import segments

PACKAGE = Path(__file__).resolve().parents[1] / "vppctl"
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
    runner = CliRunner()
    for name in names:
        r = runner.invoke(cli, ["plan", "missing.pb", "-m", "8", option, name])
        assert r.exit_code == 3, r.output
    r = runner.invoke(cli, ["plan", "missing.pb", "-m", "8", option, "bogus"])
    assert r.exit_code == 2
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
    assert search.schedules == choices.SCHEDULES
