"""Build PIR training programs with Paddle 3.3.1 the way its auto-parallel engine builds them.

Run as a script (Paddle's PIR mode, the default of 3.3.1; not importable in the bridge
tests' process, which forces the legacy IR):

    python tests/support/pir_programs.py OUTDIR [CASE ...] [--export]

For each case it builds the model in dygraph with `paddle.distributed` meshes
(`dist.shard_tensor` for the weights, `dist.reshard` between stages), makes the
`DistModel` (`dist.to_static`) and runs its engine's PIR build as `DistModel.train()`
does (`Engine._build` under the AMP guard, then `Engine._parallel_pir`), keeping the
distributed program the engine holds just before its partition pass: the whole
program (every rank's ops) with its forward, backward and optimizer ops, after
`complete_chunk_id` when the pipeline is "VPP". That program is written as Paddle
saves it (`serialize_pir_program`) to `CASE_plain.json` (schedule 1F1B, vpp 1: the
input) and `CASE_paddlevpp.json` (schedule VPP, Paddle's own VPP completion); with
`--export`, also `CASE_{plain,paddlevpp}.export.json` from `vppctl.paddle.export_program`
on the program in memory. The last line on stdout is `VERSIONS {...}` (JSON).

Only programs are built: nothing runs, so one CPU process serves every rank
(PADDLE_TRAINERS_NUM says the world size). Paddle's `amp_guard` turns AMP off on a CPU
place before tracing; for the AMP case the builder tells that one check it runs on a GPU
place, so that the program gets the casts a GPU job gets (bfloat16 O1, `silu` kept in
float32: its CPU kernel has no bfloat16).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SEG_METHODS = {"gpt": "DecoderLayer", "llama": "LlamaDecoderLayer"}


@dataclass(frozen=True)
class Case:
    """One kind of job: a model, its pipeline, and what else it uses."""

    name: str
    model: str  # "gpt" or "llama"
    pp: int
    vpp: int
    layers: int
    stage_layers: tuple[int, ...] = ()  # () = as even as they go, earlier stages the extras
    tp: int = 1  # ranks per stage, the weights sharded column/row parallel
    amp: bool = False  # bfloat16 O1
    recompute: bool = False  # every layer under `fleet.utils.recompute` (PIR recompute pass)
    # Beyond the checked-in six (tests/support/pir_plan_builds.py builds them):
    dp: int = 1  # data-parallel ranks per stage (a [dp] mesh a stage; the batch sharded)
    vocab: int = 32  # the embedding's and the LM head's rows
    accumulate: int = 2  # strategy.pipeline.accumulate_steps (micro-batches a step)
    batch: int = 4  # the global batch
    stage_of: tuple[int, ...] = ()  # each layer's stage, given (may decrease: custom meshes)
    stray: bool = False  # an op in no layer between layers 3 and 4 (Paddle refuses it)
    strided: bool = False  # stage s on ranks s, s+pp, ...: no rank block (Paddle fails)

    @property
    def world(self) -> int:
        return self.pp * self.tp * self.dp

    def stage_counts(self) -> list[int]:
        if self.stage_layers:
            return list(self.stage_layers)
        n, pp = self.layers, self.pp
        return [n // pp + (1 if s < n % pp else 0) for s in range(pp)]


CASES = {
    c.name: c
    for c in (
        Case("gpt_pp2_v2", "gpt", 2, 2, 8),
        Case("gpt_pp4_v2", "gpt", 4, 2, 8),
        Case("gpt_keep_pp2_v2", "gpt", 2, 2, 12, stage_layers=(7, 5)),
        Case("llama_tp2_pp2_v2", "llama", 2, 2, 4, tp=2),
        Case("llama_amp_pp4_v2", "llama", 4, 2, 8, amp=True),
        Case("llama_rc_pp2_v2", "llama", 2, 2, 4, recompute=True),
    )
}
HIDDEN, SEQ = 16, 4


def build(case: Case, vpp: int) -> Any:
    """The engine's distributed PIR program of `case`, completed for `vpp` chunks."""
    import paddle
    import paddle.base.framework as framework
    import paddle.distributed.parallel as parallel

    os.environ["PADDLE_TRAINERS_NUM"] = str(case.world)
    os.environ["PADDLE_TRAINER_ID"] = "0"
    parallel._global_parallel_env = None  # read the world size again
    framework._name_struct = framework.NameStruct()  # layer paths from /Model/ again
    paddle.disable_static()
    paddle.seed(1)
    with paddle.utils.unique_name.guard():  # names as in a fresh process, whatever ran before
        return _built(case, vpp)


