"""Whole lines in a pipe (issue 22): every command's default output for the 126-layer
sample, read from a pipe (CliRunner's streams are pipes too), keeps each record on one
line and has no trailing whitespace; at an 80-column terminal the tables fit it.

Once rich fell back to 80 columns in a pipe: `vppctl simulate prog.vpp.pb -m 8 | grep
makespan` got half a line, convert's `layers:` line broke inside the regex, and table
rows carried trailing spaces.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import paths
import pytest
from click.testing import Result
from commandline import invoke
from iohelpers import run_in_pty, terminal_env

SAMPLE = paths.SAMPLE
ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


SPLIT = ("--vpp", "2", "--split", "balanced", "--cost", "flops")


@pytest.fixture(scope="module")
def converted(gpt126: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Result]:
    """The 126-layer sample converted, and what convert printed."""
    out = tmp_path_factory.mktemp("pipes") / "prog.vpp.pb"
    return out, invoke("convert", gpt126, *SPLIT, "-m", "16", "-o", out)


@pytest.fixture(scope="module")
def piped(gpt126: Path, converted: tuple[Path, Result]) -> dict[str, Result]:
    """Each command's default output (the table, not --json) for the 126-layer sample."""
    out, convert = converted
    return {
        "convert": convert,
        "verify": invoke("verify", out),
        "inspect": invoke("inspect", out),
        "simulate": invoke("simulate", out, "-m", "16"),
        "plan": invoke("plan", gpt126, "-m", "16", "--vpp", "1,2"),
        # sample prints only its `wrote` line: a small one says as much
        "sample": invoke("sample", "--layers", "8", "--pp", "4", "-o", out.with_name("s.pb")),
        # dump's output is the program's protobuf text: the small sample says as much
        "dump": invoke("dump", SAMPLE),
    }


def lines(result: Result, stream: str = "stdout") -> list[str]:
    return str(getattr(result, stream)).splitlines()


@pytest.mark.parametrize(
    "command", ["convert", "verify", "inspect", "simulate", "plan", "sample", "dump"]
)
def test_no_line_ends_in_whitespace(piped: dict[str, Result], command: str) -> None:
    for stream in ("stdout", "stderr"):
        assert [x for x in lines(piped[command], stream) if x != x.rstrip()] == [], stream


def test_convert_rows_and_notes_are_whole_lines(piped: dict[str, Result]) -> None:
    out = lines(piped["convert"])
    assert re.fullmatch(r"pp 8 x vpp 2, auto mode: \d+/\d+ ops, \d+/\d+ vars changed", out[0])
    rows = out[3:19]
    assert [int(r.split()[0]) for r in rows] == list(range(16))  # one line per segment
    assert all(re.search(r"DecoderLayer\S*…\d+ \(\d+\)", r) for r in rows[1:])
    notes = out[19:]
    assert notes[0] == "layers: DecoderLayer x 126 (detected)"
    assert re.fullmatch(
        r"bubble at m=16 \(FLOP costs, --runtime paddle\): 1F1B [\d.]+% -> Paddle VPP [\d.]+% of "
        r"the step",
        next(x for x in notes if x.startswith("bubble at")),
    )
    assert re.fullmatch(
        r"worst stage's peak: 1F1B [\d.]+ GiB -> Paddle VPP [\d.]+ GiB \(stages? [\d, ]+\)",
        next(x for x in notes if x.startswith("worst stage's peak")),
    )
    assert re.fullmatch(r"wrote \S+ \([\d.]+ MB\)", lines(piped["convert"], "stderr")[-1])


def test_simulate_records_are_whole_lines(piped: dict[str, Result]) -> None:
    out = lines(piped["simulate"])
    assert re.fullmatch(
        r"plan: pp 8 x vpp 2, loop placement, as converted \(layers (\d+,){15}\d+\)", out[0]
    )
    (makespan,) = [x for x in out if x.startswith("makespan")]  # `| grep makespan`
    assert re.fullmatch(r"makespan +[\d.]+ +[\d.]+", makespan)
    (gain,) = [x for x in out if " vs 1F1B (v=1): " in x]
    assert re.fullmatch(
        r"Paddle VPP \(v=2\) vs 1F1B \(v=1\): makespan [\d.]+ -> [\d.]+ \([\d.]+% "
        r"shorter\), bubble [\d.]+% -> [\d.]+% of the step, stage 0 activations [\d.]+ -> "
        r"[\d.]+ stages \(x[\d.]+\)",
        gain,
    )
    rows = [x for x in out if x.startswith("stage ")]
    assert len(rows) == 16 and max(map(len, rows)) <= 80  # a picture keeps 80 columns
    legends = [x for x in out if "colour = micro-batch" in x]
    assert len(legends) == 2 and all(x.endswith("draw every step") for x in legends)


def test_inspect_and_verify_records_are_whole_lines(piped: dict[str, Result]) -> None:
    out = lines(piped["inspect"])
    numbers = next(x for x in out if x.startswith("layer numbers: "))
    assert numbers.endswith("125 = DecoderLayer_125")
    rows = [x for x in out if re.match(r" *\d+  \[\d\] ", x)]
    assert len(rows) == 8
    (valid,) = lines(piped["verify"])
    assert re.fullmatch(
        r"valid: pp 8 x vpp 2, loop placement, 126 layers \(DecoderLayer\); cross-stage "
        r"edges per micro-batch: \d+",
        valid,
    )


def test_plan_records_are_whole_lines(piped: dict[str, Result]) -> None:
    out = lines(piped["plan"])
    commands = out[out.index("to convert:") + 1 :][: len(out)]
    commands = [x for x in commands if re.match(r" ?\d+  ", x)]
    assert commands and all(
        re.fullmatch(r" ?\d+  vppctl convert \S+ --vpp \d .*", x) for x in commands
    )
    assert (
        "time: one micro-batch's share of the step (makespan / m) relative to #1; bubble: "
        "idle share of the step; peak: the worst stage's bytes"
    ) in out


def test_a_real_pipe_gets_the_whole_makespan_record(
    piped: dict[str, Result], converted: tuple[Path, Result]
) -> None:
    out, _ = converted
    run = subprocess.run(
        [sys.executable, "-m", "vppctl", "simulate", str(out), "-m", "16", "-q"],
        capture_output=True,
        text=True,
        env=terminal_env(COLUMNS="80"),  # a COLUMNS in the environment is no reason to split
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    (makespan,) = [x for x in run.stdout.splitlines() if "makespan" in x and x.startswith("make")]
    assert re.fullmatch(r"makespan +[\d.]+ +[\d.]+", makespan)
    assert run.stdout == piped["simulate"].stdout  # CliRunner's pipe and a real one agree


def test_an_80_column_terminal_keeps_the_80_column_tables(gpt126: Path, tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "vppctl", "convert", str(gpt126), *SPLIT, "-m", "16"]
    argv += ["-o", str(tmp_path / "o.pb"), "-q"]
    code, out = run_in_pty(argv, columns=80, env=terminal_env())
    assert code == 0, out
    shown = [ANSI.sub(b"", x).decode() for x in out.replace(b"\r\n", b"\n").split(b"\n")]
    assert max(map(len, shown)) <= 80
    rows = [x for x in shown if re.match(r" ?\d+ +\d +[01] +\[\d\] ", x)]
    assert len(rows) == 16  # one line per segment at 80 columns too
