"""The CLI keeps the I/O contract (docs/io.md), as a user at a shell sees it.

Real processes (`python -m vppctl`), real pipes, devices made with mknod and FIFOs made
with mkfifo in a temporary directory. CI runs these as root, as containers usually do.

The tests here also cover vppctl/__main__.py, which has no test file of its own.
"""

from __future__ import annotations

import os
import pty
import stat
import subprocess
import sys
import threading
from pathlib import Path

import paths
import pytest

from vppctl.program._proto import program_pb2 as pb
from vppctl.sample import SampleOptions, build_sample

pytestmark = pytest.mark.heavy  # tens of seconds: started first (tests/conftest.py)

SAMPLE = build_sample(SampleOptions(layers=8, pp=4, hidden=64, vocab=1000))
ROOT = paths.ROOT


def vppctl(
    *args: str | Path, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "vppctl", *map(str, args)],
        input=stdin,
        capture_output=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        check=False,
    )


@pytest.fixture
def src(tmp_path: Path) -> Path:
    path = tmp_path / "prog.pb"
    path.write_bytes(SAMPLE)
    return path


def one_error_line(r: subprocess.CompletedProcess[bytes]) -> str:
    lines = r.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), r.stderr
    assert b"Traceback" not in r.stderr
    return lines[0]


# -- "-" is stdin and stdout ---------------------------------------------------------------


@pytest.mark.parametrize("command", ["inspect", "verify", "dump"])
def test_dash_reads_the_program_from_stdin(command: str) -> None:
    r = vppctl(command, "-", stdin=SAMPLE)
    assert r.returncode in (0, 1), r.stderr  # verify may report violations, never fail to read
    assert b"Error" not in r.stderr and r.stdout


def test_convert_dash_to_dash_is_a_filter(tmp_path: Path) -> None:
    r = vppctl("convert", "-", "--vpp", "2", stdin=SAMPLE)  # no -o: stdin -> stdout
    assert r.returncode == 0, r.stderr
    assert pb.ProgramDesc.FromString(r.stdout).pipeline_plan.vpp == 2
    assert b"pp 4 x vpp 2" in r.stderr  # the table goes to stderr when stdout holds the program
    assert os.listdir(tmp_path) == []


def test_convert_json_goes_to_stderr_when_the_program_goes_to_stdout(src: Path) -> None:
    r = vppctl("convert", src, "--vpp", "2", "-o", "-", "--json")
    assert r.returncode == 0, r.stderr
    assert pb.ProgramDesc.FromString(r.stdout).pipeline_plan.vpp == 2
    assert b'"vpp": 2' in r.stderr


def test_text_on_stdin_is_detected(src: Path) -> None:
    text = vppctl("dump", src).stdout
    r = vppctl("convert", "-", "--vpp", "2", "-o", "-", stdin=text)
    assert r.returncode == 0, r.stderr
    assert pb.ProgramDesc.FromString(r.stdout).pipeline_plan.vpp == 2


def test_dump_dash_writes_binary_and_sample_dash_writes_the_program(src: Path) -> None:
    binary = vppctl("dump", src, "-o", "-")
    assert binary.returncode == 0 and binary.stdout == SAMPLE
    made = vppctl("sample", "--layers", "8", "--pp", "4", "--hidden", "64", "--vocab", "1000")
    assert made.returncode == 2  # -o is required
    made = vppctl(
        "sample", "--layers", "8", "--pp", "4", "--hidden", "64", "--vocab", "1000", "-o", "-"
    )
    assert made.returncode == 0 and made.stdout == SAMPLE


