"""Real training programs built in PaddlePaddle 3.3.1 (legacy IR) the way its auto-parallel
planner builds them, for issue 11: a Llama-like model with recompute, the legacy input
pipeline, AMP O1/O2, tensor x pipeline parallel on 2-D meshes, tied embeddings, a mesh left
over by an earlier program, and `dist.reshard` between layers.

`build_case(case, vpp)` builds one case; `vpp=1` gives the plain-PP program (vppctl's
input), `vpp>1` Paddle's own PP->VPP answer (`strategy.pipeline.vpp_degree`,
`vpp_seg_method`, schedule mode "VPP"). The steps and their order are those of
`planner_v2.Planner.plan` and `parallelizer_v2.Parallelizer.parallel` on the serial
program:

1. `Completer.complete_forward_annotation` (ends with `_complete_chunk_id`, the VPP step);
2. `append_backward(loss, distop_context=...)` and `complete_backward_annotation`, then
   `block_state.parse_backward_blocks` (`Parallelizer._generate_backward`);
3. the pre-optimization passes, in `Parallelizer._apply_pre_optimization`'s order:
   `auto_parallel_amp` (O1) or `auto_parallel_fp16` (O2), then `auto_parallel_recompute`;
4. `optimizer.apply_gradients` under `switch_name_generator_guard("opt_")` and
   `complete_update_annotation` (`Parallelizer._generate_optimizer`; Paddle runs it on the
   partitioned program, these builds on the serial one, as the bridge tests always have).

Paddle 3.3.1 facts these builds work around:

* Some high-level APIs reject legacy `Variable`s ("must be Value, but got Variable":
  `paddle.rsqrt`, `paddle.matmul`, `paddle.cos`, `paddle.sqrt`, `paddle.maximum`,
  `paddle.logical_not`, ...); the model appends those ops with `LayerHelper`, and
  `_legacy_ops` routes the three the AMP pass and gradient clipping call
  (`paddle.sqrt`, `paddle.maximum`, `paddle.logical_not`) to legacy ops while a build runs.
* The CPU wheel has no kernel for the fused `rms_norm` and `fused_rotary_position_embedding`
  ops: RMSNorm and the rotary embedding are decomposed as PaddleNLP's fallbacks do.
* `auto_parallel_amp` binds process group 0 (the "world") when it is imported, so the world
  group is reset in place; the DataLoader's queue lives in the global `Scope`, so every
  build gets a fresh one; the recompute pass creates a scratch block and leaves it current,
  so `current_block_idx` is reset to 0 after it.
* The CPU wheel has no fp16 GPU kernels, so the AMP lists would keep every op in fp32
  (`fp16_lists._get_sys_unsupported_list` asks for GPU kernels); `_gpu_kernels` makes them
  see what a GPU build sees (no op unsupported), so AMP programs hold the casts they hold
  on a GPU machine.
* `auto.recompute`, the DataLoader, name scopes and the layer-path tree number their names
  with process-global counters; every build resets them so that the plain and the VPP build of a
  case hold the same op and variable names.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

os.environ["FLAGS_enable_pir_api"] = "0"  # noqa: SIM112 (Paddle reads this exact name)

#: The layer class every case's decoder layers are instances of.
LLAMA_LAYER = "LlamaDecoderLayer"


@dataclass(frozen=True)
class Case:
    """One real program: the model and the parallel/training features it is built with."""

    name: str
    pp: int
    vpp: int
    n_layers: int = 4
    #: layers wrapped in `auto.recompute` (None: no recompute)
    recompute: tuple[int, ...] | None = None
    amp: str | None = None  # "o1" or "o2"
    mp: int = 1  # tensor-parallel degree: stage meshes [dp=2, mp], weights and batch sharded
    tied: bool = False  # the LM head reads the embedding weight
    reader: bool = False  # DataLoader.from_generator(iterable=False) feeds the inputs
    leftover: bool = False  # an earlier program in the process left ranks 0..3 in the world
    reshard: bool = False  # dist.reshard of the hidden state between consecutive layers
    clip: bool = False  # ClipGradByGlobalNorm (its ops run on the world mesh)
    seg_method: str = LLAMA_LAYER
    hidden: int = 16
    heads: int = 2
    vocab: int = 32
    batch: int = 2
    seq: int = 4

    @property
    def dp(self) -> int:
        return 2 if self.mp > 1 else 1


CASES: tuple[Case, ...] = (
    Case("llama_rc_pp2_v2", pp=2, vpp=2, recompute=(0, 2)),
    Case("llama_rc_pp4_v2", pp=4, vpp=2, n_layers=8, recompute=(0, 2, 4, 6)),
    Case("llama_rcall_pp2_v2", pp=2, vpp=2, recompute=(0, 1, 2, 3)),
    Case("llama_reader_pp2_v2", pp=2, vpp=2, reader=True),
    Case("llama_amp_o1_pp2_v2", pp=2, vpp=2, amp="o1"),
    Case("llama_amp_o2_pp2_v2", pp=2, vpp=2, amp="o2"),
    Case("llama_tp2_pp2_v2", pp=2, vpp=2, mp=2),
    Case("llama_tied_pp2_v2", pp=2, vpp=2, tied=True),
    Case("llama_leftover_pp2_v2", pp=2, vpp=2, leftover=True),
    Case("llama_leftover_clip_pp2_v2", pp=2, vpp=2, leftover=True, clip=True),
    Case("llama_reshard_pp2_v2", pp=2, vpp=2, reshard=True),
)

CASES_BY_NAME = {c.name: c for c in CASES}


@dataclass
class Built:
    """A completed program, its dist context, and what the build did."""

    case: Case
    vpp: int
    main: Any
    startup: Any
    dist_context: Any
    loss: Any
    notes: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------
# Process-global state


def reset_paddle_globals() -> None:
    """A fresh default dist context, world group, layer-path tree and name counters.

    Process group 0 (the "world") is emptied in place and is the one object that the
    pass modules bound when they were imported (`auto_parallel_amp` and others keep
    `world_process_group = get_world_process_group()`); the other groups are dropped.
    """
    import paddle.base.framework as framework
    import paddle.base.reader as reader
    from paddle.base.unique_name import UniqueNameGenerator
    from paddle.distributed.auto_parallel import interface
    from paddle.distributed.auto_parallel.static import process_group
    from paddle.distributed.auto_parallel.static.dist_context import (
        DistributedContext,
        set_default_distributed_context,
    )
    from paddle.distributed.auto_parallel.static.operators import (
        dist_check_finite_and_unscale,
    )
    from paddle.distributed.passes import (
        auto_parallel_amp,
        auto_parallel_fp16,
        auto_parallel_gradient_merge,
    )

    set_default_distributed_context(DistributedContext())
    binders = (
        auto_parallel_amp,
        auto_parallel_fp16,
        auto_parallel_gradient_merge,
        dist_check_finite_and_unscale,
    )
    world = auto_parallel_amp.world_process_group
    for module in binders:
        module.world_process_group = world
    groups = process_group._g_process_group_map
    groups.clear()
    world._ranks = []
    groups[0] = world
    framework._name_struct = framework.NameStruct()
    framework._name_scope = framework.NameScope()  # op_namescope: /auto_parallel/rc_K/, ...
    interface._g_recompute_idx = -1
    reader.data_loader_unique_name_generator = UniqueNameGenerator()


@contextlib.contextmanager
def _legacy_ops() -> Iterator[None]:
    """`paddle.sqrt`, `paddle.maximum` and `paddle.logical_not` as legacy ops (the AMP
    pass's loss scaling and gradient clipping call them on legacy Variables)."""
    import paddle

    def unary(op_type: str) -> Any:
        def call(x: Any, name: Any = None) -> Any:
            return _append(op_type, {"X": [x]}, ["Out"], dtype=_dtype_of(x, op_type))["Out"]

        return call

    def maximum(x: Any, y: Any, name: Any = None) -> Any:
        return _append("elementwise_max", {"X": [x], "Y": [y]}, ["Out"], {"axis": -1})["Out"]

    saved = {n: getattr(paddle, n) for n in ("sqrt", "maximum", "logical_not")}
    paddle.sqrt, paddle.maximum = unary("sqrt"), maximum
    paddle.logical_not = unary("logical_not")
    try:
        yield
    finally:
        for n, f in saved.items():
            setattr(paddle, n, f)


@contextlib.contextmanager
def _gpu_kernels() -> Iterator[None]:
    """The AMP lists as a GPU build computes them: no op lacks a low-precision kernel."""
    from paddle.static.amp import fp16_lists

    saved = fp16_lists._get_sys_unsupported_list

    def none_unsupported(dtype: Any) -> tuple[str, set[str], set[str]]:
        device, _, all_ops = saved(dtype)
        return device, set(), all_ops

    fp16_lists._get_sys_unsupported_list = none_unsupported
    try:
        yield
    finally:
        fp16_lists._get_sys_unsupported_list = saved


def _dtype_of(x: Any, op_type: str) -> Any:
    return "bool" if op_type == "logical_not" else x.dtype


def _append(
    op_type: str,
    inputs: dict[str, list[Any]],
    outs: list[str],
    attrs: dict[str, Any] | None = None,
    dtype: Any = None,
) -> dict[str, Any]:
    """Append one legacy op with fresh outputs (dtype: the first input's)."""
    from paddle.base.layer_helper import LayerHelper

    helper = LayerHelper(op_type)
    if dtype is None:
        dtype = next(iter(inputs.values()))[0].dtype
    made = {slot: helper.create_variable_for_type_inference(dtype) for slot in outs}
    helper.append_op(
        type=op_type,
        inputs=inputs,
        outputs={slot: [var] for slot, var in made.items()},
        attrs=attrs or {},
    )
    return made


# ----------------------------------------------------------------------------
# The model


def _model_classes() -> dict[str, Any]:
    """Llama-like layer classes (defined lazily: they subclass paddle.nn.Layer)."""
    import numpy as np
    import paddle
    import paddle.nn.functional as F
    from paddle import nn

    class LlamaRMSNorm(nn.Layer):
        """PaddleNLP's fallback: x * rsqrt(mean(float32(x)^2) + eps) * weight."""

        def __init__(self, hidden: int) -> None:
            super().__init__()
            self.weight = self.create_parameter(
                [hidden], default_initializer=nn.initializer.Constant(1.0)
            )

        def forward(self, x: Any) -> Any:
            variance = x.astype("float32").pow(2).mean(-1, keepdim=True)
            scale = _append("rsqrt", {"X": [variance + 1e-6]}, ["Out"])["Out"]
            return x * scale * self.weight

    class LlamaRotaryEmbedding(nn.Layer):
        """cos/sin of position * inverse frequency, as [1, seq, 1, head_dim]."""

        def __init__(self, head_dim: int) -> None:
            super().__init__()
            self.head_dim = head_dim

        def forward(self, seq: int) -> tuple[Any, Any]:
            d = self.head_dim
            inv = 1.0 / (10000 ** (np.arange(0, d, 2, dtype="float32") / d))
            pos = paddle.arange(seq, dtype="float32")
            freqs = pos.unsqueeze(-1) * paddle.assign(inv).unsqueeze(0)
            emb = paddle.concat([freqs, freqs], axis=-1)
            cos = _append("cos", {"X": [emb]}, ["Out"])["Out"]
            sin = _append("sin", {"X": [emb]}, ["Out"])["Out"]
            return cos.reshape([1, seq, 1, d]), sin.reshape([1, seq, 1, d])

    def rotate_half(x: Any) -> Any:
        x1, x2 = paddle.split(x, 2, axis=-1)
        return paddle.concat([-x2, x1], axis=-1)

    def matmul(x: Any, y: Any, trans_y: bool = False) -> Any:
        return _append(
            "matmul_v2",
            {"X": [x], "Y": [y]},
            ["Out"],
            {"trans_x": False, "trans_y": trans_y},
        )["Out"]

    class LlamaAttention(nn.Layer):
        def __init__(self, case: Case, mesh: Any) -> None:
            super().__init__()
            h = case.hidden
            self.heads, self.head_dim = case.heads, h // case.heads
            self.q_proj = nn.Linear(h, h, bias_attr=False)
            self.k_proj = nn.Linear(h, h, bias_attr=False)
            self.v_proj = nn.Linear(h, h, bias_attr=False)
            self.o_proj = nn.Linear(h, h, bias_attr=False)
            self.rotary_emb = LlamaRotaryEmbedding(self.head_dim)
            if case.mp > 1:
                for proj in (self.q_proj, self.k_proj, self.v_proj):
                    _shard(proj.weight, mesh, column=True)
                _shard(self.o_proj.weight, mesh, column=False)

        def forward(self, x: Any) -> Any:
            b, s, h = x.shape
            shape = [b, s, self.heads, self.head_dim]
            q = self.q_proj(x).reshape(shape)
            k = self.k_proj(x).reshape(shape)
            v = self.v_proj(x).reshape(shape)
            cos, sin = self.rotary_emb(s)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            q, k, v = (t.transpose([0, 2, 1, 3]) for t in (q, k, v))
            scores = paddle.scale(matmul(q, k, trans_y=True), 1.0 / self.head_dim**0.5)
            out = matmul(F.softmax(scores, axis=-1), v)
            return self.o_proj(out.transpose([0, 2, 1, 3]).reshape([b, s, h]))

    class LlamaMLP(nn.Layer):
        def __init__(self, case: Case, mesh: Any) -> None:
            super().__init__()
            h, inner = case.hidden, 2 * case.hidden
            self.gate_proj = nn.Linear(h, inner, bias_attr=False)
            self.up_proj = nn.Linear(h, inner, bias_attr=False)
            self.down_proj = nn.Linear(inner, h, bias_attr=False)
            if case.mp > 1:
                _shard(self.gate_proj.weight, mesh, column=True)
                _shard(self.up_proj.weight, mesh, column=True)
                _shard(self.down_proj.weight, mesh, column=False)

        def forward(self, x: Any) -> Any:
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class LlamaDecoderLayer(nn.Layer):
        def __init__(self, case: Case, mesh: Any) -> None:
            super().__init__()
            self.input_layernorm = LlamaRMSNorm(case.hidden)
            self.self_attn = LlamaAttention(case, mesh)
            self.post_attention_layernorm = LlamaRMSNorm(case.hidden)
            self.mlp = LlamaMLP(case, mesh)

        def forward(self, x: Any) -> Any:
            x = x + self.self_attn(self.input_layernorm(x))
            return x + self.mlp(self.post_attention_layernorm(x))

    class LlamaForCausalLM(nn.Layer):
        """Embedding, decoder layers in stage blocks (layer i on stage i*pp//N), norm, head."""

        def __init__(self, case: Case, meshes: list[Any]) -> None:
            super().__init__()
            from paddle.distributed.auto_parallel.interface import recompute

            self.case, self.meshes, pp = case, meshes, len(meshes)
            self.stage_of = [i * pp // case.n_layers for i in range(case.n_layers)]
            self.recompute = recompute
            with meshes[0]:
                self.embed_tokens = nn.Embedding(case.vocab, case.hidden)
            self.layers = nn.LayerList()
            for i in range(case.n_layers):
                mesh = meshes[self.stage_of[i]]
                with mesh:
                    self.layers.append(LlamaDecoderLayer(case, mesh))
            with meshes[-1]:
                self.norm = LlamaRMSNorm(case.hidden)
                if not case.tied:
                    self.lm_head = nn.Linear(case.hidden, case.vocab, bias_attr=False)

        def forward(self, ids: Any) -> Any:
            import paddle.distributed as dist

            case = self.case
            with self.meshes[0]:
                x = self.embed_tokens(ids)
            for i, layer in enumerate(self.layers):
                mesh = self.meshes[self.stage_of[i]]
                if case.reshard and i > 0:
                    x = dist.reshard(x, mesh, _replicated(mesh))
                with mesh:
                    rc = case.recompute is not None and i in case.recompute
                    x = self.recompute(layer)(x) if rc else layer(x)
            with self.meshes[-1]:
                x = self.norm(x)
                if case.tied:
                    return matmul(x, self.embed_tokens.weight, trans_y=True)
                return self.lm_head(x)

    return {"LlamaForCausalLM": LlamaForCausalLM}


def _replicated(mesh: Any) -> list[Any]:
    import paddle.distributed as dist

    return [dist.Replicate() for _ in mesh.shape]


def _shard(weight: Any, mesh: Any, *, column: bool) -> None:
    """Megatron's split: column-parallel weights on their output dim, row-parallel on input."""
    import paddle.distributed as dist

    placements = [dist.Replicate(), dist.Shard(1 if column else 0)]
    dist.shard_tensor(weight, mesh, placements)


# ----------------------------------------------------------------------------
# Building


def _stage_meshes(case: Case) -> list[Any]:
    from paddle.distributed import ProcessMesh

    if case.mp == 1:
        return [ProcessMesh([s], dim_names=["pp"]) for s in range(case.pp)]
    per_stage = case.dp * case.mp
    return [
        ProcessMesh(
            [
                list(range(s * per_stage + d * case.mp, s * per_stage + (d + 1) * case.mp))
                for d in range(case.dp)
            ],
            dim_names=["dp", "mp"],
        )
        for s in range(case.pp)
    ]


def _earlier_program() -> None:
    """What an earlier program of the same process leaves behind: its meshes put ranks 0..3
    into the world process group (a fresh dist context does not remove them)."""
    import paddle
    from paddle.distributed import ProcessMesh

    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
        meshes = [ProcessMesh([r], dim_names=["pp"]) for r in range(4)]
        x = paddle.static.data("x", [2, 4], "float32")
        for mesh in meshes:
            with mesh:
                x = paddle.nn.Linear(4, 4)(x)


def build_case(case: Case, vpp: int = 1) -> Built:
    """Build and complete `case` (see the module docstring); `vpp=1` is the plain-PP input."""
    import paddle

    paddle.enable_static()
    with paddle.pir_utils.OldIrGuard(), _legacy_ops(), _gpu_kernels():
        reset_paddle_globals()
        if case.leftover:
            _earlier_program()
            _reset_keeping_world()
        scope = paddle.static.Scope()
        with paddle.static.scope_guard(scope):
            return _build(case, vpp)


def _reset_keeping_world() -> None:
    """A fresh default dist context and name counters, as a new program gets, but the world
    process group keeps the ranks the earlier program put there."""
    from paddle.distributed.auto_parallel.static import process_group

    ranks = list(process_group.get_world_process_group().ranks)
    reset_paddle_globals()
    process_group.get_world_process_group().add_ranks(ranks)


def _build(case: Case, vpp: int) -> Built:
    import paddle
    import paddle.distributed as dist
    from paddle.distributed.auto_parallel.static.completion import Completer
    from paddle.distributed.auto_parallel.static.dist_context import DistributedContext

    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
        meshes = _stage_meshes(case)
        ids = paddle.static.data("input_ids", [case.batch, case.seq], "int64")
        labels = paddle.static.data("labels", [case.batch, case.seq, 1], "int64")
        if case.reader:
            # paddle.io.DataLoader lost from_generator in 3.x; the legacy class keeps it.
            from paddle.base.reader import DataLoader

            DataLoader.from_generator(feed_list=[ids, labels], capacity=4, iterable=False)
        if case.mp > 1:  # the batch split over dp on the first and the last stage
            dist.shard_tensor(ids, meshes[0], [dist.Shard(0), dist.Replicate()])
            dist.shard_tensor(labels, meshes[-1], [dist.Shard(0), dist.Replicate()])
        model = _model_classes()["LlamaForCausalLM"](case, meshes)
        logits = model(ids)
        with meshes[-1]:
            loss = paddle.nn.functional.cross_entropy(logits, labels)

        strategy = _strategy(case, vpp)
        clip = paddle.nn.ClipGradByGlobalNorm(1.0) if case.clip else None
        optimizer = paddle.optimizer.AdamW(1e-3, grad_clip=clip)
        dist_context = DistributedContext(
            main,
            startup,
            optimizer,
            loss,
            {"inputs": [ids], "labels": [labels]},
            {"loss": [loss]},
            strategy=strategy,
        )
        completer = Completer(dist_context)
        completer.complete_forward_annotation(main)
        dist_context.block_state.parse_forward_blocks(main)
        params_grads = paddle.static.append_backward(
            loss, distop_context=dist_context.dist_op_context
        )
        completer.complete_backward_annotation(main)
        dist_context.block_state.parse_backward_blocks(main)
        loss = _pre_optimization(case, main, startup, dist_context, loss, optimizer, params_grads)
        with main.switch_name_generator_guard("opt_"):
            optimizer.apply_gradients(params_grads)
        completer.complete_update_annotation(main)
    return Built(case, vpp, main, startup, dist_context, loss)


def _strategy(case: Case, vpp: int) -> Any:
    from paddle.distributed.auto_parallel.strategy import Strategy

    strategy = Strategy()
    strategy.auto_mode = "semi"
    strategy.pipeline.enable = True
    strategy.pipeline.vpp_degree = vpp
    if vpp > 1:
        strategy.pipeline.vpp_seg_method = case.seg_method
        strategy.pipeline.schedule_mode = "VPP"
    if case.amp is not None:
        strategy.amp.enable = True
        strategy.amp.dtype = "float16"
        strategy.amp.level = case.amp
        if case.amp == "o2":  # PaddleNLP's Llama lists (softmax_with_cross_entropy: ours)
            # (reduce_mean in the black list makes the fp16 pass fail on scale's grad)
            strategy.amp.custom_black_list = [
                "reduce_sum",
                "softmax_with_cross_entropy",
                "elementwise_div",
            ]
            strategy.amp.custom_white_list = ["lookup_table_v2", "matmul_v2"]
    if case.recompute is not None:
        strategy.recompute.enable = True
    return strategy


def _pre_optimization(
    case: Case,
    main: Any,
    startup: Any,
    dist_context: Any,
    loss: Any,
    optimizer: Any,
    params_grads: Any,
) -> Any:
    """`Parallelizer._apply_pre_optimization`: AMP (O1 or O2), then recompute. Returns the
    loss the passes leave (AMP may scale it)."""
    import copy

    from paddle.distributed.passes import new_pass

    strategy = dist_context.strategy
    context = dist_context.pass_context
    if strategy.amp.enable:
        config = copy.deepcopy(strategy.amp.to_dict())
        config["dist_context"] = dist_context
        config["params_grads"] = params_grads
        config["loss"] = loss
        config["input_data"] = (
            dist_context.serial_feed_vars["inputs"] + dist_context.serial_feed_vars["labels"]
        )
        if config["level"] == "o1":
            amp = new_pass("auto_parallel_amp", config)
        else:
            config["base_opt"] = optimizer
            amp = new_pass("auto_parallel_fp16", config)
        amp.apply([main], [startup], context)
        loss = amp.get_loss()
    if strategy.recompute.enable:
        config = copy.deepcopy(strategy.recompute.to_dict())
        config["dist_context"] = dist_context
        config["no_grad_set"] = None
        config["loss"] = loss
        new_pass("auto_parallel_recompute", config).apply([main], [startup], context)
        # The pass leaves its scratch block current; apply_gradients must append to block 0.
        main.current_block_idx = 0
    return loss
