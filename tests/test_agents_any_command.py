"""Any ACP command works as well as a named agent: ``--agent-cmd`` (a wrapper script, ``npx ...``) runs as the CLI
its own runtime names in ``initialize``, with that CLI's environment, allow-list and reading of its permission
requests; a command that names no CLI the pod knows gets a card for every request, and the log says why.

First with an ACP agent built on the official SDK that names itself as told and asks, as codex-acp does, before
it runs our ``browser_navigate`` (tests/named_agent.py); then with the real codex-acp and claude-agent-acp run by a
wrapper script, against an extension that speaks only upstream's contract (it sends no openab ``_meta``, so no
request of the agent's can be relayed to a person: only the ones the pod knows are for the browser run at all).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agents.fake_model import Call, FakeModel, Script, serving
from agents.harness import ACP_COMMANDS, agent_env, require
from test_runtime_pod import FakeBrowser, Turn, open_session, prompt, run_pod

from openab_browser.core.agents.recipes import RECIPES, recipe_for
from openab_browser.core.agents.session_agent import OfferedAgent, named_itself

pytestmark = pytest.mark.anyio

NAMED_AGENT = Path(__file__).with_name("named_agent.py")
# What the extension adds to session/new to say a person can answer the agent's own requests.
RELAY = {"_meta": {"dev.openab/permissionRelay": True}}


def named(name: str, starts: Path) -> list[str]:
    # The agent writes in its own working folder, the one folder of the pod a confined agent may write.
    return [sys.executable, str(NAMED_AGENT), name, starts.name]


def started(starts: Path) -> int:
    """The agents started: the lines of every session's ``starts`` file (``starts`` is the state dir's)."""
    return sum(len(f.read_text().split()) for f in starts.parent.glob(f"sessions/*/work/{starts.name}"))


async def person_allows(params: dict[str, Any]) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": "approved"}}


async def run_turns(tmp_path: Path, agent: str, name: str, *relayed: bool) -> tuple[list[Turn], list[int]]:
    """One pod running the named agent as ``agent``'s command: a session and one prompt per item of ``relayed``
    (whether that session's person can be asked). The turns, and how many agent processes had started after each."""
    starts = tmp_path / "state" / "starts"
    turns: list[Turn] = []
    counts: list[int] = []
    async with run_pod(tmp_path / "state", agent=agent, agent_cmd=named(name, starts)) as pod, \
            pod.extension() as ext:
        FakeBrowser(ext)
        for relay in relayed:
            session_id = await open_session(pod, ext, **(RELAY if relay else {}))
            turns.append(await prompt(ext, session_id, "go", on_permission=person_allows))
            counts.append(started(starts))
    return turns, counts


async def test_a_command_that_names_a_known_cli_runs_as_it_and_its_browser_call_needs_no_card(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="openab_browser")
    turns, counts = await run_turns(tmp_path, "custom", "codex-acp", True, True)

    for turn in turns:
        assert turn.error is None, turn.error
        assert turn.permissions == [], "the request for our browser tool was the policy's, never a card"
        assert "permission: approved" in turn.text, "the browser-only policy allowed it"
    assert "its command names itself 'codex-acp' 9.9.9: it runs as Codex" in caplog.text
    # Started once as a custom command, then again as Codex; a later session's agent is Codex from the outset.
    assert counts == [2, 3]


async def test_a_command_that_names_no_known_cli_gets_a_card_and_the_log_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="openab_browser")
    # Where no person can be asked (the second session), the policy cannot tell the request from any other.
    (asked, unasked), counts = await run_turns(tmp_path, "custom", "acme-agent", True, False)

    assert len(asked.permissions) == 1 and "permission: approved" in asked.text
    assert asked.permissions[0]["toolCall"]["title"] == "Approve MCP tool call"
    assert unasked.permissions == [] and "permission: cancel" in unasked.text
    assert "names itself 'acme-agent' 9.9.9, which no recipe knows" in caplog.text
    assert "goes to the person (a card) or the policy" in caplog.text
    assert counts[-1] == 2, "one start per session: nothing was learned to start it again for"


