"""What the atheris harnesses share: the oracle on every line they get back, a trap for logged failures, and
the entry point. Each harness runs in its own process (``python tests/fuzz/atheris_<surface>.py -runs=N``):
libFuzzer owns the process, and an uncaught exception in ``TestOneInput`` is the crash it reports.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

import atheris
import orjson

from fuzz.oracles import log_failures, malformed
from openab_browser.gateway.logs import configure_logging


class LogTrap(logging.Handler):
    """Keeps the records that mean something broke (ERROR, a traceback), for :meth:`check` to raise on."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []
        root = logging.getLogger()
        root.addHandler(self)
        # The pod's own logging, as `openab run` installs it (with this trap as the root's handler already,
        # it adds none of its own).
        configure_logging("warning")

    def emit(self, record: logging.LogRecord) -> None:
        if log_failures([record]):
            self.records.append(record)

    def check(self) -> None:
        failures = log_failures(self.records)
        self.records.clear()
        if failures:
            raise AssertionError("\n".join(failures))


def check_answer(raw: bytes) -> None:
    """One message the surface sent back: JSON, and well-formed JSON-RPC."""
    message = orjson.loads(raw)
    problem = malformed(message)
    if problem is not None:
        raise AssertionError(f"{problem}: {raw[:300]!r}")


def run(test_one_input: Callable[[bytes], None]) -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
