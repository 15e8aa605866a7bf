"""`vppctl sample`: write a GPT-like training program annotated for plain PP.

The program is shaped like what Paddle's static auto-parallel produces for a
GPT decoder stack: forward ops with layer paths (`/GPTModel/DecoderLayer_3/MLP/Linear_1/`,
Paddle's `NameStruct` naming: the first call of a class has no suffix, later
calls get `_1`, `_2`, ...), the loss-grad op, one `<type>_grad` op per forward
op in reverse order (with `forward_op_id`), `sum` ops where a variable has
several gradient contributions (`x@GRAD@RENAME@block0@k`, as Paddle's backward
names them), optional global-norm gradient clipping, one optimizer update per
parameter, and a dist attr (stage mesh, chunk 0) on every op and variable.

Generation is deterministic. It builds each op from a cached template (type and
attributes) and only fills in names, meshes and ids, so a 1M-op program takes
seconds, not minutes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from vppctl import program_pb2 as pb
from vppctl import view_pb2 as view
from vppctl.errors import UsageError

Layout = Literal["blocked", "interleaved"]
Optimizer = Literal["adamw", "sgd", "none"]

FORWARD, BACKWARD, OPTIMIZE, LOSS = 0, 1, 2, 256
SEQ_LEN = 1024
HEAD_DIM = 64
FP32, INT64 = pb.VarType.FP32, pb.VarType.INT64

# Attribute values: (name, AttrType, value). Paddle writes these on every op.
_COMMON_ATTRS = (
    ("op_device", pb.STRING, ""),
    ("op_namescope", pb.STRING, "/"),
    ("with_quant_attr", pb.BOOLEAN, False),
)
_OP_ATTRS: dict[str, tuple[tuple[str, int, object], ...]] = {
    "lookup_table_v2": (("padding_idx", pb.LONG, -1),),
    "layer_norm": (("begin_norm_axis", pb.INT, 2), ("epsilon", pb.FLOAT, 1e-5)),
    "matmul_v2": (("trans_x", pb.BOOLEAN, False), ("trans_y", pb.BOOLEAN, False)),
    "matmul_v2/trans_y": (("trans_x", pb.BOOLEAN, False), ("trans_y", pb.BOOLEAN, True)),
    "elementwise_add": (("axis", pb.INT, -1),),
    "reshape2": (("shape", pb.INTS, (0, 0, -1, 3 * HEAD_DIM)),),
    "reshape2/merge": (("shape", pb.INTS, (0, 0, -1)),),
    "split": (("axis", pb.INT, -1), ("num", pb.INT, 3), ("sections", pb.INTS, ())),
    "transpose2": (("axis", pb.INTS, (0, 2, 1, 3)),),
    "scale": (
        ("bias", pb.FLOAT, 0.0),
        ("bias_after_scale", pb.BOOLEAN, True),
        ("scale", pb.FLOAT, HEAD_DIM**-0.5),
    ),
    "softmax": (("axis", pb.INT, -1),),
    "dropout": (
        ("dropout_implementation", pb.STRING, "upscale_in_train"),
        ("dropout_prob", pb.FLOAT, 0.1),
        ("fix_seed", pb.BOOLEAN, False),
        ("is_test", pb.BOOLEAN, False),
        ("seed", pb.INT, 0),
    ),
    "gelu": (("approximate", pb.BOOLEAN, False),),
    "softmax_with_cross_entropy": (
        ("axis", pb.INT, -1),
        ("ignore_index", pb.INT, -100),
        ("numeric_stable_mode", pb.BOOLEAN, True),
        ("soft_label", pb.BOOLEAN, False),
    ),
    "mean": (),
    "fill_constant": (
        ("dtype", pb.INT, FP32),
        ("shape", pb.LONGS, ()),
        ("str_value", pb.STRING, "1.0"),
        ("value", pb.FLOAT, 1.0),
    ),
    "sum": (),
    "adamw": (
        ("beta1", pb.FLOAT, 0.9),
        ("beta2", pb.FLOAT, 0.999),
        ("coeff", pb.FLOAT, 0.01),
        ("epsilon", pb.FLOAT, 1e-8),
        ("lazy_mode", pb.BOOLEAN, False),
        ("lr_ratio", pb.FLOAT, 1.0),
        ("multi_precision", pb.BOOLEAN, False),
        ("with_decay", pb.BOOLEAN, True),
    ),
    "sgd": (("multi_precision", pb.BOOLEAN, False),),
    "squared_l2_norm": (),
    "sqrt": (),
    "elementwise_max": (("axis", pb.INT, -1),),
    "elementwise_div": (("axis", pb.INT, -1),),
    "elementwise_mul": (("axis", pb.INT, -1),),
}

_CALLSTACK_FRAMES = (
    '  File "/home/user/PaddleNLP/llm/run_pretrain.py", line 631, in <module>\n    main()',
    '  File "/home/user/PaddleNLP/llm/run_pretrain.py", line 598, in main\n'
    "    train_result = trainer.train(resume_from_checkpoint=checkpoint)",
    '  File "/home/user/PaddleNLP/paddlenlp/trainer/auto_trainer.py", line 402, in train\n'
    "    return self._inner_training_loop(args, model, optimizer, lr_scheduler)",
    '  File "/usr/local/lib/python3.10/dist-packages/paddle/distributed/auto_parallel/'
    'static/engine.py", line 1104, in _build\n    outputs = self._model(*inputs)',
    '  File "/usr/local/lib/python3.10/dist-packages/paddle/nn/layer/layers.py", '
    "line 1532, in __call__\n    return self.forward(*inputs, **kwargs)",
    '  File "/home/user/PaddleNLP/paddlenlp/transformers/gpt/modeling_auto.py", '
    "line 713, in forward\n    outputs = decoder_layer(hidden_states, attention_mask)",
    '  File "/home/user/PaddleNLP/paddlenlp/transformers/gpt/modeling_auto.py", '
    "line 512, in forward\n    hidden_states = self.linear2(self.activation(self.linear1(x)))",
    '  File "/usr/local/lib/python3.10/dist-packages/paddle/base/framework.py", '
    "line 4567, in append_op\n    op = Operator(block=self, desc=op_desc, type=type)",
)


@dataclass(frozen=True)
class SampleOptions:
    """What `vppctl sample` builds; the defaults give a small GPT-like program."""

    layers: int
    pp: int
    ranks_per_stage: int = 1
    layout: Layout = "blocked"
    vpp: int = 2  # only for layout="interleaved": the chunks per stage of the layout
    backward: bool = True
    optimizer: Optimizer = "adamw"
    grad_clip: bool = True
    hidden: int = 1024
    vocab: int = 50304
    callstack: bool = False

    def check(self) -> None:
        """Refuse options that cannot make a program (UsageError, exit 2)."""
        if self.layers < 1:
            raise UsageError(f"--layers must be at least 1, got {self.layers}")
        if self.pp < 1:
            raise UsageError(f"--pp must be at least 1, got {self.pp}")
        if self.ranks_per_stage < 1:
            raise UsageError(f"--ranks-per-stage must be at least 1, got {self.ranks_per_stage}")
        if self.hidden < HEAD_DIM or self.hidden % HEAD_DIM:
            raise UsageError(
                f"--hidden must be a positive multiple of {HEAD_DIM}, got {self.hidden}"
            )
        if self.vocab < 1:
            raise UsageError(f"--vocab must be at least 1, got {self.vocab}")
        if self.layout == "blocked" and self.layers < self.pp:
            raise UsageError(
                f"--layers {self.layers} is fewer than --pp {self.pp}: every stage needs a layer"
            )
        if self.layout == "interleaved" and self.layers % (self.pp * self.vpp):
            raise UsageError(
                f"--layout interleaved needs --layers divisible by pp*vpp = {self.pp * self.vpp}, "
                f"got {self.layers}"
            )

    def layer_stage(self, layer: int) -> int:
        """The stage of decoder layer `layer` in the PP layout."""
        if self.layout == "blocked":
            return layer * self.pp // self.layers
        per_segment = self.layers // (self.pp * self.vpp)
        return (layer // per_segment) % self.pp


@dataclass(frozen=True)
class _Op:
    """One forward op of the model, before it is written: names, not messages."""

    type: str
    inputs: tuple[tuple[str, tuple[str, ...]], ...]
    outputs: tuple[tuple[str, tuple[str, ...]], ...]
    struct: str
    stage: int
    attrs: str = ""  # key into _OP_ATTRS when it differs from the type


class _Names:
    """Paddle-style unique names (`linear_3.w_0`, `layer_norm_0.tmp_2`), per kind counters."""

    def __init__(self) -> None:
        self._count: dict[str, int] = {}

    def new(self, kind: str) -> str:
        k = self._count.get(kind, 0)
        self._count[kind] = k + 1
        return f"{kind}_{k}"


class _Model:
    """The forward graph of the GPT model as `_Op`s, plus its variables' shapes."""

    def __init__(self, opts: SampleOptions) -> None:
        self.opts = opts
        self.names = _Names()
        self.ops: list[_Op] = []
        self.dims: dict[str, tuple[int, ...]] = {}
        self.dtype: dict[str, int] = {}
        self.params: list[str] = []
        self.data_vars: list[str] = []
        self.var_stage: dict[str, int] = {}

    # -- helpers -------------------------------------------------------------
    def var(self, name: str, dims: Sequence[int], dtype: int = FP32) -> str:
        self.dims[name] = tuple(dims)
        self.dtype[name] = dtype
        return name

    def param(self, name: str, dims: Sequence[int], stage: int) -> str:
        self.params.append(self.var(name, dims))
        self.var_stage[name] = stage
        return name

    def op(
        self,
        type_: str,
        ins: dict[str, Sequence[str]],
        outs: dict[str, Sequence[str]],
        struct: str,
        stage: int,
        attrs: str = "",
    ) -> None:
        self.ops.append(
            _Op(
                type_,
                tuple((k, tuple(v)) for k, v in ins.items()),
                tuple((k, tuple(v)) for k, v in outs.items()),
                struct,
                stage,
                attrs,
            )
        )
        for names in outs.values():
            for n in names:
                self.var_stage.setdefault(n, stage)

    def linear(
        self, x: str, n_in: int, n_out: int, struct: str, stage: int, out_dims: Sequence[int]
    ) -> str:
        base = self.names.new("linear")
        w = self.param(f"{base}.w_0", (n_in, n_out), stage)
        b = self.param(f"{base}.b_0", (n_out,), stage)
        mm = self.var(f"{self.names.new('matmul_v2')}.tmp_0", out_dims)
        out = self.var(f"{base}.tmp_1", out_dims)
        self.op("matmul_v2", {"X": [x], "Y": [w]}, {"Out": [mm]}, struct, stage)
        self.op("elementwise_add", {"X": [mm], "Y": [b]}, {"Out": [out]}, struct, stage)
        return out

    def layer_norm(self, x: str, struct: str, stage: int) -> str:
        h = self.opts.hidden
        base = self.names.new("layer_norm")
        scale = self.param(f"{base}.w_0", (h,), stage)
        bias = self.param(f"{base}.b_0", (h,), stage)
        mean = self.var(f"{base}.tmp_0", (-1, SEQ_LEN))
        var = self.var(f"{base}.tmp_1", (-1, SEQ_LEN))
        y = self.var(f"{base}.tmp_2", (-1, SEQ_LEN, h))
        self.op(
            "layer_norm",
            {"X": [x], "Scale": [scale], "Bias": [bias]},
            {"Y": [y], "Mean": [mean], "Variance": [var]},
            struct,
            stage,
        )
        return y

    def unary(
        self,
        type_: str,
        x: str,
        dims: Sequence[int],
        struct: str,
        stage: int,
        attrs: str = "",
        extra_out: str = "",
    ) -> str:
        out = self.var(f"{self.names.new(type_)}.tmp_0", dims)
        outs: dict[str, list[str]] = {"Out": [out]}
        if extra_out:
            outs[extra_out] = [self.var(f"{out[:-6]}.tmp_1", dims, pb.VarType.UINT8)]
        self.op(type_, {"X": [x]}, outs, struct, stage, attrs)
        return out

    def add(self, x: str, y: str, dims: Sequence[int], struct: str, stage: int) -> str:
        out = self.var(f"tmp_{self.names.new('tmp')[4:]}", dims)
        self.op("elementwise_add", {"X": [x], "Y": [y]}, {"Out": [out]}, struct, stage)
        return out

    # -- the model -----------------------------------------------------------
    def build(self) -> None:
        o = self.opts
        h = self.embedding()
        for i in range(o.layers):
            h = self.decoder_layer(i, h)
        self.head(h)

    def embedding(self) -> str:
        o, st = self.opts, "/GPTModel/GPTEmbeddings/"
        ids = self.var("input_ids", (-1, SEQ_LEN), INT64)
        pos = self.var("position_ids", (-1, SEQ_LEN), INT64)
        self.data_vars += [ids, pos]
        self.var_stage[ids] = self.var_stage[pos] = 0
        act = (-1, SEQ_LEN, o.hidden)
        word = self.param("embedding_0.w_0", (o.vocab, o.hidden), 0)
        posw = self.param("embedding_1.w_0", (SEQ_LEN, o.hidden), 0)
        e1 = self.var("embedding_0.tmp_0", act)
        e2 = self.var("embedding_1.tmp_0", act)
        self.op("lookup_table_v2", {"Ids": [ids], "W": [word]}, {"Out": [e1]}, st + "Embedding/", 0)
        self.op(
            "lookup_table_v2", {"Ids": [pos], "W": [posw]}, {"Out": [e2]}, st + "Embedding_1/", 0
        )
        h = self.add(e1, e2, act, st, 0)
        return self.unary("dropout", h, act, st + "Dropout/", 0, extra_out="Mask")

    def decoder_layer(self, i: int, x: str) -> str:
        o = self.opts
        stage = o.layer_stage(i)
        root = "/GPTModel/" + ("DecoderLayer" if i == 0 else f"DecoderLayer_{i}") + "/"
        att, mlp = root + "MultiHeadAttention/", root + "MLP/"
        hd, nh, s = o.hidden, o.hidden // HEAD_DIM, SEQ_LEN
        act, head = (-1, s, hd), (-1, nh, s, HEAD_DIM)
        y = self.layer_norm(x, root + "LayerNorm/", stage)
        qkv = self.linear(y, hd, 3 * hd, att + "Linear/", stage, (-1, s, 3 * hd))
        r = self.unary("reshape2", qkv, (-1, s, nh, 3 * HEAD_DIM), att, stage)
        q, k, v = (
            self.var(f"{self.names.new('split')}.tmp_{j}", (-1, s, nh, HEAD_DIM)) for j in range(3)
        )
        self.op("split", {"X": [r]}, {"Out": [q, k, v]}, att, stage)
        q, k, v = (self.unary("transpose2", t, head, att, stage) for t in (q, k, v))
        q = self.unary("scale", q, head, att, stage)
        scores = self.var(f"{self.names.new('matmul_v2')}.tmp_0", (-1, nh, s, s))
        self.op(
            "matmul_v2", {"X": [q], "Y": [k]}, {"Out": [scores]}, att, stage, "matmul_v2/trans_y"
        )
        probs = self.unary("softmax", scores, (-1, nh, s, s), att, stage)
        probs = self.unary(
            "dropout", probs, (-1, nh, s, s), att + "Dropout/", stage, extra_out="Mask"
        )
        ctx = self.var(f"{self.names.new('matmul_v2')}.tmp_0", head)
        self.op("matmul_v2", {"X": [probs], "Y": [v]}, {"Out": [ctx]}, att, stage)
        ctx = self.unary("transpose2", ctx, (-1, s, nh, HEAD_DIM), att, stage)
        ctx = self.unary("reshape2", ctx, act, att, stage, "reshape2/merge")
        out = self.linear(ctx, hd, hd, att + "Linear_1/", stage, act)
        out = self.unary("dropout", out, act, root + "Dropout/", stage, extra_out="Mask")
        x = self.add(x, out, act, root, stage)
        y = self.layer_norm(x, root + "LayerNorm_1/", stage)
        f = self.linear(y, hd, 4 * hd, mlp + "Linear/", stage, (-1, s, 4 * hd))
        f = self.unary("gelu", f, (-1, s, 4 * hd), mlp + "GELU/", stage)
        f = self.linear(f, 4 * hd, hd, mlp + "Linear_1/", stage, act)
        f = self.unary("dropout", f, act, root + "Dropout_1/", stage, extra_out="Mask")
        return self.add(x, f, act, root, stage)

    def head(self, h: str) -> None:
        o = self.opts
        stage = o.layer_stage(o.layers - 1)
        y = self.layer_norm(h, "/GPTModel/LayerNorm/", stage)
        logits = self.linear(
            y, o.hidden, o.vocab, "/GPTLMHead/Linear/", stage, (-1, SEQ_LEN, o.vocab)
        )
        labels = self.var("labels", (-1, SEQ_LEN, 1), INT64)
        self.data_vars.append(labels)
        self.var_stage[labels] = stage
        softmax = self.var("softmax_with_cross_entropy_0.tmp_0", (-1, SEQ_LEN, o.vocab))
        loss_tok = self.var("softmax_with_cross_entropy_0.tmp_1", (-1, SEQ_LEN, 1))
        self.op(
            "softmax_with_cross_entropy",
            {"Logits": [logits], "Label": [labels]},
            {"Softmax": [softmax], "Loss": [loss_tok]},
            "/GPTPretrainingCriterion/",
            stage,
        )
        loss = self.var("mean_0.tmp_0", ())
        self.op("mean", {"X": [loss_tok]}, {"Out": [loss]}, "/GPTPretrainingCriterion/", stage)


