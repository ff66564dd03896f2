"""The runtime's settings as an operator gives them: OPENAB_* variables, flags over them, and refusals."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import ValidationError

from openab.core.agents.recipes import recipe_for
from openab.core.settings import Settings


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
    from openab.gateway.cli import build_parser
    from openab.gateway.run_command import runtime_overrides

    by_flag = source == "flag"
    args = build_parser().parse_args(["run", "--agent", "claude-code"] if by_flag else ["run"])
    env = {} if by_flag else {"OPENAB_AGENT": "claude-code"}
    assert Settings.from_env(env, **runtime_overrides(args)).agent == ["claude"]
    with pytest.raises(ValidationError, match="choose one of builtin, claude, codex"):
        Settings.from_env({"OPENAB_AGENT": "hal9000"})


def test_openab_version_prints_the_installed_version() -> None:
    from importlib.metadata import version

    done = subprocess.run([sys.executable, "-m", "openab.gateway.cli", "--version"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"openab {version('openab')}\n"
