"""Put the ``openab_browser`` MCP server into each agent CLI's own config file, and take it out again.

One set of writers serves both ways of reaching the browser tools:

* proxy: ``HttpEndpoint(url, token)``, the per-session loopback Streamable HTTP server;
* bridge: ``StdioCommand()``, the static ``openab browser-bridge`` stdio relay.

Every write merges into the existing file (the user's other servers and keys stay), is atomic
(temp file in the same folder, then ``os.replace``) and leaves the file mode 0600, because proxy
entries carry a bearer token. A file we cannot parse is backed up next to itself and the write is
refused: we never guess at a user's file.

This module owns the disk: reading, locking, backing up and writing. Which files and what entry come from
:mod:`.formats`; how the entry is merged, from :mod:`.merge`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import tomlkit
import tomlkit.exceptions

from ...errors import ConfigError
from ...mcp.access import Entry as Endpoint
from ...mcp.access import HttpEndpoint, StdioCommand
from ...mcp.vocabulary import SERVER_NAME
from . import goose_yaml, merge
from .formats import ConfigFile, Format, Json, agent_name, check_command, config_files, entry, expands_token

__all__ = ["Written", "config_write", "strip", "write", "write_private"]


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
            merge.servers(doc, f)  # refuse a wrong shape before anything is written
        for f, doc in docs:
            merge.put(doc, f, ours)
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
        if main is None or not merge.is_ours(merge.servers(main, files[0]).get(SERVER_NAME), ours):
            return changed
        for f, doc in docs:
            if merge.remove(doc, f, ours):
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
    if check := check_command(name):
        lines.append(f"check with: {check}")
    return Written("\n".join(lines), paths)


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
        return goose_yaml.load(text)
    return json.loads(text)


def _dump(doc: MutableMapping[str, Any], fmt: Format) -> str:
    if fmt == "toml":
        return tomlkit.dumps(doc)
    if fmt == "yaml":
        return goose_yaml.dump(doc)
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
