"""`/acp` over a real socket: handshake, frames, the ACP methods and their limits (openab.md §1, §6 1-4)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import websockets
from fake_extension import FakeExtension, RemoteError, connect_extension
from gateway_harness import RunningGateway, run_gateway
from pydantic import SecretStr
from scripted_agent import ScriptedAgent, chunk
from waits import eventually

from openab_browser.core.acp.backend import NoAgentBackend, PromptTurn
from openab_browser.core.errors import ConfigurationError
from openab_browser.core.settings import Settings
from openab_browser.gateway.app import create_app
from openab_browser.gateway.assemble import assemble

pytestmark = pytest.mark.anyio

TEXT = [{"type": "text", "text": "echo hi"}]


async def refused_status(url: str, **connect: Any) -> int:
    with pytest.raises(websockets.InvalidStatus) as refused:
        await websockets.connect(url, open_timeout=5, **connect)
    return refused.value.response.status_code


async def prompt(ext: FakeExtension, session_id: str, text: str, timeout: float = 10) -> Any:
    return await ext.request(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}, timeout=timeout
    )


@contextlib.asynccontextmanager
async def in_session(gateway: RunningGateway) -> AsyncIterator[tuple[FakeExtension, str]]:
    """A scripted extension, initialized, holding one new session."""
    async with connect_extension(gateway.ws_url, gateway.token) as ext:
        await ext.initialize()
        yield ext, await ext.new_session()


async def collect_text(ext: FakeExtension) -> str:
    text = []
    while not ext.inbox.empty():
        message = ext.inbox.get_nowait()
        if message.get("method") == "session/update":
            text.append(message["params"]["update"]["content"]["text"])
    return "".join(text)


# -- handshake --------------------------------------------------------------------------------------------


async def test_a_missing_or_wrong_key_gets_401_before_the_upgrade(gateway: RunningGateway) -> None:
    assert await refused_status(gateway.ws_url, subprotocols=["acp.v1"]) == 401
    assert await refused_status(gateway.ws_url, subprotocols=[f"openab.bearer.wrong-{gateway.token}", "acp.v1"]) == 401
    assert (
        await refused_status(gateway.ws_url, additional_headers={"Authorization": f"Bearer wrong-{gateway.token}"})
        == 401
    )
    # A key in the query string is never accepted: URLs end up in logs and histories.
    assert await refused_status(f"{gateway.ws_url}?token={gateway.token}", subprotocols=["acp.v1"]) == 401


async def test_a_401_says_bearer_and_how_to_present_the_key(gateway: RunningGateway) -> None:
    with pytest.raises(websockets.InvalidStatus) as refused:
        await websockets.connect(gateway.ws_url, open_timeout=5)
    response = refused.value.response
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert b"openab.bearer.<key>" in response.body


async def test_the_key_as_subprotocol_selects_acp_v1_and_names_the_connection(gateway: RunningGateway) -> None:
    async with connect_extension(gateway.ws_url, gateway.token) as ext:
        assert ext.ws.subprotocol == "acp.v1"
        assert ext.ws.response is not None
        connection_id = ext.ws.response.headers["Acp-Connection-Id"]
        assert len(connection_id) == 36
        assert (await ext.initialize())["protocolVersion"] == 1


async def test_the_key_in_an_authorization_header_is_accepted(gateway: RunningGateway) -> None:
    async with connect_extension(gateway.ws_url, gateway.token, use_header=True) as ext:
        assert (await ext.initialize())["protocolVersion"] == 1


async def test_keyless_mode_admits_only_allowed_browser_origins() -> None:
    allowed = "chrome-extension://abcdefghijklmnopabcdefghijklmnop"
    async with run_gateway(keyless=True, allowed_origins=[allowed]) as gw:
        assert await refused_status(gw.ws_url, origin="https://evil.example", subprotocols=["acp.v1"]) == 403
        async with connect_extension(gw.ws_url, None, extra_headers={"Origin": allowed}) as ext:
            assert (await ext.initialize())["protocolVersion"] == 1
        async with connect_extension(gw.ws_url, None) as ext:  # a non-browser client sends no Origin
            assert (await ext.initialize())["protocolVersion"] == 1


def test_keyless_mode_refuses_to_serve_off_loopback() -> None:
    with pytest.raises(ConfigurationError, match="without a key"):
        create_app(assemble(Settings(host="0.0.0.0"), backend=NoAgentBackend()))
    # With a key of at least 128 bits it may (tests/test_gateway_security.py: shorter ones are refused).
    create_app(assemble(Settings(host="0.0.0.0", token=SecretStr("k" * 32)), backend=NoAgentBackend()))


def test_a_key_a_browser_cannot_send_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    create_app(assemble(Settings(token=SecretStr("abc/def=" * 4)), backend=NoAgentBackend()))
    assert "cannot send in the openab.bearer.<key> subprotocol" in caplog.text
    assert "abc/def=" not in caplog.text  # the key itself is never logged
    caplog.clear()
    create_app(assemble(Settings(token=SecretStr("0123abcdef-._~" * 3)), backend=NoAgentBackend()))
    assert caplog.text == ""


async def test_plain_http_on_acp_answers_as_the_websocket_door_would(gateway: RunningGateway) -> None:
    # A browser never says why a WebSocket failed; the extension asks here, and each cause gets its own status.
    async with httpx.AsyncClient() as client:
        url = gateway.base_url + "/acp"
        no_key = await client.get(url)
        wrong_key = await client.get(url, headers={"Authorization": "Bearer " + "x" * 43})
        right_key = await client.get(url, headers={"Authorization": f"Bearer {gateway.token}"})
        wrong_path = await client.get(gateway.base_url + "/ws", headers={"Authorization": f"Bearer {gateway.token}"})
    assert no_key.status_code == wrong_key.status_code == 401
    assert wrong_key.headers["www-authenticate"] == "Bearer"
    assert right_key.status_code == 426 and "the key is right" in right_key.text
    assert wrong_path.status_code == 404
    async with run_gateway(keyless=True) as keyless, httpx.AsyncClient() as client:
        refused = await client.get(keyless.base_url + "/acp", headers={"Origin": "https://evil.example"})
    assert refused.status_code == 403 and "Origin 'https://evil.example' is not allowed" in refused.text


# -- frames -----------------------------------------------------------------------------------------------


async def test_a_frame_over_8_mib_closes_the_socket_with_1009(gateway: RunningGateway) -> None:
    async with connect_extension(gateway.ws_url, gateway.token) as ext:
        await ext.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {"protocolVersion": 1, "pad": "x" * (8 << 20)},
                }
            )
        )
        async with asyncio.timeout(10):
            await ext.closed.wait()
        assert ext.close_code == 1009


async def test_a_frame_of_wide_characters_over_8_mib_of_utf8_closes_with_1009(gateway: RunningGateway) -> None:
    # 3 Mi characters of three bytes each: under the limit counted in characters, 9 MiB on the wire.
    pad = "\u20ac" * (3 << 20)
    async with connect_extension(gateway.ws_url, gateway.token) as ext:
        await ext.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                   "params": {"protocolVersion": 1, "pad": pad}}, ensure_ascii=False))
        async with asyncio.timeout(10):
            await ext.closed.wait()
        assert ext.close_code == 1009


async def test_text_that_is_not_utf8_closes_with_1007_and_cannot_flood_the_log(
    gateway: RunningGateway, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="uvicorn.error")
    for _ in range(20):
        async with connect_extension(gateway.ws_url, gateway.token) as ext:
            await ext.ws.send(b"\xff\xfe not text", text=True)
            async with asyncio.timeout(10):
                await ext.closed.wait()
            assert ext.close_code == 1007
    said = [r for r in caplog.records if r.getMessage().startswith("Invalid UTF-8")]
    # The client's fault, told once as one INFO line, not twenty ERROR tracebacks.
    assert [(r.levelname, r.exc_info, r.exc_text) for r in said] == [("INFO", None, None)]
    async with connect_extension(gateway.ws_url, gateway.token) as ext:
        assert (await ext.initialize())["protocolVersion"] == 1


async def test_a_request_over_1_mib_gets_32000_and_the_socket_lives(gateway: RunningGateway) -> None:
    async with connect_extension(gateway.ws_url, gateway.token) as ext:
        with pytest.raises(RemoteError) as refused:
            await ext.request("initialize", {"protocolVersion": 1, "pad": "x" * (1 << 20)})
        assert refused.value.code == -32000
        assert "exceeds the 1048576-byte limit for `initialize`" in str(refused.value.message)
        assert (await ext.initialize())["protocolVersion"] == 1


async def test_binary_frames_are_ignored(gateway: RunningGateway) -> None:
    async with connect_extension(gateway.ws_url, gateway.token) as ext:
        await ext.ws.send(b'{"jsonrpc":"2.0","id":"bin","method":"initialize","params":{"protocolVersion":1}}')
        assert (await ext.initialize())["protocolVersion"] == 1
        assert ext.inbox.empty()


async def test_garbage_gets_parse_errors_and_the_socket_lives(gateway: RunningGateway) -> None:
    async with connect_extension(gateway.ws_url, gateway.token) as ext:
        await ext.send("{oops")
        reply = await ext.next_message()
        assert reply["id"] is None and reply["error"]["code"] == -32700
        await ext.send('{"jsonrpc":"2.0","id":{},"method":"initialize"}')
        assert (await ext.next_message())["error"]["code"] == -32600
        await ext.send('{"jsonrpc":"1.0","id":5,"method":"initialize","params":{"protocolVersion":1}}')
        reply = await ext.next_message()
        assert reply["id"] == 5 and reply["error"]["code"] == -32600
        assert (await ext.initialize())["protocolVersion"] == 1


# -- methods ----------------------------------------------------------------------------------------------


async def test_initialize_negotiates_version_1_and_advertises_the_contract(gateway: RunningGateway) -> None:
    async with connect_extension(gateway.ws_url, gateway.token) as ext:
        result = await ext.request("initialize", {"protocolVersion": 5, "clientCapabilities": {}})
        assert result["protocolVersion"] == 1
        capabilities = result["agentCapabilities"]
        assert capabilities["loadSession"] is False
        assert capabilities["sessionCapabilities"] == {"resume": {}, "close": {}}
        assert capabilities["promptCapabilities"] == {"image": False, "audio": False, "embeddedContext": False}
        assert capabilities["mcpCapabilities"]["acp"] is True
        assert result["agentInfo"]["name"] == "openab"
        assert result["authMethods"] == []
        with pytest.raises(RemoteError) as old:
            await ext.request("initialize", {"protocolVersion": 0})
        assert (old.value.code, old.value.message) == (-32602, "Unsupported protocolVersion 0; this agent supports 1")
        with pytest.raises(RemoteError) as missing:
            await ext.request("initialize", {})
        assert missing.value.code == -32602 and "Invalid initialize params" in str(missing.value.message)


async def test_session_methods_need_initialize_first(gateway: RunningGateway) -> None:
    async with connect_extension(gateway.ws_url, gateway.token) as ext:
        with pytest.raises(RemoteError) as early:
            await ext.request("session/new", {"cwd": "/", "mcpServers": []})
        assert (early.value.code, early.value.message) == (-32002, "Not initialized")


async def test_session_new_and_resume_validate_their_params(gateway: RunningGateway) -> None:
    async with in_session(gateway) as (ext, session_id):
        assert session_id.startswith("sess_")
        for method, params, words in [
            ("session/new", {"mcpServers": []}, "cwd"),
            ("session/resume", {"cwd": "/"}, "sessionId"),
            ("session/resume", {"sessionId": "sess_nope", "cwd": "/"}, "Invalid sessionId"),
        ]:
            with pytest.raises(RemoteError) as invalid:
                await ext.request(method, params)
            assert invalid.value.code == -32602 and words in str(invalid.value.message)
        assert await ext.request("session/resume", {"sessionId": session_id, "cwd": "/", "mcpServers": []}) == {}


async def test_a_session_id_with_a_trailing_newline_is_refused_and_creates_nothing(gateway: RunningGateway) -> None:
    async with in_session(gateway) as (ext, session_id):
        before = len(gateway.pod.sessions)
        # `$` matches before a final newline: these ids would each have been a new session of their own.
        for sneaky in [f"{session_id}\n", f"sess_{uuid.uuid4()}\n", f"\nsess_{uuid.uuid4()}", f"{session_id}\r\n"]:
            with pytest.raises(RemoteError) as refused:
                await ext.request("session/resume", {"sessionId": sneaky, "cwd": "/", "mcpServers": []})
            assert refused.value.code == -32602 and "Invalid sessionId" in str(refused.value.message)
            assert gateway.pod.sessions.get(sneaky) is None
        assert len(gateway.pod.sessions) == before
        assert gateway.pod.sessions.get(session_id) is not None  # the real one is untouched, and resumes
        assert await ext.request("session/resume", {"sessionId": session_id, "cwd": "/", "mcpServers": []}) == {}


async def test_unknown_methods_get_32601_at_once(gateway: RunningGateway) -> None:
    async with connect_extension(gateway.ws_url, gateway.token) as ext:
        with pytest.raises(RemoteError) as unknown:
            await ext.request("katashiro/ping")
        assert (unknown.value.code, unknown.value.message) == (-32601, "Method not found: katashiro/ping")
        with pytest.raises(RemoteError) as load:
            await ext.request("session/load", {"sessionId": "x"})
        assert load.value.code == -32601


async def test_a_prompt_without_a_backend_fails_clearly(gateway: RunningGateway) -> None:
    async with in_session(gateway) as (ext, session_id):
        with pytest.raises(RemoteError) as failed:
            await prompt(ext, session_id, "hello")
        assert (failed.value.code, failed.value.message) == (-32603, "No agent backend connected")


async def test_session_cancel_is_a_notification_only(gateway: RunningGateway) -> None:
    async with in_session(gateway) as (ext, session_id):
        await ext.notify("session/cancel", {"sessionId": session_id})
        with pytest.raises(RemoteError) as with_id:
            await ext.request("session/cancel", {"sessionId": session_id})
        assert with_id.value.code == -32600
        assert ext.inbox.empty()  # the notification got no answer


async def test_per_connection_session_cap() -> None:
    async with run_gateway(max_sessions_per_connection=3) as gw, connect_extension(gw.ws_url, gw.token) as ext:
        await ext.initialize()
        for _ in range(3):
            await ext.new_session()
        with pytest.raises(RemoteError) as over:
            await ext.new_session()
        assert (over.value.code, over.value.message) == (
            -32000, "Too many sessions on this connection (max 3): close one (session/close) before opening another")


async def test_the_default_caps_are_the_contracts() -> None:
    settings = Settings()
    assert (settings.max_sessions_per_connection, settings.max_inflight_prompts) == (128, 32)
    assert (settings.max_servers_per_session, settings.max_frame_bytes) == (8, 8 << 20)
    assert settings.tunnel_timeout == 170 and settings.keepalive_interval <= 20


# -- prompts with an agent ---------------------------------------------------------------------------------


@pytest.fixture
async def agent_gateway() -> Any:
    agent = ScriptedAgent()
    async with run_gateway(backend=agent, prompt_idle_timeout=1.0, cancel_grace=1.0) as gw:
        gw.agent = agent  # type: ignore[attr-defined]
        yield gw


async def test_a_long_reply_streams_whole_and_in_order(agent_gateway: RunningGateway) -> None:
    async with in_session(agent_gateway) as (ext, session_id):
        assert await prompt(ext, session_id, "lines 600") == {"stopReason": "end_turn"}
        text = await collect_text(ext)
        lines = text.splitlines()
        assert len(text) > 4096
        assert lines[0] == "LINE 0001" and lines[-1] == "LINE 0600" and len(lines) == 600


async def test_text_and_resource_links_pass_and_other_blocks_are_refused(agent_gateway: RunningGateway) -> None:
    agent: ScriptedAgent = agent_gateway.agent  # type: ignore[attr-defined]
    async with in_session(agent_gateway) as (ext, session_id):
        blocks = [
            {"type": "text", "text": "echo 你好 🎉 👨‍👩‍👧‍👦 ❤️"},
            {"type": "resource_link", "uri": "file:///x", "name": "X"},
        ]
        assert await ext.request("session/prompt", {"sessionId": session_id, "prompt": blocks}) == {
            "stopReason": "end_turn"
        }
        assert await collect_text(ext) == "你好 🎉 👨‍👩‍👧‍👦 ❤️"
        assert agent.prompts[-1][1] == blocks
        for bad, words in [
            ([{"type": "image", "data": "", "mimeType": "image/png"}], "Unsupported prompt content block type 'image'"),
            ([{"type": "text", "text": "  "}], "Empty prompt"),
            ("not a list", "prompt must be an array"),
        ]:
            with pytest.raises(RemoteError) as refused:
                await ext.request("session/prompt", {"sessionId": session_id, "prompt": bad})
            assert refused.value.code == -32602 and words in str(refused.value.message)
        with pytest.raises(RemoteError) as unknown:
            await ext.request(
                "session/prompt", {"sessionId": "sess_00000000-0000-0000-0000-000000000000", "prompt": TEXT}
            )
        assert unknown.value.code == -32602 and "Unknown session" in str(unknown.value.message)
        with pytest.raises(RemoteError) as missing:
            await ext.request("session/prompt", {"prompt": TEXT})
        assert (missing.value.code, missing.value.message) == (-32602, "Missing sessionId")


async def test_heartbeats_and_other_sessions_are_answered_while_a_prompt_runs(agent_gateway: RunningGateway) -> None:
    async with in_session(agent_gateway) as (ext, session_id):
        running = asyncio.create_task(prompt(ext, session_id, "wait"))
        await ext.wait_notification("session/update")
        with pytest.raises(RemoteError) as ping:
            await ext.request("katashiro/ping", timeout=2)
        assert ping.value.code == -32601
        other = await ext.new_session()
        assert await prompt(ext, other, "echo other") == {"stopReason": "end_turn"}
        with pytest.raises(RemoteError) as busy:
            await prompt(ext, session_id, "echo again")
        assert (busy.value.code, busy.value.message) == (-32001, "Session busy: a prompt is already in progress")
        with pytest.raises(RemoteError) as resume_busy:
            await ext.request("session/resume", {"sessionId": session_id, "cwd": "/"})
        assert resume_busy.value.code == -32001
        await ext.notify("session/cancel", {"sessionId": session_id})
        assert await running == {"stopReason": "cancelled"}
        assert await prompt(ext, session_id, "echo after") == {"stopReason": "end_turn"}


async def test_cancel_answers_cancelled_even_when_the_agent_ignores_it(agent_gateway: RunningGateway) -> None:
    agent: ScriptedAgent = agent_gateway.agent  # type: ignore[attr-defined]
    agent.ignore_cancel = True
    async with in_session(agent_gateway) as (ext, session_id):
        running = asyncio.create_task(prompt(ext, session_id, "wait"))
        await ext.wait_notification("session/update")
        await ext.notify("session/cancel", {"sessionId": session_id})
        assert await running == {"stopReason": "cancelled"}
        assert agent.cancelled == [session_id]


async def test_a_silent_agent_times_out_and_the_session_prompts_again(agent_gateway: RunningGateway) -> None:
    async with in_session(agent_gateway) as (ext, session_id):
        with pytest.raises(RemoteError) as silent:
            await prompt(ext, session_id, "silent")
        assert (silent.value.code, silent.value.message) == (-32603, "Timed out waiting for agent backend")
        assert await prompt(ext, session_id, "echo again") == {"stopReason": "end_turn"}


async def test_an_agent_crash_is_a_clear_error_and_the_session_survives(agent_gateway: RunningGateway) -> None:
    async with in_session(agent_gateway) as (ext, session_id):
        with pytest.raises(RemoteError) as crashed:
            await prompt(ext, session_id, "crash")
        assert crashed.value.code == -32603
        assert await prompt(ext, session_id, "echo fine") == {"stopReason": "end_turn"}


def nested(depth: int) -> Any:
    """A list nested ``depth`` levels deep (``[]`` is one level)."""
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


async def test_a_prompt_nested_past_the_bound_gets_32600_naming_it_and_the_socket_lives(
    agent_gateway: RunningGateway, caplog: pytest.LogCaptureFixture
) -> None:
    agent: ScriptedAgent = agent_gateway.agent  # type: ignore[attr-defined]
    async with in_session(agent_gateway) as (ext, session_id):
        # envelope (1), params (2), prompt (3), block (4): the extra list makes the rest.
        for depth, accepted in [(128, True), (129, False), (300, False)]:
            block = {"type": "text", "text": "echo deep", "extra": nested(depth - 4)}
            params = {"sessionId": session_id, "prompt": [block]}
            if accepted:
                assert await ext.request("session/prompt", params) == {"stopReason": "end_turn"}
                continue
            prompts = len(agent.prompts)
            with pytest.raises(RemoteError) as refused:
                await ext.request("session/prompt", params)
            assert refused.value.code == -32600
            assert "nested more than 128 levels deep" in str(refused.value.message)
            assert len(agent.prompts) == prompts  # it never reached the agent
        assert await prompt(ext, session_id, "echo still here") == {"stopReason": "end_turn"}
    assert "Traceback" not in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def flooding_agent() -> ScriptedAgent:
    """An agent whose prompt "flood" answers with 200 MiB of updates, far past the 64 MiB send buffer."""
    agent = ScriptedAgent()
    big = "x" * (1 << 20)

    async def flood(turn: PromptTurn, _text: str) -> str:
        for _ in range(200):
            turn.send_update(chunk(big))
            await asyncio.sleep(0)  # lets the writer push what the socket takes
        return "end_turn"

    agent.scripts["flood"] = flood
    return agent


async def test_a_client_that_stops_reading_is_closed_with_1008_and_the_true_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    agent = flooding_agent()
    caplog.set_level(logging.INFO, logger="openab_browser")
    async with run_gateway(backend=agent) as gw:
        # A raw client: it reads the handshake's answers, then nothing (a tiny queue, so it stops at once).
        # Uncompressed, as a screenshot would be: a MiB of "x" deflates to almost nothing on the wire.
        ws = await websockets.connect(
            gw.ws_url, subprotocols=[f"openab.bearer.{gw.token}", "acp.v1"],  # type: ignore[list-item]
            max_size=4 << 20, max_queue=1, open_timeout=10, ping_interval=None, compression=None,
        )
        try:
            async def call(request_id: int, method: str, params: dict[str, Any]) -> Any:
                await ws.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
                async with asyncio.timeout(10):
                    while True:
                        answer = json.loads(await ws.recv())
                        if answer.get("id") == request_id:
                            return answer["result"]

            await call(1, "initialize", {"protocolVersion": 1})
            session_id = (await call(2, "session/new", {"cwd": "/", "mcpServers": []}))["sessionId"]
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
                "sessionId": session_id, "prompt": [{"type": "text", "text": "flood"}]}}))
            # The server gives the connection up: its sessions are released while the client still reads nothing.
            await eventually(lambda: len(gw.pod.connections) == 0, timeout=30)
            # Now the client reads what was queued, then finds the close frame: the server closed, saying why.
            with pytest.raises(websockets.ConnectionClosed) as closed:
                async with asyncio.timeout(30):
                    while True:
                        await ws.recv()
        finally:
            await ws.close()
    assert closed.value.rcvd is not None, "the server must send a close frame, not drop the socket"
    assert closed.value.rcvd.code == 1008
    assert "send buffer over 67108864 bytes: the peer is not reading" in closed.value.rcvd.reason
    assert "closing the socket with 1008: send buffer over 67108864 bytes" in caplog.text
    assert "client closed the socket" not in caplog.text


async def test_a_client_that_never_reads_again_loses_its_socket_once_the_close_frame_cannot_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import openab_browser.gateway.acp_endpoint as endpoint

    monkeypatch.setattr(endpoint, "CLOSE_TIMEOUT", 1.0)
    agent = flooding_agent()
    async with run_gateway(backend=agent) as gw:
        ws = await websockets.connect(
            gw.ws_url, subprotocols=[f"openab.bearer.{gw.token}", "acp.v1"],  # type: ignore[list-item]
            max_size=4 << 20, max_queue=1, open_timeout=10, ping_interval=None, compression=None,
        )
        try:
            for request_id, method, params in ((1, "initialize", {"protocolVersion": 1}),
                                               (2, "session/new", {"cwd": "/", "mcpServers": []})):
                await ws.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
                async with asyncio.timeout(10):
                    answer = json.loads(await ws.recv())
            session_id = answer["result"]["sessionId"]
            assert len(gw.guard) == 1
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
                "sessionId": session_id, "prompt": [{"type": "text", "text": "flood"}]}}))
            # The client reads nothing, ever again: its socket, and the fd and buffers behind it, must still go
            # once the close frame has had its bounded time, not when the client finally gives up.
            await eventually(lambda: len(gw.pod.connections) == 0, timeout=30)
            await eventually(lambda: len(gw.guard) == 0, timeout=15)
        finally:
            ws.transport.abort()


async def test_permission_requests_reach_an_extension_that_answers_them(agent_gateway: RunningGateway) -> None:
    async with connect_extension(agent_gateway.ws_url, agent_gateway.token) as ext:
        await ext.initialize()
        session_id = await ext.new_session(_meta={"dev.openab/permissionRelay": True})
        running = asyncio.create_task(prompt(ext, session_id, "permission"))
        asked = await ext.wait_notification("session/request_permission")
        assert asked["params"]["sessionId"] == session_id
        assert [o["optionId"] for o in asked["params"]["options"]] == ["allow", "reject"]
        await ext.send(
            {"jsonrpc": "2.0", "id": asked["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow"}}}
        )
        assert await running == {"stopReason": "end_turn"}
        assert json.loads(await collect_text(ext)) == {"outcome": {"outcome": "selected", "optionId": "allow"}}


async def test_closing_the_socket_cancels_the_agents_turn(agent_gateway: RunningGateway) -> None:
    agent: ScriptedAgent = agent_gateway.agent  # type: ignore[attr-defined]
    async with in_session(agent_gateway) as (ext, session_id):
        orphaned = asyncio.create_task(prompt(ext, session_id, "wait"))
        await ext.wait_notification("session/update")
    with pytest.raises(ConnectionError):
        await orphaned  # the client sees its socket close; the pod must stop the agent
    await eventually(lambda: session_id in agent.cancelled)
    assert not agent_gateway.pod.sessions.get(session_id).prompting  # type: ignore[union-attr]


async def test_an_idle_socket_gets_keepalive_notifications() -> None:
    async with run_gateway(keepalive_interval=0.2) as gw, connect_extension(gw.ws_url, gw.token) as ext:
        await ext.initialize()
        keepalive = await ext.wait_notification("_openab/keepalive", timeout=5)
        assert "id" not in keepalive


async def test_idle_sessions_without_a_socket_are_evicted() -> None:
    agent = ScriptedAgent()
    async with run_gateway(backend=agent, session_idle_ttl=0.3) as gw:
        async with connect_extension(gw.ws_url, gw.token) as ext:
            await ext.initialize()
            session_id = await ext.new_session()
        await eventually(lambda: gw.pod.sessions.get(session_id) is None, timeout=10)
        assert agent.closed == [session_id]


@pytest.mark.parametrize(("env", "flag", "deflate"), [
    ({}, None, True), ({"OPENAB_WS_DEFLATE": "false"}, None, False), ({}, False, False),
])
async def test_permessage_deflate_is_taken_when_offered_unless_the_pod_declines_it(
    env: dict[str, str], flag: bool | None, deflate: bool,
) -> None:
    # Chrome offers it on every socket; a pod on a LAN declines it (docs/benchmarks.md, large results).
    settings = Settings.from_env(env, ws_deflate=flag)
    async with run_gateway(ws_deflate=settings.ws_deflate) as gateway:
        assert gateway.token is not None
        offered = [f"openab.bearer.{gateway.token}", "acp.v1"]
        async with websockets.connect(gateway.ws_url, subprotocols=offered,  # type: ignore[arg-type]
                                      compression="deflate", open_timeout=10) as ws:
            assert ws.response is not None
            taken = ws.response.headers.get("Sec-WebSocket-Extensions") or ""
            assert ("permessage-deflate" in taken) is deflate, taken
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                      "params": {"protocolVersion": 1}}))
            answer = json.loads(await asyncio.wait_for(ws.recv(), 10))
            assert answer["id"] == 1 and "result" in answer
