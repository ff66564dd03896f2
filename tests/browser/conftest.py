"""Fixtures for the extension tests: one Chromium, one pod double and one site per module."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from .harness import CHROMIUM, chromium, site_server, stage_extension
from .pod import Pod


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # A conftest's pytestmark applies to nothing, so the skip is added to each test here.
    if CHROMIUM:
        return
    skip = pytest.mark.skip(reason="Debian chromium is not installed: apt-get install chromium")
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            item.add_marker(skip)

KEY = "test-key_0123456789"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    # Module-wide, so a module's browser, server and tests share one event loop.
    return "asyncio"


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    with site_server() as base:
        yield base


@contextlib.asynccontextmanager
async def running_pod(key: str | None = KEY) -> AsyncIterator[Pod]:
    async with anyio.create_task_group() as tg:
        pod = Pod(key=key)
        await pod.start(tg)
        try:
            yield pod
        finally:
            await pod.stop()
            tg.cancel_scope.cancel()


@contextlib.contextmanager
def extension_browser(tmp: Path, site: str, defaults: dict[str, Any], extra: tuple[str, ...] = ()) -> Iterator[Path]:
    """Stages the extension with `defaults` and runs Chromium on the site's index page."""
    ext = stage_extension(tmp / "ext", defaults)
    with chromium(ext, tmp / "profile", f"{site}/index.html", log=tmp / "chromium.log", extra=extra):
        yield ext


@pytest.fixture(scope="module")
async def pod() -> AsyncIterator[Pod]:
    async with running_pod() as p:
        yield p


@pytest.fixture(scope="module")
async def client(pod: Pod, browser: Path) -> AsyncIterator[Client]:
    """The official MCP SDK client on the pod side, talking to the extension through the tunnel."""
    sock = await pod.next_socket(after=0)
    async with sock.mcp_client() as c:
        yield c


@pytest.fixture(scope="module")
def browser(pod: Pod, site: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Autopilot on: these tests exercise the tools; the guard has its own tests."""
    tmp = tmp_path_factory.mktemp("browser")
    with extension_browser(tmp, site, {"url": pod.url, "key": KEY, "autopilot": True}) as ext:
        yield ext
