"""Signs of life (issue 22): long work shows its phases. At a terminal a rich progress bar
(transient) names the phase; in a log (stderr not a terminal) a plain line per phase that
took over LOG_AFTER seconds; nothing with -q. The library only reports, to an observer.

The tests here also cover vppctl/progress.py, which has no test file of its own.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import paths
import pytest
from commandline import invoke
from iohelpers import run_in_pty, terminal_env

from vppctl import progress
from vppctl.cli import progress as cli_progress
from vppctl.commands import convert_file
from vppctl.convert import ConvertOptions
from vppctl.plan import PlanOptions

SAMPLE = paths.SAMPLE
PHASES = ["reading", "indexing", "planning", "applying", "verifying", "writing"]


@pytest.fixture(autouse=True)
def progress_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite turns progress off (conftest.py); here it is the subject."""
    monkeypatch.delenv("VPPCTL_PROGRESS", raising=False)


class Recorder:
    """An observer that keeps what it is told."""

    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    def phase(self, name: progress.Phase, total: int | None) -> None:
        self.events.append(("phase", name))
        self.totals = getattr(self, "totals", {})
        self.totals[name] = total

    def advance(self, done: int) -> None:
        self.events.append(("advance", done))

    def close(self) -> None:
        self.events.append(("close", None))


def test_convert_reports_every_phase_in_order_with_counts(tmp_path: Path) -> None:
    seen = Recorder()
    opts = ConvertOptions(plan=PlanOptions(vpp=2))
    outcome = convert_file(SAMPLE, tmp_path / "out.pb", opts, progress=seen)
    phases = [name for kind, name in seen.events if kind == "phase"]
    assert phases == PHASES and seen.events[-1] == ("close", None)
    assert seen.totals["reading"] == SAMPLE.stat().st_size
    assert seen.totals["indexing"] == outcome.result.n_ops
    assert seen.totals["writing"] == outcome.bytes_written
    # Within a phase the counts only grow, and reach the total where there is one.
    current, done = None, 0
    last: dict[str, int] = {}
    for kind, value in seen.events:
        if kind == "phase":
            current, done = value, 0
        elif kind == "advance":
            assert isinstance(value, int) and value >= done
            done = last[str(current)] = value
    for name in ("reading", "indexing", "verifying", "writing"):
        assert last[name] == seen.totals[name], name


def test_plan_reports_its_search_candidate_by_candidate() -> None:
    from vppctl.commands import plan_run
    from vppctl.planner import PlanSearchOptions

    seen = Recorder()
    outcome = plan_run(SAMPLE, PlanSearchOptions(micro_batches=(4, 8)), progress=seen)
    phases = [name for kind, name in seen.events if kind == "phase"]
    assert phases == ["reading", "indexing", "planning", "searching"]
    searched = seen.events[seen.events.index(("phase", "searching")) + 1 : -1]
    total = seen.totals["searching"]
    # one step per candidate timed or refused: 1, 2, ... up to the total announced
    assert searched == [("advance", i) for i in range(1, total + 1)]
    assert total >= len(outcome.result.candidates) > 0


def test_a_log_shows_a_long_search_going_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_progress, "LOG_EVERY", 0.0)  # every step is "ten seconds later"
    result = invoke("plan", str(SAMPLE), "-m", "4,8")
    going = re.findall(r"^searching: (\d+)% of (\d+) candidates, \d+\.\d s$", result.stderr, re.M)
    assert going and going[-1][0] == "100"


@pytest.mark.parametrize("name", ["s.pb", "s.pbtxt"])
def test_sample_reports_building_then_writing(tmp_path: Path, name: str) -> None:
    from vppctl.commands import sample_file
    from vppctl.sample import SampleOptions

    seen = Recorder()
    outcome = sample_file(tmp_path / name, SampleOptions(layers=4, pp=2), progress=seen)
    phases = [name for kind, name in seen.events if kind == "phase"]
    assert phases == ["building", "writing"] and seen.events[-1] == ("close", None)
    advances = [done for kind, done in seen.events if kind == "advance"]
    assert advances and advances[-1] == outcome.bytes_written == (tmp_path / name).stat().st_size
    if name.endswith(".pb"):  # binary: the total is known before the first byte
        assert seen.totals["writing"] == outcome.bytes_written


def test_a_log_gets_the_phases_of_sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_progress, "LOG_AFTER", 0.0)
    args = ["sample", "--layers", "4", "--pp", "2", "-o", str(tmp_path / "s.pb")]
    result = invoke(*args)
    lines = result.stderr.splitlines()
    assert re.fullmatch(r"building: \d+\.\d s", lines[0])
    assert re.fullmatch(r"writing: \d+\.\d s \(\d+\.\d KB\)", lines[1])
    assert lines[2].startswith("wrote ")


def test_without_an_observer_nothing_is_reported() -> None:
    seen = Recorder()
    with progress.observing(seen):
        progress.phase("reading", 10)
    # the block is over: the observer was closed, and is told nothing more
    progress.phase("indexing", 10)
    progress.advance(5)
    progress.step(1)
    with progress.observing(None):  # None installs nobody
        progress.phase("writing", 1)
        progress.advance(1)
    assert seen.events == [("phase", "reading"), ("close", None)]


