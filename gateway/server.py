"""Serving the gateway with uvicorn, in the foreground (``openab run``) or inside a test or the demo.

Before a socket is an ACP connection it is only a socket, and a local or remote peer can open many and send
nothing: :class:`ConnectionGuard` bounds them from their accept, in all and per peer address, and closes any
that has not finished its TLS handshake and sent a whole request head within the handshake timeout. Refusals
are logged at most once per interval, with a count, so a flood cannot flood the log too.

Off loopback the key must not cross the network in clear (:func:`check_transport`): the pod serves TLS itself
(:class:`ReloadingTls`, whose certificate SIGHUP replaces for the next handshake; the handshake is done in
the guard's own protocol, not by uvicorn, so that it is counted and timed like any socket) or runs behind a proxy that
terminates it, whose addresses alone are believed about the client (``X-Forwarded-For``) and exempt from the
per-address socket cap, since every socket through the proxy comes from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import math
import resource
import signal
import ssl
import time
from asyncio.sslproto import SSLProtocol
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from types import FrameType
from typing import Any, ClassVar, Final, cast

import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from openab_browser.core.addresses import is_loopback
from openab_browser.core.errors import ConfigurationError
from openab_browser.core.settings import Settings
from openab_browser.core.sockets import ACCEPT_BURST, ClosedSockets, HeadTimedHttp, LeanDeflateFactory

from .logs import json_logging

__all__ = [
    "REFUSAL_KINDS", "ConnectionGuard", "DrainingServer", "GuardedServer", "ReloadingTls", "check_transport",
    "guard_for", "hangup_handler", "running_server", "serving", "tls_for", "uvicorn_config",
]

log = logging.getLogger(__name__)

# File descriptors kept for everything that is not a client socket (agents' pipes, listeners, files).
_FD_RESERVE = 256


REFUSAL_KINDS: Final = ("connection-cap", "address-cap", "head-timeout")
"""Why the guard closed a socket: over the pod's cap, over one address's cap, no request head in time."""


class ConnectionGuard:
    """The sockets one server holds: at most ``max_connections`` in all and ``max_per_peer`` from one address.

    A socket over either bound is closed as soon as it is accepted, so the process never runs out of file
    descriptors (at the limit, asyncio's accept loop would log a traceback per attempt). ``head_timeout`` is
    how long a socket may take to send a whole request head, the first one and each after a keep-alive answer.
    """

    def __init__(
        self, *, max_connections: int, max_per_peer: int, head_timeout: float, log_every: float = 10.0,
        clock: Callable[[], float] = time.monotonic, proxies: list[str] | None = None,
    ) -> None:
        soft_limit, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft_limit != resource.RLIM_INFINITY:
            max_connections = min(max_connections, max(1, soft_limit - _FD_RESERVE))
        self.max_connections = max_connections
        self.max_per_peer = max_per_peer
        self.head_timeout = head_timeout
        # The proxies in front (--behind-proxy): only the total cap holds them, the per-address one would cap
        # the whole pod at what one person may hold.
        self._proxies = [ipaddress.ip_network(item, strict=False) for item in proxies or []]
        self._peers: dict[object, str] = {}  # transport -> peer address
        self._per_peer: Counter[str] = Counter()
        self.refused = ClosedSockets(log, log_every=log_every, clock=clock)  # by reason, for operators and tests
        # The same refusals by kind, one of REFUSAL_KINDS (/metrics labels them: a bounded set, no numbers).
        self.refused_by_kind: Counter[str] = Counter()
        # WebSocket bytes on the wire after the upgrade (frames, their headers, the close): /metrics.
        self.websocket_bytes_received = 0
        self.websocket_bytes_sent = 0

    def __len__(self) -> int:
        return len(self._peers)

    def admit(self, transport: asyncio.BaseTransport) -> bool:
        peer = _peer_of(transport)
        if len(self._peers) >= self.max_connections:
            return self._refuse("connection-cap", f"over the cap of {self.max_connections} connections")
        if self._per_peer[peer] >= self.max_per_peer and not self._is_proxy(peer):
            return self._refuse("address-cap", f"over the cap of {self.max_per_peer} connections per address")
        self._peers[transport] = peer
        self._per_peer[peer] += 1
        return True

    def _is_proxy(self, peer: str) -> bool:
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:
            return False
        return any(address in network for network in self._proxies)

    def release(self, transport: asyncio.BaseTransport) -> None:
        """The socket is gone; safe to call more than once (the HTTP and the WebSocket side may both)."""
        peer = self._peers.pop(transport, None)
        if peer is not None:
            self._per_peer[peer] -= 1
            if self._per_peer[peer] <= 0:
                del self._per_peer[peer]

    def timed_out(self, what: str = "whole request head") -> None:
        self._refuse("head-timeout", f"no {what} within {self.head_timeout:g} s")

    def _refuse(self, kind: str, reason: str) -> bool:
        self.refused_by_kind[kind] += 1
        self.refused.add(reason)
        return False


def _peer_of(transport: asyncio.BaseTransport) -> str:
    peer = transport.get_extra_info("peername")
    return str(peer[0]) if isinstance(peer, tuple) and peer else "?"


class _GuardedHttp(HeadTimedHttp):
    """uvicorn's HTTP/1.1 protocol, admitted by the guard and held to its request-head deadline. ``behind_tls``:
    it is the inner protocol of :class:`_GuardedTls`, which the guard admitted at accept."""

    guard: ClassVar[ConnectionGuard]
    behind_tls: ClassVar[bool] = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.connected = False

    def head_timeout(self) -> float:
        return self.guard.head_timeout

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if not self.behind_tls and not self.guard.admit(transport):
            transport.abort()
            return
        self.connected = True
        super().connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.connected:
            self.guard.release(self.transport)  # behind TLS, a no-op: the TLS protocol holds the guard's place
            super().connection_lost(exc)

    def on_head_timeout(self) -> None:
        self.guard.timed_out()
        super().on_head_timeout()


# Stateless: one for every socket.
_DEFLATE: Final = LeanDeflateFactory()


class _GuardedWebSocket(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol, releasing its socket in the guard and counting its bytes there; a refused
    handshake is not an error. Its permessage-deflate is the pod's own (:class:`LeanDeflateFactory`): uvicorn's
    keeps a compressor of about 38 KiB on every socket, idle or not, and compresses every message."""

    guard: ClassVar[ConnectionGuard]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.conn.available_extensions:  # uvicorn's, when ws_per_message_deflate
            self.conn.available_extensions = [_DEFLATE]
        # Every write of uvicorn's takes its bytes from here: one addition per write, none per byte.
        data_to_send = self.conn.data_to_send
        guard = self.guard

        def counted() -> list[bytes]:
            output = data_to_send()
            guard.websocket_bytes_sent += sum(map(len, output))
            return output

        self.conn.data_to_send = counted  # type: ignore[method-assign]

    def data_received(self, data: bytes) -> None:
        self.guard.websocket_bytes_received += len(data)
        super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.guard.release(self.transport)
        super().connection_lost(exc)

    async def send(self, message: Any) -> None:
        await super().send(message)
        # The app answered the upgrade with an HTTP refusal (401, 403): that is a whole answer, and uvicorn
        # would otherwise log it as an application error, once per refused attempt.
        if message.get("type") == "websocket.http.response.body" and not message.get("more_body", False):
            self.handshake_complete = True
        if message.get("type") == "websocket.close" and self.close_timer is not None:
            # uvicorn's timer would close() the transport, which first flushes: forever, for a client that
            # stopped reading. No close reply in time: abort, and the socket's fd and buffers go.
            self.close_timer.cancel()
            self.close_timer = self.loop.call_later(self.close_timeout, self.transport.abort)

    async def run_asgi(self) -> None:
        await super().run_asgi()
        if self.close_timer is None and _unsent(self.transport):
            # The app gave up on a close frame that could not even be queued (see acp_endpoint's CLOSE_TIMEOUT);
            # uvicorn's close() would wait for the unread data to drain.
            self.transport.abort()


class _GuardedTls(SSLProtocol):
    """The pod's own TLS, done by the socket's protocol from its accept on.

    Served by asyncio's (``create_server(ssl=...)``), a socket in its handshake is no protocol's of ours until
    the handshake ends, up to asyncio's 60 s: 300 silent sockets from one address were counted as none. Here
    the guard admits the socket at accept, by its address, as any other; it must finish its handshake within
    the head timeout, which keeps running for its request head (:class:`HeadTimedHttp` counts from accept);
    and the decrypted stream goes to the guarded HTTP protocol as asyncio's own TLS would hand it.
    """

    guard: ClassVar[ConnectionGuard]
    http: ClassVar[type[_GuardedHttp]]
    tls: ClassVar[ReloadingTls]

    def __init__(self, **kwargs: Any) -> None:
        self._http = self.http(**kwargs)
        # No waiter: nothing awaits the handshake (asyncio's accept path would). asyncio's handshake timeout is
        # only a backstop: ours (below) ends the handshake first, and counts it.
        super().__init__(self._http.loop, self._http, self.tls.context, None,  # type: ignore[arg-type]
                         server_side=True, ssl_handshake_timeout=math.ceil(2 * self.guard.head_timeout))
        self._socket: asyncio.Transport | None = None
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        socket = cast(asyncio.Transport, transport)  # a socket's transport, as create_server makes it
        if not self.guard.admit(socket):
            socket.abort()
            return
        self._socket = socket
        self._deadline = self._http.loop.call_later(self.guard.head_timeout, self._handshake_timed_out)
        super().connection_made(transport)

    def _handshake_timed_out(self) -> None:
        self._deadline = None
        if self._socket is not None and not self._http.connected:  # connected: the handshake ended
            self.guard.timed_out("finished TLS handshake")
            self._socket.abort()

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        if self._socket is not None:
            self.guard.release(self._socket)
            super().connection_lost(exc)


def _unsent(transport: asyncio.WriteTransport) -> int:
    try:
        return transport.get_write_buffer_size()
    except AttributeError:  # asyncio's TLS transport once its connection is lost: nothing is left to send
        return 0


class GuardedServer(uvicorn.Server):
    """uvicorn's server for :func:`uvicorn_config`'s settings: its start line says ``https`` when the pod's own TLS
    serves, which uvicorn cannot see (the handshake is done in the guard's protocol, :class:`_GuardedTls`)."""

    def _log_started_message(self, listeners: Any) -> None:
        tls = getattr(self.config.http_protocol_class, "tls", None)
        if not isinstance(tls, ReloadingTls):
            super()._log_started_message(listeners)
            return
        # uvicorn names the scheme after its own TLS context, read only here: for this one line, ours.
        self.config.ssl = tls.context
        try:
            super()._log_started_message(listeners)
        finally:
            self.config.ssl = None


class DrainingServer(GuardedServer):
    """uvicorn's server for the pod's main process. On a stop it first closes its listeners and awaits ``drain``
    while the open sockets still carry answers, then shuts down as uvicorn does. SIGTERM (how a pod is stopped)
    and SIGINT (Ctrl+C; how JupyterHub's local spawner stops a server first) then end the process with status 0:
    a drained stop is a clean one, not a death by signal, nor a KeyboardInterrupt traceback in the log."""

    def __init__(self, config: uvicorn.Config, *, drain: Callable[[], Awaitable[None]]) -> None:
        super().__init__(config)
        self._drain = drain

    async def shutdown(self, sockets: list[Any] | None = None) -> None:
        for server in self.servers:
            server.close()  # no new sockets while the old ones finish
        await self._drain()
        await super().shutdown(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        # uvicorn re-raises the signals it caught once it has stopped: SIGTERM's default would kill us then, and
        # SIGINT's raises KeyboardInterrupt out of asyncio.run, a traceback for a stop that went well.
        if sig in (signal.SIGTERM, signal.SIGINT):
            while sig in self._captured_signals:
                self._captured_signals.remove(sig)


class ReloadingTls:
    """The pod's own TLS: a server context whose certificate and key :meth:`reload` replaces for every handshake
    after it, while the connections already open keep theirs (a renewed certificate needs no restart).

    uvicorn listens with :attr:`context`; its SNI callback, which OpenSSL runs on every ClientHello (with a
    server name or without), hands the handshake the context last loaded. A reload loads the files into a new
    context first, so a half-written or mismatched pair is refused and the previous one kept.
    """

    def __init__(self, cert: Path, key: Path) -> None:
        self.cert, self.key = cert, key
        self._current = self._load()
        self.context = self._load()
        self.context.sni_callback = self._pick

    def _load(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.set_alpn_protocols(["http/1.1"])
        try:
            context.load_cert_chain(self.cert, self.key)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigurationError(
                f"cannot load the TLS certificate {self.cert} with the key {self.key} ({exc}): give a PEM "
                "certificate chain and its unencrypted PEM key, both readable by this user"
            ) from None
        return context

    def _pick(self, connection: ssl.SSLObject, _server_name: str | None, _context: ssl.SSLContext) -> None:
        connection.context = self._current

    def reload(self) -> bool:
        """Read the files again; ``False`` (and the previous certificate kept) when they do not load."""
        try:
            self._current = self._load()
        except ConfigurationError as exc:
            log.error("TLS reload refused, still serving the previous certificate: %s", exc)
            return False
        log.info("TLS certificate reloaded from %s: new connections get it", self.cert)
        return True


def hangup_handler(tls: ReloadingTls | None) -> Callable[[], None]:
    """What SIGHUP does to the pod, as to nginx: reload, never stop. With TLS the certificate and key are read
    again for the next handshakes; without, there is nothing to reload, and the pod says so. Only SIGTERM (or
    SIGINT) stops it, drained: a death by SIGHUP's default would leave its agents' processes and session folders."""

    def on_hangup() -> None:
        if tls is None:
            log.info("SIGHUP: nothing to reload without TLS; the pod carries on (SIGTERM stops it)")
        else:
            tls.reload()  # it logs what it loaded, or why it kept the previous certificate

    return on_hangup


def tls_for(settings: Settings) -> ReloadingTls | None:
    """The pod's own TLS, if the settings name a certificate (refused now, before serving, if it does not load)."""
    if settings.tls_cert is None or settings.tls_key is None:
        return None
    return ReloadingTls(settings.tls_cert, settings.tls_key)


def check_transport(settings: Settings) -> None:
    """Off loopback the key (and everything after it) must travel over TLS: the pod's own or a proxy's."""
    if is_loopback(settings.host) or settings.tls_cert or settings.behind_proxy or settings.insecure_no_tls:
        return
    raise ConfigurationError(
        f"refusing to serve on {settings.host} in clear text: the key would cross the network readable. Give "
        "--tls-cert and --tls-key to serve wss:// yourself, or --behind-proxy ADDRESSES when an ingress in front "
        "terminates TLS (its addresses, e.g. 10.0.0.0/8), or --insecure-no-tls if the network is private anyway"
    )


def guard_for(settings: Settings) -> ConnectionGuard:
    """The guard the settings ask for."""
    return ConnectionGuard(
        max_connections=settings.max_connections, max_per_peer=settings.max_connections_per_peer,
        head_timeout=settings.handshake_timeout, proxies=settings.behind_proxy,
    )


def uvicorn_config(
    app: ASGIApp, *, host: str, port: int, max_frame_bytes: int, log_level: str,
    guard: ConnectionGuard | None = None, tls: ReloadingTls | None = None, proxies: list[str] | None = None,
    ws_deflate: bool = True,
) -> uvicorn.Config:
    """uvicorn's settings for the gateway. ``proxies``: the only peers whose ``X-Forwarded-For`` and
    ``X-Forwarded-Proto`` are believed (none: the headers are ignored from everyone). ``ws_deflate``: accept
    permessage-deflate when the client offers it (:attr:`~openab_browser.core.settings.Settings.ws_deflate`)."""
    if guard is None:  # not `or`: a guard holding no socket has length 0
        # The app's own (create_app makes it from the settings, and /metrics reads it), else a default one.
        guard = getattr(getattr(app, "state", None), "guard", None)
        if not isinstance(guard, ConnectionGuard):
            guard = ConnectionGuard(max_connections=1024, max_per_peer=256, head_timeout=10.0)
    http: type[asyncio.Protocol] = type("GuardedHttp", (_GuardedHttp,), {"guard": guard, "behind_tls": tls is not None})
    if tls is not None:
        http = type("GuardedTls", (_GuardedTls,), {"guard": guard, "http": http, "tls": tls})
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        lifespan="on",
        log_level=log_level,
        http=http,
        ws=type("GuardedWebSocket", (_GuardedWebSocket,), {"guard": guard}),
        # Frames between our limit and this one get our own 1009 close; larger ones never reach memory.
        ws_max_size=2 * max_frame_bytes,
        ws_per_message_deflate=ws_deflate,
        # JSON lines: uvicorn's records go to the pod's handler instead of uvicorn's own text formatter.
        log_config=None if json_logging() else uvicorn.config.LOGGING_CONFIG,
        proxy_headers=bool(proxies),
        forwarded_allow_ips=list(proxies or []),
        server_header=False,
        backlog=ACCEPT_BURST,
    )


@contextlib.asynccontextmanager
async def running_server(
    app: ASGIApp, *, host: str = "127.0.0.1", port: int = 0, max_frame_bytes: int = 8 << 20,
    log_level: str = "warning", start_timeout: float = 15.0, guard: ConnectionGuard | None = None,
    tls: ReloadingTls | None = None, proxies: list[str] | None = None, ws_deflate: bool = True,
) -> AsyncIterator[str]:
    """Serve ``app`` until the block ends; yields its base URL (``http://host:port``, ``https://`` with ``tls``)
    with the real port."""
    server = GuardedServer(
        uvicorn_config(app, host=host, port=port, max_frame_bytes=max_frame_bytes, log_level=log_level, guard=guard,
                       tls=tls, proxies=proxies, ws_deflate=ws_deflate)
    )
    async with serving(server, start_timeout=start_timeout) as sockname:
        shown = f"[{sockname[0]}]" if ":" in sockname[0] else sockname[0]
        yield f"{'https' if tls is not None else 'http'}://{shown}:{sockname[1]}"


@contextlib.asynccontextmanager
async def serving(server: uvicorn.Server, *, start_timeout: float = 15.0) -> AsyncIterator[tuple[str, int]]:
    """Run ``server`` in this event loop until the block ends; yields its listening address once it is started,
    and stops it within 10 s after."""
    task = asyncio.create_task(server.serve(), name="uvicorn")
    try:
        async with asyncio.timeout(start_timeout):
            while not server.started:
                if task.done():
                    task.result()
                    raise RuntimeError("the server stopped while starting")
                await asyncio.sleep(0.02)
        host, port = server.servers[0].sockets[0].getsockname()[:2]
        yield host, port
    finally:
        server.should_exit = True
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            async with asyncio.timeout(10):
                await asyncio.shield(task)
        if not task.done():
            task.cancel()
