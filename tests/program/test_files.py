"""The I/O contract (issue 12): what happens for each kind of output and input path.

Outputs go through `vppctl.program.files.resolve_output(spec, binary=..., inputs=...)` and
`Output.write`; programs through `vppctl.program.save.write_program`; inputs through
`vppctl.program.load.read_program` (which reads with `vppctl.program.files.read_input`). Special
files are made in temporary directories with mknod (as root, as CI runs) and
mkfifo; FIFOs get a reader or writer thread; stdout, stdin and terminals are
tested in child processes (a pty stands in for the terminal). The last section
runs the current CLI over the same paths.

One behaviour per test; each asserts that the path is still what it was (a
device stays a device, a link a link) and that nothing else was left.
"""

from __future__ import annotations

import os
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from commandline import invoke
from hypothesis import given, settings
from hypothesis import strategies as st
from iohelpers import FifoReader, FifoWriter, child, kind, mknod_char
from programs import layered

from vppctl.errors import ConversionError, ProgramFileError, UsageError
from vppctl.program import files, save
from vppctl.program._proto import program_pb2 as pb
from vppctl.program.destinations import resolve_output
from vppctl.program.files import Output, read_input
from vppctl.program.load import (
    Program,
    is_text_name,
    parse_program,
    read_program,
    to_full,
)
from vppctl.program.save import check_size, serialize, write_program
from vppctl.program.sniff import MAX_PROGRAM_BYTES, looks_like_text

IS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not IS_ROOT, reason="mknod and chown need root (CI runs as root)")
PROGRAM = layered([0, 0, 1, 1], backward=True, optimizer=True)
DATA = PROGRAM.bytes()
OLD = b"an earlier output"


def program() -> Program:
    return parse_program(DATA)


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def write_to(spec: str | Path, data: bytes = DATA, **kwargs: object) -> Output:
    out = resolve_output(spec, binary=True, **kwargs)  # type: ignore[arg-type]
    out.write(data)
    return out


@pytest.fixture(autouse=True)
def short_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """FIFOs nobody opens are given up on quickly in tests."""
    monkeypatch.setattr(files, "WAIT_SECONDS", 0.3)


# -- regular files ---------------------------------------------------------------------------


