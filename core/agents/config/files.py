"""Put the ``openab_browser`` MCP server into each agent CLI's own config file, and take it out again.

One set of writers serves both ways of reaching the browser tools:

* proxy: ``HttpEndpoint(url, token)``, the per-session loopback Streamable HTTP server;
* bridge: ``StdioCommand()``, the static ``openab browser-bridge`` stdio relay.

Every write merges into the existing file (the user's other servers and keys stay), is atomic
(temp file in the same folder, then ``os.replace``) and leaves the file mode 0600, because proxy
entries carry a bearer token. A file we cannot parse is backed up next to itself and the write is
refused: we never guess at a user's file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import tomlkit
import tomlkit.exceptions
import tomlkit.items

from ...errors import ConfigError

__all__ = [
    "AGENTS",
    "SERVER_NAME",
    "ConfigError",
    "ConfigFile",
    "Endpoint",
    "HttpEndpoint",
    "StdioCommand",
    "Written",
    "agent_name",
    "config_files",
    "config_write",
    "entry",
    "expands_token",
    "strip",
    "write",
    "write_private",
]

SERVER_NAME = "openab_browser"
# Kiro agent files are default-deny: a server's tools are usable only when "@<server>" is allowed.
KIRO_GRANT = "@" + SERVER_NAME

Json = dict[str, Any]
Format = Literal["json", "toml", "yaml"]
Base = Literal["dir", "home"]



@dataclass(frozen=True)
class HttpEndpoint:
    """The proxy: a loopback Streamable HTTP MCP server gated by a bearer token.

    With ``token_env`` set, clients that expand environment variables get a reference to that
    variable instead of the literal token (the agent process must then carry it in its env).
    """

    url: str
    token: str = field(repr=False)
    token_env: str | None = None


@dataclass(frozen=True)
class StdioCommand:
    """The bridge: a stdio MCP relay the agent CLI spawns itself."""

    command: str = "openab"
    args: tuple[str, ...] = ("browser-bridge",)


Endpoint = HttpEndpoint | StdioCommand


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
    entry: Callable[[Endpoint], Json]
    path: str
    base: Base
    servers_key: str = "mcpServers"
    format: Format = "json"
    verify: str = ""
    # (VAR, path under $VAR): the variable that moves a user file, as CODEX_HOME moves ~/.codex.
    moved_by: tuple[str, str] | None = None


_AGENTS: dict[str, _Agent] = {
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
    "vscode": _Agent(_vscode, ".vscode/mcp.json", "dir", "servers"),
    "windsurf": _Agent(_windsurf, ".codeium/windsurf/mcp_config.json", "home"),
}
AGENTS: tuple[str, ...] = tuple(_AGENTS)

# The commands people launch, mapped to the config they read.
_ALIASES = {
    "claude-code": "claude",
    "claude-agent-acp": "claude",
    "claude-code-acp": "claude",
    "codex-acp": "codex",
    "copilot-cli": "copilot",
    "cursor-agent": "cursor",
    "gemini-cli": "gemini",
    "kiro-cli": "kiro",
    "code": "vscode",
    "opencode-ai": "opencode",
}


def agent_name(name: str) -> str:
    """The writer name for an agent name or command (``claude-agent-acp`` -> ``claude``)."""
    key = Path(name).name.lower()
    key = _ALIASES.get(key, key)
    if key not in _AGENTS:
        raise ConfigError(f"unknown agent {name!r}: choose one of {', '.join(AGENTS)}")
    return key


def expands_token(agent: str, token_env: str | None) -> bool:
    """Whether ``agent``'s entry can refer to the token by its variable instead of holding it."""
    if not token_env:
        return False
    probe = "openab-token-probe"
    return probe not in json.dumps(entry(agent, HttpEndpoint("http://127.0.0.1/mcp", probe, token_env)))


def entry(agent: str, endpoint: Endpoint) -> Json:
    """The ``openab_browser`` entry exactly as ``agent`` wants it in its config file."""
    return _AGENTS[agent_name(agent)].entry(endpoint)


