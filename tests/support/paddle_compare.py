"""Compare two exports of one program op by op: Paddle's VPP answer against vppctl's.

Used by the tests against real Paddle (tests/paddle/) and by the tests against
Paddle outputs checked in under tests/data/paddle_reference/ (which need no Paddle).

What is compared, per matched op: the op's mesh and chunk id, and the mesh and dims
mapping of every per-input/output tensor dist attr; per variable (by block and name): mesh,
chunk id and dims mapping. Optimizer-phase ops and the variables only they use are compared
without their chunk id unless asked (Paddle leaves optimizer chunk ids at 0, vppctl gives
them their parameter's chunk).

Two things are not compared, on purpose:

* blocks that no op reaches through a `sub_block` attribute from block 0 (the recompute
  pass's scratch block): they are never executed, and in Paddle's memory their ops share
  the dist attrs of forward ops, so an export shows the forward ops' values there;
* dependency `nop` ops (from the recompute pass) present in one program only: Paddle
  inserts one only where the two ops it orders share a mesh, so its VPP build has fewer
  than the plain build vppctl converts. Ops are aligned around them; `Comparison` lists
  them (`only_ours`, `only_paddle`) and the ones only Paddle has count as differences.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from vppctl.program._proto import program_pb2 as pb

OP_ROLE_BACKWARD = 0x0001
OP_ROLE_OPTIMIZE = 0x0002  # paddle OpRole.Optimize
NOP = "nop"


def _role(op: pb.OpDesc) -> int:
    for attr in op.attrs:
        if attr.name == "op_role":
            return int(attr.i)
    return 0


def _attr_text(op: pb.OpDesc, name: str) -> str:
    for attr in op.attrs:
        if attr.name == name:
            return str(attr.s)
    return ""


def _mesh(attr: Any) -> tuple[int, ...] | None:
    return tuple(attr.process_mesh.process_ids) if attr.HasField("process_mesh") else None


def _args(op: pb.OpDesc) -> tuple[tuple[str, ...], tuple[str, ...]]:
    ins = tuple(a for slot in op.inputs for a in slot.arguments)
    outs = tuple(a for slot in op.outputs for a in slot.arguments)
    return ins, outs


def reachable_blocks(program: pb.ProgramDesc) -> set[int]:
    """Block 0 and every block an op of a reachable block names in a sub_block attribute."""
    seen = {0}
    stack = [0]
    while stack:
        b = stack.pop()
        if b >= len(program.blocks):
            continue
        for op in program.blocks[b].ops:
            for attr in op.attrs:
                subs = list(attr.blocks_idx)
                if attr.HasField("block_idx"):
                    subs.append(attr.block_idx)
                for s in subs:
                    if s not in seen:
                        seen.add(s)
                        stack.append(s)
    return seen


def _optimizer_only_vars(block: pb.BlockDesc) -> set[str]:
    """Variables that only optimizer-phase ops read or write."""
    roles: dict[str, set[bool]] = {}
    for op in block.ops:
        optimizer = bool(_role(op) & OP_ROLE_OPTIMIZE)
        for slot in list(op.inputs) + list(op.outputs):
            for name in slot.arguments:
                roles.setdefault(name, set()).add(optimizer)
    return {name for name, kinds in roles.items() if kinds == {True}}


@dataclass(frozen=True)
class Difference:
    """One field on which vppctl's program differs from Paddle's answer."""

    block: int
    what: str  # "mesh", "chunk", "input X mesh", "output Y dims_mapping", "type", ...
    paddle: Any
    ours: Any
    op: int | None = None  # op index in Paddle's program (None: a variable)
    op_type: str = ""
    role: int = 0
    struct_name: str = ""
    namescope: str = ""
    var: str = ""

    def __str__(self) -> str:
        if self.op is None:
            where = f"block {self.block} var {self.var}"
        else:
            where = f"block {self.block} op {self.op} {self.op_type}"
        return f"{where}: {self.what} Paddle {self.paddle} vs ours {self.ours}"

    @property
    def kind(self) -> str:
        """The op's phase: forward, backward, optimizer, other (vars: var)."""
        if self.op is None:
            return "var"
        if self.role & OP_ROLE_BACKWARD:
            return "backward"
        if self.role & OP_ROLE_OPTIMIZE:
            return "optimizer"
        return "forward" if self.role in (0, 256) else "other"


