"""The runtime's settings as an operator gives them: OPENAB_* variables, flags over them, and refusals."""

from __future__ import annotations

import asyncio
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from openab_browser.core.agents.recipes import recipe_for
from openab_browser.core.errors import ConfigurationError
from openab_browser.core.event_loop import loop_factory, run
from openab_browser.core.settings import Settings


def test_runtime_settings_come_from_openab_variables_and_flags_win() -> None:
    env = {"OPENAB_AGENT": " Codex ", "OPENAB_AGENT_CMD": 'my-agent --acp "two words"',
           "OPENAB_AGENT_ENV": "ANTHROPIC_API_KEY, LANG=C.UTF-8 OTHER", "OPENAB_PERMISSIONS": "AUTO",
           "OPENAB_AGENT_IDLE_TTL": "60", "OPENAB_MAX_TOOL_CALLS": "7"}
    settings = Settings.from_env(env, permissions="deny", agent_env=None)

    assert settings.agent == ["codex"]
    assert settings.agent_cmd == ["my-agent", "--acp", "two words"]
    assert settings.agent_env == ["ANTHROPIC_API_KEY", "LANG=C.UTF-8", "OTHER"]
    assert settings.permissions == "deny"
    assert (settings.agent_idle_ttl, settings.max_tool_calls_per_turn) == (60, 7)


def test_defaults_are_the_builtin_agent_under_browser_only() -> None:
    settings = Settings.from_env({})
    assert (settings.agent, settings.permissions, settings.agent_cmd) == (["builtin"], "browser-only", None)
    assert recipe_for(settings.agent[0]).name == "builtin"


def test_a_wrong_policy_or_an_unknown_agent_is_refused_saying_what_to_choose() -> None:
    with pytest.raises(ValidationError):
        Settings.from_env({"OPENAB_PERMISSIONS": "yolo"})
    with pytest.raises(ValueError, match="choose one of builtin, claude, codex"):
        recipe_for("hal9000")
    with pytest.raises(ValueError, match="needs --agent-cmd"):
        recipe_for("custom")
    assert recipe_for("builtin", ["my-agent"]).name == "custom"
    assert recipe_for("claude-agent-acp").name == "claude"


@pytest.mark.parametrize("source", ["flag", "env"])
def test_agent_aliases_work_the_same_through_the_flag_and_the_variable(source: str) -> None:
    from openab_browser.gateway.cli import build_parser
    from openab_browser.gateway.run_command import runtime_overrides

    by_flag = source == "flag"
    args = build_parser().parse_args(["run", "--agent", "claude-code"] if by_flag else ["run"])
    env = {} if by_flag else {"OPENAB_AGENT": "claude-code"}
    assert Settings.from_env(env, **runtime_overrides(args)).agent == ["claude"]
    with pytest.raises(ValidationError, match="choose one of builtin, claude, codex"):
        Settings.from_env({"OPENAB_AGENT": "hal9000"})


