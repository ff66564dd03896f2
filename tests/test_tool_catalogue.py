"""One catalogue, ``extension/catalogue.json``, is what the extension serves and what the pod advertises.

Agents that list tools once at start-up, before a browser attaches, only ever see the pod's list; if it said other
than the extension they would call tools with arguments the extension does not take, or never learn of ones it
does. Both languages read the one file: these checks hold the file sound (each tool a valid MCP tool with its
annotations), hold that the extension, run by node, serves and negotiates what the pod does, and that the pod
acts on the annotations (a tool that only reads is safe to call again after a lost answer).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from test_browser_mcp import attach, request, server

from openab.core.catalogue import CATALOGUE_PATH, catalogue, parse
from openab.core.jsonrpc import ConnectionClosed
from openab.core.mcp.tools import BROWSER_TOOLS, TOOL_NAME
from openab.core.mcp_vocabulary import HANDSHAKE_VERSIONS, REQUESTED_HANDSHAKE_VERSION, STATELESS_VERSION
from openab.core.settings import Settings
from openab.core.tunnel.registry import TunnelRegistry

pytestmark = pytest.mark.anyio

LIB = CATALOGUE_PATH.parent / "lib"
FILE: dict[str, Any] = json.loads(CATALOGUE_PATH.read_text())
HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
UNKNOWN_REVISION = "1999-01-01"

# The extension's own modules under node, as the service worker imports them. Only link.js reads the browser at
# import (the manifest's version), so that is all of `chrome` there is.
EXTENSION_SIDE = """
globalThis.chrome = { runtime: { getManifest: () => ({ version: '0.0.0' }) } };
const [tools, catalogue, mcp, handoff] = await Promise.all(
  ['tools.js', 'catalogue.js', 'mcp.js', 'handoff.js'].map((name) => import(new URL(name, LIB).href)));
// What the worker's start does with fetch (lib/catalogue.js), from the same file.
const { readFile } = await import('node:fs/promises');
catalogue.useCatalogue(JSON.parse(await readFile(new URL('../catalogue.json', LIB), 'utf8')));
tools.checkImplemented();
const server = new mcp.McpServer({ list: () => tools.TOOLS, has: () => false }, () => 'browser-1', () => {});
const { connectionId } = await server.onRequest('mcp/connect', { serverId: 'browser-1' }, 1);
const inner = (method, params, id) => server.onRequest('mcp/message', { connectionId, method, params }, id);
const negotiated = {};
for (const [i, asked] of ASKED.entries()) {
  negotiated[asked] = (await inner('initialize', { protocolVersion: asked }, 10 + i)).protocolVersion;
}
const discovered = await server.onRequest('mcp/message',
  { serverId: 'browser-1', requestId: 'r', method: 'server/discover', params: {} }, 2);
