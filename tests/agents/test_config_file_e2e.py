"""The config-file path end to end: our writer puts the proxy entry into a real CLI's own config
file, and that CLI, run headless or as an ACP agent given no mcpServers at all, calls the tool
with our bearer token."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import anyio
import pytest
import tomlkit
from acp import text_block
from acp.schema import HttpMcpServer

from openab_browser.core.agents.config import HttpEndpoint, write
from openab_browser.core.agents.provision import BrowserProvision
from openab_browser.core.agents.recipes import RECIPES
from openab_browser.core.mcp.access import BrowserEndpoint

from .harness import AgentEnv, acp_agent, require
from .mcp_peer import BrowserPeer, browser_peer
from .offline import HostRelay
from .test_acp_agents import McpServer, RecordingClient, open_session

pytestmark = pytest.mark.agents

# How each CLI runs one prompt headless and lets the browser tool run without a person to ask.
HEADLESS = {
    "codex": ["exec", "--strict-config", "--skip-git-repo-check", "Open the page."],
    "claude": ["-p", "Open the page.", "--allowedTools", "mcp__openab_browser__browser_navigate"],
    "gemini": ["-p", "Open the page.", "--allowed-mcp-server-names", "openab_browser"],
    "opencode": ["run", "Open the page."],
}


@dataclass
class Configured:
    agent: AgentEnv
    relay: HostRelay | None


@pytest.fixture
def configure(
    page: str, browser: BrowserPeer, agent_setup: Callable[[str], AgentEnv], offline: Callable[..., HostRelay | None]
) -> Callable[[str], Configured]:
    """``configure(cli)``: that CLI set up against the fake model, with our writer's proxy entry for
    ``browser`` in its own config file, and a relay that reaches both."""

    def make(cli: str) -> Configured:
        agent = agent_setup(cli)
        write(cli, HttpEndpoint(browser.url, browser.token), dir=agent.cwd, home=agent.home, env=agent.env)
        if cli == "codex":
            approve_without_asking(agent)
        return Configured(agent, offline(browser.port))

    return make


def approve_without_asking(agent: AgentEnv) -> None:
    """What a Codex user adds by hand for unattended runs: with approval_policy = "never" Codex
    otherwise refuses every MCP call ("requires approval"). Our rewrite keeps it (test below)."""
    path = agent.home / ".codex" / "config.toml"
    doc = tomlkit.parse(path.read_text())
    doc["mcp_servers"]["openab_browser"]["default_tools_approval_mode"] = "approve"
    path.write_text(tomlkit.dumps(doc))


@pytest.mark.parametrize("cli", list(HEADLESS))
def test_headless_cli_calls_the_tool_from_the_file_we_wrote(
    cli: str, page: str, browser: BrowserPeer, configure: Callable[[str], Configured]
) -> None:
    require(cli)
    configured = configure(cli)
    done = configured.agent.run(*HEADLESS[cli], relay=configured.relay)

    assert done.returncode == 0, done.stderr[-2000:]
    assert browser.calls == [("browser_navigate", {"url": page})]
    assert all(ok for _m, ok, _ua in browser.requests)
    assert "FINAL ANSWER: tool returned <<" in done.stdout and f"navigated to {page}" in done.stdout


@pytest.mark.anyio
async def test_acp_agent_given_no_mcp_servers_uses_the_file_we_wrote(
    acp_cli: str, page: str, browser: BrowserPeer, configure: Callable[[str], Configured]
) -> None:
    configured = configure(acp_cli)
    client = RecordingClient()
    with anyio.fail_after(180):
        async with acp_agent(configured.agent, client, configured.relay) as (conn, _process):
            session_id = await open_session(conn, configured.agent, [])
            result = await conn.prompt(session_id=session_id, prompt=[text_block("Open the page.")])

    assert browser.calls == [("browser_navigate", {"url": page})]
    assert result.stop_reason == "end_turn"
    assert f"navigated to {page}" in "".join(client.text)


def test_codex_keeps_the_users_approval_mode_across_our_rewrite(configure: Callable[[str], Configured]) -> None:
    agent = configure("codex").agent
    write("codex", HttpEndpoint("http://127.0.0.1:1/mcp", "next-session-token"), home=agent.home, env=agent.env)
    doc = tomlkit.parse((agent.home / ".codex" / "config.toml").read_text())
    assert doc["mcp_servers"]["openab_browser"]["default_tools_approval_mode"] == "approve"


@pytest.mark.anyio
async def test_injected_server_wins_over_a_stale_entry_of_the_same_name(
    acp_cli: str,
    page: str,
    browser: BrowserPeer,
    agent_setup: Callable[[str], AgentEnv],
    offline: Callable[..., HostRelay | None],
) -> None:
    """A file entry left by an earlier session must not take this session's browser calls.

    The server reaches the CLI the way the pod's own provision gives it (``session/new.mcpServers``, or for Copilot,
    whose own config wins over those, a file named on its command line)."""
    provision = BrowserProvision(RECIPES[acp_cli])
    with browser_peer("stale-token") as stale:
        agent = agent_setup(acp_cli)
        write(acp_cli, HttpEndpoint(stale.url, "stale-token"), dir=agent.cwd, home=agent.home, env=agent.env)
        agent.cwd.chmod(0o700)  # as the pod makes each session's folder
        provided = provision.provide("s1", BrowserEndpoint("proxy", HttpEndpoint(browser.url, browser.token)),
                                     agent.cwd, agent.env)
        servers: list[McpServer] = [HttpMcpServer.model_validate(server) for server in provided.servers]
        try:
            with anyio.fail_after(180):
                async with acp_agent(agent, RecordingClient(), offline(stale.port, browser.port),
                                     provided.argv) as (conn, _process):
                    session_id = await open_session(conn, agent, servers)
                    await conn.prompt(session_id=session_id, prompt=[text_block("Open the page.")])
        finally:
            provision.withdraw(provided)

    assert (browser.calls, stale.calls) == ([("browser_navigate", {"url": page})], [])
    assert provided.file is None or not (provided.file.exists() or provided.file.is_symlink())