def test_openab_version_prints_the_installed_version() -> None:
    from importlib.metadata import version

    done = subprocess.run([sys.executable, "-m", "openab_browser.gateway.cli", "--version"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"openab {version('openab-browser')}\n"


# -- the turn's limits that depend on each other -------------------------------------------------------------------

PANEL_WAIT_WORDS = "longer than the side panel waits for a prompt's answer"


def test_a_persons_wait_and_then_the_idle_timeout_must_fit_in_the_panels_wait_for_the_answer() -> None:
    assert Settings(permission_timeout=1200, prompt_idle_timeout=600).permission_timeout == 1200  # 1800: fits
    for given in ({"permission_timeout": 1700}, {"prompt_idle_timeout": 1700},
                  {"permission_timeout": 900, "prompt_idle_timeout": 901}):
        with pytest.raises(ValidationError, match=PANEL_WAIT_WORDS) as refused:
            Settings(**given)
        words = str(refused.value)
        assert "permission_timeout" in words and "prompt_idle_timeout" in words and "lower one of them" in words
    # Either may grow past the other's limits, as long as the two fit: the person's card stops the idle clock.
    assert Settings(permission_timeout=30, prompt_idle_timeout=1700).prompt_idle_timeout == 1700


def test_a_running_pods_limits_are_checked_again_when_one_is_changed() -> None:
    settings = Settings()
    with pytest.raises(ValidationError, match=PANEL_WAIT_WORDS):
        settings.prompt_idle_timeout = 1600
    with pytest.raises(ValidationError, match=PANEL_WAIT_WORDS):
        settings.permission_timeout = 1700
    assert (settings.prompt_idle_timeout, settings.permission_timeout) == (180, 300)  # refused: unchanged
    settings.cancel_grace = 600  # a cancel's grace runs alone: bound to neither
    settings.permission_timeout = 1


def test_the_defaults_keep_each_limit_inside_the_one_around_it() -> None:
    from openab_browser.core.mcp.tools import BROWSER_TOOLS
    from openab_browser.core.settings import PANEL_PROMPT_WAIT

    settings = Settings.from_env({})
    handoff = next(t for t in BROWSER_TOOLS if t["name"] == "browser_handoff")
    longest_handoff = handoff["inputSchema"]["properties"]["timeout_s"]["maximum"]
    # A handoff ends before its tool call times out, which ends before the turn idles out, which ends before the
    # agent is taken for silent: each says why to the one around it (docs/extension.md, docs/architecture.md).
    assert longest_handoff < settings.tunnel_timeout < settings.prompt_idle_timeout < settings.agent_silence_timeout
    assert settings.permission_timeout + settings.prompt_idle_timeout <= PANEL_PROMPT_WAIT


def test_the_idle_timeout_from_the_environment_is_refused_under_the_flags_too(tmp_path: Path) -> None:
    from openab_browser.gateway.cli import build_parser
    from openab_browser.gateway.run_command import runtime_overrides

    env = {"OPENAB_ACP_IDLE_TIMEOUT_SECS": "1700"}
    args = build_parser().parse_args(["run", "--agent-silence-timeout", "60"])
    with pytest.raises(ValidationError, match="OPENAB_ACP_IDLE_TIMEOUT_SECS"):
        Settings.from_env(env, **runtime_overrides(args))
    fits = Settings.from_env({"OPENAB_ACP_IDLE_TIMEOUT_SECS": "600"}, **runtime_overrides(args))
    assert (fits.prompt_idle_timeout, fits.agent_silence_timeout) == (600, 60)
    # What an operator sees: `openab run` says which settings and what to change, and starts nothing.
    done = subprocess.run([sys.executable, "-m", "openab_browser.gateway.cli", "run",
                           "--state-dir", str(tmp_path / "state"), "--agent-silence-timeout", "60"],
                          capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, **env})
    assert done.returncode == 2, done.stderr
    assert PANEL_WAIT_WORDS in done.stderr and "lower one of them" in done.stderr
    assert not (tmp_path / "state").exists()


def test_the_socket_caps_are_settings() -> None:
    """A hub's proxy or an ingress is one address for everyone behind it: an operator raises the per-address cap
    (256) to let 1,000 people's sockets through it (the cap in all still bounds it)."""
    settings = Settings.from_env({"OPENAB_MAX_CONNECTIONS": "2048", "OPENAB_MAX_CONNECTIONS_PER_PEER": "1500"})
    assert (settings.max_connections, settings.max_connections_per_peer) == (2048, 1500)
    assert (Settings.from_env({}).max_connections, Settings.from_env({}).max_connections_per_peer) == (1024, 256)
    with pytest.raises(ValidationError):
        Settings.from_env({"OPENAB_MAX_CONNECTIONS_PER_PEER": "0"})


def test_the_event_loop_is_uvloop_when_installed_and_a_missing_one_asked_for_says_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert loop_factory("auto")[0] == "uvloop"  # a dependency: installed wherever the suite runs
    assert loop_factory("asyncio")[0] == "asyncio"
    assert Settings.from_env({"OPENAB_EVENT_LOOP": "asyncio"}).event_loop == "asyncio"
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as on a platform uvloop has no wheel for
    assert loop_factory("auto")[0] == "asyncio"
    with pytest.raises(ConfigurationError, match=r"pip install uvloop, or .*--event-loop asyncio"):
        loop_factory("uvloop")
    main = asyncio.sleep(0)
    with pytest.raises(ConfigurationError):
        run(main, "uvloop")
    assert inspect.getcoroutinestate(main) == inspect.CORO_CLOSED  # not left to warn that it was never awaited
