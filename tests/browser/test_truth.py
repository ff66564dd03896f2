"""What the agent and the person are told matches what happened: a page that did not load, a site rule.

A load that failed (nothing at the address, a port the browser refuses), one that loaded no page (a 204, a
download), and a redirect to a site the person blocked, answer the agent with what happened instead of "navigated
to"; a step back to a page that no longer loads, or onto a site the person blocked meanwhile, instead of "went
back". A site rule typed without a scheme
("127.0.0.1:<port>") covers that site over http as well as https, and the settings list says what a rule covers.
Real Chromium with the real extension, played as the person; the pod is the real gateway.
"""

from __future__ import annotations

import contextlib
import http.server
import re
import threading
from collections.abc import AsyncIterator, Iterator

import pytest
from mcp import Client
from playwright.async_api import Locator, Page, expect
from ports import free_port
from refs import ref_of

from .conftest import person_browser
from .harness import serving, snap
from .live_pod import call, without_receipt

pytestmark = pytest.mark.anyio

# Chrome's back-forward cache shows a page again as it was left, without loading it: a step back could not fail.
context, tunnel = person_browser("truth", extra=("--disable-back-forward-cache",))


@contextlib.contextmanager
def answering(status: int, headers: tuple[tuple[str, str], ...] = (), body: bytes = b"") -> Iterator[str]:
    """A real HTTP server on loopback whose every page answers ``status`` with ``headers`` and ``body``; yields its
    base URL. Once the block ends nothing answers there, not even on a connection Chrome opened ahead of a request
    while the server ran (it connects to a site it expects to load from before it asks)."""
    ended = threading.Event()

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if ended.is_set():
                self.close_connection = True
                return
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    try:
        with serving(http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)) as port:
            yield f"http://127.0.0.1:{port}"
    finally:
        ended.set()


def redirecting_to(target: str) -> contextlib.AbstractContextManager[str]:
    """A server whose every page answers 302 to ``target``; yields its base URL."""
    return answering(302, (("location", target),))


async def current_tab(client: Client) -> int | None:
    """The id of the current agent tab, as browser_tabs lists it; None before the agent has one."""
    listing, _ = await call(client, "browser_tabs", {"action": "list"})
    current = re.search(r"- tab (\d+) \(current\)", listing)
    return None if current is None else int(current.group(1))


@contextlib.asynccontextmanager
async def own_tab(client: Client, url: str) -> AsyncIterator[int]:
    """A new agent tab at ``url`` for a test of browser_back, its history only what the test puts in it: Chrome's back
    skips some entries that the tests before leave in theirs (as its back button does), which would take a step back
    past the page the test is about. Yields its id; closed afterwards, the tab before it current again."""
    first = await current_tab(client)
    text, is_error = await call(client, "browser_tabs", {"action": "open", "url": url})
    assert not is_error and text.startswith("opened tab "), text
    fresh = int(re.search(r"opened tab (\d+)", text).group(1))  # type: ignore[union-attr]
    try:
        yield fresh
    finally:
        if first is not None:
            await call(client, "browser_tabs", {"action": "switch", "tab_id": first})
        await call(client, "browser_tabs", {"action": "close", "tab_id": fresh})


async def never_rule(panel: Page, host: str) -> Locator:
    """Opens the panel's settings and adds a Never rule for ``host`` as a person types it; returns the rule's row."""
    await panel.locator("#toggle-settings").click()
    await panel.locator("#rule-origin").fill(host)
    await panel.locator("#rule-kind").select_option("never")
    await panel.locator("#rule-form button").click()
    rule = panel.locator("#rules li")
    await expect(rule).to_have_text(f"Never: {host} (http and https)Remove")
    return rule


