"""What the real Qwen Code and Auggie say of themselves in ACP ``initialize``, which their recipes rely on: the name a
wrapper command is known by (``reports_as``), and for Auggie the MCP transports it takes in ``session/new``. Auggie
runs no session without an Augment account, so this and its own ``mcp list`` (test_mcp_config_clis.py) are all of it
that can be run here (docs/agents.md)."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest
from acp import PROTOCOL_VERSION, RequestError
from acp.schema import ClientCapabilities, Implementation

from openab_browser.core.agents.recipes import RECIPES, recipe_reported

from .harness import ACP_STARTS, AgentEnv, acp_agent, require
from .offline import HostRelay
from .test_acp_agents import RecordingClient

pytestmark = [pytest.mark.agents, pytest.mark.anyio]


@pytest.mark.parametrize("cli", ["qwen", "auggie"])
async def test_the_acp_runtime_names_the_cli_its_recipe_knows(
    cli: str, agent_setup: Callable[[str], AgentEnv], offline: Callable[..., HostRelay | None]
) -> None:
    require(ACP_STARTS[cli][0])
    agent = agent_setup(cli)
    with anyio.fail_after(120):
        async with acp_agent(agent, RecordingClient(), offline()) as (conn, _process):
            init = await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities(),
                                         client_info=Implementation(name="openab-tests", version="0"))
            if cli == "auggie":
                # Why its recipe writes the proxy's entry into its config file: no http server over ACP. And why no
                # session of it runs here: it wants an Augment sign-in first.
                assert init.agent_capabilities is not None and init.agent_capabilities.mcp_capabilities is not None
                assert init.agent_capabilities.mcp_capabilities.http is False
                with pytest.raises(RequestError, match="Authentication required"):
                    await conn.new_session(cwd=str(agent.cwd), mcp_servers=[])

    assert init.agent_info is not None
    assert recipe_reported(init.agent_info.model_dump()) is RECIPES[cli]
