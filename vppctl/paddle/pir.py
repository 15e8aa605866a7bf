"""The PIR plan: Paddle's PIR VPP completion, taking each virtual stage's layers from a plan.

Paddle 3.x's auto-parallel engine (`Engine._parallel_pir`, schedule_mode "VPP") runs
`complete_chunk_id` on the forward program; it takes each stage's layers from the
stage meshes and deals them round-robin over the stage's chunks, so the chunks of one
stage differ by at most one layer. While `pir_plan(plan)` is active, the engine runs
the completion below instead: the same steps, with Paddle's own helpers, but the layers
of virtual stage k (chunk k // pp of stage k % pp) are the plan's. Every layer, and the
ops Paddle groups with it, goes to the plan's stage mesh and chunk, and the reshards at
the new boundaries are fixed as Paddle fixes them; everything downstream (backward,
optimizer, partition, reshard, gradient merge, `pipeline_scheduler_VPP`) is Paddle's
own and reads no split.

    with vppctl.paddle.pir_plan("plan.json"):   # vppctl convert prog.json --vpp 2 -o plan.json
        dist_model.train()                      # the engine builds the train program here

Before changing anything the completion checks that the program is the one planned: the
strategy's pp_degree, vpp_degree and vpp_seg_method, the stage meshes (pp of them, each
its stage's rank block), each layer's name, in order, and (a plan file) its forward op
count and the digest; the first difference is raised as a `PlanMismatchError`. Paddle's
own refusals stay (an op between the layers that is no reshard, accumulate_steps < pp),
and a program whose layers sit on decreasing stages (custom meshes, which Paddle's
completion keeps) is refused.

The Paddle internals touched are `INTERNALS` (all under
paddle.distributed.auto_parallel.static; docs/paddle.md lists them): each is looked up
when `pir_plan` is entered, and a missing one raises `PaddleInternalMissingError` naming
it. Tested with Paddle `PIR_PLAN_TESTED` (the CPU wheel); another release gets one
warning per process.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vppctl.paddle.errors import PaddleInternalMissingError, PirPlanError, PlanMismatchError
from vppctl.paddle.versions import import_paddle, warn_untested
from vppctl.plan import UNCOUNTED_OPS, PirPlan, program_digest, read_pir_plan
from vppctl.program import read_pir_plan_file

_S = "paddle.distributed.auto_parallel.static"
# Every Paddle internal pir_plan touches: short name -> (module, attribute path).
INTERNALS: dict[str, tuple[str, str]] = {
    "engine": (f"{_S}.engine", "complete_chunk_id"),
    "extract": (f"{_S}.pir_pass", "_extract_seg_method"),
    "seg_names": (f"{_S}.pir_pass", "_get_seg_struct_names"),
    "set_mesh_chunk": (f"{_S}.pir_pass", "_set_process_mesh_and_chunk_id"),
    "partition": (f"{_S}.pir_pass", "apply_partition_pass"),
    "fold": (f"{_S}.pir_pass", "ReshardPasses.fold_reshard_pass"),
    "stage_meshes": (f"{_S}.utils", "get_sub_process_mesh_by_program"),
    "stage_of_mesh": (f"{_S}.utils", "get_pp_stage_by_process_mesh"),
    "choose": (f"{_S}.reshard_funcs.base_reshard_func", "choose_reshard_func"),
    "copy_attr": (f"{_S}.reshard_funcs.base_reshard_func", "copy_dist_attr_with_new_member"),
    "copy_op_attr": (f"{_S}.reshard_funcs.base_reshard_func", "copy_op_attr_with_new_member"),
    "copy_mesh": (f"{_S}.reshard_funcs.base_reshard_func", "copy_process_mesh_with_new_member"),
}
# The reshard functions `choose_reshard_func` returns that a stage boundary may hold, by the
# class name Paddle gives them (its completion matches them so too).
RESHARD_KINDS = (
    "SameStatusReshardFunction",
    "NdMeshReshardFunction",
    "GlobalToSubMeshFunction",
    "NdMeshReshardFunctionCrossMesh",
)


@dataclass(frozen=True)
class Completed:
    """What one completion under the plan did."""

    layers: int  # the program's layers
    moved: int  # layers now on another stage than the program put them
    per_virtual_stage: tuple[int, ...]  # layers of each virtual stage


@dataclass
class Applied:
    """What `pir_plan` did while it was active: one entry per completion Paddle ran."""

    calls: list[Completed] = field(default_factory=list)


_active = False


@contextlib.contextmanager
def pir_plan(plan: PirPlan | str | os.PathLike[str] | Mapping[str, Any]) -> Iterator[Applied]:
    """While active, Paddle's PIR VPP completion places each layer as `plan` says.

    `plan` is a `PirPlan`, a plan file (`vppctl convert PROG.json ... -o PLAN.json`) or its
    object (a file or object that is no plan: ProgramFileError, naming why). Paddle's
    binding is restored on exit, exceptions included; nesting is refused. From inside
    Paddle's build it raises `PlanMismatchError` for a program that is not the one
    planned and `PirPlanError` for one Paddle's completion cannot take as planned (both
    `VppctlError`s, reaching the caller of `DistModel.train()` unchanged);
    `PaddleInternalMissingError` names an internal the installed Paddle lacks."""
    global _active
    planned = _plan_of(plan)
    internals = _internals()
    engine: Any = importlib.import_module(INTERNALS["engine"][0])
    if _active:
        raise PirPlanError("pir_plan is already active: leave it before entering it again")
    applied = Applied()

    def complete(program: Any, startup: Any, strategy: Any) -> None:
        applied.calls.append(_complete(internals, planned, program, startup, strategy))

    original = engine.complete_chunk_id
    engine.complete_chunk_id = complete
    _active = True
    try:
        yield applied
    finally:
        engine.complete_chunk_id = original
        _active = False


def _plan_of(plan: PirPlan | str | os.PathLike[str] | Mapping[str, Any]) -> PirPlan:
    if isinstance(plan, PirPlan):
        return plan
    if isinstance(plan, (str, os.PathLike)):
        return read_pir_plan_file(plan)
    if isinstance(plan, Mapping):
        return read_pir_plan(plan, "the plan given")
    raise PirPlanError(
        f"pir_plan takes a PirPlan, a plan file or its object, not {type(plan).__name__}"
    )


def _internals() -> dict[str, Any]:
    """Every internal of INTERNALS, looked up now (a missing one is named)."""
    paddle = import_paddle()
    version = str(getattr(paddle, "__version__", "?"))
    warn_untested(version)
    found: dict[str, Any] = {}
    for key, (module, path) in INTERNALS.items():
        try:
            obj: Any = importlib.import_module(module)
            for part in path.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError):
            raise PaddleInternalMissingError(
                f"pir_plan needs {module}.{path}, which Paddle {version} lacks"
            ) from None
        found[key] = obj
    return found


# -- the completion -------------------------------------------------------------------------


def _complete(
    P: dict[str, Any], plan: PirPlan, program: Any, startup: Any, strategy: Any
) -> Completed:
    """Paddle's `complete_chunk_id`, with the plan's layers per virtual stage; everything is
    checked before anything is changed."""
    _check_strategy(plan, strategy)
    meshes = _stage_meshes(P, program, plan.pp)
    ops = program.global_block().ops
    try:
        names = P["seg_names"](ops, plan.seg_method)  # Paddle's refusal of a stray op stays
    except (ValueError, AssertionError) as e:
        raise PirPlanError(f"Paddle's completion refuses the program: {e}") from e
    counts = dict.fromkeys(names, 0)
    for op in ops:
        name = P["extract"](op, plan.seg_method)
        if name is not None and op.name() not in UNCOUNTED_OPS:
            counts[name] = counts.get(name, 0) + 1
    _check_layers(names, [counts[n] for n in names], plan)
    stage_of = _layer_stages(P, ops, plan.seg_method, names, plan.pp)

    P["fold"](program)
    ops = program.global_block().ops
    begins = _ranges(P, ops, plan)
    reshards: list[Any] = []
    for k in range(plan.pp * plan.vpp):
        _place(P, ops, begins[k], begins[k + 1], meshes[k % plan.pp], k // plan.pp, plan, reshards)
    for op in reshards:
        _fix_reshard(P, op)
    P["partition"](program)  # reshards where a layer's operand now lives elsewhere
    for op in startup.global_block().ops:
        if op.name() == "builtin.set_parameter":
            param = program.get_parameter_value_by_name(op.str_attr("parameter_name"))
            if param.dist_attr():
                op.operand_source(0).update_dist_attr(param.dist_attr())
    P["fold"](program)
    return Completed(
        layers=len(names),
        moved=sum(
            stage_of[n] != k % plan.pp for k, vs in enumerate(plan.virtual_stages) for n in vs
        ),
        per_virtual_stage=tuple(len(vs) for vs in plan.virtual_stages),
    )


def _check_strategy(plan: PirPlan, strategy: Any) -> None:
    """The pipeline strategy against the plan, and Paddle's own preconditions."""
    for what, ours, theirs in (
        ("pp_degree", strategy.pp_degree, plan.pp),
        ("vpp_degree", strategy.vpp_degree, plan.vpp),
        ("vpp_seg_method", strategy.vpp_seg_method, plan.seg_method),
    ):
        if ours != theirs:
            raise PlanMismatchError(
                f"strategy.pipeline.{what} is {ours!r}, but the plan's is {theirs!r}: set it "
                "to the plan's, or make the plan for this strategy"
            )
    if not strategy.enable or strategy.schedule_mode != "VPP":
        raise PirPlanError(
            f"strategy.pipeline.enable is {strategy.enable!r} and schedule_mode "
            f"{strategy.schedule_mode!r}: Paddle's VPP completion runs with the pipeline "
            "enabled and schedule_mode 'VPP'"
        )
    if strategy.accumulate_steps < plan.pp:  # Paddle's VPP job list asserts the same, later
        raise PirPlanError(
            f"strategy.pipeline.accumulate_steps {strategy.accumulate_steps} < pp {plan.pp}: "
            "Paddle's VPP schedule needs at least pp micro-batches"
        )


