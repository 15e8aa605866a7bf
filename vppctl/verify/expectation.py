"""Expectation: what `vppctl verify` checks a program against, and the check itself.

The verifier's rules (`vppctl.verify.checks`) take an `Expectation`: stage and chunk
counts, placement, stage meshes and layers. For `verify` these come from the
options first, then from the plan the program records, then from the program
itself (its chunk ids, detected layers). Disagreements between those sources
are violations too (V012, V015), reported with the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from vppctl.engine import LayerSet, ProgramIndex, build_index, cross_stage_edges, resolve_layers
from vppctl.errors import ConversionError, UsageError
from vppctl.gcpause import gc_paused
from vppctl.plan import MAX_DEGREE, Placement
from vppctl.program import Program, RecordedPlan, read_plan
from vppctl.verify.checks import verify
from vppctl.verify.rules import Cause, Expectation, Violation


@dataclass(frozen=True)
class VerifyReport:
    violations: tuple[Violation, ...]
    pp: int
    vpp: int
    placement: Placement
    layers: LayerSet | None  # None when they could not be found
    cross_stage_edges: int | None  # for a valid program
    recorded: RecordedPlan | None  # the plan the program carries, if any
    pir: bool = False  # read from PIR: the rules of PIR_RULES apply in part
    source: str = "<memory>"  # the program's name, as reports show it

    @property
    def valid(self) -> bool:
        return not self.violations


def _early(cause: Cause, message: str) -> Violation:
    return Violation(cause, -1, -1, "", message)


@gc_paused
def verify_program(
    program: Program,
    *,
    pp: int | None = None,
    vpp: int | None = None,
    seg_method: str | None = None,
    placement: Placement | None = None,
) -> VerifyReport:
    """Check an annotated program; expectations come from the options, then the recorded plan."""
    index = build_index(program)
    recorded = read_plan(program.header)
    stages, globals_ = index.stage_mesh_ids()
    early: list[Violation] = []
    n_pp = len(stages)
    for label, want in (("--pp", pp), ("the recorded plan's pp", recorded and recorded.pp)):
        if want and want != n_pp:
            message = f"{label} is {want} but the program has {n_pp} stage meshes"
            early.append(_early(Cause.COUNT_MISMATCH, message))
    if recorded and not 1 <= recorded.vpp <= MAX_DEGREE:
        message = f"the recorded plan's vpp {recorded.vpp} is not a chunk count"
        early.append(_early(Cause.PLAN_CORRUPT, message))
        recorded = replace(recorded, vpp=0)
    n_vpp = vpp or (recorded.vpp if recorded else 0) or _chunks_used(index)
    if recorded and recorded.vpp and vpp and recorded.vpp != vpp:
        message = f"--vpp is {vpp} but the recorded plan says {recorded.vpp}"
        early.append(_early(Cause.COUNT_MISMATCH, message))
    where: Placement = placement or _recorded_placement(recorded)
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
        plan_segments=recorded.segments if recorded else None,
        recorded=recorded,
        pir=program.is_pir,
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
