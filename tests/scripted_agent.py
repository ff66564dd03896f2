"""An agent backend whose every turn is scripted by the prompt's first word, for gateway tests.

It stands in for the agent (an outside party), not for any part of openab: the runtime's own tests drive
real agent CLIs.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

from openab_browser.core.acp.backend import PromptTurn
from openab_browser.core.sessions import Session

# A test's own turn: gets the turn and the prompt's whole text, returns the stopReason.
Script = Callable[[PromptTurn, str], Awaitable[str]]


def chunk(text: str) -> dict[str, Any]:
    return {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}


class ScriptedAgent:
    def __init__(self) -> None:
        self.prompts: list[tuple[str, list[dict[str, Any]]]] = []
        self.cancelled: list[str] = []
        self.opened: list[str] = []
        self.closed: list[str] = []
        self._cancel_events: dict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self.ignore_cancel = False
        # First word -> a test's own script; checked before the built-in ones.
        self.scripts: dict[str, Script] = {}

    async def session_opened(self, session: Session) -> None:
        self.opened.append(session.id)

    async def session_closed(self, session: Session) -> None:
        self.closed.append(session.id)

    async def cancel(self, session_id: str) -> None:
        self.cancelled.append(session_id)
        self._cancel_events[session_id].set()

    async def until_cancelled(self, session_id: str) -> None:
        """For a test's own script: returns once the session's running turn is cancelled."""
        await self._cancel_events[session_id].wait()

    def until_stopped(self, *updates: dict[str, Any], timeout: float = 60.0) -> Script:
        """A test's own turn that sends ``updates``, then runs until it is cancelled (at most ``timeout`` seconds),
        and ends "cancelled"."""

        async def turn(running: PromptTurn, text: str) -> str:
            for update in updates:
                running.send_update(update)
            async with asyncio.timeout(timeout):
                await self.until_cancelled(running.session.id)
            return "cancelled"

        return turn

    async def prompt(self, turn: PromptTurn, prompt: list[dict[str, Any]]) -> str:
        session_id = turn.session.id
        self.prompts.append((session_id, prompt))
        self._cancel_events[session_id] = asyncio.Event()
        text = prompt[0].get("text", "") if prompt[0].get("type") == "text" else ""
        command, _, rest = text.partition(" ")
        if command in self.scripts:
            return await self.scripts[command](turn, text)
        if command == "echo":
            turn.send_update(chunk(rest))
            return "end_turn"
        if command == "lines":
            for n in range(1, int(rest) + 1):
                turn.send_update(chunk(f"LINE {n:04d}\n"))
            return "end_turn"
        if command == "wait":
            # Streams one chunk, then works until cancelled.
            turn.send_update(chunk("working"))
            if self.ignore_cancel:
                await asyncio.sleep(3600)
            await self._cancel_events[session_id].wait()
            return "cancelled"
        if command == "silent":
            await asyncio.sleep(3600)
        if command == "permission":
            outcome = await turn.request_permission(
                {
                    "toolCall": {"toolCallId": "call-1", "title": "Click Buy", "kind": "execute"},
                    "options": [
                        {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                        {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
                    ],
                },
                timeout=10,
            )
            turn.send_update(chunk(json.dumps(outcome)))
            return "end_turn"
        if command == "crash":
            raise RuntimeError("the agent process died")
        turn.send_update(chunk(f"unknown script {command!r}"))
        return "end_turn"
