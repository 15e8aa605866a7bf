"""Messages about finding the layers: what a --seg-method regex matched, and a program
that carries no struct names at all.

A regex that matches too much (`Layer` also matches the final `LayerNorm`) or the
wrong component (`Linear` inside every layer) is named with the layers it matched,
first and last few, so the cause is visible in the error. A program saved with
`main_program.desc.serialize_to_string()` has no struct names (Paddle keeps them on
the Python `Operator`): it is refused, exit 4, pointing to
`vppctl.paddle.export_program`, whatever --seg-method says.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from vppctl.cli import cli
from vppctl.engine.layers import few
from vppctl.program._proto import program_pb2 as pb

SAMPLE = Path(__file__).parent.parent / "samples" / "gpt-8l-pp4.pb"


def _convert(src: Path, tmp_path: Path, *args: str):  # type: ignore[no-untyped-def]
    out = tmp_path / "out.pb"
    result = CliRunner().invoke(cli, ["convert", str(src), "--vpp", "2", "-o", str(out), *args])
    assert not out.exists() or result.exit_code == 0
    return result


def test_a_regex_that_also_matches_layer_norm_is_named_in_the_count_error(tmp_path: Path) -> None:
    result = _convert(SAMPLE, tmp_path, "--seg-method", "Layer")
    assert result.exit_code == 4
    assert result.stderr.startswith(
        "Error: --seg-method 'Layer' matches layers Layer, Layer_1, Layer_2, …, Layer_7, "
        "LayerNorm (9): 9 layers do not divide"
    )


def test_a_regex_matching_a_sublayer_is_named_in_the_contiguity_error(tmp_path: Path) -> None:
    result = _convert(SAMPLE, tmp_path, "--seg-method", "Linear")
    assert result.exit_code == 4
    assert "--seg-method 'Linear' matches layers Linear, Linear_1: layer Linear is not" in (
        result.stderr
    )


def test_detected_layers_keep_their_own_message(tmp_path: Path) -> None:
    """Detection names its candidate itself; no regex the user wrote to explain."""
    result = CliRunner().invoke(cli, ["convert", str(SAMPLE), "--vpp", "3", "-o", "x.pb"])
    assert result.exit_code == 4
    assert "8 layers do not divide" in result.stderr
    assert "matches" not in result.stderr


@pytest.mark.parametrize(
    ("names", "shown"),
    [
        (["A"], "A"),
        (list("ABCDEF"), "A, B, C, D, E, F"),
        (list("ABCDEFG"), "A, B, C, …, F, G (7)"),
    ],
)
def test_few(names: list[str], shown: str) -> None:
    assert few(names) == shown


# -- a program without struct names ---------------------------------------------------


@pytest.fixture
def no_struct_names(tmp_path: Path) -> Path:
    """The sample as `main_program.desc.serialize_to_string()` would give it: Paddle's
    fields only, so no op has a struct name."""
    prog = pb.ProgramDesc.FromString(SAMPLE.read_bytes())
    for block in prog.blocks:
        for op in block.ops:
            op.ClearField("struct_name")
    path = tmp_path / "desc.pb"
    path.write_bytes(prog.SerializeToString())
    return path


@pytest.mark.parametrize("extra", [(), ("--seg-method", "DecoderLayer")], ids=["detect", "regex"])
def test_convert_refuses_a_program_without_struct_names(
    no_struct_names: Path, tmp_path: Path, extra: tuple[str, ...]
) -> None:
    result = _convert(no_struct_names, tmp_path, *extra)
    assert result.exit_code == 4
    assert result.stderr.count("\n") == 1
    assert "no op carries a struct name" in result.stderr
    assert "serialize_to_string()" in result.stderr
    assert "vppctl.paddle.export_program(main_program, dist_context)" in result.stderr
    assert "--seg-method" not in result.stderr  # a regex cannot help


def test_simulate_refuses_a_program_without_struct_names(no_struct_names: Path) -> None:
    result = CliRunner().invoke(cli, ["simulate", str(no_struct_names), "--vpp", "2", "-m", "8"])
    assert result.exit_code == 4
    assert "export_program" in result.stderr


def test_inspect_and_verify_say_why_no_layers_are_found(no_struct_names: Path) -> None:
    runner = CliRunner()
    summary = json.loads(runner.invoke(cli, ["inspect", str(no_struct_names), "--json"]).stdout)
    assert summary["layers"]["count"] == 0
    assert "export_program" in summary["layers"]["note"]
    report = json.loads(runner.invoke(cli, ["verify", str(no_struct_names), "--json"]).stdout)
    assert [v["rule"] for v in report["violations"]] == ["V005"]
    assert "export_program" in report["violations"][0]["message"]


def test_struct_names_of_slash_only_are_struct_names(tmp_path: Path) -> None:
    """An export whose ops all sit outside any layer (`/`) has struct names: the usual
    "no repeated layer" message applies, not the export hint."""
    prog = pb.ProgramDesc.FromString(SAMPLE.read_bytes())
    for block in prog.blocks:
        for op in block.ops:
            op.struct_name = "/"
    path = tmp_path / "slash.pb"
    path.write_bytes(prog.SerializeToString())
    result = _convert(path, tmp_path)
    assert result.exit_code == 4
    assert "found no repeated layer" in result.stderr
