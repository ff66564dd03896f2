"""Shared pytest set-up: async tests run on anyio's plugin with the asyncio backend; the secrets scan."""

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from log_scan import LogScan, install


@pytest.fixture
def state() -> Iterator[Path]:
    """A pod's state dir that does not exist yet, in a 0700 temporary folder of its own (the pod makes it)."""
    root = Path(tempfile.mkdtemp(prefix="oab-"))
    try:
        yield root / "state"
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def gateway():  # type: ignore[no-untyped-def]
    """A real gateway with a fresh key and no agent backend."""
    from gateway_harness import run_gateway

    async with run_gateway() as running:
        yield running


# -- the secrets scan (tests/log_scan.py): no secret the suite mints may reach a log line ------------------------
# At `openab run`'s default level, info; OPENAB_LOG_SCAN=debug or trace for an operator's deeper levels (the whole
# suite at debug: 104k lines, but the hypothesis fuzz runs slow down many times; tests/test_log_secrets.py runs a
# whole flow at both on every run), off to skip.
_LOG_SCAN = os.environ.get("OPENAB_LOG_SCAN", "info")
_scan_key = pytest.StashKey[LogScan]()


def pytest_configure(config: pytest.Config) -> None:
    # A pod assembled without a state dir uses the default one: never the real user's, in a test.
    import tempfile

    os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="oab-xdg-state-")
    # A suite started in the background by a shell without job control (a CI runner's `... &`) inherits SIGINT and
    # SIGQUIT ignored, and so would every process it starts: JupyterHub's managed culler then ignored the SIGINT its
    # hub stops it with, and the hub waited its timeouts at every stop. Handled here, they are at their defaults in
    # each child (a handler is not inherited across exec), as systemd or a terminal starts a process.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGQUIT) == signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)


LONG_RUN_TIMEOUT = 3600
"""Seconds a full-size run (``@pytest.mark.long``) may take unless it says its own: the suite's bound (pyproject's
``timeout``) is for a CI-sized test, and a full-size one beside the fuzz runs took over it (200 x 500 calls: 301 s)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("long") is not None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(LONG_RUN_TIMEOUT))


def pytest_sessionstart(session: pytest.Session) -> None:
    if _LOG_SCAN != "off":
        session.config.stash[_scan_key] = install(_LOG_SCAN, session_ids=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    scan = session.config.stash.get(_scan_key, None)
    if scan is None:
        return
    # An xdist worker's own exit status is not the run's: it hands its scan to the controller (below), which
    # counts every worker's in before its own session finishes.
    worker_output = getattr(session.config, "workeroutput", None)
    if worker_output is not None:
        worker_output["secrets_scan"] = scan.counts()
    elif scan.leak_count and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Files side by side (``--dist loadfile``), except those of one machine-wide resource: every file that starts
    a hub (``test_hub*.py``, tests/hub_harness.py) makes the same Unix users, alice and bob, kills what they run
    when it stops their pods and removes them when it ends, so two such files at once stopped each other's pods
    and took each other's users away mid-test. They run one after another, on one worker."""
    from xdist.scheduler import LoadFileScheduling

    class OneHubAtATime(LoadFileScheduling):  # type: ignore[misc]  # xdist ships no types
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return "the hub's people" if Path(scope).name.startswith("test_hub") else scope

    return OneHubAtATime(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    scan = node.config.stash.get(_scan_key, None)
    counts = getattr(node, "workeroutput", {}).get("secrets_scan")
    if scan is not None and counts is not None:
        scan.add(counts)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    scan = terminalreporter.config.stash.get(_scan_key, None)
    if scan is None:
        return
    terminalreporter.write_line(scan.summary(), red=bool(scan.leak_count), green=not scan.leak_count)
    for leak in scan.leaks:
        terminalreporter.write_line(f"  leaked: {leak}", red=True)
