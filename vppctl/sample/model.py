"""The model a sample describes: its options, its forward graph and its variables.

`SampleOptions` is what `vppctl sample` builds. `Model` builds the forward
graph of a GPT decoder stack as plain tuples (`ModelOp`), grouped in `Unit`s
(the embedding, each decoder layer, the head), with Paddle's naming: layer
paths like `/GPTModel/DecoderLayer_3/MLP/Linear_1/` (the first call of a class
has no suffix, later calls get `_1`, `_2`, ...) and unique variable names like
`linear_12.w_0`. Nothing here is serialized.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import ClassVar, NamedTuple

from vppctl import validate
from vppctl.choices import LAYOUTS, MAX_DEGREE, MAX_LAYERS, OPTIMIZERS, Layout, Optimizer
from vppctl.errors import UsageError
from vppctl.program._proto import program_pb2 as pb

SEQ_LEN = 1024
# Bounds far past any real model that keep every size an int64 and every process id an
# int32 (a 2 GiB program, which protobuf cannot read back, is refused from its size).
MAX_PP = MAX_DEGREE
MAX_RANKS = 1 << 20  # ranks in all stages
MAX_HIDDEN = 1 << 20
MAX_VOCAB = 1 << 31
HEAD_DIM = 64
FP32, INT64 = pb.VarType.FP32, pb.VarType.INT64

# Attribute values: (name, AttrType, value). Paddle writes these on every op.
COMMON_ATTRS = (
    ("op_device", pb.STRING, ""),
    ("op_namescope", pb.STRING, "/"),
    ("with_quant_attr", pb.BOOLEAN, False),
)
OP_ATTRS: dict[str, tuple[tuple[str, int, object], ...]] = {
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

CALLSTACK_FRAMES = (
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


@validate.named_fields
@dataclass(frozen=True)
class SampleOptions:
    """What `vppctl sample` builds; the defaults give a small GPT-like program. Checked
    when made (UsageError, exit 2)."""

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

    FLAGS: ClassVar[Mapping[str, str]] = {
        "layers": "--layers",
        "pp": "--pp",
        "ranks_per_stage": "--ranks-per-stage",
        "layout": "--layout",
        "vpp": "--vpp",
        "backward": "--backward/--no-backward",
        "optimizer": "--optimizer",
        "grad_clip": "--grad-clip/--no-grad-clip",
        "hidden": "--hidden",
        "vocab": "--vocab",
        "callstack": "--callstack",
    }

    def __post_init__(self) -> None:
        """Refuse options that cannot make a program (UsageError, exit 2)."""
        validate.integer(self, "layers", 1, MAX_LAYERS)
        validate.integer(self, "pp", 1, MAX_PP)
        validate.integer(self, "ranks_per_stage", 1, MAX_RANKS // self.pp)
        validate.choice(self, "layout", LAYOUTS)
        validate.integer(self, "vpp", 1, MAX_DEGREE)
        validate.choice(self, "optimizer", OPTIMIZERS)
        for name in ("backward", "grad_clip", "callstack"):
            validate.flag(self, name)
        validate.integer(self, "hidden", HEAD_DIM, MAX_HIDDEN)
        if self.hidden % HEAD_DIM:
            raise validate.refuse(self, "hidden", f"a multiple of {HEAD_DIM} (the head size)")
        validate.integer(self, "vocab", 1, MAX_VOCAB)
        layers = validate.where(self, "layers")
        if self.layout == "blocked" and self.layers < self.pp:
            raise UsageError(
                f"{layers}: {self.layers} is fewer than {validate.where(self, 'pp')} "
                f"{self.pp}: every stage needs a layer"
            )
        if self.layout == "interleaved" and self.layers % (self.pp * self.vpp):
            raise UsageError(
                f"{layers}: {self.layers} is not divisible by pp*vpp = {self.pp * self.vpp}, "
                f"as {validate.where(self, 'layout')} 'interleaved' needs"
            )

    def layer_stage(self, layer: int) -> int:
        """The stage of decoder layer `layer` in the PP layout."""
        if self.layout == "blocked":
            return layer * self.pp // self.layers
        per_segment = self.layers // (self.pp * self.vpp)
        return (layer // per_segment) % self.pp


class ModelOp(NamedTuple):
    """One forward op of the model, before it is written: names, not messages."""

    type: str
    inputs: tuple[tuple[str, Sequence[str]], ...]  # (slot, names)
    outputs: tuple[tuple[str, Sequence[str]], ...]
    struct: str
    stage: int
    attrs: str = ""  # key into OP_ATTRS when it differs from the type


class Unit(NamedTuple):
    """A run of the model written together: the embedding, one decoder layer, or the head."""

    ops: range  # indices into Model.ops
    params: range  # indices into Model.params
    # Decoder layers only: what the layer's ops depend on besides the numbers in
    # their names and ids (stage, struct path and input name with digits blanked);
    # layers with the same key can be stamped from one another. None otherwise.
    key: Hashable | None = None


DIGITS = re.compile(r"(\d+)")


def blank_numbers(name: str) -> str:
    """A name with its numbers blanked: `tmp_12` -> `tmp_#`."""
    return DIGITS.sub("#", name)


class Names:
    """Paddle-style unique names (`linear_3.w_0`, `layer_norm_0.tmp_2`), per kind counters."""

    def __init__(self) -> None:
        self._count: dict[str, int] = {}

    def new(self, kind: str) -> str:
        k = self._count.get(kind, 0)
        self._count[kind] = k + 1
        return f"{kind}_{k}"


class Model:
    """The forward graph of the GPT model as `ModelOp`s, plus its variables' shapes."""

    def __init__(self, opts: SampleOptions) -> None:
        self.opts = opts
        self.names = Names()
        self.ops: list[ModelOp] = []
        self.units: list[Unit] = []
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
        self.ops.append(
            ModelOp(type_, tuple(ins.items()), tuple(outs.items()), struct, stage, attrs)
        )
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
            # The input's stage is in the key: a layer that starts a stage has a
            # boundary gradient on the previous stage (see sections._Backward).
            key = (o.layer_stage(i), self.var_stage[h], blank_numbers(root), blank_numbers(h))
            h = self._unit(partial(self.decoder_layer, i, h, root), key)
        self._unit(partial(self.head, h))

    def _unit(self, build: Callable[[], str | None], key: Hashable | None = None) -> str:
        ops, params = len(self.ops), len(self.params)
        out = build()
        self.units.append(Unit(range(ops, len(self.ops)), range(params, len(self.params)), key))
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
