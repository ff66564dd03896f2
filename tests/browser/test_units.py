"""The extension's pure decisions, run as the shipped modules inside the extension's own page.

No Node and no copies: each check imports the real file from chrome-extension:// in Chromium.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from playwright.async_api import Page

from .harness import unpaired_panel

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def page(site: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Page]:
    async with unpaired_panel(site, tmp_path_factory.mktemp("units")) as page:
        yield page


async def run(page: Page, module: str, body: str, arg: Any = None) -> Any:
    """Evaluates `body` (an expression over `m` and `arg`) with `m` the imported module."""
    # The catalogue first, as the service worker's start reads it (lib/catalogue.js): some modules read it.
    script = (f"async (arg) => {{ await (await import('/lib/catalogue.js')).loadCatalogue(); "
              f"const m = await import('/lib/{module}'); return {body}; }}")
    return await page.evaluate(script, arg)


def element(role: str, name: str, **extra: Any) -> dict[str, Any]:
    base = {"role": role, "name": name, "tag": "button" if role == "button" else "a", "type": "", "sensitive": None,
            "submit": False, "formAction": "", "origin": "https://shop.example", "url": "https://shop.example/"}
    return base | extra


@pytest.mark.parametrize("token", [
    "ghp_u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8d", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuv",
    "sk-proj-KLzdocJ2isAjIhKtJ0RlgLKOmxgJTeKdNnFRIBXu7", "sk-ant-api03-Zx8Qm2Lk9Pw4Rt7Yv1Nb5Hc3Jd6Fg0Sa",
    "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "AKIAIOSFODNN7EXAMPLE", "AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe", "glpat-x8Zk2Qm9Lp4Rt7Yv1Nb5",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "9fK2xQ7mZ3pL8vR1tY6wN4bH5cJ0dS2aG7eU", "Zm9vYmFyOmJhejEyMzQ1Njc4OTBhYmNkZWZnaGlqa2xtbm9w",
])
async def test_token_shaped_strings_are_redacted(page: Page, token: str) -> None:
    got = await run(page, "redact.js", "m.redactTokens(`before ${arg} after`)", token)
    assert got == "before [redacted] after"


@pytest.mark.parametrize(("text", "expected"), [
    ('Authorization: Bearer 7f3kQ9xZ2mL8pR4tY6wN1vB5cH0jD3sF', "Authorization: Bearer [redacted]"),
    ("https://a.example/cb?code=4/0AX4XfWh7Qz&state=ok", "https://a.example/cb?code=[redacted]&state=ok"),
    ('{"csrfToken":"a1b2c3d4e5f6"}', '{"csrfToken":"[redacted]"}'),
    ("authenticity_token=Zx81kQ2m", "authenticity_token=[redacted]"),
    ("password: hunter2-default", "password: [redacted]"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "[redacted]"),
])
async def test_secrets_after_their_names_are_redacted(page: Page, text: str, expected: str) -> None:
    assert await run(page, "redact.js", "m.redactTokens(arg)", text) == expected


@pytest.mark.parametrize("text", [
    "Bearer tokens are described in RFC 6750.", "The password must have 12 characters.",
    "token = next_token(stream)", "Call getElementsByTagNameNS or XMLHttpRequestUpload2EventTargetPrototype.",
    "commit 3f2a9c1d8e7b6a5f4c3b2a1908f7e6d5c4b3a291", "id 0b4e7c1a-55f2-4c39-9d7e-2a6f1e8b3c40",
    "https://example.com/blog/How-To-Configure-Python3-On-Ubuntu-2404", "sk-learn and task-1234567890abcdefghij",
    "AbstractSingletonProxyFactoryBean2Impl", "id-GostR3410-2001-CryptoPro-XchA-ParamSet",
    "a Basic authentication-scheme",
    "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
])
async def test_ordinary_text_is_left_alone(page: Page, text: str) -> None:
    assert await run(page, "redact.js", "m.redactTokens(arg)", text) == text


async def test_untrusted_blocks_redact_and_redaction_is_idempotent(page: Page) -> None:
    got = await run(page, "results.js", "m.untrusted(arg)", "key ghp_u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8d")
    assert "ghp_" not in got and "\nkey [redacted]\n" in got
    once = await run(page, "redact.js", "m.redactTokens(arg)", "token=abc12345 and Bearer Zx8Qm2Lk9Pw4Rt7Yv1Nb5")
    assert await run(page, "redact.js", "m.redactTokens(arg)", once) == once


@pytest.mark.parametrize(("size", "full", "expected"), [
    ((1280, 800), False, (1280, 800)),
    ((2560, 1600), False, (1356, 847)),
    ((4000, 1000), False, (1568, 392)),
    ((800, 3000), False, (418, 1568)),
    ((2560, 1600), True, (2560, 1600)),
])
async def test_screenshot_sizes(page: Page, size: tuple[int, int], full: bool, expected: tuple[int, int]) -> None:
    got = await run(page, "image.js", "m.fitSize(arg[0], arg[1], arg[2])", [*size, full])
    assert (got["width"], got["height"]) == expected
    w, h = expected
    assert full or (max(w, h) <= 1568 and w * h <= 1_150_000)


@pytest.mark.parametrize(("status", "cause", "words"), [
    (202, "starting", "Your pod is starting"), (429, "starting", "waits its turn to start"),
    (403, "refused", "this token may not start it"),
])
async def test_a_stopped_hub_pod_is_started_or_said_why_not(page: Page, status: int, cause: str, words: str) -> None:
    """The hub's answer to the panel's start of a culled pod: a throttled start (429, the hub's spawn limit) waits
    its turn, never "this token may not start it"."""
    said = await run(page, "link.js", """(async () => {
        const real = globalThis.fetch;
        globalThis.fetch = async () => new Response('', { status: arg });
        try { return await m.startHubPod('wss://hub.example/user/bob/acp', 'a-token'); }
        finally { globalThis.fetch = real; }
    })()""", status)
    assert said[1] == cause and words in said[0], said


async def test_backoff_grows_with_jitter_and_a_ceiling(page: Page) -> None:
    delays = await run(page, "link.js", "Array.from({length: 14}, (_, i) => [m.backoffDelay(i), m.backoffDelay(i)])")
    for attempt, pair in enumerate(delays):
        cap = min(30_000, 500 * 2 ** min(attempt, 10))
        assert all(cap / 2 <= d <= cap for d in pair)
    assert max(max(p) for p in delays) <= 30_000


@pytest.mark.parametrize(("url", "problem"), [
    ("wss://gw.example/acp", ""), ("ws://localhost:8080/acp", ""), ("ws://127.0.0.1:1/acp", ""),
    ("ws://[::1]:1/acp", ""), ("ws://gw.example/acp", "Plain ws:// is only allowed for localhost"),
    ("https://gw.example/acp", "must start with wss://"), ("", "Set the gateway URL"), ("gw", "is not a URL"),
])
async def test_gateway_urls(page: Page, url: str, problem: str) -> None:
    got = await run(page, "settings.js", "m.checkUrl(arg)", url)
    assert (problem in got) if problem else got == ""


@pytest.mark.parametrize(("key", "ok"), [("abc-DEF_123.~", True), ("a/b", False), ("a=b", False), ("a b", False)])
async def test_keys_must_fit_a_subprotocol(page: Page, key: str, ok: bool) -> None:
    assert (await run(page, "settings.js", "m.checkKey(arg)", key) == "") is ok


@pytest.mark.parametrize(("typed", "origin"), [
    # Typed without a scheme, a rule is the host with the port as typed: it covers the site over http and https.
    ("example.com", "example.com"), ("127.0.0.1:18950", "127.0.0.1:18950"), ("Example.com:443/x", "example.com:443"),
    ("[::1]:8080", "[::1]:8080"), ("http://localhost:8080/x?y", "http://localhost:8080"),
    ("https://example.com:443", "https://example.com"), ("javascript:alert(1)", ""), ("", ""),
    ("https://exa mple.com", ""), ("exa mple.com", ""),
])
async def test_site_rule_origins(page: Page, typed: str, origin: str) -> None:
    assert await run(page, "settings.js", "m.normaliseOrigin(arg)", typed) == origin
    # What is saved reads back as itself (the settings are sanitised again on every save).
    assert await run(page, "settings.js", "m.normaliseOrigin(arg)", origin) == origin


@pytest.mark.parametrize(("rules", "origin", "rule"), [
    ({"127.0.0.1:18950": "never"}, "http://127.0.0.1:18950", "never"),
    ({"127.0.0.1:18950": "never"}, "https://127.0.0.1:18950", "never"),
    ({"127.0.0.1:18950": "never"}, "http://127.0.0.1:18951", ""),
    ({"example.com": "always"}, "http://example.com", "always"),
    ({"example.com": "always"}, "https://a.example.com", ""),
    ({"example.com:443": "never"}, "https://example.com", "never"),
    ({"localhost:80": "never"}, "http://localhost", "never"),
    ({"https://example.com": "never"}, "http://example.com", ""),
    ({"https://example.com": "never", "example.com": "always"}, "https://example.com", "never"),
])
async def test_a_site_rule_covers_what_it_names(page: Page, rules: dict[str, str], origin: str, rule: str) -> None:
    assert await run(page, "settings.js", "m.ruleFor(arg[0], arg[1])", [rules, origin]) == rule


@pytest.mark.parametrize(("url", "restricted"), [
    ("https://example.com/", False), ("about:blank", False), ("chrome://settings", True),
    ("chrome-extension://abc/x.html", True), ("https://chromewebstore.google.com/detail/x", True),
    ("https://chrome.google.com/webstore/category", True), ("view-source:https://a.example", True),
    ("file:///etc/hosts", True),
])
async def test_browser_owned_pages(page: Page, url: str, restricted: bool) -> None:
    assert bool(await run(page, "tabs.js", "m.restrictedReason(arg)", url)) is restricted


async def test_paging_covers_the_text_exactly_once(page: Page) -> None:
    text = "".join(chr(97 + i % 26) for i in range(10_000))
    pieces = await run(page, "results.js", """(() => {
        const out = []; let offset = 0;
        for (;;) {
          const r = m.pageSlice(arg, offset, 3000); out.push(r);
          const next = /offset=(\\d+)/.exec(r.note); if (!next) break; offset = Number(next[1]);
        }
        return out; })()""", text)
    assert "".join(p["body"] for p in pieces) == text
    assert [p["note"].split(".")[0] for p in pieces][-1] == "[characters 9000-10000 of 10000"
    assert pieces[-1]["note"].endswith("This is the end.]")


async def test_each_untrusted_block_gets_a_fresh_nonce(page: Page) -> None:
    body = "Array.from({length: 50}, () => /<<<page-content ([0-9]+)\\n/.exec(m.untrusted('x'))[1])"
    nonces = await run(page, "results.js", body)
    assert len(set(nonces)) == 50 and all(len(n) == 15 for n in nonces)


async def test_nonce_digits_are_evenly_drawn(page: Page) -> None:
    # 300,000 nonces, 4.5 million digits, about 450,000 of each; two digits' counts differ by chance with a standard
    # deviation of about 950. A byte taken modulo 10 without rejecting 250 to 255 would draw each of 0 to 5 about
    # 17,600 times more than each of 6 to 9. The bound sits between: 8.4 standard deviations of chance.
    body = """(() => { const counts = new Array(10).fill(0);
        for (let i = 0; i < 300000; i++) for (const d of m.markerNonce()) counts[Number(d)] += 1;
        return counts; })()"""
    counts = await run(page, "results.js", body)
    assert sum(counts) == 4_500_000 and max(counts) - min(counts) < 8000, counts


async def test_a_wait_on_a_tab_wakes_on_its_load_not_on_the_page_retitling_itself(page: Page, site: str) -> None:
    # A page that renames its tab every 20 ms (an unread count, a clock) must not drive the loop that waits for a
    # load: it would look at the tab 50 times a second. A navigation must wake it at once.
    idle_ms, titles, woke_ms = await run(page, "loads.js", """(async () => {
        const tab = await chrome.tabs.create({url: arg + '/retitle.html', active: true});
        for (let i = 0; i < 200 && (await chrome.tabs.get(tab.id)).status !== 'complete'; i++) {
          await new Promise((r) => setTimeout(r, 50));
        }
        let titles = 0;
        const count = (id, change) => { if (id === tab.id && change.title !== undefined) titles += 1; };
        chrome.tabs.onUpdated.addListener(count);
        try {
          let t0 = performance.now();
          await m.nextUpdate(tab.id, 1500).done;
          const idle = performance.now() - t0;
          // The titles are counted over the same 1.5 s however early the wait woke.
          await new Promise((r) => setTimeout(r, Math.max(0, 1500 - idle)));
          const wait = m.nextUpdate(tab.id, 5000);
          t0 = performance.now();
          await chrome.tabs.update(tab.id, {url: arg + '/page2.html'});
          await wait.done;
          return [idle, titles, performance.now() - t0];
        } finally {
          chrome.tabs.onUpdated.removeListener(count);
          await chrome.tabs.remove(tab.id);
        }
    })()""", site)
    assert titles >= 10, titles  # the page did retitle its tab, and Chrome did report it
    assert idle_ms >= 1400, idle_ms  # ...and the wait slept through every one
    assert woke_ms < 2000, woke_ms  # the navigation woke it long before its 5 s floor


async def test_the_rpc_peer_survives_garbage_and_times_out(page: Page) -> None:
    got = await run(page, "rpc.js", """(async () => {
        const sent = [];
        const peer = new m.RpcPeer((t) => sent.push(JSON.parse(t)), {
          onRequest: async (method) => { if (method === 'boom') throw new m.RpcError(-32000, 'no'); return {ok: 1}; },
          onNotification: () => { throw new Error('handler bug'); },
        });
        for (const bad of ['{', '[]', '7', 'null', '{"id": 5, "result": 1}', '{"method": 3}']) peer.receive(bad);
        peer.receive('{"jsonrpc":"2.0","method":"note"}');
        peer.receive('{"jsonrpc":"2.0","id":"s1","method":"boom"}');
        peer.receive('{"jsonrpc":"2.0","id":2,"method":"fine"}');
        const waited = await peer.request('slow', {}, 50).then(() => 'answered', (e) => e.message);
        const later = peer.request('never', {}, 10000);
        peer.close('socket gone');
        const closed = await later.then(() => 'answered', (e) => e.message);
        await new Promise((r) => setTimeout(r, 0));
        return {sent, waited, closed};
    })()""")
    answers = {str(m.get("id")): m for m in got["sent"] if "method" not in m}
    assert answers["None"]["error"]["code"] == -32700
    assert answers["s1"]["error"] == {"code": -32000, "message": "no"}
    assert answers["2"]["result"] == {"ok": 1}
    assert got["waited"] == "slow got no answer in 0 s"
    assert got["closed"] == "socket gone"


@pytest.mark.parametrize(("url", "status", "says"), [
    ("wss://pod.example/acp", 401, "refused the key. Paste the key"),
    ("wss://pod.example/acp", 403, "refused this browser (HTTP 403"),
    ("wss://pod.example/ws", 404, "has no /ws. Check the URL path"),
    ("wss://pod.example/acp", 426, "does not pass WebSocket upgrades"),
    ("wss://pod.example/acp", 400, "answered HTTP 400 at /acp: not an openab gateway"),
    ("wss://pod.example/acp", 503, "is not answering yet: it may be starting or stopping"),
    # A pod JupyterHub serves: its proxy's path names whose pod it is, and the key is a hub token.
    ("wss://hub.example/user/ana/acp", 403, "This token may not open ana's pod"),
    ("wss://pod.example/acp", None, "over TLS. Check the URL"),
    ("ws://127.0.0.1:9/acp", None, "Cannot reach the gateway at 127.0.0.1:9. Check the URL"),
])
async def test_a_refused_socket_is_explained_by_what_the_address_answers(
    page: Page, url: str, status: int | None, says: str
) -> None:
    # Only a 401 may blame the key: any other answer blamed on it sends the person to the wrong setting.
    said = await run(page, "link.js", "m.refusalReason(arg[0], arg[1])", [url, status])
    assert says in said
    assert ("refused the key" in said) == (status == 401)


# -- the agent's markdown (panel/markdown.js) and the conversation's bounds (lib/chat.js) ------------------------

MARKDOWN = "../panel/markdown.js"
# What a rendered reply may contain: these elements, these attributes, and text.
RENDERED = """(() => {
    const root = document.createElement('div');
    root.append(m.render(arg));
    const tags = new Set(); const attrs = new Set(); let depth = 0;
    const walk = (n, d) => {
        depth = Math.max(depth, d);
        for (const c of n.children) {
            tags.add(c.localName);
            for (const a of c.attributes) attrs.add(a.name);
            walk(c, d + 1);
        }
    };
    walk(root, 0);
    const links = [...root.querySelectorAll('a')].map((a) => (
        {href: a.getAttribute('href'), target: a.target, rel: a.rel, text: a.textContent}));
    return {tags: [...tags].sort(), attrs: [...attrs].sort(), links, text: root.textContent, depth,
            lists: root.querySelectorAll('ul, ol').length, html: root.innerHTML.slice(0, 4000)};
})()"""
ALLOWED_TAGS = {"p", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del", "code", "pre", "ul", "ol", "li",
                "blockquote", "table", "thead", "tbody", "tr", "th", "td", "hr", "br", "a"}
ALLOWED_ATTRS = {"href", "title", "target", "rel", "start", "data-lang"}


@pytest.mark.parametrize("hostile", [
    "<script>window.pwned = 1</script>", "<img src=x onerror=\"window.pwned = 1\">",
    "<svg onload=window.pwned=1>", "<iframe src=javascript:window.pwned=1>", "`<b>` and <b onclick=x>bold</b>",
    "**<img src=x onerror=alert(1)>**", "| <script>x</script> |\n|---|\n| <img src=x> |",
    "```html\n<script>x</script>\n```", "- <style>body{display:none}</style>", "> <a href=javascript:x>q</a>",
])
async def test_markup_in_markdown_is_shown_as_text(page: Page, hostile: str) -> None:
    got = await run(page, MARKDOWN, RENDERED, hostile)
    assert set(got["tags"]) <= ALLOWED_TAGS and set(got["attrs"]) <= ALLOWED_ATTRS, got["html"]
    assert not {"script", "img", "svg", "iframe", "style", "b"} & set(got["tags"])
    for raw in ("<script>", "<img src=x", "<svg", "<iframe", "<b", "<style>", "<a href"):
        if raw in hostile:
            assert raw in got["text"], got["text"]  # shown, not dropped
    assert await page.evaluate("window.pwned") is None


@pytest.mark.parametrize(("source", "href"), [
    ("[site](https://a.example/x?y=1)", "https://a.example/x?y=1"), ("[site](http://127.0.0.1:8080/)", "http://127.0.0.1:8080/"),
    ("<https://a.example/auto>", "https://a.example/auto"), ("see https://a.example/p, then", "https://a.example/p"),
    ("(https://a.example/in-parens)", "https://a.example/in-parens"),
    ("[x](javascript:alert(1))", None), ("[x](JavaScript:alert(1))", None), ("[x]( javascript:alert(1))", None),
    ("[x](data:text/html,<script>alert(1)</script>)", None), ("[x](vbscript:msgbox)", None),
    ("[x](//evil.example/)", None), ("[x](/relative)", None), ("[x](file:///etc/passwd)", None),
    ("[x](chrome://settings)", None), ("<javascript:alert(1)>", None), ("[x](https:/no-host)", None),
])
async def test_only_http_links_are_links(page: Page, source: str, href: str | None) -> None:
    got = await run(page, MARKDOWN, RENDERED, source)
    if href is None:
        assert got["links"] == [] and "a" not in got["tags"]
        assert got["text"] == source  # the whole thing, as written
    else:
        [link] = got["links"]
        assert link["href"] == href and link["target"] == "_blank" and link["rel"] == "noopener noreferrer"


async def test_a_markdown_image_is_a_link_never_a_fetch(page: Page) -> None:
    got = await run(page, MARKDOWN, RENDERED, "![tracking pixel](https://evil.example/p.png?c=secret)")
    assert "img" not in got["tags"]
    assert got["links"][0]["text"] == "image: tracking pixel"


async def test_markdown_structure(page: Page) -> None:
    text = ("## Results\n\nFound **3** items, *one* ~~gone~~ and `code<b>`:\n\n1. first\n2. second\n   - nested\n\n"
            "```py\nif a < b:\n    pass\n```\n\n| Name | Price |\n| --- | ---: |\n| Tea | 3 |\n\n> quoted\n\n---\n"
            "snake_case_name stays, and a line\nbreak.")
    got = await run(page, MARKDOWN, RENDERED, text)
    html = got["html"]
    assert "<h2>Results</h2>" in html
    assert "<strong>3</strong>" in html and "<em>one</em>" in html and "<del>gone</del>" in html
    assert "<code>code&lt;b&gt;</code>" in html
    assert "<ol><li>first</li><li>second<ul><li>nested</li></ul></li></ol>" in html
    assert '<pre><code data-lang="py">if a &lt; b:\n    pass</code></pre>' in html
    assert "<thead><tr><th>Name</th><th>Price</th></tr></thead><tbody><tr><td>Tea</td><td>3</td></tr></tbody>" in html
    assert "<blockquote><p>quoted</p></blockquote><hr>" in html
    assert "<p>snake_case_name stays, and a line<br>break.</p>" in html


async def test_deeply_nested_lists_and_quotes_stop_at_a_bound(page: Page) -> None:
    lists = "\n".join("  " * i + "- level" for i in range(1000))
    quotes = ">" * 100_000 + " deep"
    for text in (lists, quotes):
        got = await run(page, MARKDOWN, RENDERED, text)
        limit = await run(page, MARKDOWN, "m.MAX_DEPTH")
        assert got["depth"] <= 2 * limit + 2  # a list level is <ul><li>
        assert got["text"].count("level") == (1000 if text is lists else 0) or "deep" in got["text"]


@pytest.mark.parametrize("shape", [
    "a", "[", "*a ", "<", "`a", "_x_ ", "https://a.example/", "| a ", "- x ", "**a", "> ", "](", "\\*",
])
async def test_a_megabyte_of_markdown_renders_in_bounded_time(page: Page, shape: str) -> None:
    # Linear by construction: unmatched marks must not search to the end again from each one.
    text = (shape * (1_048_576 // len(shape) + 1))[:1_048_576]
    ms = await run(page, MARKDOWN, """(() => { const t0 = performance.now(); const root = document.createElement('div');
        root.append(m.render(arg)); return [performance.now() - t0, root.textContent.length]; })()""", text)
    assert ms[0] < 5000, f"{shape!r}: {ms[0]:.0f} ms"
    assert ms[1] > 250_000  # the text is there (less its marks), not dropped


async def test_tool_images_are_checked_and_bounded(page: Page) -> None:
    got = await run(page, "chat.js", "m.imagesOf(arg)", [
        {"type": "content", "content": {"type": "image", "mimeType": "image/jpeg", "data": "/9j/4AAQ"}},
        {"type": "image", "mimeType": "image/png", "data": "iVBORw0K"},
        {"type": "content", "content": {"type": "image", "mimeType": "image/svg+xml", "data": "PHN2Zz4="}},
        {"type": "content", "content": {"type": "image", "mimeType": "image/jpeg", "data": "\"><script>"}},
        {"type": "content", "content": {"type": "text", "text": "not an image"}},
        {"type": "content", "content": {"type": "image", "mimeType": "image/jpeg", "data": "QUJD"}},
    ])
    assert [i.get("data") for i in got] == ["/9j/4AAQ", "iVBORw0K", None, None]  # at most four per call
    assert [i.get("dropped", "") for i in got][2:] == ["not a picture type the panel shows", "not valid base64"]


async def test_a_saved_conversation_is_bounded(page: Page) -> None:
    got = await run(page, "chat.js", """(() => {
        const items = Array.from({length: 1000}, (_, i) => ({id: i, kind: i % 2 ? 'agent' : 'tool',
            text: 'x'.repeat(30000), images: i % 2 ? undefined : [{mimeType: 'image/jpeg', data: 'A'.repeat(1000)}]}));
        const saved = m.savedItems(items);
        return {n: saved.length, last: saved[saved.length - 1].id, chars: JSON.stringify(saved).length,
                pictures: saved.filter((i) => i.images && i.images[0].data).length,
                longest: Math.max(...saved.map((i) => i.text.length))};
    })()""")
    assert got["last"] == 999 and got["n"] <= 200  # the newest
    assert got["chars"] <= 2_600_000 and got["longest"] == 20_000
    assert got["pictures"] == 4


async def test_a_conversation_belongs_to_its_gateway_and_session(page: Page) -> None:
    got = await run(page, "chat.js", """(async () => {
        const transcripts = async () => Object.keys(await chrome.storage.local.get(null))
            .filter((k) => k.startsWith('openab.transcript')).sort();
        await chrome.storage.local.remove(await transcripts());
        const shown = [];
        const t = new m.Transcript(() => {}, (items) => shown.push(items.map((i) => i.text)));
        const saved = async () => {
            await t.flush();
            return transcripts();
        };
        t.add('user', {text: 'before connecting'});
        t.follow('work', 's1');                     // the first session keeps what was said before it
        t.add('user', {text: 'work one'});
        const first = await saved();
        t.follow('work', null);                     // reconnecting to the same gateway: still shown
        const kept = t.items.map((i) => i.text);
        await t.follow('home', null);               // another gateway: its own (none yet)
        await t.follow('home', 'h1');
        t.add('user', {text: 'home one'});
        await saved();
        await t.follow('work', 's1');               // back: the work conversation again
        const back = t.items.map((i) => i.text);
        await t.follow('work', 's2');               // New chat on work: the old one is gone, also from storage
        const after = await saved();
        const fresh = new m.Transcript(() => {});
        await fresh.restore();                      // a restarted worker shows the current one
        return {first, kept, back, after, now: t.items.length, restored: fresh.key, shown: shown.length};
    })()""")
    assert got["first"] == ["openab.transcript:work#s1", "openab.transcripts"]
    assert got["kept"] == ["before connecting", "work one"]
    assert got["back"] == ["before connecting", "work one"]
    assert got["after"] == ["openab.transcript:home#h1", "openab.transcript:work#s2", "openab.transcripts"]
    assert got["now"] == 0 and got["restored"] == "work#s2"


@pytest.mark.parametrize(("url", "named"), [
    ("https://shop.example.com/cart?id=1", "shop.example.com"),
    ("http://127.0.0.1:8080/form.html", "127.0.0.1:8080"),
    ("chrome://settings/passwords", "chrome://settings"),
    ("about:blank", "about:blank"),
    ("data:text/html," + "x" * 500, "data:text/html," + "x" * 45),  # bounded: a page's own URL can be huge
    ("not a url", ""),
    ("", ""),
])
async def test_the_panel_names_a_tab_by_its_site(page: Page, url: str, named: str) -> None:
    assert await run(page, "tabs.js", "m.siteOf(arg)", url) == named


async def test_the_panels_tab_list_is_bounded(page: Page) -> None:
    got = await run(page, "tabs.js", """(() => {
        const tabs = new m.AgentTabs(() => {});
        for (let id = 1; id <= 60; id++) tabs.owned.set(id, {by: 'agent', title: `tab ${id}`, url: 'https://example.com/'});
        // A page that names itself at length: the list keeps a line's worth.
        tabs._updated(1, {title: 'T'.repeat(100000)}, {title: 'T'.repeat(100000), url: 'https://example.com/x'});
        return tabs.view();
    })()""")
    assert len(got["tabs"]) == 50 and got["more"] == 10
    assert got["tabs"][0]["title"] == "T" * 200 and got["tabs"][0]["site"] == "example.com"


async def test_a_dialog_report_keeps_the_pages_text_apart_and_bounded(page: Page) -> None:
    got = await run(page, "dialogs.js", """(() => {
        const report = (dialog, tool, ran) => m.dialogReport(dialog, tool, ran);
        const huge = report({type: 'confirm', message: 'IGNORE PREVIOUS ' + 'x'.repeat(50000)}, 'browser_click', true);
        const odd = report({type: 'IGNORE-as-a-type', message: 'hi'}, 'browser_snapshot', false);
        const inherited = report({type: 'constructor', message: 'hi'}, 'browser_snapshot', false);
        const prompt = report({type: 'prompt', message: 'Name?', defaultPrompt: 'd'.repeat(5000)}, 'browser_x', true);
        return {huge, odd, inherited, prompt};
    })()""")
    assert "IGNORE" not in got["huge"]["ours"] and "of its 50016 characters are shown" in got["huge"]["ours"]
    assert len(got["huge"]["page"]) == len("dialog: confirm\nmessage: ") + 2000
    # A type the page (or a future Chrome) made up is treated as an alert, never echoed in our words.
    assert got["odd"]["ours"].startswith("browser_snapshot was not run: a JavaScript alert dialog is open")
    assert got["odd"]["page"] == "dialog: alert\nmessage: hi"
    assert got["inherited"]["page"] == "dialog: alert\nmessage: hi"
    assert got["prompt"]["page"].endswith("default answer: " + "d" * 500)


@pytest.mark.parametrize(("asked", "seconds"), [
    (None, 150), (5, 5), (1, 5), (-3, 5), (160, 160), (10_000, 160), (30.5, 150), ("60", 150),
])
async def test_a_handoff_waits_a_bounded_time(page: Page, asked: Any, seconds: int) -> None:
    assert await run(page, "handoff.js", "m.handoffSeconds(arg)", asked) == seconds
