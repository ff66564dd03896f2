"""The extension against the real gateway (`openab.gateway` on a real uvicorn), end to end.

The pod side here is the gateway's own tunnel registry: the same MCP client the proxy and the
bridge use to reach the browser.
"""

from __future__ import annotations

import base64
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import KEY, extension_browser
from .harness import jpeg_size

pytestmark = pytest.mark.anyio

gateway_app = pytest.importorskip("openab.gateway.app")
gateway_server = pytest.importorskip("openab.gateway.server")
core_pod = pytest.importorskip("openab.core.pod")
core_settings = pytest.importorskip("openab.core.settings")


class Gateway:
    """The real gateway, stoppable and restartable on the same port within one test module."""

    def __init__(self, port: int, state_dir: Path) -> None:
        self.port = port
        self.state_dir = state_dir
        self.pod: Any = None
        self._stack: contextlib.AsyncExitStack | None = None

    async def start(self) -> None:
        settings = core_settings.Settings(host="127.0.0.1", port=self.port, token=KEY, state_dir=self.state_dir)
        self.pod = core_pod.Pod(settings)
        self._stack = contextlib.AsyncExitStack()
        await self._stack.enter_async_context(
            gateway_server.running_server(gateway_app.create_app(self.pod), port=self.port)
        )

    async def stop(self) -> None:
        if self._stack is not None:
            stack, self._stack = self._stack, None
            await stack.aclose()

    async def attached_session(self, timeout: float = 60) -> str:
        tunnel = await self.pod.tunnels.wait_attached(timeout=timeout)
        return str(tunnel.session_id)

    async def call(self, session_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await self.pod.tunnels.call_tool(session_id, name, args)
        return result


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


def text_of(result: dict[str, Any]) -> str:
    return "\n".join(c.get("text", "") for c in result.get("content", []))


async def test_the_gateway_reaches_every_tool(gateway: Gateway, browser: Path, site: str) -> None:
    session_id = await gateway.attached_session()
    names = {t["name"] for t in await gateway.pod.tunnels.list_tools(session_id)}
    assert {"browser_snapshot", "browser_click", "browser_screenshot", "browser_tabs"} <= names

    res = await gateway.call(session_id, "browser_navigate", {"url": f"{site}/form.html"})
    assert not res.get("isError"), res
    snap = text_of(await gateway.call(session_id, "browser_snapshot", {}))
    assert 'button "Sign in"' in snap and "hunter2" not in snap
    shot = await gateway.call(session_id, "browser_screenshot", {})
    [image] = shot["content"]
    assert image["mimeType"] == "image/jpeg"
    width, height = jpeg_size(base64.b64decode(image["data"]))
    assert 0 < width <= 1568 and width * height <= 1_150_000


async def test_after_a_gateway_restart_the_browser_resumes_and_works(
    gateway: Gateway, browser: Path, site: str
) -> None:
    before = await gateway.attached_session()
    await gateway.stop()
    await gateway.start()  # same port, a fresh pod: nothing survives but the address
    after = await gateway.attached_session(timeout=90)
    assert after == before  # the extension resumed its stored session
    res = await gateway.call(after, "browser_navigate", {"url": f"{site}/page2.html"})
    assert not res.get("isError"), res
    assert 'heading "Page two"' in text_of(await gateway.call(after, "browser_snapshot", {}))