def _varint(n: int) -> bytes:
    """Protobuf base-128 varint of a non-negative int."""
    if n < 0x4000:
        return bytes((n,)) if n < 0x80 else bytes(((n & 0x7F) | 0x80, n >> 7))
    if n < 0x200000:
        return bytes(((n & 0x7F) | 0x80, ((n >> 7) & 0x7F) | 0x80, n >> 14))
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL_VARINTS = [_varint(n) for n in range(1 << 14)]


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: tag, length, payload."""
    n = len(payload)
    return tag + (_SMALL_VARINTS[n] if n < 16384 else _varint(n)) + payload


# Wire tags (field number << 3 | wire type) of the fields the writer encodes itself.
_T1, _T2, _T3 = b"\x0a", b"\x12", b"\x1a"
_T_STRUCT_NAME, _T_DIST_ATTR = b"\xca\x3e", b"\xd2\x3e"  # OpDesc 1001, 1002 (length-delimited)
_T_ID, _T_FORWARD_OP_ID = b"\xd8\x3e", b"\xe0\x3e"  # OpDesc 1003, 1004 (varint)
_T_ATTRS, _T_STRINGS = b"\x22", b"\x42"  # OpDesc.attrs = 4, Attr.strings = 8


class _Writer:
    """Turns the model into serialized ops and vars.

    The parts of an op that repeat (type, attributes, meshes, dims mappings) are
    built once with the generated messages and kept as bytes; each op is then
    encoded by joining those parts with its names and ids. Ops are written in
    protobuf's canonical field order, so parsing and re-serializing a sample gives
    the same bytes (tests check it). That is what makes a 1M-op program take
    seconds, not minutes.
    """

    def __init__(self, opts: SampleOptions, model: _Model) -> None:
        self.opts, self.model = opts, model
        k = opts.ranks_per_stage
        self.meshes = [
            pb.ProcessMesh(shape=[k], process_ids=range(s * k, s * k + k), dim_names=["dp"])
            for s in range(opts.pp)
        ]
        self.global_mesh = pb.ProcessMesh(
            shape=[opts.pp, k], process_ids=range(opts.pp * k), dim_names=["pp", "dp"]
        )
        self.uses_global = False
        self.var_stage: dict[str, int] = dict(model.var_stage)  # -1 = the global mesh
        self.var_order: dict[str, None] = dict.fromkeys((*model.data_vars, *model.params))
        self.ops: list[bytes] = []
        self.heads: dict[tuple[str, str, int], bytes] = {}
        self.tails: dict[int, bytes] = {}
        self.tdas: dict[tuple[int, int], bytes] = {}
        self.next_id = 1
        self.callstack = list(_CALLSTACK_FRAMES) if opts.callstack else None

    def mesh(self, stage: int) -> pb.ProcessMesh:
        return self.global_mesh if stage < 0 else self.meshes[stage]

    def head(self, type_: str, attrs_key: str, role: int) -> bytes:
        """The op's type and attribute fields, serialized (they repeat across layers)."""
        key = (type_, attrs_key, role)
        head = self.heads.get(key)
        if head is None:
            op = pb.OpDesc(type=type_)
            base = _OP_ATTRS[attrs_key or type_.removesuffix("_grad")]
            for name, atype, value in (*base, *_COMMON_ATTRS, ("op_role", pb.INT, role)):
                _set_attr(op.attrs.add(name=name, type=atype), atype, value)
            if self.callstack:
                op.attrs.add(name="op_callstack", type=pb.STRINGS, strings=self.callstack)
            head = self.heads[key] = op.SerializeToString()
        return head

    def tail(self, stage: int) -> bytes:
        """OperatorDistAttr fields after the per-tensor entries: mesh, impl, chunk 0."""
        tail = self.tails.get(stage)
        if tail is None:
            d = pb.OperatorDistAttr(
                process_mesh=self.mesh(stage), impl_type="default", impl_idx=0, chunk_id=0
            )
            tail = self.tails[stage] = d.SerializeToString()
        return tail

    def name_parts(self, name: str, stage: int) -> tuple[bytes, bytes, bytes]:
        """A name's argument field and its input and output dist-attr entries on `stage`."""
        ndim = len(self.model.dims.get(name, ()))
        tda = self.tdas.get((stage, ndim))
        if tda is None:
            tda = self.tdas[stage, ndim] = pb.TensorDistAttr(
                process_mesh=self.mesh(stage), dims_mapping=[-1] * ndim, chunk_id=0
            ).SerializeToString()
        nb = name.encode()
        entry = _field(_T1, nb) + _field(_T2, tda)
        return _field(_T2, nb), _field(_T1, entry), _field(_T2, entry)

    def emit(
        self,
        type_: str,
        ins: Sequence[tuple[str, Sequence[str]]],
        outs: Sequence[tuple[str, Sequence[str]]],
        role: int,
        stage: int,
        struct: str = "/",
        attrs_key: str = "",
        forward_op_id: int = 0,
        role_var: Sequence[str] = (),
    ) -> int:
        """Append one op; returns its id."""
        parts, in_entries, out_entries, used = [], [], [], []
        name_parts = self.name_parts
        for slot, names in ins:
            named = [name_parts(n, stage) for n in names]
            parts.append(_field(_T1, _slot(slot) + b"".join([p[0] for p in named])))
            in_entries += [p[1] for p in named]
            used += names
        for slot, names in outs:
            named = [name_parts(n, stage) for n in names]
            parts.append(_field(_T2, _slot(slot) + b"".join([p[0] for p in named])))
            out_entries += [p[2] for p in named]
            used += names
            for n in names:
                self.var_stage.setdefault(n, stage)
        parts.append(self.heads.get((type_, attrs_key, role)) or self.head(type_, attrs_key, role))
        if role_var:
            attr = (
                _field(_T1, b"op_role_var")
                + b"\x10\x05"  # type: STRINGS
                + b"".join([_field(_T_STRINGS, n.encode()) for n in role_var])
            )
            parts.append(_field(_T_ATTRS, attr))
        parts.append(_field(_T_STRUCT_NAME, struct.encode()))
        parts.append(_field(_T_DIST_ATTR, b"".join(in_entries + out_entries) + self.tail(stage)))
        op_id = self.next_id
        self.next_id += 1
        parts.append(_T_ID + _varint(op_id))
        if forward_op_id:
            parts.append(_T_FORWARD_OP_ID + _varint(forward_op_id))
        self.ops.append(b"".join(parts))
        self.var_order.update(dict.fromkeys(used))
        return op_id


