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
    # `what` is our words only; the page's (the label, the form's host) are kept apart in `target`.
    assert got == {"risk": "submit", "action": 'submit a form to pay.example with button "Continue"',
                   "what": "submit a form", "target": 'button "Continue", form to pay.example'}


@pytest.mark.parametrize(("tool", "desc", "args", "secret"), [
    # Typing into or choosing in credential and payment fields.
    ("browser_type", {"sensitive": "password", "tag": "input", "role": "textbox"}, {}, "password"),
    ("browser_type", {"sensitive": "otp", "tag": "input", "role": "textbox"}, {}, "one-time code"),
    ("browser_type", {"sensitive": "secret", "tag": "div", "role": "textbox"}, {}, "secret"),
    ("browser_select_option", {"sensitive": "payment", "tag": "select", "role": "combobox"}, {}, "payment"),
    # Submitting a form that has such a field, however it is done.
    ("browser_click", {"submit": True, "guarded": "password"}, {}, "password"),
    ("browser_click", {"name": "Pay now", "guarded": "payment"}, {}, "payment"),
    ("browser_press_key", {"tag": "input", "role": "textbox", "guarded": "otp"}, {"key": "Enter"}, "one-time code"),
    # Routine risky steps stay coverable by a site rule or autopilot.
    ("browser_click", {"submit": True, "guarded": None}, {}, None),
    ("browser_click", {"name": "Delete draft", "guarded": None}, {}, None),
    ("browser_type", {"sensitive": None, "tag": "input", "role": "textbox", "guarded": "password"}, {}, "routine"),
    ("browser_click", {"name": "Preview", "guarded": "password"}, {}, "routine"),
])
async def test_credential_and_payment_steps_are_marked_to_always_ask(
    page: Page, tool: str, desc: dict[str, Any], args: dict[str, Any], secret: str | None
) -> None:
    got = await run(page, "guard.js", "m.classify(arg.tool, arg.desc, arg.args)",
                    {"tool": tool, "desc": element("button", "Go") | desc, "args": args})
    if secret == "routine":
        assert got is None
    else:
        assert got is not None and got.get("secret") == secret


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
    got = await run(page, "tools.js", "m.untrusted(arg)", "key ghp_u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8d")
    assert "ghp_" not in got and "\nkey [redacted]\n" in got
    once = await run(page, "redact.js", "m.redactTokens(arg)", "token=abc12345 and Bearer Zx8Qm2Lk9Pw4Rt7Yv1Nb5")
    assert await run(page, "redact.js", "m.redactTokens(arg)", once) == once


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
