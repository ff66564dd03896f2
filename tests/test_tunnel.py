"""The MCP-over-ACP tunnel over a real `/acp` socket, against a scripted extension (openab.md §2, §6 item 5)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
from fake_extension import FakeExtension, RemoteError, connect_extension, text_result
from gateway_harness import RunningGateway, run_gateway
from waits import eventually

from openab_browser.core.jsonrpc import RpcError
from openab_browser.core.mcp.server import BrowserMcp
from openab_browser.core.tunnel.registry import (
    BrowserNotConnected,
    ToolsChanged,
    TunnelAttached,
    TunnelDetached,
    TunnelEvent,
    TunnelRegistry,
)
from openab_browser.core.tunnel.tunnel import TunnelError

pytestmark = pytest.mark.anyio


def acp(server_id: str, name: str = "browser", key: str = "id") -> dict[str, Any]:
    return {"type": "acp", "name": name, key: server_id}


async def echo(arguments: dict[str, Any]) -> dict[str, Any]:
    return text_result(f"echo {arguments.get('text', '')}")


async def attached_extension(gateway: RunningGateway, ext: FakeExtension, server_id: str = "srv-1") -> str:
    ext.add_tool("browser_echo", echo, {"type": "object", "properties": {"text": {"type": "string"}}})
    await ext.initialize()
    session_id = await ext.new_session([acp(server_id)])
    await gateway.pod.tunnels.wait_attached(session_id, timeout=5)
    return session_id


def connects(ext: FakeExtension) -> list[dict[str, Any]]:
    return [m for m in ext.server_requests if m["method"] == "mcp/connect"]


@contextlib.contextmanager
def upcoming(
    registry: TunnelRegistry, wanted: Callable[[TunnelEvent], bool]
) -> Iterator[asyncio.Future[TunnelEvent]]:
    """The first registry event ``wanted`` accepts from now on: enter before acting, await after."""
    future: asyncio.Future[TunnelEvent] = asyncio.get_running_loop().create_future()

    def listener(event: TunnelEvent) -> None:
        if not future.done() and wanted(event):
            future.set_result(event)

    unsubscribe = registry.add_listener(listener)
    try:
        yield future
    finally:
        unsubscribe()


@contextlib.contextmanager
def logged(*fragments: str) -> Iterator[asyncio.Event]:
    """Set once openab logs a record holding every fragment: for what the gateway gives up on silently."""
    seen = asyncio.Event()

    class Watch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if all(fragment in record.getMessage() for fragment in fragments):
                seen.set()

    handler = Watch()
    logger = logging.getLogger("openab_browser")
    logger.addHandler(handler)
    try:
        yield seen
    finally:
        logger.removeHandler(handler)


async def test_one_declared_server_gets_exactly_one_connect_then_the_mcp_handshake(gateway: RunningGateway) -> None:
    async with connect_extension(gateway.ws_url, gateway.token) as ext:
        session_id = await attached_extension(gateway, ext, "srv-solo")
        [connect] = connects(ext)
        assert isinstance(connect["id"], int)
        assert connect["params"] == {"acpId": "srv-solo", "serverId": "srv-solo"}
        inner = [m["params"]["method"] for m in ext.server_requests if m["method"] == "mcp/message"]
        assert inner[:3] == ["initialize", "notifications/initialized", "tools/list"]
        [initialized] = [
            m for m in ext.server_requests if m.get("params", {}).get("method") == "notifications/initialized"
        ]
        assert "id" not in initialized  # the inner notification travels as an outer notification
        [tunnel] = gateway.pod.tunnels.tunnels(session_id)
        assert (tunnel.form, tunnel.name, tunnel.server_info["name"]) == ("connection", "browser", "fake-extension")


async def test_two_servers_connect_separately_and_other_types_are_not_ours(gateway: RunningGateway) -> None:
    async with connect_extension(gateway.ws_url, gateway.token) as ext:
        await ext.initialize()
        servers = [
            acp("srv-a", "a"),
            acp("srv-b", "b", key="serverId"),  # the ACP SDK's spelling
            acp("srv-a", "a"),  # duplicates count once
            {"type": "http", "name": "web", "url": "http://example/mcp", "headers": []},
            {"type": "acp", "name": "nameless-id"},
        ]
        session_id = await ext.new_session(servers)
        await eventually(lambda: len(gateway.pod.tunnels.tunnels(session_id)) == 2)
        assert sorted(c["params"]["acpId"] for c in connects(ext)) == ["srv-a", "srv-b"]
        assert len({c["id"] for c in connects(ext)}) == 2


async def test_more_than_eight_servers_reject_the_whole_session(gateway: RunningGateway) -> None:
    async with connect_extension(gateway.ws_url, gateway.token) as ext:
        await ext.initialize()
        with pytest.raises(RemoteError) as refused:
            await ext.new_session([acp(f"srv-{n}", f"s{n}") for n in range(9)])
        assert (refused.value.code, refused.value.message) == (-32000, "Too many type:acp servers declared (9, max 8)")
        # A session declared after the refused one attaches: any connect for the refused one came before it.
        later = await ext.new_session([acp("srv-after")])
        await gateway.pod.tunnels.wait_attached(later, timeout=5)
        assert [c["params"]["acpId"] for c in connects(ext)] == ["srv-after"]


async def test_tools_are_listed_and_called_through_the_tunnel(gateway: RunningGateway) -> None:
    async with connect_extension(gateway.ws_url, gateway.token) as ext:
        session_id = await attached_extension(gateway, ext)
        tools = await gateway.pod.tunnels.list_tools(session_id)
        assert [t["name"] for t in tools] == ["browser_echo"]
        result = await gateway.pod.tunnels.call_tool(session_id, "browser_echo", {"text": "hi"})
        assert result == text_result("echo hi")
        call = [m for m in ext.server_requests if m.get("params", {}).get("method") == "tools/call"][-1]
        assert call["params"]["params"] == {"name": "browser_echo", "arguments": {"text": "hi"}}
        with pytest.raises(RpcError) as unknown:
            await gateway.pod.tunnels.call_tool(session_id, "browser_missing", {})
        assert unknown.value.code == -32602


async def test_an_8_mib_class_result_passes_through_unchanged(gateway: RunningGateway) -> None:
    payload = "A" * (7 << 20)

    async def screenshot(_arguments: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "image", "data": payload, "mimeType": "image/jpeg"}]}

    async with connect_extension(gateway.ws_url, gateway.token) as ext:
        ext.add_tool("browser_screenshot", screenshot)
        session_id = await attached_extension(gateway, ext)
        result = await gateway.pod.tunnels.call_tool(session_id, "browser_screenshot", {})
        # Relayed as the JSON it came in (an orjson.Fragment), never parsed into a str and written out again.
        assert isinstance(result["content"][0]["data"], orjson.Fragment)
        assert orjson.loads(orjson.dumps(result)) == {
            "content": [{"type": "image", "data": payload, "mimeType": "image/jpeg"}]}


async def test_no_browser_fails_at_once_naming_the_fix(gateway: RunningGateway) -> None:
    async with connect_extension(gateway.ws_url, gateway.token) as ext:
        await ext.initialize()
        session_id = await ext.new_session()
        with pytest.raises(BrowserNotConnected, match="open the openab side panel"):
            await gateway.pod.tunnels.call_tool(session_id, "browser_click", {"selector": "#x"})


async def test_a_timed_out_call_sends_mcp_cancel_and_names_server_and_session() -> None:
    async with run_gateway(tunnel_timeout=0.5) as gw, connect_extension(gw.ws_url, gw.token) as ext:
        never = asyncio.Event()

        async def hang(_arguments: dict[str, Any]) -> dict[str, Any]:
            await never.wait()
            return text_result("late")

        ext.add_tool("browser_hang", hang)
        session_id = await attached_extension(gw, ext)
        with pytest.raises(TunnelError) as timed_out:
            await gw.pod.tunnels.call_tool(session_id, "browser_hang", {})
        message = str(timed_out.value)
        assert isinstance(timed_out.value, TimeoutError)  # code that knows nothing of openab reads it right
        assert "timed out" in message and "'browser'" in message and session_id in message
        call = [m for m in ext.server_requests if m.get("params", {}).get("method") == "tools/call"][-1]
        await eventually(lambda: call["id"] in ext.cancelled)
        # The late answer is dropped, and the tunnel keeps working.
        never.set()
        assert await gw.pod.tunnels.call_tool(session_id, "browser_echo", {"text": "x"}) == text_result("echo x")


async def test_losing_the_socket_fails_in_flight_calls_at_once() -> None:
    async with run_gateway(tunnel_timeout=120) as gw:
        async with connect_extension(gw.ws_url, gw.token) as ext:
            started = asyncio.Event()

            async def hang(_arguments: dict[str, Any]) -> dict[str, Any]:
                started.set()
                await asyncio.sleep(3600)
                return text_result("never")

            ext.add_tool("browser_hang", hang)
            session_id = await attached_extension(gw, ext)
            call = asyncio.create_task(gw.pod.tunnels.call_tool(session_id, "browser_hang", {}))
            await started.wait()
        # Far sooner than the 120 s tunnel timeout: the socket is gone, so is the call.
        async with asyncio.timeout(5):
            with pytest.raises(TunnelError, match="browser disconnected") as lost:
                await call
            assert isinstance(lost.value, ConnectionError)
        assert not gw.pod.tunnels.attached(session_id)


async def test_a_call_cut_off_by_a_dropped_socket_reaches_the_browser_once_even_after_a_resume() -> None:
    clicks: list[str] = []
    started = asyncio.Event()

    async def click(arguments: dict[str, Any]) -> dict[str, Any]:
        clicks.append(str(arguments.get("ref")))
        started.set()
        await asyncio.Event().wait()  # the person's click happened; the answer never makes it back
        return text_result("clicked")

    async def snapshot(_arguments: dict[str, Any]) -> dict[str, Any]:
        return text_result('- button "Buy" [ref=e6]')

    async with run_gateway(tunnel_timeout=120) as gw:
        async with connect_extension(gw.ws_url, gw.token) as first:
            first.add_tool("browser_click", click)
            await first.initialize()
            session_id = await first.new_session([acp("srv-1")])
            await gw.pod.tunnels.wait_attached(session_id, timeout=5)
            mcp = BrowserMcp(gw.pod.tunnels, session_id)  # what the proxy or the bridge runs for the agent
            call = asyncio.create_task(mcp.handle(
                {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                 "params": {"name": "browser_click", "arguments": {"ref": "e6"}}}
            ))
            async with asyncio.timeout(5):
                await started.wait()
        # The socket dropped mid-call: the agent hears at once that the outcome is unknown, and to look first.
        async with asyncio.timeout(5):
            answer = await call
        assert answer is not None
        said = answer["result"]["content"][0]["text"]
        assert "outcome is unknown" in said and "browser_snapshot" in said and "browser_click" in said
        async with connect_extension(gw.ws_url, gw.token) as second:
            second.add_tool("browser_click", click)
            second.add_tool("browser_snapshot", snapshot)
            await second.initialize()
            assert await second.request(
                "session/resume", {"sessionId": session_id, "cwd": "/", "mcpServers": [acp("srv-1")]}
            ) == {}
            await gw.pod.tunnels.wait_attached(session_id, timeout=5)
            # What the agent is told to do next; it comes after anything a resume could have re-sent.
            looked = await mcp.handle({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                       "params": {"name": "browser_snapshot", "arguments": {}}})
            assert looked is not None and looked["result"]["content"][0]["text"] == '- button "Buy" [ref=e6]'
            calls = [
                m["params"]["params"]["name"]
                for m in [*first.server_requests, *second.server_requests]
                if m["method"] == "mcp/message" and m["params"].get("method") == "tools/call"
            ]
        mcp.close()
    assert calls == ["browser_click", "browser_snapshot"]
    assert clicks == ["e6"]


async def test_a_resume_on_a_new_socket_wins_and_the_old_socket_closing_leaves_it(gateway: RunningGateway) -> None:
    events: list[Any] = []
    gateway.pod.tunnels.add_listener(events.append)
    async with connect_extension(gateway.ws_url, gateway.token) as first:
        session_id = await attached_extension(gateway, first, "srv-old")
        # A second session on the first socket, whose tunnel shows when the gateway has handled that socket's close.
        marker_session = await first.new_session([acp("srv-marker", "marker")])
        await gateway.pod.tunnels.wait_attached(marker_session, timeout=5)
        async with connect_extension(gateway.ws_url, gateway.token) as second:
            second.add_tool("browser_echo", echo)
            await second.initialize()
            assert (
                await second.request(
                    "session/resume", {"sessionId": session_id, "cwd": "/", "mcpServers": [acp("srv-new")]}
                )
                == {}
            )
            await eventually(lambda: [t.server_id for t in gateway.pod.tunnels.tunnels(session_id)] == ["srv-new"])
            # Last attach wins by name: the old socket's tunnel is told to disconnect.
            await eventually(lambda: any(m["method"] == "mcp/disconnect" for m in first.server_requests))
            with upcoming(
                gateway.pod.tunnels, lambda e: isinstance(e, TunnelDetached) and e.session_id == marker_session
            ) as marker_gone:
                await first.ws.close()
                await asyncio.wait_for(marker_gone, 5)
            [survivor] = gateway.pod.tunnels.tunnels(session_id)
            assert survivor.server_id == "srv-new"
            assert await gateway.pod.tunnels.call_tool(session_id, "browser_echo", {"text": "2"}) == text_result(
                "echo 2"
            )
            # The session moved: the old socket can no longer prompt in it.
    kinds = [type(e) for e in events if e.session_id == session_id]
    assert kinds[:3] == [TunnelAttached, TunnelDetached, TunnelAttached]


async def test_resume_withdraws_only_when_it_sends_an_array(gateway: RunningGateway) -> None:
    async with connect_extension(gateway.ws_url, gateway.token) as ext:
        session_id = await attached_extension(gateway, ext)
        assert await ext.request("session/resume", {"sessionId": session_id, "cwd": "/"}) == {}
        assert await ext.request("session/resume", {"sessionId": session_id, "cwd": "/", "mcpServers": None}) == {}
        assert gateway.pod.tunnels.attached(session_id)
        assert await ext.request("session/resume", {"sessionId": session_id, "cwd": "/", "mcpServers": []}) == {}
        assert not gateway.pod.tunnels.attached(session_id)
        await eventually(lambda: any(m["method"] == "mcp/disconnect" for m in ext.server_requests))


async def test_resume_of_a_session_the_pod_forgot_keeps_its_id(gateway: RunningGateway) -> None:
    forgotten = "sess_5b0a8a52-52c5-4bd1-9d2f-7a7d0c1e8c11"
    async with connect_extension(gateway.ws_url, gateway.token) as ext:
        ext.add_tool("browser_echo", echo)
        await ext.initialize()
        assert await ext.request("session/resume", {"sessionId": forgotten, "cwd": "/", "mcpServers": [acp("s")]}) == {}
        await gateway.pod.tunnels.wait_attached(forgotten, timeout=5)


async def test_a_browser_that_never_answers_connect_gets_no_tunnel_and_the_session_works() -> None:
    async with run_gateway(tunnel_connect_timeout=0.3) as gw, connect_extension(gw.ws_url, gw.token) as ext:
        ext.answer_connect = False
        await ext.initialize()
        with logged("did not finish connecting within 0.3 s", "'srv-mute'") as gave_up:
            session_id = await ext.new_session([acp("srv-mute", "srv-mute")])
            await asyncio.wait_for(gave_up.wait(), 5)
        assert len(connects(ext)) == 1
        assert not gw.pod.tunnels.attached(session_id)
        assert await ext.request("session/resume", {"sessionId": session_id, "cwd": "/"}) == {}


async def test_connect_errors_and_unsupported_inner_versions_are_refused(gateway: RunningGateway) -> None:
    async with connect_extension(gateway.ws_url, gateway.token) as ext:
        ext.connect_error = {"code": -32603, "message": "tunnel disabled"}
        await ext.initialize()
        with logged("mcp/connect refused: tunnel disabled (-32603)", "'srv-x'") as refused:
            session_id = await ext.new_session([acp("srv-x", "srv-x")])
            await asyncio.wait_for(refused.wait(), 5)
        assert not gateway.pod.tunnels.attached(session_id)
    async with connect_extension(gateway.ws_url, gateway.token) as ext:
        ext.inner_protocol_version = "1999-01-01"
        await ext.initialize()
        session_id = await ext.new_session([acp("srv-y")])
        await eventually(lambda: any(m["method"] == "mcp/disconnect" for m in ext.server_requests))
        assert not gateway.pod.tunnels.attached(session_id)


async def test_list_changed_from_the_browser_refreshes_the_tools(gateway: RunningGateway) -> None:
    events: list[Any] = []
    gateway.pod.tunnels.add_listener(events.append)
    async with connect_extension(gateway.ws_url, gateway.token) as ext:
        session_id = await attached_extension(gateway, ext)
        ext.add_tool("browser_new", echo)
        await ext.tools_changed()
        await eventually(lambda: any(isinstance(e, ToolsChanged) for e in events))
        assert {t["name"] for t in await gateway.pod.tunnels.list_tools(session_id)} == {"browser_echo", "browser_new"}


async def test_progress_notifications_reach_the_waiting_call(gateway: RunningGateway) -> None:
    async with connect_extension(gateway.ws_url, gateway.token) as ext:

        async def slow(_arguments: dict[str, Any]) -> dict[str, Any]:
            [connection_id] = ext.connections
            for step in (1, 2):
                await ext.notify(
                    "mcp/message",
                    {
                        "connectionId": connection_id,
                        "method": "notifications/progress",
                        "params": {"progressToken": "tok-1", "progress": step, "total": 2},
                    },
                )
            await asyncio.sleep(0.1)
            return text_result("done")

        ext.add_tool("browser_slow", slow)
        session_id = await attached_extension(gateway, ext)
        seen: list[dict[str, Any]] = []
        result = await gateway.pod.tunnels.call_tool(
            session_id, "browser_slow", {}, meta={"progressToken": "tok-1"}, progress=seen.append
        )
        assert result == text_result("done")
        assert [p["progress"] for p in seen] == [1, 2]


async def test_sessions_never_see_each_others_browser(gateway: RunningGateway) -> None:
    async with (
        connect_extension(gateway.ws_url, gateway.token) as one,
        connect_extension(gateway.ws_url, gateway.token) as two,
    ):

        async def who(name: str) -> Any:
            async def answer(_arguments: dict[str, Any]) -> dict[str, Any]:
                return text_result(name)

            return answer

        one.add_tool("browser_who", await who("one"))
        two.add_tool("browser_who", await who("two"))
        first = await attached_extension(gateway, one, "same-id")
        second = await attached_extension(gateway, two, "same-id")
        assert await gateway.pod.tunnels.call_tool(first, "browser_who", {}) == text_result("one")
        assert await gateway.pod.tunnels.call_tool(second, "browser_who", {}) == text_result("two")
        with pytest.raises(RemoteError):
            # A socket cannot prompt in a session it does not hold.
            await one.request("session/prompt", {"sessionId": second, "prompt": [{"type": "text", "text": "x"}]})


async def test_calls_beyond_the_in_flight_bound_fail_clearly_and_the_rest_complete(gateway: RunningGateway) -> None:
    release = asyncio.Event()

    async def held(_arguments: dict[str, Any]) -> dict[str, Any]:
        await release.wait()
        return text_result("done")

    async with connect_extension(gateway.ws_url, gateway.token) as ext:
        ext.add_tool("browser_held", held)
        session_id = await attached_extension(gateway, ext)
        calls = [
            asyncio.create_task(gateway.pod.tunnels.call_tool(session_id, "browser_held", {})) for _ in range(1100)
        ]
        await eventually(lambda: sum(t.done() for t in calls) >= 1100 - 1024)
        release.set()
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
        refused = [o for o in outcomes if isinstance(o, TunnelError)]
        assert len(refused) == 1100 - 1024
        assert "too many calls in flight" in str(refused[0])
        assert outcomes.count(text_result("done")) == 1024


async def test_params_that_are_not_an_object_reach_the_browser_without_crashing_the_pod(
    gateway: RunningGateway,
) -> None:
    async with connect_extension(gateway.ws_url, gateway.token) as ext:
        session_id = await attached_extension(gateway, ext)
        [tunnel] = gateway.pod.tunnels.tunnels(session_id)
        with pytest.raises(RpcError) as refused:
            await tunnel.request("tools/call", "x", timeout=5)  # type: ignore[arg-type]
        assert refused.value.code == -32602  # the browser's own answer: no tool named in it
        assert await gateway.pod.tunnels.call_tool(session_id, "browser_echo", {"text": "ok"}) == text_result("echo ok")
