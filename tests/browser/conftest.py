"""Fixtures for the extension tests: one Chromium, one real gateway and one site per module."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from playwright.async_api import BrowserContext, Page, expect
from pydantic import SecretStr
from scripted_agent import ScriptedAgent

from openab_browser.core.pod import Pod
from openab_browser.core.settings import Settings
from openab_browser.core.statedir import session_workdir
from openab_browser.core.tunnel.tunnel import Tunnel
from openab_browser.gateway.app import create_app
from openab_browser.gateway.assemble import assemble
from openab_browser.gateway.server import running_server

from .harness import (
    CHROMIUM,
    SIDE_PANEL_FLAGS,
    chromium,
    open_panel,
    panel_browser,
    playwright_browser,
    service_worker_url,
    side_panel,
    site_server,
    stage_extension,
)
from .live_pod import KEY, LiveGateway

__all__ = [
    "KEY", "BuiltinGateway", "builtin_agent_browser", "chrome_side_panel", "extension_browser", "panel_tunnel",
    "person_browser",
]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # A conftest's pytestmark applies to nothing, so the skip is added to each test here.
    if CHROMIUM:
        return
    skip = pytest.mark.skip(reason="Debian chromium is not installed: apt-get install chromium")
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    # Module-wide, so a module's browser, server and tests share one event loop.
    return "asyncio"


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    with site_server() as base:
        yield base


@contextlib.contextmanager
def extension_browser(tmp: Path, site: str, defaults: dict[str, Any], extra: tuple[str, ...] = ()) -> Iterator[Path]:
    """Stages the extension with `defaults` and runs Chromium on the site's index page."""
    ext = stage_extension(tmp / "ext", defaults)
    with chromium(ext, tmp / "profile", f"{site}/index.html", log=tmp / "chromium.log", extra=extra):
        yield ext


@pytest.fixture(scope="module")
def agent() -> ScriptedAgent:
    """The agent in the pod: an outside party, so scripted; tests add their own turns to `scripts`."""
    return ScriptedAgent()


@pytest.fixture(scope="module")
async def gateway(agent: ScriptedAgent, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LiveGateway]:
    # The pod's own de-duplication window, as shipped (docs/journal.md): a module that does the same step twice in a
    # row on purpose says repeat, as an agent must.
    async with LiveGateway(tmp_path_factory.mktemp("state"), agent) as gw:
        yield gw


