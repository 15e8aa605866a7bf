"""Programs that cannot be converted are refused before anything is written: convert exits
4 (verify 1), with one `Error:` line that names the problem and the fix
(vppctl/engine/precheck.py, and the refusals of the layers and the plan it calls), and the
directory is left as it was.

The tests here also cover vppctl/verify/refusals.py, which has no test file of its own.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from commandline import invoke
from failures import SAMPLE, args_for, assert_error, nothing_written, refuse, write
from programs import Prog, layered

from vppctl.program._proto import program_pb2 as pb

# -- programs that cannot be converted (convert: 4; verify: 1) --------------------------------


def test_program_with_no_ops(tmp_path: Path) -> None:
    msg = pb.ProgramDesc()
    msg.blocks.add(idx=0, parent_idx=-1)
    src = write(tmp_path, msg.SerializeToString())
    refuse(tmp_path, "convert", src, 4, "no stage meshes")
    with nothing_written(tmp_path):
        v = invoke("verify", str(src), exit_code=None)
        i = invoke("inspect", str(src), exit_code=None)
    assert v.exit_code == 1 and "V005" in v.stdout
    assert i.exit_code == 0 and "ops: 0" in i.stdout


def _without_roles(p: Prog) -> bytes:
    for block in p.msg.blocks:
        for op in block.ops:
            kept = [a for a in op.attrs if a.name != "op_role"]
            del op.attrs[:]
            op.attrs.extend(kept)
    return p.bytes()


def test_forward_ops_without_op_role_are_forward_ops(tmp_path: Path) -> None:
    src = write(tmp_path, _without_roles(layered([0, 0, 1, 1])))
    invoke("convert", str(src), "--vpp", "2", "-o", str(tmp_path / "o.pb"))


def test_backward_ops_without_op_role_are_refused_as_input_not_as_a_bug(tmp_path: Path) -> None:
    """Without op_role every op is a forward op, so grad ops after the loss look like forward
    ops on earlier stages. convert must refuse that naming the op, not report a bug."""
    src = write(tmp_path, _without_roles(layered([0, 0, 1, 1], backward=True, optimizer=True)))
    message = refuse(tmp_path, "convert", src, 4)
    assert "bug" not in message and "internal check failed" not in message, message


def test_a_forward_op_after_the_backward_section_is_refused(tmp_path: Path) -> None:
    p = layered([0, 0, 1, 1], backward=True)
    ops = p.msg.blocks[0].ops
    roles = [next((a.i for a in op.attrs if a.name == "op_role"), 0) for op in ops]
    first_backward = next(i for i, r in enumerate(roles) if r & 1)
    ops.add().CopyFrom(ops[1])  # a forward op, again after the backward ops
    src = write(tmp_path, p.bytes())
    refuse(
        tmp_path,
        "convert",
        src,
        4,
        f"op #{len(ops) - 1} ({ops[1].type}) is a forward op after",
        f"starts at op #{first_backward} ",
    )


def _sub_blocks(target: int, cycle: bool = False) -> bytes:
    p = layered([0, 0, 1, 1])
    b1 = p.sub_block(0)
    p.op("assign", {"X": ["h0"]}, {"Out": ["t1"]}, block=b1)
    if cycle:
        b2 = p.sub_block(b1)
        p.op("assign", {"X": ["h0"]}, {"Out": ["t2"]}, block=b1, sub_block=b2)
        p.op("assign", {"X": ["h0"]}, {"Out": ["t3"]}, block=b2, sub_block=b1)
    op = p.msg.blocks[0].ops[1]  # a layer op
    op.attrs.add(name="sub_block", type=pb.BLOCK, block_idx=target)
    return p.bytes()


def test_sub_block_pointing_at_a_missing_block(tmp_path: Path) -> None:
    src = write(tmp_path, _sub_blocks(7))
    refuse(tmp_path, "convert", src, 4, "sub_block 7", "malformed")
    with nothing_written(tmp_path):
        v = invoke("verify", str(src), "--json", exit_code=None)
    assert v.exit_code == 1 and '"V014"' in v.stdout


def test_sub_blocks_forming_a_cycle(tmp_path: Path) -> None:
    src = write(tmp_path, _sub_blocks(1, cycle=True))
    # A cycle needs a sub_block pointing at an earlier block, which is refused as such.
    refuse(tmp_path, "convert", src, 4, "sub_block 1", "malformed")
    with nothing_written(tmp_path):
        v = invoke("verify", str(src), "--json", exit_code=None)
    assert v.exit_code == 1 and '"V014"' in v.stdout


def test_deep_sub_block_chains_convert_in_linear_time(tmp_path: Path) -> None:
    """Blocks nested 40 deep, each holding two ops that both enter the next block: walking
    every path would take 2**40 steps."""
    import subprocess

    p = layered([0, 0, 1, 1])
    parent = 0
    blocks = []
    for _ in range(40):
        b = p.sub_block(parent)
        blocks.append(b)
        parent = b
    for b, nxt in zip(blocks, blocks[1:]):
        p.op("assign", {"X": ["h0"]}, {"Out": [f"a{b}"]}, block=b, sub_block=nxt)
        p.op("assign", {"X": ["h0"]}, {"Out": [f"b{b}"]}, block=b, sub_block=nxt)
    p.msg.blocks[0].ops[1].attrs.add(name="sub_block", type=pb.BLOCK, block_idx=blocks[0])
    src = write(tmp_path, p.bytes())
    try:
        r = subprocess.run(
            [sys.executable, "-m", "vppctl", "convert", str(src), "--vpp", "2", "-q"],
            capture_output=True,
            text=True,
            timeout=15,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("convert walked every path through the nested sub-blocks (timed out)")
    assert r.returncode in (0, 4), r.stderr


@pytest.mark.parametrize("command", ["convert", "verify", "inspect"])
def test_sub_blocks_nested_deeper_than_the_recursion_limit(tmp_path: Path, command: str) -> None:
    p = layered([0, 0, 1, 1])
    parent = 0
    blocks = []
    for _ in range(1500):
        parent = p.sub_block(parent)
        blocks.append(parent)
    for b, nxt in zip(blocks, blocks[1:]):
        p.op("assign", {"X": ["h0"]}, {"Out": [f"a{b}"]}, block=b, sub_block=nxt)
    p.msg.blocks[0].ops[1].attrs.add(name="sub_block", type=pb.BLOCK, block_idx=blocks[0])
    src = write(tmp_path, p.bytes())
    r = invoke("--debug", *args_for(command, src), exit_code=None)
    assert r.exit_code in (0, 1, 4), r.stderr[-3000:]


def test_op_naming_an_undeclared_variable(tmp_path: Path) -> None:
    p = layered([0, 0, 1, 1])
    p.msg.blocks[0].ops[3].inputs[0].arguments.append("ghost")
    src = write(tmp_path, p.bytes())
    with nothing_written(tmp_path):
        v = invoke("verify", str(src), "--json", exit_code=None)
    assert v.exit_code == 1 and '"V013"' in v.stdout
    message = refuse(tmp_path, "convert", src, 4)
    assert "bug" not in message and "internal check failed" not in message, message
    assert "ghost" in message or "op #3" in message, message


@pytest.mark.parametrize(
    ("ids", "shape", "problem"),
    [
        ([1, 1], [2], "repeats process ids"),
        ([-1], [1], "negative process ids"),
        ([1, 2], [3], "does not match"),
        ([1, 2], [2, 2], "does not match"),
        ([1], [0], "does not match"),
    ],
    ids=["repeated", "negative", "shape", "shape-2d", "zero-dim"],
)
@pytest.mark.parametrize("where", ["program", "op", "var"])
@pytest.mark.parametrize("command", ["convert", "verify", "inspect"])
def test_invalid_meshes(
    tmp_path: Path,
    ids: list[int],
    shape: list[int],
    problem: str,
    where: str,
    command: str,
) -> None:
    p = layered([0, 0, 1, 1])
    if where == "program":
        mesh = p.msg.process_meshes[1]
    elif where == "op":
        mesh = p.msg.blocks[0].ops[3].dist_attr.process_mesh
    else:
        mesh = p.msg.blocks[0].vars[3].dist_attr.process_mesh
    mesh.ClearField("process_ids")
    mesh.ClearField("shape")
    mesh.process_ids.extend(ids)
    mesh.shape.extend(shape)
    src = write(tmp_path, p.bytes())
    refuse(tmp_path, command, src, 3, "process mesh", problem)


@pytest.mark.parametrize("chunk", [-7, 2**40, 2**63 - 1, -(2**63)])
def test_negative_or_huge_chunk_ids(tmp_path: Path, chunk: int) -> None:
    b = pb.ProgramDesc.FromString(SAMPLE)
    b.blocks[0].ops[3].dist_attr.chunk_id = chunk
    src = write(tmp_path, b.SerializeToString())
    with nothing_written(tmp_path):
        v = invoke("verify", str(src), "--json", exit_code=None)
        i = invoke("inspect", str(src), "--json", exit_code=None)
    assert v.exit_code == 1 and '"V002"' in v.stdout, v.output
    assert i.exit_code == 0, i.output
    # convert writes every op's chunk id, so a bad input chunk id does not survive it
    out = tmp_path / "out.pb"
    invoke("convert", str(src), "--vpp", "2", "-o", str(out), "--json")
    invoke("verify", str(out))


@pytest.mark.parametrize("struct", ["", "/", "///"])
@pytest.mark.parametrize(
    ("seg_method", "code", "phrase"),
    [
        (None, 4, "found no repeated layer"),
        ("DecoderLayer", 4, "carry no struct names"),
        ("/", 2, "matches an empty layer name"),
        (".*", 2, "matches an empty layer name"),
    ],
)
def test_struct_names_empty_or_only_slashes(
    tmp_path: Path,
    struct: str,
    seg_method: str | None,
    code: int,
    phrase: str,
) -> None:
    p = layered([0, 0, 1, 1])
    for op in p.msg.blocks[0].ops:
        op.struct_name = struct
    src = write(tmp_path, p.bytes())
    extra = ["--seg-method", seg_method] if seg_method else []
    if struct == "":  # no struct name at all: refused whatever the (valid) regex
        code, phrase = 4, "no op carries a struct name"
    with nothing_written(tmp_path):
        r = invoke(*args_for("convert", src), *extra, exit_code=None)
    assert_error(r, code, phrase)
    with nothing_written(tmp_path):
        v = invoke("verify", str(src), *extra, exit_code=None)
    assert v.exit_code in (1, 2) and "Traceback" not in v.stderr
    if v.exit_code == 1:
        assert "V005" in v.stdout


@pytest.mark.parametrize("command", ["convert", "verify", "inspect"])
@pytest.mark.parametrize("regex", ["(", "[a-", "*x", "(?P<1>x)"])
def test_regex_that_does_not_compile(tmp_path: Path, command: str, regex: str) -> None:
    src = write(tmp_path, SAMPLE)
    with nothing_written(tmp_path):
        r = invoke(*args_for(command, src), "--seg-method", regex, exit_code=None)
    assert_error(r, 2, "--seg-method", "not a valid regular expression")
