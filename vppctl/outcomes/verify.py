"""`verify`'s JSON that no report carries: the numbered rules (`verify --rules --json`).

A report's JSON is `VerifyReport.to_json()` (`vppctl.verify`): the verifier returns the
report below this layer, so it builds its own.
"""

from __future__ import annotations

from typing import Any

from vppctl.shapes import document
from vppctl.verify import PIR_RULES, RULES


def rules_json() -> dict[str, Any]:
    """The object `vppctl verify --rules --json` prints."""
    return document(
        "verify-rules",
        {
            "rules": [{"rule": rule, "checks": text} for rule, text in RULES.items()],
            "pir_rules": [{"rule": rule, "checks": text} for rule, text in PIR_RULES.items()],
        },
    )
