"""A JSON-RPC 2.0 peer that knows nothing of sockets.

Every hop of openab speaks JSON-RPC: the extension's `/acp` WebSocket, the agent CLI's stdio, the bridge's
Unix socket. :class:`Peer` holds the state of one such connection. Feed it each received message with
:meth:`Peer.receive`; it returns :data:`Event` objects for the application, and queues whatever must be sent
(error answers it gives on its own, the application's responses and requests) for :meth:`Peer.data_to_send`.
Time is passed in, never read, so timeouts are as testable as the rest.

The rules are those of the `/acp` contract (upstream openab, §1.4 of its design):

* a message is a notification exactly when it has no ``id`` key (``"id": null`` is a request);
* a message with ``id``, ``result`` or ``error`` and no ``method`` answers one of our requests;
* parse failures, batches and malformed envelopes get -32700 / -32600 with ``id: null`` when the id is unusable;
* notifications are never answered, not even when they are malformed;
* a message nested more than :data:`MAX_DEPTH` levels deep is refused on the way in (-32600), because orjson
  writes only 254 levels: a deeper one would be read here and fail with a traceback at the next hop's write.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

import orjson

from ..errors import TooManyPendingRequests
from . import passthrough
from .errors import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    SERVER_OVERLOADED,
    LocalRpcError,
    RemoteRpcError,
    RpcError,
)
from .passthrough import PassThrough, is_answer

__all__ = [
    "MAX_DEPTH",
    "MAX_ID_CHARS",
    "Event",
    "IdRule",
    "Invalid",
    "JsonObject",
    "Notification",
    "Peer",
    "Reply",
    "Request",
    "RequestFailed",
    "RequestId",
    "Response",
    "classify",
    "dumps",
    "error_message",
    "id_key",
    "notification_message",
    "reply_id",
    "request_message",
    "result_message",
    "too_deep",
    "too_deep_error",
    "unreadable_error",
]

JsonObject = dict[str, Any]
RequestId = int | str | float | None

# How deep a message may nest arrays and objects, the envelope object being level 1. orjson reads 1024 levels
# but writes only 254, and every hop wraps what it relays in a few more: 128 leaves room for that, and no
# message of ACP or MCP comes near it.
MAX_DEPTH: Final = 128
# A string id longer than this is refused: ids are echoed in answers and error texts and held while a request
# runs, and no client needs more than a UUID or two.
MAX_ID_CHARS: Final = 1024
# A JSON string literal, to skip the brackets inside strings when counting how deep a broken document got.
_STRING_LITERAL: Final = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def request_message(request_id: RequestId, method: str, params: Any = None) -> JsonObject:
    """A request envelope; ``params`` is left out when ``None``."""
    message: JsonObject = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def notification_message(method: str, params: Any = None) -> JsonObject:
    """A notification envelope (no ``id``: never answered); ``params`` is left out when ``None``."""
    message: JsonObject = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def result_message(request_id: RequestId, result: Any) -> JsonObject:
    """The success answer to request ``request_id``."""
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_message(request_id: RequestId, error: RpcError) -> JsonObject:
    """The error answer to request ``request_id`` (``None`` when the request's id could not be read)."""
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_json()}


def dumps(message: JsonObject) -> bytes:
    """Serialize one message; never emits a newline, so it is safe for line-delimited transports."""
    return orjson.dumps(message)


@dataclass(frozen=True, slots=True)
class Request:
    """The peer asks us something; answer with :meth:`Peer.send_result` or :meth:`Peer.send_error`."""

    id: RequestId
    method: str
    params: Any
    size: int


@dataclass(frozen=True, slots=True)
class Notification:
    """The peer tells us something; never answered."""

    method: str
    params: Any
    size: int


@dataclass(frozen=True, slots=True)
class Response:
    """The answer to one of our requests. Exactly one of ``result`` / ``error`` is meaningful."""

    id: int
    result: Any
    error: RpcError | None
    context: Any


