"""Shared fixtures: sample programs (built once per session) and a terminal for CliRunner;
the policy for the opt-in long runs and for a missing Paddle or mypy (the CLI itself is
run by `invoke`, tests/support/commandline.py).

Tests marked `paddle` need the real PaddlePaddle (`pip install 'vppctl[paddle]'`), tests
marked `dev` need mypy (the dev extra). Without them they are skipped, the reason naming
the extra, so a bare `pytest` passes; CI sets VPPCTL_REQUIRE_PADDLE=1 and
VPPCTL_REQUIRE_DEV=1 (.ci/run), and then a missing one fails the run instead.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

SLOW = os.environ.get("VPPCTL_SLOW") == "1"

# Progress lines appear for phases that take over a second, which depends on the machine's
# load: off for the suite (child processes inherit it), so that a test that asserts what
# stderr holds cannot flake; tests/cli/test_progress.py turns it on where it is the subject.
os.environ["VPPCTL_PROGRESS"] = "off"
HAVE_PADDLE = importlib.util.find_spec("paddle") is not None
REQUIRE_PADDLE = os.environ.get("VPPCTL_REQUIRE_PADDLE") == "1"
NO_PADDLE = (
    "PaddlePaddle is not installed; this test needs the paddle extra: "
    "pip install 'vppctl[paddle]' (paddlepaddle==3.3.1)"
)


HAVE_MYPY = importlib.util.find_spec("mypy") is not None
REQUIRE_DEV = os.environ.get("VPPCTL_REQUIRE_DEV") == "1"
NO_MYPY = "mypy is not installed; this test needs the dev extra: pip install -e '.[dev]'"


def pytest_configure(config: pytest.Config) -> None:
    if REQUIRE_PADDLE and not HAVE_PADDLE:
        raise pytest.UsageError(f"VPPCTL_REQUIRE_PADDLE=1, but {NO_PADDLE}")
    if REQUIRE_DEV and not HAVE_MYPY:
        raise pytest.UsageError(f"VPPCTL_REQUIRE_DEV=1, but {NO_MYPY}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The modules marked `heavy` (tens of seconds each) run first: the test workers take
    # files in this order, so the long ones start at once and the short ones fill in
    # behind them, and the workers finish together (longest first). The sort is stable:
    # each module's tests stay together and in order.
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)
    long_run = pytest.mark.skip(reason="long run; set VPPCTL_SLOW=1 to run it")
    no_paddle = pytest.mark.skip(reason=NO_PADDLE)
    no_mypy = pytest.mark.skip(reason=NO_MYPY)
    for item in items:
        if "slow" in item.keywords and not SLOW:
            item.add_marker(long_run)
        if "paddle" in item.keywords and not HAVE_PADDLE:
            item.add_marker(no_paddle)
        if "dev" in item.keywords and not HAVE_MYPY:
            item.add_marker(no_mypy)


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """CliRunner's stdout taken for an 80-column terminal without colours: tables are
    rendered to fit it (a pipe, CliRunner's own, gets whole lines instead)."""
    from vppctl.cli import streams

    monkeypatch.setattr(streams, "is_terminal", lambda name: name == "stdout")
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("TERM", "dumb")  # no styles: the text as it reads


@pytest.fixture(scope="session")
def gpt126(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 126-layer sample at pp 8 (`vppctl sample --layers 126 --pp 8`), built once."""
    from vppctl.commands import sample_file
    from vppctl.sample import SampleOptions

    path = tmp_path_factory.mktemp("gpt126") / "gpt126.pb"
    sample_file(path, SampleOptions(layers=126, pp=8))
    return path


@pytest.fixture(scope="session")
def sample_bytes() -> dict[tuple[int, int], bytes]:
    """Serialized samples by (layers, pp), built on first use."""
    return _SampleCache()


class _SampleCache(dict):  # type: ignore[type-arg]
    def __missing__(self, key: tuple[int, int]) -> bytes:
        from vppctl.sample import SampleOptions, build_sample

        layers, pp = key
        data = build_sample(SampleOptions(layers=layers, pp=pp, hidden=64, vocab=1000))
        self[key] = data
        return data
