"""The public Python API: `vppctl.__all__` names what a training script may use."""

from __future__ import annotations

import subprocess
import sys

import pytest

import vppctl


@pytest.mark.parametrize("name", vppctl.__all__)
def test_every_name_in_all_imports(name: str) -> None:
    assert getattr(vppctl, name) is not None


def test_all_lists_one_call_per_command() -> None:
    for call in ("convert_file", "verify_file", "inspect_file", "dump_file", "sample_file"):
        assert call in vppctl.__all__
    assert "simulate_run" in vppctl.__all__


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
