"""When a page action's call returns: after the load of a navigation it started, and at once when it started none.

The real extension in Chromium, called by the official MCP client at the pod, on tests/site/settle.html. A call
that did not navigate used to sleep a fixed 150 ms; these tests fail on that sleep (a non-navigating click or a
typed text is not held for it) as much as on a click that returns before the page it led to has loaded.
"""

from __future__ import annotations

import asyncio
import re
import time
from urllib.parse import quote

import pytest
from mcp import Client
from playwright.async_api import BrowserContext
from waits import eventually

from .conftest import person_browser
from .harness import SLOW_VISITS, page_at
from .live_pod import call, without_receipt

pytestmark = pytest.mark.anyio

context, tunnel = person_browser("settle", autopilot=True)

TRIES = 3
# The old fixed wait after every action: a call that waits for nothing returns well before it, whatever the load.
FIXED_WAIT_S = 0.150


async def timed_call(client: Client, name: str, args: dict[str, object]) -> tuple[str, bool, float]:
    start = time.perf_counter()
    text, is_error = await call(client, name, args)
    return text, is_error, time.perf_counter() - start


async def out_text(client: Client) -> str:
    html, is_error = await call(client, "browser_read_dom", {"selector": "#out"})
    assert not is_error, html
    m = re.search(r'<p id="out">([^<]*)</p>', html)
    assert m, html
    return m.group(1)


async def test_a_click_that_does_not_navigate_is_not_held(client: Client, site: str) -> None:
    # The page changes again 100 ms after the click, without leaving: nothing the click's call should wait for.
    # Twice the tries: with the suite's files side by side, three clicks in a row on a busy two-core machine all
    # took 190-330 ms once (a click takes 45-90 ms on that machine at rest); a held click never takes less than the
    # hold, however many tries.
    took = []
    for _ in range(2 * TRIES):
        await call(client, "browser_navigate", {"url": f"{site}/settle.html"})
        text, is_error, seconds = await timed_call(client, "browser_click", {"selector": "#stay"})
        assert not is_error and "new page" not in text, text
        took.append(seconds)
        assert await out_text(client) in ("clicked", "changed later")
    assert min(took) < FIXED_WAIT_S, took


async def test_typing_is_not_held(client: Client, site: str) -> None:
    await call(client, "browser_navigate", {"url": f"{site}/settle.html"})
    took = []
    for i in range(TRIES):
        text, is_error, seconds = await timed_call(client, "browser_type", {"selector": "#name", "text": f"Ada {i}"})
        assert not is_error and text.startswith("typed into #name"), text
        took.append(seconds)
    assert min(took) < FIXED_WAIT_S, took


async def test_a_link_click_returns_with_the_loaded_page(client: Client, site: str) -> None:
    await call(client, "browser_navigate", {"url": f"{site}/settle.html"})
    text, is_error = await call(client, "browser_click", {"selector": "#next"})
    assert not is_error, text
    assert text.startswith("clicked #next; it loaded a new page"), text
    # The URL is the page's to choose, so it comes inside the untrusted block.
    assert re.search(rf"<<<page-content (\w+)\nURL: {re.escape(site)}/page2.html\n>>>page-content \1$",
                     without_receipt(text)), text
    snap, _ = await call(client, "browser_snapshot")
    assert "# Page two" in snap


async def test_a_form_submission_is_waited_for(client: Client, site: str) -> None:
    # A submission navigates in the page's next task, after the click's own script has returned.
    await call(client, "browser_navigate", {"url": f"{site}/settle.html"})
    await call(client, "browser_type", {"selector": "#user", "text": "ada"})
    text, is_error = await call(client, "browser_click", {"selector": "#signin"})
    assert not is_error and "it loaded a new page" in text and f"URL: {site}/signed-in" in text, text


async def test_a_navigation_the_page_starts_a_moment_later_is_waited_for(client: Client, site: str) -> None:
    met, starved = 0, []
    while met < TRIES:
        await call(client, "browser_navigate", {"url": f"{site}/settle.html"})
        text, is_error = await call(client, "browser_click", {"selector": "#later"})
        assert not is_error, text
        # Whether the click's call or the next one met it, the next call sees the new page, loaded.
        snap, _ = await call(client, "browser_snapshot")
        if "# Page two" in snap:
            met += 1
            continue
        # The page had not yet begun to leave when it was read (it says so first): its own 20 ms came later than the
        # extension's window, as on a busy machine. Never a read of the page already on its way out (the defect, once
        # in a full run at 89 %: the read showed "on its way" with the extension's window at 0 ms and no look after
        # the read, three runs of three), and never every time.
        assert "on its way" not in snap, (text, snap)
        starved.append(snap)
        assert len(starved) <= TRIES, starved


