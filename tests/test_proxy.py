"""Proxy mode end to end: the official `mcp` client -> our loopback endpoint -> tunnel -> a scripted extension.

Everything runs for real on 127.0.0.1: the gateway (uvicorn, port 0), the extension's `/acp` WebSocket, and
one proxy listener per session. The `mcp` 2.3.0 client is the independent peer on the agent side.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from fake_extension import FakeExtension, connect_extension, text_result
from gateway_harness import RunningGateway, run_gateway
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent
from waits import eventually

from openab_browser.core.agents.config.claims import ConfigClaims
from openab_browser.core.agents.provision import acp_server_entry
from openab_browser.core.errors import ConfigConflict
from openab_browser.core.mcp.access import HttpEndpoint
from openab_browser.core.mcp.proxy import BrowserProxy
from openab_browser.core.mcp.tools import BROWSER_TOOLS
from openab_browser.core.tunnel.registry import BROWSER_NOT_CONNECTED

pytestmark = pytest.mark.anyio

BROWSER = {"type": "acp", "name": "browser", "serverId": "browser-1"}


def first_text(result: CallToolResult) -> str:
    """The text of the first content block, which these tools answer with."""
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


@contextlib.asynccontextmanager
async def proxied() -> AsyncIterator[tuple[RunningGateway, BrowserProxy]]:
    async with run_gateway() as gateway:
        assert isinstance(gateway.pod.browser, BrowserProxy)  # proxy mode is the default
        yield gateway, gateway.pod.browser


@contextlib.asynccontextmanager
async def extension(gateway: RunningGateway) -> AsyncIterator[FakeExtension]:
    async with connect_extension(gateway.ws_url, gateway.token) as ext:
        await ext.initialize()
        yield ext


async def open_session(gateway: RunningGateway, ext: FakeExtension, *, browser: bool = True) -> str:
    session_id = await ext.new_session([BROWSER] if browser else [])
    if browser:
        await gateway.pod.tunnels.wait_attached(session_id, timeout=10)
    return session_id


async def endpoint(gateway: RunningGateway, proxy: BrowserProxy, session_id: str) -> tuple[str, str]:
    session = gateway.pod.sessions.get(session_id)
    assert session is not None
    found = await proxy.open(session)
    assert found.mode == "proxy"
    config = found.entry
    assert isinstance(config, HttpEndpoint)
    assert acp_server_entry(config) == {
        "type": "http",
        "name": "openab_browser",
        "url": config.url,
        "headers": [{"name": "Authorization", "value": f"Bearer {config.token}"}],
    }
    assert config.token not in repr(found)  # endpoints get logged; tokens must not
    return config.url, config.token


@contextlib.asynccontextmanager
async def mcp_client(
    url: str, token: str, *, mode: str = "legacy", sse_event_bytes: int | None = 1 << 20, **options: Any
) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http,
        Client(streamable_http_client(url, http_client=http, max_sse_event_size=sse_event_bytes), mode=mode,
               **options) as client,
    ):
        yield client


# -- tools through the proxy ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_agent_lists_and_calls_the_browser_tools(mode: str) -> None:
    clicked: list[dict[str, Any]] = []

    async def click(arguments: dict[str, Any]) -> dict[str, Any]:
        clicked.append(arguments)
        return text_result(f"clicked {arguments['ref']}")

    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        # An upstream-style dotted name: valid for the browser, rejected by OpenAI-backed agents.
        ext.add_tool("browser.click", click, {"type": "object", "properties": {"ref": {"type": "string"}}})
        ext.add_tool("browser_read_dom", lambda _a: _text("<body/>"))
        url, token = await endpoint(gateway, proxy, await open_session(gateway, ext))
        async with mcp_client(url, token, mode=mode) as client:
            assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
            names = [tool.name for tool in (await client.list_tools()).tools]
            assert names == ["browser_click", "browser_read_dom"]
            result = await client.call_tool("browser_click", {"ref": "e6"})
    assert not result.is_error
    assert first_text(result) == "clicked e6"
    assert clicked == [{"ref": "e6"}]


async def _text(text: str) -> dict[str, Any]:
    return text_result(text)


async def test_without_a_browser_the_known_tools_are_listed_and_calls_say_what_to_do() -> None:
    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        url, token = await endpoint(gateway, proxy, await open_session(gateway, ext, browser=False))
        async with mcp_client(url, token) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            result = await client.call_tool("browser_navigate", {"url": "https://example.com"})
    assert names == {tool["name"] for tool in BROWSER_TOOLS}
    assert {"browser_read_dom", "browser_screenshot", "browser_navigate", "browser_click", "browser_type",
            "browser_snapshot", "browser_tabs", "browser_wait_for", "browser_press_key", "browser_select_option",
            "browser_scroll", "browser_back"} <= names
    assert result.is_error
    assert first_text(result) == BROWSER_NOT_CONNECTED


async def test_a_browser_attaching_later_sends_list_changed_and_its_tools() -> None:
    seen: list[str] = []
    changed = asyncio.Event()

    async def on_message(message: Any) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if method is not None:
            seen.append(method)
        if method == "notifications/tools/list_changed":
            changed.set()

    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        ext.add_tool("browser_whoami", lambda _a: _text("late browser"))
        session_id = await open_session(gateway, ext, browser=False)
        url, token = await endpoint(gateway, proxy, session_id)
        async with mcp_client(url, token, message_handler=on_message) as client:
            before = {tool.name for tool in (await client.list_tools()).tools}
            await ext.request("session/resume", {"sessionId": session_id, "cwd": "/", "mcpServers": [BROWSER]})
            async with asyncio.timeout(10):
                await changed.wait()
            after = [tool.name for tool in (await client.list_tools()).tools]
            result = await client.call_tool("browser_whoami", {})
    assert "browser_whoami" not in before
    assert after == ["browser_whoami"]
    assert first_text(result) == "late browser"


async def test_a_2026_client_hears_of_an_attaching_browser_on_its_listen_stream() -> None:
    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        ext.add_tool("browser_whoami", lambda _a: _text("late browser"))
        session_id = await open_session(gateway, ext, browser=False)
        url, token = await endpoint(gateway, proxy, session_id)
        async with mcp_client(url, token, mode="auto") as client:
            assert client.protocol_version == "2026-07-28"
            async with client.listen(tools_list_changed=True) as subscription:
                assert subscription.honored.tools_list_changed
                await ext.request("session/resume", {"sessionId": session_id, "cwd": "/", "mcpServers": [BROWSER]})
                async with asyncio.timeout(10):
                    event = await anext(aiter(subscription))
                assert type(event).__name__ == "ToolsListChanged"
                after = [tool.name for tool in (await client.list_tools()).tools]
    assert after == ["browser_whoami"]


async def test_a_6_mib_screenshot_arrives_intact() -> None:
    image = base64.b64encode(bytes(range(256)) * (6 * 1024 * 1024 // 256 * 3 // 4)).decode()
    assert len(image) >= 6 * 1024 * 1024

    async def screenshot(_arguments: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "image", "data": image, "mimeType": "image/jpeg"}]}

    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        ext.add_tool("browser_screenshot", screenshot)
        url, token = await endpoint(gateway, proxy, await open_session(gateway, ext))
        async with mcp_client(url, token) as client:
            result = await client.call_tool("browser_screenshot", {})
    assert result.content[0].type == "image"
    assert result.content[0].data == image
    assert result.content[0].mime_type == "image/jpeg"


async def test_text_over_the_bound_is_cut_with_a_marker_that_says_how_to_get_the_rest() -> None:
    page = "x" * (3 << 20)

    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        ext.add_tool("browser_read_dom", lambda _a: _text(page))
        url, token = await endpoint(gateway, proxy, await open_session(gateway, ext))
        async with mcp_client(url, token) as client:
            result = await client.call_tool("browser_read_dom", {})
    text = first_text(result)
    assert text.startswith("x" * (1 << 20))
    assert "x" * ((1 << 20) + 1) not in text
    assert "truncated" in text and "max_chars" in text and "offset" in text
    assert f"{(3 << 20) - (1 << 20)} of {3 << 20} characters" in text


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_cancelling_a_call_reaches_the_extension(mode: str) -> None:
    # legacy: notifications/cancelled; 2026-07-28: the client closes the request's response.
    started = asyncio.Event()

    async def wait_forever(_arguments: dict[str, Any]) -> dict[str, Any]:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        ext.add_tool("browser_wait_for", wait_forever)
        url, token = await endpoint(gateway, proxy, await open_session(gateway, ext))
        async with mcp_client(url, token, mode=mode) as client:
            call = asyncio.create_task(client.call_tool("browser_wait_for", {"text": "never"}))
            async with asyncio.timeout(10):
                await started.wait()
            call.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await call
            await eventually(lambda: len(ext.cancelled) == 1, 10)
            # The endpoint is still good for the next call.
            ext.add_tool("browser_back", lambda _a: _text("went back"))
            await ext.tools_changed()
            await eventually(lambda: any(t.get("name") == "browser_back"
                                         for t in gateway.pod.tunnels.tunnels(ext_session(gateway))[0].tools or []), 10)
            result = await client.call_tool("browser_back", {})
    assert first_text(result) == "went back"


def ext_session(gateway: RunningGateway) -> str:
    (session,) = gateway.pod.sessions.all()
    return session.id


@pytest.mark.parametrize("image", [False, True], ids=["text", "6 MiB image"])
async def test_progress_from_the_browser_reaches_the_agent(image: bool) -> None:
    # With progress first the answer is an SSE event: a passed-through image must arrive whole in it too.
    updates: list[tuple[float, float | None, str | None]] = []
    picture = base64.b64encode(os.urandom(6 * 1024 * 1024 // 4 * 3)).decode() if image else ""

    async with proxied() as (gateway, proxy), extension(gateway) as ext:

        async def navigate(_arguments: dict[str, Any]) -> dict[str, Any]:
            call = next(m for m in reversed(ext.server_requests)
                        if m.get("params", {}).get("method") == "tools/call")
            token = call["params"]["params"]["_meta"]["progressToken"]
            connection_id = call["params"]["connectionId"]
            for step in (1, 2):
                await ext.notify("mcp/message", {
                    "connectionId": connection_id, "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": step, "total": 2, "message": f"step {step}"},
                })
            await asyncio.sleep(0.05)  # let the progress frames overtake the result on the socket
            if image:
                return {"content": [{"type": "text", "text": "loaded"},
                                    {"type": "image", "data": picture, "mimeType": "image/png"}]}
            return text_result("loaded")

        ext.add_tool("browser_navigate", navigate)
        url, token = await endpoint(gateway, proxy, await open_session(gateway, ext))

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            updates.append((progress, total, message))

        # The SDK's client refuses an SSE event over 1 MiB unless told otherwise (docs/proxy.md says so).
        async with mcp_client(url, token, sse_event_bytes=None if image else 1 << 20) as client:
            result = await client.call_tool("browser_navigate", {"url": "https://example.com"},
                                            progress_callback=on_progress)
    assert first_text(result) == "loaded"
    assert updates == [(1, 2, "step 1"), (2, 2, "step 2")]
    if image:
        assert result.content[1].type == "image" and result.content[1].data == picture


# -- the HTTP gate -------------------------------------------------------------------------------------------

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
STATELESS_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
               "io.modelcontextprotocol/clientCapabilities": {}}


async def test_the_http_gate_refuses_what_it_must() -> None:
    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        url, token = await endpoint(gateway, proxy, await open_session(gateway, ext, browser=False))
        auth = {"Authorization": f"Bearer {token}", **ACCEPT}
        async with httpx.AsyncClient(timeout=10) as http:
            no_token = await http.post(url, json=INIT, headers=ACCEPT)
            wrong = await http.post(url, json=INIT, headers={**ACCEPT, "Authorization": "Bearer " + "x" * 43})
            origin = await http.post(url, json=INIT, headers={**auth, "Origin": "https://evil.example"})
            host = await http.post(url, json=INIT, headers={**auth, "Host": "evil.example"})
            unknown = await http.post(url, json=INIT, headers={**auth, "Mcp-Session-Id": "no-such-session"})
            put = await http.put(url, json=INIT, headers=auth)
            stateless_get = await http.get(url, headers={**auth, "MCP-Protocol-Version": "2026-07-28"})
            no_session = await http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=auth)
            not_json = await http.post(url, content=b"{}", headers={**auth, "Content-Type": "text/plain"})
            html_only = await http.post(url, json=INIT, headers={**auth, "Accept": "text/html"})
            huge = await http.post(url, content=b" " * (2 << 20), headers=auth)
            garbage = await http.post(url, content=b"{not json", headers=auth)
            other_path = await http.post(url.removesuffix("/mcp") + "/other", json=INIT, headers=auth)
            stateless_headers = {**auth, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}
            listed = {"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {"_meta": STATELESS_META}}
            stateless = await http.post(url, json=listed, headers=stateless_headers)
            mismatch = await http.post(url, json=listed, headers={**stateless_headers, "Mcp-Method": "tools/call"})
            future = {**STATELESS_META, "io.modelcontextprotocol/protocolVersion": "2031-01-01"}
            too_new = await http.post(url, headers={**stateless_headers, "MCP-Protocol-Version": "2031-01-01"},
                                      json={**listed, "params": {"_meta": future}})
            no_method = await http.post(url, json={**listed, "method": "prompts/list"},
                                        headers={**stateless_headers, "Mcp-Method": "prompts/list"})
            sse_only = await http.post(url, json=INIT, headers={**auth, "Accept": "text/event-stream"})
            doubled = await http.post(url, json=INIT, headers=[*auth.items(), ("Authorization", "Bearer x")])
            ok = await http.post(url, json=INIT, headers=auth)
            session_id = ok.headers["mcp-session-id"]
            deleted = await http.delete(url, headers={**auth, "Mcp-Session-Id": session_id})
            after_delete = await http.post(url, json={"jsonrpc": "2.0", "id": 3, "method": "ping"},
                                           headers={**auth, "Mcp-Session-Id": session_id})
    assert (no_token.status_code, wrong.status_code) == (401, 401)
    assert no_token.headers["www-authenticate"].startswith("Bearer")
    assert token not in no_token.text + wrong.text
    assert (origin.status_code, host.status_code) == (403, 403)
    assert unknown.status_code == 404
    assert put.status_code == 405 and "POST" in put.headers["allow"]
    assert stateless_get.status_code == 405
    assert no_session.status_code == 400
    assert not_json.status_code == 415
    assert html_only.status_code == 406
    assert huge.status_code == 413
    assert garbage.status_code == 400 and garbage.json()["error"]["code"] == -32700
    assert other_path.status_code == 404
    assert stateless.status_code == 200 and stateless.json()["result"]["resultType"] == "complete"
    assert len(stateless.json()["result"]["tools"]) == len(BROWSER_TOOLS) and "mcp-session-id" not in stateless.headers
    assert mismatch.status_code == 400 and mismatch.json()["error"]["code"] == -32020
    assert too_new.status_code == 400 and too_new.json()["error"]["code"] == -32022
    assert no_method.status_code == 404 and no_method.json()["error"]["code"] == -32601
    assert sse_only.status_code == 200 and sse_only.headers["content-type"] == "text/event-stream"
    assert '"protocolVersion":"2025-06-18"' in sse_only.text
    assert doubled.status_code == 400
    assert ok.status_code == 200 and ok.json()["result"]["protocolVersion"] == "2025-06-18"
    assert len(session_id) >= 43
    assert deleted.status_code == 204
    assert after_delete.status_code == 404


# -- sessions ------------------------------------------------------------------------------------------------


async def test_two_sessions_each_reach_only_their_own_browser_and_eviction_closes_one() -> None:
    async with proxied() as (gateway, proxy), extension(gateway) as ext_a, extension(gateway) as ext_b:
        ext_a.add_tool("browser_whoami", lambda _a: _text("browser A"))
        ext_b.add_tool("browser_whoami", lambda _a: _text("browser B"))
        session_a = await open_session(gateway, ext_a)
        session_b = await open_session(gateway, ext_b)
        url_a, token_a = await endpoint(gateway, proxy, session_a)
        url_b, token_b = await endpoint(gateway, proxy, session_b)
        assert url_a != url_b and token_a != token_b
        async with mcp_client(url_a, token_a) as client:
            assert first_text(await client.call_tool("browser_whoami", {})) == "browser A"
        async with mcp_client(url_b, token_b) as client:
            assert first_text(await client.call_tool("browser_whoami", {})) == "browser B"
        async with httpx.AsyncClient(timeout=10) as http:
            crossed = await http.post(url_a, json=INIT, headers={**ACCEPT, "Authorization": f"Bearer {token_b}"})
        assert crossed.status_code == 401

        await gateway.pod.evict(session_a, "test")
        assert proxy.endpoint(session_a) is None
        async with httpx.AsyncClient(timeout=10) as http:
            with pytest.raises(httpx.ConnectError):
                await http.post(url_a, json=INIT, headers={**ACCEPT, "Authorization": f"Bearer {token_a}"})
        async with mcp_client(url_b, token_b) as client:
            assert first_text(await client.call_tool("browser_whoami", {})) == "browser B"


async def test_a_released_claim_strips_the_config_it_wrote_and_sessions_never_share_a_file(
    tmp_path: Path,
) -> None:
    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        session_a = gateway.pod.sessions.get(await open_session(gateway, ext, browser=False))
        session_b = gateway.pod.sessions.get(await open_session(gateway, ext, browser=False))
        assert session_a is not None and session_b is not None
        entry_a, entry_b = (await proxy.open(session_a)).entry, (await proxy.open(session_b)).entry
        claims = ConfigClaims()  # the agent runtime's, which writes for agents that read their config file
        written = claims.write(session_a.id, "claude", entry_a, tmp_path / "a", home=tmp_path / "home")
        mcp_json = tmp_path / "a" / ".mcp.json"
        assert mcp_json in written
        entry = json.loads(mcp_json.read_text())["mcpServers"]["openab_browser"]
        url, token = await endpoint(gateway, proxy, session_a.id)
        assert entry["url"] == url and entry["headers"]["Authorization"] == f"Bearer {token}"
        assert mcp_json.stat().st_mode & 0o777 == 0o600

        with pytest.raises(ConfigConflict, match=session_a.id):
            claims.write(session_b.id, "claude", entry_b, tmp_path / "a", home=tmp_path / "home")
        assert json.loads(mcp_json.read_text())["mcpServers"]["openab_browser"]["url"] == url
        claims.write(session_b.id, "claude", entry_b, tmp_path / "b", home=tmp_path / "home")

        claims.release(session_a.id)  # what the runtime does when session A's agent stops
        assert "openab_browser" not in json.loads(mcp_json.read_text()).get("mcpServers", {})
        assert "openab_browser" in json.loads((tmp_path / "b" / ".mcp.json").read_text())["mcpServers"]
        # The file is free again for a live session.
        claims.write(session_b.id, "claude", entry_b, tmp_path / "a", home=tmp_path / "home")


async def test_unknown_tools_and_bad_requests_get_json_rpc_errors() -> None:
    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        ext.add_tool("browser_click", lambda _a: _text("clicked"))
        url, token = await endpoint(gateway, proxy, await open_session(gateway, ext))
        async with mcp_client(url, token) as client:
            with pytest.raises(MCPError) as raised:
                await client.call_tool("browser_fly", {})
    assert raised.value.error.code == -32602
    assert "browser_click" in raised.value.error.message


async def test_no_listener_outlives_its_session_or_the_pod() -> None:
    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        first = await open_session(gateway, ext, browser=False)
        url_a, token_a = await endpoint(gateway, proxy, first)
        # A resume keeps the session's endpoint: the agent's config stays valid.
        await ext.request("session/resume", {"sessionId": first, "cwd": "/"})
        assert await endpoint(gateway, proxy, first) == (url_a, token_a)
        url_b, _ = await endpoint(gateway, proxy, await open_session(gateway, ext, browser=False))
        closed = gateway.pod.sessions.get(first)
        assert closed is not None
        await gateway.pod.evict(first, "test")
        with pytest.raises(LookupError, match="closed"):
            await proxy.open(closed)  # a late open of an evicted session opens nothing
        assert proxy.endpoint(first) is None
    # The gateway has shut down: the pod evicted every session and every listener went with it.
    async with httpx.AsyncClient(timeout=10) as http:
        for url in (url_a, url_b):
            with pytest.raises(httpx.ConnectError):
                await http.post(url, json=INIT, headers=ACCEPT)


async def test_malformed_posts_get_errors_and_the_endpoint_keeps_serving() -> None:
    bodies = [b"", b"null", b"[]", b"[{}]", b'"text"', b"{}", b'{"id": 1}',
              b'{"jsonrpc": "2.0", "id": {}, "method": 1}',
              b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": "x"}', b"\xff\xfe", b"[" * 100_000,
              b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": []}']
    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        url, token = await endpoint(gateway, proxy, await open_session(gateway, ext, browser=False))
        auth = {"Authorization": f"Bearer {token}", **ACCEPT}
        async with httpx.AsyncClient(timeout=10) as http:
            answers = [await http.post(url, content=body, headers=auth) for body in bodies]
            ping = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                   headers={**auth, "Mcp-Session-Id": "unknown"})
            alive = await http.post(url, json=INIT, headers=auth)
        sessions = len(app_of(proxy).sessions)
    for body, answer in zip(bodies, answers, strict=True):
        assert answer.status_code in (200, 202, 400), (body[:40], answer.status_code)
        if answer.status_code != 202:
            assert "error" in answer.json() or "result" in answer.json()
    assert ping.status_code == 404
    assert alive.status_code == 200
    # A failed initialize leaves no MCP session behind.
    assert answers[-1].json()["error"]["code"] == -32602 and "mcp-session-id" not in answers[-1].headers
    assert sessions == 1


def app_of(proxy: BrowserProxy) -> Any:
    (found,) = proxy._endpoints.values()
    return found.app


async def test_a_new_get_stream_takes_over_and_delete_ends_it() -> None:
    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        ext.add_tool("browser_whoami", lambda _a: _text("late browser"))
        session_id = await open_session(gateway, ext, browser=False)
        url, token = await endpoint(gateway, proxy, session_id)
        auth = {"Authorization": f"Bearer {token}", **ACCEPT}
        async with httpx.AsyncClient(timeout=10) as http:
            opened = await http.post(url, json=INIT, headers=auth)
            mcp_session = {**auth, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
            await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=mcp_session)
            async with http.stream("GET", url, headers=mcp_session) as first:
                assert first.headers["content-type"] == "text/event-stream"
                async with http.stream("GET", url, headers=mcp_session) as second:
                    assert b"".join([chunk async for chunk in first.aiter_bytes()]) == b""  # replaced: ended
                    await ext.request("session/resume", {"sessionId": session_id, "cwd": "/",
                                                         "mcpServers": [BROWSER]})
                    lines = second.aiter_lines()
                    async with asyncio.timeout(10):
                        while await anext(lines) != "event: message":
                            pass
                        data = await anext(lines)
                    assert json.loads(data.removeprefix("data: ")) == {
                        "jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
                    deleted = await http.delete(url, headers=mcp_session)
                    assert deleted.status_code == 204
                    async with asyncio.timeout(10):
                        rest = [line async for line in lines]
                    assert all(not line or line.startswith(":") for line in rest)  # and then it ended


async def test_a_body_that_never_arrives_gets_408_not_a_stuck_connection() -> None:
    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        url, token = await endpoint(gateway, proxy, await open_session(gateway, ext, browser=False))
        app_of(proxy).body_timeout = 0.2  # the default is 30 s
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
                     "Content-Type: application/json\r\nAccept: application/json\r\n"
                     "Content-Length: 100\r\n\r\n{".encode())
        await writer.drain()
        async with asyncio.timeout(10):
            status_line = await reader.readline()
        writer.close()
    assert status_line.startswith(b"HTTP/1.1 408")
