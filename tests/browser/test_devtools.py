"""The developer's view of the agent tab: its console (browser_console) and its requests (browser_network).

Real Chromium with the real extension and pod; the page (tests/site/devtools.html) logs, warns, prints a GitHub token
to the console, throws an uncaught TypeError, and fetches a JSON body holding a Stripe key with a bearer token, and a
report with the session cookie /files/sign-in left. WebMCP is off in this browser, as it is in Chrome by default.
"""

from __future__ import annotations

import re

import pytest
from mcp import Client

from .harness import SESSION_COOKIE
from .live_pod import call
from .test_untrusted import split

pytestmark = pytest.mark.anyio

TOKEN = "ghp_R8wq3ZQ7yXk2LmN5pT9vB4cD6fH1jK0sA3eG"
STRIPE_KEY = "sk_live_4eC39HqLyjWDarjtT1zdp7dc9X2"
BEARER = "s3cretBearerValue-1234567890abcdef"


async def ok(client: Client, name: str, args: dict[str, object] | None = None) -> str:
    text, is_error = await call(client, name, args)
    assert not is_error, text
    return text


async def open_devtools_page(client: Client, site: str, query: str = "") -> None:
    await ok(client, "browser_navigate", {"url": f"{site}/files/sign-in"})
    await ok(client, "browser_navigate", {"url": f"{site}/devtools.html{query}"})
    await ok(client, "browser_wait_for", {"text": "ready: 2 orders"})


def no_secret_in(text: str) -> None:
    for secret in (TOKEN, STRIPE_KEY, BEARER, SESSION_COOKIE.split("=", 1)[1]):
        assert secret not in text, secret


async def read(client: Client, name: str, args: dict[str, object] | None = None) -> tuple[str, str]:
    """Our words and the page's in a developer tool's answer, which holds none of the page's secrets."""
    text = await ok(client, name, args)
    no_secret_in(text)
    return split(text)


async def fresh_page_read(client: Client, site: str, tool: str, head: str) -> tuple[str, list[str]]:
    """The page loaded afresh and one developer tool's answer on it: its head as expected, the page's lines."""
    await open_devtools_page(client, site)
    ours, page = await read(client, tool)
    assert ours == f"{head}\n"
    return page, page.splitlines()


async def test_the_console_has_the_pages_messages_and_its_uncaught_error_with_the_token_redacted(
        client: Client, site: str) -> None:
    page, lines = await fresh_page_read(client, site, "browser_console", "7 console messages since the page loaded.")
    assert lines[0] == "#1 log /devtools.html:9 app started {build: 42, debug: true}"
    assert lines[1] == "#2 info /devtools.html:10 orders view"
    assert lines[2] == "#3 warning /devtools.html:11 deprecated: use /api/v2"
    assert lines[3] == "#4 log /devtools.html:12 auth token is [redacted]"
    # Chrome's own line for the missing endpoint, the page's error, and the uncaught one.
    missing = r"#\d+ error /no-such-endpoint Failed to load resource: 404 \(File not found\)"
    assert any(re.fullmatch(missing, line) for line in lines), page
    assert any(re.fullmatch(r"#\d+ error /devtools\.html:\d+ report answered 200", line) for line in lines), page
    uncaught = next(i for i, line in enumerate(lines) if "Uncaught" in line)
    thrown = r"#\d+ error /devtools\.html:16 Uncaught TypeError: cannot render 2 orders"
    assert re.fullmatch(thrown, lines[uncaught]), page
    assert lines[uncaught + 1].startswith("    at renderOrders /devtools.html:16:13"), page

    errors = split(await ok(client, "browser_console", {"level": "error"}))[1].splitlines()
    assert all(" error " in line for line in errors if line.startswith("#")), errors
    assert any("Uncaught TypeError" in line for line in errors)

    newest = int(lines[-3].split()[0][1:])  # the uncaught error's number: its two frames follow it
    assert (await ok(client, "browser_console", {"since": newest})).startswith("0 console messages")


async def test_a_page_that_logs_in_a_loop_keeps_its_newest_messages_and_says_how_many_went(
        client: Client, site: str) -> None:
    await open_devtools_page(client, site, "?flood=700")
    text = await ok(client, "browser_console", {"max": 3})
    ours, page = split(text)
    assert "; 207 older ones were dropped (the tab keeps its newest 500)" in ours, ours
    assert ours.startswith("500 console messages") and "(the newest 3 shown)" in ours
    assert len(page.splitlines()) >= 3
    assert "tick 1\n" not in page


