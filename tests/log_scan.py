"""The suite's secrets scan: every secret the suite mints, looked for in every log record the pod's logging makes.

`openab run` installs :func:`openab_browser.gateway.logs.configure_logging`; :func:`install` does the same for the test
process at ``level`` (uvicorn's loggers too, which uvicorn resets at each server start), then wraps the record
factory that configuration installs, so each record is scanned once redacted, as a handler would write it,
whichever logger and handler it goes to. Secrets are what ``secrets.token_urlsafe``/``token_hex``/``token_bytes``
return (the pod's keys, bearer tokens, MCP session ids, the naming secret, the tests' own keys, right or
wrong), from :data:`MIN_CHARS` characters up; session ids (``sess_<uuid>``, a capability to resume a session)
are found by their shape. Records are scanned as they are made and never kept: memory holds the secrets and
the first few leaks only. :func:`scanning` does the same for one test at its own level (``trace`` too).
"""

from __future__ import annotations

import contextlib
import logging
import re
import secrets
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

import uvicorn

from openab_browser.gateway.logs import TRACE, configure_logging

__all__ = ["CLIENT_LOGGERS", "MIN_CHARS", "LogScan", "install", "scanning"]

# Shorter random values (a page text's 4-byte suffix) would match hex in ids and hashes by chance.
MIN_CHARS: Final = 16
# What token_urlsafe and token_hex are made of: a secret lies inside one run of these characters.
_RUN: Final = re.compile(rf"[A-Za-z0-9_-]{{{MIN_CHARS},}}")
_SESSION_ID: Final = re.compile(r"sess_[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_KEPT_LEAKS: Final = 20
# The libraries the tests drive as the agent's or the extension's side (the `mcp` SDK's client logs the
# Mcp-Session-Id it is given, the websockets client its own request): their records are the clients' logs, which
# no operator of the pod collects, and are not scanned.
CLIENT_LOGGERS: Final = ("mcp.client", "websockets.client", "httpx", "httpx2", "httpcore", "httpcore2", "acp")


@dataclass
class LogScan:
    """What was minted, what was scanned, and the leaks found (the first :data:`_KEPT_LEAKS`)."""

    session_ids: bool
    secrets: int = 0
    lines: int = 0
    chars: int = 0
    leaks: list[str] = field(default_factory=list)
    leak_count: int = 0
    watched: dict[str, int] = field(default_factory=dict)  # text -> lines it appeared in (not a leak: a probe)
    _by_prefix: dict[str, set[str]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def mint(self, value: str) -> None:
        if len(value) >= MIN_CHARS:
            with self._lock:
                self._by_prefix.setdefault(value[:MIN_CHARS], set()).add(value)
                self.secrets += 1

    def scan(self, line: str, origin: str) -> None:
        self.lines += 1
        self.chars += len(line)
        for match in _RUN.finditer(line):
            run = match.group()
            for start in range(len(run) - MIN_CHARS + 1):
                for secret in self._by_prefix.get(run[start:start + MIN_CHARS], ()):
                    if run.startswith(secret, start):
                        self._leak(f"{origin}: a minted secret ({len(secret)} characters) in {line[:300]!r}")
        for text in self.watched:
            if text in line:
                self.watched[text] += 1
        if self.session_ids and "sess_" in line and _SESSION_ID.search(line):
            self._leak(f"{origin}: a session id in {line[:300]!r}")

    def _leak(self, what: str) -> None:
        self.leak_count += 1
        if len(self.leaks) < _KEPT_LEAKS:
            self.leaks.append(what)

    def counts(self) -> dict[str, Any]:
        """What a test process found, as plain data: an xdist worker hands it to the controller."""
        return {"secrets": self.secrets, "lines": self.lines, "chars": self.chars, "leaks": self.leaks,
                "leak_count": self.leak_count}

    def add(self, counts: dict[str, Any]) -> None:
        """Count in what another test process found (:meth:`counts`)."""
        self.secrets += counts["secrets"]
        self.lines += counts["lines"]
        self.chars += counts["chars"]
        self.leak_count += counts["leak_count"]
        self.leaks.extend(counts["leaks"][: _KEPT_LEAKS - len(self.leaks)])

    def summary(self) -> str:
        kinds = "minted secrets and session ids" if self.session_ids else "minted secrets"
        return (f"secrets scan: {self.lines} log lines ({self.chars} characters) scanned for {self.secrets} "
                f"{kinds}: {self.leak_count} found")


# Where minted secrets go: every scan running (the suite's, and a test's own while it runs).
_minted_into: list[LogScan] = []
# The logging module's own record factory, under any openab redaction, and the level uvicorn's loggers get.
_state: dict[str, Any] = {"base": None, "level": None}


def _mint(value: str) -> None:
    for scan in _minted_into:
        scan.mint(value)


def _minting() -> None:
    """Wrap ``secrets``'s token functions once; every caller that looks them up on the module goes through."""
    if _state["base"] is not None:
        return
    _state["base"] = logging.getLogRecordFactory()

    def text(original: Callable[..., str]) -> Callable[..., str]:
        def minted(nbytes: int | None = None) -> str:
            value = original(nbytes)
            _mint(value)
            return value
        return minted

    def raw(original: Callable[..., bytes]) -> Callable[..., bytes]:
        def minted(nbytes: int | None = None) -> bytes:
            value = original(nbytes)
            _mint(value.hex())  # bytes reach a log line only encoded; hex is how openab writes them
            return value
        return minted

    secrets.token_urlsafe = text(secrets.token_urlsafe)
    secrets.token_hex = text(secrets.token_hex)
    secrets.token_bytes = raw(secrets.token_bytes)

    # Each uvicorn server (the gateway, every proxy listener) sets its loggers from its own config at start;
    # the scan wants them at the operator's level, as `openab run --log-level` sets them.
    configure = uvicorn.Config.configure_logging

    def at_scan_level(config: uvicorn.Config) -> None:
        configure(config)
        if _state["level"] is not None:
            for name in ("uvicorn", "uvicorn.error"):
                logging.getLogger(name).setLevel(_state["level"])

    uvicorn.Config.configure_logging = at_scan_level  # type: ignore[method-assign,assignment]
    # Records are scanned where they are made; a handler writing them all to the captured stderr would only
    # cost time (and basicConfig, inside configure_logging, adds none to a root that has one).
    logging.getLogger().addHandler(logging.NullHandler())


def _is_client(name: str) -> bool:
    return any(name == client or name.startswith(client + ".") for client in CLIENT_LOGGERS)


def _scanning_factory(scan: LogScan, make: Callable[..., logging.LogRecord]) -> Callable[..., logging.LogRecord]:
    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # malformed: the logging module reports it when a handler formats it
            return record
        if record.name.startswith(CLIENT_LOGGERS) and _is_client(record.name):
            return record
        scan.scan(message, record.name)
        if record.exc_text:
            scan.scan(record.exc_text, record.name)
        return record

    # It wraps the redacting factory: a later configure_logging must not wrap it again, outside the scan.
    factory.openab_redacting = True  # type: ignore[attr-defined]
    return factory


def _configure(level: str, scan: LogScan) -> None:
    """The pod's logging at ``level`` over the logging module's own records, each record then scanned."""
    logging.setLogRecordFactory(_state["base"])
    configure_logging(level)
    numeric = TRACE if level == "trace" else logging.getLevelName(level.upper())
    _state["level"] = numeric
    logging.getLogger().setLevel(numeric)
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).setLevel(numeric)
    logging.setLogRecordFactory(_scanning_factory(scan, logging.getLogRecordFactory()))


def install(level: str, *, session_ids: bool) -> LogScan:
    """The pod's logging at ``level`` for the whole test process, every record scanned; returns the scan."""
    _minting()
    scan = LogScan(session_ids=session_ids)
    _minted_into.append(scan)
    _configure(level, scan)
    return scan


@contextlib.contextmanager
def scanning(level: str) -> Iterator[LogScan]:
    """The pod's logging at ``level`` (``trace`` too) for one test, scanned on its own; the logging before after."""
    _minting()
    factory, state_level = logging.getLogRecordFactory(), _state["level"]
    loggers = {name: logging.getLogger(name).level for name in ("", "uvicorn", "uvicorn.error")}
    scan = LogScan(session_ids=True)
    _minted_into.append(scan)
    try:
        _configure(level, scan)
        yield scan
    finally:
        _minted_into.remove(scan)
        logging.setLogRecordFactory(factory)
        _state["level"] = state_level
        for name, old in loggers.items():
            logging.getLogger(name).setLevel(old)
