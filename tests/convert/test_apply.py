"""The conversion rules (docs/conversion.md), one group of tests per rule.

The programs are small and built in code.

Most tests use `layered(stages)`: an embedding op (stage 0), two matmul ops per
layer `DecoderLayer`, `DecoderLayer_1`, ... on the given stages, then the head
and the loss (role 256) on the last layer's stage; optionally the loss-grad op,
one grad op per forward op in reverse order, and one sgd op per parameter.
With four layers on stages [0, 0, 1, 1], pp 2 and V 2 the segments are

    segment 0: DecoderLayer   -> stage 0 chunk 0   (stays on stage 0)
    segment 1: DecoderLayer_1 -> stage 1 chunk 0   (moves 0 -> 1)
    segment 2: DecoderLayer_2 -> stage 0 chunk 1   (moves 1 -> 0)
    segment 3: DecoderLayer_3 -> stage 1 chunk 1   (stays on stage 1)

and that layout is the running example below. Meshes are written as their
process ids: stage s of a `Prog` is mesh (s,).
"""

from __future__ import annotations

import re

import pytest
from programs import BACKWARD, FORWARD, LOSS_GRAD, OPTIMIZE, Prog, layered
from rulekit import (
    convert,
    find_var,
    layer_op,
    move_op,
    op_where,
    placements,
    put_on,
    refusal,
    rename_arg,
    set_role,
    without_placements,
)

from vppctl import __version__
from vppctl.program._proto import program_pb2 as pb

S0, S1, S2 = (0,), (1,), (2,)

# Running example: op indices of layered([0, 0, 1, 1], backward=True).
EMB, HEAD, LOSS = 0, 9, 10
LOSS_GRAD_OP = 11


def running(**kw: bool) -> Prog:
    return layered([0, 0, 1, 1], **kw)


def grad_of(p: Prog, forward_index: int) -> int:
    """Index of the grad op whose forward_op_id names op `forward_index`."""
    fid = p.msg.blocks[0].ops[forward_index].id
    ops = p.msg.blocks[0].ops
    return next(
        i for i, o in enumerate(ops) if o.HasField("forward_op_id") and o.forward_op_id == fid
    )


def shows_stages(message: str, stages: list[int]) -> bool:
    """Whether a message prints the stage sequence, in full or run-length (`1x2,0x2`)."""
    expanded = re.sub(r"(\d+)x(\d+)", lambda m: ",".join([m[1]] * int(m[2])), message)
    return ",".join(map(str, stages)) in expanded.replace(" ", "")


# ---------------------------------------------------------------------------------
# Rule 1: stage meshes and pp


def test_rule1_pp_is_the_number_of_distinct_process_meshes() -> None:
    p = running()
    # A duplicate (equal: same shape and ids, other dim names) does not add a stage.
    dup = pb.ProcessMesh()
    dup.CopyFrom(p.meshes[0])
    dup.dim_names[:] = ["pp"]
    p.msg.process_meshes.append(dup)
    c = convert(p, vpp=2)
    assert c.plan.pp == 2
    assert [tuple(s.mesh.process_ids) for s in c.plan.segments] == [S0, S1, S0, S1]


def _chain(layer_stages: list[int], first_stage: int, *, record_meshes: bool) -> Prog:
    """A feed op on `first_stage`, then one relu op per layer on the given stages of a Prog."""
    p = Prog(stages=2, record_meshes=record_meshes)
    p.op("feed", {}, {"Out": ["x"]}, struct="/M/Embedding/", stage=first_stage)
    h = "x"
    for k, stage in enumerate(layer_stages):
        name = "DecoderLayer" if k == 0 else f"DecoderLayer_{k}"
        p.op("relu", {"X": [h]}, {"Out": [f"{name}.out"]}, struct=f"/M/{name}/", stage=stage)
        h = f"{name}.out"
    return p


def test_rule1_stage_order_is_the_order_of_process_meshes() -> None:
    # Layers on meshes (1,),(1,),(0,),(0,); process_meshes lists (1,) first, so that is
    # stage 0 and the layout is plain PP (stages 0,0,1,1).
    p = _chain([1, 1, 0, 0], 1, record_meshes=False)
    p.msg.process_meshes.extend([p.meshes[1], p.meshes[0]])
    c = convert(p, vpp=2)
    assert c.plan.mode == "auto"
    assert [tuple(s.mesh.process_ids) for s in c.plan.segments] == [S1, S0, S1, S0]
    assert [c.where(1 + k) for k in range(4)] == [(S1, 0), (S0, 0), (S1, 1), (S0, 1)]
    # The same program listing (0,) first has a decreasing, non-interleaved layout.
    p.msg.ClearField("process_meshes")
    p.msg.process_meshes.extend(p.meshes)
    assert shows_stages(refusal(p, vpp=2), [1, 1, 0, 0])


