"""Typed for users (issue 24 item 5): the wheel ships `py.typed`, and a training script
that uses every public call passes `mypy --strict` against the package as a wheel
installs it, while calls of the wrong shape fail it.

The wheel is built from a copy of the sources (setuptools' own backend, no network, no
build directory left in the checkout) and unpacked into a bare virtual environment;
mypy then finds vppctl the way it finds any installed package (PEP 561: only because
of `py.typed`), and click, rich and protobuf's stubs through this environment's
site-packages.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import paths
import pytest

import vppctl

ROOT = paths.ROOT
TYPED = paths.TYPED


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "vppctl", src / "vppctl", ignore=ignore)
    build = f"from setuptools import build_meta; print(build_meta.build_wheel({str(tmp)!r}))"
    run = subprocess.run(
        [sys.executable, "-c", build], cwd=src, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return tmp / run.stdout.splitlines()[-1]


def test_the_wheel_ships_py_typed_the_stubs_and_the_schemas(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "vppctl/py.typed" in names
    assert {"vppctl/program/_proto/program_pb2.pyi", "vppctl/program/_proto/view_pb2.pyi"} <= names
    assert "vppctl/report/schemas/verify.json" in names
    assert "vppctl/outcomes/schedule.py" in names


def _installed(wheel: Path, home: Path) -> Path:
    """A bare environment with the wheel unpacked in its site-packages; this one's
    site-packages (vppctl's dependencies and their stubs) reached through a .pth file."""
    venv = home / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    zipfile.ZipFile(wheel).extractall(purelib)
    (Path(purelib) / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


@pytest.mark.dev
def test_a_script_using_every_public_call_passes_mypy_strict_and_misuse_fails(
    wheel: Path, tmp_path: Path
) -> None:
    script = (TYPED / "user_script.py").read_text()
    calls = [n for n in vppctl.__all__ if callable(getattr(vppctl, n)) and n[0].islower()]
    assert [n for n in calls if f"vppctl.{n}(" not in script] == []
    python = _installed(wheel, tmp_path)
    scripts = tmp_path / "scripts"
    shutil.copytree(TYPED, scripts, ignore=shutil.ignore_patterns("__pycache__"))
    run = subprocess.run(
        [
            sys.executable, "-m", "mypy", "--strict", "--no-incremental",
            "--python-executable", str(python), "user_script.py", "misuse.py",
        ],
        cwd=scripts, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    errors = [line for line in run.stdout.splitlines() if ": error:" in line]
    assert [e for e in errors if e.startswith("user_script.py")] == [], run.stdout
    flagged = {int(re.match(r"misuse\.py:(\d+):", e)[1]) for e in errors}  # type: ignore[index]
    misuse = (TYPED / "misuse.py").read_text().splitlines()
    marked = {i for i, line in enumerate(misuse, start=1) if "  # error: " in line}
    assert flagged == marked, run.stdout
    assert all(e.startswith(("user_script.py:", "misuse.py:")) for e in errors), run.stdout


def test_the_user_script_runs(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(TYPED / "user_script.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    schemas, shape = run.stdout.splitlines()[:2]
    assert schemas == "[1, 1, 1, 1, 1, 1, 1]"
    assert shape.startswith("4 True 0 True")
