"""PIR: a Paddle 3.x program (PIR, serialized as JSON) read into a `Program`.

From Paddle 3.0 a static program is a PIR program; `paddle.static.save`,
`paddle.jit.save` and `paddle.base.core.serialize_pir_program` write it as JSON:

    {"base_code": {"magic": "pir", "trainable": true, "version": 4},
     "program": {"regions": [{"#": "region_0", "blocks": [{"#": "block_0", "args": [],
                  "ops": [{"#": "1.matmul", "I": [{"%": 5}, ...],
                           "O": [{"%": 7, "TT": <type>}], "A": [<attr>, ...]}, ...]}]}]}}

An op's `"#"` is `dialect.name` with the dialect as a number (0 builtin, 1 pd_op,
2 cf, 3 custom_op; `dist_op` is written out), `"p"` for a parameter; `"I"` names
the values it reads and `"O"` defines its results with their types (a distributed
value's type, `4.t_dist_dtensor`, holds its dense type and its tensor dist attr);
`"A"` holds the attributes: `op_role`, `struct_name` on ops made inside a layer,
and `op_dist_attr`, `[mesh, operand dist attrs, result dist attrs, chunk id]` with
chunk id -1 until Paddle's VPP completion gives one.

The JSON is read op by op (`json`'s decoder on one op at a time, never the whole
document), into the side tables of `vppctl.program.pir.tables`; `grads` links
gradients to the values and ops they belong to, and `encode` writes the
`Program` vppctl's commands read. How PIR maps onto that model:

- each op is an op: its type with the dialect spelled out (`pd_op.matmul`), role,
  struct name, mesh, chunk id, and the meshes of its operand and result dist attrs;
- each value is a variable named `%N` (N its id in the file), with the dense type's
  global dims and data type, the dist type's mesh, and whether it is persistable;
- `builtin.parameter` and `pd_op.data` declare values (parameters, feeds, optimizer
  states): they are read as those variables, named as the program names them;
- `builtin.combine` and `builtin.split` only pack values into a vector and out:
  an op reading a vector reads its values; `dist_op.reshard` is communication
  between meshes (or placements): an op reading its result reads its source, as an
  op on another stage reads a variable in a legacy program;
- a gradient value is named `X@GRAD` (parts summed later `X@GRAD@RENAME@k`) and a
  grad op's `forward_op_id` names the op it differentiates (`grads`);
- an op's regions are sub-blocks (`sub_block`), its blocks' arguments variables;
- what Paddle leaves out is absent, however it writes it: a null operand (`%0`), a result
  typed NULL (read later, a null operand), and any dist attr or part of one (an op's, its
  mesh, an operand's or result's, a vector entry's, a chunk id, a type's parts) written
  as Paddle's NULL (`{"#": "NULL"}`: `momentum_` writes its absent `master_param_out`'s
  so), as JSON null, or not at all.

Not read: other attributes, dims mappings and partial status, local shapes, types
other than dense tensors and vectors (a value of another type is a variable of
type RAW), and `kwargs` block arguments. A file that is not such a program
(invalid JSON, another magic, an unknown version, a truncated file, a value used
before any op defines it) is a ProgramFileError (exit 3) with a one-line reason.

Bounds: JSON nesting deeper than the decoder's recursion limit is refused; one op
(or other item) may hold at most `cursor.MAX_ITEM_CHARS` (4 MiB) of JSON, so the Python objects
of one op stay small whatever the file holds.
"""

from __future__ import annotations

from typing import Any

from vppctl.errors import ProgramFileError
from vppctl.program._proto import program_pb2 as pb
from vppctl.program.pir.cursor import (
    INT32,
    JsonCursor,
    Malformed,
    OverBound,
    arr,
    integer,
    integers,
    is_null,
    name,
    obj,
    optional,
    shown,
    string,
)
from vppctl.program.pir.encode import EncodedPir, encode_program
from vppctl.program.pir.grads import link_gradients
from vppctl.program.pir.tables import (
    COMBINE,
    DATA,
    NO_OP,
    NO_VALUE,
    PARAMETER,
    RESHARD,
    SPLIT,
    PirTables,
)