def test_rule1_global_mesh_covering_all_ranks_is_dropped() -> None:
    p = running()
    p.msg.process_meshes.append(p.global_mesh)
    c = convert(p, vpp=2, pp=2)
    assert c.plan.pp == 2
    assert [tuple(s.mesh.process_ids) for s in c.plan.segments] == [S0, S1, S0, S1]


def test_rule1_global_mesh_listed_first_is_dropped_too() -> None:
    p = running()
    meshes = [p.global_mesh, *p.meshes]
    p.msg.ClearField("process_meshes")
    p.msg.process_meshes.extend(meshes)
    c = convert(p, vpp=2)
    assert c.plan.pp == 2
    assert c.plan.segments[0].mesh.process_ids == [0]


def test_rule1_without_process_meshes_stage_meshes_follow_first_appearance_on_ops() -> None:
    # First op on mesh (1,): by first appearance the stage meshes are [(1,), (0,)], and
    # layers on (1,),(1,),(0,),(0,) are plain PP.
    c = convert(_chain([1, 1, 0, 0], 1, record_meshes=False), vpp=2)
    assert c.plan.pp == 2
    assert c.plan.mode == "auto"
    assert [tuple(s.mesh.process_ids) for s in c.plan.segments] == [S1, S0, S1, S0]
    assert [c.where(1 + k) for k in range(4)] == [(S1, 0), (S0, 0), (S1, 1), (S0, 1)]


def test_rule1_without_process_meshes_a_global_mesh_on_an_op_is_dropped() -> None:
    p = running(backward=True, optimizer=True)
    p.msg.ClearField("process_meshes")
    # An LR-scheduler op on the global mesh, before everything else.
    p.op("increment", {}, {"Out": ["step"]}, role=16, stage=-1)
    move_op(p, len(p.msg.blocks[0].ops) - 1, 0)
    c = convert(p, vpp=2)
    assert c.plan.pp == 2
    assert c.where(0) == ((0, 1), 0)


def test_rule1_meshes_equal_up_to_dim_names_are_one_stage() -> None:
    p = running()
    for j in range(2):  # layer 1's ops carry mesh (0,) with other dim names
        op = p.msg.blocks[0].ops[layer_op(1, j)]
        op.dist_attr.process_mesh.dim_names[:] = [f"d{j}"]
    c = convert(p, vpp=2)
    assert c.plan.pp == 2
    assert c.where(layer_op(1, 0)) == (S1, 0)
    assert c.where(layer_op(1, 1)) == (S1, 0)


def test_rule1_one_stage_mesh_with_vpp_over_1_is_refused() -> None:
    msg = refusal(layered([0, 0]), vpp=2)
    assert re.search(r"\b1\b", msg) and "stage" in msg
    assert "--vpp 1" in msg or "process mesh per stage" in msg


def test_rule1_one_stage_mesh_with_vpp_1_converts() -> None:
    c = convert(layered([0, 0]), vpp=1)
    assert c.plan.pp == 1
    assert {c.where(i) for i in range(len(c.after.blocks[0].ops))} == {(S0, 0)}


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


# ---------------------------------------------------------------------------------
# Rule 6: forward ops


def test_rule6_ops_before_the_first_layer_are_segment_0_and_keep_their_mesh() -> None:
    p = running()
    # A forward op on stage 1 before everything (its output feeds nothing).
    p.op("fill_constant", {}, {"Out": ["const"]}, struct="/Model/", stage=1, chunk=1)
    move_op(p, len(p.msg.blocks[0].ops) - 1, 0)
    c = convert(p, vpp=2)
    assert c.where(0) == (S1, 0)
    assert c.where(1) == (S0, 0)  # the embedding


def test_rule6_ops_after_the_last_layer_are_the_last_segment_and_keep_their_mesh() -> None:
    p = layered([0, 0, 1, 1, 2, 2])  # pp 3, V 2: the last segment is stage 2 chunk 1
    p.op("fill_constant", {}, {"Out": ["unused"]}, struct="/Model/Tail/", stage=0)
    c = convert(p, vpp=2)
    head, loss, tail = layer_op(6), layer_op(6) + 1, layer_op(6) + 2
    assert c.op(loss).type == "mean"
    assert c.where(head) == (S2, 1)
    assert c.where(loss) == (S2, 1)
    assert c.where(tail) == (S0, 1)  # keeps stage 0's mesh, takes the last chunk


def test_rule6_layer_ops_and_their_tensor_dist_attrs_take_the_segment_mesh() -> None:
    c = convert(running(), vpp=2)
    for k, want in enumerate([S0, S1, S0, S1]):
        for j in range(2):
            d = c.op(layer_op(k, j)).dist_attr
            assert tuple(d.process_mesh.process_ids) == want
            tensor_meshes = {
                tuple(e.tensor_dist_attr.process_mesh.process_ids)
                for e in (*d.input_dist_attrs, *d.output_dist_attrs)
            }
            assert tensor_meshes == {want}
            # dims mappings are not touched
            assert all(
                list(e.tensor_dist_attr.dims_mapping) == [-1, -1] for e in d.input_dist_attrs
            )


