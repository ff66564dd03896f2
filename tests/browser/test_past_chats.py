"""Past chats (issue 36, item 9): the panel lists this gateway's earlier chats, newest first, each by the person's
first message and when it was last used; choosing one brings its conversation back and resumes its session on the
pod, so the next prompt reaches that session; the chat it leaves stays in the list. A chat the pod cannot take up
again says so plainly, shows what this browser saved of it read-only, and offers a new chat.

Real Debian Chromium with the real extension at Chrome's default side panel width (360 px), driven by Playwright as
a person would, keyboard included; the pod is the real gateway with a scripted agent, which records each prompt
under the session it reached.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from playwright.async_api import BrowserContext, Page, expect
from scripted_agent import ScriptedAgent

from openab_browser.core.sessions import Session

from .conftest import person_browser
from .harness import open_panel, service_worker_url, snap
from .live_pod import LiveGateway

pytestmark = pytest.mark.anyio

context, tunnel = person_browser("past-chats")


@pytest.fixture(scope="module")
async def gateway(agent: ScriptedAgent, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LiveGateway]:
    """A pod with room for two sessions: full once someone else holds one beside this person's chat, when a chat
    it no longer has cannot be taken up again."""
    async with LiveGateway(tmp_path_factory.mktemp("state"), agent, max_sessions=2) as gw:
        yield gw


@pytest.fixture(scope="module")
async def panel(context: BrowserContext) -> Page:
    await service_worker_url(context)
    page = await open_panel(context)
    await page.set_viewport_size({"width": 360, "height": 720})
    return page


async def ask(panel: Page, text: str, answer: str) -> None:
    await panel.locator("#prompt").fill(text)
    await panel.locator("#send").click()
    await expect(panel.locator(".msg.agent").last).to_have_text(answer)


async def new_chat(panel: Page) -> None:
    await panel.locator("#new-chat").click()
    await panel.locator("#new-chat-yes").click()  # New chat asks first when there is a conversation to clear
    await expect(panel.locator(".msg")).to_have_count(0)


def last_session(agent: ScriptedAgent) -> str:
    return agent.prompts[-1][0]


async def test_going_back_to_an_earlier_chat_resumes_its_session(
    gateway: LiveGateway, agent: ScriptedAgent, panel: Page
) -> None:
    await expect(panel.locator("#pill-link")).to_have_text("connected")
    await ask(panel, "echo Find flights to Lisbon", "Find flights to Lisbon")
    first = last_session(agent)
    await new_chat(panel)
    await ask(panel, "echo Compare two laptops", "Compare two laptops")
    second = last_session(agent)
    assert second != first

    # The list: this gateway's chats, newest first, each by its first message; the keyboard reaches it.
    toggle = panel.locator("#toggle-past")
    await toggle.focus()
    await panel.keyboard.press("Enter")
    await expect(toggle).to_have_attribute("aria-expanded", "true")
    chats = panel.locator("#past-chat-list .past-chat")
    await expect(chats).to_have_count(2)
    await expect(chats.locator(".past-title")).to_have_text(["echo Compare two laptops", "echo Find flights to Lisbon"])
    await expect(chats.nth(0)).to_have_attribute("aria-current", "true")
    await expect(chats.nth(0).locator(".past-when")).to_contain_text("This chat")
    await expect(chats.nth(1).locator(".past-when")).to_contain_text("Last used today")
    await expect(chats.nth(0)).to_be_focused()
    await snap(panel, "panel-past-chats.png")
    # Escape closes the list, back on its button.
    await panel.keyboard.press("Escape")
    await expect(panel.locator("#past-chats")).to_be_hidden()
    await expect(toggle).to_be_focused()

    # Back to the first chat, by keyboard: its messages are on screen again...
    await panel.keyboard.press("Enter")
    await panel.keyboard.press("Tab")
    await expect(chats.nth(1)).to_be_focused()
    await panel.keyboard.press("Enter")
    await expect(panel.locator(".msg.user")).to_have_text(["echo Find flights to Lisbon"])
    await expect(panel.locator(".msg.agent")).to_have_text(["Find flights to Lisbon"])
    await expect(panel.locator(".event").last).to_contain_text("Back to this chat")
    # New chat closed it on the pod, which takes its id up afresh, and says so: the panel tells the person.
    await expect(panel.locator(".msg.system").last).to_contain_text("The gateway had forgotten this chat")
    # ...and what the person writes next reaches the first chat's session on the pod.
    await ask(panel, "echo and back from Lisbon", "and back from Lisbon")
    assert last_session(agent) == first
    held = [s.id for s in gateway.pod.sessions.all() if s.owner is not None]
    assert held == [first], "the chat left is closed on the pod, as New chat closes it"

    # The chat it left stays in the list, now second.
    await toggle.click()
    await expect(chats.locator(".past-title")).to_have_text(["echo Find flights to Lisbon", "echo Compare two laptops"])
    await expect(chats.nth(0)).to_have_attribute("aria-current", "true")
    await toggle.click()
    await expect(panel.locator("#past-chats")).to_be_hidden()


async def test_a_chat_the_pod_cannot_take_up_again_is_shown_read_only(
    gateway: LiveGateway, agent: ScriptedAgent, panel: Page
) -> None:
    # Someone else's session fills the pod beside this person's chat: the pod no longer has the laptops chat (it was
    # closed when the person left it) and has no room to take it up afresh.
    sessions = gateway.pod.sessions
    other, _ = sessions.open(None, owner="someone-else", owner_generation=sessions.next_owner_generation())
    try:
        await refused_chat_is_read_only(agent, panel, other)
    finally:
        sessions.remove(other.id)


async def refused_chat_is_read_only(agent: ScriptedAgent, panel: Page, other: Session) -> None:
    current = last_session(agent)
    await panel.locator("#toggle-past").click()
    chats = panel.locator("#past-chat-list .past-chat")
    await chats.filter(has_text="Compare two laptops").click()
    gone = panel.locator("#past-gone")
    await expect(gone).to_be_visible()
    await expect(gone).to_contain_text("The gateway no longer has this chat, so the agent cannot go on with it")
    await expect(gone).to_contain_text("read-only")
    await expect(gone).to_contain_text("The gateway said: Too many sessions in this pod (max 2)")
    await expect(panel.locator(".msg.user")).to_have_text(["echo Compare two laptops"])
    await expect(panel.locator("#prompt")).to_be_disabled()
    await expect(panel.locator("#past-gone-new")).to_be_focused()
    await snap(panel, "panel-past-chat-gone.png")

    # Back: the current chat is as it was, and goes on.
    await panel.locator("#past-gone-back").click()
    await expect(gone).to_be_hidden()
    await expect(panel.locator(".msg.user").first).to_have_text("echo Find flights to Lisbon")
    await ask(panel, "echo still here", "still here")
    assert last_session(agent) == current

    # The read-only chat offers a new chat, which starts one on the pod.
    await panel.locator("#toggle-past").click()
    await chats.filter(has_text="Compare two laptops").click()
    await expect(gone).to_be_visible()
    await panel.locator("#past-gone-new").click()
    await panel.locator("#new-chat-yes").click()
    await expect(panel.locator(".msg")).to_have_count(0)
    await expect(panel.locator("#prompt")).to_be_enabled()
    await ask(panel, "echo a fresh start", "a fresh start")
    assert last_session(agent) not in {current, other.id}
