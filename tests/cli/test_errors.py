"""Clean failure: every bad input gets its documented exit code and one `Error:` line.

For each bad input of the format and failure issues, each command that reads it is
run through the CLI and must give: the exit code, one line on stderr starting with
`Error: ` that names the problem, no traceback, nothing on stdout, no file written
(the directory holds exactly what it held before, byte for byte and with the same
mtimes) and the input unchanged. An unexpected exception is exit 70 with one line
asking to report it, and a traceback only under `--debug`.

Exit codes: 0 ok, 1 verify found violations, 2 usage error, 3 file unreadable or
unwritable or not a program, 4 cannot convert as asked, 5 out of memory, 70 internal
error.
"""

from __future__ import annotations

import os
import re
import stat
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from programs import Prog, layered

from vppctl import commands
from vppctl.cli import cli
from vppctl.engine import index
from vppctl.program import files, save
from vppctl.program._proto import program_pb2 as pb

READERS = ("convert", "verify", "inspect", "dump")
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


# -- helpers ---------------------------------------------------------------------------


def snapshot(directory: Path) -> dict[str, tuple[int, int, bytes | None]]:
    """Every file in `directory` (hidden ones too): size, mtime and, when small, the bytes."""
    out = {}
    for p in sorted(directory.iterdir()):
        st = p.lstat()
        small = stat.S_ISREG(st.st_mode) and st.st_size < 1 << 24 and os.access(p, os.R_OK)
        out[p.name] = (st.st_size, st.st_mtime_ns, _read(p) if small else None)
    return out


def _read(path: Path) -> bytes:
    with open(path, "rb") as f:  # not Path.read_bytes, which some tests replace
        return f.read()


@contextmanager
def nothing_written(directory: Path) -> Iterator[None]:
    before = snapshot(directory)
    yield
    assert snapshot(directory) == before, "a file was written, removed or changed"


def args_for(command: str, src: Path, out: Path | None = None) -> list[str]:
    if command == "convert":
        return ["convert", str(src), "--vpp", "2", "-o", str(out or src.with_name("out.pb"))]
    if command == "dump":
        return ["dump", str(src), "-o", str(out or src.with_name("out.pbtxt"))]
    return [command, str(src)]


def assert_error(r: Result, code: int, *phrases: str) -> str:
    """Exit `code`, one `Error:` line on stderr naming the problem, no traceback, no stdout."""
    assert r.exit_code == code, (r.exit_code, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("Error")]
    assert len(errors) == 1, r.stderr
    if code != 2:  # click's own usage errors print the usage line first; ours do not
        assert lines == errors, r.stderr
    message = errors[0]
    assert message.startswith("Error: ")
    for phrase in phrases:
        assert phrase in message, (phrase, message)
    return message


def write(tmp_path: Path, data: bytes, name: str = "prog.pb") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def refuse(
    runner: CliRunner, tmp_path: Path, command: str, src: Path, code: int, *phrases: str
) -> str:
    with nothing_written(tmp_path):
        r = runner.invoke(cli, args_for(command, src))
    return assert_error(r, code, *phrases)


SAMPLE = layered([0, 0, 1, 1], backward=True, optimizer=True).bytes()


# -- files that cannot be read or are not programs (exit 3) ---------------------------------


@pytest.mark.parametrize("command", READERS)
def test_missing_file(runner: CliRunner, tmp_path: Path, command: str) -> None:
    refuse(runner, tmp_path, command, tmp_path / "nope.pb", 3, "nope.pb", "no such file")


@pytest.mark.parametrize("command", READERS)
def test_directory(runner: CliRunner, tmp_path: Path, command: str) -> None:
    (tmp_path / "dir.pb").mkdir()
    refuse(runner, tmp_path, command, tmp_path / "dir.pb", 3, "dir.pb", "is a directory")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("command", READERS)
