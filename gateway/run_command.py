"""`openab run`: the pod's main process (the /acp gateway, the agent runtime, browser access).

Every flag has an ``OPENAB_*`` environment variable (see ``openab run --help``); flags win. The pieces are
put together by :func:`assemble`, which `openab demo` uses too.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from openab_browser.core.agent_names import AGENT_ALIASES, AGENT_CHOICES, AGENT_NAMES

if TYPE_CHECKING:  # the CLI imports nothing heavy at module level (see gateway/cli.py)
    from openab_browser.core.pod import Pod
    from openab_browser.core.settings import Settings

    from .hub import HubEnvironment
    from .pair_link import PairCodes
    from .pairing import KeptKey
    from .server import ReloadingTls

__all__ = ["add_pod_flags", "add_runtime_flags", "agent_commands", "register", "resolve_key", "runtime_overrides"]



def add_pod_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", help="address to bind (default 127.0.0.1; env OPENAB_HOST)")
    parser.add_argument("--port", type=int, help="port to bind (default 8080; env OPENAB_PORT)")
    # Kept only to refuse it with a pointer: a key on the command line is in every local user's `ps`.
    parser.add_argument("--token", help=argparse.SUPPRESS)
    parser.add_argument(
        "--key-file", metavar="PATH",
        help="read the key clients must present from this file, mode 0600 (env OPENAB_ACP_AUTH_KEY_FILE; or give "
             "the key itself in OPENAB_ACP_AUTH_KEY). With neither, the pod makes one, keeps it in the state dir "
             "and prints it once for pairing the side panel",
    )
    # The flag's earlier name, still taken: the secret is called a key everywhere now.
    parser.add_argument("--token-file", dest="key_file", metavar="PATH", help=argparse.SUPPRESS)
    parser.add_argument(
        "--metrics-key-file", metavar="PATH",
        help="a key of its own for scraping /metrics, in a 0600 file or a Kubernetes Secret (env "
             "OPENAB_METRICS_KEY_FILE, or the key in OPENAB_METRICS_KEY): /metrics then takes it and not the /acp "
             "key, and it never opens /acp",
    )
    parser.add_argument(
        "--insecure-no-key", action="store_true", default=None,
        help="development only, loopback only: serve /acp without a key (any local process can then take a "
             "session); browsers are still held to --allowed-origins",
    )
    parser.add_argument(
        "--allowed-origins", help="with --insecure-no-key: comma-separated browser origins allowed to connect"
    )
    parser.add_argument(
        "--tls-cert", metavar="PEM",
        help="serve wss:// with this certificate chain (env OPENAB_TLS_CERT); SIGHUP reads it and the key again",
    )
    parser.add_argument("--tls-key", metavar="PEM", help="the certificate's unencrypted key (env OPENAB_TLS_KEY)")
    parser.add_argument(
        "--behind-proxy", metavar="ADDRESSES",
        help="an ingress in front terminates TLS: the IPs or CIDRs it connects from, comma-separated; only their "
             "X-Forwarded-For/-Proto are believed (env OPENAB_BEHIND_PROXY)",
    )
    parser.add_argument(
        "--public-url", metavar="URL",
        help="the wss://.../acp URL (or https:// origin) people reach the pod by, e.g. behind an ingress: the "
             "pairing text names it (env OPENAB_PUBLIC_URL)",
    )
    parser.add_argument(
        "--insecure-no-tls", action="store_true", default=None,
        help="serve off loopback in clear text with neither TLS nor a proxy: the key crosses the network readable; "
             "only on a network nobody else reaches (env OPENAB_INSECURE_NO_TLS)",
    )
    parser.add_argument(
        "--no-ws-deflate", dest="ws_deflate", action="store_false", default=None,
        help="decline permessage-deflate on /acp: for a pod the browser reaches over loopback or a LAN, where "
             "compressing screenshots costs more than it saves (env OPENAB_WS_DEFLATE=false)",
    )
    parser.add_argument(
        "--event-loop", choices=["auto", "uvloop", "asyncio"],
        help="the event loop the pod runs on: uvloop when installed (auto, the default), or asyncio's own "
             "(env OPENAB_EVENT_LOOP)",
    )
    parser.add_argument("--browser-mode", choices=["proxy", "bridge"], help="how the agent reaches the browser")
    parser.add_argument("--state-dir", help="where sessions keep their files (env OPENAB_STATE_DIR)")
    parser.add_argument(
        "--drain-timeout", type=float,
        help="on SIGTERM, seconds the tool calls already in a browser get to be answered before the sockets close "
             "(default 10; env OPENAB_DRAIN_TIMEOUT)",
    )
    parser.add_argument(
        "--journal-window", type=float,
        help="seconds a state-changing browser step holds a re-issue of the same call: it joins the step or gets "
             "its outcome instead of acting twice (default 15; env OPENAB_JOURNAL_WINDOW; docs/journal.md)",
    )
    parser.add_argument(
        "--journal-settle", type=float,
        help="seconds a browser step whose outcome never came back holds the same call back: the agent is told it "
             'may have happened and to look, then say "repeat" (default 600; env OPENAB_JOURNAL_SETTLE)',
    )
    parser.add_argument(
        "--log-level", default="info", choices=["trace", "debug", "info", "warning", "error"],
        help="credentials are redacted at every level; page content (whole frames) is logged only at trace",
    )
    parser.add_argument(
        "--log-format", choices=["text", "json"],
        help="text lines (default) or one JSON object a line with time, level, logger, message and the session's "
             "tag and request id where known, for a log collector (env OPENAB_LOG_FORMAT)",
    )


def add_runtime_flags(parser: argparse.ArgumentParser) -> None:
    # No argparse choices: Settings resolves the words (any case, aliases, comma lists) as it does OPENAB_AGENT.
    parser.add_argument(
        "--agent", action="append", metavar="AGENT",
        help="the agent CLI run per session: " + ", ".join(AGENT_NAMES) + " (default builtin: no account needed; "
             "aliases such as " + ", ".join(list(AGENT_ALIASES)[:2]) + " work too). Repeat it (or give a comma "
             "list) to offer several: the person picks one per chat, the first is the default (env OPENAB_AGENT)",
    )
    parser.add_argument(
        "--agent-cmd", action="append", metavar="[NAME=]COMMAND",
        help="the agent's ACP command, e.g. 'my-agent --acp' (overrides the recipe's; env OPENAB_AGENT_CMD). "
             "With several agents, NAME=COMMAND for each one replaced (env OPENAB_AGENT_CMD_<NAME>)",
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
    parser.add_argument(
        "--max-agents", type=int,
        help="agent processes the pod runs at once; the one idle longest is stopped to make room, and a prompt "
             "is refused when all are in a turn (default 16; env OPENAB_MAX_AGENTS)",
    )
    parser.add_argument(
        "--unconfined-agents", action="store_true", default=None,
        help="on a kernel that cannot confine agent CLIs (no Landlock), run them anyway: a prompt-injected agent "
             "could then read the pod's key and every session (env OPENAB_UNCONFINED_AGENTS; docs/deploy.md)",
    )


def agent_commands(entries: list[str] | None) -> tuple[str | None, dict[str, str] | None]:
    """``--agent-cmd`` values: the one plain command, and the ``NAME=COMMAND`` ones by agent name.

    A value is a pair only when what precedes its first ``=`` is an agent's name or alias: a command is never
    run through a shell, so ``NAME=`` cannot be an environment assignment in front of one.
    """
    plain: list[str] = []
    named: dict[str, str] = {}
    for entry in entries or []:
        word, sep, command = entry.partition("=")
        if sep and word.strip().lower() in AGENT_CHOICES:
            named[word] = command
        else:
            plain.append(entry)
    if len(plain) > 1:
        from openab_browser.core.errors import ConfigurationError

        raise ConfigurationError("--agent-cmd COMMAND was given twice: give NAME=COMMAND for each agent")
    return (plain[0] if plain else None), (named or None)


def runtime_overrides(args: argparse.Namespace) -> dict[str, Any]:
    agent_cmd, agent_cmds = agent_commands(args.agent_cmd)
    return {
        "agent": args.agent,
        "agent_cmd": agent_cmd,
        "agent_cmds": agent_cmds,
        "agent_env": args.agent_env,
        "permissions": args.permissions,
        "model_url": args.model_url,
        "model_name": args.model,
        "agent_idle_ttl": args.agent_idle_ttl,
        "agent_silence_timeout": args.agent_silence_timeout,
        "max_agents": args.max_agents,
        "unconfined_agents": args.unconfined_agents,
    }


def register(commands: Any) -> None:
    run = commands.add_parser("run", help="run the pod: the /acp gateway, the agent runtime, browser access")
    add_pod_flags(run)
    add_runtime_flags(run)
    run.add_argument(
        "--jupyterhub", action="store_true", default=None,
        help="run as a JupyterHub single-user server: served under the hub's prefix, opened with the person's hub "
             "API token instead of a key, activity reported to the hub (needs openab[hub]; env OPENAB_JUPYTERHUB)",
    )
    run.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    import logging
    import os

    from openab_browser.core.event_loop import loop_factory, run
    from openab_browser.core.settings import Settings
    from openab_browser.core.sockets import HTTP_PARSER

    from .app import create_app
    from .assemble import assemble
    from .logs import add_secret, configure_logging
    from .metrics import resolve_metrics_key
    from .server import check_transport, tls_for

    try:
        configure_logging(args.log_level, log_format=args.log_format or os.environ.get("OPENAB_LOG_FORMAT") or "text")
    except ValueError as exc:
        print(f"openab: {exc}", file=sys.stderr)
        return 2
    if args.token is not None:
        print("openab: --token would show the key to every local user in `ps`; put it in OPENAB_ACP_AUTH_KEY or "
              "in a 0600 file named by --key-file", file=sys.stderr)
        return 2
    try:
        settings = Settings.from_env(
            host=args.host,
            port=args.port,
            token_file=args.key_file,
            metrics_token_file=args.metrics_key_file,
            insecure_no_key=args.insecure_no_key,
            allowed_origins=args.allowed_origins,
            browser_mode=args.browser_mode,
            state_dir=args.state_dir,
            drain_timeout=args.drain_timeout,
            journal_window=args.journal_window,
            journal_settle=args.journal_settle,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
            behind_proxy=args.behind_proxy,
            insecure_no_tls=args.insecure_no_tls,
            public_url=args.public_url,
            ws_deflate=args.ws_deflate,
            event_loop=args.event_loop,
            jupyterhub=getattr(args, "jupyterhub", None),
            **runtime_overrides(args),
        )
        hub = None
        if settings.jupyterhub:
            hub, kept_key = _hub_environment(settings, args), None
        else:
            kept_key = resolve_key(settings)
        resolve_metrics_key(settings, kept_key.verifier if kept_key is not None else None)
        for key in (settings.token, settings.metrics_token):
            if key is not None:
                add_secret(key.get_secret_value())
        pod = assemble(settings)
        app = create_app(pod, hub, kept_key)
        check_transport(settings)
        tls = tls_for(settings)
        loop_name, _ = loop_factory(settings.event_loop)  # refused here, with the other settings
    except ValueError as exc:  # ConfigurationError and pydantic's ValidationError are ValueErrors
        print(f"openab: {exc}", file=sys.stderr)
        return 2
    logging.getLogger(__name__).info("event loop: %s; HTTP parser: %s", loop_name, HTTP_PARSER)
    return run(_serve(pod, app, args.log_level, tls, kept_key), settings.event_loop)


def _hub_environment(settings: Settings, args: argparse.Namespace) -> HubEnvironment:
    """Under a hub: what its spawner set, the bind it chose (``JUPYTERHUB_SERVICE_URL``, which a flag overrides
    and which overrides ``OPENAB_HOST``/``OPENAB_PORT``, the image's defaults), the pod's hub token redacted."""
    import os

    from openab_browser.core.errors import ConfigurationError

    from .hub import HubEnvironment
    from .logs import add_secret
    from .pairing import make_private_dir

    if settings.token is not None or settings.token_file is not None or settings.insecure_no_key:
        raise ConfigurationError("--jupyterhub takes the hub's tokens instead of a key: give no key and no "
                                 "--insecure-no-key (the hub's proxy and its tokens guard the pod)")
    hub = HubEnvironment.from_env(os.environ)
    add_secret(hub.api_token)
    host, port = hub.bind()
    if args.host is None and host is not None:
        settings.host = host
    if args.port is None and port is not None:
        settings.port = port
    make_private_dir(settings.state_dir)
    return hub


def _announce_pairing(settings: Settings, kept: KeptKey | None, codes: PairCodes | None = None) -> None:
    """The pairing text: to a terminal as a block to paste (with the key when this start made it), else as one
    log line without the key, for in a container stderr is the collected log and the key must not travel."""
    import logging

    from .pairing import pairing_lines

    if settings.jupyterhub:
        import os

        from .hub import HubEnvironment, hub_pairing_line

        logging.getLogger("openab_browser.run").info("pair the side panel: %s",
                                             hub_pairing_line(HubEnvironment.from_env(os.environ)))
        return

    terminal = sys.stderr.isatty()
    lines = pairing_lines(settings, kept, terminal=terminal, codes=codes)
    if terminal:
        block = "\n".join("    " + line for line in lines)
        print(f"\n  Pair the openab side panel with this pod (Settings; paste these lines into Gateway URL):\n"
              f"{block}\n", file=sys.stderr, flush=True)
    else:
        said = "; ".join(" ".join(line.split()) for line in lines)
        logging.getLogger("openab_browser.run").info("pair the side panel: %s", said)


def resolve_key(settings: Settings) -> KeptKey | None:
    """Settle the pod's key before anything serves; returns the key the pod keeps itself (its verifier, and the
    key when this start made it, then ``settings.token`` too), or ``None`` when the operator gave the key or asked
    for none.

    In order: the key itself (``OPENAB_ACP_AUTH_KEY``), a key file (the operator's, read as it is each start),
    no key when asked for explicitly (loopback only, checked by ``create_app``), else the key the pod keeps: made
    on first start, and only its verifier written (:mod:`.acp_key`).
    """
    from pydantic import SecretStr

    from openab_browser.core.errors import ConfigurationError

    from .pairing import keep_key, make_private_dir, read_key_file

    if settings.insecure_no_key:
        if settings.token is not None or settings.token_file is not None:
            raise ConfigurationError("--insecure-no-key and a key were both given; choose one")
        make_private_dir(settings.state_dir)
        return None
    if settings.token is None and settings.token_file is not None:
        settings.token = SecretStr(read_key_file(settings.token_file))
    if settings.token is not None:
        make_private_dir(settings.state_dir)
        return None
    make_private_dir(settings.state_dir)
    kept = keep_key(settings.state_dir)
    # The start that made the key holds it (in memory only) as the pod's key, for its pairing text and link; the
    # door still checks the verifier (gateway/auth.py), which `openab key rotate` may replace meanwhile.
    settings.token = kept.key
    return kept


async def _serve(pod: Pod, app: Any, log_level: str, tls: ReloadingTls | None, kept_key: KeptKey | None) -> int:
    import asyncio
    import logging
    import signal

    from openab_browser.core.errors import BridgeError
    from openab_browser.core.heap import YOUNG_GENERATION, prepare_heap

    from .app import drainer
    from .pod_file import AnnouncedServer
    from .server import hangup_handler, uvicorn_config

    settings = pod.settings
    log = logging.getLogger("openab_browser.run")
    loop = asyncio.get_running_loop()
    # From here on SIGHUP never stops the pod: it reloads the certificate (cert-manager, certbot renewed it) or,
    # without TLS, says there is nothing to reload.
    loop.add_signal_handler(signal.SIGHUP, hangup_handler(tls))
    try:
        # Before uvicorn: a socket the bridge cannot serve is a clear one-line error, not a failed lifespan.
        await pod.start()
    except (OSError, BridgeError) as exc:
        print(f"openab: {exc}", file=sys.stderr)
        return 1
    # The agents offered: a configured one that is not installed was named in a warning as the pod was assembled.
    log.info("agents %s, browser via %s, permissions %s, state in %s",
             ", ".join(c.id for c in pod.agents.choices), settings.browser_mode, settings.permissions,
             settings.state_dir)
    config = uvicorn_config(
        app, host=settings.host, port=settings.port, max_frame_bytes=settings.max_frame_bytes, log_level=log_level,
        guard=app.state.guard, tls=tls, proxies=settings.behind_proxy, ws_deflate=settings.ws_deflate,
    )
    frozen = prepare_heap()  # the pod is built: what it holds now lives as long as the process
    log.info("heap: %d objects of the built pod frozen, young generation %d", frozen, YOUNG_GENERATION)
    try:
        # pod.json tells `openab doctor` where this pod listens (the real port, with --port 0 too).
        # The pairing text once the pod listens: it names the port bound, and the pod is there to be dialled.
        def listening(port: int) -> None:
            _announce_pairing(settings.model_copy(update={"port": port}), kept_key, app.state.pair_codes)

        await AnnouncedServer(config, drain=drainer(app), state_dir=settings.state_dir, tls=tls is not None,
                              listening=listening).serve()
    except OSError as exc:
        print(f"openab: {exc}", file=sys.stderr)
        return 1
    finally:
        loop.remove_signal_handler(signal.SIGHUP)
        await pod.aclose()
    return 0
