"""The connection form of MCP-over-ACP (upstream openab, ACP SDK 0.12 "Gen-3").

``mcp/connect {acpId, serverId}`` returns a ``connectionId``; the inner MCP (handshake era: ``initialize`` then
``notifications/initialized``) travels in ``mcp/message {connectionId, method, params}``. The outer id is the
only id: the outer result *is* the inner result and an outer error *is* the inner MCP error. An abandoned call
gets ``mcp/cancel``; ``mcp/disconnect`` ends the connection.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import OpenabError, TunnelError, TunnelFailure
from ..jsonrpc import METHOD_NOT_FOUND, JsonObject, RemoteRpcError, RpcConnection
from ..mcp_vocabulary import HANDSHAKE_VERSIONS, REQUESTED_HANDSHAKE_VERSION
from .base import ProgressCallback, Tunnel, TunnelAddress, client_info

__all__ = ["ConnectionTunnel"]

log = logging.getLogger(__name__)


@dataclass(eq=False)
class ConnectionTunnel(Tunnel):
    """A tunnel in the connection form: one ``connectionId`` the browser handed out in ``mcp/connect``.

    It owns that connection's life: the MCP handshake (:meth:`open`), inner notifications (:meth:`notify`),
    withdrawing abandoned calls (``mcp/cancel``) and the goodbye (``mcp/disconnect``). An inner MCP error comes
    back as the outer error and is raised as :class:`RemoteRpcError` unchanged.

    It speaks only the handshake-era MCP revisions in
    :data:`~openab_browser.core.mcp_vocabulary.HANDSHAKE_VERSIONS`; a server that answers ``initialize`` with any
    other is refused and disconnected.

    Args:
        connection_id: The id ``mcp/connect`` returned; every envelope carries it.
    """

    connection_id: str
    protocol_version: str = field(default=REQUESTED_HANDSHAKE_VERSION, init=False)

    @property
    def form(self) -> Literal["connection"]:
        return "connection"

    @classmethod
    async def open(cls, conn: RpcConnection, address: TunnelAddress, *, timeout: float) -> ConnectionTunnel | None:
        """``mcp/connect`` and the MCP handshake; None when the browser has no ``mcp/connect`` (-32601).

        Raises :class:`TunnelError` when the browser refuses the connection or the handshake.
        """

        def failure(detail: str, reason: TunnelFailure) -> TunnelError:
            return TunnelError.build(detail, reason=reason, session_id=address.session_id, server=address.name)

        server_id = address.server_id
        try:
            connected = await conn.request("mcp/connect", {"acpId": server_id, "serverId": server_id}, timeout=timeout)
        except RemoteRpcError as exc:
            if exc.code == METHOD_NOT_FOUND:
                return None
            raise failure(f"mcp/connect refused: {exc.message} ({exc.code})", TunnelFailure.HANDSHAKE) from None
        connection_id = connected.get("connectionId") if isinstance(connected, dict) else None
        if not isinstance(connection_id, str) or not connection_id:
            raise failure(f"mcp/connect: malformed result: {connected!r:.200}", TunnelFailure.MALFORMED)
        tunnel = cls(conn, address.session_id, server_id, address.name, address.owner, address.generation,
                     connection_id)
        await tunnel._initialize(timeout=timeout)
        return tunnel

    async def _initialize(self, *, timeout: float) -> None:
        try:
            result = await self.request(
                "initialize",
                {"protocolVersion": REQUESTED_HANDSHAKE_VERSION, "capabilities": {}, "clientInfo": client_info()},
                timeout=timeout,
            )
        except RemoteRpcError as exc:
            await self.disconnect()
            raise self._error(
                f"inner initialize failed: {exc.message} ({exc.code})", TunnelFailure.HANDSHAKE
            ) from None
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        if not isinstance(result, dict) or not isinstance(version, str) or version not in HANDSHAKE_VERSIONS:
            await self.disconnect()
            raise self._error(
                f"inner initialize: unsupported MCP protocolVersion {version!r}", TunnelFailure.HANDSHAKE
            )
        self.protocol_version = version
        info = result.get("serverInfo")
        self.server_info = info if isinstance(info, dict) else {}
        self.notify("notifications/initialized")

    # -- requests -------------------------------------------------------------------------------------------

    def _envelope(self, method: str, params: Any) -> JsonObject:
        envelope: JsonObject = {"connectionId": self.connection_id, "method": method}
        if params is not None:
            envelope["params"] = params
        return envelope

    async def _request(
        self, method: str, params: JsonObject | None, *, timeout: float, progress: ProgressCallback | None
    ) -> Any:
        return await self._send(
            method,
            self._envelope(method, params),
            timeout=timeout,
            progress_key=_progress_token(params),
            progress=progress,
        )

    def _withdraw_timed_out(self, outer_id: int) -> None:
        self.conn.notify("mcp/cancel", {"requestId": outer_id})

    def _withdraw_cancelled(self, outer_id: int) -> None:
        # Say it in both words the browser may know: MCP's own, inside the connection, and the binding's.
        self.conn.notify(
            "mcp/message",
            self._envelope(
                "notifications/cancelled", {"requestId": outer_id, "reason": "cancelled by the agent"}
            ),
        )
        self.conn.notify("mcp/cancel", {"requestId": outer_id})

    def notify(self, method: str, params: JsonObject | None = None) -> None:
        """An inner MCP notification toward the browser; dropped once the tunnel is closed."""
        if self.closed:
            return
        self.conn.notify("mcp/message", self._envelope(method, params))

    # -- inbound and retirement -----------------------------------------------------------------------------

    def addressed_by(self, message: JsonObject) -> bool:
        return message.get("connectionId") == self.connection_id or super().addressed_by(message)

    async def _hang_up(self, *, timeout: float) -> None:
        if self.conn.closed:
            return
        try:
            await self.conn.request("mcp/disconnect", {"connectionId": self.connection_id}, timeout=timeout)
        except OpenabError as exc:
            log.debug("mcp/disconnect for %s was not acknowledged: %s", self.name, exc)


def _progress_token(params: JsonObject | None) -> Any:
    # Params come from agents through the proxy and the bridge: anything but an object carries no token.
    if not isinstance(params, dict):
        return None
    meta = params.get("_meta")
    return meta.get("progressToken") if isinstance(meta, dict) else None
