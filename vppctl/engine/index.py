"""Index: one scan of a loaded program into integer side tables.

Ops are addressed as (block, op index); variables by a program-wide id (their
block's offset plus their position in the block); meshes by a mesh-class id
(equal meshes share one id). Nothing here holds one Python object per op.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import compress, count

from vppctl import progress
from vppctl.escape import printable
from vppctl.mesh import NO_MESH, Mesh, MeshId, stages_and_globals
from vppctl.program import (
    EMPTY_NAMES,
    EMPTY_VAR,
    FORWARD_ROLES,
    LOSS,
    LOSS_GRAD,
    NO_CHUNK_NAME,
    NO_VAR,
    SCOPE_VAR,
    OpColumns,
    Program,
    VarColumns,
    canonical_mesh,
    decode_mesh,
    op_arguments,
    program_meshes,
    scan_ops,
    scan_vars,
)


@dataclass
class BlockIndex:
    idx: int
    parent: int
    ops: OpColumns
    vars: VarColumns
    var_base: int  # program-wide id of this block's var 0
    op_mesh: array[int]  # mesh-class id per op, NO_MESH when it has none
    names: dict[bytes, int]  # var name -> program-wide var id (this block's own vars)
    forward_ops: list[int] = field(default_factory=list)  # forward ops, in order

    @property
    def n_ops(self) -> int:
        return len(self.ops)

    def inputs(self, op: int) -> array[int]:
        o = self.ops
        return o.in_var[o.in_off[op] : o.in_off[op + 1]]

    def outputs(self, op: int) -> array[int]:
        o = self.ops
        return o.out_var[o.out_off[op] : o.out_off[op + 1]]


@dataclass
class ProgramIndex:
    """Side tables of a whole program; see the module docstring."""

    program: Program
    blocks: list[BlockIndex]
    meshes: list[Mesh]  # mesh-class id -> a representative Mesh
    mesh_raw: list[bytes]  # mesh-class id -> serialized ProcessMesh to write (canonical)
    program_meshes: list[int]  # ProgramDesc.process_meshes, as class ids, in order
    var_block: array[int] = field(default_factory=lambda: array("q"))
    var_mesh: array[int] = field(default_factory=lambda: array("q"))  # mesh class per var
    var_chunks: array[int] = field(default_factory=lambda: array("q"))  # chunk per var, -1 none
    first_writers: dict[int, int] | None = None  # see flow.first_forward_writers
    elements: dict[int, int] = field(default_factory=dict)  # see cost.param_elements
    dtype_bytes: bytearray = field(default_factory=bytearray)  # per var; see cost.param_size
    problems: list[str] = field(default_factory=list)  # structural problems found

    @property
    def n_vars(self) -> int:
        return len(self.var_block)

    @property
    def global_block(self) -> BlockIndex:
        return self.blocks[0]

    def var_name_bytes(self, var: int) -> bytes:
        b = self.blocks[self.var_block[var]]
        return b.vars.name[var - b.var_base]

    def var_name(self, var: int) -> str:
        return display(self.var_name_bytes(var))

    def op_type(self, block: int, op: int) -> str:
        return display(self.blocks[block].ops.type[op])

    def op_label(self, block: int, op: int) -> str:
        """How messages name an op: `op #12 (matmul_v2)` or `block 1 op #3 (...)`."""
        where = f"op #{op}" if block == 0 else f"block {block} op #{op}"
        return f"{where} ({self.op_type(block, op)})"

    def add_mesh(self, mesh: Mesh, raw: bytes) -> int:
        cls = self._by_key.get(mesh.key)
        if cls is None:
            cls = self._by_key[mesh.key] = len(self.meshes)
            self.meshes.append(mesh)
            self.mesh_raw.append(raw)
        return cls

    def __post_init__(self) -> None:
        self._stages: tuple[list[int], list[int]] | None = None
        self._by_key: dict[tuple[tuple[int, ...], tuple[int, ...]], int] = {}

    def lookup(self, block: int, name: bytes) -> int:
        """The var id a name resolves to in `block` (own vars first, then ancestors)."""
        b: int = block
        while b >= 0:
            bi = self.blocks[b]
            v = bi.names.get(name)
            if v is not None:
                return v
            b = bi.parent
        if name in EMPTY_NAMES:
            return EMPTY_VAR
        return SCOPE_VAR if NO_CHUNK_NAME in name else NO_VAR

    def forward_var(self, v: int) -> int | None:
        """The forward variable whose gradient `v` is (`x` for `x@GRAD...`), if declared."""
        name = self.var_name_bytes(v)
        at = name.find(b"@GRAD")
        if at <= 0:
            return None
        f = self.lookup(self.var_block[v], name[:at])
        return f if f >= 0 else None

    def stage_mesh_ids(self) -> tuple[list[MeshId], list[MeshId]]:
        """Rule 1: (stage mesh classes in order, global mesh classes).

        Taken from `ProgramDesc.process_meshes`, or when that is empty from the
        global block's ops in order of first appearance. Besides the declared
        global meshes dropped by rule 1, any other mesh in use whose ranks are
        exactly all the stages' ranks is global too: Paddle builds such "world"
        meshes for gradient clipping after it has recorded its mesh list, so
        they are often missing from `process_meshes`.
        """
        if self._stages is None:
            order = self.program_meshes or _first_appearance(self.blocks[0].op_mesh)
            stages, globals_ = stages_and_globals([self.meshes[c] for c in order])
            by_key = {self.meshes[c].key: c for c in order}
            stage_ids = [by_key[m.key] for m in stages]
            global_ids = [by_key[m.key] for m in globals_]
            if len(stage_ids) > 1:
                everyone = set().union(*(self.meshes[c].process_ids for c in stage_ids))
                known = {*stage_ids, *global_ids}
                global_ids += [
                    c
                    for c, m in enumerate(self.meshes)
                    if c not in known
                    and len(m.process_ids) == len(everyone)
                    and set(m.process_ids) == everyone
                ]
            self._stages = (stage_ids, global_ids)
        return list(self._stages[0]), list(self._stages[1])


def display(name: bytes) -> str:
    """A name from the program as messages show it: one line, control characters escaped
    (`vppctl.escape`, the one escaping every printed name gets), bytes that are not
    UTF-8 as `\\xNN`."""
    return printable(name.decode("utf-8", "backslashreplace"))


def named(names: Sequence[bytes], part: bytes) -> list[int]:
    """Positions of the names containing `part`, searched in C a few thousand names at a
    time. Never all joined at once: a join holds an 80-byte buffer per name while it runs
    (150 MB for the 1.9M variables of a 1M-op program, which was a conversion's peak)."""
    found: list[int] = []
    for at in range(0, len(names), _NAMES_PER_SEARCH):
        piece = names[at : at + _NAMES_PER_SEARCH]
        if part in b"\n".join(piece):  # the names themselves decide: no match across two
            found.extend(at + i for i, name in enumerate(piece) if part in name)
    return found


_NAMES_PER_SEARCH = 4096


def _first_appearance(op_mesh: array[int]) -> list[int]:
    return [m for m in dict.fromkeys(op_mesh) if m != NO_MESH]


def build_index(program: Program) -> ProgramIndex:
    """Scan every block of `program` once into a ProgramIndex."""
    progress.phase("indexing", sum(len(block.ops) for block in program.blocks))
    index = ProgramIndex(program=program, blocks=[], meshes=[], mesh_raw=[], program_meshes=[])
    for raw in program_meshes(program.header):
        index.program_meshes.append(index.add_mesh(decode_mesh(raw), canonical_mesh(raw)))
    var_block = index.var_block
    for b, block in enumerate(program.blocks):
        vars_ = scan_vars(block, b)
        base = len(var_block)
        names = dict(zip(vars_.name, range(base, base + len(vars_))))
        var_block.extend(array("q", [b]) * len(vars_))
        index.blocks.append(
            BlockIndex(
                idx=b,
                parent=block.parent_idx,
                ops=OpColumns(),
                vars=vars_,
                var_base=base,
                op_mesh=array("q"),
                names=names,
            )
        )
        if len(names) != len(vars_):
            index.problems.append(f"block {b} declares a variable name twice")
        for empty in EMPTY_NAMES:  # "" and @EMPTY@ name no variable
            names.setdefault(empty, EMPTY_VAR)
    index.var_mesh = array("q")
    for bi in index.blocks:
        index.var_mesh.extend(_classes(index, bi.vars.mesh))
    for bi in index.blocks:
        index.var_chunks.extend(bi.vars.chunk)
    _scan_ops_in_scope(index, program)
    _accept_reader_queues(index)
    for bi in index.blocks:  # block order: mesh class ids follow first appearance in it
        bi.op_mesh = _classes(index, bi.ops.mesh)
        bi.forward_ops = list(compress(count(), map(FORWARD_ROLES.__contains__, bi.ops.role)))
    return index


_NO_VAR_BYTES = array("q", [NO_VAR]).tobytes()  # found wherever NO_VAR is (and maybe elsewhere)
_SEARCHED = 1 << 16  # ids copied out at once by `_holds_no_var`


def _holds_no_var(column: array[int]) -> bool:
    """Whether `column` may hold NO_VAR (True wherever it does): a byte search of its bytes,
    a run of ids at a time (no step per id, no copy of the whole column)."""
    return any(
        _NO_VAR_BYTES in column[at : at + _SEARCHED].tobytes()
        for at in range(0, len(column), _SEARCHED)
    )


def _accept_reader_queues(index: ProgramIndex) -> None:
    """Undeclared reader-queue names (see SCOPE_VAR) name no variable; they are
    looked for only in the rare blocks that name an undeclared variable at all."""
    for bi, block in zip(index.blocks, index.program.blocks):
        o = bi.ops
        for column, offsets, outputs in ((o.in_var, o.in_off, False), (o.out_var, o.out_off, True)):
            if not _holds_no_var(column):
                continue
            for at in [k for k, v in enumerate(column) if v == NO_VAR]:
                op = bisect_right(offsets, at) - 1
                names = op_arguments(block, op)[outputs]
                if NO_CHUNK_NAME in names[at - offsets[op]]:
                    column[at] = SCOPE_VAR


def _scan_ops_in_scope(index: ProgramIndex, program: Program) -> None:
    """Scan every block's ops, resolving argument names in the block's scope.

    Blocks are visited depth first with one dict of the names the sub-blocks on
    the current path declare (undone on the way back), so a name resolves in one
    lookup however deep the nesting: the scan stays linear in the program.
    """
    blocks = index.blocks
    root = blocks[0].names
    blocks[0].ops = scan_ops(program.blocks[0], 0, root.get)
    children: list[list[int]] = [[] for _ in blocks]
    for bi in blocks[1:]:
        children[bi.parent].append(bi.idx)
    scope: dict[bytes, int] = {}
    undo: list[tuple[bytes, int | None]] = []

    def lookup(name: bytes, default: int) -> int:
        v = scope.get(name)
        return v if v is not None else root.get(name, default)

    marks: list[int] = []
    stack = [(c, True) for c in reversed(children[0])]  # (block, entering it)
    while stack:
        b, entering = stack.pop()
        if not entering:  # leave b: its names give way to what they shadowed
            mark = marks.pop()
            while len(undo) > mark:
                name, old = undo.pop()
                if old is None:
                    del scope[name]
                else:
                    scope[name] = old
            continue
        marks.append(len(undo))
        for name, v in blocks[b].names.items():
            undo.append((name, scope.get(name)))
            scope[name] = v
        blocks[b].ops = scan_ops(program.blocks[b], b, lookup)
        stack.append((b, False))
        stack.extend((c, True) for c in reversed(children[b]))


def _classes(index: ProgramIndex, raws: list[bytes]) -> array[int]:
    """Mesh-class ids of raw meshes (b"" -> NO_MESH), decoding each distinct raw once and
    mapping the list in C."""
    cache: dict[bytes, int] = {b"": NO_MESH}
    for raw in dict.fromkeys(raws):  # first-appearance order: class ids are deterministic
        if raw not in cache:
            cache[raw] = index.add_mesh(decode_mesh(raw), canonical_mesh(raw))
    return array("q", list(map(cache.__getitem__, raws)))  # a list: array() takes it in C


def loss_op(index: ProgramIndex) -> int | None:
    """The loss op: the last global-block op with role Forward|Loss (256) before the loss-grad
    op (257), as Paddle picks it; None when there is none."""
    roles = index.global_block.ops.role
    end = roles.index(LOSS_GRAD) if LOSS_GRAD in roles else len(roles)  # searched in C
    before = roles[:end]
    return end - 1 - before[::-1].index(LOSS) if LOSS in before else None
