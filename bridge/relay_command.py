"""`openab browser-bridge`: the stdio MCP relay that agent CLIs spawn, one per session.

Agents spawn it at every session start and some give it only a few seconds: this module imports nothing at
module level beyond argparse's needs, and the relay imports no asyncio, ssl, pydantic, Starlette or httpx at all.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

__all__ = ["register", "socket_path"]

_SOCKET_ENV = "OPENAB_BROWSER_SOCKET"
_STATE_DIR_ENV = "OPENAB_STATE_DIR"


def register(commands: Any) -> None:
    bridge = commands.add_parser(
        "browser-bridge",
        help="stdio MCP server for an agent CLI: relays the browser tools of this session over the pod's socket",
        description=(
            "Spawned by an agent CLI as an MCP server (stdio). Finds the pod's browser socket and, through the "
            "kernel's view of its process ancestry, the session it belongs to. Only MCP is written to stdout."
        ),
    )
    bridge.add_argument("--socket", help=f"the pod's browser socket (default: ${_SOCKET_ENV}, also read from "
                                         "the environment of our ancestors, else under the state directory)")
    bridge.add_argument("--wait", type=float, default=10.0,
                        help="seconds a request waits for the pod while its socket is down (default 10)")
    bridge.set_defaults(handler=_run)


def socket_path(explicit: str | None = None) -> Path:
    """Where the pod's socket is: ``--socket``, else the variables in our (or an ancestor's) environment,
    else the default of :attr:`openab_browser.core.settings.Settings.socket_path`."""
    if explicit:
        return Path(explicit)
    from .ancestry import find_in_ancestry

    # Our own variables first; an MCP client that scrubbed them still left them in the agent above us.
    found = os.environ.get(_SOCKET_ENV) or find_in_ancestry(_SOCKET_ENV)
    if found:
        return Path(found)
    state_dir = os.environ.get(_STATE_DIR_ENV) or find_in_ancestry(_STATE_DIR_ENV)
    if not state_dir:
        # Settings' default, restated here so the relay need not import pydantic to start.
        base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        state_dir = str(Path(base) / "openab")
    return Path(state_dir) / "browser" / "browser.sock"


def _run(args: argparse.Namespace) -> int:
    from .relay_loop import run_relay

    try:
        return run_relay(socket_path(args.socket), wait=args.wait)
    except KeyboardInterrupt:
        return 130
