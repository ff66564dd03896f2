"""Which agent conversation each session had, kept across agent restarts and pod restarts."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from ..jsonrpc import JsonObject
from .config import write_private

__all__ = ["Conversations"]

log = logging.getLogger(__name__)


class Conversations:
    """Which agent conversation each session had, in a 0600 JSON file under the state dir.

    A session is named there by its channel (an HMAC of its id under the pod's naming secret), never by its id: ids
    are capabilities (with the key, an id resumes its session), and a copy of the file must not hand them out.
    A session that comes back under its id (``session/resume`` after a socket drop, an idle eviction or a pod
    restart) gets its conversation back when the same kind of agent can take it up. Entries older than ``ttl``
    are forgotten: upstream expired its agent sessions the same way.
    """

    def __init__(self, path: Path, *, ttl: float) -> None:
        self.path = path
        self._ttl = ttl
        self._entries: dict[str, JsonObject] = {}
        try:
            loaded = json.loads(path.read_text())
        except (OSError, ValueError):
            loaded = {}
        if isinstance(loaded, dict):
            self._entries = {k: v for k, v in loaded.items() if isinstance(v, dict) and isinstance(v.get("id"), str)}

    def get(self, channel: str, agent: str) -> str | None:
        """The conversation ``agent`` had in the session of ``channel`` (``None``: none, or another agent's)."""
        entry = self._entries.get(channel)
        if entry is None or entry.get("agent") != agent:
            return None
        if not isinstance(entry.get("at"), (int, float)) or time.time() - entry["at"] > self._ttl:
            return None
        return str(entry["id"])

    def remember(self, channel: str, agent: str, conversation: str) -> None:
        now = time.time()
        self._entries = {k: v for k, v in self._entries.items()
                         if isinstance(v.get("at"), (int, float)) and now - v["at"] <= self._ttl}
        self._entries[channel] = {"agent": agent, "id": conversation, "at": now}
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            write_private(self.path, json.dumps(self._entries))
        except OSError as exc:
            log.warning("could not save %s: %s", self.path, exc)  # conversations then last as long as the pod
