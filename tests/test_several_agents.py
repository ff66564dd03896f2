"""Several agents in one pod (`openab run --agent claude --agent codex`): the handshake offers them, session/new
picks one, each session runs its own from its recipe, and keeps it when resumed."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from fake_extension import RemoteError, connect_extension
from gateway_harness import run_gateway
from live_settings import changed
from scripted_agent import ScriptedAgent
from test_runtime_pod import BROWSER_SERVER, FakeBrowser, environ, open_session, prompt, run_pod

from openab_browser.core.errors import ConfigurationError
from openab_browser.core.settings import Settings
from openab_browser.gateway.cli import build_parser
from openab_browser.gateway.run_command import runtime_overrides

pytestmark = pytest.mark.anyio

AGENTS = "dev.openab/agents"
AGENT = "dev.openab/agent"
BUILTIN = shlex.join([sys.executable, "-m", "openab_browser.core.agents.builtin"])


def from_flags(*flags: str, env: dict[str, str] | None = None) -> Settings:
    args = build_parser().parse_args(["run", *flags])
    return Settings.from_env(env or {}, **runtime_overrides(args))


# -- settings: the flag and the variable say the same ----------------------------------------------------------


def test_agents_come_from_repeated_flags_or_a_comma_list_with_the_same_aliases() -> None:
    by_flags = from_flags("--agent", "Claude-Code", "--agent", "codex-acp", "--agent", "claude")
    by_env = from_flags(env={"OPENAB_AGENT": " claude-agent-acp, Codex "})
    assert by_flags.agent == by_env.agent == ["claude", "codex"]  # the first is the default; repeats are one
    assert from_flags("--agent", "gemini,opencode").agent == ["gemini", "opencode"]
    assert from_flags().agent == ["builtin"]
    with pytest.raises(ValueError, match="unknown agent 'clod': choose one of builtin, claude"):
        from_flags("--agent", "claude", "--agent", "clod")


def test_each_agent_gets_its_own_command_by_name() -> None:
    settings = from_flags("--agent", "claude", "--agent", "codex", "--agent-cmd", "claude-code=my-claude --acp",
                          env={"OPENAB_AGENT_CMD_CODEX": "my-codex 'two words'"})
    assert settings.agent_command("claude") == ["my-claude", "--acp"]
    assert settings.agent_command("codex") == ["my-codex", "two words"]
    single = from_flags("--agent", "codex", "--agent-cmd", "my-codex --acp")
    assert single.agent_command("codex") == ["my-codex", "--acp"]
    # A command with an `=` in it that names no agent is a plain command, never mistaken for a pair.
    assert from_flags("--agent-cmd", "my-agent --mode=acp").agent_cmd == ["my-agent", "--mode=acp"]


@pytest.mark.parametrize(("flags", "words"), [
    (["--agent", "claude", "--agent", "codex", "--agent-cmd", "my-agent"], "give --agent-cmd NAME=COMMAND"),
    (["--agent", "claude", "--agent-cmd", "codex=my-codex"], "add --agent codex"),
    (["--agent-cmd", "a", "--agent-cmd", "b"], "given twice"),
])
def test_a_command_that_names_no_offered_agent_is_refused_saying_what_to_do(flags: list[str], words: str) -> None:
    with pytest.raises((ValueError, ConfigurationError), match=words):
        from_flags(*flags)


def test_a_refused_agent_command_never_quotes_the_key() -> None:
    key = "k-do-not-print-0123456789"
    with pytest.raises(ValueError, match="NAME=COMMAND") as refused:
        from_flags("--agent", "claude,codex", "--agent-cmd", "my-agent", env={"OPENAB_ACP_AUTH_KEY": key})
    assert key not in str(refused.value)


# -- the ACP handshake (the gateway with a scripted agent standing in) ------------------------------------------


async def test_the_handshake_offers_the_agents_and_session_new_picks_one() -> None:
    backend = ScriptedAgent()
    async with run_gateway(backend=backend, agent=["claude", "codex"]) as gateway, \
            connect_extension(gateway.ws_url, gateway.token) as ext:
        init = await ext.initialize()
        assert init["_meta"][AGENTS] == [{"id": "claude", "title": "Claude Code"}, {"id": "codex", "title": "Codex"}]

        default = await ext.request("session/new", {"cwd": "/", "mcpServers": []})
        chosen = await ext.request("session/new", {"cwd": "/", "mcpServers": [], "_meta": {AGENT: "codex"}})
        assert default["_meta"] == {AGENT: "claude"} and chosen["_meta"] == {AGENT: "codex"}

        with pytest.raises(RemoteError) as unknown:
            await ext.request("session/new", {"cwd": "/", "mcpServers": [], "_meta": {AGENT: "gemini"}})
        assert unknown.value.code == -32602
        assert "'gemini' is not an agent this gateway offers; choose one of claude, codex" in str(unknown.value)
        assert len(gateway.pod.sessions) == 2, "a refused choice makes no session"

        # A resumed session keeps its agent, whatever the resume names, and says which it is.
        resumed = await ext.request("session/resume", {"sessionId": chosen["sessionId"], "cwd": "/",
                                                       "_meta": {AGENT: "claude"}})
        assert resumed == {"_meta": {AGENT: "codex"}}
        # A bare ACP client gets the bare ACP answer.
        assert await ext.request("session/resume", {"sessionId": chosen["sessionId"], "cwd": "/"}) == {}
        session = gateway.pod.sessions.get(chosen["sessionId"])
        assert session is not None and session.agent == "codex"


async def test_a_session_the_pod_forgot_comes_back_with_its_agent_while_offered() -> None:
    async with run_gateway(backend=ScriptedAgent(), agent=["claude", "codex"]) as gateway, \
            connect_extension(gateway.ws_url, gateway.token) as ext:
        await ext.initialize()
        forgotten = "sess_00000000-0000-4000-8000-000000000001"
        gone = "sess_00000000-0000-4000-8000-000000000002"
        # After a pod restart: the extension names the agent it chose; one no longer offered falls to the default.
        kept = await ext.request("session/resume", {"sessionId": forgotten, "cwd": "/", "_meta": {AGENT: "codex"}})
        fell_back = await ext.request("session/resume", {"sessionId": gone, "cwd": "/", "_meta": {AGENT: "goose"}})
        # Taken up afresh: the pod had no such session (the panel tells a person who went back to an old chat).
        fresh = "dev.openab/fresh"
        assert kept == {"_meta": {AGENT: "codex", fresh: True}}
        assert fell_back == {"_meta": {AGENT: "claude", fresh: True}}


# -- the runtime: each session's agent started from its own recipe ----------------------------------------------


async def test_each_session_runs_the_agent_it_chose_from_that_agents_recipe(tmp_path: Path) -> None:
    # The built-in agent stands in for both CLIs; the recipe's environment tells which one the pod started.
    async with run_pod(tmp_path / "state", agent=["claude", "codex"],
                       agent_cmds={"claude": BUILTIN, "codex": BUILTIN}) as pod, pod.extension() as ext:
        FakeBrowser(ext)
        as_claude = await open_session(pod, ext)
        as_codex = await open_session(pod, ext, _meta={AGENT: "codex"})
        turns = [await prompt(ext, sid, "hello") for sid in (as_claude, as_codex)]
        assert all(t.error is None and t.result == {"stopReason": "end_turn"} for t in turns), turns

        pids = pod.runtime.agents
        claude_env, codex_env = environ(pids[as_claude] or 0), environ(pids[as_codex] or 0)
        assert claude_env.get("ENABLE_TOOL_SEARCH") == "false", "claude's recipe environment"
        # Room for a whole default snapshot however Claude counts its tokens (docs/extension.md, the budget).
        assert int(claude_env["MAX_MCP_OUTPUT_TOKENS"]) >= 2 * 24_000
        assert "ENABLE_TOOL_SEARCH" not in codex_env

        # Resumed on another socket, naming another agent: the session still runs codex, even after its
        # process is gone and a prompt starts a fresh one.
        async with pod.extension() as again:
            FakeBrowser(again)
            await again.request("session/resume", {"sessionId": as_codex, "cwd": "/", "mcpServers": [BROWSER_SERVER],
                                                    "_meta": {AGENT: "claude"}})
            await pod.pod.tunnels.wait_attached(as_codex, timeout=15)
            with changed(pod.runtime.settings, agent_idle_ttl=0.001):
                pod.runtime.sweep_idle()
            turn = await prompt(again, as_codex, "hello again")
            assert turn.error is None
            fresh = pod.runtime.agents[as_codex]
            assert fresh != pids[as_codex], "the idle sweep stopped the first process"
            assert "ENABLE_TOOL_SEARCH" not in environ(fresh or 0), "the fresh process is codex again"
