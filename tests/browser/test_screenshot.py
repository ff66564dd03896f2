"""Screenshots are real JPEGs, downscaled by default, within the frame budget.

This module runs Chromium at device scale factor 2, so the 1280x800 viewport captures at
2560x1600 (4 MP): big enough that the default must shrink it and full_size must not.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client

from .conftest import extension_browser
from .harness import jpeg_size
from .live_pod import KEY, LiveGateway

pytestmark = pytest.mark.anyio

FRAME_LIMIT = 8 * 1024 * 1024


@pytest.fixture(scope="module")
def browser(gateway: LiveGateway, site: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp = tmp_path_factory.mktemp("hidpi")
    defaults = {"url": gateway.url, "key": KEY, "autopilot": True}
    with extension_browser(tmp, site, defaults, extra=("--force-device-scale-factor=2",)) as ext:
        yield ext


async def shot(client: Client, **args: object) -> bytes:
    res = await client.call_tool("browser_screenshot", args)
    assert not res.is_error, res.content
    [block] = res.content
    assert block.type == "image" and block.mime_type == "image/jpeg"
    assert len(block.data) < FRAME_LIMIT
    return base64.b64decode(block.data)


async def test_full_size_keeps_every_captured_pixel(client: Client, site: str) -> None:
    await client.call_tool("browser_navigate", {"url": f"{site}/form.html"})
    width, height = jpeg_size(await shot(client, full_size=True))
    # 1280 CSS px wide at scale 2; the height is the tab's viewport (Chrome sizes new tabs itself).
    assert width == 2560 and height >= 1600


async def test_default_screenshot_is_a_downscaled_jpeg(client: Client) -> None:
    full_w, full_h = jpeg_size(await shot(client, full_size=True))
    data = await shot(client)
    assert data.endswith(b"\xff\xd9")  # a complete image, not a truncated buffer
    width, height = jpeg_size(data)
    assert max(width, height) <= 1568
    assert width * height <= 1_150_000
    assert width * height > 1_000_000  # shrunk to the budget, not far below it
    assert abs(width / height - full_w / full_h) < 0.01  # the page's shape is kept


async def test_repeated_screenshots_survive_chromes_capture_quota(client: Client) -> None:
    # Chrome allows two captures per second; the third in a burst must wait, not fail.
    sizes = [jpeg_size(await shot(client)) for _ in range(4)]
    assert len(set(sizes)) == 1
