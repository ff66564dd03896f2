"""Fixtures for driving real agent CLIs offline: the fake model, the offline relay, and per-CLI setups.

Use them from any test under tests/agents (or import ``agents.harness`` elsewhere):

    def test_x(fake_model, agent_setup, offline):
        fake_model.set_script(Script(calls=[Call("browser_navigate", {"url": "https://example.org/"})]))
        codex = agent_setup("codex")              # env, HOME, cwd, config files for codex / codex-acp
        relay = offline(mcp_port)                 # the fake model's port is always forwarded
        async with acp_agent(codex, client, relay) as (conn, process): ...
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .fake_model import Call, FakeModel, Script, serving
from .harness import ACP_COMMANDS, AgentEnv, agent_env, require
from .mcp_peer import BrowserPeer, browser_peer
from .offline import HostRelay, can_unshare


@pytest.fixture
def fake_model() -> Iterator[FakeModel]:
    """A scripted fake model on 127.0.0.1 (``fake_model.url``); set its script per test."""
    with serving(FakeModel()) as model:
        yield model


@pytest.fixture
def agent_setup(fake_model: FakeModel, tmp_path: Path) -> Callable[[str], AgentEnv]:
    """``agent_setup("codex" | "claude" | "gemini" | "opencode")``: that CLI set up against the
    fake model, in a fresh HOME and working directory under tmp_path."""
    counter = itertools.count()

    def make(cli: str) -> AgentEnv:
        return agent_env(cli, fake_model.url, tmp_path / f"{cli}-{next(counter)}")

    return make


@pytest.fixture
def offline(fake_model: FakeModel) -> Iterator[Callable[..., HostRelay | None]]:
    """``offline(*ports)``: a relay whose ``wrap(argv)`` runs argv with no network but loopback,
    reaching the fake model and ``ports`` on 127.0.0.1. None where namespaces are not allowed
    (not root): the CLIs then run with only their offline settings."""
    relays: list[HostRelay] = []
    allowed = can_unshare()

    def make(*ports: int) -> HostRelay | None:
        if not allowed:
            return None
        relay = HostRelay([fake_model.port, *ports]).__enter__()
        relays.append(relay)
        return relay

    yield make
    for relay in relays:
        relay.__exit__(None, None, None)


# Qwen Code's ACP side is run through the pod instead (tests/test_agents_e2e.py): it starts the slowest of them, and the
# suite is near its time limit.
@pytest.fixture(params=[cli for cli in ACP_COMMANDS if cli != "qwen"])
def acp_cli(request: pytest.FixtureRequest) -> str:
    """Each CLI with an ACP agent in turn (codex, claude, gemini, opencode); skipped when not installed."""
    cli: str = request.param
    require(ACP_COMMANDS[cli][0])
    return cli


@pytest.fixture
def page(fake_model: FakeModel) -> str:
    """A fresh URL, and the fake model scripted to navigate to it and answer with the result."""
    url = f"https://example.org/{secrets.token_hex(4)}"
    fake_model.set_script(Script(calls=[Call("browser_navigate", {"url": url})]))
    return url


@pytest.fixture
def browser() -> Iterator[BrowserPeer]:
    """An MCP server with ``browser_navigate`` behind a fresh bearer token (``.url``, ``.port``, ``.calls``)."""
    with browser_peer(secrets.token_urlsafe(16)) as peer:
        yield peer
