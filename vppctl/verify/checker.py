"""Checker: what every check shares while it runs: the program's index, what it is checked
against, the violations found so far, and the facts several rules read (memoised).
"""

from __future__ import annotations

from array import array

from vppctl.engine import (
    ProgramIndex,
)
from vppctl.mesh import NO_MESH, mesh_text
from vppctl.plan import virtual_stage
from vppctl.verify.rules import Cause, Expectation, Violation


class Checker:
    def __init__(self, index: ProgramIndex, expect: Expectation) -> None:
        self.index, self.expect = index, expect
        self.out: list[Violation] = []
        self.stage_of = {m: s for s, m in enumerate(expect.stage_mesh_ids)}
        self.executed = executed_blocks(index)
        self._first_read: FirstOps | None = None
        self._first_written: FirstOps | None = None
        self._vstages: list[int | None] | None = None  # per global-block op, on first use

    def add(self, cause: Cause, block: int, op: int, message: str) -> None:
        t = self.index.op_type(block, op) if op >= 0 else ""
        self.out.append(Violation(cause, block, op, t, message))

    def op_vstage(self, op: int) -> int | None:
        """Virtual stage of a global-block op from its mesh and chunk, if it has one."""
        if self._vstages is None:
            # One entry per (mesh, chunk) pair the ops use: never more than the ops
            # (20,000 stage meshes times 4,096 chunks must not be a table).
            e, get = self.expect, self.stage_of.get
            block = self.index.global_block
            pairs = list(zip(block.op_mesh, block.ops.chunk))
            of: dict[tuple[int, int], int | None] = {}
            for m, chunk in set(pairs):
                s = get(m)
                if s is None or not 0 <= chunk < e.vpp:
                    of[m, chunk] = None
                else:
                    of[m, chunk] = virtual_stage(s, chunk, e.pp, e.placement)
            self._vstages = list(map(of.__getitem__, pairs))
        return self._vstages[op]

    def valid_chunk(self, chunk: int) -> bool:
        """A chunk id V001 and V002 accept (other rules leave the rest to them)."""
        return 0 <= chunk < self.expect.vpp

    def mesh_str(self, mesh: int) -> str:
        if mesh == NO_MESH:
            return "no mesh"
        return mesh_text(self.index.meshes[mesh])

    def where(self, block: int, op: int) -> str:
        """An op's placement as messages show it: `[1] chunk 0` (`[1] without a chunk id`:
        a PIR op Paddle's completion has not placed)."""
        bi = self.index.blocks[block]
        return self.placed(bi.op_mesh[op], bi.ops.chunk[op])

    def placed(self, mesh: int, chunk: int) -> str:
        """A mesh and chunk id as messages show them (see `where`)."""
        return f"{self.mesh_str(mesh)} {chunk_text(chunk)}"

    def first_read(self) -> FirstOps:
        """Variable -> the first global-block op that reads it, a sub-block's reads counted
        at the op running it (memoised: V011 and V018 share it)."""
        if self._first_read is None:
            o = self.index.global_block.ops
            self._first_read = FirstOps(self.index.n_vars, o.in_var, o.in_off)
            read_in_sub_blocks(self.index, self._first_read)
        return self._first_read

    def first_written(self) -> FirstOps:
        """Variable -> the first global-block op that lists it as an output (memoised)."""
        if self._first_written is None:
            o = self.index.global_block.ops
            self._first_written = FirstOps(self.index.n_vars, o.out_var, o.out_off)
        return self._first_written


def executed_blocks(index: ProgramIndex) -> set[int]:
    """Block 0 and every block an op of an executed block names as its sub_block. Paddle
    runs no other block: the recompute pass's scratch block, which no op names, holds
    copies of forward ops that are never executed."""
    seen = {0}
    todo = [0]
    n = len(index.blocks)
    while todo:
        for subs in index.blocks[todo.pop()].ops.sub_blocks.values():
            for b in subs:
                if 0 <= b < n and b not in seen:
                    seen.add(b)
                    todo.append(b)
    return seen


class FirstOps:
    """Variable -> the first op that lists it, from flattened per-op argument columns
    (`in_var`/`in_off` or `out_var`/`out_off`), held as one 4-byte entry per variable of
    the program (never a dict: at 100k ops the two dicts of first positions held 38 MB,
    46 MB while built). Ids below 0 (names that resolve to no variable) are not kept."""

    NONE = -1

    def __init__(self, n_vars: int, var: array[int], off: array[int]) -> None:
        first = self.first = array("i", [self.NONE]) * n_vars
        # Ops from the last to the first, so that the earliest op is written last; each
        # op's arguments taken as one slice of the column.
        for op in range(len(off) - 2, -1, -1):
            for v in var[off[op] : off[op + 1]]:
                if v >= 0:
                    first[v] = op

    def get(self, v: int, default: int) -> int:
        op = self.first[v] if v >= 0 else self.NONE
        return default if op == self.NONE else op

    def set(self, v: int, op: int) -> None:
        self.first[v] = op


def read_in_sub_blocks(index: ProgramIndex, first_read: FirstOps) -> None:
    """Count a sub-block's variables (nested ones included) as read at the earliest
    global-block op that runs it. Ops are taken in order and every block is walked
    once, by the first op reaching it: linear however the sub-blocks nest or are shared."""
    seen = {0}
    for op, subs in sorted(index.global_block.ops.sub_blocks.items()):
        todo = list(subs)  # a stack, not recursion: sub-blocks may nest thousands deep
        while todo:
            b = todo.pop()
            if not 0 <= b < len(index.blocks) or b in seen:
                continue
            seen.add(b)
            bi = index.blocks[b]
            for v in (*bi.ops.in_var, *bi.ops.out_var):
                if v >= 0 and first_read.get(v, op) >= op:
                    first_read.set(v, op)
            for more in bi.ops.sub_blocks.values():
                todo.extend(more)


def chunk_text(chunk: int) -> str:
    """`chunk 1`, or `without a chunk id` for -1 (none: PIR's, before Paddle's completion)."""
    return f"chunk {chunk}" if chunk >= 0 else "without a chunk id"
