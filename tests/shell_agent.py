"""An ACP agent on stdio whose every prompt is a shell command it runs, as a CLI's shell tool runs what its model
asks: the stand-in for a prompt-injected agent in the confinement tests (tests/test_confinement.py).

Each prompt's text runs with ``/bin/sh -c`` in the agent's working folder; its exit status and output come back
as one message: ``exit <status>\\n<stdout and stderr>``. The pod starts it as ``python -c <this file's text>``: a
confined agent can read no test folder, only what the pod's policy allows.
"""

from __future__ import annotations

import asyncio
import subprocess
from typing import Any, cast

from acp import PROTOCOL_VERSION, Agent, run_agent, text_block, update_agent_message
from acp.interfaces import Client
from acp.schema import AgentCapabilities, InitializeResponse, NewSessionResponse, PromptResponse


class ShellAgent:
    def __init__(self) -> None:
        self.client: Client | None = None

    def on_connect(self, conn: Client) -> None:
        self.client = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None,
                         **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(protocol_version=PROTOCOL_VERSION, agent_capabilities=AgentCapabilities())

    async def new_session(self, cwd: str, additional_directories: Any = None, mcp_servers: Any = None,
                          **kwargs: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id="shell-1")

    async def prompt(self, session_id: str, prompt: Any, **kwargs: Any) -> PromptResponse:
        assert self.client is not None
        command = "".join(getattr(block, "text", "") for block in prompt)
        done = await asyncio.to_thread(subprocess.run, ["/bin/sh", "-c", command], stdin=subprocess.DEVNULL,
                                       capture_output=True, text=True, timeout=30)
        said = f"exit {done.returncode}\n{done.stdout}{done.stderr}"
        await self.client.session_update(session_id, update_agent_message(text_block(said)))
        return PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    # The SDK answers "method not found" for what an agent does not define; its Agent protocol lists them all.
    asyncio.run(run_agent(cast(Agent, ShellAgent())))
