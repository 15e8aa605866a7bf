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

The tests here also cover vppctl/cli/base.py and vppctl/units.py, which have no test file of
their own.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from commandline import invoke
from failures import SAMPLE, args_for, assert_error, nothing_written, refuse, write
from google.protobuf.message import DecodeError

from vppctl import commands
from vppctl.engine import index
from vppctl.program import files, save
from vppctl.program._proto import program_pb2 as pb
from vppctl.program._proto import view_pb2 as view

READERS = ("convert", "verify", "inspect", "dump")
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


# -- files that cannot be read or are not programs (exit 3) ---------------------------------


@pytest.mark.parametrize("command", READERS)
def test_missing_file(tmp_path: Path, command: str) -> None:
    refuse(tmp_path, command, tmp_path / "nope.pb", 3, "nope.pb", "no such file")


@pytest.mark.parametrize("command", READERS)
def test_directory(tmp_path: Path, command: str) -> None:
    (tmp_path / "dir.pb").mkdir()
    refuse(tmp_path, command, tmp_path / "dir.pb", 3, "dir.pb", "is a directory")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("command", READERS)
def test_fifo_nobody_writes_to_is_refused_after_the_wait(
    tmp_path: Path, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A FIFO is read (that is what `<(cmd)` gives), but one that no process opens for
    writing must not block forever: refused after vppctl.program.files.WAIT_SECONDS."""
    monkeypatch.setattr(files, "WAIT_SECONDS", 0.3)
    fifo = tmp_path / "pipe.pb"
    os.mkfifo(fifo)
    start = time.monotonic()
    refuse(tmp_path, command, fifo, 3, "pipe.pb", "FIFO", "no process opened it")
    assert time.monotonic() - start < 5


@pytest.mark.skipif(IS_ROOT, reason="running as root: chmod 000 does not stop root reading")
@pytest.mark.parametrize("command", READERS)
def test_unreadable_file(tmp_path: Path, command: str) -> None:
    src = write(tmp_path, SAMPLE)
    src.chmod(0)
    try:
        refuse(tmp_path, command, src, 3, "prog.pb", "permission denied")
    finally:
        src.chmod(0o644)


@pytest.mark.parametrize("command", READERS)
def test_unreadable_file_simulated(
    tmp_path: Path, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What reading a chmod-000 file does for a user who is not root (runs as root too)."""

    def denied(path: str) -> int:
        raise PermissionError(13, "Permission denied", path)

    src = write(tmp_path, SAMPLE)
    monkeypatch.setattr(files, "_open_read", denied)
    refuse(tmp_path, command, src, 3, "prog.pb", "permission denied")


@pytest.mark.parametrize("command", READERS)
@pytest.mark.parametrize("name", ["prog.pb", "prog.pbtxt"])
def test_empty_file(tmp_path: Path, command: str, name: str) -> None:
    src = write(tmp_path, b"", name)
    refuse(tmp_path, command, src, 3, name, "empty")


@pytest.mark.parametrize("command", READERS)
def test_truncated_file(tmp_path: Path, command: str) -> None:
    src = write(tmp_path, SAMPLE[: len(SAMPLE) // 2])
    refuse(tmp_path, command, src, 3, "prog.pb", "not a program")


@pytest.mark.parametrize("command", READERS)
def test_random_bytes(tmp_path: Path, command: str) -> None:
    import random

    src = write(tmp_path, random.Random(4).randbytes(4096))
    refuse(tmp_path, command, src, 3, "prog.pb", "not a program")


@pytest.mark.parametrize("command", READERS)
def test_random_text(tmp_path: Path, command: str) -> None:
    src = write(tmp_path, b"blocks { idx: 0 parent_idx: -1\n ops { type: \x01\n } }", "p.pbtxt")
    refuse(tmp_path, command, src, 3, "p.pbtxt", "not a program in text format")


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
    tmp_path: Path, command: str, message: object
) -> None:
    src = write(tmp_path, message.SerializeToString())  # type: ignore[attr-defined]
    refuse(tmp_path, command, src, 3, "prog.pb", "not a program")


@pytest.mark.parametrize("command", READERS)
def test_file_over_2_gib_is_refused_without_reading_it(
    tmp_path: Path, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = tmp_path / "big.pb"
    with big.open("wb") as f:
        f.truncate(2**31)  # sparse: no disk space used
    monkeypatch.setattr(files, "_read_regular", _must_not_read)
    start = time.monotonic()
    refuse(tmp_path, command, big, 3, "big.pb", "2.0 GiB", "2 GiB")
    assert time.monotonic() - start < 2


def _must_not_read(fd: int, size: int, *args: object) -> bytes:
    raise AssertionError(f"{size} bytes were read")


def test_block_numbering_is_checked(tmp_path: Path) -> None:
    msg = pb.ProgramDesc.FromString(SAMPLE)
    msg.blocks.add(idx=5, parent_idx=0)
    src = write(tmp_path, msg.SerializePartialToString())
    refuse(tmp_path, "convert", src, 3, "block 1 says it is block 5")


def test_corrupt_op_bytes_are_refused(tmp_path: Path) -> None:
    msg = pb.ProgramDesc.FromString(SAMPLE)
    blob = bytearray(msg.SerializeToString())
    # Corrupt the first op's type: a length past the end of the op.
    at = blob.index(b"\x1a\x0flookup_table_v2")
    blob[at + 1] = 0x7F
    src = write(tmp_path, bytes(blob))
    for command in READERS:
        refuse(tmp_path, command, src, 3, "not a program")


@pytest.mark.parametrize("kind", ["parameter", "activation"])
def test_bytes_vppctl_does_not_read_are_copied_as_read(tmp_path: Path, kind: str) -> None:
    """docs/io.md: a variable's attrs are not read, so garbage there is no refusal (for a
    parameter as for any variable): every reader accepts it and convert writes it as read."""
    lazy = view.LazyProgram.FromString(SAMPLE)
    block = lazy.blocks[0]
    garbage = b"\x3a\x03\xff\xff\xff"  # VarDesc.attrs (7): three bytes that parse as nothing
    wanted = kind == "parameter"
    at = next(
        i
        for i, raw in enumerate(block.vars)
        if (var := pb.VarDesc.FromString(raw)).is_parameter == wanted and var.persistable == wanted
    )
    block.vars[at] += garbage
    src = write(tmp_path, lazy.SerializeToString())
    for command in ("verify", "inspect"):
        invoke(command, str(src), exit_code=0)
    out = tmp_path / "out.pb"
    invoke("convert", str(src), "--vpp", "2", "-o", str(out), exit_code=0)
    written = view.LazyProgram.FromString(out.read_bytes()).blocks[0].vars[at]
    assert written.endswith(garbage)
    with pytest.raises(DecodeError):
        pb.VarDesc.FromString(written)


# -- option values (exit 2) ------------------------------------------------------------------


@pytest.mark.parametrize("value", ["0", "-1", "-4096", "4097", "100000", "9" * 30, "two", ""])
@pytest.mark.parametrize("option", ["--vpp", "--pp"])
@pytest.mark.parametrize("command", ["convert", "verify"])
def test_bad_pp_and_vpp(tmp_path: Path, value: str, option: str, command: str) -> None:
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
        r = invoke(*args, option, value, exit_code=None)
    assert_error(r, 2, option)


def test_pp_that_does_not_match_the_program(tmp_path: Path) -> None:
    src = write(tmp_path, SAMPLE)
    with nothing_written(tmp_path):
        r = invoke(*args_for("convert", src), "--pp", "3", exit_code=None)
        v = invoke("verify", str(src), "--pp", "3", "--json", exit_code=None)
    assert_error(r, 4, "--pp 3", "2 stage meshes")
    assert v.exit_code == 1 and '"V015"' in v.stdout


# -- output paths (exit 3, or 2 for the input itself) ------------------------------------------


def test_output_in_a_missing_directory(tmp_path: Path) -> None:
    src = write(tmp_path, SAMPLE)
    with nothing_written(tmp_path):
        r = invoke(*args_for("convert", src, tmp_path / "missing" / "o.pb"), exit_code=None)
    assert_error(r, 3, "missing", "does not exist")


def test_output_under_a_file(tmp_path: Path) -> None:
    src = write(tmp_path, SAMPLE)
    with nothing_written(tmp_path):
        r = invoke(*args_for("convert", src, src / "o.pb"), exit_code=None)
    assert_error(r, 3, "is not a directory")


def test_output_is_a_directory(tmp_path: Path) -> None:
    src = write(tmp_path, SAMPLE)
    (tmp_path / "o.pb").mkdir()
    with nothing_written(tmp_path):
        r = invoke(*args_for("convert", src, tmp_path / "o.pb"), exit_code=None)
    assert_error(r, 3, "is a directory")


@pytest.mark.parametrize("command", ["convert", "dump"])
def test_output_in_a_read_only_directory(tmp_path: Path, command: str) -> None:
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
            r = invoke(*args_for(command, src, target), exit_code=None)
    finally:
        if not IS_ROOT:
            (tmp_path / "ro").chmod(0o755)
    assert_error(r, 3, "cannot write", target.name)
    assert not target.exists()


@pytest.mark.parametrize("spelling", ["same", "dotted", "symlink"])
@pytest.mark.parametrize("command", ["convert", "dump"])
def test_output_equal_to_the_input(tmp_path: Path, spelling: str, command: str) -> None:
    src = write(tmp_path, SAMPLE)
    if spelling == "same":
        out = src
    elif spelling == "dotted":
        out = tmp_path / "." / "prog.pb"
    else:
        out = tmp_path / "link.pb"
        out.symlink_to(src)
    with nothing_written(tmp_path):
        r = invoke(*args_for(command, src, out), exit_code=None)
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
        r = invoke(*["--debug", *args] if debug else args, exit_code=None)
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
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupt(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(files, "_write_fd", interrupt)
    r = invoke(*args_for("convert", write(tmp_path, SAMPLE), Path(os.devnull)), exit_code=130)
    assert r.stderr == (
        f"Error: interrupted; {os.devnull} may hold part of the output, nothing else was written\n"
    )


def test_keyboard_interrupt_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupt(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(files, "atomic_replace", interrupt)
    src = write(tmp_path, SAMPLE)
    with nothing_written(tmp_path):
        r = invoke(*args_for("convert", src), exit_code=None)
    assert r.exit_code == 130
    assert r.stderr.strip() == "Error: interrupted; nothing was written"


# -- out of memory (exit 5) ---------------------------------------------------------------------
# tests/contract/test_bounds.py runs each command under a real address-space limit; these check the
# message wherever the MemoryError comes from.


def _no_memory(*args: object, **kwargs: object) -> object:
    raise MemoryError


@pytest.mark.parametrize(("command", "module", "name"), INJECTION_POINTS)
def test_memory_error_anywhere_is_exit_5_with_what_the_command_needs(
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
        r = invoke(*args, exit_code=None)
    assert r.exit_code == 5, r.output
    size = src.stat().st_size
    assert r.stderr.startswith("Error: out of memory: vppctl may need up to "), r.stderr
    assert f"for {src} ({size / 1024:.1f} KB; its bound is 3x the program" in r.stderr
    assert r.stderr.count("\n") == 1


def test_sample_out_of_memory_is_not_sized_from_its_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sample reads no program: the file it would replace says nothing of what it needs."""
    import vppctl.sample

    monkeypatch.setattr(vppctl.sample, "build_sample", _no_memory)
    out = tmp_path / "old.pb"
    out.write_bytes(b"\0" * (1 << 20))
    r = invoke("sample", "--layers", "2", "--pp", "2", "-o", str(out), exit_code=5)
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


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (0, "0 s"),
        (1.23456, "1.235 s"),
        (120, "120 s"),
        (0.0414, "41.4 ms"),
        (0.001, "1 ms"),
        (0.000999, "999 us"),
        (2.5e-9, "2.5 ns"),
    ],
)
def test_times_are_said_in_one_style(seconds: float, said: str) -> None:
    """Seconds as every report with measured costs says them (vppctl/units.py)."""
    from vppctl.units import seconds_text

    assert seconds_text(seconds) == said


def test_memory_error_outside_a_command_is_exit_5_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rendering the report runs after the command's guard: the CLI says it all the same."""
    from vppctl.cli import program as cli_program

    monkeypatch.setattr(cli_program, "print_json", _no_memory)
    r = invoke("inspect", str(write(tmp_path, SAMPLE)), "--json", exit_code=5)
    assert r.stderr == (
        "Error: out of memory; raise the limit (ulimit -v) or run it where there is more memory\n"
    )


def test_help_lists_every_exit_code() -> None:
    from vppctl import errors

    codes = {v for k, v in vars(errors).items() if k.startswith("EXIT_")}
    shown = invoke("--help").stdout.split("Exit codes:")[1]
    assert {int(c) for c in re.findall(r"\b(\d+)\s+[a-z]", shown)} == codes
