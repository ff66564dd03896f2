"""How a session's agent CLI is given its browser: in ACP ``session/new``, or in the CLI's own config file.

The browser access mode (:mod:`openab.core.mcp.access`) says *what* the agent needs (a URL and bearer token,
or the relay command); the agent's recipe says *how* that CLI takes it: CLIs that honour ``mcpServers`` in
``session/new`` get it there, the others read it from their config file, which we write for the session's
agent and strip when it stops.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..jsonrpc import JsonObject
from ..mcp.access import BrowserEndpoint, Entry, HttpEndpoint
from ..mcp.vocabulary import SERVER_NAME
from .config.claims import ConfigClaims
from .recipes import Recipe

__all__ = ["BrowserHandoff", "acp_server_entry"]


def acp_server_entry(entry: Entry) -> JsonObject:
    """``entry`` as one ``session/new.mcpServers`` item (it carries the bearer token: never log it)."""
    if isinstance(entry, HttpEndpoint):
        return {
            "type": "http",
            "name": SERVER_NAME,
            "url": entry.url,
            "headers": [{"name": "Authorization", "value": f"Bearer {entry.token}"}],
        }
    return {"name": SERVER_NAME, "command": entry.command, "args": list(entry.args), "env": []}


class BrowserHandoff:
    """Hands each session's browser endpoint to its agent the way ``recipe`` says, and takes it back.

    Config files are claimed per session (:class:`ConfigClaims`): one file never holds two live sessions'
    entries, and :meth:`take_back` strips ours and leaves the rest of the file as it was.
    """

    def __init__(self, recipe: Recipe) -> None:
        self.recipe = recipe
        self.claims = ConfigClaims()

    @property
    def via_config(self) -> bool:
        return self.recipe.browser_via == "config" and bool(self.recipe.config_agent)

    def hand_over(
        self, session_id: str, endpoint: BrowserEndpoint, workdir: Path, env: Mapping[str, str]
    ) -> list[JsonObject]:
        """Give ``endpoint`` to the session's agent about to start in ``workdir`` with ``env``; returns the
        ``mcpServers`` for its ``session/new`` (empty when the entry went into a config file)."""
        if not self.via_config:
            return [acp_server_entry(endpoint.entry)]
        assert self.recipe.config_agent is not None
        # The agent's HOME, CODEX_HOME and the like say where the CLI reads its user config.
        home = Path(env.get("HOME") or Path.home())
        self.claims.write(session_id, self.recipe.config_agent, endpoint.entry, workdir, home=home, env=env)
        return []

    def take_back(self, session_id: str) -> None:
        self.claims.release(session_id)
