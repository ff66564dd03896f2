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
import threading
from collections.abc import Iterator

import pytest
from mcp import Client
from playwright.async_api import Locator, Page, expect
from ports import free_port

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


async def test_back_to_a_page_that_no_longer_loads_says_so(client: Client, site: str) -> None:
    # A page the browser does not keep (no-store, and this module's Chromium keeps no page whole for the way back):
    # going back to it loads it again, from a server that is gone by then.
    page = (("content-type", "text/html"), ("cache-control", "no-store"))
    with answering(200, page, b"<!doctype html><title>Soon gone</title><p>here for now") as soon_gone:
        text, is_error = await call(client, "browser_navigate", {"url": f"{soon_gone}/here"})
        assert (without_receipt(text), is_error) == (f"navigated to {soon_gone}/here", False)
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
    text, is_error = await call(client, "browser_navigate", {"url": f"{site}/page2.html?within"})
    assert not is_error, text
    text, is_error = await call(client, "browser_navigate", {"url": f"{site}/page2.html?within#top"})
    assert (without_receipt(text), is_error) == (f"navigated to {site}/page2.html?within#top", False)
    text, is_error = await call(client, "browser_back")
    assert not is_error and text.startswith("went back one page, to the URL in the block below"), text
    assert f"URL: {site}/page2.html?within\n" in text, text


async def test_back_onto_a_site_the_person_blocked_is_refused(panel: Page, client: Client, site: str) -> None:
    other = site.replace("127.0.0.1", "localhost")  # the same server under another name: another site
    text, is_error = await call(client, "browser_navigate", {"url": f"{site}/page2.html?before-rule"})
    assert not is_error, text
    text, is_error = await call(client, "browser_navigate", {"url": f"{other}/form.html"})
    assert (without_receipt(text), is_error) == (f"navigated to {other}/form.html", False)
    rule = await never_rule(panel, site.removeprefix("http://"))
    try:
        text, is_error = await call(client, "browser_back")
        assert is_error, text
        assert text.startswith("went back one page, onto a site the agent may not use: not allowed by the user"), text
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
