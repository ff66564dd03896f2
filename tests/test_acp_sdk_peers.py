"""Independent peers on the other end of `/acp`: the official ACP SDKs, Python and TypeScript.

* the Python SDK's raw ``acp.connection.Connection`` provides a tool in the connection form (protocols.md §5.2);
* the Python SDK's ``ClientSideConnection`` runs the standard chat flow;
* the npm ``@agentclientprotocol/sdk`` client provides a tool in the stateless form (protocols.md §3.3).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError, connect_to_agent, text_block
from acp.connection import Connection
from acp.schema import AcpMcpServer, ClientCapabilities, Implementation
from acp.ws.client import create_websocket_stream
from gateway_harness import RunningGateway, run_gateway
from scripted_agent import ScriptedAgent
from waits import eventually

from openab_browser.core.jsonrpc import RpcError
from openab_browser.core.tunnel.tunnel import TunnelError

pytestmark = pytest.mark.anyio

NODE_PEERS = Path(__file__).parent / "node"


async def test_the_python_sdk_provides_a_tool_over_the_connection_form(gateway: RunningGateway) -> None:
    connections: dict[str, str] = {}
    calls: list[dict[str, Any]] = []

    async def handler(method: str, params: Any, is_notification: bool) -> Any:
        if method == "mcp/connect":
            connection_id = f"conn-{uuid.uuid4().hex[:6]}"
            connections[connection_id] = params["serverId"]
            return {"connectionId": connection_id}
        if method == "mcp/disconnect":
            connections.pop(params["connectionId"], None)
            return {}
        if method == "mcp/message":
            if is_notification:
                return None
            inner, inner_params = params["method"], params.get("params") or {}
            if inner == "initialize":
                return {
                    "protocolVersion": inner_params["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "sdk-tools", "version": "1"},
                }
            if inner == "tools/list":
                return {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
            if inner == "tools/call":
                calls.append(inner_params)
                if inner_params["name"] != "echo":
                    raise RequestError(-32602, f"Unknown tool: {inner_params['name']}")
                return {"content": [{"type": "text", "text": inner_params["arguments"]["text"]}]}
            raise RequestError.method_not_found(inner)
        if is_notification:
            return None
        raise RequestError.method_not_found(method)

    transport = await create_websocket_stream(gateway.ws_url, headers={"Authorization": f"Bearer {gateway.token}"})
    conn = Connection(handler, transport)
    try:
        init = await conn.send_request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        assert init["agentCapabilities"]["mcpCapabilities"]["acp"] is True
        declaration = {"type": "acp", "name": "browser", "serverId": "sdk-srv-1"}
        session = await conn.send_request("session/new", {"cwd": "/tmp", "mcpServers": [declaration]})
        session_id = session["sessionId"]
        tunnel = await gateway.pod.tunnels.wait_attached(session_id, timeout=10)
        assert tunnel.server_info == {"name": "sdk-tools", "version": "1"}
        assert tunnel.protocol_version == "2025-06-18"
        result = await gateway.pod.tunnels.call_tool(session_id, "echo", {"text": "via the SDK"})
        assert result["content"][0]["text"] == "via the SDK"
        with pytest.raises(RpcError) as unknown:
            await gateway.pod.tunnels.call_tool(session_id, "nope", {})
        assert unknown.value.code == -32602 and "Unknown tool" in unknown.value.message
        assert [c["name"] for c in calls] == ["echo", "nope"]
        # Withdrawing the server on resume disconnects it in the SDK peer too.
        await conn.send_request("session/resume", {"sessionId": session_id, "cwd": "/tmp", "mcpServers": []})
        await eventually(lambda: not connections)
    finally:
        await conn.close()


async def test_the_python_sdk_client_chats_through_the_standard_flow() -> None:
    updates: list[Any] = []

    class Client:
        async def session_update(self, session_id: str, update: Any, **_kw: Any) -> None:
            updates.append(update)

        async def request_permission(self, *_args: Any, **_kw: Any) -> Any:
            return {"outcome": {"outcome": "cancelled"}}

    async with run_gateway(backend=ScriptedAgent()) as gw:
        transport = await create_websocket_stream(gw.ws_url, headers={"Authorization": f"Bearer {gw.token}"})
        conn = connect_to_agent(Client(), transport)  # type: ignore[arg-type]
        try:
            init = await conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(),
                client_info=Implementation(name="sdk-test", version="0"),
            )
            assert init.protocol_version == 1
            session = await conn.new_session(
                cwd="/tmp", mcp_servers=[AcpMcpServer(type="acp", name="browser", server_id="unused")]
            )
            response = await conn.prompt(session_id=session.session_id, prompt=[text_block("echo from the SDK")])
            assert response.stop_reason == "end_turn"
            await eventually(lambda: bool(updates))
            assert updates[0].content.text == "from the SDK"
        finally:
            await conn.close()


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
async def test_the_npm_sdk_provides_a_tool_over_the_stateless_form(gateway: RunningGateway) -> None:
    if not (NODE_PEERS / "node_modules" / "@agentclientprotocol" / "sdk").is_dir():
        pytest.fail("tests/node has no node_modules: run scripts/test, which installs the npm peers")
    assert gateway.token is not None
    peer = await asyncio.create_subprocess_exec(
        "node",
        str(NODE_PEERS / "stateless_peer.mjs"),
        gateway.ws_url,
        gateway.token,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert peer.stdin is not None and peer.stdout is not None
    try:
        async with asyncio.timeout(30):
            hello = json.loads(await peer.stdout.readline())
        session_id = hello["sessionId"]
        tunnel = await gateway.pod.tunnels.wait_attached(session_id, timeout=15)
        # The SDK refused mcp/connect with -32601, so the gateway switched to the stateless form.
        assert tunnel.form == "stateless" and tunnel.server_id == hello["serverId"]
        assert tunnel.protocol_version == "2026-07-28"
        assert {t["name"] for t in await gateway.pod.tunnels.list_tools(session_id)} == {"echo", "slow"}
        result = await gateway.pod.tunnels.call_tool(session_id, "echo", {"text": "stateless"})
        assert result["content"] == [{"type": "text", "text": "echo: stateless"}]
        with pytest.raises(RpcError) as missing:
            await gateway.pod.tunnels.call_tool(session_id, "missing", {})
        assert missing.value.code == -32602
        # A call that times out is cancelled in the peer with $/cancel_request.
        with pytest.raises(TunnelError, match="timed out"):
            await gateway.pod.tunnels.call_tool(session_id, "slow", {}, timeout=0.5)
        async with asyncio.timeout(10):
            assert json.loads(await peer.stdout.readline()) == {"event": "slow-cancelled"}
        assert (await gateway.pod.tunnels.call_tool(session_id, "echo", {"text": "again"}))["content"][0]["text"] == (
            "echo: again"
        )
    finally:
        peer.stdin.close()
        try:
            async with asyncio.timeout(10):
                await peer.wait()
        except TimeoutError:
            peer.kill()
