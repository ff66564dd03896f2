"""Chrome's own permessage-deflate against the pod's (core/sockets.py's LeanDeflate): Chrome offers
``permessage-deflate; client_max_window_bits``, the pod answers with no context takeover either way, and
messages go both ways intact: compressed text, text sent as it is (short, incompressible) and binary.

A plain page in real Chromium opens the WebSocket itself, as the extension's service worker does, so what
Chrome negotiated (``WebSocket.extensions``) can be read back.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from playwright.async_api import Browser, async_playwright
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route, WebSocketRoute
from test_deflate import MESSAGES, PAGE, _sender

from openab_browser.gateway.server import running_server

from .harness import CHROMIUM, FLAGS

pytestmark = pytest.mark.anyio

_TALK = """async ([url, words, sent]) => {
  const ws = new WebSocket(url);
  ws.binaryType = "arraybuffer";
  const inbox = [];
  let wake = null;
  ws.onmessage = (event) => { inbox.push(event.data); if (wake) { wake(); wake = null; } };
  await new Promise((resolve, reject) => { ws.onopen = resolve; ws.onerror = reject; });
  const next = async () => {
    const deadline = Date.now() + 10000;
    while (!inbox.length) {
      if (Date.now() > deadline) throw new Error("no message in 10 s");
      await new Promise((resolve) => { wake = resolve; setTimeout(resolve, 200); });
    }
    return inbox.shift();
  };
  const received = [];
  for (const word of [...words, ...sent]) {
    ws.send(word);
    const data = await next();
    if (typeof data === "string") received.push(data);
    else { const bytes = new Uint8Array(data); received.push({binary: bytes.length, nonzero: bytes.some((b) => b)}); }
  }
  const extensions = ws.extensions;
  ws.close();
  return {extensions, received};
}"""


async def _page(_request: Request) -> HTMLResponse:
    return HTMLResponse("<!doctype html><title>deflate</title>")


@pytest.fixture(scope="module")
async def pod_url() -> AsyncIterator[str]:
    app = Starlette(routes=[Route("/", _page), WebSocketRoute("/ws", _sender)])
    async with running_server(app) as base:
        yield base


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as p:
        launched = await p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                           args=[f for f in FLAGS if not f.startswith("--headless")])
        try:
            yield launched
        finally:
            await launched.close()


async def test_chrome_takes_the_pods_deflate_and_messages_arrive_whole(pod_url: str, browser: Browser) -> None:
    page = await browser.new_page()
    try:
        await page.goto(pod_url + "/")
        words = ["binary", "short", "page", "noise", "long page"]
        # What Chrome compresses, each afresh as agreed, for the pod to inflate: short, long, long again.
        sent = ["hello", PAGE.decode() * 5, PAGE.decode()[::-1] * 2]
        talk: dict[str, Any] = await page.evaluate(_TALK, [pod_url.replace("http", "ws", 1) + "/ws", words, sent])
    finally:
        await page.close()
    assert talk["extensions"] == ("permessage-deflate; server_no_context_takeover; client_no_context_takeover; "
                                  "server_max_window_bits=12; client_max_window_bits=12")
    received = talk["received"]
    assert received[0] == {"binary": len(MESSAGES["binary"]), "nonzero": False}
    assert received[1:len(words)] == [MESSAGES[word] for word in words[1:]]
    assert received[len(words):] == [f"{len(text)} {hashlib.sha256(text.encode()).hexdigest()}" for text in sent]
