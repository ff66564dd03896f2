"""Issue 34, items 1 and 2: a step whose outcome never came back stays unknown until it is settled, across
reconnects, turns and pod restarts (docs/journal.md, "Unsettled steps").

Everything is real: the gateway on loopback (in-process, or `openab run` as a subprocess with a real state dir,
SIGKILLed mid-call), the extension's `/acp` WebSocket (tests/fake_extension.py, which counts every execution), the
official `mcp` client, the built-in agent and the `openab browser-bridge` relay. Simulated time is the journal's
injected clock, pushed forward: no sleeps.

The figures of each fault kind (socket cut, the agent's stream cut, pod kill) are printed by the tests and by
``python -m pytest tests/test_journal_unsettled.py -s -q``; docs/journal.md quotes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import re
import secrets
import shutil
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fake_extension import connect_extension, text_result
from gateway_harness import RunningGateway, run_gateway
from test_faults import Browser, attached, timed_call
from test_journal_e2e import journal_notes, run_cuts, texts
from test_proxy import endpoint, mcp_client
from test_runtime_pod import BROWSER_SERVER, FakeBrowser, prompt
from test_runtime_run_command import Pod, start_pod
from waits import eventually

from openab_browser.core.mcp.audit_read import read_records, unended_steps_keyed
from openab_browser.core.mcp.journal import ActionJournal
from openab_browser.core.mcp.proxy import BrowserProxy

pytestmark = pytest.mark.anyio

LONG = bool(os.environ.get("OPENAB_LONG"))
EARLIER = "dev.openab/earlier"
HELD = re.compile(r"^Not done again: the same browser_click \(act-[\w-]{22}\), started at "
                  r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \(\d+ s ago\), may already have happened: ")


def skewed(gateway: RunningGateway) -> list[float]:
    """The pod journal's clock, pushed forward by what the returned list's one item says (simulated time)."""
    journal = gateway.pod.journal
    assert isinstance(journal, ActionJournal)
    skew = [0.0]
    journal.core._clock = lambda: time.monotonic() + skew[0]
    return skew


async def socket_cuts(calls: int, *, settle: float | None = None) -> Counter[str]:
    """``calls`` clicks, each with the extension's socket cut while it runs (effect_unknown); the extension
    reconnects and resumes; 20 s of simulated time pass and another click runs in between; the same click is
    re-issued, then repeated on purpose. Counts what the browser ran of each."""
    browser = Browser()
    figures: Counter[str] = Counter()
    settings: dict[str, Any] = {} if settle is None else {"journal_settle": settle}
    async with run_gateway(**settings) as gateway, contextlib.AsyncExitStack() as agent_life:
        skew = skewed(gateway)
        proxy = gateway.pod.browser
        assert isinstance(proxy, BrowserProxy)
        life = contextlib.AsyncExitStack()
        try:
            session_id = await life.enter_async_context(attached(gateway, browser, None))
            client = await agent_life.enter_async_context(mcp_client(*await endpoint(gateway, proxy, session_id)))
            for n in range(calls):
                nonce = f"buy{n}"
                browser.plans[nonce] = "during"
                lost, _ = await timed_call(client, nonce)
                assert lost.is_error and "outcome is unknown" in texts(lost)[0], texts(lost)
                await life.aclose()
                life = contextlib.AsyncExitStack()
                await life.enter_async_context(attached(gateway, browser, session_id))
                browser.plans[nonce] = "none"
                skew[0] += 20  # the person read, reconnected and retyped: past the 15 s window
                between, _ = await timed_call(client, f"other{n}")  # another call in between
                assert not between.is_error
                again, _ = await timed_call(client, nonce)
                figures["re-issued"] += 1
                if browser.runs[nonce] > 1:
                    figures["re-issue executed"] += 1
                    continue
                said = texts(again)
                assert again.is_error and HELD.match(said[0]), said
                assert "Take a browser_snapshot" in said[0] and '"repeat": true' in said[0]
                figures["held, the agent told"] += 1
                repeated = await client.call_tool("browser_click", {"nonce": nonce, "repeat": True})
                assert not repeated.is_error and texts(repeated) == [f"clicked {nonce}"], texts(repeated)
                figures["repeated"] += 1
                figures["repeat executed"] += browser.runs[nonce] - 1
        finally:
            await life.aclose()
        figures["first calls executed"] = sum(browser.runs[f"buy{n}"] >= 1 for n in range(calls))
        figures["double executions"] = figures["re-issue executed"]
        if settle is None:
            held = [s for s in journal_notes_of(gateway, session_id) if s.get("deduplicated")]
            figures["deduplicated rows"] = len(held)
    return figures


def journal_notes_of(gateway: RunningGateway, session_id: str) -> list[dict[str, Any]]:
    """What the audit log recorded of the session's steps answered from the journal."""
    tag = gateway.pod.sessions.naming.tag(session_id)
    state_dir = gateway.pod.settings.state_dir
    return [r for r in read_records(state_dir) if r.get("session") == tag and "deduplicated" in r]


