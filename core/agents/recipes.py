"""How each agent CLI is run in the pod: its ACP command, how it gets the browser, what keeps it quiet.

A recipe holds what differs between agent CLIs, and nothing else:

* ``argv``: the command that makes it an ACP agent on stdio;
* ``browser_via``: ``"acp"`` hands the ``openab_browser`` server over in ``session/new.mcpServers``;
  ``"config"`` writes it into the CLI's own config file in the session's working directory, for CLIs that
  ignore or choke on ACP-passed servers (Cursor ignores them, zed#50924; kiro-cli closes the connection on
  an http entry, openab#903);
* ``env``: switches that turn off telemetry, update checks and other calls home;
* ``identify``: where the CLI's *own runtime* writes the MCP server and tool of a permission request, for the
  ``browser-only`` policy. The model writes titles and arguments, so those are never read; a CLI with no
  verified field gets ``None`` and none of its requests is approved by that policy.

The facts, per CLI, with the traps that motivated them: docs/runtime.md and docs/agents.md.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import ConfigurationError
from ..jsonrpc import JsonObject
from .names import AGENT_NAMES, canonical_agent

__all__ = ["RECIPES", "Identify", "Recipe", "ToolIdentity", "recipe_for", "running_as_root"]

# (MCP server name, tool name) as the agent's runtime reports them.
ToolIdentity = tuple[str, str]
Identify = Callable[[JsonObject], ToolIdentity | None]

_QUIET_NODE = {"NO_UPDATE_NOTIFIER": "1", "NPM_CONFIG_UPDATE_NOTIFIER": "false", "DO_NOT_TRACK": "1"}


def _dig(value: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _unverified(tool_call: JsonObject) -> ToolIdentity | None:
    return None


def _claude_identity(tool_call: JsonObject) -> ToolIdentity | None:
    # claude-agent-acp copies the SDK's own tool name and serving MCP server into _meta.claudeCode.
    meta = _dig(tool_call, "_meta", "claudeCode")
    name = _dig(meta, "toolName")
    server = _dig(meta, "mcpServer", "name")
    if not isinstance(name, str) or not isinstance(server, str):
        return None
    prefix = f"mcp__{server}__"
    if not name.startswith(prefix) or len(name) == len(prefix):
        return None
    return server, name[len(prefix):]


# codex builds this text itself from the MCP call it is about to make; the model writes neither name.
_CODEX_APPROVAL = re.compile(r'Allow the ([A-Za-z0-9_-]+) MCP server to run tool "([A-Za-z0-9_.-]+)"\?')


def _codex_identity(tool_call: JsonObject) -> ToolIdentity | None:
    raw = tool_call.get("rawInput")
    request = _dig(raw, "request")
    if _dig(request, "_meta", "codex_approval_kind") == "mcp_tool_call":
        # codex-acp 0.16: an MCP approval is an elicitation codex raises, keyed by the call it guards.
        server = _dig(raw, "server_name")
        message = _dig(request, "message")
        match = _CODEX_APPROVAL.fullmatch(message) if isinstance(message, str) else None
        call_id = tool_call.get("toolCallId")
        if (
            match is not None and isinstance(server, str) and match.group(1) == server
            and _dig(raw, "id") == f"mcp_tool_call_approval_{call_id}"
        ):
            return server, match.group(2)
        return None
    # Older codex-acp: _meta marks an MCP call and rawInput is the envelope it builds around the model's
    # arguments ({server, tool, arguments}); a shell command has neither.
    if _dig(tool_call, "_meta", "is_mcp_tool_call") is not True or not isinstance(raw, dict):
        return None
    server, tool = raw.get("server"), raw.get("tool")
    if isinstance(server, str) and isinstance(tool, str) and "arguments" in raw:
        return server, tool
    return None


@dataclass(frozen=True)
class Recipe:
    """What differs in running one agent CLI in the pod (the module docstring says what each field means).

    Data only: the runtime (:mod:`openab.core.agents.runtime`) starts the process, writes the config file
    and answers permissions from it.
    """

    name: str
    title: str
    argv: tuple[str, ...]
    browser_via: Literal["acp", "config"] = "acp"
    config_agent: str | None = None  # the openab.core.agents.config writer for browser_via="config"
    env: Mapping[str, str] = field(default_factory=dict)
    identify: Identify = _unverified
    install: str = ""
    root_env: Mapping[str, str] = field(default_factory=dict)  # added only when the pod runs as root

    def command(self, override: list[str] | None = None) -> list[str]:
        """The argv to start: ``override`` (``--agent-cmd``) when given, else the recipe's own."""
        return list(override) if override else list(self.argv)


