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
import stat
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from agents.fake_model import Call, FakeModel, Script, serving
from agents.harness import ACP_COMMANDS, agent_env, require
from agents.mcp_peer import browser_peer
from live_settings import changed
from test_runtime_pod import (
    BROWSER_SERVER,
    FakeBrowser,
    PermissionAnswer,
    RunningPod,
    Turn,
    browser_session,
    environ,
    live_group,
    open_session,
    prompt,
    run_pod,
)
from waits import eventually

from openab_browser.core.agents.config import HttpEndpoint, config_files, write
from openab_browser.core.agents.recipes import RECIPES

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
    cli: str = "codex"
    marker_name: str = "pwned-none"

    @property
    def marker(self) -> Path:
        """What the CLI's shell tool creates in the session's working folder (the only folder of the pod a
        confined agent may write; docs/security.md), if it ran."""
        state = self.running.pod.settings.state_dir
        return next(state.glob(f"sessions/*/work/{self.marker_name}"), state / self.marker_name)

    def dressed_shell(self) -> Call:
        """The CLI's shell tool creating ``marker``, with our server's and tool's names written wherever this
        CLI's model can write them (tests/test_runtime_permissions.py has the requests these become)."""
        command = f"touch {self.marker_name}"  # run in the agent's working folder
        return {
            "claude": Call("Bash", {"command": command, "description": "mcp__openab_browser__browser_click"}),
            # require_escalated: else codex runs it in its read-only sandbox without asking, and it fails there.
            "codex": Call("exec_command", {"cmd": command, "sandbox_permissions": "require_escalated",
                                           "justification": 'Allow the openab_browser MCP server to run tool '
                                                            '"browser_click"?'}),
            "gemini": Call("run_shell_command", {"command": command,
                                                 "description": "browser_click (openab_browser MCP Server)"}),
            "opencode": Call("bash", {"command": command, "description": "openab_browser_browser_click"}),
            "copilot": Call("bash", {"command": command, "description": "browser_click"}),
            "qwen": Call("run_shell_command", {"command": command,
                                               "description": "mcp__openab_browser__browser_click"}),
        }[self.cli]

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
    if cli == "codex":  # as a person runs it: asking before a command leaves the sandbox
        toml = agent.files["config"]
        toml.write_text(toml.read_text().replace('approval_policy = "never"', 'approval_policy = "on-request"'))
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
        yield Pod(running, fake_model, page, agent.env, cli, f"pwned-{secrets.token_hex(4)}")


both = pytest.mark.parametrize("pod_for", ["codex", "claude"], indirect=True)


@pytest.mark.parametrize("pod_for", ["codex", "claude", "codex/bridge", "claude/bridge", "qwen/bridge"], indirect=True)
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


