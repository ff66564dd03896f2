"""What every surface owes each hostile input, read independently of openab's own engine.

* every message back is well-formed JSON-RPC: an answer has ``jsonrpc: "2.0"``, an ``id`` that was sent (or
  ``null``), and exactly one of ``result`` / an ``error`` with an integer code and a message that says something;
* every *clean* request (one whose envelope a reader of the spec can tell is a request with a usable id, sent
  once in its batch) gets exactly one answer under its id, within the deadline;
* nothing is logged at ERROR, with a traceback, or as a task that died.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
import pytest

IdRule = Literal["json-rpc", "mcp"]
IdKey = tuple[str, Any]

DEADLINE = 10.0  # seconds a batch's answers may take; more is a hang
MAX_ID_CHARS = 1024  # the contract's bound on a string id (docs/architecture.md)


def id_key(value: Any) -> IdKey:
    """1 and 1.0 are different ids on the wire, and so different here."""
    return (type(value).__name__, value)


def usable_id(value: Any, rule: IdRule) -> bool:
    """An id the contract echoes (``null`` aside: many answers carry it)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, str):
        return len(value) <= MAX_ID_CHARS
    if isinstance(value, int):
        return True
    return rule == "json-rpc" and isinstance(value, float) and math.isfinite(value)


def decode(data: bytes) -> Any:
    """The message as orjson reads it (the parser every hop uses), or ``None`` when unreadable."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


def clean_request(message: Any, rule: IdRule) -> IdKey | None:
    """The id of a message that is unmistakably a request, else ``None``."""
    if not isinstance(message, dict) or "id" not in message or not isinstance(message.get("method"), str):
        return None
    if message.get("jsonrpc") != "2.0" or not usable_id(message["id"], rule):
        return None
    return id_key(message["id"])


@dataclass
class Batch:
    """The requests one batch of frames owes answers to, and what came back for them."""

    rule: IdRule
    # Answers the batch before may still get (its requests excused from waiting for, its ids sent twice): one
    # may arrive during this batch, so they raise the most answers an id of this one may have.
    late: Counter[IdKey] = field(default_factory=Counter)
    sent: Counter[IdKey] = field(default_factory=Counter)  # every id sent, clean or not
    clean: Counter[IdKey] = field(default_factory=Counter)
    answered: Counter[IdKey] = field(default_factory=Counter)
    # Requests MCP lets go unanswered: cancelled by notifications/cancelled, or a listen stream (it ends only
    # when the server closes).
    excused: set[IdKey] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)

    def sent_message(self, message: Any) -> None:
        if isinstance(message, dict) and "id" in message:
            with contextlib.suppress(TypeError):  # an unhashable id (a list, an object) is never echoed
                self.sent[id_key(message["id"])] += 1
        key = clean_request(message, self.rule)
        if key is not None:
            self.clean[key] += 1
            if message["method"] == "subscriptions/listen":
                self.excused.add(key)
        if isinstance(message, dict) and "id" not in message and message.get("method") == "notifications/cancelled":
            params = message.get("params")
            cancelled = params.get("requestId") if isinstance(params, dict) else None
            if isinstance(cancelled, str | int | float) and not isinstance(cancelled, bool):
                self.excused.add(id_key(cancelled))

    def complete(self) -> bool:
        return all(self.answered[key] >= 1 for key in self.clean if key not in self.excused)

    def received(self, message: Any) -> None:
        problem = malformed(message, self.sent + self.late)
        if problem is not None:
            self.problems.append(f"{problem}: {_preview(message)}")
            return
        if "method" not in message and message["id"] is not None:
            self.answered[id_key(message["id"])] += 1

    def still_owed(self) -> Counter[IdKey]:
        """What the next batch takes as :attr:`late`: the answers this one and earlier ones may still get (an
        excused request, a second message under one id), less those that came."""
        owed = Counter({key: count - self.answered[key] for key, count in self.sent.items()})
        return +(self.late + owed)  # unary plus drops what is zero or less

    def verdict(self) -> list[str]:
        problems = list(self.problems)
        # An id sent twice in a batch: the second copy is refused under null while the first runs, and answered
        # under its id once the first is done; a malformed message may be refused under its id too. So at least
        # one answer, and at most one per message that carried the id.
        problems += [f"{self.answered[key]} answers to request {key[1]!r} sent {self.sent[key]} time(s)"
                     for key in self.clean
                     if not (0 if key in self.excused else 1) <= self.answered[key] <= self.sent[key] + self.late[key]]
        return problems


def malformed(message: Any, sent: Counter[IdKey] | None = None) -> str | None:
    """Why ``message`` (as a JSON-RPC client reads it) breaks the spec, or ``None``; ``sent`` (when known) holds
    the ids an answer may carry."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return "not a JSON-RPC 2.0 object"
    if "method" in message:  # the server's own request or notification
        return None if isinstance(message["method"], str) else "a method that is not a string"
    if "id" not in message:
        return "an answer without an id"
    if set(message) - {"jsonrpc", "id", "result", "error"}:
        return "an answer with members JSON-RPC does not have"
    if ("result" in message) == ("error" in message):
        return "an answer with both or neither of result and error"
    if message["id"] is not None and not usable_id(message["id"], "json-rpc"):
        return "an answer whose id JSON-RPC does not allow"
    if message["id"] is not None and sent is not None and id_key(message["id"]) not in sent:
        return "an answer to an id never sent"
    error = message.get("error")
    if "error" in message:
        if not isinstance(error, dict) or isinstance(error.get("code"), bool) \
                or not isinstance(error.get("code"), int):
            return "an error without an integer code"
        if not isinstance(error.get("message"), str) or not error["message"].strip():
            return "an error without a message"
    return None


def _preview(value: Any, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def log_failures(records: Iterable[logging.LogRecord]) -> list[str]:
    """Records that mean something broke: ERROR and above, tracebacks, tasks that died."""
    found = []
    for record in records:
        text = record.getMessage()
        if record.levelno >= logging.ERROR or record.exc_info or "Traceback" in text:
            found.append(f"{record.levelname} {record.name}: {text[:500]}")
    return found


def assert_quiet_logs(caplog: pytest.LogCaptureFixture, *, collect: bool = False) -> None:
    """Fail on any record that says a task died or a handler raised; then forget what was seen.

    ``collect`` first collects garbage: a task that died unobserved inside a reference cycle is only reported
    then (a full collection costs ~0.1 s with hypothesis's heap: once per run, not per batch).
    """
    if collect:
        gc.collect()
    failures = log_failures(caplog.records)
    caplog.clear()
    assert not failures, "\n".join(failures)


@dataclass
class Tally:
    """A surface's counts for the report: inputs tried, crashes, hangs, 5xx without a JSON-RPC body."""

    surface: str
    tried: int = 0
    crashes: int = 0
    hangs: int = 0
    bad_5xx: int = 0
    reconnects: int = 0

    def line(self) -> str:
        return (f"{self.surface}: tried={self.tried} crashes={self.crashes} hangs={self.hangs} "
                f"bad_5xx={self.bad_5xx} reconnects={self.reconnects}")


async def next_line(reader: asyncio.StreamReader) -> bytes:
    """The next line the surface wrote, or ``b""`` once it hung up (closed or reset: either way, it is gone)."""
    try:
        return await reader.readline()
    except ConnectionError:
        return b""
