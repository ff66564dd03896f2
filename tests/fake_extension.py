"""A scripted stand-in for the side-panel extension, speaking over a real `/acp` WebSocket.

It is deliberately written without openab's own engine (plain ``websockets`` and ``json``) so that the
gateway is checked against an independent reading of the wire contract. It plays both of the extension's
roles: an ACP client (``request``) and an MCP server in the connection form (``mcp/connect`` ...), whose
tools are plain async functions.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from ssl import SSLContext
from typing import Any

import websockets
from websockets.asyncio.client import ClientConnection

from openab_browser.core.acp.file_methods import frame, parse_frame

ToolFunction = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class RemoteError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code = error.get("code")
        self.message = error.get("message")


def text_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


@dataclass
class FakeExtension:
    ws: ClientConnection
    tools: dict[str, ToolFunction] = field(default_factory=dict)
    tool_schemas: dict[str, dict[str, Any]] = field(default_factory=dict)
    answer_connect: bool = True
    connect_error: dict[str, Any] | None = None
    inner_protocol_version: str = "2025-06-18"
    next_id: int = 0
    pending: dict[Any, asyncio.Future[Any]] = field(default_factory=dict)
    notifications: list[dict[str, Any]] = field(default_factory=list)
    server_requests: list[dict[str, Any]] = field(default_factory=list)
    connections: dict[str, Any] = field(default_factory=dict)  # id -> the acpId/serverId sent, as sent
    cancelled: list[Any] = field(default_factory=list)
    running_calls: dict[Any, asyncio.Task[None]] = field(default_factory=dict)
    inbox: asyncio.Queue[dict[str, Any]] = field(default_factory=asyncio.Queue)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    close_code: int | None = None

    # -- ACP client side --------------------------------------------------------------------------------

    async def send(self, message: dict[str, Any] | str) -> None:
        await self.ws.send(message if isinstance(message, str) else json.dumps(message))

    async def request(self, method: str, params: Any = None, *, timeout: float = 10.0) -> Any:
        self.next_id += 1
        request_id = f"c{self.next_id}"
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[request_id] = future
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        async with asyncio.timeout(timeout):
            return await future

    async def request_frame(self, method: str, params: Any, payload: bytes = b"", *, timeout: float = 10.0) -> Any:
        """A file chunk's request as a binary frame (docs/files.md); a binary answer's result gets its bytes under
        ``"bytes"``."""
        self.next_id += 1
        request_id = self.next_id  # a binary frame's id is an integer
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[request_id] = future
        await self.ws.send(frame({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}, payload))
        async with asyncio.timeout(timeout):
            return await future

    async def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)

    async def initialize(self) -> Any:
        return await self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})

    async def new_session(self, servers: list[dict[str, Any]] | None = None, **params: Any) -> str:
        result = await self.request("session/new", {"cwd": "/home/agent", "mcpServers": servers or [], **params})
        return str(result["sessionId"])

    async def next_message(self, timeout: float = 5.0) -> dict[str, Any]:
        """The next frame that is neither a response to us nor a handled tunnel request."""
        async with asyncio.timeout(timeout):
            return await self.inbox.get()

    async def wait_notification(self, method: str, timeout: float = 5.0) -> dict[str, Any]:
        async with asyncio.timeout(timeout):
            while True:
                message = await self.inbox.get()
                if message.get("method") == method:
                    return message

    # -- MCP server side (connection form) ----------------------------------------------------------------

    def add_tool(self, name: str, function: ToolFunction, schema: dict[str, Any] | None = None) -> None:
        self.tools[name] = function
        self.tool_schemas[name] = schema or {"type": "object", "properties": {}}

    async def _serve(self, message: dict[str, Any]) -> None:
        with contextlib.suppress(websockets.ConnectionClosed):
            await self._serve_one(message)

    async def _serve_one(self, message: dict[str, Any]) -> None:
        method, params, request_id = message["method"], message.get("params") or {}, message.get("id")
        is_request = "id" in message
        try:
            result = await self._answer(method, params, request_id, is_request)
        except RemoteError as exc:
            if is_request:
                error = {"code": exc.code, "message": exc.message}
                await self.send({"jsonrpc": "2.0", "id": request_id, "error": error})
            return
        except asyncio.CancelledError:
            return
        if is_request and result is not None:
            await self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    async def _answer(self, method: str, params: dict[str, Any], request_id: Any, is_request: bool) -> Any:
        if method == "mcp/connect":
            if self.connect_error is not None:
                raise RemoteError(self.connect_error)
            if not self.answer_connect:
                return None
            connection_id = f"conn-{uuid.uuid4().hex[:8]}"
            self.connections[connection_id] = params.get("acpId") or params.get("serverId")
            return {"connectionId": connection_id}
        if method == "mcp/disconnect":
            closing = params.get("connectionId")
            if isinstance(closing, str):  # our keys are strings: anything else names no connection
                self.connections.pop(closing, None)
            return {}
        if method == "mcp/cancel":
            self.cancelled.append(params.get("requestId"))
            task = self.running_calls.get(params.get("requestId"))
            if task is not None:
                task.cancel()
            return None
        if method == "mcp/message":
            if params.get("connectionId") not in self.connections:
                raise RemoteError({"code": -32602, "message": f"unknown connection: {params.get('connectionId')}"})
            if not is_request:
                return None
            inner_params = params.get("params") or {}
            if not isinstance(inner_params, dict):
                raise RemoteError({"code": -32602, "message": "Invalid params: params must be an object"})
            return await self._inner(params.get("method"), inner_params, request_id)
        raise RemoteError({"code": -32601, "message": f"Method not found: {method}"})

    async def _inner(self, method: str | None, params: dict[str, Any], request_id: Any) -> Any:
        if method == "initialize":
            return {
                "protocolVersion": self.inner_protocol_version,
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "fake-extension", "version": "1"},
            }
        if method == "tools/list":
            return {
                "tools": [
                    {"name": name, "description": f"{name} tool", "inputSchema": schema}
                    for name, schema in self.tool_schemas.items()
                ]
            }
        if method == "tools/call":
            function = self.tools.get(params.get("name", ""))
            if function is None:
                raise RemoteError({"code": -32602, "message": f"Unknown tool: {params.get('name')}"})
            return await function(params.get("arguments") or {})
        raise RemoteError({"code": -32601, "message": f"method not found: {method}"})

    async def tools_changed(self) -> None:
        for connection_id in self.connections:
            await self.notify(
                "mcp/message", {"connectionId": connection_id, "method": "notifications/tools/list_changed"}
            )

    def _call_done(self, request_id: Any, _task: asyncio.Task[None]) -> None:
        self.running_calls.pop(request_id, None)

    # -- the read loop -------------------------------------------------------------------------------------

    async def read_loop(self) -> None:
        try:
            async for raw in self.ws:
                if isinstance(raw, bytes):  # a file chunk's answer (docs/files.md): its header, its bytes beside
                    message, payload = parse_frame(raw)
                    if isinstance(message.get("result"), dict):
                        message["result"]["bytes"] = bytes(payload)
                else:
                    message = json.loads(raw)
                if "method" not in message and "id" in message:
                    future = self.pending.pop(message["id"], None)
                    if future is not None and not future.done():
                        if "error" in message:
                            future.set_exception(RemoteError(message["error"]))
                        else:
                            future.set_result(message.get("result"))
                    else:
                        await self.inbox.put(message)
                    continue
                if message.get("method", "").startswith("mcp/"):
                    self.server_requests.append(message)
                    task = asyncio.create_task(self._serve(message))
                    if "id" in message:
                        self.running_calls[message["id"]] = task
                        task.add_done_callback(functools.partial(self._call_done, message["id"]))
                    continue
                if "method" not in message:
                    await self.inbox.put(message)
                    continue
                self.notifications.append(message)
                await self.inbox.put(message)
        except websockets.ConnectionClosed:
            pass
        finally:
            self.close_code = self.ws.close_code
            self.closed.set()
            for future in self.pending.values():
                if not future.done():
                    future.set_exception(ConnectionError("socket closed"))


@contextlib.asynccontextmanager
async def connect_extension(
    url: str,
    token: str | None,
    *,
    use_header: bool = False,
    extra_headers: dict[str, str] | None = None,
    max_size: int | None = 64 << 20,
    ssl: SSLContext | None = None,
    compression: str | None = "deflate",
) -> AsyncIterator[FakeExtension]:
    """The extension's socket to the pod at ``url``: the key as a subprotocol (as a browser sends it) or, with
    ``use_header``, as a bearer header; over TLS verified by ``ssl`` for a ``wss://`` URL; permessage-deflate
    offered unless ``compression`` is None."""
    subprotocols = ["acp.v1"]
    headers = dict(extra_headers or {})
    if token is not None and use_header:
        headers["Authorization"] = f"Bearer {token}"
    elif token is not None:
        subprotocols.insert(0, f"openab.bearer.{token}")
    ws = await websockets.connect(
        url,
        subprotocols=subprotocols,  # type: ignore[arg-type]
        additional_headers=headers,
        max_size=max_size,
        open_timeout=10,
        ssl=ssl,
        compression=compression,
    )
    extension = FakeExtension(ws)
    reader = asyncio.create_task(extension.read_loop())
    try:
        yield extension
    finally:
        await ws.close()
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
