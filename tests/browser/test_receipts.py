"""Receipts say what the person would see (issue 34, item 4; docs/journal.md, receipts) in real Chromium with the
real extension, through the real pod and the official MCP client.

A shop whose "Add to cart" form POSTs and is answered 303 back to the same URL with "In cart: N" one higher and a
status message: the click's receipt says the page reloaded, finds the button again in the new page (its new ref and
state) and says what changed ("~ In cart: 0 -> 1", the new status). A choice and typing straight after such a POST
read what the field holds, never "gone". A target named by a selector that leaves the page keeps that selector in
its receipt. Each receipt is checked against the page as Playwright reads it.
"""

from __future__ import annotations

import functools
import http.server
import re
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from mcp import Client
from playwright.async_api import BrowserContext, Page, expect
from refs import ref_of
from waits import eventually

from .conftest import person_browser
from .harness import SITE, page_at, serving
from .live_pod import call

pytestmark = pytest.mark.anyio

RECEIPT = "dev.openab/receipt"
BLOCK = re.compile(r"<<<page-content (\d{15})\n(.*)\n>>>page-content \1", re.DOTALL)

Json = dict[str, Any]

context, tunnel = person_browser("receipts", autopilot=True)

SLOW_POST = 0.4
STOCK = 2  # the shop's mugs: once both are in the cart, "Add to cart" is disabled
CARTS: dict[str, int] = {}
CARTS_LOCK = threading.Lock()


class Shop(http.server.SimpleHTTPRequestHandler):
    """tests/site, and the shop at /shop/<cart>: its page with the cart's count (its button disabled once the stock is
    in the cart), and its form's POST, which adds one and answers 303 back to the same URL (the message of what was
    added shown once, as a status)."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if not path.startswith("/shop/"):
            super().do_GET()
            return
        with CARTS_LOCK:
            count = CARTS.get(path, 0)
            added = CARTS.pop(f"{path}#added", 0)
        message = '<p role="status">Added Blue mug to your cart</p>' if added else ""
        page = (SITE / "shop.html").read_text().replace("__IN_CART__", str(count)).replace("__MESSAGE__", message)
        page = page.replace("__SOLD_OUT__", " disabled" if count >= STOCK else "")
        data = page.encode()
        self.send_response(200)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("content-length", str(len(data)))
        self.send_header("cache-control", "no-store")
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        self.rfile.read(min(int(self.headers.get("content-length") or 0), 65536))
        if "slow" in path:
            time.sleep(SLOW_POST)  # a shop's POST that takes its time: the click's call is over before it lands
        with CARTS_LOCK:
            CARTS[path] = CARTS.get(path, 0) + 1
            CARTS[f"{path}#added"] = 1
        self.send_response(303)
        self.send_header("location", self.path)
        self.send_header("content-length", "0")
        self.end_headers()


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # the browser closing a connection mid-request is not a test failure


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    """This module's site: tests/site with the shop's routes (the static site cannot answer a POST so)."""
    with serving(_Server(("127.0.0.1", 0), functools.partial(Shop, directory=str(SITE)))) as port:
        yield f"http://127.0.0.1:{port}"


CART_IDS = iter(range(1, 1000))


async def shop(client: Client, context: BrowserContext, site: str, kind: str = "cart") -> tuple[Page, str, str]:
    """A new cart's shop page in the agent tab (a `slow-cart` takes its time to answer a POST), the agent's snapshot
    of it and its URL."""
    url = f"{site}/shop/{kind}-{next(CART_IDS)}"
    text, is_error = await call(client, "browser_navigate", {"url": url})
    assert not is_error, text
    snapshot, _ = await call(client, "browser_snapshot")
    return await page_at(context, url), snapshot, url


async def step(client: Client, name: str, args: Json) -> tuple[Json, str]:
    """A state-changing call through the pod, as the agent makes it: its receipt and the receipt's words."""
    result = await client.call_tool(name, {**args, "repeat": True})
    words = "\n".join(getattr(c, "text", "") for c in result.content)
    assert not result.is_error, words
    assert result.meta is not None and RECEIPT in result.meta, words
    assert "\nReceipt: " in words, words
    return result.meta[RECEIPT], words[words.index("\nReceipt: ") + 1:]


