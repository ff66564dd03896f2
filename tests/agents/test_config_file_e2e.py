"""The config-file path end to end: our writer puts the proxy entry into a real CLI's own config
file, and that CLI, run headless or as an ACP agent given no mcpServers at all, calls the tool
with our bearer token."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import anyio
import pytest
import tomlkit
from acp import text_block
from acp.schema import HttpHeader, HttpMcpServer

from openab.core.mcp_config import HttpEndpoint, write

from .fake_model import Call, FakeModel, Script
from .harness import ACP_COMMANDS, AgentEnv, acp_agent, require
from .mcp_peer import BrowserPeer, browser_peer
from .offline import HostRelay
from .test_acp_agents import RecordingClient, open_session

pytestmark = pytest.mark.agents

# How each CLI runs one prompt headless and lets the browser tool run without a person to ask.
HEADLESS = {
    "codex": ["exec", "--strict-config", "--skip-git-repo-check", "Open the page."],
    "claude": ["-p", "Open the page.", "--allowedTools", "mcp__openab_browser__browser_navigate"],
    "gemini": ["-p", "Open the page.", "--allowed-mcp-server-names", "openab_browser"],
    "opencode": ["run", "Open the page."],
}


@dataclass
class Setup:
    agent: AgentEnv
    peer: BrowserPeer
    relay: HostRelay | None
    page: str


@pytest.fixture
def setup(
    request: pytest.FixtureRequest,
    fake_model: FakeModel,
    agent_setup: Callable[[str], AgentEnv],
    offline: Callable[..., HostRelay | None],
) -> Iterator[Setup]:
    cli: str = request.param
    page = f"https://example.org/{secrets.token_hex(4)}"
    fake_model.set_script(Script(calls=[Call("browser_navigate", {"url": page})]))
    token = secrets.token_urlsafe(16)
    with browser_peer(token) as peer:
        agent = agent_setup(cli)
        write(cli, HttpEndpoint(peer.url, token), dir=agent.cwd, home=agent.home, env=agent.env)
        if cli == "codex":
            approve_without_asking(agent)
        yield Setup(agent, peer, offline(int(peer.url.rsplit(":", 1)[1].split("/")[0])), page)


def approve_without_asking(agent: AgentEnv) -> None:
    """What a Codex user adds by hand for unattended runs: with approval_policy = "never" Codex
    otherwise refuses every MCP call ("requires approval"). Our rewrite keeps it (test below)."""
    path = agent.home / ".codex" / "config.toml"
    doc = tomlkit.parse(path.read_text())
    doc["mcp_servers"]["openab_browser"]["default_tools_approval_mode"] = "approve"  # type: ignore[index]
    path.write_text(tomlkit.dumps(doc))


@pytest.mark.parametrize("setup", list(HEADLESS), indirect=True)
def test_headless_cli_calls_the_tool_from_the_file_we_wrote(setup: Setup) -> None:
    require(setup.agent.cli)
    done = setup.agent.run(*HEADLESS[setup.agent.cli], relay=setup.relay)

    assert done.returncode == 0, done.stderr[-2000:]
    assert setup.peer.calls == [("browser_navigate", {"url": setup.page})]
    assert all(ok for _m, ok, _ua in setup.peer.requests)
    assert "FINAL ANSWER: tool returned <<" in done.stdout and f"navigated to {setup.page}" in done.stdout


@pytest.mark.anyio
@pytest.mark.parametrize("setup", list(ACP_COMMANDS), indirect=True)
async def test_acp_agent_given_no_mcp_servers_uses_the_file_we_wrote(setup: Setup) -> None:
    require(ACP_COMMANDS[setup.agent.cli][0])
    client = RecordingClient()
    with anyio.fail_after(180):
        async with acp_agent(setup.agent, client, setup.relay) as (conn, _process):
            session_id = await open_session(conn, setup.agent, [])
            result = await conn.prompt(session_id=session_id, prompt=[text_block("Open the page.")])

    assert setup.peer.calls == [("browser_navigate", {"url": setup.page})]
    assert result.stop_reason == "end_turn"
    assert f"navigated to {setup.page}" in "".join(client.text)


@pytest.mark.parametrize("setup", ["codex"], indirect=True)
def test_codex_keeps_the_users_approval_mode_across_our_rewrite(setup: Setup) -> None:
    write("codex", HttpEndpoint(setup.peer.url, "next-session-token"), home=setup.agent.home)
    doc = tomlkit.parse((setup.agent.home / ".codex" / "config.toml").read_text())
    assert doc["mcp_servers"]["openab_browser"]["default_tools_approval_mode"] == "approve"  # type: ignore[index]


@pytest.mark.anyio
@pytest.mark.parametrize("cli", list(ACP_COMMANDS))
async def test_injected_server_wins_over_a_stale_entry_of_the_same_name(
    cli: str,
    fake_model: FakeModel,
    agent_setup: Callable[[str], AgentEnv],
    offline: Callable[..., HostRelay | None],
) -> None:
    """A file entry left by an earlier session must not take this session's browser calls."""
    require(ACP_COMMANDS[cli][0])
    fake_model.set_script(Script(calls=[Call("browser_navigate", {"url": "https://example.org/"})]))
    with browser_peer("stale-token") as stale, browser_peer("live-token") as live:
        agent = agent_setup(cli)
        write(cli, HttpEndpoint(stale.url, "stale-token"), dir=agent.cwd, home=agent.home, env=agent.env)
        relay = offline(*(int(p.url.rsplit(":", 1)[1].split("/")[0]) for p in (stale, live)))
        injected = HttpMcpServer(type="http", name="openab_browser", url=live.url,
                                 headers=[HttpHeader(name="Authorization", value="Bearer live-token")])
        with anyio.fail_after(180):
            async with acp_agent(agent, RecordingClient(), relay) as (conn, _process):
                session_id = await open_session(conn, agent, [injected])
                await conn.prompt(session_id=session_id, prompt=[text_block("Open the page.")])

    assert live.calls == [("browser_navigate", {"url": "https://example.org/"})]
    assert stale.calls == []
