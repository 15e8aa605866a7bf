"""`vppctl sample`: write a GPT-like training program annotated for plain PP.

The program is shaped like what Paddle's static auto-parallel produces for a
GPT decoder stack: forward ops with layer paths (`/GPTModel/DecoderLayer_3/MLP/Linear_1/`,
Paddle's `NameStruct` naming: the first call of a class has no suffix, later
calls get `_1`, `_2`, ...), the loss-grad op, one `<type>_grad` op per forward
op in reverse order (with `forward_op_id`), `sum` ops where a variable has
several gradient contributions (`x@GRAD@RENAME@block0@k`, as Paddle's backward
names them), optional global-norm gradient clipping, one optimizer update per
parameter, and a dist attr (stage mesh, chunk 0) on every op and variable.

Generation is deterministic and fast (a 1M-op program in a few seconds):

- The model is built as plain tuples; each op is encoded from cached parts (its
  type and attributes, meshes, dims mappings are serialized once) joined with
  its names and ids, in protobuf's canonical field order, so parsing and
  re-serializing a sample gives the same bytes.
- Encoding every op field by field still costs ~40 µs of Python per op, so
  decoder layers are *stamped*: consecutive layers of one section (forward,
  backward, clipping, optimizer) differ only by the numbers in their names
  (`linear_12.w_0`, `DecoderLayer_3`) and their op ids, each growing by a fixed
  step per layer. Two consecutive layers encoded op by op give a bytes template
  with a `%d` or `%c` placeholder wherever they differ; the following layers are
  formatted from it in C, until a number would gain a digit or the layer's stage
  changes, and then two layers are encoded op by op again. The output is exactly
  what encoding every layer op by op gives (tests compare both, and digests).
- The serialized ops and variables are collected in large pieces and copied
  into the result piece by piece, so the result is never held twice (the peak
  is about 1.7x the output at 10,000 layers, most of the rest being the names).
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from operator import itemgetter
from typing import Generic, Literal, NamedTuple, TypeVar, cast

from vppctl import program_pb2 as pb
from vppctl import view_pb2 as view
from vppctl.errors import UsageError
from vppctl.gcpause import paused_gc
from vppctl.load import varint
from vppctl.roles import BACKWARD, FORWARD, LOSS, OPTIMIZE

Layout = Literal["blocked", "interleaved"]
Optimizer = Literal["adamw", "sgd", "none"]

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


class _Op(NamedTuple):
    """One forward op of the model, before it is written: names, not messages."""

    type: str
    inputs: tuple[tuple[str, Sequence[str]], ...]  # (slot, names)
    outputs: tuple[tuple[str, Sequence[str]], ...]
    struct: str
    stage: int
    attrs: str = ""  # key into _OP_ATTRS when it differs from the type


class _Unit(NamedTuple):
    """A run of the model written together: the embedding, one decoder layer, or the head."""

    ops: range  # indices into _Model.ops
    params: range  # indices into _Model.params
    # Decoder layers only: what the layer's ops depend on besides the numbers in
    # their names and ids (stage, struct path and input name with digits blanked);
    # layers with the same key can be stamped from one another. None otherwise.
    key: Hashable | None = None


_DIGITS = re.compile(r"(\d+)")


def _shape(name: str) -> str:
    """A name with its numbers blanked: `tmp_12` -> `tmp_#`."""
    return _DIGITS.sub("#", name)


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
        self.units: list[_Unit] = []
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
        ins: Mapping[str, Sequence[str]],
        outs: Mapping[str, Sequence[str]],
        struct: str,
        stage: int,
        attrs: str = "",
    ) -> None:
        self.ops.append(_Op(type_, tuple(ins.items()), tuple(outs.items()), struct, stage, attrs))
        setdefault = self.var_stage.setdefault
        for names in outs.values():
            for n in names:
                setdefault(n, stage)

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
        h = self._unit(self.embedding)
        for i in range(o.layers):
            root = "DecoderLayer" if i == 0 else f"DecoderLayer_{i}"
            key = (o.layer_stage(i), _shape(root), _shape(h))
            h = self._unit(partial(self.decoder_layer, i, h, root), key)
        self._unit(partial(self.head, h))

    def _unit(self, build: Callable[[], str | None], key: Hashable | None = None) -> str:
        ops, params = len(self.ops), len(self.params)
        out = build()
        self.units.append(_Unit(range(ops, len(self.ops)), range(params, len(self.params)), key))
        return out or ""

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

    def decoder_layer(self, i: int, x: str, name: str) -> str:
        o = self.opts
        stage = o.layer_stage(i)
        root = f"/GPTModel/{name}/"
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


_SMALL_VARINTS = [varint(n) for n in range(1 << 14)]


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: tag, length, payload."""
    n = len(payload)
    return tag + (_SMALL_VARINTS[n] if n < 16384 else varint(n)) + payload


