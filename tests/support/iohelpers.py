"""Helpers for the I/O contract tests: child processes that write, special files, watchers.

Run as a script, this module is the child process of the subprocess tests:

    python iohelpers.py slow-write OUT PIECES PIECE_BYTES DELAY [named]
        writes PIECES pieces of PIECE_BYTES to OUT through vppctl.program.files, sleeping DELAY
        seconds after each (a slow producer, so that a kill lands inside the write);
        "named" removes os.O_TMPFILE first (the fallback path)
    python iohelpers.py count-write SRC OUT [named]
        loads SRC, writes it to OUT with write_program, prints JSON {"written": bytes the
        program has, "wchar": bytes this process passed to write(2) meanwhile}, read from
        /proc/self/io: the strace-free proof that the program is written once
    python iohelpers.py write-stdout SPEC BINARY(0|1) DATA [REPEAT]
        resolve_output(SPEC).write(DATA * REPEAT); prints "error <exit code> <message>" or
        "broken pipe" on stderr instead of a traceback
    python iohelpers.py cli-streams CASES.json
        runs the command line once per case ({"args": [...], "stdout": MODE, "stderr": MODE},
        MODE "pipe", "full" for /dev/full or "closed" as `>&-` leaves it), each in a forked
        child of this one process (so vppctl is imported once), and prints a JSON list of
        {"code", "stdout", "stderr"} (what a "pipe" stream received; exit 120 when the
        interpreter's last flush would fail, as Python reports it)
"""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).parent


def child(*args: str) -> list[str]:
    """The argv that runs this module as a child with `args`."""
    return [sys.executable, str(HERE / "iohelpers.py"), *args]


def run_in_pty(
    argv: list[str], *, columns: int = 80, env: dict[str, str] | None = None, timeout: float = 120
) -> tuple[int, bytes]:
    """Run `argv` with a pseudo-terminal of `columns` columns as its stdin, stdout and
    stderr (a person at a terminal); (exit code, everything it wrote)."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    pid, fd = pty.fork()
    if pid == 0:  # the child: size its terminal, then become the command
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
        os.execvpe(argv[0], argv, env if env is not None else os.environ)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                try:
                    piece = os.read(fd, 1 << 16)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not piece:
                    break
                out += piece
    finally:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), bytes(out)


def terminal_env(**extra: str) -> dict[str, str]:
    """The environment of a person at a colour terminal: no COLUMNS, no FORCE_COLOR, the
    default progress."""
    unset = ("COLUMNS", "LINES", "FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "VPPCTL_PROGRESS")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env["TERM"] = "xterm-256color"
    env.update(extra)
    return env


def wchar() -> int:
    """Bytes this process has passed to write-like system calls (/proc/self/io)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        key, _, value = line.partition(":")
        if key == "wchar":
            return int(value)
    raise AssertionError("no wchar in /proc/self/io")


def kind(path: Path) -> str:
    """What `path` is, without following a final link."""
    mode = path.lstat().st_mode
    for test, name in (
        (stat.S_ISLNK, "link"),
        (stat.S_ISREG, "file"),
        (stat.S_ISDIR, "dir"),
        (stat.S_ISCHR, "char"),
        (stat.S_ISBLK, "block"),
        (stat.S_ISFIFO, "fifo"),
        (stat.S_ISSOCK, "socket"),
    ):
        if test(mode):
            return name
    return "?"


def mknod_char(path: Path, major: int, minor: int) -> Path:
    """A character device node (1,3 is null, 1,7 full, 1,5 zero, 1,8 random); needs root."""
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    return path


class FifoReader(threading.Thread):
    """Opens a FIFO for reading (after `delay`) and reads it to the end into `data`."""

    def __init__(self, path: Path, delay: float = 0.0) -> None:
        super().__init__(daemon=True)
        self.path, self.delay, self.data = path, delay, b""

    def run(self) -> None:
        time.sleep(self.delay)
        with open(self.path, "rb") as f:
            self.data = f.read()


class FifoWriter(threading.Thread):
    """Opens a FIFO (or a pipe's write end, given as an fd) for writing and writes `data`,
    waiting `delay` before opening and `quiet` after opening (a writer slow to start)."""

    def __init__(
        self, target: Path | int, data: bytes, delay: float = 0.0, quiet: float = 0.0
    ) -> None:
        super().__init__(daemon=True)
        self.target, self.data, self.delay, self.quiet = target, data, delay, quiet
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            time.sleep(self.delay)
            with open(self.target, "wb") as f:
                time.sleep(self.quiet)
                f.write(self.data)
        except BaseException as e:  # a reader that went away: the test looks at it
            self.error = e


