"""The settings say what is wrong where the person is looking, and the link line says what is true.

An error about a box shows under that box (its aria-describedby), not at the foot of the settings. A new URL the
panel refuses leaves the saved gateway configured, and the line under the pill says so instead of repeating the
old address's error while it keeps dialling it. After Forget key against a gateway that needs one, the line asks
for the key rather than saying a key was refused. Real Chromium with the real extension, against the real gateway.
"""

from __future__ import annotations

import pytest
from playwright.async_api import BrowserContext, Page, expect

from .conftest import person_browser
from .harness import open_panel, snap
from .live_pod import KEY, LiveGateway

pytestmark = pytest.mark.anyio

context, tunnel = person_browser("settings-errors")


async def test_forget_key_on_a_gateway_that_needs_one_asks_for_the_key(panel: Page, gateway: LiveGateway) -> None:
    await expect(panel.locator("#pill-link")).to_have_text("connected")
    refused = len(gateway.tap.refused)
    await panel.locator("#toggle-settings").click()
    await panel.locator("#clear-key").click()
    line = panel.locator("#link-detail")
    host = gateway.url.split("/")[2]
    await expect(line).to_contain_text(
        f"The gateway at {host} needs a key: paste the key from the gateway's pairing line into the settings.")
    await expect(line).not_to_contain_text("refused the key")
    await expect(panel.locator("#notice")).to_have_text("Key forgotten.")
    assert set(gateway.tap.refused[refused:]) == {401}
    await snap(panel, "panel-forget-key.png")
    await panel.locator("#set-key").fill(KEY)
    await panel.locator("#save-settings").click()
    await expect(panel.locator("#pill-link")).to_have_text("connected")
    await expect(line).not_to_contain_text("needs a key")


async def test_a_refused_url_is_said_under_its_box_and_the_saved_gateway_is_not_redialled(
        context: BrowserContext, panel: Page, gateway: LiveGateway) -> None:
    line = panel.locator("#link-detail")
    host = gateway.url.split("/")[2]
    await gateway.stop()  # the saved gateway is out of reach: the link retries it, saying why
    await expect(panel.locator("#pill-link")).to_have_text("retrying")
    await expect(line).to_contain_text(f"Cannot reach the gateway at {host}")

    await panel.locator("#set-url").fill("https://gw.example/acp")
    await panel.locator("#save-settings").click()
    error = panel.locator("#set-url-error")
    await expect(error).to_have_text("The gateway URL must start with wss:// (or ws:// for localhost), not https://.")
    assert await panel.locator("#set-url").get_attribute("aria-describedby") == "set-url-error"
    assert await panel.locator("#set-url").get_attribute("aria-invalid") == "true"
    await expect(panel.locator("#notice")).to_be_hidden()
    # The line says what became of the change, and stops blaming (and dialling) the address it replaced.
    await expect(line).to_have_text(
        "The new URL was not saved: The gateway URL must start with wss:// (or ws:// for localhost), not https://. "
        f"The saved gateway ({host}) is kept, and not dialled until a valid URL is saved.")
    await expect(panel.locator("#pill-link")).to_have_text("offline")
    await expect(panel.locator("#set-url")).to_have_value("https://gw.example/acp")  # what they typed, to correct
    await snap(panel, "panel-settings-error.png")

    # The gateway is back, and a panel opened now (which wakes a waiting link) still does not dial the old URL.
    await gateway.start()
    sockets = len(gateway.browser_sockets)
    again = await open_panel(context)
    await again.locator("#toggle-settings").click()
    await again.locator("#rule-origin").fill("exa mple.com")
    await again.locator("#rule-form button").click()
    await expect(again.locator("#rule-origin-error")).to_have_text(
        "Type a site such as example.com (http and https) or https://example.com (that scheme only).")
    await expect(again.locator("#rule-origin")).to_have_value("exa mple.com")
    await expect(again.locator("#pill-link")).to_have_text("offline")  # the open's wake-up came before the rule
    assert len(gateway.browser_sockets) == sockets
    await again.close()

    # Typing in the box takes its error away; a valid URL saved is dialled.
    await panel.locator("#set-url").fill(gateway.url)
    await expect(error).to_be_hidden()
    assert await panel.locator("#set-url").get_attribute("aria-invalid") is None
    await panel.locator("#save-settings").click()
    await expect(panel.locator("#pill-link")).to_have_text("connected", timeout=30_000)


async def test_a_refused_key_is_said_under_its_box_while_the_connection_carries_on(panel: Page) -> None:
    await panel.locator("#set-key").fill("a b")
    await panel.locator("#save-settings").click()
    await expect(panel.locator("#set-key-error")).to_contain_text("The key has characters a WebSocket subprotocol")
    await expect(panel.locator("#set-key")).to_have_value("a b")
    await expect(panel.locator("#link-detail")).to_contain_text("The new key was not saved: The key has characters")
    await expect(panel.locator("#link-detail")).to_contain_text("Still connected to")
    await expect(panel.locator("#pill-link")).to_have_text("connected")
