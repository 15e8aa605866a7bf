"""Memory: bytes per stage and per chunk, from the program, for a plan and a schedule.

This module's one job is the memory model. It reads the program once, through the
index's side tables and `var_tensor` (element size, dims, persistable), and
sums bytes per *slot*: the ops before the first layer (slot 0), each layer (slots
1..L) and the ops after the last layer (slot L+1) -- the same slots the costs and
the split use, so any plan's segments are sums of slots.

Counted, per stage (and per chunk, the stage's segments):

* ``params_bytes``: parameter variables, each on the segment of the first forward op
  that reads it (where `convert` moves it);
* ``grads_bytes``: the ``P@GRAD`` variable of each of those parameters;
* ``optimizer_bytes``: persistable non-parameter variables that the optimizer ops of
  the stage's parameters read or write (moments, master weights, beta powers, the
  learning rate); a variable shared by several stages (the learning rate) counts on
  each of them;
* activations: the variables forward ops produce that backward ops read (the stash a
  micro-batch keeps from its forward to its backward), on each segment whose backward
  reads them (once per segment); a ``-1`` dimension is the micro-batch size when it is
  a variable's first unknown dimension and the sequence length for any later one.
  A chunk holds ``activation bytes x`` its peak number of micro-batches in flight in
  the simulated schedule; the stage's peak is the exact peak of the sum over its
  chunks as the schedule runs (``held_peak``), at most the sum of the chunks' peaks;
* ``peak_bytes``: params + grads + optimizer + the stage's peak activations.

It also sizes what a pipeline hop carries (`boundary_bytes`): the variables forward ops
of one slot write and forward ops of a later slot read, at each boundary between slots.

Not counted: temporaries that no backward op reads (freed after use), backward
temporaries and activation gradients, gradient-clipping copies (``@GRAD@CLIP``),
communication buffers, feed variables, framework workspace and allocator
fragmentation, and anything in sub-blocks; parameters no forward op reads are left
out with a warning.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from vppctl import validate
from vppctl.choices import MAX_BATCH_DIM
from vppctl.convert import Planned
from vppctl.engine import NO_LAYER, ForwardOps, LayerSet, ProgramIndex
from vppctl.plan import Plan, place
from vppctl.program import VarTensor, is_backward, var_tensor


@validate.named_fields
@dataclass(frozen=True)
class MemoryOptions:
    """How to size what the program leaves unknown, and the limit to check (the same in
    `simulate` and `plan`). Checked when made (UsageError, exit 2)."""

    micro_batch_size: int = 1  # a variable's first -1 dimension
    seq_len: int | None = None  # any later -1 dimension (None: counted as 1, with a warning)
    limit: int | None = None  # bytes per stage (a str: a size, '80GiB'); stages over it flagged

    FLAGS: ClassVar[Mapping[str, str]] = {
        "micro_batch_size": "--micro-batch-size",
        "seq_len": "--seq-len",
        "limit": "--memory-limit",
    }

    def __post_init__(self) -> None:
        validate.integer(self, "micro_batch_size", 1, MAX_BATCH_DIM)
        validate.integer(self, "seq_len", 1, MAX_BATCH_DIM, optional=True)
        given: object = self.limit
        if isinstance(given, str):  # "80GiB", as --memory-limit takes it
            size = parse_size(given)
            if size is None:
                raise validate.refuse(
                    self, "limit", "bytes as an integer, or a size such as '80GiB' or '80GB'"
                )
            object.__setattr__(self, "limit", size)
        validate.integer(self, "limit", 1, MAX_LIMIT, optional=True)


# The largest --memory-limit: 2^63 - 1 bytes (byte counts saturate there).
MAX_LIMIT = (1 << 63) - 1


@dataclass(frozen=True)
class SegmentMemory:
    """Bytes of one segment (virtual stage): static, and one micro-batch's activations."""

    params: int
    grads: int
    optimizer: int
    activations: int


@dataclass(frozen=True)
class ChunkMemory:
    virtual_stage: int
    chunk: int
    params_bytes: int
    grads_bytes: int
    optimizer_bytes: int
    activation_bytes_per_micro_batch: int
    peak_in_flight: int  # most of this chunk's micro-batches in flight at once
    activation_bytes: int  # activation_bytes_per_micro_batch x peak_in_flight


@dataclass(frozen=True)
class StageMemory:
    stage: int
    params_bytes: int
    grads_bytes: int
    optimizer_bytes: int
    peak_activation_bytes: int
    peak_bytes: int
    over_limit: bool
    chunks: tuple[ChunkMemory, ...]

    @property
    def static_bytes(self) -> int:
        return self.params_bytes + self.grads_bytes + self.optimizer_bytes