def _stage_meshes(P: dict[str, Any], program: Any, pp: int) -> list[Any]:
    """The stage meshes, as Paddle finds them: pp of them, stage s's its rank block."""
    meshes = list(P["stage_meshes"](program))
    if len(meshes) != pp:
        raise PlanMismatchError(
            f"the program has {len(meshes)} stage meshes, the plan pp {pp}: it is not the "
            "program the plan was made for"
        )
    for s, mesh in enumerate(meshes):
        if P["stage_of_mesh"](mesh, pp) != s:
            raise PirPlanError(
                f"stage mesh {s} (ranks {list(mesh.process_ids)}) is not the rank block of stage "
                f"{s} of {pp} (Paddle reads a rank's stage as rank // (world / pp)); give "
                "stage s the ranks [s*w, (s+1)*w) with w = world / pp"
            )
    return meshes


def _check_layers(names: Sequence[str], counts: Sequence[int], plan: PirPlan) -> None:
    """The program's layers (names in order, forward op counts) against the plan's; the
    first difference is named."""
    planned = plan.names
    known = set(names)
    for i, (ours, theirs) in enumerate(zip(names, planned)):
        if ours != theirs:
            why = "" if theirs in known else f" ({theirs} is no layer of the program)"
            raise PlanMismatchError(
                f"layer {i} is {ours} in the program but {theirs} in the plan{why}"
            )
    if len(names) != len(planned):
        i = min(len(names), len(planned))
        head = f"the program has {len(names)} layers, the plan {len(planned)}: "
        if len(names) > len(planned):
            raise PlanMismatchError(
                head + f"layer {i} is {names[i]} in the program and missing from the plan"
            )
        raise PlanMismatchError(
            head + f"layer {i} is {planned[i]} in the plan and missing from the program"
        )
    for name, ours_n, theirs_n in zip(names, counts, plan.layer_ops or ()):
        if ours_n != theirs_n:
            raise PlanMismatchError(
                f"layer {name} has {ours_n} forward ops in the program but {theirs_n} in the "
                "program the plan was made for"
            )
    # Names and counts agree: a digest that differs was edited itself. Checked last, so
    # that a layer edited by hand is named above rather than refused by its checksum.
    if plan.digest is not None and plan.layer_ops is not None:
        digest = program_digest(plan.seg_method, names, counts)
        if digest != plan.digest:
            raise PlanMismatchError(
                f"the plan names the program digest {plan.digest}, but this program's layers "
                f"and op counts, the same as the plan's, give {digest}: the digest was edited"
            )


