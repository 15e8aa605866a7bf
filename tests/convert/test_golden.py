"""Golden files: whole-sample conversions through the CLI, compared exactly with tests/data/golden/.

Refresh the expected files after a deliberate change, then review the diff by hand:

    VPPCTL_UPDATE_GOLDEN=1 /tmp/venv/bin/python -m pytest tests/convert/test_golden.py

Each golden file holds the two commands that made it, the `--json` report (the keys
docs/conversion.md documents) and a compact listing of the converted program: the
recorded plan, one line per op (`op block index type role mesh chunk`, then the
struct name, or `grad-of=N` for a grad op whose forward op is op N) and one per
variable (`var block name mesh chunk`). The `test_*_is_paddles_example` tests read
the checked-in files and check them against the spec's examples, so a refresh
cannot quietly bless a wrong conversion.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import paths
import pytest
from commandline import invoke
from rulekit import listing

from vppctl.program._proto import program_pb2 as pb
from vppctl.program.roles import is_forward

GOLDEN = paths.GOLDEN
UPDATE = os.environ.get("VPPCTL_UPDATE_GOLDEN") == "1"

SAMPLE = ["--layers", "8", "--pp", "4", "--hidden", "64", "--vocab", "1000"]
CASES = {
    "gpt8_pp4_vpp2": (SAMPLE, ["--vpp", "2", "--seg-method", "DecoderLayer"]),
    "gpt8_pp4_interleaved_vpp2": (
        [*SAMPLE, "--layout", "interleaved", "--vpp", "2"],
        ["--vpp", "2", "--seg-method", "DecoderLayer"],
    ),
    "gpt8_pp4_vpp2_placement_v": (
        SAMPLE,
        ["--vpp", "2", "--seg-method", "DecoderLayer", "--placement", "v"],
    ),
}


def render(name: str, tmp_path: Path) -> str:
    sample_args, convert_args = CASES[name]
    src, out = tmp_path / "in.pb", tmp_path / "out.pb"
    invoke("sample", *sample_args, "-o", str(src))
    done = invoke("convert", str(src), *convert_args, "-o", str(out), "--json")
    report = _documented(json.loads(done.stdout))
    return "\n".join(
        [
            f"# vppctl sample {' '.join(sample_args)} -o in.pb",
            f"# vppctl convert in.pb {' '.join(convert_args)} -o out.pb --json",
            *("# " + line for line in json.dumps(report, indent=1, sort_keys=True).splitlines()),
            listing(pb.ProgramDesc.FromString(out.read_bytes())),
        ]
    )


def _documented(report: dict) -> dict:
    """The keys of the `--json` report that the docs document (not the output path or size)."""
    keys = ("pp", "vpp", "placement", "mode", "layers", "warnings")
    seg_keys = ("virtual_stage", "stage", "chunk", "mesh", "layers", "ops")
    return {
        **{k: report[k] for k in keys},
        "segments": [{k: s[k] for k in seg_keys} for s in report["segments"]],
    }


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str, tmp_path: Path) -> None:
    path = GOLDEN / f"{name}.txt"
    got = render(name, tmp_path)
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(got)
    assert path.exists(), f"missing {path}; run VPPCTL_UPDATE_GOLDEN=1 pytest {__file__}"
    want = path.read_text()
    if got != want:
        diff = [
            f"line {i + 1}:\n  want {a}\n  got  {b}"
            for i, (a, b) in enumerate(zip(want.splitlines(), got.splitlines()))
            if a != b
        ]
        pytest.fail(
            f"{path.name} differs ({len(diff)} lines; lengths {len(want)} vs {len(got)}):\n"
            + "\n".join(diff[:10])
            + "\nIf the change is intended: "
            + "VPPCTL_UPDATE_GOLDEN=1 pytest tests/convert/test_golden.py"
        )


# -- the checked-in files against the spec's examples --------------------------------

OP = re.compile(r"^op 0 (\d+) (\S+) role=(\d+) mesh=\[([\d,]*)\] chunk=(\S+) (\S+)$")
LAYER = re.compile(r"/DecoderLayer(?:_(\d+))?/")


def _forward_ops(name: str) -> list[tuple[int, str, tuple[int, ...], int, str]]:
    """(index, type, mesh, chunk, struct) of the global block's forward ops in a golden file."""
    out = []
    for line in (GOLDEN / f"{name}.txt").read_text().splitlines():
        m = OP.match(line)
        if m and is_forward(int(m[3])):
            mesh = tuple(int(x) for x in m[4].split(",") if x)
            out.append((int(m[1]), m[2], mesh, int(m[5]), m[6]))
    return out