def open_files_in(pid: int, directory: Path, skip: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(fd path, link target) of `pid`'s open files in `directory`, but those named in `skip`
    (an unnamed O_TMPFILE file shows as "DIR/#INODE (deleted)")."""
    found = []
    fd_dir = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return []
    prefix = f"{directory}/"
    for fd in fds:
        try:
            target = os.readlink(f"{fd_dir}/{fd}")
        except OSError:
            continue
        if target.startswith(prefix) and target[len(prefix) :] not in skip:
            found.append((f"{fd_dir}/{fd}", target))
    return found


# -- the child side -----------------------------------------------------------------------


def _slow_write(out: str, pieces: int, size: int, delay: float) -> None:
    from vppctl.program.destinations import resolve_output

    def data() -> object:
        for i in range(pieces):
            yield bytes([i % 251]) * size
            time.sleep(delay)

    resolve_output(out, binary=True).write(data)  # type: ignore[arg-type]


def _count_write(src: str, out: str) -> None:
    from vppctl.program.destinations import resolve_output
    from vppctl.program.load import read_program
    from vppctl.program.save import write_program

    program = read_program(src)
    output = resolve_output(out, binary=True)
    before = wchar()
    written, _ = write_program(program, output)
    spent = wchar() - before
    print(json.dumps({"written": written, "wchar": spent}))


def _write_stdout(spec: str, binary: bool, data: str, repeat: int) -> int:
    from vppctl.errors import VppctlError
    from vppctl.program.destinations import resolve_output

    try:
        resolve_output(spec, binary=binary).write(data.encode() * repeat)
    except VppctlError as e:
        print(f"error {e.exit_code} {e}", file=sys.stderr)
        return e.exit_code
    except BrokenPipeError:
        print("broken pipe", file=sys.stderr)
        return 141
    return 0


def _cli_streams(cases_path: str) -> None:
    import tempfile

    import vppctl.cli.progress
    import vppctl.commands
    import vppctl.planner.search
    import vppctl.report.schedule
    import vppctl.report.verify  # noqa: F401  (what the commands load on use: once, here)
    from vppctl.cli import cli  # imported once, before the forks

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, case in enumerate(json.loads(Path(cases_path).read_text())):
            paths = {name: Path(tmp) / f"{k}.{name}" for name in ("stdout", "stderr")}
            pid = os.fork()
            if pid == 0:
                os._exit(_run_case(cli, case, paths))
            _, status = os.waitpid(pid, 0)
            results.append(
                {
                    "code": os.waitstatus_to_exitcode(status),
                    **{
                        name: path.read_text(errors="replace") if path.exists() else None
                        for name, path in paths.items()
                    },
                }
            )
    print(json.dumps(results))


def _run_case(cli: object, case: dict[str, object], paths: dict[str, Path]) -> int:
    import io

    for fd, name in ((2, "stderr"), (1, "stdout")):
        mode = case[name]
        if mode == "closed":
            os.close(fd)
            setattr(sys, name, None)  # what Python gives a process started with it closed
            continue
        target = os.open("/dev/full" if mode == "full" else paths[name], os.O_WRONLY | os.O_CREAT)
        os.dup2(target, fd)
        os.close(target)
        setattr(sys, name, io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding="utf-8"))
    code = 0
    try:
        cli.main(args=case["args"], prog_name="vppctl")  # type: ignore[attr-defined]
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    for stream in (sys.stdout, sys.stderr):  # the interpreter's last flush
        try:
            if stream is not None:
                stream.flush()
        except OSError:
            return 120
    return code


def main(argv: list[str]) -> int:
    if "named" in argv[2:]:
        del os.O_TMPFILE
        argv = [a for a in argv if a != "named"]
    command, *args = argv[1:]
    if command == "slow-write":
        _slow_write(args[0], int(args[1]), int(args[2]), float(args[3]))
    elif command == "count-write":
        _count_write(args[0], args[1])
    elif command == "write-stdout":
        return _write_stdout(args[0], args[1] == "1", args[2], int(args[3]) if args[3:] else 1)
    elif command == "cli-streams":
        _cli_streams(args[0])
    else:
        raise SystemExit(f"unknown command {command}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
