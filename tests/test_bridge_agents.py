"""Real agent CLIs in bridge mode: the pod's runtime starts codex-acp / claude-agent-acp for a session, the CLI
spawns `openab browser-bridge` itself from the config entry the runtime wrote, and the fake model's
``browser_navigate`` reaches the fake extension through the relay, the pod's Unix socket and the tunnel.

This is the way the relay is used for real: spawned by an agent's own MCP client, with whatever environment
that client gives it, finding its session only through its process ancestry.
"""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from agents.fake_model import Call, FakeModel, Script, serving
from agents.harness import ACP_COMMANDS, agent_env, require
from pydantic import SecretStr
from test_runtime_pod import FakeBrowser, RunningPod, open_session, prompt

from openab_browser.bridge.server import BridgeServer
from openab_browser.core.agents.recipes import RECIPES
from openab_browser.core.agents.runtime import AgentRuntime
from openab_browser.core.settings import Settings
from openab_browser.gateway.app import create_app
from openab_browser.gateway.assemble import assemble
from openab_browser.gateway.server import running_server

pytestmark = [pytest.mark.agents, pytest.mark.anyio]


@pytest.fixture
def fake_model() -> Iterator[FakeModel]:
    with serving(FakeModel()) as model:
        yield model


@contextlib.asynccontextmanager
async def bridge_pod(
    cli: str, via: str, fake_model: FakeModel, tmp_path: Path
) -> AsyncIterator[tuple[RunningPod, BridgeServer]]:
    binary = require(ACP_COMMANDS[cli][0])
    agent = agent_env(cli, fake_model.url, tmp_path / cli)
    recipe = dataclasses.replace(RECIPES[cli], argv=(str(binary), *RECIPES[cli].argv[1:]))
    if via == "config":  # the entry goes into the CLI's own config file instead of session/new
        recipe = dataclasses.replace(recipe, browser_via="config", config_agent=cli)
    token = secrets.token_urlsafe(24)
    socket_dir = Path(f"/tmp/oab-{secrets.token_hex(4)}")  # a Unix socket address holds at most 107 bytes
    pod = assemble(Settings(token=SecretStr(token), port=0, state_dir=tmp_path / "state", browser_mode="bridge",
                            browser_socket=socket_dir / "browser.sock", permissions="browser-only"),
                   env=agent.env, recipe=recipe)
    assert isinstance(pod.backend, AgentRuntime) and isinstance(pod.browser, BridgeServer)
    try:
        async with running_server(create_app(pod), max_frame_bytes=pod.settings.max_frame_bytes) as url:
            yield RunningPod(pod, pod.backend, pod.browser, url, token), pod.browser
    finally:
        shutil.rmtree(socket_dir, ignore_errors=True)


# "acp": the relay's stdio entry arrives in session/new; "config": in the CLI's own config file.
@pytest.mark.parametrize(
    ("cli", "via"), [("codex", "acp"), ("claude", "acp"), ("opencode", "acp"), ("codex", "config")]
)
async def test_a_real_agent_reaches_its_browser_through_the_relay_it_spawned(
    cli: str, via: str, fake_model: FakeModel, tmp_path: Path
) -> None:
    page = f"https://example.org/{secrets.token_hex(4)}"
    fake_model.set_script(Script(calls=[Call("browser_navigate", {"url": page})]))
    async with bridge_pod(cli, via, fake_model, tmp_path) as (pod, bridge), pod.extension() as ext:
        browser = FakeBrowser(ext)
        session_id = await open_session(pod, ext)
        turn = await prompt(ext, session_id, "Open the page, please.", timeout=120)
        relays = bridge.connections

    assert turn.error is None, turn.error
    assert turn.result == {"stopReason": "end_turn"}
    assert browser.calls == [("browser_navigate", {"url": page})]
    assert f"navigated to {page}" in turn.text
    assert relays >= 1  # the agent's own `openab browser-bridge` was connected for its session
