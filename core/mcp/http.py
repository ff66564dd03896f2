"""The Streamable HTTP transport of MCP (both eras) for one ACP session's browser server, as a plain ASGI app.

What the messages mean is :class:`openab_browser.core.mcp.server.BrowserMcp`'s business; this module owns the HTTP:
checks, in order: ``Host`` must be loopback, and an ``Origin``, if present, must be this very endpoint (``http``,
a loopback host, its own port; anything else is 403: DNS rebinding and other web pages), path ``/mcp`` (404),
bearer token (401), method (405), then per method the media types (415, 406), body size (413) and the MCP
session (400 without ``Mcp-Session-Id``, 404 for an unknown one so clients initialize again). Answers are JSON
or a server-sent event stream, as the client accepts.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

import orjson
from starlette.datastructures import Headers
from starlette.types import Message, Receive, Scope, Send

from ..addresses import is_loopback, is_loopback_host
from ..jsonrpc import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_CANCELLED,
    JsonObject,
    LocalRpcError,
    error_message,
)
from ..jsonrpc.protocol import reply_id, unreadable_error
from ..mcp_vocabulary import (
    HANDSHAKE_VERSIONS,
    HEADER_MISMATCH,
    PROTOCOL_VERSION_HEADER,
    SESSION_ID_HEADER,
    STATELESS_VERSION,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from ..tasks import StopScope
from .server import BrowserMcp, stateless_version

__all__ = ["MCP_PATH", "McpHttpApp"]

log = logging.getLogger(__name__)

MCP_PATH: Final = "/mcp"
# Host values already found to name this machine (127.0.0.1:<port>, localhost:<port>, [::1]:<port>).
_MAX_KNOWN_HOSTS: Final = 8
# Seconds a call runs before its client is watched for going away: a call's answer mostly comes well before, and the
# watch is a task of its own reading the request's stream. A client gone sooner is noticed at this mark.
_WATCH_AFTER: Final = 0.05
_ALLOWED_METHODS: Final = "GET, POST, DELETE"
# Headers whose second copy would let a client and a check disagree about which one counts.
_SINGLE_HEADERS: Final = frozenset((b"host", b"origin", b"authorization", b"mcp-session-id",
                                    b"mcp-protocol-version", b"mcp-method", b"mcp-name", b"content-type"))
# 2026-07-28 over HTTP: JSON-RPC error codes that are also HTTP statuses.
_STATELESS_STATUS: Final = {PARSE_ERROR: 400, INVALID_REQUEST: 400, INVALID_PARAMS: 400, HEADER_MISMATCH: 400,
                         UNSUPPORTED_PROTOCOL_VERSION: 400, METHOD_NOT_FOUND: 404}


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


class _Watch:
    """One request's watch while its call runs: its progress notes, streamed as server-sent events, and its
    client, whose going away stops the call (``call``).

    Most calls are answered in a few milliseconds: the watch's task (reading the request's stream, writing the
    notes) starts only for one that is not answered within :data:`_WATCH_AFTER`, or that reports progress. The
    request's own task writes the answer after :meth:`aclose`, so the two never write at once.
    """

    def __init__(self, receive: Receive, send: Send, call: StopScope, max_notes: int) -> None:
        self._receive = receive
        self._send = send
        self._call = call
        self._max_notes = max_notes
        self.notes: deque[JsonObject] = deque()
        self.streaming = False
        self._loop = asyncio.get_running_loop()
        self._wake: asyncio.Future[None] = self._loop.create_future()  # a note came, or the watch ends
        self._task: asyncio.Task[None] | None = None
        self._ended = False
        self._later = self._loop.call_later(_WATCH_AFTER, self._start)

    def note(self, note: JsonObject) -> None:
        """Take one ``notifications/progress`` for the client: advisory, so dropped rather than grown past the
        bound."""
        if len(self.notes) < self._max_notes:
            self.notes.append(note)
        self._start()
        if not self._wake.done():
            self._wake.set_result(None)

    async def flush(self) -> None:
        """Write the notes taken so far, opening the event stream with the first."""
        if self.notes and not self.streaming:
            await _start_sse(self._send, ())
            self.streaming = True
        while self.notes:
            await _sse_event(self._send, self.notes.popleft())

    async def aclose(self) -> None:
        """End the watch (the call answered, or stopped) once its task has written what it was writing."""
        self._ended = True
        self._later.cancel()
        if self._task is None:
            return
        if not self._wake.done():
            self._wake.set_result(None)
        await self._task

    def _start(self) -> None:
        if self._task is None and not self._ended:
            self._later.cancel()
            self._task = self._loop.create_task(self._watch())

    async def _watch(self) -> None:
        gone = asyncio.ensure_future(_disconnected(self._receive))
        try:
            while True:
                if self._wake.done():  # before the notes are taken: one that comes while they are sent wakes us
                    self._wake = self._loop.create_future()
                if self._ended:  # after the wake is taken: aclose may have come before this task first ran
                    return
                await self.flush()
                await asyncio.wait((gone, self._wake), return_when=asyncio.FIRST_COMPLETED)
                if gone.done():
                    self._call.stop()
                    return
        finally:
            gone.cancel()


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
        self._token = token.encode()
        self.max_body_bytes = max_body_bytes
        self.max_sessions = max_sessions
        self.max_queued = max_queued
        self.keepalive_interval = keepalive_interval
        self.body_timeout = body_timeout
        self.sessions: OrderedDict[str, _McpSession] = OrderedDict()
        self._loopback_hosts: set[str] = set()
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
        seen: set[bytes] = set()
        for key, _ in raw:  # one pass over the head: this runs for every call
            if key in _SINGLE_HEADERS:
                if key in seen:
                    raise _Refusal(400, f"Header {key.decode()} given more than once")
                seen.add(key)
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if host not in self._loopback_hosts:
            if not is_loopback_host(host):
                raise _Refusal(403, f"Host {host!r} is not a loopback name: this endpoint serves this machine only")
            # Parsing the address is most of this check's cost, and an agent sends the same Host every call.
            # Only names that passed are kept, and at most a few: a client cannot grow the set without end.
            if len(self._loopback_hosts) < _MAX_KNOWN_HOSTS:
                self._loopback_hosts.add(host)
        origin = headers.get("origin")
        if origin is not None and not _own_origin(origin, scope.get("server")):
            raise _Refusal(403, f"Origin {origin[:200]!r} is not this endpoint: only a page served from this "
                                "loopback port itself may call it (a web page elsewhere, or a rebound name, may not)")
        if scope["path"] != MCP_PATH:
            raise _Refusal(404, f"Not found: the MCP endpoint is {MCP_PATH}", METHOD_NOT_FOUND)
        if not self._bearer_matches(headers.get("authorization", "").encode("latin-1")):
            raise _Refusal(401, "Missing or wrong bearer token: send `Authorization: Bearer <token>` as configured "
                                "for this session", headers=(("www-authenticate", 'Bearer realm="openab"'),))
        return headers

    def authorized(self, raw_headers: Iterable[tuple[bytes, bytes]]) -> bool:
        """Whether a request head (lower-case names, as servers hand them over) carries this endpoint's token.

        The listener asks this to tell its agent's connections from anyone else's; the answer to the request
        itself is still :meth:`__call__`'s. A doubled ``Authorization`` header is not authorized, as there.
        """
        presented = [value for name, value in raw_headers if name == b"authorization"]
        return len(presented) == 1 and self._bearer_matches(presented[0])

    def _bearer_matches(self, value: bytes) -> bool:
        # RFC 9110 §11.1: the scheme is case-insensitive (agents send `bearer` too) and 1*SP follows it.
        scheme, _, credentials = value.partition(b" ")
        if scheme.lower() != b"bearer":
            return False
        return hmac.compare_digest(credentials.lstrip(b" "), self._token)

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
            unreadable = unreadable_error(exc)
            raise _Refusal(400, unreadable.message, unreadable.code) from None
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
        headers: tuple[tuple[str, str], ...] = ((SESSION_ID_HEADER, session.id),)
        if "error" in response:
            self._end_session(session)
            headers = ()
        await _respond(send, response, 200, headers, json_ok=json_ok)

    def _route(
        self, headers: Headers, message: JsonObject
    ) -> tuple[BrowserMcp, _McpSession | None, Callable[[JsonObject], int]]:
        """Which server answers ``message``: its MCP session's, or the stateless one."""
        session_id = headers.get(SESSION_ID_HEADER)
        version = headers.get(PROTOCOL_VERSION_HEADER)
        if session_id is not None:
            session = self._session(session_id)
            if version is not None and version not in HANDSHAKE_VERSIONS:
                raise _Refusal(400, f"Unsupported MCP-Protocol-Version {version!r} for this session",
                               request_id=reply_id(message, ids="mcp"))
            return session.server, session, _always_ok
        if message.get("method") == "initialize":
            return self._stateless, None, _always_ok
        meta_version = stateless_version(message)
        if meta_version is None and version != STATELESS_VERSION:
            raise _Refusal(400, "Bad Request: Mcp-Session-Id header is required; send initialize first",
                           request_id=reply_id(message, ids="mcp"))
        _check_stateless_headers(headers, message, meta_version)
        return self._stateless, None, _stateless_status

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
        """Run one request in this task; answer in JSON unless progress comes first and the client takes SSE.

        Deciding late keeps big results (an 8 MiB screenshot) in one JSON body, which every client reads,
        while a long call that reports progress still streams it.
        """
        async with StopScope() as call:
            watch = _Watch(receive, send, call, self.max_queued)
            try:
                response = await server.handle(message, progress=watch.note if sse_ok else None)
            finally:
                await watch.aclose()
        if call.stopped:
            # Nobody can receive the answer (no resumption here): a read was stopped in the browser at once; a
            # state-changing step runs on in the journal for its window, so the client's re-issue joins it
            # (docs/journal.md). In 2026-07-28 this is also how a client cancels.
            return
        if response is None:  # cancelled by notifications/cancelled; the client ignores this answer
            response = error_message(message["id"], LocalRpcError(REQUEST_CANCELLED, "Request cancelled"))
        if watch.streaming or watch.notes:  # progress came before the answer: the client takes SSE
            await watch.flush()
            await _sse_event(send, response, more=False)
        else:
            await _respond(send, response, status_of(response), (), json_ok=json_ok)

    # -- GET: the stream of server notifications ---------------------------------------------------------

    async def _get(self, headers: Headers, receive: Receive, send: Send) -> None:
        session_id = headers.get(SESSION_ID_HEADER)
        if session_id is None:
            if headers.get(PROTOCOL_VERSION_HEADER) == STATELESS_VERSION:
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
        session_id = headers.get(SESSION_ID_HEADER)
        if session_id is None:
            raise _Refusal(400, "Bad Request: DELETE needs the Mcp-Session-Id header")
        self._end_session(self._session(session_id))
        await _reply(send, 204)


def _own_origin(origin: str, server: Any) -> bool:
    """Whether an ``Origin`` names this endpoint: ``http``, a loopback host, and the port the request came in on.

    That is what a browser-hosted MCP client served from this endpoint sends, and what MCP's DNS-rebinding check
    expects served; a rebinding page sends its own name, another local server's page another port, and a
    sandboxed or privacy-sensitive context ``null``. The bearer token still decides after this.
    """
    if not isinstance(server, tuple | list) or len(server) != 2 or not isinstance(server[1], int):
        return False  # no listening port to compare (not a TCP listener): no page can be this endpoint
    try:
        parts = urlsplit(origin)
        port = parts.port
    except ValueError:
        return False
    # RFC 6454: an Origin is scheme://host[:port] and nothing else.
    if parts.scheme != "http" or parts.username is not None or parts.password is not None:
        return False
    if parts.path or parts.query or parts.fragment or origin != origin.strip():
        return False
    host = parts.hostname
    return host is not None and is_loopback(host) and (80 if port is None else port) == server[1]


def _always_ok(_response: JsonObject) -> int:
    return 200


def _stateless_status(response: JsonObject) -> int:
    error = response.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return _STATELESS_STATUS.get(code, 200) if isinstance(code, int) else 200


def _check_stateless_headers(headers: Headers, message: JsonObject, meta_version: str | None) -> None:
    """2026-07-28: the routing headers must say what the body says."""
    request_id = reply_id(message, ids="mcp")
    version = headers.get(PROTOCOL_VERSION_HEADER)
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
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > limit:
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
    body = error_message(refusal.request_id, LocalRpcError(refusal.code, refusal.message))
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
