"""What the pod's log may say: no credential at any level, no page content below the deliberate ``trace`` level.

Libraries log what they see: at debug level the websockets library writes every request header (the
``Authorization`` header, the ``openab.bearer.<key>`` subprotocol) and every frame (page text, typed
passwords). Redaction therefore happens where every record is made (a log record factory), whichever logger
and handler it goes to, and the pod's own keys are redacted wherever they appear.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable
from typing import Any, Final

__all__ = ["TRACE", "add_secret", "configure_logging", "redact"]

# uvicorn's name for the level below debug: whole frames are logged only there.
TRACE: Final = 5

_REDACTED = "[redacted]"
_CREDENTIALS: Final = (
    (re.compile(r"(openab\.bearer\.)[^\s,;'\"]+"), r"\1" + _REDACTED),
    (re.compile(r"(?i)(authorization['\"]?\s*[:=]\s*['\"]?)((?:bearer|basic|token)\s+)?[^\s,;'\"]+"),
     lambda m: f"{m.group(1)}{m.group(2) or ''}{_REDACTED}"),
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 " + _REDACTED),
)
# The websockets library's frame lines: "< TEXT '{...}' [114 bytes]".
_FRAME: Final = re.compile(r"^([<>] (?:TEXT|BINARY|CONT)) .* (\[\d+ bytes\])$", re.DOTALL)

_secrets: set[str] = set()


def add_secret(secret: str) -> None:
    """Redact ``secret`` (a key, a token) wherever it appears in a log line from now on."""
    if secret:
        _secrets.add(secret)


def redact(text: str) -> str:
    """``text`` with every credential we know the shape of, and every secret we were given, replaced."""
    for pattern, replacement in _CREDENTIALS:
        text = pattern.sub(replacement, text)
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, _REDACTED)
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
        record.msg, record.args = redact(message), None
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return record

    return factory


class _RateLimited(logging.Filter):
    """At most one record a ``period`` for messages starting with ``prefix``, then a count of the rest."""

    def __init__(self, prefix: str, period: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._prefix, self._period, self._clock = prefix, period, clock
        self._last = float("-inf")
        self._dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(self._prefix):
            return True
        now = self._clock()
        if now - self._last < self._period:
            self._dropped += 1
            return False
        if self._dropped:
            record.msg = f"{record.msg} ({self._dropped} more like it in the last {self._period:g} s)"
        record.exc_info, record.exc_text = None, None  # one line, not a traceback per accept
        self._last, self._dropped = now, 0
        return True


def configure_logging(level: str, *, secrets: Iterable[str] = ()) -> None:
    """The pod's logging: ``level`` (``trace`` shows whole frames), credentials and ``secrets`` redacted."""
    numeric = TRACE if level == "trace" else getattr(logging, level.upper())
    logging.addLevelName(TRACE, "TRACE")
    logging.basicConfig(level=numeric, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _secrets.update(s for s in secrets if s)
    current = logging.getLogRecordFactory()
    if not getattr(current, "openab_redacting", False):
        factory = _redacting_factory(current, trace=numeric <= TRACE)
        factory.openab_redacting = True  # type: ignore[attr-defined]
        logging.setLogRecordFactory(factory)
    # One line per session event is ours to log; uvicorn's access lines and the agents' stderr are noise.
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
    # At the file-descriptor limit asyncio logs a traceback for every failed accept, many a second.
    logging.getLogger("asyncio").addFilter(_RateLimited("socket.accept() out of system resource"))
