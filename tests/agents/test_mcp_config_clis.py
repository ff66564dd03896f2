"""The real agent CLIs read the config files our writers produce: ``<cli> mcp list`` shows
openab_browser (and, for the proxy entry, connects to it with our bearer token), and no longer
shows it after strip."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from openab_browser.core.agents.config import HttpEndpoint, StdioCommand, strip, trust_folder, write

from .harness import AgentEnv, require
from .mcp_peer import BrowserPeer
from .offline import HostRelay

pytestmark = pytest.mark.agents

# What each CLI prints for a server it reached. Codex's `mcp list` does not connect.
CONNECTED = {"gemini": r"openab_browser: .*- Connected", "opencode": r"openab_browser\W+connected",
             "claude": r"openab_browser: .*- \W*Connected", "qwen": r"openab_browser: .*- Connected"}


def mcp_list(agent: AgentEnv, relay: HostRelay | None) -> str:
    done = agent.run("mcp", "list", relay=relay)
    assert done.returncode == 0, done.stderr
    # gemini prints the list on stderr; opencode colours it even with NO_COLOR.
    return re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)


def trust_project(agent: AgentEnv) -> None:
    """What a user does once by answering claude's trust dialog for the project folder (or with `openab config
    write --trust-folder`): without it, claude keeps project .mcp.json servers "pending approval" whatever the
    settings say. The harness's CLAUDE_CONFIG_DIR moves the record as it moves claude's own."""
    trust_folder("claude", agent.cwd, home=agent.home, env=agent.env)


def openab_config_write(agent: AgentEnv, *args: str) -> subprocess.CompletedProcess[str]:
    """`openab config write` as a person runs it, in the CLI's environment (its HOME and CLAUDE_CONFIG_DIR)."""
    done = subprocess.run([sys.executable, "-m", "openab_browser.gateway.cli", "config", "write", "--agent", agent.cli,
                           "--dir", str(agent.cwd), *args], env=agent.env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done


# What each CLI's `mcp list` says of a project server in a folder it does not trust.
UNTRUSTED = {"claude": r"openab_browser: .*Pending approval", "gemini": r"openab_browser: .*- Disabled"}


@pytest.mark.parametrize("cli", ["claude", "gemini"])
def test_config_write_says_what_the_cli_needs_and_trust_folder_does_it(
    cli: str, browser: BrowserPeer, agent_setup: Callable[[str], AgentEnv], offline: Callable[..., HostRelay | None]
) -> None:
    require(cli)
    agent = agent_setup(cli)
    if cli == "gemini":
        # The harness turns gemini's folder trust off for its other tests; a person's gemini has it on.
        settings = json.loads(agent.files["settings"].read_text())
        del settings["security"]["folderTrust"]
        agent.files["settings"].write_text(json.dumps(settings))
    relay = offline(browser.port)
    # Claude reads the token from the variable its entry names; gemini gets it written in.
    agent.env["OPENAB_TEST_TOKEN"] = browser.token
    proxy = ("--mode", "proxy", "--url", browser.url, "--token-env", "OPENAB_TEST_TOKEN")

    said = openab_config_write(agent, *proxy).stdout
    assert f"{cli} does not trust {agent.cwd.resolve()} yet" in said
    assert f"--dir {agent.cwd.resolve()} --trust-folder" in said
    assert browser.token not in said
    assert re.search(UNTRUSTED[cli], mcp_list(agent, relay))

    said = openab_config_write(agent, *proxy, "--trust-folder").stdout
    assert f"that you trust {agent.cwd.resolve()}" in said
    assert re.search(CONNECTED[cli], mcp_list(agent, relay))
    assert browser.requests and all(ok for _m, ok, _ua in browser.requests)


@pytest.mark.parametrize("cli", ["codex", "gemini", "opencode", "claude", "qwen", "auggie"])
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
    elif cli == "auggie":  # its list neither connects nor shows headers
        shown = agent.run("mcp", "list", "--json", relay=relay)
        assert {"name": "openab_browser", "transport": "http", "url": browser.url, "enabled": True}.items() <= next(
            s for s in json.loads(shown.stdout)["servers"] if s["name"] == "openab_browser").items()
    else:
        shown = agent.run("mcp", "get", "openab_browser", "--json", relay=relay)
        transport = json.loads(shown.stdout)["transport"]
        assert transport["url"] == browser.url
        assert transport["http_headers"] == {"Authorization": f"Bearer {browser.token}"}

    assert strip(cli, endpoint, dir=agent.cwd, home=agent.home)
    assert "openab_browser" not in mcp_list(agent, relay)


@pytest.mark.parametrize("cli", ["codex", "gemini", "opencode", "claude", "qwen", "auggie"])
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