def test_rule6_tensor_dist_attrs_take_the_segment_mesh_even_if_the_op_stays() -> None:
    p = running()
    op = p.msg.blocks[0].ops[layer_op(0)]  # layer 0 stays on stage 0
    op.dist_attr.input_dist_attrs[0].tensor_dist_attr.process_mesh.CopyFrom(p.meshes[1])
    c = convert(p, vpp=2)
    d = c.op(layer_op(0)).dist_attr
    assert tuple(d.input_dist_attrs[0].tensor_dist_attr.process_mesh.process_ids) == S0


def test_rule6_manual_mode_refuses_a_tensor_dist_attr_on_another_mesh_than_its_op() -> None:
    """Manual mode keeps meshes, tensor dist attrs included; one that names another mesh than
    its op (Paddle's setter never leaves that) is an inconsistent input, refused."""
    p = layered([0, 1, 0, 1])
    op = p.msg.blocks[0].ops[layer_op(2)]
    op.dist_attr.output_dist_attrs[0].tensor_dist_attr.process_mesh.CopyFrom(p.meshes[1])
    msg = refusal(p, vpp=2)
    assert f"op #{layer_op(2)}" in msg and "inconsistent" in msg


def test_rule6_an_op_without_op_role_is_a_forward_op() -> None:
    p = running()
    for j in range(2):
        set_role(p.msg.blocks[0].ops[layer_op(2, j)], None)
    c = convert(p, vpp=2)
    assert c.where(layer_op(2, 0)) == c.where(layer_op(2, 1)) == (S0, 1)


def test_rule6_the_loss_op_role_256_is_a_forward_op() -> None:
    c = convert(running(), vpp=2)
    assert c.op(LOSS).type == "mean"
    assert c.where(LOSS) == (S1, 1)


# ---------------------------------------------------------------------------------
# Rule 7: variables


def test_rule7_moved_op_moves_inputs_on_its_old_mesh_and_every_output() -> None:
    c = convert(running(), vpp=2)
    assert c.var_where("DecoderLayer_1.w0") == (S1, 0)  # parameter, was on stage 0
    assert c.var_where("DecoderLayer_1.out0") == (S1, 0)
    assert c.var_where("DecoderLayer_2.w1") == (S0, 1)  # was on stage 1
    assert c.var_where("DecoderLayer_2.out1") == (S0, 1)


def test_rule7_output_takes_the_new_mesh_whatever_its_old_mesh() -> None:
    # pp 3, V 2: layer 3 moves 1 -> 0 (segment 3 = stage 0 chunk 1).
    p = layered([0, 0, 1, 1, 2, 2])
    find_var(p.msg, "DecoderLayer_3.out0").dist_attr.process_mesh.CopyFrom(p.meshes[2])
    c = convert(p, vpp=2)
    assert c.where(layer_op(3)) == (S0, 1)
    assert c.var_where("DecoderLayer_3.out0") == (S0, 1)


def test_rule7_input_on_another_mesh_keeps_it_and_gets_a_chunk_only_on_the_ops_new_mesh() -> None:
    p = layered([0, 0, 1, 1, 2, 2])  # layer 3: stage 1 -> stage 0, chunk 1
    p.var("far", stage=2, chunk=None)  # neither the old nor the new mesh
    p.var("here", stage=0, chunk=None)  # the new mesh
    op = p.msg.blocks[0].ops[layer_op(3)]
    op.inputs.add(parameter="Extra", arguments=["far", "here"])
    c = convert(p, vpp=2)
    assert c.var_where("far") == (S2, None)
    assert c.var_where("here") == (S0, 1)


def test_rule7_first_writer_wins_for_the_chunk_id() -> None:
    p = running()
    p.var("shared", stage=0, chunk=None)
    for k in (0, 2):  # layer 0 (stage 0 chunk 0), then layer 2 (moves 1 -> 0, chunk 1)
        p.msg.blocks[0].ops[layer_op(k)].inputs.add(parameter="Shared", arguments=["shared"])
    c = convert(p, vpp=2)
    assert c.var_where("shared") == (S0, 0)


def test_rule7_first_writer_wins_for_the_mesh() -> None:
    p = running()
    p.var("shared", stage=0, chunk=None)
    for k in (0, 1):  # layer 0 stays on stage 0, then layer 1 moves 0 -> 1
        p.msg.blocks[0].ops[layer_op(k)].inputs.add(parameter="Shared", arguments=["shared"])
    c = convert(p, vpp=2)
    assert c.var_where("shared") == (S0, 0)


