"""Proxy mode: each ACP session's browser as a loopback Streamable HTTP MCP server, for that session's agent.

:class:`BrowserProxy` is the pod's :class:`openab_browser.core.mcp.access.BrowserAccess` for
``OPENAB_BROWSER_MODE=proxy``. Each session gets its own listener at ``http://127.0.0.1:<os port>/mcp``
with its own 256-bit bearer token; the listener lives exactly as long as the session (opened on the first
:meth:`BrowserProxy.open`, closed on :meth:`BrowserProxy.close`), so one session's token never reaches
another session's browser and an evicted session leaves no port behind. The HTTP itself is
:class:`openab_browser.core.mcp.http.McpHttpApp`'s.

Before a socket has shown the token it is anyone's: every process on the pod can connect. :class:`_Gate` keeps
such sockets from crowding out the agent's (they are bounded pod-wide and the oldest gives way to a newer one)
and closes any that has not sent a whole request head in time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import socket
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from ..addresses import is_loopback
from ..files import Transfers
from ..jsonrpc import JsonObject
from ..sessions import Session, SessionStore
from ..sockets import ACCEPT_BURST, ClosedSockets, HeadTimedHttp
from ..tunnel.registry import TunnelRegistry
from .access import BrowserEndpoint, HttpEndpoint
from .audit import AuditLog
from .http import MCP_PATH, McpHttpApp
from .journal import ActionJournal
from .server import BrowserMcp, Limits

__all__ = ["BrowserProxy", "ProxyEndpoint"]

log = logging.getLogger(__name__)


# -- the sockets of the listeners -----------------------------------------------------------------------


class _Gate:
    """Every socket the pod's proxy listeners hold, as *pending* (not yet shown a token) or *trusted*.

    A socket is pending from accept until a request head carrying its listener's token arrives, then trusted
    until it closes. Pending sockets may be anyone's, so they get no guarantee: at most ``max_pending`` in the
    whole pod, a new one displaces the oldest (so idle sockets cannot lock an agent out, and the file
    descriptors they cost stay bounded), and each must send a whole request head within ``head_timeout``
    seconds, the first one from accept and each later one from its first byte (slowloris). Trusted sockets are
    only ever the token holder's and never give way; beyond ``max_trusted`` on one listener a socket that
    shows the token stays pending. Closures are logged at most once per ``log_every`` seconds, with a count.
    """

    def __init__(
        self, *, max_pending: int, max_trusted: int, head_timeout: float, log_every: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_pending = max_pending
        self.max_trusted = max_trusted
        self.head_timeout = head_timeout
        self.pending: OrderedDict[_GatedHttp, None] = OrderedDict()  # oldest first
        self.trusted: Counter[str] = Counter()  # listener (session id) -> trusted sockets
        self.closed = ClosedSockets(log, log_every=log_every, clock=clock)  # by reason, for operators and tests

    def admit(self, connection: _GatedHttp) -> None:
        while self.pending and len(self.pending) >= self.max_pending:
            oldest, _ = self.pending.popitem(last=False)
            self.closed.add("displaced by a newer connection before it sent a request with the token")
            oldest.drop()
        self.pending[connection] = None

    def trust(self, connection: _GatedHttp) -> None:
        if connection.trusted or self.trusted[connection.listener] >= self.max_trusted:
            return
        self.pending.pop(connection, None)
        self.trusted[connection.listener] += 1
        connection.trusted = True

    def release(self, connection: _GatedHttp) -> None:
        """The socket is gone (or going); safe to call more than once."""
        self.pending.pop(connection, None)
        if connection.trusted:
            connection.trusted = False
            self.trusted[connection.listener] -= 1
            if self.trusted[connection.listener] <= 0:
                del self.trusted[connection.listener]

    def timed_out(self) -> None:
        self.closed.add(f"no whole request head within {self.head_timeout:g} s")


class _GatedHttp(HeadTimedHttp):
    """uvicorn's HTTP/1.1 protocol for one listener, held to its :class:`_Gate`. Subclassed per listener."""

    gate: ClassVar[_Gate]
    listener: ClassVar[str]
    authorized: ClassVar[Callable[[Iterable[tuple[bytes, bytes]]], bool]]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.trusted = False

    def head_timeout(self) -> float:
        return self.gate.head_timeout

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.gate.admit(self)
        super().connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.gate.release(self)
        super().connection_lost(exc)

    def drop(self) -> None:
        self.gate.release(self)
        self.transport.abort()

    def on_head(self) -> None:
        if type(self).authorized(self.headers):  # the class's function, not a bound method
            self.gate.trust(self)

    def on_head_timeout(self) -> None:
        self.gate.timed_out()
        self.drop()


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
    request; a closing listener gets ``shutdown_timeout`` seconds to finish its answers. Sockets that have not
    shown a token: at most ``max_pending`` in the pod, each owing a whole request head within
    ``head_timeout`` seconds; sockets that have: ``max_trusted`` per endpoint (see :class:`_Gate`), idle between
    requests for up to ``keep_alive_timeout`` seconds. Every
    tool call is recorded in ``audit`` when given; ``files`` (the pod's transfers) carries the file tools' files;
    ``journal`` (the pod's action journal) holds the state-changing calls.
    """

    def __init__(
        self,
        sessions: SessionStore,
        tunnels: TunnelRegistry,
        *,
        host: str = "127.0.0.1",
        limits: Limits | None = None,
        audit: AuditLog | None = None,
        max_body_bytes: int = 1 << 20,
        max_mcp_sessions: int = 16,
        shutdown_timeout: float = 5.0,
        head_timeout: float = 5.0,
        # Not 256: 200 sessions' agents opening a few sockets each at once displaced each other before their
        # first request was read (tests/test_load.py, 200 x 500 calls).
        max_pending: int = 1024,
        max_trusted: int = 256,
        # Longer than the clients' own idle expiry (httpx 5 s, Node 4 s, Go and reqwest 90 s), so the agent's side
        # closes an idle keep-alive socket first: at uvicorn's 5 s default, a call sent as the server closed the
        # socket died with a read error (1 run in 2 of 240 calls after 5 s pauses, tests/test_proxy_attacks.py).
        keep_alive_timeout: int = 120,
        files: Transfers | None = None,
        journal: ActionJournal | None = None,
    ) -> None:
        if not is_loopback(host):
            raise ValueError(f"the proxy serves loopback only (127.0.0.1 or ::1), not {host!r}: agents run in this pod")
        self.sessions = sessions
        self.tunnels = tunnels
        self.host = host
        self.limits = limits or Limits()
        self.audit = audit
        self.files = files
        self.journal = journal
        self.max_body_bytes = max_body_bytes
        self.max_mcp_sessions = max_mcp_sessions
        self.shutdown_timeout = shutdown_timeout
        self.keep_alive_timeout = keep_alive_timeout
        self.gate = _Gate(max_pending=max_pending, max_trusted=max_trusted, head_timeout=head_timeout)
        self._endpoints: dict[str, ProxyEndpoint] = {}

    @property
    def head_timeout(self) -> float:
        """Seconds a socket has to send a whole request head; a change applies to the next head awaited."""
        return self.gate.head_timeout

    @head_timeout.setter
    def head_timeout(self, seconds: float) -> None:
        self.gate.head_timeout = seconds

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
        registry, limits, audit, files, journal = self.tunnels, self.limits, self.audit, self.files, self.journal

        def new_server(send: Callable[[JsonObject], None] | None) -> BrowserMcp:
            return BrowserMcp(registry, session_id, send=send, limits=limits, audit=audit, files=files,
                              journal=journal)

        app = McpHttpApp(new_server, token, max_body_bytes=self.max_body_bytes, max_sessions=self.max_mcp_sessions)
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        # IPPROTO_TCP, not 0: accepted sockets inherit it, and asyncio sets TCP_NODELAY only on sockets that
        # say they are TCP. Without it a head and a body written separately wait for a delayed ACK (40 ms).
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            sock.bind((self.host, 0))
            sock.listen(ACCEPT_BURST)
        except OSError:
            sock.close()
            raise
        port = sock.getsockname()[1]
        shown = f"[{self.host}]" if family == socket.AF_INET6 else self.host
        http = type("GatedHttp", (_GatedHttp,), {"gate": self.gate, "listener": session_id,
                                                 "authorized": staticmethod(app.authorized)})
        # No limit_concurrency: uvicorn counts every socket, idle strangers' too, and answers the agent 503
        # once they reach it. The gate bounds sockets instead, and strangers' never crowd out the agent's.
        config = uvicorn.Config(
            app, http=http, lifespan="off", ws="none", log_config=None, access_log=False, server_header=False,
            proxy_headers=False, timeout_graceful_shutdown=int(self.shutdown_timeout),
            timeout_keep_alive=self.keep_alive_timeout, backlog=ACCEPT_BURST,
        )
        config.load()
        server = uvicorn.Server(config)
        server.lifespan = config.lifespan_class(config)
        # Not server.serve(): that takes over the process's signal handlers, which belong to the gateway.
        started = asyncio.get_running_loop().create_task(server.startup(sockets=[sock]), name=f"mcp {session_id}")
        return ProxyEndpoint(session_id, f"http://{shown}:{port}{MCP_PATH}", token, app, server, sock, started)
