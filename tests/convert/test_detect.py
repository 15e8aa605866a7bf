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

import paths
import pytest
from commandline import invoke
from programs import layered
from rulekit import (
    convert_bytes,
    small,
)

from vppctl.engine.detect import candidates, detect_layers
from vppctl.engine.index import build_index
from vppctl.engine.layers import few, find_layers
from vppctl.errors import ConversionError
from vppctl.program._proto import program_pb2 as pb
from vppctl.program.load import parse_program

SAMPLE = paths.SAMPLE


def _convert(src: Path, tmp_path: Path, *args: str):  # type: ignore[no-untyped-def]
    out = tmp_path / "out.pb"
    result = invoke("convert", str(src), "--vpp", "2", "-o", str(out), *args, exit_code=None)
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
    result = invoke("convert", str(SAMPLE), "--vpp", "3", "-o", "x.pb", exit_code=4)
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
    result = invoke("simulate", str(no_struct_names), "--vpp", "2", "-m", "8", exit_code=4)
    assert "export_program" in result.stderr


def test_inspect_and_verify_say_why_no_layers_are_found(no_struct_names: Path) -> None:
    summary = json.loads(invoke("inspect", str(no_struct_names), "--json").stdout)
    assert summary["layers"]["count"] == 0
    assert "export_program" in summary["layers"]["note"]
    report = json.loads(invoke("verify", str(no_struct_names), "--json", exit_code=1).stdout)
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


# -- detection -----------------------------------------------------------------


SAMPLES = sorted(paths.SAMPLES.glob("*.pb*"))


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_detection_finds_decoder_layer_on_every_sample_like_the_regex(path: Path) -> None:
    program = parse_program(path.read_bytes(), text=path.suffix == ".pbtxt")
    index = build_index(program)
    detected = detect_layers(index)
    explicit = find_layers(index, "DecoderLayer")
    assert detected.layer_class == "DecoderLayer" and detected.detected
    assert [layer.name for layer in detected.layers] == [layer.name for layer in explicit.layers]
    assert [(x.first, x.last) for x in detected.layers] == [
        (x.first, x.last) for x in explicit.layers
    ]


def test_detected_and_explicit_conversions_are_byte_identical_but_for_the_plan() -> None:
    data = small(8, 4)
    a, ra = convert_bytes(data, vpp=2)
    b, rb = convert_bytes(data, vpp=2, seg_method="DecoderLayer")
    pa, pb_ = pb.ProgramDesc.FromString(a), pb.ProgramDesc.FromString(b)
    pa.ClearField("pipeline_plan")
    pb_.ClearField("pipeline_plan")
    assert pa.SerializeToString() == pb_.SerializeToString()
    assert ra.plan.detected and not rb.plan.detected  # type: ignore[attr-defined]


def test_detection_prints_what_it_found(tmp_path: Path) -> None:
    src = tmp_path / "p.pb"
    src.write_bytes(small(8, 4))
    result = invoke("convert", str(src), "--vpp", "2")
    assert "layers: DecoderLayer x 8 (detected)" in result.stdout


def test_ambiguous_detection_is_refused_listing_candidates() -> None:
    # Two layer classes alternate and cover the same number of ops.
    p = layered([0, 0, 1, 1], layer="Attn")
    for k, op in enumerate(p.msg.blocks[0].ops):
        if "/Attn" in op.struct_name and k % 2 == 0:
            op.struct_name = op.struct_name.replace("Attn", "Mlp")
    index = build_index(p.program())
    found = candidates(index)
    assert len(found) >= 2 and found[0].ops == found[1].ops
    with pytest.raises(ConversionError, match="ambiguous.*--seg-method"):
        detect_layers(index)


def test_no_repeated_layer_is_refused_with_the_fix() -> None:
    p = layered([0], ops_per_layer=1)  # one layer, one Linear: nothing repeats
    with pytest.raises(ConversionError, match="no repeated layer.*--seg-method"):
        detect_layers(build_index(p.program()))
