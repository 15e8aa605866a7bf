"""Write tests/data/schedules.json: per-rank action orders from the references' own code.

Not collected by pytest (no ``test_`` prefix). It runs in two parts, each in the
Python that has its reference installed, and each part rewrites only its own cases
(the other part's are kept), so the JSON holds both:

    # torch 2.13 (CPU wheel) and megatron-core (--no-deps; numpy and packaging beside it)
    /work/venvs/ref/bin/python tests/support/make_schedule_goldens.py --part torch
    # Paddle 3.3.1, the test extra (pip install -e '.[test,paddle]')
    python tests/support/make_schedule_goldens.py --part paddle

What each reference is asked, and how:

* torch.distributed.pipelining: every schedule class is built with mock stages (plain
  objects with the attributes a stage exposes; no process group). The multi-stage
  classes compute ``pipeline_order`` for every rank in their constructor; that is what
  their runtime executes (``OVERLAP_F_B`` runs its forward, then its backward; idle
  slots and ``REDUCE_GRAD`` are not compute). For ``ScheduleGPipe`` and
  ``Schedule1F1B`` the recorded order is what ``_step_microbatches`` executes, the
  mock stage noting each ``forward_one_chunk`` and ``backward_one_chunk``: torch
  2.13's ``Schedule1F1B.pipeline_order`` (a picture only) numbers the last rank's
  forwards 1..m while the executed loop runs 0..m-1.
  ``ScheduleInterleavedZeroBubble`` derives its ``microbatches_per_round`` (vppctl's
  group size) from m and pp; the other sizes at vpp 2 are set on the built object and
  its ``_calculate_single_rank_operations`` called again.
* Megatron-Core: ``get_schedule_table`` and ``get_pp_rank_microbatches`` (with a mock
  ``p2p_communicator`` naming the rank), then the three loops of
  ``forward_backward_pipelining_with_interleaving`` (warm-up forwards; a forward and a
  backward; cool-down backwards), whose chunk ids come from ``get_model_chunk_id``'s
  rule (the table's chunk, mirrored for backwards) and micro-batches from the table.
  Without interleaving, ``forward_backward_pipelining_without_interleaving``'s
  ``pp - rank - 1`` warm-up forwards.
* Paddle 3.3.1: each pipeline pass's own job-list builder, called directly with the
  pass attributes set (``_create_job_list``; VPP's PIR ``_pir_create_job_list``, the
  one 3.3.1 runs; ZBH1 and Eager1F1B have one builder for both IRs). ZBVPP's builder
  also reads memory figures Paddle measures on the device and calls a
  ``_get_max_memory`` 3.3.1 does not define: both are supplied as Paddle's default
  (``memory_limit_times`` -1) has them, no limit (see ``supply_zbvpp_memory``). Job types map to
  actions: ``forward`` F, ``backward`` B, ``backward_b`` I, ``backward_w`` W (a
  trailing digit is the chunk); communication and optimizer jobs are not compute.

Orders are written in torch notation ``{virtual_stage}{F|B|I|W}{micro_batch}``, one
space-separated string per rank. To keep the file small, the larger cases (more than
``FULL_UNITS`` (micro-batch, chunk) units) keep a digest of their orders instead (the
first 16 hex digits of the SHA-256 of the ranks' strings joined by newlines).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "data" / "schedules.json"
PPS = (2, 3, 4, 8)
VPPS = (1, 2, 3, 4)
FULL_UNITS = 32  # pp * vpp * m up to this: orders in full; above: their digest

Orders = list[list[str]]


def grid_m(pp: int) -> range:
    return range(pp, 4 * pp + 1)


def digest(orders: Orders) -> str:
    """The first 16 hex digits of the SHA-256 of the orders, one rank per line."""
    text = "\n".join(" ".join(r) for r in orders)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def case(
    schedule: str, reference: str, pp: int, vpp: int, m: int, group: int | None, orders: Orders
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "schedule": schedule,
        "reference": reference,
        "pp": pp,
        "vpp": vpp,
        "m": m,
        "group_size": group,
    }
    if pp * vpp * m <= FULL_UNITS:
        entry["orders"] = [" ".join(r) for r in orders]
    else:
        entry["sha256"] = digest(orders)
    return entry


# ---------------------------------------------------------------------------
# torch


def torch_cases() -> Iterator[dict[str, Any]]:
    import torch
    from torch.distributed.pipelining import schedules as S

    compute = {"F": "F", "B": "B", "I": "I", "W": "W"}

    def stages(pp: int, vpp: int, rank: int, style: str) -> list[Any]:
        n = pp * vpp
        if style == "v":
            ids = [rank, 2 * pp - 1 - rank]
        else:
            ids = [rank + k * pp for k in range(vpp)]
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

    def flat(actions: list[Any]) -> list[str]:
        out = []
        for a in actions:
            if a is None:
                continue
            for sub in a.sub_actions or (a,):
                kind = str(sub.computation_type)
                kind = {
                    "FORWARD": "F",
                    "FULL_BACKWARD": "B",
                    "BACKWARD_INPUT": "I",
                    "BACKWARD_WEIGHT": "W",
                }.get(sub.computation_type.name, kind)
                if kind in compute:
                    out.append(f"{sub.stage_index}{kind}{sub.microbatch_index}")
        return out

    def multi(cls: Any, pp: int, vpp: int, m: int, style: str = "loop") -> Any:
        return cls(stages(pp, vpp, 0, style), m)

    def orders_of(obj: Any, pp: int) -> Orders:
        return [flat(obj.pipeline_order[r]) for r in range(pp)]

    def executed(cls: Any, pp: int, m: int) -> Orders:
        return [executed_rank(cls, stages(pp, 1, rank, "loop")[0], m) for rank in range(pp)]

    for pp in PPS:
        for m in grid_m(pp):
            yield case("fthenb", "torch", pp, 1, m, None, executed(S.ScheduleGPipe, pp, m))
            yield case("1f1b", "torch", pp, 1, m, None, executed(S.Schedule1F1B, pp, m))
            if m % max(1, m // pp) == 0:
                zb = multi(S.ScheduleInterleavedZeroBubble, pp, 1, m)
                yield case("zb1p", "torch", pp, 1, m, None, orders_of(zb, pp))
            yield case(
                "zbv",
                "torch",
                pp,
                2,
                m,
                None,
                orders_of(multi(S.ScheduleZBVZeroBubble, pp, 2, m, "v"), pp),
            )
            if m >= 2 * pp:
                yield case(
                    "dualpipev",
                    "torch",
                    pp,
                    2,
                    m,
                    None,
                    orders_of(multi(S.ScheduleDualPipeV, pp, 2, m, "v"), pp),
                )
            if m % max(1, m // pp):
                continue  # torch refuses m not a multiple of its rounds
            for vpp in VPPS[1:]:
                inter = multi(S.ScheduleInterleaved1F1B, pp, vpp, m)
                yield case(
                    "interleaved",
                    "torch",
                    pp,
                    vpp,
                    m,
                    inter.microbatches_per_round,
                    orders_of(inter, pp),
                )
                zb = multi(S.ScheduleInterleavedZeroBubble, pp, vpp, m)
                yield case(
                    "interleaved-zb",
                    "torch",
                    pp,
                    vpp,
                    m,
                    zb.microbatches_per_round,
                    orders_of(zb, pp),
                )
                if vpp == 2:
                    yield from zero_bubble_groups(zb, pp, m, orders_of)
    del torch


def executed_rank(cls: Any, stage: Any, m: int) -> list[str]:
    """What a single-stage schedule's ``_step_microbatches`` runs on ``stage`` (a mock
    whose forward and backward note their micro-batch and whose p2p lists are empty)."""
    seen: list[str] = []
    rank = stage.stage_index
    stage.forward_one_chunk = lambda i, *a, **k: seen.append(f"{rank}F{i}")
    stage.backward_one_chunk = lambda i, *a, **k: seen.append(f"{rank}B{i}")
    for name in ("get_fwd_recv_ops", "get_fwd_send_ops", "get_bwd_recv_ops", "get_bwd_send_ops"):
        setattr(stage, name, lambda i: [])
    stage.perform_reduce_grad = lambda *a: None
    sched = cls(stage, m)
    sched._initialize_stage = lambda *a, **k: None
    sched._step_microbatches()
    return seen


def zero_bubble_groups(
    zb: Any, pp: int, m: int, orders_of: Callable[[Any, int], Orders]
) -> Iterator[dict[str, Any]]:
    """Every other group size at vpp 2: torch's own builder with its round size set."""
    default = zb.microbatches_per_round
    for n in range(min(pp, m), m + 1):
        if m % n or n == default:
            continue
        zb.microbatches_per_round, zb.number_of_rounds = n, m // n
        for rank in range(pp):
            zb.pipeline_order[rank] = zb._calculate_single_rank_operations(rank)
        zb.pipeline_order = zb._add_bubbles_to_actions(2 * pp)
        yield case("interleaved-zb", "torch", pp, 2, m, n, orders_of(zb, pp))


