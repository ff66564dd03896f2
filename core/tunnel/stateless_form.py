"""The stateless form of MCP-over-ACP (npm ``@agentclientprotocol/sdk`` >= 1.6, "Gen-4").

A browser that answers ``mcp/connect`` with -32601 gets ``mcp/message {serverId, requestId, method, params}``
requests whose answer is a carrier ``{result}`` or ``{error}``; the inner MCP is the stateless revision
(per-request ``_meta``, ``server/discover``, no handshake). An abandoned call gets ``$/cancel_request``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import TunnelFailure
from ..jsonrpc import JsonObject, RemoteRpcError, RpcConnection
from ..mcp_vocabulary import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_SERVER_INFO,
    META_VERSION,
    STATELESS_VERSION,
)
from .base import ProgressCallback, Tunnel, TunnelAddress, client_info

__all__ = ["StatelessTunnel"]


@dataclass(eq=False)
class StatelessTunnel(Tunnel):
    """A tunnel in the stateless form: every request names the server and carries its own ``_meta``.

    It owns the carrier: it stamps each request with the MCP revision, capabilities and client info (unless
    the caller set them), gives it a fresh ``requestId``, and unwraps the ``{result}`` / ``{error}`` answer.
    An outer JSON-RPC error is a failure of the ACP binding, not of MCP, and is raised as
    :class:`~openab_browser.core.errors.TunnelError`; an inner ``{error}`` is raised as :class:`RpcError`.

    There is no connection to open or close: :meth:`open` only asks ``server/discover``, and retiring the
    tunnel says nothing on the wire. The browser cannot be sent notifications in this form.
    """

    protocol_version: str = field(default=STATELESS_VERSION, init=False)

    @property
    def form(self) -> Literal["stateless"]:
        return "stateless"

    @classmethod
    async def open(cls, conn: RpcConnection, address: TunnelAddress, *, timeout: float) -> StatelessTunnel:
        """Discover the server (its info) within ``timeout``; raises :class:`TunnelError` if it will not say."""
        tunnel = cls(conn, address.session_id, address.server_id, address.name, address.owner, address.generation)
        try:
            result = await tunnel.request("server/discover", {}, timeout=timeout)
        except RemoteRpcError as exc:
            raise tunnel._error(
                f"server/discover failed: {exc.message} ({exc.code})", TunnelFailure.HANDSHAKE
            ) from None
        meta = result.get("_meta") if isinstance(result, dict) else None
        info = meta.get(META_SERVER_INFO) if isinstance(meta, dict) else None
        tunnel.server_info = info if isinstance(info, dict) else {}
        return tunnel

    async def _request(
        self, method: str, params: JsonObject | None, *, timeout: float, progress: ProgressCallback | None
    ) -> Any:
        request_id = f"mcp-request:{uuid.uuid4()}"
        inner = dict(params) if isinstance(params, dict) else {}
        meta = dict(inner.get("_meta") or {})
        meta.setdefault(META_VERSION, STATELESS_VERSION)
        meta.setdefault(META_CLIENT_CAPABILITIES, {})
        meta.setdefault(META_CLIENT_INFO, client_info())
        inner["_meta"] = meta
        envelope = {"serverId": self.server_id, "requestId": request_id, "method": method, "params": inner}
        try:
            carrier = await self._send(method, envelope, timeout=timeout, progress_key=request_id, progress=progress)
        except RemoteRpcError as exc:
            raise self._error(
                f"{method} failed in the ACP binding: {exc.message} ({exc.code})", TunnelFailure.MALFORMED
            ) from None
        if not isinstance(carrier, dict):
            raise self._error(f"{method}: malformed answer carrier", TunnelFailure.MALFORMED)
        if "result" in carrier:
            return carrier["result"]
        if "error" in carrier:
            raise RemoteRpcError.from_json(carrier["error"])
        raise self._error(f"{method}: answer carrier has neither result nor error", TunnelFailure.MALFORMED)

    def _withdraw_timed_out(self, outer_id: int) -> None:
        self.conn.notify("$/cancel_request", {"requestId": outer_id})

    def _withdraw_cancelled(self, outer_id: int) -> None:
        self.conn.notify("$/cancel_request", {"requestId": outer_id})

    async def _hang_up(self, *, timeout: float) -> None:
        pass  # the form has no connection to end: the browser forgets nothing when we stop asking
