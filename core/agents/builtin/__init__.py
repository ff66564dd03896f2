"""The built-in agent: a real ACP agent on stdio (``python -m openab_browser.core.agents.builtin``) that needs no
account.

It runs as its own process, exactly like any agent CLI, so the runtime, permissions, cancel and the browser
endpoint are exercised the same way whichever agent a pod runs. It drives the browser tools as an MCP client of
the server it is handed in ``session/new.mcpServers``.

* ``agent``: the ACP side (:class:`BuiltinAgent`): sessions, turns, streamed updates;
* ``planner``: the no-model planner (plain instructions -> steps) and snapshot reading;
* ``mcp_client``: the MCP client over Streamable HTTP or stdio;
* ``stdio``: the process: ACP on stdin/stdout, settings from the environment (:func:`main`).
"""

from .agent import BuiltinAgent, ToolFailed
from .mcp_client import HttpMcpClient, McpClient, McpError, StdioMcpClient, connect_mcp
from .planner import Step, find_ref, plan_steps, result_text
from .stdio import main, serve_stdio

__all__ = [
    "BuiltinAgent", "HttpMcpClient", "McpClient", "McpError", "StdioMcpClient", "Step", "ToolFailed", "connect_mcp",
    "find_ref", "main", "plan_steps", "result_text", "serve_stdio",
]
