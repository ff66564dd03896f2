"""The checks of section 4: the bounds the gateway puts on a frame, a request, an id, nesting and acp servers."""

from __future__ import annotations

import json

from websockets.exceptions import ConnectionClosed

from .client import CheckFailed, Target, brief, expect, expect_error
from .tunnel import answer_connect

FRAME_LIMIT = 8 * 1024 * 1024
REQUEST_LIMIT = 1024 * 1024
NESTING_LIMIT = 128
MAX_ACP_SERVERS = 8


async def frame_over_limit(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        pad = "x" * (FRAME_LIMIT + 64)
        await client.send(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "initialize",
                                      "params": {"protocolVersion": 1, "pad": pad}}))
        try:
            frames = await client.quiet_for(10.0)
        except ConnectionClosed as exc:
            code = exc.rcvd.code if exc.rcvd else None
            return f"closed ({code})"
        raise CheckFailed(f"the socket stayed open after an {FRAME_LIMIT + 64}-byte frame"
                          + (f" and answered {brief(frames[0])}" if frames else ""))


async def request_over_limit(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        pad = "x" * (REQUEST_LIMIT + 64)
        reply = await client.call("initialize", {"protocolVersion": 1, "pad": pad}, timeout=15)
        expect("error" in reply.response, "a request over 1 MiB was answered with a result")
        follow = await client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        expect(follow.result.get("protocolVersion") == 1, "the socket did not answer after the refusal")
    return f"error {reply.error_code}, socket still serves"


async def id_too_long(target: Target) -> str:
    async with target.open() as client:
        await client.send({"jsonrpc": "2.0", "id": "i" * 1025, "method": "initialize",
                           "params": {"protocolVersion": 1}})
        return expect_error(await client.until_response(None, timeout=8, what="a 1025-char id"), -32600,
                            "a 1025-character id")


async def nested_too_deep(target: Target) -> str:
    async with target.open() as client:
        depth = NESTING_LIMIT + 2
        await client.send('{"jsonrpc":"2.0","id":5,"method":"initialize","params":' + "[" * depth + "]" * depth + "}")
        reply = await client.until_response(5, timeout=8, what="a message nested too deep")
        expect_error(reply, -32600, f"a message {depth + 1} levels deep")
        follow = await client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        expect(follow.result.get("protocolVersion") == 1, "the socket did not answer after the refusal")
    return "error -32600, socket still serves"


async def too_many_servers(target: Target) -> str:
    async with target.open(on_request=answer_connect) as client:
        await client.initialize()
        servers = [{"type": "acp", "id": f"srv-{n}", "name": f"browser-{n}"} for n in range(MAX_ACP_SERVERS + 1)]
        reply = await client.call("session/new", {"cwd": "/home/agent", "mcpServers": servers})
        expect("error" in reply.response, f"{len(servers)} acp servers were accepted (the limit is {MAX_ACP_SERVERS})")
    return f"error {reply.error_code}"
