"""Real agent CLIs, set up to run offline against the fake model in a throwaway HOME.

``agent_env(cli, model_url, root)`` writes the config files and builds the environment one CLI
needs (the "recipe"), and ``acp_agent(env, client, relay)`` runs its ACP agent over stdio. The
recipes' facts, and why each setting is there, are in docs/agents.md.

Every run gets its own HOME and working directory: the CLIs keep sessions and sqlite files in
HOME, and an "allow always" answer can persist (claude writes it under the working directory).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import pytest
from acp import connect_to_agent
from acp.interfaces import Client
from acp.schema import PermissionOption, RequestPermissionResponse

from .offline import HostRelay

if TYPE_CHECKING:
    from acp.client.connection import ClientSideConnection

HERE = Path(__file__).resolve().parent
NODE_BIN = HERE / "node_modules" / ".bin"

# The fake model's name for each wire format. Codex warns about a model it has no metadata for
# (the warning reaches the ACP client as agent text), so it gets a name it knows.
CODEX_MODEL = "gpt-5.4"
CLAUDE_MODEL = "claude-sonnet-4-5"
COPILOT_MODEL = "gpt-4.1"  # a model Copilot knows the limits of; the fake answers whatever it is called
GEMINI_MODEL = "gemini-2.5-flash"  # pinned: "auto" routes through a JSON classifier first
QWEN_MODEL = "qwen3-coder-plus"

# The command that runs each CLI as an ACP agent on stdio.
ACP_COMMANDS: dict[str, list[str]] = {
    "codex": ["codex-acp"],
    "claude": ["claude-agent-acp"],
    "gemini": ["gemini", "--acp"],
    "opencode": ["opencode", "acp"],
    "copilot": ["copilot", "--acp", "--stdio"],
    # As its recipe runs it (core/agents/recipes.py says why): asking before every tool but ours, MCP tools offered
    # to the model directly.
    "qwen": ["qwen", "--acp", "--approval-mode=default", "--exclude-tools=tool_search", "--exclude-tools=tool_call"],
}

# ACP agents that start here but cannot run a session (Auggie answers session/new only signed in to Augment): kept out
# of ACP_COMMANDS, whose every CLI the ACP tests run a session with.
ACP_STARTS: dict[str, list[str]] = {**ACP_COMMANDS, "auggie": ["auggie", "--acp"]}


def installed(binary: str) -> bool:
    return (NODE_BIN / binary).exists()


def require(binary: str) -> Path:
    """The path of an npm-installed CLI, or skip the test saying how to install it."""
    path = NODE_BIN / binary
    if not path.exists():
        pytest.skip(f"{binary} is not installed: run `npm ci` in tests/agents (scripts/test does it)")
    return path


def tool_name(cli: str, server: str, tool: str) -> str:
    """The name the model sees for MCP tool ``tool`` of server ``server``."""
    return {
        "codex": f"mcp__{server}.{tool}",  # namespace mcp__<server>, function <tool>
        "claude": f"mcp__{server}__{tool}",
        "gemini": f"mcp_{server}_{tool}",
        "opencode": f"{server}_{tool}",
        "copilot": f"{server}-{tool}",
        "qwen": f"mcp__{server}__{tool}",
    }[cli]


@dataclass
class AgentEnv:
    """One CLI ready to run offline: its env, a fresh HOME and a fresh working directory."""

    cli: str
    env: dict[str, str]
    home: Path
    cwd: Path
    files: dict[str, Path] = field(default_factory=dict)  # the config files the recipe wrote

    @property
    def acp_argv(self) -> list[str]:
        command = ACP_STARTS[self.cli]
        return [str(require(command[0])), *command[1:]]

    def argv(self, *args: str) -> list[str]:
        """The CLI's own command (``codex``, ``claude``, ``gemini``, ``opencode``) with ``args``."""
        return [str(require(self.cli)), *args]

    def run(self, *args: str, relay: HostRelay | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run the CLI's own command to completion (for ``mcp list`` and headless runs), then kill
        whatever it left running in its process group (MCP servers it spawned, background installs)."""
        argv = self.argv(*args)
        if relay is not None:
            argv = relay.wrap(argv)
        with subprocess.Popen(
            argv, env=self.env, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, start_new_session=True,
        ) as process:
            try:
                out, err = process.communicate(timeout=timeout)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
        return subprocess.CompletedProcess(argv, process.returncode, out, err)


def _base_env(home: Path) -> dict[str, str]:
    # A clean env, not the developer's: no stray API keys, proxies or CLI settings leak in.
    return {
        "PATH": f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
    }


def _write_json(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2) + "\n")
    return path


def agent_env(cli: str, model_url: str, root: Path) -> AgentEnv:
    """Set up ``cli`` (codex, claude, gemini, opencode, copilot or qwen) against the fake model under ``root``;
    ``auggie`` only for its own commands (``mcp list``): it has no model to point at the fake (docs/agents.md)."""
    home, cwd = root / "home", root / "work"
    home.mkdir(parents=True, exist_ok=True)
    cwd.mkdir(parents=True, exist_ok=True)
    env = _base_env(home)
    agent = AgentEnv(cli, env, home, cwd)
    {"codex": _codex, "claude": _claude, "gemini": _gemini, "opencode": _opencode, "copilot": _copilot,
     "qwen": _qwen, "auggie": _auggie}[cli](agent, model_url)
    return agent


def _codex(agent: AgentEnv, model_url: str) -> None:
    codex_home = agent.home / ".codex"
    codex_home.mkdir()
    config = codex_home / "config.toml"
    config.write_text(
        f"""model = "{CODEX_MODEL}"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "read-only"
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

# Else a startup "curated plugin sync" reaches for github.com and chatgpt.com.
[features]
plugins = false
remote_plugin = false
apps = false

[model_providers.fake]
name = "Fake model"
base_url = "{model_url}/v1"
env_key = "FAKE_API_KEY"
wire_api = "responses"
"""
    )
    agent.env.update(CODEX_HOME=str(codex_home), FAKE_API_KEY="sk-fake")
    agent.files["config"] = config


def _claude(agent: AgentEnv, model_url: str) -> None:
    agent.env.update(
        ANTHROPIC_BASE_URL=model_url,
        ANTHROPIC_API_KEY="sk-ant-fake",
        ANTHROPIC_MODEL=CLAUDE_MODEL,
        ANTHROPIC_SMALL_FAST_MODEL="claude-haiku-4-5",
        CLAUDE_CONFIG_DIR=str(agent.home / ".claude"),
        # Else MCP tools hide behind a ToolSearch tool and never reach the model's tool list.
        ENABLE_TOOL_SEARCH="false",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_TELEMETRY="1",
        DISABLE_ERROR_REPORTING="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_NON_ESSENTIAL_MODEL_CALLS="1",
        CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY="1",
    )
    if os.geteuid() == 0:
        # claude-agent-acp always starts claude with --dangerously-skip-permissions, which claude
        # refuses as root unless told it is in a sandbox.
        agent.env["IS_SANDBOX"] = "1"


def _gemini(agent: AgentEnv, model_url: str) -> None:
    settings = {
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        # Without this, Clearcut logging retries for ~100 s before the first answer.
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        # With a base URL and no auth type, gemini picks "gateway" auth, which -p rejects.
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "model": {"name": GEMINI_MODEL},
    }
    agent.files["settings"] = _write_json(agent.home / ".gemini" / "settings.json", settings)
    agent.env.update(GOOGLE_GEMINI_BASE_URL=model_url, GEMINI_API_KEY="fake-key", GEMINI_CLI_NO_RELAUNCH="true")


def _opencode(agent: AgentEnv, model_url: str) -> None:
    provider = {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "model": "fake/fake-model",
        "small_model": "fake/fake-model",
        "provider": {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",  # bundled in the binary: nothing is fetched
                "name": "Fake model",
                "options": {"baseURL": f"{model_url}/v1", "apiKey": "sk-fake"},
                "models": {
                    "fake-model": {"name": "Fake model", "tool_call": True,
                                   "limit": {"context": 128000, "output": 4096}}
                },
            }
        },
        "permission": {"*": "allow"},
    }
    config = _write_json(agent.home / "opencode-provider.json", provider)
    xdg = {k: str(agent.home / v) for k, v in {"XDG_CONFIG_HOME": ".config", "XDG_DATA_HOME": ".local/share",
                                                "XDG_CACHE_HOME": ".cache", "XDG_STATE_HOME": ".local/state"}.items()}
    agent.env.update(
        OPENCODE_CONFIG=str(config),
        OPENCODE_DISABLE_MODELS_FETCH="true",  # else it fetches models.opencode.ai
        OPENCODE_DISABLE_AUTOUPDATE="true",
        OPENCODE_DISABLE_LSP_DOWNLOAD="true",
        OPENCODE_DISABLE_DEFAULT_PLUGINS="true",
        OPENCODE_DISABLE_SHARE="true",
        OPENCODE_DISABLE_CLAUDE_CODE="true",
        OPENCODE_PURE="1",
        **xdg,
    )
    agent.files["config"] = config


def _copilot(agent: AgentEnv, model_url: str) -> None:
    # Copilot CLI's BYOK provider: with COPILOT_OFFLINE it needs no GitHub account and calls home for nothing
    # (no sign-in, telemetry, web tools, GitHub MCP server or update); the fake model speaks Chat Completions.
    agent.env.update(
        COPILOT_OFFLINE="true",
        COPILOT_PROVIDER_BASE_URL=f"{model_url}/v1",
        COPILOT_PROVIDER_TYPE="openai",
        COPILOT_PROVIDER_API_KEY="sk-fake",
        COPILOT_MODEL=COPILOT_MODEL,
        COPILOT_HOME=str(agent.home / ".copilot"),
        COPILOT_AUTO_UPDATE="false",
    )


def _qwen(agent: AgentEnv, model_url: str) -> None:
    # Qwen Code is a fork of Gemini CLI: the same settings file shape under ~/.qwen, an OpenAI-compatible provider.
    settings = {
        "general": {"enableAutoUpdate": False},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "security": {"auth": {"selectedType": "openai"}, "folderTrust": {"enabled": False}},
        "model": {"name": QWEN_MODEL},
    }
    agent.files["settings"] = _write_json(agent.home / ".qwen" / "settings.json", settings)
    agent.env.update(
        OPENAI_BASE_URL=f"{model_url}/v1", OPENAI_API_KEY="sk-fake", OPENAI_MODEL=QWEN_MODEL,
        QWEN_USAGE_STATISTICS_ENABLED="false", QWEN_TELEMETRY_ENABLED="false", QWEN_CODE_NO_RELAUNCH="true",
        # Else session/new answers before the session's MCP servers are discovered, and the prompt races them.
        QWEN_CODE_LEGACY_MCP_BLOCKING="1",
    )


def _auggie(agent: AgentEnv, model_url: str) -> None:
    # Auggie's model is Augment's own service, reached only signed in: nothing here points it at the fake.
    agent.env.update(AUGMENT_DISABLE_AUTO_UPDATE="1")


# -- running an ACP agent --------------------------------------------------------------------------------


class StreamingClient(Protocol):
    """The part of an ACP client these tests implement: streamed updates and permission requests.

    The SDK's ``Client`` protocol lists every client method (files, terminals, elicitation), but its
    router looks each handler up on the object and answers "method not found" for one that is absent.
    """

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None: ...

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse: ...


@contextlib.asynccontextmanager
async def acp_agent(
    agent: AgentEnv, client: StreamingClient, relay: HostRelay | None = None, extra_argv: Sequence[str] = ()
) -> AsyncIterator[tuple[ClientSideConnection, asyncio.subprocess.Process]]:
    """Run ``agent`` as an ACP agent on stdio (offline through ``relay``), with ``extra_argv`` after its ACP
    command (what the pod adds, such as Copilot's ``--additional-mcp-config``), and connect ``client``.

    The agent runs in its own process group, killed as a whole on exit: codex-acp and gemini
    --acp do not exit at stdin EOF, and the npm launchers leave their native binary behind when
    only they are signalled. stderr goes to ``<root>/<cli>.stderr`` for post-mortems.
    """
    command = [*agent.acp_argv, *extra_argv]
    argv = command if relay is None else relay.wrap(command)
    stderr_path = agent.home.parent / f"{agent.cli}.stderr"
    with stderr_path.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=stderr,
            env=agent.env, cwd=agent.cwd, start_new_session=True, limit=64 * 1024 * 1024,
        )
        assert process.stdin is not None and process.stdout is not None
        # cast: the SDK types its argument as the full Client protocol; see StreamingClient.
        conn = connect_to_agent(cast(Client, client), process.stdin, process.stdout)
        try:
            yield conn, process
        finally:
            with contextlib.suppress(Exception):
                await conn.close()
            await kill_group(process)
            # The pipe to its stdin is this end's to close: left open, it keeps the subprocess transport alive
            # past the test, and the garbage collector closes it after the loop has closed (an unraisable
            # "Event loop is closed" in whichever test runs then).
            process.stdin.close()
            with contextlib.suppress(OSError):
                await process.stdin.wait_closed()


async def kill_group(process: asyncio.subprocess.Process, grace: float = 3) -> None:
    """SIGTERM the process group, then SIGKILL what is left after ``grace`` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            await asyncio.wait_for(process.wait(), grace)
            if sig == signal.SIGTERM:
                # The leader is gone; its children may not be. They share its group id.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
            return
        except TimeoutError:
            continue
