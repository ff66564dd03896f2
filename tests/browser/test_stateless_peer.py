"""The extension's stateless MCP-over-ACP form against an independent consumer: the official ACP
TypeScript SDK (`McpOverAcpCaller` behind its own `AcpServer`), in Node, on a real WebSocket.

It uses the SDK that `scripts/test` installs under tests/node; without it the test is skipped.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.text import TextReceiveStream

from .conftest import KEY, extension_browser
from .harness import REPO

pytestmark = pytest.mark.anyio

NODE = shutil.which("node")
SDK = REPO / "tests" / "node" / "node_modules"
SCRIPT = Path(__file__).parent / "node" / "ts_consumer.mjs"


@pytest.mark.skipif(not NODE or not (SDK / "@agentclientprotocol" / "sdk").is_dir(),
                    reason="node and the npm peers (tests/node, installed by scripts/test) are needed")
async def test_the_typescript_sdk_calls_the_tools_in_the_stateless_form(site: str, tmp_path: Path) -> None:
    # ES modules resolve packages next to the script: give the copy a node_modules to find.
    work = tmp_path / "peer"
    work.mkdir()
    shutil.copy(SCRIPT, work / SCRIPT.name)
    (work / "node_modules").symlink_to(SDK, target_is_directory=True)
    assert NODE is not None
    async with await anyio.open_process([NODE, str(work / SCRIPT.name), site]) as proc:
        assert proc.stdout is not None
        lines = _lines(TextReceiveStream(proc.stdout))
        with anyio.fail_after(15):
            port = (await anext(lines))["port"]
        with extension_browser(tmp_path, site, {"url": f"ws://127.0.0.1:{port}/acp", "key": KEY, "autopilot": True}):
            with anyio.fail_after(90):
                report = (await anext(lines))["report"]
    assert "failure" not in report, report

    discovered = report["discover"]["result"]
    assert discovered["capabilities"] == {"tools": {"listChanged": True}}
    assert "2026-07-28" in discovered["supportedVersions"]
    names = {t["name"] for t in report["tools"]["result"]["tools"]}
    assert {"browser_navigate", "browser_snapshot", "browser_click"} <= names
    assert report["navigate"]["result"]["content"][0]["text"] == f"navigated to {site}/form.html"
    assert 'button "Sign in"' in report["snapshot"]["result"]["content"][0]["text"]
    assert report["unknown"] == {"error": {"code": -32602, "message": "Unknown tool: no_such_tool"}}


async def _lines(stream: TextReceiveStream) -> Any:
    """JSON objects from the peer's stdout, one per line."""
    buffer = ""
    async for chunk in stream:
        buffer += chunk
        while "\n" in buffer:
            line, buffer = buffer.split("\n", 1)
            if line.strip():
                yield json.loads(line)
