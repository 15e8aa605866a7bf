"""Paddle 3.0.0, the one release whose legacy-IR VPP scheduler works, consumes a program
vppctl converted: it splits it into its chunk programs and builds its VPP job plan.

Opt-in (Paddle 3.0.0 is no test extra): set VPPCTL_PADDLE300 to the Python of a venv
holding paddlepaddle==3.0.0, click, rich and pytest (see
tests/support/job_plan_300.py, which also runs by hand).
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

from vppctl.schedule.orders import order_names, stage_orders

PYTHON = os.environ.get("VPPCTL_PADDLE300")
pytestmark = pytest.mark.skipif(
    not PYTHON,
    reason="opt-in: set VPPCTL_PADDLE300 to a Python with paddlepaddle==3.0.0 "
    "(tests/support/job_plan_300.py says how)",
)

# What Paddle's scheduler adds to the chunk programs it splits: stream syncs.
PADDLE_SYNC_OPS = {"c_sync_calc_stream", "c_sync_comm_stream"}


@pytest.fixture(scope="module")
def facts() -> dict:  # type: ignore[type-arg]
    from job_plan_300 import run

    assert PYTHON is not None
    return run(PYTHON)


def test_it_is_paddle_3_0_0(facts: dict) -> None:  # type: ignore[type-arg]
    assert facts["paddle"] == "3.0.0"


def test_paddle_splits_the_converted_program_into_its_chunk_programs(facts: dict) -> None:  # type: ignore[type-arg]
    assert facts["types"] == ["forward0", "forward1", "backward1", "backward0", "optimizer"]
    for job_type in facts["types"]:
        split, by_chunk = Counter(facts["split"][job_type]), Counter(facts["by_chunk"][job_type])
        assert not by_chunk - split, job_type  # every op of that chunk and role is there
        assert set(split - by_chunk) <= PADDLE_SYNC_OPS, job_type  # and nothing else
    # Rank 0 of pp 4 holds virtual stages 0 and 4: chunk 0 starts the pipeline (sends
    # only), chunk 1 receives from stage 3 and sends on.
    assert facts["send_recv"]["forward0"] == ["send_v2"]
    assert facts["send_recv"]["forward1"] == ["recv_v2", "send_v2"]


def test_paddles_legacy_vpp_job_list_is_vppctls_vpp_order(facts: dict) -> None:  # type: ignore[type-arg]
    kinds = {"forward": "F", "backward": "B"}
    paddle = [f"{int(t[-1]) * 4}{kinds[t[:-1]]}{mb}" for t, mb in facts["jobs"] if t != "optimizer"]
    ours = order_names(stage_orders("vpp", 4, 2, 8), 2, "loop")[0]
    assert paddle == list(ours)


def test_paddle_builds_the_whole_plan(facts: dict) -> None:  # type: ignore[type-arg]
    assert facts["plan"] == "applied"
    assert facts["plan_jobs"] == facts["jobs"]
