"""Errors: what the Paddle bridge raises, one class per kind of failure.

Every class is a `PaddleBridgeError`, and its message names what is wrong; `pir_plan`'s
are `VppctlError`s too (`PirPlanError`, a ConversionError).
"""

from __future__ import annotations

from vppctl.errors import ConversionError


class PaddleBridgeError(Exception):
    """Base class of every error raised by the Paddle bridge."""


class PaddleUnavailableError(PaddleBridgeError):
    """The ``paddle`` package cannot be imported."""


class ProgramMismatchError(PaddleBridgeError):
    """The Paddle program and the vppctl program do not hold the same op lists or variables."""


class AnnotationError(PaddleBridgeError):
    """The annotations cannot be read or applied (bad bytes, missing dist context, ...)."""


class ScheduleUnsupportedError(PaddleBridgeError):
    """The Paddle release cannot schedule a legacy program with the schedule asked for."""


class PirPlanError(PaddleBridgeError, ConversionError):
    """`pir_plan` refuses: the strategy, the program or the plan cannot be built as planned.

    Also a `VppctlError` (a ConversionError, exit code 4): raised inside Paddle's build,
    it reaches the caller of `DistModel.train()` unchanged, before anything is changed."""


class PlanMismatchError(PirPlanError):
    """The program being built is not the one the plan was made for (layer names, op
    counts, pp, vpp or the layer regex differ); the message names the first difference."""


class PaddleInternalMissingError(PirPlanError):
    """The installed Paddle lacks an internal `pir_plan` needs; the message names it."""
