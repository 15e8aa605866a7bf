"""Moves: where each parameter lived before a conversion and where it goes, with its bytes.

This module's one job is the checkpoint's view of a conversion: every parameter of the
program, once, with its (stage, chunk) in the input (the plain-PP program's, chunk 0) and
in the converted program, and its bytes, so that a checkpoint saved by the old layout can
be remapped to the new one and nothing is re-initialised. A parameter's place is its own
variable's mesh and chunk id (what Paddle's auto-parallel saves it by), read from the
index's side tables before and after the conversion writes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vppctl.engine.cost import param_size
from vppctl.engine.index import ProgramIndex
from vppctl.mesh import MeshId

# A parameter's place: its stage (None: its mesh is no stage's, e.g. a mesh spanning
# every stage) and its chunk.
Place = tuple[int | None, int]


@dataclass(frozen=True)
class Move:
    """One parameter: its name, block, bytes, and its place before and after."""

    name: str
    block: int
    bytes: int
    before: Place
    after: Place

    @property
    def moved(self) -> bool:
        return self.before != self.after


def parameter_vars(index: ProgramIndex) -> list[int]:
    """Every parameter variable of the program, once, in block and declaration order."""
    out: list[int] = []
    for bi in index.blocks:
        out += [bi.var_base + pos for pos, flag in enumerate(bi.vars.is_parameter) if flag]
    return out


def parameter_places(
    index: ProgramIndex, stages: Sequence[MeshId], params: Sequence[int]
) -> list[Place]:
    """Each parameter's (stage, chunk) as the index holds it now (a chunk id of -1, none
    set, is chunk 0: the plain-PP program's one chunk)."""
    stage_of = {m: s for s, m in enumerate(stages)}
    return [(stage_of.get(index.var_mesh[v]), max(index.var_chunks[v], 0)) for v in params]


def parameter_bytes(index: ProgramIndex, v: int) -> int:
    """A parameter's bytes: its elements (an unknown dimension counts 1) times its element
    size (0 for a variable that is no tensor), from the one read of its type the splits
    made too (`param_size`)."""
    n, size = param_size(index, v)
    return n * size


def parameter_moves(
    index: ProgramIndex, params: Sequence[int], before: Sequence[Place], after: Sequence[Place]
) -> tuple[Move, ...]:
    """Every parameter's move, in `params`' order."""
    return tuple(
        Move(
            index.var_name_bytes(v).decode("utf-8", errors="replace"),
            index.blocks[index.var_block[v]].idx,
            parameter_bytes(index, v),
            old,
            new,
        )
        for v, old, new in zip(params, before, after)
    )