_SLOTS: dict[str, bytes] = {}


def _slot(slot: str) -> bytes:
    """The encoded `parameter` field of an OpDesc.Var (a handful of slot names, cached)."""
    b = _SLOTS.get(slot)
    if b is None:
        b = _SLOTS[slot] = _field(_T1, slot.encode())
    return b


def _set_attr(attr: pb.OpDesc.Attr, atype: int, value: object) -> None:
    if atype == pb.INT:
        attr.i = int(value)  # type: ignore[call-overload]
    elif atype == pb.LONG:
        attr.l = int(value)  # type: ignore[call-overload]
    elif atype == pb.FLOAT:
        attr.f = float(value)  # type: ignore[arg-type]
    elif atype == pb.BOOLEAN:
        attr.b = bool(value)
    elif atype == pb.STRING:
        attr.s = str(value)
    elif atype == pb.INTS:
        attr.ints.extend(value)  # type: ignore[call-overload]
    elif atype == pb.LONGS:
        attr.longs.extend(value)  # type: ignore[call-overload]
    else:  # pragma: no cover - programming error in the tables above
        raise AssertionError(f"unhandled attr type {atype}")


_NO_GRAD = frozenset({"input_ids", "position_ids", "labels"})


def _grad_name(name: str) -> str:
    return name + "@GRAD"


