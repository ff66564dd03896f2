"""The extension against the real gateway (`openab.gateway` on a real uvicorn), end to end.

On the pod side the official MCP SDK client talks to the session's proxy endpoint (loopback
Streamable HTTP with its own bearer token), exactly as an agent CLI in the pod would.
"""

from __future__ import annotations

import base64
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from pydantic import SecretStr

from openab.core.mcp_config import HttpEndpoint
from openab.core.pod import Pod
from openab.core.proxy import BrowserProxy
from openab.core.settings import Settings
from openab.gateway.app import create_app
from openab.gateway.server import running_server

from .conftest import KEY, extension_browser
from .harness import jpeg_size

pytestmark = pytest.mark.anyio



class Gateway:
    """The real gateway, stoppable and restartable on the same port within one test module."""

    def __init__(self, port: int, state_dir: Path) -> None:
        self.port = port
        self.state_dir = state_dir
        self.pod = Pod()
        self.proxy = BrowserProxy(self.pod)
        self._stack: contextlib.AsyncExitStack | None = None

    async def start(self) -> None:
        settings = Settings(host="127.0.0.1", port=self.port, token=SecretStr(KEY), state_dir=self.state_dir)
        self.pod = Pod(settings)
        self.proxy = BrowserProxy(self.pod)
        self.pod.add_observer(self.proxy)
        self._stack = contextlib.AsyncExitStack()
        await self._stack.enter_async_context(
            running_server(create_app(self.pod), port=self.port)
        )

    async def stop(self) -> None:
        if self._stack is not None:
            stack, self._stack = self._stack, None
            await stack.aclose()

    async def attached_session(self, timeout: float = 60) -> str:
        tunnel = await self.pod.tunnels.wait_attached(timeout=timeout)
        return str(tunnel.session_id)

    @contextlib.asynccontextmanager
    async def agent_client(self, session_id: str) -> AsyncIterator[Client]:
        """What the session's agent gets: the proxy URL and token, used by the MCP SDK client."""
        session = self.pod.sessions.get(session_id)
        assert session is not None
        endpoint = (await self.proxy.endpoint_for(session)).config
        assert isinstance(endpoint, HttpEndpoint)
        headers = {"Authorization": f"Bearer {endpoint.token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http,
            Client(streamable_http_client(endpoint.url, http_client=http), mode="legacy") as client,
        ):
            yield client


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
async def gateway(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    gw = Gateway(free_port(), tmp_path_factory.mktemp("state"))
    await gw.start()
    try:
        yield gw
    finally:
        await gw.stop()


@pytest.fixture(scope="module")
def browser(gateway: Gateway, site: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp = tmp_path_factory.mktemp("gw-browser")
    url = f"ws://127.0.0.1:{gateway.port}/acp"
    with extension_browser(tmp, site, {"url": url, "key": KEY, "autopilot": True}) as ext:
        yield ext


async def call(client: Client, name: str, args: dict[str, Any]) -> tuple[str, bool]:
    res = await client.call_tool(name, args)
    return "\n".join(getattr(c, "text", "") for c in res.content), bool(res.is_error)


async def test_the_agents_mcp_client_reaches_every_tool(gateway: Gateway, browser: Path, site: str) -> None:
    session_id = await gateway.attached_session()
    async with gateway.agent_client(session_id) as client:
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
    gateway: Gateway, browser: Path, site: str
) -> None:
    before = await gateway.attached_session()
    await gateway.stop()
    await gateway.start()  # same port, a fresh pod: nothing survives but the address
    after = await gateway.attached_session(timeout=90)
    assert after == before  # the extension resumed its stored session
    async with gateway.agent_client(after) as client:
        text, is_error = await call(client, "browser_navigate", {"url": f"{site}/page2.html"})
        assert not is_error, text
        snap, _ = await call(client, "browser_snapshot", {})
        assert 'heading "Page two"' in snap