def test_rule7_lod_tensor_blocking_queue_gets_no_chunk_id() -> None:
    p = running()
    p.var("lod_tensor_blocking_queue_0", stage=1, chunk=None)
    p.var("reader_lod_tensor_blocking_queue_1", stage=1, chunk=0)
    op = p.msg.blocks[0].ops[layer_op(2)]  # moves 1 -> 0, chunk 1
    op.inputs.add(
        parameter="Queue",
        arguments=["lod_tensor_blocking_queue_0", "reader_lod_tensor_blocking_queue_1"],
    )
    c = convert(p, vpp=2)
    assert c.var_where("lod_tensor_blocking_queue_0") == (S0, None)
    assert c.var_where("reader_lod_tensor_blocking_queue_1") == (S0, 0)


def test_rule7_manual_mode_variables_keep_their_mesh_and_take_the_chunk() -> None:
    p = layered([0, 1, 0, 1])
    p.var("other_stage", stage=1, chunk=None)
    p.msg.blocks[0].ops[layer_op(2)].inputs.add(parameter="Extra", arguments=["other_stage"])
    c = convert(p, vpp=2)
    assert c.var_where("DecoderLayer_2.w0") == (S0, 1)
    assert c.var_where("DecoderLayer_2.out1") == (S0, 1)
    assert c.var_where("DecoderLayer_1.w1") == (S1, 0)
    assert c.var_where("other_stage") == (S1, None)  # not on the op's mesh: no chunk


def test_rule7_ops_that_keep_their_mesh_give_chunks_to_variables_on_it() -> None:
    c = convert(running(), vpp=2)
    # The head (stays on stage 1, last segment) gives chunk 1 to its parameter.
    assert c.var_where("head.w") == (S1, 1)
    assert c.var_where("logits") == (S1, 1)
    assert c.var_where("emb.w") == (S0, 0)


# ---------------------------------------------------------------------------------
# Rule 8: sub-blocks


def _with_nested_blocks(p: Prog, k: int, stage: int) -> tuple[int, int]:
    """Give op 0 of layer k a sub-block holding an op with a nested sub-block."""
    b1 = p.sub_block(0)
    b2 = p.sub_block(b1)
    p.var("outer", stage=stage, chunk=None)
    p.var("shadowed", stage=stage, chunk=None)
    p.var("shadowed", stage=stage, chunk=None, block=b2)
    p.var("inner", stage=stage, chunk=None, block=b1)
    p.op(
        "relu",
        {"X": ["outer"]},
        {"Out": ["inner"]},
        block=b1,
        stage=stage,
        chunk=None,
        sub_block=b2,
    )
    p.op("relu", {"X": ["inner", "shadowed"]}, {"Out": ["deep"]}, block=b2, stage=stage, chunk=None)
    p.msg.blocks[0].ops[layer_op(k)].attrs.add(name="sub_block", type=pb.BLOCK, block_idx=b1)
    return b1, b2


def test_rule8_sub_block_ops_take_the_ops_mesh_and_chunk_recursively() -> None:
    p = running()
    b1, b2 = _with_nested_blocks(p, 2, stage=1)  # layer 2 moves 1 -> 0, chunk 1
    c = convert(p, vpp=2)
    assert c.where(0, block=b1) == (S0, 1)
    assert c.where(0, block=b2) == (S0, 1)  # nested: vppctl goes deeper than Paddle


def test_rule8_sub_block_variables_follow_rule7_looked_up_in_block_then_ancestors() -> None:
    p = running()
    b1, b2 = _with_nested_blocks(p, 2, stage=1)
    c = convert(p, vpp=2)
    assert c.var_where("inner", block=b1) == (S0, 1)
    assert c.var_where("outer", block=0) == (S0, 1)  # found in the parent block
    assert c.var_where("deep", block=b2) == (S0, 1)
    assert c.var_where("shadowed", block=b2) == (S0, 1)  # the nested block's own
    assert c.var_where("shadowed", block=0) == (S1, None)  # the parent's is not touched


def test_rule8_manual_mode_sub_block_ops_keep_their_mesh_and_get_the_chunk() -> None:
    p = layered([0, 1, 0, 1])
    b1, b2 = _with_nested_blocks(p, 2, stage=0)  # layer 2: stage 0 chunk 1
    c = convert(p, vpp=2)
    assert c.plan.mode == "manual"
    assert c.where(0, block=b1) == (S0, 1)
    assert c.where(0, block=b2) == (S0, 1)


def test_rule8_sub_block_of_an_op_before_the_layers_keeps_mesh_with_chunk_0() -> None:
    p = running()
    b1 = p.sub_block(0)
    p.op("relu", {"X": ["ids"]}, {"Out": ["in_sub"]}, block=b1, stage=0, chunk=None)
    p.msg.blocks[0].ops[EMB].attrs.add(name="sub_block", type=pb.BLOCK, block_idx=b1)
    c = convert(p, vpp=2)
    assert c.where(0, block=b1) == (S0, 0)


