"""Expectation: what `vppctl verify` checks a program against, and the check itself.

The verifier's rules (`vppctl.verify.checks`) take an `Expectation`: stage and chunk
counts, placement, stage meshes and layers. For `verify` these come from the
options first, then from a PIR plan given (`--plan`: the file `convert` writes for a
PIR program), then from the plan the program records, then from the program
itself (its chunk ids, detected layers). Disagreements between those sources
are violations too (V012, V015), reported with the rest.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import ClassVar

from vppctl import validate
from vppctl.choices import PLACEMENTS
from vppctl.engine import (
    LayerSet,
    ProgramIndex,
    build_index,
    check_seg_method,
    cross_stage_edges,
    resolve_layers,
)
from vppctl.errors import ConversionError, UsageError
from vppctl.gcpause import gc_paused
from vppctl.plan import MAX_DEGREE, PirPlan, Placement
from vppctl.program import Program, RecordedPlan, read_pir_plan_file, read_plan
from vppctl.verify.checks import verify
from vppctl.verify.outcome import VerifyReport
from vppctl.verify.rules import Cause, Expectation, Violation


def _early(cause: Cause, message: str) -> Violation:
    return Violation(cause, -1, -1, "", message)


@dataclass(frozen=True)
class VerifyOptions:
    """What `verify` expects of a program; each None is the recorded plan's, else what the
    program holds (its stage meshes, its chunk ids, loop placement, the detected layer).
    Checked when made (UsageError, exit 2)."""

    pp: int | None = None
    vpp: int | None = None
    placement: Placement | None = None
    seg_method: str | None = None  # regex naming the repeated layer; None: detected
    # A PIR plan (a file `convert` wrote for a PIR program, or a PirPlan): the program is
    # checked against its pp, vpp, seg_method and each virtual stage's layers, its empty
    # first or last virtual stage included
    plan: str | os.PathLike[str] | PirPlan | None = None

    FLAGS: ClassVar[Mapping[str, str]] = {
        "pp": "--pp",
        "vpp": "--vpp",
        "placement": "--placement",
        "seg_method": "--seg-method",
        "plan": "--plan",
    }

    def __post_init__(self) -> None:
        validate.integer(self, "pp", 1, MAX_DEGREE, optional=True)
        validate.integer(self, "vpp", 1, MAX_DEGREE, optional=True)
        validate.choice(self, "placement", PLACEMENTS, optional=True)
        check_seg_method(self, "seg_method")
        if self.plan is not None and not isinstance(self.plan, (str, os.PathLike, PirPlan)):
            raise validate.refuse(
                self, "plan", "a path (str or os.PathLike), '-', a PirPlan or None"
            )


@validate.api_names(validate.flags_of((VerifyOptions, "VerifyOptions")))
@gc_paused
def verify_program(program: Program, options: VerifyOptions | None = None) -> VerifyReport:
    """Check an annotated program against every rule and return every violation found;
    expectations come from `options`, then the recorded plan. The program is not changed."""
    if options is None:
        options = VerifyOptions()
    elif not isinstance(options, VerifyOptions):
        raise UsageError(validate.wrong_options("verify_program", "VerifyOptions", options))
    pp, vpp, placement = options.pp, options.vpp, options.placement
    pir_plan = _pir_plan(options.plan)
    seg_method = options.seg_method or (pir_plan.seg_method if pir_plan else None)
    index = build_index(program)
    recorded = read_plan(program.header)
    stages, globals_ = index.stage_mesh_ids()
    early: list[Violation] = []
    n_pp = len(stages)
    for label, want in (
        ("--pp", pp),
        ("the PIR plan's pp", pir_plan and pir_plan.pp),
        ("the recorded plan's pp", recorded and recorded.pp),
    ):
        if want and want != n_pp:
            message = f"{label} is {want} but the program has {n_pp} stage meshes"
            early.append(_early(Cause.COUNT_MISMATCH, message))
    if recorded and not 1 <= recorded.vpp <= MAX_DEGREE:
        message = f"the recorded plan's vpp {recorded.vpp} is not a chunk count"
        early.append(_early(Cause.PLAN_CORRUPT, message))
        recorded = replace(recorded, vpp=0)
    planned_vpp = pir_plan.vpp if pir_plan else (recorded.vpp if recorded else 0)
    n_vpp = vpp or planned_vpp or _chunks_used(index)
    if planned_vpp and vpp and planned_vpp != vpp:
        said = "the PIR plan" if pir_plan else "the recorded plan"
        message = f"--vpp is {vpp} but {said} says {planned_vpp}"
        early.append(_early(Cause.COUNT_MISMATCH, message))
    where: Placement = placement or _recorded_placement(recorded)
    if pir_plan and where != "loop":
        message = f"--placement is {where} but a PIR plan is loop-placed (Paddle runs no other)"
        early.append(_early(Cause.PLAN_MISMATCH, message))
    layers, problem = _layers(index, seg_method, recorded)
    if problem:
        early.append(Violation(Cause.LAYERS_NOT_FOUND, 0, -1, "", problem))
    expect = Expectation(
        pp=max(n_pp, 1),
        vpp=max(n_vpp, 1),
        placement=where,
        stage_mesh_ids=tuple(stages),
        global_mesh_ids=tuple(globals_),
        layers=layers,
        plan_segments=pir_plan.segments if pir_plan else recorded.segments if recorded else None,
        recorded=recorded,
        pir=program.is_pir,
        empty_segments=frozenset(pir_plan.empty) if pir_plan else frozenset(),
    )
    violations = early + verify(index, expect)
    edges = None if violations else cross_stage_edges(index, stages)
    return VerifyReport(
        violations=tuple(violations),
        pp=n_pp,
        vpp=n_vpp,
        placement=where,
        layers=layers,
        cross_stage_edges=edges,
        recorded=recorded,
        pir=program.is_pir,
        source=program.source,
    )


def _pir_plan(plan: str | os.PathLike[str] | PirPlan | None) -> PirPlan | None:
    """The PIR plan given: as it is, or read from its file (ProgramFileError, exit 3)."""
    if plan is None or isinstance(plan, PirPlan):
        return plan
    return read_pir_plan_file(plan)


def _chunks_used(index: ProgramIndex) -> int:
    """vpp as the chunk ids imply; ids out of any sane range are left to V002 to report."""
    return 1 + max((c for b in index.blocks for c in b.ops.chunk if c < MAX_DEGREE), default=0)


def _recorded_placement(recorded: RecordedPlan | None) -> Placement:
    return "v" if recorded is not None and recorded.placement == "v" else "loop"


def _layers(
    index: ProgramIndex, seg_method: str | None, recorded: RecordedPlan | None
) -> tuple[LayerSet | None, str]:
    try:
        return resolve_layers(index, seg_method, recorded), ""
    except UsageError:  # the user's own regex: a usage error (exit 2)
        raise
    except ConversionError as e:
        return None, f"cannot find the layers: {e}"
