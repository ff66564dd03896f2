"""What the pod's log may say: no credential and no session id at any level, no page content below the
deliberate ``trace`` level.

Libraries log what they see: at debug level the websockets library writes every request header (the
``Authorization`` header, the ``openab.bearer.<key>`` subprotocol) and every frame (page text, typed
passwords). Redaction therefore happens where every record is made (a log record factory), whichever logger
and handler it goes to, and the pod's own keys are redacted wherever they appear.

``--log-format json`` (``OPENAB_LOG_FORMAT=json``) writes one JSON object a line for a log collector: ``time``
(UTC), ``level``, ``logger``, ``message``, and ``session`` (the session's tag) and ``request`` (the ACP request's
id) where the record was made in a session's work (:mod:`openab_browser.core.acp.logcontext`); ``exception`` holds a
traceback. The same factory made the record, so the same redaction applies.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable, Iterable
from typing import Any, Final

import orjson

from openab_browser.core.acp.logcontext import REQUEST_ID, SESSION_TAG
from openab_browser.core.session_naming import SessionNaming
from openab_browser.core.timestamps import iso_utc

__all__ = [
    "LOG_FORMATS", "TRACE", "JsonFormatter", "add_secret", "configure_logging", "json_logging", "name_sessions",
    "redact",
]

LOG_FORMATS: Final = ("text", "json")

# uvicorn's name for the level below debug: whole frames are logged only there.
TRACE: Final = 5

_REDACTED = "[redacted]"
_CREDENTIALS: Final = (
    # Not the placeholder "openab.bearer.<key>" that messages use to say how to present a key.
    (re.compile(r"(openab\.bearer\.)(?!<key>(?:[\s,;'\"]|$))[^\s,;'\"]+"), r"\1" + _REDACTED),
    (re.compile(r"(?i)(authorization['\"]?\s*[:=]\s*['\"]?)((?:bearer|basic|token)\s+)?[^\s,;'\"]+"),
     lambda m: f"{m.group(1)}{m.group(2) or ''}{_REDACTED}"),
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 " + _REDACTED),
    # A request line's query ("WebSocket /acp?token=..." in uvicorn's lines): no openab endpoint takes anything
    # there, so it is only ever a client's mistake, often a key.
    (re.compile(r"((?:WebSocket|GET|POST|PUT|DELETE|PATCH|HEAD|OPTIONS) /[^\s?\"']*)\?[^\s\"']*"),
     r"\1?" + _REDACTED),
)
# A path with a query, given as a record's argument on its own (uvicorn's access lines: method, path apart).
_PATH_QUERY: Final = re.compile(r"^(/[^\s?\"']*)\?[^\s\"']*")
# Loggers whose formatter unpacks a record's arguments itself: uvicorn's access formatter takes five.
_UNPACKS_ARGS: Final = frozenset({"uvicorn.access"})
# The websockets library's frame lines: "< TEXT '{...}' [114 bytes]".
_FRAME: Final = re.compile(r"^([<>] (?:TEXT|BINARY|CONT)) .* (\[\d+ bytes\])$", re.DOTALL)

_secrets: set[str] = set()
_TRACEBACKS: Final = logging.Formatter()

# A session id resumes its session from any socket that names it: the log shows each by its tag instead.
_SESSION_ID: Final = re.compile(r"sess_[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_session_tag: Callable[[str], str] = SessionNaming().tag


def name_sessions(tag: Callable[[str], str]) -> None:
    """Show session ids in log lines as ``tag(id)`` (the pod's :meth:`SessionNaming.tag`, as its audit log does)."""
    global _session_tag
    _session_tag = tag


def add_secret(secret: str) -> None:
    """Redact ``secret`` (a key, a token) wherever it appears in a log line from now on."""
    if secret:
        _secrets.add(secret)


def redact(text: str) -> str:
    """``text`` with every credential we know the shape of and every secret we were given replaced, and every
    session id shown as its tag."""
    for pattern, replacement in _CREDENTIALS:
        text = pattern.sub(replacement, text)
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, _REDACTED)
    if "sess_" in text:
        text = _SESSION_ID.sub(lambda m: _session_tag(m.group(0)), text)
    return text


def _redacting_factory(make: Callable[..., logging.LogRecord], trace: bool) -> Callable[..., logging.LogRecord]:
    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is the logging module's to report, as it would have
            return record
        if not trace:
            message = _FRAME.sub(r"\1 \2", message)
        record.msg, record.args = _redacted_msg_args(record, redact(message))
        if record.exc_info and not record.exc_text:
            # A handler's formatter would render the traceback later, unredacted; it keeps one already made.
            record.exc_text = _TRACEBACKS.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        # Where the record was made: a handler may format it later, in another context.
        record.openab_session, record.openab_request = SESSION_TAG.get(), REQUEST_ID.get()
        return record

    return factory


