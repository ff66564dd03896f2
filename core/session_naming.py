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
from typing import Final

__all__ = ["CHANNEL_PATTERN", "SECRET_BYTES", "SessionNaming"]

SECRET_BYTES: Final = 32
# 128 bits: collisions between the sessions of one pod are out of reach, and the name stays short in a path.
CHANNEL_PATTERN: Final = re.compile(r"acp_[0-9a-f]{32}")
# A log tag only has to tell a pod's sessions apart for a person reading the log: 40 bits.
_TAG_HEX: Final = 10


class SessionNaming:
    """The names of a pod's sessions, derived from their ids under ``secret`` (random when not given)."""

    def __init__(self, secret: bytes | None = None) -> None:
        if secret is not None and len(secret) < 16:
            raise ValueError("the session naming secret needs at least 16 bytes")
        self._key = secret if secret is not None else secrets.token_bytes(SECRET_BYTES)

    def _mac(self, purpose: bytes, session_id: str) -> str:
        # The purpose keeps the two names independent: a log tag is not a prefix of the channel.
        return hmac.new(self._key, purpose + b"\0" + session_id.encode(), hashlib.sha256).hexdigest()

    def channel(self, session_id: str) -> str:
        """The session's name inside the pod: its folder, its agent's ``OPENAB_BROWSER_CHANNEL``."""
        return "acp_" + self._mac(b"channel", session_id)[:32]

    def tag(self, session_id: str) -> str:
        """The session's name in the pod's log and audit records: ``s-`` and ten hex digits."""
        return "s-" + self._mac(b"log", session_id)[:_TAG_HEX]