@dataclass(frozen=True, slots=True)
class RequestFailed:
    """One of our requests ended without an answer: it timed out (``timed_out``) or the connection is gone
    (``detail`` says how)."""

    id: int
    method: str
    timed_out: bool
    detail: str
    context: Any


Event = Request | Notification | Response | RequestFailed


@dataclass(slots=True)
class _Pending:
    method: str
    deadline: float | None
    context: Any


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests arrays and objects more than ``limit`` levels deep (``{}`` alone is one level).

    Level by level rather than recursively, so no input can exhaust the stack; it stops at the first level
    past the limit, so a deep chain costs ``limit`` steps, and a wide message one look at each container.
    """
    level = [value] if isinstance(value, (dict, list)) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        level = [
            child
            for node in level
            for child in (node.values() if isinstance(node, dict) else node)
            if isinstance(child, (dict, list))
        ]
    return False


def too_deep_error(limit: int = MAX_DEPTH) -> RpcError:
    """The -32600 for a message nested past ``limit``: it names the bound and what to send instead."""
    return LocalRpcError(
        INVALID_REQUEST,
        f"Invalid Request: nested more than {limit} levels deep (the limit of every openab hop); "
        "send flatter JSON",
    )


# Up to this size a frame's brackets are counted before its parsed value is walked (counting costs by the byte,
# a few µs here); a larger one is walked at once, as it is mostly one long string (a screenshot, a page's text)
# with few containers, or an attack whose walk costs about what parsing it did.
_COUNT_UP_TO: Final = 4096


def _nested_past(data: bytes | str, message: Any, limit: int) -> bool:
    """Whether the parsed ``message`` of frame ``data`` nests past ``limit``; callers first rule out frames
    too small to (one needs twice ``limit`` bytes)."""
    if len(data) <= _COUNT_UP_TO:
        # Exact as a filter: a message nested past `limit` has more opening brackets than that.
        brackets = data.count("[") + data.count("{") if isinstance(data, str) else data.count(b"[") + data.count(b"{")
        if brackets <= limit:
            return False
    return too_deep(message, limit)


def utf8_size(data: bytes | str) -> int:
    """The size of a frame on the wire, in bytes. A str is encoded to count it only when it is not ASCII:
    ``isascii`` reads a flag CPython keeps on every str, while encoding copies the frame (6 MiB for a
    screenshot, every time one arrives)."""
    if isinstance(data, bytes) or data.isascii():
        return len(data)
    return len(data.encode("utf-8", "surrogatepass"))


def unreadable_error(error: orjson.JSONDecodeError, limit: int = MAX_DEPTH) -> RpcError:
    """The answer (under ``null``) to a message orjson could not read: the nesting bound's -32600 when it stopped
    nested past ``limit`` (orjson gives up at 1024 levels), else -32700 with orjson's reason. Every hop that
    parses on its own (the proxy, the bridge) answers with it, so a client hears the same words everywhere."""
    if _failed_deep(error, limit):
        return too_deep_error(limit)
    return LocalRpcError(PARSE_ERROR, f"Parse error: {error}")


def _failed_deep(error: orjson.JSONDecodeError, limit: int) -> bool:
    """Whether a document orjson refused was nested past ``limit`` where it stopped reading.

    orjson gives up at 1024 levels after reading just that far, so the work here is bounded by where it
    stopped, whatever the size of the frame.
    """
    if not isinstance(error.doc, str) or not isinstance(error.pos, int):
        return False
    read = error.doc[: error.pos + 1]
    if read.count("[") + read.count("{") <= limit:
        return False
    read = _STRING_LITERAL.sub("", read)
    return read.count("[") + read.count("{") - read.count("]") - read.count("}") > limit


def id_key(request_id: Any) -> tuple[str, RequestId]:
    """A hashable identity for an id: 1 and "1" are different ids on the wire.

    Total: a cancellation names its request by whatever the peer wrote, and an object or an array (which no
    request can have as its id) gets a key no request holds, rather than a TypeError in the read loop.
    """
    if request_id is not None and not isinstance(request_id, str | int | float):
        return ("not an id", None)
    return (type(request_id).__name__, request_id)


def _json_rpc_id(value: Any) -> bool:
    if value is None or isinstance(value, str):
        return True
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value)


def _mcp_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


IdRule = Literal["json-rpc", "mcp"]
# JSON-RPC (and so ACP) allows string, number or null ids; MCP narrows them to strings and integers.
_ID_RULES: Final[dict[IdRule, tuple[Callable[[Any], bool], str]]] = {
    "json-rpc": (_json_rpc_id, "a string, number, or null"),
    "mcp": (_mcp_id, "a string or an integer"),
}


@dataclass(frozen=True, slots=True)
class Invalid:
    """A message that breaks the envelope rules: answer ``error`` under ``id`` (null when unusable)."""

    id: RequestId
    error: RpcError


@dataclass(frozen=True, slots=True)
class Reply:
    """A response-shaped message (``id`` and ``result`` or ``error``, no ``method``)."""

    id: RequestId
    message: JsonObject


def classify(
    message: Any, *, size: int = 0, ids: IdRule = "json-rpc"
) -> Request | Notification | Reply | Invalid | None:
    """What one decoded message is, by the envelope rules alone; ``None`` for one to drop without a word.

    A message is a notification exactly when it has no ``id`` key; a malformed notification is dropped,
    because nothing may answer a notification.
    """
    if not isinstance(message, dict):
        kind = "batches are not supported" if isinstance(message, list) else "expected a JSON object"
        return Invalid(None, LocalRpcError(INVALID_REQUEST, f"Invalid Request: {kind}"))
    has_id = "id" in message
    request_id = message.get("id")
    valid_id, id_words = _ID_RULES[ids]
    if has_id and not valid_id(request_id):
        return Invalid(None, LocalRpcError(INVALID_REQUEST, f"Invalid Request: id must be {id_words}"))
    if is_answer(message):
        return Reply(request_id, message)
    if isinstance(request_id, str) and len(request_id) > MAX_ID_CHARS:
        too_long = f"Invalid Request: id longer than {MAX_ID_CHARS} characters"
        return Invalid(None, LocalRpcError(INVALID_REQUEST, too_long))
    method = message.get("method")
    problem = (
        "method must be a string" if not isinstance(method, str)
        else 'jsonrpc must be "2.0"' if message.get("jsonrpc") != "2.0"
        else None
    )
    if problem is not None:
        return Invalid(request_id, LocalRpcError(INVALID_REQUEST, f"Invalid Request: {problem}")) if has_id else None
    assert isinstance(method, str)
    if not has_id:
        return Notification(method, message.get("params"), size)
    return Request(request_id, method, message.get("params"), size)


def reply_id(message: Any, *, ids: IdRule = "json-rpc") -> RequestId:
    """The id an error answer to ``message`` goes under: its own when ``ids`` allows it, else ``null`` (an answer
    must never echo an id no request may have, such as ``true`` or an object)."""
    kind = classify(message, ids=ids)
    return kind.id if isinstance(kind, Request | Invalid) else None


class Peer:
    """State of one JSON-RPC connection, for either side of any hop.

    ``max_pending`` bounds our unanswered requests; ``max_open_requests`` bounds the peer's requests we have
    not answered yet (over it they get -32000 at once). ``max_method_bytes``, when set, is the size limit for
    any message that carries a ``method``: responses may be larger (a screenshot result), requests and
    notifications may not. ``max_depth`` bounds nesting (:data:`MAX_DEPTH`): a request past it gets -32600, an
    answer past it fails the request it answers, a notification past it is dropped. Late answers to ids we
    abandoned find nothing pending and are dropped quietly. ``pass_through``, when set, keeps the long strings it
    names in answers as the JSON they arrived in (:mod:`.passthrough`): a screenshot is relayed, not re-parsed.
    """

    def __init__(
        self,
        *,
        max_pending: int = 1024,
        max_open_requests: int = 256,
        max_method_bytes: int | None = None,
        max_depth: int = MAX_DEPTH,
        first_id: int = 1,
        pass_through: PassThrough | None = None,
    ) -> None:
        self._pass_through = pass_through
        self._next_id = first_id
        self._max_pending = max_pending
        self._max_open = max_open_requests
        self._max_method_bytes = max_method_bytes
        self._max_depth = max_depth
        self._deep_size = 2 * max_depth  # a frame this size or smaller cannot nest past max_depth
        self._pending: dict[int, _Pending] = {}
        self._open: set[tuple[str, RequestId]] = set()
        self._outgoing: list[bytes] = []
        self.discarded_responses = 0

    # -- receiving -----------------------------------------------------------------------------------------

    def receive(self, data: bytes | str) -> list[Event]:
        """Take one whole message (a text frame, a line) and say what it means."""
        size = utf8_size(data)
        try:
            message = orjson.loads(data) if self._pass_through is None else passthrough.loads(data, self._pass_through)
        except orjson.JSONDecodeError as exc:
            self._send_error_reply(None, unreadable_error(exc, self._max_depth))
            return []
        kind = classify(message, size=size)
        if kind is None:
            return []
        if isinstance(kind, Invalid):
            self._send_error_reply(kind.id, kind.error)
            return []
        if size > self._deep_size and _nested_past(data, message, self._max_depth):
            return self._refuse_deep(kind)
        if isinstance(kind, Reply):
            return self._receive_response(kind.id, kind.message)
        if self._max_method_bytes is not None and size > self._max_method_bytes:
            if isinstance(kind, Request):
                self._send_error_reply(
                    kind.id,
                    LocalRpcError(
                        SERVER_OVERLOADED,
                        f"Frame too large: {size} exceeds the {self._max_method_bytes}-byte limit for "
                        f"`{kind.method}`",
                    ),
                )
            return []
        if isinstance(kind, Notification):
            return [kind]

        key = id_key(kind.id)
        if key in self._open:
            self._send_error_reply(
                None,
                LocalRpcError(INVALID_REQUEST, f"Invalid Request: id {kind.id!r} is already in use"),
            )
            return []
        if len(self._open) >= self._max_open:
            self._send_error_reply(
                kind.id,
                LocalRpcError(SERVER_OVERLOADED, f"Too many requests in flight (max {self._max_open})"),
            )
            return []
        self._open.add(key)
        return [kind]

    def _refuse_deep(self, kind: Request | Notification | Reply) -> list[Event]:
        """A message nested past the bound: the request gets -32600, the answer fails its request, a
        notification is dropped."""
        if isinstance(kind, Reply):
            return self._receive_response(kind.id, kind.message, nested_too_deep=True)
        if isinstance(kind, Request):
            # Under its id, unless that id is open: then the answer would seem to end the other request.
            self._send_error_reply(None if id_key(kind.id) in self._open else kind.id, too_deep_error(self._max_depth))
        return []

    def _receive_response(
        self, raw_id: RequestId, message: JsonObject, *, nested_too_deep: bool = False
    ) -> list[Event]:
        our_id = self._our_id(raw_id)
        pending = self._pending.pop(our_id, None) if our_id is not None else None
        if pending is None:
            # Late answers to abandoned ids are expected; anything else is the peer's confusion.
            # Either way there is nobody to give it to, and answering a response is never right.
            self.discarded_responses += 1
            return []
        assert our_id is not None
        if nested_too_deep:
            # Failing the request now beats a timeout, and beats relaying what the next hop cannot write.
            error = RemoteRpcError(
                INTERNAL_ERROR,
                f"Malformed answer from peer to {pending.method}: nested more than {self._max_depth} levels deep",
            )
            return [Response(our_id, None, error, pending.context)]
        if "error" in message:
            return [Response(our_id, None, RemoteRpcError.from_json(message["error"]), pending.context)]
        return [Response(our_id, message["result"], None, pending.context)]

    @staticmethod
    def _our_id(raw_id: RequestId) -> int | None:
        if isinstance(raw_id, int) and not isinstance(raw_id, bool):
            return raw_id
        # Some peers echo numeric ids back as strings ("7"); upstream accepted that too. ASCII only: isdigit()
        # is true of "²", which int() refuses, and of "١", which int() reads as 1.
        if isinstance(raw_id, str) and raw_id.isascii() and raw_id.isdigit() and len(raw_id) < 20:
            return int(raw_id)
        return None

    # -- answering the peer ---------------------------------------------------------------------------------

    def send_result(self, request_id: RequestId, result: Any) -> None:
        self._close_open(request_id)
        self._outgoing.append(dumps(result_message(request_id, result)))

    def send_error(self, request_id: RequestId, error: RpcError) -> None:
        self._close_open(request_id)
        self._send_error_reply(request_id, error)

    def _close_open(self, request_id: RequestId) -> None:
        key = id_key(request_id)
        if key not in self._open:
            raise ValueError(f"no open request with id {request_id!r}: each request gets exactly one answer")
        self._open.remove(key)

    def _send_error_reply(self, request_id: RequestId, error: RpcError) -> None:
        self._outgoing.append(dumps(error_message(request_id, error)))

    @property
    def open_requests(self) -> int:
        """How many of the peer's requests still wait for our answer."""
        return len(self._open)

    # -- asking the peer ------------------------------------------------------------------------------------

    def send_request(
        self, method: str, params: Any = None, *, deadline: float | None = None, context: Any = None
    ) -> int:
        """Queue a request and return its id. ``deadline`` is on the caller's clock (see :meth:`expire`)."""
        if len(self._pending) >= self._max_pending:
            raise TooManyPendingRequests(
                f"{len(self._pending)} requests already wait for an answer (max {self._max_pending})"
            )
        request_id = self._next_id
        self._next_id += 1
        self._outgoing.append(dumps(request_message(request_id, method, params)))
        self._pending[request_id] = _Pending(method, deadline, context)
        return request_id

    def send_notification(self, method: str, params: Any = None) -> None:
        self._outgoing.append(dumps(notification_message(method, params)))

    def abandon(self, request_id: int) -> bool:
        """Stop waiting for an answer; a late one is then dropped. Returns whether it was pending."""
        return self._pending.pop(request_id, None) is not None

    def set_deadline(self, request_id: int, deadline: float | None) -> bool:
        """Move a pending request's deadline (a clock that stopped while a person was asked, or started again).
        Returns whether it was pending."""
        pending = self._pending.get(request_id)
        if pending is None:
            return False
        pending.deadline = deadline
        return True

    def expire(self, now: float) -> list[RequestFailed]:
        """Fail every pending request whose deadline has passed."""
        expired = [
            (request_id, pending)
            for request_id, pending in self._pending.items()
            if pending.deadline is not None and pending.deadline <= now
        ]
        failures = []
        for request_id, pending in expired:
            self.abandon(request_id)
            failures.append(RequestFailed(request_id, pending.method, True, "timed out", pending.context))
        return failures

    def next_deadline(self) -> float | None:
        deadlines = [p.deadline for p in self._pending.values() if p.deadline is not None]
        return min(deadlines) if deadlines else None

    def fail_all(self, reason: str) -> list[RequestFailed]:
        """The connection is over: every pending request fails now, not at its timeout."""
        failures = [
            RequestFailed(request_id, pending.method, False, reason, pending.context)
            for request_id, pending in self._pending.items()
        ]
        self._pending.clear()
        self._open.clear()
        return failures

    @property
    def pending_requests(self) -> int:
        return len(self._pending)

    # -- output ---------------------------------------------------------------------------------------------

    def data_to_send(self) -> list[bytes]:
        """Messages to put on the wire, in order, each one whole (the adapter frames them)."""
        outgoing, self._outgoing = self._outgoing, []
        return outgoing