# The serialization versions Paddle 3.3.1 knows (it writes 4, and any of these on request,
# in this one layout: the number says which of its loader's patches apply); a later one may
# change the layout, so it is refused.
PIR_VERSIONS = range(0, 5)
# Values ops may read again through a vector other ops read (beyond the operands the file
# writes): each reader of a `builtin.combine`'s vector reads all its values, so a wide vector
# read by many ops would make the operands grow as width x readers from a small file.
MAX_REREAD = 1 << 20

_DIALECTS = {"0": "builtin", "1": "pd_op", "2": "cf", "3": "custom_op", "4": "dist"}

# Data types of dense tensor types (`0.t_f32`, ...) as VarType codes.
_DTYPES = {
    "t_bool": pb.VarType.BOOL,
    "t_i8": pb.VarType.INT8,
    "t_ui8": pb.VarType.UINT8,
    "t_i16": pb.VarType.INT16,
    "t_i32": pb.VarType.INT32,
    "t_i64": pb.VarType.INT64,
    "t_f16": pb.VarType.FP16,
    "t_bf16": pb.VarType.BF16,
    "t_f32": pb.VarType.FP32,
    "t_f64": pb.VarType.FP64,
    "t_c64": pb.VarType.COMPLEX64,
    "t_c128": pb.VarType.COMPLEX128,
    "t_f8e4m3fn": pb.VarType.FP8_E4M3FN,
    "t_f8e5m2": pb.VarType.FP8_E5M2,
}


def parse_pir(data: bytes | bytearray, *, source: str, max_blocks: int) -> EncodedPir:
    """Read a PIR program's JSON (at most `max_blocks` blocks); ProgramFileError (exit 3) when
    it is not one."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _refused(source, f"its JSON is not UTF-8 (byte {e.start})") from None
    reader = _Reader(text, max_blocks)
    try:
        tables, version = reader.read()
    except OverBound as e:
        raise ProgramFileError(f"cannot load {source}: {e}") from None
    except Malformed as e:
        raise _refused(source, str(e)) from None
    except RecursionError:
        raise _refused(source, "its JSON is nested too deeply") from None
    del text, reader
    names, forward_of = link_gradients(tables)
    return encode_program(tables, names, forward_of, version=version)


def header_problem(header: Any) -> str | None:
    """Why a decoded `"base_code"` object is not the header of a PIR program vppctl reads
    (its magic, its version), or None; the check of a stream asks too, as soon as the
    header has arrived (`vppctl.program.sniff`)."""
    if not isinstance(header, dict):
        return '"base_code" is not a JSON object'
    if header.get("magic") != "pir":
        return f'its header\'s magic is {shown(header.get("magic"))}, not "pir"'
    version = header.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        return "its header has no integer version"
    if version not in PIR_VERSIONS:
        return (
            f"it is serialization version {shown(version)}, and vppctl reads versions "
            f"{PIR_VERSIONS.start} to {PIR_VERSIONS.stop - 1} (Paddle 3.3.1 writes 4)"
        )
    return None


def _refused(source: str, reason: str) -> ProgramFileError:
    return ProgramFileError(f"cannot load {source}: not a PIR program: {reason}")


def _type_key(type_: Any) -> tuple[Any, ...] | None:
    """A hashable key of a value's type as the JSON gives it (what `_read_type` reads of it),
    or None for a type that has no such key (then it is read every time)."""
    try:
        if type_["#"] == "4.t_dist_dtensor":
            dense, dist = type_["D"][0], type_["D"][1]
            mesh = dist["D"][0]["D"]
            key = (
                dense["#"],
                dense["D"][0]["#"],
                tuple(dense["D"][1]),
                tuple(mesh[0]),
                tuple(mesh[1]),
                tuple(mesh[2]),
            )
            hash(key)  # a list or object inside (a malformed type) cannot be a key
            return key
    except (TypeError, KeyError, IndexError):
        pass
    return None


def op_type(compressed: str) -> str:
    """An op's type with its dialect spelled out: `1.matmul` -> `pd_op.matmul`."""
    if compressed == "p":
        return PARAMETER
    dialect, dot, name = compressed.partition(".")
    return f"{_DIALECTS.get(dialect, dialect)}.{name}" if dot else compressed


