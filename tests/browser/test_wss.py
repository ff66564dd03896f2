"""The real extension in real Chromium reaching a pod that serves its own TLS, at ``wss://``.

The pod is the real gateway under uvicorn with `ReloadingTls` (what `openab run --tls-cert/--tls-key` serves),
its certificate issued for 127.0.0.1 by a throwaway CA (tests/test_tls.py's). Chromium is told to trust that
one certificate and nothing else (`--ignore-certificate-errors-spki-list` with the hash of its public key, as a
person's Chrome trusts a pod's certificate through its roots), and the person types the ``wss://`` URL and the
key into the panel's settings. A second pod with a certificate from another CA stands for an impersonated or
mis-issued one: the extension must say it cannot reach the gateway over TLS, and never open a session there.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from playwright.async_api import BrowserContext, Page, expect
from scripted_agent import ScriptedAgent
from test_tls import Ca
from waits import eventually

from openab_browser.gateway.server import ReloadingTls

from .harness import open_panel, playwright_browser, screenshot_dir, stage_extension
from .live_pod import KEY, LiveGateway, call

pytestmark = pytest.mark.anyio


def spki_hash(cert_pem: Path) -> str:
    """What Chrome's --ignore-certificate-errors-spki-list takes: base64 of SHA-256 over the SubjectPublicKeyInfo."""
    cert = x509.load_pem_x509_certificate(cert_pem.read_bytes())
    spki = cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(hashlib.sha256(spki).digest()).decode()


def issued(tmp: Path, ca: Ca) -> ReloadingTls:
    cert, key = tmp / "tls.crt", tmp / "tls.key"
    ca.issue(cert, key)
    return ReloadingTls(cert, key)


@pytest.fixture(scope="module")
async def pod(agent: ScriptedAgent, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LiveGateway]:
    """The pod the person means to reach: its certificate is the one Chromium trusts."""
    tls = issued(tmp_path_factory.mktemp("tls"), Ca.make())
    async with LiveGateway(tmp_path_factory.mktemp("state"), agent, tls=tls) as gw:
        yield gw


@pytest.fixture(scope="module")
async def impostor(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LiveGateway]:
    """A pod whose certificate Chromium has no reason to trust: another CA, another key, the same name."""
    tls = issued(tmp_path_factory.mktemp("impostor-tls"), Ca.make("not the pod's CA"))
    async with LiveGateway(tmp_path_factory.mktemp("impostor-state"), tls=tls) as gw:
        yield gw


@pytest.fixture(scope="module")
async def context(pod: LiveGateway, site: str,
                  tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[BrowserContext]:
    """Chromium trusting the pod's certificate alone; the extension installed with no gateway configured."""
    assert pod.tls is not None
    tmp = tmp_path_factory.mktemp("wss")
    # Autopilot: these tests are about the transport, the guard has its own.
    ext = stage_extension(tmp / "ext", {"autopilot": True})
    trust = (f"--ignore-certificate-errors-spki-list={spki_hash(pod.tls.cert)}",)
    async with playwright_browser(ext, tmp / "profile", f"{site}/index.html", extra=trust) as ctx:
        yield ctx


@pytest.fixture(scope="module")
async def panel(context: BrowserContext) -> Page:
    return await open_panel(context)


async def use_gateway(panel: Page, url: str) -> None:
    """What a person does: the URL and the key from the pod's pairing line, typed into the settings."""
    # Once the panel shows the worker's state: an unpaired panel opens its settings by itself then, and a click on
    # Settings before it would close them again.
    await expect(panel.locator("#pill")).to_have_attribute("data-status", re.compile(r"\w"))
    if await panel.locator("#set-url").is_hidden():
        await panel.locator("#toggle-settings").click()
    await panel.locator("#set-url").fill(url)
    await panel.locator("#set-key").fill(KEY)
    await panel.locator("#save-settings").click()


async def test_the_panel_pairs_over_wss_and_a_tool_call_reaches_the_page(
    pod: LiveGateway, panel: Page, site: str
) -> None:
    assert pod.url.startswith("wss://127.0.0.1:")
    await use_gateway(panel, pod.url)
    await expect(panel.locator("#pill-link")).to_have_text("connected", timeout=30_000)
    await expect(panel.locator("#pill-tunnel")).to_have_text("tools attached")

    sock = await pod.browser_socket(0)
    assert sock.scope["scheme"] == "wss"  # the extension's socket itself came over TLS
    assert sock.subprotocols == [f"openab.bearer.{KEY}", "acp.v1"]
    tunnel = await pod.attached(sock)
    async with pod.agent_client(tunnel.session_id) as client:
        text, is_error = await call(client, "browser_navigate", {"url": f"{site}/page2.html"})
        assert not is_error, text
        snap, is_error = await call(client, "browser_snapshot", {})
        assert not is_error and "# Page two" in snap


async def test_a_certificate_chrome_does_not_trust_gets_no_session_and_the_panel_says_why(
    pod: LiveGateway, impostor: LiveGateway, panel: Page
) -> None:
    await use_gateway(panel, impostor.url)
    # The socket never opens, and the plain request that asks why fails the same handshake: no HTTP answer.
    await expect(panel.locator("#link-detail")).to_contain_text(
        f"Cannot reach the gateway at 127.0.0.1:{impostor.port} over TLS.", timeout=30_000)
    await expect(panel.locator("#link-detail")).to_contain_text("Chrome may not trust its certificate")
    await expect(panel.locator("#pill-link")).not_to_have_text("connected")
    await expect(panel.locator("#pill-tunnel")).to_have_text("no tools")
    await panel.screenshot(path=str(screenshot_dir() / "panel-wss-untrusted.png"))

    # Whoever holds the untrusted certificate got no socket, no refused upgrade and no session: the key, which
    # travels in the WebSocket handshake or the probe's header, never reached it.
    assert impostor.tap.sockets == [] and impostor.tap.refused == []
    assert len(impostor.pod.sessions) == 0

    # The person's own pod is unaffected: back to it, the panel connects again.
    index = len(pod.browser_sockets)
    await use_gateway(panel, pod.url)
    await expect(panel.locator("#pill-link")).to_have_text("connected", timeout=30_000)
    await eventually(lambda: len(pod.browser_sockets) > index, 30)