async def test_the_network_lists_the_pages_requests_and_one_request_has_no_credentials_and_a_redacted_body(
        client: Client, site: str) -> None:
    page, lines = await fresh_page_read(client, site, "browser_network", "4 requests since the page loaded.")
    # A size, or "cached" for what Chrome took from its cache.
    assert re.fullmatch(r"#\d+ GET 200 document /devtools\.html \d+ ms (\d+(\.\d)? (bytes|KB)|cached)", lines[0]), page
    data = next(line for line in lines if "/devtools-data.json" in line)
    assert re.fullmatch(r"#(\d+) GET 200 fetch /devtools-data\.json \d+ ms .+", data), data
    assert any(re.fullmatch(r"#\d+ GET 404 fetch /no-such-endpoint \d+ ms .+", line) for line in lines), page
    # The signed-in page before is another page: not in this one's list.
    assert "/files/sign-in" not in page

    only = split(await ok(client, "browser_network", {"url": "REPORT"}))[1].splitlines()
    assert len(only) == 1 and "GET 200 fetch /files/private/report.csv" in only[0], only

    number = int(data.split()[0][1:])
    one = await ok(client, "browser_network", {"id": number})
    no_secret_in(one)
    details = split(one)[1]
    assert "authorization: [withheld]" in details.lower(), details
    assert '"api_key": "[redacted]"' in details or "[redacted]" in details.split("response body:", 1)[1], details
    assert '"note": "two orders"' in details


async def test_the_session_cookie_a_page_sets_is_never_shown(client: Client, site: str) -> None:
    # In a tab the agent already has: a new tab's first requests can come before openab watches it.
    await ok(client, "browser_navigate", {"url": f"{site}/index.html"})
    await ok(client, "browser_navigate", {"url": f"{site}/files/sign-in"})
    listed = split(await ok(client, "browser_network", {"url": "sign-in"}))[1]
    number = int(listed.splitlines()[0].split()[0][1:])
    one = await ok(client, "browser_network", {"id": number})
    assert SESSION_COOKIE.split("=", 1)[1] not in one
    # Chrome leaves Set-Cookie out of what it reports; were it there, its value would be withheld.
    assert not re.search(r"^\s*(set-)?cookie: (?!\[withheld\])", split(one)[1], re.I | re.M), one
    assert "Signed in" in one  # the page's body is there, its cookie is not


async def test_without_webmcp_the_tools_say_so_plainly(client: Client, site: str) -> None:
    await ok(client, "browser_navigate", {"url": f"{site}/index.html"})
    text = await ok(client, "browser_webmcp_tools")
    assert text.startswith("this page offers no WebMCP tools: the browser has no WebMCP here"), text
    text, is_error = await call(client, "browser_webmcp_call", {"name": "anything"})
    assert is_error and "the browser has no WebMCP here" in text, text


async def test_a_tab_that_loaded_before_openab_watched_it_lists_its_early_requests_from_the_pages_record(
        client: Client, site: str) -> None:
    await ok(client, "browser_tabs", {"action": "open", "url": f"{site}/devtools.html"})
    await ok(client, "browser_wait_for", {"text": "ready: 2 orders"})
    ours, page = split(await ok(client, "browser_network"))
    # Oldest first; a request the page's own record gave is numbered when openab learnt of it.
    first = page.splitlines()[0]
    number = int(first.split()[0][1:])
    if " ? " in first:  # the load outran the session: the page's own record of it
        assert "a ? is what the page's own record leaves out" in ours
        assert re.fullmatch(r"#\d+ \? 200 document /devtools\.html \d+ ms .+", first), page
        one = await ok(client, "browser_network", {"id": number})
        assert one.startswith(f"request #{number} came before openab watched the page")
    else:
        assert re.fullmatch(r"#\d+ GET 200 document /devtools\.html \d+ ms .+", first), page
    # Every request the page made is there, from the session or from the page's record.
    for path in ("/devtools-data.json", "/files/private/report.csv", "/no-such-endpoint"):
        assert path in page, page


async def test_a_card_number_the_page_prints_is_redacted_and_an_order_number_is_not(client: Client, site: str) -> None:
    await open_devtools_page(client, site, "?card=1")
    _, page = await read(client, "browser_console", {"level": "log"})
    assert "charging card [redacted], order 1234 5678 9012 3456" in page, page
    assert "4111" not in page
