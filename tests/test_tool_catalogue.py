"""One catalogue, ``extension/catalogue.json``, is what the extension serves and what the pod advertises.

Agents that list tools once at start-up, before a browser attaches, only ever see the pod's list; if it said other
than the extension they would call tools with arguments the extension does not take, or never learn of ones it
does. Both languages read the one file: these checks hold the file sound (each tool a valid MCP tool with its
annotations, and openab's own facts), hold that the extension, run by node, serves and negotiates what the pod does
and reads the same facts, that both refuse a file with an acting tool the guard could not judge, and that the pod
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

from openab_browser.core.catalogue import CATALOGUE_PATH, DIALOG_WAYS, GUARD_FACETS, RECEIPTS, catalogue, parse
from openab_browser.core.jsonrpc import ConnectionClosed
from openab_browser.core.mcp.tools import BROWSER_TOOLS, TOOL_NAME
from openab_browser.core.mcp_vocabulary import HANDSHAKE_VERSIONS, REQUESTED_HANDSHAKE_VERSION, STATELESS_VERSION
from openab_browser.core.settings import Settings
from openab_browser.core.tunnel.registry import TunnelRegistry

pytestmark = pytest.mark.anyio

LIB = CATALOGUE_PATH.parent / "lib"
FILE: dict[str, Any] = json.loads(CATALOGUE_PATH.read_text())
HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
UNKNOWN_REVISION = "1999-01-01"

# The extension's own modules under node, as the service worker imports them. Only link.js reads the browser at
# import (the manifest's version), so that is all of `chrome` there is.
EXTENSION_SIDE = """
globalThis.chrome = { runtime: { getManifest: () => ({ version: '0.0.0' }) } };
const [tools, catalogue, mcp, handoff, receipts] = await Promise.all(
  ['tools.js', 'catalogue.js', 'mcp.js', 'handoff.js', 'receipts.js'].map((name) => import(new URL(name, LIB).href)));
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
const byTool = (f) => Object.fromEntries(tools.TOOLS.map((t) => [t.name, CALLS.map((args) => f(t.name, args))]));
const discovered = await server.onRequest('mcp/message',
  { serverId: 'browser-1', requestId: 'r', method: 'server/discover', params: {} }, 2);
console.log(JSON.stringify({
  served: tools.TOOLS, listed: (await inner('tools/list', {}, 3)).tools, catalogue: catalogue.TOOLS,
  defaultMaxChars: catalogue.DEFAULT_MAX_CHARS, negotiated, discovered: discovered.result.supportedVersions,
  handoffSeconds: [undefined, 0, 100000].map((asked) => handoff.handoffSeconds(asked)),
  facts: Object.fromEntries(catalogue.FACTS),
  vocabulary: { facets: catalogue.GUARD_FACETS, receipts: catalogue.RECEIPTS, dialogs: catalogue.DIALOG_WAYS },
  // Each tool's receipt and whether it only reads, for each call of CALLS.
  receiptKinds: byTool((name, args) => receipts.receiptKind(name, args)),
  onlyReads: byTool((name, args) => catalogue.onlyReads(name, args)),
  // What the worker's start does with each damaged file: the message it stops with, or '' had it started.
  refused: BROKEN.map((data) => {
    try {
      catalogue.useCatalogue(data);
      return '';
    } catch (e) {
      return e.message;
    }
  }),
}));
"""
# Calls whose receipt and reading both readers must agree on: browser_tabs's actions, and calls of no action.
CALLS: list[dict[str, Any]] = [{}, {"action": "list"}, {"action": "open"}, {"action": "switch"}, {"action": "close"}]


def _with_facts(name: str, **facts: Any) -> dict[str, Any]:
    """The catalogue with the tool ``name``'s facts changed (a value None takes the fact away)."""
    tools = []
    for tool in FILE["tools"]:
        if tool["name"] == name:
            changed = {**tool["facts"], **facts}
            tool = {**tool, "facts": {key: value for key, value in changed.items() if value is not None}}
        tools.append(tool)
    return {**FILE, "tools": tools}


