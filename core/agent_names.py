"""The names of the agents openab runs, and the other spellings people use for them, said once.

``--agent``, ``OPENAB_AGENT``, the recipes (:mod:`openab_browser.core.agents.recipes`) and the config writers
(:mod:`openab_browser.core.agents.config`) all resolve a word through :func:`canonical_agent`, so an alias that works in
one place works in all of them. The config writers also serve MCP clients that openab does not run as an ACP
agent (editors such as VS Code): those are :data:`CLIENT_NAMES`, resolved by :func:`canonical_client`.

This module imports nothing heavy: ``openab --help`` builds its ``--agent`` choices from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from .errors import ConfigurationError

__all__ = [
    "AGENT_ALIASES",
    "AGENT_CHOICES",
    "AGENT_NAMES",
    "CLIENT_ALIASES",
    "CLIENT_NAMES",
    "CONFIG_NAMES",
    "canonical_agent",
    "canonical_client",
]

# What the pod can run, in the order help texts and errors list them; "custom" is any ACP command
# (``--agent-cmd``).
AGENT_NAMES: Final[tuple[str, ...]] = (
    "builtin", "claude", "codex", "gemini", "opencode", "cursor", "kiro", "copilot", "goose", "qwen", "auggie",
    "custom",
)

# The commands and package names people know the agents by.
AGENT_ALIASES: Final[Mapping[str, str]] = MappingProxyType({
    "claude-code": "claude",
    "claude-agent-acp": "claude",
    "claude-code-acp": "claude",
    "codex-acp": "codex",
    "copilot-cli": "copilot",
    "cursor-agent": "cursor",
    "gemini-cli": "gemini",
    "kiro-cli": "kiro",
    "opencode-ai": "opencode",
    "qwen-code": "qwen",
})

# Every spelling ``--agent`` accepts, for argparse ``choices``.
AGENT_CHOICES: Final[tuple[str, ...]] = (*AGENT_NAMES, *AGENT_ALIASES)

# MCP clients that read an openab_browser entry from their own config (``openab config write``) but that the
# pod does not run as an ACP agent.
CLIENT_NAMES: Final[tuple[str, ...]] = ("vscode", "windsurf")
CLIENT_ALIASES: Final[Mapping[str, str]] = MappingProxyType({"code": "vscode"})

# Whose config ``openab config write`` writes, in the order its help lists them: every agent CLI (not the built-in
# agent, not a custom command) and every other MCP client. core/agents/config/formats.py has a writer for each of
# these and no other, so the help cannot leave one out again.
CONFIG_NAMES: Final[tuple[str, ...]] = tuple(sorted({*AGENT_NAMES, *CLIENT_NAMES} - {"builtin", "custom"}))


def _word(word: str) -> str:
    # OPENAB_AGENT values arrive with stray case and spaces; a flag's value is held to the same rule.
    return word.strip().lower()


def canonical_agent(word: str) -> str:
    """The agent name for ``word``, a name or an alias (``claude-agent-acp`` -> ``claude``).

    Raises :class:`~openab_browser.core.errors.ConfigurationError` (a ``ValueError``) naming the choices for a word
    that is neither.
    """
    key = _word(word)
    key = AGENT_ALIASES.get(key, key)
    if key not in AGENT_NAMES:
        raise ConfigurationError(f"unknown agent {word!r}: choose one of {', '.join(AGENT_NAMES)}")
    return key


def canonical_client(word: str) -> str:
    """The name for ``word`` among the agents and the other MCP clients (``code`` -> ``vscode``).

    Raises :class:`~openab_browser.core.errors.ConfigurationError` naming the choices for an unknown word.
    """
    key = _word(word)
    key = CLIENT_ALIASES.get(key, key)
    if key in CLIENT_NAMES:
        return key
    try:
        return canonical_agent(key)
    except ConfigurationError:
        choices = ", ".join((*AGENT_NAMES, *CLIENT_NAMES))
        raise ConfigurationError(f"unknown agent {word!r}: choose one of {choices}") from None