def block_of(words: str) -> list[str]:
    """The lines of the receipt's untrusted page block, which must end its words."""
    found = BLOCK.search(words)
    assert found is not None and words.endswith(found.group(0)), words
    return found.group(2).split("\n")


async def test_add_to_cart_reloads_and_the_receipt_says_what_changed(client: Client, context: BrowserContext,
                                                                     site: str) -> None:
    page, snapshot, url = await shop(client, context, site)
    add = ref_of(snapshot, 'button "Add to cart"')
    receipt, words = await step(client, "browser_click", {"ref": add})
    await expect(page.locator("#cart")).to_have_text("In cart: 1")
    await expect(page.get_by_role("status")).to_have_text("Added Blue mug to your cart")
    assert receipt["url_before"] == receipt["url_after"] == url
    assert receipt["reloaded"] is True, receipt
    # The button, found again in the new page: its new ref, which the agent's next snapshot has too.
    element = receipt["element"]
    assert "gone" not in element, element
    assert element["role"] == "button" and element["name"] == "Add to cart", element
    assert element["ref"] != add and element["ref_before"] == add, element
    now, _ = await call(client, "browser_snapshot")
    assert ref_of(now, 'button "Add to cart"') == element["ref"]
    # What changed, as the person sees it: the count and the new status, and nothing that merely got a new ref.
    # Each line starts with its sign: none can pass for the element's line the panel reads.
    changed = receipt["changed"]
    assert "~ In cart: 0 -> 1" in changed, changed
    assert any(line.startswith("+ status") and "Added Blue mug to your cart" in line for line in changed), changed
    assert not any("Add to cart" in line or "Colour" in line for line in changed), changed
    assert len(changed) <= 12 and all(len(line) <= 200 and line[:2] in ("~ ", "+ ", "- ") for line in changed)
    assert words.startswith("Receipt: the page reloaded at the same URL; the element is there again with a new ref; "
                            "2 things changed on the page (in the block)."), words
    assert "gone" not in words
    lines = block_of(words)
    assert f'element: button "Add to cart" [ref={element["ref"]}] (was [ref={add}])' in lines, lines
    assert lines[lines.index("changed:") + 1:] == changed

    # Again, from the receipt's new ref: the count goes on, the message shown once is not new, and the button is
    # found again in its new state: the last mug is in the cart.
    again, again_words = await step(client, "browser_click", {"ref": element["ref"]})
    await expect(page.locator("#cart")).to_have_text("In cart: 2")
    await expect(page.locator("#add")).to_be_disabled()
    assert again["reloaded"] is True and "~ In cart: 1 -> 2" in again["changed"], again
    assert again["element"]["state"] == {"disabled": True} and again["element"]["ref_before"] == element["ref"], again
    assert again_words.startswith("Receipt: the page reloaded at the same URL; the element is there again with a new "
                                  "ref, disabled now; "), again_words


def reloaded_since(receipt: Json, words: str, kind: str) -> None:
    """The step after the POST: on a shop whose POST starts after the click's call is over (late), the step met the
    new page, and its receipt says the page reloaded since the agent's last look and what changed; on the others
    the click's own receipt said so, and this one starts from it."""
    if kind != "late-cart":
        assert "reloaded" not in receipt and "changed" not in receipt, receipt
        return
    assert receipt["reloaded"] is True, receipt
    assert receipt["changed"][:2] == ["~ In cart: 0 -> 1", "+ status: Added Blue mug to your cart"], receipt
    assert words.startswith("Receipt: the page reloaded at the same URL; the element is still there, its value in "
                            "the block; 3 things changed on the page (in the block)."), words