# Damaged catalogues both readers refuse, and the words both errors say.
BROKEN: list[tuple[str, dict[str, Any], str]] = [
    ("acting-tool-without-guard", _with_facts("browser_click", guard=None), "browser_click"),
    ("acting-tool-with-empty-guard", _with_facts("browser_type", guard=[]), "no guard rule"),
    ("unknown-facet", _with_facts("browser_drag", guard=["drops", "teleports"]), "unknown"),
    ("read-with-a-guard-rule", _with_facts("browser_snapshot", guard=["routine"]), "only reads"),
    ("unknown-receipt", _with_facts("browser_click", receipt="maybe"), "receipt"),
    ("read-with-a-receipt", _with_facts("browser_find", receipt="page"), "receipt"),
    ("unknown-dialog-way", _with_facts("browser_click", dialogs="ignores"), "dialogs"),
    ("no-exclusive", _with_facts("browser_handoff", exclusive=None), "exclusive"),
    ("no-look", _with_facts("browser_snapshot", look=None), "look"),
    ("acting-tool-that-looks", _with_facts("browser_click", look=True), "look"),
    ("acting-tool-without-plan-step", _with_facts("browser_click", plan={}), "plan"),
    ("bad-journal-reads", _with_facts("browser_tabs", journal={"reads": {"action": "list"}}), "journal"),
    ("row-without-verbs", _with_facts("browser_back", row={"says": "back"}), "row"),
    ("row-with-object-and-words", _with_facts("browser_back", row={"verbs": ["Go", "Went", "Going"], "says": "back",
                                                                    "object": "place"}), "row"),
]


@pytest.fixture(scope="module")
def extension() -> dict[str, Any]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    script = (f"const LIB = {json.dumps(LIB.as_uri() + '/')};\n"
              f"const ASKED = {json.dumps([*HANDSHAKE_VERSIONS, UNKNOWN_REVISION])};\n"
              f"const CALLS = {json.dumps(CALLS)};\n"
              f"const BROKEN = {json.dumps([data for _, data, _ in BROKEN])};\n{EXTENSION_SIDE}")
    # On stdin: the damaged catalogues make the script longer than an argument may be.
    done = subprocess.run([node, "--input-type=module"], input=script, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


# -- the file ---------------------------------------------------------------------------------------------------


def plain_schema(prop: dict[str, Any], where: tuple[str, ...]) -> None:
    """An argument every client takes: a scalar, a list that says what its items are (some clients, Gemini's, refuse
    an array without its items), or an object that says its properties or that it takes any."""
    assert prop.get("type") in {"string", "integer", "boolean", "array", "object"}, where
    if prop["type"] == "array":
        assert isinstance(prop.get("items"), dict), where
        plain_schema(prop["items"], (*where, "items"))
    if prop["type"] == "object":
        assert "properties" in prop or prop.get("additionalProperties") is True, where
        for inner, sub in prop.get("properties", {}).items():
            plain_schema(sub, (*where, inner))


def test_each_tool_is_an_mcp_tool_with_a_valid_schema_and_its_annotations() -> None:
    names = [tool["name"] for tool in FILE["tools"]]
    assert len(set(names)) == len(names), "tool names must be unique"
    for tool in FILE["tools"]:
        name = tool["name"]
        assert set(tool) == {"name", "description", "inputSchema", "annotations", "facts"}, name
        assert TOOL_NAME.fullmatch(name), name
        assert isinstance(tool["description"], str) and tool["description"].strip(), name
        schema = tool["inputSchema"]
        Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object" and isinstance(schema["properties"], dict), name
        assert set(schema.get("required", [])) <= set(schema["properties"]), name
        for argument, prop in schema["properties"].items():
            plain_schema(prop, (name, argument))
        # Every hint said outright: MCP's defaults (destructive, not idempotent) are a client's guess, not ours.
        assert set(tool["annotations"]) == set(HINTS), name
        assert all(isinstance(tool["annotations"][hint], bool) for hint in HINTS), name
        if tool["annotations"]["readOnlyHint"]:
            assert tool["annotations"]["destructiveHint"] is False, name


# -- openab's own facts ------------------------------------------------------------------------------------------


def test_every_tool_has_all_its_facts_with_known_values() -> None:
    facts = catalogue().facts
    assert set(facts) == {tool["name"] for tool in FILE["tools"]}
    for tool in FILE["tools"]:
        name, own = tool["name"], tool["facts"]
        acts = tool["annotations"]["readOnlyHint"] is False
        assert set(own) == {"guard", "receipt", "journal", "plan", "row", "dialogs", "exclusive", "look"}, name
        assert isinstance(own["look"], bool) and (not acts or not own["look"]), name
        assert set(own["guard"]) <= GUARD_FACETS and bool(own["guard"]) == acts, name
        assert own["receipt"] in RECEIPTS and (acts or own["receipt"] == "none"), name
        assert own["dialogs"] in DIALOG_WAYS, name
        # The plan card names every acting step; what it says of the element goes where {target} is.
        assert not acts or own["plan"]["step"], name
        # Argument values the facts pick out are values the tool's schema takes.
        picked = [own["journal"].get("reads", {}), own["plan"].get("noSite", {}),
                  *(case["args"] for case in own["row"].get("when", []))]
        for values_by_argument in picked:
            for argument, values in values_by_argument.items():
                schema = tool["inputSchema"]["properties"][argument]
                assert all(v in schema.get("enum", [v]) for v in values), (name, argument, values)
    # One tool at a time can hold the tab for the person: it is the person's turn, which answers its own dialogs.
    assert [n for n, f in facts.items() if f.exclusive] == [n for n, f in facts.items() if f.dialogs == "person"]


def test_the_pod_derives_the_journal_and_the_agents_kind_from_the_facts() -> None:
    facts = catalogue().facts
    assert catalogue().only_reads("browser_tabs", {"action": "list"})
    assert not catalogue().only_reads("browser_tabs", {"action": "open"})
    assert not catalogue().only_reads("browser_click", {"action": "list"})
    assert all(catalogue().only_reads(name, {}) for name in facts if catalogue().read_only(name))
    assert catalogue().only_navigates("browser_navigate") and not catalogue().only_navigates("browser_click")


def test_the_extension_reads_the_same_facts_as_the_pod(extension: dict[str, Any]) -> None:
    assert extension["facts"] == {tool["name"]: tool["facts"] for tool in FILE["tools"]}
    assert set(extension["vocabulary"]["facets"]) == GUARD_FACETS
    assert tuple(extension["vocabulary"]["receipts"]) == RECEIPTS
    assert tuple(extension["vocabulary"]["dialogs"]) == DIALOG_WAYS
    for name, facts in catalogue().facts.items():
        reads = [catalogue().only_reads(name, args) for args in CALLS]
        assert extension["onlyReads"][name] == reads, name
        # A receipt for each acting call of a tool that has one; none for a call that only reads.
        kind = None if facts.receipt == "none" else facts.receipt
        assert extension["receiptKinds"][name] == [None if read else kind for read in reads], name


@pytest.mark.parametrize(("data", "said"), [(data, said) for _, data, said in BROKEN], ids=[i for i, _, _ in BROKEN])
def test_a_catalogue_with_a_fact_wrong_is_refused_by_the_pod(data: dict[str, Any], said: str) -> None:
    with pytest.raises(ValueError, match=re.escape(said)):
        parse(data)


def test_a_catalogue_with_a_fact_wrong_stops_the_extensions_worker_before_it_dials(extension: dict[str, Any]) -> None:
    for (case, _, said), refused in zip(BROKEN, extension["refused"], strict=True):
        assert refused.startswith("extension/catalogue.json: ") and said in refused, (case, refused)
    # The worker reads the file (loadCatalogue, which takes it through useCatalogue and checkFacts) before anything
    # else of its start, and dials only after: a refused file leaves it unconnected, never acting unjudged.
    boot = (LIB.parent / "background.js").read_text().split("async function boot()", 1)[1]
    steps = [line.strip() for line in boot.splitlines() if line.strip().startswith("await ")]
    assert steps[0] == "await loadCatalogue();" and steps[-1].startswith("await acp.link.configure("), steps
    module = (LIB / "catalogue.js").read_text()
    assert ".then(useCatalogue)" in module and "  checkFacts(data.tools);" in module


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
    # As the file says each tool, less openab's own facts, which no agent sees.
    assert listed == list(BROWSER_TOOLS) == [{k: v for k, v in t.items() if k != "facts"} for t in FILE["tools"]]
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
