"""Calibrate vppctl's step-time prediction against a real torch.distributed.pipelining job.

Opt-in, not run by the tests (torch is not a test dependency). It needs a Python with
torch 2.13 and vppctl installed in one venv, apart from the project's:

    python3 -m venv /tmp/venv-torch
    /tmp/venv-torch/bin/pip install torch==2.13.0 -e .
    /tmp/venv-torch/bin/python tests/benchmarks/calibrate_torch.py            # every case
    /tmp/venv-torch/bin/python tests/benchmarks/calibrate_torch.py --quick    # 3 cases

Run it on a machine with at least two cores and nothing else running: it checks that
itself, and says which cases were noisy.

What it does. Two ranks on CPU with the gloo backend, each pinned to one core
(`os.sched_setaffinity`) with one intra-op thread, run a model of Linear+GELU blocks and
a heavier head (stages of tens of milliseconds per micro-batch, the last the heaviest:
the fastest forward of two blocks of 128 rows seen here took 3 ms on one core, so the
default of 256 rows gives a block about 3 ms of forward and twice that of backward)
under torch's own schedule classes: GPipe, 1F1B, interleaved 1F1B, ZB1P (torch's
`ScheduleInterleavedZeroBubble` with one stage per rank), interleaved zero bubble, ZB-V
and DualPipeV, at m = 2, 4 and 8 where torch runs them (DualPipeV needs m >= 4).

1. Isolated costs. Each rank times, on its own core, every stage it holds, alone, with
   torch's own functions (`stage_backward`, `stage_backward_input`,
   `stage_backward_weight`), each call inside `record_function("PP:<stage><F|B|I|W><mb>")`,
   torch's own event names, under `torch.profiler`: one profile of the forward and the
   whole backward (what GPipe, 1F1B and interleaved 1F1B run), one of the forward and
   the input and weight gradients (what the zero-bubble schedules run; torch computes
   no input gradient on the first stage, its W is the whole backward). A profile whose
   calls waited 1% or more of their time on the run queue is taken again (up to
   `--tries`). Then what the runtime posts around each action, alone too: each message
   between stages on different ranks posted as torch's runtime posts it (`_batch_p2p`)
   inside torch's names, `PP:<stage>SEND_F<mb>`, `RECV_F`, `SEND_B`, `RECV_B`, the
   transfer waited for outside them. The two ranks' traces are merged into one Chrome
   trace per plan shape and kind (OUT/isolated-<shape>-<whole|split>.json): what a user
   would profile.
2. The real step. For each case, warm-up steps and then `--steps` steps, each timed
   from a barrier to the end of `schedule.step()` on both ranks (the step is the later
   of the two). A step is *clean* when each rank's run-queue wait over it (the second
   field of /proc/self/schedstat) is under 1% of it; a case with fewer than
   `--min-clean` clean steps is run again, up to `--tries` times, and flagged as noisy.
3. The prediction. `vppctl simulate --costs-from` (its library call) reads the merged
   trace of what the case's schedule runs (the median of each stage's events per kind)
   and simulates the schedule; the table gives predicted, measured (the median of the
   clean steps) and the signed error, with the noise beside it: the clean steps'
   spread (max/min - 1) and the worst run-queue wait. Beside it, the error of the same
   costs averaged over the stages (every stage the mean stage: all one `--costs F,B,W`
   can say): what measuring each stage is worth.

No constant of this benchmark enters the prediction: every time vppctl uses comes from
the trace (and `--p2p-cost`, 0 unless given).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# torch's schedule classes, and the name vppctl's --schedule gives each.
SCHEDULES = {
    "gpipe": ("ScheduleGPipe", "fthenb", "loop", 1),
    "1f1b": ("Schedule1F1B", "1f1b", "loop", 1),
    "interleaved-1f1b": ("ScheduleInterleaved1F1B", "interleaved", "loop", 2),
    "zb1p": ("ScheduleInterleavedZeroBubble", "zb1p", "loop", 1),
    "interleaved-zb": ("ScheduleInterleavedZeroBubble", "interleaved-zb", "loop", 2),
    "zbv": ("ScheduleZBVZeroBubble", "zbv", "v", 2),
    "dualpipev": ("ScheduleDualPipeV", "dualpipev", "v", 2),
}
SPLIT = {"zb1p", "interleaved-zb", "zbv", "dualpipev"}  # schedules that run I and W apart
PP = 2
CLEAN_WAIT = 0.01  # a step is clean when each rank waited under 1% of it on the run queue


@dataclass(frozen=True)
class Model:
    hidden: int
    rows: int  # rows of one micro-batch
    blocks: int  # Linear+GELU blocks in the whole model
    head: int  # the head's width, in hidden sizes (the last stage's extra work)


@dataclass
class Case:
    schedule: str
    micro_batches: int
    steps: list[float] = field(default_factory=list)  # every step timed, seconds
    waits: list[float] = field(default_factory=list)  # the worse rank's wait share per step
    tries: int = 0

    @property
    def clean(self) -> list[float]:
        return [s for s, w in zip(self.steps, self.waits) if w < CLEAN_WAIT]


# -- the model, one module per virtual stage ---------------------------------------------


def stage_modules(model: Model, n_stages: int) -> list[Any]:
    """The model cut into `n_stages` virtual stages of equal block counts; the first
    stage's input and the last stage's head included. The same seed gives every plan the
    same weights."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    h = model.hidden

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(h, h)

        def forward(self, x: Any) -> Any:
            return nn.functional.gelu(self.linear(x))

    class Head(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.up = nn.Linear(h, model.head * h)
            self.down = nn.Linear(model.head * h, h)

        def forward(self, x: Any) -> Any:
            return self.down(nn.functional.gelu(self.up(x)))

    per = model.blocks // n_stages
    stages = [nn.Sequential(*(Block() for _ in range(per))) for _ in range(n_stages)]
    stages[-1].append(Head())
    return stages


def loss_fn(output: Any, target: Any) -> Any:
    import torch

    return torch.nn.functional.mse_loss(output, target)


def held(rank: int, n_stages: int, placement: str) -> list[int]:
    """The virtual stages a rank holds: loop (r, r + pp, ...) or V (r and 2pp-1-r)."""
    if placement == "v":
        return [rank, 2 * PP - 1 - rank]
    return list(range(rank, n_stages, PP))


# -- one rank -----------------------------------------------------------------------------


def schedstat_wait() -> float:
    """This thread's time waiting on a run queue so far, seconds (/proc/self/schedstat)."""
    with open("/proc/self/schedstat") as f:
        return int(f.read().split()[1]) / 1e9


def worker(rank: int, args: argparse.Namespace, port: int, out: Path) -> None:
    os.sched_setaffinity(0, {args.cores[rank]})  # before torch or gloo start a thread
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=PP)
    model = Model(args.hidden, args.rows, args.blocks, args.head)
    shapes = sorted({(cfg[3], cfg[2]) for name, cfg in SCHEDULES.items() if name in args.schedules})
    noise = {}
    for vpp, placement in shapes:
        noise[shape_name(vpp, placement)] = isolated(rank, model, vpp, placement, args, out)
        posts(rank, model, vpp, placement, args, out)
    (out / f"isolated-noise-rank{rank}.json").write_text(json.dumps(noise))
    cases = [Case(name, m) for name in args.schedules for m in args.micro_batches if runs(name, m)]
    for case in cases:
        real_steps(rank, model, case, args)
    (out / f"steps-rank{rank}.json").write_text(json.dumps([asdict(c) for c in cases]))
    dist.destroy_process_group()


