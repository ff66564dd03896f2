"""A stand-in for the pod side of `/acp`, served by a real uvicorn on 127.0.0.1.

It speaks the gateway's wire contract to the extension (subprotocol auth, ACP handshake,
session/new and session/resume, streamed prompts, Gen-3 `mcp/connect` tunnels, Gen-4 stateless
`mcp/message`), and it exposes the extension's tools to the official `mcp` SDK client through
`PodSocket.mcp_client()`. Tests script the agent's side of a prompt with `Pod.on_prompt`.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectSendStream
from mcp import Client
from mcp.shared.message import SessionMessage
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

Json = dict[str, Any]
PromptHandler = Callable[["PodSocket", str, str], Awaitable[str]]

REQUEST_TIMEOUT = 60.0


class RemoteError(Exception):
    """The extension answered a request with a JSON-RPC error."""

    def __init__(self, error: Json) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code = error.get("code")
        self.message = str(error.get("message"))


async def _say_hello(sock: PodSocket, session_id: str, text: str) -> str:
    await sock.agent_says(session_id, f"echo: {text}")
    return "end_turn"


class PodSocket:
    """One WebSocket from the extension."""

    def __init__(self, pod: Pod, ws: WebSocket) -> None:
        self.pod = pod
        self.ws = ws
        self.subprotocols: list[str] = list(ws.scope.get("subprotocols", []))
        self._ids = itertools.count(1)
        self._pending: dict[int, MemoryObjectSendStream[Json]] = {}
        self.received: list[Json] = []
        self.session_id: str | None = None
        self.server_decl: Json | None = None
        self.connection_id: str | None = None
        self.tunnel_ready = anyio.Event()
        self.closed = anyio.Event()
        self.cancelled = anyio.Event()
        self.resumed = False
        self._tg: TaskGroup | None = None

    # -- wire ---------------------------------------------------------------------------------

    async def send(self, msg: Json) -> None:
        await self.ws.send_text(json.dumps(msg))

    async def request(self, method: str, params: Json, timeout: float = REQUEST_TIMEOUT,
                      *, sent: Callable[[int], None] | None = None) -> Any:
        """Sends a request and waits for its answer; `sent` learns the outer id (to cancel it)."""
        mid = next(self._ids)
        if sent is not None:
            sent(mid)
        send, recv = anyio.create_memory_object_stream[Json](1)
        self._pending[mid] = send
        try:
            await self.send({"jsonrpc": "2.0", "id": mid, "method": method, "params": params})
            with anyio.fail_after(timeout):
                reply = await recv.receive()
        finally:
            self._pending.pop(mid, None)
            recv.close()
        if "error" in reply:
            raise RemoteError(reply["error"])
        return reply.get("result")

    async def notify(self, method: str, params: Json) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def serve(self) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                while True:
                    text = await self.ws.receive_text()
                    msg = json.loads(text)
                    self.received.append(msg)
                    if "method" not in msg:
                        waiter = self._pending.get(msg.get("id"))
                        if waiter is not None:
                            waiter.send_nowait(msg)
                    elif "id" in msg:
                        tg.start_soon(self._answer, msg)
                    elif msg["method"] == "session/cancel":
                        self.cancelled.set()
            except (WebSocketDisconnect, RuntimeError):
                pass
            finally:
                self.closed.set()
                tg.cancel_scope.cancel()

    async def _answer(self, msg: Json) -> None:
        method, params, mid = msg["method"], msg.get("params") or {}, msg["id"]
        try:
            result = await self._handle(method, params)
            reply: Json = {"jsonrpc": "2.0", "id": mid, "result": result}
        except RemoteError as e:
            reply = {"jsonrpc": "2.0", "id": mid, "error": {"code": e.code, "message": e.message}}
        with contextlib.suppress(Exception):
            await self.send(reply)
        if method in ("session/new", "session/resume") and "result" in reply and self.pod.open_tunnels:
            assert self._tg is not None
            self._tg.start_soon(self._open_tunnel)

    async def _handle(self, method: str, params: Json) -> Any:
        if method == "initialize":
            return {
                "protocolVersion": 1,
                "agentCapabilities": {"loadSession": False, "sessionCapabilities": {"resume": {}},
                                      "mcpCapabilities": {"acp": True}},
                "agentInfo": {"name": "pod-double", "version": "0"},
                "authMethods": [],
            }
        if method == "session/new":
            self.session_id = f"sess_{uuid.uuid4()}"
            self.pod.sessions.add(self.session_id)
            self._declare(params)
            return {"sessionId": self.session_id}
        if method == "session/resume":
            if self.pod.busy_resumes > 0:
                self.pod.busy_resumes -= 1
                raise RemoteError({"code": -32001, "message": "Session busy: a prompt is in progress; cannot resume"})
            if params.get("sessionId") not in self.pod.sessions:
                raise RemoteError({"code": -32602, "message": "Unknown session"})
            self.session_id = params["sessionId"]
            self.resumed = True
            self._declare(params)
            return {}
        if method == "session/prompt":
            text = "\n".join(b.get("text", "") for b in params.get("prompt", []) if b.get("type") == "text")
            self.cancelled = anyio.Event()
            return {"stopReason": await self.pod.on_prompt(self, params["sessionId"], text)}
        raise RemoteError({"code": -32601, "message": f"Method not found: {method}"})

    def _declare(self, params: Json) -> None:
        servers = [s for s in params.get("mcpServers", []) if s.get("type") == "acp"]
        self.server_decl = servers[0] if servers else None
        self.session_meta = params.get("_meta") or {}

    async def _open_tunnel(self) -> None:
        assert self.server_decl is not None
        sid = self.server_decl.get("serverId") or self.server_decl.get("id")
        res = await self.request("mcp/connect", {"acpId": sid, "serverId": sid})
        self.connection_id = res["connectionId"]
        self.tunnel_ready.set()

    # -- agent-side helpers -------------------------------------------------------------------

    async def agent_says(self, session_id: str, text: str) -> None:
        await self.notify("session/update", {"sessionId": session_id, "update": {
            "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}})

    async def update(self, session_id: str, update: Json) -> None:
        await self.notify("session/update", {"sessionId": session_id, "update": update})

    async def tunnel(self, method: str, params: Json | None = None, timeout: float = REQUEST_TIMEOUT,
                     *, sent: Callable[[int], None] | None = None) -> Any:
        """One Gen-3 `mcp/message` request: the outer result is the inner MCP result."""
        with anyio.fail_after(30):
            await self.tunnel_ready.wait()
        outer: Json = {"connectionId": self.connection_id, "method": method}
        if params is not None:
            outer["params"] = params
        return await self.request("mcp/message", outer, timeout, sent=sent)

    @contextlib.asynccontextmanager
    async def mcp_client(self) -> AsyncIterator[Client]:
        """The official MCP SDK client, its messages carried over this socket's tunnel."""
        async with Client(_TunnelTransport(self), mode="legacy", read_timeout_seconds=REQUEST_TIMEOUT) as client:
            yield client