def test_a_log_gets_one_line_per_phase_over_the_threshold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_progress, "LOG_AFTER", 0.0)  # every phase is "long" here
    args = ["convert", str(SAMPLE), "--vpp", "2", "-o", str(tmp_path / "o.pb")]
    result = invoke(*args)
    lines = result.stderr.splitlines()
    said = [line.split(":")[0] for line in lines if re.fullmatch(r"[a-z]+: \d+\.\d s.*", line)]
    assert said == PHASES
    assert re.search(r"^reading: \d+\.\d s \(\d+\.\d KB\)$", result.stderr, re.M)
    assert re.search(r"^indexing: \d+\.\d s \(778 ops\)$", result.stderr, re.M)
    assert lines[-1].startswith("wrote ")
    assert not any(re.match(r"[a-z]+: ", line) for line in result.stdout.splitlines()[:1])


def test_small_runs_stay_quiet_in_a_log(tmp_path: Path) -> None:
    args = ["convert", str(SAMPLE), "--vpp", "2", "-o", str(tmp_path / "o.pb")]
    result = invoke(*args)
    assert result.stderr.splitlines() == [
        line for line in result.stderr.splitlines() if line.startswith("wrote ")
    ]


def test_quiet_silences_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_progress, "LOG_AFTER", 0.0)
    for args in (
        ["convert", str(SAMPLE), "--vpp", "2", "-o", str(tmp_path / "o.pb"), "-q"],
        ["verify", str(SAMPLE), "-q"],
        ["inspect", str(SAMPLE), "-q"],
    ):
        result = invoke(*args)
        assert result.stderr == "", args


def test_the_environment_can_turn_progress_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_progress, "LOG_AFTER", 0.0)
    monkeypatch.setenv("VPPCTL_PROGRESS", "off")
    args = ["convert", str(SAMPLE), "--vpp", "2", "-o", str(tmp_path / "o.pb")]
    result = invoke(*args)
    assert result.stderr.startswith("wrote ")


def test_a_long_phase_says_how_far_it_got_in_a_log(monkeypatch: pytest.MonkeyPatch) -> None:
    lines: list[str] = []
    log = cli_progress.LogObserver.__new__(cli_progress.LogObserver)
    cli_progress.LogObserver.__init__(log, None)  # type: ignore[arg-type]
    monkeypatch.setattr(log, "_say", lines.append)
    clock = iter([0.0, 12.0, 13.0, 30.0])
    monkeypatch.setattr(cli_progress.time, "monotonic", lambda: next(clock))
    log.phase("indexing", 1000)  # t = 0
    log.advance(400)  # t = 12: ten seconds passed, a line
    log.advance(500)  # t = 13: too soon for another
    log.close()  # t = 30
    assert lines == ["indexing: 40% of 1,000 ops, 12.0 s", "indexing: 30.0 s (1,000 ops)"]


def test_a_terminal_shows_a_bar_with_the_phases(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "vppctl", "convert", str(SAMPLE), "--vpp", "2"]
    code, out = run_in_pty([*argv, "-o", str(tmp_path / "o.pb")], env=terminal_env())
    assert code == 0, out
    text = out.decode(errors="replace")
    assert "━" in text  # rich's bar
    assert [phase for phase in PHASES if phase in text] == PHASES  # each was on screen
    # transient: the last screen holds the table and the `wrote` line, no bar
    assert text.rstrip().splitlines()[-1].strip().startswith("wrote ")


HIDE_CURSOR, SHOW_CURSOR = b"\x1b[?25l", b"\x1b[?25h"


@pytest.mark.parametrize(
    "args",
    [
        ["simulate", "--pp", "2", "--vpp", "2", "-m", "4"],  # no program: no phase at all
        ["convert", str(SAMPLE), "--vpp", "2", "-o", str(SAMPLE)],  # refused before the work
    ],
    ids=["simulate-without-program", "convert-refused"],
)
def test_a_terminal_gets_its_cursor_back(args: list[str]) -> None:
    argv = [sys.executable, "-m", "vppctl", *args]
    _, out = run_in_pty(argv, env=terminal_env())
    # a bar hides the cursor while it draws; whatever ran, the cursor is shown at the end
    assert out.count(HIDE_CURSOR) == out.count(SHOW_CURSOR), out
    assert out.rfind(HIDE_CURSOR) <= out.rfind(SHOW_CURSOR)


def test_a_bar_draws_nothing_until_a_phase_begins() -> None:
    import io

    from rich.console import Console

    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=80)
    bar = cli_progress.BarObserver(console)
    bar.close()  # never started: nothing to stop
    assert screen.getvalue() == ""
    bar = cli_progress.BarObserver(console)
    bar.phase("reading", 10)
    bar.close()
    assert screen.getvalue().count("\x1b[?25l") == screen.getvalue().count("\x1b[?25h") == 1


def test_quiet_means_no_bar_at_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_progress, "is_terminal", lambda name: True)
    assert cli_progress.observer(quiet=True) is None
    assert cli_progress.observer(quiet=False, json_on_stderr=True) is None
    bar = cli_progress.observer(quiet=False)
    assert isinstance(bar, cli_progress.BarObserver)
    bar.close()