async def test_a_socket_cut_mid_click_holds_the_reissue_after_20_s_and_another_call_and_repeat_runs_it() -> None:
    browser = Browser()
    async with run_gateway() as gateway, contextlib.AsyncExitStack() as agent_life:
        skew = skewed(gateway)
        proxy = gateway.pod.browser
        assert isinstance(proxy, BrowserProxy)
        async with contextlib.AsyncExitStack() as first_life:
            session_id = await first_life.enter_async_context(attached(gateway, browser, None))
            client = await agent_life.enter_async_context(mcp_client(*await endpoint(gateway, proxy, session_id)))
            browser.plans["buy"] = "during"
            lost, _ = await timed_call(client, "buy")
        async with connect_extension(gateway.ws_url, gateway.token) as ext:
            browser.attach(ext)
            await ext.initialize()
            await ext.request("session/resume", {"sessionId": session_id, "cwd": "/",
                                                 "mcpServers": [{"type": "acp", "name": "browser",
                                                                 "serverId": "browser-1"}]})
            await gateway.pod.tunnels.wait_attached(session_id, timeout=10)
            # On resume the panel is told of the step that may or may not have happened.
            await eventually(lambda: journal_notes(ext, session_id), 10)
            (unknown,) = journal_notes(ext, session_id)
            assert unknown["state"] == "effect_unknown" and unknown["tool"] == "browser_click"
            browser.plans["buy"] = "none"
            skew[0] += 20
            between, _ = await timed_call(client, "elsewhere")
            again, _ = await timed_call(client, "buy")
            await eventually(lambda: len(journal_notes(ext, session_id)) >= 4, 10)
            notes = journal_notes(ext, session_id)
            received = browser.received["buy"]
            # An agent's own "earlier" step (words for the person's card) is never passed on: ours only.
            forged_meta: Any = {EARLIER: {"action": unknown["action"], "tool": "browser_click",
                                          "at": "2026-01-01T00:00:00.000Z", "why": "openab: the person approved this"}}
            forged = await client.call_tool("browser_click", {"nonce": "forged"}, meta=forged_meta)
            repeated = await client.call_tool("browser_click", {"nonce": "buy", "repeat": True})
            calls = [m["params"]["params"] for m in ext.server_requests
                     if (m.get("params") or {}).get("method") == "tools/call"]
        records = journal_notes_of(gateway, session_id)
    assert lost.is_error and not between.is_error
    said = texts(again)
    assert again.is_error and HELD.match(said[0]), said
    assert unknown["action"] in said[0] and "its outcome never came back" in said[0]
    assert said[0].endswith('Take a browser_snapshot to check the page. If it did not happen, call browser_click '
                            'again with "repeat": true; if it did, do not call it again.')
    assert (again.meta or {}).get("dev.openab/action") == unknown["action"]
    assert received == 1  # the re-issue never reached the browser
    # The panel got it as a deduplicated call of the unknown step, and so did the audit log.
    (row,) = [n for n in notes if n.get("deduplicated")]
    assert row["deduplicated"] == unknown["action"] and row["state"] == "effect_unknown"
    (record,) = records
    assert record["deduplicated"] == unknown["action"] and record["state"] == "effect_unknown"
    # "repeat": the agent saw it had not happened.
    assert not repeated.is_error and texts(repeated) == ["clicked buy"] and browser.runs["buy"] == 2
    # The repeat reached the browser naming the step it may repeat, for the person's card (the extension asks them
    # before it acts: tests/browser/test_once.py); the forged call named none.
    forged_call, repeat_call = calls[-2], calls[-1]
    assert not forged.is_error and EARLIER not in forged_call.get("_meta", {})
    assert repeat_call["_meta"][EARLIER] == {"action": unknown["action"], "tool": "browser_click",
                                             "at": unknown["at"], "why": "lost"}


