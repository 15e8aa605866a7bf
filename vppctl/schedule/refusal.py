"""Refusal: the error of a (schedule, counts) that a runtime, or the simulator, refuses.

Each check that refuses one names the fix in its message for a person, and a short
reason for `plan`, which leaves such candidates out and counts them by reason: the
reason is said once, where the rule is, and never read back from the message.
"""

from __future__ import annotations

from vppctl.errors import UsageError


class ScheduleRefused(UsageError):
    """A schedule asked to run counts its runtime refuses (as Paddle, Megatron-Core or
    torch would), or more than the simulator's bound (exit 2); the message names the fix.

    `reason` is a few words naming the rule, the same wherever the counts repeat (it
    holds no vpp or split), so that `plan` counts what it leaves out by it."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason
