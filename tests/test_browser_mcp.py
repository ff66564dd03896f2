"""BrowserMcp without any I/O: dicts in, dicts out, a real TunnelRegistry with tunnels over a scripted connection."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from openab_browser.core.jsonrpc import ConnectionClosed, LocalRpcError, RequestTimeout, TooManyPendingRequests
from openab_browser.core.mcp.server import BrowserMcp, Limits, bound_result
from openab_browser.core.mcp.tools import BROWSER_TOOLS, exposed_name
from openab_browser.core.tunnel.registry import BROWSER_NOT_CONNECTED, TunnelRegistry
from openab_browser.core.tunnel.tunnel import ConnectionTunnel as Tunnel  # the scripted browser's form
from openab_browser.core.tunnel.tunnel import TunnelOwner

pytestmark = pytest.mark.anyio

SESSION = "sess_00000000-0000-4000-8000-000000000001"
OTHER = "sess_00000000-0000-4000-8000-000000000002"
STATELESS_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}

Answer = Callable[[str, dict[str, Any]], Awaitable[Any]]


class ScriptedConnection:
    """Stands in for the extension's RpcConnection: answers inner MCP via ``answer``, records the rest."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.closed = False
        self.requests: list[dict[str, Any]] = []
        self.notifications: list[tuple[str, Any]] = []
        self._next = 0

    async def request(self, method: str, params: Any = None, *, timeout: float,
                      sent: Callable[[int], None] | None = None) -> Any:
        self._next += 1
        if sent is not None:
            sent(self._next)
        self.requests.append(params)
        return await self.answer(params["method"], params.get("params") or {})

    def notify(self, method: str, params: Any = None) -> None:
        self.notifications.append((method, params))


def attach(registry: TunnelRegistry, answer: Answer, *, tools: list[dict[str, Any]] | None = None,
           session_id: str = SESSION, name: str = "browser") -> tuple[Tunnel, ScriptedConnection]:
    conn = ScriptedConnection(answer)
    tunnel = Tunnel(conn, session_id, f"{name}-id", name, TunnelOwner("conn-1", 1),  # type: ignore[arg-type]
                    registry.next_generation(), f"c-{name}")
    tunnel.listed(tools if tools is not None else [{"name": "browser_click", "inputSchema": {"type": "object"}}])
    registry.install(tunnel)
    return tunnel, conn


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


async def echo_call(method: str, params: dict[str, Any]) -> Any:
    if method == "tools/call":
        return text(f"{params['name']} {params.get('arguments')}")
    if method == "tools/list":
        return {"tools": [{"name": "browser_click"}, {"name": "browser_hover"}]}
    raise LocalRpcError(-32601, f"method not found: {method}")


def request(method: str, params: dict[str, Any] | None = None, request_id: Any = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def server(registry: TunnelRegistry | None = None, **options: Any) -> tuple[BrowserMcp, list[dict[str, Any]]]:
    sent: list[dict[str, Any]] = []
    return BrowserMcp(registry or TunnelRegistry(), SESSION, send=sent.append, **options), sent


# -- the two eras ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("requested", "answered"), [
    ("2025-06-18", "2025-06-18"), ("2025-03-26", "2025-03-26"), ("2025-11-25", "2025-11-25"),
    ("2099-01-01", "2025-11-25"), (None, "2025-11-25"),
])
async def test_initialize_echoes_a_version_it_speaks_and_offers_its_latest_otherwise(
    requested: str | None, answered: str
) -> None:
    mcp, _ = server()
    response = await mcp.handle(request("initialize", {"protocolVersion": requested, "capabilities": {}}))
    assert response is not None
    result = response["result"]
    assert result["protocolVersion"] == answered
    assert result["capabilities"] == {"tools": {"listChanged": True}}
    assert result["serverInfo"]["name"] == "openab_browser"
    assert await mcp.handle({"jsonrpc": "2.0", "method": "notifications/initialized"}) is None
    assert await mcp.handle(request("ping", request_id="p")) == {"jsonrpc": "2.0", "id": "p", "result": {}}


async def test_stateless_2026_requests_need_no_handshake_and_carry_result_type() -> None:
    mcp, _ = server()
    discover = await mcp.handle(request("server/discover", {"_meta": STATELESS_META}))
    assert discover is not None
    assert "2026-07-28" in discover["result"]["supportedVersions"]
    assert discover["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "openab_browser"
    listed = await mcp.handle(request("tools/list", {"_meta": STATELESS_META}, 2))
    assert listed is not None
    assert listed["result"]["resultType"] == "complete"
    assert listed["result"]["ttlMs"] == 0
    called = await mcp.handle(request("tools/call", {"name": "browser_back", "_meta": STATELESS_META}, 3))
    assert called is not None
    assert called["result"]["isError"] is True
    assert called["result"]["resultType"] == "complete"


async def test_an_unsupported_2026_version_gets_32022_naming_the_versions_spoken() -> None:
    mcp, _ = server()
    meta = {**STATELESS_META, "io.modelcontextprotocol/protocolVersion": "2030-01-01"}
    response = await mcp.handle(request("tools/list", {"_meta": meta}))
    assert response is not None
    assert response["error"]["code"] == -32022
    assert "2026-07-28" in response["error"]["data"]["supported"]


@pytest.mark.parametrize(("message", "code"), [
    ([1, 2], -32600),
    ({"jsonrpc": "2.0", "id": None, "method": "ping"}, -32600),
    ({"jsonrpc": "2.0", "id": True, "method": "ping"}, -32600),
    ({"jsonrpc": "1.0", "id": 1, "method": "ping"}, -32600),
    ({"jsonrpc": "2.0", "id": 1, "method": 7}, -32600),
    ({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]}, -32602),
    ({"jsonrpc": "2.0", "id": 1, "method": "resources/list"}, -32601),
    ({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"cursor": "abc"}}, -32602),
    ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"arguments": {}}}, -32602),
    ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "browser_click", "arguments": 3}},
     -32602),
])
async def test_bad_messages_get_json_rpc_errors(message: Any, code: int) -> None:
    mcp, _ = server()
    response = await mcp.handle(message)
    assert response is not None
    assert response["error"]["code"] == code


async def test_notifications_and_stray_responses_get_no_answer() -> None:
    mcp, _ = server()
    assert await mcp.handle({"jsonrpc": "2.0", "method": "notifications/whatever"}) is None
    assert await mcp.handle({"jsonrpc": "2.0", "id": 9, "result": {}}) is None


# -- tools/list and names -------------------------------------------------------------------------------------


async def test_without_a_browser_the_known_tools_are_listed() -> None:
    mcp, _ = server()
    response = await mcp.handle(request("tools/list"))
    assert response is not None
    assert response["result"]["tools"] == list(BROWSER_TOOLS)
    assert len(BROWSER_TOOLS) >= 14  # the extension's catalogue (test_tool_catalogue: the same list)
    for tool in BROWSER_TOOLS:
        assert tool["inputSchema"]["type"] == "object"
        assert tool["description"]


def test_names_are_made_valid_or_dropped() -> None:
    assert exposed_name("browser_click") == "browser_click"
    assert exposed_name("browser.click") == "browser_click"
    assert exposed_name("katashiro.read dom") == "katashiro_read_dom"
    assert exposed_name("x" * 65) is None
    assert exposed_name("") is None


async def test_dotted_browser_names_are_exposed_valid_and_mapped_back_on_call() -> None:
    registry = TunnelRegistry()
    tools = [{"name": "browser.click"}, {"name": "browser_click"}, {"name": "y" * 70}, {"name": "browser.type"}]
    _, conn = attach(registry, echo_call, tools=tools)
    mcp, _ = server(registry)
    listed = await mcp.handle(request("tools/list"))
    assert listed is not None
    # browser_click stands for browser.click; the later real browser_click and the unmappable name are dropped.
    assert [t["name"] for t in listed["result"]["tools"]] == ["browser_click", "browser_type"]
    called = await mcp.handle(request("tools/call", {"name": "browser_type", "arguments": {"text": "hi"}}, 2))
    assert called is not None
    assert called["result"]["content"][0]["text"] == "browser.type {'text': 'hi'}"
    assert conn.requests[-1]["params"]["name"] == "browser.type"


# -- tools/call outcomes --------------------------------------------------------------------------------------