async def after_the_click(url: str, kind: str) -> None:
    """On the late shop, the next step is asked once the page's own late submission has begun (its POST is at the
    shop), as an agent's next call comes a model turn later: the step must then wait for the page it loads. Asked
    sooner, on a loaded machine the page's 40 ms timer slipped past the extension's 80 ms late window (lib/loads.js),
    and the step raced the navigation instead: Chrome removed the page's frame mid-call, and the answer was its
    message as a tool error (a navigation that begins during a step, after that window: not handled yet)."""
    if kind == "late-cart":
        path = urlsplit(url).path
        await eventually(lambda: CARTS.get(path, 0) == 1, 10, what="the late shop's POST")


# Straight after the POST: as the click's call ends with the page back (cart), with a POST that takes its time
# (slow-cart), and with one the page starts after the click's call is over (late-cart).
@pytest.mark.parametrize("kind", ["cart", "slow-cart", "late-cart"])
async def test_a_choice_straight_after_the_post_reads_what_the_list_holds(client: Client, context: BrowserContext,
                                                                          site: str, kind: str) -> None:
    page, _, url = await shop(client, context, site, kind)
    await step(client, "browser_click", {"selector": "#add"})
    await after_the_click(url, kind)
    receipt, words = await step(client, "browser_select_option", {"selector": "#colour", "values": ["Red"]})
    await expect(page.locator("#cart")).to_have_text("In cart: 1")
    assert await page.locator("#colour").input_value() == "Red"
    element = receipt["element"]
    assert "gone" not in element, receipt
    assert element["role"] == "combobox" and element["name"] == "Colour" and element["state"]["value"] == "Red"
    assert "gone" not in words
    reloaded_since(receipt, words, kind)
    assert re.search(r'^element: combobox "Colour" \[ref=e\d+\]: Red$', "\n".join(block_of(words)), re.M), words


@pytest.mark.parametrize("kind", ["cart", "slow-cart", "late-cart"])
async def test_typing_straight_after_the_post_reads_what_the_field_holds(client: Client, context: BrowserContext,
                                                                         site: str, kind: str) -> None:
    page, _, url = await shop(client, context, site, kind)
    await step(client, "browser_click", {"selector": "#add"})
    await after_the_click(url, kind)
    receipt, words = await step(client, "browser_type", {"selector": "#note", "text": "For Sam"})
    await expect(page.locator("#cart")).to_have_text("In cart: 1")
    assert await page.locator("#note").input_value() == "For Sam"
    element = receipt["element"]
    assert "gone" not in element, receipt
    assert element["role"] == "textbox" and element["name"] == "Gift note" and element["state"] == {"value": "For Sam"}
    assert "gone" not in words
    reloaded_since(receipt, words, kind)


async def test_a_selector_target_that_leaves_the_page_keeps_its_selector(client: Client, context: BrowserContext,
                                                                         site: str) -> None:
    page, _, _ = await shop(client, context, site)
    receipt, words = await step(client, "browser_click", {"selector": "#dismiss"})
    await expect(page.locator("#dismiss")).to_have_count(0)
    assert receipt["element"] == {"selector": "#dismiss", "gone": True}, receipt
    assert "reloaded" not in receipt
    assert words.startswith("Receipt: the page stayed at its URL; the element is gone from the page; "), words
    assert "element: #dismiss gone" in block_of(words)


async def test_going_to_the_same_address_says_what_changed_since(client: Client, context: BrowserContext,
                                                                 site: str) -> None:
    page, _, url = await shop(client, context, site)
    # The cart changes elsewhere (the person's other tab, another device): the agent's snapshot is the old page.
    posted = await context.request.post(url, max_redirects=0)
    assert posted.status == 303
    receipt, words = await step(client, "browser_navigate", {"url": url})
    await expect(page.locator("#cart")).to_have_text("In cart: 1")
    assert receipt["url_before"] == receipt["url_after"] == url and receipt["reloaded"] is True, receipt
    assert receipt["changed"] == ["~ In cart: 0 -> 1", "+ status: Added Blue mug to your cart"], receipt
    assert "element" not in receipt
    assert words.startswith("Receipt: the page reloaded at the same URL; 2 things changed on the page (in the block)."
                            ), words
