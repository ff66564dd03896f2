"""Each agent CLI's MCP config, as that CLI reads it: the ``openab_browser`` entry in its shape, the files it
reads (project or user, and the variable that moves them) and their format.

What differs between CLIs lives here and only here; merging our entry into a file is :mod:`.merge`, and
reading, locking and writing the files is :mod:`.files`. Names and aliases resolve through
:mod:`openab_browser.core.agent_names`; this table adds the config *formats*, including clients the pod does not
run (VS Code, Windsurf). The shapes come from each CLI's docs; see docs/agents.md.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ...agent_names import CONFIG_NAMES, canonical_client
from ...errors import ConfigError, ConfigurationError
from ...mcp.access import Entry as Endpoint
from ...mcp.access import HttpEndpoint
from ...mcp_vocabulary import SERVER_NAME

__all__ = [
    "AGENTS",
    "KIRO_GRANT",
    "Base",
    "ConfigFile",
    "Format",
    "Json",
    "agent_name",
    "check_command",
    "config_files",
    "document",
    "entry",
    "expands_token",
]

# Kiro agent files are default-deny: a server's tools are usable only when "@<server>" is allowed.
KIRO_GRANT = "@" + SERVER_NAME

Json = dict[str, Any]
Format = Literal["json", "toml", "yaml"]
Base = Literal["dir", "home"]


# -- entries, one function per agent CLI (shapes from each CLI's docs; see docs/agents.md) ----------


def _bearer(endpoint: HttpEndpoint, env_ref: str | None) -> dict[str, str]:
    if endpoint.token_env and env_ref:
        return {"Authorization": "Bearer " + env_ref.format(endpoint.token_env)}
    return {"Authorization": "Bearer " + endpoint.token}


def _cursor(endpoint: Endpoint) -> Json:
    if isinstance(endpoint, HttpEndpoint):
        return {"url": endpoint.url, "headers": _bearer(endpoint, "${{env:{}}}")}
    return {"command": endpoint.command, "args": list(endpoint.args)}


def _kiro(endpoint: Endpoint) -> Json:
    if isinstance(endpoint, HttpEndpoint):
        return {"url": endpoint.url, "headers": _bearer(endpoint, "${{{}}}"), "disabled": False}
    # Kiro's docs mark args as required for local servers.
    return {"command": endpoint.command, "args": list(endpoint.args), "disabled": False}


def _claude(endpoint: Endpoint) -> Json:
    if isinstance(endpoint, HttpEndpoint):
        # A url without type is read as a stdio server and fails.
        return {"type": "http", "url": endpoint.url, "headers": _bearer(endpoint, "${{{}}}")}
    return {"type": "stdio", "command": endpoint.command, "args": list(endpoint.args), "env": {}}


def _codex(endpoint: Endpoint) -> Json:
    # Codex gives a server 10 s to start by default; a cold relay or a busy pod can miss that.
    timeouts = {"startup_timeout_sec": 30, "tool_timeout_sec": 120}
    if isinstance(endpoint, HttpEndpoint):
        # Codex ignores `headers` and rejects an inline `bearer_token`.
        if endpoint.token_env:
            return {"url": endpoint.url, "bearer_token_env_var": endpoint.token_env, **timeouts}
        return {"url": endpoint.url, "http_headers": _bearer(endpoint, None), **timeouts}
    return {"command": endpoint.command, "args": list(endpoint.args), **timeouts}


def _gemini(endpoint: Endpoint) -> Json:
    if isinstance(endpoint, HttpEndpoint):
        # httpUrl is Streamable HTTP; url would select the old SSE transport.
        return {"httpUrl": endpoint.url, "headers": _bearer(endpoint, None), "timeout": 120000}
    return {"command": endpoint.command, "args": list(endpoint.args), "timeout": 120000}


def _opencode(endpoint: Endpoint) -> Json:
    if isinstance(endpoint, HttpEndpoint):
        # oauth:false: a 401 would otherwise start OAuth discovery against our loopback server.
        return {
            "type": "remote",
            "url": endpoint.url,
            "headers": _bearer(endpoint, "{{env:{}}}"),
            "oauth": False,
            "enabled": True,
        }
    # One argv array: opencode has no `args` and rejects unknown keys.
    return {"type": "local", "command": [endpoint.command, *endpoint.args], "enabled": True}


def _vscode(endpoint: Endpoint) -> Json:
    if isinstance(endpoint, HttpEndpoint):
        return {"type": "http", "url": endpoint.url, "headers": _bearer(endpoint, "${{env:{}}}")}
    return {"type": "stdio", "command": endpoint.command, "args": list(endpoint.args)}


def _copilot(endpoint: Endpoint) -> Json:
    # Copilot CLI exposes no tool of a server without an allow-list.
    if isinstance(endpoint, HttpEndpoint):
        return {"type": "http", "url": endpoint.url, "headers": _bearer(endpoint, "${{{}}}"), "tools": ["*"]}
    return {"type": "local", "command": endpoint.command, "args": list(endpoint.args), "tools": ["*"],
            "env": {}}


def _qwen(endpoint: Endpoint) -> Json:
    # Qwen Code keeps Gemini CLI's shape: httpUrl is Streamable HTTP, url would pick SSE.
    if isinstance(endpoint, HttpEndpoint):
        return {"httpUrl": endpoint.url, "headers": _bearer(endpoint, None), "timeout": 120000}
    return {"command": endpoint.command, "args": list(endpoint.args), "timeout": 120000}


def _auggie(endpoint: Endpoint) -> Json:
    # The shape `auggie mcp add` writes.
    if isinstance(endpoint, HttpEndpoint):
        return {"type": "http", "url": endpoint.url, "headers": _bearer(endpoint, None)}
    return {"type": "stdio", "command": endpoint.command, "args": list(endpoint.args), "env": {}}


def _windsurf(endpoint: Endpoint) -> Json:
    if isinstance(endpoint, HttpEndpoint):
        # serverUrl, not url: a Cursor-style entry does not connect in Windsurf.
        return {"serverUrl": endpoint.url, "headers": _bearer(endpoint, "${{env:{}}}")}
    return {"command": endpoint.command, "args": list(endpoint.args)}


def _goose(endpoint: Endpoint) -> Json:
    common: Json = {"name": SERVER_NAME, "enabled": True}
    if isinstance(endpoint, HttpEndpoint):
        return {"type": "streamable_http", **common, "uri": endpoint.url, "headers": _bearer(endpoint, None),
                "envs": {}, "env_keys": [], "timeout": 300}
    return {"type": "stdio", **common, "cmd": endpoint.command, "args": list(endpoint.args),
            "envs": {}, "env_keys": [], "timeout": 300}


@dataclass(frozen=True)
class _Agent:
    """One CLI's config: the entry function, its main file (``path`` under the project ``dir`` or ``home``),
    the key holding its servers, the file format and the command that lists what it loaded."""

    entry: Callable[[Endpoint], Json]
    path: str
    base: Base
    servers_key: str = "mcpServers"
    format: Format = "json"
    verify: str = ""
    # (VAR, path under $VAR): the variable that moves a user file, as CODEX_HOME moves ~/.codex.
    moved_by: tuple[str, str] | None = None


_AGENTS: dict[str, _Agent] = {
    "auggie": _Agent(_auggie, ".augment/settings.json", "dir", verify="auggie mcp list"),
    "claude": _Agent(_claude, ".mcp.json", "dir", verify="claude mcp list"),
    "codex": _Agent(_codex, ".codex/config.toml", "home", "mcp_servers", "toml", verify="codex mcp list",
                    moved_by=("CODEX_HOME", "config.toml")),
    "copilot": _Agent(_copilot, ".copilot/mcp-config.json", "home", verify="copilot mcp list",
                      moved_by=("COPILOT_HOME", "mcp-config.json")),
    "cursor": _Agent(_cursor, ".cursor/mcp.json", "dir", verify="cursor-agent mcp list"),
    "gemini": _Agent(_gemini, ".gemini/settings.json", "dir", verify="gemini mcp list"),
    "goose": _Agent(_goose, ".config/goose/config.yaml", "home", "extensions", "yaml",
                    moved_by=("XDG_CONFIG_HOME", "goose/config.yaml")),
    "kiro": _Agent(_kiro, ".kiro/settings/mcp.json", "dir", verify="kiro-cli mcp list"),
    "opencode": _Agent(_opencode, "opencode.json", "dir", "mcp", verify="opencode mcp list"),
    # The user file: Qwen Code keeps a project's servers (.qwen/settings.json, .mcp.json) "Pending approval" until the
    # person approves that very entry, a gate that is theirs to open, not ours.
    "qwen": _Agent(_qwen, ".qwen/settings.json", "home", verify="qwen mcp list",
                   moved_by=("QWEN_HOME", "settings.json")),
    "vscode": _Agent(_vscode, ".vscode/mcp.json", "dir", "servers"),
    "windsurf": _Agent(_windsurf, ".codeium/windsurf/mcp_config.json", "home"),
}
AGENTS: tuple[str, ...] = tuple(_AGENTS)
# A writer for every name agent_names says `openab config write` takes (its --help lists them), and no other: a
# writer with no name could never be picked, a name with no writer would be offered and refused.
if set(_AGENTS) != set(CONFIG_NAMES):
    raise RuntimeError(f"config writers {sorted(_AGENTS)} and agent_names.CONFIG_NAMES {list(CONFIG_NAMES)} differ")


def agent_name(name: str) -> str:
    """The writer name for an agent name or command (``claude-agent-acp`` -> ``claude``).

    A path names its command (``/usr/local/bin/claude-agent-acp``). Raises :class:`ConfigError` for a name
    that has no writer here, ``builtin`` and ``custom`` included.
    """
    word = Path(name).name
    try:
        key = canonical_client(word)
    except ConfigurationError:
        key = ""
    if key not in _AGENTS:
        raise ConfigError(f"unknown agent {name!r}: choose one of {', '.join(AGENTS)}")
    return key


def check_command(agent: str) -> str:
    """The command that lists ``agent``'s MCP servers, to check a write by; ``""`` when it has none."""
    return _AGENTS[agent_name(agent)].verify


