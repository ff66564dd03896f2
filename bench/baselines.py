"""The bare servers the paths are measured against: what the wire itself costs, with nothing of ours on it.

- :func:`bare_http`: a Starlette endpoint on uvicorn that answers a JSON-RPC POST with a fixed ``tools/call``
  result (the size of the proxy's answer), so a client sends and reads what it would through the proxy;
- :func:`bare_ws`: a ``websockets`` server that echoes each frame, or answers every frame with ``payload``
  (compressed when the client offers permessage-deflate);
- :class:`BareHttpProcess`: :func:`bare_http` in a process of its own (``python bench/baselines.py``), for the
  throughput runs where the gateway runs in one too;
- :func:`bare_relay_app`: the proxy path's shape with nothing else: a POST is sent on as one WebSocket frame to
  the one connected "extension" (:func:`relay_extension`), whose answer frame becomes the HTTP body unread
  (``BareHttpProcess(relay=True)`` runs it apart, as the gateway runs).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx2
import orjson
import uvicorn
import websockets
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.server import ServerConnection, serve

# This folder as the package `bench` (for bench.common), run as a script or imported.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import stop_child

_SCRIPT = str(Path(__file__).resolve())
_RESULT = {"content": [{"type": "text", "text": "ok"}], "isError": False}


async def _answer(request: Request) -> Response:
    message = orjson.loads(await request.body())
    body = orjson.dumps({"jsonrpc": "2.0", "id": message.get("id"), "result": _RESULT})
    return Response(body, media_type="application/json")


def bare_http_app() -> Starlette:
    return Starlette(routes=[Route("/mcp", _answer, methods=["POST"])])


def bare_relay_app() -> Starlette:
    """The least a gateway of the proxy path's shape does: store one answer frame and forward it. No ids, no
    parsing, one call at a time, the WebSocket side on uvicorn's as the gateway's ``/acp`` is."""
    extension: asyncio.Queue[WebSocket] = asyncio.Queue(maxsize=1)
    stopping = asyncio.Event()

    async def socket_route(websocket: WebSocket) -> None:
        await websocket.accept()
        await extension.put(websocket)
        await stopping.wait()  # the posts use the socket until the server stops

    async def post(request: Request) -> Response:
        await request.body()
        websocket = await extension.get()
        try:
            await websocket.send_text('{"jsonrpc":"2.0","id":1,"method":"tools/call"}')
            answer = await websocket.receive_text()
        finally:
            extension.put_nowait(websocket)
        return Response(answer.encode(), media_type="application/json")

    app = Starlette(routes=[Route("/mcp", post, methods=["POST"]), WebSocketRoute("/ws", socket_route)])
    app.state.stopping = stopping
    return app


@contextlib.asynccontextmanager
async def bare_http(*, relay: bool = False) -> AsyncIterator[str]:
    """uvicorn on 127.0.0.1 with the bare endpoint (or the bare relay, whose ``/ws`` is beside the URL),
    configured as the proxy's listeners are; yields its URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    app, ws = (bare_relay_app(), "websockets-sansio") if relay else (bare_http_app(), "none")
    config = uvicorn.Config(app, lifespan="off", ws=ws, log_config=None, access_log=False, ws_max_size=64 << 20,
                            ws_per_message_deflate=False, server_header=False, proxy_headers=False)
    config.load()
    server = uvicorn.Server(config)
    server.lifespan = config.lifespan_class(config)
    await server.startup(sockets=[sock])
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        if relay:
            app.state.stopping.set()
        await server.shutdown(sockets=[sock])
        sock.close()


def relay_ws_url(url: str) -> str:
    """The bare relay's extension socket, beside its POST endpoint ``url``."""
    return "ws" + url.removeprefix("http").removesuffix("/mcp") + "/ws"


@contextlib.asynccontextmanager
async def bare_ws(payload: str | None = None) -> AsyncIterator[str]:
    """A ``websockets`` server on 127.0.0.1 echoing each frame (or sending ``payload`` for each); its URL."""

    async def handler(connection: ServerConnection) -> None:
        async for frame in connection:
            await connection.send(frame if payload is None else payload)

    # permessage-deflate is accepted, as the gateway accepts it: a client that offers it (Chrome does) gets it.
    async with serve(handler, "127.0.0.1", 0, max_size=None) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        yield f"ws://127.0.0.1:{port}/"


