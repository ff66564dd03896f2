"""The error objects of JSON-RPC 2.0, told apart by who made them.

As h11 separates a local protocol error (ours to report) from a remote one (the peer broke the rules or said
no), a :class:`LocalRpcError` is what our side answers a request with (a handler raises it, or our own checks
make it of what a peer sent), and a :class:`RemoteRpcError` is what a peer answered one of our requests with.
Code that asks a peer and must react to its refusal catches :class:`RemoteRpcError` alone, so a bug of ours
is never mistaken for the peer's answer; code that relays either catches their base, :class:`RpcError`.
"""

from __future__ import annotations

from typing import Any, Final

from ..errors import OpenabError

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
    "LocalRpcError",
    "RemoteRpcError",
    "RpcError",
]

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
SERVER_OVERLOADED: Final = -32000
SESSION_BUSY: Final = -32001
NOT_INITIALIZED: Final = -32002
REQUEST_CANCELLED: Final = -32800


class RpcError(OpenabError):
    """A JSON-RPC error object (``code``, ``message``, ``data``), as :class:`Response` carries it; raised only as
    one of its two kinds."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code}, {self.message!r})"


class LocalRpcError(RpcError):
    """The error our side answers a request with: raised by a handler, or made by our checks of a message."""

    @classmethod
    def method_not_found(cls, method: str) -> LocalRpcError:
        return cls(METHOD_NOT_FOUND, f"Method not found: {method}")

    @classmethod
    def invalid_params(cls, message: str) -> LocalRpcError:
        return cls(INVALID_PARAMS, message)

    @classmethod
    def internal(cls, message: str) -> LocalRpcError:
        return cls(INTERNAL_ERROR, message)


class RemoteRpcError(RpcError):
    """The error a peer answered one of our requests with."""

    @classmethod
    def from_json(cls, error: Any) -> RemoteRpcError:
        """Read an ``error`` member sent by a peer, tolerating shapes that break the spec."""
        if isinstance(error, dict) and isinstance(error.get("code"), int) and not isinstance(
            error.get("code"), bool
        ):
            message = error.get("message")
            return cls(error["code"], message if isinstance(message, str) else "", error.get("data"))
        return cls(INTERNAL_ERROR, f"Malformed error object from peer: {_preview(error)}")


def _preview(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
