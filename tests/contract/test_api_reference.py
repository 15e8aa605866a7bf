"""The API reference (issue 24 item 8): docs/api.md is generated from the docstrings by
docs/make_api.py, and this test, run in CI, fails when the checked-in file is not what
the script writes now (a docstring, signature, field or flag changed without
`python docs/make_api.py`)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import paths
import pytest

import vppctl

ROOT = paths.ROOT


def make_api() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_api", ROOT / "docs" / "make_api.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docs_api_md_is_what_make_api_writes() -> None:
    text = make_api().render()
    assert (ROOT / "docs" / "api.md").read_text() == text, (
        "docs/api.md is stale: run python docs/make_api.py"
    )


def test_the_reference_documents_every_public_name_from_its_docstring(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = make_api()
    text = module.render()
    for name in vppctl.__all__:
        if name != "__version__":
            assert f"\n### {name}\n" in text, name
    assert (
        "| `placement` | `Placement \\| None` | `None` | `--placement` | one of loop, v |" in text
    )
    monkeypatch.setattr(vppctl.dump_file, "__doc__", "A docstring changed.")
    assert "A docstring changed." in module.render()


def test_the_check_fails_on_a_stale_file_and_names_the_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    module = make_api()
    stale = tmp_path / "api.md"
    stale.write_text((ROOT / "docs" / "api.md").read_text().replace("dump_file", "dump", 1))
    monkeypatch.setattr(module, "OUT", stale)
    assert module.main(["--check"]) == 1
    monkeypatch.setattr(module, "OUT", ROOT / "docs" / "api.md")
    assert module.main(["--check"]) == 0


def test_the_script_runs_from_the_repository_root() -> None:
    run = subprocess.run(
        [sys.executable, "docs/make_api.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
