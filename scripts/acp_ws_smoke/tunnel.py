"""The checks of section 6: the MCP-over-ACP tunnel (docs/mcp-over-acp-tunnel-contract.md), with this script
answering as a mock side-panel extension would."""

from __future__ import annotations

import json
from typing import Any

from .client import Json, Target, brief, expect


class MockExtension:
    """Answers `mcp/connect` with ``conn-N`` and the inner MCP handshake with one harmless tool."""

    def __init__(self) -> None:
        self.connects: list[Json] = []
        self.inner: list[Json] = []

    async def __call__(self, request: Json) -> Any:
        params = request.get("params") or {}
        if request.get("method") == "mcp/connect":
            self.connects.append(request)
            return {"connectionId": f"conn-{len(self.connects)}"}
        if request.get("method") == "mcp/message":
            self.inner.append(request)
            if params.get("method") == "initialize":
                return {"protocolVersion": params.get("protocolVersion", "2025-06-18"), "capabilities": {"tools": {}},
                        "serverInfo": {"name": "acp-ws-smoke", "version": "1"}}
            if params.get("method") == "tools/list":
                return {"tools": [{"name": "smoke_echo", "description": "echoes its text",
                                   "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]}
        return None

    def handshakes_done(self, count: int) -> bool:
        """``count`` connections made, and each one's inner handshake as far as its tool list."""
        listed = sum(1 for m in self.inner if (m.get("params") or {}).get("method") == "tools/list")
        return len(self.connects) >= count and listed >= count


async def answer_connect(request: Json) -> Any:
    if request.get("method") == "mcp/connect":
        return {"connectionId": "conn-1"}
    return None


async def declared_servers(target: Target, servers: list[Json]) -> MockExtension:
    mock = MockExtension()
    expected = sum(1 for server in servers if server.get("type") == "acp")
    async with target.open(on_request=mock) as client:
        await client.initialize()
        await client.new_session(servers)
        # mcp/connect comes after the session/new answer, then the inner handshake; once the expected ones are
        # done, a quiet spell shows any extra or repeated connection.
        await client.until(lambda: mock.handshakes_done(expected), 10.0)
        await client.quiet_for(2.0)
    return mock


async def tunnel_single(target: Target) -> str:
    mock = await declared_servers(target, [{"type": "acp", "id": "srv-solo", "name": "browser"}])
    expect(len(mock.connects) == 1, f"{len(mock.connects)} mcp/connect requests for one declared server")
    params = mock.connects[0].get("params") or {}
    expect(params.get("acpId") == "srv-solo", f"mcp/connect named {brief(params)}, not acpId srv-solo")
    return "one mcp/connect, acpId srv-solo"


async def tunnel_handshake(target: Target) -> str:
    mock = await declared_servers(target, [{"type": "acp", "id": "srv-solo", "name": "browser"}])
    methods = [(m.get("params") or {}).get("method") for m in mock.inner]
    expect(bool(mock.connects), "no mcp/connect")
    expect("initialize" in methods, f"no inner initialize on conn-1 (inner requests: {methods})")
    connection_ids = {(m.get("params") or {}).get("connectionId") for m in mock.inner}
    expect(connection_ids == {"conn-1"}, f"inner messages named connections {sorted(map(str, connection_ids))}")
    return "inner " + ", ".join(str(m) for m in methods)


async def tunnel_two(target: Target) -> str:
    mock = await declared_servers(target, [{"type": "acp", "id": "srv-a", "name": "browser-a"},
                                           {"type": "acp", "id": "srv-b", "name": "browser-b"}])
    named = sorted(str((m.get("params") or {}).get("acpId")) for m in mock.connects)
    expect(named == ["srv-a", "srv-b"], f"mcp/connect for {named}, expected srv-a and srv-b once each")
    ids = [m.get("id") for m in mock.connects]
    expect(len(set(map(json.dumps, ids))) == 2, f"the two mcp/connect requests share an id: {ids}")
    return "one each, distinct ids"


async def tunnel_mixed(target: Target) -> str:
    mock = await declared_servers(target, [{"type": "acp", "id": "srv-x", "name": "browser"},
                                           {"type": "http", "name": "web", "url": "http://example/mcp", "headers": []}])
    named = [str((m.get("params") or {}).get("acpId")) for m in mock.connects]
    expect(named == ["srv-x"], f"mcp/connect for {named}, expected only srv-x")
    return "only srv-x connected"


async def tunnel_refused_connect(target: Target) -> str:
    # An extension that refuses the connection must not break the session.
    async def refuse(request: Json) -> Any:
        if request.get("method") == "mcp/connect":
            await client.send({"jsonrpc": "2.0", "id": request["id"],
                               "error": {"code": -32603, "message": "no browser here"}})
        return None

    async with target.open(on_request=refuse) as client:
        await client.initialize()
        session_id = await client.new_session([{"type": "acp", "id": "srv-r", "name": "browser"}])
        await client.quiet_for(2.0)
        result = (await client.resume(session_id)).result
        expect(isinstance(result, dict), "the session did not survive a refused mcp/connect")
    return "session still serves"