def _backward(w: _Writer, fwd_ids: list[int]) -> dict[str, str]:
    """Append the loss-grad op, grad ops in reverse order and `sum` ops; return param -> grad."""
    model, ops = w.model, w.model.ops
    consumers: dict[str, int] = {}
    for op in ops:
        for _, names in op.inputs:
            for n in names:
                if n not in _NO_GRAD:
                    consumers[n] = consumers.get(n, 0) + 1
    loss_op = ops[-1]
    loss = loss_op.outputs[0][1][0]
    w.emit("fill_constant", (), (("Out", (_grad_name(loss),)),), LOSS | BACKWARD, loss_op.stage)
    w.var_stage[_grad_name(loss)] = loss_op.stage
    model.dims[_grad_name(loss)] = ()
    seen: dict[str, list[str]] = {}
    params = set(model.params)
    for op, fid in zip(reversed(ops), reversed(fwd_ids)):
        ins = [(slot, names) for slot, names in op.inputs]
        ins += [(slot + "@GRAD", tuple(_grad_name(n) for n in names)) for slot, names in op.outputs]
        outs, role_var, pending = [], [], []
        for slot, names in op.inputs:
            gnames = []
            for n in names:
                if n in _NO_GRAD:
                    continue
                g = _grad_name(n)
                model.dims[g] = model.dims[n]
                if consumers[n] > 1:
                    contrib = seen.setdefault(n, [])
                    g = f"{g}@RENAME@block0@{len(contrib)}"
                    model.dims[g] = model.dims[n]
                    contrib.append(g)
                    if len(contrib) == consumers[n]:
                        pending.append(n)
                gnames.append(g)
                if n in params:
                    role_var += [n, g]
            if gnames:
                outs.append((slot + "@GRAD", tuple(gnames)))
        w.emit(
            op.type + "_grad",
            ins,
            outs,
            BACKWARD,
            op.stage,
            attrs_key=op.attrs,
            forward_op_id=fid,
            role_var=role_var,
        )
        for n in pending:
            w.emit(
                "sum", (("X", tuple(seen[n])),), (("Out", (_grad_name(n),)),), BACKWARD, op.stage
            )
    return {p: _grad_name(p) for p in model.params}


