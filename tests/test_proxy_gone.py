"""An agent's HTTP request that goes away mid-call (core/mcp/http.py): the read it asked for is stopped in the
browser, whether the client goes at once or after the pod has started watching for it (``_WATCH_AFTER``), and
the endpoint answers the same agent's next call."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest
from fake_extension import text_result
from test_proxy import BROWSER, endpoint, extension, proxied
from waits import eventually

from bench.baselines import McpPoster

pytestmark = pytest.mark.anyio


async def post_and_leave(url: str, token: str, session: str, body: dict[str, Any], after: float) -> None:
    """POST ``body`` on a socket of its own and close that socket ``after`` seconds later, unread."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    content = orjson.dumps(body)
    head = (f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nAuthorization: Bearer {token}\r\n"
            f"Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
            f"Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-06-18\r\n"
            f"Content-Length: {len(content)}\r\n\r\n")
    writer.write(head.encode() + content)
    await writer.drain()
    await asyncio.sleep(after)
    writer.close()
    await writer.wait_closed()
    del reader


@pytest.mark.parametrize("after", [0.0, 0.3])
async def test_a_read_whose_client_goes_away_is_stopped_in_the_browser(after: float) -> None:
    held = asyncio.Event()

    async def slow_read(_arguments: dict[str, Any]) -> dict[str, Any]:
        held.set()
        await asyncio.sleep(30)
        return text_result("too late")

    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        ext.add_tool("browser_snapshot", slow_read)
        session_id = await ext.new_session([BROWSER])
        await gateway.pod.tunnels.wait_attached(session_id, timeout=10)
        url, token = await endpoint(gateway, proxy, session_id)
        async with McpPoster(url, token) as agent:
            await agent.initialize()
            mcp_session = agent.http.headers["Mcp-Session-Id"]
            call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                    "params": {"name": "browser_snapshot", "arguments": {}}}
            await post_and_leave(url, token, mcp_session, call, after)
            await asyncio.wait_for(held.wait(), 10)
            await eventually(lambda: len(ext.cancelled) == 1, 10)  # the browser was told to stop it
            # The endpoint serves the same agent on: a quick call is answered.
            ext.add_tool("browser_snapshot", lambda _a: _now(text_result("- page")))
            result = await agent.call_tool("browser_snapshot")
            assert result["content"][0]["text"] == "- page"


async def _now(value: dict[str, Any]) -> dict[str, Any]:
    return value