def _layer_stages(
    P: dict[str, Any], ops: Any, method: str, names: Sequence[str], pp: int
) -> dict[str, int]:
    """Each layer's stage in the program; layers on decreasing stages (custom meshes,
    which Paddle's completion keeps as they are) are refused."""
    stage: dict[str, int] = {}
    for op in ops:
        name = P["extract"](op, method)
        if name is None or name in stage or op.dist_attr is None:
            continue
        s = P["stage_of_mesh"](op.dist_attr.process_mesh, pp)
        if s is not None:
            stage[name] = s
    previous: tuple[str, int] | None = None
    for name in names:
        s = stage.get(name)
        if s is None:
            raise PirPlanError(f"layer {name} is on no single stage's mesh")
        if previous is not None and s < previous[1]:
            raise PirPlanError(
                f"layer {name} is on stage {s} after {previous[0]} on stage {previous[1]}: the "
                "program places its layers on custom meshes, which Paddle's completion keeps; "
                "pir_plan places the layers of a plain-PP program"
            )
        previous = (name, s)
    return stage


def _ranges(P: dict[str, Any], ops: Any, plan: PirPlan) -> list[int]:
    """Where each virtual stage's ops begin (and, last, the end): virtual stage 0 at op 0,
    any other at its first layer's first op, an empty last one right after the last
    layer's last op (it holds what follows: the norm, the head, the loss)."""
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for i, op in enumerate(ops):
        name = P["extract"](op, plan.seg_method)
        if name is not None:
            first.setdefault(name, i)
            last[name] = i
    n = plan.pp * plan.vpp
    begins = [0] * (n + 1)
    begins[n] = len(ops)
    for k in range(1, n):
        layers = plan.virtual_stages[k]
        begins[k] = first[layers[0]] if layers else last[plan.virtual_stages[k - 1][-1]] + 1
    return begins


