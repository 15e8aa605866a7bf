"""Build the PIR matrix (`pir_matrix.matrix()`) with Paddle 3.3.1, and ask Paddle's own
completion about other splits of it.

    python tests/support/pir_matrix_build.py OUTDIR [CASE ...]
    python tests/support/pir_matrix_build.py --agree QUESTIONS.json ANSWERS.json

The build makes each case's model in dygraph with `paddle.distributed` meshes
(`dist.shard_tensor` for the weights, `dist.reshard` between stages) and runs its engine's
PIR build as `DistModel.train()` does (`Engine._build` under the AMP guard, then
`Engine._parallel_pir`), keeping four programs (`pir_matrix.KINDS`), as Paddle saves them
(`serialize_pir_program`), xz-compressed: the whole training program at schedule 1F1B,
vpp_degree 1 (`plain`); with schedule VPP at the case's vpp, the forward program as
`complete_chunk_id` gets it (`before`) and leaves it (`after`), and the whole training
program after it, just before the partition pass (`vpp`). Where Paddle's completion
raises, its error is recorded in MANIFEST.json instead of `after` and `vpp`.

`--agree` reads questions (a case, the layers the model puts on each stage mesh, a vpp
and a vpp_seg_method; or a schedule_mode, pp, vpp and accumulate_steps) and answers each
with what Paddle's own code does: the forward program built with those stage layers and
completed by `pir_pass.complete_chunk_id` (each layer's stage and chunk, or the error),
and the mode's job-list builder run for every stage (ok, or the error).

Only programs are built: nothing runs, so one CPU process serves every rank of a case
(PADDLE_TRAINERS_NUM says the world size; the process is rank 0). Paddle 3.3.1 needs
three shims for that (each scoped to a build): AMP on a CPU place (`pir_programs`),
NumPy 2 in `ProcessMesh.get_rank_by_dim_and_process_id` on dp meshes, and the recompute
segment counter, which is process-wide (reset, so that a rebuild is byte-identical).
"""

from __future__ import annotations

import contextlib
import json
import lzma
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pir_matrix import LAYER_CLASSES, Case, by_name, digest, matrix, with_table
from pir_programs import _amp_on_cpu

HIDDEN, HEADS, VOCAB, SEQ, CLASSES = 8, 2, 16, 4, 4
IMAGE, PATCH = 4, 2  # ViT: 4x4 images of 3 channels, 2x2 patches


# ---------------------------------------------------------------------------------------------
# The job: meshes, model, data, loss, optimizer, strategy


def meshes(case: Case) -> list[Any]:
    import paddle.distributed as dist

    pp = case.pp
    if case.mesh == "pp":
        return [dist.ProcessMesh([s], dim_names=["x"]) for s in range(pp)]
    if case.mesh == "dp2":
        return [dist.ProcessMesh([2 * s, 2 * s + 1], dim_names=["dp"]) for s in range(pp)]
    if case.mesh == "dp2_dp_major":  # rank r: dp r // pp, stage r % pp
        return [dist.ProcessMesh([s, s + pp], dim_names=["dp"]) for s in range(pp)]
    if case.mesh == "tp2":
        return [dist.ProcessMesh([2 * s, 2 * s + 1], dim_names=["mp"]) for s in range(pp)]
    assert case.mesh == "dp2_tp2"
    return [
        dist.ProcessMesh([[4 * s, 4 * s + 1], [4 * s + 2, 4 * s + 3]], dim_names=["dp", "mp"])
        for s in range(pp)
    ]


class Placements:
    """A mesh's placements: weights column/row parallel over `mp`, replicated over `dp`;
    the hidden state sharded over `dp` by the batch."""

    def __init__(self, mesh: Any) -> None:
        self.names = list(mesh.dim_names)

    def weight(self, split: int | None) -> list[Any]:
        import paddle.distributed as dist

        return [
            dist.Shard(split) if n == "mp" and split is not None else dist.Replicate()
            for n in self.names
        ]

    def hidden(self) -> list[Any]:
        import paddle.distributed as dist

        return [dist.Shard(0) if n == "dp" else dist.Replicate() for n in self.names]


