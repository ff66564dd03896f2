"""The wire of the per-pod browser socket, shared by the server and the relay.

One frame is one line of JSON (an MCP JSON-RPC message) ended by ``\\n``, at most :data:`MAX_FRAME_BYTES`.
On accept the server speaks first, one line: either :data:`READY_METHOD` (a notification naming the channel
and session the kernel's peer credentials established) or a JSON-RPC error with ``id: null`` and code
:data:`BRIDGE_REFUSED`, after which it closes. Every later line is plain MCP in both directions. A frame
may carry a top-level :data:`CHANNEL_CLAIM` member (upstream relays sent one); it grants nothing, and one
naming another channel than the connection's gets :data:`BRIDGE_REFUSED` and the connection is closed.
"""

from __future__ import annotations

from typing import Final

from openab_browser.core.jsonrpc import SERVER_OVERLOADED, LocalRpcError, RequestId, RpcError, dumps, error_message

__all__ = [
    "BRIDGE_REFUSED",
    "CHANNEL_CLAIM",
    "MAX_FRAME_BYTES",
    "PROTOCOL_VERSION",
    "READY_METHOD",
    "TOO_LARGE",
    "LineSplitter",
    "TooLarge",
    "error_line",
    "frame_too_large",
]

MAX_FRAME_BYTES: Final = 8 << 20
PROTOCOL_VERSION: Final = 1
READY_METHOD: Final = "openab/bridge/ready"
CHANNEL_CLAIM: Final = "channel_id"
# Implementation-defined server error; outside -32020..-32099, which MCP 2026-07-28 reserves, so a dual-era
# client reads it as "not a stateless server" and falls back to `initialize` instead of giving up on the probe.
BRIDGE_REFUSED: Final = -32010


class TooLarge:
    """The marker a reader of frames returns for a line over the bound (its bytes were discarded)."""

    def __repr__(self) -> str:
        return "TOO_LARGE"


TOO_LARGE: Final = TooLarge()


class LineSplitter:
    """Bytes in, frames out: each whole line without its ``\\n``, or :data:`TOO_LARGE` for a line over
    ``max_frame_bytes``, whose bytes are dropped as they come, so no more than the bound is ever held."""

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._partial = bytearray()
        self._skipping = False

    def feed(self, data: bytes) -> list[bytes | TooLarge]:
        frames: list[bytes | TooLarge] = []
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            if self._skipping:
                frames.append(TOO_LARGE)
                self._skipping = False
            elif len(self._partial) + end - start > self.max_frame_bytes:
                frames.append(TOO_LARGE)
            else:
                self._partial += data[start:end]
                frames.append(bytes(self._partial))
            self._partial.clear()
            start = end + 1
        if not self._skipping:
            self._partial += data[start:]
            if len(self._partial) > self.max_frame_bytes:
                self._partial.clear()
                self._skipping = True
        return frames

    def end(self) -> bytes | TooLarge | None:
        """At end of input: a last line without its newline (it still counts), else ``None``."""
        if self._skipping:
            self._skipping = False
            return TOO_LARGE
        last, self._partial = bytes(self._partial), bytearray()
        return last or None


def error_line(error: RpcError, request_id: RequestId = None) -> bytes:
    """The error answer to ``request_id`` as one line of the bridge's wire."""
    return dumps(error_message(request_id, error)) + b"\n"


def frame_too_large(limit: int = MAX_FRAME_BYTES) -> RpcError:
    return LocalRpcError(SERVER_OVERLOADED, f"Frame too large: a message may be at most {limit} bytes on one line")