def test_rule8_a_sub_block_op_away_from_an_op_before_the_layers_is_refused() -> None:
    """Ops before the first layer keep their mesh, and so (as in Paddle, which re-meshes only
    the sub-blocks of layer ops) do their sub-block ops: one on another stage than the op
    running it is an inconsistent input, refused."""
    p = running()
    b1 = p.sub_block(0)
    p.op("relu", {"X": ["ids"]}, {"Out": ["in_sub"]}, block=b1, stage=1, chunk=None)
    p.msg.blocks[0].ops[EMB].attrs.add(name="sub_block", type=pb.BLOCK, block_idx=b1)
    msg = refusal(p, vpp=2)
    assert "block 1 op #0 (relu)" in msg and "inconsistent" in msg


def test_rule8_sub_blocks_of_backward_ops_follow_the_backward_op() -> None:
    p = running(backward=True)
    g = grad_of(p, layer_op(2))  # -> stage 0 chunk 1
    b1 = p.sub_block(0)
    p.op(
        "relu",
        {"X": ["DecoderLayer_2.w0"]},
        {"Out": ["in_grad_sub"]},
        block=b1,
        stage=1,
        chunk=None,
        role=BACKWARD,
    )
    p.msg.blocks[0].ops[g].attrs.add(name="sub_block", type=pb.BLOCK, block_idx=b1)
    c = convert(p, vpp=2)
    assert c.where(g) == (S0, 1)
    assert c.where(0, block=b1) == (S0, 1)


# ---------------------------------------------------------------------------------
# Rule 9: backward ops


def test_rule9_loss_grad_op_takes_the_loss_ops_mesh_and_chunk() -> None:
    p = running(backward=True)
    put_on(p, p.msg.blocks[0].ops[LOSS_GRAD_OP], 0, chunk=0)
    c = convert(p, vpp=2)
    assert role_of(c.op(LOSS_GRAD_OP)) == LOSS_GRAD
    assert c.where(LOSS_GRAD_OP) == c.where(LOSS) == (S1, 1)


def role_of(op: pb.OpDesc) -> int:
    return next((a.i for a in op.attrs if a.name == "op_role"), 0)


def test_rule9_grad_op_takes_its_forward_ops_mesh_and_chunk_by_forward_op_id() -> None:
    p = running(backward=True)
    # Misleading types: only forward_op_id says which forward op a grad op belongs to.
    for op in p.msg.blocks[0].ops:
        if op.HasField("forward_op_id"):
            op.type = "custom_grad"
    c = convert(p, vpp=2)
    by_id = {o.id: i for i, o in enumerate(c.after.blocks[0].ops)}
    grads = [(i, o) for i, o in enumerate(c.after.blocks[0].ops) if o.HasField("forward_op_id")]
    assert len(grads) == 11
    for i, o in grads:
        assert c.where(i) == c.where(by_id[o.forward_op_id]), f"grad op {i}"
    assert c.warnings == ()


def test_rule9_grad_op_forward_op_is_inferred_when_ids_are_absent() -> None:
    p = running(backward=True, ids=False)
    with_ids = convert(running(backward=True), vpp=2)
    c = convert(p, vpp=2)
    assert not any(o.HasField("id") for o in c.after.blocks[0].ops)
    # Op 0 of layer 2 reads layer 1's output first (stage 1 chunk 0); inference must
    # still find its forward op (stage 0 chunk 1), not follow that input.
    g = next(
        i
        for i, o in enumerate(c.after.blocks[0].ops)
        if o.type == "matmul_v2_grad" and "DecoderLayer_2.out0@GRAD" in str(o.inputs)
    )
    assert c.where(g) == (S0, 1)
    assert placements(c.after) == placements(with_ids.after)
    assert c.warnings == ()


def test_rule9_grad_op_without_forward_op_id_among_others_is_inferred() -> None:
    p = running(backward=True)
    g = grad_of(p, layer_op(2))
    p.msg.blocks[0].ops[g].ClearField("forward_op_id")
    c = convert(p, vpp=2)
    assert c.where(g) == (S0, 1)


def test_rule9_unmapped_grad_op_is_reported_and_follows_its_first_input_with_a_mesh() -> None:
    p = running(backward=True)
    p.var("nowhere", stage=None, chunk=None)
    p.op(
        "mystery_grad",
        {"X": ["nowhere", "DecoderLayer_2.w0", "DecoderLayer_1.w0"]},
        {"Out": ["mystery_out"]},
        role=BACKWARD,
        stage=1,
    )
    i = len(p.msg.blocks[0].ops) - 1
    c = convert(p, vpp=2)
    assert c.where(i) == (S0, 1)  # DecoderLayer_2.w0's new placement
    assert c.var_where("mystery_out") == (S0, 1)
    assert any("mystery_grad" in w for w in c.warnings), c.warnings


