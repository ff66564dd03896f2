"""An upload where the extension's messages are structured clones (the manifest's ``message_serialization``, Chrome
148+): the worker hands the page's isolated world the file as one Blob made of its chunks, not in base64 pieces
(lib/tools-upload.js, page/files.js). The shipped manifest sets the key too; this module sets it on its own copy, so
the Blob path stays tested whatever the shipped one says.

The file must land whole and only through the isolated world: a page that replaced its own ``File``,
``Uint8Array`` and ``DataTransfer`` in its main world changes nothing, since the isolated world has globals of its
own, and it sees no piece before the file is set.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import Client
from playwright.async_api import BrowserContext, Page
from refs import ref_of

from .conftest import panel_tunnel
from .harness import extension_id, playwright_browser, stage_extension
from .live_pod import KEY, LiveGateway, call, opened

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def context(gateway: LiveGateway, site: str,
                  tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[BrowserContext]:
    tmp = tmp_path_factory.mktemp("files-cloned")
    # The person's rule for the test site lets a file go without a card (autopilot never does).
    ext = stage_extension(tmp / "ext", {"url": gateway.url, "key": KEY, "autopilot": False,
                                        "siteRules": {site.removeprefix("http://"): "always"}})
    manifest = json.loads((ext / "manifest.json").read_text())
    manifest["message_serialization"] = "structured_clone"
    (ext / "manifest.json").write_text(json.dumps(manifest))
    async with playwright_browser(ext, tmp / "profile", f"{site}/index.html") as ctx:
        yield ctx


tunnel = panel_tunnel()



async def test_the_extension_hands_the_page_bytes_where_its_manifest_clones_messages(panel: Page) -> None:
    said = await panel.evaluate("import('/lib/tools-upload.js').then((m) => m.clonedMessages())")
    assert said is True, "the extension reads its manifest's message_serialization and this Chromium's version"
    assert panel.url.startswith(f"chrome-extension://{extension_id()}/")


async def test_an_upload_lands_whole_as_a_blob_past_a_page_that_replaced_its_own_globals(
        panel: Page, client: Client, context: BrowserContext, workdir: Path, site: str) -> None:
    data = bytes(range(256)) * (2_621_440 // 256) + b"tail!!!"  # 2.5 MB and 7 bytes: six chunks, the last short
    (workdir / "cloned.bin").write_bytes(data)
    snap, tab = await opened(client, context, f"{site}/upload.html")
    # A hostile page's main world: its own constructors broken and a watch on every message it could be sent.
    await tab.evaluate("""() => {
        window.seen = [];
        window.addEventListener('message', (e) => window.seen.push(String(e.data).slice(0, 40)), true);
        Uint8Array.prototype.set = () => { throw new Error('the page broke set'); };
        window.File = function () { throw new Error('the page broke File'); };
        DataTransfer.prototype.items = null;
    }""")
    text, is_error = await call(client, "browser_upload", {"ref": ref_of(snap, '"Document"'), "path": "cloned.bin"})
    assert not is_error, text
    assert hashlib.sha256(data).hexdigest() in text
    held = await tab.evaluate("""async () => { const f = document.getElementById('doc').files[0];
        const d = new Uint8Array(await crypto.subtle.digest('SHA-256', await f.arrayBuffer()));
        return [f.name, f.size, Array.from(d, (v) => v.toString(16).padStart(2, '0')).join('')]; }""")
    assert held == ["cloned.bin", len(data), hashlib.sha256(data).hexdigest()]
    assert await tab.evaluate("window.events") == ["input: cloned.bin", "change: cloned.bin"]
    assert await tab.evaluate("window.seen") == [], "no piece of the file passed through the page's own world"
