"""`openab config write`: put the ``openab_browser`` MCP entry into an agent CLI's config by hand.

The pod writes each session's entry itself; this is for people wiring an agent up themselves: the static
bridge entry (``openab browser-bridge``), or a proxy entry for a url they were given. A config path that is a
symbolic link is written through only when the user (or root) made the link and it leads to the user's own
file (:mod:`openab_browser.core.agents.config.files`), and the path really written is printed. A token is never
taken on the command line, where ``ps`` and shell histories would keep it: ``--token-env VAR`` names the
variable that holds it, and agents that expand variables get a reference to ``VAR`` instead of the token.
Claude and Gemini load a project's servers only in a folder the person trusts: the output says whether they
trust it and what to run if not, and ``--trust-folder`` records that trust for the one folder.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

__all__ = ["register"]


def register(commands: Any) -> None:
    # Here, not at the top: importing this module (the CLI lists every subcommand) stays free of openab_browser.core.
    from openab_browser.core.agent_names import CONFIG_NAMES

    config = commands.add_parser("config", help="write the openab_browser MCP entry into an agent CLI's config")
    actions = config.add_subparsers(dest="config_action", required=True, metavar="ACTION")
    write = actions.add_parser(
        "write",
        help="merge the openab_browser entry into an agent CLI's config file(s) and print what was written",
        description=(
            "Merge the openab_browser entry into the config files of one agent CLI, keeping everything else "
            "in them. --mode bridge (the default) writes the static `openab browser-bridge` entry; --mode proxy "
            "writes a session's Streamable HTTP url with its bearer token, read from the variable --token-env "
            "names. A config file that is a symbolic link is written through only if you (or root) made the link "
            "and it leads to a file of yours; the path really written is printed."
        ),
    )
    write.add_argument("--agent", required=True,
                       help=f"{', '.join(CONFIG_NAMES[:-1])} or {CONFIG_NAMES[-1]} (or the command, e.g. "
                            "claude-agent-acp)")
    write.add_argument("--dir", help="the project directory for project-level files (default: current directory)")
    write.add_argument("--mode", choices=["proxy", "bridge"], default="bridge",
                       help="bridge: the static stdio relay (default); proxy: a session's loopback HTTP endpoint")
    write.add_argument("--url", help="proxy mode: the session's endpoint, e.g. http://127.0.0.1:PORT/mcp")
    write.add_argument("--token-env", metavar="VAR",
                       help="proxy mode: the environment variable holding the session's bearer token")
    write.add_argument("--trust-folder", action="store_true",
                       help="claude and gemini: also record, in the CLI's own file, that you trust the --dir folder "
                            "(that folder alone), as the CLI's trust dialog would. Without it they keep the entry "
                            "pending or disabled until you trust the folder, and this prints how")
    write.set_defaults(handler=_write)


def _write(args: argparse.Namespace) -> int:
    from pathlib import Path

    from openab_browser.core.agents.config import (
        SERVER_NAME,
        ConfigError,
        HttpEndpoint,
        StdioCommand,
        config_write,
        entry,
        expands_token,
    )

    token: str | None = None
    try:
        if args.mode == "proxy":
            if not args.url or not args.token_env:
                raise ConfigError("--mode proxy needs --url and --token-env VAR (the variable that holds the "
                                  "session's token)")
            token = os.environ.get(args.token_env) or None
            # Agents that cannot expand ${VAR} need the token itself in their file.
            if token is None and not expands_token(args.agent, args.token_env):
                raise ConfigError(f"{args.agent} cannot read the token from ${args.token_env}: set {args.token_env} "
                                  "in this shell so it can be written into the file")
        elif args.url or args.token_env:
            raise ConfigError("--url and --token-env are for --mode proxy; the bridge entry needs neither")
        written = config_write(
            args.agent, mode=args.mode, dir=Path(args.dir) if args.dir else None, url=args.url, token=token,
            token_env=args.token_env, trust_folder=args.trust_folder,
        )
    except ConfigError as exc:
        print(f"openab: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the disk itself (full, read-only): say which file, not a traceback
        print(f"openab: could not write the config file: {exc}", file=sys.stderr)
        return 2
    shown = entry(args.agent, HttpEndpoint(args.url, token or "", args.token_env) if args.mode == "proxy"
                  else StdioCommand())
    text = json.dumps({SERVER_NAME: shown}, indent=2)
    print(text.replace(token, "<token>") if token else text)
    print(written.text)
    return 0
