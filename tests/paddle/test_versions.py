"""Which Paddle is at hand, and which Paddle runs what vppctl writes (vppctl/paddle/versions.py).

`check_legacy_schedule` follows the version matrix of docs/paddle.md, given a version or
reading the installed one; `pir_plan` warns once per process on a Paddle it was not
tested with.
"""

from __future__ import annotations

import warnings

import pytest

from vppctl.paddle import ScheduleUnsupportedError, check_legacy_schedule


def test_check_legacy_schedule_follows_the_version_matrix() -> None:
    check_legacy_schedule("VPP", "3.0.0")
    check_legacy_schedule("ZBH1", "3.0.0")
    with pytest.raises(ScheduleUnsupportedError, match="Paddle 3.3.1 schedules PIR programs only"):
        check_legacy_schedule("VPP", "3.3.1")
    with pytest.raises(ScheduleUnsupportedError, match="has no VPP completion or scheduler"):
        check_legacy_schedule("VPP", "2.6.2")
    with pytest.raises(ScheduleUnsupportedError, match="unknown schedule_mode 'vpp'"):
        check_legacy_schedule("vpp", "3.0.0")


@pytest.mark.paddle
def test_check_legacy_schedule_reads_the_installed_paddle() -> None:
    import paddle

    assert paddle.__version__ == "3.3.1"  # the test extra
    with pytest.raises(ScheduleUnsupportedError, match="Paddle 3.0.0 is the release"):
        check_legacy_schedule("1F1B")


def test_another_paddle_is_warned_about_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    from vppctl.paddle import PIR_PLAN_TESTED, UntestedPaddleWarning, versions

    monkeypatch.setattr(versions, "_warned", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for version in ("3.4.0", "3.4.0", *PIR_PLAN_TESTED, "3.2.0", "3.4.0"):
            versions.warn_untested(version)
    said = [str(w.message) for w in caught if w.category is UntestedPaddleWarning]
    assert len(said) == 2 and "not 3.4.0" in said[0] and "not 3.2.0" in said[1]
    assert PIR_PLAN_TESTED == ("3.3.1",)