@pytest.mark.parametrize(("agent", "name", "card", "said"), [
    # What the runtime says wins over --agent: a codex-acp request read as claude's would be nobody's.
    ("claude", "codex-acp", False, "--agent claude was given, but its command names itself 'codex-acp' 9.9.9: "
                                   "it runs as Codex"),
    ("codex", "@agentclientprotocol/claude-agent-acp", True, "it runs as Claude Code"),
    # A command that names nothing runs as --agent says.
    ("codex", "-", False, "its command names itself nothing (initialize has no agentInfo.name), not Codex: it runs "
                          "as Codex, as --agent says"),
])
async def test_a_named_agent_with_its_command_replaced_runs_as_what_the_command_says_it_is(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, agent: str, name: str, card: bool, said: str
) -> None:
    caplog.set_level(logging.INFO, logger="openab_browser")
    (turn,), _counts = await run_turns(tmp_path, agent, name, True)

    assert turn.error is None, turn.error
    assert len(turn.permissions) == (1 if card else 0)
    assert "permission: approved" in turn.text
    assert said in caplog.text


# -- the real CLIs, run by a wrapper script ----------------------------------------------------------------


@pytest.fixture
def fake_model() -> Iterator[FakeModel]:
    with serving(FakeModel()) as model:
        yield model


@pytest.mark.agents
@pytest.mark.parametrize("cli", ["codex", "claude", "qwen"])
async def test_a_real_cli_behind_a_wrapper_script_reaches_the_browser_as_the_named_one_does(
    tmp_path: Path, fake_model: FakeModel, cli: str
) -> None:
    binary = require(ACP_COMMANDS[cli][0])
    agent = agent_env(cli, fake_model.url, tmp_path / cli)
    if cli == "codex":  # as a person runs it: asking before a command leaves the sandbox
        toml = agent.files["config"]
        toml.write_text(toml.read_text().replace('approval_policy = "never"', 'approval_policy = "on-request"'))
    wrapper = tmp_path / "bin" / "my-agent"
    wrapper.parent.mkdir()
    # As a person writes one: the CLI in its ACP mode, nothing of the recipe's own switches.
    mode = " ".join(RECIPES[cli].argv[1:])
    wrapper.write_text(f'#!/bin/sh\nexec "{binary}" {mode} "$@"\n')
    wrapper.chmod(0o755)
    pages = [f"https://example.org/{n}" for n in (1, 2)]
    fake_model.set_script(Script(calls=[Call("browser_navigate", {"url": page}) for page in pages]))

    async with run_pod(tmp_path / "state", env=agent.env, agent="custom", agent_cmd=[str(wrapper)],
                       permissions="browser-only", cancel_grace=5.0) as pod, pod.extension() as ext:
        browser = FakeBrowser(ext)
        session_id = await open_session(pod, ext)  # upstream's contract: no relay, so no card can be shown
        turn = await prompt(ext, session_id, "Open both pages, please.", timeout=120)

    assert turn.result == {"stopReason": "end_turn"}, turn.error
    assert browser.calls == [("browser_navigate", {"url": page}) for page in pages], "2 of 2 calls reached the browser"
    assert f"navigated to {pages[1]}" in turn.text


@pytest.mark.parametrize("agent_info", [
    {"name": "x" * 100_000, "version": "1" * 100_000},
    {"name": "codex-acp\nagent[s-1]: forged log line", "version": {"nested": [[[]]] * 1000}},
    {"name": 5},
    {"name": ["codex-acp"]},
    "codex-acp",
    None,
])
def test_what_a_command_says_of_itself_is_bounded_and_picks_no_recipe_unless_a_name(agent_info: object) -> None:
    offered = OfferedAgent.of(recipe_for("custom", ["my-agent"]), ["my-agent"])

    recipe, said = named_itself(offered, agent_info)

    assert recipe is RECIPES["custom"]
    assert len(said) < 400 and "\n" not in said, "the log line stays one bounded line"
