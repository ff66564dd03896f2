"""How a session's agent reaches that session's browser: the seam between browser access and the agents.

Two implementations stand side by side, one per ``OPENAB_BROWSER_MODE``: the proxy (a per-session loopback
Streamable HTTP MCP server, :class:`openab_browser.core.mcp.proxy.BrowserProxy`) and the bridge (the per-pod Unix
socket that ``openab browser-bridge`` relays to, :class:`openab_browser.bridge.server.BridgeServer`). Each gives a
session an :class:`Entry`: a URL and a bearer token, or the relay command to spawn. How the entry reaches
the agent CLI (ACP ``session/new`` injection, or the CLI's own config file) is the agents' decision
(:mod:`openab_browser.core.agents`), so the dependency points one way: agents -> access.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from ..sessions import Session

__all__ = ["BROWSER_CHANNEL_ENV", "BrowserAccess", "BrowserEndpoint", "Entry", "HttpEndpoint", "StdioCommand"]

# The agent's environment names its session's channel; the bridge relay finds its session by it.
BROWSER_CHANNEL_ENV = "OPENAB_BROWSER_CHANNEL"

Mode = Literal["proxy", "bridge"]


@dataclass(frozen=True)
class HttpEndpoint:
    """The proxy's entry: a loopback Streamable HTTP MCP server gated by a bearer token.

    With ``token_env`` set, clients that expand environment variables get a reference to that
    variable instead of the literal token (the agent process must then carry it in its env).
    """

    url: str
    token: str = field(repr=False)
    token_env: str | None = None


@dataclass(frozen=True)
class StdioCommand:
    """The bridge's entry: a stdio MCP relay the agent CLI spawns itself."""

    command: str = "openab"
    args: tuple[str, ...] = ("browser-bridge",)


Entry = HttpEndpoint | StdioCommand


@dataclass(frozen=True)
class BrowserEndpoint:
    """What one session's agent needs to reach its browser: the ``entry``, and ``env`` to add to the agent's
    environment (the bridge needs its socket's path there)."""

    mode: Mode
    entry: Entry
    env: dict[str, str] = field(default_factory=dict)


class BrowserAccess(Protocol):
    """The whole life of one browser access mode in a pod.

    ``start`` before the pod serves and ``aclose`` after it stops (the bridge listens on its socket in
    between; the proxy has nothing pod-wide). ``open`` gives a live session its endpoint, created on first use
    and the same on every later call; ``close`` frees what the session holds (the proxy's listener and token).
    """

    @property
    def mode(self) -> Mode:
        """Read-only, so each implementation may name just its own mode."""
        ...

    async def start(self) -> None: ...

    async def aclose(self) -> None: ...

    async def open(self, session: Session) -> BrowserEndpoint:
        """The session's endpoint. Raises ``LookupError`` for a session the pod no longer holds."""
        ...

    async def close(self, session: Session) -> None: ...

    def agent_started(self, session: Session, pid: int) -> None:
        """The session's agent process now runs as ``pid`` (a restarted agent replaces the earlier one).

        The bridge admits a relay for the session only from below that process; the proxy, whose bearer
        token already names the session, has nothing to do.
        """
        ...
