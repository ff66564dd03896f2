"""The real pod side for the extension's tests: `openab_browser.gateway` on a real uvicorn, its proxy, and a tap.

The gateway, the pod and the per-session MCP proxy are the product's own (`openab_browser.core`,
`openab_browser.gateway`); only the agent is scripted (tests/scripted_agent.py). The `Tap` is a transparent
ASGI wrapper around the real app: it passes every message through unchanged and keeps a copy, so a
test can check what the extension put on the wire (its subprotocols, its handshake, its pings),
drop a socket as a network failure would, or push a raw frame the gateway itself would never send.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from playwright.async_api import BrowserContext, Page
from pydantic import SecretStr
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from waits import eventually

from openab_browser.core.acp.backend import AgentBackend, NoAgentBackend
from openab_browser.core.acp.file_methods import parse_frame
from openab_browser.core.mcp.access import HttpEndpoint
from openab_browser.core.mcp.proxy import BrowserProxy
from openab_browser.core.pod import Pod
from openab_browser.core.settings import Settings
from openab_browser.core.tunnel.tunnel import Tunnel
from openab_browser.gateway.app import create_app
from openab_browser.gateway.assemble import assemble
from openab_browser.gateway.server import ReloadingTls, running_server

from .harness import extension_id, page_at

Json = dict[str, Any]

KEY = "test-key_0123456789"
TIMEOUT = 60.0


@dataclass(eq=False)
class TappedSocket:
    """One `/acp` WebSocket as the gateway served it."""

    scope: Scope
    _send: Send = field(repr=False)
    connection_id: str | None = None  # the gateway's name for it: the owner of the tunnels it installs
    received: list[Json] = field(default_factory=list)  # from the extension
    sent: list[Json] = field(default_factory=list)  # from the gateway
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    # What the gateway reads next: the extension's frames, and any a test slips in beside them.
    inbound: asyncio.Queue[Message] = field(default_factory=lambda: asyncio.Queue(maxsize=256), repr=False)
    # Half-open: the extension's end is gone but the gateway has not noticed; what it writes goes nowhere.
    severed: bool = False
    _held: list[Message] = field(default_factory=list, repr=False)

    @property
    def subprotocols(self) -> list[str]:
        return list(self.scope.get("subprotocols", []))

    @property
    def url(self) -> str:
        return f"{self.scope['path']}?{self.scope.get('query_string', b'').decode()}"

    @property
    def origin(self) -> str | None:
        return dict(self.scope["headers"]).get(b"origin", b"").decode() or None

    def requests(self, method: str) -> list[Json]:
        return [m for m in self.received if m.get("method") == method and "id" in m]

    def answer(self, request: Json) -> Json | None:
        """The gateway's answer to one of the extension's requests, once it went out."""
        return next((m for m in self.sent if "method" not in m and m.get("id") == request["id"]), None)

    def reply_to(self, request: Json) -> Json | None:
        """The extension's answer to one of the gateway's requests, once it came in."""
        return next((m for m in self.received if "method" not in m and m.get("id") == request["id"]), None)

    @property
    def opened(self) -> Json | None:
        """The session/new or session/resume request that the gateway accepted on this socket."""
        return next((r for r in self.requests("session/new") + self.requests("session/resume")
                     if (a := self.answer(r)) is not None and "result" in a), None)

    @property
    def resumed(self) -> bool:
        return self.opened is not None and self.opened["method"] == "session/resume"

    @property
    def declared(self) -> Json | None:
        """The `type: acp` server the extension declared when its session was opened."""
        opened = self.opened
        servers = [s for s in (opened or {}).get("params", {}).get("mcpServers", []) if s.get("type") == "acp"]
        return servers[0] if servers else None

    async def send_text(self, raw: str) -> None:
        """A frame on the gateway's socket that did not come from the gateway's own writer."""
        await self._send({"type": "websocket.send", "text": raw})

    async def inject(self, message: Json) -> None:
        """A frame to the gateway as if the extension had sent it (the extension itself never sees it)."""
        await self.inbound.put({"type": "websocket.receive", "text": json.dumps(message)})

    async def go_half_open(self) -> None:
        """The network drops the socket under the extension (a Wi-Fi switch, a sleeping laptop) while the
        gateway, with nothing sent back to it, still believes the socket alive."""
        self.severed = True
        await self._send({"type": "websocket.close", "code": 1011})

    async def gateway_notices(self) -> None:
        """What a half-open socket becomes once the gateway finds out: closed on its side too."""
        self.severed = False
        for message in self._held:
            await self.inbound.put(message)
        self._held.clear()

    async def drop(self, code: int = 1011) -> None:
        """Closes the socket from the pod's end, as a failing gateway or network would."""
        await self._send({"type": "websocket.close", "code": code})
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(10):
                await self.closed.wait()