def test_rule9_other_backward_op_takes_its_first_input_variables_mesh_and_chunk() -> None:
    p = running(backward=True)
    p.op(
        "c_allreduce_sum",
        {"X": ["DecoderLayer_2.w0@GRAD"]},
        {"Out": ["DecoderLayer_2.w0@GRAD"]},
        role=BACKWARD,
        stage=1,
    )
    c = convert(p, vpp=2)
    assert c.where(len(c.after.blocks[0].ops) - 1) == (S0, 1)


def _with_gradient_sum(type_: str = "sum") -> tuple[Prog, int, int, int]:
    """Layer 3 also reads layer 1's output, so its gradient is accumulated.

    The grad op of layer 3's op 0 (stage 1 chunk 1) writes `..@RENAME@0`, the one of
    layer 2's op 0 (stage 0 chunk 1) `..@RENAME@1`, and a sum after the latter adds them.
    Returns (program, first writer, nearest writer, sum op).
    """
    p = running(backward=True)
    ops = p.msg.blocks[0].ops
    ops[layer_op(3)].inputs.add(parameter="Residual", arguments=["DecoderLayer_1.out1"])
    g3, g2 = grad_of(p, layer_op(3)), grad_of(p, layer_op(2))
    name = "DecoderLayer_1.out1@GRAD"
    ops[g3].outputs.add(parameter="Residual@GRAD", arguments=[f"{name}@RENAME@0"])
    rename_arg(ops[g2], name, f"{name}@RENAME@1")
    p.op(
        type_,
        {"X": [f"{name}@RENAME@0", f"{name}@RENAME@1"]},
        {"Out": [name]},
        role=BACKWARD,
        stage=0,
        chunk=0,
        op_id=None,
    )
    move_op(p, len(ops) - 1, g2 + 1)
    return p, g3, g2, g2 + 1


@pytest.mark.parametrize("type_", ["sum", "grad_add"])
def test_rule9_gradient_sum_takes_the_nearest_earlier_writer_of_its_inputs(type_: str) -> None:
    p, first, nearest, s = _with_gradient_sum(type_)
    c = convert(p, vpp=2)
    assert c.op(s).type == type_
    assert c.where(first) == (S1, 1)
    assert c.where(nearest) == (S0, 1)
    assert c.where(s) == (S0, 1)


def test_rule9_gradient_sum_output_takes_its_forward_variables_mesh_and_chunk() -> None:
    p, _, _, _ = _with_gradient_sum()
    c = convert(p, vpp=2)
    assert c.var_where("DecoderLayer_1.out1") == (S1, 0)
    assert c.var_where("DecoderLayer_1.out1@GRAD") == (S1, 0)
    # the inputs of the sum take their writers' placements
    assert c.var_where("DecoderLayer_1.out1@GRAD@RENAME@0") == (S1, 1)
    assert c.var_where("DecoderLayer_1.out1@GRAD@RENAME@1") == (S0, 1)


def test_rule9_sum_right_after_the_first_grad_op_uses_it() -> None:
    # Paddle skips the first grad op after the loss-grad op when it looks for the writer
    # (and fails here); vppctl does not.
    p = running(backward=True)
    ops = p.msg.blocks[0].ops
    first = LOSS_GRAD_OP + 1
    assert ops[first].type == "mean_grad"
    rename_arg(ops[first], "logits@GRAD", "logits@GRAD@RENAME@0")
    p.op(
        "sum",
        {"X": ["logits@GRAD@RENAME@0"]},
        {"Out": ["logits@GRAD"]},
        role=BACKWARD,
        stage=0,
        chunk=0,
    )
    move_op(p, len(ops) - 1, first + 1)
    c = convert(p, vpp=2)
    assert c.op(first + 1).type == "sum"
    assert c.where(first + 1) == c.where(first) == (S1, 1)


def test_rule9_backward_outputs_take_their_ops_placement_first_writer_wins() -> None:
    p = running(backward=True)
    # A later backward op on layer 1's gradient also writes layer 2's weight gradient.
    p.op(
        "scale",
        {"X": ["DecoderLayer_1.w0@GRAD"]},
        {"Out": ["DecoderLayer_2.w0@GRAD"]},
        role=BACKWARD,
        stage=0,
    )
    c = convert(p, vpp=2)
    assert c.where(len(c.after.blocks[0].ops) - 1) == (S1, 0)
    assert c.var_where("DecoderLayer_1.w0@GRAD") == (S1, 0)
    assert c.var_where("DecoderLayer_2.w0@GRAD") == (S0, 1)  # its first writer's


# ---------------------------------------------------------------------------------
# Rule 10: optimizer ops


