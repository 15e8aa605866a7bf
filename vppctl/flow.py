"""Flow: facts about the forward data flow of a program, from its index.

Which forward op first writes each variable, and how many variables travel
between stages in the forward pass. Both depend on the program's structure
and placements only; the verifier's rules and the reports read them.
"""

from __future__ import annotations

from collections.abc import Sequence

from vppctl.index import ProgramIndex
from vppctl.mesh import MeshId


def first_forward_writers(index: ProgramIndex) -> dict[int, int]:
    """Variable -> the first forward op of the global block that writes it (memoised: it
    depends on the program's structure only, not on placements)."""
    if index.first_writers is None:
        block = index.global_block
        o = block.ops
        out: dict[int, int] = {}
        setdefault = out.setdefault
        for op in block.forward_ops:
            for v in o.out_var[o.out_off[op] : o.out_off[op + 1]]:
                if v >= 0:
                    setdefault(v, op)
        index.first_writers = out
    return index.first_writers


def cross_stage_edges(index: ProgramIndex, stage_mesh_ids: Sequence[MeshId]) -> int:
    """Variables that travel between stages in the forward pass, per micro-batch.

    Counted as distinct (variable, consuming stage) pairs where a forward op on
    one stage reads a variable first written by a forward op on another.
    """
    block = index.global_block
    stage_of = {m: s for s, m in enumerate(stage_mesh_ids)}
    producer = first_forward_writers(index)
    edges: set[tuple[int, int]] = set()
    meshes = block.op_mesh
    for op in block.forward_ops:
        dst = stage_of.get(meshes[op])
        if dst is None:
            continue
        for v in block.inputs(op):
            p = producer.get(v, -1) if v >= 0 else -1
            if 0 <= p < op and stage_of.get(meshes[p], dst) != dst:
                edges.add((v, dst))
    return len(edges)
