"""The action journal end to end (issue 25, docs/journal.md): the official `mcp` client as the agent, through a real
TCP relay that cuts its connection as a network blip does, to a real gateway and the fake extension, which counts
every execution. A re-issued call joins its running step or is answered from it: never done twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest
from fake_extension import FakeExtension, text_result
from gateway_harness import RunningGateway, run_gateway
from journal_relay import Cut, CuttingRelay, cutting_relay
from mcp import Client
from mcp.types import CallToolResult, TextContent
from test_proxy import BROWSER, endpoint, extension, mcp_client, open_session
from waits import eventually

from openab_browser.core.journal.steps import State
from openab_browser.core.mcp.audit_read import unended_steps
from openab_browser.core.mcp.proxy import BrowserProxy

pytestmark = pytest.mark.anyio

ACTION = "dev.openab/action"
MARKED = re.compile(r"^Not done again: this is the outcome of the same browser_click \d+ s ago \(act-[\w-]{22}\), "
                    r"answered from the journal\. To do it a second time on purpose, call it again with "
                    r'"repeat": true\.$')
JOINED = re.compile(r"^Not done again: this call joined the same browser_click already running since \d+ s ago "
                    r"\(act-[\w-]{22}\); this is that step's outcome\. To do it a second time on purpose, call it "
                    r'again with "repeat": true\.$')
# The most a re-issue may take to be answered (the issue's figure).
REISSUE_BOUND = 1.0


def texts(result: CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, TextContent)]


@dataclass
class Browser:
    """The extension's side: a click that counts its runs per nonce and can cut the agent's stream mid-run; a read
    (snapshot) that counts too; a click that fails the first time it is asked."""

    relay: CuttingRelay | None = None
    runs: Counter[str] = field(default_factory=Counter)
    reads: int = 0
    hold: asyncio.Event | None = None
    fail_first: set[str] = field(default_factory=set)
    # Whether a call is waiting in the pod's journal on the step still running (joined it): a call cut mid-click is
    # held until its re-issue has joined (a sleep guessed at was too short on a loaded machine, and nothing joined).
    joined: Callable[[], bool] = lambda: False

    def attach(self, ext: FakeExtension) -> None:
        schema = {"type": "object", "properties": {"nonce": {"type": "string"}}}
        ext.add_tool("browser_click", self.click, schema)
        ext.add_tool("browser_snapshot", self.snapshot)
        ext.add_tool("browser_tabs", self.tabs, {"type": "object", "properties": {"action": {"type": "string"}}})

    async def click(self, arguments: dict[str, Any]) -> dict[str, Any]:
        nonce = str(arguments["nonce"])
        self.runs[nonce] += 1
        if nonce in self.fail_first:
            self.fail_first.discard(nonce)
            return {**text_result(f"no element for {nonce}"), "isError": True}
        marker = nonce.encode()
        if self.relay is not None and self.relay.plans.get(marker) == "during":
            del self.relay.plans[marker]
            self.relay.cut(marker)
            # Still running when the re-issue comes; bounded, so a re-issue that never joins fails the run's count.
            with contextlib.suppress(TimeoutError):
                await eventually(self.joined, 10)
        if self.hold is not None:
            await self.hold.wait()
        return {**text_result(f"clicked {nonce}"),
                "_meta": {"dev.openab/receipt": {"url_before": "https://shop.example/cart",
                                                 "url_after": "https://shop.example/checkout"}}}

    async def snapshot(self, _arguments: dict[str, Any]) -> dict[str, Any]:
        self.reads += 1
        return text_result("- page")

    async def tabs(self, arguments: dict[str, Any]) -> dict[str, Any]:
        self.runs[f"tabs {arguments.get('action')}"] += 1
        return text_result(f"tabs: {self.runs['tabs open']} opened")


@dataclass
class Agent:
    """The agent's side: the official client, through the relay. The SDK gives up a whole client when one of its
    POSTs loses its connection, so each attempt runs a client of its own in a task of its own (an agent restarts
    its MCP client and re-issues the call, with a new id)."""

    url: str
    token: str
    # How long the last answered call took from its request to its answer (its new client's set-up not counted).
    took: float = 0.0

    async def call(self, arguments: dict[str, Any], tool: str = "browser_click") -> CallToolResult | None:
        """The call's result, or ``None`` when it got no answer (its connection was cut)."""

        async def attempt() -> CallToolResult:
            async with mcp_client(self.url, self.token) as client:
                sent = time.monotonic()
                result = await client.call_tool(tool, arguments)
                self.took = time.monotonic() - sent
                return result

        task = asyncio.ensure_future(attempt())
        try:
            async with asyncio.timeout(30):
                return await task
        except Exception:  # the SDK's error for a cut stream (an ExceptionGroup out of its task group)
            return None