class _TunnelTransport:
    """An MCP client transport whose wire is the Gen-3 tunnel on one PodSocket."""

    def __init__(self, sock: PodSocket) -> None:
        self.sock = sock
        self._stack = contextlib.AsyncExitStack()

    async def __aenter__(self) -> Any:
        to_client_send, to_client_recv = anyio.create_memory_object_stream[SessionMessage | Exception](16)
        from_client_send, from_client_recv = anyio.create_memory_object_stream[SessionMessage](16)
        tg = await self._stack.enter_async_context(anyio.create_task_group())
        self._stack.callback(tg.cancel_scope.cancel)
        with anyio.fail_after(30):
            await self.sock.tunnel_ready.wait()

        async def relay(msg: SessionMessage) -> None:
            root = msg.message
            if isinstance(root, types.JSONRPCRequest):
                try:
                    result = await self.sock.tunnel(root.method, root.params)
                    reply: Any = types.JSONRPCResponse(jsonrpc="2.0", id=root.id, result=result or {})
                except RemoteError as e:
                    reply = types.JSONRPCError(jsonrpc="2.0", id=root.id,
                                               error=types.ErrorData(code=e.code or -32603, message=e.message))
                await to_client_send.send(SessionMessage(reply))
            elif isinstance(root, types.JSONRPCNotification):
                await self.sock.notify("mcp/message", {"connectionId": self.sock.connection_id,
                                                       "method": root.method, "params": root.params})

        async def pump() -> None:
            async for msg in from_client_recv:
                tg.start_soon(relay, msg)

        tg.start_soon(pump)
        return to_client_recv, from_client_send

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()