async def test_no_browser_is_an_is_error_result_at_once_and_unknown_names_an_error() -> None:
    mcp, _ = server()
    response = await mcp.handle(request("tools/call", {"name": "browser_click", "arguments": {"ref": "e1"}}))
    assert response is not None
    assert response["result"] == {"content": [{"type": "text", "text": BROWSER_NOT_CONNECTED}], "isError": True}
    unknown = await mcp.handle(request("tools/call", {"name": "launch_missiles"}, 2))
    assert unknown is not None
    assert unknown["error"]["code"] == -32602


async def test_a_tunnel_failure_is_an_is_error_result_naming_the_cause() -> None:
    async def time_out(method: str, params: dict[str, Any]) -> Any:
        raise RequestTimeout("mcp/message", 5, 1.0)

    registry = TunnelRegistry()
    attach(registry, time_out)
    mcp, _ = server(registry)
    response = await mcp.handle(request("tools/call", {"name": "browser_click"}))
    assert response is not None
    assert response["result"]["isError"] is True
    assert "timed out" in response["result"]["content"][0]["text"]


async def test_the_browsers_own_mcp_error_stays_a_json_rpc_error() -> None:
    async def refuse(method: str, params: dict[str, Any]) -> Any:
        raise LocalRpcError(-32602, "Unknown tool: browser_click", {"hint": "reload the extension"})

    registry = TunnelRegistry()
    attach(registry, refuse)
    mcp, _ = server(registry)
    response = await mcp.handle(request("tools/call", {"name": "browser_click"}))
    assert response is not None
    assert response["error"] == {"code": -32602, "message": "Unknown tool: browser_click",
                                 "data": {"hint": "reload the extension"}}


async def test_a_malformed_browser_result_is_an_internal_error() -> None:
    async def nonsense(method: str, params: dict[str, Any]) -> Any:
        return {"content": "not a list"}

    registry = TunnelRegistry()
    attach(registry, nonsense)
    mcp, _ = server(registry)
    response = await mcp.handle(request("tools/call", {"name": "browser_click"}))
    assert response is not None
    assert response["error"]["code"] == -32603


READ_AND_CLICK = [{"name": "browser_click"}, {"name": "browser_snapshot"}]


@pytest.mark.parametrize("lost", [
    RequestTimeout("mcp/message", 5, 1.0),
    ConnectionClosed("socket closed: client closed the socket (1006)"),
], ids=["timed-out", "socket-dropped"])
async def test_a_lost_answer_says_the_outcome_is_unknown_and_to_look_before_acting_again(lost: Exception) -> None:
    async def lose(method: str, params: dict[str, Any]) -> Any:
        raise lost

    registry = TunnelRegistry()
    _, conn = attach(registry, lose, tools=READ_AND_CLICK)
    mcp, _ = server(registry)
    response = await mcp.handle(request("tools/call", {"name": "browser_click", "arguments": {"ref": "e6"}}))
    assert response is not None and response["result"]["isError"] is True
    said = response["result"]["content"][0]["text"]
    # The click may have happened: the agent must look, not repeat.
    assert "outcome is unknown" in said and "Do not call browser_click again blindly" in said
    assert "call browser_snapshot to see the page" in said
    assert "try again" not in said
    assert [r["params"]["name"] for r in conn.requests] == ["browser_click"]  # sent once, never again
    # A tool that only reads may simply be called again.
    read = await mcp.handle(request("tools/call", {"name": "browser_snapshot"}, 2))
    assert read is not None
    assert "only reads the page, so calling it again is safe" in read["result"]["content"][0]["text"]


async def test_a_call_refused_before_it_was_sent_says_it_did_not_run() -> None:
    async def full(method: str, params: dict[str, Any]) -> Any:
        raise TooManyPendingRequests("1024 requests already wait for an answer (max 1024)")

    registry = TunnelRegistry()
    attach(registry, full, tools=READ_AND_CLICK)
    mcp, _ = server(registry)
    response = await mcp.handle(request("tools/call", {"name": "browser_click"}))
    assert response is not None
    said = response["result"]["content"][0]["text"]
    assert said.startswith("browser_click was not run: too many calls in flight") and "unknown" not in said


async def test_a_request_nested_past_the_bound_never_reaches_the_browser() -> None:
    registry = TunnelRegistry()
    _, conn = attach(registry, echo_call)
    mcp, _ = server(registry)

    def arguments(levels: int) -> dict[str, Any]:
        value: Any = []
        for _ in range(levels - 1):
            value = [value]
        return {"x": value}

    # envelope (1), params (2), arguments (3): the list makes the rest.
    fits = await mcp.handle(request("tools/call", {"name": "browser_click", "arguments": arguments(125)}))
    assert fits is not None and "result" in fits
    for levels in (126, 297, 5000):
        refused = await mcp.handle(request("tools/call", {"name": "browser_click", "arguments": arguments(levels)}, 2))
        assert refused is not None and refused["id"] == 2 and refused["error"]["code"] == -32600
        assert "nested more than 128 levels deep" in refused["error"]["message"]
    assert len(conn.requests) == 1


def hanging() -> tuple[Answer, asyncio.Event]:
    """A browser tool that starts and never ends, and the event that says it started."""
    started = asyncio.Event()

    async def hang(method: str, params: dict[str, Any]) -> Any:
        started.set()
        await asyncio.Event().wait()

    return hang, started


async def test_notifications_cancelled_stops_the_call_and_tells_the_browser() -> None:
    hang, started = hanging()
    registry = TunnelRegistry()
    _, conn = attach(registry, hang)
    mcp, _ = server(registry)
    call = asyncio.ensure_future(mcp.handle(request("tools/call", {"name": "browser_click"}, "call-1")))
    await started.wait()
    assert mcp.running_calls == 1
    duplicate = await mcp.handle(request("tools/call", {"name": "browser_click"}, "call-1"))
    assert duplicate is not None and duplicate["error"]["code"] == -32600
    await mcp.handle({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "call-1"}})
    assert await call is None
    assert mcp.running_calls == 0
    assert ("mcp/cancel", {"requestId": 1}) in conn.notifications


async def test_calls_in_flight_are_bounded() -> None:
    hang, started = hanging()
    registry = TunnelRegistry()
    attach(registry, hang)
    mcp, _ = server(registry, limits=Limits(max_running_calls=1))
    first = asyncio.ensure_future(mcp.handle(request("tools/call", {"name": "browser_click"}, 1)))
    await started.wait()
    second = await mcp.handle(request("tools/call", {"name": "browser_click"}, 2))
    assert second is not None and second["error"]["code"] == -32000
    mcp.close()  # the conversation ended: its calls stop and get no answer
    assert await first is None


async def test_progress_goes_to_the_agent_with_its_own_token() -> None:
    registry = TunnelRegistry()
    progress: list[dict[str, Any]] = []

    async def report(method: str, params: dict[str, Any]) -> Any:
        token = params["_meta"]["progressToken"]
        assert token != 7  # the browser sees a token unique in the pod, not the agent's
        tunnel.deliver_progress(token, {"progressToken": token, "progress": 1, "total": 2})
        return text("done")

    tunnel, _ = attach(registry, report)
    mcp, _ = server(registry)
    response = await mcp.handle(request("tools/call", {"name": "browser_click", "_meta": {"progressToken": 7}}),
                                progress=progress.append)
    assert response is not None and response["result"]["content"][0]["text"] == "done"
    assert progress == [{"jsonrpc": "2.0", "method": "notifications/progress",
                         "params": {"progressToken": 7, "progress": 1, "total": 2}}]


# -- bounded results ------------------------------------------------------------------------------------------


def test_text_over_the_bound_is_cut_with_a_marker_and_images_pass() -> None:
    image = {"type": "image", "data": "A" * 5000, "mimeType": "image/jpeg"}
    result: dict[str, Any] = {"content": [{"type": "text", "text": "a" * 60}, image, {"type": "text", "text": "b" * 60},
                          {"type": "resource", "resource": {"uri": "x:", "text": "c" * 60}}], "isError": False}
    bounded = bound_result(result, "browser_read_dom", 100)
    content = bounded["content"]
    assert content[0] == {"type": "text", "text": "a" * 60}
    assert content[1] is image
    assert content[2]["text"].startswith("b" * 40 + "\n\n[openab: output truncated: 80 of 180 characters")
    assert "browser_read_dom again with a smaller max_chars" in content[2]["text"]
    assert len(content) == 3  # what came after the cut is counted in the marker, not sent
    assert bounded["_meta"]["dev.openab/truncated"] == {"shownChars": 100, "totalChars": 180}
    assert bounded["isError"] is False
    assert result["content"][2]["text"] == "b" * 60  # the browser's result is not modified


