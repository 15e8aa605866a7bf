"""What a layer costs, by each measure (vppctl/engine/cost.py: parameters, FLOPs, ops), and
the stage loads and imbalance convert reports from it.
"""

from __future__ import annotations

import json
from pathlib import Path

from commandline import invoke
from rulekit import (
    convert_bytes,
    small,
)

# -- cost measures ---------------------------------------------------------------


def test_cost_measures_rank_the_head_heavier_than_a_decoder_layer() -> None:
    data = small(8, 4)
    for cost in ("params", "ops", "flops"):
        _, result = convert_bytes(data, vpp=2, cost=cost)
        segs = result.plan.segments  # type: ignore[attr-defined]
        assert segs[-1].cost > segs[3].cost > 0, cost
        assert segs[1].cost == segs[2].cost, cost


def test_convert_reports_stage_loads_and_the_stage_imbalance(tmp_path: Path) -> None:
    src = tmp_path / "p.pb"
    src.write_bytes(small(61, 4))
    args = ["convert", str(src), "--vpp", "2", "--split", "balanced", "--cost", "flops"]
    result = invoke(*args, "-o", str(tmp_path / "o.pb"), env={"COLUMNS": "80"})
    line = next(x for x in result.stdout.splitlines() if x.startswith("stage imbalance: "))
    data = json.loads(invoke(*args, "--json", "-o", str(tmp_path / "j.pb")).stdout)
    costs = [s["cost"] for s in data["segments"]]
    loads = [costs[k] + costs[k + 4] for k in range(4)]  # loop: stage s holds s and s + 4
    assert data["stage_loads"] == loads
    assert data["stage_imbalance"] == round(max(loads) / (sum(loads) / 4), 4)
    assert (
        line == f"stage imbalance: {max(loads) / (sum(loads) / 4):.2f} (busiest/mean stage flops)"
    )
