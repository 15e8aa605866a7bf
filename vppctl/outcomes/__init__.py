"""Outcomes: what each command's library call returns, and its JSON.

Every outcome is a frozen dataclass of plain values whose `to_json()` returns exactly
the object the command's `--json` prints: the command line calls it, so there is one
builder per shape, and this package is where they live. `program` holds convert's,
dump's and sample's; `schedule` holds simulate's and plan's (they load on first use: a
plain `convert` never needs the simulator or the planner); `memory` the stage bytes
those three share; `verify` the rules (`verify --rules`). Three builders live below,
because the layers below build what they return: a `verify` report's
(`vppctl.verify.VerifyReport`, which convert's self-check returns too), `inspect`'s
(`vppctl.summary.Summary`), and the envelope and error object every shape shares
(`vppctl.shapes`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vppctl._lazy import face

_NAMES = {
    "ConvertOutcome": "program",
    "DumpOutcome": "program",
    "SampleOutcome": "program",
    "convert_json": "program",
    "moves_document": "program",
    "moves_json": "program",
    "vpp_verdict": "program",
    "Bubble": "schedule",
    "NoConversionFits": "schedule",
    "PlanOutcome": "schedule",
    "SimulateOutcome": "schedule",
    "SimulatedPlan": "schedule",
    "comparison_pair": "schedule",
    "conversion_split": "schedule",
    "plan_json": "schedule",
    "rules_json": "verify",
    "simulation_json": "schedule",
    "simulation_warnings": "schedule",
}
__all__ = [
    "Bubble",
    "ConvertOutcome",
    "DumpOutcome",
    "NoConversionFits",
    "PlanOutcome",
    "SampleOutcome",
    "SimulateOutcome",
    "SimulatedPlan",
    "comparison_pair",
    "conversion_split",
    "convert_json",
    "moves_document",
    "moves_json",
    "plan_json",
    "rules_json",
    "simulation_json",
    "simulation_warnings",
    "vpp_verdict",
]
__getattr__, __dir__ = face(__name__, _NAMES, globals())

if TYPE_CHECKING:
    from vppctl.outcomes.program import (
        ConvertOutcome,
        DumpOutcome,
        SampleOutcome,
        convert_json,
        moves_document,
        moves_json,
        vpp_verdict,
    )
    from vppctl.outcomes.schedule import (
        Bubble,
        NoConversionFits,
        PlanOutcome,
        SimulatedPlan,
        SimulateOutcome,
        comparison_pair,
        conversion_split,
        plan_json,
        simulation_json,
        simulation_warnings,
    )
    from vppctl.outcomes.verify import rules_json
