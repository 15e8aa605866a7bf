"""What `verify` found (`VerifyReport`) and its JSON, with the shapes `verify` and
`inspect` share (a layer set, a recorded plan).

These are the JSON builders that live below `vppctl.outcomes`: the verifier returns its
report from `verify_program` (convert's self-check included), and `inspect`'s summary
(`vppctl.summary`) is made below the outcomes too, so each builds its own `to_json()`."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from vppctl.engine import LayerSet
from vppctl.plan import Placement
from vppctl.program import RecordedPlan
from vppctl.shapes import document
from vppctl.verify.rules import RULES, Violation


@dataclass(frozen=True)
class VerifyReport:
    """Every violation found in a program, and what it was checked as."""

    violations: tuple[Violation, ...]
    pp: int
    vpp: int
    placement: Placement
    layers: LayerSet | None  # None when they could not be found
    cross_stage_edges: int | None  # for a valid program
    recorded: RecordedPlan | None  # the plan the program carries, if any
    pir: bool = False  # read from PIR: the rules of PIR_RULES apply in part
    source: str = "<memory>"  # the program's name, as reports show it
    chunk_ids: bool = False  # some op carries a chunk id past 0 (converted, or completed by Paddle)
    # The violations of rules not enforced (VerifyOptions.select, .ignore): counted in
    # every format, never failing the program; and the rules enforced.
    ignored: tuple[Violation, ...] = ()
    rules: tuple[str, ...] = tuple(RULES)

    @property
    def valid(self) -> bool:
        return not self.violations

    def to_json(self) -> dict[str, Any]:
        """The object `vppctl verify --json` prints."""
        return verify_json(self)


def statistics(report: VerifyReport) -> list[tuple[str, int]]:
    """(rule, violations) for each broken rule, the most violated first."""
    return _counts(report.violations)


def ignored_statistics(report: VerifyReport) -> list[tuple[str, int]]:
    """(rule, violations) for each rule broken but not enforced, the most violated first."""
    return _counts(report.ignored)


def _counts(violations: tuple[Violation, ...]) -> list[tuple[str, int]]:
    counts = Counter(v.rule for v in violations)
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def violation_json(v: Violation) -> dict[str, Any]:
    return {
        "rule": v.rule,
        "cause": v.cause.value,
        "block": v.block if v.block >= 0 else None,
        "op": v.op if v.op >= 0 else None,
        "type": v.type if v.op >= 0 and v.type else None,
        "message": v.message,
    }


def verify_json(report: VerifyReport) -> dict[str, Any]:
    return document(
        "verify",
        {
            "source": report.source,
            "valid": report.valid,
            "violations": [violation_json(v) for v in report.violations],
            "statistics": [{"rule": rule, "count": count} for rule, count in statistics(report)],
            "rules": list(report.rules),
            "ignored": [
                {"rule": rule, "count": count} for rule, count in ignored_statistics(report)
            ],
            "pp": report.pp,
            "vpp": report.vpp,
            "placement": report.placement,
            "layers": layers_json(report.layers),
            "cross_stage_edges": report.cross_stage_edges,
            "plan": recorded_plan_json(report.recorded),
            "pir": report.pir,
        },
    )


def layers_json(layers: LayerSet | None) -> dict[str, Any]:
    """The one shape of a layer set in every command's JSON."""
    if not layers:
        return {"count": 0, "class": None, "seg_method": None, "detected": False}
    return {
        "count": len(layers),
        "class": layers.layer_class,
        "seg_method": layers.seg_method,
        "detected": layers.detected,
    }


def recorded_plan_json(plan: RecordedPlan | None) -> dict[str, Any] | None:
    """The one shape of a recorded plan in `verify` and `inspect` JSON (null: none)."""
    if plan is None:
        return None
    return {
        "pp": plan.pp,
        "vpp": plan.vpp,
        "placement": plan.placement,
        "mode": plan.mode,
        "split": plan.split,
        "vppctl_version": plan.vppctl_version,
    }