def test_missing_output_is_created_with_the_umask_mode(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        out = write_to(tmp_path / "new.pb")
    finally:
        os.umask(old)
    assert out.kind == "file"
    assert (tmp_path / "new.pb").read_bytes() == DATA
    assert stat.S_IMODE((tmp_path / "new.pb").stat().st_mode) == 0o640
    assert names(tmp_path) == ["new.pb"]


def test_regular_output_is_replaced_keeping_its_permission_bits(tmp_path: Path) -> None:
    target = tmp_path / "out.pb"
    target.write_bytes(OLD)
    target.chmod(0o604)
    write_to(target)
    assert target.read_bytes() == DATA
    assert stat.S_IMODE(target.stat().st_mode) == 0o604


@pytest.mark.parametrize("bits", [stat.S_ISUID, stat.S_ISGID, stat.S_ISVTX, 0o7000])
def test_set_uid_set_gid_and_sticky_bits_are_not_carried_onto_the_new_file(
    tmp_path: Path, bits: int
) -> None:
    target = tmp_path / "out.pb"
    target.write_bytes(OLD)
    target.chmod(0o755 | bits)
    assert stat.S_IMODE(target.stat().st_mode) & bits == bits
    write_to(target)
    assert stat.S_IMODE(target.stat().st_mode) == 0o755


@needs_root
def test_root_replacing_someone_elses_file_keeps_its_owner_and_group(tmp_path: Path) -> None:
    target = tmp_path / "out.pb"
    target.write_bytes(OLD)
    os.chown(target, 1234, 5678)
    write_to(target)
    st = target.stat()
    assert (st.st_uid, st.st_gid) == (1234, 5678)
    assert target.read_bytes() == DATA


def test_a_hard_linked_output_is_replaced_and_the_other_name_keeps_the_old_bytes(
    tmp_path: Path,
) -> None:
    """Replacing is by rename, as sed -i does: the output's other hard links keep the old file."""
    target, other = tmp_path / "out.pb", tmp_path / "other.pb"
    target.write_bytes(OLD)
    os.link(target, other)
    out = write_to(target)
    assert target.read_bytes() == DATA
    assert other.read_bytes() == OLD
    assert out.warnings() == [
        f"{target} had 1 other hard link: it keeps the old bytes, and {target} is now a new "
        "file (as with sed -i)"
    ]


@pytest.mark.parametrize("command", ["convert --in-place", "convert -o", "dump -o"])
def test_the_command_warns_that_a_hard_link_keeps_the_old_bytes(
    tmp_path: Path, command: str
) -> None:
    src = tmp_path / "in.pb"
    src.write_bytes(DATA)
    target = src if command == "convert --in-place" else tmp_path / "out.pb"
    if target != src:
        target.write_bytes(OLD)
    os.link(target, tmp_path / "other")
    verb, flag = command.split()
    args = [verb, str(src), *(["--vpp", "2"] if verb == "convert" else [])]
    args += [flag] if flag == "--in-place" else [flag, str(target)]
    r = invoke(*args)
    assert f"warning: {target} had 1 other hard link: it keeps the old bytes" in r.stderr
    assert (tmp_path / "other").read_bytes() == (DATA if target == src else OLD)


@pytest.mark.parametrize("command", ["sample", "dump", "convert"])
def test_the_json_carries_the_warning_that_a_hard_link_keeps_the_old_bytes(
    tmp_path: Path, command: str
) -> None:
    import json

    src, target = tmp_path / "in.pb", tmp_path / "out.pb"
    src.write_bytes(DATA)
    target.write_bytes(OLD)
    os.link(target, tmp_path / "other")
    args = {
        "sample": ["sample", "--layers", "2", "--pp", "2"],
        "dump": ["dump", str(src)],
        "convert": ["convert", str(src), "--vpp", "2"],
    }[command]
    r = invoke(*args, "-o", str(target), "--json")
    warned = [w for w in json.loads(r.stdout)["warnings"] if "hard link" in w]
    assert warned == [
        f"{target} had 1 other hard link: it keeps the old bytes, and {target} is now a new "
        "file (as with sed -i)"
    ]


# A POSIX ACL as Linux stores it (the xattr system.posix_acl_access): version 2, then
# (tag, permissions, id) entries in tag order.
_ACL_TAGS = {"user::": 0x01, "user:": 0x02, "group::": 0x04, "group:": 0x08, "mask": 0x10}
_ACL_TAGS["other"] = 0x20
_NO_ID = 0xFFFFFFFF


def _acl(*entries: tuple[str, int, int]) -> bytes:
    return struct.pack("<I", 2) + b"".join(
        struct.pack("<HHI", _ACL_TAGS[tag], perms, uid) for tag, perms, uid in entries
    )


# Group r--, user 1234 rw-, mask rw-: the mode's group bits show the mask (rw-), so a copy
# of the mode alone widens the group to rw- and drops user 1234 (issue 21 item 3).
RESTRICTIVE = _acl(
    ("user::", 6, _NO_ID),
    ("user:", 6, 1234),
    ("group::", 4, _NO_ID),
    ("mask", 6, _NO_ID),
    ("other", 0, _NO_ID),
)


def _set_acl_and_xattr(target: Path) -> None:
    try:
        os.setxattr(target, "system.posix_acl_access", RESTRICTIVE)
        os.setxattr(target, "user.vppctl.origin", b"hand-made")
    except OSError as e:
        pytest.skip(f"this file system takes no ACLs or user xattrs ({e.strerror})")


@pytest.mark.skipif(not hasattr(os, "setxattr"), reason="no extended attributes on this system")
@pytest.mark.parametrize("how", ["--in-place", "-o"])
def test_acls_and_xattrs_survive_replacing_the_file(tmp_path: Path, how: str) -> None:
    """Was: the ACL and the xattr gone, the owning group widened from r-- to rw-."""
    src = tmp_path / "in.pb"
    src.write_bytes(DATA)
    target = src if how == "--in-place" else tmp_path / "out.pb"
    if target != src:
        target.write_bytes(OLD)
    target.chmod(0o660)
    _set_acl_and_xattr(target)
    args = [
        "convert",
        str(src),
        "--vpp",
        "2",
        *([how] if how == "--in-place" else [how, str(target)]),
    ]
    invoke(*args)
    assert target.read_bytes() not in (DATA, OLD)  # replaced: the converted program
    assert os.getxattr(target, "system.posix_acl_access") == RESTRICTIVE
    assert os.getxattr(target, "user.vppctl.origin") == b"hand-made"
    assert stat.S_IMODE(target.stat().st_mode) == 0o660  # the mask, as before


# -- symbolic links ----------------------------------------------------------------------------


def test_symlink_output_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    real, link = tmp_path / "real.pb", tmp_path / "link.pb"
    real.write_bytes(OLD)
    link.symlink_to("real.pb")
    out = write_to(link)
    assert out.target == tmp_path / "real.pb"
    assert kind(link) == "link" and os.readlink(link) == "real.pb"
    assert real.read_bytes() == DATA
    assert names(tmp_path) == ["link.pb", "real.pb"]


def test_a_chain_of_links_is_followed_to_its_end(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    real = tmp_path / "d" / "real.pb"
    real.write_bytes(OLD)
    (tmp_path / "one.pb").symlink_to("two.pb")
    (tmp_path / "two.pb").symlink_to(tmp_path / "d" / "three.pb")  # absolute
    (tmp_path / "d" / "three.pb").symlink_to("real.pb")  # relative to the link's directory
    write_to(tmp_path / "one.pb")
    assert real.read_bytes() == DATA
    assert [kind(tmp_path / n) for n in ("one.pb", "two.pb")] == ["link", "link"]
    assert kind(tmp_path / "d" / "three.pb") == "link"
    assert names(tmp_path / "d") == ["real.pb", "three.pb"]


def test_a_dangling_link_creates_its_target(tmp_path: Path) -> None:
    link = tmp_path / "link.pb"
    link.symlink_to("made.pb")
    write_to(link)
    assert kind(link) == "link"
    assert (tmp_path / "made.pb").read_bytes() == DATA


def test_a_dangling_link_into_a_missing_directory_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "link.pb"
    link.symlink_to("nowhere/made.pb")
    with pytest.raises(
        ProgramFileError, match=r"nowhere \(where the link .*link.pb points\) does not exist"
    ):
        write_to(link)
    assert names(tmp_path) == ["link.pb"]


def test_a_link_loop_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.pb").symlink_to("b.pb")
    (tmp_path / "b.pb").symlink_to("a.pb")
    with pytest.raises(ProgramFileError, match="too many levels of symbolic links"):
        write_to(tmp_path / "a.pb")


def test_a_link_to_a_directory_path_is_refused(tmp_path: Path) -> None:
    (tmp_path / "link.pb").symlink_to("somewhere/")
    with pytest.raises(ProgramFileError, match="a directory path"):
        write_to(tmp_path / "link.pb")


def test_a_link_to_a_device_writes_into_the_device(tmp_path: Path) -> None:
    link = tmp_path / "null.pb"
    link.symlink_to("/dev/null")
    out = write_to(link)
    assert out.kind == "device"
    assert kind(link) == "link" and kind(Path("/dev/null")) == "char"


# -- paths that cannot be written --------------------------------------------------------------


@pytest.mark.parametrize("existing", [False, True])
def test_a_trailing_slash_is_refused(tmp_path: Path, existing: bool) -> None:
    target = tmp_path / "out.pb"
    if existing:
        target.write_bytes(OLD)
    with pytest.raises(ProgramFileError, match="ends with '/'"):
        resolve_output(f"{target}/", binary=True)
    assert names(tmp_path) == (["out.pb"] if existing else [])
    if existing:
        assert target.read_bytes() == OLD


def test_a_path_under_a_regular_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(OLD)
    with pytest.raises(ProgramFileError, match="file is not a directory"):
        resolve_output(tmp_path / "file" / "out.pb", binary=True)


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ProgramFileError, match="it is a directory"):
        resolve_output(tmp_path, binary=True)


def test_a_missing_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ProgramFileError, match="missing does not exist"):
        resolve_output(tmp_path / "missing" / "out.pb", binary=True)