async def _upgrade_required(request: Request) -> PlainTextResponse:
    # Like the gateway: a plain GET on the socket's address says it is there.
    return PlainTextResponse("connect with a WebSocket", 426, headers={"Upgrade": "websocket"})


class Pod:
    """The uvicorn server on 127.0.0.1 that the extension dials."""

    def __init__(self, key: str | None = None, port: int = 0) -> None:
        self.key = key
        self.port = port
        self.sockets: list[PodSocket] = []
        self.sessions: set[str] = set()
        self.rejected = 0
        self.open_tunnels = True
        self.busy_resumes = 0  # answer this many resumes with "Session busy" first
        self.on_prompt: PromptHandler = _say_hello
        self._new_socket = anyio.Event()
        self._server: uvicorn.Server | None = None
        self._stopped = anyio.Event()
        self.app = Starlette(routes=[WebSocketRoute("/acp", self._endpoint), Route("/acp", _upgrade_required)])

    async def _endpoint(self, ws: WebSocket) -> None:
        offered = ws.scope.get("subprotocols", [])
        if self.key is not None and f"openab.bearer.{self.key}" not in offered:
            self.rejected += 1
            await ws.close(code=1008)
            return
        await ws.accept(subprotocol="acp.v1" if "acp.v1" in offered else None)
        sock = PodSocket(self, ws)
        self.sockets.append(sock)
        self._new_socket.set()
        self._new_socket = anyio.Event()
        await sock.serve()

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/acp"

    async def start(self, tg: TaskGroup) -> None:
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning",
                                ws_max_size=16 * 1024 * 1024, ws_ping_interval=None, lifespan="off")
        self._server = uvicorn.Server(config)
        self._stopped = anyio.Event()

        async def run() -> None:
            try:
                assert self._server is not None
                await self._server.serve()
            finally:
                self._stopped.set()

        tg.start_soon(run)
        with anyio.fail_after(10):
            # uvicorn offers no event for "listening"; its flag is all there is to wait on.
            while not self._server.started:  # noqa: ASYNC110
                await anyio.sleep(0.02)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Stops the server and drops every socket at once, as a crashed gateway would."""
        if self._server is None or self._stopped.is_set():
            return
        self._server.should_exit = True
        self._server.force_exit = True
        for sock in self.sockets:
            with contextlib.suppress(Exception):
                await sock.ws.close(code=1012)
        with anyio.fail_after(10):
            await self._stopped.wait()

    async def next_socket(self, timeout: float = 30, *, after: int | None = None, tunnel: bool = True) -> PodSocket:
        """The socket at index `after` (default: the next new one), once it has a tunnel (if `tunnel`)."""
        start = len(self.sockets) if after is None else after
        with anyio.fail_after(timeout):
            while len(self.sockets) <= start:
                await self._new_socket.wait()
            sock = self.sockets[start]
            if self.open_tunnels and tunnel:
                await sock.tunnel_ready.wait()
        return sock

    async def tunnel_or_close(self, sock: PodSocket, timeout: float = 30) -> bool:
        """Waits until `sock` gets its tunnel (True) or closes first (False)."""
        with anyio.fail_after(timeout):
            async with anyio.create_task_group() as tg:
                async def first(event: anyio.Event) -> None:
                    await event.wait()
                    tg.cancel_scope.cancel()
                tg.start_soon(first, sock.tunnel_ready)
                tg.start_soon(first, sock.closed)
        return sock.tunnel_ready.is_set()
