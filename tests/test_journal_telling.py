"""How the journal's steps reach the panel (core/journal/telling.py): gathered for a moment into one
``_openab/journal`` message, never ``running`` to a panel that marks it from the call, never another socket's."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from fake_extension import FakeExtension
from gateway_harness import RunningGateway, run_gateway
from mcp import Client
from test_journal_e2e import Browser, journal_notes
from test_proxy import BROWSER, endpoint, extension, mcp_client
from waits import eventually

from openab_browser.core.acp.schema import MARKS_RUNNING_META
from openab_browser.core.journal.telling import Telling, running_from_call, ties_a_row
from openab_browser.core.mcp.proxy import BrowserProxy

pytestmark = pytest.mark.anyio

JOURNAL = "_openab/journal"


def journal_messages(ext: FakeExtension, session_id: str) -> list[list[dict[str, Any]]]:
    return [note["params"]["steps"] for note in ext.notifications
            if note.get("method") == JOURNAL and note["params"]["sessionId"] == session_id]


def test_views_gather_per_addressee_until_taken_in_order_and_the_limit_sends_them_at_once() -> None:
    telling = Telling(limit=3)
    one, two, three = ({"action": f"act-{n}", "state": "committed"} for n in range(3))
    assert telling.add(("s", "c1"), [one]) == "schedule"
    assert telling.add(("s", "c1"), [two]) is None  # a flush is already due
    assert telling.add(("s", "c2"), [three]) == "schedule"  # another socket's are its own
    assert telling.take(("s", "c1")) == [one, two]
    assert telling.take(("s", "c1")) == []
    assert telling.add(("s", "c1"), [one, two]) == "schedule"
    assert telling.add(("s", "c1"), [three]) == "now"


def test_only_a_freshly_running_step_is_known_from_its_call() -> None:
    assert running_from_call({"action": "act-a", "state": "running"})
    assert not running_from_call({"action": "act-a", "state": "committed"})
    assert not running_from_call({"action": "act-b", "state": "running", "deduplicated": "act-a"})


def test_what_the_panel_ties_to_a_running_row_goes_at_once() -> None:
    again = {"action": "act-b", "state": "committed", "deduplicated": "act-a"}
    started = {"action": "act-a", "state": "running"}
    ended = {"action": "act-a", "state": "committed"}
    assert ties_a_row(again, marks_running=True) and ties_a_row(again, marks_running=False)
    assert ties_a_row(started, marks_running=False) and not ties_a_row(started, marks_running=True)
    assert not ties_a_row(ended, marks_running=False)


async def test_a_reissued_call_answered_from_the_journal_is_told_before_its_answer() -> None:
    async with run_gateway() as gateway, extension(gateway) as ext:
        gateway.pod.telling.delay = 600.0  # nothing gathered is sent in this test but by what goes at once
        Browser().attach(ext)
        session_id = await _session(gateway, ext, True)
        async with agent_of(gateway, session_id) as client:
            await client.call_tool("browser_click", {"nonce": "twice"})
            await client.call_tool("browser_click", {"nonce": "twice"})  # the same within the window: answered
            # The agent's row for it is tied to the journal's view while it still runs: the view comes with the answer.
            await eventually(lambda: journal_messages(ext, session_id), 10)
        (told,) = journal_messages(ext, session_id)
        assert [step["state"] for step in told] == ["committed", "committed"]
        assert "deduplicated" not in told[0] and told[1]["deduplicated"] == told[0]["action"]


@contextlib.asynccontextmanager
async def agent_of(gateway: RunningGateway, session_id: str) -> AsyncIterator[Client]:
    """The official MCP client at the session's proxy endpoint, as its agent has it."""
    proxy = gateway.pod.browser
    assert isinstance(proxy, BrowserProxy)
    async with mcp_client(*await endpoint(gateway, proxy, session_id)) as client:
        yield client


async def _session(gateway: RunningGateway, ext: FakeExtension, marks_running: bool) -> str:
    meta = {"_meta": {MARKS_RUNNING_META: True}} if marks_running else {}
    session_id = await ext.new_session([BROWSER], **meta)
    await gateway.pod.tunnels.wait_attached(session_id, timeout=10)
    return session_id


async def test_a_burst_of_clicks_is_one_message_each_state_in_order_and_no_running_to_a_panel_that_marks_it() -> None:
    async with run_gateway() as gateway, extension(gateway) as marking, extension(gateway) as old:
        # Long enough that the whole burst falls in one gathering on a loaded machine too.
        gateway.pod.telling.delay = 2.0
        sessions = {}
        for ext, marks in ((marking, True), (old, False)):
            Browser().attach(ext)
            sessions[marks] = session_id = await _session(gateway, ext, marks)
            async with agent_of(gateway, session_id) as client:
                for nonce in ("a", "b", "c"):
                    result = await client.call_tool("browser_click", {"nonce": nonce})
                    assert not result.is_error
                if marks:
                    assert not journal_messages(ext, session_id)  # every answer came before the panel was told
        await eventually(lambda: len(journal_messages(old, sessions[False])) == 4, 10)
        await eventually(lambda: journal_messages(marking, sessions[True]), 10)
        (told,) = journal_messages(marking, sessions[True])
        assert [step["state"] for step in told] == ["committed"] * 3
        # A panel that does not mark steps running is told so before each call, the step before's end with it.
        told_old = journal_messages(old, sessions[False])
        assert [[step["state"] for step in message] for message in told_old] == [
            ["running"], ["committed", "running"], ["committed", "running"], ["committed"]]
        actions = [step["action"] for message in told_old for step in message]
        assert actions[0::2] == actions[1::2] and len(set(actions)) == 3


async def test_the_views_of_one_socket_never_reach_the_socket_that_takes_the_session_up() -> None:
    async with run_gateway() as gateway:
        gateway.pod.telling.delay = 2.0
        async with extension(gateway) as first:
            Browser().attach(first)
            session_id = await _session(gateway, first, False)
            proxy = gateway.pod.browser
            assert isinstance(proxy, BrowserProxy)
            url, token = await endpoint(gateway, proxy, session_id)
            async with mcp_client(url, token) as client:
                await client.call_tool("browser_click", {"nonce": "first"})
            async with extension(gateway) as second:
                Browser().attach(second)
                await second.request("session/resume", {"sessionId": session_id, "cwd": "/",
                                                        "mcpServers": [BROWSER]})
                await gateway.pod.tunnels.wait_attached(session_id, timeout=10)
                async with mcp_client(url, token) as client:
                    await client.call_tool("browser_click", {"nonce": "second"})
                await eventually(lambda: journal_notes(second, session_id), 10)
                actions = {step["action"] for step in journal_notes(second, session_id)}
                assert len(actions) == 1  # its own click's step only
        # Told its step ran, before the call; not how it ended: it no longer held the session when that was due.
        assert [step["state"] for step in journal_notes(first, session_id)] == ["running"]


async def test_a_stop_tells_what_was_gathered_before_the_sockets_close() -> None:
    async with run_gateway() as gateway, extension(gateway) as ext:
        gateway.pod.telling.delay = 600.0
        Browser().attach(ext)
        session_id = await _session(gateway, ext, True)
        async with agent_of(gateway, session_id) as client:
            await client.call_tool("browser_click", {"nonce": "last"})
        await gateway.pod.drain()
        await eventually(lambda: journal_notes(ext, session_id), 10)
        assert [step["state"] for step in journal_notes(ext, session_id)] == ["committed"]
