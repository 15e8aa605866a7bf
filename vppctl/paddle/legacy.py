"""Legacy export and apply: PaddlePaddle's legacy static auto-parallel programs to
vppctl's format and back.

Two functions, both needing the real ``paddle`` package (imported when called, so the
rest of vppctl works without it):

``export_program(main_program, dist_context=None) -> bytes``
    Serialize a ``paddle.static.Program`` (legacy IR, ``FLAGS_enable_pir_api=0``)
    to vppctl's ``ProgramDesc``. Paddle's own desc bytes are kept as they are and
    vppctl's fields are added: every op's layer path (``Operator.struct_name``,
    which lives only on the Python ``Operator`` and not in Paddle's desc), a
    program-unique op ``id``, and, given an auto-parallel ``DistributedContext``,
    the ``forward_op_id`` of every backward op, the op and variable dist attrs
    (process mesh, dims mapping, chunk id, ...) and the context's process meshes
    in its own order (the order Paddle's ``get_pp_degree`` uses as stage order).
    A PIR program (``paddle.pir.Program``, Paddle 3.x's default) is serialized to
    Paddle's own JSON (``serialize_pir_program``), the bytes vppctl reads from such
    a file (``vppctl.program.pir``); it carries its dist attrs, so it takes no context.

``apply_annotations(main_program, dist_context, annotated) -> None``
    Read a program written by ``vppctl convert`` and write its chunk ids and
    process meshes back onto the dist attrs of ``dist_context``. Ops are matched
    by block and index, variables by block and name; the call refuses (before
    changing anything) when the op lists differ.

Both raise :class:`PaddleBridgeError` subclasses (``vppctl.paddle.errors``) with a
message naming what is wrong.

Paddle facts this module relies on (Paddle 3.3.1, legacy static mode):

* The dist context keys op and tensor dist attrs by the desc's ``original_id()``
  (``DistributedContext.add_dist_op_for_program``) and looks them up by ``id()``
  first, then ``original_id()``.
* ``dist_op_context.grad_op_id_to_op_id`` maps a backward op's ``original_id()``
  to its forward op's ``original_id()``; it is filled by
  ``append_backward(..., distop_context=...)``.
* Setting ``OperatorDistAttr.process_mesh`` also sets the mesh of every
  input/output tensor dist attr held by the op dist attr.
* Several ops can share one dist-attr object: the recompute pass
  (``auto_parallel_recompute``) leaves a scratch block, named by no ``sub_block``
  attribute and so never executed, whose ops keep the original ids of the forward ops
  they copy, so the context hands out the forward ops' own dist attrs for them. Only
  blocks reachable from block 0 through ``sub_block`` attributes are executed.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError

from vppctl.paddle.errors import AnnotationError, ProgramMismatchError
from vppctl.paddle.versions import import_paddle

# vppctl.paddle.legacy is itself a protobuf-facing adapter: it turns Paddle objects into
# vppctl's program messages and back.
from vppctl.program._proto import program_pb2 as pb

# ----------------------------------------------------------------------------
# Export


def export_program(main_program: Any, dist_context: Any = None) -> bytes:
    """Serialize a legacy static ``Program`` (and its auto-parallel annotations) to vppctl bytes.

    ``main_program`` is a ``paddle.static.Program`` built in legacy static mode.
    ``dist_context`` is an optional
    ``paddle.distributed.auto_parallel.static.dist_context.DistributedContext``;
    without it only the layer paths and op ids are added. A PIR program
    (``paddle.pir.Program``) is serialized as Paddle saves it (JSON), without a context.
    """
    paddle = import_paddle()
    if isinstance(main_program, paddle.pir.Program):
        if dist_context is not None:
            raise AnnotationError(
                "a PIR program holds its own dist attrs; export it without a dist_context"
            )
        return _export_pir(paddle, main_program)
    if not hasattr(main_program, "desc") or not hasattr(main_program, "blocks"):
        raise AnnotationError(
            "export_program needs a paddle.static.Program (legacy) or a paddle.pir.Program, "
            f"got {type(main_program).__name__}"
        )

    program = pb.ProgramDesc()
    try:
        program.ParseFromString(main_program.desc.serialize_to_string())
    except DecodeError as exc:  # pragma: no cover - Paddle always writes valid bytes
        raise AnnotationError(f"cannot parse Paddle's ProgramDesc bytes: {exc}") from exc

    py_blocks = list(main_program.blocks)
    if len(program.blocks) != len(py_blocks):
        raise ProgramMismatchError(
            f"Paddle's desc has {len(program.blocks)} blocks but the Python program has "
            f"{len(py_blocks)}; call program._sync_with_cpp() after editing the desc directly"
        )

    all_ops = [op for block in py_blocks for op in block.ops]
    executed = _executed_blocks(py_blocks)
    ids, original_to_id = _op_ids(all_ops, [op.block.idx in executed for op in all_ops])
    grad_to_forward: dict[int, int] = {}
    if dist_context is not None:
        grad_to_forward = dict(dist_context.dist_op_context.grad_op_id_to_op_id)

    position = 0
    for pb_block, block in zip(program.blocks, py_blocks, strict=True):
        py_ops = list(block.ops)
        if len(pb_block.ops) != len(py_ops):
            raise ProgramMismatchError(
                f"block {block.idx}: Paddle's desc has {len(pb_block.ops)} ops but the Python "
                f"block has {len(py_ops)}; call program._sync_with_cpp() after editing the desc"
            )
        for index, (pb_op, op) in enumerate(zip(pb_block.ops, py_ops, strict=True)):
            if pb_op.type != op.type:
                raise ProgramMismatchError(
                    f"block {block.idx}, op {index}: Paddle's desc holds {pb_op.type!r} but the "
                    f"Python block holds {op.type!r}"
                )
            pb_op.struct_name = str(op.struct_name or "/")
            pb_op.id = ids[position]
            position += 1
            forward = grad_to_forward.get(op.desc.original_id())
            if forward is not None and forward in original_to_id:
                pb_op.forward_op_id = original_to_id[forward]
            if dist_context is not None:
                op_attr = dist_context.get_op_dist_attr_for_program(op)
                if op_attr is not None:
                    _op_attr_to_pb(op_attr, pb_op.dist_attr)

        if dist_context is not None:
            for pb_var in pb_block.vars:
                var = block.vars.get(pb_var.name)
                if var is None:
                    continue
                tensor_attr = dist_context.get_tensor_dist_attr_for_program(var)
                if tensor_attr is not None:
                    _tensor_attr_to_pb(tensor_attr, pb_var.dist_attr)

    if dist_context is not None:
        for mesh in dist_context.process_meshes:
            _mesh_to_pb(mesh, program.process_meshes.add())

    return bytes(program.SerializeToString())


def _export_pir(paddle: Any, program: Any) -> bytes:
    """A PIR program's JSON, as `paddle.static.save` writes it (Paddle writes it to a file
    only): the bytes vppctl reads from that file, dist ops (reshards) included."""
    with tempfile.TemporaryDirectory(prefix="vppctl-pir-") as tmp:
        path = Path(tmp) / "program.json"
        paddle.base.core.serialize_pir_program(program, str(path))
        return path.read_bytes()


def _op_ids(ops: list[Any], executed: list[bool]) -> tuple[list[int], dict[int, int]]:
    """Program-unique op ids and the map from Paddle's ``original_id()`` to them.

    An op keeps its ``original_id()`` (what the dist context and ``grad_op_id_to_op_id``
    speak) unless another op holds the same one: then the op of an executed block keeps
    it when it is the only executed holder, so the links of grad ops to it survive; the
    others (the recompute pass's scratch copies) get their desc's own ``id()``, or, if
    that is taken, the next id above every id in use.
    """
    originals = [int(op.desc.original_id()) for op in ops]
    holders: dict[int, int] = {}
    executed_holders: dict[int, int] = {}
    for o, run in zip(originals, executed, strict=True):
        holders[o] = holders.get(o, 0) + 1
        if run:
            executed_holders[o] = executed_holders.get(o, 0) + 1
    keeps = [
        holders[o] == 1 or (run and executed_holders[o] == 1)
        for o, run in zip(originals, executed, strict=True)
    ]
    used = {o for o, keep in zip(originals, keeps, strict=True) if keep}
    fresh = max([*originals, *(int(op.desc.id()) for op in ops), 0]) + 1
    ids: list[int] = []
    mapping: dict[int, int] = {}
    for op, o, keep in zip(ops, originals, keeps, strict=True):
        if keep:
            ids.append(o)
            mapping[o] = o
            continue
        own = int(op.desc.id())
        if own in used:
            own, fresh = fresh, fresh + 1
        used.add(own)
        ids.append(own)
    return ids, mapping


def _executed_blocks(py_blocks: list[Any]) -> set[int]:
    """Block 0 and every block an op of an executed block names in a block attribute."""
    from paddle.base import core

    block_kinds = (core.AttrType.BLOCK, core.AttrType.BLOCKS)
    seen = {0}
    stack = [0]
    while stack:
        for op in py_blocks[stack.pop()].ops:
            for name in op.attr_names:
                kind = op.desc.attr_type(name)
                if kind not in block_kinds:
                    continue
                subs = (
                    [op._block_attr_id(name)]
                    if kind == core.AttrType.BLOCK
                    else list(op._blocks_attr_ids(name))
                )
                for sub in subs:
                    if sub not in seen and 0 <= sub < len(py_blocks):
                        seen.add(sub)
                        stack.append(sub)
    return seen


def _mesh_to_pb(mesh: Any, out: pb.ProcessMesh) -> None:
    out.shape.extend(int(d) for d in mesh.shape)
    out.process_ids.extend(int(p) for p in mesh.process_ids)
    out.dim_names.extend(str(n) for n in mesh.dim_names)


def _tensor_attr_to_pb(attr: Any, out: pb.TensorDistAttr) -> None:
    if attr.process_mesh is not None:
        _mesh_to_pb(attr.process_mesh, out.process_mesh)
    out.dims_mapping.extend(int(d) for d in attr.dims_mapping)
    out.batch_dim = int(attr.batch_dim)
    out.dynamic_dims.extend(bool(d) for d in attr.dynamic_dims)
    out.chunk_id = int(attr.chunk_id)


def _op_attr_to_pb(attr: Any, out: pb.OperatorDistAttr) -> None:
    for name, tensor_attr in sorted(attr.inputs_dist_attrs.items()):
        entry = out.input_dist_attrs.add(name=name)
        _tensor_attr_to_pb(tensor_attr, entry.tensor_dist_attr)
    for name, tensor_attr in sorted(attr.outputs_dist_attrs.items()):
        entry = out.output_dist_attrs.add(name=name)
        _tensor_attr_to_pb(tensor_attr, entry.tensor_dist_attr)
    if attr.process_mesh is not None:
        _mesh_to_pb(attr.process_mesh, out.process_mesh)
    out.impl_type = str(attr.impl_type)
    out.impl_idx = int(attr.impl_idx)
    out.chunk_id = int(attr.chunk_id)


# ----------------------------------------------------------------------------
# Apply


def apply_annotations(main_program: Any, dist_context: Any, annotated: bytes) -> None:
    """Write the chunk ids and process meshes of a vppctl program onto ``dist_context``.

    ``annotated`` holds vppctl program bytes whose ops are, block by block and
    index by index, the ops of ``main_program`` (as ``export_program`` wrote
    them). For every op carrying a dist attr, the op's process mesh (which Paddle
    also gives to the op's input/output tensor dist attrs), chunk id and any
    explicit input/output tensor meshes are set; for every variable carrying a
    dist attr, its tensor dist attr's mesh and chunk id. Fields absent from the
    vppctl program are left as they are. Nothing is changed when the programs do
    not match.

    A dist attr that several ops (or variables) share in Paddle's context is written
    once, from the op of an executed block (see the module docstring): the ops of a
    never-executed block, such as the recompute pass's scratch block, do not overwrite
    the forward ops they share it with. When the executed sharers (or, if none is
    executed, all of them) are given different values, the call refuses.
    """
    import_paddle()
    if dist_context is None:
        raise AnnotationError("apply_annotations needs the program's DistributedContext")
    program = pb.ProgramDesc()
    try:
        program.ParseFromString(bytes(annotated))
    except DecodeError as exc:
        raise AnnotationError(f"the annotated bytes are not a vppctl program: {exc}") from exc

    py_blocks = list(main_program.blocks)
    _check_same_ops(program, py_blocks)

    meshes = _MeshCache(dist_context)
    # Resolve every mesh (and find every variable) before touching the context, so
    # that a failure leaves it unchanged.
    plan_ops: list[tuple[Any, pb.OpDesc]] = []
    plan_vars: list[tuple[Any, pb.VarDesc]] = []
    for pb_block, block in zip(program.blocks, py_blocks, strict=True):
        for pb_op, op in zip(pb_block.ops, block.ops, strict=True):
            if pb_op.HasField("dist_attr"):
                _resolve_op_meshes(pb_op.dist_attr, meshes)
                plan_ops.append((op, pb_op))
        for pb_var in pb_block.vars:
            if not pb_var.HasField("dist_attr"):
                continue
            var = block.vars.get(pb_var.name)
            if var is None:
                raise ProgramMismatchError(
                    f"block {pb_block.idx}: variable {pb_var.name!r} of the vppctl program is not "
                    "in the Paddle program"
                )
            if pb_var.dist_attr.HasField("process_mesh"):
                meshes.get(pb_var.dist_attr.process_mesh)
            plan_vars.append((var, pb_var))

    executed = _executed_blocks(py_blocks)
    run_ops = [op for block in py_blocks if block.idx in executed for op in block.ops]
    run_vars = [v for block in py_blocks if block.idx in executed for v in block.vars.values()]
    plan_ops = _once_per_shared_attr(
        plan_ops, dist_context.get_op_dist_attr_for_program, run_ops, _op_values, _op_label
    )
    plan_vars = _once_per_shared_attr(
        plan_vars,
        dist_context.get_tensor_dist_attr_for_program,
        run_vars,
        _var_values,
        _var_label,
    )
    for mesh in program.process_meshes:
        meshes.register(mesh)
    for op, pb_op in plan_ops:
        _apply_op(dist_context, op, pb_op.dist_attr, meshes)
    for var, pb_var in plan_vars:
        _apply_var(dist_context, var, pb_var.dist_attr, meshes)


def _once_per_shared_attr(
    items: list[tuple[Any, Any]],
    attr_of: Any,
    executed: list[Any],
    values: Any,
    label: Any,
) -> list[tuple[Any, Any]]:
    """`items` (Paddle op or variable, its vppctl message) with one item per dist-attr
    object: of the items sharing one, the first of an executed block, or any if none is
    and no executed op or variable (`executed`) holds the object either (an executed holder
    the vppctl program leaves unannotated keeps its attr). Refuses when the candidates
    (the executed sharers, else all) disagree."""
    # The context keeps every attr object alive, so id() is a stable identity here.
    run_keys = {id(a) for a in map(attr_of, executed) if a is not None}
    run_objs = {id(obj) for obj in executed}
    groups: dict[Any, list[int]] = {}
    for position, (obj, _) in enumerate(items):
        attr = attr_of(obj)
        # An op or variable without a dist attr gets a new one keyed by its original id.
        key = id(attr) if attr is not None else ("new", int(obj.desc.original_id()))
        groups.setdefault(key, []).append(position)
    chosen: list[int] = []
    for key, members in groups.items():
        run = [m for m in members if id(items[m][0]) in run_objs]
        if not run and key in run_keys:
            continue
        candidates = run or members
        first = candidates[0]
        for other in candidates[1:]:
            if values(items[other][1]) != values(items[first][1]):
                raise AnnotationError(
                    f"{label(items[first][0])} and {label(items[other][0])} share one dist "
                    "attribute in Paddle's DistributedContext (the same original id), but the "
                    "vppctl program gives them different meshes or chunk ids; Paddle cannot "
                    "hold both, so give them the same placement"
                )
        chosen.append(first)
    return [items[i] for i in sorted(chosen)]


def _op_values(pb_op: pb.OpDesc) -> tuple[Any, ...]:
    """What `_apply_op` writes from an op's vppctl dist attr."""
    attr = pb_op.dist_attr
    return (
        _pb_mesh_key(attr.process_mesh) if attr.HasField("process_mesh") else None,
        int(attr.chunk_id) if attr.HasField("chunk_id") else None,
        tuple(
            (side, entry.name, _pb_mesh_key(entry.tensor_dist_attr.process_mesh))
            for side, entry in _entries(attr)
            if entry.tensor_dist_attr.HasField("process_mesh")
        ),
    )


def _var_values(pb_var: pb.VarDesc) -> tuple[Any, ...]:
    attr = pb_var.dist_attr
    return (
        _pb_mesh_key(attr.process_mesh) if attr.HasField("process_mesh") else None,
        int(attr.chunk_id) if attr.HasField("chunk_id") else None,
    )


def _pb_mesh_key(mesh: pb.ProcessMesh) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return (tuple(mesh.shape), tuple(mesh.process_ids))


def _op_label(op: Any) -> str:
    return f"block {op.block.idx} op {op.idx} ({op.type})"


def _var_label(var: Any) -> str:
    return f"block {var.block.idx} variable {var.name!r}"


def _check_same_ops(program: pb.ProgramDesc, py_blocks: list[Any]) -> None:
    if len(program.blocks) != len(py_blocks):
        raise ProgramMismatchError(
            f"the vppctl program has {len(program.blocks)} blocks but the Paddle program has "
            f"{len(py_blocks)}"
        )
    for pb_block, block in zip(program.blocks, py_blocks, strict=True):
        ours = [op.type for op in pb_block.ops]
        theirs = [op.type for op in block.ops]
        for index, (a, b) in enumerate(zip(ours, theirs, strict=False)):
            if a != b:
                raise ProgramMismatchError(
                    f"block {block.idx}, op {index}: the vppctl program holds {a!r} but the "
                    f"Paddle program holds {b!r}" + _count_note(len(ours), len(theirs))
                )
        if len(ours) != len(theirs):
            index = min(len(ours), len(theirs))
            extra = (ours if len(ours) > len(theirs) else theirs)[index]
            side = "vppctl" if len(ours) > len(theirs) else "Paddle"
            raise ProgramMismatchError(
                f"block {block.idx}: the vppctl program has {len(ours)} ops but the Paddle "
                f"program has {len(theirs)}; at op {index} only the {side} program has an op "
                f"({extra!r})"
            )


def _count_note(ours: int, theirs: int) -> str:
    if ours == theirs:
        return ""
    return f" (and the block has {ours} ops in the vppctl program, {theirs} in Paddle's)"


class _MeshCache:
    """Maps vppctl meshes to Paddle mesh objects, reusing the context's own when equal."""

    def __init__(self, dist_context: Any) -> None:
        self._dist_context = dist_context
        self._known: dict[tuple[tuple[int, ...], tuple[int, ...]], Any] = {}
        for mesh in _context_meshes(dist_context):
            self._known.setdefault(_mesh_key_of(mesh), mesh)

    def get(self, mesh: pb.ProcessMesh) -> Any:
        key = (tuple(mesh.shape), tuple(mesh.process_ids))
        found = self._known.get(key)
        if found is not None:
            return found
        if not mesh.process_ids:
            raise AnnotationError("a process mesh in the vppctl program has no process ids")
        shape = list(mesh.shape) or [len(mesh.process_ids)]
        size = 1
        for d in shape:
            size *= d
        if size != len(mesh.process_ids):
            raise AnnotationError(
                f"process mesh shape {shape} does not hold its {len(mesh.process_ids)} process ids"
            )
        dim_names = list(mesh.dim_names) or [f"d{i}" for i in range(len(shape))]
        from paddle.base import core

        # A plain core mesh: paddle.distributed.ProcessMesh() would also register
        # itself in the default dist context and process group 0.
        created = core.ProcessMesh(shape, list(mesh.process_ids), dim_names)
        self._known[key] = created
        return created

    def register(self, mesh: pb.ProcessMesh) -> None:
        """Make sure a program-level mesh is among the context's ``process_meshes``."""
        paddle_mesh = self.get(mesh)
        if all(
            _mesh_key_of(m) != _mesh_key_of(paddle_mesh)
            for m in _context_meshes(self._dist_context)
        ):
            self._dist_context.add_process_mesh(paddle_mesh)


def _context_meshes(dist_context: Any) -> Iterable[Any]:
    return list(getattr(dist_context, "process_meshes", None) or [])


def _mesh_key_of(mesh: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return (tuple(int(d) for d in mesh.shape), tuple(int(p) for p in mesh.process_ids))


def _entries(attr: pb.OperatorDistAttr) -> Iterator[tuple[str, pb.TensorDistAttrMappingEntry]]:
    for entry in attr.input_dist_attrs:
        yield "input", entry
    for entry in attr.output_dist_attrs:
        yield "output", entry


def _resolve_op_meshes(attr: pb.OperatorDistAttr, meshes: _MeshCache) -> None:
    if attr.HasField("process_mesh"):
        meshes.get(attr.process_mesh)
    for _, entry in _entries(attr):
        if entry.tensor_dist_attr.HasField("process_mesh"):
            meshes.get(entry.tensor_dist_attr.process_mesh)


def _apply_op(dist_context: Any, op: Any, attr: pb.OperatorDistAttr, meshes: _MeshCache) -> None:
    op_attr = dist_context.get_op_dist_attr_for_program(op)
    if op_attr is None:
        from paddle.base.core import OperatorDistAttr

        dist_context.set_op_dist_attr_for_program(op, OperatorDistAttr())
        op_attr = dist_context.get_op_dist_attr_for_program(op)
    if attr.HasField("process_mesh"):
        # Also sets the mesh of the op's input/output tensor dist attrs.
        op_attr.process_mesh = meshes.get(attr.process_mesh)
    if attr.HasField("chunk_id"):
        op_attr.chunk_id = int(attr.chunk_id)
    for side, entry in _entries(attr):
        tensor = entry.tensor_dist_attr
        if not tensor.HasField("process_mesh"):
            continue
        held = (
            op_attr.get_input_dist_attr(entry.name)
            if side == "input"
            else op_attr.get_output_dist_attr(entry.name)
        )
        if held is not None:
            held.process_mesh = meshes.get(tensor.process_mesh)


def _apply_var(dist_context: Any, var: Any, attr: pb.TensorDistAttr, meshes: _MeshCache) -> None:
    tensor_attr = dist_context.get_tensor_dist_attr_for_program(var)
    if tensor_attr is None:
        from paddle.base.core import TensorDistAttr

        new_attr = TensorDistAttr()
        if attr.dims_mapping:
            new_attr.dims_mapping = [int(d) for d in attr.dims_mapping]
        else:
            new_attr.dims_mapping = [-1 for _ in (var.shape or [])]
        dist_context.set_tensor_dist_attr_for_program(var, new_attr)
        tensor_attr = dist_context.get_tensor_dist_attr_for_program(var)
    if attr.HasField("process_mesh"):
        tensor_attr.process_mesh = meshes.get(attr.process_mesh)
    if attr.HasField("chunk_id"):
        tensor_attr.chunk_id = int(attr.chunk_id)