def _redacted_msg_args(record: logging.LogRecord, message: str) -> tuple[Any, Any]:
    """The record's ``msg`` and ``args`` once redacted, rendering as ``message`` (the whole line redacted).

    Formatters may read ``args`` themselves (uvicorn's access formatter unpacks its five), so a record keeps
    arguments of its own shape where that is safe: each one redacted, when together they still render as the
    redacted line (a credential split across two arguments does not). Else, for a logger whose formatter
    unpacks them, each argument becomes the placeholder (numbers stay, for ``%d``); else the redacted line
    alone, with no arguments.
    """
    msg, args = record.msg, record.args
    if not (isinstance(msg, str) and isinstance(args, tuple) and args):
        return message, None
    plain = [arg for arg in args if isinstance(arg, str | int | float)]
    if len(plain) == len(args):
        kept = tuple(_redact_arg(arg) for arg in plain)
        with contextlib.suppress(TypeError, ValueError):
            if msg % kept == message:
                return msg, kept
    if record.name in _UNPACKS_ARGS:
        shaped = tuple(arg if isinstance(arg, int | float) and not _differs(arg) else _REDACTED for arg in args)
        safe_msg = redact(msg)
        with contextlib.suppress(TypeError, ValueError):
            if redact(line := safe_msg % shaped) == line:
                return safe_msg, shaped
    return message, None


def _differs(arg: object) -> bool:
    """Whether redaction would change ``arg`` as text (a known secret made of digits, however unlikely)."""
    text = str(arg)
    return redact(text) != text


def _redact_arg(arg: str | int | float) -> str | int | float:
    if not isinstance(arg, str):
        return _REDACTED if _differs(arg) else arg
    # A request's path alone (uvicorn's access arguments): its query, as the request line's pattern does.
    return redact(_PATH_QUERY.sub(r"\1?" + _REDACTED, arg))


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ``time``, ``level``, ``logger``, ``message``, and where the record has them,
    ``session`` (a tag), ``request``, ``exception`` and ``stack``."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, str] = {
            "time": iso_utc(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        session, request = getattr(record, "openab_session", None), getattr(record, "openab_request", None)
        if session is not None:
            entry["session"] = session
        if request is not None:
            entry["request"] = request
        if record.exc_info and not record.exc_text:  # a record not made by our factory: rendered here, redacted
            record.exc_text = redact(self.formatException(record.exc_info))
        if record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = record.stack_info
        # orjson escapes every control character: a message cannot end its line early and forge the next record.
        return orjson.dumps(entry).decode()


_json_logging = False


def json_logging() -> bool:
    """Whether the pod logs JSON lines (uvicorn must then leave its loggers to ours, see ``uvicorn_config``)."""
    return _json_logging


class _RateLimited(logging.Filter):
    """At most one record a ``period`` for messages starting with ``prefix``, then a count of the rest.

    ``level`` re-files the record that passes: a fault of the client's is no error of the server's.
    """

    def __init__(self, prefix: str, period: float = 10.0, clock: Callable[[], float] = time.monotonic,
                 level: int | None = None) -> None:
        super().__init__()
        self.prefix, self._period, self._clock, self._level = prefix, period, clock, level
        self._last = float("-inf")
        self._dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(self.prefix):
            return True
        if self._level is not None:
            if not logging.getLogger(record.name).isEnabledFor(self._level):
                return False
            record.levelno, record.levelname = self._level, logging.getLevelName(self._level)
        now = self._clock()
        if now - self._last < self._period:
            self._dropped += 1
            return False
        if self._dropped:
            record.msg = f"{record.msg} ({self._dropped} more like it in the last {self._period:g} s)"
        record.exc_info, record.exc_text = None, None  # one line, not a traceback per accept
        self._last, self._dropped = now, 0
        return True


def configure_logging(level: str, *, secrets: Iterable[str] = (), log_format: str = "text") -> None:
    """The pod's logging: ``level`` (``trace`` shows whole frames), credentials and ``secrets`` redacted, as
    text lines or (``log_format="json"``) JSON ones."""
    global _json_logging
    if log_format not in LOG_FORMATS:
        raise ValueError(f"unknown log format {log_format!r}: give text or json (--log-format, OPENAB_LOG_FORMAT)")
    numeric = TRACE if level == "trace" else getattr(logging, level.upper())
    logging.addLevelName(TRACE, "TRACE")
    if log_format == "json":
        handler = logging.StreamHandler()
        handler.setFormatter(JsonFormatter())
        # force: a handler another library set up first would write text lines beside ours.
        logging.basicConfig(level=numeric, handlers=[handler], force=True)
        _json_logging = True
    else:
        logging.basicConfig(level=numeric, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _secrets.update(s for s in secrets if s)
    current = logging.getLogRecordFactory()
    if not getattr(current, "openab_redacting", False):
        factory = _redacting_factory(current, trace=numeric <= TRACE)
        factory.openab_redacting = True  # type: ignore[attr-defined]
        logging.setLogRecordFactory(factory)
    # uvicorn's access log keeps one line per request at info (its own config sets that logger's level when
    # the server starts); redaction keeps their arguments' shape for its formatter (_redacted_msg_args).
    # At the file-descriptor limit asyncio logs a traceback for every failed accept, many a second.
    _limit("asyncio", _RateLimited("socket.accept() out of system resource"))
    # uvicorn logs a client's text frame that is not UTF-8 as an ERROR with its own traceback: anyone who can
    # open a socket could fill the log with them. The socket is closed with 1007 either way.
    _limit("uvicorn.error", _RateLimited("Invalid UTF-8 sequence received from client", level=logging.INFO))


def _limit(name: str, limiter: _RateLimited) -> None:
    """Adds ``limiter`` to the logger ``name`` unless configuring again already did."""
    logger = logging.getLogger(name)
    if not any(isinstance(f, _RateLimited) and f.prefix == limiter.prefix for f in logger.filters):
        logger.addFilter(limiter)
