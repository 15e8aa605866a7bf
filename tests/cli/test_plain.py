"""Plain reports (`vppctl/report/plain.py`) print what rich prints, without rich.

Where stdout or stderr is a pipe or a file (and the environment does not call it a
terminal), `convert` writes its table, notes, `wrote` line and warnings as plain lines
instead of loading rich. Each is held to rich's own output: the compact table over a
generated family of tables, lines over generated text, rich's own rule for what is a
terminal, and whole `convert` runs (every shipped sample, Paddle's exports, a PIR
program; every note the report can have) printed both ways, byte for byte.
"""

from __future__ import annotations

import io
import lzma
import random
from pathlib import Path

import paths
import pytest
from commandline import invoke
from rich.console import Console
from rich.text import Text

from vppctl.cli import program as cli_program
from vppctl.cli import streams
from vppctl.escape import printable
from vppctl.report import common
from vppctl.report.plain import Column, Grid, lines

# What names in a program may hold that rich shows one column each, spaces inside.
_ALPHABET = "abcXYZ019_-./:()[]{}<>=+*&%$#@!?'\",;|~^` …–→×"


def _rich_text(print_: object) -> list[str]:
    """What a console for a pipe prints (`vppctl.cli.streams`: a pipe's width, no styles),
    each line's trailing spaces off as vppctl's streams strip them."""
    out = io.StringIO()
    console = Console(file=out, width=streams.PIPE_WIDTH, color_system=None, highlight=False)
    console.print(print_)
    return [line.rstrip(" ") for line in out.getvalue().split("\n")][:-1]


def _word(rng: random.Random, most: int) -> str:
    return "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, most))).strip(" ")


def _grids(count: int, seed: int) -> list[Grid]:
    rng = random.Random(seed)
    grids = []
    for _ in range(count):
        n = rng.randint(1, 10)
        columns = tuple(
            Column(
                rng.choice(["VS", "Stg", "Mesh", "Layers", "Flops", "a", "x y"]),
                rng.choice(["left", "right"]),
                rng.random() < 0.3,
            )
            for _ in range(n)
        )
        rows = tuple(tuple(_word(rng, 20) for _ in range(n)) for _ in range(rng.randint(1, 6)))
        grids.append(Grid(columns, rows))
    return grids


@pytest.mark.parametrize("grid", _grids(300, 34))
def test_a_grid_prints_as_rich_prints_it(grid: Grid) -> None:
    assert grid.lines() == _rich_text(common.rich_table(grid))


@pytest.mark.parametrize(
    "cell",
    [" leading", "trailing ", "層", "e\u0301", "\u200b", "x" * (streams.PIPE_WIDTH // 2)],
    ids=["leading space", "trailing space", "wide", "combining", "zero width", "long"],
)
def test_a_cell_rich_may_lay_out_otherwise_is_left_to_rich(cell: str) -> None:
    grid = Grid((Column("Layers"), Column("Fwd", "right")), (("DecoderLayer", "1"), (cell, "2")))
    assert grid.lines() is None
    assert Grid((Column("[b]Fwd"),), (("1",),)).lines() is None  # markup in a header


@pytest.mark.parametrize("seed", range(20))
def test_lines_print_as_rich_prints_them(seed: int) -> None:
    rng = random.Random(seed)
    texts = [" " * rng.randint(0, 2) + _word(rng, 60) for _ in range(20)]
    texts += ["tab\there", "bell\x07", "new\nline"]  # escaped, as `printed` escapes them
    said = lines(texts)
    assert said == [line for text in texts for line in _rich_text(Text(printable(text)))]
    assert lines(["層"]) is None and lines(["x" * streams.PIPE_WIDTH]) is None


_ENVIRONMENTS = [
    {},
    {"FORCE_COLOR": "1"},
    {"FORCE_COLOR": ""},
    {"TTY_COMPATIBLE": "1"},
    {"TTY_COMPATIBLE": "0", "FORCE_COLOR": "1"},
    {"TTY_COMPATIBLE": "x", "FORCE_COLOR": "1"},
]


@pytest.mark.parametrize("environment", _ENVIRONMENTS)
def test_plain_where_rich_sees_no_terminal(
    environment: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    for stream in ("stdout", "stderr"):
        terminal = Console(file=streams.Stream(stream, report=False)).is_terminal  # type: ignore[arg-type]
        assert streams.plain(stream) is not terminal


def _programs(tmp: Path) -> list[Path]:
    found = [p for p in sorted(paths.SAMPLES.iterdir()) if p.suffix in (".pb", ".pbtxt")]
    for name in ("llama_leftover_clip_pp2_v2_plain.pb.xz", "llama_amp_o2_pp2_v2_plain.pb.xz"):
        out = tmp / name.removesuffix(".xz")
        out.write_bytes(lzma.decompress((paths.PADDLE_REFERENCE / name).read_bytes()))
        found.append(out)
    pir = tmp / "gpt_pp2_v2_plain.json"
    pir.write_bytes(lzma.decompress((paths.PIR_REFERENCE / f"{pir.name}.xz").read_bytes()))
    return [*found, pir]


# Every note the report can carry: the bubble and its memory, the moves, the cost column,
# the V placement, the stripped callstack, a plan written for PIR, the report on stderr; and
# the errors of what a program cannot take (both ways too).
_OPTIONS = [
    ["--vpp", "2"],
    ["--vpp", "1", "-m", "4"],
    ["--vpp", "2", "--split", "balanced"],
    ["--vpp", "2", "--split", "balanced", "-m", "8", "--moves", "{out}.moves.json"],
    ["--vpp", "2", "--split", "balanced", "--cost", "flops", "--placement", "v"],
    ["--vpp", "2", "--split", "balanced", "--strip-callstack", "-m", "4", "--runtime", "torch"],
]


def _both_ways(monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[bytes, ...]:
    """(stdout, stderr) of `vppctl ARGS`, plain and then through rich, with what it wrote."""
    said = []
    for plain in (True, False):
        with monkeypatch.context() as m:
            if not plain:
                m.setattr(streams, "plain", lambda name: False)
                m.setattr(cli_program, "plain", lambda name: False)
            result = invoke(*args, exit_code=None)
            said += [result.stdout_bytes, result.stderr_bytes, bytes([result.exit_code])]
    return tuple(said)


def test_convert_prints_the_same_plain_and_through_rich(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    compared = 0
    for src in _programs(tmp_path):
        out = tmp_path / f"{src.stem}.out"
        for options in _OPTIONS:
            args = [a.format(out=out) for a in options]
            said = _both_ways(monkeypatch, "convert", str(src), *args, "-o", str(out))
            assert said[:3] == said[3:], (src.name, args, said)
            compared += said[2] == b"\x00"
        stdout = _both_ways(monkeypatch, "convert", str(src), "--vpp", "2", "-o", "-")
        assert stdout[:3] == stdout[3:]  # the program on stdout, the report on stderr
    assert compared >= 30  # most runs convert (a PIR program's takes no --moves, for one)
    leftover = next(p for p in _programs(tmp_path) if p.name.startswith("llama_leftover"))
    warned = _both_ways(monkeypatch, "convert", str(leftover), "--vpp", "2")
    assert b"warning: " in warned[1] and warned[:3] == warned[3:]
