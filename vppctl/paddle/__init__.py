"""The Paddle bridge: vppctl inside PaddlePaddle's own builds (the `paddle` extra).

One module per job, behind this face: `legacy` exports a legacy static program
(`ProgramDesc`) with its auto-parallel annotations and applies a converted one back onto
Paddle's `DistributedContext`; `pir` runs Paddle 3.x's PIR VPP completion with a
vppctl plan (`pir_plan`); `versions` says which Paddle is at hand and which Paddle runs
what vppctl writes; `errors` holds what the bridge raises. Paddle itself is imported
only when a call needs it, so vppctl works without it.

Other packages import these names from here, never a module of this package.
"""

from vppctl.paddle.errors import (
    AnnotationError,
    PaddleBridgeError,
    PaddleInternalMissingError,
    PaddleUnavailableError,
    PirPlanError,
    PlanMismatchError,
    ProgramMismatchError,
    ScheduleUnsupportedError,
)
from vppctl.paddle.legacy import apply_annotations, export_program
from vppctl.paddle.pir import INTERNALS, Applied, Completed, pir_plan
from vppctl.paddle.versions import PIR_PLAN_TESTED, UntestedPaddleWarning, check_legacy_schedule
from vppctl.plan import PirPlan
from vppctl.schedule import PADDLE_SCHEDULE_MODES

__all__ = [
    "INTERNALS",
    "PADDLE_SCHEDULE_MODES",
    "PIR_PLAN_TESTED",
    "AnnotationError",
    "Applied",
    "Completed",
    "PaddleBridgeError",
    "PaddleInternalMissingError",
    "PaddleUnavailableError",
    "PirPlan",
    "PirPlanError",
    "PlanMismatchError",
    "ProgramMismatchError",
    "ScheduleUnsupportedError",
    "UntestedPaddleWarning",
    "apply_annotations",
    "check_legacy_schedule",
    "export_program",
    "pir_plan",
]
