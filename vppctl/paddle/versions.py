"""Versions: which Paddle is at hand, and which Paddle runs what vppctl writes.

``import_paddle()`` imports the real ``paddle`` package, or raises
:class:`PaddleUnavailableError` saying how to install it (vppctl works without it; the
bridge imports it only when called).

``check_legacy_schedule(schedule_mode, version=None) -> None``
    Refuse (:class:`ScheduleUnsupportedError`) when a Paddle release (default: the
    installed one) cannot schedule a legacy program with ``schedule_mode``: only
    Paddle 3.0.0's legacy-IR pipeline scheduler runs them all (VPP included); 3.1.0
    to 3.3.1 schedule PIR programs only, and 2.6 has no VPP scheduler.

``warn_untested(version)`` says once per process that ``pir_plan`` was not tested with
that Paddle (``PIR_PLAN_TESTED`` lists those it was).
"""

from __future__ import annotations

import warnings
from typing import Any

from vppctl.paddle.errors import PaddleUnavailableError, ScheduleUnsupportedError
from vppctl.schedule import PADDLE_SCHEDULE_MODES, paddle_legacy_refusal


def import_paddle() -> Any:
    """The ``paddle`` package, or PaddleUnavailableError saying how to install it."""
    try:
        import paddle
    except ImportError as exc:  # pragma: no cover - exercised only without paddle
        raise PaddleUnavailableError(
            "the Paddle bridge needs PaddlePaddle (pip install 'vppctl[paddle]'): "
            f"cannot import paddle: {exc}"
        ) from exc
    return paddle


def check_legacy_schedule(schedule_mode: str, version: str | None = None) -> None:
    """Refuse when Paddle ``version`` (default: the installed ``paddle.__version__``)
    cannot run ``schedule_mode`` on a legacy program, such as one ``vppctl convert``
    wrote; the message names the release that can."""
    if schedule_mode not in PADDLE_SCHEDULE_MODES:
        raise ScheduleUnsupportedError(
            f"unknown schedule_mode {schedule_mode!r}: Paddle's are "
            f"{', '.join(PADDLE_SCHEDULE_MODES)} (case matters to Paddle)"
        )
    if version is None:
        version = str(import_paddle().__version__)
    refusal = paddle_legacy_refusal(version, schedule_mode)
    if refusal is not None:
        raise ScheduleUnsupportedError(refusal)


# The Paddle releases `pir_plan` was tested with (the CPU wheel: tests/paddle/test_pir.py).
PIR_PLAN_TESTED: tuple[str, ...] = ("3.3.1",)
_warned: set[str] = set()


def warn_untested(version: str) -> None:
    """Say once per process, as a warning, that `pir_plan` was not tested with this Paddle
    (it still checks every internal it touches is there, and raises naming a missing one)."""
    if version in PIR_PLAN_TESTED or version in _warned:
        return
    _warned.add(version)
    warnings.warn(
        f"vppctl.paddle.pir_plan is tested with Paddle {', '.join(PIR_PLAN_TESTED)}, not "
        f"{version}: it checks that the Paddle internals it touches are there, not what "
        "they do",
        UntestedPaddleWarning,
        stacklevel=4,
    )


class UntestedPaddleWarning(UserWarning):
    """`pir_plan` runs on a Paddle release it was not tested with."""
