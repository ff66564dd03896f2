"""The pod's ACP sessions, which outlive the socket that opened them.

A session is created by ``session/new`` and taken over by ``session/resume`` from whichever socket the
extension reconnects on; the socket that holds it is its *owner*. A session with no owner stays resumable
until it has been idle for the configured time, then it is evicted, and everything tied to it (its agent
process, its proxy endpoint, its tunnels) goes with it.

The store is bounded (``max_sessions``) and so is what one socket may hold (the connection's own bound). A key
holder could still fill the store with sessions it opens and drops at once; when the store is full, such a
session (no socket holds it, it never ran a prompt: nobody loses a conversation) is the :meth:`spare` one the pod
evicts to make room, oldest first, so a live socket's ``session/new`` succeeds.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from .errors import TooManySessions
from .session_naming import SessionNaming

__all__ = ["Session", "SessionStore", "TooManySessions", "new_session_id"]



def new_session_id() -> str:
    return f"sess_{uuid.uuid4()}"


@dataclass(eq=False)
class Session:
    """One ACP session: its id, its in-pod ``channel`` (its folder; the agent's environment names it; not
    derived from the id, see :mod:`.session_naming`), and which socket holds it (``owner``; ``None`` while none
    does)."""

    id: str
    channel: str
    created_at: float
    last_active: float
    owner: str | None = None
    owner_generation: int = 0
    permission_relay: bool = False
    # Its panel marks a journalled step running when the step's call reaches it (``dev.openab/marksRunning``):
    # the pod does not tell it so (core/journal/telling.py).
    marks_running: bool = False
    prompting: bool = False
    # It has run a prompt (in this pod): it has a conversation, and is never the spare one evicted for room.
    prompted: bool = False
    # The offered agent it runs (``dev.openab/agent``), set when a socket first opens it and kept after.
    agent: str | None = None


class SessionStore:
    """The pod's sessions by id: at most ``max_sessions``, each owned by at most one socket at a time."""

    def __init__(
        self,
        *,
        max_sessions: int = 4096,
        clock: Callable[[], float] = time.monotonic,
        naming: SessionNaming | None = None,
    ) -> None:
        self.naming = naming or SessionNaming()
        self._sessions: dict[str, Session] = {}
        self._max = max_sessions
        self._clock = clock
        self._owner_generations = itertools.count(1)

    def next_owner_generation(self) -> int:
        """A number for a new socket, larger than every earlier one's: a later socket's claim wins."""
        return next(self._owner_generations)

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: str) -> Session | None:
        return self._sessions.get(session_id)

    def all(self) -> list[Session]:
        return list(self._sessions.values())

    def open(
        self, session_id: str | None, *, owner: str, owner_generation: int
    ) -> tuple[Session, bool]:
        """Create a session (``session_id=None``) or take over an existing or remembered one.

        Returns the session and whether it was created now. A resumed id the pod does not know (the pod
        restarted) is created afresh under the same id, so the extension keeps its identity.
        """
        now = self._clock()
        session = self._sessions.get(session_id) if session_id else None
        created = session is None
        if session is None:
            if self.full:
                raise TooManySessions(
                    f"Too many sessions in this pod (max {self._max}), each held by a connection or with a "
                    "conversation: close a chat you no longer need (session/close), or ask the operator to raise "
                    "OPENAB_MAX_SESSIONS"
                )
            sid = session_id or new_session_id()
            session = Session(sid, self.naming.channel(sid), created_at=now, last_active=now)
            self._sessions[sid] = session
        session.owner = owner
        session.owner_generation = owner_generation
        session.last_active = now
        return session, created

    def touch(self, session: Session) -> None:
        session.last_active = self._clock()

    def release_owner(self, owner: str) -> list[Session]:
        """A socket closed: its sessions lose their owner but stay resumable."""
        released = [s for s in self._sessions.values() if s.owner == owner]
        now = self._clock()
        for session in released:
            session.owner = None
            session.last_active = now
        return released

    @property
    def full(self) -> bool:
        return len(self._sessions) >= self._max

    def spare(self) -> Session | None:
        """The session to give up when the store is full: the longest idle of those that no socket holds and
        that never ran a prompt (``None``: every session is held or has a conversation)."""
        spare = [s for s in self._sessions.values() if s.owner is None and not s.prompted and not s.prompting]
        return min(spare, key=lambda s: s.last_active, default=None)

    def idle(self, ttl: float) -> list[Session]:
        """Sessions nobody holds or uses, idle for at least ``ttl`` seconds."""
        cutoff = self._clock() - ttl
        return [
            s for s in self._sessions.values() if s.owner is None and not s.prompting and s.last_active <= cutoff
        ]

    def remove(self, session_id: str) -> Session | None:
        return self._sessions.pop(session_id, None)
