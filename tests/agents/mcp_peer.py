"""A browser-like MCP server on the official ``mcp`` SDK's low-level ``Server``, behind a bearer gate.

It stands in for openab's proxy in tests that check an agent CLI can reach an MCP server
handed to it: it offers ``browser_navigate(url)`` and logs every call and every HTTP request's
auth verdict, so a test can tell "the tool ran" from "the agent answered without it" (a
rejected token is silent in every CLI).
"""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from acp.schema import HttpHeader, HttpMcpServer
from mcp.server import Server
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from .fake_model import serve_app

NAVIGATE_SCHEMA = {
    "type": "object",
    "properties": {"url": {"type": "string", "description": "The address to open"}},
    "required": ["url"],
}


@dataclass
class BrowserPeer:
    token: str
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    requests: list[tuple[str, bool, str]] = field(default_factory=list)  # (method, authorized, user agent)
    url: str = ""

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1].split("/")[0])

    def acp_server(self, name: str = "openab_browser") -> HttpMcpServer:
        """This server as an ACP ``session/new.mcpServers`` entry, bearer header included."""
        return HttpMcpServer(type="http", name=name, url=self.url,
                             headers=[HttpHeader(name="Authorization", value=f"Bearer {self.token}")])

    def server(self) -> Server[Any]:
        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            return types.ListToolsResult(
                tools=[types.Tool(name="browser_navigate", description="Open a URL in the browser tab",
                                  input_schema=NAVIGATE_SCHEMA)]
            )

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            arguments = dict(params.arguments or {})
            self.calls.append((params.name, arguments))
            if params.name != "browser_navigate":
                return types.CallToolResult(content=[types.TextContent(text=f"no tool {params.name}")], is_error=True)
            return types.CallToolResult(content=[types.TextContent(text=f"navigated to {arguments.get('url')}")])

        return Server("openab_browser_test", version="1", on_list_tools=list_tools, on_call_tool=call_tool)

    def gate(self, app: ASGIApp) -> ASGIApp:
        expected = f"Bearer {self.token}".encode()

        async def gated(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            headers = dict(scope["headers"])
            ok = hmac.compare_digest(headers.get(b"authorization", b""), expected)
            self.requests.append((scope["method"], ok, headers.get(b"user-agent", b"").decode()))
            if not ok:
                await JSONResponse({"error": "missing or wrong bearer token"}, status_code=401)(scope, receive, send)
                return
            await app(scope, receive, send)

        return gated


@contextmanager
def browser_peer(token: str) -> Iterator[BrowserPeer]:
    """Serve a ``BrowserPeer`` on 127.0.0.1 at a free port; ``peer.url`` is its /mcp endpoint."""
    peer = BrowserPeer(token)
    app = peer.server().streamable_http_app()
    with serve_app(peer.gate(app), lifespan="on") as port:
        peer.url = f"http://127.0.0.1:{port}/mcp"
        yield peer
