"""How each agent CLI is run in the pod: its ACP command, how it gets the browser, what keeps it quiet.

A recipe holds what differs between agent CLIs, and nothing else:

* ``argv``: the command that makes it an ACP agent on stdio;
* ``flags``: switches added to whatever command runs as this CLI, the recipe's own or one of the operator's that
  names itself as this CLI (``reports_as``): they keep it quiet or make it ask, so a wrapper must get them too;
* ``browser_via``: ``"acp"`` hands the ``openab_browser`` server over in ``session/new.mcpServers``;
  ``"config"`` writes it into the CLI's own config file in the session's working directory, for CLIs that
  ignore or choke on ACP-passed servers (Cursor ignores them, zed#50924; kiro-cli closes the connection on
  an http entry, openab#903); ``"flag"`` writes a file of the CLI's config format holding only our server into
  the session's working directory and names it with ``browser_flag`` (``{file}`` is its path) on the command
  line, for CLIs whose own config file wins over ACP-passed servers of the same name (Copilot), so a stale
  entry there would take the session's browser calls;
* ``env``: switches that turn off telemetry, update checks and other calls home;
* ``identify``: where the CLI's *own runtime* writes the MCP server and tool of a permission request, so the
  pod decides requests for our own browser tools by its policy and only the rest reach the person. The model
  writes arguments, call ids and most titles, so only fields the runtime builds from its tool registry are read
  (a title only where the runtime alone builds it, and only with a second runtime-set field that proves it
  did); a CLI with no verified field gets ``None`` for every request;
* ``reports_as``: the ``agentInfo.name`` the CLI's ACP runtime gives in its ``initialize`` answer, which is how a
  command that is not the recipe's own (``--agent-cmd``: a wrapper script, ``npx ...``) is known to be this CLI and
  gets everything else here; the model has not run yet when the runtime says it, so nothing the model writes can
  pick a recipe;
* ``allow_browser``, ``allow_browser_argv``, ``allow_browser_env``: what tells the CLI up front to run our server's
  tools without asking, by its own allow-list (a ``session/new`` ``_meta``, extra arguments, or environment
  values that replace the recipe's own ``env`` entry unless the operator set that variable). None is used when
  the policy is ``deny``;
* ``writes``: the folders of its own the CLI writes outside its working folder (sessions, caches, logins), as
  ``~/.codex`` or ``${CODEX_HOME:-~/.codex}`` (the variable's value when the agent's environment sets it):
  a confined agent (:mod:`openab_browser.core.agents.confinement`) may read and write those and no other folder of
  HOME; ``rewrites``: files of HOME it reads and rewrites in place (``~/.claude.json``), when they exist;
  ``reads_env``: variables naming a file or folder it only reads (``OPENCODE_CONFIG``).

The facts, per CLI, with the traps that motivated them: docs/runtime.md and docs/agents.md.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..agent_names import AGENT_NAMES, canonical_agent
from ..errors import ConfigurationError
from ..jsonrpc import JsonObject
from ..mcp_vocabulary import SERVER_NAME

__all__ = ["RECIPES", "Identify", "Recipe", "ToolIdentity", "recipe_for", "recipe_reported", "running_as_root"]

# (MCP server name, tool name) as the agent's runtime reports them.
ToolIdentity = tuple[str, str]
# The request's tool call and the optionIds the agent offered with it (the runtime sets those per kind of request).
Identify = Callable[[JsonObject, Collection[str]], ToolIdentity | None]

_QUIET_NODE = {"NO_UPDATE_NOTIFIER": "1", "NPM_CONFIG_UPDATE_NOTIFIER": "false", "DO_NOT_TRACK": "1"}


def _dig(value: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _unverified(tool_call: JsonObject, options: Collection[str]) -> ToolIdentity | None:
    return None


def _claude_identity(tool_call: JsonObject, options: Collection[str]) -> ToolIdentity | None:
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


def _codex_identity(tool_call: JsonObject, options: Collection[str]) -> ToolIdentity | None:
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


# gemini-cli 0.61 titles an MCP tool's request "<tool> (<server> MCP Server)" from its registry; a shell request's
# title is the model's command, so the title alone proves nothing. Only an MCP confirmation offers the
# "allow all server tools" option, which the runtime adds by the kind of confirmation, never from the model.
_GEMINI_MCP_TITLE = re.compile(r"([A-Za-z0-9_.-]+) \(([A-Za-z0-9_.-]+) MCP Server\)")
_GEMINI_MCP_OPTION = "proceed_always_server"


def _gemini_identity(tool_call: JsonObject, options: Collection[str]) -> ToolIdentity | None:
    title, call_id = tool_call.get("title"), tool_call.get("toolCallId")
    if _GEMINI_MCP_OPTION not in options or tool_call.get("kind") != "other" or not isinstance(title, str):
        return None
    match = _GEMINI_MCP_TITLE.fullmatch(title)
    if match is None or not isinstance(call_id, str):
        return None
    server, tool = match.group(2), match.group(1)
    # The call id starts with the registry name of the tool that runs ("mcp_<server>_<tool>__<model's id>"): the
    # title must name that same tool, not merely one that exists.
    return (server, tool) if call_id.startswith(f"mcp_{server}_{tool}__") else None


def _opencode_identity(tool_call: JsonObject, options: Collection[str]) -> ToolIdentity | None:
    # opencode 1.18 titles a request by its permission name, which for an MCP tool is the registry key
    # "<server>_<tool>" with empty metadata as rawInput. Every other permission carries runtime metadata
    # (external_directory's title can be the model's description, but its rawInput names the directory).
    title = tool_call.get("title")
    if tool_call.get("kind") != "other" or tool_call.get("rawInput") != {} or not isinstance(title, str):
        return None
    prefix = f"{SERVER_NAME}_"
    if not title.startswith(prefix) or not re.fullmatch(r"[A-Za-z0-9_-]+", title[len(prefix):]):
        return None
    return SERVER_NAME, title[len(prefix):]


def _qwen_identity(tool_call: JsonObject, options: Collection[str]) -> ToolIdentity | None:
    # Qwen Code 0.24 looks the model's call up in its tool registry by exact name and puts the name it found in
    # _meta.toolName; an MCP tool is registered as "mcp__<server>__<tool>", and it maps MCP tools to kind "other" (its
    # shell is "execute"). The title of an MCP request is the model's arguments, so it is never read. A workflow's
    # approval carries the name its script asked for, which the runtime has not looked up the same way: not ours.
    meta = tool_call.get("_meta")
    name = _dig(meta, "toolName")
    if tool_call.get("kind") != "other" or not isinstance(name, str) or _dig(meta, "workflowApproval") is not None:
        return None
    prefix = f"mcp__{SERVER_NAME}__"
    if not name.startswith(prefix) or not re.fullmatch(r"[A-Za-z0-9_-]+", name[len(prefix):]):
        return None
    return SERVER_NAME, name[len(prefix):]


# The opencode permissions that read the session's working directory; everything else asks.
_OPENCODE_ASK = {"*": "ask", "read": "allow", "list": "allow", "glob": "allow", "grep": "allow",
                 "todoread": "allow", "todowrite": "allow"}


@dataclass(frozen=True)
class Recipe:
    """What differs in running one agent CLI in the pod (the module docstring says what each field means).

    Data only: the runtime (:mod:`openab_browser.core.agents.runtime`) starts the process, writes the config file
    and answers permissions from it.
    """

    name: str
    title: str
    argv: tuple[str, ...]
    flags: tuple[str, ...] = ()
    browser_via: Literal["acp", "config", "flag"] = "acp"
    config_agent: str | None = None  # the openab_browser.core.agents.config writer for browser_via="config" or "flag"
    browser_flag: tuple[str, ...] = ()  # for browser_via="flag": the arguments naming the file, "{file}" its path
    env: Mapping[str, str] = field(default_factory=dict)
    identify: Identify = _unverified
    reports_as: tuple[str, ...] = ()
    allow_browser: JsonObject = field(default_factory=dict)
    allow_browser_argv: tuple[str, ...] = ()
    allow_browser_env: Mapping[str, str] = field(default_factory=dict)
    install: str = ""
    root_env: Mapping[str, str] = field(default_factory=dict)  # added only when the pod runs as root
    # Whether its own command answers --version (`openab doctor` asks it; codex-acp has no such flag).
    takes_version: bool = True
    writes: tuple[str, ...] = ()
    rewrites: tuple[str, ...] = ()
    reads_env: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.browser_via == "flag" and not (self.config_agent and any("{file}" in a for a in self.browser_flag)):
            raise ValueError(f"recipe {self.name!r}: browser_via='flag' needs config_agent and a browser_flag "
                             "naming '{file}'")

    def command(self, override: list[str] | None = None) -> list[str]:
        """The argv to start: ``override`` (``--agent-cmd``) when given, else the recipe's own."""
        return list(override) if override else list(self.argv)


