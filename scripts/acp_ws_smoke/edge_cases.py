"""The checks of section 3: requests at the edge of what ACP and JSON-RPC allow, and replies that test the path
back (a long one, unicode)."""

from __future__ import annotations

from .client import Target, brief, expect, expect_error
from .protocol import PONG_PROMPT

LINES_PROMPT = "Output the lines LINE 0001 to LINE 0600, one per line, each exactly as written, nothing else."
UNICODE_TEXT = "你好 🎉 👨‍👩‍👧‍👦 ❤️"
UNICODE_PROMPT = f"Repeat exactly, nothing else: {UNICODE_TEXT}"


async def version_high(target: Target) -> str:
    async with target.open() as client:
        result = (await client.call("initialize", {"protocolVersion": 5, "clientCapabilities": {}})).result
        expect(result.get("protocolVersion") == 1, f"protocolVersion 5 was answered with {brief(result)}")
    return "negotiated down to 1"


async def version_zero(target: Target) -> str:
    async with target.open() as client:
        return expect_error(await client.call("initialize", {"protocolVersion": 0}), -32602, "protocolVersion 0")


async def version_missing(target: Target) -> str:
    async with target.open() as client:
        return expect_error(await client.call("initialize", {"clientCapabilities": {}}), -32602, "no protocolVersion")


async def new_before_initialize(target: Target) -> str:
    async with target.open() as client:
        reply = await client.call("session/new", {"cwd": "/home/agent", "mcpServers": []})
        return expect_error(reply, -32002, "session/new before initialize")


async def wrong_jsonrpc(target: Target) -> str:
    async with target.open() as client:
        reply = await client.call("", raw={"jsonrpc": "1.0", "id": 1, "method": "initialize",
                                           "params": {"protocolVersion": 1}})
        return expect_error(reply, -32600, 'jsonrpc "1.0"')


async def object_id(target: Target) -> str:
    async with target.open() as client:
        await client.send({"jsonrpc": "2.0", "id": {}, "method": "initialize", "params": {"protocolVersion": 1}})
        return expect_error(await client.until_response(None, timeout=8, what="id {}"), -32600, "an object id")


async def new_without_cwd(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        return expect_error(await client.call("session/new", {"mcpServers": []}), -32602, "session/new without cwd")


async def resume_without_id(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        reply = await client.call("session/resume", {"cwd": "/home/agent", "mcpServers": []})
        return expect_error(reply, -32602, "session/resume without sessionId")


async def prompt_resource_link(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        session_id = await client.new_session()
        reply = await client.call("session/prompt", {"sessionId": session_id, "prompt": [
            {"type": "text", "text": PONG_PROMPT},
            {"type": "resource_link", "uri": "file:///x", "name": "X"},
        ]}, timeout=target.prompt_timeout)
        expect("error" not in reply.response, f"a resource_link block was refused: {brief(reply.response)}")
    return "accepted"


async def prompt_image(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        session_id = await client.new_session()
        reply = await client.call("session/prompt", {"sessionId": session_id, "prompt": [
            {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="},
        ]})
        return expect_error(reply, -32602, "an image block (not offered in promptCapabilities)")


async def cancel_is_silent(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        session_id = await client.new_session()
        await client.notify("session/cancel", {"sessionId": session_id})
        frames = await client.quiet_for(3.0)
        expect(not frames, f"a session/cancel notification was answered: {brief(frames[0]) if frames else ''}")
    return "no frame within 3 s"


async def cancel_with_id(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        session_id = await client.new_session()
        return expect_error(await client.call("session/cancel", {"sessionId": session_id}), -32600,
                            "session/cancel sent as a request")


async def oversized_reply(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        session_id = await client.new_session()
        reply = await client.prompt(session_id, LINES_PROMPT, timeout=target.long_timeout)
        text = reply.text()
        numbers = [int(word) for line in text.splitlines() if (word := line.strip().removeprefix("LINE ")).isdigit()]
        expect(len(text) > 4096, f"the reply is {len(text)} chars; a 600-line reply must be longer than 4096")
        expect(max(numbers, default=0) >= 550, f"the last LINE seen is {max(numbers, default=0)}, expected 550+")
    return f"{len(text)} chars, up to LINE {max(numbers):04d}"


async def unicode_intact(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        session_id = await client.new_session()
        reply = await client.prompt(session_id, UNICODE_PROMPT, timeout=target.prompt_timeout)
        expect("error" not in reply.response, f"the prompt failed: {brief(reply.response)}")
        missing = [marker for marker in UNICODE_TEXT.split() if marker not in reply.text()]
        expect(not missing, f"missing from the reply: {' '.join(missing)} (got {brief(reply.text())})")
    return "every marker intact"


async def not_json(target: Target) -> str:
    async with target.open() as client:
        await client.send("{not json")
        reply = await client.until_response(None, timeout=8, what="a frame that is not JSON")
        expect_error(reply, -32700, "a frame that is not JSON")
        await client.initialize()
    return "error -32700, socket still serves"
