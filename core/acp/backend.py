"""The seam between the `/acp` server and whatever runs the agent for a session.

The gateway validates a prompt, holds the session busy, relays streamed updates and enforces the idle
timeout and the cancel grace on the turn's clock; the backend only has to run the turn (and may arm its own
watchdog on that clock). ``NoAgentBackend`` is what a pod without an agent answers.
"""

from __future__ import annotations

from typing import Protocol

from ..errors import PermissionUnavailable
from ..jsonrpc import INTERNAL_ERROR, JsonObject, LocalRpcError
from ..sessions import Session
from ..turn_watch import TurnClock

__all__ = ["AgentBackend", "NoAgentBackend", "PermissionUnavailable", "PromptTurn"]


class PromptTurn(Protocol):
    """What the backend gets for one ``session/prompt``."""

    @property
    def session(self) -> Session: ...

    @property
    def can_ask_permission(self) -> bool:
        """Whether the extension said (``_meta`` on session/new or resume) that it answers permission cards."""

    def send_update(self, update: JsonObject) -> None:
        """Stream one ``session/update`` ``update`` object to the extension, as it comes."""

    async def request_permission(self, params: JsonObject, *, timeout: float) -> JsonObject:
        """Relay ``session/request_permission`` (params without ``sessionId``) and return the outcome object; the
        turn's clock stops while the person is asked.

        Raises :class:`PermissionUnavailable` when it cannot be asked, ``TimeoutError`` when nobody answered.
        """

    @property
    def clock(self) -> TurnClock:
        """The turn's clock: a backend arms its own watchdog on it, so that a person asked, in a permission card or
        in the browser, stops the backend's timers and the gateway's at once, and a cancel gives both sides one
        grace."""


class AgentBackend(Protocol):
    """Whatever runs the agent of each session (the agent runtime, a test's scripted agent, none)."""

    async def session_opened(self, session: Session) -> None:
        """A session was created or resumed; a backend may start its agent early."""

    async def session_closed(self, session: Session) -> None:
        """The session is evicted: stop its agent and free what it holds."""

    async def prompt(self, turn: PromptTurn, prompt: list[JsonObject]) -> str:
        """Run one turn and return its ACP ``stopReason``; raise :class:`RpcError` for a clear failure."""

    async def cancel(self, session_id: str) -> None:
        """Stop the session's running turn; its ``prompt`` then returns ``"cancelled"``."""


class NoAgentBackend:
    """A pod with no agent: prompts fail clearly, everything else works."""

    async def session_opened(self, session: Session) -> None:
        return None

    async def session_closed(self, session: Session) -> None:
        return None

    async def prompt(self, turn: PromptTurn, prompt: list[JsonObject]) -> str:
        raise LocalRpcError(INTERNAL_ERROR, "No agent backend connected")

    async def cancel(self, session_id: str) -> None:
        return None
