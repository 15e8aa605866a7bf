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
from collections.abc import Mapping, Sequence
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
from vppctl.verify.rules import RULES, Cause, Expectation, Violation
from vppctl.verify.selection import enforced, selectors, unknown_selectors


def _early(cause: Cause, message: str) -> Violation:
    return Violation(cause, -1, -1, "", message)


@validate.named_fields
@dataclass(frozen=True)
class VerifyOptions:
    """What `verify` expects of a program; each None is the recorded plan's, else what the
    program holds (its stage meshes, its chunk ids, loop placement, the detected layer).
    Checked when made (UsageError, exit 2)."""

    pp: int | None = None
    vpp: int | None = None
    placement: Placement | None = None
    seg_method: str | None = None  # regex naming the repeated layer; None: detected
    # The rules enforced (vppctl.verify.selection): rule ids, prefixes or ALL, as a
    # sequence or a comma list ("V009,V011"); stored as a tuple, upper case. select None:
    # every rule. The violations of a rule not enforced are counted apart (`ignored`).
    select: Sequence[str] | None = None
    ignore: Sequence[str] = ()
    # A PIR plan (a file `convert` wrote for a PIR program, or a PirPlan): the program is
    # checked against its pp, vpp, seg_method and each virtual stage's layers, its empty
    # first or last virtual stage included
    plan: str | os.PathLike[str] | PirPlan | None = None

    FLAGS: ClassVar[Mapping[str, str]] = {
        "pp": "--pp",
        "vpp": "--vpp",
        "placement": "--placement",
        "seg_method": "--seg-method",
        "select": "--select",
        "ignore": "--ignore",
        "plan": "--plan",
    }

    def __post_init__(self) -> None:
        validate.integer(self, "pp", 1, MAX_DEGREE, optional=True)
        validate.integer(self, "vpp", 1, MAX_DEGREE, optional=True)
        validate.choice(self, "placement", PLACEMENTS, optional=True)
        check_seg_method(self, "seg_method")
        for field in ("select", "ignore"):
            value = getattr(self, field)
            if value is None and field == "select":
                continue
            codes = selectors(value)
            if codes is None:
                unknown = unknown_selectors(value)
                legal = (
                    f"rule ids ({', '.join((*RULES, 'ALL'))}) or their prefixes (V00), as a "
                    "sequence or a comma list"
                )
                raise validate.refuse(
                    self,
                    field,
                    legal + (f"; {', '.join(unknown)} names no rule" if unknown else ""),
                )
            object.__setattr__(self, field, codes)
        if self.plan is not None and not isinstance(self.plan, (str, os.PathLike, PirPlan)):
            raise validate.refuse(
                self, "plan", "a path (str or os.PathLike), '-', a PirPlan or None"
            )

    @property
    def enforced(self) -> tuple[str, ...]:
        """The rules these options enforce, in rule order."""
        return enforced(self.select, self.ignore)


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
    chunked = _chunks_used(index)
    if program.is_pir and chunked < 2:
        _one_chunk(index)
    planned_vpp = pir_plan.vpp if pir_plan else (recorded.vpp if recorded else 0)
    n_vpp = vpp or planned_vpp or max(chunked, 1)
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
    found = early + verify(index, expect)
    rules = options.enforced
    kept = set(rules)
    violations = [v for v in found if v.rule in kept]
    edges = None if violations else cross_stage_edges(index, stages)
    return VerifyReport(
        violations=tuple(violations),
        ignored=tuple(v for v in found if v.rule not in kept),
        rules=rules,
        pp=n_pp,
        vpp=n_vpp,
        placement=where,
        layers=layers,
        cross_stage_edges=edges,
        recorded=recorded,
        pir=program.is_pir,
        source=program.source,
        chunk_ids=chunked > 1,
    )


def _pir_plan(plan: str | os.PathLike[str] | PirPlan | None) -> PirPlan | None:
    """The PIR plan given: as it is, or read from its file (ProgramFileError, exit 3)."""
    if plan is None or isinstance(plan, PirPlan):
        return plan
    return read_pir_plan_file(plan)


def _chunks_used(index: ProgramIndex) -> int:
    """vpp as the chunk ids imply (0 when no op has one: a PIR program before Paddle's
    completion); ids out of any sane range are left to V002 to report."""
    return 1 + max((c for b in index.blocks for c in b.ops.chunk if c < MAX_DEGREE), default=-1)


def _one_chunk(index: ProgramIndex) -> None:
    """A PIR program whose ops carry no chunk id past 0 (Paddle's plain pipeline program,
    before its VPP completion gives them) is one chunk per stage: its ops are checked as
    chunk 0, as Paddle runs them. (The index is verify's own.)"""
    for block in index.blocks:
        chunks = block.ops.chunk
        for op in range(len(chunks)):
            chunks[op] = 0


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