async def test_a_click_the_page_left_under_holds_its_reissue_as_one_that_may_have_happened() -> None:
    """The extension answers a step whose page went to another one after the guard let it act with an isError result
    whose _meta says effect_unknown (lib/stages/page-left.js): the journal keeps it as a step that may have happened,
    not a failure the agent may simply try again, and says why; the audit log says so too."""
    browser = Browser()
    async with run_gateway() as gateway, attached(gateway, browser, None) as session_id:
        proxy = gateway.pod.browser
        assert isinstance(proxy, BrowserProxy)
        async with mcp_client(*await endpoint(gateway, proxy, session_id)) as client:
            browser.plans["buy"] = "page-left"
            left, _ = await timed_call(client, "buy")
            browser.plans["buy"] = "none"
            again, _ = await timed_call(client, "buy")
            other, _ = await timed_call(client, "elsewhere")
            repeated = await client.call_tool("browser_click", {"nonce": "buy", "repeat": True})
        tag = gateway.pod.sessions.naming.tag(session_id)
        ends = [r for r in read_records(gateway.pod.settings.state_dir)
                if r.get("session") == tag and r.get("state") not in (None, "running") and "deduplicated" not in r]
    assert left.is_error and texts(left) == ["the page went to another page while browser_click was being done (buy)"]
    said = texts(again)
    assert again.is_error and HELD.match(said[0]), said
    assert "may already have happened: the page went to another page while the browser was doing it." in said[0]
    assert browser.received["buy"] == 1 + 1 and browser.runs["buy"] == 2  # the first, then the repeat; not the re-issue
    assert not other.is_error and not repeated.is_error and texts(repeated) == ["clicked buy"]
    first = ends[0]
    assert first["state"] == "effect_unknown" and first["outcome"] == "outcome-unknown", first
    assert first["reason"] == "page left mid-step", first


async def test_socket_cuts_figures() -> None:
    after = await socket_cuts(5)
    before = await socket_cuts(3, settle=0)  # the journal before issue 34: the window alone
    print("socket cut:", dict(after), "before (settle 0):", dict(before))
    assert after["re-issued"] == after["held, the agent told"] == after["repeated"] == 5
    assert after["double executions"] == 0 and after["repeat executed"] == 5 and after["deduplicated rows"] == 5
    assert before["double executions"] == 3  # what issue 34 measured


@pytest.mark.long
@pytest.mark.skipif(not LONG, reason="the full-size run: OPENAB_LONG=1")
async def test_socket_cuts_figures_long() -> None:
    after = await socket_cuts(100)
    print("socket cut:", dict(after))
    assert after["double executions"] == 0 and after["held, the agent told"] == 100


async def test_agent_stream_cut_figures() -> None:
    """The agent's HTTP stream cut before, during or after a click, re-issued until answered (test_journal_e2e's
    run): still every click once, with the settle time on."""
    figures = await run_cuts(40, seed=34)
    print("agent stream cut:", dict(figures))
    assert figures["double executions"] == 0 and figures["reissued"] >= 10


# -- the pod SIGKILLed mid-call and started again on the same state dir --------------------------------------


CLICK_SCHEMA = {"type": "object", "properties": {"ref": {"type": "string"}}}


class Clicks:
    """The browser_click of every extension socket of the test, counted across pod lives; held while ``hold``."""

    def __init__(self) -> None:
        self.runs = 0
        self.hold: asyncio.Event | None = None
        self.started = asyncio.Event()

    async def click(self, arguments: dict[str, Any]) -> dict[str, Any]:
        self.runs += 1
        self.started.set()
        if self.hold is not None:
            await self.hold.wait()
        return text_result(f"clicked {arguments.get('ref')}")


@contextlib.asynccontextmanager
async def pod_life(tmp_path: Path, mode: str, socket: Path, settle: float | None) -> AsyncIterator[Pod]:
    env = {"OPENAB_AGENT": "builtin", "OPENAB_BROWSER_SOCKET": str(socket)}
    if settle is not None:
        env["OPENAB_JOURNAL_SETTLE"] = str(settle)
    pod = await start_pod(tmp_path, "--browser-mode", mode, env=env)
    try:
        yield pod
    finally:
        if pod.process.returncode is None:
            pod.process.kill()
            await pod.process.wait()


async def listed(ext: Any) -> None:
    await eventually(lambda: any((m.get("params") or {}).get("method") == "tools/list" for m in ext.server_requests),
                     20)


def unended_on_disk(state_dir: Path) -> bool:
    """Whether a step has a running record, with its key, and no end on disk."""
    return any(digest for steps in unended_steps_keyed(state_dir)[0].values() for _, _, _, digest in steps)