def test_rule10_op_with_a_param_input_takes_the_params_mesh_and_chunk() -> None:
    c = convert(running(backward=True, optimizer=True), vpp=2)
    sgd = {
        o.inputs[0].arguments[0]: i for i, o in enumerate(c.after.blocks[0].ops) if o.type == "sgd"
    }
    assert c.op(sgd["emb.w"]).inputs[0].parameter == "Param"
    # Paddle would leave chunk 0 on every optimizer op; vppctl follows the parameter.
    assert c.where(sgd["emb.w"]) == (S0, 0)
    assert c.where(sgd["DecoderLayer_1.w0"]) == (S1, 0)
    assert c.where(sgd["DecoderLayer_2.w1"]) == (S0, 1)
    assert c.where(sgd["DecoderLayer_3.w0"]) == (S1, 1)
    assert c.where(sgd["head.w"]) == (S1, 1)


def test_rule10_moments_and_other_outputs_follow_the_param() -> None:
    p = running(backward=True)
    p.var("lr", stage=0)
    p.var("m1", stage=1, chunk=0)  # layer 2's moment, on its old stage
    p.var("beta1_pow", stage=1, chunk=0)
    p.op(
        "adamw",
        {
            "Param": ["DecoderLayer_2.w0"],
            "Grad": ["DecoderLayer_2.w0@GRAD"],
            "LearningRate": ["lr"],
            "Moment1": ["m1"],
            "Beta1Pow": ["beta1_pow"],
        },
        {"ParamOut": ["DecoderLayer_2.w0"], "Moment1Out": ["m1"], "Beta1PowOut": ["beta1_pow"]},
        role=OPTIMIZE,
        stage=1,
    )
    c = convert(p, vpp=2)
    assert c.where(len(c.after.blocks[0].ops) - 1) == (S0, 1)
    assert c.var_where("m1") == (S0, 1)
    assert c.var_where("beta1_pow") == (S0, 1)
    assert c.var_where("lr") == (S0, 0)  # an input only: untouched


def test_rule10_clip_op_takes_its_first_input_on_a_stage_mesh() -> None:
    p = running(backward=True)
    p.msg.process_meshes.append(p.global_mesh)
    p.var("clip_scale", stage=-1)
    p.op(
        "elementwise_mul",
        {"X": ["clip_scale"], "Y": ["DecoderLayer_2.w0@GRAD"]},
        {"Out": ["DecoderLayer_2.w0@GRAD@CLIP"]},
        role=OPTIMIZE,
        stage=1,
    )
    c = convert(p, vpp=2)
    assert c.where(len(c.after.blocks[0].ops) - 1) == (S0, 1)
    assert c.var_where("DecoderLayer_2.w0@GRAD@CLIP") == (S0, 1)
    assert c.var_where("clip_scale") == ((0, 1), 0)


def test_rule10_optimizer_op_on_the_global_mesh_keeps_it_with_chunk_0() -> None:
    p = running(backward=True)
    p.msg.process_meshes.append(p.global_mesh)
    p.op(
        "sum",
        {"X": ["DecoderLayer_3.w0@GRAD", "DecoderLayer_2.w0@GRAD"]},
        {"Out": ["global_norm"]},
        role=OPTIMIZE,
        stage=-1,
        chunk=1,
    )
    c = convert(p, vpp=2)
    assert c.where(len(c.after.blocks[0].ops) - 1) == ((0, 1), 0)


@pytest.mark.parametrize("op_role", [4, 8, 16, 4096])
def test_rule10_ops_of_other_roles_keep_their_mesh_with_chunk_0(op_role: int) -> None:
    p = running(backward=True, optimizer=True)
    p.op("increment", {"X": ["lr"]}, {"Out": ["lr"]}, role=op_role, stage=1, chunk=1)
    c = convert(p, vpp=2)
    assert c.where(len(c.after.blocks[0].ops) - 1) == (S1, 0)


# ---------------------------------------------------------------------------------
# Rule 11: the plan, and nothing else changes


def test_rule11_plan_records_pp_vpp_regex_placement_mode_segments_and_version() -> None:
    c = convert(running(backward=True), vpp=2)
    plan = pb.ProgramDesc.FromString(c.data).pipeline_plan
    assert (plan.pp, plan.vpp, plan.seg_method) == (2, 2, "DecoderLayer")
    assert (plan.placement, plan.mode) == ("loop", "auto")
    assert plan.vppctl_version == __version__
    got = [
        (s.virtual_stage, s.stage, s.chunk, tuple(s.mesh.process_ids), list(s.layers))
        for s in plan.segments
    ]
    assert got == [
        (0, 0, 0, S0, ["DecoderLayer"]),
        (1, 1, 0, S1, ["DecoderLayer_1"]),
        (2, 0, 1, S0, ["DecoderLayer_2"]),
        (3, 1, 1, S1, ["DecoderLayer_3"]),
    ]


def test_rule11_plan_op_ranges_cover_the_forward_ops_in_segment_order() -> None:
    c = convert(running(backward=True, optimizer=True), vpp=2)
    segs = c.plan.segments
    assert segs[0].op_begin == 0
    for a, b in zip(segs, segs[1:]):
        assert a.op_end == b.op_begin
    assert segs[-1].op_end == LOSS + 1  # one past the last forward op
    for k, s in enumerate(segs):
        assert s.op_begin <= layer_op(k) and layer_op(k, 1) < s.op_end
        for i in range(s.op_begin, s.op_end):
            assert c.where(i)[1] == s.chunk