def test_binary_onto_a_terminal_is_refused_with_the_fix(src: Path) -> None:
    leader, follower = pty.openpty()
    try:
        r = subprocess.run(
            [sys.executable, "-m", "vppctl", "convert", str(src), "--vpp", "2", "-o", "-"],
            stdout=follower,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
    finally:
        os.close(follower)
        os.close(leader)
    assert r.returncode == 2
    assert "terminal" in one_error_line(r)


# -- options that contradict; paths that cannot be outputs ---------------------------------


def test_in_place_with_an_output_is_a_usage_error_and_touches_nothing(
    src: Path, tmp_path: Path
) -> None:
    before = src.stat()
    r = vppctl("convert", src, "--vpp", "2", "--in-place", "-o", tmp_path / "out.pb")
    assert r.returncode == 2
    assert "--in-place" in one_error_line(r)
    assert sorted(os.listdir(tmp_path)) == ["prog.pb"]
    assert src.read_bytes() == SAMPLE and src.stat().st_mtime_ns == before.st_mtime_ns


def test_in_place_on_a_symlink_converts_the_target_and_keeps_the_link(
    src: Path, tmp_path: Path
) -> None:
    link = tmp_path / "link.pb"
    link.symlink_to(src.name)
    r = vppctl("convert", link, "--vpp", "2", "--in-place", "-q")
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and os.readlink(link) == src.name
    assert pb.ProgramDesc.FromString(src.read_bytes()).pipeline_plan.vpp == 2


@pytest.mark.parametrize("suffix", ["/", "dir/"])
def test_an_output_ending_in_a_slash_is_refused(src: Path, tmp_path: Path, suffix: str) -> None:
    (tmp_path / "dir").mkdir()
    target = f"{tmp_path}/{suffix}" if suffix == "dir/" else f"{tmp_path}/new.pb/"
    r = vppctl("convert", src, "--vpp", "2", "-o", target)
    assert r.returncode == 3
    one_error_line(r)
    assert sorted(os.listdir(tmp_path)) == ["dir", "prog.pb"]
    assert os.listdir(tmp_path / "dir") == []


def test_a_file_named_with_a_trailing_slash_is_not_overwritten(src: Path, tmp_path: Path) -> None:
    old = tmp_path / "old.pb"
    old.write_bytes(b"keep me")
    r = vppctl("convert", src, "--vpp", "2", "-o", f"{old}/")
    assert r.returncode == 3
    assert old.read_bytes() == b"keep me"


@pytest.mark.parametrize("how", ["same", "hardlink", "symlink"])
def test_an_output_that_is_the_input_is_refused_by_every_command(
    src: Path, tmp_path: Path, how: str
) -> None:
    other = tmp_path / "other.pb"
    if how == "hardlink":
        os.link(src, other)
    elif how == "symlink":
        other.symlink_to(src)
    out = src if how == "same" else other
    for args in (
        ("convert", src, "--vpp", "2", "-o", out),
        ("dump", src, "-o", out),
        ("simulate", src, "--vpp", "2", "-m", "8", "--svg", out),
        ("simulate", src, "--vpp", "2", "-m", "8", "--trace", out),
    ):
        r = vppctl(*args)
        assert r.returncode == 2, (args, r.stderr)
        assert "is the input" in one_error_line(r)
        assert src.read_bytes() == SAMPLE


def test_a_set_uid_output_is_replaced_without_the_bit(src: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.pb"
    out.write_bytes(b"old")
    out.chmod(0o4755)
    r = vppctl("convert", src, "--vpp", "2", "-o", out, "-q")
    assert r.returncode == 0, r.stderr
    mode = out.stat().st_mode
    assert not mode & (stat.S_ISUID | stat.S_ISGID)
    assert mode & 0o777 == 0o755


# -- devices and FIFOs stay what they are --------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ("convert", "{src}", "--vpp", "2", "-o", "{dev}"),
        ("dump", "{src}", "-o", "{dev}"),
        ("sample", "--layers", "8", "--pp", "4", "-o", "{dev}"),
        ("simulate", "{src}", "--vpp", "2", "-m", "8", "--svg", "{dev}"),
    ],
    ids=lambda c: c[0],
)
def test_a_null_device_made_with_mknod_is_written_into_and_stays_a_device(
    src: Path, tmp_path: Path, command: tuple[str, ...]
) -> None:
    dev = tmp_path / "null"
    os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    r = vppctl(*(a.format(src=src, dev=dev) for a in command))
    assert r.returncode == 0, r.stderr
    assert stat.S_ISCHR(dev.lstat().st_mode) and dev.lstat().st_rdev == os.makedev(1, 3)


def test_a_full_device_says_no_space_left_and_exits_3(src: Path, tmp_path: Path) -> None:
    dev = tmp_path / "full"
    os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    r = vppctl("convert", src, "--vpp", "2", "-o", dev)
    assert r.returncode == 3
    assert "no space left" in one_error_line(r)
    assert stat.S_ISCHR(dev.lstat().st_mode)


def test_a_fifo_output_is_written_for_its_reader_and_stays_a_fifo(
    src: Path, tmp_path: Path
) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    r = vppctl("dump", src, "-o", fifo)
    reader.join(30)
    assert r.returncode == 0, r.stderr
    assert got == [SAMPLE]
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_fifo_input_is_read(src: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(SAMPLE))
    writer.start()
    r = vppctl("inspect", fifo, "--json")
    writer.join(30)
    assert r.returncode == 0, r.stderr
    assert b'"layout": "plain"' in r.stdout


# -- pipes and encodings -------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("inspect", "{src}"),
        ("convert", "{src}", "--vpp", "2", "-o", "{out}"),
        ("simulate", "--pp", "8", "--vpp", "2", "-m", "64"),
        ("dump", "{src}"),
    ],
    ids=lambda a: a[0],
)
def test_a_reader_that_stops_early_is_not_an_error(
    src: Path, tmp_path: Path, args: tuple[str, ...]
) -> None:
    out = tmp_path / "out.pb"
    argv = [a.format(src=src, out=out) for a in args]
    producer = subprocess.Popen(
        [sys.executable, "-m", "vppctl", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert producer.stdout is not None and producer.stderr is not None
    producer.stdout.readline()  # `| head -1`
    producer.stdout.close()
    err = producer.stderr.read()
    assert producer.wait(60) == 0, err
    assert b"Traceback" not in err and b"Error" not in err
    if args[0] == "convert":  # the output written before the reader left stays
        assert pb.ProgramDesc.FromString(out.read_bytes()).pipeline_plan.vpp == 2


def test_an_ascii_terminal_gets_ascii_and_exit_0(tmp_path: Path) -> None:
    src = tmp_path / "prog24.pb"  # 24 layers: three per segment, shown as a range with "…"
    src.write_bytes(build_sample(SampleOptions(layers=24, pp=4, hidden=64, vocab=1000)))
    out = tmp_path / "out.pb"
    r = vppctl("convert", src, "--vpp", "2", "-o", out, env={"PYTHONIOENCODING": "ascii"})
    assert r.returncode == 0, r.stderr
    r.stdout.decode("ascii")  # every byte is ASCII, on both streams
    r.stderr.decode("ascii")
    assert b"DecoderLayer..._2 (3)" in r.stdout
    assert pb.ProgramDesc.FromString(out.read_bytes()).pipeline_plan.vpp == 2
