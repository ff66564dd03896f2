"""Each real ACP agent, offline: the fake model asks for a tool of an MCP server handed over in
session/new.mcpServers, the agent calls it over Streamable HTTP with our bearer token, and the
answer built from the tool's result streams back to the ACP client."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from acp import PROTOCOL_VERSION, text_block
from acp.schema import (
    AcpMcpServer,
    AgentMessageChunk,
    AllowedOutcome,
    ClientCapabilities,
    HttpMcpServer,
    Implementation,
    McpServerStdio,
    PermissionOption,
    RequestPermissionResponse,
    SseMcpServer,
    ToolCallStart,
)

from .fake_model import FakeModel, Script
from .harness import AgentEnv, acp_agent, tool_name
from .mcp_peer import BrowserPeer
from .offline import HostRelay

if TYPE_CHECKING:
    from acp.client.connection import ClientSideConnection

# What session/new takes in mcpServers.
McpServer = HttpMcpServer | SseMcpServer | AcpMcpServer | McpServerStdio

pytestmark = [pytest.mark.agents, pytest.mark.anyio]


class RecordingClient:
    """An ACP client that records what the agent streams and allows each tool call once."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.tool_calls: list[str] = []
        self.permissions: list[list[str]] = []
        self.first_tool_at: float | None = None

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if isinstance(update, AgentMessageChunk) and getattr(update.content, "text", None):
            self.text.append(update.content.text)
        elif isinstance(update, ToolCallStart):
            self.tool_calls.append(update.title)
            self.first_tool_at = self.first_tool_at or time.monotonic()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        # gemini asks before it reports the tool call at all: count the request as the call.
        self.first_tool_at = self.first_tool_at or time.monotonic()
        self.permissions.append([o.kind for o in options])
        once = next((o for o in options if o.kind == "allow_once"), options[0])
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=once.option_id))


async def open_session(conn: ClientSideConnection, agent: AgentEnv, servers: list[McpServer]) -> str:
    init = await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities(),
                                 client_info=Implementation(name="openab-tests", version="0"))
    if servers:
        capabilities = init.agent_capabilities
        assert capabilities is not None and capabilities.mcp_capabilities is not None
        assert capabilities.mcp_capabilities.http
    session = await conn.new_session(cwd=str(agent.cwd), mcp_servers=servers)
    return session.session_id


async def test_agent_calls_the_browser_tool_handed_over_in_session_new(
    acp_cli: str,
    page: str,
    browser: BrowserPeer,
    fake_model: FakeModel,
    agent_setup: Callable[[str], AgentEnv],
    offline: Callable[..., HostRelay | None],
) -> None:
    agent = agent_setup(acp_cli)
    client = RecordingClient()
    started = time.monotonic()
    with anyio.fail_after(180):
        async with acp_agent(agent, client, offline(browser.port)) as (conn, _process):
            session_id = await open_session(conn, agent, [browser.acp_server()])
            result = await conn.prompt(session_id=session_id, prompt=[text_block("Open the page, please.")])
    # Shown with `pytest -rP`: the figures in docs/agents.md come from here.
    first = f"{client.first_tool_at - started:.2f} s" if client.first_tool_at else "never"
    print(f"{acp_cli}: first tool call {first} after spawn, turn done {time.monotonic() - started:.2f} s,"
          f" {len(client.permissions)} permission request(s) {client.permissions}")

    assert [c.tool for c in fake_model.calls()] == [tool_name(acp_cli, "openab_browser", "browser_navigate")]
    assert browser.calls == [("browser_navigate", {"url": page})]
    assert all(ok for _method, ok, _agent in browser.requests), "every MCP request carried our bearer token"
    assert result.stop_reason == "end_turn"
    answer = "".join(client.text)
    assert "FINAL ANSWER: tool returned <<" in answer and f"navigated to {page}" in answer


async def test_cancel_ends_a_turn_the_model_is_still_thinking_about(
    acp_cli: str,
    fake_model: FakeModel,
    agent_setup: Callable[[str], AgentEnv],
    offline: Callable[..., HostRelay | None],
) -> None:
    fake_model.set_script(Script(text="too late", hang=True))
    agent = agent_setup(acp_cli)
    client = RecordingClient()
    with anyio.fail_after(180):
        async with acp_agent(agent, client, offline()) as (conn, _process):
            session_id = await open_session(conn, agent, [])
            async with anyio.create_task_group() as tg:
                outcome: dict[str, Any] = {}

                async def prompt() -> None:
                    outcome["result"] = await conn.prompt(session_id=session_id, prompt=[text_block("Think hard.")])

                tg.start_soon(prompt)
                await fake_model.wait_hanging()
                await conn.cancel(session_id=session_id)

    assert outcome["result"].stop_reason == "cancelled"
    assert "too late" not in "".join(client.text)


async def test_a_wrong_token_is_refused_and_the_turn_goes_on_without_the_tool(
    acp_cli: str,
    page: str,
    browser: BrowserPeer,
    fake_model: FakeModel,
    agent_setup: Callable[[str], AgentEnv],
    offline: Callable[..., HostRelay | None],
) -> None:
    """Why an end-to-end test must look at the server's log: no agent reports the 401 as an error."""
    agent = agent_setup(acp_cli)
    wrong = browser.acp_server()
    wrong.headers[0].value = "Bearer not-the-token"
    with anyio.fail_after(180):
        async with acp_agent(agent, RecordingClient(), offline(browser.port)) as (conn, _process):
            session_id = await open_session(conn, agent, [wrong])
            result = await conn.prompt(session_id=session_id, prompt=[text_block("Open the page, please.")])

    assert result.stop_reason == "end_turn"
    assert browser.calls == [] and fake_model.calls() == []
    assert browser.requests and not any(ok for _method, ok, _agent in browser.requests)
