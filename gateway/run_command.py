"""`openab run`: the pod's main process (the /acp gateway, the agent runtime, browser access)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["add_pod_flags", "register"]


def add_pod_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", help="address to bind (default 127.0.0.1; env OPENAB_HOST)")
    parser.add_argument("--port", type=int, help="port to bind (default 8080; env OPENAB_PORT)")
    parser.add_argument(
        "--token", help="the key clients must present (env OPENAB_ACP_AUTH_KEY); required off loopback"
    )
    parser.add_argument(
        "--allowed-origins", help="keyless mode: comma-separated browser origins allowed to connect"
    )
    parser.add_argument("--browser-mode", choices=["proxy", "bridge"], help="how the agent reaches the browser")
    parser.add_argument("--state-dir", help="where sessions keep their files (env OPENAB_STATE_DIR)")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])


def register(commands: Any) -> None:
    run = commands.add_parser("run", help="run the pod: the /acp gateway, the agent runtime, browser access")
    add_pod_flags(run)
    run.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    import logging

    import uvicorn

    from openab.core.pod import Pod
    from openab.core.settings import Settings

    from .app import ConfigurationError, create_app
    from .server import uvicorn_config

    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = Settings.from_env(
        host=args.host,
        port=args.port,
        token=args.token,
        allowed_origins=args.allowed_origins,
        browser_mode=args.browser_mode,
        state_dir=args.state_dir,
    )
    pod = Pod(settings)
    try:
        app = create_app(pod)
    except ConfigurationError as exc:
        print(f"openab: {exc}", file=sys.stderr)
        return 2
    config = uvicorn_config(
        app, host=settings.host, port=settings.port, max_frame_bytes=settings.max_frame_bytes, log_level=args.log_level
    )
    uvicorn.Server(config).run()
    return 0
