"""Shared fixtures: sample programs (built once per session) and a CLI runner."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))

SLOW = os.environ.get("VPPCTL_SLOW") == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if SLOW:
        return
    skip = pytest.mark.skip(reason="long run; set VPPCTL_SLOW=1 to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


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
