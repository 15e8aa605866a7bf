"""What Paddle 3.3.1 itself can do with distributed programs, as docs/paddle.md states it.

PIR: a static program with an op of the `dist_op` dialect (`dist.shard_tensor`,
`dist.reshard`) serializes but does not load back ("Unknown id dist_op for
decompress dialect"), while the same program without them round-trips; this is why
vppctl reads legacy programs. Run in a subprocess in PIR mode (this test package
forces the legacy IR in-process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.paddle

_SCRIPT = """
import json, sys
import paddle
import paddle.distributed as dist
paddle.enable_static()
mesh0 = dist.ProcessMesh([0], dim_names=["x"])
mesh1 = dist.ProcessMesh([1], dim_names=["x"])

def plain():
    paddle.mean(paddle.static.data("x", [4, 8], "float32"))

def shard_tensor():
    x = dist.shard_tensor(paddle.static.data("x", [4, 8], "float32"), mesh0, [dist.Replicate()])
    paddle.mean(x)

def reshard():
    x = dist.shard_tensor(paddle.static.data("x", [4, 8], "float32"), mesh0, [dist.Replicate()])
    y = dist.reshard(paddle.matmul(x, paddle.create_parameter([8, 8], "float32")), mesh1,
                     [dist.Replicate()])
    paddle.mean(y)

out = {"pir": paddle.base.framework.get_flags("FLAGS_enable_pir_api")["FLAGS_enable_pir_api"],
       "version": paddle.__version__}
for name, build in (("plain", plain), ("shard_tensor", shard_tensor), ("reshard", reshard)):
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        build()
    path = f"{sys.argv[1]}/{name}.json"
    paddle.core.serialize_pir_program(main, path, 1, True, False, True)
    back = paddle.static.Program()
    try:
        paddle.base.core.deserialize_pir_program(path, back, 1)
        loaded = "loaded"
    except Exception as e:
        loaded = str(e).splitlines()[0]
    out[name] = {"ops": [op.name() for op in main.global_block().ops], "load": loaded}
print("STATE " + json.dumps(out))
"""


def test_paddle_cannot_load_a_serialized_pir_program_with_dist_ops(tmp_path: Path) -> None:
    env = {**os.environ, "FLAGS_enable_pir_api": "1"}  # PIR, the default of 3.3.1
    run = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    line = next(x for x in run.stdout.splitlines() if x.startswith("STATE "))
    state = json.loads(line.removeprefix("STATE "))
    assert state["pir"] is True and state["version"] == "3.3.1"
    assert state["plain"]["load"] == "loaded"
    assert "dist_op.shard_tensor" in state["shard_tensor"]["ops"]
    assert "dist_op.reshard" in state["reshard"]["ops"]
    for name in ("shard_tensor", "reshard"):
        assert "Unknown id dist_op for decompress dialect" in state[name]["load"], state[name]
