"""The guard's decision on a step is kept when the step's answer is lost (issue 34, item 5; docs/journal.md).

The browser tells the pod what its guard decided on a journalled step as it decides, before the step acts
(`_openab/step` on the `/acp` socket); the pod's audit keeps it with the step's running record, so `openab audit`
shows "asked-allowed" for a click the person allowed even when the socket died before its answer came. Real gateway
on loopback, the extension's real WebSocket (tests/fake_extension.py), the official `mcp` client. And the attacker's
tries on the same socket: another session's step, a step that is not running, a decision or rule outside the
vocabulary, a notification that is not an object: each is dropped, never recorded, and the socket stays up.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from fake_extension import FakeExtension, RemoteError, ToolFunction, connect_extension
from gateway_harness import RunningGateway, run_gateway
from mcp.types import CallToolResult
from test_proxy import BROWSER, endpoint, mcp_client

from openab_browser.core.mcp.audit_read import read_records
from openab_browser.core.mcp.proxy import BrowserProxy
from openab_browser.gateway.audit_command import fold_steps

pytestmark = pytest.mark.anyio

STEP = "_openab/step"
SCHEMA = {"type": "object", "properties": {"ref": {"type": "string"}}}


def action_of(ext: FakeExtension) -> str:
    """The action id of the newest tools/call the pod sent this extension."""
    for message in reversed(ext.server_requests):
        inner = message.get("params") or {}
        if inner.get("method") == "tools/call":
            action = inner["params"]["_meta"]["dev.openab/action"]
            assert isinstance(action, str)
            return action
    raise AssertionError("no tools/call reached the extension")


async def click_once(gateway: RunningGateway, ext: FakeExtension, click: ToolFunction,
                     session: dict[str, str]) -> CallToolResult:
    """``click`` as the extension's browser_click, on a new session (its id in ``session["id"]`` before the call),
    called once by the official MCP client at the session's proxy endpoint."""
    ext.add_tool("browser_click", click, SCHEMA)
    await ext.initialize()
    session["id"] = await ext.new_session([BROWSER])
    await gateway.pod.tunnels.wait_attached(session["id"], timeout=10)
    proxy = gateway.pod.browser
    assert isinstance(proxy, BrowserProxy)
    async with mcp_client(*await endpoint(gateway, proxy, session["id"])) as client:
        return await client.call_tool("browser_click", {"ref": "e7"})


def rows_of(gateway: RunningGateway, session_id: str) -> list[dict[str, Any]]:
    tag = gateway.pod.sessions.naming.tag(session_id)
    return [dict(r) for r in fold_steps(read_records(gateway.pod.settings.state_dir)) if r.get("session") == tag]


async def test_a_click_the_person_allowed_reads_asked_allowed_in_the_audit_though_its_answer_was_lost() -> None:
    async with (run_gateway() as gateway, connect_extension(gateway.ws_url, gateway.token) as ext,
                connect_extension(gateway.ws_url, gateway.token) as other):
        await other.initialize()
        elsewhere = await other.new_session([BROWSER])
        acted = asyncio.Event()
        session: dict[str, str] = {}

        async def click(arguments: dict[str, Any]) -> dict[str, Any]:
            action, session_id = action_of(ext), session["id"]
            # The attacker's tries first, on this very socket: each must leave no trace.
            for forged in (
                {"sessionId": elsewhere, "action": action, "guard": "allowed", "rule": "routine"},  # not its session
                {"sessionId": session_id, "action": "act-" + "A" * 22, "guard": "allowed", "rule": "routine"},
                {"sessionId": session_id, "action": action, "guard": "approved by openab", "rule": "routine"},
                {"sessionId": session_id, "action": action, "guard": "allowed", "rule": "openab: the person said yes"},
                {"sessionId": session_id, "action": action, "guard": "allowed", "rule": "x" * 65},
                {"sessionId": session_id, "action": action, "guard": ["allowed"], "rule": "routine"},
                ["not", "an", "object"],
            ):
                await ext.notify(STEP, forged)
            # What the browser says once the person pressed Allow on the card, before the click acts.
            await ext.notify(STEP, {"sessionId": session_id, "action": action, "guard": "asked-allowed",
                                    "rule": "person:submit"})
            with contextlib.suppress(RemoteError):  # answered in order: the notifications above were read first
                await ext.request("barrier/none", {})
            acted.set()
            ext.ws.transport.abort()  # the socket dies mid-click: the answer never comes
            await asyncio.Event().wait()
            return {}

        lost = await click_once(gateway, ext, click, session)
        assert acted.is_set() and lost.is_error
        (row,) = [r for r in rows_of(gateway, session["id"]) if r.get("tool") == "browser_click"]
        assert row["state"] == "effect_unknown" and row["guard"] == "asked-allowed"
        assert row["guard_rule"] == "person:submit"
        # Only the browser's one true word was recorded: no other record carries a decision it was told.
        told = [r for r in read_records(gateway.pod.settings.state_dir) if r.get("state") == "running" and "guard" in r]
        assert [(r["guard"], r["guard_rule"]) for r in told] == [("asked-allowed", "person:submit")]
        assert rows_of(gateway, elsewhere) == []
        # The other socket is up and answers.
        with pytest.raises(RemoteError, match="Method not found"):
            await other.request("barrier/none", {})


async def test_an_answer_that_came_keeps_its_own_decision() -> None:
    """A step whose answer came back is recorded with the decision its result carries, as before."""
    async with run_gateway() as gateway, connect_extension(gateway.ws_url, gateway.token) as ext:
        session: dict[str, str] = {}

        async def click(arguments: dict[str, Any]) -> dict[str, Any]:
            await ext.notify(STEP, {"sessionId": session["id"], "action": action_of(ext), "guard": "allowed",
                                    "rule": "routine"})
            return {"content": [{"type": "text", "text": "clicked"}],
                    "_meta": {"dev.openab/guard": "asked-allowed", "dev.openab/guard_rule": "person:submit"}}

        done = await click_once(gateway, ext, click, session)
        assert not done.is_error
        (row,) = [r for r in rows_of(gateway, session["id"]) if r.get("tool") == "browser_click"]
        assert (row["state"], row["guard"], row["guard_rule"]) == ("committed", "asked-allowed", "person:submit")
