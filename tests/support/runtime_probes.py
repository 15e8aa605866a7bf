"""Write tests/data/runtimes/*.json: what each runtime's own code accepts, at the boundaries.

Not collected by pytest (no ``test_`` prefix); opt-in, each part in the Python that has its
runtime installed, each writing its own file:

    # Paddle 3.0.0 and 3.3.1, each in a venv of its own (pip install paddlepaddle==X)
    /tmp/paddle-3.0.0/bin/python tests/support/runtime_probes.py paddle
    python tests/support/runtime_probes.py paddle              # the test extra's 3.3.1
    # torch 2.13 (CPU wheel)
    /tmp/ref/bin/python tests/support/runtime_probes.py torch

Paddle: each pipeline pass's own job-list builder is called with its pass attributes set
(no program, no device), for every stage; the assert that fires, or ok. Paddle 3.3.1 builds
FThenB, 1F1B and VPP with their PIR builders (the ones its PIR engine runs). ZBVPP's builder
reads device memory figures: they are supplied as Paddle's default (no limit) has them.
torch: every schedule class is built with mock stages (the attributes a stage exposes; no
process group), on every rank; the exception raised, or ok.

`tests/schedule/test_runtimes.py` checks vppctl's rules (`vppctl/schedule/runtimes.py`)
against every row, so both sides of every boundary are the runtime's own answer.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "data" / "runtimes"
PADDLE_MODES = (
    ("FThenB", [1]),
    ("1F1B", [1]),
    ("Eager1F1B", [1]),
    ("ZBH1", [1]),
    ("VPP", [1, 2]),
    ("ZBVPP", [2]),
)


def paddle_job_list(mode: str, pp: int, vpp: int, m: int, stage: int, pir: bool) -> Any:
    from paddle.distributed.passes import pipeline_scheduler_pass as passes

    cls = {
        "FThenB": passes.PipelineFThenBPass,
        "1F1B": passes.Pipeline1F1BPass,
        "Eager1F1B": passes.PipelineEager1F1BPass,
        "ZBH1": passes.PipelineZeroBubblePipelinePass,
        "VPP": passes.PipelineVirtualPipelinePass,
        "ZBVPP": passes.PipelineZeroBubbleVirtualPipelinePass,
    }[mode]
    p = cls()
    if mode == "ZBVPP":  # device memory figures, as with memory_limit_times -1
        zero = {f"{t}{c}": 0 for t in ("forward", "backward_b", "backward_w") for c in range(vpp)}
        p.program_mem_usages = [dict(zero) for _ in range(pp)]
        p.program_max_mem_usages = [dict(zero) for _ in range(pp)]
        p.base_memory = [0] * pp
        p._get_max_memory = lambda: None
    for name, value in (
        ("num_micro_batches", m),
        ("pp_stage", stage),
        ("pp_degree", pp),
        ("vpp_degree", vpp),
        ("split_backward", False),
    ):
        p.set_attr(name, value)
    p._in_pir_mode = pir
    if mode == "VPP" and pir:
        return p._pir_create_job_list()
    if mode == "1F1B" and pir:
        return p._create_job_list_in_pir()
    return p._create_job_list()


def paddle_refusals(mode: str, pp: int, vpp: int, pir: bool) -> dict[str, str]:
    """m -> the runtime's words, for each m in 1..3pp its builder refuses on some stage."""
    refused = {}
    for m in range(1, 3 * pp + 1):
        for stage in range(pp):
            try:
                paddle_job_list(mode, pp, vpp, m, stage, pir)
            except Exception as e:  # the runtime's own words are the golden
                refused[str(m)] = f"{type(e).__name__}: {str(e)[:150]} (stage {stage})"
                break
    return refused


def probe_paddle() -> dict[str, Any]:
    import paddle

    pir = paddle.__version__ != "3.0.0"
    rows = [
        {"mode": mode, "pp": pp, "vpp": vpp, "refused": paddle_refusals(mode, pp, vpp, pir)}
        for mode, vpps in PADDLE_MODES
        for pp in (2, 3, 4)
        for vpp in vpps
    ]
    return {"paddle": paddle.__version__, "pir_builders": pir, "rows": rows}


def _stages(pp: int, vpp: int, rank: int, style: str = "loop") -> list[SimpleNamespace]:
    n = pp * vpp
    ids = [rank, 2 * pp - 1 - rank] if style == "v" else [rank + k * pp for k in range(vpp)]
    return [
        SimpleNamespace(
            group_size=pp,
            group_rank=rank,
            num_stages=n,
            stage_index=i,
            is_first=i == 0,
            is_last=i == n - 1,
            submod=None,
        )
        for i in ids
    ]


def torch_build(cls: Any, pp: int, vpp: int, m: int, style: str = "loop") -> str:
    from torch.distributed.pipelining import schedules

    try:
        for rank in range(pp):
            if cls in (schedules.ScheduleGPipe, schedules.Schedule1F1B):
                cls(_stages(pp, 1, rank)[0], m)
            else:
                cls(_stages(pp, vpp, rank, style), m)
        return "ok"
    except Exception as e:  # the runtime's own words are the golden
        return f"{type(e).__name__}: {e}"


def probe_torch() -> dict[str, Any]:
    import torch
    from torch.distributed.pipelining import schedules as s

    cases = []
    for pp in (2, 3, 4):
        for m in range(1, 4 * pp + 3):
            cases.append(
                {
                    "pp": pp,
                    "m": m,
                    "GPipe": torch_build(s.ScheduleGPipe, pp, 1, m),
                    "1F1B": torch_build(s.Schedule1F1B, pp, 1, m),
                    "Interleaved1F1B_v2": torch_build(s.ScheduleInterleaved1F1B, pp, 2, m),
                    "InterleavedZB_v2": torch_build(s.ScheduleInterleavedZeroBubble, pp, 2, m),
                    "InterleavedZB_v1": torch_build(s.ScheduleInterleavedZeroBubble, pp, 1, m),
                    "LoopedBFS_v2": torch_build(s.ScheduleLoopedBFS, pp, 2, m),
                    "ZBV": torch_build(s.ScheduleZBVZeroBubble, pp, 2, m, "v"),
                    "ZBV_v3": torch_build(s.ScheduleZBVZeroBubble, pp, 3, m, "loop"),
                    "DualPipeV": torch_build(s.ScheduleDualPipeV, pp, 2, m, "v"),
                }
            )
    return {"torch": torch.__version__, "cases": cases}


def main() -> None:
    warnings.filterwarnings("ignore")
    part = sys.argv[1] if len(sys.argv) > 1 else ""
    if part == "paddle":
        data = probe_paddle()
        path = DATA / f"paddle-{data['paddle']}.json"
    elif part == "torch":
        data = probe_torch()
        path = DATA / f"torch-{'.'.join(data['torch'].split('.')[:2])}.json"
    else:
        raise SystemExit("usage: runtime_probes.py paddle|torch")
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
