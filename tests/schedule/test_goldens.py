"""Every schedule vppctl names against its reference's own order, on the whole grid.

tests/data/schedules.json holds the per-rank orders that torch 2.13's schedule
classes, Megatron-Core's schedule helpers and Paddle 3.3.1's pipeline passes produce
(written by tests/support/make_schedule_goldens.py, which records the versions; the
larger cases keep a digest of their orders). Paddle's part also runs live here, from
Paddle's own job-list builders, since Paddle is a test extra.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from functools import cache
from typing import Any

import paths
import pytest

from vppctl.schedule.orders import GROUPED, SCHEDULES, natural_placement, order_names, stage_orders


@cache
def goldens() -> dict[str, Any]:
    return json.loads(paths.SCHEDULE_GOLDENS.read_text())  # type: ignore[no-any-return]


def ours(schedule: str, pp: int, vpp: int, m: int, group: int | None) -> list[str]:
    """vppctl's orders in torch notation, one string per rank (as the goldens keep them)."""
    orders = stage_orders(schedule, pp, vpp, m, group if schedule in GROUPED else None)  # type: ignore[arg-type]
    return [" ".join(r) for r in order_names(orders, vpp, natural_placement(schedule))]  # type: ignore[arg-type]


def digest(ranks: list[str]) -> str:
    return hashlib.sha256("\n".join(ranks).encode()).hexdigest()[:16]


def test_every_schedule_equals_its_reference_on_the_grid() -> None:
    equal: Counter[tuple[str, str]] = Counter()
    for case in goldens()["cases"]:
        mine = ours(case["schedule"], case["pp"], case["vpp"], case["m"], case["group_size"])
        where = (
            f"{case['schedule']} vs {case['reference']} at pp {case['pp']}, vpp {case['vpp']}, "
            f"m {case['m']}, N {case['group_size']}"
        )
        if "orders" in case:
            assert mine == case["orders"], where
        else:
            assert digest(mine) == case["sha256"], where
        equal[case["schedule"], case["reference"]] += 1
    # Every name vppctl offers has a reference, and the grid is the one asked for.
    assert {s for s, _ in equal} == set(SCHEDULES)
    assert equal["interleaved", "megatron"] >= 200 and equal["vpp", "paddle"] == 220


def test_the_grid_covers_pp_2_3_4_8_vpp_1_to_4_and_m_from_pp_to_4pp() -> None:
    cases = goldens()["cases"]
    assert {c["pp"] for c in cases} == {2, 3, 4, 8}
    assert {c["vpp"] for c in cases} == {1, 2, 3, 4}
    for pp in (2, 3, 4, 8):
        assert {c["m"] for c in cases if c["pp"] == pp} == set(range(pp, 4 * pp + 1))


