"""How a session is named outside its socket: its ``channel`` inside the pod and its ``tag`` in logs and audit.

A session id is the extension's capability to resume its session (``session/resume`` takes the session, and its
browser, over from whichever socket names it), so nothing the pod shows may reveal it: not the name of its folder
under the state dir, not the agent's environment, not a log line. Both names are HMACs of the id under a per-pod
secret. The secret is kept (0600, in the state dir), so the names are stable across a pod restart: a resumed
session finds its working folder again, and with it the agent CLI's conversation, which many CLIs key by their
working directory. Knowing a name gives neither the id nor a way to test a guess without the secret.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
from typing import Final

__all__ = ["CHANNEL_PATTERN", "NAMES_KEPT", "SECRET_BYTES", "SessionNaming"]

SECRET_BYTES: Final = 32
# 128 bits: collisions between the sessions of one pod are out of reach, and the name stays short in a path.
CHANNEL_PATTERN: Final = re.compile(r"acp_[0-9a-f]{32}")
# A log tag only has to tell a pod's sessions apart for a person reading the log: 40 bits.
_TAG_HEX: Final = 10
NAMES_KEPT: Final = 4096
"""Names kept once made: every record and log line of a call names its session, and an HMAC is the dearest part
of an audit record. Bounded (the oldest made goes first), since a peer chooses the ids a pod is sent."""


class SessionNaming:
    """The names of a pod's sessions, derived from their ids under ``secret`` (random when not given)."""

    def __init__(self, secret: bytes | None = None) -> None:
        if secret is not None and len(secret) < 16:
            raise ValueError("the session naming secret needs at least 16 bytes")
        self._key = secret if secret is not None else secrets.token_bytes(SECRET_BYTES)
        self._made: dict[tuple[bytes, str], str] = {}
        self._making = threading.Lock()

    def _mac(self, purpose: bytes, session_id: str) -> str:
        made = self._made.get((purpose, session_id))
        if made is None:
            # The purpose keeps the two names independent: a log tag is not a prefix of the channel.
            made = hmac.new(self._key, purpose + b"\0" + session_id.encode(), hashlib.sha256).hexdigest()
            # Log lines name sessions from any thread: one at a time makes room and keeps a name.
            with self._making:
                if len(self._made) >= NAMES_KEPT:
                    del self._made[next(iter(self._made))]
                self._made[purpose, session_id] = made
        return made

    def channel(self, session_id: str) -> str:
        """The session's name inside the pod: its folder, its agent's ``OPENAB_BROWSER_CHANNEL``."""
        return "acp_" + self._mac(b"channel", session_id)[:32]

    def tag(self, session_id: str) -> str:
        """The session's name in the pod's log and audit records: ``s-`` and ten hex digits."""
        return "s-" + self._mac(b"log", session_id)[:_TAG_HEX]
