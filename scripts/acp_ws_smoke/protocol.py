"""The checks of section 2: the ACP methods a client relies on, answered as the protocol says; and the probe that
tells whether the pod's agent is the built-in one without a model."""

from __future__ import annotations

import re

from .client import Target, brief, expect, expect_error

PONG_PROMPT = "Reply with exactly one word: PONG"
AGENT_META = "dev.openab/agent"  # session/new's answer names the session's agent under this _meta key
BUILTIN_AGENT = "builtin"


async def initialize_shape(target: Target) -> str:
    async with target.open() as client:
        reply = await client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        response, result = reply.response, reply.result
        expect(response.get("jsonrpc") == "2.0", f"jsonrpc is {response.get('jsonrpc')!r}")
        expect(response.get("id") == 1, f"the id came back as {response.get('id')!r}, sent 1")
        version = result.get("protocolVersion")
        expect(version == 1 and type(version) is int, f"protocolVersion is {version!r}, not the integer 1")
        capabilities = result.get("agentCapabilities") or {}
        expect(capabilities.get("loadSession") is False, "agentCapabilities.loadSession is not false")
        expect(isinstance((capabilities.get("sessionCapabilities") or {}).get("resume"), dict),
               "agentCapabilities.sessionCapabilities.resume is not an object")
        expect("promptCapabilities" in capabilities, "agentCapabilities.promptCapabilities is missing")
        expect(isinstance(result.get("authMethods"), list), "authMethods is not a list")
    return "protocolVersion 1, loadSession false, resume offered"


async def session_new(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        session_id = await client.new_session()
        expect(session_id.startswith("sess_"), f"sessionId {session_id!r} does not start with sess_")
    return "sess_..."


async def prompt_pong(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        session_id = await client.new_session()
        reply = await client.prompt(session_id, PONG_PROMPT, timeout=target.prompt_timeout)
        stop = reply.result.get("stopReason") if isinstance(reply.result, dict) else None
        expect(stop == "end_turn", f"stopReason {stop!r}, expected end_turn")
        chunks = [u for u in reply.updates if u.get("update", {}).get("sessionUpdate") == "agent_message_chunk"
                  and u.get("update", {}).get("content", {}).get("type") == "text"]
        expect(bool(chunks), "no agent_message_chunk text arrived before the answer")
        expect(all(u.get("sessionId") == session_id for u in reply.updates), "a session/update named another session")
    return f"{len(chunks)} text chunk(s), end_turn"


async def builtin_without_model(target: Target) -> str | None:
    """Why the pod's agent cannot pass the model checks, or None: session/new names the built-in agent, and it
    answers a one-word request with other words (its help). An agent that says nothing at all is not excused: that
    is a fault the checks are there to show."""
    async with target.open() as client:
        await client.initialize()
        result = (await client.call("session/new", {"cwd": "/home/agent", "mcpServers": []})).result
        meta = result.get("_meta") if isinstance(result, dict) else None
        agent = meta.get(AGENT_META) if isinstance(meta, dict) else None
        session_id = result.get("sessionId") if isinstance(result, dict) else None
        if agent != BUILTIN_AGENT or not isinstance(session_id, str):
            return None
        reply = await client.prompt(session_id, PONG_PROMPT, timeout=target.prompt_timeout)
        said = reply.text().strip()
    # Only the one word counts: the built-in agent quotes a request it cannot follow, PONG included.
    if not said or re.fullmatch(r"\W*pong\W*", said, re.IGNORECASE):
        return None
    return (f"the pod's agent is the built-in one without a model (asked for PONG, it said {brief(said, 80)}): "
            "give the pod a model (--model-url) or an agent CLI to run this check; --skip-model-checks skips it")


async def session_resume(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        session_id = await client.new_session()
        result = (await client.resume(session_id)).result
        expect(isinstance(result, dict) and not set(result) - {"_meta"}, f"session/resume answered {brief(result)}")
    return "{}"


async def unknown_method(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        return expect_error(await client.call("openab/smoke/no-such-method", {}), -32601, "an unknown method")


async def session_close(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        session_id = await client.new_session()
        expect((await client.call("session/close", {"sessionId": session_id})).result == {}, "close did not answer {}")
        again = await client.call("session/close", {"sessionId": session_id})
        expect("error" not in again.response, f"a second close failed: {brief(again.response)}")
        after = await client.prompt(session_id, PONG_PROMPT)
        expect("error" in after.response, "a prompt on the closed session was accepted")
    return "closed, idempotent, prompts refused after"
