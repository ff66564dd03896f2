"""What the panel says once the person pressed Cancel on Chrome's "started debugging this browser" bar: openab can
no longer see the page dialogs in the agent's tabs, and until when.

Chrome draws that bar as browser UI, which a headless window has but no one can press: the Cancel itself cannot be
played here. What is checked is the line the panel shows for it, as the shipped modules write it (the worker's
words from lib/dialogs.js, rendered by the panel's own tab list in the panel's page).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from playwright.async_api import Page, expect

from .harness import snap, unpaired_panel

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def page(site: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Page]:
    async with unpaired_panel(site, tmp_path_factory.mktemp("bar")) as page:
        await page.set_viewport_size({"width": 360, "height": 640})
        yield page


async def test_the_panel_says_what_cancelling_the_debugging_bar_turned_off(page: Page) -> None:
    note = await page.evaluate("import('/lib/dialogs.js').then((m) => m.DECLINED_NOTE)")
    assert note.startswith("You cancelled Chrome's debugging bar: openab can no longer see page dialogs")
    assert "until you start a new chat" in note
    await expect(page.locator("#agent-tabs")).to_be_hidden()
    await page.locator("#toggle-settings").click()  # the settings an unpaired panel opens with, out of the way
    # Rendered and read in one turn of the page: a state the worker pushes meanwhile (the settings' toggle answered)
    # renders the panel's own, empty, list over it.
    shown = await page.evaluate("""async (note) => {
        const { renderAgentTabs } = await import('/panel/tab-list.js');
        const tabs = [{ id: 7, by: 'agent', current: true, title: 'Checkout', site: 'shop.example', dialog: '' }];
        renderAgentTabs({ tabs, more: 0, note }, () => {});
        return { note: document.getElementById('agent-tabs-note').textContent,
                 tabs: document.querySelectorAll('#agent-tab-list li.agent-tab[data-tab-id]').length };
    }""", note)
    assert shown == {"note": note, "tabs": 1}
    await snap(page, "panel-debugger-declined.png")
    # With no tab left the line still shows: the person reads why dialogs go unseen until the next chat.
    shown = await page.evaluate("""async (note) => {
        (await import('/panel/tab-list.js')).renderAgentTabs({ tabs: [], more: 0, note }, () => {});
        return { visible: !document.getElementById('agent-tabs').hidden,
                 note: document.getElementById('agent-tabs-note').textContent };
    }""", note)
    assert shown == {"visible": True, "note": note}
