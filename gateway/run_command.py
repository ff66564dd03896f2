"""`openab run`: the pod's main process (the /acp gateway, the agent runtime, browser access).

Every flag has an ``OPENAB_*`` environment variable (see ``openab run --help``); flags win. The pieces are
put together by :func:`assemble`, which `openab demo` uses too.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from openab.core.agents.names import AGENT_CHOICES, AGENT_NAMES

if TYPE_CHECKING:  # the CLI imports nothing heavy at module level (see gateway/cli.py)
    from openab.core.pod import Pod

__all__ = ["add_pod_flags", "add_runtime_flags", "configure_logging", "register", "runtime_overrides"]



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


def add_runtime_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--agent", choices=AGENT_CHOICES, metavar="AGENT",
        help="the agent CLI run per session: " + ", ".join(AGENT_NAMES) + " (default builtin: no account needed; "
             "aliases such as claude-code work too; env OPENAB_AGENT)",
    )
    parser.add_argument(
        "--agent-cmd",
        help="the agent's ACP command, e.g. 'my-agent --acp' (overrides the recipe's; env OPENAB_AGENT_CMD)",
    )
    parser.add_argument(
        "--agent-env", action="append", metavar="NAME[=VALUE]",
        help="give the agent NAME from this environment, or set NAME=VALUE; repeatable (env OPENAB_AGENT_ENV). "
             "The agent gets no other variables than identity, locale, proxy and CA ones",
    )
    parser.add_argument(
        "--permissions", choices=["auto", "browser-only", "deny"],
        help="who answers the agent's permission requests when the person cannot be asked "
             "(default browser-only; env OPENAB_PERMISSIONS)",
    )
    parser.add_argument(
        "--model-url",
        help="built-in agent: an OpenAI-compatible endpoint to run a real tool loop (env OPENAB_MODEL_URL; "
             "key in OPENAB_MODEL_API_KEY)",
    )
    parser.add_argument("--model", help="built-in agent: the model name to ask for (env OPENAB_MODEL)")
    parser.add_argument(
        "--agent-idle-ttl", type=float, help="seconds an idle agent is kept before it is stopped (default 1800)"
    )
    parser.add_argument(
        "--agent-silence-timeout", type=float,
        help="seconds an agent may say nothing mid-turn before it is stopped (default 600)",
    )


def runtime_overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "agent": args.agent,
        "agent_cmd": args.agent_cmd,
        "agent_env": args.agent_env,
        "permissions": args.permissions,
        "model_url": args.model_url,
        "model_name": args.model,
        "agent_idle_ttl": args.agent_idle_ttl,
        "agent_silence_timeout": args.agent_silence_timeout,
    }


def register(commands: Any) -> None:
    run = commands.add_parser("run", help="run the pod: the /acp gateway, the agent runtime, browser access")
    add_pod_flags(run)
    add_runtime_flags(run)
    run.set_defaults(handler=_run)


def configure_logging(level: str) -> None:
    import logging

    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # One line per session event is ours to log; uvicorn's access lines and the agents' stderr are noise.
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)


def _run(args: argparse.Namespace) -> int:
    import asyncio

    from openab.core.settings import Settings

    from .app import create_app
    from .assemble import assemble

    configure_logging(args.log_level)
    try:
        settings = Settings.from_env(
            host=args.host,
            port=args.port,
            token=args.token,
            allowed_origins=args.allowed_origins,
            browser_mode=args.browser_mode,
            state_dir=args.state_dir,
            **runtime_overrides(args),
        )
        pod = assemble(settings)
        app = create_app(pod)
    except ValueError as exc:  # ConfigurationError and pydantic's ValidationError are ValueErrors
        print(f"openab: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(_serve(pod, app, args.log_level))


async def _serve(pod: Pod, app: Any, log_level: str) -> int:
    import logging

    import uvicorn

    from openab.core.errors import BridgeError

    from .server import uvicorn_config

    settings = pod.settings
    log = logging.getLogger("openab.run")
    try:
        # Before uvicorn: a socket the bridge cannot serve is a clear one-line error, not a failed lifespan.
        await pod.start()
    except (OSError, BridgeError) as exc:
        print(f"openab: {exc}", file=sys.stderr)
        return 1
    log.info("agent %s, browser via %s, permissions %s, state in %s",
             settings.agent, settings.browser_mode, settings.permissions, settings.state_dir)
    config = uvicorn_config(
        app, host=settings.host, port=settings.port, max_frame_bytes=settings.max_frame_bytes, log_level=log_level,
    )
    try:
        await uvicorn.Server(config).serve()
    except OSError as exc:
        print(f"openab: {exc}", file=sys.stderr)
        return 1
    finally:
        await pod.aclose()
    return 0