async def test_a_page_that_did_not_load_is_not_navigated_to(client: Client, site: str) -> None:
    text, is_error = await call(client, "browser_navigate", {"url": f"{site}/form.html"})
    assert (without_receipt(text), is_error) == (f"navigated to {site}/form.html", False)
    nowhere = f"http://127.0.0.1:{free_port()}/"  # a port bound, then let go: nothing listens there
    text, is_error = await call(client, "browser_navigate", {"url": nowhere})
    assert is_error and text.startswith(f"{nowhere} did not load: nothing accepts connections at that address "
                                        "(net::ERR_CONNECTION_REFUSED)"), text
    assert "navigated" not in text
    # A port the browser itself refuses to load from (Chrome's unsafe ports: 6000 is X11's).
    text, is_error = await call(client, "browser_navigate", {"url": "http://127.0.0.1:6000/"})
    assert is_error and "the browser refuses to load anything from this port (net::ERR_UNSAFE_PORT)" in text, text
    # A tab opened at such an address says so too, and a load that works afterwards answers as before.
    text, is_error = await call(client, "browser_tabs", {"action": "open", "url": nowhere})
    assert is_error and "did not load" in text and "ERR_CONNECTION_REFUSED" in text, text
    text, is_error = await call(client, "browser_navigate", {"url": f"{site}/page2.html"})
    if "did not open" in text:
        # With the harness's Playwright attached, Chrome now and then cancels a navigation sent within moments of a
        # new tab's error page (never without it: 0 of 70 runs). The answer says so, and the agent may send it again.
        assert text.startswith(f"{site}/page2.html did not open: the browser ended the navigation without loading "
                               "a page"), text
        assert f"URL: {nowhere}" in text
        text, is_error = await call(client, "browser_navigate", {"url": f"{site}/page2.html", "repeat": True})
    assert (without_receipt(text), is_error) == (f"navigated to {site}/page2.html", False)


async def test_a_navigation_that_loads_no_page_says_so(client: Client, site: str) -> None:
    page = f"{site}/page2.html?stays"
    text, is_error = await call(client, "browser_navigate", {"url": page})
    assert (without_receipt(text), is_error) == (f"navigated to {page}", False)
    # An answer with no content (204): Chrome ends the navigation and keeps the page there was.
    with answering(204) as empty:
        text, is_error = await call(client, "browser_navigate", {"url": f"{empty}/nothing"})
    assert not is_error, text
    assert text.startswith(f"{empty}/nothing did not open: the browser ended the navigation without loading a page "
                           "(the address may have answered with a download"), text
    assert f"URL: {page}" in text and "navigated" not in text
    # A download: the same, and the file is the agent's to take (lib/downloads.js).
    text, is_error = await call(client, "browser_navigate", {"url": f"{site}/files/plain.csv"})
    assert not is_error, text
    assert text.startswith(f"{site}/files/plain.csv did not open: "), text
    assert "which browser_download with no ref or url takes" in text and f"URL: {page}" in text
    # A tab opened at a download: Chrome closes it, and the answer says so.
    text, is_error = await call(client, "browser_tabs", {"action": "open", "url": f"{site}/files/plain.csv?tab"})
    assert not is_error, text
    assert text.startswith(f"{site}/files/plain.csv?tab did not open: "), text
    assert "Chrome closed the tab it had opened for it" in text
    text, _ = await call(client, "browser_tabs", {"action": "list"})
    assert "plain.csv" not in text and f"(current): \"Page two\" {page}" in text, text
    # The tab is where the answers say, and it still works.
    text, is_error = await call(client, "browser_snapshot", {"interactive_only": True})
    assert not is_error and f"URL: {page}" in text, text
    text, is_error = await call(client, "browser_navigate", {"url": f"{site}/form.html?after"})
    assert (without_receipt(text), is_error) == (f"navigated to {site}/form.html?after", False)