@pytest.fixture(scope="module")
def browser(gateway: LiveGateway, site: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Autopilot on: these tests exercise the tools; the guard has its own tests."""
    tmp = tmp_path_factory.mktemp("browser")
    with extension_browser(tmp, site, {"url": gateway.url, "key": KEY, "autopilot": True}) as ext:
        yield ext


@pytest.fixture(scope="module")
async def tunnel(gateway: LiveGateway, browser: Path) -> Tunnel:
    """The browser's tunnel as the gateway established it on the extension's first socket."""
    return await gateway.attached(await gateway.browser_socket(0))


def panel_tunnel() -> Any:
    """The ``tunnel`` fixture of a module whose Chromium runs under Playwright (its ``context``): the browser's tunnel
    as the gateway established it on the extension's first socket, once the module's ``panel`` is open."""

    @pytest.fixture(scope="module")
    async def tunnel(gateway: LiveGateway, panel: Page) -> Tunnel:
        return await gateway.attached(await gateway.browser_socket(0))

    return tunnel


@pytest.fixture(scope="module")
def workdir(gateway: LiveGateway, tunnel: Tunnel) -> Path:
    """The session's working folder in the pod (of the module's ``tunnel``): the agent's cwd, where its files are
    read and written."""
    return session_workdir(gateway.pod.settings.state_dir, gateway.pod.sessions.naming.channel(tunnel.session_id),
                           create=True)


def person_browser(name: str, *, autopilot: bool = False, extra: tuple[str, ...] = ()) -> tuple[Any, Any]:
    """The ``context`` and ``tunnel`` fixtures of a module that plays the person: Chromium under Playwright on the
    site, the extension set to reach the module's ``gateway`` (autopilot off unless asked: risky steps come to the
    panel as cards), its profile in a temporary folder called ``name``. A module takes them as
    ``context, tunnel = person_browser("tabs")``; pytest names a fixture after the module attribute it is. ``extra``:
    Chromium flags of the module's own (``("--enable-features=WebMCPTesting",)``)."""

    @pytest.fixture(scope="module")
    async def context(gateway: LiveGateway, site: str,
                      tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[BrowserContext]:
        async with panel_browser(gateway.url, KEY, site, tmp_path_factory.mktemp(name), autopilot=autopilot,
                                 extra=extra) as ctx:
            yield ctx

    return context, panel_tunnel()


@pytest.fixture(scope="module")
async def panel(context: BrowserContext) -> Page:
    """The side panel, opened as a tab of the module's ``context`` (:func:`person_browser`'s, or one the module
    defines) once the extension's worker runs."""
    await service_worker_url(context)
    return await open_panel(context)


@pytest.fixture(scope="module")
async def client(gateway: LiveGateway, tunnel: Tunnel) -> AsyncIterator[Client]:
    """The official MCP SDK client on the pod side, at the session's proxy endpoint as an agent would be."""
    async with gateway.agent_client(tunnel.session_id) as c:
        yield c


def chrome_side_panel(name: str) -> tuple[Any, Any, Any, Any]:
    """The ``profile``, ``context``, ``panel`` and ``tunnel`` fixtures of a module whose panel is Chrome's real side
    panel (opened by ``sidePanel.open`` from a gesture, harness.side_panel), autopilot off so risky steps come to it
    as cards; the extension reaches the module's ``gateway``. A module takes them as
    ``profile, context, panel, tunnel = chrome_side_panel("name")``."""

    @pytest.fixture(scope="module")
    def profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
        return tmp_path_factory.mktemp(name)

    @pytest.fixture(scope="module")
    async def context(gateway: LiveGateway, site: str, profile: Path) -> AsyncIterator[BrowserContext]:
        ext = stage_extension(profile / "ext", {"url": gateway.url, "key": KEY, "autopilot": False})
        async with playwright_browser(ext, profile / "chrome", f"{site}/index.html", extra=SIDE_PANEL_FLAGS) as ctx:
            yield ctx

    @pytest.fixture(scope="module")
    async def panel(context: BrowserContext, profile: Path) -> AsyncIterator[Page]:
        async with side_panel(context, profile / "chrome") as page:
            yield page

    return profile, context, panel, panel_tunnel()


@dataclass
class BuiltinGateway:
    """A real gateway whose agent is the built-in one, and its ``/acp`` URL."""

    pod: Pod
    url: str


def builtin_agent_browser(name: str) -> tuple[Any, Any, Any]:
    """The ``gateway``, ``context`` and ``panel`` fixtures of a module whose panel talks to the real built-in agent
    (no model: it follows plain instructions) in a real gateway, autopilot off; the panel is open with the tools
    attached. A module takes them as ``gateway, context, panel = builtin_agent_browser("name")``."""

    @pytest.fixture(scope="module")
    async def gateway(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[BuiltinGateway]:
        # No model URL in the agent's environment: the built-in agent follows plain instructions.
        pod = assemble(Settings(token=SecretStr(KEY), port=0, state_dir=tmp_path_factory.mktemp("state"),
                                agent="builtin"), env={})
        async with running_server(create_app(pod), max_frame_bytes=pod.settings.max_frame_bytes) as base:
            yield BuiltinGateway(pod, "ws" + base.removeprefix("http") + "/acp")

    @pytest.fixture(scope="module")
    async def context(gateway: BuiltinGateway, site: str, tmp_path_factory: pytest.TempPathFactory
                      ) -> AsyncIterator[BrowserContext]:
        tmp = tmp_path_factory.mktemp(name)
        ext = stage_extension(tmp / "ext", {"url": gateway.url, "key": KEY, "autopilot": False})
        async with playwright_browser(ext, tmp / "profile", f"{site}/index.html") as ctx:
            yield ctx

    @pytest.fixture(scope="module")
    async def panel(context: BrowserContext) -> Page:
        page = await open_panel(context)
        await expect(page.locator("#pill-tunnel")).to_have_text("tools attached", timeout=30_000)
        return page

    return gateway, context, panel