# ---------------------------------------------------------------------------
# Megatron-Core


def megatron_cases() -> Iterator[dict[str, Any]]:
    from megatron.core.pipeline_parallel import schedules as M

    def rank_order(pp: int, vpp: int, rank: int, m: int, n: int) -> list[str]:
        comm = SimpleNamespace(
            pp_group=SimpleNamespace(size=lambda: pp, rank=lambda: rank),
            virtual_pipeline_model_parallel_size=vpp,
        )
        total, _, warmup, remaining = M.get_pp_rank_microbatches(m, vpp, n, p2p_communicator=comm)
        table = M.get_schedule_table(m, vpp, n)

        def forward(k: int) -> str:
            mb, chunk = table[k]
            return f"{chunk * pp + rank}F{mb}"

        def backward(k: int) -> str:
            mb, chunk = table[k]
            return f"{(vpp - 1 - chunk) * pp + rank}B{mb}"

        order = [forward(k) for k in range(warmup)]
        for k in range(remaining):
            order += [forward(k + warmup), backward(k)]
        order += [backward(k) for k in range(remaining, total)]
        return order

    def plain(pp: int, rank: int, m: int) -> list[str]:
        warmup = min(pp - rank - 1, m)
        order = [f"{rank}F{i}" for i in range(warmup)]
        for i in range(m - warmup):
            order += [f"{rank}F{i + warmup}", f"{rank}B{i}"]
        return order + [f"{rank}B{i}" for i in range(m - warmup, m)]

    for pp in PPS:
        for m in grid_m(pp):
            yield case("1f1b", "megatron", pp, 1, m, None, [plain(pp, r, m) for r in range(pp)])
            legal = [n for n in range(pp, m + 1) if not 0 < m % n < pp]
            for vpp in VPPS[1:]:
                for n in legal if vpp == 2 else [pp] if pp in legal else []:
                    orders = [rank_order(pp, vpp, r, m, n) for r in range(pp)]
                    yield case("interleaved", "megatron", pp, vpp, m, n, orders)


