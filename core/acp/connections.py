"""The pod's live `/acp` connections, and the turns running on them: who holds which socket (so a socket that
loses a session to another can be told), and a stop that lets running turns finish."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Protocol

from ..jsonrpc import RpcConnection
from ..turn_watch import Person

__all__ = ["AcpConnections", "LiveConnection"]


class LiveConnection(Protocol):
    """What the pod and the other sockets use of a live `/acp` connection
    (:class:`~.server.AcpServerConnection`)."""

    @property
    def id(self) -> str: ...

    @property
    def rpc(self) -> RpcConnection: ...

    @property
    def person(self) -> Person: ...

    @property
    def turns_in_flight(self) -> int: ...

    def cancel_turns(self, *, shutdown: bool = False) -> None: ...

    def session_moved(self, session_id: str) -> None: ...


class AcpConnections:
    """The pod's live `/acp` connections by id, so a socket that loses a session to another can be told, and
    the turns running on them, so a stop can let them finish."""

    def __init__(self) -> None:
        self._by_id: dict[str, LiveConnection] = {}
        self._turn_ended = asyncio.Event()
        self.draining = False

    def __len__(self) -> int:
        return len(self._by_id)

    def add(self, connection: LiveConnection) -> None:
        self._by_id[connection.id] = connection

    def discard(self, connection: LiveConnection) -> None:
        if self._by_id.get(connection.id) is connection:
            del self._by_id[connection.id]
            self._turn_ended.set()

    def get(self, connection_id: str) -> LiveConnection | None:
        return self._by_id.get(connection_id)

    @property
    def turns_in_flight(self) -> int:
        """Prompts running on the pod's live sockets."""
        return sum(c.turns_in_flight for c in self._by_id.values())

    def turn_ended(self) -> None:
        self._turn_ended.set()

    async def drain(self, timeout: float, grace: float) -> int:
        """Refuse new prompts and let running turns end within ``timeout`` s; then cancel the rest, which answer
        ``cancelled`` within ``grace`` s (before their sockets close, so the person sees the turn end). Returns
        how many turns had to be cancelled."""
        self.draining = True
        await self._until_no_turns(timeout)
        left = self.turns_in_flight
        if left:
            for connection in list(self._by_id.values()):
                connection.cancel_turns(shutdown=True)
            await self._until_no_turns(grace)
        return left

    async def _until_no_turns(self, timeout: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while self.turns_in_flight:
                    self._turn_ended.clear()
                    await self._turn_ended.wait()