async def test_a_page_that_only_pretends_to_leave_holds_the_call_a_bounded_time(client: Client, site: str) -> None:
    await call(client, "browser_navigate", {"url": f"{site}/settle.html"})
    text, is_error, seconds = await timed_call(client, "browser_click", {"selector": "#fake"})
    assert not is_error and "new page" not in text, text
    assert seconds < 5, seconds
    assert await out_text(client) == "still here"



async def leaving(client: Client, site: str, to: str) -> None:
    """tests/site/leaves.html, which goes on its own to ``to`` (a page that takes its time to answer) 300 ms after it
    loaded and meanwhile holds its own thread, as a heavy page does; returns once that navigation has begun."""
    await call(client, "browser_navigate", {"url": f"{site}/leaves.html?after=300&busy=3000&to={quote(to, safe='')}"})
    path = to[to.index("/slowly"):]
    await eventually(lambda: SLOW_VISITS[path] == 1, 10, what="the page's navigation to begin")


async def test_a_snapshot_while_the_page_is_on_its_way_out_reads_the_page_that_comes(client: Client, site: str) -> None:
    # Before: Chrome answered nothing for the document that went, and the snapshot was an empty block.
    to = f"{site}/slowly?ms=800&n=snapshot"
    await leaving(client, site, to)
    text, is_error = await call(client, "browser_snapshot")
    assert not is_error and "# Arrived slowly" in text and f"URL: {to}" in text, text


async def test_keys_typed_while_the_page_is_on_its_way_out_never_reach_the_page_that_comes(
        client: Client, site: str) -> None:
    # The page is on its way to another site, whose page puts the focus in a field of its own at once. Before: the
    # first key went to the page being left and the rest to the tab, into the other site's field, which the guard
    # never saw ("typed into #field"). Now the step meets the page that came, where there is no #field.
    to = f"{site.replace('127.0.0.1', 'localhost')}/slowly?ms=800&field=1&n=type"
    await leaving(client, site, to)
    text, is_error = await call(client, "browser_type", {"selector": "#field", "text": "secret words"})
    assert is_error and text.startswith("no element for selector: #field"), text
    snap, _ = await call(client, "browser_snapshot")
    assert "# Arrived slowly" in snap and 'textbox "Landed"' in snap and "secret words" not in snap, snap


async def test_a_step_whose_page_is_replaced_while_it_is_in_it_may_have_happened(
        client: Client, context: BrowserContext, site: str) -> None:
    # #heavy holds the page's thread as it takes the focus; meanwhile the tab is sent to another site (as by the
    # person's address bar), whose page commits in a process of its own and puts the focus in its own field.
    url = f"{site}/leaves.html?heavy=3000"
    await call(client, "browser_navigate", {"url": url})
    page = await page_at(context, url)
    SLOW_VISITS["/slowly?n=held"] = 0
    typing = asyncio.ensure_future(call(client, "browser_type", {"selector": "#heavy", "text": "secret words"}))
    await eventually(lambda: SLOW_VISITS["/slowly?n=held"] == 1, 10, what="the field to take the focus")
    other = f"{site.replace('127.0.0.1', 'localhost')}/slowly?ms=0&field=1&n=replaced"
    await page.goto(other, wait_until="commit")
    text, is_error = await typing
    # Which of three the step met is the machine's timing: the other page came as the field was readied (the step
    # may have happened: the field took the focus), before the keys went (not done), or after they went into the
    # field of the page being left (typed, and the receipt says the page went). Never "try again", never Chrome's
    # raw words, and never a key in the other site's field.
    if is_error:
        assert text.startswith(("the page went to another page while browser_type was being done, so it may or may "
                                "not have happened", "browser_type was not done: the page went to another page")), text
        assert f"URL: {other}" in text, text
    else:
        assert text.startswith("typed into #heavy\nReceipt: the page went to another URL"), text
    snap, _ = await call(client, "browser_snapshot")
    assert 'textbox "Landed"' in snap and "secret words" not in snap, snap