# ---------------------------------------------------------------------------
# Paddle


def paddle_cases() -> Iterator[dict[str, Any]]:
    for pp in PPS:
        for m in grid_m(pp):
            for mode, schedule in (
                ("FThenB", "fthenb"),
                ("1F1B", "1f1b"),
                ("Eager1F1B", "eager1f1b"),
                ("ZBH1", "zbh1"),
            ):
                if mode == "Eager1F1B" and m < 2 * pp - 1:
                    continue
                yield case(schedule, "paddle", pp, 1, m, None, paddle_orders(mode, pp, 1, m))
            for vpp in VPPS:
                yield case("vpp", "paddle", pp, vpp, m, None, paddle_orders("VPP", pp, vpp, m))
        yield case("zbvpp", "paddle", pp, 2, pp, None, paddle_orders("ZBVPP", pp, 2, pp))


def paddle_orders(mode: str, pp: int, vpp: int, m: int) -> Orders:
    """Every stage's compute jobs from Paddle's own pass (see the module docstring)."""
    return [paddle_stage(mode, pp, vpp, m, s) for s in range(pp)]


def paddle_stage(mode: str, pp: int, vpp: int, m: int, stage: int) -> list[str]:
    from paddle.distributed.passes.pipeline_scheduler_pass import (
        Pipeline1F1BPass,
        PipelineEager1F1BPass,
        PipelineFThenBPass,
        PipelineVirtualPipelinePass,
        PipelineZeroBubblePipelinePass,
        PipelineZeroBubbleVirtualPipelinePass,
    )

    cls = {
        "FThenB": PipelineFThenBPass,
        "1F1B": Pipeline1F1BPass,
        "Eager1F1B": PipelineEager1F1BPass,
        "ZBH1": PipelineZeroBubblePipelinePass,
        "VPP": PipelineVirtualPipelinePass,
        "ZBVPP": PipelineZeroBubbleVirtualPipelinePass,
    }[mode]
    p = cls()
    if mode == "ZBVPP":
        supply_zbvpp_memory(p, pp, vpp)
    for name, value in (
        ("num_micro_batches", m),
        ("pp_stage", stage),
        ("pp_degree", pp),
        ("vpp_degree", vpp),
        ("split_backward", False),
    ):
        p.set_attr(name, value)
    if mode == "VPP":
        jobs = p._pir_create_job_list()
    elif mode == "1F1B":
        jobs = p._create_job_list_in_pir()
    else:
        jobs = p._create_job_list()
    kinds = {"forward": "F", "backward": "B", "backward_b": "I", "backward_w": "W"}
    out = []
    for job in jobs:
        name = job.type()
        base = name.rstrip("0123456789")
        if base not in kinds:
            continue  # recv_forward, send_backward, optimizer
        chunk = int(name[len(base) :] or 0)
        # ZBVPP's odd chunks run back up the pipeline: the V placement's virtual stages.
        down = mode != "ZBVPP" or chunk % 2 == 0
        virtual = chunk * pp + (stage if down else pp - 1 - stage)
        out.append(f"{virtual}{kinds[base]}{job.micro_batch_id()}")
    return out