def _place(
    P: dict[str, Any],
    ops: Any,
    begin: int,
    end: int,
    mesh: Any,
    chunk: int,
    plan: PirPlan,
    reshards: list[Any],
) -> None:
    """Paddle's step for one virtual stage's ops: a layer op and its values move to the
    stage mesh, every op gets the chunk; a local region (`dtensor_to_local` ..
    `dtensor_from_local`) gets the chunk inside and the mesh on its ends; reshards are
    set aside for `_fix_reshard`."""
    i = begin
    while i < end:
        op = ops[i]
        layer_op = P["extract"](op, plan.seg_method) is not None
        kind = op.name()
        if kind == "dist_op.reshard":
            reshards.append(op)
        elif kind == "dist_op.dtensor_to_local":
            P["set_mesh_chunk"](op, mesh, chunk, set_input_mesh=layer_op)
            j = i + 1
            while ops[j].name() != "dist_op.dtensor_from_local":
                ops[j].set_int_attr("chunk_id", chunk)
                j += 1
            P["set_mesh_chunk"](ops[j], mesh, chunk, set_output_mesh=layer_op)
            i = j
        else:
            P["set_mesh_chunk"](op, mesh, chunk, set_input_mesh=layer_op, set_output_mesh=layer_op)
        i += 1


def _fix_reshard(P: dict[str, Any], op: Any) -> None:
    """A reshard whose ends moved: dropped if it now moves nothing, else given the meshes of
    the values it now connects, by the kind of reshard Paddle picks for it."""
    source, result = op.operand_source(0), op.result(0)
    attr = op.dist_attr
    src, dst = attr.operand(0).as_tensor_dist_attr(), attr.result(0).as_tensor_dist_attr()
    kind = RESHARD_KINDS[0] if src == dst else type(P["choose"](src, dst)).__name__
    copy_attr, copy_op_attr = P["copy_attr"], P["copy_op_attr"]
    if kind == "SameStatusReshardFunction":
        result.replace_all_uses_with(source)
        op.erase()
    elif kind == "NdMeshReshardFunction":  # within one mesh: onto the source's mesh
        mesh = source.dist_attr().process_mesh
        op.dist_attr = copy_op_attr(
            attr,
            new_operands=[copy_attr(src, new_process_mesh=mesh)],
            new_results=[copy_attr(dst, new_process_mesh=mesh)],
            new_process_mesh=mesh,
        )
    elif kind == "GlobalToSubMeshFunction":
        mesh = result.dist_attr().process_mesh
        op.dist_attr = copy_op_attr(attr, new_results=[copy_attr(dst, new_process_mesh=mesh)])
    elif kind == "NdMeshReshardFunctionCrossMesh":  # between stages: both ends, their union
        a, b = source.dist_attr().process_mesh, result.dist_attr().process_mesh
        union = P["copy_mesh"](attr.process_mesh, new_process_ids=a.process_ids + b.process_ids)
        op.dist_attr = copy_op_attr(
            attr,
            new_operands=[copy_attr(src, new_process_mesh=a)],
            new_results=[copy_attr(dst, new_process_mesh=b)],
            new_process_mesh=union,
        )
    else:  # as Paddle's completion: a boundary holds none of the other kinds
        raise PirPlanError(
            f"a reshard of kind {kind} at a stage boundary, which Paddle's completion does not "
            f"take either ({', '.join(RESHARD_KINDS)} only): {attr}"
        )