def test_rule11_plan_records_manual_mode() -> None:
    c = convert(layered([0, 1, 0, 1]), vpp=2)
    assert c.plan.mode == "manual"
    assert [(s.stage, s.chunk) for s in c.plan.segments] == [(0, 0), (1, 0), (0, 1), (1, 1)]


def test_rule11_only_meshes_chunks_and_the_plan_change(sample_bytes: dict) -> None:
    data = sample_bytes[(8, 4)]
    c = convert(data, vpp=2)
    assert c.result.ops_changed > 0
    assert (
        without_placements(c.before).SerializeToString()
        == without_placements(c.after).SerializeToString()
    )


def test_rule11_unchanged_ops_and_vars_are_byte_identical(sample_bytes: dict) -> None:
    c = convert(sample_bytes[(8, 4)], vpp=2)
    same_ops = 0
    for a, b in zip(c.before.blocks[0].ops, c.after.blocks[0].ops):
        if op_where(a) == op_where(b):
            assert a.SerializeToString() == b.SerializeToString()
            same_ops += 1
    assert same_ops > 0


def test_rule11_program_already_in_its_final_layout_is_byte_identical_but_for_the_plan() -> None:
    data = layered([0, 1], backward=True, optimizer=True).bytes()
    c = convert(data, vpp=1)
    assert c.result.ops_changed == 0 and c.result.vars_changed == 0
    after = pb.ProgramDesc.FromString(c.data)
    assert after.HasField("pipeline_plan")
    after.ClearField("pipeline_plan")
    assert after.SerializeToString() == data
    assert c.data.startswith(data)  # the plan is appended as one field; nothing else moves


def _unknown(field: int, value: int) -> bytes:
    """A varint field protobuf does not know, as wire bytes."""
    out = bytearray()
    for n in (field << 3, value):
        while True:
            b = n & 0x7F
            n >>= 7
            out.append(b | (0x80 if n else 0))
            if not n:
                break
    return bytes(out)


def test_rule11_unknown_fields_survive_on_changed_and_unchanged_messages() -> None:
    p = running(backward=True)
    ops, vars_ = p.msg.blocks[0].ops, p.msg.blocks[0].vars
    moved, kept = layer_op(2), layer_op(0)
    tags = {
        "moved op": _unknown(777, 1),
        "kept op": _unknown(777, 2),
        "moved op dist attr": _unknown(777, 3),
        "moved var": _unknown(777, 4),
        "program": _unknown(777, 5),
        "block": _unknown(777, 6),
    }
    ops[moved].MergeFromString(tags["moved op"])
    ops[kept].MergeFromString(tags["kept op"])
    ops[moved].dist_attr.MergeFromString(tags["moved op dist attr"])
    w = next(v for v in vars_ if v.name == "DecoderLayer_2.w0")
    w.MergeFromString(tags["moved var"])
    p.msg.blocks[0].MergeFromString(tags["block"])
    p.msg.MergeFromString(tags["program"])
    c = convert(p, vpp=2)
    assert c.where(moved) == (S0, 1)
    out = c.after
    assert tags["moved op"] in out.blocks[0].ops[moved].SerializeToString()
    assert tags["kept op"] in out.blocks[0].ops[kept].SerializeToString()
    assert tags["moved op dist attr"] in out.blocks[0].ops[moved].dist_attr.SerializeToString()
    assert tags["moved var"] in find_var(out, "DecoderLayer_2.w0").SerializeToString()
    assert c.var_where("DecoderLayer_2.w0") == (S0, 1)
    for name in ("block", "program"):
        assert tags[name] in c.data, name


def test_rule11_conversion_counts_what_changed() -> None:
    c = convert(running(backward=True, optimizer=True), vpp=2)
    ops_changed = sum(
        op_where(a) != op_where(b) for a, b in zip(c.before.blocks[0].ops, c.after.blocks[0].ops)
    )
    vars_changed = sum(
        a.dist_attr != b.dist_attr for a, b in zip(c.before.blocks[0].vars, c.after.blocks[0].vars)
    )
    assert c.result.ops_changed == ops_changed > 0
    assert c.result.vars_changed == vars_changed > 0


def test_forward_backward_and_optimizer_roles_are_recognised() -> None:
    # Guards the test builder: the running example has the roles the rules talk about.
    p = running(backward=True, optimizer=True)
    roles = [role_of(o) for o in p.msg.blocks[0].ops]
    assert roles[EMB] == FORWARD and roles[LOSS] == 256 and roles[LOSS_GRAD_OP] == LOSS_GRAD
    assert BACKWARD in roles and OPTIMIZE in roles
    assert p.msg.blocks[0].ops[HEAD].struct_name == "/Model/Head/"
