"""The real agent CLIs read the config files our writers produce: ``<cli> mcp list`` shows
openab_browser (and, for the proxy entry, connects to it with our bearer token), and no longer
shows it after strip."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from openab.core.agents.config import HttpEndpoint, StdioCommand, strip, write

from .harness import AgentEnv, require
from .mcp_peer import BrowserPeer
from .offline import HostRelay

pytestmark = pytest.mark.agents

# What each CLI prints for a server it reached. Codex's `mcp list` does not connect.
CONNECTED = {"gemini": r"openab_browser: .*- Connected", "opencode": r"openab_browser\W+connected",
             "claude": r"openab_browser: .*- \W*Connected"}


def mcp_list(agent: AgentEnv, relay: HostRelay | None) -> str:
    done = agent.run("mcp", "list", relay=relay)
    assert done.returncode == 0, done.stderr
    # gemini prints the list on stderr; opencode colours it even with NO_COLOR.
    return re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)


def trust_project(agent: AgentEnv) -> None:
    """What a user does once by answering claude's trust dialog for the project folder: without
    it, claude keeps project .mcp.json servers "pending approval" whatever the settings say."""
    state = agent.home / ".claude" / ".claude.json"
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(json.dumps({"projects": {str(agent.cwd): {"hasTrustDialogAccepted": True}}}))


@pytest.mark.parametrize("cli", ["codex", "gemini", "opencode", "claude"])
def test_cli_connects_to_the_proxy_entry_we_wrote(
    cli: str, browser: BrowserPeer, agent_setup: Callable[[str], AgentEnv], offline: Callable[..., HostRelay | None]
) -> None:
    require(cli)
    agent = agent_setup(cli)
    relay = offline(browser.port)
    endpoint = HttpEndpoint(browser.url, browser.token)
    if cli == "claude":
        trust_project(agent)
    write(cli, endpoint, dir=agent.cwd, home=agent.home)

    listed = mcp_list(agent, relay)
    assert "openab_browser" in listed and browser.url in listed
    if cli in CONNECTED:
        assert re.search(CONNECTED[cli], listed), listed
        assert browser.requests and all(ok for _m, ok, _ua in browser.requests)
    else:
        shown = agent.run("mcp", "get", "openab_browser", "--json", relay=relay)
        transport = json.loads(shown.stdout)["transport"]
        assert transport["url"] == browser.url
        assert transport["http_headers"] == {"Authorization": f"Bearer {browser.token}"}

    assert strip(cli, endpoint, dir=agent.cwd, home=agent.home)
    assert "openab_browser" not in mcp_list(agent, relay)


@pytest.mark.parametrize("cli", ["codex", "gemini", "opencode", "claude"])
def test_cli_reads_the_bridge_entry_we_wrote(
    cli: str, agent_setup: Callable[[str], AgentEnv], offline: Callable[..., HostRelay | None]
) -> None:
    require(cli)
    agent = agent_setup(cli)
    relay = offline()
    # Whether `openab browser-bridge` then reaches a browser is the bridge's own tests' business:
    # off PATH, each CLI reports it failed at once instead of waiting on the relay's retries.
    path = agent.env["PATH"].split(os.pathsep)
    agent.env["PATH"] = os.pathsep.join(d for d in path if not (Path(d) / "openab").exists())
    bridge = StdioCommand()
    write(cli, bridge, dir=agent.cwd, home=agent.home)

    listed = mcp_list(agent, relay)
    assert re.search(r"openab_browser\b[\s\S]*\bopenab\s+browser-bridge\b", listed), listed

    assert strip(cli, bridge, dir=agent.cwd, home=agent.home)
    assert "openab_browser" not in mcp_list(agent, relay)


def test_claude_needs_the_approval_we_write_next_to_mcp_json(
    agent_setup: Callable[[str], AgentEnv], offline: Callable[..., HostRelay | None]
) -> None:
    require("claude")
    agent = agent_setup("claude")
    trust_project(agent)
    write("claude", StdioCommand(), dir=agent.cwd, home=agent.home)
    (agent.cwd / ".claude" / "settings.local.json").unlink()

    assert "Pending approval" in mcp_list(agent, offline())
