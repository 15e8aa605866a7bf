"""Compare two exports of one program op by op: Paddle's VPP answer against vppctl's.

Used by the tests against real Paddle (tests/paddle_bridge/) and by the tests against
Paddle outputs checked in under tests/paddle_reference/ (which need no Paddle).
"""

from __future__ import annotations

from typing import Any

from vppctl import program_pb2 as pb

OP_ROLE_OPTIMIZE = 0x0002  # paddle OpRole.Optimize


def _role(op: pb.OpDesc) -> int:
    for attr in op.attrs:
        if attr.name == "op_role":
            return int(attr.i)
    return 0


def _mesh(attr: Any) -> tuple[int, ...] | None:
    return tuple(attr.process_mesh.process_ids) if attr.HasField("process_mesh") else None


def _optimizer_only_vars(block: pb.BlockDesc) -> set[str]:
    """Variables that only optimizer-phase ops read or write."""
    roles: dict[str, set[bool]] = {}
    for op in block.ops:
        optimizer = bool(_role(op) & OP_ROLE_OPTIMIZE)
        for slot in list(op.inputs) + list(op.outputs):
            for name in slot.arguments:
                roles.setdefault(name, set()).add(optimizer)
    return {name for name, kinds in roles.items() if kinds == {True}}


def compare_annotations(
    expected: pb.ProgramDesc, actual: pb.ProgramDesc, *, optimizer_chunks: bool = False
) -> list[str]:
    """Every mesh / chunk id difference between two exports of the same program.

    ``expected`` is Paddle's answer, ``actual`` ours. Ops are matched by block and
    index, variables by block and name; an op's input/output tensor meshes are
    compared too. Optimizer-phase ops and the variables only they use are compared
    by mesh only, unless ``optimizer_chunks``.
    """
    diffs: list[str] = []
    if len(expected.blocks) != len(actual.blocks):
        diffs.append(f"block count: Paddle {len(expected.blocks)} vs ours {len(actual.blocks)}")
    for eb, ab in zip(expected.blocks, actual.blocks, strict=False):
        if len(eb.ops) != len(ab.ops):
            diffs.append(f"block {eb.idx}: op count Paddle {len(eb.ops)} vs ours {len(ab.ops)}")
        for i, (eo, ao) in enumerate(zip(eb.ops, ab.ops, strict=False)):
            where = f"block {eb.idx} op {i} {eo.type}"
            if eo.type != ao.type:
                diffs.append(f"{where}: type Paddle {eo.type} vs ours {ao.type}")
                continue
            optimizer = not optimizer_chunks and bool(_role(eo) & OP_ROLE_OPTIMIZE)
            em, am = _mesh(eo.dist_attr), _mesh(ao.dist_attr)
            if em != am:
                diffs.append(f"{where}: mesh Paddle {em} vs ours {am}")
            ec, ac = eo.dist_attr.chunk_id, ao.dist_attr.chunk_id
            if not optimizer and ec != ac:
                diffs.append(f"{where}: chunk Paddle {ec} vs ours {ac}")
            for side in ("input", "output"):
                e_map = {
                    e.name: _mesh(e.tensor_dist_attr)
                    for e in getattr(eo.dist_attr, f"{side}_dist_attrs")
                }
                a_map = {
                    e.name: _mesh(e.tensor_dist_attr)
                    for e in getattr(ao.dist_attr, f"{side}_dist_attrs")
                }
                for name, mesh in sorted(e_map.items()):
                    if a_map.get(name, "missing") != mesh:
                        diffs.append(
                            f"{where}: {side} {name} mesh Paddle {mesh} vs ours "
                            f"{a_map.get(name, 'missing')}"
                        )
        optimizer_only = set() if optimizer_chunks else _optimizer_only_vars(eb)
        a_vars = {v.name: v for v in ab.vars}
        for ev in sorted(eb.vars, key=lambda v: v.name):
            where = f"block {eb.idx} var {ev.name}"
            av = a_vars.get(ev.name)
            if av is None:
                diffs.append(f"{where}: missing in ours")
                continue
            em, am = _mesh(ev.dist_attr), _mesh(av.dist_attr)
            if em != am:
                diffs.append(f"{where}: mesh Paddle {em} vs ours {am}")
            ec, ac = ev.dist_attr.chunk_id, av.dist_attr.chunk_id
            if ev.name not in optimizer_only and ec != ac:
                diffs.append(f"{where}: chunk Paddle {ec} vs ours {ac}")
    return diffs


def report(diffs: list[str], limit: int = 300) -> str:
    shown = diffs[:limit]
    more = f"\n... and {len(diffs) - limit} more" if len(diffs) > limit else ""
    return f"{len(diffs)} differences:\n" + "\n".join(shown) + more