def _built(case: Case, vpp: int) -> Any:
    import paddle
    import paddle.distributed.auto_parallel.static.engine as engine_module

    model, loader, loss, optimizer = _job(case)
    strategy = _strategy(case, vpp)
    import paddle.distributed as dist

    engine = dist.to_static(model, loader, loss, optimizer, strategy=strategy)._engine
    kept: list[Any] = []

    class Kept(Exception):
        pass

    def keep(program: Any) -> None:  # Engine._parallel_pir's partition pass, first call
        kept.append(program)
        raise Kept

    partition = engine_module.apply_partition_pass
    engine_module.apply_partition_pass = keep
    amp = strategy.amp
    try:
        with (
            _amp_on_cpu(case.amp),
            paddle.amp.auto_cast(
                enable=amp.enable,
                custom_white_list=amp.custom_white_list,
                custom_black_list=amp.custom_black_list,
                level=amp.level,
                dtype=amp.dtype,
                use_promote=amp.use_promote,
            ),
        ):
            engine._build("train")
        engine._parallel_pir("train")
    except Kept:
        pass
    finally:
        engine_module.apply_partition_pass = partition
    return kept[0]


def _strategy(case: Case, vpp: int) -> Any:
    import paddle.distributed as dist

    strategy = dist.Strategy()
    pipeline = strategy.pipeline
    pipeline.enable = True
    pipeline.pp_degree = case.pp
    pipeline.accumulate_steps = case.accumulate
    if vpp > 1:
        pipeline.vpp_degree = vpp
        pipeline.vpp_seg_method = SEG_METHODS[case.model]
        pipeline.schedule_mode = "VPP"
    else:
        pipeline.schedule_mode = "1F1B"
    if case.recompute:
        strategy._recompute.enable = True  # dist.Strategy's name for it
    if case.amp:
        strategy.amp.enable = True
        strategy.amp.dtype = "bfloat16"
        strategy.amp.level = "O1"
        strategy.amp.custom_black_list = ["silu"]
    return strategy


@contextlib.contextmanager
def _amp_on_cpu(on: bool) -> Iterator[None]:
    """Tell `amp_guard`'s place check that the tracer runs on a GPU place (see the module
    docstring); everything else about the tracer is the real one."""
    if not on:
        yield
        return
    auto_cast = sys.modules["paddle.amp.auto_cast"]
    real = auto_cast._dygraph_tracer
    checks = {k: getattr(auto_cast, k) for k in ("_is_gpu_bfloat16_supported",)}

    class Place:
        def __init__(self, place: Any) -> None:
            self._place = place

        def is_gpu_place(self) -> bool:
            return True

        def is_xpu_place(self) -> bool:
            return False

        def is_custom_place(self) -> bool:
            return False

        def __getattr__(self, name: str) -> Any:
            return getattr(self._place, name)

    class Tracer:
        def __init__(self, tracer: Any) -> None:
            object.__setattr__(self, "_tracer", tracer)

        @property
        def _expected_place(self) -> Place:
            return Place(self._tracer._expected_place)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._tracer, name)

        def __setattr__(self, name: str, value: Any) -> None:
            setattr(self._tracer, name, value)

    auto_cast._dygraph_tracer = lambda: Tracer(real()) if real() else None
    auto_cast._is_gpu_bfloat16_supported = lambda: True
    try:
        yield
    finally:
        auto_cast._dygraph_tracer = real
        for k, v in checks.items():
            setattr(auto_cast, k, v)


