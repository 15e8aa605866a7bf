"""Verify: an annotated VPP program checked against numbered rules, every violation kept.

`rules` holds the rules and the records a check returns (data only), `checks`
the checks (`segments` those of the layers and the recorded plan, `checker` what
they share while they run), `expectation` what `vppctl verify` checks a program
against (the options, the recorded plan, the program), `outcome` what it found and its
JSON, `selection` which rules it enforces (--select, --ignore), and `refusals`
which violations of a converted program its input caused. The
checks read the engine's facts about the program (index, data flow, layers), never its
decisions.
"""

from vppctl.verify.checker import executed_blocks
from vppctl.verify.checks import verify
from vppctl.verify.expectation import VerifyOptions, verify_program
from vppctl.verify.outcome import (
    VerifyReport,
    ignored_statistics,
    layers_json,
    recorded_plan_json,
    statistics,
    verify_json,
)
from vppctl.verify.refusals import refuse_input_problems
from vppctl.verify.rules import PIR_RULES, RULES, Cause, Expectation, Violation

__all__ = [
    "PIR_RULES",
    "RULES",
    "Cause",
    "Expectation",
    "VerifyOptions",
    "VerifyReport",
    "Violation",
    "executed_blocks",
    "ignored_statistics",
    "layers_json",
    "recorded_plan_json",
    "refuse_input_problems",
    "statistics",
    "verify",
    "verify_json",
    "verify_program",
]
