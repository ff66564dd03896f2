"""How a session's agent CLI is given its browser: in ACP ``session/new``, in the CLI's own config file, or in a
file of its own named on its command line.

The browser access mode (:mod:`openab_browser.core.mcp.access`) says *what* the agent needs (a URL and bearer token,
or the relay command); the agent's recipe says *how* that CLI takes it: CLIs that honour ``mcpServers`` in
``session/new`` get it there; those that ignore it read it from their config file, which we write for the
session's agent and strip when it stops; and those that let their own config file win over ``mcpServers``
(Copilot) are pointed on their command line at a file holding our server alone, written into the session's
working directory for this one agent process and removed when it stops.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError
from ..jsonrpc import JsonObject
from ..mcp.access import BrowserEndpoint, Entry, HttpEndpoint
from ..mcp_vocabulary import SERVER_NAME
from .config import remove_flag_file, write_flag_file
from .config.claims import ConfigClaims
from .recipes import Recipe

__all__ = ["BrowserProvision", "Provided", "acp_server_entry"]

log = logging.getLogger(__name__)


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


@dataclass(frozen=True)
class Provided:
    """What one start of a session's agent was given: ``servers`` for its ``session/new``, ``argv`` to add to its
    command, and the ``file`` those arguments name (removed by :meth:`BrowserProvision.withdraw`)."""

    session_id: str
    servers: list[JsonObject] = field(default_factory=list, repr=False)  # may carry the bearer token
    argv: list[str] = field(default_factory=list)
    file: Path | None = None


class BrowserProvision:
    """Provides each session's agent with its browser endpoint the way ``recipe`` says, and withdraws it.

    Config files are claimed per session (:class:`ConfigClaims`): one file never holds two live sessions'
    entries, and :meth:`withdraw` strips ours and leaves the rest of the file as it was. A command-line file
    is per agent process (a fresh name each start), so the one an agent being stopped still names is never the
    one its successor in the same session reads.
    """

    def __init__(self, recipe: Recipe) -> None:
        self.recipe = recipe
        self.claims = ConfigClaims()

    @property
    def via_config(self) -> bool:
        return self.recipe.browser_via == "config" and bool(self.recipe.config_agent)

    @property
    def via_flag(self) -> bool:
        return self.recipe.browser_via == "flag" and bool(self.recipe.config_agent)

    def provide(self, session_id: str, endpoint: BrowserEndpoint, workdir: Path, env: Mapping[str, str]) -> Provided:
        """Give ``endpoint`` to the session's agent about to start in ``workdir`` with ``env``."""
        agent = self.recipe.config_agent
        if self.via_flag:
            assert agent is not None
            # Dotted, so it stays out of the agent's way in the folder it works in; the name is the file's only link
            # to the process that reads it.
            file = workdir / f".openab-browser-{secrets.token_hex(6)}.json"
            write_flag_file(agent, endpoint.entry, file)
            argv = [arg.replace("{file}", str(file)) for arg in self.recipe.browser_flag]
            return Provided(session_id, argv=argv, file=file)
        if self.via_config:
            assert agent is not None
            # The agent's HOME, CODEX_HOME and the like say where the CLI reads its user config.
            home = Path(env.get("HOME") or Path.home())
            self.claims.write(session_id, agent, endpoint.entry, workdir, home=home, env=env)
            return Provided(session_id)
        return Provided(session_id, servers=[acp_server_entry(endpoint.entry)])

    def withdraw(self, provided: Provided) -> None:
        """Remove what :meth:`provide` wrote for that agent: its command-line file, or its config entries."""
        if provided.file is not None:
            try:
                remove_flag_file(provided.file)
            except (ConfigError, OSError) as exc:
                log.warning("could not remove the browser file of session %s: %s", provided.session_id, exc)
        if self.via_config:
            self.claims.release(provided.session_id)
