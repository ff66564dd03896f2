"""Real agent CLIs run by the pod's runtime, end to end.

The fake extension opens a session over `/acp` and declares its browser; the runtime starts the real CLI
(codex-acp, claude-agent-acp) with the session's proxy endpoint; the fake model asks for
``browser_navigate``; the CLI calls it through our proxy and the tunnel; the fake extension sees the
navigation; the answer built from the tool's result streams back. Then: permissions relayed and answered,
a cancel mid-turn, an agent killed mid-turn, and a resume on a new socket reaching the same agent.

The CLIs run with their offline settings (tests/agents/harness.py) against our fake model, but not in a
network namespace: the proxy's port is per session, so it cannot be forwarded in before the agent starts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import secrets
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from agents.fake_model import Call, FakeModel, Script, serving
from agents.harness import ACP_COMMANDS, agent_env, require
from test_runtime_pod import (
    BROWSER_SERVER,
    FakeBrowser,
    PermissionAnswer,
    RunningPod,
    Turn,
    browser_session,
    environ,
    eventually,
    live_group,
    open_session,
    prompt,
    run_pod,
)

from openab.core.agents.config import config_files
from openab.core.agents.recipes import RECIPES

pytestmark = [pytest.mark.agents, pytest.mark.anyio]

RELAY = {"_meta": {"dev.openab/permissionRelay": True}}


@pytest.fixture
def fake_model() -> Iterator[FakeModel]:
    with serving(FakeModel()) as model:
        yield model


@dataclasses.dataclass
class Pod:
    running: RunningPod
    model: FakeModel
    page: str
    env: dict[str, str]

    async def open_the_page(
        self, *, on_permission: PermissionAnswer | None = None, **session: Any
    ) -> tuple[FakeBrowser, Turn]:
        """One session asking its agent to open ``page``: what the browser saw, and the turn (whose prompt starts
        the agent)."""
        async with self.running.extension() as ext:
            browser = FakeBrowser(ext)
            session_id = await open_session(self.running, ext, **session)
            turn = await prompt(ext, session_id, "Open the page, please.", timeout=120, on_permission=on_permission)
        return browser, turn


@pytest.fixture
async def pod_for(request: pytest.FixtureRequest, fake_model: FakeModel, tmp_path: Path) -> AsyncIterator[Pod]:
    # "codex", "gemini:auto" (a permission policy), "codex/bridge" (a browser mode), "codex+config" (the
    # browser in the CLI's own config file, as Cursor and Kiro get it)
    spec, config, _ = str(request.param).partition("+config")
    spec, _, mode = spec.partition("/")
    cli, _, policy = spec.partition(":")
    binary = require(ACP_COMMANDS[cli][0])
    agent = agent_env(cli, fake_model.url, tmp_path / cli)
    # The bridge's entry is the `openab browser-bridge` command: the agent's MCP client runs it from PATH.
    agent.env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{agent.env['PATH']}"
    recipe = RECIPES[cli]
    recipe = dataclasses.replace(recipe, argv=(str(binary), *recipe.argv[1:]))
    if config:
        recipe = dataclasses.replace(recipe, browser_via="config", config_agent=cli)
    page = f"https://example.org/{secrets.token_hex(4)}"
    fake_model.set_script(Script(calls=[Call("browser_navigate", {"url": page})]))
    async with run_pod(tmp_path / "state", env=agent.env, recipe=recipe, permissions=policy or "browser-only",
                       cancel_grace=5.0, browser_mode=mode or "proxy") as running:
        yield Pod(running, fake_model, page, agent.env)


both = pytest.mark.parametrize("pod_for", ["codex", "claude"], indirect=True)


@pytest.mark.parametrize("pod_for", ["codex", "claude", "codex/bridge", "claude/bridge"], indirect=True)
async def test_the_agent_calls_the_browser_tool_and_the_answer_streams_back(pod_for: Pod) -> None:
    browser, turn = await pod_for.open_the_page()

    assert turn.error is None, turn.error
    assert turn.result == {"stopReason": "end_turn"}
    # The effect happened in the browser, through the proxy and the tunnel ...
    assert browser.calls == [("browser_navigate", {"url": pod_for.page})]
    assert browser.url == pod_for.page
    # ... the browser-only policy approved it (no person was asked), and the whole answer streamed back.
    assert f"navigated to {pod_for.page}" in turn.text and turn.text.count("FINAL ANSWER") == 1
    assert "tool_call" in turn.kinds()


@both
async def test_a_long_reply_streams_whole_in_many_chunks(pod_for: Pod) -> None:
    # Upstream cut a 900-line reply to its first message; every chunk must arrive, in order.
    lines = [f"line {n:03d} of the long answer" for n in range(900)]
    pod_for.model.set_script(Script(calls=[Call("browser_navigate", {"url": pod_for.page})],
                                    answer="\n".join(lines) + "\nFINAL {result}"))
    pod = pod_for.running
    async with pod.extension() as ext:
        FakeBrowser(ext)
        session_id = await open_session(pod, ext)
        turn = await prompt(ext, session_id, "Open the page and tell me everything.", timeout=120)

    assert turn.result == {"stopReason": "end_turn"}, turn.error
    assert "\n".join(lines) + "\nFINAL " in turn.text and f"navigated to {pod_for.page}" in turn.text
    assert turn.kinds().count("agent_message_chunk") > 10


@pytest.mark.parametrize("pod_for", ["codex+config", "claude+config", "codex/bridge+config"], indirect=True)
async def test_an_agent_given_the_browser_in_its_own_config_file_calls_it(pod_for: Pod) -> None:
    pod = pod_for.running
    async with pod.extension() as ext:
        browser, session_id, pid = await browser_session(pod, ext)
        env = environ(pid)
        session = pod.pod.sessions.get(session_id)
        assert session is not None
        [main, *_] = config_files(pod.runtime.recipe.name, dir=pod.runtime.workdir(session), home=Path(env["HOME"]),
                                  env=env)
        assert "openab_browser" in main.path.read_text()
        turn = await prompt(ext, session_id, "Open the page, please.", timeout=120)
        await pod.pod.evict(session_id, "test")

    assert turn.result == {"stopReason": "end_turn"}, turn.error
    assert browser.calls == [("browser_navigate", {"url": pod_for.page})]
    assert not main.path.exists() or "openab_browser" not in main.path.read_text(), "our entry left with the session"


@pytest.mark.parametrize("pod_for", ["gemini:auto", "opencode:auto"], indirect=True)
async def test_gemini_and_opencode_call_the_browser_tool_under_the_auto_policy(pod_for: Pod) -> None:
    browser, turn = await pod_for.open_the_page()

    assert turn.result == {"stopReason": "end_turn"}, turn.error
    assert browser.calls == [("browser_navigate", {"url": pod_for.page})]
    assert f"navigated to {pod_for.page}" in turn.text


@pytest.mark.parametrize("pod_for", ["gemini"], indirect=True)
async def test_browser_only_approves_nothing_for_an_agent_whose_tool_identity_is_unverified(pod_for: Pod) -> None:
    # gemini's request names our server only in its title and a call id the model can influence.
    browser, turn = await pod_for.open_the_page()

    assert turn.error is None, turn.error
    assert browser.calls == [], "the policy rejected the call: it never reached the browser"


@pytest.mark.parametrize("pod_for", ["codex", "claude", "gemini"], indirect=True)
async def test_a_relayed_permission_is_asked_in_the_browser_and_its_answer_counts(pod_for: Pod) -> None:
    pod = pod_for.running
    asked: list[dict[str, Any]] = []

    async def refuse(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        reject = next(o for o in params["options"] if o["kind"].startswith("reject"))
        return {"outcome": {"outcome": "selected", "optionId": reject["optionId"]}}

    async def allow(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        once = next(o for o in params["options"] if o["kind"] == "allow_once")
        return {"outcome": {"outcome": "selected", "optionId": once["optionId"]}}

    async with pod.extension() as ext:
        browser = FakeBrowser(ext)
        session_id = await open_session(pod, ext, **RELAY)
        refused = await prompt(ext, session_id, "Open the page, please.", timeout=120, on_permission=refuse)
        assert asked, "the agent's permission request reached the extension"
        assert browser.calls == [], "a refused tool never ran"
        assert refused.result is not None or refused.error is not None

        asked.clear()
        # The refusal is in the conversation now as the first call's result: the model asks again.
        call = Call("browser_navigate", {"url": pod_for.page})
        pod_for.model.set_script(Script(calls=[call, call]))
        allowed = await prompt(ext, session_id, "Open the page, please.", timeout=120, on_permission=allow)

    assert asked and asked[0]["sessionId"] == session_id and asked[0]["toolCall"]["toolCallId"]
    assert allowed.result == {"stopReason": "end_turn"}
    assert browser.calls == [("browser_navigate", {"url": pod_for.page})]


@pytest.mark.parametrize("pod_for", ["codex"], indirect=True)
async def test_a_permission_nobody_answers_is_rejected_after_the_timeout(pod_for: Pod) -> None:
    pod_for.running.pod.settings.permission_timeout = 1

    async def walk_away(params: dict[str, Any]) -> dict[str, Any]:
        await asyncio.Event().wait()  # the person never answers; the runtime's timeout must end this
        raise AssertionError("unreachable")

    browser, turn = await pod_for.open_the_page(on_permission=walk_away, **RELAY)

    assert turn.permissions, "the person was asked"
    assert turn.result == {"stopReason": "end_turn"}, turn.error
    assert browser.calls == [], "an unanswered permission is a rejection"


@pytest.mark.parametrize("pod_for", ["codex"], indirect=True)
async def test_an_answer_naming_an_option_the_agent_did_not_offer_is_a_rejection(pod_for: Pod) -> None:
    async def forge(params: dict[str, Any]) -> dict[str, Any]:
        return {"outcome": {"outcome": "selected", "optionId": "approved-for-everything"}}

    browser, turn = await pod_for.open_the_page(on_permission=forge, **RELAY)

    assert turn.permissions and turn.result == {"stopReason": "end_turn"}
    assert browser.calls == []


@both
async def test_cancel_mid_turn_stops_the_agents_turn_and_the_agent_stays(pod_for: Pod) -> None:
    pod, model = pod_for.running, pod_for.model
    # The gateway would end the turn itself only after this grace: an answer before it is the agent's own.
    pod.pod.settings.cancel_grace = 600
    model.set_script(Script(text="too late", hang=True))
    async with pod.extension() as ext:
        _browser, session_id, pid = await browser_session(pod, ext)
        running = asyncio.ensure_future(prompt(ext, session_id, "Think hard.", timeout=60))
        await model.wait_hanging()
        await ext.notify("session/cancel", {"sessionId": session_id})
        cancelled = await running  # the model is still holding its answer: only the agent can end this turn

        assert cancelled.error is None, cancelled.error
        assert cancelled.result == {"stopReason": "cancelled"}
        assert "too late" not in cancelled.text
        assert pod.runtime.agents[session_id] == pid, "cancel stops the turn, not the agent"
        model.set_script(Script(text="still here"))
        model.release()
        again = await prompt(ext, session_id, "Are you there?", timeout=120)

    assert again.result == {"stopReason": "end_turn"} and "still here" in again.text


@both
async def test_an_agent_killed_mid_turn_ends_the_prompt_clearly_and_a_fresh_one_takes_over(pod_for: Pod) -> None:
    pod, model = pod_for.running, pod_for.model
    model.set_script(Script(hang=True))
    async with pod.extension() as ext:
        browser, session_id, pid = await browser_session(pod, ext)
        running = asyncio.ensure_future(prompt(ext, session_id, "Open the page, please.", timeout=120))
        await model.wait_hanging()
        os.kill(pid, signal.SIGKILL)  # the launcher only, as an OOM kill would: its native binary lives on
        crashed = await running

        assert crashed.error is not None and "The agent ended mid-turn" in str(crashed.error)
        assert "signal 9" in str(crashed.error) and "Prompt again" in str(crashed.error)
        await eventually(lambda: not live_group(pid))  # what the launcher left behind went with it
        model.set_script(Script(calls=[Call("browser_navigate", {"url": pod_for.page})]))
        model.release()
        again = await prompt(ext, session_id, "Open the page, please.", timeout=120)

    assert again.result == {"stopReason": "end_turn"}
    assert pod.runtime.agents[session_id] not in (None, pid)
    assert browser.url == pod_for.page


@pytest.mark.parametrize("pod_for", ["codex"], indirect=True)
async def test_a_socket_lost_mid_turn_cancels_the_agents_turn_and_the_resumed_session_prompts_again(
    pod_for: Pod,
) -> None:
    pod, model = pod_for.running, pod_for.model
    model.set_script(Script(text="too late", hang=True))
    async with pod.extension() as first:
        _first, session_id, pid = await browser_session(pod, first)
        await first.send({"jsonrpc": "2.0", "id": "p1", "method": "session/prompt",
                          "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": "Think."}]}})
        await model.wait_hanging()
    # The socket is gone mid-turn. The agent is told to cancel; it stays, and serves the resumed session.
    model.set_script(Script(calls=[Call("browser_navigate", {"url": pod_for.page})]))
    model.release()
    async with pod.extension() as second:
        browser = FakeBrowser(second)
        await second.request("session/resume", {"sessionId": session_id, "cwd": "/", "mcpServers": [BROWSER_SERVER]})
        await pod.pod.tunnels.wait_attached(session_id, timeout=15)
        turn = await prompt(second, session_id, "Open the page, please.", timeout=120)
        second_pid = pod.runtime.agents.get(session_id)

    assert turn.result == {"stopReason": "end_turn"}, turn.error
    assert "too late" not in turn.text, "nothing of the abandoned turn leaks into the next one"
    assert browser.url == pod_for.page
    assert second_pid == pid


@both
async def test_after_an_idle_stop_a_fresh_agent_takes_the_conversation_up_again(pod_for: Pod) -> None:
    pod, model = pod_for.running, pod_for.model
    model.set_script(Script(text="Noted."))
    async with pod.extension() as ext:
        _browser, session_id, pid = await browser_session(pod, ext)
        first = await prompt(ext, session_id, "Remember the word PINEAPPLE-7731.", timeout=120)
        pod.pod.settings.agent_idle_ttl = 0.01
        await asyncio.sleep(0.05)
        pod.runtime.sweep_idle()
        await eventually(lambda: not live_group(pid))
        model.log.clear()
        second = await prompt(ext, session_id, "Which word did I ask you to remember?", timeout=120)
        second_pid = pod.runtime.agents.get(session_id)

    assert first.result == second.result == {"stopReason": "end_turn"}, second.error
    assert second_pid not in (None, pid), "a new process"
    asked = [entry for entry in model.log if entry.tools]
    assert asked and "PINEAPPLE-7731" in json.dumps(asked[-1].body), "the model saw the earlier conversation"


@both
async def test_after_a_pod_restart_the_resumed_session_has_its_conversation_back(
    pod_for: Pod, tmp_path: Path
) -> None:
    before, model = pod_for.running, pod_for.model
    model.set_script(Script(text="Noted."))
    async with before.extension() as ext:
        _browser, session_id, _pid = await browser_session(before, ext)
        await prompt(ext, session_id, "Remember the word MANGO-4412.", timeout=120)
    # A second pod on the same state dir, as after a redeploy; the extension resumes its session there.
    await before.pod.aclose()
    async with run_pod(before.pod.settings.state_dir, env=pod_for.env, recipe=before.runtime.recipe) as after, \
            after.extension() as ext:
        FakeBrowser(ext)
        await ext.request("session/resume", {"sessionId": session_id, "cwd": "/", "mcpServers": [BROWSER_SERVER]})
        await after.pod.tunnels.wait_attached(session_id, timeout=15)
        assert session_id not in after.runtime.agents, "the resumed session's agent waits for its first prompt"
        model.log.clear()
        turn = await prompt(ext, session_id, "Which word did I ask you to remember?", timeout=120)

    assert turn.result == {"stopReason": "end_turn"}, turn.error
    asked = [entry for entry in model.log if entry.tools]
    assert asked and "MANGO-4412" in json.dumps(asked[-1].body), "the model saw the conversation from before"


@both
async def test_resume_on_a_new_socket_reaches_the_same_agent(pod_for: Pod) -> None:
    pod = pod_for.running
    async with pod.extension() as first:
        _first, session_id, pid = await browser_session(pod, first)
    async with pod.extension() as second:
        browser = FakeBrowser(second)
        await second.request("session/resume", {"sessionId": session_id, "cwd": "/", "mcpServers": [BROWSER_SERVER]})
        await pod.pod.tunnels.wait_attached(session_id, timeout=15)
        turn = await prompt(second, session_id, "Open the page, please.", timeout=120)

    assert turn.result == {"stopReason": "end_turn"}
    assert pod.runtime.agents[session_id] == pid
    assert browser.url == pod_for.page, "the resumed socket's browser did the work"


@both
async def test_closing_the_session_kills_the_agents_process_group(pod_for: Pod) -> None:
    pod = pod_for.running
    async with pod.extension() as ext:
        _browser, session_id, pid = await browser_session(pod, ext)
    members = live_group(pid)
    assert pid in members and len(members) > 1, "launcher and native binary share the agent's group"
    await pod.pod.evict(session_id, "test")
    assert live_group(pid) == set()
    assert session_id not in pod.runtime.agents

