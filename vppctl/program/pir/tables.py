"""PIR tables: what the PIR reader takes from a program's JSON, as integer side tables.

A PIR program has no variables: every op defines values (`%N`, program-unique ids)
and names the values it reads. The reader (`vppctl.program.pir.parse`) fills these
columns in one pass over the JSON, one op at a time; the gradient links
(`grads`) and the encoder (`encode`) read them. Nothing here holds one
Python object per op or value: columns are lists and arrays indexed by op or by
value position.
"""

from __future__ import annotations

from array import array
from collections import Counter
from dataclasses import dataclass, field

NO_VALUE = 0  # PIR's id of a null operand or result
NO_OP = -1  # a value no op of the program defines (a declared one, or a block argument)

# The ops the reader folds away instead of reading them as ops (see `vppctl.program.pir.parse`).
COMBINE = "builtin.combine"  # values -> one vector value
SPLIT = "builtin.split"  # one vector value -> values
PARAMETER = "builtin.parameter"  # declares a parameter
DATA = "pd_op.data"  # declares a feed, or an optimizer state in a distributed program
RESHARD = "dist_op.reshard"  # moves a value to another mesh or placement: communication


@dataclass(frozen=True)
class PirOrigin:
    """A program read from Paddle's PIR JSON (`vppctl.program.pir`): its serialization
    version, and the ops read as something else than ops (op type -> count)."""

    version: int
    folded: tuple[tuple[str, int], ...]


@dataclass
class PirTables:
    """One PIR program as columns. Ops are numbered in reading order over all blocks;
    values are numbered by first sight (`value_at` maps a PIR value id to its number)."""

    # blocks: index -> parent block index (-1 for the global block)
    block_parent: list[int] = field(default_factory=list)

    # ops
    op_type: list[str] = field(default_factory=list)
    op_role: array[int] = field(default_factory=lambda: array("q"))
    op_struct: list[str] = field(default_factory=list)  # "" when it has none
    op_mesh: list[bytes] = field(default_factory=list)  # serialized ProcessMesh, b"" = none
    op_chunk: array[int] = field(default_factory=lambda: array("q"))  # -1 = none
    op_block: array[int] = field(default_factory=lambda: array("q"))
    in_off: array[int] = field(default_factory=lambda: array("q", [0]))
    in_val: array[int] = field(default_factory=lambda: array("q"))  # PIR value ids
    in_mesh: list[tuple[bytes, ...]] = field(default_factory=list)  # per operand: its meshes
    out_off: array[int] = field(default_factory=lambda: array("q", [0]))
    out_val: array[int] = field(default_factory=lambda: array("q"))
    out_mesh: list[tuple[bytes, ...]] = field(default_factory=list)
    sub_blocks: dict[int, list[int]] = field(default_factory=dict)  # op -> its regions' blocks

    # values
    value_at: dict[int, int] = field(default_factory=dict)  # PIR id -> value number
    v_id: array[int] = field(default_factory=lambda: array("q"))
    v_block: array[int] = field(default_factory=lambda: array("q"))
    v_producer: array[int] = field(default_factory=lambda: array("q"))  # op number, or NO_OP
    v_dtype: array[int] = field(default_factory=lambda: array("q"))  # VarType code, -1 none
    v_dims: list[tuple[int, ...]] = field(default_factory=list)  # global dims, () for none
    v_mesh: list[bytes] = field(default_factory=list)
    v_persistable: bytearray = field(default_factory=bytearray)
    v_parameter: bytearray = field(default_factory=bytearray)
    v_name: list[str] = field(default_factory=list)  # a name the program gives it, or ""

    # folded ops: what they meant
    alias: dict[int, int] = field(default_factory=dict)  # reshard result -> its source
    combined: dict[int, tuple[int, ...]] = field(default_factory=dict)  # vector -> its values
    split: dict[int, tuple[int, ...]] = field(default_factory=dict)  # vector -> its values
    null_results: set[int] = field(default_factory=set)  # ids of results typed NULL
    folded: Counter[str] = field(default_factory=Counter)

    @property
    def n_ops(self) -> int:
        return len(self.op_type)

    def operands(self, op: int) -> array[int]:
        return self.in_val[self.in_off[op] : self.in_off[op + 1]]

    def results(self, op: int) -> array[int]:
        return self.out_val[self.out_off[op] : self.out_off[op + 1]]

    def value(self, pir_id: int) -> int:
        """The value number of a PIR value id (KeyError for one no op defines)."""
        return self.value_at[pir_id]

    def resolve(self, pir_id: int) -> int:
        """The value an operand reads once folded reshards are looked through."""
        seen = 0
        while pir_id in self.alias and seen < 64:  # a chain; a cycle is impossible in SSA
            pir_id = self.alias[pir_id]
            seen += 1
        return pir_id

    def expand(self, pir_id: int) -> tuple[int, ...]:
        """The values an operand stands for: a folded vector's elements, else itself."""
        pir_id = self.resolve(pir_id)
        parts = self.combined.get(pir_id)
        if parts is None:
            parts = self.split.get(pir_id)
        if parts is None:
            return (pir_id,)
        return tuple(self.resolve(p) for p in parts)
