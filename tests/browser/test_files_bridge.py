"""browser_upload and browser_download through the bridge (docs/files.md): the agent's MCP client talks to the
`openab browser-bridge` relay over stdio, the relay to the pod's Unix socket, the pod to the real extension in real
Chromium. The person has an `Always allow` rule for the test site, so the upload goes without a card: a site rule
is the one thing besides the person that lets a file go (autopilot does not).
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from bridge_harness import relay_params, stand_in_for_agents
from mcp import Client
from playwright.async_api import BrowserContext, expect
from refs import ref_of
from scripted_agent import ScriptedAgent

from openab_browser.bridge.server import BridgeServer
from openab_browser.core.tunnel.tunnel import Tunnel

from .conftest import panel_tunnel
from .harness import PRIVATE_REPORT, page_at, playwright_browser, stage_extension
from .live_pod import KEY, LiveGateway, call, opened
from .test_files import document

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def gateway(agent: ScriptedAgent, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LiveGateway]:
    # Short: a Unix socket's address holds at most 107 bytes, and pytest's temporary paths can be longer.
    root = Path(tempfile.mkdtemp(prefix="oab-"))
    try:
        async with LiveGateway(tmp_path_factory.mktemp("state"), agent, browser_mode="bridge",
                               browser_socket=root / "browser" / "browser.sock") as gw:
            yield gw
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
async def context(gateway: LiveGateway, site: str,
                  tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[BrowserContext]:
    tmp = tmp_path_factory.mktemp("files-bridge")
    host = site.removeprefix("http://")
    ext = stage_extension(tmp / "ext", {"url": gateway.url, "key": KEY, "autopilot": False,
                                        "siteRules": {host: "always"}})
    async with playwright_browser(ext, tmp / "profile", f"{site}/index.html") as ctx:
        yield ctx


tunnel = panel_tunnel()


@pytest.fixture(scope="module")
async def client(gateway: LiveGateway, tunnel: Tunnel) -> AsyncIterator[Client]:
    """The agent's MCP client on the relay, spawned as an agent CLI spawns its MCP server."""
    bridge = gateway.pod.browser
    assert isinstance(bridge, BridgeServer)
    session = gateway.pod.sessions.get(tunnel.session_id)
    assert session is not None
    stand_in_for_agents(bridge, session)
    async with Client(relay_params(session.channel, bridge.path), mode="legacy") as c:
        yield c



async def test_an_upload_through_the_bridge_reaches_the_forms_server(
        client: Client, context: BrowserContext, workdir: Path, site: str) -> None:
    data = document(700_000)
    (workdir / "minutes.txt").write_bytes(data)
    snap, _ = await opened(client, context, f"{site}/upload.html")
    text, is_error = await call(client, "browser_upload", {"ref": ref_of(snap, '"Document"'), "path": "minutes.txt"})
    assert not is_error, text
    text, is_error = await call(client, "browser_click", {"ref": ref_of(snap, 'button "Send"')})
    assert not is_error, text
    received = await page_at(context, f"{site}/upload-echo")
    got = received.locator("#received li.file")
    await expect(got).to_have_count(1)
    assert await got.get_attribute("data-name") == "minutes.txt"
    assert await got.get_attribute("data-sha256") == hashlib.sha256(data).hexdigest()


async def test_a_download_through_the_bridge_carries_the_persons_cookie(
        client: Client, context: BrowserContext, workdir: Path, site: str) -> None:
    await opened(client, context, f"{site}/files/sign-in")
    text, is_error = await call(client, "browser_download",
                                {"url": f"{site}/files/private/report.csv", "path": "bridged.csv"})
    assert not is_error, text
    assert (workdir / "bridged.csv").read_bytes() == PRIVATE_REPORT
