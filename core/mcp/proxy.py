"""Proxy mode: each ACP session's browser as a loopback Streamable HTTP MCP server, for that session's agent.

:class:`BrowserProxy` is the pod's :class:`openab.core.browser_access.BrowserAccess` for
``OPENAB_BROWSER_MODE=proxy``. Each session gets its own listener at ``http://127.0.0.1:<os port>/mcp``
with its own 256-bit bearer token; the listener lives exactly as long as the session (opened on
``session_opened`` or the first :meth:`BrowserProxy.endpoint_for`, closed on ``session_closed``), so one
session's token never reaches another session's browser and an evicted session leaves no port behind.

The HTTP side (:class:`McpHttpApp`) is a plain ASGI app that speaks the Streamable HTTP transport of both
MCP eras; what the messages mean is :class:`openab.core.browser_mcp.BrowserMcp`'s business. Checks, in
order: ``Host`` must be loopback and no ``Origin`` may be present (403: DNS rebinding and browser pages),
path ``/mcp`` (404), bearer token (401), method (405), then per method the media types (415, 406), body size
(413) and the MCP session (400 without ``Mcp-Session-Id``, 404 for an unknown one so clients initialize
again).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import secrets
import socket
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import orjson
from starlette.datastructures import Headers
from starlette.types import Message, Receive, Scope, Send

from ..acp.sessions import Session
from ..addresses import is_loopback
from ..agents.config import ConfigError, HttpEndpoint, config_files, strip, write
from ..errors import ConfigConflict
from ..jsonrpc import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_CANCELLED,
    JsonObject,
    RpcError,
)
from ..pod import Pod
from .access import BrowserEndpoint
from .server import (
    HANDSHAKE_VERSIONS,
    HEADER_MISMATCH,
    MODERN_VERSION,
    SERVER_NAME,
    UNSUPPORTED_PROTOCOL_VERSION,
    BrowserMcp,
    Limits,
    modern_version,
)

__all__ = ["MCP_PATH", "BrowserProxy", "ConfigConflict", "McpHttpApp", "ProxyEndpoint"]

log = logging.getLogger(__name__)

MCP_PATH: Final = "/mcp"
_ALLOWED_METHODS: Final = "GET, POST, DELETE"
_SESSION_HEADER: Final = "mcp-session-id"
_VERSION_HEADER: Final = "mcp-protocol-version"
# Headers whose second copy would let a client and a check disagree about which one counts.
_SINGLE_HEADERS: Final = (b"host", b"origin", b"authorization", b"mcp-session-id", b"mcp-protocol-version",
                          b"mcp-method", b"mcp-name", b"content-type")
_LOOPBACK_HOSTS: Final = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})
# 2026-07-28 over HTTP: JSON-RPC error codes that are also HTTP statuses.
_MODERN_STATUS: Final = {PARSE_ERROR: 400, INVALID_REQUEST: 400, INVALID_PARAMS: 400, HEADER_MISMATCH: 400,
                         UNSUPPORTED_PROTOCOL_VERSION: 400, METHOD_NOT_FOUND: 404}



# -- the HTTP endpoint of one ACP session -------------------------------------------------------------------


class _Outbox:
    """Server->client messages of one MCP session waiting for (or flowing to) its GET stream. Bounded."""

    def __init__(self, size: int) -> None:
        self.messages: deque[JsonObject] = deque(maxlen=size)
        self.ready = asyncio.Event()
        self.generation = 0  # a new GET stream takes over; the older one sees the change and ends

    def put(self, message: JsonObject) -> None:
        if message.get("method") == "notifications/tools/list_changed" and message in self.messages:
            return  # one queued list_changed says all that many would
        self.messages.append(message)
        self.ready.set()


@dataclass(eq=False)
class _McpSession:
    id: str
    server: BrowserMcp
    outbox: _Outbox


@dataclass
class _Refusal(Exception):
    status: int
    message: str
    code: int = INVALID_REQUEST
    request_id: Any = None
    headers: tuple[tuple[str, str], ...] = ()


class McpHttpApp:
    """The Streamable HTTP MCP endpoint of one ACP session (an ASGI app). Call :meth:`aclose` when done."""

    def __init__(
        self,
        server_factory: Callable[[Callable[[JsonObject], None] | None], BrowserMcp],
        token: str,
        *,
        max_body_bytes: int = 1 << 20,
        max_sessions: int = 16,
        max_queued: int = 256,
        keepalive_interval: float = 15.0,
        body_timeout: float = 30.0,
    ) -> None:
        self._new_server = server_factory
        self._expected = f"Bearer {token}".encode()
        self.max_body_bytes = max_body_bytes
        self.max_sessions = max_sessions
        self.max_queued = max_queued
        self.keepalive_interval = keepalive_interval
        self.body_timeout = body_timeout
        self.sessions: OrderedDict[str, _McpSession] = OrderedDict()
        # Stateless (2026-07-28) requests share one server: it keeps no state between them.
        self._stateless = server_factory(None)
        self.closed = asyncio.Event()

    async def aclose(self) -> None:
        """End every stream and running call; the listener can then shut down at once."""
        self.closed.set()
        for session in list(self.sessions.values()):
            self._end_session(session)
        self._stateless.close()

    def _end_session(self, session: _McpSession) -> None:
        self.sessions.pop(session.id, None)
        session.server.close()
        session.outbox.generation += 1
        session.outbox.ready.set()

    # -- ASGI -------------------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # no lifespan, no websockets on this listener
        try:
            headers = self._admit(scope)
            method = scope["method"]
            if method == "POST":
                await self._post(headers, receive, send)
            elif method == "GET":
                await self._get(headers, receive, send)
            elif method == "DELETE":
                await self._delete(headers, send)
            else:
                raise _Refusal(405, f"Method {method} not allowed: use POST, GET or DELETE",
                               headers=(("allow", _ALLOWED_METHODS),))
        except _Refusal as refusal:
            await _refuse(send, refusal)

    def _admit(self, scope: Scope) -> Headers:
        raw: list[tuple[bytes, bytes]] = scope["headers"]
        for name in _SINGLE_HEADERS:
            if sum(1 for key, _ in raw if key == name) > 1:
                raise _Refusal(400, f"Header {name.decode()} given more than once")
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if _host_name(host) not in _LOOPBACK_HOSTS:
            raise _Refusal(403, f"Host {host!r} is not a loopback name: this endpoint serves this machine only")
        if "origin" in headers:
            raise _Refusal(403, "Requests from web pages (with an Origin) are refused: this endpoint is for agents")
        if scope["path"] != MCP_PATH:
            raise _Refusal(404, f"Not found: the MCP endpoint is {MCP_PATH}", METHOD_NOT_FOUND)
        presented = headers.get("authorization", "").encode("latin-1")
        if not hmac.compare_digest(presented, self._expected):
            raise _Refusal(401, "Missing or wrong bearer token: send `Authorization: Bearer <token>` as configured "
                                "for this session", headers=(("www-authenticate", 'Bearer realm="openab"'),))
        return headers

    # -- POST -------------------------------------------------------------------------------------------

    async def _post(self, headers: Headers, receive: Receive, send: Send) -> None:
        if _media_type(headers.get("content-type", "")) != "application/json":
            raise _Refusal(415, "Content-Type must be application/json")
        json_ok, sse_ok = _acceptable(headers.get("accept"))
        if not (json_ok or sse_ok):
            raise _Refusal(406, "Accept must include application/json and text/event-stream")
        try:
            async with asyncio.timeout(self.body_timeout):
                body = await _read_body(headers, receive, self.max_body_bytes)
        except TimeoutError:
            raise _Refusal(408, f"The request body did not arrive within {self.body_timeout:g} s") from None
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise _Refusal(400, f"Parse error: {exc}", PARSE_ERROR) from None
        if not isinstance(message, dict):
            raise _Refusal(400, "Invalid Request: one JSON-RPC message per POST, no batches")
        server, session, status_of = self._route(headers, message)
        if "id" not in message or "method" not in message:
            await server.handle(message)  # notifications and stray responses: accepted, never answered
            await _reply(send, 202)
        elif session is None and message["method"] == "initialize":
            await self._initialize(message, send, json_ok=json_ok)
        else:
            await self._answer(server, message, receive, send, status_of, sse_ok=sse_ok, json_ok=json_ok)

    async def _initialize(self, message: JsonObject, send: Send, *, json_ok: bool) -> None:
        """A new MCP session, kept (and its id sent) only when the handshake succeeds."""
        session = self._open_session()
        response = await session.server.handle(message)
        assert response is not None  # initialize is answered at once, never cancelled
        headers: tuple[tuple[str, str], ...] = ((_SESSION_HEADER, session.id),)
        if "error" in response:
            self._end_session(session)
            headers = ()
        await _respond(send, response, 200, headers, json_ok=json_ok)

    def _route(
        self, headers: Headers, message: JsonObject
    ) -> tuple[BrowserMcp, _McpSession | None, Callable[[JsonObject], int]]:
        """Which server answers ``message``: its MCP session's, or the stateless one."""
        session_id = headers.get(_SESSION_HEADER)
        version = headers.get(_VERSION_HEADER)
        if session_id is not None:
            session = self._session(session_id)
            if version is not None and version not in HANDSHAKE_VERSIONS:
                raise _Refusal(400, f"Unsupported MCP-Protocol-Version {version!r} for this session",
                               request_id=message.get("id"))
            return session.server, session, _always_ok
        if message.get("method") == "initialize":
            return self._stateless, None, _always_ok
        meta_version = modern_version(message)
        if meta_version is None and version != MODERN_VERSION:
            raise _Refusal(400, "Bad Request: Mcp-Session-Id header is required; send initialize first",
                           request_id=message.get("id"))
        _check_modern_headers(headers, message, meta_version)
        return self._stateless, None, _modern_status

    def _session(self, session_id: str) -> _McpSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise _Refusal(404, "Session not found: initialize again without Mcp-Session-Id")
        self.sessions.move_to_end(session_id)
        return session

    def _open_session(self) -> _McpSession:
        while len(self.sessions) >= self.max_sessions:
            # The least recently used goes; its client gets 404 and initializes again, as the spec has it.
            _, oldest = next(iter(self.sessions.items()))
            log.info("MCP session limit (%d) reached: ending the least recently used", self.max_sessions)
            self._end_session(oldest)
        outbox = _Outbox(self.max_queued)
        session = _McpSession(secrets.token_urlsafe(32), self._new_server(outbox.put), outbox)
        self.sessions[session.id] = session
        return session

    async def _answer(
        self,
        server: BrowserMcp,
        message: JsonObject,
        receive: Receive,
        send: Send,
        status_of: Callable[[JsonObject], int],
        *,
        sse_ok: bool,
        json_ok: bool,
    ) -> None:
        """Run one request; answer in JSON unless progress comes first and the client takes SSE.

        Deciding late keeps big results (an 8 MiB screenshot) in one JSON body, which every client reads,
        while a long call that reports progress still streams it.
        """
        progress: asyncio.Queue[JsonObject] = asyncio.Queue(self.max_queued)

        def on_progress(note: JsonObject) -> None:
            with contextlib.suppress(asyncio.QueueFull):  # progress is advisory: drop rather than grow
                progress.put_nowait(note)

        work = asyncio.ensure_future(server.handle(message, progress=on_progress if sse_ok else None))
        gone = asyncio.ensure_future(_disconnected(receive))
        streaming = False
        try:
            while True:
                next_note = asyncio.ensure_future(progress.get())
                try:
                    await asyncio.wait({work, gone, next_note}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    next_note.cancel()
                if gone.done() and not work.done():
                    # Nobody can receive the answer (no resumption here): stop the browser instead of
                    # letting it work for nobody. In 2026-07-28 this is also how a client cancels.
                    work.cancel()
                    return
                if next_note.done() and not next_note.cancelled():
                    if not streaming:
                        await _start_sse(send, ())
                        streaming = True
                    await _sse_event(send, next_note.result())
                if work.done():
                    break
            response = work.result()
            if response is None:  # cancelled by notifications/cancelled; the client ignores this answer
                response = {"jsonrpc": "2.0", "id": message["id"],
                            "error": RpcError(REQUEST_CANCELLED, "Request cancelled").to_json()}
            if streaming:
                while not progress.empty():
                    await _sse_event(send, progress.get_nowait())
                await _sse_event(send, response, more=False)
            else:
                await _respond(send, response, status_of(response), (), json_ok=json_ok)
        finally:
            gone.cancel()
            if not work.done():
                work.cancel()

    # -- GET: the stream of server notifications ---------------------------------------------------------

    async def _get(self, headers: Headers, receive: Receive, send: Send) -> None:
        session_id = headers.get(_SESSION_HEADER)
        if session_id is None:
            if headers.get(_VERSION_HEADER) == MODERN_VERSION:
                raise _Refusal(405, "2026-07-28 has no GET stream", headers=(("allow", "POST"),))
            raise _Refusal(400, "Bad Request: Mcp-Session-Id header is required; send initialize first")
        session = self._session(session_id)
        if not _acceptable(headers.get("accept"))[1]:
            raise _Refusal(406, "Accept must include text/event-stream")
        outbox = session.outbox
        outbox.generation += 1
        mine = outbox.generation
        outbox.ready.set()  # an older stream of this session wakes up, sees it is replaced and ends
        await _start_sse(send, ())
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            while not gone.done() and not self.closed.is_set():
                outbox.ready.clear()
                if outbox.generation != mine or session.id not in self.sessions:
                    break
                while outbox.messages:
                    await _sse_event(send, outbox.messages.popleft())
                ready = asyncio.ensure_future(outbox.ready.wait())
                try:
                    done, _ = await asyncio.wait(
                        {ready, gone}, timeout=self.keepalive_interval, return_when=asyncio.FIRST_COMPLETED
                    )
                finally:
                    ready.cancel()
                if not done:
                    # An SSE comment: keeps a client's read timeout from ending a quiet stream.
                    await send({"type": "http.response.body", "body": b": keepalive\n\n", "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the client went away mid-write
        finally:
            gone.cancel()

    # -- DELETE -----------------------------------------------------------------------------------------

    async def _delete(self, headers: Headers, send: Send) -> None:
        session_id = headers.get(_SESSION_HEADER)
        if session_id is None:
            raise _Refusal(400, "Bad Request: DELETE needs the Mcp-Session-Id header")
        self._end_session(self._session(session_id))
        await _reply(send, 204)


def _always_ok(_response: JsonObject) -> int:
    return 200


def _modern_status(response: JsonObject) -> int:
    error = response.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return _MODERN_STATUS.get(code, 200) if isinstance(code, int) else 200


def _check_modern_headers(headers: Headers, message: JsonObject, meta_version: str | None) -> None:
    """2026-07-28: the routing headers must say what the body says."""
    request_id = message.get("id")
    version = headers.get(_VERSION_HEADER)
    if meta_version is None:
        raise _Refusal(400, "2026-07-28 requests carry _meta io.modelcontextprotocol/protocolVersion",
                       INVALID_PARAMS, request_id)
    if version is not None and version != meta_version:
        raise _Refusal(400, f"MCP-Protocol-Version {version!r} does not match _meta {meta_version!r}",
                       HEADER_MISMATCH, request_id)
    method = headers.get("mcp-method")
    if method is not None and method != message.get("method"):
        raise _Refusal(400, f"Mcp-Method {method!r} does not match the body", HEADER_MISMATCH, request_id)
    name = headers.get("mcp-name")
    params = message.get("params")
    if name is not None and message.get("method") == "tools/call" and isinstance(params, dict) \
            and name != params.get("name"):
        raise _Refusal(400, f"Mcp-Name {name!r} does not match the tool name", HEADER_MISMATCH, request_id)


# -- HTTP pieces ---------------------------------------------------------------------------------------


def _host_name(host: str) -> str:
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _media_type(value: str) -> str:
    return value.split(";", 1)[0].strip().lower()


def _acceptable(accept: str | None) -> tuple[bool, bool]:
    """Whether ``Accept`` takes JSON and SSE (a missing header takes anything, as HTTP has it)."""
    if accept is None:
        return True, True
    types = {_media_type(part) for part in accept.split(",")}
    anything = "*/*" in types
    return (anything or bool(types & {"application/json", "application/*"}),
            anything or bool(types & {"text/event-stream", "text/*"}))


async def _read_body(headers: Headers, receive: Receive, limit: int) -> bytes:
    too_big = _Refusal(413, f"Request body over {limit} bytes")
    declared = headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_big
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Refusal(400, "The client went away before sending the whole body")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise too_big
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _disconnected(receive: Receive) -> None:
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            return


async def _reply(
    send: Send, status: int, body: bytes = b"", content_type: str | None = None,
    headers: Iterable[tuple[str, str]] = (),
) -> None:
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    if content_type is not None:
        raw.append((b"content-type", content_type.encode()))
    raw.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _refuse(send: Send, refusal: _Refusal) -> None:
    body = {"jsonrpc": "2.0", "id": refusal.request_id, "error": {"code": refusal.code, "message": refusal.message}}
    await _reply(send, refusal.status, orjson.dumps(body), "application/json", refusal.headers)


async def _respond(
    send: Send, response: JsonObject, status: int, headers: tuple[tuple[str, str], ...], *, json_ok: bool
) -> None:
    """One whole answer: a JSON body, or a one-event SSE stream for a client that takes only that."""
    if json_ok:
        await _reply(send, status, orjson.dumps(response), "application/json", headers)
    else:
        await _start_sse(send, headers)
        await _sse_event(send, response, more=False)


async def _start_sse(send: Send, headers: Iterable[tuple[str, str]]) -> None:
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    raw += [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache, no-transform")]
    await send({"type": "http.response.start", "status": 200, "headers": raw})


async def _sse_event(send: Send, message: JsonObject, *, more: bool = True) -> None:
    # orjson never writes a newline, so one `data:` line holds the whole message.
    await send({"type": "http.response.body", "body": b"event: message\ndata: " + orjson.dumps(message) + b"\n\n",
                "more_body": more})


# -- listeners and the pod side ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Written:
    """One ``write_config``: what to strip when the session closes."""

    agent: str
    workdir: Path
    home: Path | None
    env: dict[str, str] | None
    paths: list[Path]


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
    written: list[_Written] = field(default_factory=list)

    @property
    def config(self) -> HttpEndpoint:
        return HttpEndpoint(self.url, self.token)

    def browser_endpoint(self) -> BrowserEndpoint:
        return BrowserEndpoint(
            mode="proxy",
            config=self.config,
            acp_server={
                "type": "http",
                "name": SERVER_NAME,
                "url": self.url,
                "headers": [{"name": "Authorization", "value": f"Bearer {self.token}"}],
            },
        )

    async def aclose(self) -> None:
        await self.app.aclose()
        with contextlib.suppress(Exception):
            await self._started
        if self._server.started:
            await self._server.shutdown(sockets=[self._socket])
        self._socket.close()


class BrowserProxy:
    """``OPENAB_BROWSER_MODE=proxy``: a loopback MCP endpoint per session. Register with ``pod.add_observer``."""

    mode: Literal["proxy"] = "proxy"

    def __init__(
        self,
        pod: Pod,
        *,
        host: str = "127.0.0.1",
        limits: Limits | None = None,
        max_body_bytes: int = 1 << 20,
        max_mcp_sessions: int = 16,
        shutdown_timeout: float = 5.0,
    ) -> None:
        if not is_loopback(host):
            raise ValueError(f"the proxy serves loopback only (127.0.0.1 or ::1), not {host!r}: agents run in this pod")
        self.pod = pod
        self.host = host
        self.limits = limits or Limits()
        self.max_body_bytes = max_body_bytes
        self.max_mcp_sessions = max_mcp_sessions
        self.shutdown_timeout = shutdown_timeout
        self._endpoints: dict[str, ProxyEndpoint] = {}
        self._claims: dict[Path, str] = {}  # config file -> the session whose entry it holds

    # -- BrowserAccess ----------------------------------------------------------------------------------

    async def session_opened(self, session: Session) -> None:
        if self._live(session):
            self._ensure(session)

    async def endpoint_for(self, session: Session) -> BrowserEndpoint:
        if not self._live(session):
            raise RuntimeError(f"session {session.id} is closed: it has no browser endpoint")
        return self._ensure(session).browser_endpoint()

    async def session_closed(self, session: Session) -> None:
        endpoint = self._endpoints.pop(session.id, None)
        if endpoint is None:
            return
        self._strip_configs(endpoint)
        try:
            async with asyncio.timeout(self.shutdown_timeout + 5):
                await endpoint.aclose()
        except TimeoutError:
            log.warning("the MCP endpoint of session %s did not close in time", session.id)
        log.info("browser MCP endpoint of session %s closed", session.id)

    def endpoint(self, session_id: str) -> ProxyEndpoint | None:
        return self._endpoints.get(session_id)

    def _live(self, session: Session) -> bool:
        # Opening runs as a task: a session evicted before it ran must not get a listener nobody closes.
        return self.pod.sessions.get(session.id) is session

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
        registry, limits = self.pod.tunnels, self.limits

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

    # -- agent config files -----------------------------------------------------------------------------

    def write_config(
        self, session: Session, agent: str, workdir: Path, *, home: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> list[Path]:
        """Write this session's entry into ``agent``'s config under ``workdir`` (user files under ``home``,
        or where the agent's ``env`` points: ``CODEX_HOME`` and the like).

        The files are remembered and stripped on ``session_closed`` (our entry only). Raises
        :class:`ConfigConflict` when another live session's entry is in one of those files: give each
        session's agent its own working directory (and home) instead.
        """
        if not self._live(session):
            raise RuntimeError(f"session {session.id} is closed: no config to write")
        endpoint = self._ensure(session)
        paths = [Path(f.path).resolve() for f in config_files(agent, dir=workdir, home=home, env=env)]
        for path in paths:
            owner = self._claims.get(path)
            if owner is not None and owner != session.id:
                raise ConfigConflict(
                    f"{path} already holds the openab_browser entry of session {owner}; two sessions cannot share "
                    f"one config file. Run each session's agent in its own working directory (and HOME)"
                )
        written = write(agent, endpoint.config, dir=workdir, home=home, env=env)
        for path in paths:
            self._claims[path] = session.id
        endpoint.written.append(_Written(agent, workdir, home, dict(env) if env is not None else None, paths))
        return written

    def _strip_configs(self, endpoint: ProxyEndpoint) -> None:
        for done in endpoint.written:
            try:
                strip(done.agent, endpoint.config, dir=done.workdir, home=done.home, env=done.env)
            except (ConfigError, OSError) as exc:
                log.warning("could not remove the openab_browser entry of session %s: %s", endpoint.session_id, exc)
            for path in done.paths:
                if self._claims.get(path) == endpoint.session_id:
                    del self._claims[path]
        endpoint.written.clear()