def test_a_socket_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        with pytest.raises(ProgramFileError, match="it is a socket"):
            resolve_output(path, binary=True)
        with pytest.raises(ProgramFileError, match="it is a socket"):
            read_input(path, limit=100)
    assert kind(path) == "socket"


# -- devices and FIFOs -----------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["/dev/null", "mknod"])
def test_dev_null_is_written_into_and_stays_a_device(tmp_path: Path, spec: str) -> None:
    path = mknod_char(tmp_path / "null", 1, 3) if spec == "mknod" else Path(spec)
    if spec == "mknod" and not IS_ROOT:
        pytest.skip("mknod needs root")
    before = path.stat()
    written, _ = write_program(program(), resolve_output(path, binary=True))
    after = path.stat()
    assert written == len(DATA)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
    assert after.st_ino == before.st_ino
    assert names(tmp_path) == (["null"] if spec == "mknod" else [])


@needs_root
def test_dev_full_reports_no_space_left_and_stays_a_device(tmp_path: Path) -> None:
    path = mknod_char(tmp_path / "full", 1, 7)
    with pytest.raises(ProgramFileError, match="no space left on device") as e:
        write_program(program(), resolve_output(path, binary=True))
    assert e.value.exit_code == 3
    assert kind(path) == "char" and path.stat().st_rdev == os.makedev(1, 7)
    assert names(tmp_path) == ["full"]


def test_real_dev_full_reports_no_space_left() -> None:
    with pytest.raises(ProgramFileError, match="cannot write /dev/full: no space left on device"):
        write_to("/dev/full")