@dataclass
class Comparison:
    differences: list[Difference] = field(default_factory=list)
    #: (block, op index) of nop ops only vppctl's program has, with their matched
    #: neighbours: the index in vppctl's program
    only_ours: list[tuple[int, int]] = field(default_factory=list)
    only_paddle: list[tuple[int, int]] = field(default_factory=list)
    skipped_blocks: tuple[int, ...] = ()
    matched_ops: int = 0
    compared_vars: int = 0


def _align(eb: pb.BlockDesc, ab: pb.BlockDesc) -> Iterator[tuple[int | None, int | None]]:
    """Pairs (Paddle index, our index) of the ops of two versions of one block; a nop one
    side has and the other lacks is paired with None. Any other mismatch pairs the two ops
    anyway (the caller reports the type)."""
    i = j = 0
    e_ops, a_ops = eb.ops, ab.ops
    while i < len(e_ops) or j < len(a_ops):
        e = e_ops[i] if i < len(e_ops) else None
        a = a_ops[j] if j < len(a_ops) else None
        if (
            e is not None
            and a is not None
            and e.type == a.type
            and (e.type != NOP or _args(e) == _args(a))
        ):
            yield i, j
            i, j = i + 1, j + 1
            continue
        if a is not None and a.type == NOP:
            yield None, j
            j += 1
        elif e is not None and e.type == NOP:
            yield i, None
            i += 1
        else:
            yield (i if e is not None else None), (j if a is not None else None)
            i, j = i + (e is not None), j + (a is not None)


def compare_programs(
    expected: pb.ProgramDesc, actual: pb.ProgramDesc, *, optimizer_chunks: bool = False
) -> Comparison:
    """Every mesh / chunk id / dims mapping difference between two exports of one program.

    ``expected`` is Paddle's answer, ``actual`` ours (see the module docstring)."""
    result = Comparison()
    reach = reachable_blocks(expected)
    result.skipped_blocks = tuple(b.idx for b in expected.blocks if b.idx not in reach)
    if len(expected.blocks) != len(actual.blocks):
        result.differences.append(
            Difference(0, "block count", len(expected.blocks), len(actual.blocks))
        )
    for eb, ab in zip(expected.blocks, actual.blocks, strict=False):
        if eb.idx not in reach:
            continue
        _compare_ops(eb, ab, result, optimizer_chunks)
        _compare_vars(eb, ab, result, optimizer_chunks)
    return result


def _compare_ops(
    eb: pb.BlockDesc, ab: pb.BlockDesc, result: Comparison, optimizer_chunks: bool
) -> None:
    for i, j in _align(eb, ab):
        if i is None:
            assert j is not None
            if ab.ops[j].type == NOP:
                result.only_ours.append((ab.idx, j))
            else:
                result.differences.append(
                    Difference(ab.idx, "op", "missing", "present", op=j, op_type=ab.ops[j].type)
                )
            continue
        eo = eb.ops[i]

        def diff(what: str, paddle: Any, ours: Any, i: int = i, eo: pb.OpDesc = eo) -> None:
            result.differences.append(
                Difference(
                    eb.idx,
                    what,
                    paddle,
                    ours,
                    op=i,
                    op_type=eo.type,
                    role=_role(eo),
                    struct_name=eo.struct_name,
                    namescope=_attr_text(eo, "op_namescope"),
                )
            )

        if j is None:
            result.only_paddle.append((eb.idx, i))
            diff("op", "present", "missing")
            continue
        ao = ab.ops[j]
        if eo.type != ao.type:
            diff("type", eo.type, ao.type)
            continue
        result.matched_ops += 1
        optimizer = not optimizer_chunks and bool(_role(eo) & OP_ROLE_OPTIMIZE)
        em, am = _mesh(eo.dist_attr), _mesh(ao.dist_attr)
        if em != am:
            diff("mesh", em, am)
        ec, ac = eo.dist_attr.chunk_id, ao.dist_attr.chunk_id
        if not optimizer and ec != ac:
            diff("chunk", ec, ac)
        for side in ("input", "output"):
            e_map = {
                e.name: e.tensor_dist_attr for e in getattr(eo.dist_attr, f"{side}_dist_attrs")
            }
            a_map = {
                e.name: e.tensor_dist_attr for e in getattr(ao.dist_attr, f"{side}_dist_attrs")
            }
            for name, e_attr in sorted(e_map.items()):
                a_attr = a_map.get(name)
                if a_attr is None:
                    diff(f"{side} {name}", "present", "missing")
                    continue
                if _mesh(e_attr) != _mesh(a_attr):
                    diff(f"{side} {name} mesh", _mesh(e_attr), _mesh(a_attr))
                if list(e_attr.dims_mapping) != list(a_attr.dims_mapping):
                    diff(
                        f"{side} {name} dims_mapping",
                        list(e_attr.dims_mapping),
                        list(a_attr.dims_mapping),
                    )


