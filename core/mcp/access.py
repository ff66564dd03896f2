"""How a session's agent reaches that session's browser: the seam between browser access and the runtime.

Two implementations exist, one per ``OPENAB_BROWSER_MODE``: the proxy (a per-session loopback Streamable HTTP
MCP server, ``openab.core.proxy``) and the bridge (the per-pod Unix socket that ``openab browser-bridge``
relays to, ``openab.bridge``). Both follow the session's life as a :class:`openab.core.pod.SessionObserver`,
and both tell the agent runtime what to hand the agent in a :class:`BrowserEndpoint`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from ..acp.sessions import Session
from ..agents.config import Endpoint
from ..jsonrpc import JsonObject

__all__ = ["BROWSER_CHANNEL_ENV", "BrowserAccess", "BrowserEndpoint"]

BROWSER_CHANNEL_ENV = "OPENAB_BROWSER_CHANNEL"


@dataclass(frozen=True)
class BrowserEndpoint:
    """What one session's agent needs to reach its browser.

    ``acp_server`` is the ``session/new.mcpServers`` entry for agents that honour ACP injection (or ``None``
    where the mode has none); ``config`` is the entry for the agent CLI's own MCP config file; ``env`` is
    added to the agent's environment (the bridge needs ``OPENAB_BROWSER_CHANNEL`` there).
    """

    mode: Literal["proxy", "bridge"]
    config: Endpoint
    acp_server: JsonObject | None = field(default=None, repr=False)  # carries the bearer token
    env: dict[str, str] = field(default_factory=dict)


class BrowserAccess(Protocol):
    @property
    def mode(self) -> Literal["proxy", "bridge"]:
        """Read-only, so each implementation may name just its own mode."""
        ...

    async def session_opened(self, session: Session) -> None: ...

    async def session_closed(self, session: Session) -> None: ...

    async def endpoint_for(self, session: Session) -> BrowserEndpoint:
        """The session's endpoint, created on first use if ``session_opened`` has not run yet."""
        ...
