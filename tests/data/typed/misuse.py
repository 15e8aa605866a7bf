"""Calls a type checker must refuse: each line marked `# error` is one mypy --strict flags
(tests/contract/test_typed.py checks that it flags exactly these)."""

from __future__ import annotations

import vppctl

plan = vppctl.PlanOptions(vpp=2)
vppctl.convert_file("prog.pb", None, plan)  # error: a PlanOptions where ConvertOptions belongs
vppctl.PlanOptions(vpp=2, placement="V")  # error: not a placement
vppctl.sample_file(vppctl.SampleOptions(layers=8, pp=4), "x.pb")  # error: the old order
vppctl.simulate_run("prog.pb", micro_batches=8)  # error: the old keywords
vppctl.plan_run("prog.pb", vppctl.PlanSearchOptions(micro_batches=8))  # error: not a sequence
outcome = vppctl.verify_file("prog.pb")
count: str = outcome.pp  # error: an int
