"""A guard card nobody answers, on the extension's own module in its own page, with the page's clock sped up: that
one action is declined, in words that say so, and the guard goes on asking about the next one. A card whose tab
closes before anyone answers is declined too, saying so."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from playwright.async_api import Page

from .harness import unpaired_panel

pytestmark = pytest.mark.anyio

# The real guard.js; its 5-minute card wait is made instant (the page's timers are the test's clock), nothing else.
UNANSWERED = """async (element) => {
  const realTimeout = globalThis.setTimeout;
  globalThis.setTimeout = (fn, ms, ...rest) => realTimeout(fn, ms >= 300000 ? 0 : ms, ...rest);
  try {
    const { Guard } = await import('/lib/guard.js');
    let changes = 0;
    const guard = new Guard(() => ({ autopilot: false, siteRules: {} }), async () => {}, () => { changes += 1; });
    const outcome = async () => {
      try {
        await guard.check('browser_click', element, {}, undefined, element.url);
        return 'ran';
      } catch (e) {
        return `${e.code}: ${e.message}`;
      }
    };
    return { first: await outcome(), second: await outcome(), changes, left: guard.cards.size };
  } finally {
    globalThis.setTimeout = realTimeout;
  }
}"""


@pytest.fixture(scope="module")
async def page(site: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Page]:
    async with unpaired_panel(site, tmp_path_factory.mktemp("card-timeout")) as page:
        yield page


async def test_a_card_nobody_answers_declines_that_action_and_says_so(page: Page) -> None:
    delete = {"role": "button", "name": "Delete account", "tag": "button", "type": "", "sensitive": None,
              "submit": False, "formAction": "", "origin": "https://shop.example", "url": "https://shop.example/"}
    got = await page.evaluate(UNANSWERED, delete)
    for outcome in (got["first"], got["second"]):  # each action asked on its own, each declined on its own
        assert outcome.startswith("not_allowed: not allowed by the user (the person did not answer in 300 s; "
                                  "the action was not taken)"), outcome
        assert "Do not retry it" in outcome
    assert got["changes"] == 4 and got["left"] == 0  # each card shown, then taken away


# The real guard.js asking about a step in a real tab, which is then closed before anyone answers.
TAB_CLOSES = """async (element) => {
  const { Guard } = await import('/lib/guard.js');
  const guard = new Guard(() => ({ autopilot: false, siteRules: {} }), async () => {}, () => {});
  const tab = await chrome.tabs.create({ url: 'about:blank', active: false });
  const asked = guard.check('browser_click', element, {}, undefined, { url: element.url, tabId: tab.id });
  const shown = guard.publicCards().map((c) => c.tabId);
  await chrome.tabs.remove(tab.id);
  try {
    await asked;
    return { shown, outcome: 'ran' };
  } catch (e) {
    return { shown, outcome: `${e.code}: ${e.message}`, left: guard.cards.size };
  }
}"""


async def test_a_card_whose_tab_closes_declines_that_action_and_says_why(page: Page) -> None:
    delete = {"role": "button", "name": "Delete account", "tag": "button", "type": "", "sensitive": None,
              "submit": False, "formAction": "", "origin": "https://shop.example", "url": "https://shop.example/"}
    got = await page.evaluate(TAB_CLOSES, delete)
    assert len(got["shown"]) == 1 and isinstance(got["shown"][0], int)  # the card knows its tab
    assert got["outcome"].startswith("not_allowed: not allowed by the user (the tab closed before the person "
                                     "answered; the action was not taken)"), got
    assert got["left"] == 0