def _compare_vars(
    eb: pb.BlockDesc, ab: pb.BlockDesc, result: Comparison, optimizer_chunks: bool
) -> None:
    optimizer_only = set() if optimizer_chunks else _optimizer_only_vars(eb)
    a_vars = {v.name: v for v in ab.vars}
    for ev in sorted(eb.vars, key=lambda v: v.name):

        def diff(what: str, paddle: Any, ours: Any, name: str = ev.name) -> None:
            result.differences.append(Difference(eb.idx, what, paddle, ours, var=name))

        av = a_vars.get(ev.name)
        if av is None:
            diff("var", "present", "missing")
            continue
        result.compared_vars += 1
        em, am = _mesh(ev.dist_attr), _mesh(av.dist_attr)
        if em != am:
            diff("mesh", em, am)
        ec, ac = ev.dist_attr.chunk_id, av.dist_attr.chunk_id
        if ev.name not in optimizer_only and ec != ac:
            diff("chunk", ec, ac)
        if list(ev.dist_attr.dims_mapping) != list(av.dist_attr.dims_mapping):
            diff("dims_mapping", list(ev.dist_attr.dims_mapping), list(av.dist_attr.dims_mapping))


def compare_annotations(
    expected: pb.ProgramDesc, actual: pb.ProgramDesc, *, optimizer_chunks: bool = False
) -> list[str]:
    """`compare_programs`' differences as text lines (empty: the programs agree)."""
    return [
        str(d)
        for d in compare_programs(expected, actual, optimizer_chunks=optimizer_chunks).differences
    ]


def report(diffs: list[str], limit: int = 300) -> str:
    shown = diffs[:limit]
    more = f"\n... and {len(diffs) - limit} more" if len(diffs) > limit else ""
    return f"{len(diffs)} differences:\n" + "\n".join(shown) + more


def transplant(expected: pb.ProgramDesc, onto: pb.ProgramDesc) -> pb.ProgramDesc:
    """`onto` (a plain export) carrying `expected`'s dist attrs (Paddle's answer) on every op
    and variable the two share (aligned as `compare_programs` aligns them; blocks no op
    reaches and nops only `onto` has keep their own).

    This is how Paddle's own answer is applied to a plain build when the two programs
    differ by the recompute pass's dependency nops."""
    out = pb.ProgramDesc()
    out.CopyFrom(onto)
    reach = reachable_blocks(expected)
    for eb, ob in zip(expected.blocks, out.blocks, strict=False):
        if eb.idx not in reach:
            continue
        for i, j in _align(eb, ob):
            if i is not None and j is not None and eb.ops[i].type == ob.ops[j].type:
                ob.ops[j].dist_attr.CopyFrom(eb.ops[i].dist_attr)
        e_vars = {v.name: v for v in eb.vars}
        for v in ob.vars:
            e = e_vars.get(v.name)
            if e is not None and e.HasField("dist_attr"):
                v.dist_attr.CopyFrom(e.dist_attr)
    return out
