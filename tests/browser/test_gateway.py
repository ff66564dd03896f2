"""The extension against the real gateway (`openab_browser.gateway` on a real uvicorn), end to end.

On the pod side the official MCP SDK client talks to the session's proxy endpoint (loopback
Streamable HTTP with its own bearer token), exactly as an agent CLI in the pod would.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from openab_browser.core.tunnel.tunnel import Tunnel

from .harness import jpeg_size
from .live_pod import LiveGateway, call

pytestmark = pytest.mark.anyio


async def test_the_agents_mcp_client_reaches_every_tool(gateway: LiveGateway, tunnel: Tunnel, site: str) -> None:
    async with gateway.agent_client(tunnel.session_id) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"browser_snapshot", "browser_click", "browser_screenshot", "browser_tabs"} <= names

        text, is_error = await call(client, "browser_navigate", {"url": f"{site}/form.html"})
        assert not is_error, text
        snap, _ = await call(client, "browser_snapshot", {})
        assert 'button "Sign in"' in snap and "hunter2" not in snap
        text, is_error = await call(client, "browser_click", {"selector": "#nope"})
        assert is_error and "no element for selector: #nope" in text

        shot = await client.call_tool("browser_screenshot", {})
        [image] = shot.content
        assert image.type == "image" and image.mime_type == "image/jpeg", shot.content
        width, height = jpeg_size(base64.b64decode(image.data))
        assert 0 < width <= 1568 and width * height <= 1_150_000


async def test_after_a_gateway_restart_the_browser_resumes_and_works(
    gateway: LiveGateway, browser: Path, tunnel: Tunnel, site: str
) -> None:
    await gateway.stop()
    await gateway.start()  # same port, a fresh pod: nothing survives but the address
    after = await gateway.attached(await gateway.browser_socket(0), timeout=90)
    assert after.session_id == tunnel.session_id  # the extension resumed its stored session
    async with gateway.agent_client(after.session_id) as client:
        text, is_error = await call(client, "browser_navigate", {"url": f"{site}/page2.html"})
        assert not is_error, text
        snap, _ = await call(client, "browser_snapshot", {})
        assert "# Page two" in snap
