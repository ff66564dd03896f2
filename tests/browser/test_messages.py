"""The extension's messages as the shipped manifest has them: structured clones (``message_serialization``, Chrome
148+), not JSON. Every message between the side panel and the service worker must reach the other end as the same
plain data JSON would have given it (no Date, Map, NaN or object of a class where JSON gave a string, ``{}`` or
``null``; a function or a Promise in one throws, and the panel then hears nothing more), so the panel behaves the same
on a Chromium older than 148, which ignores the key and keeps JSON.

A second port of the panel's own page listens beside the panel while the person chats and a risky click waits on its
card; the port then asks for the conversation and sends site rules, as the panel does. Chromium's own extensions
page (developer mode on, so the manifest's problems are collected) says the manifest has none. And the one message
that differs, an upload's file, still lands whole where the manifest says ``json``, as an older Chrome keeps it: in
base64 pieces (a piece sent as bytes there arrives as a plain object, which the page script refuses).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from playwright.async_api import BrowserContext, Page, expect
from refs import ref_of
from waits import eventually

from openab_browser.core.statedir import session_workdir

from .conftest import person_browser
from .harness import REPO, extension_id, open_panel, page_at, playwright_browser, service_worker_url, stage_extension
from .live_pod import KEY, LiveGateway, call, opened
from .test_panel import guard_said, in_background

pytestmark = pytest.mark.anyio

# The second port: every message it hears, and where one holds anything JSON would not have given back as it is.
LISTEN = """() => {
  const plainly = (v, path) => {
    if (v === null || typeof v === 'string' || typeof v === 'boolean') return [];
    if (typeof v === 'number') return Number.isFinite(v) ? [] : [`${path}: ${v}`];
    if (typeof v !== 'object') return [`${path}: a ${typeof v}`];
    const proto = Object.getPrototypeOf(v);
    if (Array.isArray(v)) return v.flatMap((x, i) => plainly(x, `${path}[${i}]`));
    if (proto !== Object.prototype) return [`${path}: a ${v.constructor ? v.constructor.name : 'bare object'}`];
    // A key whose value is undefined: JSON left it out, and every reader takes the two alike.
    return Object.entries(v).flatMap(([k, x]) => (x === undefined ? [] : plainly(x, `${path}.${k}`)));
  };
  window.heard = [];
  window.unlike = [];
  window.listener = chrome.runtime.connect({ name: 'panel' });
  window.listener.onMessage.addListener((msg) => {
    window.unlike.push(...plainly(msg, msg && msg.type));
    window.heard.push(JSON.parse(JSON.stringify(msg)));
  });
}"""


context, tunnel = person_browser("messages")


async def heard(panel: Page) -> list[dict[str, Any]]:
    return list(await panel.evaluate("window.heard"))


async def states(panel: Page) -> list[dict[str, Any]]:
    return [m for m in await heard(panel) if m.get("type") == "state"]


async def rule_is(panel: Page, origin: str, rule: str | None) -> bool:
    said = await states(panel)
    return bool(said) and said[-1]["settings"]["siteRules"].get(origin) == rule


async def test_chromium_takes_the_shipped_manifest_with_no_warning(panel: Page, site: str, tmp_path: Path) -> None:
    manifest = json.loads((REPO / "extension" / "manifest.json").read_text())
    assert manifest["message_serialization"] == "structured_clone"
    assert await panel.evaluate("import('/lib/tools-upload.js').then((m) => m.clonedMessages())") is True
    # A browser of its own: Chromium collects an unpacked extension's manifest problems in developer mode only, and
    # only as it loads it, so the extension is loaded again once that mode is on.
    ext = stage_extension(tmp_path / "ext", {})
    async with playwright_browser(ext, tmp_path / "profile", f"{site}/index.html") as ctx:
        await service_worker_url(ctx)
        page = await ctx.new_page()
        await page.goto("chrome://extensions")
        await page.evaluate("chrome.developerPrivate.updateProfileConfiguration({ inDeveloperMode: true })")
        # Resolves once the extension is loaded again (or failed to load, which its errors then say).
        await page.evaluate(f"chrome.developerPrivate.reload('{extension_id()}', {{ failQuietly: true }})")
        info = await page.evaluate(f"chrome.developerPrivate.getExtensionInfo('{extension_id()}')")
    assert (info["installWarnings"], info["manifestErrors"], info["runtimeErrors"]) == ([], [], [])


async def test_the_panel_hears_every_message_whole_and_plain(panel: Page, client: Client, context: BrowserContext,
                                                             gateway: LiveGateway, site: str) -> None:
    await panel.evaluate(LISTEN)
    # On connecting: the conversation, then the state.
    await eventually(lambda: states(panel), what="the second port's first state")
    first = await heard(panel)
    assert [m["type"] for m in first[:2]] == ["transcript", "state"]
    state = first[1]
    assert set(state) == {"type", "link", "tunnel", "toolsInUse", "lastToolAt", "busy", "settings", "agents", "agent",
                          "unavailable", "cards", "agentTabs", "currentTab", "tabList", "pastChats"}
    assert state["settings"]["url"] == gateway.url and state["link"]["status"] == "connected", state
    assert isinstance(state["settings"]["siteRules"], dict) and isinstance(state["tabList"]["tabs"], list)

    # The person's message and the agent's answer: items, and the state of the turn.
    await panel.locator("#prompt").fill("echo hello from the agent")
    await panel.locator("#send").click()
    await expect(panel.locator("#log")).to_contain_text("hello from the agent")

    # A risky click waits on its card: the card has the fields of an action (no plan, no options).
    text, is_error = await call(client, "browser_navigate", {"url": f"{site}/form.html"})
    assert not is_error, text
    tab = await page_at(context, f"{site}/form.html")
    async with in_background(client.call_tool("browser_click", {"selector": "#post"})) as out:
        card = panel.locator(".card[data-kind=action]")
        await expect(card).to_have_count(1)
        await card.locator("button[data-decision=deny]").click()
    assert out["result"].is_error and guard_said(out["result"]) == "denied"

    # The port's own asks: the conversation again, a site rule refused under its box, one kept and one taken back.
    send = "(msg) => window.listener.postMessage(msg)"
    await panel.evaluate(send, {"type": "current-chat"})
    await panel.evaluate(send, {"type": "site-rule", "origin": "not a site at all", "rule": "never"})
    await panel.evaluate(send, {"type": "site-rule", "origin": "https://example.com", "rule": "never"})
    await eventually(lambda: rule_is(panel, "https://example.com", "never"))
    await panel.evaluate(send, {"type": "site-rule", "origin": "https://example.com", "rule": ""})
    await eventually(lambda: rule_is(panel, "https://example.com", None))

    said = await heard(panel)
    items = [m["item"] for m in said if m["type"] == "item"]
    assert {"user", "agent"} <= {i["kind"] for i in items}, items
    agent = [i for i in items if i["kind"] == "agent"][-1]
    assert agent["text"] == "hello from the agent" and isinstance(agent["id"], int) and isinstance(agent["at"], int)
    cards = [c for s in await states(panel) for c in s["cards"]]
    action = next(c for c in cards if c["kind"] == "action")
    assert action["title"] == 'The agent wants to click button "Post a review"', action
    assert action["site"] == site and isinstance(action["expiresAt"], int) and action["tabId"] > 0, action
    assert "plan" not in action and "show" not in action and "done" not in action, action
    again = [m for m in said if m["type"] == "transcript"][-1]
    assert [i["text"] for i in again["items"] if i["kind"] == "agent"][-1] == "hello from the agent"
    refused = next(m for m in said if m["type"] == "notice")
    assert refused["field"] == "rule-origin" and refused["level"] == "error", refused
    assert await panel.evaluate("window.unlike") == []
    await tab.close()


async def test_a_message_chrome_cannot_clone_is_said_and_the_panel_keeps_hearing(panel: Page) -> None:
    # The worker's Panels, on real ports of the panel's page: one open, one its page let go. A message holding a
    # function (a defect: nothing sends one today) cannot be cloned, which JSON would have dropped silently; the
    # open panel must not be forgotten for it, or it would hear nothing more until reopened.
    said = await panel.evaluate("""async () => {
      const { Panels } = await import('/lib/panels.js');
      const panels = new Panels({});
      const open = chrome.runtime.connect({ name: 'panel' });
      const gone = chrome.runtime.connect({ name: 'panel' });
      gone.disconnect();
      panels.ports.add(open);
      panels.ports.add(gone);
      const errors = [];
      const error = console.error;
      console.error = (...args) => errors.push(args.map(String).join(' '));
      try {
        panels.broadcast({ type: 'state', plain: true });
        const forgotten = !panels.ports.has(gone);
        panels.broadcast({ type: 'state', broken: () => 1 });
        const keptAfterBroken = panels.ports.has(open);
        panels.broadcast({ type: 'state', plain: true });
        return { keptAfterBroken, kept: panels.ports.has(open), forgotten, errors };
      } finally {
        console.error = error;
        open.disconnect();
      }
    }""")
    assert said["keptAfterBroken"] and said["kept"], said
    assert said["forgotten"], said
    assert len(said["errors"]) == 1 and "could not be sent: state" in said["errors"][0], said


async def test_where_messages_stay_json_an_upload_goes_in_base64_pieces_and_lands_whole(
        gateway: LiveGateway, site: str, tmp_path: Path) -> None:
    # A Chrome before 148 ignores the key and keeps JSON; this Chromium is told so, and the worker must see it.
    ext = stage_extension(tmp_path / "ext", {"url": gateway.url, "key": KEY, "autopilot": False,
                                             "siteRules": {site.removeprefix("http://"): "always"}})
    manifest = json.loads((ext / "manifest.json").read_text())
    manifest["message_serialization"] = "json"
    (ext / "manifest.json").write_text(json.dumps(manifest))
    dialled = len(gateway.browser_sockets)
    async with playwright_browser(ext, tmp_path / "profile", f"{site}/index.html") as ctx:
        panel = await open_panel(ctx)
        assert await panel.evaluate("import('/lib/tools-upload.js').then((m) => m.clonedMessages())") is False
        tunnel = await gateway.attached(await gateway.browser_socket(dialled))
        workdir = session_workdir(gateway.pod.settings.state_dir,
                                  gateway.pod.sessions.naming.channel(tunnel.session_id), create=True)
        data = bytes(range(256)) * (2_621_440 // 256) + b"tail!!!"  # three 1 MiB pieces, the last short
        (workdir / "pieces.bin").write_bytes(data)
        async with gateway.agent_client(tunnel.session_id) as client:
            snap, tab = await opened(client, ctx, f"{site}/upload.html")
            text, is_error = await call(client, "browser_upload", {"ref": ref_of(snap, '"Document"'),
                                                                   "path": "pieces.bin"})
        assert not is_error, text
        held = await tab.evaluate("""async () => { const f = document.getElementById('doc').files[0];
            const d = new Uint8Array(await crypto.subtle.digest('SHA-256', await f.arrayBuffer()));
            return [f.name, f.size, Array.from(d, (v) => v.toString(16).padStart(2, '0')).join('')]; }""")
    assert held == ["pieces.bin", len(data), hashlib.sha256(data).hexdigest()]
