"""The plan (vppctl/plan.py): rules 4 and 5 of docs/conversion.md (auto or manual mode, the
segments), and beyond Paddle: V placement, keep / balanced / explicit splits. The running
example is tests/support/rulekit.py's.

The tests here also cover vppctl/plan/partition.py and vppctl/plan/placement.py, which have
no test file of their own.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import paths
import pytest
from commandline import invoke
from hypothesis import given, settings
from hypothesis import strategies as st
from programs import layered
from rulekit import (
    S0,
    S1,
    convert,
    convert_bytes,
    layer_op,
    refusal,
    running,
    shows_stages,
    small,
)

from vppctl.errors import ConversionError
from vppctl.plan import balanced_sizes, keep_sizes, place, segment_costs
from vppctl.program._proto import program_pb2 as pb
from vppctl.program.load import parse_program
from vppctl.verify.expectation import verify_program

SAMPLES = sorted(paths.SAMPLES.glob("*.pb*"))


# -- placement -----------------------------------------------------------------


def test_v_placement_runs_down_then_back_up() -> None:
    assert [place(k, 4, "v") for k in range(8)] == [
        (0, 0), (1, 0), (2, 0), (3, 0), (3, 1), (2, 1), (1, 1), (0, 1)
    ]  # fmt: skip


def test_v_placement_on_the_sample_moves_head_and_loss_to_stage_0() -> None:
    out, result = convert_bytes(small(8, 4), vpp=2, placement="v")
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
    out, result = convert_bytes(small(12, 4), vpp=3, placement="v")
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
        convert_bytes(data, vpp=2)
    out, result = convert_bytes(data, vpp=2, split="balanced")
    segs = result.plan.segments  # type: ignore[attr-defined]
    names = [n for s in segs for n in s.layers]
    assert len(segs) == pp * 2 and all(s.layers for s in segs)
    assert len(names) == layers == len(set(names))
    assert result.plan.imbalance >= 1.0  # type: ignore[attr-defined]
    assert verify_program(parse_program(out)).violations == ()


def test_balanced_split_prints_cost_and_imbalance(tmp_path: Path) -> None:
    src = tmp_path / "p.pb"
    src.write_bytes(small(61, 4))
    args = ["convert", str(src), "--vpp", "2", "--split", "balanced", "--cost", "flops"]
    result = invoke(*args)
    assert "Flops" in result.stdout and "imbalance:" in result.stdout
    data = json.loads(invoke(*args, "--json", "--in-place").stdout)
    assert data["split"] == "balanced" and data["cost"] == "flops" and data["imbalance"] >= 1
    assert all("cost" in s for s in data["segments"])


def test_keep_split_reproduces_the_input_stage_counts() -> None:
    data = small(61, 4)
    before = [i * 4 // 61 for i in range(61)]
    out, result = convert_bytes(data, vpp=2, split="keep")
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


def test_layers_per_chunk_sets_explicit_counts(tmp_path: Path) -> None:
    src = tmp_path / "p.pb"
    src.write_bytes(small(10, 4))
    args = ["convert", str(src), "--vpp", "2", "--layers-per-chunk", "1,1,1,1,1,1,2,2", "--json"]
    result = invoke(*args)
    counts = [len(s["layers"]) for s in json.loads(result.stdout)["segments"]]
    assert counts == [1, 1, 1, 1, 1, 1, 2, 2]
    bad = invoke(*args[:-2], "1,1,1,1,1,1,1,1", exit_code=4)
    assert "add up to 8" in bad.stderr
    wrong_len = invoke(*args[:-2], "5,5", exit_code=2)
    assert "gives 2 counts" in wrong_len.stderr


# ---------------------------------------------------------------------------------
# Rule 4: auto or manual


def test_rule4_non_decreasing_stages_are_auto_mode_and_layers_move() -> None:
    c = convert(running(), vpp=2)
    assert c.plan.mode == "auto"
    assert [c.where(layer_op(k)) for k in range(4)] == [(S0, 0), (S1, 0), (S0, 1), (S1, 1)]


def test_rule4_interleaved_layout_is_manual_mode_meshes_kept_chunks_written() -> None:
    # Paddle's layout [0,1,2,3,0,1,2,3] -> meshes kept, chunk ids 0,0,0,0,1,1,1,1.
    p = layered([0, 1, 2, 3, 0, 1, 2, 3], backward=True, optimizer=True)
    c = convert(p, vpp=2)
    assert c.plan.mode == "manual"
    for i, (a, b) in enumerate(zip(c.before.blocks[0].ops, c.after.blocks[0].ops)):
        assert a.dist_attr.process_mesh == b.dist_attr.process_mesh, f"op {i} moved"
        assert a.dist_attr.input_dist_attrs == b.dist_attr.input_dist_attrs
    assert [c.where(layer_op(k))[1] for k in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [c.where(layer_op(k))[0] for k in range(8)] == [(k % 4,) for k in range(8)]


def test_rule4_manual_layout_must_be_the_one_the_segments_give() -> None:
    p = layered([0, 1, 0, 1, 0, 1, 0, 1])
    assert convert(p, vpp=4).plan.mode == "manual"  # one layer per segment: matches
    msg = refusal(p, vpp=2)  # two layers per segment would be 0,0,1,1,0,0,1,1
    assert "manual" in msg or "interleaved" in msg
    assert shows_stages(msg, [0, 1, 0, 1, 0, 1, 0, 1]), msg


def test_rule4_manual_layout_mismatch_is_refused_printing_the_stage_sequence() -> None:
    msg = refusal(layered([1, 0, 1, 0]), vpp=2)
    assert shows_stages(msg, [1, 0, 1, 0]), msg
    assert "--vpp" in msg or "plain-PP" in msg


# ---------------------------------------------------------------------------------
# Rule 5: segments


def _mentions_in_order(msg: str, values: list[int]) -> bool:
    pattern = r"\D{1,8}".join(rf"\b{v}\b" for v in values)
    return re.search(pattern, msg) is not None


def test_rule5_layers_must_divide_into_pp_times_vpp_listing_working_vpp() -> None:
    msg = refusal(layered([0, 0, 0, 1, 1, 1]), vpp=2)  # 6 layers, pp 2: V 1 or 3 work
    assert "6" in msg
    assert _mentions_in_order(msg, [1, 3]), msg
    assert not _mentions_in_order(msg, [1, 2, 3]), msg


def test_rule5_refusal_lists_every_working_vpp() -> None:
    msg = refusal(layered([0] * 6 + [1] * 6), vpp=4)  # 12 layers, pp 2: V 1, 2, 3, 6
    assert _mentions_in_order(msg, [1, 2, 3, 6]), msg


def test_rule5_fewer_layers_than_segments_is_refused_listing_working_vpp() -> None:
    # 4 layers, pp 2, V 4: 4 does not divide by 8; V 1 and 2 would work.
    msg = refusal(layered([0, 0, 1, 1]), vpp=4)
    assert _mentions_in_order(msg, [1, 2]), msg


def test_rule5_segment_k_holds_a_contiguous_run_on_stage_k_mod_pp_chunk_k_div_pp() -> None:
    # 12 layers, pp 2, V 3: six segments of two layers.
    c = convert(layered([0] * 6 + [1] * 6), vpp=3)
    segs = c.plan.segments
    assert [s.virtual_stage for s in segs] == list(range(6))
    assert [(s.stage, s.chunk) for s in segs] == [(k % 2, k // 2) for k in range(6)]
    names = ["DecoderLayer"] + [f"DecoderLayer_{i}" for i in range(1, 12)]
    assert [list(s.layers) for s in segs] == [names[2 * k : 2 * k + 2] for k in range(6)]
    for i in range(12):
        k = i // 2
        assert c.where(layer_op(i)) == ((k % 2,), k // 2)
        assert c.where(layer_op(i, 1)) == ((k % 2,), k // 2)


def test_rule5_paddle_example_16_layers_pp4_vpp4() -> None:
    # 16 layers, pp 4, V 4 -> layer i on stage i % 4, chunk i // 4.
    c = convert(layered([i // 4 for i in range(16)]), vpp=4)
    assert [c.where(layer_op(i)) for i in range(16)] == [((i % 4,), i // 4) for i in range(16)]