# -- the reader ------------------------------------------------------------------------------


class _Reader:
    """Reads the JSON into PirTables (see the module docstring)."""

    def __init__(self, text: str, max_blocks: int) -> None:
        self.json = JsonCursor(text)
        self.max_blocks = max_blocks
        self.t = PirTables()
        self._meshes: dict[tuple[Any, ...], bytes] = {}
        self._types: dict[tuple[Any, ...], tuple[int, tuple[int, ...], bytes]] = {}
        self._vector_readers: dict[int, int] = {}  # vector value -> the ops that read it so far
        self._reread = 0  # values read again through vectors (`_vector_read`)
        self._written = 0  # operands the file writes, of ops and of combines

    def read(self) -> tuple[PirTables, int]:
        j = self.json
        version = None
        seen_program = False
        for key in j.members("the top-level object"):
            if key == "base_code" and not seen_program:
                version = self._header()
            elif key == "program" and version is not None:
                self._program()
                seen_program = True
            else:
                raise Malformed(
                    "the JSON does not begin with PIR's header "
                    '({"base_code": {"magic": "pir", ...}, "program": ...})'
                )
        if version is None or not seen_program:
            raise Malformed('it has no "base_code" header and "program"')
        j.end()
        return self.t, version

    def _header(self) -> int:
        header = obj(self.json.value("the header"), '"base_code"')
        problem = header_problem(header)
        if problem is not None:
            raise Malformed(problem)
        return int(header["version"])

    def _program(self) -> None:
        j = self.json
        for key in j.members('"program"'):
            if key != "regions":
                j.skip(f'"program".{shown(key)}')
                continue
            for k in j.elements('"program".regions'):
                if k:
                    raise Malformed("it has more than one top-level region")
                self._region_stream()
        if not self.t.block_parent:
            raise Malformed("it has no block")

    def _region_stream(self) -> None:
        j = self.json
        for key in j.members("a region"):
            if key != "blocks":
                j.skip(f"region.{shown(key)}")
                continue
            for k in j.elements("region.blocks"):
                if k:
                    raise Malformed("its top-level region has more than one block")
                self._block_stream()

    def _block_stream(self) -> None:
        """The global block, read op by op from the text."""
        j = self.json
        b = self._new_block(-1)
        for key in j.members("block 0"):
            if key == "ops":
                for k in j.elements("block 0's ops"):
                    self._op(obj(j.value(f"op {k}"), f"op {k}"), b, k)
            elif key == "args":
                for k in j.elements("block 0's args"):
                    self._block_arg(j.value(f"block 0 argument {k}"), b)
            else:
                j.skip(f"block 0's {shown(key)}")

    def _new_block(self, parent: int) -> int:
        b = len(self.t.block_parent)
        if b >= self.max_blocks:
            raise Malformed(
                f"it has more than {self.max_blocks:,} blocks, the most vppctl reads (Paddle makes "
                "one per region of a control-flow op)"
            )
        self.t.block_parent.append(parent)
        return b

    def _block(self, block: Any, parent: int) -> int:
        """A block of an op's region, decoded with its op."""
        b = self._new_block(parent)
        block = obj(block, f"block {b}")
        for k, arg in enumerate(optional(block.get("args"), f"block {b}'s args")):
            self._block_arg(arg, b, f"block {b} argument {k}")
        for k, op in enumerate(optional(block.get("ops"), f"block {b}'s ops")):
            self._op(obj(op, f"op {k} of block {b}"), b, k)
        return b

    def _block_arg(self, arg: Any, block: int, what: str = "a block argument") -> None:
        arg = obj(arg, what)
        self._define(integer(arg.get("#"), f"{what}'s id"), arg.get("TT"), block, NO_OP, what)

    # -- ops ---------------------------------------------------------------------------------

    def _op(self, op: dict[str, Any], block: int, k: int) -> None:
        what = f"op {k} of block {block}"
        kind = op_type(name(op.get("#"), f"{what}'s name"))
        if kind == PARAMETER:
            self._parameter(op, block, what)
        elif kind == DATA:
            self._data(op, block, what)
        elif kind in (COMBINE, SPLIT, RESHARD):
            self._fold(kind, op, block, what)
        else:
            self._compute(kind, op, block, what)

    def _compute(self, kind: str, op: dict[str, Any], block: int, what: str) -> None:
        t = self.t
        n = t.n_ops
        attrs = _attrs(op.get("A"), what)
        role, struct, mesh, chunk, ins, outs = self._placement(attrs, what)
        listed = optional(op.get("I"), f"{what}'s I")
        self._written += len(listed)
        operands = [self._operand(x, what) for x in listed]
        results = optional(op.get("O"), f"{what}'s O")
        t.op_type.append(kind)
        t.op_role.append(role)
        t.op_struct.append(struct)
        t.op_mesh.append(mesh)
        t.op_chunk.append(chunk)
        t.op_block.append(block)
        t.in_val.extend(operands)
        t.in_off.append(len(t.in_val))
        t.in_mesh.append(ins)
        flags = _result_flags(op.get("OA"), len(results), what)
        for r, result in enumerate(results):
            result = obj(result, f"{what}'s result {r}")
            pir_id = integer(result.get("%"), f"{what}'s result {r} id")
            if "TT" in result and is_null(result["TT"]):
                # a result the op does not produce (a gradient not needed, an optional
                # output): an op reading it reads a null operand
                self._null_result(pir_id, f"{what}'s result {r}")
                pir_id = NO_VALUE
            t.out_val.append(pir_id)
            if pir_id != NO_VALUE:
                v = self._define(pir_id, result.get("TT"), block, n, f"{what}'s result {r}")
                t.v_persistable[v] = flags[r]
        t.out_off.append(len(t.out_val))
        t.out_mesh.append(outs)
        regions = op.get("regions")
        if regions is not None:
            subs = []
            for region in optional(regions, f"{what}'s regions"):
                for sub in arr(obj(region, f"{what}'s region").get("blocks", []), what):
                    subs.append(self._block(sub, block))
            t.sub_blocks[n] = subs

    def _placement(
        self, attrs: dict[str, Any], what: str
    ) -> tuple[int, str, bytes, int, tuple[bytes, ...], tuple[bytes, ...]]:
        role = attrs.get("op_role")
        role = 0 if role is None else integer(role, f"{what}'s op_role", INT32)
        struct = attrs.get("struct_name")
        struct = "" if struct is None else name(struct, f"{what}'s struct_name")
        dist = attrs.get("op_dist_attr")
        if is_null(dist):
            return role, struct, b"", -1, (), ()
        dist = arr(dist, f"{what}'s op_dist_attr")
        if len(dist) != 4:
            raise Malformed(f"{what}'s op_dist_attr has {len(dist)} parts, not 4")
        mesh = self._mesh(dist[0], what)
        ins = self._slot_meshes(dist[1], f"{what}'s operand dist attrs")
        outs = self._slot_meshes(dist[2], f"{what}'s result dist attrs")
        chunk = -1 if is_null(dist[3]) else integer(dist[3], f"{what}'s chunk id")
        return role, struct, mesh, max(chunk, -1), ins, outs

    def _vector_read(self, pir_id: int, what: str) -> None:
        """Counts the values an op reads again through a vector other ops read before it
        (each reader of a vector reads all its values): at most MAX_REREAD more than the
        operands the file writes, so that what the reader builds stays linear in the file."""
        t = self.t
        vector = t.resolve(pir_id)
        parts = t.combined.get(vector)
        if parts is None:
            parts = t.split.get(vector)
        if parts is None:
            return
        before = self._vector_readers.get(vector, 0)
        self._vector_readers[vector] = before + 1
        if not before:
            return
        self._reread += len(parts)
        bound = self._written + MAX_REREAD
        if self._reread > bound:
            raise OverBound(
                f"{what} reads vector %{vector} ({len(parts):,} values), which {before:,} ops "
                f"read before it: an op reading a vector reads each of its values, and the "
                f"values read again so number over {bound:,}, the most vppctl reads (the "
                f"operands the file writes plus {MAX_REREAD:,}; a program Paddle builds reads "
                "each vector once or twice)"
            )

    def _null_result(self, pir_id: int, what: str) -> None:
        t = self.t
        if pir_id != NO_VALUE and (pir_id in t.value_at or pir_id in t.alias):
            raise Malformed(f"{what} defines value %{pir_id} twice")
        t.null_results.add(pir_id)

    def _operand(self, x: Any, what: str) -> int:
        pir_id = integer(obj(x, f"{what}'s operand").get("%"), f"{what}'s operand id")
        t = self.t
        if pir_id == NO_VALUE or pir_id in t.combined or t.resolve(pir_id) in t.value_at:
            self._vector_read(pir_id, what)
            return pir_id
        source = t.resolve(pir_id)
        if source == NO_VALUE or source in t.null_results:  # (a reshard of) a NULL result
            return NO_VALUE
        raise Malformed(f"{what} reads value %{pir_id}, which no earlier op defines")

    def _parameter(self, op: dict[str, Any], block: int, what: str) -> None:
        """`builtin.parameter` ("p"): A is [is_distributed, is_parameter, need_clip, name],
        OA [persistable, stop_gradient, trainable]; its dist attrs are in DA."""
        attrs = arr(op.get("A"), f"{what}'s A")
        if len(attrs) != 4:
            raise Malformed(f"{what} (a parameter) has {len(attrs)} attributes, not 4")
        declared = name(attrs[3], f"{what}'s parameter name")
        result = obj(op.get("O"), f"{what}'s result")
        pir_id = integer(result.get("%"), f"{what}'s result id")
        v = self._define(pir_id, result.get("TT"), block, NO_OP, what)
        flags = optional(op.get("OA"), f"{what}'s OA") or [True]  # persistable unless it says not
        self.t.v_persistable[v] = bool(flags[0])
        self.t.v_parameter[v] = 1
        self.t.v_name[v] = declared
        self.t.folded[PARAMETER] += 1

    def _data(self, op: dict[str, Any], block: int, what: str) -> None:
        attrs = _attrs(op.get("A"), what)
        results = arr(op.get("O"), f"{what}'s O")
        if len(results) != 1:
            raise Malformed(f"{what} (pd_op.data) has {len(results)} results, not 1")
        result = obj(results[0], f"{what}'s result")
        v = self._define(integer(result.get("%"), f"{what}'s result id"), result.get("TT"), block,
                         NO_OP, what)  # fmt: skip
        flags = _result_flags(op.get("OA"), 1, what)
        self.t.v_persistable[v] = flags[0]
        given = attrs.get("name")
        if isinstance(given, str):
            self.t.v_name[v] = name(given, f"{what}'s name")
        self.t.folded[DATA] += 1

    def _fold(self, kind: str, op: dict[str, Any], block: int, what: str) -> None:
        t = self.t
        listed = optional(op.get("I"), f"{what}'s I")
        self._written += len(listed)
        operands = [self._operand(x, what) for x in listed]
        results = [obj(r, f"{what}'s result") for r in optional(op.get("O"), f"{what}'s O")]
        ids = [integer(r.get("%"), f"{what}'s result id") for r in results]
        if kind == COMBINE:
            if len(ids) != 1:
                raise Malformed(f"{what} (builtin.combine) has {len(ids)} results, not 1")
            t.combined[ids[0]] = tuple(operands)
        elif kind == SPLIT:
            if len(operands) != 1:
                raise Malformed(f"{what} (builtin.split) has {len(operands)} operands, not 1")
            source = t.resolve(operands[0])
            producer = t.v_producer[t.value(source)] if source in t.value_at else NO_OP
            for pir_id, r in zip(ids, results):
                self._define(pir_id, r.get("TT"), block, producer, what)
            t.split[source] = tuple(ids)
        else:  # a reshard: its result is its source, moved
            if len(operands) != 1 or len(ids) != 1:
                raise Malformed(f"{what} ({RESHARD}) does not read one value into one")
            t.alias[ids[0]] = operands[0]
        t.folded[kind] += 1

    # -- values ------------------------------------------------------------------------------

    def _define(self, pir_id: int, type_: Any, block: int, producer: int, what: str) -> int:
        t = self.t
        if (
            pir_id == NO_VALUE
            or pir_id in t.value_at
            or pir_id in t.alias
            or pir_id in t.null_results
        ):
            raise Malformed(f"{what} defines value %{pir_id} twice (or as 0)")
        dtype, dims, mesh = self._type(type_, what)
        v = len(t.v_id)
        t.value_at[pir_id] = v
        t.v_id.append(pir_id)
        t.v_block.append(block)
        t.v_producer.append(producer)
        t.v_dtype.append(dtype)
        t.v_dims.append(dims)
        t.v_mesh.append(mesh)
        t.v_persistable.append(0)
        t.v_parameter.append(0)
        t.v_name.append("")
        return v

    def _type(self, type_: Any, what: str) -> tuple[int, tuple[int, ...], bytes]:
        """(data type code or -1, global dims, raw mesh) of a value's type; a type seen
        before (most are: a program has few shapes) is looked up, not read again."""
        key = _type_key(type_)
        found = self._types.get(key) if key is not None else None
        if found is None:
            found = self._read_type(type_, what)
            if key is not None:
                self._types[key] = found
        return found

    def _read_type(self, type_: Any, what: str) -> tuple[int, tuple[int, ...], bytes]:
        if is_null(type_):
            return -1, (), b""
        type_ = obj(type_, f"{what}'s type")
        name = string(type_.get("#", ""), f"{what}'s type name").partition(".")[2]
        data = type_.get("D")
        if name == "t_dist_dtensor":
            parts = arr(data, f"{what}'s type")
            if len(parts) < 2:
                raise Malformed(f"{what}'s dist type has {len(parts)} parts")
            dtype, dims, _ = self._read_type(parts[0], what)
            return dtype, dims, self._tensor_mesh(parts[1], what)
        if name == "t_dtensor":
            parts = arr(data, f"{what}'s type")
            if len(parts) < 2:
                raise Malformed(f"{what}'s dense type has {len(parts)} parts")
            element = "" if is_null(parts[0]) else obj(parts[0], f"{what}'s data type").get("#")
            dims = () if is_null(parts[1]) else integers(parts[1], what)
            return _DTYPES.get(string(element, what).partition(".")[2], -1), dims, b""
        return -1, (), b""

    # -- meshes ------------------------------------------------------------------------------

    def _mesh(self, attr: Any, what: str) -> bytes:
        """A serialized ProcessMesh of a `4.a_process_mesh` [shape, ids, dim names] (a mesh
        seen before is looked up: every op names a few)."""
        try:
            data = attr["D"]
            return self._meshes[(tuple(data[0]), tuple(data[1]), tuple(data[2]))]
        except (TypeError, KeyError, IndexError):  # not seen yet, or malformed: read it
            return self._read_mesh(attr, what)

    def _read_mesh(self, attr: Any, what: str) -> bytes:
        if is_null(attr):
            return b""  # no mesh (Paddle writes an absent attribute as NULL)
        data = arr(obj(attr, f"{what}'s mesh").get("D"), f"{what}'s mesh")
        if len(data) != 3:
            raise Malformed(f"{what}'s mesh has {len(data)} parts, not 3")
        shape, ids = integers(data[0], f"{what}'s mesh"), integers(data[1], f"{what}'s mesh")
        names = tuple(name(n, f"{what}'s mesh dim name") for n in arr(data[2], what))
        raw = b""
        if ids:
            try:
                msg = pb.ProcessMesh(shape=shape, process_ids=ids, dim_names=names)
            except ValueError:  # an id out of int64's range
                raise Malformed(f"{what}'s mesh has an id out of range") from None
            raw = msg.SerializeToString()
        self._meshes[shape, ids, names] = raw
        return raw

    def _tensor_mesh(self, attr: Any, what: str) -> bytes:
        """The mesh of a `4.a_tensor_dist` [mesh, dims mapping, partial status]; none (b"")
        for a NULL one or one without data."""
        if is_null(attr):
            return b""
        data = obj(attr, f"{what}'s tensor dist attr").get("D")
        if is_null(data):
            return b""
        data = arr(data, f"{what}'s tensor dist attr")
        if not data:
            raise Malformed(f"{what}'s tensor dist attr is empty")
        return self._mesh(data[0], what)

    def _slot_meshes(self, attrs: Any, what: str) -> tuple[bytes, ...]:
        """The meshes of an op's operand (or result) dist attrs, one per value: a NULL list
        gives none (the encoder then names no mesh for any of them)."""
        if is_null(attrs):
            return ()
        return _flat(tuple(self._tensor_meshes(x, what) for x in arr(attrs, what)))

    def _tensor_meshes(self, attr: Any, what: str) -> tuple[bytes, ...]:
        """The meshes of one operand's or result's dist attr: one, or one per element of a
        vector (`0.a_array`). Paddle writes the dist attr of an absent optional operand or
        result (momentum_'s master_param_out) as NULL: one slot without a mesh."""
        if is_null(attr):
            return (b"",)
        attr = obj(attr, what)
        if str(attr.get("#", "")).endswith("a_array"):
            elements = attr.get("D")
            if is_null(elements):
                return ()
            return tuple(self._tensor_mesh(x, what) for x in arr(elements, what))
        return (self._tensor_mesh(attr, what),)


def _attrs(attrs: Any, what: str) -> dict[str, Any]:
    """An op's attributes, name -> data (`{"N": name, "AT": {"#": type, "D": data}}`)."""
    out = {}
    for a in optional(attrs, f"{what}'s A"):
        a = obj(a, f"{what}'s attribute")
        name = string(a.get("N"), f"{what}'s attribute name")
        value = a.get("AT")
        out[name] = None if is_null(value) else obj(value, f"{what}'s attribute").get("D")
    return out


def _result_flags(attrs: Any, n: int, what: str) -> list[int]:
    """Per result: persistable (from the op's `OA` attributes), 0 without."""
    found = _attrs(attrs, what).get("persistable")
    if not isinstance(found, list):
        return [0] * n
    flags = [1 if isinstance(f, dict) and f.get("D") is True else 0 for f in found]
    return (flags + [0] * n)[:n]


def _flat(groups: tuple[tuple[bytes, ...], ...]) -> tuple[bytes, ...]:
    """One mesh per operand (or result) slot: a vector's elements each get one."""
    return tuple(m for g in groups for m in g)
