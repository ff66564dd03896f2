"""The panel's side of how it learns a journalled step runs (core/journal/telling.py), as the shipped modules.

The panel says in ``session/new`` that it marks a step running when the step's call reaches it, and the pod then
sends no ``running`` notification of its own: the mark must come from the call, before the page is touched, and tie
the step to the agent's row while that row still runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from playwright.async_api import Page

from .harness import unpaired_panel
from .test_units import run

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def page(site: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Page]:
    async with unpaired_panel(site, tmp_path_factory.mktemp("journal-units")) as page:
        yield page


async def test_a_journalled_call_marks_its_step_running_before_the_tool_runs_and_a_read_marks_nothing(
    page: Page,
) -> None:
    got = await run(page, "mcp.js", """(async () => {
        const heard = [];
        const tools = {
            has: () => true,
            call: async (name) => { heard.push(['tool ran', name]); return {content: [{type: 'text', text: 'ok'}]}; },
        };
        const server = new m.McpServer(tools, () => 'b', () => {});
        server.onRunning = (action, tool) => heard.push(['running', action, tool]);
        const {connectionId} = await server.onRequest('mcp/connect', {acpId: 'b'}, 1);
        await server.onRequest('mcp/message', {connectionId, method: 'tools/call',
            params: {name: 'browser_click', arguments: {ref: 'e1'},
                     _meta: {'dev.openab/action': 'act-AAAAAAAAAAAAAAAAAAAAAA'}}}, 2);
        await server.onRequest('mcp/message', {connectionId, method: 'tools/call',
            params: {name: 'browser_snapshot', arguments: {}}}, 3);
        return heard;
    })()""")
    assert got == [["running", "act-AAAAAAAAAAAAAAAAAAAAAA", "browser_click"], ["tool ran", "browser_click"],
                   ["tool ran", "browser_snapshot"]]


async def test_the_mark_ties_the_step_to_the_agents_running_row_and_its_end_finds_it_there(page: Page) -> None:
    got = await run(page, "chat.js", """(() => {
        const t = new m.Transcript(() => {}, () => {});
        t.apply({sessionUpdate: 'tool_call', toolCallId: 'call-1', title: 'browser_click', rawInput: {ref: 'e1'},
                 status: 'in_progress'});
        t.journal([{action: 'act-AAAAAAAAAAAAAAAAAAAAAA', tool: 'browser_click', state: 'running', site: null,
                    at: new Date().toISOString()}]);
        // The agent's row ends before the pod's end of the step arrives (it comes a moment after the answer).
        t.apply({sessionUpdate: 'tool_call_update', toolCallId: 'call-1', status: 'completed'});
        t.journal([{action: 'act-AAAAAAAAAAAAAAAAAAAAAA', tool: 'browser_click', state: 'committed',
                    site: 'shop.example', at: '2026-12-06T00:00:00.000Z'}]);
        const tools = t.items.filter((i) => i.kind === 'tool');
        return {rows: tools.length, journal: tools[0].journal, status: tools[0].status};
    })()""")
    assert got["rows"] == 1 and got["status"] == "completed"
    assert got["journal"]["state"] == "committed" and got["journal"]["site"] == "shop.example"
