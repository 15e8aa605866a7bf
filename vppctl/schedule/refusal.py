"""Refusal: the error of a (schedule, counts) that a runtime, or the simulator, refuses.

Each check that refuses one names the fix in its message for a person, and a short
reason for `plan`, which leaves such candidates out and counts them by reason: the
reason is said once, where the rule is, and never read back from the message.
"""

from __future__ import annotations

from vppctl.errors import UsageError


class Refused(UsageError):
    """Counts a runtime (or the simulator's bound) refuses for a schedule (exit 2).

    ``reason`` is a few words naming the rule, the same wherever the counts repeat (it
    holds no vpp or split), so that a search can count what it left out by it."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason
