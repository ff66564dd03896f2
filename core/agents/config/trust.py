"""Folder trust: Claude Code and Gemini CLI load a project's MCP servers only in a folder the person has told
them to trust, so a project file alone never starts a program. Until then ``claude mcp list`` shows a project
server "Pending approval" and ``gemini mcp list`` shows it "Disabled", whatever openab wrote.

Each CLI keeps that answer in a file of its own: Claude in its global config (``~/.claude.json``, or
``$CLAUDE_CONFIG_DIR/.claude.json``) as ``projects[<folder>].hasTrustDialogAccepted``, Gemini in
``~/.gemini/trustedFolders.json`` as ``{"<folder>": "TRUST_FOLDER"}``. This module reads those records the way
the CLIs do (Claude 2.1, Gemini 0.61, as their own ``mcp list`` showed them) and, only when the person asks
(``openab config write --trust-folder``), records the trust of that one folder: trusting a folder lets every
program its files name run, which is the person's decision, never a side effect of writing our entry.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ...errors import ConfigError
from .files import MAX_FILE_BYTES, update_record
from .formats import agent_name

__all__ = ["TRUSTING_AGENTS", "FolderTrust", "check_trustable", "folder_trust", "trust_folder"]

# The CLIs that gate a project's MCP servers on the folder's trust.
TRUSTING_AGENTS = ("claude", "gemini")

Source = Literal["record", "env", "off", "none"]


@dataclass(frozen=True)
class FolderTrust:
    """What ``agent`` thinks of ``folder``: ``trusted``, and why (``source``: a trust ``record`` in
    ``record_file``, an ``env`` variable, folder trust turned ``off`` in its settings, or ``none``)."""

    agent: str
    folder: Path
    record_file: Path
    trusted: bool
    source: Source

    def advice(self) -> list[str]:
        """The ways to trust the folder, each one step the person takes (any one will do); empty when it is
        trusted."""
        if self.trusted:
            return []
        if self.source == "env":
            return [f"unset GEMINI_CLI_TRUST_WORKSPACE=false / GEMINI_RESTRICTED_MODE=true: they tell {self.agent} "
                    "to trust no folder at all"]
        dialog = "accept its trust dialog" if self.agent == "claude" else 'choose "Trust folder" in its trust dialog'
        return [f"run `{self.agent}` in {self.folder} once and {dialog}",
                f"run `openab config write --agent {self.agent} --dir {self.folder} --trust-folder` (records in "
                f"{self.record_file} that you trust {self.folder}, that folder alone)"]

    def effect(self) -> str:
        """What an untrusted folder does to our entry, in the words of the CLI's ``mcp list``."""
        if self.agent == "claude":
            return ('`claude mcp list` shows openab_browser "Pending approval" and an interactive claude does not '
                    "load it")
        return '`gemini mcp list` shows openab_browser "Disabled" and gemini loads no MCP server there'


def folder_trust(
    agent: str, folder: Path, *, home: Path | None = None, env: Mapping[str, str] | None = None
) -> FolderTrust | None:
    """Whether ``agent`` trusts ``folder``, read from its own record; ``None`` for a CLI with no folder trust.

    ``home`` and ``env`` place the record as :func:`.formats.config_files` places config files: ``env``
    defaults to ours only when ``home`` is not given. An unreadable record counts as no trust (the CLI's own
    ``mcp list`` then says what is wrong with it).
    """
    name = agent_name(agent)
    if name not in TRUSTING_AGENTS:
        return None
    env = _env(home, env)
    key = Path(os.path.realpath(folder))
    record_file = _record_file(name, home, env)
    if name == "claude":
        return FolderTrust(name, key, record_file, _claude_trusts(_read(record_file), key), "record")
    if env.get("GEMINI_RESTRICTED_MODE") == "true" or env.get("GEMINI_CLI_TRUST_WORKSPACE") == "false":
        return FolderTrust(name, key, record_file, False, "env")
    if env.get("GEMINI_CLI_TRUST_WORKSPACE") == "true":
        return FolderTrust(name, key, record_file, True, "env")
    security = _read(_gemini_home(home, env) / ".gemini" / "settings.json").get("security")
    folder_setting = security.get("folderTrust") if isinstance(security, dict) else None
    if isinstance(folder_setting, dict) and folder_setting.get("enabled") is False:
        return FolderTrust(name, key, record_file, True, "off")
    return FolderTrust(name, key, record_file, _gemini_trusts(_read(record_file), key), "record")


def check_trustable(agent: str, folder: Path, *, home: Path | None = None,
                    env: Mapping[str, str] | None = None) -> None:
    """Refuse (:class:`ConfigError`) what :func:`trust_folder` will not record: an agent with no folder trust,
    the home folder and ``/``, whose trust would cover every project under them (and Claude never keeps the
    home folder's trust at all)."""
    name = agent_name(agent)
    if name not in TRUSTING_AGENTS:
        raise ConfigError(f"--trust-folder is for {' and '.join(TRUSTING_AGENTS)}, which load a project's MCP "
                          f"servers only in a folder you trust; {name} loads its entry without that step")
    env = _env(home, env)
    key = Path(os.path.realpath(folder))
    user_home = Path(os.path.realpath(home if home is not None else env.get("HOME") or Path.home()))
    if key in (user_home, Path(key.anchor)):
        never = " (and claude never keeps the home folder's trust)" if name == "claude" and key == user_home else ""
        raise ConfigError(
            f"openab does not record {name}'s trust for {key}: it would trust every project under it{never}. Give "
            "the project's own folder as --dir, and trust that"
        )


def trust_folder(
    agent: str, folder: Path, *, home: Path | None = None, env: Mapping[str, str] | None = None,
    check_only: bool = False,
) -> Path:
    """Record in ``agent``'s own file that the person trusts ``folder`` (that folder only), as the CLI's trust
    dialog would, keeping the rest of the file; returns the path written. Refuses what
    :func:`check_trustable` refuses, and a record file it may not write (a link another user made), cannot read
    or that has a shape the CLI would not have written. ``check_only``: refuse, but write nothing."""
    check_trustable(agent, folder, home=home, env=env)
    name = agent_name(agent)
    env = _env(home, env)
    key = Path(os.path.realpath(folder))

    def claude(doc: MutableMapping[str, Any]) -> None:
        projects = doc.setdefault("projects", {})
        if not isinstance(projects, MutableMapping):
            raise ConfigError(f"{record}: \"projects\" is not an object; claude wrote it otherwise, so openab "
                              "leaves it alone: run `claude` in the folder and accept its trust dialog instead")
        project = projects.setdefault(str(key), {})
        if not isinstance(project, MutableMapping):
            raise ConfigError(f"{record}: projects[{str(key)!r}] is not an object; openab leaves it alone: run "
                              "`claude` in the folder and accept its trust dialog instead")
        project["hasTrustDialogAccepted"] = True

    def gemini(doc: MutableMapping[str, Any]) -> None:
        doc[str(key)] = "TRUST_FOLDER"

    record = _record_file(name, home, env)
    return update_record(record, claude if name == "claude" else gemini, check_only=check_only)


def _env(home: Path | None, env: Mapping[str, str] | None) -> Mapping[str, str]:
    if env is not None:
        return env
    return os.environ if home is None else {}


def _record_file(agent: str, home: Path | None, env: Mapping[str, str]) -> Path:
    base = Path(home) if home is not None else Path(env.get("HOME") or Path.home())
    if agent == "claude":
        config_dir = env.get("CLAUDE_CONFIG_DIR")
        return Path(config_dir) / ".claude.json" if config_dir else base / ".claude.json"
    moved = env.get("GEMINI_CLI_TRUSTED_FOLDERS_PATH")
    return Path(moved) if moved else _gemini_home(home, env) / ".gemini" / "trustedFolders.json"


def _gemini_home(home: Path | None, env: Mapping[str, str]) -> Path:
    moved = env.get("GEMINI_CLI_HOME")
    if moved:
        return Path(moved)
    return Path(home) if home is not None else Path(env.get("HOME") or Path.home())


def _read(path: Path) -> dict[str, Any]:
    """A JSON object from ``path``; empty when it is missing, too large or not one (reading only)."""
    try:
        # O_NONBLOCK, and a regular file only: a FIFO planted there must not hold `openab doctor` up.
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as f:
            st = os.fstat(f.fileno())
            ok = stat.S_ISREG(st.st_mode) and st.st_size <= MAX_FILE_BYTES
            data = f.read(MAX_FILE_BYTES + 1) if ok else b""
        doc = json.loads(data) if data and len(data) <= MAX_FILE_BYTES else None
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _git_root(folder: Path) -> Path | None:
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def _claude_trusts(doc: Mapping[str, Any], key: Path) -> bool:
    # claude mcp list honours the folder's own record, or one on a folder between it and its git repository's
    # root; a trusted parent outside the repository (or of a folder in no repository) does not count.
    projects = doc.get("projects")
    if not isinstance(projects, dict):
        return False
    root = _git_root(key)
    candidates = [key] if root is None else [key, *(p for p in key.parents if p.is_relative_to(root))]
    return any(isinstance(projects.get(str(c)), dict) and projects[str(c)].get("hasTrustDialogAccepted") is True
               for c in candidates)


def _gemini_trusts(doc: Mapping[str, Any], key: Path) -> bool:
    # Gemini takes the longest rule whose folder holds this one: TRUST_PARENT names a folder by a child of it.
    best: tuple[int, object] = (-1, None)
    for rule, level in doc.items():
        folder = Path(rule).parent if level == "TRUST_PARENT" else Path(rule)
        if key.is_relative_to(os.path.realpath(folder)) and len(rule) > best[0]:
            best = (len(rule), level)
    return best[1] in ("TRUST_FOLDER", "TRUST_PARENT")
