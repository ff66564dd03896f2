"""The wire of the per-pod browser socket, shared by the server and the relay.

One frame is one line of JSON (an MCP JSON-RPC message) ended by ``\\n``, at most :data:`MAX_FRAME_BYTES`.
On accept the server speaks first, one line: either :data:`READY_METHOD` (a notification naming the channel
and session the kernel's peer credentials established) or a JSON-RPC error with ``id: null`` and code
:data:`BRIDGE_REFUSED`, after which it closes. Every later line is plain MCP in both directions. A frame
may carry a top-level :data:`CHANNEL_CLAIM` member (upstream relays sent one); it grants nothing, and one
naming another channel than the connection's gets :data:`BRIDGE_REFUSED` and the connection is closed.
"""

from __future__ import annotations

import asyncio
from typing import Final

from openab.core.jsonrpc import SERVER_OVERLOADED, RequestId, RpcError, dumps, error_message

__all__ = [
    "BRIDGE_REFUSED",
    "CHANNEL_CLAIM",
    "MAX_FRAME_BYTES",
    "PROTOCOL_VERSION",
    "READY_METHOD",
    "TOO_LARGE",
    "error_line",
    "frame_too_large",
    "read_frame",
]

MAX_FRAME_BYTES: Final = 8 << 20
PROTOCOL_VERSION: Final = 1
READY_METHOD: Final = "openab/bridge/ready"
CHANNEL_CLAIM: Final = "channel_id"
# Implementation-defined server error; outside -32020..-32099, which MCP 2026-07-28 reserves, so a dual-era
# client reads it as "not a modern server" and falls back to `initialize` instead of giving up on the probe.
BRIDGE_REFUSED: Final = -32010


class _TooLarge:
    """The marker :func:`read_frame` returns for a line over the bound (its bytes were discarded)."""

    def __repr__(self) -> str:
        return "TOO_LARGE"


TOO_LARGE: Final = _TooLarge()


async def read_frame(reader: asyncio.StreamReader) -> bytes | _TooLarge | None:
    """The next line without its ``\\n``, :data:`TOO_LARGE`, or ``None`` at end of stream.

    ``reader`` must have been made with ``limit`` set to the frame bound: a longer line is skipped up to its
    newline without ever holding more than that bound (times the stream's own read-ahead) in memory.
    """
    try:
        return (await reader.readuntil(b"\n"))[:-1]
    except asyncio.IncompleteReadError as exc:
        return exc.partial or None  # a last line without its newline still counts
    except asyncio.LimitOverrunError as exc:
        consumed = exc.consumed
    while True:
        await reader.readexactly(consumed)
        try:
            await reader.readuntil(b"\n")
            return TOO_LARGE
        except asyncio.IncompleteReadError:
            return TOO_LARGE
        except asyncio.LimitOverrunError as exc:
            consumed = exc.consumed


def error_line(error: RpcError, request_id: RequestId = None) -> bytes:
    """The error answer to ``request_id`` as one line of the bridge's wire."""
    return dumps(error_message(request_id, error)) + b"\n"


def frame_too_large(limit: int = MAX_FRAME_BYTES) -> RpcError:
    return RpcError(SERVER_OVERLOADED, f"Frame too large: a message may be at most {limit} bytes on one line")