def test_a_fifo_output_is_written_into_for_its_reader(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = FifoReader(fifo, delay=0.1)  # comes a little after the writer
    reader.start()
    write_program(program(), resolve_output(fifo, binary=True))
    reader.join(10)
    assert reader.data == DATA
    assert kind(fifo) == "fifo" and names(tmp_path) == ["pipe"]


def test_a_fifo_output_nobody_reads_is_refused_after_the_wait(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    start = time.monotonic()
    with pytest.raises(ProgramFileError, match="no process opened it for reading within 0.3 s"):
        write_to(fifo)
    assert 0.3 <= time.monotonic() - start < 3
    assert kind(fifo) == "fifo"


def test_a_fifo_whose_reader_leaves_raises_broken_pipe(tmp_path: Path) -> None:
    """The CLI applies one policy to a pipe closed early; the library does not hide it."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def read_one_byte() -> None:
        with open(fifo, "rb") as f:
            f.read(1)

    reader = threading.Thread(target=read_one_byte, daemon=True)
    reader.start()
    with pytest.raises(BrokenPipeError):
        write_to(fifo, b"x" * (8 << 20))
    reader.join(5)


# -- an output that is an input ---------------------------------------------------------------


@pytest.mark.parametrize(
    "spelling", ["same", "dotted", "symlink", "hard link", "link to a link", "linked directory"]
)
def test_an_output_that_is_an_input_is_refused(tmp_path: Path, spelling: str) -> None:
    src = tmp_path / "in.pb"
    src.write_bytes(DATA)
    out = {
        "same": src,
        "dotted": tmp_path / "." / "in.pb",
        "symlink": tmp_path / "link.pb",
        "hard link": tmp_path / "hard.pb",
        "link to a link": tmp_path / "link2.pb",
        "linked directory": tmp_path / "dirlink" / "in.pb",
    }[spelling]
    (tmp_path / "link.pb").symlink_to("in.pb")
    (tmp_path / "link2.pb").symlink_to("link.pb")
    os.link(src, tmp_path / "hard.pb")
    (tmp_path / "dirlink").symlink_to(tmp_path)
    with pytest.raises(UsageError, match="is the input") as e:
        resolve_output(out, binary=True, inputs=[tmp_path / "other.pb", src])
    assert e.value.exit_code == 2
    assert src.read_bytes() == DATA


def test_the_refusal_ends_with_the_fix_the_command_gives(tmp_path: Path) -> None:
    src = tmp_path / "in.pb"
    src.write_bytes(DATA)
    with pytest.raises(UsageError, match=r"is the input .*in\.pb; pass --in-place$"):
        resolve_output(src, binary=True, inputs=[src], fix="pass --in-place")


def test_an_output_naming_a_missing_input_is_refused_by_its_final_path(tmp_path: Path) -> None:
    (tmp_path / "link.pb").symlink_to("later.pb")
    with pytest.raises(UsageError, match="is the input"):
        resolve_output(tmp_path / "link.pb", binary=True, inputs=[tmp_path / "later.pb"])


def test_a_device_that_is_an_input_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is the input"):
        resolve_output("/dev/null", binary=True, inputs=["/dev/null"])


def test_other_files_and_stdin_are_not_the_output(tmp_path: Path) -> None:
    src, copy = tmp_path / "in.pb", tmp_path / "sub" / "in.pb"
    copy.parent.mkdir()
    src.write_bytes(DATA)
    copy.write_bytes(DATA)  # same name and bytes, another file
    out = resolve_output(copy, binary=True, inputs=[src, "-", None])
    assert out.kind == "file"


@pytest.mark.parametrize("output", ["/dev/stdin", "the file itself"])
def test_the_file_stdin_reads_is_not_the_output(tmp_path: Path, output: str) -> None:
    """Was: `convert - -o /dev/stdin <>IN` exit 0, the output appended to the input."""
    src = tmp_path / "in.pb"
    src.write_bytes(DATA)
    out = str(src) if output == "the file itself" else output
    with open(src, "r+b") as f:  # the shell's <>IN: stdin open for reading and writing
        r = subprocess.run(
            [sys.executable, "-m", "vppctl", "convert", "-", "--vpp", "2", "-o", out],
            stdin=f,
            capture_output=True,
            timeout=60,
            check=False,
        )
    assert r.returncode == 2, r.stderr
    assert r.stderr.decode() == (
        f"Error: the output {out} is the file stdin reads (the input '-'); write to another path\n"
    )
    assert src.read_bytes() == DATA
    assert names(tmp_path) == ["in.pb"]


def test_stdin_from_a_file_may_be_written_elsewhere(tmp_path: Path) -> None:
    src, out = tmp_path / "in.pb", tmp_path / "out.pb"
    src.write_bytes(DATA)
    with open(src, "rb") as f:
        r = subprocess.run(
            [sys.executable, "-m", "vppctl", "convert", "-", "--vpp", "2", "-o", str(out)],
            stdin=f,
            capture_output=True,
            timeout=60,
            check=False,
        )
    assert r.returncode == 0, r.stderr
    assert out.exists() and src.read_bytes() == DATA


# -- stdout, own file descriptors, terminals (child processes) --------------------------------


def run_child(*args: str, **kwargs: object) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(child(*args), capture_output=True, timeout=30, **kwargs)  # type: ignore[call-overload, no-any-return]


def test_dash_writes_to_stdout() -> None:
    r = run_child("write-stdout", "-", "1", "program bytes")
    assert (r.returncode, r.stdout, r.stderr) == (0, b"program bytes", b"")


def test_dev_stdout_writes_into_the_inherited_descriptor(tmp_path: Path) -> None:
    """Like `> /dev/stdout` in a shell: into fd 1 as it is, here a file opened for appending,
    not truncated and not replaced."""
    log = tmp_path / "log"
    log.write_bytes(b"before\n")
    inode = log.stat().st_ino
    with open(log, "ab") as f:
        r = subprocess.run(
            child("write-stdout", "/dev/stdout", "1", "program"), stdout=f, timeout=30
        )
    assert r.returncode == 0
    assert log.read_bytes() == b"before\nprogram"
    assert log.stat().st_ino == inode


def test_dev_fd_of_an_inherited_descriptor_is_written_into(tmp_path: Path) -> None:
    log = tmp_path / "log"
    with open(log, "wb") as f:
        fd = f.fileno()
        r = subprocess.run(
            child("write-stdout", f"/dev/fd/{fd}", "0", "text"), pass_fds=(fd,), timeout=30
        )
    assert r.returncode == 0 and log.read_bytes() == b"text"


def test_binary_to_a_terminal_is_refused_and_text_is_allowed() -> None:
    import pty

    for spec in ("-", "/dev/stdout"):
        main, tty = pty.openpty()
        try:
            r = subprocess.run(
                child("write-stdout", spec, "1", "x"), stdout=tty, stderr=subprocess.PIPE
            )
            assert r.returncode == 2, r.stderr
            assert b"refusing to write a binary program to" in r.stderr
            assert b"terminal" in r.stderr
            r = subprocess.run(
                child("write-stdout", spec, "0", "text ok"), stdout=tty, stderr=subprocess.PIPE
            )
            assert r.returncode == 0, r.stderr
            assert os.read(main, 100) == b"text ok"
        finally:
            os.close(main)
            os.close(tty)


def test_stdout_closed_early_raises_broken_pipe() -> None:
    proc = subprocess.Popen(
        child("write-stdout", "-", "1", "x", str(4 << 20)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read(10)
    proc.stdout.close()
    assert proc.wait(30) == 141
    assert proc.stderr.read() == b"broken pipe\n"


# -- inputs --------------------------------------------------------------------------------------


def run_reader(code: str, stdin: object) -> subprocess.CompletedProcess[bytes]:
    prelude = "import sys; from vppctl.program.load import read_program; "
    return subprocess.run(
        [sys.executable, "-c", prelude + code],
        stdin=stdin,  # type: ignore[arg-type]
        capture_output=True,
        timeout=30,
    )


@pytest.mark.parametrize("text", [False, True], ids=["binary", "text"])
def test_dash_reads_the_whole_program_from_stdin(tmp_path: Path, text: bool) -> None:
    data, _ = serialize(program(), text=text)
    src = tmp_path / "prog"
    src.write_bytes(data)
    with open(src, "rb") as f:
        r = run_reader("p = read_program('-'); print(p.source, len(p.blocks[0].ops))", f)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [b"stdin", str(len(PROGRAM.msg.blocks[0].ops)).encode()]


def test_stdin_redirected_from_a_file_over_2_gib_is_refused_by_its_size(tmp_path: Path) -> None:
    big = tmp_path / "big.pb"
    with big.open("wb") as f:
        f.truncate(2**31)  # sparse
    start = time.monotonic()
    with open(big, "rb") as f:
        r = run_reader(
            "from vppctl.errors import ProgramFileError\n"
            "try: read_program('-')\n"
            "except ProgramFileError as e: print(e)",
            f,
        )
    assert r.stdout.startswith(b"cannot read stdin: it is 2.0 GiB"), r
    assert time.monotonic() - start < 5


def test_stdin_that_is_a_terminal_is_refused() -> None:
    import pty

    main, tty = pty.openpty()
    try:
        r = run_reader(
            "from vppctl.errors import UsageError\n"
            "try: read_program('-')\n"
            "except UsageError as e: print(e.exit_code, e)",
            tty,
        )
    finally:
        os.close(main)
        os.close(tty)
    assert r.stdout.startswith(b"2 stdin is a terminal; pipe a program in"), r


@pytest.mark.parametrize("text", [False, True], ids=["binary", "text"])
def test_a_fifo_input_is_read_whole_and_its_format_detected(tmp_path: Path, text: bool) -> None:
    data, _ = serialize(program(), text=text)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    writer = FifoWriter(fifo, data, delay=0.1)
    writer.start()
    loaded = read_program(fifo)
    writer.join(5)
    assert loaded.to_bytes() == DATA
    assert kind(fifo) == "fifo"


def test_a_fifo_writer_slow_to_send_its_first_byte_is_waited_for(tmp_path: Path) -> None:
    """The wait is for a writer to open the FIFO; once one has, reading waits for its bytes
    (a `<(slow command)` sends nothing for a while)."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    writer = FifoWriter(fifo, DATA, quiet=1.0)  # over three times the wait
    writer.start()
    assert read_program(fifo).to_bytes() == DATA
    writer.join(5)


def test_a_pipe_named_by_dev_fd_is_read(tmp_path: Path) -> None:
    """What process substitution `<(cmd)` passes: /dev/fd/N, the read end of a pipe."""
    r, w = os.pipe()
    try:
        writer = FifoWriter(w, DATA, quiet=0.2)
        writer.start()
        assert read_program(f"/dev/fd/{r}").to_bytes() == DATA
        writer.join(5)
    finally:
        os.close(r)


def test_a_fifo_input_nobody_writes_is_refused_after_the_wait(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    start = time.monotonic()
    with pytest.raises(ProgramFileError, match="no process opened it for writing within 0.3 s"):
        read_program(fifo)
    assert time.monotonic() - start < 3
    assert names(tmp_path) == ["pipe"]


@pytest.mark.parametrize("text", [None, False, True])
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_endless_devices_are_refused_after_their_first_bytes(
    device: str, text: bool | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = []
    real = os.read

    def read(fd: int, n: int) -> bytes:
        reads.append(n)
        return real(fd, n)

    monkeypatch.setattr(files.os, "read", read)
    # Random bytes that begin with `{` are no program either, as JSON or otherwise
    # (tests/program/test_sniff.py): the refusal is the same whatever the first byte.
    refusal = "not a program|UTF-8 without NUL"
    with pytest.raises(ProgramFileError, match=refusal):
        read_program(device, text=text)
    assert len(reads) <= 2  # a MiB or two, not 2 GiB


def test_a_stream_over_the_limit_is_refused(tmp_path: Path) -> None:
    r, w = os.pipe()
    writer = FifoWriter(w, b"x" * 5000)
    writer.start()
    try:
        with pytest.raises(ProgramFileError, match="holds more"):
            read_input(f"/dev/fd/{r}", limit=1000)
    finally:
        os.close(r)
    writer.join(5)


def test_a_terminal_named_as_input_is_refused() -> None:
    import pty

    main, tty = pty.openpty()
    try:
        with pytest.raises(UsageError, match="is a terminal"):
            read_program(os.ttyname(tty))
    finally:
        os.close(main)
        os.close(tty)


# -- the format of a stream ------------------------------------------------------------------


def test_no_binary_program_looks_like_text(sample_bytes: dict[tuple[int, int], bytes]) -> None:
    for data in (DATA, sample_bytes[(8, 4)]):
        assert 0xFF in data  # block 0's parent_idx, -1
        assert not looks_like_text(data)


def test_a_stream_that_does_not_start_with_a_program_field_is_refused_at_once() -> None:
    """A serialized ProgramDesc starts with one of its fields, in practice `blocks` (tag
    0x0a; protobuf writes fields in number order), never with a letter: bytes starting with
    an unknown field are refused after their first piece, as random bytes are."""
    data = b"b\x01x" + DATA  # an unknown field 12 of one byte first
    assert not looks_like_text(data)
    r, w = os.pipe()
    FifoWriter(w, data).start()
    try:
        with pytest.raises(ProgramFileError, match="not a program"):
            read_program(f"/dev/fd/{r}")
    finally:
        os.close(r)
    assert DATA[:1] == b"\x0a"


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (b"blocks { idx: 0 parent_idx: -1 }", True),
        (b"  \n\t# a comment\nblocks {}", True),
        (b"_x: 1", True),
        (b"", False),
        (b"   ", False),
        (b"{ blocks }", False),
        (b"blocks \xff", False),
        (b"blocks \x00", False),
        ('blocks { ops { type: "é" } }'.encode(), True),
    ],
)
def test_the_format_detection_rule(data: bytes, text: bool) -> None:
    assert looks_like_text(data) is text


def test_text_with_a_nul_byte_is_refused_as_text(tmp_path: Path) -> None:
    src = tmp_path / "p.pbtxt"
    src.write_bytes(b'blocks { idx: 0 parent_idx: -1 ops { type: "a\x00" } }')
    with pytest.raises(ProgramFileError, match="UTF-8 without NUL bytes"):
        read_program(src)


def test_is_text_name_is_the_extension_rule() -> None:
    assert [is_text_name(n) for n in ("a.pbtxt", "A.TEXTPROTO", "b.txtpb", "c.pb", "-")] == [
        True,
        True,
        True,
        False,
        False,
    ]


# -- text format bounds ----------------------------------------------------------------------


def test_a_parse_error_on_a_huge_line_quotes_about_200_characters(tmp_path: Path) -> None:
    line = "blocks { idx: 0 parent_idx: -1 " + 'ops { type: "a" } ' * 30_000
    line += "ops { type: 5 5 } }"
    src = tmp_path / "one-line.pbtxt"
    src.write_text(line)
    assert src.stat().st_size > 500_000
    with pytest.raises(ProgramFileError) as e:
        read_program(src)
    message = str(e.value)
    assert len(message) < 600, len(message)
    assert message.count('ops { type: "a" }') <= 12
    assert f"1:{len(line) - 6}" in message  # where
    assert message.endswith("Expected string but found: '5'")  # and why


def test_a_parse_error_in_the_middle_of_a_long_line_shows_its_surroundings(
    tmp_path: Path,
) -> None:
    line = "blocks { idx: 0 parent_idx: -1 " + "ops { type: 'a' } " * 500
    line += "ops { struct_name: 'HERE' type: 5 } " + "ops { type: 'a' } " * 500 + "}"
    src = tmp_path / "p.pbtxt"
    src.write_text(line)
    with pytest.raises(ProgramFileError) as e:
        read_program(src)
    message = str(e.value)
    assert len(message) < 600 and "HERE" in message and message.count("...") == 2
    assert message.endswith("Expected string but found: '5'")


def groups(n: int, field: int = 15) -> bytes:
    return bytes([(field << 3) | 3]) * n + bytes([(field << 3) | 4]) * n


def test_nesting_deeper_than_100_is_said_so(tmp_path: Path) -> None:
    assert read_program(_written(tmp_path, DATA + groups(100))).blocks  # 100 is the limit
    with pytest.raises(ProgramFileError, match=r"nested too deeply \(more than 100 levels"):
        read_program(_written(tmp_path, DATA + groups(101)))


def test_nesting_too_deep_inside_a_block_is_said_so(tmp_path: Path) -> None:
    msg = pb.ProgramDesc.FromString(DATA)
    block = msg.blocks[0].SerializeToString() + groups(100)  # the block is level 1
    data = b"\x0a" + _varint(len(block)) + block
    with pytest.raises(ProgramFileError, match="nested too deeply"):
        read_program(_written(tmp_path, data))


def test_nesting_too_deep_inside_an_op_is_said_so_when_it_is_decoded() -> None:
    loaded = parse_program(DATA)  # ops stay serialized until decoded
    attr = pb.OpDesc.Attr(name="deep", type=pb.INT, i=0).SerializeToString() + groups(98)
    loaded.blocks[0].ops[0] += b"\x22" + _varint(len(attr)) + attr  # attrs are level 3
    with pytest.raises(ProgramFileError, match="nested too deeply"):
        to_full(loaded)


def test_nesting_too_deep_on_stdin_is_said_so(tmp_path: Path) -> None:
    src = _written(tmp_path, DATA + groups(101))
    with open(src, "rb") as f:
        r = run_reader(
            "from vppctl.errors import ProgramFileError\n"
            "try: read_program('-')\n"
            "except ProgramFileError as e: print(e)",
            f,
        )
    assert b"nested too deeply" in r.stdout, r


def _written(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / f"p{len(data)}.pb"
    path.write_bytes(data)
    return path


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# -- text output reads back ----------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=4))
def test_text_output_reads_back_to_the_same_binary(names_: list[str]) -> None:
    p = layered([0, 0, 1, 1])
    for k, name in enumerate(names_):
        p.msg.blocks[0].ops[k].struct_name = f"/GPT/{name}/"
        p.msg.blocks[0].vars[k].name = name  # a variable renamed: names only, no meaning
    data = p.bytes()
    text, warnings = serialize(parse_program(data), text=True)
    assert warnings == []
    assert parse_program(text, text=True).to_bytes() == data


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=1, max_size=8))
def test_text_output_of_non_utf8_names_is_refused_or_reads_back(raw: bytes) -> None:
    p = layered([0, 0, 1, 1])
    p.msg.blocks[0].ops[1].struct_name = "/GPT/QQQQQQQQ/"
    data = p.bytes().replace(b"QQQQQQQQ", raw.ljust(8, b"_"))
    program_ = parse_program(data)
    try:
        text, _ = serialize(program_, text=True)
    except ConversionError as e:
        assert "not UTF-8" in str(e) and e.exit_code == 4
        try:
            raw.ljust(8, b"_").decode("utf-8")
        except UnicodeDecodeError:
            return
        raise AssertionError("a UTF-8 name was refused") from None
    assert parse_program(text, text=True).to_bytes() == data


def test_dump_to_text_of_a_non_utf8_name_writes_nothing(tmp_path: Path) -> None:
    p = layered([0, 0, 1, 1])
    p.msg.blocks[0].ops[1].struct_name = "/GPT/QQQQ/"
    src = tmp_path / "in.pb"
    src.write_bytes(p.bytes().replace(b"QQQQ", b"\xff\xfe(a"))
    out = tmp_path / "out.pbtxt"
    with pytest.raises(ConversionError, match=r'the string "/GPT/\\377\\376\(a/" is not UTF-8'):
        write_program(read_program(src), out)
    assert names(tmp_path) == ["in.pb"]


# -- limits up front -----------------------------------------------------------------------------


def test_check_size_allows_just_under_2_gib_and_refuses_2_gib() -> None:
    check_size(MAX_PROGRAM_BYTES)
    with pytest.raises(ConversionError, match=r"2\.00 GiB.*--strip-callstack.*fewer layers") as e:
        check_size(MAX_PROGRAM_BYTES + 1)
    assert e.value.exit_code == 4


@pytest.mark.parametrize("text", [False, True], ids=["binary", "text"])
def test_a_program_of_2_gib_or_more_is_refused_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: bool
) -> None:
    target = tmp_path / "out.pb"
    target.write_bytes(OLD)
    if text:
        monkeypatch.setattr(save, "MAX_PROGRAM_BYTES", 100)
    else:
        monkeypatch.setattr(Program, "byte_size", lambda self, sizes=None: 2**31 + 5 * 2**28)
    monkeypatch.setattr(files, "atomic_replace", _must_not_write)
    with pytest.raises(ConversionError, match="its text would be" if text else "3.25 GiB"):
        write_program(program(), resolve_output(target, binary=not text))
    assert target.read_bytes() == OLD and names(tmp_path) == ["out.pb"]