# -- files ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigFile:
    """One file a writer touches. ``kind`` is "servers" (the CLI's MCP server list) or, for Claude
    and Kiro, "approval" / "kiro-agent" (files that also have to name our server)."""

    path: Path
    format: Format
    servers_key: str
    kind: Literal["servers", "approval", "kiro-agent"] = "servers"


def config_files(
    agent: str, *, dir: Path | None = None, home: Path | None = None, env: Mapping[str, str] | None = None
) -> list[ConfigFile]:
    """The files ``write(agent, ...)`` touches: project files under ``dir`` (default: the current
    directory), user files under ``home`` or where the agent's ``env`` moves them (CODEX_HOME,
    COPILOT_HOME, XDG_CONFIG_HOME). ``env`` defaults to ours only when ``home`` is not given."""
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


def write(
    agent: str,
    endpoint: Endpoint,
    *,
    dir: Path | None = None,
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> list[Path]:
    """Merge the ``openab_browser`` entry into every config file of ``agent``; returns the paths.

    All files are read and checked before any is written, so a refusal leaves every file as it was.
    """
    ours, files = _targets(agent, endpoint, dir, home, env)
    with _locked(files):
        docs = [(f, _load(f)) for f in files]
        for f, doc in docs:
            _servers(doc, f)  # refuse a wrong shape before anything is written
        for f, doc in docs:
            _put(doc, f, ours)
            _save(f, doc)
    return [f.path for f in files]


def strip(
    agent: str,
    endpoint: Endpoint,
    *,
    dir: Path | None = None,
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> list[Path]:
    """Remove the ``openab_browser`` entry where it is still ours (same url, or same command).

    Another session may have written its own url into a shared file since; that entry is left
    alone, and so are the approvals that go with it. Returns the paths that changed.
    """
    ours, files = _targets(agent, endpoint, dir, home, env)
    changed: list[Path] = []
    with _locked(files):
        docs = [(f, _load(f)) for f in files if f.path.exists()]
        main = next((doc for f, doc in docs if f.kind == "servers"), None)
        if main is None or not _is_ours(_servers(main, files[0]).get(SERVER_NAME), ours):
            return changed
        for f, doc in docs:
            if _remove(doc, f, ours):
                _save(f, doc)
                changed.append(f.path)
    return changed


def _targets(
    agent: str, endpoint: Endpoint, dir: Path | None, home: Path | None, env: Mapping[str, str] | None
) -> tuple[Json, list[ConfigFile]]:
    name = agent_name(agent)
    return entry(name, endpoint), config_files(name, dir=dir, home=home, env=env)


@dataclass(frozen=True)
class Written:
    """What ``config_write`` did: the text to print, and the files it wrote."""

    text: str
    paths: list[Path]


def config_write(
    agent: str,
    *,
    mode: Literal["proxy", "bridge"] = "bridge",
    dir: Path | None = None,
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
    url: str | None = None,
    token: str | None = None,
    token_env: str | None = None,
) -> Written:
    """``openab config write --agent NAME [--dir D] [--mode proxy|bridge]``.

    Bridge mode writes the static ``openab browser-bridge`` entry, the one to use by hand. Proxy
    mode needs the url of a running session (the gateway writes those itself) and its token, or
    ``token_env``, the variable holding it, for agents that expand one (``expands_token``).
    The returned text never contains the token.
    """
    name = agent_name(agent)
    endpoint: Endpoint
    if mode == "bridge":
        endpoint = StdioCommand()
        how = "openab browser-bridge (stdio)"
    elif mode == "proxy":
        if not url or not (token or token_env):
            raise ConfigError(
                "proxy mode needs a session's url and token; the gateway writes them for each session. "
                "For a static entry use --mode bridge"
            )
        if not token and not expands_token(name, token_env):
            raise ConfigError(f"{name} cannot read the token from ${token_env}: pass the token itself")
        endpoint = HttpEndpoint(url, token or "", token_env)
        how = f"{url} (Streamable HTTP, bearer token)"
    else:
        raise ConfigError(f"unknown mode {mode!r}: choose proxy or bridge")
    paths = write(name, endpoint, dir=dir, home=home, env=env)
    lines = [f"{SERVER_NAME} -> {how} for {name}:"] + [f"  wrote {p}" for p in paths]
    if _AGENTS[name].verify:
        lines.append(f"check with: {_AGENTS[name].verify}")
    return Written("\n".join(lines), paths)


# -- merging -------------------------------------------------------------------------------------------

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


def _is_ours(existing: object, ours: Json) -> bool:
    if not isinstance(existing, MutableMapping):
        return False
    keys = [k for k in _IDENTITY_KEYS if k in ours]
    return bool(keys) and all(_plain(existing.get(k)) == ours[k] for k in keys)


def _plain(value: object) -> object:
    # tomlkit items compare equal to plain values only sometimes; unwrap them first.
    if isinstance(value, tomlkit.items.Item):
        return value.unwrap()
    return value


def _servers(doc: MutableMapping[str, Any], f: ConfigFile) -> Any:
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


def _put(doc: MutableMapping[str, Any], f: ConfigFile, ours: Json) -> None:
    target = _servers(doc, f)
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


def _remove(doc: MutableMapping[str, Any], f: ConfigFile, ours: Json) -> bool:
    target = doc.get(f.servers_key)
    if f.kind == "approval":
        if isinstance(target, list) and SERVER_NAME in target:
            target.remove(SERVER_NAME)
            return True
        return False
    changed = False
    if isinstance(target, MutableMapping) and _is_ours(target.get(SERVER_NAME), ours):
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


# -- reading and writing files -------------------------------------------------------------------------


def _load(f: ConfigFile) -> MutableMapping[str, Any]:
    path = f.path
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    if not text.strip() and f.format == "json":
        return {}
    try:
        doc: object = _parse(text, f.format)
    except (ValueError, tomlkit.exceptions.ParseError) as exc:
        backup = _backup(path)
        raise ConfigError(
            f"{path} could not be read as {f.format.upper()} ({exc}); left it as it is and kept a copy at {backup}. "
            f"Fix or remove it, then write again"
        ) from exc
    if not isinstance(doc, MutableMapping):
        raise ConfigError(f"{path}: the top level is not an object; fix it by hand and try again")
    return doc


def _parse(text: str, fmt: Format) -> object:
    if fmt == "toml":
        return tomlkit.parse(text)
    if fmt == "yaml":
        return _yaml_load(text)
    return json.loads(text)


def _dump(doc: MutableMapping[str, Any], fmt: Format) -> str:
    if fmt == "toml":
        return tomlkit.dumps(doc)
    if fmt == "yaml":
        return _yaml_dump(doc)
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _save(f: ConfigFile, doc: MutableMapping[str, Any]) -> None:
    text = _dump(doc, f.format)
    path = _real(f.path)
    with contextlib.suppress(OSError):
        if path.read_text(encoding="utf-8") == text:
            os.chmod(path, 0o600)
            return
    write_private(path, text)


def _real(path: Path) -> Path:
    # Write through a symlink (dotfile managers link config files) instead of replacing the link.
    return Path(os.path.realpath(path))


def write_private(path: Path, text: str) -> None:
    """Atomically replace ``path`` with ``text``, mode 0600 from the first byte."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _backup(path: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1000):
        backup = path.with_name(f"{path.name}.{stamp}{f'-{n}' if n else ''}.bak")
        if not backup.exists():
            break
    shutil.copy2(path, backup)
    os.chmod(backup, 0o600)  # it may hold a token
    return backup


@contextlib.contextmanager
def _locked(files: list[ConfigFile]) -> Iterator[None]:
    """Hold an exclusive flock on each file's folder, so two openab processes (two sessions in one
    pod) cannot interleave their read-modify-write of one file."""
    with contextlib.ExitStack() as stack:
        for folder in sorted({_real(f.path).parent for f in files}):
            if not folder.is_dir():
                continue
            fd = os.open(folder, os.O_RDONLY)
            stack.callback(os.close, fd)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield


# -- Goose's YAML --------------------------------------------------------------------------------------
# Goose keeps everything in one YAML file. We add no YAML library for one writer: our entry is
# written as a block under a block-style top-level `extensions:`; the rest of the file is kept
# line for line. Anything else (flow style, anchors) is refused with the entry to paste by hand.


def _yaml_load(text: str) -> MutableMapping[str, Any]:
    return _YamlDoc(text)


def _yaml_dump(doc: MutableMapping[str, Any]) -> str:
    assert isinstance(doc, _YamlDoc)
    return doc.dump()


class _YamlDoc(dict[str, Any]):
    """The top level of a Goose config: ``extensions`` parsed as far as we need, other text kept."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.lines = text.splitlines()
        heads = ("extensions:", "extensions: {}")
        self.ext_line = next((i for i, ln in enumerate(self.lines) if ln.rstrip() in heads), -1)
        if self.ext_line < 0 and any(ln.startswith("extensions") for ln in self.lines):
            raise ValueError("`extensions` is not a block mapping")
        self["extensions"] = _YamlExtensions(self._blocks())

    def _blocks(self) -> dict[str, list[str]]:
        # "" holds the comments between `extensions:` and the first extension.
        blocks: dict[str, list[str]] = {"": []}
        if self.ext_line < 0:
            return blocks
        name = ""
        for ln in self.lines[self.ext_line + 1 : self._ext_end()]:
            if ln.startswith("  ") and not ln.startswith("   ") and ln.rstrip().endswith(":"):
                name = ln.strip()[:-1]
                blocks[name] = []
            else:
                blocks[name].append(ln)
        return blocks

    def _ext_end(self) -> int:
        for i in range(self.ext_line + 1, len(self.lines)):
            ln = self.lines[i]
            if ln and not ln.startswith((" ", "#")):
                return i
        return len(self.lines)

    def dump(self) -> str:
        ext = self["extensions"]
        assert isinstance(ext, _YamlExtensions)
        body = ["extensions:", *ext.render()]
        if self.ext_line < 0:
            lines = [*self.lines, *body]
        else:
            lines = self.lines[: self.ext_line] + body + self.lines[self._ext_end() :]
        return "\n".join(lines) + "\n"


class _YamlExtensions(dict[str, Any]):
    """Extension blocks by name: our entry as a dict, the user's as their original lines."""

    def __init__(self, blocks: dict[str, list[str]]) -> None:
        super().__init__()
        for name, lines in blocks.items():
            self[name] = _yaml_parse_block(lines) if name == SERVER_NAME else _Verbatim(lines)

    def render(self) -> list[str]:
        out: list[str] = []
        for name, value in self.items():
            if name:
                out.append(f"  {name}:")
            out += value.lines if isinstance(value, _Verbatim) else _yaml_block(value, 4)
        return out


@dataclass
class _Verbatim:
    lines: list[str]


def _yaml_scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(value)  # a JSON string is a valid YAML double-quoted scalar


def _yaml_block(value: Json, indent: int) -> list[str]:
    pad = " " * indent
    out: list[str] = []
    for k, v in value.items():
        if isinstance(v, dict):
            out.append(f"{pad}{k}:" + (" {}" if not v else ""))
            out += [f"{pad}  {ik}: {_yaml_scalar(iv)}" for ik, iv in v.items()]
        elif isinstance(v, list):
            out.append(f"{pad}{k}: [{', '.join(_yaml_scalar(x) for x in v)}]")
        else:
            out.append(f"{pad}{k}: {_yaml_scalar(v)}")
    return out


def _yaml_parse_block(lines: list[str]) -> Json:
    """Read back a block written by ``_yaml_block`` (scalars, flow lists, one level of maps)."""
    out: Json = {}
    current: Json | None = None
    for ln in lines:
        if not ln.strip() or ln.lstrip().startswith("#"):
            continue
        depth = len(ln) - len(ln.lstrip())
        key, _, raw = ln.strip().partition(":")
        raw = raw.strip()
        if depth > 4 and current is not None:
            current[key] = _yaml_value(raw)
        elif raw in ("", "{}"):
            current = out[key] = {}
        else:
            current = None
            out[key] = _yaml_value(raw)
    return out


def _yaml_value(raw: str) -> Any:
    if raw in ("true", "false"):
        return raw == "true"
    if raw.startswith("["):
        inner = raw[1:-1].strip()
        return [_yaml_value(x.strip()) for x in inner.split(",")] if inner else []
    if raw.startswith('"'):
        return json.loads(raw)
    if raw.lstrip("-").isdigit():
        return int(raw)
    return raw.strip("'")