@contextlib.asynccontextmanager
async def journalled(**settings: Any) -> AsyncIterator[tuple[RunningGateway, FakeExtension, Browser, str, Client,
                                                              CuttingRelay, Agent]]:
    browser = Browser()
    async with run_gateway(**settings) as gateway, extension(gateway) as ext:
        browser.attach(ext)
        session_id = await open_session(gateway, ext)
        proxy = gateway.pod.browser
        assert isinstance(proxy, BrowserProxy)
        url, token = await endpoint(gateway, proxy, session_id)
        journal = gateway.pod.journal
        assert journal is not None
        # Calls come one at a time: the only call that can be waiting on a running step is the re-issue of it.
        browser.joined = lambda: any(step.deduplicated is not None and step.state is State.RUNNING
                                     for step in journal.core.steps(session_id))
        async with cutting_relay(url) as relay, mcp_client(url, token) as client:
            browser.relay = relay
            yield gateway, ext, browser, session_id, client, relay, Agent(relay.url(url), token)


async def call_until_answered(agent: Agent, arguments: dict[str, Any], figures: Counter[str]) -> CallToolResult:
    """Call browser_click; a call that gets no answer (its connection cut) is re-issued, as MCP 2026-07-28 says a
    client must, and its answer must come within the bound."""
    reissued = False
    for _ in range(3):
        result = await agent.call(arguments)
        if result is None:
            figures["no answer"] += 1
            reissued = True
            figures["reissued"] += 1
            continue
        if reissued:
            took = agent.took
            figures["slowest_reissue_ms"] = max(figures["slowest_reissue_ms"], round(took * 1000))
            assert took < REISSUE_BOUND, f"a re-issue was answered after {took:.2f} s"
        return result
    raise AssertionError(f"{arguments} got no answer in 3 tries")


def check_answer(result: CallToolResult, nonce: str, plan: Cut, figures: Counter[str]) -> None:
    said = texts(result)
    assert not result.is_error, said
    if JOINED.match(said[0]):
        # A re-issue that joined the step still running is told so: the outcome is the earlier call's.
        assert said[1:] == [f"clicked {nonce}"], said
        assert plan == "during", f"{plan}: joined a running step"
        figures["joined"] += 1
    elif said[0].startswith("Not done again"):
        assert MARKED.match(said[0]), said[0]
        assert said[1] == f"clicked {nonce}"
        assert plan in ("during", "after"), f"{plan}: answered from the journal"
        figures["answered from the journal"] += 1
    else:
        assert said == [f"clicked {nonce}"], said
        figures["ran"] += 1


async def run_cuts(calls: int, seed: int) -> Counter[str]:
    """``calls`` state-changing calls, each cut before, during or after (or not at all) at random, each re-issued
    until answered: every nonce runs exactly once in the browser."""
    import random

    rng = random.Random(seed)
    figures: Counter[str] = Counter()
    plans: tuple[Cut, ...] = ("none", "before", "during", "after")
    async with journalled() as (_gateway, _ext, browser, _session_id, _client, relay, agent):
        for n in range(calls):
            nonce = f"n{n}"
            plan = rng.choice(plans)
            if plan != "none":
                relay.plans[nonce.encode()] = plan
            result = await call_until_answered(agent, {"nonce": nonce}, figures)
            check_answer(result, nonce, plan, figures)
            figures[f"cut {plan}"] += 1
        figures["cuts"] = relay.cuts
    twice = {nonce: runs for nonce, runs in browser.runs.items() if runs != 1}
    assert not twice, f"calls run more (or less) than once: {twice}"
    assert len(browser.runs) == calls
    figures["double executions"] = 0
    return figures