console.log(JSON.stringify({
  served: tools.TOOLS, listed: (await inner('tools/list', {}, 3)).tools, catalogue: catalogue.TOOLS,
  defaultMaxChars: catalogue.DEFAULT_MAX_CHARS, negotiated, discovered: discovered.result.supportedVersions,
  handoffSeconds: [undefined, 0, 100000].map((asked) => handoff.handoffSeconds(asked)),
}));
"""


@pytest.fixture(scope="module")
def extension() -> dict[str, Any]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    script = (f"const LIB = {json.dumps(LIB.as_uri() + '/')};\n"
              f"const ASKED = {json.dumps([*HANDSHAKE_VERSIONS, UNKNOWN_REVISION])};\n{EXTENSION_SIDE}")
    done = subprocess.run([node, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


# -- the file ---------------------------------------------------------------------------------------------------


def test_each_tool_is_an_mcp_tool_with_a_valid_schema_and_its_annotations() -> None:
    names = [tool["name"] for tool in FILE["tools"]]
    assert len(set(names)) == len(names), "tool names must be unique"
    for tool in FILE["tools"]:
        name = tool["name"]
        assert set(tool) == {"name", "description", "inputSchema", "annotations"}, name
        assert TOOL_NAME.fullmatch(name), name
        assert isinstance(tool["description"], str) and tool["description"].strip(), name
        schema = tool["inputSchema"]
        Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object" and isinstance(schema["properties"], dict), name
        assert set(schema.get("required", [])) <= set(schema["properties"]), name
        for argument, prop in schema["properties"].items():
            assert prop.get("type") in {"string", "integer", "boolean", "array"}, (name, argument)
            # A list is of strings, and says so: some clients (Gemini's) refuse an array without its items.
            if prop["type"] == "array":
                assert prop.get("items", {}).get("type") == "string", (name, argument)
        # Every hint said outright: MCP's defaults (destructive, not idempotent) are a client's guess, not ours.
        assert set(tool["annotations"]) == set(HINTS), name
        assert all(isinstance(tool["annotations"][hint], bool) for hint in HINTS), name
        if tool["annotations"]["readOnlyHint"]:
            assert tool["annotations"]["destructiveHint"] is False, name


def test_the_defaults_are_the_ones_the_descriptions_state() -> None:
    defaults = FILE["defaults"]
    tools = {tool["name"]: tool["inputSchema"]["properties"] for tool in FILE["tools"]}
    paged = [name for name, props in tools.items() if "max_chars" in props]
    assert {"browser_snapshot", "browser_read_dom"} <= set(paged)
    # A snapshot's budget is in tokens; its max_chars only pages by characters when the agent asks for it.
    budget = tools["browser_snapshot"]["max_tokens"]
    assert f"(default {defaults['maxTokens']})" in budget["description"]
    assert budget["minimum"] <= defaults["maxTokens"] <= budget["maximum"]
    for name in paged:
        if name != "browser_snapshot":
            assert f"(default {defaults['maxChars']})" in tools[name]["max_chars"]["description"], name
        assert defaults["maxChars"] >= tools[name]["max_chars"]["minimum"], name
    wait = tools["browser_handoff"]["timeout_s"]
    assert f"(default {defaults['handoffTimeoutSeconds']})" in wait["description"]
    assert wait["minimum"] <= defaults["handoffTimeoutSeconds"] <= wait["maximum"]
    # A handoff that outlived the pod's tunnel timeout would be told its outcome is unknown.
    assert wait["maximum"] < Settings().tunnel_timeout


def test_the_pod_reads_the_revisions_from_the_catalogue() -> None:
    assert list(HANDSHAKE_VERSIONS) == FILE["mcp"]["handshakeVersions"] == sorted(HANDSHAKE_VERSIONS)
    assert FILE["mcp"]["requestedHandshakeVersion"] == REQUESTED_HANDSHAKE_VERSION
    assert REQUESTED_HANDSHAKE_VERSION in HANDSHAKE_VERSIONS
    assert FILE["mcp"]["statelessVersion"] == STATELESS_VERSION > HANDSHAKE_VERSIONS[-1]


# -- both languages read it alike ---------------------------------------------------------------------------------


async def test_before_a_browser_attaches_the_pod_lists_what_the_extension_serves(extension: dict[str, Any]) -> None:
    mcp, _ = server()
    response = await mcp.handle(request("tools/list"))
    assert response is not None
    listed = response["result"]["tools"]
    assert listed == list(BROWSER_TOOLS) == FILE["tools"]
    # What BrowserTools lists (tools.js), what the extension's MCP server answers and what the pod says are one.
    assert extension["served"] == extension["listed"] == extension["catalogue"] == listed
    assert {"browser_handle_dialog", "browser_handoff"} <= {tool["name"] for tool in listed}
    assert all(set(tool["annotations"]) == set(HINTS) for tool in listed)


def test_the_extension_negotiates_the_mcp_revisions_the_pod_does(extension: dict[str, Any]) -> None:
    assert extension["negotiated"] == {**{v: v for v in HANDSHAKE_VERSIONS},
                                       UNKNOWN_REVISION: REQUESTED_HANDSHAKE_VERSION}
    assert extension["discovered"] == [STATELESS_VERSION]


def test_the_extension_applies_the_defaults_and_bounds_of_the_catalogue(extension: dict[str, Any]) -> None:
    wait = next(t for t in FILE["tools"] if t["name"] == "browser_handoff")["inputSchema"]["properties"]["timeout_s"]
    assert extension["defaultMaxChars"] == FILE["defaults"]["maxChars"]
    assert extension["handoffSeconds"] == [FILE["defaults"]["handoffTimeoutSeconds"], wait["minimum"],
                                           wait["maximum"]]


# -- the pod acts on the annotations -------------------------------------------------------------------------------


async def test_after_a_lost_answer_only_a_tool_that_only_reads_is_called_safe_to_call_again() -> None:
    async def lose(method: str, params: dict[str, Any]) -> Any:
        raise ConnectionClosed("socket closed: client closed the socket (1006)")

    registry = TunnelRegistry()
    attach(registry, lose, tools=[{"name": tool["name"]} for tool in FILE["tools"]])
    mcp, _ = server(registry)
    read_only = set()
    for number, tool in enumerate(FILE["tools"], 1):
        response = await mcp.handle(request("tools/call", {"name": tool["name"], "arguments": {}}, number))
        assert response is not None and response["result"]["isError"] is True
        said = response["result"]["content"][0]["text"]
        if "only reads the page, so calling it again is safe" in said:
            read_only.add(tool["name"])
        else:
            assert "outcome is unknown" in said and f"Do not call {tool['name']} again blindly" in said
    assert read_only == {tool["name"] for tool in FILE["tools"] if tool["annotations"]["readOnlyHint"]}
    assert read_only >= {"browser_snapshot", "browser_read_dom", "browser_screenshot", "browser_wait_for"}
    assert all(catalogue().read_only(name) for name in read_only)


@pytest.mark.parametrize(("broken", "said"), [
    ({"tools": []}, "an object `mcp`"),
    ({**FILE, "tools": [{"name": "browser_x", "inputSchema": {"type": "object"}}]},
     "(browser_x) must have an object annotations"),
    ({**FILE, "mcp": {**FILE["mcp"], "handshakeVersions": []}}, "mcp.handshakeVersions must be a non-empty list"),
], ids=["no-revisions", "no-annotations", "no-handshake-revisions"])
def test_a_damaged_catalogue_is_refused_with_what_is_wrong(broken: dict[str, Any], said: str) -> None:
    with pytest.raises(ValueError, match=re.escape(said)):
        parse(broken)


def test_every_step_that_changes_something_documents_repeat_and_no_read_does() -> None:
    # docs/journal.md: the pod answers a re-issued call from its journal unless the agent passes "repeat": true.
    for tool in FILE["tools"]:
        props, described = tool["inputSchema"]["properties"], tool["description"]
        if tool["annotations"]["readOnlyHint"]:
            assert "repeat" not in props and "repeat" not in described, tool["name"]
            continue
        assert props["repeat"]["type"] == "boolean", tool["name"]
        assert props["repeat"]["description"].startswith("true: you mean a second, separate action"), tool["name"]
        assert '"repeat": true' in described and "answered from the journal" in described, tool["name"]