class MemoryModel:
    """Bytes per slot of one program, computed once; `segments(plan)` sums them for any
    plan of that program."""

    def __init__(self, planned: Planned, opts: MemoryOptions) -> None:
        self.opts = opts
        self.n_slots = len(planned.layers) + 2
        n = self.n_slots
        self.params, self.grads, self.optimizer = [0] * n, [0] * n, [0] * n
        # Variables touched by several slots: (bytes, slots). Optimizer state shared
        # between slots, and activations read by the backward of several slots.
        self.shared_optimizer: list[tuple[int, tuple[int, ...]]] = []
        self.activations: dict[tuple[int, ...], int] = {}
        self._unknown_later = 0
        self._sizes: dict[int, int | None] = {}
        self._tensors: dict[int, VarTensor | None] = {}
        index = planned.index
        self.index = index
        self.is_param = _param_flags(index)
        slot_of_op = _forward_slots(index, planned.layers)
        param_slot = self._params(index, slot_of_op)
        self._optimizer(index, param_slot)
        self._activations(index, planned.forward, slot_of_op)
        self.boundaries = self._boundaries(index, slot_of_op)
        warnings = []
        unread = sum(self.is_param) - len(param_slot)
        if unread:
            warnings.append(
                f"{unread} parameter(s) are read by no forward op and are not counted in "
                "params_bytes"
            )
        self.unknown_later = self._unknown_later  # variables with a later -1 dimension
        if self._unknown_later:
            warnings.append(
                f"{self._unknown_later} variable(s) have unknown (-1) dimensions after the "
                "first; each counts as 1: pass --seq-len to size them"
            )
        self.warnings = tuple(warnings)

    # -- reading the program

    def _tensor(self, v: int) -> VarTensor | None:
        """Variable `v`'s element size, dims and persistable flag, read once."""
        if v in self._tensors:
            return self._tensors[v]
        index = self.index
        b = index.blocks[index.var_block[v]]
        tensor = self._tensors[v] = var_tensor(index.program.blocks[b.idx], v - b.var_base)
        return tensor

    def nbytes(self, v: int) -> int | None:
        """Bytes of variable `v` with the -1 rule, or None when it is not a tensor."""
        if v in self._sizes:
            return self._sizes[v]
        tensor = self._tensor(v)
        size = None if tensor is None else self._size(tensor)
        self._sizes[v] = size
        return size

    def _size(self, tensor: VarTensor) -> int:
        elements, unknown = 1, 0
        for d in tensor.dims:
            if d >= 0:
                elements *= d
                continue
            unknown += 1
            if unknown == 1:
                elements *= self.opts.micro_batch_size
            elif self.opts.seq_len is not None:
                elements *= self.opts.seq_len
        if unknown > 1 and self.opts.seq_len is None:
            self._unknown_later += 1
        return elements * tensor.dtype_bytes

    def _persistable(self, v: int) -> bool:
        tensor = self._tensor(v)
        return tensor is not None and tensor.persistable

    def _params(self, index: ProgramIndex, slot_of_op: array[int]) -> dict[int, int]:
        """Each parameter's slot (its first forward reader's); params and their grads."""
        block = index.global_block
        is_param = self.is_param
        param_slot: dict[int, int] = {}
        for op in block.forward_ops:
            for v in block.inputs(op):
                if v >= 0 and is_param[v] and v not in param_slot:
                    param_slot[v] = slot = slot_of_op[op]
                    self.params[slot] += self.nbytes(v) or 0
                    grad = index.lookup(index.var_block[v], index.var_name_bytes(v) + b"@GRAD")
                    if grad >= 0:
                        self.grads[slot] += self.nbytes(grad) or 0
        return param_slot

    def _optimizer(self, index: ProgramIndex, param_slot: dict[int, int]) -> None:
        """Persistable non-parameter variables of the optimizer ops, by their param's slot."""
        block = index.global_block
        is_param = self.is_param
        slots = _Slots(index.n_vars)
        for op, param in block.ops.param.items():
            slot = param_slot.get(param)
            if slot is None:
                continue
            for v in (*block.inputs(op), *block.outputs(op)):
                if v >= 0 and not is_param[v]:
                    slots.add(v, slot)
        for v, where in slots.items():
            if not self._persistable(v):
                continue
            size = self.nbytes(v) or 0
            if len(where) == 1:
                self.optimizer[where[0]] += size
            else:
                self.shared_optimizer.append((size, where))

    def _activations(
        self, index: ProgramIndex, forward_of: ForwardOps, slot_of_op: array[int]
    ) -> None:
        """Forward-produced variables that backward ops read, grouped by reader slots.

        A backward op reads on behalf of its forward op's slot (a grad op runs where
        its forward op runs); one with no forward op (a gradient sum) on the slot of
        the variable's producer."""
        block = index.global_block
        is_param = self.is_param
        producer = array("q", [_NONE]) * index.n_vars
        for op in block.forward_ops:
            for v in block.outputs(op):
                if v >= 0 and not is_param[v] and producer[v] == _NONE:
                    producer[v] = slot_of_op[op]
        readers = _Slots(index.n_vars)
        roles = block.ops.role
        for op in range(block.n_ops):
            if not is_backward(roles[op]):
                continue
            f = forward_of.of(op)
            reader = slot_of_op[f] if f is not None else _NONE
            for v in block.inputs(op):
                if v >= 0 and producer[v] != _NONE:
                    readers.add(v, producer[v] if reader == _NONE else reader)
        for v, where in readers.items():
            if self._persistable(v):
                continue
            self.activations[where] = self.activations.get(where, 0) + (self.nbytes(v) or 0)

    def _boundaries(self, index: ProgramIndex, slot_of_op: array[int]) -> list[int]:
        """Bytes the forward pass carries across each boundary between slots, one
        micro-batch's: boundary b lies between slots b and b + 1, and a non-persistable
        variable that a forward op of slot p writes and one of slot r > p reads crosses
        boundaries p .. r - 1 (a difference array: linear in the forward ops)."""
        block = index.global_block
        is_param = self.is_param
        producer = array("q", [_NONE]) * index.n_vars
        reader = array("q", [_NONE]) * index.n_vars  # the last forward slot reading it
        read: list[int] = []
        for op in block.forward_ops:
            slot = slot_of_op[op]
            for v in block.inputs(op):
                if v >= 0 and producer[v] != _NONE and producer[v] < slot > reader[v]:
                    if reader[v] == _NONE:
                        read.append(v)
                    reader[v] = slot
            for v in block.outputs(op):
                if v >= 0 and not is_param[v] and producer[v] == _NONE:
                    producer[v] = slot
        diff = [0] * self.n_slots
        for v in read:
            if not self._persistable(v):
                size = self.nbytes(v) or 0
                diff[producer[v]] += size
                diff[reader[v]] -= size
        out, running = [], 0
        for b in range(self.n_slots - 1):
            running += diff[b]
            out.append(running)
        return out

    # -- a plan

    def hop_bytes(self, plan: Plan) -> int:
        """What one hop between two of the plan's segments carries, one micro-batch's
        forward (its gradient carries as much back): the largest of its cuts."""
        if plan.n_layers + 2 != self.n_slots:
            raise ValueError("the plan is not a plan of this program's layers")
        return max((self.boundaries[s.first_layer] for s in plan.segments[1:]), default=0)

    def slot_segments(self, plan: Plan) -> list[int]:
        """Slot -> the plan's segment (virtual stage)."""
        out = [0]
        for seg in plan.segments:
            out += [seg.virtual_stage] * len(seg.layers)
        out.append(len(plan.segments) - 1)
        return out

    def segments(self, plan: Plan) -> tuple[SegmentMemory, ...]:
        """Bytes per segment; shared optimizer state goes to the first segment of each
        stage that uses it (see `stage_memory`)."""
        if plan.n_layers + 2 != self.n_slots:
            raise ValueError("the plan is not a plan of this program's layers")
        seg_of = self.slot_segments(plan)
        n = len(plan.segments)
        params, grads, optimizer, acts = [0] * n, [0] * n, [0] * n, [0] * n
        for slot, k in enumerate(seg_of):
            params[k] += self.params[slot]
            grads[k] += self.grads[slot]
            optimizer[k] += self.optimizer[slot]
        for size, slots in self.shared_optimizer:
            first: dict[int, int] = {}  # stage -> lowest segment of it using the variable
            for slot in slots:
                k = seg_of[slot]
                stage = place(k, plan.pp, plan.placement)[0]
                first[stage] = min(first.get(stage, k), k)
            for k in first.values():
                optimizer[k] += size
        for slots, size in self.activations.items():
            for k in {seg_of[slot] for slot in slots}:
                acts[k] += size
        return tuple(SegmentMemory(*values) for values in zip(params, grads, optimizer, acts))


