"""Paddle 3.0.0 builds its own VPP job plan from a program vppctl converted (opt-in check).

Paddle 3.0.0 is the one release whose legacy-IR pipeline scheduler works (3.1.0 to
3.3.1 raise for legacy programs), so this is where vppctl's legacy output is shown to
be consumable. Paddle 3.0.0 is no test extra (the suite pins 3.3.1), so this runs in a
separate venv, by hand or from tests/paddle/test_legacy300.py when VPPCTL_PADDLE300 names
that venv's Python:

    python3 -m venv /tmp/paddle300
    /tmp/paddle300/bin/pip install paddlepaddle==3.0.0 click rich pytest
    PYTHONPATH=. /tmp/paddle300/bin/python tests/support/job_plan_300.py
    VPPCTL_PADDLE300=/tmp/paddle300/bin/python python -m pytest tests/paddle/test_legacy300.py

It runs docs/paddle.md's end-to-end training script (a small GPT in Paddle's legacy
static mode, exported, `vppctl convert --vpp 2`, applied back, partitioned for rank
0 of pp 4), then Paddle 3.0.0's own VPP scheduler pieces on the rank's program:
``_program_for_vpp`` splits it into one program per job type (forward0, forward1,
backward1, backward0, optimizer) by the ops' chunk ids, and
``PipelineVirtualPipelinePass._create_job_list`` makes the job list; then
``apply_pass(..., "VPP", ...)`` builds the whole ``core.Plan``. Executing the plan
needs GPUs and NCCL (the CPU send/recv kernels only throw), so it stops there. It
prints one ``FACTS {json}`` line with what it found.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

EPILOGUE = """
import json
from paddle.distributed.passes.pass_utils import _program_for_vpp
from paddle.distributed.passes.pipeline_scheduler_pass import (
    PipelineVirtualPipelinePass, apply_pass,
)

def chunk_of(op):
    attr = dist_context.get_op_dist_attr_for_program(op)
    return None if attr is None else attr.chunk_id

rank_ops = dist_main.global_block().ops
roles = {"forward": 0, "backward": 1}
expected = {}
for op in rank_ops:
    role = int(op.attr("op_role")) & 3  # Forward 0, Backward 1, Optimize 2 (Loss bit apart)
    kind = "optimizer" if role == 2 else "backward" if role == 1 else "forward"
    key = kind if kind == "optimizer" else kind + str(chunk_of(op))
    expected.setdefault(key, []).append(op.type)

import copy
work = dist_main.clone()
types, programs = _program_for_vpp(work, vpp, dist_context)
split = {t: [op.type for op in p.global_block().ops] for t, p in zip(types, programs)}

vpp_pass = PipelineVirtualPipelinePass()
for name, value in (("num_micro_batches", 8), ("pp_stage", 0), ("pp_degree", pp),
                    ("vpp_degree", vpp), ("split_backward", False)):
    vpp_pass.set_attr(name, value)
jobs = [(job.type(), job.micro_batch_id()) for job in vpp_pass._create_job_list()]

opt = {"schedule_mode": "VPP", "num_micro_batches": 8, "pp_degree": pp, "pp_stage": 0,
       "vpp_degree": vpp, "dist_context": dist_context, "enable_send_recv_overlap": False}
try:
    plan = apply_pass(dist_main, dist_startup, "VPP", opt)
    plan_jobs = [(job.type(), job.micro_batch_id()) for job in plan.job_list()]
    plan_types = sorted(plan.job_types())
    applied = "applied"
except Exception as e:  # recorded, not hidden: the FACTS line says what stopped it
    plan_jobs, plan_types, applied = [], [], f"{type(e).__name__}: {e}"[:300]

print("FACTS " + json.dumps({
    "paddle": paddle.__version__,
    "types": types,
    "split": split,
    "by_chunk": expected,
    "send_recv": {t: [o for o in ops if o in ("send_v2", "recv_v2")] for t, ops in split.items()},
    "jobs": jobs,
    "plan": applied,
    "plan_jobs": plan_jobs,
    "plan_types": plan_types,
}))
"""


def readme_script() -> str:
    """docs/paddle.md's end-to-end Paddle script, with the bridge tests' small GPT as
    `model_loss` (as tests/contract/test_docs.py runs it on Paddle 3.3.1)."""
    from docblocks import paddle_script  # this script's own folder, tests/support/

    return paddle_script()


def run(python: str) -> dict[str, object]:
    """Run the check with `python` (Paddle 3.0.0's); the FACTS it printed."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["PATH"] = os.pathsep.join([str(Path(python).parent), env.get("PATH", "")])
    vppctl = Path(python).parent / "vppctl"
    if not vppctl.exists():  # the script's `vppctl convert`, from this checkout
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            [python, "-c", readme_script() + EPILOGUE],
            cwd=tmp,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"the Paddle 3.0.0 check failed:\n{done.stderr[-4000:]}")
    line = next(x for x in done.stdout.splitlines() if x.startswith("FACTS "))
    return json.loads(line.removeprefix("FACTS "))  # type: ignore[no-any-return]


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1] if len(sys.argv) > 1 else sys.executable), indent=1))
