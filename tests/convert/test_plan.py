"""Beyond Paddle: layer detection, V placement, keep / balanced / explicit splits, cost measures."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from programs import layered

from vppctl.cli import cli
from vppctl.convert import ConvertOptions, convert_program
from vppctl.engine.detect import candidates, detect_layers
from vppctl.engine.index import build_index
from vppctl.engine.layers import find_layers
from vppctl.errors import ConversionError
from vppctl.plan import PlanOptions, balanced_sizes, keep_sizes, place, segment_costs
from vppctl.program._proto import program_pb2 as pb
from vppctl.program.load import parse_program
from vppctl.sample import SampleOptions, build_sample
from vppctl.verify.expectation import verify_program

SAMPLES = sorted((Path(__file__).resolve().parent.parent / "samples").glob("*.pb*"))


def small(layers: int, pp: int, **kw: object) -> bytes:
    return build_sample(SampleOptions(layers=layers, pp=pp, hidden=64, vocab=1000, **kw))  # type: ignore[arg-type]


def convert(data: bytes, **plan: object) -> tuple[bytes, object]:
    program = parse_program(data)
    seg = plan.pop("seg_method", None)
    result = convert_program(
        program,
        ConvertOptions(plan=PlanOptions(**plan), seg_method=seg),  # type: ignore[arg-type]
    )
    return program.to_bytes(), result


# -- detection -----------------------------------------------------------------


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
    a, ra = convert(data, vpp=2)
    b, rb = convert(data, vpp=2, seg_method="DecoderLayer")
    pa, pb_ = pb.ProgramDesc.FromString(a), pb.ProgramDesc.FromString(b)
    pa.ClearField("pipeline_plan")
    pb_.ClearField("pipeline_plan")
    assert pa.SerializeToString() == pb_.SerializeToString()
    assert ra.plan.detected and not rb.plan.detected  # type: ignore[attr-defined]


def test_detection_prints_what_it_found(runner, tmp_path: Path) -> None:
    src = tmp_path / "p.pb"
    src.write_bytes(small(8, 4))
    result = runner.invoke(cli, ["convert", str(src), "--vpp", "2"])
    assert result.exit_code == 0, result.output
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


# -- placement -----------------------------------------------------------------


def test_v_placement_runs_down_then_back_up() -> None:
    assert [place(k, 4, "v") for k in range(8)] == [
        (0, 0), (1, 0), (2, 0), (3, 0), (3, 1), (2, 1), (1, 1), (0, 1)
    ]  # fmt: skip


def test_v_placement_on_the_sample_moves_head_and_loss_to_stage_0() -> None:
    out, result = convert(small(8, 4), vpp=2, placement="v")
    stages = [s.stage for s in result.plan.segments]  # type: ignore[attr-defined]
    assert stages == [0, 1, 2, 3, 3, 2, 1, 0]
    prog = pb.ProgramDesc.FromString(out)
    stage0 = list(prog.process_meshes[0].process_ids)
    for op in prog.blocks[0].ops:
        if op.type in ("softmax_with_cross_entropy", "mean", "fill_constant") and any(
            a.name == "op_role" and a.i in (256, 257) for a in op.attrs
        ):
            assert list(op.dist_attr.process_mesh.process_ids) == stage0, op.type
            assert op.dist_attr.chunk_id == 1
    assert verify_program(parse_program(out)).violations == ()


def test_v_placement_with_odd_vpp_keeps_the_head_on_the_last_stage() -> None:
    out, result = convert(small(12, 4), vpp=3, placement="v")
    assert result.plan.segments[-1].stage == 3  # type: ignore[attr-defined]
    assert verify_program(parse_program(out)).violations == ()


# -- splits --------------------------------------------------------------------


def brute_force_minmax(costs: list[int], parts: int, pre: int, post: int) -> int:
    best = None
    n = len(costs)
    for cuts in itertools.combinations(range(1, n), parts - 1):
        sizes = [b - a for a, b in zip((0, *cuts), (*cuts, n))]
        worst = max(segment_costs(sizes, costs, pre, post))
        best = worst if best is None else min(best, worst)
    assert best is not None
    return best


@settings(max_examples=200, deadline=None)
@given(
    costs=st.lists(st.integers(1, 50), min_size=1, max_size=9),
    parts=st.integers(1, 9),
    pre=st.integers(0, 60),
    post=st.integers(0, 60),
)
def test_balanced_split_is_the_min_max_optimum(costs, parts, pre, post) -> None:
    if parts > len(costs):
        with pytest.raises(ConversionError):
            balanced_sizes(costs, parts, pre, post)
        return
    sizes = balanced_sizes(costs, parts, pre, post)
    assert len(sizes) == parts and all(n >= 1 for n in sizes) and sum(sizes) == len(costs)
    assert max(segment_costs(sizes, costs, pre, post)) == brute_force_minmax(
        costs, parts, pre, post
    )


@pytest.mark.parametrize(("layers", "pp"), [(126, 8), (61, 4)])
def test_flagship_layer_counts_convert_with_balanced_split(layers: int, pp: int) -> None:
    data = small(layers, pp)
    with pytest.raises(ConversionError, match="do not divide"):
        convert(data, vpp=2)
    out, result = convert(data, vpp=2, split="balanced")
    segs = result.plan.segments  # type: ignore[attr-defined]
    names = [n for s in segs for n in s.layers]
    assert len(segs) == pp * 2 and all(s.layers for s in segs)
    assert len(names) == layers == len(set(names))
    assert result.plan.imbalance >= 1.0  # type: ignore[attr-defined]
    assert verify_program(parse_program(out)).violations == ()


def test_balanced_split_prints_cost_and_imbalance(runner, tmp_path: Path) -> None:
    src = tmp_path / "p.pb"
    src.write_bytes(small(61, 4))
    args = ["convert", str(src), "--vpp", "2", "--split", "balanced", "--cost", "flops"]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "Flops" in result.stdout and "imbalance:" in result.stdout
    data = json.loads(runner.invoke(cli, [*args, "--json", "--in-place"]).stdout)
    assert data["split"] == "balanced" and data["cost"] == "flops" and data["imbalance"] >= 1
    assert all("cost" in s for s in data["segments"])


def test_keep_split_reproduces_the_input_stage_counts() -> None:
    data = small(61, 4)
    before = [i * 4 // 61 for i in range(61)]
    out, result = convert(data, vpp=2, split="keep")
    per_stage = [0] * 4
    for seg in result.plan.segments:  # type: ignore[attr-defined]
        per_stage[seg.stage] += len(seg.layers)
    assert per_stage == [before.count(s) for s in range(4)]
    assert verify_program(parse_program(out)).violations == ()


def test_keep_split_deals_a_stage_over_its_chunks_earlier_chunks_first() -> None:
    # 7 layers on stage 0 over 3 chunks -> 3, 2, 2.
    sizes = keep_sizes([0] * 7 + [1] * 3, 2, 3, "loop")
    assert [sizes[k] for k in (0, 2, 4)] == [3, 2, 2]
    assert [sizes[k] for k in (1, 3, 5)] == [1, 1, 1]


def test_keep_split_needs_vpp_layers_per_stage() -> None:
    with pytest.raises(ConversionError, match="at least vpp = 3 layers on every stage"):
        keep_sizes([0, 0, 0, 1, 1], 2, 3, "loop")


def test_layers_per_chunk_sets_explicit_counts(runner, tmp_path: Path) -> None:
    src = tmp_path / "p.pb"
    src.write_bytes(small(10, 4))
    args = ["convert", str(src), "--vpp", "2", "--layers-per-chunk", "1,1,1,1,1,1,2,2", "--json"]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    counts = [len(s["layers"]) for s in json.loads(result.stdout)["segments"]]
    assert counts == [1, 1, 1, 1, 1, 1, 2, 2]
    bad = runner.invoke(cli, [*args[:-2], "1,1,1,1,1,1,1,1"])
    assert bad.exit_code == 4 and "add up to 8" in bad.stderr
    wrong_len = runner.invoke(cli, [*args[:-2], "5,5"])
    assert wrong_len.exit_code == 2 and "gives 2 counts" in wrong_len.stderr


# -- cost measures ---------------------------------------------------------------


def test_cost_measures_rank_the_head_heavier_than_a_decoder_layer() -> None:
    data = small(8, 4)
    for cost in ("params", "ops", "flops"):
        _, result = convert(data, vpp=2, cost=cost)
        segs = result.plan.segments  # type: ignore[attr-defined]
        assert segs[-1].cost > segs[3].cost > 0, cost
        assert segs[1].cost == segs[2].cost, cost


def test_convert_reports_stage_loads_and_the_stage_imbalance(runner, tmp_path: Path) -> None:
    src = tmp_path / "p.pb"
    src.write_bytes(small(61, 4))
    args = ["convert", str(src), "--vpp", "2", "--split", "balanced", "--cost", "flops"]
    result = runner.invoke(cli, [*args, "-o", str(tmp_path / "o.pb")], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    line = next(x for x in result.stdout.splitlines() if x.startswith("stage imbalance: "))
    data = json.loads(runner.invoke(cli, [*args, "--json", "-o", str(tmp_path / "j.pb")]).stdout)
    costs = [s["cost"] for s in data["segments"]]
    loads = [costs[k] + costs[k + 4] for k in range(4)]  # loop: stage s holds s and s + 4
    assert data["stage_loads"] == loads
    assert data["stage_imbalance"] == round(max(loads) / (sum(loads) / 4), 4)
    assert (
        line == f"stage imbalance: {max(loads) / (sum(loads) / 4):.2f} (busiest/mean stage flops)"
    )
