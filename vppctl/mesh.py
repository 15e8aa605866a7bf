"""Process meshes as plain values, and the stage meshes of a program (rule 1).

Two meshes are equal when shape and process ids are equal; dim names are
ignored (Paddle's `ProcessMesh.__eq__` compares the same two things).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# Three forms of a mesh, each with its own name:
#   Mesh     a value (shape, process ids, dim names), in plans and messages;
#   MeshId   an int, a mesh class (equal meshes share one) in the index's side tables,
#            NO_MESH for "no mesh", the only sentinel outside the protobuf layer;
#   raw      a serialized ProcessMesh (bytes), only in vppctl.program and the index.
MeshId = int
NO_MESH: MeshId = -1


@dataclass(frozen=True)
class Mesh:
    shape: tuple[int, ...]
    process_ids: tuple[int, ...]
    dim_names: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """What mesh equality compares."""
        return self.shape, self.process_ids

    def problem(self) -> str | None:
        """Why this is not a usable mesh, or None."""
        if not self.process_ids:
            return "it has no process ids"
        if any(p < 0 for p in self.process_ids):
            return "it has negative process ids"
        if len(set(self.process_ids)) != len(self.process_ids):
            return "it repeats process ids"
        if self.shape and (
            any(d <= 0 for d in self.shape) or math.prod(self.shape) != len(self.process_ids)
        ):
            return f"its shape {list(self.shape)} does not match its {len(self.process_ids)} ids"
        return None

    def __str__(self) -> str:
        return format_ids(self.process_ids)


def format_ids(ids: Sequence[int]) -> str:
    """Compact process ids: [0-3] for a run, [0,2,5] otherwise."""
    if len(ids) > 2 and list(ids) == list(range(ids[0], ids[0] + len(ids))):
        return f"[{ids[0]}-{ids[-1]}]"
    return "[" + ",".join(map(str, ids)) + "]"


_SHOWN_IDS = 8  # process ids a message shows of a mesh that is no run


def mesh_text(mesh: Mesh) -> str:
    """How messages show a mesh: its process ids, compact (`[0-3]`, `[0,2,5]`, the first few
    of a long list that is no run), and its shape when it is not the flat one (meshes with
    the same ids and different shapes differ): `[0-3] (shape [2, 2])`."""
    ids = mesh.process_ids
    shown = str(mesh)
    if len(ids) > _SHOWN_IDS and "," in shown:  # a long list that is no run
        shown = "[" + ",".join(map(str, ids[:_SHOWN_IDS])) + ",...]"
    flat = mesh.shape == (len(ids),)
    return shown if flat else f"{shown} (shape {list(mesh.shape[:_SHOWN_IDS])})"


def stages_and_globals(meshes: Sequence[Mesh]) -> tuple[list[Mesh], list[Mesh]]:
    """Rule 1: (stage meshes in order, dropped global meshes).

    De-duplicate by equality keeping the first; if some meshes are proper subsets
    of all process ids, every mesh that covers all process ids is a "global" mesh
    and is dropped.
    """
    unique: list[Mesh] = []
    seen: set[tuple[tuple[int, ...], tuple[int, ...]]] = set()
    for m in meshes:
        if m.key not in seen:
            seen.add(m.key)
            unique.append(m)
    everyone = set().union(*(m.process_ids for m in unique)) if unique else set()
    covers_all = [set(m.process_ids) == everyone for m in unique]
    if not any(covers_all) or all(covers_all):
        return unique, []
    return (
        [m for m, g in zip(unique, covers_all) if not g],
        [m for m, g in zip(unique, covers_all) if g],
    )


def wide_meshes(meshes: Sequence[Mesh], stage_ids: Sequence[int]) -> set[int]:
    """Ids of the meshes holding every stage's ranks (a global mesh, or the world an earlier
    program in the same process left): the only other meshes non-forward, non-backward ops
    may run on."""
    everyone = set().union(*(meshes[m].process_ids for m in stage_ids))
    return {i for i, mesh in enumerate(meshes) if everyone <= set(mesh.process_ids)}