def _clip(w: _Writer, grads: dict[str, str]) -> dict[str, str]:
    """Global-norm gradient clipping: per-grad ops on the grad's stage, the norm on all ranks."""
    model = w.model
    sq_names, clipped = [], {}
    for p, g in grads.items():
        stage = w.var_stage[p]
        sq = model.var(f"squared_l2_norm_{len(sq_names)}.tmp_0", (1,))
        sq_names.append(sq)
        w.emit("squared_l2_norm", (("X", (g,)),), (("Out", (sq,)),), OPTIMIZE, stage)
    w.uses_global = True
    total = model.var("sum_clip.tmp_0", (1,))
    norm = model.var("sqrt_0.tmp_0", (1,))
    max_norm = model.var("fill_constant_clip.tmp_0", (1,))
    denom = model.var("elementwise_max_0.tmp_0", (1,))
    coef = model.var("elementwise_div_0.tmp_0", (1,))
    w.emit("sum", (("X", tuple(sq_names)),), (("Out", (total,)),), OPTIMIZE, -1)
    w.emit("sqrt", (("X", (total,)),), (("Out", (norm,)),), OPTIMIZE, -1)
    w.emit("fill_constant", (), (("Out", (max_norm,)),), OPTIMIZE, -1)
    w.emit(
        "elementwise_max", (("X", (norm,)), ("Y", (max_norm,))), (("Out", (denom,)),), OPTIMIZE, -1
    )
    w.emit(
        "elementwise_div", (("X", (max_norm,)), ("Y", (denom,))), (("Out", (coef,)),), OPTIMIZE, -1
    )
    for p, g in grads.items():
        stage = w.var_stage[p]
        out = model.var(f"{g}@CLIP", model.dims[p])
        w.emit(
            "elementwise_mul", (("X", (g,)), ("Y", (coef,))), (("Out", (out,)),), OPTIMIZE, stage
        )
        clipped[p] = out
    return clipped