def _builtin_argv() -> tuple[str, ...]:
    return (sys.executable, "-m", "openab_browser.core.agents.builtin")


RECIPES: dict[str, Recipe] = {
    "builtin": Recipe("builtin", "openab built-in agent", _builtin_argv()),
    "claude": Recipe(
        "claude", "Claude Code", ("claude-agent-acp",),
        reports_as=("@agentclientprotocol/claude-agent-acp",),
        env={
            **_QUIET_NODE,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1", "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
            # Else MCP tools hide behind a ToolSearch tool and the model never sees the browser tools.
            "ENABLE_TOOL_SEARCH": "false",
            # A snapshot's default budget is 24,000 tokens as GPT-4o's tokenizer counts them; Claude's own count of
            # the same text can pass Claude Code's default 25,000, and then it cuts the result at 100,000
            # characters and adds a note that it did, which a page of about that size would get for nothing.
            "MAX_MCP_OUTPUT_TOKENS": "50000",
        },
        identify=_claude_identity,
        # "mcp__<server>" is Claude Code's rule for every tool of one server: ours run without a request.
        allow_browser={"claudeCode": {"options": {"allowedTools": [f"mcp__{SERVER_NAME}"]}}},
        install="npm install -g @agentclientprotocol/claude-agent-acp",
        writes=("${CLAUDE_CONFIG_DIR:-~/.claude}",),
        # Without CLAUDE_CONFIG_DIR its state file sits in HOME itself, which is not the agent's to write in.
        rewrites=("~/.claude.json",),
        # claude-agent-acp always starts claude with --dangerously-skip-permissions, which claude refuses as
        # root unless told it is sandboxed (a pod is).
        root_env={"IS_SANDBOX": "1"},
    ),
    "codex": Recipe(
        "codex", "Codex", ("codex-acp",),
        flags=(
            "-c", "check_for_update_on_startup=false", "-c", "analytics.enabled=false",
            "-c", "feedback.enabled=false",
            # Else a start-up plugin sync reaches for github.com and chatgpt.com.
            "-c", "features.plugins=false", "-c", "features.remote_plugin=false", "-c", "features.apps=false",
        ),
        env=_QUIET_NODE,
        identify=_codex_identity,
        reports_as=("codex-acp",),
        takes_version=False,
        install="npm install -g @zed-industries/codex-acp",
        writes=("${CODEX_HOME:-~/.codex}",),
    ),
    "gemini": Recipe(
        "gemini", "Gemini CLI", ("gemini", "--acp"),
        env={**_QUIET_NODE, "GEMINI_CLI_NO_RELAUNCH": "true"},
        identify=_gemini_identity,
        reports_as=("gemini-cli",),
        install="npm install -g @google/gemini-cli",
        writes=("~/.gemini",),
    ),
    "opencode": Recipe(
        "opencode", "OpenCode", ("opencode", "acp"),
        # OpenCode asks for nothing by default (its shell runs unasked), which would leave the policy nothing to
        # decide and the person nothing to answer: the pod has it ask for everything but reading the workdir.
        # OPENCODE_PERMISSION is merged over its config files, and its rules are read last match first.
        env={"OPENCODE_DISABLE_AUTOUPDATE": "true", "OPENCODE_DISABLE_SHARE": "true",
             "OPENCODE_DISABLE_LSP_DOWNLOAD": "true", "OPENCODE_PERMISSION": json.dumps(_OPENCODE_ASK)},
        identify=_opencode_identity,
        reports_as=("OpenCode",),
        allow_browser_env={"OPENCODE_PERMISSION": json.dumps({**_OPENCODE_ASK, f"{SERVER_NAME}_*": "allow"})},
        install="npm install -g opencode-ai",
        writes=tuple(f"${{{var}:-~/{base}}}/opencode" for var, base in (
            ("XDG_CONFIG_HOME", ".config"), ("XDG_DATA_HOME", ".local/share"), ("XDG_CACHE_HOME", ".cache"),
            ("XDG_STATE_HOME", ".local/state"))),
        reads_env=("OPENCODE_CONFIG",),
    ),
    "cursor": Recipe(
        # --approve-mcps: a headless cursor-agent leaves project MCP servers unapproved, so ours would not load.
        "cursor", "Cursor", ("cursor-agent", "acp", "--approve-mcps"), browser_via="config", config_agent="cursor",
        install="curl https://cursor.com/install -fsS | bash",
        writes=("~/.cursor", "${XDG_CONFIG_HOME:-~/.config}/cursor"),
    ),
    "kiro": Recipe(
        "kiro", "Kiro", ("kiro-cli", "acp"), browser_via="config", config_agent="kiro",
        install="see https://kiro.dev/docs/cli/installation",
        writes=("~/.kiro", "${XDG_DATA_HOME:-~/.local/share}/kiro-cli"),
    ),
    "copilot": Recipe(
        "copilot", "GitHub Copilot CLI", ("copilot", "--acp", "--stdio"),
        # Copilot lets an openab_browser entry of its own config (~/.copilot/mcp-config.json, a trusted folder's
        # .mcp.json) win over the server of that name in session/new, so a stale entry would take the session's
        # browser calls. --additional-mcp-config is merged over every other source, and from a file the token
        # stays out of the argv that `ps` shows. (--disable-mcp-server drops the name from every source, ours too.)
        browser_via="flag", config_agent="copilot", browser_flag=("--additional-mcp-config", "@{file}"),
        reports_as=("Copilot",),
        env={**_QUIET_NODE, "COPILOT_AUTO_UPDATE": "false"},
        # Copilot's permission request names an MCP tool by its bare name and no server, so no request is ours by
        # its fields; its own allow-list (by server, checked inside the CLI) runs our tools unasked instead.
        allow_browser_argv=(f"--allow-tool={SERVER_NAME}",),
        install="npm install -g @github/copilot",
        # Its package unpacks into ~/.cache/copilot; its device id (@vscode/deviceid) is kept under Microsoft's.
        writes=("${COPILOT_HOME:-~/.copilot}", "${XDG_CACHE_HOME:-~/.cache}/copilot",
                "${XDG_CACHE_HOME:-~/.cache}/Microsoft/DeveloperTools"),
    ),
    "goose": Recipe("goose", "Goose", ("goose", "acp"), install="see https://block.github.io/goose/",
                    writes=tuple(f"${{{var}:-~/{base}}}/goose" for var, base in (
                        ("XDG_CONFIG_HOME", ".config"), ("XDG_DATA_HOME", ".local/share"),
                        ("XDG_STATE_HOME", ".local/state")))),
    "qwen": Recipe(
        "qwen", "Qwen Code", ("qwen", "--acp"),
        flags=(
            # Its default "auto" mode has a model-run classifier approve the actions it deems safe, shell commands
            # included, so the person would not see them: "default" asks for every one.
            "--approval-mode=default",
            # Else MCP tools hide behind its tool_search/tool_call bridge and the model never sees the browser tools.
            "--exclude-tools=tool_search", "--exclude-tools=tool_call",
        ),
        env={**_QUIET_NODE, "QWEN_USAGE_STATISTICS_ENABLED": "false", "QWEN_TELEMETRY_ENABLED": "false",
             "QWEN_CODE_NO_RELAUNCH": "true",
             # Else session/new answers before the servers it was given are discovered, and a first prompt sent at
             # once goes to the model without the browser tools.
             "QWEN_CODE_LEGACY_MCP_BLOCKING": "1"},
        identify=_qwen_identity,
        reports_as=("qwen-code",),
        # "mcp__<server>" is Qwen Code's permission rule for every tool of one server: ours run without a request.
        allow_browser_argv=(f"--allowed-tools=mcp__{SERVER_NAME}",),
        install="npm install -g @qwen-code/qwen-code",
        writes=("~/.qwen",),
    ),
    "auggie": Recipe(
        # Auggie's ACP runtime offers no http MCP servers in session/new (mcpCapabilities.http is false), so the proxy's
        # entry goes into its project settings file. It runs only signed in to Augment's service, so none of its
        # sessions could be run here: its permission requests are unseen, and it gets no identify (docs/agents.md).
        "auggie", "Auggie", ("auggie", "--acp"), browser_via="config", config_agent="auggie",
        env={**_QUIET_NODE, "AUGMENT_DISABLE_AUTO_UPDATE": "1"},
        reports_as=("auggie",),
        install="npm install -g @augmentcode/auggie",
        writes=("~/.augment",),
    ),
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


def recipe_reported(agent_info: object) -> Recipe | None:
    """The recipe of the CLI whose ACP runtime named itself ``agent_info`` (``initialize``'s ``agentInfo``), or
    ``None`` when no recipe knows that name (or the agent gave none)."""
    name = _dig(agent_info, "name")
    if not isinstance(name, str):
        return None
    return next((r for r in RECIPES.values() if name in r.reports_as), None)


def installed(argv: list[str], path: str | None) -> bool:
    """Whether the agent's program can be started: a path (``./agent``, ``/opt/x/agent``) to an executable file, or
    a name found on ``path`` (the ``PATH`` the agent is started with), as the spawn will look it up."""
    program = argv[0] if argv else ""
    if not program:
        return False
    if os.sep in program:
        return os.path.isfile(program) and os.access(program, os.X_OK)
    return shutil.which(program, path=path) is not None


def running_as_root() -> bool:
    """Whether this process is root, which some CLIs refuse to run as unless told they are sandboxed."""
    return hasattr(os, "geteuid") and os.geteuid() == 0