def test_fifo_nobody_writes_to_is_refused_after_the_wait(
    runner: CliRunner, tmp_path: Path, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A FIFO is read (that is what `<(cmd)` gives), but one that no process opens for
    writing must not block forever: refused after vppctl.program.files.WAIT_SECONDS."""
    monkeypatch.setattr(files, "WAIT_SECONDS", 0.3)
    fifo = tmp_path / "pipe.pb"
    os.mkfifo(fifo)
    start = time.monotonic()
    refuse(runner, tmp_path, command, fifo, 3, "pipe.pb", "FIFO", "no process opened it")
    assert time.monotonic() - start < 5


@pytest.mark.skipif(IS_ROOT, reason="running as root: chmod 000 does not stop root reading")
@pytest.mark.parametrize("command", READERS)
def test_unreadable_file(runner: CliRunner, tmp_path: Path, command: str) -> None:
    src = write(tmp_path, SAMPLE)
    src.chmod(0)
    try:
        refuse(runner, tmp_path, command, src, 3, "prog.pb", "permission denied")
    finally:
        src.chmod(0o644)


@pytest.mark.parametrize("command", READERS)
def test_unreadable_file_simulated(
    runner: CliRunner, tmp_path: Path, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What reading a chmod-000 file does for a user who is not root (runs as root too)."""

    def denied(path: str) -> int:
        raise PermissionError(13, "Permission denied", path)

    src = write(tmp_path, SAMPLE)
    monkeypatch.setattr(files, "_open_read", denied)
    refuse(runner, tmp_path, command, src, 3, "prog.pb", "permission denied")


@pytest.mark.parametrize("command", READERS)
@pytest.mark.parametrize("name", ["prog.pb", "prog.pbtxt"])
def test_empty_file(runner: CliRunner, tmp_path: Path, command: str, name: str) -> None:
    src = write(tmp_path, b"", name)
    refuse(runner, tmp_path, command, src, 3, name, "empty")


@pytest.mark.parametrize("command", READERS)
def test_truncated_file(runner: CliRunner, tmp_path: Path, command: str) -> None:
    src = write(tmp_path, SAMPLE[: len(SAMPLE) // 2])
    refuse(runner, tmp_path, command, src, 3, "prog.pb", "not a program")


@pytest.mark.parametrize("command", READERS)
def test_random_bytes(runner: CliRunner, tmp_path: Path, command: str) -> None:
    import random

    src = write(tmp_path, random.Random(4).randbytes(4096))
    refuse(runner, tmp_path, command, src, 3, "prog.pb", "not a program")


@pytest.mark.parametrize("command", READERS)
def test_random_text(runner: CliRunner, tmp_path: Path, command: str) -> None:
    src = write(tmp_path, b"blocks { idx: 0 parent_idx: -1\n ops { type: \x01\n } }", "p.pbtxt")
    refuse(runner, tmp_path, command, src, 3, "p.pbtxt", "not a program in text format")


@pytest.mark.parametrize(
    "message",
    [
        pb.OpDesc(type="matmul_v2"),
        pb.ProcessMesh(shape=[2], process_ids=[0, 1]),
        pb.VarDesc(name="x", type=pb.VarType(type=pb.VarType.FP32)),
    ],
    ids=["op", "mesh", "var"],
)
@pytest.mark.parametrize("command", READERS)
def test_valid_protobuf_that_is_not_a_program(
    runner: CliRunner, tmp_path: Path, command: str, message: object
) -> None:
    src = write(tmp_path, message.SerializeToString())  # type: ignore[attr-defined]
    refuse(runner, tmp_path, command, src, 3, "prog.pb", "not a program")


@pytest.mark.parametrize("command", READERS)
def test_file_over_2_gib_is_refused_without_reading_it(
    runner: CliRunner, tmp_path: Path, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = tmp_path / "big.pb"
    with big.open("wb") as f:
        f.truncate(2**31)  # sparse: no disk space used
    monkeypatch.setattr(files, "_read_regular", _must_not_read)
    start = time.monotonic()
    refuse(runner, tmp_path, command, big, 3, "big.pb", "2.0 GiB", "2 GiB")
    assert time.monotonic() - start < 2


def _must_not_read(fd: int, size: int, *args: object) -> bytes:
    raise AssertionError(f"{size} bytes were read")


def test_block_numbering_is_checked(runner: CliRunner, tmp_path: Path) -> None:
    msg = pb.ProgramDesc.FromString(SAMPLE)
    msg.blocks.add(idx=5, parent_idx=0)
    src = write(tmp_path, msg.SerializePartialToString())
    refuse(runner, tmp_path, "convert", src, 3, "block 1 says it is block 5")


def test_corrupt_op_bytes_are_refused(runner: CliRunner, tmp_path: Path) -> None:
    msg = pb.ProgramDesc.FromString(SAMPLE)
    blob = bytearray(msg.SerializeToString())
    # Corrupt the first op's type: a length past the end of the op.
    at = blob.index(b"\x1a\x0flookup_table_v2")
    blob[at + 1] = 0x7F
    src = write(tmp_path, bytes(blob))
    for command in READERS:
        refuse(runner, tmp_path, command, src, 3, "not a program")


# -- programs that cannot be converted (convert: 4; verify: 1) --------------------------------


def test_program_with_no_ops(runner: CliRunner, tmp_path: Path) -> None:
    msg = pb.ProgramDesc()
    msg.blocks.add(idx=0, parent_idx=-1)
    src = write(tmp_path, msg.SerializeToString())
    refuse(runner, tmp_path, "convert", src, 4, "no stage meshes")
    with nothing_written(tmp_path):
        v = runner.invoke(cli, ["verify", str(src)])
        i = runner.invoke(cli, ["inspect", str(src)])
    assert v.exit_code == 1 and "V005" in v.stdout
    assert i.exit_code == 0 and "ops: 0" in i.stdout


def _without_roles(p: Prog) -> bytes:
    for block in p.msg.blocks:
        for op in block.ops:
            kept = [a for a in op.attrs if a.name != "op_role"]
            del op.attrs[:]
            op.attrs.extend(kept)
    return p.bytes()


def test_forward_ops_without_op_role_are_forward_ops(runner: CliRunner, tmp_path: Path) -> None:
    src = write(tmp_path, _without_roles(layered([0, 0, 1, 1])))
    r = runner.invoke(cli, ["convert", str(src), "--vpp", "2", "-o", str(tmp_path / "o.pb")])
    assert r.exit_code == 0, r.output


def test_backward_ops_without_op_role_are_refused_as_input_not_as_a_bug(
    runner: CliRunner, tmp_path: Path
) -> None:
    """Without op_role every op is a forward op, so grad ops after the loss look like forward
    ops on earlier stages. convert must refuse that naming the op, not report a bug."""
    src = write(tmp_path, _without_roles(layered([0, 0, 1, 1], backward=True, optimizer=True)))
    message = refuse(runner, tmp_path, "convert", src, 4)
    assert "bug" not in message and "internal check failed" not in message, message


def test_a_forward_op_after_the_backward_section_is_refused(
    runner: CliRunner, tmp_path: Path
) -> None:
    p = layered([0, 0, 1, 1], backward=True)
    ops = p.msg.blocks[0].ops
    roles = [next((a.i for a in op.attrs if a.name == "op_role"), 0) for op in ops]
    first_backward = next(i for i, r in enumerate(roles) if r & 1)
    ops.add().CopyFrom(ops[1])  # a forward op, again after the backward ops
    src = write(tmp_path, p.bytes())
    refuse(
        runner,
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


def test_sub_block_pointing_at_a_missing_block(runner: CliRunner, tmp_path: Path) -> None:
    src = write(tmp_path, _sub_blocks(7))
    refuse(runner, tmp_path, "convert", src, 4, "sub_block 7", "malformed")
    with nothing_written(tmp_path):
        v = runner.invoke(cli, ["verify", str(src), "--json"])
    assert v.exit_code == 1 and '"V014"' in v.stdout


def test_sub_blocks_forming_a_cycle(runner: CliRunner, tmp_path: Path) -> None:
    src = write(tmp_path, _sub_blocks(1, cycle=True))
    # A cycle needs a sub_block pointing at an earlier block, which is refused as such.
    refuse(runner, tmp_path, "convert", src, 4, "sub_block 1", "malformed")
    with nothing_written(tmp_path):
        v = runner.invoke(cli, ["verify", str(src), "--json"])
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
def test_sub_blocks_nested_deeper_than_the_recursion_limit(
    runner: CliRunner, tmp_path: Path, command: str
) -> None:
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
    r = runner.invoke(cli, ["--debug", *args_for(command, src)])
    assert r.exit_code in (0, 1, 4), r.stderr[-3000:]


def test_op_naming_an_undeclared_variable(runner: CliRunner, tmp_path: Path) -> None:
    p = layered([0, 0, 1, 1])
    p.msg.blocks[0].ops[3].inputs[0].arguments.append("ghost")
    src = write(tmp_path, p.bytes())
    with nothing_written(tmp_path):
        v = runner.invoke(cli, ["verify", str(src), "--json"])
    assert v.exit_code == 1 and '"V013"' in v.stdout
    message = refuse(runner, tmp_path, "convert", src, 4)
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
    runner: CliRunner,
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
    refuse(runner, tmp_path, command, src, 3, "process mesh", problem)


@pytest.mark.parametrize("chunk", [-7, 2**40, 2**63 - 1, -(2**63)])
def test_negative_or_huge_chunk_ids(runner: CliRunner, tmp_path: Path, chunk: int) -> None:
    b = pb.ProgramDesc.FromString(SAMPLE)
    b.blocks[0].ops[3].dist_attr.chunk_id = chunk
    src = write(tmp_path, b.SerializeToString())
    with nothing_written(tmp_path):
        v = runner.invoke(cli, ["verify", str(src), "--json"])
        i = runner.invoke(cli, ["inspect", str(src), "--json"])
    assert v.exit_code == 1 and '"V002"' in v.stdout, v.output
    assert i.exit_code == 0, i.output
    # convert writes every op's chunk id, so a bad input chunk id does not survive it
    out = tmp_path / "out.pb"
    r = runner.invoke(cli, ["convert", str(src), "--vpp", "2", "-o", str(out), "--json"])
    assert r.exit_code == 0, r.output
    assert runner.invoke(cli, ["verify", str(out)]).exit_code == 0


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
    runner: CliRunner,
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
        r = runner.invoke(cli, [*args_for("convert", src), *extra])
    assert_error(r, code, phrase)
    with nothing_written(tmp_path):
        v = runner.invoke(cli, ["verify", str(src), *extra])
    assert v.exit_code in (1, 2) and "Traceback" not in v.stderr
    if v.exit_code == 1:
        assert "V005" in v.stdout


@pytest.mark.parametrize("command", ["convert", "verify", "inspect"])
@pytest.mark.parametrize("regex", ["(", "[a-", "*x", "(?P<1>x)"])
def test_regex_that_does_not_compile(
    runner: CliRunner, tmp_path: Path, command: str, regex: str
) -> None:
    src = write(tmp_path, SAMPLE)
    with nothing_written(tmp_path):
        r = runner.invoke(cli, [*args_for(command, src), "--seg-method", regex])
    assert_error(r, 2, "--seg-method", "not a valid regular expression")


# -- option values (exit 2) ------------------------------------------------------------------


@pytest.mark.parametrize("value", ["0", "-1", "-4096", "4097", "100000", "9" * 30, "two", ""])
@pytest.mark.parametrize("option", ["--vpp", "--pp"])
@pytest.mark.parametrize("command", ["convert", "verify"])
def test_bad_pp_and_vpp(
    runner: CliRunner, tmp_path: Path, value: str, option: str, command: str
) -> None:
    src = write(tmp_path, SAMPLE)
    args = (
        [command, str(src), "-o", str(tmp_path / "o.pb")]
        if command == "convert"
        else [
            command,
            str(src),
        ]
    )
    if option == "--pp" and command == "convert":
        args += ["--vpp", "2"]
    with nothing_written(tmp_path):
        r = runner.invoke(cli, [*args, option, value])
    assert_error(r, 2, option)


def test_pp_that_does_not_match_the_program(runner: CliRunner, tmp_path: Path) -> None:
    src = write(tmp_path, SAMPLE)
    with nothing_written(tmp_path):
        r = runner.invoke(cli, [*args_for("convert", src), "--pp", "3"])
        v = runner.invoke(cli, ["verify", str(src), "--pp", "3", "--json"])
    assert_error(r, 4, "--pp 3", "2 stage meshes")
    assert v.exit_code == 1 and '"V015"' in v.stdout


# -- output paths (exit 3, or 2 for the input itself) ------------------------------------------


def test_output_in_a_missing_directory(runner: CliRunner, tmp_path: Path) -> None:
    src = write(tmp_path, SAMPLE)
    with nothing_written(tmp_path):
        r = runner.invoke(cli, args_for("convert", src, tmp_path / "missing" / "o.pb"))
    assert_error(r, 3, "missing", "does not exist")


def test_output_under_a_file(runner: CliRunner, tmp_path: Path) -> None:
    src = write(tmp_path, SAMPLE)
    with nothing_written(tmp_path):
        r = runner.invoke(cli, args_for("convert", src, src / "o.pb"))
    assert_error(r, 3, "is not a directory")


def test_output_is_a_directory(runner: CliRunner, tmp_path: Path) -> None:
    src = write(tmp_path, SAMPLE)
    (tmp_path / "o.pb").mkdir()
    with nothing_written(tmp_path):
        r = runner.invoke(cli, args_for("convert", src, tmp_path / "o.pb"))
    assert_error(r, 3, "is a directory")


@pytest.mark.parametrize("command", ["convert", "dump"])
def test_output_in_a_read_only_directory(runner: CliRunner, tmp_path: Path, command: str) -> None:
    src = write(tmp_path, SAMPLE)
    if IS_ROOT:
        # chmod does not stop root; /proc refuses new files to everyone.
        if not Path("/proc/self").is_dir():
            pytest.skip("running as root without /proc: no read-only directory to write into")
        target = Path("/proc/vppctl-test-output.pb")
    else:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        target = ro / "o.pb"
    try:
        with nothing_written(tmp_path):
            r = runner.invoke(cli, args_for(command, src, target))
    finally:
        if not IS_ROOT:
            (tmp_path / "ro").chmod(0o755)
    assert_error(r, 3, "cannot write", target.name)
    assert not target.exists()


@pytest.mark.parametrize("spelling", ["same", "dotted", "symlink"])
@pytest.mark.parametrize("command", ["convert", "dump"])
def test_output_equal_to_the_input(
    runner: CliRunner, tmp_path: Path, spelling: str, command: str
) -> None:
    src = write(tmp_path, SAMPLE)
    if spelling == "same":
        out = src
    elif spelling == "dotted":
        out = tmp_path / "." / "prog.pb"
    else:
        out = tmp_path / "link.pb"
        out.symlink_to(src)
    with nothing_written(tmp_path):
        r = runner.invoke(cli, args_for(command, src, out))
    assert_error(r, 2, "is the input")


# -- internal errors (exit 70) -----------------------------------------------------------------


def _boom(*args: object, **kwargs: object) -> object:
    raise RuntimeError("boom")


# Where a fault is injected: (command run, module, function replaced), one per stage of the
# commands (convert's plan, verify, inspect, dump's serialisation, the scan, the write).
INJECTION_POINTS = [
    ("convert", commands, "converted"),
    ("verify", commands, "verify_program"),
    ("inspect", commands, "summarize"),
    ("dump", save, "serialize"),
    ("convert", index, "scan_ops"),
    ("convert", files, "atomic_replace"),
]


@pytest.mark.parametrize(("command", "module", "name"), INJECTION_POINTS)
@pytest.mark.parametrize("debug", [False, True])
def test_unexpected_exception_is_exit_70_and_asks_to_report_it(
    runner: CliRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    module: object,
    name: str,
    debug: bool,
) -> None:
    monkeypatch.setattr(module, name, _boom)
    src = write(tmp_path, SAMPLE)
    args = args_for(command, src) if command != "dump" else ["dump", str(src)]
    with nothing_written(tmp_path):
        r = runner.invoke(cli, ["--debug", *args] if debug else args)
    assert r.exit_code == 70, r.output
    lines = r.stderr.strip().splitlines()
    assert lines[-1].startswith("Error: internal error (RuntimeError: boom)")
    assert "bug" in lines[-1] and "report" in lines[-1] and "--debug" in lines[-1]
    if debug:
        assert "Traceback (most recent call last)" in r.stderr
        assert 'raise RuntimeError("boom")' in r.stderr
    else:
        assert lines == lines[-1:]
        assert "Traceback" not in r.stderr


def test_an_interrupt_while_writing_into_a_device_says_it_may_hold_part(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupt(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(files, "_write_fd", interrupt)
    r = runner.invoke(cli, args_for("convert", write(tmp_path, SAMPLE), Path(os.devnull)))
    assert r.exit_code == 130
    assert r.stderr == (
        f"Error: interrupted; {os.devnull} may hold part of the output, nothing else was written\n"
    )


def test_keyboard_interrupt_writes_nothing(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupt(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(files, "atomic_replace", interrupt)
    src = write(tmp_path, SAMPLE)
    with nothing_written(tmp_path):
        r = runner.invoke(cli, args_for("convert", src))
    assert r.exit_code == 130
    assert r.stderr.strip() == "Error: interrupted; nothing was written"


# -- out of memory (exit 5) ---------------------------------------------------------------------
# tests/test_bounds.py runs each command under a real address-space limit; these check the
# message wherever the MemoryError comes from.


def _no_memory(*args: object, **kwargs: object) -> object:
    raise MemoryError


@pytest.mark.parametrize(("command", "module", "name"), INJECTION_POINTS)
def test_memory_error_anywhere_is_exit_5_with_what_the_command_needs(
    runner: CliRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    module: object,
    name: str,
) -> None:
    monkeypatch.setattr(module, name, _no_memory)
    src = write(tmp_path, SAMPLE)
    args = args_for(command, src) if command != "dump" else ["dump", str(src)]
    with nothing_written(tmp_path):
        r = runner.invoke(cli, args)
    assert r.exit_code == 5, r.output
    size = src.stat().st_size
    assert r.stderr.startswith("Error: out of memory: vppctl may need up to "), r.stderr
    assert f"for {src} ({size / 1024:.1f} KB; its bound is 3x the program" in r.stderr
    assert r.stderr.count("\n") == 1


def test_sample_out_of_memory_is_not_sized_from_its_output(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sample reads no program: the file it would replace says nothing of what it needs."""
    import vppctl.sample

    monkeypatch.setattr(vppctl.sample, "build_sample", _no_memory)
    out = tmp_path / "old.pb"
    out.write_bytes(b"\0" * (1 << 20))
    r = runner.invoke(cli, ["sample", "--layers", "2", "--pp", "2", "-o", str(out)])
    assert r.exit_code == 5, r.output
    assert r.stderr == (
        "Error: out of memory; raise the limit (ulimit -v) or run it where there is more memory\n"
    )
    assert out.read_bytes() == b"\0" * (1 << 20)


def test_out_of_memory_is_sized_from_the_input_passed_by_keyword(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vppctl.convert import ConvertOptions
    from vppctl.errors import OutOfMemoryError
    from vppctl.plan import PlanOptions

    monkeypatch.setattr(commands, "converted", _no_memory)
    src = write(tmp_path, SAMPLE)
    options = ConvertOptions(plan=PlanOptions(vpp=2))
    with pytest.raises(OutOfMemoryError) as caught:
        commands.convert_file(out=tmp_path / "o.pb", options=options, src=src)
    assert f"for {src} ({src.stat().st_size / 1024:.1f} KB;" in str(caught.value)


def test_the_out_of_memory_message_says_sizes_as_the_reports_do(tmp_path: Path) -> None:
    from vppctl.program.limits import out_of_memory
    from vppctl.report import human_bytes

    small = tmp_path / "small.pb"
    small.write_bytes(bytes(100))
    assert f"for {small} (100 B; its bound is 3x" in str(out_of_memory(small))
    assert human_bytes(100) == "100 B"  # as `inspect` says the file's size


def test_memory_error_outside_a_command_is_exit_5_too(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rendering the report runs after the command's guard: the CLI says it all the same."""
    from vppctl.cli import program as cli_program

    monkeypatch.setattr(cli_program, "print_json", _no_memory)
    r = runner.invoke(cli, ["inspect", str(write(tmp_path, SAMPLE)), "--json"])
    assert r.exit_code == 5
    assert r.stderr == (
        "Error: out of memory; raise the limit (ulimit -v) or run it where there is more memory\n"
    )


def test_help_lists_every_exit_code(runner: CliRunner) -> None:
    from vppctl import errors

    codes = {v for k, v in vars(errors).items() if k.startswith("EXIT_")}
    shown = runner.invoke(cli, ["--help"]).stdout.split("Exit codes:")[1]
    assert {int(c) for c in re.findall(r"\b(\d+)\s+[a-z]", shown)} == codes
