"""Merging our ``openab_browser`` entry into a config document, and taking it out, so that nothing of the
user's is lost: their other servers, their settings on our entry, and any entry that is not ours.

Documents are the parsed files as :mod:`.files` loads them (plain dicts, tomlkit documents, or
:mod:`.goose_yaml` documents); this module never touches the disk.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import tomlkit
import tomlkit.items

from ...errors import ConfigError
from ...mcp_vocabulary import SERVER_NAME
from .formats import KIRO_GRANT, ConfigFile, Format, Json

__all__ = ["is_ours", "put", "remove", "servers"]

# Keys that say how to reach a server. Everything else on our entry (autoApprove, trust, timeout,
# disabled...) is the user's setting and survives a rewrite; transport keys never mix, because
# Codex and others refuse an entry that has both stdio and HTTP fields.
_TRANSPORT_KEYS = frozenset(
    {"type", "url", "httpUrl", "serverUrl", "uri", "headers", "http_headers", "bearer_token_env_var",
     "env_http_headers", "command", "cmd", "args", "env", "envs", "env_keys"}
)
# Settings we write that a user may since have changed on our entry: theirs win on a rewrite.
_USER_SETTINGS = frozenset(
    {"disabled", "enabled", "trust", "timeout", "startup_timeout_sec", "tool_timeout_sec"}
)
# The keys that identify an entry as ours when stripping.
_IDENTITY_KEYS = ("url", "httpUrl", "serverUrl", "uri", "command", "cmd", "args")


def _users(key: str, ours: Json) -> bool:
    """Whether an existing entry's ``key`` is the user's to keep across our rewrite."""
    return key not in _TRANSPORT_KEYS and (key not in ours or key in _USER_SETTINGS)


def is_ours(existing: object, ours: Json) -> bool:
    """Whether ``existing`` is the entry ``ours`` describes (same url, or same command and args)."""
    if not isinstance(existing, MutableMapping):
        return False
    keys = [k for k in _IDENTITY_KEYS if k in ours]
    return bool(keys) and all(_plain(existing.get(k)) == ours[k] for k in keys)


def _plain(value: object) -> object:
    # tomlkit items compare equal to plain values only sometimes; unwrap them first.
    if isinstance(value, tomlkit.items.Item):
        return value.unwrap()
    return value


def servers(doc: MutableMapping[str, Any], f: ConfigFile) -> Any:
    """The container named ``f.servers_key`` (created when absent); refuse one of the wrong type."""
    want: type = list if f.kind == "approval" else MutableMapping
    current = doc.get(f.servers_key)
    if current is None:
        current = [] if want is list else _new_table(f.format)
        doc[f.servers_key] = current
        current = doc[f.servers_key]
    if not isinstance(current, want):
        raise ConfigError(
            f"{f.path}: {f.servers_key!r} is a {type(_plain(current)).__name__}, expected "
            f"{'a list' if want is list else 'an object'}; fix it by hand and try again"
        )
    return current


def _new_table(fmt: Format) -> Any:
    # A super table writes [mcp_servers.openab_browser] without an empty [mcp_servers] header.
    return tomlkit.table(is_super_table=True) if fmt == "toml" else {}


def put(doc: MutableMapping[str, Any], f: ConfigFile, ours: Json) -> None:
    """Put ``ours`` into ``doc`` as ``f`` wants it (an entry, an approval, or an entry and a Kiro grant),
    keeping the user's settings on an entry already there."""
    target = servers(doc, f)
    if f.kind == "approval":
        if SERVER_NAME not in target:
            target.append(SERVER_NAME)
        return
    old = target.get(SERVER_NAME)
    if isinstance(old, MutableMapping):
        ours = {**ours, **{k: _plain(v) for k, v in old.items() if _users(k, ours)}}
    target[SERVER_NAME] = _toml_entry(ours) if f.format == "toml" else ours
    if f.kind == "kiro-agent":
        tools = doc.get("allowedTools")
        if isinstance(tools, list) and KIRO_GRANT not in tools:
            tools.append(KIRO_GRANT)


def remove(doc: MutableMapping[str, Any], f: ConfigFile, ours: Json) -> bool:
    """Take what :func:`put` added out of ``doc``, where it is still ours; whether anything changed."""
    target = doc.get(f.servers_key)
    if f.kind == "approval":
        if isinstance(target, list) and SERVER_NAME in target:
            target.remove(SERVER_NAME)
            return True
        return False
    changed = False
    if isinstance(target, MutableMapping) and is_ours(target.get(SERVER_NAME), ours):
        del target[SERVER_NAME]
        changed = True
    if f.kind == "kiro-agent":
        tools = doc.get("allowedTools")
        if isinstance(tools, list) and KIRO_GRANT in tools:
            tools.remove(KIRO_GRANT)
            changed = True
    return changed


def _toml_entry(value: Json) -> tomlkit.items.Table:
    table = tomlkit.table()
    for k, v in value.items():
        # Header maps stay on one line, as Codex's docs write them.
        table[k] = _inline(v) if isinstance(v, dict) else v
    return table


def _inline(value: Json) -> tomlkit.items.InlineTable:
    table = tomlkit.inline_table()
    table.update(value)
    return table