def _builtin_argv() -> tuple[str, ...]:
    return (sys.executable, "-m", "openab.core.agents.builtin")


RECIPES: dict[str, Recipe] = {
    "builtin": Recipe("builtin", "openab built-in agent", _builtin_argv()),
    "claude": Recipe(
        "claude", "Claude Code", ("claude-agent-acp",),
        env={
            **_QUIET_NODE,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1", "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
            # Else MCP tools hide behind a ToolSearch tool and the model never sees the browser tools.
            "ENABLE_TOOL_SEARCH": "false",
        },
        identify=_claude_identity,
        install="npm install -g @agentclientprotocol/claude-agent-acp",
        # claude-agent-acp always starts claude with --dangerously-skip-permissions, which claude refuses as
        # root unless told it is sandboxed (a pod is).
        root_env={"IS_SANDBOX": "1"},
    ),
    "codex": Recipe(
        "codex", "Codex", (
            "codex-acp",
            "-c", "check_for_update_on_startup=false", "-c", "analytics.enabled=false",
            "-c", "feedback.enabled=false",
            # Else a start-up plugin sync reaches for github.com and chatgpt.com.
            "-c", "features.plugins=false", "-c", "features.remote_plugin=false", "-c", "features.apps=false",
        ),
        env=_QUIET_NODE,
        identify=_codex_identity,
        install="npm install -g @zed-industries/codex-acp",
    ),
    "gemini": Recipe(
        "gemini", "Gemini CLI", ("gemini", "--acp"),
        env={**_QUIET_NODE, "GEMINI_CLI_NO_RELAUNCH": "true"},
        install="npm install -g @google/gemini-cli",
    ),
    "opencode": Recipe(
        "opencode", "OpenCode", ("opencode", "acp"),
        env={"OPENCODE_DISABLE_AUTOUPDATE": "true", "OPENCODE_DISABLE_SHARE": "true",
             "OPENCODE_DISABLE_LSP_DOWNLOAD": "true"},
        install="npm install -g opencode-ai",
    ),
    "cursor": Recipe(
        # --approve-mcps: a headless cursor-agent leaves project MCP servers unapproved, so ours would not load.
        "cursor", "Cursor", ("cursor-agent", "acp", "--approve-mcps"), browser_via="config", config_agent="cursor",
        install="curl https://cursor.com/install -fsS | bash",
    ),
    "kiro": Recipe(
        "kiro", "Kiro", ("kiro-cli", "acp"), browser_via="config", config_agent="kiro",
        install="see https://kiro.dev/docs/cli/installation",
    ),
    "copilot": Recipe(
        "copilot", "GitHub Copilot CLI", ("copilot", "--acp", "--stdio"), env=_QUIET_NODE,
        install="npm install -g @github/copilot",
    ),
    "goose": Recipe("goose", "Goose", ("goose", "acp"), install="see https://block.github.io/goose/"),
    "custom": Recipe("custom", "custom ACP agent", ()),
}
# names.py says what can be run: a recipe for each name, so canonical_agent() never names a missing one.
if tuple(RECIPES) != AGENT_NAMES:
    raise RuntimeError(f"RECIPES {tuple(RECIPES)} and names.AGENT_NAMES {AGENT_NAMES} disagree")


def recipe_for(agent: str, agent_cmd: list[str] | None = None) -> Recipe:
    """The recipe for ``--agent NAME`` (``--agent-cmd`` alone means a custom ACP command).

    Raises :class:`ConfigurationError` (a ``ValueError``) for an unknown agent, or ``custom`` without a command.
    """
    try:
        name = canonical_agent(agent)
    except ConfigurationError:
        known = ", ".join(n for n in AGENT_NAMES if n != "custom")
        raise ConfigurationError(
            f"unknown agent {agent!r}: choose one of {known}, or give --agent-cmd 'COMMAND ARGS'"
        ) from None
    if agent_cmd and name in ("builtin", "custom"):
        return RECIPES["custom"]
    recipe = RECIPES[name]
    if recipe.name == "custom" and not agent_cmd:
        raise ConfigurationError("--agent custom needs --agent-cmd 'COMMAND ARGS' (an ACP agent on stdio)")
    return recipe


def running_as_root() -> bool:
    """Whether this process is root, which some CLIs refuse to run as unless told they are sandboxed."""
    return hasattr(os, "geteuid") and os.geteuid() == 0