def _must_not_write(*args: object) -> None:
    raise AssertionError("something was written")


# -- the API ---------------------------------------------------------------------------------------


def test_write_program_follows_the_outputs_format(tmp_path: Path) -> None:
    text_out = resolve_output(tmp_path / "a.pb", binary=False)  # text, whatever the name
    written, _ = write_program(program(), text_out)
    assert (tmp_path / "a.pb").read_bytes().startswith(b"blocks {")
    assert written == (tmp_path / "a.pb").stat().st_size
    with pytest.raises(ValueError, match="contradicts"):
        write_program(program(), text_out, text=False)


def test_serialize_takes_the_format_explicitly() -> None:
    binary, _ = serialize(program(), text=False)
    text, _ = serialize(program(), text=True)
    assert binary == DATA
    assert parse_program(text, text=True).to_bytes() == DATA


# -- the current CLI over these paths ----------------------------------------------------------


@needs_root
@pytest.mark.parametrize(
    "args",
    [
        ["convert", "{src}", "--vpp", "2", "-o", "{dev}"],
        ["dump", "{src}", "-o", "{dev}"],
        ["sample", "--layers", "4", "--pp", "2", "-o", "{dev}"],
        ["simulate", "--pp", "2", "--vpp", "2", "-m", "4", "--svg", "{dev}"],
        ["simulate", "--pp", "2", "--vpp", "2", "-m", "4", "--trace", "{dev}"],
    ],
    ids=["convert", "dump", "sample", "simulate-svg", "simulate-trace"],
)
def test_cli_outputs_to_a_null_device_leave_it_a_device(tmp_path: Path, args: list[str]) -> None:
    src = tmp_path / "in.pb"
    src.write_bytes(DATA)
    dev = mknod_char(tmp_path / "null", 1, 3)
    invoke(*[a.format(src=src, dev=dev) for a in args])
    assert kind(dev) == "char" and dev.stat().st_rdev == os.makedev(1, 3)
    assert names(tmp_path) == ["in.pb", "null"]