def _cmdlines(pgid: int) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for pid in live_group(pgid):
        try:
            found[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        except OSError:
            continue  # gone since
    return found


@pytest.mark.parametrize("pod_for", ["copilot", "copilot/bridge"], indirect=True)
async def test_a_stale_entry_in_copilots_own_config_does_not_take_the_sessions_browser_calls(pod_for: Pod) -> None:
    # Left by `openab config write copilot` or by the person: an openab_browser entry in ~/.copilot/mcp-config.json
    # naming another browser, which would accept the call. Copilot lets its own config win over session/new.
    pod = pod_for.running
    with browser_peer(secrets.token_urlsafe(16)) as stale:
        write("copilot", HttpEndpoint(stale.url, stale.token), home=Path(pod_for.env["HOME"]), env=pod_for.env)
        async with pod.extension() as ext:
            browser, session_id, pid = await browser_session(pod, ext)
            session = pod.pod.sessions.get(session_id)
            assert session is not None
            workdir = pod.runtime.workdir(session)
            entry = (await pod.browser.open(session)).entry
            argv = _cmdlines(pid)[pid]
            turn = await prompt(ext, session_id, "Open the page, please.", timeout=120)
            # The attacker's view while the agent runs: the file it was pointed at, and every command line `ps` shows.
            flag = argv.index("--additional-mcp-config") if "--additional-mcp-config" in argv else -1
            file = Path(argv[flag + 1].removeprefix("@")) if flag >= 0 else None
            held = os.lstat(file) if file is not None else None
            folder_mode = stat.S_IMODE(workdir.stat().st_mode)
            text = file.read_text() if file is not None else ""
            shown = " ".join(" ".join(line) for line in _cmdlines(pid).values())
            await pod.pod.evict(session_id, "test")

    assert turn.result == {"stopReason": "end_turn"}, turn.error
    assert (browser.calls, stale.calls) == ([("browser_navigate", {"url": pod_for.page})], [])
    assert file is not None and held is not None, f"copilot was not pointed at a file of the session's own: {argv}"
    assert file.parent == workdir and stat.S_ISREG(held.st_mode), "a regular file (not a link) in the session's folder"
    assert (stat.S_IMODE(held.st_mode), folder_mode) == (0o600, 0o700)
    assert json.loads(text)["mcpServers"].keys() == {"openab_browser"}
    if isinstance(entry, HttpEndpoint):
        assert entry.token in text and entry.token not in shown, "the bearer token is in the file, never in an argv"
    assert not (file.exists() or file.is_symlink()), "the file left with the session"


@pytest.mark.parametrize("pod_for", ["gemini:auto", "opencode:auto"], indirect=True)
async def test_gemini_and_opencode_call_the_browser_tool_under_the_auto_policy(pod_for: Pod) -> None:
    browser, turn = await pod_for.open_the_page()

    assert turn.result == {"stopReason": "end_turn"}, turn.error
    assert browser.calls == [("browser_navigate", {"url": pod_for.page})]
    assert f"navigated to {pod_for.page}" in turn.text


@pytest.mark.parametrize("pod_for", ["gemini", "opencode", "copilot", "qwen"], indirect=True)
async def test_browser_only_runs_the_browser_tool_and_no_card_is_shown(pod_for: Pod) -> None:
    asked: list[dict[str, Any]] = []

    async def person(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"outcome": {"outcome": "cancelled"}}

    browser, turn = await pod_for.open_the_page(on_permission=person, **RELAY)

    assert turn.result == {"stopReason": "end_turn"}, turn.error
    assert browser.calls == [("browser_navigate", {"url": pod_for.page})]
    assert asked == [], "our own browser tool is the policy's (or the CLI's allow-list's), never a card"


def _refuse(asked: list[dict[str, Any]]) -> PermissionAnswer:
    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        reject = next(o for o in params["options"] if o["kind"] == "reject_once")
        return {"outcome": {"outcome": "selected", "optionId": reject["optionId"]}}

    return answer


def _allow(asked: list[dict[str, Any]]) -> PermissionAnswer:
    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        once = next(o for o in params["options"] if o["kind"] == "allow_once")
        return {"outcome": {"outcome": "selected", "optionId": once["optionId"]}}

    return answer


@pytest.mark.parametrize("pod_for", ["codex", "claude", "gemini", "opencode", "copilot", "qwen"], indirect=True)
async def test_a_shell_command_dressed_as_our_browser_tool_reaches_the_person_not_the_policy(pod_for: Pod) -> None:
    # The attacker's test: the model names our server and tool wherever it can in a shell call. The policy would
    # approve a browser tool; this must be a card, and the person's "no" must hold.
    pod = pod_for.running
    pod_for.model.set_script(Script(calls=[Call("browser_navigate", {"url": pod_for.page}), pod_for.dressed_shell()]))
    asked: list[dict[str, Any]] = []
    async with pod.extension() as ext:
        browser = FakeBrowser(ext)
        session_id = await open_session(pod, ext, **RELAY)
        turn = await prompt(ext, session_id, "Open the page, then tidy up.", timeout=150, on_permission=_refuse(asked))

    assert turn.error is None, turn.error
    assert browser.calls == [("browser_navigate", {"url": pod_for.page})], "the browser tool ran with no card"
    # One card: the command's (opencode asks first for the directory it writes to, outside its workdir).
    assert len(asked) == 1, [a["toolCall"].get("title") for a in asked]
    assert asked[0]["sessionId"] == session_id and "browser_navigate" not in str(asked[0]["toolCall"])
    assert not pod_for.marker.exists(), "the person said no: the command never ran"


@pytest.mark.parametrize("pod_for", ["codex", "claude"], indirect=True)
async def test_the_persons_yes_to_a_relayed_request_counts(pod_for: Pod) -> None:
    pod = pod_for.running
    pod_for.model.set_script(Script(calls=[pod_for.dressed_shell()]))
    asked: list[dict[str, Any]] = []
    async with pod.extension() as ext:
        FakeBrowser(ext)
        session_id = await open_session(pod, ext, **RELAY)
        turn = await prompt(ext, session_id, "Tidy up.", timeout=150, on_permission=_allow(asked))

    assert turn.result == {"stopReason": "end_turn"}, turn.error
    assert len(asked) == 1 and pod_for.marker.exists()


@pytest.mark.parametrize("pod_for", ["gemini", "opencode"], indirect=True)
async def test_without_a_person_browser_only_rejects_the_dressed_shell_command(pod_for: Pod) -> None:
    pod_for.model.set_script(Script(calls=[Call("browser_navigate", {"url": pod_for.page}), pod_for.dressed_shell()]))

    browser, turn = await pod_for.open_the_page()  # no permission relay: the policy decides everything

    assert turn.error is None, turn.error
    assert browser.calls == [("browser_navigate", {"url": pod_for.page})]
    assert not pod_for.marker.exists()


@pytest.mark.parametrize("pod_for", ["codex"], indirect=True)
async def test_a_permission_nobody_answers_is_rejected_after_the_timeout(pod_for: Pod) -> None:
    pod_for.model.set_script(Script(calls=[pod_for.dressed_shell()]))

    async def walk_away(params: dict[str, Any]) -> dict[str, Any]:
        await asyncio.Event().wait()  # the person never answers; the runtime's timeout must end this
        raise AssertionError("unreachable")

    with changed(pod_for.running.pod.settings, permission_timeout=1):
        _browser, turn = await pod_for.open_the_page(on_permission=walk_away, **RELAY)

    assert turn.permissions, "the person was asked"
    # codex's only rejection of a command ("No, and tell Codex what to do differently") also ends its turn.
    assert turn.result == {"stopReason": "cancelled"}, turn.error
    assert not pod_for.marker.exists(), "an unanswered permission is a rejection"


@pytest.mark.parametrize("pod_for", ["codex"], indirect=True)
async def test_an_answer_naming_an_option_the_agent_did_not_offer_is_a_rejection(pod_for: Pod) -> None:
    pod_for.model.set_script(Script(calls=[pod_for.dressed_shell()]))

    async def forge(params: dict[str, Any]) -> dict[str, Any]:
        return {"outcome": {"outcome": "selected", "optionId": "approved-for-everything"}}

    _browser, turn = await pod_for.open_the_page(on_permission=forge, **RELAY)

    assert turn.permissions and turn.result == {"stopReason": "cancelled"}, turn.error
    assert not pod_for.marker.exists()


# A 10-step browser task as a person would give it: reads, navigation, typing, and one risky click ("Sign in").
TEN_STEPS = [
    Call("browser_snapshot"), Call("browser_navigate", {"url": "https://example.org/login"}),
    Call("browser_snapshot"), Call("browser_click", {"ref": "e4"}), Call("browser_type", {"ref": "e2", "text": "Ada"}),
    Call("browser_read_dom", {"selector": "form"}), Call("browser_click", {"ref": "e3"}),
    Call("browser_screenshot"), Call("browser_navigate", {"url": "https://example.org/done"}),
    Call("browser_snapshot"),
]


@pytest.mark.parametrize("pod_for", ["codex", "claude", "gemini", "opencode", "copilot"], indirect=True)
async def test_a_ten_step_browser_task_shows_the_person_no_agent_card(pod_for: Pod) -> None:
    # The panel's stand-in: it opts into permission relay as the extension does, allows once, and counts the
    # cards. The risky click's one card is the browser guard's, raised in the extension, not an agent request.
    pod_for.model.set_script(Script(calls=TEN_STEPS))
    asked: list[dict[str, Any]] = []
    browser, turn = await pod_for.open_the_page(on_permission=_allow(asked), **RELAY)
    # Shown with `pytest -rP`: the figures in docs/agents.md come from here.
    print(f"{pod_for.cli}: {len(browser.calls)} browser calls, {len(asked)} agent permission card(s)")

    assert turn.result == {"stopReason": "end_turn"}, turn.error
    assert [name for name, _ in browser.calls] == [c.tool for c in TEN_STEPS]
    assert browser.clicked == ["More information...", "Sign in"]
    assert asked == []


@both
async def test_cancel_mid_turn_stops_the_agents_turn_and_the_agent_stays(pod_for: Pod) -> None:
    pod, model = pod_for.running, pod_for.model
    model.set_script(Script(text="too late", hang=True))
    # The gateway would end the turn itself only after this grace: an answer before it is the agent's own.
    with changed(pod.pod.settings, cancel_grace=600):
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
        with changed(pod.pod.settings, agent_idle_ttl=0.01):
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