def _check_layout(name: str, layer_stage: list[int], tail_stage: int) -> None:
    ops = _forward_ops(name)
    layer_of = [LAYER.search(s) for *_, s in ops]
    first = next(i for i, m in enumerate(layer_of) if m)
    last = max(i for i, m in enumerate(layer_of) if m)
    seen = set()
    for (i, _, mesh, chunk, _), m in zip(ops, layer_of):
        if m:
            k = int(m[1] or 0)
            seen.add(k)
            assert (mesh, chunk) == ((layer_stage[k],), k // 4), f"op {i} of layer {k}"
    assert seen == set(range(8))
    pre = ops[:first]
    post = ops[last + 1 :]
    assert {"lookup_table_v2"} <= {t for _, t, *_ in pre}
    assert all((mesh, chunk) == ((0,), 0) for _, _, mesh, chunk, _ in pre), "embedding"
    assert {"softmax_with_cross_entropy", "mean"} <= {t for _, t, *_ in post}
    assert all((mesh, chunk) == ((tail_stage,), 1) for _, _, mesh, chunk, _ in post), "head"


def _check_grads_follow(name: str) -> None:
    lines = (GOLDEN / f"{name}.txt").read_text().splitlines()
    ops = {}
    for line in lines:
        if line.startswith("op 0 "):
            parts = line.split()
            ops[int(parts[2])] = parts
    grads = [p for p in ops.values() if p[-1].startswith("grad-of=")]
    assert len(grads) > 100
    for p in grads:
        fwd = ops[int(p[-1].split("=")[1])]
        assert p[5:7] == fwd[5:7], f"{' '.join(p)} vs forward {' '.join(fwd)}"


def test_gpt8_pp4_vpp2_is_paddles_example() -> None:
    # 8 layers on stages [0,0,1,1,2,2,3,3], pp 4, V 2 -> layers 0..3 on stages 0..3 as
    # chunk 0, layers 4..7 on stages 0..3 as chunk 1; embedding chunk 0 on stage 0; head
    # and loss chunk 1 on stage 3.
    _check_layout("gpt8_pp4_vpp2", [0, 1, 2, 3, 0, 1, 2, 3], tail_stage=3)
    _check_grads_follow("gpt8_pp4_vpp2")
    text = (GOLDEN / "gpt8_pp4_vpp2.txt").read_text()
    assert "mode=auto" in text and "placement=loop" in text


def test_gpt8_pp4_interleaved_vpp2_is_paddles_manual_example() -> None:
    # Layout [0,1,2,3,0,1,2,3] -> manual: meshes kept, chunk ids 0,0,0,0,1,1,1,1.
    _check_layout("gpt8_pp4_interleaved_vpp2", [0, 1, 2, 3, 0, 1, 2, 3], tail_stage=3)
    _check_grads_follow("gpt8_pp4_interleaved_vpp2")
    assert "mode=manual" in (GOLDEN / "gpt8_pp4_interleaved_vpp2.txt").read_text()


def test_gpt8_pp4_vpp2_placement_v_is_the_v_shape() -> None:
    # V placement: stages 0,1,2,3,3,2,1,0; with an even V head and loss move to stage 0.
    _check_layout("gpt8_pp4_vpp2_placement_v", [0, 1, 2, 3, 3, 2, 1, 0], tail_stage=0)
    _check_grads_follow("gpt8_pp4_vpp2_placement_v")


def test_golden_conversion_of_the_interleaved_sample_keeps_every_mesh(tmp_path: Path) -> None:
    src = tmp_path / "in.pb"
    sample_args, _ = CASES["gpt8_pp4_interleaved_vpp2"]
    invoke("sample", *sample_args, "-o", str(src))
    before = pb.ProgramDesc.FromString(src.read_bytes())
    after_lines = [
        line
        for line in (GOLDEN / "gpt8_pp4_interleaved_vpp2.txt").read_text().splitlines()
        if line.startswith("op 0 ")
    ]
    assert len(after_lines) == len(before.blocks[0].ops)
    for op, line in zip(before.blocks[0].ops, after_lines):
        ids = ",".join(str(i) for i in op.dist_attr.process_mesh.process_ids)
        assert f" mesh=[{ids}] " in line, line