async def test_repeat_true_runs_twice_a_failed_step_is_retried_and_reads_are_never_held() -> None:
    async with journalled() as (_gateway, ext, browser, _session_id, client, _relay, _agent):
        first = await client.call_tool("browser_click", {"nonce": "a"})
        again = await client.call_tool("browser_click", {"nonce": "a"})
        assert texts(first) == ["clicked a"] and MARKED.match(texts(again)[0])
        assert browser.runs["a"] == 1
        on_purpose = await client.call_tool("browser_click", {"nonce": "a", "repeat": True})
        assert texts(on_purpose) == ["clicked a"] and browser.runs["a"] == 2
        browser.fail_first.add("f")
        failed = await client.call_tool("browser_click", {"nonce": "f"})
        assert failed.is_error
        retried = await client.call_tool("browser_click", {"nonce": "f"})
        assert texts(retried) == ["clicked f"] and browser.runs["f"] == 2
        for _ in range(3):
            await client.call_tool("browser_snapshot", {})
        assert browser.reads == 3
        # browser_tabs acts (open, close), but its listing is a read: every listing is the browser's own, now.
        await client.call_tool("browser_tabs", {"action": "open"})
        again = await client.call_tool("browser_tabs", {"action": "open"})
        assert texts(again)[0].startswith("Not done again: this is the outcome of the same browser_tabs")
        assert browser.runs["tabs open"] == 1
        listings = [await client.call_tool("browser_tabs", {"action": "list"}) for _ in range(2)]
        assert browser.runs["tabs list"] == 2 and all(texts(t) == ["tabs: 1 opened"] for t in listings)
    # The browser got each step's own action id, and never the repeat flag; reads carry none.
    calls = [m["params"] for m in ext.server_requests if (m.get("params") or {}).get("method") == "tools/call"]
    clicks = [c for c in calls if c["params"]["name"] == "browser_click"]
    actions = [c["params"]["_meta"][ACTION] for c in clicks]
    assert len(actions) == len(set(actions)) == 4
    assert all(re.fullmatch(r"act-[\w-]{22}", a) for a in actions)
    assert all("repeat" not in c["params"]["arguments"] for c in clicks)
    assert all(ACTION not in (c["params"].get("_meta") or {}) for c in calls
               if c["params"]["name"] == "browser_snapshot" or c["params"]["arguments"] == {"action": "list"})


async def test_an_agents_own_action_id_is_never_passed_on() -> None:
    async with journalled() as (_gateway, ext, _browser, _session_id, client, _relay, _agent):
        await client.call_tool("browser_click", {"nonce": "x"}, meta=cast(Any, {ACTION: "act-forged"}))
        await client.call_tool("browser_snapshot", {}, meta=cast(Any, {ACTION: "act-forged"}))
    sent = [m["params"]["params"].get("_meta") or {} for m in ext.server_requests
            if (m.get("params") or {}).get("method") == "tools/call"]
    assert "act-forged" not in str(sent)


async def test_a_step_nobody_reissues_is_cancelled_once_the_window_passes() -> None:
    async with journalled(journal_window=0.5) as (_gateway, ext, browser, _session_id, client, relay, agent):
        browser.hold = asyncio.Event()  # runs until cancelled
        relay.plans[b"orphan"] = "during"
        assert await agent.call({"nonce": "orphan"}) is None
        # Not at once (the re-issue could still come), then cancelled in the browser.
        assert not ext.cancelled
        await eventually(lambda: len(ext.cancelled) == 1, 10)
        browser.hold = None
        # Its outcome is unknown: the same call is answered from the journal, never run again.
        again = await client.call_tool("browser_click", {"nonce": "orphan"})
        assert browser.runs["orphan"] == 1
        assert texts(again)[0].startswith("Not done again") and "outcome is unknown" in texts(again)[1]