def supply_zbvpp_memory(p: Any, pp: int, vpp: int) -> None:
    """What ZBVPP's builder reads besides its attributes, as Paddle has it by default
    (``memory_limit_times`` -1): no memory limit (3.3.1 calls a ``_get_max_memory`` it
    does not define; 3.0.0's returns infinity then) and no memory use per job."""
    zero = {f"{t}{c}": 0 for t in ("forward", "backward_b", "backward_w") for c in range(vpp)}
    p.program_mem_usages = [dict(zero) for _ in range(pp)]
    p.program_max_mem_usages = [dict(zero) for _ in range(pp)]
    p.base_memory = [0] * pp
    p._get_max_memory = lambda: None  # None: VScheduleCreator's "no limit"


def paddle_version() -> str:
    import paddle

    return str(paddle.__version__)


# ---------------------------------------------------------------------------


def dumps(data: dict[str, Any]) -> str:
    """Compact JSON with one case per line, so that a regenerated file diffs by case."""
    compact = {"separators": (",", ":"), "sort_keys": True}
    head = {k: v for k, v in data.items() if k != "cases"}
    lines = [json.dumps(c, **compact) for c in data["cases"]]  # type: ignore[arg-type]
    body = json.dumps(head, **compact)[:-1]  # type: ignore[arg-type]
    return body + ',"cases":[\n' + ",\n".join(lines) + "\n]}\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("torch", "paddle"), required=True)
    args = parser.parse_args()
    data: dict[str, Any] = {"versions": {}, "cases": []}
    if OUT.exists():
        data = json.loads(OUT.read_text())
    mine = {"torch": ("torch", "megatron"), "paddle": ("paddle",)}[args.part]
    cases = [c for c in data["cases"] if c["reference"] not in mine]
    if args.part == "torch":
        import importlib.metadata as md

        data["versions"]["torch"] = md.version("torch")
        data["versions"]["megatron-core"] = md.version("megatron-core")
        cases += list(torch_cases()) + list(megatron_cases())
    else:
        data["versions"]["paddlepaddle"] = paddle_version()
        cases += list(paddle_cases())
    data["versions"][f"python ({args.part} part)"] = sys.version.split()[0]
    data["grid"] = {
        "pp": list(PPS),
        "vpp": list(VPPS),
        "m": "pp to 4 pp",
        "full_orders_up_to_units": FULL_UNITS,
    }
    data["cases"] = sorted(
        cases,
        key=lambda c: (
            c["schedule"],
            c["reference"],
            c["pp"],
            c["vpp"],
            c["m"],
            c["group_size"] or 0,
        ),
    )
    OUT.write_text(dumps(data))
    print(f"wrote {OUT} ({OUT.stat().st_size:,} bytes, {len(data['cases'])} cases)")


if __name__ == "__main__":
    main()