def test_every_legal_group_size_at_vpp_2_is_in_the_goldens() -> None:
    from vppctl.schedule.interleaving import legal_group_sizes, zero_bubble_group_sizes

    cases = goldens()["cases"]
    for pp in (2, 3, 4, 8):
        for m in range(pp, 4 * pp + 1):
            megatron = {
                c["group_size"]
                for c in cases
                if (c["schedule"], c["reference"], c["pp"], c["vpp"], c["m"])
                == ("interleaved", "megatron", pp, 2, m)
            }
            assert megatron == set(legal_group_sizes(pp, m))
            if m % max(1, m // pp) == 0:  # torch refuses the other m
                torch = {
                    c["group_size"]
                    for c in cases
                    if (c["schedule"], c["reference"], c["pp"], c["vpp"], c["m"])
                    == ("interleaved-zb", "torch", pp, 2, m)
                }
                assert torch == set(zero_bubble_group_sizes(pp, m))


def test_the_goldens_record_the_reference_versions() -> None:
    versions = goldens()["versions"]
    assert versions["torch"].startswith("2.13.")
    assert versions["paddlepaddle"] == "3.3.1"
    assert "megatron-core" in versions


def test_a_wrong_order_would_fail_the_comparison() -> None:
    # Swapping two actions of one rank changes the digest and the full order.
    case = next(c for c in goldens()["cases"] if "orders" in c and c["schedule"] == "zbh1")
    mine = ours("zbh1", case["pp"], 1, case["m"], None)
    ranks = [r.split() for r in mine]
    ranks[-1][-1], ranks[-1][-2] = ranks[-1][-2], ranks[-1][-1]
    assert [" ".join(r) for r in ranks] != case["orders"]
    assert digest([" ".join(r) for r in ranks]) != digest(mine)


# ---------------------------------------------------------------------------
# Paddle, live: its own job-list builders


@pytest.mark.paddle
def test_paddle_schedules_equal_paddles_job_lists_live() -> None:
    from make_schedule_goldens import paddle_cases

    count: Counter[str] = Counter()
    for case in paddle_cases():
        mine = ours(case["schedule"], case["pp"], case["vpp"], case["m"], None)
        assert mine == case["orders"] if "orders" in case else digest(mine) == case["sha256"]
        count[case["schedule"]] += 1
    # 55 (pp, m) pairs on the grid; Eager1F1B refuses m < 2pp - 1 on 13 of them.
    assert count == {
        "fthenb": 55, "1f1b": 55, "eager1f1b": 42, "zbh1": 55, "vpp": 4 * 55, "zbvpp": 4
    }  # fmt: skip


@pytest.mark.paddle
@pytest.mark.parametrize(("pp", "vpp", "m"), [(4, 2, 4), (3, 3, 3), (2, 4, 2)])
def test_paddle_vpp_at_m_equal_pp_runs_every_forward_first(pp: int, vpp: int, m: int) -> None:
    from make_schedule_goldens import paddle_orders

    paddle = [" ".join(r) for r in paddle_orders("VPP", pp, vpp, m)]
    assert ours("vpp", pp, vpp, m, None) == paddle
    for rank in paddle:
        kinds = [a.strip("0123456789") for a in rank.split()]
        assert kinds == ["F"] * (vpp * m) + ["B"] * (vpp * m)


@pytest.mark.paddle
@pytest.mark.parametrize(("pp", "vpp", "m"), [(4, 2, 6), (4, 3, 10), (3, 2, 7), (8, 2, 13)])
def test_paddle_vpp_with_a_short_last_group_equals_paddle(pp: int, vpp: int, m: int) -> None:
    from make_schedule_goldens import paddle_orders

    assert m % pp > 0
    assert ours("vpp", pp, vpp, m, None) == [" ".join(r) for r in paddle_orders("VPP", pp, vpp, m)]
    # Megatron refuses that group size: pp does not divide m and leaves fewer than pp.
    from vppctl.schedule.interleaving import legal_group_sizes

    assert pp not in legal_group_sizes(pp, m)


@pytest.mark.paddle
def test_paddle_zbh1_keeps_the_first_weight_passes_for_the_end() -> None:
    from make_schedule_goldens import paddle_orders

    paddle = [" ".join(r) for r in paddle_orders("ZBH1", 4, 1, 8)]
    assert ours("zbh1", 4, 1, 8, None) == paddle
    # Stage 1: micro-batch 0's backward split, the middle ones whole, W0 at the very end.
    assert paddle[1] == "1F0 1F1 1F2 1I0 1F3 1B1 1F4 1B2 1F5 1B3 1F6 1B4 1F7 1B5 1B6 1I7 1W7 1W0"
    # torch's ZB1P splits every backward and runs W0 one slot after I0, first in, first out.
    assert ours("zb1p", 4, 1, 8, None)[1].startswith("1F0 1F1 1F2 1I0 1F3 1I1 1W0 1F4")


def test_the_docs_counts_per_schedule_and_reference_are_the_goldens() -> None:
    page = (paths.DOCS / "schedules.md").read_text()
    table = page.split("| schedule | reference | cases |")[1].split("\n\n")[0]
    names = {"Paddle": "paddle", "torch": "torch", "Megatron-Core": "megatron"}
    said: dict[tuple[str, str], int] = {}
    for row in table.strip().splitlines()[1:]:
        schedule, refs, counts = (cell.strip() for cell in row.strip("|").split("|"))
        for ref, n in zip(refs.split(", "), counts.split(", ")):
            said[schedule.strip("`"), names[ref]] = int(n)
    counted = Counter((c["schedule"], c["reference"]) for c in goldens()["cases"])
    assert said == dict(counted)


@pytest.mark.paddle
@pytest.mark.parametrize(
    ("pp", "vpp", "runtimes"),
    [
        (3, 2, (1, 1, 1, 0, 0)),
        (4, 2, (10, 20, 15, 5, 1)),
        (5, 3, (61, 72, 71, 34, 3)),
        (4, 4, (3, 5, 2, 7, 2)),
    ],
)
def test_zbvpp_is_paddles_greedy_for_any_runtimes(
    pp: int, vpp: int, runtimes: tuple[int, ...]
) -> None:
    """Paddle's own ZBVPP builder (its missing _get_max_memory supplied as Paddle's
    default has it) against vppctl's greedy, also at vpp 3 and 4 and other runtimes."""
    from make_schedule_goldens import supply_zbvpp_memory
    from paddle.distributed.passes.pipeline_scheduler_pass import (
        PipelineZeroBubbleVirtualPipelinePass,
    )

    from vppctl.schedule.zbvpp import Runtimes, zbvpp_orders

    ours = zbvpp_orders(pp, pp, vpp, Runtimes(*runtimes))
    kinds = {"forward": "F", "backward_b": "I", "backward_w": "W"}
    for stage in range(pp):
        p = PipelineZeroBubbleVirtualPipelinePass()
        for name, value in (
            ("num_micro_batches", pp),
            ("pp_stage", stage),
            ("pp_degree", pp),
            ("vpp_degree", vpp),
            ("program_runtimes", list(runtimes)),
        ):
            p.set_attr(name, value)
        supply_zbvpp_memory(p, pp, vpp)
        paddle = []
        for job in p._create_job_list():
            base = job.type().rstrip("0123456789")
            if base in kinds:
                chunk = job.type()[len(base) :]
                paddle.append(f"{kinds[base]}{job.micro_batch_id()}.c{chunk}")
        assert [op.label for op in ours[stage]] == paddle
