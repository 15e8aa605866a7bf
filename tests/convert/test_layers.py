"""Rules 2 and 3 of docs/conversion.md: the repeated layers, found by a regex or detected
from struct names (vppctl/engine/layers.py, vppctl/engine/detect.py), and the stray ops
between them. The running example is tests/support/rulekit.py's.
"""

from __future__ import annotations

import re

from programs import Prog, layered
from rulekit import (
    S0,
    S1,
    convert,
    layer_op,
    move_op,
    put_on,
    refusal,
    running,
)

from vppctl.program._proto import program_pb2 as pb

# ---------------------------------------------------------------------------------
# Rule 2: layers


def test_rule2_layer_regex_is_case_insensitive() -> None:
    c = convert(running(), vpp=2, seg="decoderLAYER")
    assert [list(s.layers) for s in c.plan.segments] == [
        ["DecoderLayer"],
        ["DecoderLayer_1"],
        ["DecoderLayer_2"],
        ["DecoderLayer_3"],
    ]


def test_rule2_layer_name_runs_from_match_start_to_next_slash() -> None:
    # Struct names are /Model/DecoderLayer_2/Linear_1/; the match of "coderLay" starts
    # inside the component, and the name runs from there to the next "/".
    c = convert(running(), vpp=2, seg="coderLay")
    assert [s.layers[0] for s in c.plan.segments] == [
        "coderLayer",
        "coderLayer_1",
        "coderLayer_2",
        "coderLayer_3",
    ]


def test_rule2_layer_name_of_paddle_example() -> None:
    p = Prog(stages=2)
    h = "x"
    for k in range(4):
        name = "DecoderLayer" if k == 0 else f"DecoderLayer_{k}"
        p.op(
            "relu",
            {"X": [h]},
            {"Out": [f"y{k}"]},
            struct=f"/GPTModel/{name}/MLP/",
            stage=k // 2,
        )
        h = f"y{k}"
    c = convert(p, vpp=2)
    assert c.plan.segments[3].layers == ["DecoderLayer_3"]


def test_rule2_regex_is_searched_anywhere_in_the_struct_name() -> None:
    # "Layer_[0-9]" does not match the first layer "DecoderLayer" (no suffix), whose ops
    # become ops before the first layer; the others are named from the match start.
    c = convert(layered([0, 0, 0, 1, 1]), vpp=2, seg=r"Layer_[0-9]")
    assert [list(s.layers) for s in c.plan.segments] == [
        ["Layer_1"],
        ["Layer_2"],
        ["Layer_3"],
        ["Layer_4"],
    ]
    assert c.where(layer_op(0)) == (S0, 0)
    assert c.where(layer_op(2)) == (S1, 0)  # Layer_2: moves 0 -> 1


def test_rule2_only_forward_ops_of_the_global_block_are_searched() -> None:
    p = running(backward=True)
    ops = p.msg.blocks[0].ops
    # Grad ops carrying their forward op's struct name, after the forward section, would
    # make every layer non-contiguous if they were searched.
    for op in ops:
        if op.HasField("forward_op_id"):
            fwd = next(o for o in ops if o.id == op.forward_op_id)
            op.struct_name = fwd.struct_name
    # A sub-block op naming a layer of its own does not add a layer.
    sub = p.sub_block()
    p.op(
        "relu",
        {"X": ["DecoderLayer_2.out0"]},
        {"Out": ["in_sub"]},
        block=sub,
        stage=1,
        struct="/Model/DecoderLayer_9/X/",
    )
    ops[layer_op(2)].attrs.add(name="sub_block", type=pb.BLOCK, block_idx=sub)
    c = convert(p, vpp=2)
    assert sum(len(s.layers) for s in c.plan.segments) == 4
    assert "DecoderLayer_9" not in {n for s in c.plan.segments for n in s.layers}


def test_rule2_non_contiguous_layer_is_refused_naming_layer_and_op() -> None:
    p = running()
    # Op 1 of layer 2 claims to belong to layer 0, which ended before layer 1 started.
    bad = layer_op(2, 1)
    p.msg.blocks[0].ops[bad].struct_name = "/Model/DecoderLayer/Linear_1/"
    msg = refusal(p, vpp=2)
    assert "DecoderLayer" in msg
    assert "contiguous" in msg
    assert re.search(rf"#{bad}\b", msg), msg


def test_rule2_regex_naming_a_sublayer_makes_layers_non_contiguous() -> None:
    # "Linear" names /Model/DecoderLayer_k/Linear/ in every layer: one layer "Linear" in
    # many places.
    msg = refusal(running(), vpp=2, seg="Linear")
    assert "Linear" in msg and "contiguous" in msg
    assert "--seg-method" in msg or "struct names" in msg


def test_rule2_layer_on_two_meshes_is_refused_naming_layer_and_op() -> None:
    p = running()
    bad = layer_op(1, 1)
    put_on(p, p.msg.blocks[0].ops[bad], 1)
    msg = refusal(p, vpp=2)
    assert "DecoderLayer_1" in msg
    assert re.search(rf"#{bad}\b", msg), msg
    assert "mesh" in msg


def test_rule2_no_matching_op_is_refused() -> None:
    msg = refusal(running(), vpp=2, seg="Attention")
    assert "Attention" in msg
    assert "--seg-method" in msg


# ---------------------------------------------------------------------------------
# Rule 3: stray ops


def _with_stray(p: Prog, at: int, stage: int) -> Prog:
    """An `assign` (as reshard makes) with struct name "/" moved to index `at`."""
    p.op("assign", {"X": ["DecoderLayer_1.out1"]}, {"Out": ["reshard_0"]}, struct="/", stage=stage)
    move_op(p, len(p.msg.blocks[0].ops) - 1, at)
    return p


def test_rule3_stray_op_joins_the_next_layer_with_a_warning() -> None:
    # Between layer 1 (-> stage 1 chunk 0) and layer 2 (-> stage 0 chunk 1).
    at = layer_op(2)
    p = _with_stray(running(), at, stage=0)
    c = convert(p, vpp=2)
    assert c.after.blocks[0].ops[at].type == "assign"
    assert c.where(at) == c.where(at + 1) == (S0, 1)
    assert len(c.warnings) == 1
    assert f"#{at}" in c.warnings[0] and "DecoderLayer_2" in c.warnings[0]
    assert [s.layers for s in c.plan.segments][2] == ["DecoderLayer_2"]


def test_rule3_stray_op_is_refused_with_strict() -> None:
    at = layer_op(2)
    msg = refusal(_with_stray(running(), at, stage=0), vpp=2, strict=True)
    assert f"#{at}" in msg and "assign" in msg
    assert "--strict" in msg


def test_rule3_stray_op_inside_a_layer_joins_that_layer() -> None:
    at = layer_op(2, 1)  # between the two ops of layer 2
    p = _with_stray(running(), at, stage=1)
    c = convert(p, vpp=2)
    assert c.after.blocks[0].ops[at].type == "assign"
    assert c.where(at - 1) == c.where(at) == c.where(at + 1) == (S0, 1)
    assert len(c.warnings) == 1 and "DecoderLayer_2" in c.warnings[0]


def test_rule3_ops_before_the_first_layer_are_not_stray() -> None:
    c = convert(running(), vpp=2, strict=True)
    assert c.warnings == ()