def _job(case: Case) -> tuple[Any, Any, Any, Any]:
    """(model, sharded loader, loss, optimizer) of `case`."""
    import numpy as np
    import paddle
    import paddle.distributed as dist
    from paddle import nn
    from paddle.io import DataLoader, Dataset

    meshes = _meshes(case)
    stage_of = list(case.stage_of) or [
        s for s, n in enumerate(case.stage_counts()) for _ in range(n)
    ]
    layers = _layers(case)
    model = layers["Model"](meshes, stage_of)

    class Tokens(Dataset):  # type: ignore[misc]
        def __getitem__(self, i: int) -> tuple[Any, Any]:
            return np.zeros([SEQ], "int64"), np.zeros([SEQ], "int64")

        def __len__(self) -> int:
            return max(8, case.batch)

    class Criterion(nn.Layer):  # type: ignore[misc]
        def forward(self, logits: Any, labels: Any) -> Any:
            return nn.functional.cross_entropy(logits, labels.unsqueeze(-1)).mean()

    loader = dist.shard_dataloader(
        DataLoader(Tokens(), batch_size=case.batch),
        meshes=[meshes[0], meshes[-1]],
        shard_dims="dp" if case.dp > 1 else None,
    )
    optimizer = paddle.optimizer.AdamW(1e-3, parameters=model.parameters())
    return model, loader, Criterion(), optimizer


def _meshes(case: Case) -> list[Any]:
    """Each stage's mesh: its rank block of tp (dim "mp") or dp (dim "dp") ranks, one rank
    (dim "x") else; `strided`: stage s on ranks s, s+pp, ..."""
    import paddle.distributed as dist

    per = case.tp * case.dp
    dim = "mp" if case.tp > 1 else "dp" if case.dp > 1 else "x"
    if case.strided:
        ranks = [list(range(s, case.world, case.pp)) for s in range(case.pp)]
    else:
        ranks = [list(range(s * per, (s + 1) * per)) for s in range(case.pp)]
    return [dist.ProcessMesh(r, dim_names=[dim]) for r in ranks]