@needs_root
def test_cli_convert_to_a_full_device_is_exit_3(tmp_path: Path) -> None:
    src = tmp_path / "in.pb"
    src.write_bytes(DATA)
    dev = mknod_char(tmp_path / "full", 1, 7)
    r = invoke("convert", str(src), "--vpp", "2", "-o", str(dev), "-q", exit_code=3)
    assert r.stderr.strip() == f"Error: cannot write {dev}: no space left on device"
    assert kind(dev) == "char"


def test_cli_convert_through_a_symlink_keeps_the_link(tmp_path: Path) -> None:
    src = tmp_path / "in.pb"
    src.write_bytes(DATA)
    (tmp_path / "link.pb").symlink_to("real.pb")
    invoke("convert", str(src), "--vpp", "2", "-o", str(tmp_path / "link.pb"))
    assert kind(tmp_path / "link.pb") == "link"
    assert read_program(tmp_path / "real.pb").to_bytes() != DATA  # the converted program


@pytest.mark.parametrize("command", ["inspect", "verify", "dump"])
def test_cli_reads_a_program_from_stdin(command: str) -> None:
    r = invoke(command, "-", input=DATA, exit_code=None)
    assert r.exit_code in (0, 1), r.output  # verify: the plain-PP input has violations
    assert "Error" not in r.stderr
