"""One MCP server that the extension provides over its `/acp` socket (MCP-over-ACP).

Two wire forms are spoken, chosen per server when the tunnel is established:

* **connection** (upstream openab, ACP SDK 0.12 "Gen-3"): ``mcp/connect {acpId, serverId}`` returns a
  ``connectionId``; the inner MCP (handshake era: ``initialize`` then ``notifications/initialized``) travels
  in ``mcp/message {connectionId, method, params}``. The outer id is the only id: the outer result *is* the
  inner result and an inner protocol error is the outer error. An abandoned call gets ``mcp/cancel``.
* **stateless** (npm ``@agentclientprotocol/sdk`` >= 1.6, "Gen-4"): a client that answers ``mcp/connect``
  with -32601 gets ``mcp/message {serverId, requestId, method, params}`` requests whose answer is a carrier
  ``{result}`` or ``{error}``; the inner MCP is 2026-07-28 (per-request ``_meta``, ``server/discover``). An
  abandoned call gets ``$/cancel_request``.

Callers see one API: :meth:`Tunnel.request` returns the inner MCP result, raises :class:`RpcError` for an
inner MCP error, and :class:`TunnelError` when the tunnel itself failed (timeout, socket gone), naming the
server and session so an operator can tell which browser went away.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from .. import package_version
from ..jsonrpc import (
    METHOD_NOT_FOUND,
    ConnectionClosed,
    JsonObject,
    RequestTimeout,
    RpcConnection,
    RpcError,
    TooManyPendingRequests,
)

__all__ = [
    "HANDSHAKE_PROTOCOL_VERSION",
    "STATELESS_PROTOCOL_VERSION",
    "ProgressCallback",
    "Tunnel",
    "TunnelError",
    "TunnelOwner",
    "establish",
]

log = logging.getLogger(__name__)

HANDSHAKE_PROTOCOL_VERSION: Final = "2025-06-18"
STATELESS_PROTOCOL_VERSION: Final = "2026-07-28"
# Inner versions a connection-form server may answer with; anything else is a server we cannot speak to.
SUPPORTED_HANDSHAKE_VERSIONS: Final = frozenset({"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"})
_META_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
_META_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
_META_CLIENT: Final = "io.modelcontextprotocol/clientInfo"

ProgressCallback = Callable[[JsonObject], None]
Form = Literal["connection", "stateless"]


class TunnelError(Exception):
    """The tunnel could not carry a request. The message names the server and the session."""

    def __init__(self, message: str, *, session_id: str, server: str) -> None:
        super().__init__(f"{message} (browser server {server!r}, session {session_id})")
        self.reason = message
        self.session_id = session_id
        self.server = server


@dataclass(frozen=True, slots=True)
class TunnelOwner:
    """Which socket installed a tunnel, and in what order, for last-attach-wins and scoped teardown."""

    connection_id: str
    connection_generation: int


@dataclass(eq=False)
class Tunnel:
    conn: RpcConnection
    session_id: str
    server_id: str
    name: str
    owner: TunnelOwner
    generation: int
    form: Form
    connection_id: str | None = None
    server_info: JsonObject = field(default_factory=dict)
    protocol_version: str = HANDSHAKE_PROTOCOL_VERSION
    tools: list[JsonObject] | None = None
    closed: bool = False
    _disconnected: bool = False
    _progress: dict[Any, ProgressCallback] = field(default_factory=dict)

    @property
    def order(self) -> tuple[int, int]:
        return (self.owner.connection_generation, self.generation)

    def _error(self, message: str) -> TunnelError:
        return TunnelError(message, session_id=self.session_id, server=self.name)

    # -- requests -------------------------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        params: JsonObject | None = None,
        *,
        timeout: float,
        progress: ProgressCallback | None = None,
    ) -> Any:
        """One inner MCP request; see the module docstring for what it raises."""
        if self.closed:
            raise self._error("browser disconnected")
        try:
            if self.form == "connection":
                return await self._request_connection(method, params, timeout=timeout, progress=progress)
            return await self._request_stateless(method, params, timeout=timeout, progress=progress)
        except TooManyPendingRequests as exc:
            raise self._error(f"too many calls in flight to this browser ({exc}); retry when some finish") from None

    async def _request_connection(
        self, method: str, params: JsonObject | None, *, timeout: float, progress: ProgressCallback | None
    ) -> Any:
        envelope: JsonObject = {"connectionId": self.connection_id, "method": method}
        if params is not None:
            envelope["params"] = params
        token = _progress_token(params)
        if progress is not None and token is not None:
            self._progress[token] = progress
        outer_id: list[int] = []
        try:
            return await self.conn.request("mcp/message", envelope, timeout=timeout, sent=outer_id.append)
        except RequestTimeout as exc:
            self.conn.notify("mcp/cancel", {"requestId": exc.request_id})
            raise self._error(f"{method} timed out after {timeout:g} s") from None
        except ConnectionClosed as exc:
            raise self._error(f"browser disconnected: {exc}") from None
        except asyncio.CancelledError:
            if outer_id:
                self._cancel_connection_request(outer_id[0])
            raise
        finally:
            if token is not None:
                self._progress.pop(token, None)

    def _cancel_connection_request(self, outer_id: int) -> None:
        # The caller gave up (the agent cancelled): tell the browser to stop, in both words it may know.
        self.conn.notify(
            "mcp/message",
            {
                "connectionId": self.connection_id,
                "method": "notifications/cancelled",
                "params": {"requestId": outer_id, "reason": "cancelled by the agent"},
            },
        )
        self.conn.notify("mcp/cancel", {"requestId": outer_id})

    async def _request_stateless(
        self, method: str, params: JsonObject | None, *, timeout: float, progress: ProgressCallback | None
    ) -> Any:
        request_id = f"mcp-request:{uuid.uuid4()}"
        inner = dict(params) if isinstance(params, dict) else {}
        meta = dict(inner.get("_meta") or {})
        meta.setdefault(_META_VERSION, STATELESS_PROTOCOL_VERSION)
        meta.setdefault(_META_CAPABILITIES, {})
        meta.setdefault(_META_CLIENT, _client_info())
        inner["_meta"] = meta
        envelope = {"serverId": self.server_id, "requestId": request_id, "method": method, "params": inner}
        if progress is not None:
            self._progress[request_id] = progress
        outer_id: list[int] = []
        try:
            carrier = await self.conn.request("mcp/message", envelope, timeout=timeout, sent=outer_id.append)
        except RequestTimeout as exc:
            self.conn.notify("$/cancel_request", {"requestId": exc.request_id})
            raise self._error(f"{method} timed out after {timeout:g} s") from None
        except ConnectionClosed as exc:
            raise self._error(f"browser disconnected: {exc}") from None
        except RpcError as exc:
            # Outer errors are binding failures in this form, not MCP errors.
            raise self._error(f"{method} failed in the ACP binding: {exc.message} ({exc.code})") from None
        except asyncio.CancelledError:
            if outer_id:
                self.conn.notify("$/cancel_request", {"requestId": outer_id[0]})
            raise
        finally:
            self._progress.pop(request_id, None)
        if not isinstance(carrier, dict):
            raise self._error(f"{method}: malformed answer carrier")
        if "result" in carrier:
            return carrier["result"]
        if "error" in carrier:
            raise RpcError.from_json(carrier["error"])
        raise self._error(f"{method}: answer carrier has neither result nor error")

    def notify(self, method: str, params: JsonObject | None = None) -> None:
        """An inner MCP notification toward the browser (connection form only; stateless has none)."""
        if self.closed or self.form != "connection":
            return
        envelope: JsonObject = {"connectionId": self.connection_id, "method": method}
        if params is not None:
            envelope["params"] = params
        self.conn.notify("mcp/message", envelope)

    # -- inbound --------------------------------------------------------------------------------------------

    def deliver_progress(self, key: Any, params: JsonObject) -> bool:
        """Route a progress notification to the call waiting for it; False when none is waiting."""
        callback = self._progress.get(key)
        if callback is None:
            return False
        try:
            callback(params)
        except Exception:
            log.exception("progress callback failed")
        return True

    async def list_tools(self, *, timeout: float) -> list[JsonObject]:
        """Ask the browser for its tools (every page of them) and cache the answer."""
        tools: list[JsonObject] = []
        cursor: str | None = None
        for _ in range(100):  # a bound on pages: a server that cycles its cursor must not spin us forever
            result = await self.request("tools/list", {"cursor": cursor} if cursor else {}, timeout=timeout)
            if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
                raise self._error("tools/list: malformed result (no `tools` array)")
            tools.extend(t for t in result["tools"] if isinstance(t, dict) and isinstance(t.get("name"), str))
            next_cursor = result.get("nextCursor")
            if not isinstance(next_cursor, str) or not next_cursor:
                break
            cursor = next_cursor
        self.tools = tools
        return tools

    async def disconnect(self, *, timeout: float = 5.0) -> None:
        """Retire this tunnel and tell the browser, best effort (the socket may be gone already).

        The registry marks a retired tunnel ``closed`` first (no new calls); the browser still has to hear it.
        """
        if self._disconnected:
            return
        self._disconnected = self.closed = True
        if self.form != "connection" or self.conn.closed:
            return
        try:
            await self.conn.request("mcp/disconnect", {"connectionId": self.connection_id}, timeout=timeout)
        except (RpcError, RequestTimeout, ConnectionClosed) as exc:
            log.debug("mcp/disconnect for %s was not acknowledged: %s", self.name, exc)


def _progress_token(params: JsonObject | None) -> Any:
    # Params come from agents through the proxy and the bridge: anything but an object carries no token.
    if not isinstance(params, dict):
        return None
    meta = params.get("_meta")
    return meta.get("progressToken") if isinstance(meta, dict) else None


def _client_info() -> JsonObject:
    return {"name": "openab-gateway", "version": package_version()}


async def establish(
    conn: RpcConnection,
    *,
    session_id: str,
    server_id: str,
    name: str,
    owner: TunnelOwner,
    generation: int,
    timeout: float,
    request_timeout: float,
) -> Tunnel:
    """Open a tunnel to one declared server: connect, shake hands, fetch its tools, all within ``timeout``."""

    def failure(message: str) -> TunnelError:
        return TunnelError(message, session_id=session_id, server=name)

    try:
        async with asyncio.timeout(timeout):
            try:
                connected = await conn.request(
                    "mcp/connect", {"acpId": server_id, "serverId": server_id}, timeout=timeout
                )
            except RpcError as exc:
                if exc.code != METHOD_NOT_FOUND:
                    raise failure(f"mcp/connect refused: {exc.message} ({exc.code})") from None
                tunnel = Tunnel(conn, session_id, server_id, name, owner, generation, "stateless")
                await _discover(tunnel, timeout=timeout)
            else:
                connection_id = connected.get("connectionId") if isinstance(connected, dict) else None
                if not isinstance(connection_id, str) or not connection_id:
                    raise failure(f"mcp/connect: malformed result: {connected!r:.200}")
                tunnel = Tunnel(
                    conn, session_id, server_id, name, owner, generation, "connection", connection_id
                )
                await _initialize(tunnel, timeout=timeout)
            await tunnel.list_tools(timeout=min(timeout, request_timeout))
            return tunnel
    except TimeoutError:
        raise failure(f"the browser did not finish connecting within {timeout:g} s") from None
    except (ConnectionClosed, RequestTimeout) as exc:
        raise failure(f"connecting failed: {exc}") from None


async def _initialize(tunnel: Tunnel, *, timeout: float) -> None:
    try:
        result = await tunnel.request(
            "initialize",
            {
                "protocolVersion": HANDSHAKE_PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": _client_info(),
            },
            timeout=timeout,
        )
    except RpcError as exc:
        await tunnel.disconnect()
        raise tunnel._error(f"inner initialize failed: {exc.message} ({exc.code})") from None
    version = result.get("protocolVersion") if isinstance(result, dict) else None
    if version not in SUPPORTED_HANDSHAKE_VERSIONS:
        await tunnel.disconnect()
        raise tunnel._error(f"inner initialize: unsupported MCP protocolVersion {version!r}")
    assert isinstance(result, dict) and isinstance(version, str)
    tunnel.protocol_version = version
    info = result.get("serverInfo")
    tunnel.server_info = info if isinstance(info, dict) else {}
    tunnel.notify("notifications/initialized")


async def _discover(tunnel: Tunnel, *, timeout: float) -> None:
    try:
        result = await tunnel.request("server/discover", {}, timeout=timeout)
    except RpcError as exc:
        raise tunnel._error(f"server/discover failed: {exc.message} ({exc.code})") from None
    tunnel.protocol_version = STATELESS_PROTOCOL_VERSION
    meta = result.get("_meta") if isinstance(result, dict) else None
    info = meta.get("io.modelcontextprotocol/serverInfo") if isinstance(meta, dict) else None
    tunnel.server_info = info if isinstance(info, dict) else {}
