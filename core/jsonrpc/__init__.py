"""JSON-RPC 2.0, the wire of every hop: the sans-I/O :class:`Peer` and its asyncio adapter :class:`RpcConnection`.

``protocol`` knows nothing of sockets: it is fed whole messages and a clock and returns events and bytes.
``connection`` runs a peer over anything that sends and receives whole messages (a WebSocket, stdio lines,
a Unix socket). Both are re-exported here, so callers import from ``openab_browser.core.jsonrpc``.

The adapter loads on first use, not with the package: ``openab browser-bridge`` runs the peer without asyncio,
whose import is most of a relay's start-up (docs/benchmarks.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import TooManyPendingRequests
from .errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NOT_INITIALIZED,
    PARSE_ERROR,
    REQUEST_CANCELLED,
    SERVER_OVERLOADED,
    SESSION_BUSY,
    LocalRpcError,
    RemoteRpcError,
    RpcError,
)
from .passthrough import PassThrough
from .protocol import (
    Event,
    IdRule,
    Invalid,
    JsonObject,
    Notification,
    Peer,
    Reply,
    Request,
    RequestFailed,
    RequestId,
    Response,
    classify,
    dumps,
    error_message,
    id_key,
    notification_message,
    request_message,
    result_message,
)

if TYPE_CHECKING:
    from .connection import ConnectionClosed, Handler, Later, RequestTimeout, RpcConnection, SendMessage

_ADAPTER = frozenset({"ConnectionClosed", "Handler", "Later", "RequestTimeout", "RpcConnection", "SendMessage"})


def __getattr__(name: str) -> Any:
    if name in _ADAPTER:
        from . import connection

        return getattr(connection, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "NOT_INITIALIZED",
    "PARSE_ERROR",
    "REQUEST_CANCELLED",
    "SERVER_OVERLOADED",
    "SESSION_BUSY",
    "ConnectionClosed",
    "Event",
    "Handler",
    "IdRule",
    "Invalid",
    "JsonObject",
    "Later",
    "LocalRpcError",
    "Notification",
    "PassThrough",
    "Peer",
    "RemoteRpcError",
    "Reply",
    "Request",
    "RequestFailed",
    "RequestId",
    "RequestTimeout",
    "Response",
    "RpcConnection",
    "RpcError",
    "SendMessage",
    "TooManyPendingRequests",
    "classify",
    "dumps",
    "error_message",
    "id_key",
    "notification_message",
    "request_message",
    "result_message",
]