def _optimizer(w: _Writer, grads: dict[str, str]) -> None:
    opts, model = w.opts, w.model
    lr = model.var("learning_rate_0", (1,))
    w.var_stage[lr] = -1
    w.uses_global = True
    for p, g in grads.items():
        stage = w.var_stage[p]
        ins = [("Param", (p,)), ("Grad", (g,)), ("LearningRate", (lr,))]
        outs = [("ParamOut", (p,))]
        if opts.optimizer == "adamw":
            acc = {
                k: model.var(f"{p}_{k}_0", model.dims[p] if k.startswith("moment") else (1,))
                for k in ("moment1", "moment2", "beta1_pow_acc", "beta2_pow_acc")
            }
            for k in acc.values():
                w.var_stage[k] = stage
            ins += [
                ("Moment1", (acc["moment1"],)),
                ("Moment2", (acc["moment2"],)),
                ("Beta1Pow", (acc["beta1_pow_acc"],)),
                ("Beta2Pow", (acc["beta2_pow_acc"],)),
            ]
            outs += [
                ("Moment1Out", (acc["moment1"],)),
                ("Moment2Out", (acc["moment2"],)),
                ("Beta1PowOut", (acc["beta1_pow_acc"],)),
                ("Beta2PowOut", (acc["beta2_pow_acc"],)),
            ]
        w.emit(opts.optimizer, ins, outs, OPTIMIZE, stage, role_var=(p, g))


