"""Plan files read back (vppctl/program/planfile.py): from a file or stdin, the file named
when it cannot be read or is too big; what they hold is tests/convert/test_pirplan.py's."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from vppctl.errors import ProgramFileError
from vppctl.plan import PirPlan
from vppctl.program import planfile, read_pir_plan_file

PLAN = PirPlan(2, 2, "DecoderLayer", (("A",), ("B", "C"), ("D",), ()))


def test_a_plan_file_is_read_from_a_path_or_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "plan.json"
    path.write_text(PLAN.dumps())
    assert read_pir_plan_file(path) == read_pir_plan_file(str(path)) == PLAN

    class Stdin:
        buffer = io.BytesIO(PLAN.dumps().encode())

        def fileno(self) -> int:
            raise io.UnsupportedOperation

    monkeypatch.setattr("sys.stdin", Stdin())
    assert read_pir_plan_file("-") == PLAN


def test_a_missing_or_too_big_file_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ProgramFileError, match="cannot read .*missing.json"):
        read_pir_plan_file(tmp_path / "missing.json")
    path = tmp_path / "plan.json"
    path.write_text(PLAN.dumps())
    monkeypatch.setattr(planfile, "MAX_PLAN_BYTES", 10)
    with pytest.raises(ProgramFileError, match="a plan file holds at most 10"):
        read_pir_plan_file(path)
