"""`openab config write`: the ``openab_browser`` entry written into one agent CLI's config files by hand, and for
Claude and Gemini, which load a project's servers only in a folder the person trusts, whether they trust it, what
to run if not, or (``trust_folder``) that trust recorded for the one folder (:mod:`.trust`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ...errors import ConfigError
from ...mcp.access import Entry as Endpoint
from ...mcp.access import HttpEndpoint, StdioCommand
from ...mcp_vocabulary import SERVER_NAME
from .files import write
from .formats import agent_name, check_command, config_files, expands_token
from .trust import folder_trust
from .trust import trust_folder as record_trust

__all__ = ["Written", "config_write"]


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
    trust_folder: bool = False,
) -> Written:
    """``openab config write --agent NAME [--dir D] [--mode proxy|bridge] [--trust-folder]``.

    Bridge mode writes the static ``openab browser-bridge`` entry, the one to use by hand. Proxy
    mode needs the url of a running session (the gateway writes those itself) and its token, or
    ``token_env``, the variable holding it, for agents that expand one (``expands_token``).
    For Claude and Gemini, which load a project's servers only in a folder the person trusts, the text says
    whether the CLI trusts ``dir`` and, if not, what to run; ``trust_folder`` records that trust in the CLI's
    own file instead (:mod:`.trust`). The returned text never contains the token.
    """
    name = agent_name(agent)
    project = Path(dir) if dir is not None else Path.cwd()
    if trust_folder:  # refused before any file is written
        record_trust(name, project, home=home, env=env, check_only=True)
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
    specs = config_files(name, dir=dir, home=home, env=env)
    paths = write(name, endpoint, dir=dir, home=home, env=env)
    lines = [f"{SERVER_NAME} -> {how} for {name}:"]
    for spec, real in zip(specs, paths, strict=True):
        given = Path(os.path.abspath(spec.path))
        lines.append(f"  wrote {real}" + (f" (through the link {spec.path})" if real != given else ""))
    trust = folder_trust(name, project, home=home, env=env)
    if trust is not None and not trust.trusted and trust_folder and trust.source == "record":
        paths.append(record_trust(name, project, home=home, env=env))
        lines.append(f"  recorded in {paths[-1]} that you trust {trust.folder} (that folder alone), as {name}'s "
                     "trust dialog would")
    elif trust is not None and not trust.trusted:
        lines.append(f"{name} does not trust {trust.folder} yet: until it does, {trust.effect()} (the pod's "
                     "sessions are not affected). To trust it" + (", either:" if len(trust.advice()) > 1 else ":"))
        lines.append(", or\n".join(f"  {step}" for step in trust.advice()))
    elif trust is not None:
        why = {"record": f"({trust.record_file})", "env": "(GEMINI_CLI_TRUST_WORKSPACE=true)",
               "off": "(its folder trust is off: security.folderTrust.enabled is false)"}.get(trust.source, "")
        lines.append(f"  {name} already trusts {trust.folder} {why}".rstrip())
    if check := check_command(name):
        lines.append(f"check with: {check}" + (f" (run in {trust.folder})" if trust is not None else ""))
    return Written("\n".join(lines), paths)