async def test_a_page_that_sends_the_tab_on_is_followed(client: Client, site: str) -> None:
    # The page asked for replaces itself as it loads: the answer names where the tab is once it is at rest.
    text, is_error = await call(client, "browser_navigate", {"url": f"{site}/goes_on.html"})
    assert not is_error, text
    assert text.startswith(f"navigated to {site}/goes_on.html; the page is now at the URL in the block below"), text
    assert f"URL: {site}/page2.html?from=goes_on" in text
    # A jump within the page is a navigation too, and it loads nothing.
    text, is_error = await call(client, "browser_navigate", {"url": f"{site}/page2.html?from=goes_on#top"})
    assert (without_receipt(text), is_error) == (f"navigated to {site}/page2.html?from=goes_on#top", False)


async def test_a_link_says_how_its_page_loaded(client: Client, site: str) -> None:
    listing, _ = await call(client, "browser_tabs", {"action": "list"})
    tabs_before = listing.count("- tab ")
    nowhere = f"http://127.0.0.1:{free_port()}/"  # a port bound, then let go: nothing listens there
    body = (f'<!doctype html><title>Links out</title><a href="{nowhere}" target="_blank">Open nowhere</a> '
            f'<a href="{site}/files/plain.csv?in-a-tab" target="_blank">Open the file</a> '
            f'<a href="{nowhere}">Go nowhere</a>').encode()
    with answering(200, (("content-type", "text/html"),), body) as links:
        text, is_error = await call(client, "browser_navigate", {"url": f"{links}/links"})
        assert not is_error, text
        links_tab = await current_tab(client)
        snap, _ = await call(client, "browser_snapshot")
        # The new tab opens (the agent's, and current), but its page did not: the click is done, and says why.
        text, is_error = await call(client, "browser_click", {"ref": ref_of(snap, 'link "Open nowhere"')})
        assert not is_error, text
        assert re.match(r"clicked \S+: it opens in a new tab, so tab (\d+) was opened and is now the current agent "
                        r"tab, but its page did not load: nothing accepts connections at that address "
                        r"\(net::ERR_CONNECTION_REFUSED\)", text), text
        assert f"URL: {nowhere}" in text and "(at the URL in the block below)" not in text
        opened = int(re.search(r"so tab (\d+) was opened", text).group(1))  # type: ignore[union-attr]
        await call(client, "browser_tabs", {"action": "close", "tab_id": opened})
        text, is_error = await call(client, "browser_tabs", {"action": "switch", "tab_id": links_tab})
        assert not is_error, text
        # A link to a download: Chrome closes the tab it opened for it, and the answer says so.
        text, is_error = await call(client, "browser_click", {"ref": ref_of(snap, 'link "Open the file"')})
        assert not is_error, text
        assert "it opens in a new tab, but its address loaded no page: " in text, text
        assert "Chrome closed the tab it had opened for it" in text and f"URL: {site}/files/plain.csv?in-a-tab" in text
        # A link in the tab itself: the click happened, and the page it led to did not load.
        text, is_error = await call(client, "browser_click", {"ref": ref_of(snap, 'link "Go nowhere"')})
        assert not is_error, text
        assert re.match(r"clicked \S+; it led to a page that did not load: nothing accepts connections at that "
                        r"address \(net::ERR_CONNECTION_REFUSED\)\. The tab shows the browser's error page", text), text
        assert f"URL: {nowhere}" in text and "loaded a new page" not in text
    listing, _ = await call(client, "browser_tabs", {"action": "list"})
    assert listing.count("- tab ") == tabs_before and "(current)" in listing, listing


