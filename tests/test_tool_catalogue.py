"""The gateway's fallback tool list and MCP revisions say what the extension really serves.

Agents that list tools once at start-up, before a browser attaches, only ever see the gateway's static list
(core/mcp/tools.py); if it drifts from extension/lib/catalogue.js they call tools with arguments the extension
does not take, or never learn of ones it does.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from openab.core.mcp.tools import BROWSER_TOOLS
from openab.core.mcp_vocabulary import HANDSHAKE_VERSIONS, REQUESTED_HANDSHAKE_VERSION, STATELESS_VERSION

EXTENSION_TOOLS = Path(__file__).resolve().parent.parent / "extension" / "lib" / "catalogue.js"


@pytest.fixture(scope="module")
def extension_tools() -> dict[str, dict[str, Any]]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    script = f"import({json.dumps(EXTENSION_TOOLS.as_uri())}).then(m => console.log(JSON.stringify(m.TOOLS)))"
    out = subprocess.run([node, "-e", script], check=True, capture_output=True, text=True, timeout=30).stdout
    return {tool["name"]: tool for tool in json.loads(out)}


def test_the_same_tools_are_advertised(extension_tools: dict[str, dict[str, Any]]) -> None:
    assert [t["name"] for t in BROWSER_TOOLS] == list(extension_tools)


def test_each_tool_takes_the_same_arguments(extension_tools: dict[str, dict[str, Any]]) -> None:
    for tool in BROWSER_TOOLS:
        theirs = extension_tools[tool["name"]]["inputSchema"]
        ours = tool["inputSchema"]
        assert set(ours.get("properties", {})) == set(theirs.get("properties", {})), tool["name"]
        assert set(ours.get("required", [])) == set(theirs.get("required", [])), tool["name"]
        for name, prop in ours.get("properties", {}).items():
            assert prop.get("type") == theirs["properties"][name].get("type"), (tool["name"], name)
            assert prop.get("enum") == theirs["properties"][name].get("enum"), (tool["name"], name)


def test_each_tool_is_described_in_the_same_words(extension_tools: dict[str, dict[str, Any]]) -> None:
    # The description is how an agent learns a result's format (a snapshot's refs and links) before it calls.
    for tool in BROWSER_TOOLS:
        assert tool["description"] == extension_tools[tool["name"]]["description"], tool["name"]


EXTENSION_MCP = EXTENSION_TOOLS.with_name("mcp.js")
EXTENSION_TOOLS_JS = EXTENSION_TOOLS.with_name("tools.js")


def _js_const(source: str, name: str) -> Any:
    """A ``const NAME = <JSON-compatible literal>;`` from the extension's source."""
    found = re.search(rf"^const {name} = (.+?);$", source, re.MULTILINE)
    assert found is not None, f"extension/lib/mcp.js no longer declares {name}"
    return json.loads(found.group(1).replace("'", '"'))


def test_the_extension_negotiates_the_mcp_revisions_the_gateway_does() -> None:
    source = EXTENSION_MCP.read_text()
    assert tuple(_js_const(source, "HANDSHAKE_VERSIONS")) == HANDSHAKE_VERSIONS
    assert _js_const(source, "REQUESTED_HANDSHAKE_VERSION") == REQUESTED_HANDSHAKE_VERSION
    assert _js_const(source, "STATELESS_VERSION") == STATELESS_VERSION


def test_the_browser_serves_the_catalogue(extension_tools: dict[str, dict[str, Any]]) -> None:
    """What BrowserTools lists to an agent (tools.js) is the catalogue the pod's copy is held to."""
    node = shutil.which("node")
    assert node is not None
    script = f"import({json.dumps(EXTENSION_TOOLS_JS.as_uri())}).then(m => console.log(JSON.stringify(m.TOOLS)))"
    out = subprocess.run([node, "-e", script], check=True, capture_output=True, text=True, timeout=30).stdout
    assert json.loads(out) == list(extension_tools.values())
    assert {"browser_handle_dialog", "browser_handoff"} <= set(extension_tools)