def stage_memory(
    plan: Plan,
    segments: Sequence[SegmentMemory],
    peaks_per_chunk: Sequence[Sequence[int]],
    held: Sequence[int],
    limit: int | None,
) -> tuple[StageMemory, ...]:
    """Per stage: static bytes, each chunk's activations at its in-flight peak, and the
    peak. `peaks_per_chunk[stage][chunk]` and `held[stage]` come from the simulated
    schedule (a merged schedule has one chunk per stage, holding all its segments)."""
    by_stage: list[list[ChunkMemory]] = [[] for _ in range(plan.pp)]
    for seg, mem in zip(plan.segments, segments):
        chunk_peaks = peaks_per_chunk[seg.stage]
        in_flight = chunk_peaks[seg.chunk] if len(chunk_peaks) == plan.vpp else chunk_peaks[0]
        by_stage[seg.stage].append(
            ChunkMemory(
                virtual_stage=seg.virtual_stage,
                chunk=seg.chunk,
                params_bytes=mem.params,
                grads_bytes=mem.grads,
                optimizer_bytes=mem.optimizer,
                activation_bytes_per_micro_batch=mem.activations,
                peak_in_flight=in_flight,
                activation_bytes=mem.activations * in_flight,
            )
        )
    out = []
    for stage, chunks in enumerate(by_stage):
        chunks.sort(key=lambda c: c.chunk)
        params = sum(c.params_bytes for c in chunks)
        grads = sum(c.grads_bytes for c in chunks)
        optimizer = sum(c.optimizer_bytes for c in chunks)
        peak = params + grads + optimizer + held[stage]
        out.append(
            StageMemory(
                stage=stage,
                params_bytes=params,
                grads_bytes=grads,
                optimizer_bytes=optimizer,
                peak_activation_bytes=held[stage],
                peak_bytes=peak,
                over_limit=limit is not None and peak > limit,
                chunks=tuple(chunks),
            )
        )
    return tuple(out)


