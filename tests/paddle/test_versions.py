"""Which Paddle is at hand, and which Paddle runs what vppctl writes (vppctl/paddle/versions.py).

`check_legacy_schedule` follows the version matrix of docs/paddle.md, given a version or
reading the installed one.
"""

from __future__ import annotations

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