async def test_an_explicit_cancel_still_cancels_at_once() -> None:
    async with journalled() as (gateway, ext, browser, _session_id, client, _relay, _agent):
        browser.hold = asyncio.Event()
        call = asyncio.ensure_future(client.call_tool("browser_click", {"nonce": "c"}))
        await eventually(lambda: browser.runs["c"] == 1, 10)
        call.cancel()  # the SDK sends notifications/cancelled
        with contextlib.suppress(asyncio.CancelledError):
            await call
        await eventually(lambda: len(ext.cancelled) == 1, 5)
        assert gateway.pod.settings.journal_window >= 15  # long before the window could have passed
        # The session goes on after a cancel. Waiting for its answer also lets the pod's answer to the cancelled
        # POST reach the client before it closes: the SDK (mcp 2.3) raises BrokenResourceError from its own
        # teardown when a request's answer lands just as the client is leaving.
        assert texts(await client.call_tool("browser_snapshot", {})) == ["- page"]


# -- the panel, and a pod restart mid-call ------------------------------------------------------------------------


def journal_notes(ext: FakeExtension, session_id: str) -> list[dict[str, Any]]:
    """Every step the pod told the panel of for ``session_id``, in order."""
    return [step for note in ext.notifications if note.get("method") == "_openab/journal"
            and note["params"]["sessionId"] == session_id for step in note["params"]["steps"]]


async def test_the_panel_is_told_each_state_a_step_goes_through_with_its_site() -> None:
    async with journalled() as (_gateway, ext, _browser, session_id, client, _relay, _agent):
        await client.call_tool("browser_click", {"nonce": "p"})
        await client.call_tool("browser_click", {"nonce": "p"})  # answered from the journal
        await client.call_tool("browser_snapshot", {})  # a read: no step
        await eventually(lambda: len(journal_notes(ext, session_id)) == 3, 10)
    running, committed, deduplicated = journal_notes(ext, session_id)
    assert running["state"] == "running" and running["tool"] == "browser_click"
    assert committed == {**running, "state": "committed", "site": "shop.example"}
    assert deduplicated["deduplicated"] == running["action"] and deduplicated["action"] != running["action"]
    assert deduplicated["state"] == "committed"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", running["at"])


def _crash_copy(source: Path, target: Path) -> None:
    """The state dir as a pod killed this instant leaves it (its lock aside: that pod is this process)."""
    target.mkdir(mode=0o700)
    shutil.copytree(source, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("pod.lock"))


async def test_a_pod_restart_mid_call_lists_the_step_as_effect_unknown_to_the_agent_and_on_resume(
    tmp_path: Path,
) -> None:
    browser = Browser()
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    first_dir.mkdir(mode=0o700)
    async with run_gateway(state_dir=first_dir) as gateway, extension(gateway) as ext:
        browser.attach(ext)
        session_id = await open_session(gateway, ext)
        proxy = gateway.pod.browser
        assert isinstance(proxy, BrowserProxy)
        browser.hold = asyncio.Event()
        async with mcp_client(*await endpoint(gateway, proxy, session_id)) as client:
            call = asyncio.ensure_future(client.call_tool("browser_click", {"nonce": "pay"}))
            await eventually(lambda: browser.runs["pay"] == 1, 10)
            await eventually(lambda: unended_steps(first_dir)[0], 10)  # the running record is on disk
            await asyncio.to_thread(_crash_copy, first_dir, second_dir)
            browser.hold.set()
            await call
    (action, tool, _at), = next(iter(unended_steps(second_dir)[0].values()))
    assert tool == "browser_click"
    browser.hold = None
    async with run_gateway(state_dir=second_dir) as gateway, extension(gateway) as ext:
        browser.attach(ext)
        await ext.request("session/resume", {"sessionId": session_id, "cwd": "/", "mcpServers": [BROWSER]})
        await gateway.pod.tunnels.wait_attached(session_id, timeout=10)
        await eventually(lambda: journal_notes(ext, session_id), 10)
        (step,) = journal_notes(ext, session_id)
        assert (step["action"], step["tool"], step["state"]) == (action, "browser_click", "effect_unknown")
        proxy = gateway.pod.browser
        assert isinstance(proxy, BrowserProxy)
        async with mcp_client(*await endpoint(gateway, proxy, session_id)) as client:
            first = await client.call_tool("browser_snapshot", {})
            second = await client.call_tool("browser_snapshot", {})
    told = texts(first)[0]
    assert told.startswith("openab: the pod restarted while these browser actions were running") and action in told
    assert "may or may not have happened" in told and texts(first)[1] == "- page"
    assert texts(second) == ["- page"]  # told once
    assert browser.runs["pay"] == 1  # never run again