def expands_token(agent: str, token_env: str | None) -> bool:
    """Whether ``agent``'s entry can refer to the token by its variable instead of holding it."""
    if not token_env:
        return False
    probe = "openab-token-probe"
    return probe not in json.dumps(entry(agent, HttpEndpoint("http://127.0.0.1/mcp", probe, token_env)))


def entry(agent: str, endpoint: Endpoint) -> Json:
    """The ``openab_browser`` entry exactly as ``agent`` wants it in its config file."""
    return _AGENTS[agent_name(agent)].entry(endpoint)


def document(agent: str, endpoint: Endpoint) -> tuple[Json, Format]:
    """A whole config file of ``agent``'s, holding the ``openab_browser`` entry and nothing else, and its format:
    for a file the CLI is pointed at on its command line (Copilot's ``--additional-mcp-config @FILE``)."""
    spec = _AGENTS[agent_name(agent)]
    return {spec.servers_key: {SERVER_NAME: spec.entry(endpoint)}}, spec.format


@dataclass(frozen=True)
class ConfigFile:
    """One file a writer touches. ``kind`` is "servers" (the CLI's MCP server list), for Claude
    and Kiro "approval" / "kiro-agent" (files that also have to name our server), or "record" (a CLI's own
    state file, such as its trusted folders, that :func:`.files.update_record` changes)."""

    path: Path
    format: Format
    servers_key: str
    kind: Literal["servers", "approval", "kiro-agent", "record"] = "servers"