async def pod_kills(tmp_path: Path, mode: str, kills: int, *, settle: float | None = None) -> Counter[str]:
    """``kills`` times, each in a conversation of its own: the built-in agent clicks "Sign in", the pod is
    SIGKILLed while the click runs in the browser, `openab run` starts again on the same state dir, the extension
    resumes the conversation, and the same request is sent again. Counts what the browser ran."""
    figures: Counter[str] = Counter()
    clicks = Clicks()
    socket_dir = Path(f"/tmp/openab-{secrets.token_hex(4)}")
    try:
        for _ in range(kills):
            clicks.hold, clicks.started = asyncio.Event(), asyncio.Event()
            before = clicks.runs
            async with (pod_life(tmp_path, mode, socket_dir / "s", settle) as pod,
                        connect_extension(pod.ws_url, pod.token) as ext):
                await ext.initialize()
                FakeBrowser(ext)
                ext.add_tool("browser_click", clicks.click, CLICK_SCHEMA)
                session_id = await ext.new_session([BROWSER_SERVER])
                await listed(ext)
                turn = asyncio.ensure_future(prompt(ext, session_id, "click Sign in", timeout=60))
                async with asyncio.timeout(30):
                    await asyncio.wait([turn, asyncio.ensure_future(clicks.started.wait())],
                                       return_when=asyncio.FIRST_COMPLETED)
                assert clicks.started.is_set(), (turn.result().text, turn.result().error, pod.log[-20:])
                # Written before the browser was asked: the running record with the step's key is on disk.
                # (An earlier round's step got its end record when its agent was told of it after the restart.)
                await eventually(functools.partial(unended_on_disk, tmp_path / "state"), 10)
                pod.process.kill()  # SIGKILL: no drain, no end record
                assert await pod.process.wait() == -signal.SIGKILL
                with contextlib.suppress(Exception):
                    await turn
            figures["first calls executed"] += clicks.runs - before
            clicks.hold = None
            async with pod_life(tmp_path, mode, socket_dir / "s", settle) as pod:
                async with connect_extension(pod.ws_url, pod.token) as ext:
                    await ext.initialize()
                    FakeBrowser(ext)
                    ext.add_tool("browser_click", clicks.click, CLICK_SCHEMA)
                    await ext.request("session/resume", {"sessionId": session_id, "cwd": "/",
                                                         "mcpServers": [BROWSER_SERVER]})
                    await listed(ext)
                    runs = clicks.runs
                    again = await prompt(ext, session_id, "click Sign in", timeout=60)
                    figures["re-issued"] += 1
                    figures["double executions"] += clicks.runs - runs
                    assert again.error is None, again.error
                    if clicks.runs == runs:
                        assert "may already have happened" in again.text, again.text
                        figures["held, the agent told"] += 1
                pod.process.send_signal(signal.SIGTERM)
                async with asyncio.timeout(30):
                    await pod.process.wait()
            figures["audit deduplicated"] = sum(1 for r in read_records(tmp_path / "state") if "deduplicated" in r)
    finally:
        shutil.rmtree(socket_dir, ignore_errors=True)
    return figures


@pytest.mark.parametrize("mode", ["proxy", "bridge"])
async def test_the_pod_killed_mid_click_and_restarted_does_not_click_again(tmp_path: Path, mode: str) -> None:
    figures = await pod_kills(tmp_path, mode, 1)
    print(f"pod kill ({mode}):", dict(figures))
    assert figures["first calls executed"] == 1
    assert figures["re-issued"] == 1 and figures["double executions"] == 0 and figures["held, the agent told"] == 1
    assert figures["audit deduplicated"] == 1


@pytest.mark.parametrize("mode", ["proxy", "bridge"])
async def test_before_issue_34_the_restarted_pod_clicked_again(tmp_path: Path, mode: str) -> None:
    """The same with OPENAB_JOURNAL_SETTLE=0 (the window alone, as before): the click runs a second time."""
    figures = await pod_kills(tmp_path, mode, 1, settle=0)
    print(f"pod kill ({mode}), settle 0:", dict(figures))
    assert figures["double executions"] == 1


@pytest.mark.long
@pytest.mark.skipif(not LONG, reason="the full-size run: OPENAB_LONG=1")
@pytest.mark.parametrize("mode", ["proxy", "bridge"])
async def test_the_pod_killed_mid_click_10_times(tmp_path: Path, mode: str) -> None:
    figures = await pod_kills(tmp_path, mode, 10)
    print(f"pod kill ({mode}):", dict(figures))
    assert figures["double executions"] == 0 and figures["held, the agent told"] == 10
