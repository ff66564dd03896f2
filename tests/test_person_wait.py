"""A person taking their time never fails the turn: while a card waits for them (the agent's own permission
request, or the guard's confirmation in the browser) every timer of the turn stops, and a card nobody answers
declines that one action while the session goes on.

Real pods on 127.0.0.1 with short settings: the real agent runtime running a small ACP agent process (an outside
party: it asks permission for a shell command, as agent CLIs do), the real `/acp` socket, and the scripted
extension as the person's side panel. The person's delay is the scenario itself, not a measurement: what the tests
assert is the answer that comes after it. The clock logic these scenarios play (the pause, its bound, the answer
restarting each limit, another socket's card) is driven on a fake clock in tests/test_turn_watch.py.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_extension import FakeExtension, RemoteError, connect_extension, text_result
from gateway_harness import run_gateway
from scripted_agent import Script, ScriptedAgent, chunk
from test_runtime_pod import FakeBrowser, Turn, open_session, prompt, run_pod

from openab_browser.core.acp.backend import PromptTurn
from openab_browser.core.errors import TunnelError
from openab_browser.core.tunnel.registry import TunnelRegistry

pytestmark = pytest.mark.anyio

RELAY = {"_meta": {"dev.openab/permissionRelay": True}}
BROWSER = {"type": "acp", "name": "browser", "id": "b7d1c0de-0000-4000-8000-000000000001"}

# An ACP agent on stdio that asks the person before a shell command and says what it was told; "hello" it just
# answers. It says nothing at all while it waits: only the pause keeps the agent's silence watchdog off it.
ASKING_AGENT = r'''
import json, sys

def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()

asked = {}
for line in sys.stdin:
    message = json.loads(line)
    method, params = message.get("method"), message.get("params") or {}
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": message["id"], "result": {"protocolVersion": 1, "agentCapabilities": {},
                                                                "authMethods": []}})
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": message["id"], "result": {"sessionId": "agent-session"}})
    elif method == "session/prompt":
        text = params["prompt"][0]["text"]
        if text == "hello":
            send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "agent-session", "update": {
                "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hello back"}}}})
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"stopReason": "end_turn"}})
            continue
        ask_id = f"ask-{message['id']}"
        asked[ask_id] = message["id"]
        send({"jsonrpc": "2.0", "id": ask_id, "method": "session/request_permission", "params": {
            "sessionId": "agent-session",
            "toolCall": {"toolCallId": "call-1", "title": "rm -rf build/", "kind": "execute"},
            "options": [{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                        {"optionId": "no", "name": "Reject", "kind": "reject_once"}]}})
    elif message.get("id") in asked and "result" in message:
        outcome = message["result"]["outcome"]
        said = "ran it" if outcome.get("optionId") == "yes" else f"did not run it: {json.dumps(outcome)}"
        send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "agent-session", "update": {
            "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": said}}}})
        send({"jsonrpc": "2.0", "id": asked.pop(message["id"]), "result": {"stopReason": "end_turn"}})
'''

# Each well under what the person takes: before the fix, any one of them ended the turn while the card was open.
SHORT: dict[str, Any] = {"prompt_idle_timeout": 0.5, "agent_silence_timeout": 0.5, "cancel_grace": 1.0}
PERSON_TAKES = 1.5  # seconds: three idle timeouts


def agent_command(tmp_path: Path) -> list[str]:
    script = tmp_path / "asking_agent.py"
    script.write_text(ASKING_AGENT)
    return [sys.executable, str(script)]


def said(turn: Turn) -> str:
    return "".join(str(u.get("content", {}).get("text", "")) for u in turn.updates
                   if u.get("sessionUpdate") == "agent_message_chunk")


def allow_after(seconds: float, asked: list[float]) -> Any:
    async def person(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(seconds)
        await asyncio.sleep(seconds)  # the person reads the card and thinks: the scenario, not an assertion
        return {"outcome": {"outcome": "selected", "optionId": "yes"}}

    return person


async def test_a_permission_card_answered_after_the_idle_timeouts_lets_the_turn_finish(tmp_path: Path) -> None:
    async with run_pod(tmp_path / "state", agent="custom", agent_cmd=agent_command(tmp_path), permission_timeout=30,
                       **SHORT) as pod, pod.extension() as ext:
        session_id = await ext.new_session([], **RELAY)
        # Started before the prompt: a python start on a busy machine can take longer than SHORT's idle timeout.
        await pod.runtime.start_agent(session_id)
        asked: list[float] = []
        turn = await prompt(ext, session_id, "clean the build", timeout=30, on_permission=allow_after(PERSON_TAKES,
                                                                                                      asked))
        assert asked, "the person was asked"
        assert turn.error is None, turn.error
        assert turn.result == {"stopReason": "end_turn"}
        assert said(turn) == "ran it"
        # The same agent answers the next prompt: it was never stopped as silent.
        again = await prompt(ext, session_id, "hello", timeout=30)
        assert (again.result, said(again)) == ({"stopReason": "end_turn"}, "hello back")


async def test_a_permission_nobody_answers_declines_that_action_and_the_session_goes_on(tmp_path: Path) -> None:
    async with run_pod(tmp_path / "state", agent="custom", agent_cmd=agent_command(tmp_path), permission_timeout=1.5,
                       **SHORT) as pod, pod.extension() as ext:
        session_id = await ext.new_session([], **RELAY)
        # Started before the prompt: a python start on a busy machine can take longer than SHORT's idle timeout.
        await pod.runtime.start_agent(session_id)

        async def walk_away(_params: dict[str, Any]) -> dict[str, Any]:
            await asyncio.Event().wait()  # the person never answers: the pod's permission wait must end this
            raise AssertionError("unreachable")

        turn = await prompt(ext, session_id, "clean the build", timeout=30, on_permission=walk_away)
        assert turn.permissions, "the person was asked"
        assert turn.error is None, turn.error
        assert turn.result == {"stopReason": "end_turn"}
        # Declined with the agent's own reject option: that one action, not the turn.
        assert said(turn) == 'did not run it: {"outcome": "selected", "optionId": "no"}'
        again = await prompt(ext, session_id, "hello", timeout=30)
        assert (again.result, said(again)) == ({"stopReason": "end_turn"}, "hello back")


# -- the guard's card in the browser --------------------------------------------------------------------------


def click_script(tunnels: TunnelRegistry) -> Script:
    """A turn that calls the browser's click, as an agent's tool call does, and says what came back."""

    async def click(turn: PromptTurn, _text: str) -> str:
        turn.send_update(chunk("clicking\n"))
        try:
            result = await tunnels.call_tool(turn.session.id, "browser_click", {"ref": "e3"})
        except TunnelError as exc:
            turn.send_update(chunk(f"the call failed: {exc}"))
            return "end_turn"
        turn.send_update(chunk(result["content"][0]["text"]))
        return "end_turn"

    return click


def guarded_click(ext: FakeExtension, *, seconds: float, answer: str, done: list[str] | None = None) -> Any:
    """The extension's click behind a confirmation card the person answers after ``seconds``: the panel says the
    person is asked while the card is open, as extension/lib/acp.js does."""

    async def click(_arguments: dict[str, Any]) -> dict[str, Any]:
        await ext.notify("_openab/person", {"asking": True})
        await asyncio.sleep(seconds)  # the card is open; the person decides
        await ext.notify("_openab/person", {"asking": False})
        if done is not None:
            done.append(answer)
        return text_result(answer)

    return click


async def prompt_text(ext: FakeExtension, session_id: str, text: str) -> tuple[Any, str]:
    result = await ext.request("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
                               timeout=30)
    words = []
    while not ext.inbox.empty():
        message = ext.inbox.get_nowait()
        if message.get("method") == "session/update":
            words.append(str(message["params"]["update"].get("content", {}).get("text", "")))
    return result, "".join(words)


async def test_a_guard_card_open_past_the_tool_and_idle_timeouts_lets_the_click_finish() -> None:
    agent = ScriptedAgent()
    # The tool call's timeout is the shortest, so that without a card it is what ends the call (and says so).
    async with run_gateway(backend=agent, tunnel_timeout=0.3, permission_timeout=30, **SHORT) as gw, \
            connect_extension(gw.ws_url, gw.token) as ext:
        agent.scripts["click"] = click_script(gw.pod.tunnels)
        ext.add_tool("browser_click", guarded_click(ext, seconds=PERSON_TAKES, answer="clicked Sign in"))
        await ext.initialize()
        session_id = await ext.new_session([BROWSER])
        await gw.pod.tunnels.wait_attached(session_id, timeout=10)
        result, words = await prompt_text(ext, session_id, "click Sign in")
        assert result == {"stopReason": "end_turn"}
        assert words == "clicking\nclicked Sign in"  # not "timed out": the call and the turn waited for the person
        # Without a card, the tool's own timeout still holds, and the session goes on.
        ext.add_tool("browser_click", stuck_click)
        result, words = await prompt_text(ext, session_id, "click Sign in")
        assert result == {"stopReason": "end_turn"}
        assert "tools/call timed out after 0.3 s" in words


async def stuck_click(_arguments: dict[str, Any]) -> dict[str, Any]:
    await asyncio.Event().wait()  # a click that never comes back, and no card: the call's timeout ends it
    raise AssertionError("unreachable")


async def test_once_the_card_is_answered_a_call_that_never_comes_back_times_out_one_limit_later() -> None:
    async def answered_then_stuck(_arguments: dict[str, Any]) -> dict[str, Any]:
        await ext.notify("_openab/person", {"asking": True})
        await asyncio.sleep(PERSON_TAKES)
        await ext.notify("_openab/person", {"asking": False})
        return await stuck_click(_arguments)

    agent = ScriptedAgent()
    # A person's wait far past the prompt's 30 s: the answer, not the wait's bound, must restart the call's clock.
    async with run_gateway(backend=agent, tunnel_timeout=0.3, permission_timeout=600, **SHORT) as gw, \
            connect_extension(gw.ws_url, gw.token) as ext:
        agent.scripts["click"] = click_script(gw.pod.tunnels)
        ext.add_tool("browser_click", answered_then_stuck)
        await ext.initialize()
        session_id = await ext.new_session([BROWSER])
        await gw.pod.tunnels.wait_attached(session_id, timeout=10)
        result, words = await prompt_text(ext, session_id, "click Sign in")
        assert result == {"stopReason": "end_turn"}
        assert words.startswith("clicking\nthe call failed: tools/call timed out after 0.3 s"), words


async def test_a_guard_card_stops_the_agents_silence_watchdog_too(tmp_path: Path) -> None:
    # The built-in agent clicks through the pod's proxy, as a CLI would, and says nothing on its stdio meanwhile:
    # only the card's pause keeps the silence watchdog (the one short timer here) from stopping it.
    async with run_pod(tmp_path / "state", agent_silence_timeout=0.5, permission_timeout=30) as pod, \
            pod.extension() as ext:
        browser, clicked = FakeBrowser(ext), list[str]()
        ext.add_tool("browser_click", guarded_click(ext, seconds=PERSON_TAKES, answer="clicked e3", done=clicked),
                     {"type": "object", "properties": {"ref": {"type": "string"}}})
        session_id = await open_session(pod, ext)
        turn = await prompt(ext, session_id, "click Sign in", timeout=60)
        assert turn.error is None, turn.error
        assert turn.result == {"stopReason": "end_turn"}
        assert ("browser_snapshot", {}) in browser.calls  # the agent looked, then clicked behind the card
        assert clicked == ["clicked e3"]
        assert "The agent stopped answering" not in said(turn)


# -- what a panel (or anyone with the key) can do with the signal ----------------------------------------------


async def silent_turn(ext: FakeExtension, session_id: str) -> str:
    """A turn whose agent never says a word: how it ends (it must, and say why)."""
    try:
        await ext.request("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "silent"}]},
                          timeout=30)
    except RemoteError as exc:
        return str(exc)
    raise AssertionError("a silent agent's turn ended well")


async def test_a_card_announced_and_never_closed_pauses_only_up_to_the_persons_wait() -> None:
    async with run_gateway(backend=ScriptedAgent(), permission_timeout=1.0, **SHORT) as gw, \
            connect_extension(gw.ws_url, gw.token) as ext:
        await ext.initialize()
        session_id = await ext.new_session([])
        await ext.notify("_openab/person", {"asking": True})  # and never {"asking": false}
        assert "Timed out waiting for agent backend" in await silent_turn(ext, session_id)
        assert await ext.request("session/close", {"sessionId": session_id}) == {}  # the socket still serves


async def test_malformed_person_signals_are_ignored_and_pause_nothing() -> None:
    async with run_gateway(backend=ScriptedAgent(), permission_timeout=1200, **SHORT) as gw, \
            connect_extension(gw.ws_url, gw.token) as ext:
        await ext.initialize()
        session_id = await ext.new_session([])
        for params in ({"asking": "yes"}, {"asking": 1}, [True], None, {"asking": None}, {"asked": True}):
            await ext.notify("_openab/person", params)
        with pytest.raises(RemoteError, match="-32601"):  # a notification only: sent as a request, it is unknown
            await ext.request("_openab/person", {"asking": True})
        # None of these paused the turn's clock: a silent agent still times out at the idle limit.
        assert "Timed out waiting for agent backend" in await silent_turn(ext, session_id)


async def test_another_sockets_card_does_not_pause_this_sockets_turn() -> None:
    async with run_gateway(backend=ScriptedAgent(), permission_timeout=1200, **SHORT) as gw, \
            connect_extension(gw.ws_url, gw.token) as ext, connect_extension(gw.ws_url, gw.token) as other:
        await ext.initialize()
        await other.initialize()
        session_id = await ext.new_session([])
        await other.new_session([])
        await other.notify("_openab/person", {"asking": True})
        assert "Timed out waiting for agent backend" in await silent_turn(ext, session_id)
