"""Proxy mode: each ACP session's browser as a loopback Streamable HTTP MCP server, for that session's agent.

:class:`BrowserProxy` is the pod's :class:`openab.core.mcp.access.BrowserAccess` for
``OPENAB_BROWSER_MODE=proxy``. Each session gets its own listener at ``http://127.0.0.1:<os port>/mcp``
with its own 256-bit bearer token; the listener lives exactly as long as the session (opened on the first
:meth:`BrowserProxy.open`, closed on :meth:`BrowserProxy.close`), so one session's token never reaches
another session's browser and an evicted session leaves no port behind. The HTTP itself is
:class:`openab.core.mcp.http.McpHttpApp`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..acp.sessions import Session, SessionStore
from ..addresses import is_loopback
from ..jsonrpc import JsonObject
from ..tunnel.registry import TunnelRegistry
from .access import BrowserEndpoint, HttpEndpoint
from .http import MCP_PATH, McpHttpApp
from .server import BrowserMcp, Limits

__all__ = ["BrowserProxy", "ProxyEndpoint"]

log = logging.getLogger(__name__)


# -- listeners and the pod side ------------------------------------------------------------------------


@dataclass(eq=False)
class ProxyEndpoint:
    """One session's listener. ``url`` and ``token`` are what its agent needs; the token is never logged."""

    session_id: str
    url: str
    token: str = field(repr=False)
    app: McpHttpApp = field(repr=False)
    _server: Any = field(repr=False)  # uvicorn.Server, imported lazily
    _socket: socket.socket = field(repr=False)
    _started: asyncio.Task[None] = field(repr=False)

    def browser_endpoint(self) -> BrowserEndpoint:
        return BrowserEndpoint(mode="proxy", entry=HttpEndpoint(self.url, self.token))

    async def aclose(self) -> None:
        await self.app.aclose()
        with contextlib.suppress(Exception):
            await self._started
        if self._server.started:
            await self._server.shutdown(sockets=[self._socket])
        self._socket.close()


class BrowserProxy:
    """``OPENAB_BROWSER_MODE=proxy``: a loopback MCP endpoint per session, each with its own bearer token.

    Needs the pod's ``sessions`` (a listener is made only for a session the pod still holds) and ``tunnels``
    (where its calls go). At most ``max_mcp_sessions`` MCP sessions per endpoint and ``max_body_bytes`` per
    request; a closing listener gets ``shutdown_timeout`` seconds to finish its answers.
    """

    def __init__(
        self,
        sessions: SessionStore,
        tunnels: TunnelRegistry,
        *,
        host: str = "127.0.0.1",
        limits: Limits | None = None,
        max_body_bytes: int = 1 << 20,
        max_mcp_sessions: int = 16,
        shutdown_timeout: float = 5.0,
    ) -> None:
        if not is_loopback(host):
            raise ValueError(f"the proxy serves loopback only (127.0.0.1 or ::1), not {host!r}: agents run in this pod")
        self.sessions = sessions
        self.tunnels = tunnels
        self.host = host
        self.limits = limits or Limits()
        self.max_body_bytes = max_body_bytes
        self.max_mcp_sessions = max_mcp_sessions
        self.shutdown_timeout = shutdown_timeout
        self._endpoints: dict[str, ProxyEndpoint] = {}

    # -- BrowserAccess ----------------------------------------------------------------------------------

    @property
    def mode(self) -> Literal["proxy"]:
        return "proxy"

    async def start(self) -> None:
        """Nothing pod-wide: each session's listener is made on its first :meth:`open`."""

    async def aclose(self) -> None:
        for session_id in list(self._endpoints):
            await self._close(session_id)

    async def open(self, session: Session) -> BrowserEndpoint:
        if self.sessions.get(session.id) is not session:
            raise LookupError(f"session {session.id} is closed: it has no browser endpoint")
        return self._ensure(session).browser_endpoint()

    async def close(self, session: Session) -> None:
        await self._close(session.id)

    def agent_started(self, session: Session, pid: int) -> None:
        """Nothing to do: the session's bearer token is what admits its agent."""

    async def _close(self, session_id: str) -> None:
        endpoint = self._endpoints.pop(session_id, None)
        if endpoint is None:
            return
        try:
            async with asyncio.timeout(self.shutdown_timeout + 5):
                await endpoint.aclose()
        except TimeoutError:
            log.warning("the MCP endpoint of session %s did not close in time", session_id)
        log.info("browser MCP endpoint of session %s closed", session_id)

    def endpoint(self, session_id: str) -> ProxyEndpoint | None:
        return self._endpoints.get(session_id)

    def _ensure(self, session: Session) -> ProxyEndpoint:
        endpoint = self._endpoints.get(session.id)
        if endpoint is None:
            endpoint = self._listen(session.id)
            self._endpoints[session.id] = endpoint
            log.info("browser MCP endpoint of session %s at %s", session.id, endpoint.url)
        return endpoint

    def _listen(self, session_id: str) -> ProxyEndpoint:
        """Bind now (so the url is known at once and early connections wait in the backlog), serve soon."""
        import uvicorn

        token = secrets.token_urlsafe(32)
        registry, limits = self.tunnels, self.limits

        def new_server(send: Callable[[JsonObject], None] | None) -> BrowserMcp:
            return BrowserMcp(registry, session_id, send=send, limits=limits)

        app = McpHttpApp(new_server, token, max_body_bytes=self.max_body_bytes, max_sessions=self.max_mcp_sessions)
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.bind((self.host, 0))
            sock.listen(64)
        except OSError:
            sock.close()
            raise
        port = sock.getsockname()[1]
        shown = f"[{self.host}]" if family == socket.AF_INET6 else self.host
        config = uvicorn.Config(
            app, lifespan="off", ws="none", log_config=None, access_log=False, server_header=False,
            proxy_headers=False, timeout_graceful_shutdown=int(self.shutdown_timeout), limit_concurrency=256,
        )
        config.load()
        server = uvicorn.Server(config)
        server.lifespan = config.lifespan_class(config)
        # Not server.serve(): that takes over the process's signal handlers, which belong to the gateway.
        started = asyncio.get_running_loop().create_task(server.startup(sockets=[sock]), name=f"mcp {session_id}")
        return ProxyEndpoint(session_id, f"http://{shown}:{port}{MCP_PATH}", token, app, server, sock, started)