# Wire tags (field number << 3 | wire type) of the fields the writer encodes itself.
_T1, _T2 = b"\x0a", b"\x12"
_T_STRUCT_NAME, _T_DIST_ATTR = b"\xca\x3e", b"\xd2\x3e"  # OpDesc 1001, 1002 (length-delimited)
_T_ID, _T_FORWARD_OP_ID = b"\xd8\x3e", b"\xe0\x3e"  # OpDesc 1003, 1004 (varint)
_T_ATTRS, _T_STRINGS = b"\x22", b"\x42"  # OpDesc.attrs = 4, Attr.strings = 8
_T_BLOCK_VARS, _T_BLOCK_OPS = b"\x1a", b"\x22"  # BlockDesc.vars = 3, BlockDesc.ops = 4

# An encoded op or variable is kept as fragments until it is written: bytes as
# they are, a str (a name) as UTF-8, an int (an op id) as a varint. The names and
# ids stay visible that way, which is what stamping needs.
_Fragment = bytes | str | int


class _Rope:
    """Encoded fields as fragments, and the size they take once rendered."""

    __slots__ = ("parts", "size")

    def __init__(self) -> None:
        self.parts: list[_Fragment] = []
        self.size = 0

    def raw(self, data: bytes) -> None:
        self.parts.append(data)
        self.size += len(data)

    def name(self, tag: bytes, name: str) -> None:
        """A string field holding a name."""
        n = len(name.encode())
        head = tag + varint(n)
        self.parts += (head, name)
        self.size += len(head) + n

    def number(self, tag: bytes, value: int) -> None:
        """A varint field holding an op id."""
        self.parts += (tag, value)
        self.size += len(tag) + len(varint(value))

    def field(self, tag: bytes, inner: _Rope) -> None:
        """A length-delimited field holding `inner`."""
        head = tag + varint(inner.size)
        self.parts.append(head)
        self.parts += inner.parts
        self.size += len(head) + inner.size

    def render(self) -> bytes:
        return b"".join(
            [
                f if isinstance(f, bytes) else f.encode() if isinstance(f, str) else varint(f)
                for f in self.parts
            ]
        )


@dataclass
class _Chunk:
    """What the writer wrote for one unit of a section, op by op."""

    ops: _Rope = field(default_factory=_Rope)  # block `ops` fields
    vars: _Rope = field(default_factory=_Rope)  # block `vars` fields of the new variables
    names: list[str] = field(default_factory=list)  # the new variables' names
    # Dims the chunk registered (gradients): later chunks encoded op by op read them.
    registered: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)
    n_ops: int = 0


class _Spool:
    """Bytes appended in order and kept in pieces of at least 32 MB.

    Pieces that large are mmapped by malloc, so releasing each one as soon as it
    is copied into the result returns its memory: the result never coexists with
    a full second copy of itself.
    """

    PIECE = 32 << 20

    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        self.pending: list[bytes] = []
        self.pending_size = 0
        self.size = 0

    def add(self, data: bytes) -> None:
        self.pending.append(data)
        self.pending_size += len(data)
        self.size += len(data)
        if self.pending_size >= self.PIECE:
            self._cut()

    def _cut(self) -> None:
        if self.pending:
            self.pieces.append(b"".join(self.pending))
            self.pending, self.pending_size = [], 0

    def drain_into(self, out: io.BytesIO) -> None:
        self._cut()
        self.pieces.reverse()
        while self.pieces:
            out.write(self.pieces.pop())