async def answer_each(connection: ServerConnection | ClientConnection, answer: Callable[[], str]) -> None:
    """Answers each frame on ``connection`` with ``answer()``, made then, as an extension serializes each answer."""
    async for _ in connection:
        await connection.send(answer())


@contextlib.asynccontextmanager
async def relay_extension(url: str, answer: Callable[[], str]) -> AsyncIterator[None]:
    """The bare relay's "extension" on its ``url``: each frame it gets is answered with ``answer()``."""
    async with websockets.connect(url, max_size=None, compression=None) as connection:
        task = asyncio.create_task(answer_each(connection, answer))
        try:
            yield
        finally:
            task.cancel()


class McpPoster:
    """An MCP client over Streamable HTTP spelled by hand on ``httpx2`` (the mcp SDK's own HTTP library), so a
    path and its bare baseline are driven by the same few lines: one keep-alive connection, one POST a call."""

    def __init__(self, url: str, token: str | None = None, *, timeout: float = 60.0) -> None:
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        limits = httpx2.Limits(max_connections=1, max_keepalive_connections=1)
        self.http = httpx2.AsyncClient(headers=headers, timeout=timeout, limits=limits)
        self.url = url
        self._next_id = 0

    async def __aenter__(self) -> McpPoster:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.http.aclose()

    async def post(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None:
            message["params"] = params
        response = await self.http.post(self.url, content=orjson.dumps(message))
        response.raise_for_status()
        answer: dict[str, Any] = orjson.loads(response.content)
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer

    async def initialize(self) -> None:
        """The MCP handshake; later requests carry the session id it gives."""
        self._next_id += 1
        hello = {"jsonrpc": "2.0", "id": self._next_id, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}
        response = await self.http.post(self.url, content=orjson.dumps(hello))
        response.raise_for_status()
        self.http.headers["Mcp-Session-Id"] = response.headers["mcp-session-id"]
        self.http.headers["MCP-Protocol-Version"] = "2025-06-18"
        done = await self.http.post(self.url, content=b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        done.raise_for_status()

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = (await self.post("tools/call", {"name": name, "arguments": arguments or {}}))["result"]
        return result


class BareHttpProcess:
    """:func:`bare_http` in a child process; ``url`` once entered, ``pid`` for its CPU and memory. With
    ``relay=True`` the bare relay, whose "extension" connects to :attr:`ws_url`; ``uvloop=True`` on uvloop, as
    ``uvicorn.run`` picks where it is installed (else asyncio's own loop)."""

    def __init__(self, *, relay: bool = False, uvloop: bool = False) -> None:
        self._child: asyncio.subprocess.Process | None = None
        self._relay = relay
        self._uvloop = uvloop
        self.url = ""
        self.pid = 0

    @property
    def ws_url(self) -> str:
        return relay_ws_url(self.url)

    async def __aenter__(self) -> BareHttpProcess:
        self._child = await asyncio.create_subprocess_exec(
            sys.executable, _SCRIPT, *(["relay"] if self._relay else []), *(["--uvloop"] if self._uvloop else []),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self._child.stdout is not None
        line = await asyncio.wait_for(self._child.stdout.readline(), 30)
        if not line:
            raise RuntimeError("the bare HTTP server ended before it said its address (its stderr says why)")
        hello = json.loads(line)
        self.url, self.pid = hello["url"], hello["pid"]
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await stop_child(self._child)


async def _serve_until_stdin_closes(relay: bool) -> None:
    import os

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    async with bare_http(relay=relay) as url:
        sys.stdout.write(json.dumps({"url": url, "pid": os.getpid()}) + "\n")
        sys.stdout.flush()
        await reader.read()


if __name__ == "__main__":
    if "--uvloop" in sys.argv[1:]:  # uvicorn's own pick where uvloop is installed (`uvicorn.run`, loop="auto")
        import uvloop

        uvloop.run(_serve_until_stdin_closes("relay" in sys.argv[1:]))
    else:
        asyncio.run(_serve_until_stdin_closes("relay" in sys.argv[1:]))