def test_a_result_within_the_bound_is_passed_on_as_it_is() -> None:
    result = {"content": [{"type": "text", "text": "short"}]}
    assert bound_result(result, "browser_snapshot", 100) is result


async def test_the_bound_is_configurable() -> None:
    async def big(method: str, params: dict[str, Any]) -> Any:
        return text("z" * 500)

    registry = TunnelRegistry()
    attach(registry, big)
    mcp, _ = server(registry, limits=Limits(max_text_chars=200))
    response = await mcp.handle(request("tools/call", {"name": "browser_click"}))
    assert response is not None
    assert response["result"]["content"][0]["text"].startswith("z" * 200 + "\n\n[openab: output truncated")


# -- list_changed ---------------------------------------------------------------------------------------------


async def test_list_changed_on_attach_detach_and_tools_changed_after_initialized_only() -> None:
    registry = TunnelRegistry()
    mcp, sent = server(registry)
    attach(registry, echo_call, name="early")
    assert sent == []  # nothing before the handshake is complete
    await mcp.handle(request("initialize", {"protocolVersion": "2025-06-18"}))
    await mcp.handle({"jsonrpc": "2.0", "method": "notifications/initialized"})
    late, _ = attach(registry, echo_call, name="late")
    changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    assert sent == [changed]
    # The browser says its tools changed: it is asked for them, and the agent is told.
    await registry.deliver("conn-1", {"connectionId": late.connection_id,
                                      "method": "notifications/tools/list_changed"})
    assert sent == [changed, changed]
    assert late.tools == [{"name": "browser_click"}, {"name": "browser_hover"}]
    attach(registry, echo_call, session_id=OTHER, name="elsewhere")  # another session's browser: not ours
    registry.drop_session(SESSION, "test")
    assert sent == [changed] * 4  # ... and early and late detached
    mcp.close()
    attach(registry, echo_call, name="after-close")
    assert len(sent) == 4


async def test_a_2026_listen_stream_is_acknowledged_hears_changes_and_ends_gracefully() -> None:
    registry = TunnelRegistry()
    mcp, sent = server(registry)
    stream: list[dict[str, Any]] = []
    acknowledged = asyncio.Event()

    def on_stream(message: dict[str, Any]) -> None:
        stream.append(message)
        acknowledged.set()

    listen = asyncio.ensure_future(mcp.handle(
        request("subscriptions/listen", {"notifications": {"toolsListChanged": True, "promptsListChanged": True},
                                         "_meta": STATELESS_META}, "listen-1"),
        progress=on_stream,
    ))
    await acknowledged.wait()
    subscription = {"io.modelcontextprotocol/subscriptionId": "listen-1"}
    assert stream == [{"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                       "params": {"notifications": {"toolsListChanged": True}, "_meta": subscription}}]
    attach(registry, echo_call)
    assert stream[1] == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                         "params": {"_meta": subscription}}
    assert sent == []  # the stream, not the conversation's channel
    mcp.close()
    response = await listen
    assert response is not None
    assert response["result"]["resultType"] == "complete"
    assert response["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen-1"


async def test_listen_is_2026_only() -> None:
    mcp, _ = server()
    response = await mcp.handle(request("subscriptions/listen", {"notifications": {"toolsListChanged": True}}))
    assert response is not None and response["error"]["code"] == -32601


async def test_a_closed_conversation_answers_with_an_error_and_runs_nothing() -> None:
    registry = TunnelRegistry()
    _, conn = attach(registry, echo_call)
    mcp, _ = server(registry)
    mcp.close()
    response = await mcp.handle(request("tools/call", {"name": "browser_click"}))
    assert response is not None and "closed" in response["error"]["message"]
    assert conn.requests == []
