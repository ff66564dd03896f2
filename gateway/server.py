"""Serving the gateway with uvicorn, in the foreground (``openab run``) or inside a test or the demo.

Before a socket is an ACP connection it is only a socket, and a local or remote peer can open many and send
nothing: :class:`ConnectionGuard` bounds them, in all and per peer address, and closes any that has not sent a
whole request head within the handshake timeout. Refusals are logged at most once per interval, with a count,
so a flood cannot flood the log too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any, ClassVar

import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from openab.core.settings import Settings
from openab.core.sockets import ClosedSockets, HeadTimedHttp

__all__ = ["ConnectionGuard", "guard_for", "running_server", "uvicorn_config"]

log = logging.getLogger(__name__)

# File descriptors kept for everything that is not a client socket (agents' pipes, listeners, files).
_FD_RESERVE = 256


class ConnectionGuard:
    """The sockets one server holds: at most ``max_connections`` in all and ``max_per_peer`` from one address.

    A socket over either bound is closed as soon as it is accepted, so the process never runs out of file
    descriptors (at the limit, asyncio's accept loop would log a traceback per attempt). ``head_timeout`` is
    how long a socket may take to send a whole request head, the first one and each after a keep-alive answer.
    """

    def __init__(
        self, *, max_connections: int, max_per_peer: int, head_timeout: float, log_every: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        soft_limit, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft_limit != resource.RLIM_INFINITY:
            max_connections = min(max_connections, max(1, soft_limit - _FD_RESERVE))
        self.max_connections = max_connections
        self.max_per_peer = max_per_peer
        self.head_timeout = head_timeout
        self._peers: dict[object, str] = {}  # transport -> peer address
        self._per_peer: Counter[str] = Counter()
        self.refused = ClosedSockets(log, log_every=log_every, clock=clock)  # by reason, for operators and tests

    def __len__(self) -> int:
        return len(self._peers)

    def admit(self, transport: asyncio.BaseTransport) -> bool:
        peer = _peer_of(transport)
        if len(self._peers) >= self.max_connections:
            return self._refuse(f"over the cap of {self.max_connections} connections")
        if self._per_peer[peer] >= self.max_per_peer:
            return self._refuse(f"over the cap of {self.max_per_peer} connections per address")
        self._peers[transport] = peer
        self._per_peer[peer] += 1
        return True

    def release(self, transport: asyncio.BaseTransport) -> None:
        """The socket is gone; safe to call more than once (the HTTP and the WebSocket side may both)."""
        peer = self._peers.pop(transport, None)
        if peer is not None:
            self._per_peer[peer] -= 1
            if self._per_peer[peer] <= 0:
                del self._per_peer[peer]

    def timed_out(self) -> None:
        self._refuse(f"no whole request head within {self.head_timeout:g} s")

    def _refuse(self, reason: str) -> bool:
        self.refused.add(reason)
        return False


def _peer_of(transport: asyncio.BaseTransport) -> str:
    peer = transport.get_extra_info("peername")
    return str(peer[0]) if isinstance(peer, tuple) and peer else "?"


class _GuardedHttp(HeadTimedHttp):
    """uvicorn's HTTP/1.1 protocol, admitted by the guard and held to its request-head deadline."""

    guard: ClassVar[ConnectionGuard]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._admitted = False

    def head_timeout(self) -> float:
        return self.guard.head_timeout

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if not self.guard.admit(transport):
            transport.abort()
            return
        self._admitted = True
        super().connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._admitted:
            self.guard.release(self.transport)
            super().connection_lost(exc)

    def on_head_timeout(self) -> None:
        self.guard.timed_out()
        super().on_head_timeout()


class _GuardedWebSocket(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol, releasing its socket in the guard; a refused handshake is not an error."""

    guard: ClassVar[ConnectionGuard]

    def connection_lost(self, exc: Exception | None) -> None:
        self.guard.release(self.transport)
        super().connection_lost(exc)

    async def send(self, message: Any) -> None:
        await super().send(message)
        # The app answered the upgrade with an HTTP refusal (401, 403): that is a whole answer, and uvicorn
        # would otherwise log it as an application error, once per refused attempt.
        if message.get("type") == "websocket.http.response.body" and not message.get("more_body", False):
            self.handshake_complete = True


def guard_for(settings: Settings) -> ConnectionGuard:
    """The guard the settings ask for."""
    return ConnectionGuard(
        max_connections=settings.max_connections, max_per_peer=settings.max_connections_per_peer,
        head_timeout=settings.handshake_timeout,
    )


def uvicorn_config(
    app: ASGIApp, *, host: str, port: int, max_frame_bytes: int, log_level: str,
    guard: ConnectionGuard | None = None,
) -> uvicorn.Config:
    if guard is None:  # not `or`: a guard holding no socket has length 0
        guard = ConnectionGuard(max_connections=1024, max_per_peer=256, head_timeout=10.0)
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        lifespan="on",
        log_level=log_level,
        http=type("GuardedHttp", (_GuardedHttp,), {"guard": guard}),
        ws=type("GuardedWebSocket", (_GuardedWebSocket,), {"guard": guard}),
        # Frames between our limit and this one get our own 1009 close; larger ones never reach memory.
        ws_max_size=2 * max_frame_bytes,
        proxy_headers=False,
        server_header=False,
    )


@contextlib.asynccontextmanager
async def running_server(
    app: ASGIApp, *, host: str = "127.0.0.1", port: int = 0, max_frame_bytes: int = 8 << 20,
    log_level: str = "warning", start_timeout: float = 15.0, guard: ConnectionGuard | None = None,
) -> AsyncIterator[str]:
    """Serve ``app`` until the block ends; yields its base URL (``http://host:port``) with the real port."""
    server = uvicorn.Server(
        uvicorn_config(app, host=host, port=port, max_frame_bytes=max_frame_bytes, log_level=log_level, guard=guard)
    )
    task = asyncio.create_task(server.serve(), name="uvicorn")
    try:
        async with asyncio.timeout(start_timeout):
            while not server.started:
                if task.done():
                    task.result()
                    raise RuntimeError("the server stopped while starting")
                await asyncio.sleep(0.02)
        sockname = server.servers[0].sockets[0].getsockname()
        shown = f"[{sockname[0]}]" if ":" in sockname[0] else sockname[0]
        yield f"http://{shown}:{sockname[1]}"
    finally:
        server.should_exit = True
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            async with asyncio.timeout(10):
                await asyncio.shield(task)
        if not task.done():
            task.cancel()
