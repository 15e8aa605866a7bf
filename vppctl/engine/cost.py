"""Cost of each layer (and of the ops before and after the layers), for splits and reports.

Three measures: parameter elements (each parameter counted once, where a
forward op first reads it), forward op count, and a forward FLOP estimate from
the shapes of matmul ops (2*M*K*N; unknown -1 dims count as 1, so only ratios
between layers are meaningful, unless `sizes` gives the micro-batch size and the
sequence length they stand for: the first -1 of a shape, then any later one, as the
memory model sizes activations).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from vppctl.engine.index import ProgramIndex
from vppctl.engine.layers import NO_LAYER, LayerSet
from vppctl.plan import CostKind
from vppctl.program import op_slots, var_dims, var_shape

# PIR spells out the dialect (`vppctl.program.pir`): its matmul is `pd_op.matmul`.
MATMULS = (b"matmul_v2", b"matmul", b"mul", b"fused_gemm_epilogue", b"pd_op.matmul")


# Element counts and FLOPs saturate here: a larger one comes from dims no real tensor has
# (a hostile or broken program), and unbounded integers would reach the reports.
MAX_COUNT = 2**63 - 1


def capped_product(factors: Iterable[int]) -> int:
    """The product of non-negative ints, saturating at MAX_COUNT (never a huge int)."""
    n = 1
    for f in factors:
        n *= f
        if n > MAX_COUNT:
            return MAX_COUNT
    return n


@dataclass(frozen=True)
class LayerCosts:
    layers: tuple[int, ...]
    pre: int
    post: int


def param_elements(index: ProgramIndex, v: int) -> int:
    """Elements of a variable (unknown -1 dims count as 1); memoised on the index."""
    n = index.elements.get(v)
    return n if n is not None else _read_size(index, v)[0]


def param_size(index: ProgramIndex, v: int) -> tuple[int, int]:
    """(elements, bytes per element) of a variable (`param_elements`; 0 bytes for one that is
    no tensor or of an unknown data type), both memoised on the index: the splits and the
    checkpoint's moves ask for the same parameters, whose type is read once."""
    n = index.elements.get(v)
    return (n, index.dtype_bytes[v]) if n is not None else _read_size(index, v)


def _read_size(index: ProgramIndex, v: int) -> tuple[int, int]:
    """`param_size`, read from the variable's type (one read) and memoised."""
    b = index.blocks[index.var_block[v]]
    size, dims = var_shape(index.program.blocks[b.idx], v - b.var_base)
    n = index.elements[v] = capped_product(abs(d) for d in dims) if dims else 0
    if not index.dtype_bytes:  # one byte per variable (an element is at most 16 bytes)
        index.dtype_bytes = bytearray(index.n_vars)
    index.dtype_bytes[v] = size
    return n, size


def layer_costs(
    index: ProgramIndex, layers: LayerSet, kind: CostKind, sizes: tuple[int, int] = (1, 1)
) -> LayerCosts:
    """Each layer's cost (and the ops' before and after the layers) by `kind`; FLOPs with
    a shape's first -1 dimension as `sizes[0]` and any later one as `sizes[1]`."""
    block = index.global_block
    costs = [0] * (len(layers) + 2)  # [pre, layer 0 .. layer L-1, post]
    first = layers.layers[0].first
    seen: set[int] = set()
    is_param = _param_flags(index)
    for op in block.forward_ops:
        k = layers.op_layer[op]
        slot = k + 1 if k != NO_LAYER else (0 if op < first else len(costs) - 1)
        if kind == "ops":
            costs[slot] += 1
        elif kind == "flops":
            costs[slot] += matmul_flops(index, op, sizes)
        else:
            for v in block.inputs(op):
                if v >= 0 and is_param[v] and v not in seen:
                    seen.add(v)
                    costs[slot] += param_elements(index, v)
    return LayerCosts(layers=tuple(costs[1:-1]), pre=costs[0], post=costs[-1])


def _param_flags(index: ProgramIndex) -> bytearray:
    flags = bytearray()
    for bi in index.blocks:
        flags += bi.vars.is_parameter
    return flags


def matmul_flops(index: ProgramIndex, op: int, sizes: tuple[int, int] = (1, 1)) -> int:
    """2*M*K*N of a matmul op from its X and Y shapes (0 for other ops); unknown (-1)
    dimensions as `sizes` says (`layer_costs`)."""
    block = index.global_block
    if block.ops.type[op] not in MATMULS:
        return 0
    msg = index.program.blocks[0]
    slots = op_slots(msg, op)
    x, y = _dims(index, slots.get("X"), sizes), _dims(index, slots.get("Y"), sizes)
    if len(x) < 1 or len(y) < 2:
        return 0
    k = x[-1]
    n = y[-1] if y[-2] == k or y[-1] != k else y[-2]
    return capped_product((2, *x, n))


def _dims(
    index: ProgramIndex, names: list[bytes] | None, sizes: tuple[int, int]
) -> tuple[int, ...]:
    if not names:
        return ()
    v = index.lookup(0, names[0])
    if v < 0:
        return ()
    b = index.blocks[index.var_block[v]]
    dims = var_dims(index.program.blocks[b.idx], v - b.var_base)
    out, unknown = [], 0
    for d in dims:
        if d != -1:
            out.append(abs(d))
        else:
            out.append(sizes[0] if unknown == 0 else sizes[1])
            unknown += 1
    return tuple(out)
