"""Errors: what the Paddle bridge raises, one class per kind of failure.

Every class is a `PaddleBridgeError`, and its message names what is wrong.
"""

from __future__ import annotations


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