def _write_vars(w: _Writer) -> list[bytes]:
    """Every variable the ops name, in first-use order, with its dist attr.

    A VarDesc's name is its field 1, so a var is its encoded name followed by the
    rest of the message, which repeats across variables of one shape and stage.
    """
    model = w.model
    params, data = set(model.params), set(model.data_vars)
    rests: dict[tuple[object, ...], bytes] = {}
    out = []
    for name in w.var_order:
        stage = w.var_stage.get(name, 0)
        dims = model.dims.get(name, ())
        dtype = model.dtype.get(name.split("@")[0], FP32)
        persistable = (
            name in params
            or name == "learning_rate_0"
            or name.endswith(("_moment1_0", "_moment2_0", "_pow_acc_0"))
        )
        key = (stage, dims, dtype, persistable, name in params, name in data)
        rest = rests.get(key)
        if rest is None:
            v = pb.VarDesc(persistable=persistable or None, is_parameter=(name in params) or None)
            v.type.type = pb.VarType.DENSE_TENSOR
            v.type.dense_tensor.tensor.data_type = dtype
            v.type.dense_tensor.tensor.dims.extend(dims)
            if name in data:
                v.need_check_feed = True
                v.stop_gradient = True
            v.dist_attr.process_mesh.CopyFrom(w.mesh(stage))
            v.dist_attr.dims_mapping.extend([-1] * len(dims))
            v.dist_attr.chunk_id = 0
            rest = rests[key] = v.SerializePartialToString()
        out.append(_field(_T1, name.encode()) + rest)
    return out


def build_sample(opts: SampleOptions) -> bytes:
    """The serialized GPT-like program described by `opts` (deterministic)."""
    opts.check()
    model = _Model(opts)
    model.build()
    w = _Writer(opts, model)
    fwd_ids = []
    last = len(model.ops) - 1
    for i, op in enumerate(model.ops):
        role = LOSS if i == last else FORWARD
        fwd_ids.append(w.emit(op.type, op.inputs, op.outputs, role, op.stage, op.struct, op.attrs))
    if opts.backward:
        grads = _backward(w, fwd_ids)
        if opts.optimizer != "none":
            if opts.grad_clip:
                grads = _clip(w, grads)
            _optimizer(w, grads)
    prog = view.LazyProgram(version=pb.Version(version=0).SerializeToString())
    block = prog.blocks.add(idx=0, parent_idx=-1)
    block.vars.extend(_write_vars(w))
    block.ops.extend(w.ops)
    meshes = [*w.meshes, w.global_mesh] if w.uses_global else w.meshes
    prog.process_meshes.extend(m.SerializeToString() for m in meshes)
    return prog.SerializeToString()