def _layers(case: Case) -> dict[str, Any]:
    """The model's layer classes (made here: they subclass paddle.nn.Layer)."""
    import paddle
    import paddle.distributed as dist
    import paddle.nn.functional as F
    from paddle import nn
    from paddle.distributed.fleet.utils import recompute

    h = HIDDEN
    sharded = case.tp > 1
    replicate = [dist.Replicate()]

    def column(w: Any, mesh: Any) -> Any:
        return dist.shard_tensor(w, mesh, [dist.Shard(1)] if sharded else replicate)

    def row(w: Any, mesh: Any) -> Any:
        return dist.shard_tensor(w, mesh, [dist.Shard(0)] if sharded else replicate)

    def whole(w: Any, mesh: Any) -> Any:
        return dist.shard_tensor(w, mesh, replicate)

    def linear(n_in: int, n_out: int, mesh: Any, split: Any, bias: bool = True) -> Any:
        layer = nn.Linear(n_in, n_out, bias_attr=None if bias else False)
        layer.weight = split(layer.weight, mesh)
        if bias:
            layer.bias = whole(layer.bias, mesh)
        return layer

    def layer_norm(mesh: Any) -> Any:
        norm = nn.LayerNorm(h)
        norm.weight, norm.bias = whole(norm.weight, mesh), whole(norm.bias, mesh)
        return norm

    class MLP(nn.Layer):  # type: ignore[misc]
        def __init__(self, mesh: Any) -> None:
            super().__init__()
            self.fc1 = linear(h, 4 * h, mesh, column)
            self.fc2 = linear(4 * h, h, mesh, row)

        def forward(self, x: Any) -> Any:
            return self.fc2(F.gelu(self.fc1(x)))

    class DecoderLayer(nn.Layer):  # type: ignore[misc]
        def __init__(self, mesh: Any) -> None:
            super().__init__()
            self.norm, self.mlp = layer_norm(mesh), MLP(mesh)

        def forward(self, x: Any) -> Any:
            return x + self.mlp(self.norm(x))

    class RMSNorm(nn.Layer):  # type: ignore[misc]
        def __init__(self, mesh: Any) -> None:
            super().__init__()
            one = nn.initializer.Constant(1.0)
            self.weight = whole(self.create_parameter([h], default_initializer=one), mesh)

        def forward(self, x: Any) -> Any:
            return x * paddle.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight

    class Attention(nn.Layer):  # type: ignore[misc]
        def __init__(self, mesh: Any) -> None:
            super().__init__()
            self.q, self.k, self.v = (linear(h, h, mesh, column, False) for _ in range(3))
            self.o = linear(h, h, mesh, row, False)

        def forward(self, x: Any) -> Any:
            b, s, heads = x.shape[0], x.shape[1], 2

            def split(y: Any) -> Any:
                return y.reshape([b, s, heads, h // heads]).transpose([0, 2, 1, 3])

            q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
            w = F.softmax(paddle.matmul(q, k, transpose_y=True) / (h // heads) ** 0.5, axis=-1)
            return self.o(paddle.matmul(w, v).transpose([0, 2, 1, 3]).reshape([b, s, h]))

    class LlamaMLP(nn.Layer):  # type: ignore[misc]
        def __init__(self, mesh: Any) -> None:
            super().__init__()
            self.gate, self.up = (linear(h, 2 * h, mesh, column, False) for _ in range(2))
            self.down = linear(2 * h, h, mesh, row, False)

        def forward(self, x: Any) -> Any:
            return self.down(F.silu(self.gate(x)) * self.up(x))

    class LlamaDecoderLayer(nn.Layer):  # type: ignore[misc]
        def __init__(self, mesh: Any) -> None:
            super().__init__()
            self.input_layernorm, self.self_attn = RMSNorm(mesh), Attention(mesh)
            self.post_attention_layernorm, self.mlp = RMSNorm(mesh), LlamaMLP(mesh)

        def forward(self, x: Any) -> Any:
            x = x + self.self_attn(self.input_layernorm(x))
            return x + self.mlp(self.post_attention_layernorm(x))

    layer_class = DecoderLayer if case.model == "gpt" else LlamaDecoderLayer

    class Model(nn.Layer):  # type: ignore[misc]
        """Embedding on stage 0, layer i on stage_of[i], norm and head on the last stage;
        `dist.reshard` moves the hidden state where the stage changes."""

        def __init__(self, meshes: list[Any], stage_of: list[int]) -> None:
            super().__init__()
            self.meshes, self.stage_of = meshes, stage_of
            self.embed = nn.Embedding(case.vocab, h)
            self.embed.weight = whole(self.embed.weight, meshes[0])
            self.layers = nn.LayerList([layer_class(meshes[s]) for s in stage_of])
            last = meshes[-1]
            self.norm = layer_norm(last) if case.model == "gpt" else RMSNorm(last)
            self.head = linear(h, case.vocab, last, whole, False)

        def forward(self, ids: Any) -> Any:
            # between stages the hidden state keeps its batch sharding (dp) or is whole:
            # Paddle's completion refuses Shard -> Replicate across meshes
            moved = [dist.Shard(0)] if case.dp > 1 else replicate
            x, stage = self.embed(ids), 0
            for i, (layer, s) in enumerate(zip(self.layers, self.stage_of)):
                if s != stage:
                    x, stage = dist.reshard(x, self.meshes[s], moved), s
                x = recompute(layer, x) if case.recompute else layer(x)
                if case.stray and i == 3:
                    x = x * 2.0
            if stage != len(self.meshes) - 1:
                x = dist.reshard(x, self.meshes[-1], moved)
            return self.head(self.norm(x))

    Model.__name__ = Model.__qualname__ = "GPTModel" if case.model == "gpt" else "LlamaModel"
    return {"Model": Model}


def main(argv: list[str]) -> None:
    export = "--export" in argv
    args = [a for a in argv if a != "--export"]
    out = Path(args[0])
    out.mkdir(parents=True, exist_ok=True)
    import paddle

    from vppctl.paddle import export_program

    for name in args[1:] or list(CASES):
        case = CASES[name]
        for vpp, kind in ((1, "plain"), (case.vpp, "paddlevpp")):
            program = build(case, vpp)
            path = out / f"{name}_{kind}.json"
            paddle.base.core.serialize_pir_program(program, str(path))
            if export:
                (out / f"{name}_{kind}.export.json").write_bytes(export_program(program))
    versions = {
        "paddle": paddle.__version__,
        "python": platform.python_version(),
        "pir": paddle.base.framework.get_flags("FLAGS_enable_pir_api")["FLAGS_enable_pir_api"],
    }
    print("VERSIONS " + json.dumps(versions))


if __name__ == "__main__":
    main(sys.argv[1:])
