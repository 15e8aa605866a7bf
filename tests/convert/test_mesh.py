"""Rule 1 of docs/conversion.md: the stage meshes of a program and pp (vppctl/mesh.py, and
the engine's refusals of meshes it cannot convert, vppctl/engine/precheck.py). The running
example is tests/support/rulekit.py's.
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
    refusal,
    running,
    shows_stages,
)

from vppctl.program._proto import program_pb2 as pb

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