def _layers(case: Case) -> dict[str, Any]:
    """The model's layer classes (made here: they subclass paddle.nn.Layer)."""
    import paddle
    import paddle.distributed as dist
    import paddle.nn.functional as F
    from paddle import nn

    h, heads = HIDDEN, HEADS

    def shard(w: Any, mesh: Any, split: int | None) -> Any:
        return dist.shard_tensor(w, mesh, Placements(mesh).weight(split))

    def linear(n_in: int, n_out: int, mesh: Any, split: int | None, bias: bool = True) -> Any:
        """split 1: column parallel, 0: row parallel, None: replicated."""
        layer = nn.Linear(n_in, n_out, bias_attr=None if bias else False)
        layer.weight = shard(layer.weight, mesh, split)
        if bias:
            layer.bias = shard(layer.bias, mesh, 0 if split == 1 else None)
        return layer

    def layer_norm(mesh: Any) -> Any:
        norm = nn.LayerNorm(h)
        norm.weight, norm.bias = shard(norm.weight, mesh, None), shard(norm.bias, mesh, None)
        return norm

    class RMSNorm(nn.Layer):  # type: ignore[misc]
        def __init__(self, mesh: Any) -> None:
            super().__init__()
            one = nn.initializer.Constant(1.0)
            self.weight = shard(self.create_parameter([h], default_initializer=one), mesh, None)

        def forward(self, x: Any) -> Any:
            return x * paddle.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight

    class MLP(nn.Layer):  # type: ignore[misc]
        def __init__(self, mesh: Any) -> None:
            super().__init__()
            self.fc1 = linear(h, 2 * h, mesh, 1)
            self.fc2 = linear(2 * h, h, mesh, 0)

        def forward(self, x: Any) -> Any:
            return self.fc2(F.gelu(self.fc1(x)))

    class SwiGLU(nn.Layer):  # type: ignore[misc]
        def __init__(self, mesh: Any) -> None:
            super().__init__()
            self.gate, self.up = (linear(h, 2 * h, mesh, 1, False) for _ in range(2))
            self.down = linear(2 * h, h, mesh, 0, False)

        def forward(self, x: Any) -> Any:
            return self.down(F.silu(self.gate(x)) * self.up(x))

    class Attention(nn.Layer):  # type: ignore[misc]
        def __init__(self, mesh: Any, bias: bool = False, scores_bias: bool = False) -> None:
            super().__init__()
            self.q, self.k, self.v = (linear(h, h, mesh, 1, bias) for _ in range(3))
            self.o = linear(h, h, mesh, 0, bias)
            self.scores_bias = None
            if scores_bias:  # a learned bias on the attention scores, per head and position
                zero = nn.initializer.Constant(0.0)
                bias_param = self.create_parameter([heads, SEQ, SEQ], default_initializer=zero)
                self.scores_bias = shard(bias_param, mesh, None)

        def forward(self, x: Any) -> Any:
            b, s = x.shape[0], x.shape[1]

            def split(y: Any) -> Any:
                return y.reshape([b, s, heads, h // heads]).transpose([0, 2, 1, 3])

            q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
            scores = paddle.matmul(q, k, transpose_y=True) / (h // heads) ** 0.5
            if self.scores_bias is not None:
                scores = scores + self.scores_bias
            w = F.softmax(scores, axis=-1)
            return self.o(paddle.matmul(w, v).transpose([0, 2, 1, 3]).reshape([b, s, h]))

    class DecoderLayer(nn.Layer):  # type: ignore[misc]
        """GPT: pre-LN attention and MLP."""

        def __init__(self, mesh: Any) -> None:
            super().__init__()
            self.ln1, self.attn, self.ln2, self.mlp = (
                layer_norm(mesh), Attention(mesh), layer_norm(mesh), MLP(mesh)
            )  # fmt: skip

        def forward(self, x: Any) -> Any:
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class LlamaDecoderLayer(nn.Layer):  # type: ignore[misc]
        def __init__(self, mesh: Any) -> None:
            super().__init__()
            self.input_layernorm, self.self_attn = RMSNorm(mesh), Attention(mesh)
            self.post_attention_layernorm, self.mlp = RMSNorm(mesh), SwiGLU(mesh)

        def forward(self, x: Any) -> Any:
            x = x + self.self_attn(self.input_layernorm(x))
            return x + self.mlp(self.post_attention_layernorm(x))

    class EncoderLayer(nn.Layer):  # type: ignore[misc]
        """BERT: post-LN, dropout on each branch."""

        def __init__(self, mesh: Any) -> None:
            super().__init__()
            self.attn, self.ln1, self.mlp, self.ln2 = (
                Attention(mesh, bias=True), layer_norm(mesh), MLP(mesh), layer_norm(mesh)
            )  # fmt: skip
            self.dropout = nn.Dropout(0.1)

        def forward(self, x: Any) -> Any:
            x = self.ln1(x + self.dropout(self.attn(x)))
            return self.ln2(x + self.dropout(self.mlp(x)))

    class ViTBlock(DecoderLayer):  # type: ignore[misc]
        """ViT: pre-LN attention and MLP (DecoderLayer's forward, its own class name)."""

    class TiedDecoderLayer(DecoderLayer):  # type: ignore[misc]
        pass

    class ParallelBlock(nn.Layer):  # type: ignore[misc]
        """GPT-J: attention and MLP side by side on one LayerNorm's output."""

        def __init__(self, mesh: Any) -> None:
            super().__init__()
            self.ln, self.attn, self.mlp = layer_norm(mesh), Attention(mesh), MLP(mesh)

        def forward(self, x: Any) -> Any:
            y = self.ln(x)
            return x + self.attn(y) + self.mlp(y)

    class BiasedAttentionLayer(nn.Layer):  # type: ignore[misc]
        """Attention with q/k/v/o biases and a learned bias on the scores."""

        def __init__(self, mesh: Any) -> None:
            super().__init__()
            self.ln1, self.attn = layer_norm(mesh), Attention(mesh, bias=True, scores_bias=True)
            self.ln2, self.mlp = layer_norm(mesh), MLP(mesh)

        def forward(self, x: Any) -> Any:
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class DenseLayer(DecoderLayer):  # type: ignore[misc]
        pass

    class MoELayer(nn.Layer):  # type: ignore[misc]
        """Pre-LN attention, then a softmax gate over two MLP experts."""

        def __init__(self, mesh: Any) -> None:
            super().__init__()
            self.ln1, self.attn, self.ln2 = layer_norm(mesh), Attention(mesh), layer_norm(mesh)
            self.gate = linear(h, 2, mesh, None, False)
            self.experts = nn.LayerList([MLP(mesh) for _ in range(2)])

        def forward(self, x: Any) -> Any:
            x = x + self.attn(self.ln1(x))
            y = self.ln2(x)
            g = F.softmax(self.gate(y), axis=-1)
            out = g[:, :, 0:1] * self.experts[0](y) + g[:, :, 1:2] * self.experts[1](y)
            return x + out

    return {
        "DecoderLayer": DecoderLayer,
        "LlamaDecoderLayer": LlamaDecoderLayer,
        "EncoderLayer": EncoderLayer,
        "ViTBlock": ViTBlock,
        "TiedDecoderLayer": TiedDecoderLayer,
        "ParallelBlock": ParallelBlock,
        "BiasedAttentionLayer": BiasedAttentionLayer,
        "DenseLayer": DenseLayer,
        "MoELayer": MoELayer,
        "RMSNorm": RMSNorm,
        "layer_norm": layer_norm,
        "linear": linear,
        "shard": shard,
    }


def model_class(case: Case, stage_of: list[int]) -> Any:
    """The model: embedding (or patch embedding) on stage 0, layer i on stage_of[i], norm
    and head on the last stage; `dist.reshard` moves the hidden state where the stage
    changes."""
    import paddle
    import paddle.distributed as dist
    from paddle import nn
    from paddle.distributed.fleet.utils import recompute

    kinds = _layers(case)
    classes = LAYER_CLASSES[case.model]
    h = HIDDEN

    class Model(nn.Layer):  # type: ignore[misc]
        def __init__(self, stage_meshes: list[Any]) -> None:
            super().__init__()
            self.meshes = stage_meshes
            first, last = stage_meshes[0], stage_meshes[-1]
            shard = kinds["shard"]
            if case.model == "vit":
                self.patches = nn.Conv2D(3, h, PATCH, stride=PATCH)
                self.patches.weight = shard(self.patches.weight, first, None)
                self.patches.bias = shard(self.patches.bias, first, None)
            else:
                self.embed = nn.Embedding(VOCAB, h)
                self.embed.weight = shard(self.embed.weight, first, None)
            if case.model in ("bert", "vit"):
                zero = nn.initializer.Constant(0.0)
                n_pos = (IMAGE // PATCH) ** 2 if case.model == "vit" else SEQ
                self.position = shard(
                    self.create_parameter([n_pos, h], default_initializer=zero), first, None
                )
            if case.model == "bert":
                self.embed_norm, self.embed_dropout = kinds["layer_norm"](first), nn.Dropout(0.1)
            self.layers = nn.LayerList(
                [kinds[classes[i % len(classes)]](stage_meshes[s]) for i, s in enumerate(stage_of)]
            )
            self.norm = (
                kinds["RMSNorm"](last) if case.model == "llama" else kinds["layer_norm"](last)
            )
            if case.model == "vit":
                self.head = kinds["linear"](h, CLASSES, last, None)
            elif case.model != "tied":
                self.head = kinds["linear"](h, VOCAB, last, None, False)

        def forward(self, inputs: Any) -> Any:
            if case.model == "vit":
                x = self.patches(inputs).flatten(2).transpose([0, 2, 1]) + self.position
            else:
                x = self.embed(inputs)
                if case.model == "bert":
                    x = self.embed_dropout(self.embed_norm(x + self.position))
            stage = 0
            for i, (layer, s) in enumerate(zip(self.layers, stage_of)):
                if s != stage:
                    x, stage = (
                        dist.reshard(x, self.meshes[s], Placements(self.meshes[s]).hidden()),
                        s,
                    )
                x = recompute(layer, x) if case.recompute else layer(x)
                if case.between == "scale" and i == 0:
                    x = x * 0.5  # an op between two layers that belongs to neither
            last = self.meshes[-1]
            if stage != len(self.meshes) - 1:
                x = dist.reshard(x, last, Placements(last).hidden())
            x = self.norm(x)
            if case.model == "vit":
                return self.head(x.mean(axis=1))
            if case.model == "tied":  # the output projection is the input embedding's weight
                w = dist.reshard(self.embed.weight, last, Placements(last).weight(None))
                return paddle.matmul(x, w, transpose_y=True)
            return self.head(x)

    Model.__name__ = Model.__qualname__ = f"{case.model.capitalize()}Model"
    return Model


def _job(case: Case, stage_counts: tuple[int, ...]) -> tuple[Any, Any, Any, Any]:
    """(model, sharded loader, loss, optimizer) of `case` with `stage_counts` layers a stage."""
    import numpy as np
    import paddle.distributed as dist
    from paddle import nn
    from paddle.io import DataLoader, Dataset

    stage_meshes = meshes(case)
    stage_of = [s for s, n in enumerate(stage_counts) for _ in range(n)]
    model = model_class(case, stage_of)(stage_meshes)

    class Samples(Dataset):  # type: ignore[misc]
        def __getitem__(self, i: int) -> tuple[Any, Any]:
            if case.model == "vit":
                return np.zeros([3, IMAGE, IMAGE], "float32"), np.zeros([], "int64")
            return np.zeros([SEQ], "int64"), np.zeros([SEQ], "int64")

        def __len__(self) -> int:
            return 4 * case.accumulate_steps * case.dp

    class Criterion(nn.Layer):  # type: ignore[misc]
        def forward(self, logits: Any, labels: Any) -> Any:
            if case.amp.startswith("o2"):  # the loss in float32, as O2 jobs compute it
                logits = logits.astype("float32")
            return nn.functional.cross_entropy(logits, labels.unsqueeze(-1)).mean()

    loader = dist.shard_dataloader(
        DataLoader(Samples(), batch_size=case.accumulate_steps * case.dp),
        meshes=[stage_meshes[0], stage_meshes[-1]],
        shard_dims="dp" if case.dp > 1 else None,
    )
    return model, loader, Criterion(), optimizer(case, model.parameters())


def optimizer(case: Case, parameters: Any) -> Any:
    import paddle
    from paddle import nn

    lr: Any = 1e-3
    if case.scheduler == "cosine":
        lr = paddle.optimizer.lr.CosineAnnealingDecay(1e-3, T_max=10)
    elif case.scheduler == "warmup":
        lr = paddle.optimizer.lr.LinearWarmup(1e-3, warmup_steps=5, start_lr=0.0, end_lr=1e-3)
    clip = {
        "none": None,
        "global_norm": nn.ClipGradByGlobalNorm(1.0),
        "norm": nn.ClipGradByNorm(1.0),
    }[case.clip]
    kwargs: dict[str, Any] = {"learning_rate": lr, "parameters": parameters, "grad_clip": clip}
    name = case.optimizer
    if name == "AdamW":
        kwargs["weight_decay"] = 0.01 if case.decay == "coeff" else 0.0
    elif name == "Lamb":
        kwargs["lamb_weight_decay"] = 0.01 if case.decay == "coeff" else 0.0
    elif case.decay != "none":
        kwargs["weight_decay"] = {
            "coeff": 0.01,
            "l1": paddle.regularizer.L1Decay(1e-4),
            "l2": paddle.regularizer.L2Decay(1e-4),
        }[case.decay]
    if name == "Momentum":
        kwargs["momentum"] = 0.9
    return getattr(paddle.optimizer, name)(**kwargs)


def strategy(case: Case, vpp: int | None) -> Any:
    """The engine's strategy: schedule 1F1B at vpp_degree 1 (`vpp` None), else VPP."""
    import paddle.distributed as dist

    s = dist.Strategy()
    pipeline = s.pipeline
    pipeline.enable = True
    pipeline.pp_degree = case.pp
    pipeline.accumulate_steps = case.accumulate_steps
    if vpp is None:
        pipeline.schedule_mode = "1F1B"
    else:
        pipeline.schedule_mode = "VPP"
        pipeline.vpp_degree = vpp
        pipeline.vpp_seg_method = case.seg_method
    if case.recompute:
        s._recompute.enable = True  # dist.Strategy's name for it
    if case.amp != "fp32":
        level, dtype = case.amp.split("_")
        s.amp.enable = True
        s.amp.dtype = {"bf16": "bfloat16", "fp16": "float16"}[dtype]
        s.amp.level = level.upper()
        s.amp.custom_black_list = BLACK_LISTS[case.amp]
    return s


# Ops kept in float32 because Paddle's CPU wheel has no kernel of theirs in the low precision
# (tracing checks each op's data type against its kernels): a GPU job's program has them in
# low precision. What the matrix tests of AMP is the rest: the casts, master weights, and
# float16's loss scaling (check_finite_and_unscale_, update_loss_scaling_).
BLACK_LISTS = {"o1_bf16": ["silu"], "o2_bf16": ["silu", "softmax"], "o1_fp16": ["silu"]}
# Paddle's CPU wheel cannot trace float16: PIR's AMP casts the weights to float16 whatever the
# black list, and the CPU matmul has no float16 kernel ("Check data type error for op:
# matmul"). A float16 job's forward is traced with bfloat16's casts instead; the rest, the
# engine's float16 path (OptimizerWithMixedPrecision, GradScaler with dynamic loss scaling:
# check_finite_and_unscale_, update_loss_scaling_), is built as the engine builds it.
TRACED_AS = {"float16": "bfloat16"}


# ---------------------------------------------------------------------------------------------
# Building


@dataclass
class Captured:
    """What one build kept (Paddle programs, in memory)."""

    before: Any = None  # the forward program `complete_chunk_id` got (a clone)
    startup: Any = None  # and the startup program (a clone)
    after: Any = None  # the forward program it left (a clone)
    whole: Any = None  # the whole program at the partition pass (a clone)
    refused: str | None = None  # Paddle's completion's error
    stop_before_completion: bool = False
    notes: list[str] = field(default_factory=list)


class _Stop(Exception):
    pass


def build(
    case: Case,
    vpp: int | None,
    *,
    stage_counts: tuple[int, ...] = (),
    stop_before_completion: bool = False,
) -> Captured:
    """Build `case` (`vpp` None: schedule 1F1B, vpp_degree 1; else VPP at `vpp`)."""
    import paddle
    import paddle.base.framework as framework
    import paddle.distributed.auto_parallel.interface as interface
    import paddle.distributed.parallel as parallel

    os.environ["PADDLE_TRAINERS_NUM"] = str(case.world)
    os.environ["PADDLE_TRAINER_ID"] = "0"
    parallel._global_parallel_env = None  # read the world size again
    framework._name_struct = framework.NameStruct()  # layer paths from /Model/ again
    interface._g_recompute_idx = -1  # recompute segments numbered from 0 again
    paddle.disable_static()
    paddle.seed(1)
    captured = Captured(stop_before_completion=stop_before_completion)
    with paddle.utils.unique_name.guard(), _numpy2_shim(), _capture(captured):
        _run_engine(case, vpp, stage_counts or case.stage_layers)
    return captured


def _run_engine(case: Case, vpp: int | None, stage_counts: tuple[int, ...]) -> None:
    import paddle
    import paddle.distributed as dist

    model, loader, loss, opt = _job(case, stage_counts)
    s = strategy(case, vpp)
    engine = dist.to_static(model, loader, loss, opt, strategy=s)._engine
    amp = s.amp
    with (
        _amp_on_cpu(amp.enable),
        paddle.amp.auto_cast(
            enable=amp.enable,
            custom_white_list=amp.custom_white_list,
            custom_black_list=amp.custom_black_list,
            level=amp.level,
            dtype=TRACED_AS.get(amp.dtype, amp.dtype),
            use_promote=amp.use_promote,
        ),
    ):
        engine._build("train")
    engine._parallel_pir("train")


@contextlib.contextmanager
def _capture(captured: Captured) -> Iterator[None]:
    """Keep clones at the engine's completion and partition pass; stop at the latter."""
    import paddle.distributed.auto_parallel.static.engine as engine_module

    completion = engine_module.complete_chunk_id
    partition = engine_module.apply_partition_pass

    def complete(program: Any, startup: Any, pipeline: Any) -> None:
        captured.before, captured.startup = program.clone(), startup.clone()
        if captured.stop_before_completion:
            raise _Stop
        try:
            completion(program, startup, pipeline)
        except Exception as e:  # Paddle's refusal, recorded as it says it
            captured.refused = f"{type(e).__name__}: {e}"
            raise _Stop from None
        captured.after = program.clone()

    def keep(program: Any, *args: Any) -> Any:
        captured.whole = program.clone()
        raise _Stop

    engine_module.complete_chunk_id = complete
    engine_module.apply_partition_pass = keep
    try:
        yield
    except _Stop:
        pass
    finally:
        engine_module.complete_chunk_id = completion
        engine_module.apply_partition_pass = partition


@contextlib.contextmanager
def _numpy2_shim() -> Iterator[None]:
    """Paddle 3.3.1's `ProcessMesh.get_rank_by_dim_and_process_id`, which
    `dist.shard_dataloader` calls on a dp mesh, returns `int(np.where(mesh == id)[dim])`:
    int() of a one-element 1-D array, a TypeError under NumPy 2. While active, that one
    failure is answered with the element."""
    import numpy as np
    from paddle.distributed.auto_parallel.process_mesh import ProcessMesh

    real = ProcessMesh.get_rank_by_dim_and_process_id

    def rank(self: Any, dim: Any, process_id: int) -> int:
        try:
            return real(self, dim, process_id)  # type: ignore[no-any-return]
        except TypeError:
            name = self._dim_names[dim] if isinstance(dim, int) else dim
            where = np.where(self._mesh == process_id)[self._dim_names.index(name)]
            return int(where.item())

    ProcessMesh.get_rank_by_dim_and_process_id = rank
    try:
        yield
    finally:
        ProcessMesh.get_rank_by_dim_and_process_id = real


def serialize(program: Any) -> bytes:
    import paddle

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "p.json")
        paddle.base.core.serialize_pir_program(program, path)
        return Path(path).read_bytes()


def build_case(case: Case) -> tuple[dict[str, bytes], str | None]:
    """A case's programs by kind (`pir_matrix.KINDS`), and Paddle's refusal if any."""
    out = {"plain": serialize(build(case, None).whole)}
    got = build(case, case.vpp)
    out["before"] = serialize(got.before)
    if got.refused is None:
        out["after"] = serialize(got.after)
        out["vpp"] = serialize(got.whole)
    return out, got.refused


def versions() -> dict[str, Any]:
    import numpy
    import paddle

    return {
        "paddle": paddle.__version__,
        "numpy": numpy.__version__,
        "python": platform.python_version(),
        "pir": paddle.base.framework.get_flags("FLAGS_enable_pir_api")["FLAGS_enable_pir_api"],
    }


def write_case(out: Path, name: str) -> dict[str, Any]:
    """Build one case into `out`; its manifest entry."""
    case = by_name()[name]
    programs, refused = build_case(case)
    files = {}
    for kind, data in programs.items():
        packed = lzma.compress(data, preset=9 | lzma.PRESET_EXTREME)
        (out / f"{name}.{kind}.json.xz").write_bytes(packed)
        files[kind] = digest(data)
    return {**case.fields(), "paddle_refused": refused, "files": files}


def _build_child(out: Path, name: str, entry: Path) -> subprocess.CompletedProcess[str]:
    """`--case` in a child process. Paddle 3.3.1's dy2static now and then fails to load the
    code it just wrote for a recomputed layer ("Function: forward doesn't exist in the
    Module transformed from AST"), in a build that succeeds when run again: the caller
    runs it up to three times before it says the case failed."""
    return subprocess.run(
        [sys.executable, __file__, "--case", str(out), name, str(entry)],
        env={**os.environ, "FLAGS_enable_pir_api": "1"},
        capture_output=True,
        text=True,
        check=False,
    )


def write_cases(out: Path, names: list[str]) -> None:
    """Each case built in a child process of its own (as a user's job: nothing left over
    from another build), its entry merged into OUT/MANIFEST.json as soon as it is built
    (a long build stopped keeps what it made)."""
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {"cases": {}}
    manifest["versions"] = versions()
    failed = []
    for name in names:
        with tempfile.TemporaryDirectory() as d:
            entry = Path(d) / "entry.json"
            for _ in range(3):  # again on a failure: see `_build_child`
                run = _build_child(out, name, entry)
                if run.returncode == 0 and entry.exists():
                    break
            if run.returncode != 0 or not entry.exists():
                failed.append(name)
                print(f"{name}: FAILED\n{run.stderr[-4000:]}", flush=True)
                continue
            manifest["cases"][name] = json.loads(entry.read_text())
        _save(out, manifest)
        said = manifest["cases"][name]
        refused = said["paddle_refused"]
        print(
            f"{name}: {', '.join(said['files'])}"
            + (f" (refused: {refused[:90]})" if refused else ""),
            flush=True,
        )
    _save(out, manifest)
    if failed:
        raise SystemExit(f"failed: {' '.join(failed)}")


def _save(out: Path, manifest: dict[str, Any]) -> None:
    """MANIFEST.json (cases in the matrix's order) and the README's table of cases."""
    order = [c.name for c in matrix()]
    manifest["cases"] = {n: manifest["cases"][n] for n in order if n in manifest["cases"]}
    (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    readme = out / "README.md"
    if readme.exists():
        readme.write_text(with_table(readme.read_text(), manifest["cases"]))


# ---------------------------------------------------------------------------------------------
# Asking Paddle (--agree)


def layer_places(program: Any, seg_method: str, pp: int) -> list[tuple[str, int | None, int]]:
    """Each layer Paddle's completion reads (`_extract_seg_method`), in program order, with
    the stage (`get_pp_stage_by_process_mesh`) and chunk of its ops; one layer's ops on two
    places are an error."""
    from paddle.distributed.auto_parallel.static.pir_pass import _extract_seg_method
    from paddle.distributed.auto_parallel.static.utils import get_pp_stage_by_process_mesh

    out: dict[str, tuple[int | None, int]] = {}
    for op in program.global_block().ops:
        name = _extract_seg_method(op, seg_method)
        if name is None or op.dist_attr is None or op.name().startswith(("dist_op.", "builtin.")):
            continue  # reshards (the completion's own) and packing: placed by their ends
        place = (get_pp_stage_by_process_mesh(op.dist_attr.process_mesh, pp), op.dist_attr.chunk_id)
        if out.setdefault(name, place) != place:
            raise AssertionError(f"layer {name}: ops on {out[name]} and {place}")
    return [(name, *place) for name, place in out.items()]


def complete(case: Case, forward: Captured, vpp: int, seg_method: str) -> dict[str, Any]:
    """Paddle's `complete_chunk_id` on a clone of the forward program."""
    import paddle.distributed as dist
    from paddle.distributed.auto_parallel.static import pir_pass

    pipeline = dist.Strategy().pipeline
    pipeline.enable = True
    pipeline.pp_degree = case.pp
    pipeline.vpp_degree = vpp
    pipeline.vpp_seg_method = seg_method
    pipeline.schedule_mode = "VPP"
    pipeline.accumulate_steps = case.accumulate_steps
    program, startup = forward.before.clone(), forward.startup.clone()
    try:
        pir_pass.complete_chunk_id(program, startup, pipeline)
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}
    return {"layers": layer_places(program, seg_method, case.pp)}


def job_list(mode: str, pp: int, vpp: int, m: int) -> dict[str, Any]:
    """The job-list builder of `schedule_mode` `mode` (as `pir_pass.pipeline_pass` applies it)
    for every stage: ok, or the first error."""
    import paddle.distributed as dist
    from paddle.distributed.auto_parallel.static import pir_pass
    from paddle.distributed.passes import pipeline_scheduler_pass as passes

    pipeline = dist.Strategy().pipeline
    pipeline.schedule_mode = mode
    try:
        pir_pass.pipeline_pass([None], [None], pipeline)
    except AssertionError as e:  # the modes it takes
        return {"error": f"AssertionError: {e}"}
    except Exception:  # past the mode check, on a program that is no program
        pass
    cls = {
        "FThenB": passes.PipelineFThenBPass,
        "1F1B": passes.Pipeline1F1BPass,
        "VPP": passes.PipelineVirtualPipelinePass,
    }[mode]
    for stage in range(pp):
        p = cls()
        for k, v in (
            ("num_micro_batches", m),
            ("pp_stage", stage),
            ("pp_degree", pp),
            ("vpp_degree", vpp),
            ("split_backward", False),
        ):
            p.set_attr(k, v)
        try:
            p._pir_create_job_list() if mode == "VPP" else p._create_job_list()
        except Exception as e:
            return {"error": f"{type(e).__name__}: {e or 'assert'} (stage {stage})"}
    return {"ok": True}


def agree(questions: dict[str, Any]) -> dict[str, Any]:
    """Answers to `questions` (see the module docstring)."""
    cases = by_name()
    completions = []
    forwards: dict[tuple[str, tuple[int, ...]], Captured] = {}
    for q in questions.get("completions", []):
        case = cases[q["case"]]
        counts = tuple(q["stage_layers"])
        key = (case.name, counts)
        if key not in forwards:
            forwards.clear()  # one layout at a time: programs hold memory
            forwards[key] = build(case, 2, stage_counts=counts, stop_before_completion=True)
        completions.append({**q, **complete(case, forwards[key], q["vpp"], q["seg_method"])})
    jobs = [
        {**q, **job_list(q["mode"], q["pp"], q["vpp"], q["m"])} for q in questions.get("jobs", [])
    ]
    return {"completions": completions, "jobs": jobs, "versions": versions()}


def main(argv: list[str]) -> None:
    if argv[0] in ("--case", "--agree"):
        with _own_cache():
            _child(argv)
        return
    out = Path(argv[0])
    write_cases(out, argv[1:] or [c.name for c in matrix()])
    print("VERSIONS " + json.dumps(versions()))


@contextlib.contextmanager
def _own_cache() -> Iterator[None]:
    """A HOME of the build's own: dy2static writes the code it transforms under
    ~/.cache/paddle/to_static_tmp/<pid>/ and loads it back from there, a directory other
    processes on the machine (other PID namespaces, earlier runs that died) share; with one
    of its own, a build reads back only what it wrote."""
    with tempfile.TemporaryDirectory(prefix="pir-matrix-home-") as home:
        before = os.environ.get("HOME")
        os.environ["HOME"] = home
        try:
            yield
        finally:
            if before is None:
                del os.environ["HOME"]
            else:
                os.environ["HOME"] = before


def _child(argv: list[str]) -> None:
    if argv[0] == "--case":
        entry = write_case(Path(argv[1]), argv[2])
        Path(argv[3]).write_text(json.dumps(entry))
        return
    if argv[0] == "--agree":
        questions = json.loads(Path(argv[1]).read_text())
        Path(argv[2]).write_text(json.dumps(agree(questions)))


if __name__ == "__main__":
    main(sys.argv[1:])
