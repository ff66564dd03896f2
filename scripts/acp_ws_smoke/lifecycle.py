"""The checks of section 5: a running prompt cancelled, a session taken over by another socket, another
socket's session left alone."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from .client import Client, Json, Target, brief, expect
from .protocol import PONG_PROMPT

COUNT_PROMPT = "Count from 1 to 400, one number per line, nothing else."


async def cancel_running_prompt(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        session_id = await client.new_session()
        client.next_id += 1
        prompt_id = client.next_id
        await client.send({"jsonrpc": "2.0", "id": prompt_id, "method": "session/prompt",
                           "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": COUNT_PROMPT}]}})
        cancelled = False

        async def cancel_once(_update: Json) -> None:
            nonlocal cancelled
            if not cancelled:
                cancelled = True
                await client.notify("session/cancel", {"sessionId": session_id})

        reply = await client.until_response(prompt_id, timeout=target.long_timeout, what="the cancelled prompt",
                                            on_update=cancel_once)
        expect(cancelled, "the prompt ended before any session/update, so there was nothing to cancel")
        stop = reply.result.get("stopReason") if isinstance(reply.result, dict) else None
        expect(stop == "cancelled", f"stopReason {stop!r} after session/cancel, expected cancelled")
    return "stopReason cancelled"


@contextlib.asynccontextmanager
async def holder_and_other(target: Target) -> AsyncIterator[tuple[Client, str, Client]]:
    """A socket that holds a new session, its id, and a second socket beside it; both initialized."""
    async with target.open() as holder, target.open() as other:
        await holder.initialize()
        session_id = await holder.new_session()
        await other.initialize()
        yield holder, session_id, other


async def resume_elsewhere(target: Target) -> str:
    async with holder_and_other(target) as (first, session_id, second):
        result = (await second.resume(session_id)).result
        expect(isinstance(result, dict), f"session/resume from a second socket answered {brief(result)}")
        told = await first.quiet_for(2.0)
        moved = [m for m in told if m.get("method") == "_openab/session/moved"]
        expect(bool(moved), "the socket that lost the session was not told (_openab/session/moved)")
        reply = await first.prompt(session_id, PONG_PROMPT)
        expect("error" in reply.response, "the old socket could still prompt the session it lost")
    return "taken over; the old socket told and refused"


async def foreign_session(target: Target) -> str:
    # Another client's session id must not let this one prompt or close it.
    async with holder_and_other(target) as (owner, session_id, other):
        await other.call("session/close", {"sessionId": session_id})
        prompting = await other.prompt(session_id, PONG_PROMPT)
        expect("error" in prompting.response, "another socket prompted a session it does not hold")
        # Closing is idempotent, so a foreign close may be answered {}; what counts is that nothing was closed.
        still = await owner.prompt(session_id, PONG_PROMPT, timeout=target.prompt_timeout)
        expect("error" not in still.response,
               f"after another socket's session/close the owner cannot prompt: {brief(still.response)}")
    return "refused"
