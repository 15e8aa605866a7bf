"""Paddle 3.3.1 builds under `vppctl.paddle.pir_plan`, and Paddle's own, compared: the child
process of tests/paddle/test_pir.py (Paddle's PIR mode; the bridge tests' process forces
the legacy IR).

    python tests/support/pir_plan_builds.py JOB.json OUT.json

A job names a case (tests/support/pir_programs.py's model builders; `CASES` below adds
the kinds the checked-in six lack), the rank to build for, the plan files to build with
(`vppctl convert` wrote them: a key per split) and what to do:

* each build runs the engine as `DistModel.train()` does (`Engine._build` under the AMP
  guard, `Engine._parallel_pir`), with Paddle's own completion (key "paddle") or under
  `pir_plan(PLAN)`, keeping the program right after the completion, the whole program
  before the partition pass (written as Paddle saves it, for `vppctl verify`) and, with
  `full`, the rank's job list and job programs after `pipeline_scheduler_VPP` (Paddle
  3.3.1 cannot serialize those: "chunk_id not supposed be serialized"; they are read
  here);
* `same`: keys whose programs must equal Paddle's own op for op (name, role, struct name,
  chunk, op mesh, op dist attr with every operand and result attr, value wiring, result
  dist attrs, every attribute but `op_callstack`), and byte for byte as serialized;
* `negative`: the refusals of `NEGATIVE`, on clones of the completion's input;
* `timing`: Paddle's completion and pir_plan's (with Paddle's split) on clones of one
  input, alternating, medians of `runs`.

Nothing runs a step: one CPU process builds one rank's programs (PADDLE_TRAINER_ID; the
parallel env Paddle caches is cleared before each build). `numpy2_shim` and
`middle_stage_loader_shim` answer two failures of Paddle 3.3.1 on this setup (docstrings).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import paths
from pir_programs import CASES as REFERENCE_CASES
from pir_programs import SEG_METHODS, Case, _amp_on_cpu, _job, _strategy

HERE = Path(__file__).resolve().parent

CASES: dict[str, Case] = {
    **REFERENCE_CASES,
    **{
        c.name: c
        for c in (
            # a heavy embedding and LM head (512 rows of 16) at pp 3
            Case("gpt_bigvocab_pp3", "gpt", 3, 2, 12, vocab=512, accumulate=6, batch=12),
            Case("gpt_dp2_pp2", "gpt", 2, 2, 8, dp=2, batch=8),  # a [dp 2] mesh a stage
            Case("llama_tp2_pp2_8l", "llama", 2, 2, 8, tp=2),
            Case("llama_rc_pp2_8l", "llama", 2, 2, 8, recompute=True),
            Case("llama_amp_pp4_12l", "llama", 4, 2, 12, amp=True, accumulate=4),
            Case("llama_32l_pp4", "llama", 4, 2, 32, accumulate=4),  # the largest: timing
            # Paddle's refusals, kept
            Case("gpt_stray_pp2", "gpt", 2, 2, 8, stray=True),
            Case("gpt_custom_pp2", "gpt", 2, 2, 8, stage_of=(0, 0, 1, 1, 0, 0, 1, 1)),
            Case("gpt_strided_pp2", "gpt", 2, 2, 8, dp=2, batch=8, strided=True),
        )
    },
}


def for_vpp(case: Case) -> Case:
    """The case as a VPP build needs it: at least pp micro-batches (Paddle's VPP job list
    asserts accumulate_steps >= pp, and pir_plan checks it first)."""
    acc = max(case.accumulate, case.pp)
    return dataclasses.replace(case, accumulate=acc, batch=max(case.batch, acc * case.dp))


# -- the parent's side ------------------------------------------------------------------------


def run(job: dict[str, Any], timeout: float = 1800) -> dict[str, Any]:
    """`job` in a child process (nice 15, Paddle's PIR mode, its log quiet); its result."""
    with tempfile.TemporaryDirectory(prefix="pir-plan-") as tmp:
        job_path, out_path = Path(tmp) / "job.json", Path(tmp) / "out.json"
        job_path.write_text(json.dumps(job))
        env = {**os.environ, "FLAGS_enable_pir_api": "1", "GLOG_minloglevel": "2"}
        env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
        command = ["nice", "-n", "15", sys.executable, str(HERE / "pir_plan_builds.py")]
        done = subprocess.run(
            [*command, str(job_path), str(out_path)],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0 or not out_path.exists():
            raise AssertionError(f"the build of {job['case']} failed:\n{done.stderr[-5000:]}")
        return json.loads(out_path.read_text())  # type: ignore[no-any-return]


def convert_plan(plain: Path, out: Path, *args: str) -> Path:
    """`vppctl convert PLAIN ARGS -o OUT` (a plan file), in a process of its own."""
    done = subprocess.run(
        [sys.executable, "-m", "vppctl", "convert", str(plain), *args, "-o", str(out), "-q"],
        capture_output=True,
        text=True,
        check=False,
        cwd=paths.ROOT,
    )
    if done.returncode != 0:
        raise AssertionError(f"vppctl convert {plain} {' '.join(args)}: {done.stderr}")
    return out


# -- building ---------------------------------------------------------------------------------


@dataclasses.dataclass
class Built:
    """What one build kept (Paddle objects, in this process)."""

    case: Case
    inputs: Any = None  # clones of the completion's (program, startup) and its strategy
    completed: Any = None  # the program right after the completion
    whole: Any = None  # the whole program before the partition pass
    engine: Any = None
    applied: Any = None  # pir_plan's record, under a plan


class _Stop(Exception):
    pass


def build(
    case: Case, plan: Any = None, *, rank: int = 0, full: bool = False, vpp: int | None = None
) -> Built:
    """`case` built for `rank`: Paddle's own VPP completion, or under `pir_plan(plan)`;
    to the partition pass, or (`full`) through `pipeline_scheduler_VPP`. `vpp` 1: the
    plain-PP program (schedule 1F1B), what `vppctl convert` reads."""
    import paddle
    import paddle.base.framework as framework
    import paddle.distributed.auto_parallel.interface as interface
    import paddle.distributed.parallel as parallel

    from vppctl.paddle import pir_plan

    os.environ["PADDLE_TRAINERS_NUM"] = str(case.world)
    os.environ["PADDLE_TRAINER_ID"] = str(rank)
    parallel._global_parallel_env = None  # read the rank again
    framework._name_struct = framework.NameStruct()  # layer paths from /Model/ again
    interface._g_recompute_idx = -1  # recompute segments numbered from 0, as in a fresh process
    paddle.disable_static()
    paddle.seed(1)
    built = Built(case)
    context = pir_plan(plan) if plan is not None else contextlib.nullcontext()
    with paddle.utils.unique_name.guard(), context as applied:
        built.applied = applied
        with _capture(built, full), numpy2_shim(), middle_stage_loader_shim():
            _run_engine(case, built, case.vpp if vpp is None else vpp)
    return built


def _run_engine(case: Case, built: Built, vpp: int) -> None:
    import paddle
    import paddle.distributed as dist

    model, loader, loss, optimizer = _job(case)
    strategy = _strategy(case, vpp)
    built.engine = engine = dist.to_static(
        model, loader, loss, optimizer, strategy=strategy
    )._engine
    amp = strategy.amp
    with contextlib.suppress(_Stop):
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


@contextlib.contextmanager
def _capture(built: Built, full: bool) -> Iterator[None]:
    """Around the engine's completion (whichever is bound: Paddle's, or pir_plan's) keep
    clones of its input and its result; at the partition pass, the whole program; then
    stop, or (`full`) go on."""
    import paddle.distributed.auto_parallel.static.engine as engine_module

    completion, partition = engine_module.complete_chunk_id, engine_module.apply_partition_pass

    def complete(program: Any, startup: Any, strategy: Any) -> None:
        built.inputs = (program.clone(), startup.clone(), strategy)
        completion(program, startup, strategy)
        built.completed = program.clone()

    def keep(program: Any, *args: Any) -> Any:
        built.whole = program.clone()
        if not full:
            raise _Stop
        return partition(program, *args)

    engine_module.complete_chunk_id, engine_module.apply_partition_pass = complete, keep
    try:
        yield
    finally:
        engine_module.complete_chunk_id, engine_module.apply_partition_pass = completion, partition


@contextlib.contextmanager
def numpy2_shim() -> Iterator[None]:
    """Paddle 3.3.1's `ProcessMesh.get_rank_by_dim_and_process_id`, which
    `dist.shard_dataloader` calls on a dp mesh, returns `int(np.where(mesh == id)[dim])`:
    int() of a one-element 1-D array, a TypeError on NumPy 2.x. While active, that one
    failure is answered with the element; NumPy 1.x never reaches it."""
    import numpy as np
    from paddle.distributed.auto_parallel.process_mesh import ProcessMesh

    real = ProcessMesh.get_rank_by_dim_and_process_id

    def rank(self: Any, dim: Any, process_id: int) -> int:
        try:
            return int(real(self, dim, process_id))
        except TypeError:
            name = self._dim_names[dim] if isinstance(dim, int) else dim
            return int(np.where(self._mesh == process_id)[self._dim_names.index(name)].item())

    ProcessMesh.get_rank_by_dim_and_process_id = rank
    try:
        yield
    finally:
        ProcessMesh.get_rank_by_dim_and_process_id = real


@contextlib.contextmanager
def middle_stage_loader_shim() -> Iterator[None]:
    """Paddle 3.3.1's `ShardDataloader.__init__`, on a rank in none of the inputs' meshes (a
    middle stage at pp >= 3) with `shard_dims=None`, raises TypeError (`to_list(None)[0]`).
    While active, such a rank takes the first input's mesh with no shard dim (its data
    loader unchanged); a rank in an input's mesh never reaches it."""
    from paddle.distributed.auto_parallel.api import ShardDataloader

    real = ShardDataloader._get_mesh_and_shard_dim

    def find(self: Any, process_id: int) -> Any:
        mesh, dim = real(self, process_id)
        if mesh is None and all(d is None for d in self._shard_dims):
            first = self._meshes[0]
            return (first[0] if isinstance(first, (list, tuple)) else first), None
        return mesh, dim

    ShardDataloader._get_mesh_and_shard_dim = find
    try:
        yield
    finally:
        ShardDataloader._get_mesh_and_shard_dim = real


# -- reading programs ------------------------------------------------------------------------


def serialize(program: Any) -> bytes:
    """The program as Paddle saves it (`serialize_pir_program`): what `vppctl verify` reads."""
    import paddle

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "p.json")
        paddle.base.core.serialize_pir_program(program, path)
        return Path(path).read_bytes()


def walk(program: Any) -> list[tuple[Any, ...]]:
    """Every op of the global block: name, role, struct name, chunk, op mesh, op dist attr
    (with its operand and result attrs), operand and result value numbers (in order of
    appearance), result dist attrs, every attribute but `op_callstack`."""
    ids: dict[Any, int] = {}

    def number(v: Any) -> int:
        return ids.setdefault(v.id, len(ids)) if v.initialized() else -1

    rows = []
    for op in program.global_block().ops:
        a, attrs = op.dist_attr, op.attrs()
        rows.append(
            (
                op.name(),
                attrs.get("op_role"),
                attrs.get("struct_name", "/"),
                None if a is None else a.chunk_id,
                None if a is None else str(a.process_mesh),
                None if a is None else str(a),
                tuple(number(v) for v in op.operands_source()),
                tuple(number(r) for r in op.results()),
                tuple(
                    str(r.dist_attr()) if r.initialized() and r.is_dist() else ""
                    for r in op.results()
                ),
                tuple(sorted((k, str(v)) for k, v in attrs.items() if k != "op_callstack")),
            )
        )
    return rows


def first_difference(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> str | None:
    """Where two walks first differ (None: op for op the same)."""
    if len(a) != len(b):
        return f"{len(a)} ops against {len(b)}"
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            f = next(j for j in range(len(x)) if x[j] != y[j])
            return f"op {i} ({x[0]}), field {f}: {x[f]!s:.300} / {y[f]!s:.300}"
    return None


def layer_places(program: Any, case: Case) -> dict[str, list[int]]:
    """Each layer's [stage, chunk], from its forward ops; raises if they disagree."""
    from paddle.distributed.auto_parallel.static.pir_pass import _extract_seg_method
    from paddle.distributed.auto_parallel.static.utils import get_pp_stage_by_process_mesh

    out: dict[str, list[int]] = {}
    for op in program.global_block().ops:
        name = _extract_seg_method(op, SEG_METHODS[case.model])
        if name is None or op.dist_attr is None or op.op_role != 0:
            continue
        place = [
            get_pp_stage_by_process_mesh(op.dist_attr.process_mesh, case.pp),
            op.dist_attr.chunk_id,
        ]
        if out.setdefault(name, place) != place:
            raise AssertionError(f"{name}: ops on {out[name]} and {place}")
    return out


_PACKING = {"builtin.combine", "builtin.split"}
_SKIPPED = {"builtin.parameter", "pd_op.data", "pd_op.full", "pd_op.full_int_array", *_PACKING}


def boundaries(program: Any, case: Case) -> dict[str, Any]:
    """Every forward or backward value read in another place (stage, chunk) than it is
    made, written with virtual stages (chunk * pp + stage): through a `dist_op.reshard`
    (its role, source and destinations, op-mesh size, chunk: -1 or set, source and
    destination dims mapping and partial status), or directly (no reshard between)."""
    from paddle.distributed.auto_parallel.static.utils import get_pp_stage_by_process_mesh

    def place(op: Any) -> tuple[Any, int] | None:
        a = op.dist_attr
        return (
            None
            if a is None
            else (get_pp_stage_by_process_mesh(a.process_mesh, case.pp), a.chunk_id)
        )

    def vs(p: Any) -> Any:
        return p if p is None or p[0] is None or p[1] < 0 else p[1] * case.pp + p[0]

    crossing, within, cross_chunk, cross_stage = [], Counter(), set(), []
    for op in program.global_block().ops:
        if op.op_role not in (0, 1) or op.dist_attr is None or op.name() in _SKIPPED:
            continue
        if op.name() == "dist_op.reshard":
            source = op.operand_source(0).get_defining_op()
            to = {place(u) for u in op.result(0).all_used_ops() if u.dist_attr is not None}
            a = op.dist_attr
            s, d = a.operand(0).as_tensor_dist_attr(), a.result(0).as_tensor_dist_attr()
            ends = (
                (tuple(s.dims_mapping), str(s.partial_status)),
                (tuple(d.dims_mapping), str(d.partial_status)),
            )
            src = place(source) if source is not None else None
            if src is None or any(p is None or p[0] != src[0] for p in to):
                chunk = a.chunk_id if a.chunk_id < 0 else "set"
                key = (
                    op.op_role,
                    vs(src),
                    tuple(sorted((vs(p) for p in to), key=str)),
                    len(a.process_mesh.process_ids),
                    chunk,
                    *ends,
                )
                crossing.append(repr(key))
            else:
                within[repr((op.op_role, *ends))] += 1
            continue
        here = place(op)
        for source in _sources(op):
            if source is None or source.dist_attr is None or source.name() in _SKIPPED:
                continue
            there = place(source)
            if source.name() == "dist_op.reshard" or there == here:
                continue
            seen = repr((op.op_role, op.name(), vs(here), source.name(), vs(there)))
            if here is not None and there is not None and here[0] == there[0]:
                cross_chunk.add(seen)
            else:
                cross_stage.append(seen)
    return {
        "crossing": sorted(crossing),
        "within": sorted(within.items()),
        "cross_chunk": sorted(cross_chunk),
        "cross_stage": cross_stage,
    }


def _sources(op: Any) -> list[Any]:
    """The ops making what `op` reads, through builtin.combine / builtin.split (packing)."""
    found: list[Any] = []
    stack = [v.get_defining_op() for v in op.operands_source() if v.initialized()]
    while stack:
        source = stack.pop()
        if source is not None and source.name() in _PACKING:
            stack += [v.get_defining_op() for v in source.operands_source() if v.initialized()]
        else:
            found.append(source)
    return found


def job_plan(engine: Any, case: Case) -> dict[str, Any]:
    """The rank's job list, and per job type its program: op count, a digest of its text,
    the layers its ops belong to (in order of first appearance), its sends and receives."""
    from paddle.distributed.auto_parallel.static.pir_pass import _extract_seg_method

    plan = engine._job_plan
    programs = {}
    for t in sorted(plan.job_types()):
        program = plan.ir_program(t)
        ops = program.global_block().ops
        layers: dict[str, None] = {}
        for op in ops:
            name = _extract_seg_method(op, SEG_METHODS[case.model])
            if name:
                layers.setdefault(name, None)
        programs[t] = {
            "ops": len(ops),
            "text": hashlib.sha256(str(program).encode()).hexdigest(),
            "layers": list(layers),
            "send": sum(op.name() in ("pd_op.send_v2", "pd_op.p_send") for op in ops),
            "recv": sum(op.name() in ("pd_op.recv_v2", "pd_op.p_recv") for op in ops),
        }
    return {"jobs": [[j.type(), j.micro_batch_id()] for j in plan.job_list()], "programs": programs}


# -- negative controls, on clones of the completion's input -----------------------------------


def negatives(paddle_built: Built, plan_path: str, out_dir: Path) -> list[dict[str, Any]]:
    """Each refusal of a plan that does not fit the program (the plan given is one that
    does): its error class and message, whether the program was left as it was, and
    whether Paddle's binding is back."""
    from vppctl.plan import PirPlan, read_pir_plan

    good = json.loads(Path(plan_path).read_text())
    plan = read_pir_plan(good, plan_path)
    names = list(plan.names)

    def edited(**changes: Any) -> PirPlan:
        return dataclasses.replace(plan, **changes)

    def moved(i: int, new: str) -> tuple[tuple[str, ...], ...]:
        flat = list(names)
        flat[i] = new
        it = iter(flat)
        return tuple(tuple(next(it) for _ in vs) for vs in plan.virtual_stages)

    swapped = list(names)
    swapped[4], swapped[5] = swapped[5], swapped[4]
    it = iter(swapped)
    swapped_stages = tuple(tuple(next(it) for _ in vs) for vs in plan.virtual_stages)
    counts = list(plan.layer_ops or ())
    counts[5] += 3
    twelve = tuple(names + [f"{names[0]}_{i}" for i in range(len(names), len(names) + 4)])
    strategy = paddle_built.inputs[2]
    cases: dict[str, tuple[Any, Any]] = {
        "unknown layer": (edited(virtual_stages=moved(5, names[5] + "0")), strategy),
        "swapped layers": (edited(virtual_stages=swapped_stages), strategy),
        "other layer sizes": (edited(layer_ops=tuple(counts)), strategy),
        "edited digest": (edited(digest="sha256:" + "0" * 64), strategy),
        "another program": (
            edited(
                virtual_stages=(twelve[:2], twelve[2:6], twelve[6:10], twelve[10:]),
                layer_ops=None,
                digest=None,
            ),
            strategy,
        ),
        "another seg method": (
            edited(seg_method="LlamaDecoderLayer", layer_ops=None, digest=None),
            strategy,
        ),
        "another pp": (
            edited(pp=4, virtual_stages=tuple((n,) for n in names), layer_ops=None, digest=None),
            strategy,
        ),
        "stage meshes": (
            edited(pp=4, virtual_stages=tuple((n,) for n in names), layer_ops=None, digest=None),
            _Strategy(strategy, pp_degree=4, accumulate_steps=4),
        ),
        "accumulate steps": (plan, _Strategy(strategy, accumulate_steps=1)),
    }
    found = []
    for name, (bad, strat) in cases.items():
        found.append({"name": name, **_refusal(paddle_built, bad, strat)})
    return found


class _Strategy:
    """A pipeline strategy as Paddle's completion reads it, with some fields changed."""

    def __init__(self, real: Any, **changes: Any) -> None:
        for field in (
            "enable",
            "pp_degree",
            "vpp_degree",
            "vpp_seg_method",
            "schedule_mode",
            "accumulate_steps",
        ):
            setattr(self, field, changes.get(field, getattr(real, field)))


def _refusal(paddle_built: Built, plan: Any, strategy: Any) -> dict[str, Any]:
    import paddle.distributed.auto_parallel.static.engine as engine_module
    import paddle.distributed.auto_parallel.static.pir_pass as pir_pass

    from vppctl.paddle import pir_plan

    program, startup = paddle_built.inputs[0].clone(), paddle_built.inputs[1].clone()
    before = serialize(program)
    error: BaseException | None = None
    try:
        with pir_plan(plan):
            engine_module.complete_chunk_id(program, startup, strategy)
    except Exception as e:
        error = e
    return {
        "error": None if error is None else type(error).__name__,
        "vppctl_error": error is not None and type(error).__module__.startswith("vppctl"),
        "message": str(error),
        "unchanged": serialize(program) == before,
        "restored": engine_module.complete_chunk_id is pir_pass.complete_chunk_id,
    }


def internals(plan_path: str) -> dict[str, Any]:
    """How pir_plan meets another Paddle: one warning per process for an untested release
    (three entries), a missing internal named, the binding restored after an exception
    in the body and after a refused nesting."""
    import warnings

    import paddle
    import paddle.distributed.auto_parallel.static.engine as engine_module
    import paddle.distributed.auto_parallel.static.pir_pass as pir_pass

    import vppctl.paddle.versions as versions
    from vppctl.paddle import pir_plan

    out: dict[str, Any] = {}
    real_version = paddle.__version__
    paddle.__version__ = "3.4.0"
    versions._warned.discard("3.4.0")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                with pir_plan(plan_path):
                    pass
        out["warnings"] = [f"{w.category.__name__}: {w.message}" for w in caught]
    finally:
        paddle.__version__ = real_version
    real = pir_pass._set_process_mesh_and_chunk_id
    del pir_pass._set_process_mesh_and_chunk_id
    try:
        with pir_plan(plan_path):
            out["missing"] = None
    except Exception as e:
        out["missing"] = f"{type(e).__name__}: {e}"
    finally:
        pir_pass._set_process_mesh_and_chunk_id = real
    try:
        with pir_plan(plan_path):
            out["bound_inside"] = engine_module.complete_chunk_id is not pir_pass.complete_chunk_id
            raise KeyError("the body's own error")
    except KeyError:
        out["restored_after_error"] = engine_module.complete_chunk_id is pir_pass.complete_chunk_id
    try:
        with pir_plan(plan_path), pir_plan(plan_path):
            pass
    except Exception as e:
        out["nested"] = f"{type(e).__name__}: {e}"
    out["restored_after_nesting"] = engine_module.complete_chunk_id is pir_pass.complete_chunk_id
    return out


# -- timing ------------------------------------------------------------------------------------


def timing(paddle_built: Built, plan_path: str, runs: int) -> dict[str, Any]:
    """Paddle's completion and pir_plan's with Paddle's split on clones of one input,
    alternating, in this process, Paddle's INFO log silenced (pir_plan logs nothing);
    medians in seconds, and whether each result equals Paddle's byte for byte."""
    import logging
    import statistics

    import paddle.distributed.auto_parallel.static.engine as engine_module
    import paddle.distributed.auto_parallel.static.pir_pass as pir_pass

    from vppctl.paddle import pir_plan

    program, startup, strategy = paddle_built.inputs
    times: dict[str, list[float]] = {"paddle": [], "pir_plan": []}
    same = True
    level = pir_pass._logger.level
    pir_pass._logger.setLevel(logging.WARNING)
    try:
        with pir_plan(plan_path):
            ours = engine_module.complete_chunk_id
            order = (("paddle", pir_pass.complete_chunk_id), ("pir_plan", ours))
            for i in range(runs):
                results = {}
                for key, complete in order if i % 2 == 0 else order[::-1]:
                    p, s = program.clone(), startup.clone()
                    t = time.perf_counter()
                    complete(p, s, strategy)
                    times[key].append(time.perf_counter() - t)
                    results[key] = p
                same = same and serialize(results["paddle"]) == serialize(results["pir_plan"])
    finally:
        pir_pass._logger.setLevel(level)
    medians = {k: statistics.median(v) for k, v in times.items()}
    return {
        "ops": len(program.global_block().ops),
        "runs": runs,
        "median": medians,
        "ratio": medians["pir_plan"] / medians["paddle"],
        "times": times,
        "same_result": same,
    }


# -- the child's side ------------------------------------------------------------------------


def describe(built: Built, case: Case, full: bool, out_dir: Path, key: str) -> dict[str, Any]:
    """What the parent checks of one build (the whole program written to OUT_DIR/KEY.json)."""
    path = out_dir / f"{key}.json"
    path.write_bytes(serialize(built.whole))
    result: dict[str, Any] = {
        "whole": str(path),
        "completed_layers": layer_places(built.completed, case),
        "whole_layers": layer_places(built.whole, case),
        "boundaries": boundaries(built.whole, case),
        "completed_ops": len(built.completed.global_block().ops),
        "whole_ops": len(built.whole.global_block().ops),
        "calls": None if built.applied is None else len(built.applied.calls),
    }
    if full:
        result["job_plan"] = job_plan(built.engine, case)
    return result


def main(job_path: str, out_path: str) -> None:
    job = json.loads(Path(job_path).read_text())
    case = for_vpp(CASES[job["case"]])
    out_dir = Path(job["out_dir"])
    out_dir.mkdir(parents=True, exist_ok=True)
    rank, full = job.get("rank", 0), job.get("full", False)
    result: dict[str, Any] = {"builds": {}, "same": {}, "plans": dict(job.get("plans", {}))}
    if job.get("splits"):
        plain = job.get("plain")
        if plain is None:  # built here: vppctl convert's input
            plain = str(out_dir / "plain.json")
            Path(plain).write_bytes(serialize(build(case, rank=rank, vpp=1).whole))
        for key, args in job["splits"].items():
            result["plans"][key] = str(
                convert_plan(Path(plain), out_dir / f"{key}.plan.json", *args)
            )
    kept: dict[str, Built] = {}
    for key, plan in {"paddle": None, **result["plans"]}.items():
        try:
            built = kept[key] = build(case, plan, rank=rank, full=full)
            result["builds"][key] = describe(built, case, full, out_dir, key)
        except Exception as e:
            import traceback

            result["builds"][key] = {
                "error": type(e).__name__,
                "message": str(e),
                "trace": traceback.format_exc(),
            }
    for key in job.get("same", []):
        if key in kept and "paddle" in kept:
            result["same"][key] = {
                what: {
                    "ops": len(walk(getattr(kept["paddle"], what))),
                    "difference": first_difference(
                        walk(getattr(kept["paddle"], what)), walk(getattr(kept[key], what))
                    ),
                    "bytes_equal": serialize(getattr(kept["paddle"], what))
                    == serialize(getattr(kept[key], what)),
                }
                for what in ("completed", "whole")
            }
    plans = result["plans"]  # the keys below name one of them
    if job.get("negative"):
        result["negative"] = negatives(kept["paddle"], plans[job["negative"]], out_dir)
    if job.get("internals"):
        result["internals"] = internals(plans[job["internals"]])
    if job.get("timing"):
        result["timing"] = timing(
            kept["paddle"], plans[job["timing"]["plan"]], job["timing"]["runs"]
        )
    Path(out_path).write_text(json.dumps(result, default=list))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