class Tap:
    """Passes the real gateway app's traffic through unchanged and records each `/acp` socket."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.sockets: list[TappedSocket] = []
        self.refused: list[int] = []  # HTTP statuses of upgrades the gateway turned down

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        sock = TappedSocket(scope, send)

        async def pump() -> None:
            while True:
                message = await receive()
                if message["type"] == "websocket.disconnect":
                    if sock.severed:
                        sock._held.append(message)
                    else:
                        await sock.inbound.put(message)
                    return
                await sock.inbound.put(message)

        async def tapped_receive() -> Message:
            message = await sock.inbound.get()
            if message["type"] == "websocket.receive" and message.get("text"):
                _keep(sock.received, message["text"])
            elif message["type"] == "websocket.receive" and message.get("bytes"):
                _keep_frame(sock.received, message["bytes"])
            elif message["type"] == "websocket.disconnect":
                sock.closed.set()
            return message

        async def tapped_send(message: Message) -> None:
            if message["type"] == "websocket.accept":
                headers = dict(message.get("headers") or [])
                sock.connection_id = f"acp_conn_{headers[b'acp-connection-id'].decode()}"
                self.sockets.append(sock)
            elif message["type"] == "websocket.http.response.start":
                self.refused.append(message["status"])
            elif message["type"] == "websocket.send" and message.get("text"):
                if sock.severed:
                    return  # into a dead connection, as TCP would until it gives up
                _keep(sock.sent, message["text"])
            elif message["type"] == "websocket.send" and message.get("bytes"):
                if sock.severed:
                    return
                _keep_frame(sock.sent, message["bytes"])
            await send(message)

        pumping = asyncio.create_task(pump())
        try:
            await self.app(scope, tapped_receive, tapped_send)
        finally:
            pumping.cancel()
            sock.closed.set()


def _keep(into: list[Json], text: str) -> None:
    with contextlib.suppress(ValueError):
        message = json.loads(text)
        if isinstance(message, dict):
            into.append(message)


def _keep_frame(into: list[Json], data: bytes) -> None:
    """A binary file frame (docs/files.md) kept as its JSON-RPC header, as a text frame's message is."""
    with contextlib.suppress(ValueError):
        header, _payload = parse_frame(data)
        into.append(header)


