"""Make the profiler traces the measured-costs importers are tested on (tests/data/measured/).

Two parts, each in the Python that has its profiler (torch is not a test dependency):

    python3 -m venv /tmp/venv-torch && /tmp/venv-torch/bin/pip install torch==2.13.0
    /tmp/venv-torch/bin/python tests/support/measured_traces.py torch tests/data/measured
    python tests/support/measured_traces.py paddle tests/data/measured   # Paddle 3.3.1

torch (2.13.0, CPU, gloo, two ranks in two processes):

* `torch-isolated-pp2-v2.json`: every stage of a 4-stage model of Linear+GELU blocks (a
  heavier last stage) timed alone, twice each, as the calibration benchmark does:
  forward, whole backward, input and weight gradient with torch.distributed.pipelining's
  own functions, each inside `record_function("PP:<stage><F|B|I|W><mb>")`, torch's names;
  the two ranks' traces (rank 0: stages 0 and 2, rank 1: 1 and 3) merged into one file.
* `torch-zbv-step-pp2.json`: two real `ScheduleZBVZeroBubble` steps (pp 2, m 4) under
  the profiler with a schedule (its `ProfilerStep#N` events, one warm-up step), both ranks
  merged: the runtime's own `PP:` events, SEND and RECV among them, and only its
  annotations (`user_annotation` events; the ops' `cpu_op` events, nine tenths of the
  file, are left out).

Paddle (3.3.1, CPU, the legacy IR): `paddle-gpt-pp2.pb`, the bridge tests' small GPT (4
decoder layers on 2 stage meshes) exported with `vppctl.paddle.export_program`, and
`paddle-gpt-pp2.trace.json`, Paddle's profiler trace of that serial program's own run
(forward and backward, one micro-batch per step): one step outside the profiler, then
three profiled steps. The program is written without its op_callstack attributes
(`vppctl dump --strip-callstack`), most of an export's bytes.

Each part also writes `versions-<part>.json` (the producer's version). The traces are the
profilers' own output, the two ranks' `traceEvents` merged into one file.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

HIDDEN, ROWS, BLOCKS = 32, 16, 4


# -- torch ----------------------------------------------------------------------------------


def _stages(n: int) -> list[Any]:
    import torch
    from torch import nn

    torch.manual_seed(0)
    stages = [
        nn.Sequential(
            *(nn.Sequential(nn.Linear(HIDDEN, HIDDEN), nn.GELU()) for _ in range(BLOCKS // n))
        )
        for _ in range(n)
    ]
    stages[-1].append(nn.Linear(HIDDEN, HIDDEN))
    return stages


def _loss(output: Any, target: Any) -> Any:
    import torch

    return torch.nn.functional.mse_loss(output, target)


def _torch_rank(rank: int, port: int, out: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage, ScheduleZBVZeroBubble
    from torch.distributed.pipelining._backward import (
        stage_backward,
        stage_backward_input,
        stage_backward_weight,
    )
    from torch.profiler import ProfilerActivity, profile, record_function

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    n = 4
    modules = _stages(n)
    x0, target, grads = (torch.randn(ROWS, HIDDEN) for _ in range(3))

    def forward(stage: int) -> tuple[Any, Any]:
        x = x0.detach().requires_grad_(stage > 0)
        y = modules[stage](x)
        return x, (_loss(y, target) if stage == n - 1 else y)

    def whole(stage: int, x: Any, y: Any) -> None:
        if stage == n - 1:
            stage_backward(y, None, [x])
        else:
            stage_backward((y,), (grads,), [x])

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for mb in range(2):
            for stage in (rank, rank + 2):  # loop placement: stages r and r + pp
                with record_function(f"PP:{stage}F{mb}"):
                    x, y = forward(stage)
                with record_function(f"PP:{stage}B{mb}"):
                    whole(stage, x, y)
                with record_function(f"PP:{stage}F{mb}"):
                    x, y = forward(stage)
                params = list(modules[stage].parameters())
                g = None if stage == n - 1 else (grads,)
                with record_function(f"PP:{stage}I{mb}"):
                    if stage > 0:
                        _, groups = stage_backward_input((y,), g, [x], iter(params))
                with record_function(f"PP:{stage}W{mb}"):
                    if stage > 0:
                        stage_backward_weight(iter(params), groups)
                    else:
                        whole(stage, x, y)
    prof.export_chrome_trace(f"{out}/isolated-{rank}.json")

    modules = _stages(n)
    held = (rank, 2 * 2 - 1 - rank)  # V placement
    stages = [
        PipelineStage(modules[s], s, n, torch.device("cpu"), group=dist.group.WORLD) for s in held
    ]
    schedule = ScheduleZBVZeroBubble(stages, 4, loss_fn=_loss)
    batch, labels = torch.randn(4 * ROWS, HIDDEN), torch.randn(4 * ROWS, HIDDEN)
    schedule.step(batch, target=labels) if rank == 0 else schedule.step()  # shapes, warm-up
    steps = torch.profiler.schedule(wait=0, warmup=1, active=2)  # ProfilerStep#N events

    def ready(prof: Any) -> None:
        prof.export_chrome_trace(f"{out}/step-{rank}.json")

    with profile(activities=[ProfilerActivity.CPU], schedule=steps, on_trace_ready=ready) as prof:
        for _ in range(3):
            schedule.step(batch, target=labels) if rank == 0 else schedule.step()
            prof.step()
    dist.destroy_process_group()


def torch_part(out: Path) -> None:
    import tempfile

    import torch
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_torch_rank, args=(29400 + os.getpid() % 500, tmp), nprocs=2)
        for kind, name in (
            ("isolated", "torch-isolated-pp2-v2.json"),
            ("step", "torch-zbv-step-pp2.json"),
        ):
            events: list[Any] = []
            for rank in range(2):
                got = json.loads(Path(tmp, f"{kind}-{rank}.json").read_text())["traceEvents"]
                if kind == "step":  # torch's annotations only: the ops' events are 9/10 of it
                    got = [e for e in got if e.get("cat") in ("user_annotation", None)]
                events += got
            (out / name).write_text(json.dumps({"traceEvents": events}) + "\n")
    _versions(out, "torch", {"torch": torch.__version__})


# -- Paddle ---------------------------------------------------------------------------------


def paddle_part(out: Path) -> None:
    os.environ["FLAGS_enable_pir_api"] = "0"  # noqa: SIM112 (Paddle reads this exact name)
    import importlib.util
    import tempfile

    import numpy as np
    import paddle
    import paddle.profiler as profiler
    from paddle.distributed import ProcessMesh
    from paddle.distributed.auto_parallel.static.completion import Completer
    from paddle.distributed.auto_parallel.static.dist_context import DistributedContext
    from paddle.distributed.auto_parallel.strategy import Strategy

    from vppctl.commands import DumpOptions, dump_file
    from vppctl.paddle import export_program

    conftest = Path(__file__).resolve().parents[1] / "paddle" / "conftest.py"
    spec = importlib.util.spec_from_file_location("bridge_conftest", conftest)
    assert spec is not None and spec.loader is not None
    bridge = importlib.util.module_from_spec(spec)
    sys.modules["bridge_conftest"] = bridge
    spec.loader.exec_module(bridge)
    classes = bridge._model_classes()
    paddle.enable_static()
    paddle.seed(1)
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        meshes = [ProcessMesh([s], dim_names=["dp"]) for s in range(2)]
        ids = paddle.static.data("input_ids", [2, 4], "int64")
        labels = paddle.static.data("labels", [2, 4, 1], "int64")
        logits = classes["GPTModel"](32, 8, 4, meshes)(ids)
        with meshes[-1]:
            loss = classes["Criterion"]()(logits, labels)
        strategy = Strategy()
        strategy.auto_mode = "semi"
        strategy.pipeline.enable = True
        feeds, fetches = {"inputs": [ids], "labels": [labels]}, {"loss": [loss]}
        context = DistributedContext(
            main, startup, paddle.optimizer.AdamW(1e-3), loss, feeds, fetches, strategy=strategy
        )
        completer = Completer(context)
        completer.complete_forward_annotation(main)
        context.block_state.parse_forward_blocks(main)
        paddle.static.append_backward(loss, distop_context=context.dist_op_context)
        completer.complete_backward_annotation(main)
        context.block_state.parse_backward_blocks(main)
    with tempfile.TemporaryDirectory() as tmp:
        exported = Path(tmp, "exported.pb")
        exported.write_bytes(export_program(main, context))
        dump_file(exported, out / "paddle-gpt-pp2.pb", DumpOptions(strip_callstack=True))
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    rng = np.random.default_rng(0)
    feed = {
        "input_ids": rng.integers(0, 32, (2, 4)).astype("int64"),
        "labels": rng.integers(0, 32, (2, 4, 1)).astype("int64"),
    }
    exe.run(main, feed=feed, fetch_list=[loss])  # warm-up, outside the profile
    with tempfile.TemporaryDirectory() as tmp:
        prof = profiler.Profiler(
            targets=[profiler.ProfilerTarget.CPU],
            on_trace_ready=profiler.export_chrome_tracing(tmp),
        )
        prof.start()
        for _ in range(3):
            exe.run(main, feed=feed, fetch_list=[loss])
            prof.step()
        prof.stop()
        (trace,) = Path(tmp).iterdir()
        (out / "paddle-gpt-pp2.trace.json").write_bytes(trace.read_bytes())
    _versions(out, "paddle", {"paddle": paddle.__version__})


def _versions(out: Path, part: str, versions: dict[str, str]) -> None:
    versions = {**versions, "python": platform.python_version(), "machine": platform.machine()}
    (out / f"versions-{part}.json").write_text(json.dumps(versions, indent=1) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("torch", "paddle"):
        sys.exit(f"usage: {sys.argv[0]} torch|paddle OUTDIR")
    target = Path(sys.argv[2])
    target.mkdir(parents=True, exist_ok=True)
    (torch_part if sys.argv[1] == "torch" else paddle_part)(target)