def config_files(
    agent: str, *, dir: Path | None = None, home: Path | None = None, env: Mapping[str, str] | None = None
) -> list[ConfigFile]:
    """The files ``write(agent, ...)`` touches: project files under ``dir`` (default: the current
    directory), user files under ``home`` or where the agent's ``env`` moves them (CODEX_HOME,
    COPILOT_HOME, QWEN_HOME, XDG_CONFIG_HOME). ``env`` defaults to ours only when ``home`` is not given."""
    name = agent_name(agent)
    spec = _AGENTS[name]
    root = _root(spec.base, dir, home)
    if env is None and home is None:
        env = os.environ
    if spec.moved_by and env and env.get(spec.moved_by[0]):
        main = Path(env[spec.moved_by[0]]) / spec.moved_by[1]
    else:
        main = root / spec.path
    files = [ConfigFile(main, spec.format, spec.servers_key)]
    if name == "claude":
        # Interactive claude (and `claude mcp list`) keeps project .mcp.json servers "pending
        # approval" until named here; claude -p and claude-agent-acp use them regardless.
        approvals = root / ".claude/settings.local.json"
        files.append(ConfigFile(approvals, "json", "enabledMcpjsonServers", "approval"))
    if name == "kiro":
        # kiro-cli --agent NAME reads its agent file's own mcpServers and allowedTools.
        agents_dir = root / ".kiro/agents"
        if agents_dir.is_dir():
            files += [
                ConfigFile(p, "json", "mcpServers", "kiro-agent")
                for p in sorted(agents_dir.glob("*.json"))
                if not p.name.startswith("._")  # macOS resource forks
            ]
    return files


def _root(base: Base, dir: Path | None, home: Path | None) -> Path:
    if base == "home":
        return Path(home) if home is not None else Path.home()
    return Path(dir) if dir is not None else Path.cwd()