class LiveGateway:
    """The real gateway on 127.0.0.1 with the proxy; stoppable, and restartable on the same port and key.

    With ``tls`` it serves its own TLS, as `openab run --tls-cert/--tls-key` does, and is dialled at ``wss://``.
    """

    def __init__(self, state_dir: Path, backend: AgentBackend | None = None, *, tls: ReloadingTls | None = None,
                 **settings: Any) -> None:
        self.state_dir = state_dir
        self.backend = backend
        self.tls = tls
        self.settings = settings
        self.port = 0
        self.pod = self._assemble()
        self.tap = Tap(create_app(self.pod))
        self._stack: contextlib.AsyncExitStack | None = None

    @property
    def url(self) -> str:
        return f"{'wss' if self.tls is not None else 'ws'}://127.0.0.1:{self.port}/acp"

    async def start(self) -> None:
        """A fresh pod: on a restart nothing survives but the address and the key."""
        self.pod = self._assemble()
        settings = self.pod.settings
        self.tap = Tap(create_app(self.pod))
        self._stack = contextlib.AsyncExitStack()
        base = await self._stack.enter_async_context(
            running_server(self.tap, port=self.port, max_frame_bytes=settings.max_frame_bytes, tls=self.tls)
        )
        self.port = int(base.rsplit(":", 1)[1])

    def _assemble(self) -> Pod:
        settings = Settings(token=SecretStr(KEY), port=self.port, state_dir=self.state_dir, **self.settings)
        return assemble(settings, backend=self.backend or NoAgentBackend())

    @property
    def proxy(self) -> BrowserProxy:
        assert isinstance(self.pod.browser, BrowserProxy)
        return self.pod.browser

    async def stop(self) -> None:
        if self._stack is not None:
            stack, self._stack = self._stack, None
            await stack.aclose()

    async def __aenter__(self) -> LiveGateway:
        await self.start()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.stop()

    @property
    def browser_sockets(self) -> list[TappedSocket]:
        """The sockets our extension dialled (its origin), not those of other clients in a test."""
        origin = f"chrome-extension://{extension_id()}"
        return [s for s in self.tap.sockets if s.origin == origin]

    async def browser_socket(self, index: int, timeout: float = TIMEOUT) -> TappedSocket:
        await eventually(lambda: len(self.browser_sockets) > index, timeout)
        return self.browser_sockets[index]

    def tunnel_of(self, sock: TappedSocket) -> Tunnel | None:
        for session in self.pod.sessions.all():
            for tunnel in self.pod.tunnels.tunnels(session.id):
                if tunnel.owner.connection_id == sock.connection_id:
                    return tunnel
        return None

    async def attached(self, sock: TappedSocket, timeout: float = TIMEOUT) -> Tunnel:
        """The browser tunnel that `sock` installed, once the gateway has established it."""
        await eventually(lambda: self.tunnel_of(sock) is not None, timeout)
        tunnel = self.tunnel_of(sock)
        assert tunnel is not None
        return tunnel

    async def endpoint(self, session_id: str) -> HttpEndpoint:
        """What the session's agent is handed: its proxy endpoint's URL and bearer token."""
        session = self.pod.sessions.get(session_id)
        assert session is not None
        endpoint = (await self.proxy.open(session)).entry
        assert isinstance(endpoint, HttpEndpoint)
        return endpoint

    @contextlib.asynccontextmanager
    async def agent_client(self, session_id: str) -> AsyncIterator[Client]:
        """What the session's agent gets: the proxy's URL and token, used by the official MCP client."""
        endpoint = await self.endpoint(session_id)
        headers = {"Authorization": f"Bearer {endpoint.token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http,
            Client(streamable_http_client(endpoint.url, http_client=http), mode="legacy") as client,
        ):
            yield client


def without_receipt(text: str) -> str:
    """A result's text without the receipt a step that changes something ends with (docs/journal.md)."""
    return text.split("\nReceipt: ", 1)[0]


async def call(client: Client, name: str, args: dict[str, Any] | None = None) -> tuple[str, bool]:
    """A tool call's text and whether it is an error result."""
    res = await client.call_tool(name, args or {})
    return "\n".join(getattr(c, "text", "") for c in res.content), bool(res.is_error)


async def opened(client: Client, context: BrowserContext, url: str) -> tuple[str, Page]:
    """``url`` navigated to by the agent and read (its snapshot), and the page it is in the person's browser."""
    text, is_error = await call(client, "browser_navigate", {"url": url})
    assert not is_error, text
    snapshot, is_error = await call(client, "browser_snapshot")
    assert not is_error, snapshot
    return snapshot, await page_at(context, url)