async def test_back_to_a_page_that_no_longer_loads_says_so(client: Client, site: str) -> None:
    # A page the browser does not keep (no-store, and this module's Chromium keeps no page whole for the way back):
    # going back to it loads it again, from a server that is gone by then.
    page = (("content-type", "text/html"), ("cache-control", "no-store"))
    async with contextlib.AsyncExitStack() as stack:
        with answering(200, page, b"<!doctype html><title>Soon gone</title><p>here for now") as soon_gone:
            await stack.enter_async_context(own_tab(client, f"{soon_gone}/here"))
            text, is_error = await call(client, "browser_navigate", {"url": f"{site}/page2.html?after-gone"})
            assert not is_error, text
        text, is_error = await call(client, "browser_back")
        assert is_error, text
        # Refused, or (on a connection Chrome had opened ahead) closed with no answer: Chrome's reason, in words.
        assert text.startswith("went back one page, but it did not load: "), text
        assert "(net::ERR_CONNECTION_REFUSED)" in text or "(net::ERR_EMPTY_RESPONSE)" in text, text
        assert "The tab shows the browser's error page for the URL in the block below" in text
        assert f"URL: {soon_gone}/here" in text
        # Forward again by address, and the tab works as before.
        text, is_error = await call(client, "browser_navigate", {"url": f"{site}/page2.html?again"})
        assert (without_receipt(text), is_error) == (f"navigated to {site}/page2.html?again", False)


async def test_back_within_the_page_is_a_step_back(client: Client, site: str) -> None:
    # A #fragment jump is an entry of the tab's history with no load of its own: back goes to the entry before it.
    async with own_tab(client, f"{site}/page2.html?within"):
        text, is_error = await call(client, "browser_navigate", {"url": f"{site}/page2.html?within#top"})
        assert (without_receipt(text), is_error) == (f"navigated to {site}/page2.html?within#top", False)
        text, is_error = await call(client, "browser_back")
        assert not is_error and text.startswith("went back one page, to the URL in the block below"), text
        assert f"URL: {site}/page2.html?within\n" in text, text


async def test_back_onto_a_site_the_person_blocked_is_refused(panel: Page, client: Client, site: str) -> None:
    other = site.replace("127.0.0.1", "localhost")  # the same server under another name: another site
    async with own_tab(client, f"{site}/page2.html?before-rule"):
        text, is_error = await call(client, "browser_navigate", {"url": f"{other}/form.html"})
        assert (without_receipt(text), is_error) == (f"navigated to {other}/form.html", False)
        rule = await never_rule(panel, site.removeprefix("http://"))
        try:
            text, is_error = await call(client, "browser_back")
            assert is_error, text
            assert text.startswith("went back one page, onto a site the agent may not use: not allowed by the "
                                   "user"), text
            assert "blocked by the user's site rule" in text and f"URL: {site}/page2.html?before-rule" in text
            assert "went back one page, to" not in text
        finally:
            await rule.locator("button").click()
            await expect(rule).to_have_count(0)
            await panel.locator("#toggle-settings").click()


async def test_a_rule_typed_without_a_scheme_covers_the_http_site(panel: Page, client: Client, site: str) -> None:
    host = site.removeprefix("http://")  # 127.0.0.1:<port>, as a person types it
    rule = await never_rule(panel, host)
    await snap(panel, "panel-site-rule-host.png")

    text, is_error = await call(client, "browser_navigate", {"url": f"{site}/form.html"})
    assert is_error and "blocked by the user's site rule" in text, text
    # A redirect into the blocked site is refused as well, not reported as a page the agent reached.
    with redirecting_to(f"{site}/form.html") as elsewhere:
        text, is_error = await call(client, "browser_navigate", {"url": f"{elsewhere}/go"})
    assert is_error and text.startswith(f"{elsewhere}/go redirected to another site: not allowed by the user"), text
    assert "blocked by the user's site rule" in text

    await rule.locator("button").click()
    await expect(rule).to_have_count(0)
    # Typed with a scheme, a rule covers that scheme only: the https twin of the site is not the http one.
    await panel.locator("#rule-origin").fill(f"https://{host}")
    await panel.locator("#rule-kind").select_option("never")
    await panel.locator("#rule-form button").click()
    await expect(rule).to_have_text(f"Never: https://{host} (https only)Remove")
    text, is_error = await call(client, "browser_navigate", {"url": f"{site}/form.html"})
    assert (without_receipt(text), is_error) == (f"navigated to {site}/form.html", False)
    await rule.locator("button").click()
    await expect(rule).to_have_count(0)
    await panel.locator("#toggle-settings").click()