def shape_name(vpp: int, placement: str) -> str:
    return f"pp{PP}-vpp{vpp}-{placement}"


def runs(name: str, m: int) -> bool:
    """Whether torch runs the schedule at m with pp 2 (DualPipeV needs m >= 2pp)."""
    if name == "dualpipev":
        return m >= 2 * PP
    if name in ("zb1p", "interleaved-zb", "interleaved-1f1b"):
        rounds = max(1, m // PP)
        return m % rounds == 0
    return True


def isolated(
    rank: int, model: Model, vpp: int, placement: str, args: argparse.Namespace, out: Path
) -> dict[str, Any]:
    """Time each stage this rank holds alone, under the profiler with torch's event names:
    one profile of F and B (what GPipe, 1F1B and interleaved 1F1B run), one of F, I and W
    (what the zero-bubble schedules run). A round whose calls waited 1% or more of their
    time on the run queue is run again, up to --tries times; the noise is returned."""
    import torch
    from torch.distributed.pipelining._backward import (
        stage_backward,
        stage_backward_input,
        stage_backward_weight,
    )
    from torch.profiler import ProfilerActivity, profile, record_function

    n = PP * vpp
    modules = stage_modules(model, n)
    mine = held(rank, n, placement)
    x0 = torch.randn(model.rows, model.hidden)
    target = torch.randn(model.rows, model.hidden)
    grads = torch.randn(model.rows, model.hidden)

    def forward(stage: int) -> tuple[Any, Any]:
        x = x0.detach().requires_grad_(stage > 0)
        y = modules[stage](x)
        return x, (loss_fn(y, target) if stage == n - 1 else y)

    def whole(stage: int, x: Any, y: Any) -> None:
        # As PipelineStage.backward_one_chunk calls it: the loss on the last stage, else
        # the output tuple and its gradients (parameters' gradients accumulate, as over
        # the micro-batches of a step).
        if stage == n - 1:
            stage_backward(y, None, [x])
        else:
            stage_backward((y,), (grads,), [x])

    def split(stage: int, mb: int, timed: Any) -> None:
        x, y = timed(f"PP:{stage}F{mb}", lambda: forward(stage))
        params = list(modules[stage].parameters())
        g = None if stage == n - 1 else (grads,)
        if stage == 0:  # torch computes no input gradient on the first stage...
            timed(f"PP:{stage}I{mb}", lambda: None)
            timed(f"PP:{stage}W{mb}", lambda: whole(stage, x, y))  # ...and all of it in W
            return
        _, groups = timed(
            f"PP:{stage}I{mb}", lambda: stage_backward_input((y,), g, [x], iter(params))
        )
        timed(f"PP:{stage}W{mb}", lambda: stage_backward_weight(iter(params), groups))

    def both(stage: int, mb: int, timed: Any) -> None:
        x, y = timed(f"PP:{stage}F{mb}", lambda: forward(stage))
        timed(f"PP:{stage}B{mb}", lambda: whole(stage, x, y))

    for stage in mine:  # warm up: allocator, kernels
        for mb in range(2):
            both(stage, mb, lambda name, call: call())
            split(stage, mb, lambda name, call: call())
    noise: dict[str, Any] = {}
    for mode, run in (("whole", both), ("split", split)):
        for attempt in range(args.tries):
            waits: list[float] = []

            def timed(name: str, call: Any, waits: list[float] = waits) -> Any:
                wait, began = schedstat_wait(), time.perf_counter()
                with record_function(name):
                    result = call()
                took = time.perf_counter() - began
                waits.append((schedstat_wait() - wait) / took if took > 1e-3 else 0.0)
                return result

            with profile(activities=[ProfilerActivity.CPU]) as prof:
                for mb in range(args.repeat):
                    for stage in mine:
                        run(stage, mb, timed)
            noisy = sum(w >= CLEAN_WAIT for w in waits)
            if noisy <= len(waits) // 10 or attempt == args.tries - 1:
                break
        prof.export_chrome_trace(
            str(out / f"isolated-{shape_name(vpp, placement)}-{mode}-rank{rank}.json")
        )
        noise[mode] = {
            "tries": attempt + 1,
            "noisy_calls": noisy,
            "calls": len(waits),
            "max_wait": max(waits),
        }
    return noise


def posts(
    rank: int, model: Model, vpp: int, placement: str, args: argparse.Namespace, out: Path
) -> None:
    """Time, alone, what the runtime posts around each action: every message between
    stages on different ranks (one micro-batch's activation forward, its gradient back),
    posted as `_PipelineScheduleRuntime` posts it (`_batch_p2p`) inside torch's event
    names: `PP:<stage>SEND_F<mb>` on the sender, `PP:<stage+1>RECV_F<mb>` on the receiver,
    and back with SEND_B and RECV_B. The transfer is waited for outside the events, and a
    barrier keeps each message alone."""
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining.schedules import _batch_p2p
    from torch.profiler import ProfilerActivity, profile, record_function

    n = PP * vpp
    owner = {s: r for r in range(PP) for s in held(r, n, placement)}
    messages = [(s, s + 1, "F") for s in range(n - 1) if owner[s] != owner[s + 1]]
    messages += [(s + 1, s, "B") for s in range(n - 1) if owner[s] != owner[s + 1]]
    payload = torch.randn(model.rows, model.hidden)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for mb in range(args.repeat):
            for source, target, kind in messages:
                dist.barrier()
                works: list[Any] = []
                if owner[source] == rank:
                    with record_function(f"PP:{source}SEND_{kind}{mb}"):
                        op = dist.P2POp(dist.isend, payload, 1 - rank)
                        works = _batch_p2p([op])
                elif owner[target] == rank:
                    landing = torch.empty_like(payload)
                    with record_function(f"PP:{target}RECV_{kind}{mb}"):
                        op = dist.P2POp(dist.irecv, landing, 1 - rank)
                        works = _batch_p2p([op])
                for work in works:
                    work.wait()
    prof.export_chrome_trace(str(out / f"posts-{shape_name(vpp, placement)}-rank{rank}.json"))


def real_steps(rank: int, model: Model, case: Case, args: argparse.Namespace) -> None:
    """Run the case's schedule: warm-up steps, then timed ones, each rank's run-queue wait
    beside its time; repeated while too few steps are clean on both ranks."""
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining import schedules as torch_schedules

    cls_name, _, placement, vpp = SCHEDULES[case.schedule]
    n = PP * vpp
    modules = stage_modules(model, n)
    stages = [
        PipelineStage(modules[s], s, n, torch.device("cpu"), group=dist.group.WORLD)
        for s in held(rank, n, placement)
    ]
    cls = getattr(torch_schedules, cls_name)
    multi = issubclass(cls, torch_schedules.PipelineScheduleMulti)  # ZB1P: a list of one
    schedule = cls(stages if multi else stages[0], case.micro_batches, loss_fn=loss_fn)
    batch = torch.randn(model.rows * case.micro_batches, model.hidden)
    target = torch.randn(model.rows * case.micro_batches, model.hidden)

    def step() -> tuple[float, float]:
        dist.barrier()
        wait, began = schedstat_wait(), time.perf_counter()
        kwargs: dict[str, Any] = {}
        if 0 in held(rank, n, placement):
            kwargs["x"] = batch
        if n - 1 in held(rank, n, placement):
            kwargs["target"] = target
        x = kwargs.pop("x", None)
        schedule.step(*(() if x is None else (x,)), **kwargs)
        took = time.perf_counter() - began
        waited = schedstat_wait() - wait
        for module in modules:
            for p in module.parameters():
                p.grad = None
        return took, waited

    for attempt in range(args.tries):
        for _ in range(args.warmup):
            step()
        timed = [step() for _ in range(args.steps)]
        gathered: list[Any] = [None] * PP
        dist.all_gather_object(gathered, timed)
        case.tries = attempt + 1
        for k in range(args.steps):
            took = max(gathered[r][k][0] for r in range(PP))
            case.steps.append(took)
            case.waits.append(max(gathered[r][k][1] / gathered[r][k][0] for r in range(PP)))
        if len(case.clean) >= args.min_clean:
            break


# -- the prediction and the table -----------------------------------------------------------


def merged_trace(out: Path, name: str) -> Path:
    """The ranks' isolated traces as one Chrome trace (each rank's events, one file): the
    stages' timings of one kind, and the runtime's posts."""
    events: list[Any] = []
    shape = name.rsplit("-", 1)[0]
    for rank in range(PP):
        for part in (f"isolated-{name}", f"posts-{shape}"):
            data = json.loads((out / f"{part}-rank{rank}.json").read_text())
            events += data["traceEvents"]
    path = out / f"isolated-{name}.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def trace_for(case: Case, out: Path) -> Path:
    """The isolated costs of what the case's schedule runs: F and B, or F, I and W."""
    _, _, placement, vpp = SCHEDULES[case.schedule]
    mode = "split" if case.schedule in SPLIT else "whole"
    return out / f"isolated-{shape_name(vpp, placement)}-{mode}.json"


def mean_stages(trace: Path) -> Path:
    """The trace's costs with every stage at the stages' mean (what one `--costs F,B,W` for
    every chunk can say), as a costs CSV beside it: what per-stage costs are worth."""
    from vppctl.planner import MeasuredCosts, read_costs

    costs = read_costs(str(trace))
    assert isinstance(costs, MeasuredCosts)
    timings = [costs.timings[s] for s in range(costs.stage_count)]
    n = len(timings)
    forward = sum(t.forward for t in timings) / n
    backward = sum(t.backward for t in timings) / n
    weight = sum(t.weight or 0 for t in timings) / n
    rows = [f"{s},{float(forward):.9f},{float(backward):.9f},{float(weight):.9f}" for s in range(n)]
    path = trace.with_name(trace.stem + "-mean.csv")
    path.write_text("stage,forward_s,backward_s,weight_s\n" + "\n".join(rows) + "\n")
    return path


def predict(trace: Path, case: Case, args: argparse.Namespace) -> float:
    """vppctl's predicted step for the case, from the trace (`simulate --costs-from`, as
    its library call): its makespan in seconds."""
    import vppctl

    _, schedule, placement, vpp = SCHEDULES[case.schedule]
    options = vppctl.SimulateOptions(
        micro_batches=case.micro_batches,
        plan=vppctl.PlanOptions(pp=PP, vpp=vpp, placement=placement),
        schedule=schedule,  # type: ignore[arg-type]
        p2p_cost=args.p2p_cost,
        costs_from=trace,
    )
    (result,) = vppctl.simulate_run(None, None, options).results
    return float(result.makespan)


def spread(values: Sequence[float]) -> float:
    return max(values) / min(values) - 1 if values else math.nan


def report(out: Path, args: argparse.Namespace) -> int:
    cases = [Case(**c) for c in json.loads((out / "steps-rank0.json").read_text())]
    for name in {
        trace_for(c, out).name.removeprefix("isolated-").removesuffix(".json") for c in cases
    }:
        merged_trace(out, name)
    noise = [json.loads((out / f"isolated-noise-rank{r}.json").read_text()) for r in range(PP)]
    print(f"load average before: {args.load_before}; after: {os.getloadavg()[0]:.2f}")
    for rank, shapes in enumerate(noise):
        for shape, modes in shapes.items():
            for mode, n in modes.items():
                if n["noisy_calls"] > n["calls"] // 10:
                    print(
                        f"isolated timings noisy: rank {rank}, {shape} {mode}: "
                        f"{n['noisy_calls']}/{n['calls']} calls waited >= 1% "
                        f"(max {n['max_wait']:.1%})"
                    )
    header = (
        "schedule            m  predicted  measured   error  spread  max wait  clean"
        "  mean-stage error  note"
    )
    print(header)
    print("-" * len(header))
    rows, errors, mean_errors = [], [], []
    for case in cases:
        clean = case.clean
        measured = statistics.median(clean or case.steps)
        predicted = predict(trace_for(case, out), case, args)
        error = predicted / measured - 1
        mean_error = predict(mean_stages(trace_for(case, out)), case, args) / measured - 1
        noisy = len(clean) < args.min_clean
        if not noisy:
            errors.append(abs(error))
            mean_errors.append(abs(mean_error))
        note = "noisy: too few clean steps" if noisy else ""
        rows.append(
            {
                "schedule": case.schedule,
                "micro_batches": case.micro_batches,
                "predicted_s": predicted,
                "measured_s": measured,
                "error": error,
                "mean_stage_error": mean_error,
                "spread": spread(clean),
                "max_wait": max(case.waits),
                "clean_steps": len(clean),
                "steps": len(case.steps),
                "noisy": noisy,
            }
        )
        print(
            f"{case.schedule:<18} {case.micro_batches:>2}  {predicted:>8.4f}s  {measured:>7.4f}s"
            f"  {error:>+6.1%}  {spread(clean):>6.1%}  {max(case.waits):>8.2%}"
            f"  {len(clean):>2}/{len(case.steps):<2}  {mean_error:>+16.1%}  {note}"
        )
    if errors:
        print(
            f"median |error| {statistics.median(errors):.1%}, max {max(errors):.1%} over "
            f"{len(errors)} clean cases (targets: median <= 5%, every case <= 10%); "
            f"with mean-stage costs median {statistics.median(mean_errors):.1%}, "
            f"max {max(mean_errors):.1%}"
        )
    else:
        print("no clean case: the machine was busy; run again when it is quiet")
    (out / "calibration.json").write_text(json.dumps(rows, indent=1))
    (out / "calibration.md").write_text(markdown(rows))
    print(f"the table for docs/performance.md: {out / 'calibration.md'}")
    return 0


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The table as docs/performance.md gives it."""
    lines = [
        "| schedule | m | predicted | measured | error | mean-stage error | clean steps "
        "| spread | max wait |",
        "| --- | --: | --: | --: | --: | --: | --: | --: | --: |",
    ]
    for r in rows:
        flag = " (noisy)" if r["noisy"] else ""
        lines.append(
            f"| {r['schedule']} | {r['micro_batches']} | {r['predicted_s'] * 1000:.0f} ms "
            f"| {r['measured_s'] * 1000:.0f} ms | {r['error']:+.1%}{flag} "
            f"| {r['mean_stage_error']:+.1%} | {r['clean_steps']}/{r['steps']} "
            f"| {r['spread']:.1%} | {r['max_wait']:.1%} |"
        )
    return "\n".join(lines).replace("nan%", "-") + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--schedules", default=",".join(SCHEDULES), help="comma-separated")
    parser.add_argument("--micro-batches", default="2,4,8", help="comma-separated m")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per case")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    parser.add_argument("--min-clean", type=int, default=3, help="clean steps a case needs")
    parser.add_argument("--tries", type=int, default=3, help="runs of a case at most")
    parser.add_argument("--repeat", type=int, default=9, help="isolated timings per stage")
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--rows", type=int, default=256, help="rows of a micro-batch")
    parser.add_argument("--blocks", type=int, default=8, help="Linear+GELU blocks in all")
    parser.add_argument("--head", type=int, default=1, help="the head's width / hidden")
    parser.add_argument("--cores", default="0,1", help="the two cores to pin the ranks to")
    parser.add_argument("--p2p-cost", type=float, default=0.0, help="seconds per hop")
    parser.add_argument("--out", type=Path, help="where traces and results go (default: tmp)")
    parser.add_argument("--quick", action="store_true", help="1f1b, interleaved-1f1b, zbv at m 4")
    parser.add_argument(
        "--report", type=Path, metavar="DIR", help="no runs: predict a previous run's DIR again"
    )
    args = parser.parse_args(argv)
    args.schedules = [s for s in args.schedules.split(",") if s]
    args.micro_batches = [int(m) for m in args.micro_batches.split(",")]
    args.cores = [int(c) for c in args.cores.split(",")]
    if args.quick:
        args.schedules, args.micro_batches = ["1f1b", "interleaved-1f1b", "zbv"], [4]
    unknown = set(args.schedules) - set(SCHEDULES)
    if unknown:
        parser.error(f"unknown schedules {sorted(unknown)}: choose from {', '.join(SCHEDULES)}")
    if len(os.sched_getaffinity(0)) < 2:
        parser.error("needs two cores (one per rank)")
    args.load_before = f"{os.getloadavg()[0]:.2f}"
    if args.report is None and os.getloadavg()[0] > 0.5:
        print(
            f"the machine is busy (load average {args.load_before}): expect noisy cases; "
            "the table counts only clean ones",
            file=sys.stderr,
        )
    if args.report is not None:
        return report(args.report, args)
    out = args.out or Path(tempfile.mkdtemp(prefix="vppctl-calibrate-"))
    out.mkdir(parents=True, exist_ok=True)
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    port = 29500 + os.getpid() % 1000
    procs = [ctx.Process(target=worker, args=(r, args, port, out)) for r in range(PP)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    if any(p.exitcode for p in procs):
        print("a rank failed", file=sys.stderr)
        return 1
    print(f"traces and results in {out}")
    return report(out, args)


if __name__ == "__main__":
    sys.exit(main())