class _Writer:
    """Turns the model into serialized ops and vars.

    The parts of an op that repeat (type, attributes, meshes, dims mappings) are
    built once with the generated messages and kept as bytes; each op is then
    encoded by joining those parts with its names and ids, in protobuf's
    canonical field order. A variable is written when an op first names it (data
    variables and parameters first), which is the order Paddle lists them in.
    Output goes to the current `_Chunk`, which `record` and `flush` render.
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
        self.var_stage = model.var_stage  # grows with backward and optimizer variables; -1 = global
        self.params, self.data_vars = set(model.params), set(model.data_vars)
        self.seen: set[str] = set()  # variables written so far
        self.heads: dict[tuple[str, str, int], bytes] = {}
        self.tails: dict[int, bytes] = {}
        self.tdas: dict[tuple[int, int], bytes] = {}
        self.var_rests: dict[tuple[object, ...], bytes] = {}
        self.entries: dict[tuple[str, int], _Rope] = {}
        self.next_id = 1
        self.callstack = list(_CALLSTACK_FRAMES) if opts.callstack else None
        self.chunk = _Chunk()
        self.ops_out, self.vars_out = _Spool(), _Spool()

    # -- cached parts --------------------------------------------------------
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

    def tda(self, name: str, stage: int) -> bytes:
        """The TensorDistAttr of `name` on `stage`: the mesh, and -1 for each dim."""
        ndim = len(self.model.dims.get(name, ()))
        tda = self.tdas.get((stage, ndim))
        if tda is None:
            tda = self.tdas[stage, ndim] = pb.TensorDistAttr(
                process_mesh=self.mesh(stage), dims_mapping=[-1] * ndim, chunk_id=0
            ).SerializeToString()
        return tda

    def var_rest(self, name: str) -> bytes:
        """A VarDesc after its name (field 1): type, flags and dist attr, cached by kind."""
        model = self.model
        stage = self.var_stage.get(name, 0)
        dims = model.dims.get(name, ())
        dtype = model.dtype.get(name.split("@")[0], FP32)
        is_param, is_data = name in self.params, name in self.data_vars
        persistable = (
            is_param
            or name == "learning_rate_0"
            or name.endswith(("_moment1_0", "_moment2_0", "_pow_acc_0"))
        )
        key = (stage, dims, dtype, persistable, is_param, is_data)
        rest = self.var_rests.get(key)
        if rest is None:
            v = pb.VarDesc(persistable=persistable or None, is_parameter=is_param or None)
            v.type.type = pb.VarType.DENSE_TENSOR
            v.type.dense_tensor.tensor.data_type = cast("pb.VarType.Type", dtype)
            v.type.dense_tensor.tensor.dims.extend(dims)
            if is_data:
                v.need_check_feed = True
                v.stop_gradient = True
            v.dist_attr.process_mesh.CopyFrom(self.mesh(stage))
            v.dist_attr.dims_mapping.extend([-1] * len(dims))
            v.dist_attr.chunk_id = 0
            rest = self.var_rests[key] = v.SerializePartialToString()
        return rest

    # -- writing -------------------------------------------------------------
    def var(self, name: str) -> None:
        """Write variable `name` unless it is written already."""
        if name in self.seen:
            return
        self.seen.add(name)
        chunk = self.chunk
        var = _Rope()
        var.name(_T1, name)
        var.raw(self.var_rest(name))
        chunk.vars.field(_T_BLOCK_VARS, var)
        chunk.names.append(name)

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
        """Append one op (and the variables it names first); returns its id."""
        op, in_entries, out_entries = _Rope(), _Rope(), _Rope()
        used: list[str] = []
        for slot, names in ins:
            op.field(_T1, self.slot(slot, names))
            for n in names:
                in_entries.field(_T1, self.entry(n, stage))
            used += names
        for slot, names in outs:
            op.field(_T2, self.slot(slot, names))
            for n in names:
                out_entries.field(_T2, self.entry(n, stage))
                self.var_stage.setdefault(n, stage)
            used += names
        op.raw(self.head(type_, attrs_key, role))
        if role_var:
            attr = _Rope()
            attr.raw(_field(_T1, b"op_role_var") + b"\x10\x05")  # type: STRINGS
            for n in role_var:
                attr.name(_T_STRINGS, n)
            op.field(_T_ATTRS, attr)
        op.name(_T_STRUCT_NAME, struct)
        dist = _Rope()
        for part in (in_entries, out_entries):
            dist.parts += part.parts
            dist.size += part.size
        dist.raw(self.tail(stage))
        op.field(_T_DIST_ATTR, dist)
        op_id = self.next_id
        self.next_id += 1
        op.number(_T_ID, op_id)
        if forward_op_id:
            op.number(_T_FORWARD_OP_ID, forward_op_id)
        self.chunk.ops.field(_T_BLOCK_OPS, op)
        self.chunk.n_ops += 1
        for n in used:
            self.var(n)
        return op_id

    def slot(self, slot: str, names: Sequence[str]) -> _Rope:
        """An `OpDesc.Var`: the slot name and its arguments."""
        var = _Rope()
        var.raw(_slot(slot))
        for n in names:
            var.name(_T2, n)
        return var

    def entry(self, name: str, stage: int) -> _Rope:
        """A per-tensor dist attr entry of an op: the name and its TensorDistAttr (cached)."""
        entry = self.entries.get((name, stage))
        if entry is None:
            entry = self.entries[name, stage] = _Rope()
            entry.name(_T1, name)
            entry.raw(_field(_T2, self.tda(name, stage)))
        return entry

    # -- chunks --------------------------------------------------------------
    def flush(self) -> _Chunk:
        """Render the current chunk into the output; returns it."""
        chunk, self.chunk = self.chunk, _Chunk()
        if chunk.ops.parts:
            self.ops_out.add(chunk.ops.render())
        if chunk.vars.parts:
            self.vars_out.add(chunk.vars.render())
        return chunk

    def record(self, write: Callable[[], object]) -> _Chunk:
        """Run `write` in a chunk of its own; returns that chunk (already written out)."""
        self.flush()
        dims = self.model.dims
        before = len(dims)
        write()
        chunk = self.flush()
        # New keys are at the end of the dict, in the order they were registered.
        chunk.registered = list(islice(reversed(dims.items()), len(dims) - before))[::-1]
        return chunk

    def stamp(self, template: _Template, step: int, remember: bool = True) -> None:
        """Write a chunk from `template` without encoding its ops one by one.

        With `remember`, the chunk's new variables and their dims are recorded for
        the chunks encoded op by op after it.
        """
        if self.chunk.ops.parts or self.chunk.vars.parts:
            self.flush()
        stamp = template.render(step)
        if stamp.ops:
            self.ops_out.add(stamp.ops)
        if stamp.vars:
            self.vars_out.add(stamp.vars)
        if remember:
            self.seen.update(stamp.names)
            self.model.dims.update(zip(stamp.registered, template.registered_dims))
        self.next_id += template.n_ops

    def write_program(self) -> bytes:
        """The serialized program: one block with the variables, then the ops, then meshes."""
        self.flush()
        block_head = view.LazyBlock(idx=0, parent_idx=-1).SerializeToString()
        block_size = len(block_head) + self.vars_out.size + self.ops_out.size
        meshes = [*self.meshes, self.global_mesh] if self.uses_global else self.meshes
        rest = view.LazyProgram(
            version=pb.Version(version=0).SerializeToString(),
            process_meshes=[m.SerializeToString() for m in meshes],
        ).SerializeToString()
        out = io.BytesIO()
        out.write(_T1 + varint(block_size) + block_head)  # ProgramDesc.blocks = 1
        self.vars_out.drain_into(out)
        self.ops_out.drain_into(out)
        out.write(rest)  # fields 4 and 1001 follow the block in canonical order
        return out.getvalue()


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
        attr.ints.extend(cast("Iterable[int]", value))
    elif atype == pb.LONGS:
        attr.longs.extend(cast("Iterable[int]", value))
    else:  # pragma: no cover - programming error in the tables above
        raise AssertionError(f"unhandled attr type {atype}")


_Number = tuple[bool, int, int]  # (a varint?, value in the first probe, step per layer)


class _Numbers:
    """The numbers that differ between two probes, each with its step per layer.

    A number in a name is rendered with `%d`; an op id, a varint, with one `%c`
    per byte (computing the bytes in list comprehensions is quicker than calling
    an encoder per id). Equal numbers share their values, computed once per
    stamped layer; within a run every number keeps its width.
    """

    def __init__(self) -> None:
        self.found: dict[_Number, None] = {}

    def add(self, as_varint: bool, a: int, b: int) -> _Number:
        number = (as_varint, a, b - a)
        self.found[number] = None
        return number

    def freeze(self) -> dict[_Number, list[int]]:
        """Each number's positions in `values()`: one per decimal, one per varint byte."""
        self.decimals = [(a, d) for as_varint, a, d in self.found if not as_varint]
        positions = {n: [i] for i, n in enumerate(n for n in self.found if not n[0])}
        by_width: dict[int, list[_Number]] = {}
        for n in self.found:
            if n[0]:
                by_width.setdefault(len(varint(n[1])), []).append(n)
        self.varints: list[tuple[int, list[tuple[int, int]]]] = []  # (width, numbers)
        base = len(self.decimals)
        for width, numbers in sorted(by_width.items()):
            self.varints.append((width, [(a, d) for _, a, d in numbers]))
            for j, n in enumerate(numbers):
                positions[n] = [base + i * len(numbers) + j for i in range(width)]
            base += width * len(numbers)
        return positions

    def values(self, k: int) -> list[int]:
        """Every value `k` layers after the first probe: the decimals, then the varint bytes."""
        out = [a + k * d for a, d in self.decimals]
        for width, numbers in self.varints:
            ids = [a + k * d for a, d in numbers]
            for shift in range(0, 7 * (width - 1), 7):
                out += [(v >> shift) & 0x7F | 0x80 for v in ids]
            shift = 7 * (width - 1)
            out += [v >> shift for v in ids]
        return out

    def last_step(self) -> int:
        """The last `k` at which every number still takes as many bytes as in the probes."""
        last = 1 << 62
        for as_varint, a, d in self.found:
            if d:
                lo, hi = _same_width_range(a, as_varint)
                last = min(last, (hi - a) // d if d > 0 else (a - lo) // -d)
        return last


def _same_width_range(n: int, as_varint: bool) -> tuple[int, int]:
    """The values that take as many bytes as `n` in decimal (or as a varint)."""
    base = 128 if as_varint else 10
    width = len(varint(n)) if as_varint else len(str(n))
    return (base ** (width - 1) if width > 1 else 0), base**width - 1


class _NoTemplate(Exception):
    """Two probes differ in more than numbers: they cannot make a template."""


_Text = TypeVar("_Text", bytes, str)


class _Format(Generic[_Text]):
    """A %-format string and the positions of the values that fill it, in order."""

    def __init__(
        self, text: _Text, numbers: list[_Number], positions: dict[_Number, list[int]]
    ) -> None:
        self.text: _Text = text
        self.positions = [p for n in numbers for p in positions[n]]
        self.pick = itemgetter(*self.positions) if len(self.positions) > 1 else None

    def render(self, values: list[int]) -> _Text:
        args = (
            self.pick(values) if self.pick is not None else tuple(values[i] for i in self.positions)
        )
        out: _Text = self.text % args
        return out


class _Template:
    """One section's chunk for any decoder layer of a run, built from two probes.

    The fragments of two consecutive layers' chunks are lined up: bytes must be
    equal, names equal up to their numbers, ids may differ. Every number that
    differs becomes a placeholder whose value grows by the same step per layer.
    """

    def __init__(self, a: _Chunk, b: _Chunk) -> None:
        dims = [d for _, d in a.registered]
        if (
            a.n_ops != b.n_ops
            or len(a.names) != len(b.names)
            or dims != [d for _, d in b.registered]
        ):
            raise _NoTemplate
        # The registered names are new variables of the chunk (gradients, moments):
        # a stamped chunk takes them from its new names, by position.
        self.registered = _positions([n for n, _ in a.registered], a.names)
        if self.registered != _positions([n for n, _ in b.registered], b.names):
            raise _NoTemplate
        self.registered_dims = dims
        numbers = _Numbers()
        ops = _bytes_format(a.ops.parts, b.ops.parts, numbers)
        vars_ = _bytes_format(a.vars.parts, b.vars.parts, numbers)
        names = _names_format(a.names, b.names, numbers)
        positions = numbers.freeze()
        self.ops = _Format(*ops, positions)
        self.vars = _Format(*vars_, positions)
        self.names = _Format(*names, positions)
        self.numbers, self.n_ops = numbers, a.n_ops
        self.last = numbers.last_step()

    @classmethod
    def pair(cls, a: _Chunk, b: _Chunk) -> _Template | None:
        try:
            return cls(a, b)
        except _NoTemplate:
            return None

    def render(self, k: int) -> _Stamp:
        """The chunk of the layer `k` steps after the first probe."""
        values = self.numbers.values(k)
        names = self.names.render(values)
        new = names.split("\0") if names else []
        return _Stamp(
            self.ops.render(values),
            self.vars.render(values),
            new,
            [new[i] for i in self.registered],
        )


class _Stamp(NamedTuple):
    """A stamped chunk: what `_Chunk` would hold, rendered."""

    ops: bytes
    vars: bytes
    names: list[str]
    registered: list[str]  # names whose dims the chunk registers (`_Template.registered_dims`)


def _positions(names: list[str], new: list[str]) -> list[int]:
    """Where each of `names` is among the `new` names; _NoTemplate if one is not."""
    where = {n: i for i, n in enumerate(new)}
    if any(n not in where for n in names):
        raise _NoTemplate
    return [where[n] for n in names]


def _bytes_format(
    a: list[_Fragment], b: list[_Fragment], numbers: _Numbers
) -> tuple[bytes, list[_Number]]:
    if len(a) != len(b):
        raise _NoTemplate
    parts: list[bytes] = []
    found: list[_Number] = []
    for fa, fb in zip(a, b):
        if isinstance(fa, bytes) and isinstance(fb, bytes):
            if fa != fb:
                raise _NoTemplate
            parts.append(fa.replace(b"%", b"%%"))
        elif isinstance(fa, int) and isinstance(fb, int):
            if fa == fb:
                parts.append(varint(fa).replace(b"%", b"%%"))
                continue
            width = len(varint(fa))
            if width != len(varint(fb)):
                raise _NoTemplate
            parts.append(b"%c" * width)
            found.append(numbers.add(True, fa, fb))
        elif isinstance(fa, str) and isinstance(fb, str):
            text, in_name = _name_format(fa, fb, numbers)
            parts.append(text.encode())
            found += in_name
        else:
            raise _NoTemplate
    return b"".join(parts), found


def _names_format(a: list[str], b: list[str], numbers: _Numbers) -> tuple[str, list[_Number]]:
    parts: list[str] = []
    found: list[_Number] = []
    for na, nb in zip(a, b):
        text, in_name = _name_format(na, nb, numbers)
        parts.append(text)
        found += in_name
    return "\0".join(parts), found


def _name_format(a: str, b: str, numbers: _Numbers) -> tuple[str, list[_Number]]:
    """`linear_12.w_0` and `linear_16.w_0` -> `linear_%d.w_0` and the number 12 (+4)."""
    pa, pb_ = _DIGITS.split(a), _DIGITS.split(b)
    if len(pa) != len(pb_):
        raise _NoTemplate
    parts: list[str] = []
    found: list[_Number] = []
    for i, (sa, sb) in enumerate(zip(pa, pb_)):
        if sa == sb:
            parts.append(sa.replace("%", "%%"))
        elif i % 2 == 0 or len(sa) != len(sb) or (len(sa) > 1 and "0" in (sa[0], sb[0])):
            raise _NoTemplate  # different text, a number that changes width, or leading zeros
        else:
            parts.append("%d")
            found.append(numbers.add(False, int(sa), int(sb)))
    return "".join(parts), found


class _Stamper:
    """Writes one section's decoder layers, stamping those a template covers.

    Layers are probed (encoded op by op) until two consecutive ones with the same
    key make a template; the template then writes every following layer with the
    same key until one of its numbers would change width, and probing resumes.
    With `check`, every stamped layer is also encoded op by op and compared.
    """

    def __init__(self, w: _Writer, check: bool, remember: bool) -> None:
        self.w, self.check, self.remember = w, check, remember
        self.probe: tuple[int, Hashable, _Chunk] | None = None
        self.template: tuple[int, Hashable, _Template] | None = None

    def write(
        self, step: int, key: Hashable, write_layer: Callable[[], object], ahead: int
    ) -> None:
        """Write the layer at `step`; `ahead` layers with the same key follow it."""
        if self.template is not None:
            first, tkey, template = self.template
            k = step - first
            if tkey == key and 2 <= k <= template.last:
                if self.check:
                    self._check(template, k, write_layer)
                else:
                    self.w.stamp(template, k, self.remember)
                return
        chunk = self.w.record(write_layer)
        probe, self.probe, self.template = self.probe, (step, key, chunk), None
        # A template costs about as much as encoding a layer: worth it for a few layers.
        if probe is not None and probe[0] == step - 1 and probe[1] == key and ahead >= 3:
            paired = _Template.pair(probe[2], chunk)
            if paired is not None:
                self.template = (step - 1, key, paired)

    def _check(self, template: _Template, k: int, write_layer: Callable[[], object]) -> None:
        stamped = template.render(k)
        chunk = self.w.record(write_layer)
        encoded = _Stamp(
            chunk.ops.render(), chunk.vars.render(), chunk.names, [n for n, _ in chunk.registered]
        )
        if stamped != encoded or template.registered_dims != [d for _, d in chunk.registered]:
            raise AssertionError(f"a stamped layer differs from the encoded one (k={k})")


def _write_units(
    w: _Writer,
    units: Sequence[_Unit],
    write_unit: Callable[[_Unit], object],
    check: bool,
    last: bool = False,
) -> None:
    """Write one section unit by unit; decoder layers go through a `_Stamper`.

    `last`: no op follows this section, so its new variables need not be remembered.
    """
    stamper = _Stamper(w, check, remember=not last)
    ahead = [0] * len(units)  # how many units with the same key follow each unit
    for i in range(len(units) - 2, -1, -1):
        if units[i].key is not None and units[i].key == units[i + 1].key:
            ahead[i] = ahead[i + 1] + 1
    for step, unit in enumerate(units):
        if unit.key is None:
            write_unit(unit)
        else:
            stamper.write(step, unit.key, partial(write_unit, unit), ahead[step])


_NO_GRAD = frozenset({"input_ids", "position_ids", "labels"})


def _grad_name(name: str) -> str:
    return name + "@GRAD"


def _variables(w: _Writer, check: bool) -> None:
    """The data variables and the parameters come first, before any op names them."""
    model = w.model
    for name in model.data_vars:
        w.var(name)

    def write(unit: _Unit) -> None:
        for k in unit.params:
            w.var(model.params[k])

    _write_units(w, model.units, write, check)


def _forward(w: _Writer, check: bool) -> None:
    """The forward ops in model order; the last one is the loss op."""
    ops, last = w.model.ops, len(w.model.ops) - 1

    def write(unit: _Unit) -> None:
        for i in unit.ops:
            op = ops[i]
            role = LOSS if i == last else FORWARD
            w.emit(op.type, op.inputs, op.outputs, role, op.stage, op.struct, op.attrs)

    _write_units(w, w.model.units, write, check)


class _Backward:
    """The loss-grad op, grad ops in reverse order and `sum` ops, as Paddle's backward writes them.

    A variable read by several ops gets one `x@GRAD@RENAME@block0@k` per reader and
    a `sum` into `x@GRAD` after the last of them. The forward op `i` has id i + 1
    (the forward ops are written first).
    """

    def __init__(self, w: _Writer) -> None:
        self.w, self.model = w, w.model
        self.consumers: dict[str, int] = {}
        for op in self.model.ops:
            for _, names in op.inputs:
                for n in names:
                    if n not in _NO_GRAD:
                        self.consumers[n] = self.consumers.get(n, 0) + 1
        self.contributions: dict[str, list[str]] = {}
        self.params = set(self.model.params)

    def write(self, check: bool) -> dict[str, str]:
        """Append the backward section; returns param -> grad."""
        w, model = self.w, self.model
        loss_op = model.ops[-1]
        loss_grad = _grad_name(loss_op.outputs[0][1][0])
        w.emit("fill_constant", (), (("Out", (loss_grad,)),), LOSS | BACKWARD, loss_op.stage)
        w.var_stage[loss_grad] = loss_op.stage
        model.dims[loss_grad] = ()
        _write_units(w, model.units[::-1], self.write_unit, check)
        return {p: _grad_name(p) for p in model.params}

    def write_unit(self, unit: _Unit) -> None:
        for i in reversed(unit.ops):
            self.grad_op(i)

    def grad_op(self, i: int) -> None:
        """The grad op of forward op `i`, then the `sum` ops its gradients complete."""
        op, dims, consumers = self.model.ops[i], self.model.dims, self.consumers
        ins = [(slot, names) for slot, names in op.inputs]
        ins += [(slot + "@GRAD", tuple(_grad_name(n) for n in names)) for slot, names in op.outputs]
        outs, role_var, complete = [], [], []
        for slot, names in op.inputs:
            gnames = []
            for n in names:
                if n in _NO_GRAD:
                    continue
                g = _grad_name(n)
                dims[g] = dims[n]
                if consumers[n] > 1:
                    contrib = self.contributions.setdefault(n, [])
                    g = f"{g}@RENAME@block0@{len(contrib)}"
                    dims[g] = dims[n]
                    contrib.append(g)
                    if len(contrib) == consumers[n]:
                        complete.append(n)
                gnames.append(g)
                if n in self.params:
                    role_var += [n, g]
            if gnames:
                outs.append((slot + "@GRAD", tuple(gnames)))
        self.w.emit(
            op.type + "_grad",
            ins,
            outs,
            BACKWARD,
            op.stage,
            attrs_key=op.attrs,
            forward_op_id=i + 1,
            role_var=role_var,
        )
        for n in complete:
            self.w.emit(
                "sum",
                (("X", tuple(self.contributions.pop(n))),),
                (("Out", (_grad_name(n),)),),
                BACKWARD,
                op.stage,
            )


def _clip(w: _Writer, grads: dict[str, str], check: bool) -> dict[str, str]:
    """Global-norm gradient clipping: per-grad ops on the grad's stage, the norm on all ranks."""
    model = w.model
    params = model.params
    sq_names = [model.var(f"squared_l2_norm_{k}.tmp_0", (1,)) for k in range(len(params))]
    clipped = {p: model.var(f"{g}@CLIP", model.dims[p]) for p, g in grads.items()}

    def squares(unit: _Unit) -> None:
        for k in unit.params:
            p = params[k]
            w.emit(
                "squared_l2_norm",
                (("X", (grads[p],)),),
                (("Out", (sq_names[k],)),),
                OPTIMIZE,
                w.var_stage[p],
            )

    _write_units(w, model.units, squares, check)
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

    def scale(unit: _Unit) -> None:
        for k in unit.params:
            p = params[k]
            w.emit(
                "elementwise_mul",
                (("X", (grads[p],)), ("Y", (coef,))),
                (("Out", (clipped[p],)),),
                OPTIMIZE,
                w.var_stage[p],
            )

    _write_units(w, model.units, scale, check)
    return clipped


def _optimizer(w: _Writer, grads: dict[str, str], check: bool) -> None:
    """One update op per parameter, on the parameter's stage."""
    opts, model = w.opts, w.model
    lr = model.var("learning_rate_0", (1,))
    w.var_stage[lr] = -1
    w.uses_global = True

    def update(unit: _Unit) -> None:
        for k in unit.params:
            p = model.params[k]
            stage = w.var_stage[p]
            ins = [("Param", (p,)), ("Grad", (grads[p],)), ("LearningRate", (lr,))]
            outs = [("ParamOut", (p,))]
            if opts.optimizer == "adamw":
                acc = {
                    k: model.var(f"{p}_{k}_0", model.dims[p] if k.startswith("moment") else (1,))
                    for k in ("moment1", "moment2", "beta1_pow_acc", "beta2_pow_acc")
                }
                for a in acc.values():
                    w.var_stage[a] = stage
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
            w.emit(opts.optimizer, ins, outs, OPTIMIZE, stage, role_var=(p, grads[p]))

    _write_units(w, model.units, update, check, last=True)


def build_sample(opts: SampleOptions) -> bytes:
    """The serialized GPT-like program described by `opts` (deterministic)."""
    return _build(opts)


def _build(opts: SampleOptions, *, check: bool = False) -> bytes:
    """`build_sample`; with `check`, every stamped layer is also encoded op by op and compared."""
    opts.check()
    with paused_gc():  # the model allocates millions of small objects, none in a cycle
        # The model and the writer are gone once `_write` returns, before the
        # collector is back on (it would traverse them all once more).
        return _write(opts, check)


def _write(opts: SampleOptions, check: bool) -> bytes:
    model = _Model(opts)
    model.build()
    w = _Writer(opts, model)
    _variables(w, check)
    _forward(w, check)
    if opts.backward:
        grads = _Backward(w).write(check)
        # Nothing reads the forward graph after the backward section; dropping it
        # lowers the peak memory (by ~200 MB at 10,000 layers).
        model.ops.clear()
        if opts.optimizer != "none":
            if opts.grad_clip:
                grads = _clip(w, grads, check)
            _optimizer(w, grads, check)
    return w.write_program()
