"""The fuzz runs' sizes: a bounded run always, the 100,000-input runs only when asked for."""

from __future__ import annotations

import os

import pytest


def long_runs_wanted(config: pytest.Config) -> bool:
    return os.environ.get("OPENAB_LONG") == "1" or "long" in (config.getoption("markexpr") or "")


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("long") is not None and not long_runs_wanted(item.config):
        pytest.skip("a long fuzz run: OPENAB_LONG=1 or -m long runs it")