def worst_stage(stages: Sequence[StageMemory]) -> StageMemory:
    """The stage with the highest peak (the lowest index among equals)."""
    return max(stages, key=lambda s: (s.peak_bytes, -s.stage))


_NONE = -1


class _Slots:
    """Per variable, the distinct slots that use it: the first in an integer column,
    the rare others in a dict (most variables have one)."""

    def __init__(self, n_vars: int) -> None:
        self.first = array("q", [_NONE]) * n_vars
        self.more: dict[int, set[int]] = {}
        self.order: list[int] = []  # variables in first-use order

    def add(self, v: int, slot: int) -> None:
        first = self.first[v]
        if first == _NONE:
            self.first[v] = slot
            self.order.append(v)
        elif first != slot:
            self.more.setdefault(v, {first}).add(slot)

    def items(self) -> list[tuple[int, tuple[int, ...]]]:
        more = self.more
        return [(v, tuple(sorted(more[v])) if v in more else (self.first[v],)) for v in self.order]


def _forward_slots(index: ProgramIndex, layers: LayerSet) -> array[int]:
    """Global-block op -> slot for forward ops (as `cost.layer_costs` assigns them)."""
    first = layers.layers[0].first
    post = len(layers) + 1
    op_layer = layers.op_layer
    block = index.global_block
    out = array("q", [_NONE]) * block.n_ops
    for op in block.forward_ops:
        k = op_layer[op]
        out[op] = k + 1 if k != NO_LAYER else (0 if op < first else post)
    return out


def _param_flags(index: ProgramIndex) -> bytearray:
    flags = bytearray()
    for bi in index.blocks:
        flags += bi.vars.is_parameter
    return flags


# -- sizes for people and options ------------------------------------------------

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
}


def parse_size(text: str) -> int | None:
    """`80GiB`, `80 GB`, `512MiB`, `1.5TiB`, `1000000` -> bytes (IEC units are powers of
    1024, SI units powers of 1000); None if it is not a size."""
    value = text.strip().lower().replace(" ", "")
    number = value.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = value[len(number) :]
    if unit not in _UNITS or not number:
        return None
    try:
        amount = float(number)
    except ValueError:
        return None
    total = amount * _UNITS[unit]
    if not 0 <= total < float("inf"):  # NaN, negative, or 1e308TiB: no size
        return None
    return int(total)


def iec(n: int) -> str:
    """Bytes in IEC units: 1536 -> `1.5 KiB`, 85899345920 -> `80.0 GiB`."""
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"
