"""An ACP agent on stdio, built on the official Python SDK's agent side, that names itself as it is told: the
stand-in for a command the pod knows only by what its runtime says of itself in ``initialize``.

``python tests/named_agent.py NAME STARTS``: answers ``initialize`` with ``agentInfo.name`` NAME (none when NAME is
``-``) and appends its pid to the file STARTS as it starts. Each prompt asks one permission, shaped exactly as
codex-acp 0.16 asks before it runs ``browser_navigate`` of the ``openab_browser`` MCP server (captured from the real
CLI: tests/test_runtime_permissions.py), then says the outcome in a message and ends the turn.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any, cast

from acp import PROTOCOL_VERSION, Agent, run_agent, text_block, update_agent_message
from acp.interfaces import Client
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ToolCallUpdate,
)

CALL_ID = "call_67af318bba46"


class NamedAgent:
    def __init__(self, name: str) -> None:
        self.name = name
        self.client: Client | None = None

    def on_connect(self, conn: Client) -> None:
        self.client = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None,
                         **kwargs: Any) -> InitializeResponse:
        info = None if self.name == "-" else Implementation(name=self.name, title="named", version="9.9.9")
        return InitializeResponse(protocol_version=PROTOCOL_VERSION, agent_capabilities=AgentCapabilities(),
                                  agent_info=info)

    async def new_session(self, cwd: str, additional_directories: Any = None, mcp_servers: Any = None,
                          **kwargs: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id="named-1")

    async def prompt(self, session_id: str, prompt: Any, **kwargs: Any) -> PromptResponse:
        assert self.client is not None
        call = ToolCallUpdate(
            tool_call_id=CALL_ID, status="pending", title="Approve MCP tool call",
            raw_input={
                "turn_id": "01a2280a", "server_name": "openab_browser", "id": f"mcp_tool_call_approval_{CALL_ID}",
                "request": {"mode": "form",
                            "message": 'Allow the openab_browser MCP server to run tool "browser_navigate"?',
                            "_meta": {"codex_approval_kind": "mcp_tool_call",
                                      "tool_params": {"url": "https://example.org/"}}},
            },
        )
        options = [PermissionOption(option_id="approved", name="Allow", kind="allow_once"),
                   PermissionOption(option_id="cancel", name="Cancel", kind="reject_once")]
        answer = await self.client.request_permission(session_id=session_id, tool_call=call, options=options)
        outcome = answer.outcome
        said = getattr(outcome, "option_id", None) or outcome.outcome
        await self.client.session_update(session_id, update_agent_message(text_block(f"permission: {said}")))
        return PromptResponse(stop_reason="end_turn")


def main() -> None:
    name, starts = sys.argv[1], sys.argv[2]
    with open(starts, "a") as f:
        f.write(f"{os.getpid()}\n")
    # The SDK answers "method not found" for what an agent does not define; its Agent protocol lists them all.
    asyncio.run(run_agent(cast(Agent, NamedAgent(name))))


if __name__ == "__main__":
    main()
