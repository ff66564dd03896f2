"""The extension's pure decisions, run as the shipped modules inside the extension's own page.

No Node and no copies: each check imports the real file from chrome-extension:// in Chromium.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from playwright.async_api import Page

from .harness import open_panel, playwright_browser, stage_extension

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def page(site: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Page]:
    tmp = tmp_path_factory.mktemp("units")
    ext = stage_extension(tmp / "ext", {})  # not configured: nothing dials out
    async with playwright_browser(ext, tmp / "profile", f"{site}/index.html") as ctx:
        yield await open_panel(ctx)


async def run(page: Page, module: str, body: str, arg: Any = None) -> Any:
    """Evaluates `body` (an expression over `m` and `arg`) with `m` the imported module."""
    return await page.evaluate(f"async (arg) => {{ const m = await import('/lib/{module}'); return {body}; }}", arg)


def element(role: str, name: str, **extra: Any) -> dict[str, Any]:
    base = {"role": role, "name": name, "tag": "button" if role == "button" else "a", "type": "", "sensitive": None,
            "submit": False, "formAction": "", "origin": "https://shop.example", "url": "https://shop.example/"}
    return base | extra


@pytest.mark.parametrize(("label", "risk"), [
    ("Buy now", "buy"), ("Place order", "order"), ("Pay", "pay"), ("Checkout", "checkout"), ("Send", "send"),
    ("Post reply", "post"), ("Delete account", "delete"), ("Sign in", "sign in"), ("Log in", "log in"),
    ("Upload photo", "upload"), ("Transfer money", "transfer"), ("Subscribe", "subscribe"),
    ("Preview", None), ("Next page", None), ("Sending tips", None), ("Deleted items", None),
    ("Payment history", None), ("Show more", None),
])
async def test_click_labels(page: Page, label: str, risk: str | None) -> None:
    got = await run(page, "guard.js", "m.classify('browser_click', arg)", element("button", label))
    assert (got and got["risk"]) == risk


async def test_submit_controls_are_risky_whatever_they_say(page: Page) -> None:
    desc = element("button", "Continue", submit=True, formAction="https://pay.example/charge")
    got = await run(page, "guard.js", "m.classify('browser_click', arg)", desc)
    assert got == {"risk": "submit", "action": 'submit a form to pay.example with button "Continue"'}


@pytest.mark.parametrize(("tool", "desc", "args", "risk"), [
    ("browser_type", {"sensitive": "password", "tag": "input", "role": "textbox"}, {}, "sensitive_field"),
    ("browser_type", {"sensitive": "payment", "tag": "input", "role": "textbox"}, {}, "sensitive_field"),
    ("browser_type", {"sensitive": None, "tag": "input", "role": "textbox"}, {}, None),
    ("browser_select_option", {"sensitive": "payment", "tag": "select", "role": "combobox"}, {}, "sensitive_field"),
    ("browser_click", {"sensitive": "file", "tag": "input", "role": "button"}, {}, "upload"),
    ("browser_press_key", {"sensitive": None, "tag": "input", "role": "textbox"}, {"key": "Enter"}, "submit"),
    ("browser_press_key", {"sensitive": None, "tag": "textarea", "role": "textbox"}, {"key": "Enter"}, "submit"),
    ("browser_press_key", {"sensitive": None, "tag": "input", "role": "textbox"}, {"key": "Escape"}, None),
    ("browser_press_key", {"sensitive": None, "tag": "a", "role": "link"}, {"key": "Enter"}, None),
])
async def test_fields_and_keys(page: Page, tool: str, desc: dict[str, Any], args: dict[str, Any],
                               risk: str | None) -> None:
    got = await run(page, "guard.js", "m.classify(arg.tool, arg.desc, arg.args)",
                    {"tool": tool, "desc": element("textbox", "Field") | desc, "args": args})
    assert (got and got["risk"]) == risk


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
    ("example.com", "https://example.com"), ("http://localhost:8080/x?y", "http://localhost:8080"),
    ("javascript:alert(1)", ""), ("", ""), ("https://exa mple.com", ""),
])
async def test_site_rule_origins(page: Page, typed: str, origin: str) -> None:
    assert await run(page, "settings.js", "m.normaliseOrigin(arg)", typed) == origin


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
    pieces = await run(page, "tools.js", """(() => {
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
    body = "Array.from({length: 50}, () => /markers ([0-9a-f]+)/.exec(m.untrusted('x'))[1])"
    nonces = await run(page, "tools.js", body)
    assert len(set(nonces)) == 50 and all(len(n) == 24 for n in nonces)


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
