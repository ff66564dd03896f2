"""`openab doctor`: check an installation the way `openab run` would use it, and say what to fix.

It reads the same settings `openab run` does (``OPENAB_*`` variables, and the flags given here), then checks the
agent CLIs (found, and their versions), the ``openab_browser`` entries written into their config files and what
each installed CLI's own ``mcp list`` makes of them (connected, pending approval, disabled, untrusted), the state
dir and the bridge's socket and their modes, the key's strength and its file's mode, TLS, and a running gateway
(``/healthz`` and an authenticated ``/acp`` handshake): the one the state dir's ``pod.json`` names (where `openab
run` listens, its real port), else the settings' host and port. Each finding is one line,
``ok``/``warn``/``FAIL``, with a ``fix:`` line under what is wrong. Exit code 1 when anything failed, else 0.
The key is never printed.
"""

from __future__ import annotations

import argparse
import datetime
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # the CLI imports nothing heavy at module level (see gateway/cli.py)
    from openab_browser.core.settings import Settings

    from .pod_file import RunningPod

__all__ = ["Finding", "register"]

VERSION_TIMEOUT = 15.0
GATEWAY_TIMEOUT = 8.0
# `claude mcp list` and the like connect to every server they list, each with a timeout of its own.
MCP_LIST_TIMEOUT = 60.0


@dataclass
class Finding:
    status: Literal["ok", "warn", "FAIL"]
    what: str
    fix: str = ""


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)

    def add(self, status: Literal["ok", "warn", "FAIL"], what: str, fix: str = "") -> None:
        finding = Finding(status, self._redact(what), self._redact(fix))
        self.findings.append(finding)
        print(f"{finding.status:<5} {finding.what}", flush=True)
        if finding.fix:
            print(f"      fix: {finding.fix}", flush=True)

    def _redact(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "<key>")
        return text

    @property
    def failed(self) -> bool:
        return any(f.status == "FAIL" for f in self.findings)


def register(commands: Any) -> None:
    doctor = commands.add_parser(
        "doctor", help="check this installation (agent CLIs, configs, socket, key, TLS, the gateway) and say "
                       "what to fix",
        description="Check the installation `openab run` would use (OPENAB_* variables and these flags) and print "
                    "what to fix. Exit code 1 when something is wrong.",
    )
    doctor.add_argument("--agent", action="append", metavar="AGENT",
                        help="the agent CLI(s) to check (default: OPENAB_AGENT, else builtin); repeatable")
    doctor.add_argument("--state-dir", help="the pod's state dir (env OPENAB_STATE_DIR)")
    doctor.add_argument("--key-file", metavar="PATH", help="the key file `openab run` is given")
    doctor.add_argument("--token-file", dest="key_file", metavar="PATH", help=argparse.SUPPRESS)  # its earlier name
    doctor.add_argument("--browser-mode", choices=["proxy", "bridge"], help="how the agent reaches the browser")
    doctor.add_argument("--dir", help="the project directory whose agent config files to check (default: here)")
    doctor.add_argument("--url", help="the gateway to reach, e.g. wss://host/acp (default: where the pod running on "
                                      "this state dir listens, from its pod.json, else OPENAB_HOST/OPENAB_PORT; "
                                      "`none` skips it)")
    doctor.add_argument("--ca-file", help="trust this CA bundle (PEM) for a wss:// gateway")
    doctor.add_argument("--tls-cert", metavar="PEM", help="the pod's certificate (env OPENAB_TLS_CERT)")
    doctor.add_argument("--tls-key", metavar="PEM", help="its key (env OPENAB_TLS_KEY)")
    doctor.set_defaults(handler=_doctor)


def _doctor(args: argparse.Namespace) -> int:
    from openab_browser.core.settings import Settings

    report = Report()
    try:
        settings = Settings.from_env(agent=args.agent, state_dir=args.state_dir, token_file=args.key_file,
                                     browser_mode=args.browser_mode, tls_cert=args.tls_cert, tls_key=args.tls_key)
    except ValueError as exc:
        report.add("FAIL", f"settings: {exc}", "correct the OPENAB_* variable or flag it names")
        return 1
    key = _check_key(settings, report)
    _check_metrics_key(settings, key, report)
    _check_agents(settings, report)
    _check_confinement(settings, report)
    _check_configs(settings, Path(args.dir) if args.dir else Path.cwd(), report)
    _check_state(settings, report)
    _check_tls(settings, report)
    running = _check_pod(settings, report)
    if args.url != "none":
        _check_gateway(settings, args.url or (running.ws_url if running else _local_url(settings)), key,
                       args.ca_file, report)
    problems = sum(f.status == "FAIL" for f in report.findings)
    warnings = sum(f.status == "warn" for f in report.findings)
    print(f"\n{problems} problem(s), {warnings} warning(s)" + (": fix the FAIL lines above" if problems else ""))
    return 1 if report.failed else 0


def _local_url(settings: Settings) -> str:
    host = settings.host if settings.host not in ("0.0.0.0", "::") else "127.0.0.1"
    shown = f"[{host}]" if ":" in host else host
    return f"{'wss' if settings.tls_cert else 'ws'}://{shown}:{settings.port}/acp"


# -- the key -------------------------------------------------------------------------------------------------


def _check_key(settings: Settings, report: Report) -> str | None:
    from .doctor_key import check_key

    return check_key(settings, report)


def _check_metrics_key(settings: Settings, key: str | None, report: Report) -> None:
    from .doctor_key import check_metrics_key

    check_metrics_key(settings, key, report)


# -- the agent CLIs ------------------------------------------------------------------------------------------


def _check_agents(settings: Settings, report: Report) -> None:
    import shutil
    import subprocess

    from openab_browser.core.agents.recipes import recipe_for

    for agent in settings.agent:
        try:
            recipe = recipe_for(agent, settings.agent_cmds.get(agent) or settings.agent_cmd)
        except ValueError as exc:
            report.add("FAIL", f"agent {agent}: {exc}", "choose an agent `openab run --help` lists")
            continue
        argv = recipe.command(settings.agent_cmds.get(agent) or settings.agent_cmd)
        found = shutil.which(argv[0])
        if found is None:
            report.add("FAIL", f"agent {agent}: `{argv[0]}` is not on PATH",
                       recipe.install or f"install {argv[0]}, or give its path with --agent-cmd")
            continue
        if recipe.name == "builtin":
            report.add("ok", f"agent {agent}: {found} (built in)")
            continue
        if not recipe.takes_version and argv == recipe.command():
            # Found is all there is to know: asking would only fail (an operator's own command is still asked).
            report.add("ok", f"agent {agent}: {found} (it takes no --version)")
            continue
        version, problem = _version(found, subprocess)
        if problem is None:
            report.add("ok", f"agent {agent}: {found} {version}".rstrip())
        else:
            report.add("warn", f"agent {agent}: {found} is there, but `{argv[0]} --version` {problem}",
                       f"its version is unknown: run `{found} --version` by hand, and check it is the CLI meant "
                       "(some ACP adapters take no --version; then this is all it means)")


def _check_confinement(settings: Settings, report: Report, probe: Callable[[], tuple[int, str]] | None = None) -> None:
    """Whether this kernel holds each agent CLI to its own session, and whether the state dir stays out of every
    folder a confined agent may reach (docs/security.md, "The agent's process")."""
    from openab_browser.core.agents import confine
    from openab_browser.core.agents.confinement import Support, agent_policy, expand_folder
    from openab_browser.core.agents.recipes import recipe_for

    support = Support(*(probe or confine.probe)())
    clis = []
    for agent in settings.agent:
        try:
            recipe = recipe_for(agent, settings.agent_cmds.get(agent) or settings.agent_cmd)
        except ValueError:
            continue  # said by the agents' check
        if recipe.name != "builtin":
            clis.append(agent)
        home = os.environ.get("HOME")
        state = str(settings.state_dir.resolve())
        try:
            agent_policy(support.abi or 1, workdir=f"{state}/sessions/x/work", tmpdir=f"{state}/sessions/x/tmp",
                         state_dir=state, path=os.environ.get("PATH", ""),
                         secrets=[str(f) for f in (settings.token_file, settings.metrics_token_file) if f],
                         home_dirs=[f for t in recipe.writes if (f := expand_folder(t, os.environ, home))])
        except ValueError as exc:
            report.add("FAIL", f"confinement of agent {agent}: {exc}")
    if support.confines and clis:
        why = confine.probe_private_pids()
        report.add("ok", "confinement: each agent gets a PID view of its own" if not why else
                   f"confinement: agents see the pod's processes listed (no PID namespace: {why}); Landlock still "
                   "keeps them out of those processes' files and signals")
    if support.full:
        report.add("ok", f"confinement: {support.describe()}")
    elif support.confines:
        report.add("warn", f"confinement: {support.describe()}", "a kernel of Linux 6.12 or later closes the gaps")
    elif not clis:
        report.add("ok", f"confinement: {support.describe()}; the built-in agent runs unconfined (it runs no shell)")
    elif settings.unconfined_agents:
        report.add("warn", f"confinement: {support.describe()}; {', '.join(clis)} run unconfined "
                           "(OPENAB_UNCONFINED_AGENTS): a prompt-injected agent can read the pod's key and every "
                           "session", "run the agents in a container of their own (docs/deploy.md)")
    else:
        report.add("FAIL", f"confinement: {support.describe()}, so the pod will not start {', '.join(clis)}",
                   "run the agents in a container of their own (docs/deploy.md, \"The agents' "
                   "confinement\"), or accept the risk with --unconfined-agents (OPENAB_UNCONFINED_AGENTS=1)")


def _version(executable: str, subprocess: Any) -> tuple[str, str | None]:
    """The first line ``executable --version`` prints, and what went wrong (``None``: nothing)."""
    try:
        done = subprocess.run([executable, "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT,
                              stdin=subprocess.DEVNULL, errors="replace")
    except subprocess.TimeoutExpired:
        return "", f"did not answer within {VERSION_TIMEOUT:g} s"
    except OSError as exc:
        return "", f"could not be run: {exc.strerror or exc}"
    said = (done.stdout.strip() or done.stderr.strip()).splitlines()
    first = "".join(c if c.isprintable() else "?" for c in said[0][:120]) if said else ""
    if done.returncode != 0:
        return "", f"exited with status {done.returncode}" + (f": {first}" if first else "")
    if not first:
        return "", "printed nothing"
    return first, None


# -- the MCP config files ------------------------------------------------------------------------------------


def _check_configs(settings: Settings, project: Path, report: Report) -> None:
    import json
    import tomllib

    from openab_browser.core.agents.config import SERVER_NAME, ConfigError
    from openab_browser.core.agents.config.formats import check_command, config_files

    for agent in dict.fromkeys(settings.agent):
        try:
            files = config_files(agent, dir=project)
        except ConfigError:
            continue  # builtin and custom agents get the browser in session/new, never from a file
        for config in files:
            if config.kind != "servers" or not config.path.exists():
                continue
            text = config.path.read_text(encoding="utf-8", errors="replace")
            try:
                if config.format == "json":
                    doc: Any = json.loads(text) if text.strip() else {}
                elif config.format == "toml":
                    doc = tomllib.loads(text)
                else:
                    doc = {config.servers_key: {SERVER_NAME: {}}} if SERVER_NAME in text else {}
            except ValueError as exc:
                report.add("FAIL", f"config {config.path}: not valid {config.format} ({exc})",
                           f"repair or remove it; `openab config write --agent {agent}` writes a fresh entry")
                continue
            servers = doc.get(config.servers_key) if isinstance(doc, dict) else None
            check = check_command(agent)
            if isinstance(servers, dict) and SERVER_NAME in servers:
                report.add("ok", f"config {config.path}: holds {SERVER_NAME}"
                           + (f" (check: `{check}`)" if check else ""))
            else:
                report.add("warn", f"config {config.path}: no {SERVER_NAME} entry; the pod writes one per "
                                   "session, so this matters only for an agent run by hand",
                           f"`openab config write --agent {agent}`")
        _check_listed(agent, project, report)


# What an agent CLI's `mcp list` says of a server, by the words it prints on the server's line.
_STATES: tuple[tuple[str, str], ...] = (
    ("pending approval", "pending approval"), ("disabled", "disabled"), ("blocked", "blocked"),
    ("disconnected", "failed"), ("failed", "failed"), ("not connected", "failed"), ("error", "failed"),
    ("connected", "connected"),
)


def listed_state(output: str) -> tuple[str, str]:
    """The state of ``openab_browser`` in an agent CLI's ``mcp list`` output (``connected``, ``listed``,
    ``pending approval``, ``disabled``, ``untrusted``, ``blocked``, ``failed`` or ``absent``) and the CLI's own
    words after the state on that line (why it failed), without colours or control characters."""
    import re

    from openab_browser.core.agents.config import SERVER_NAME

    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", output)
    line = next((ln for ln in text.splitlines() if re.search(rf"\b{SERVER_NAME}\b", ln)), None)
    if line is None:
        return "absent", ""
    lowered = line.lower()
    for word, state in _STATES:
        if word in lowered:
            if state == "disabled" and "folder is untrusted" in text:
                state = "untrusted"
            rest = line[lowered.index(word) + len(word):]
            # claude: "✘ Failed to connect — <why>"; the others put the reason straight after the state.
            detail = rest.split("—", 1)[1] if "—" in rest else rest
            return state, _printable(detail.strip(" -:"))
    return "listed", ""


def _check_listed(agent: str, project: Path, report: Report) -> None:
    """Run the CLI's own ``mcp list`` in ``project`` and say what it makes of ``openab_browser``."""
    import re
    import shlex
    import shutil

    from openab_browser.core.agents.config import SERVER_NAME, folder_trust
    from openab_browser.core.agents.config.formats import check_command

    check = check_command(agent)
    if not check:
        return
    argv = shlex.split(check)
    found = shutil.which(argv[0])
    if found is None:
        report.add("ok", f"`{check}` not run: `{argv[0]}` is not on PATH (the pod's sessions do not need it)")
        return
    said, problem = _run_bounded([found, *argv[1:]], project)
    where = f"`{check}` in {project}"
    if problem is not None:
        first = next((ln for ln in said.splitlines() if ln.strip()), "")
        report.add("warn", f"{where} {problem}" + (f": {_printable(first)}" if first else ""),
                   f"run `{check}` there by hand to see the whole of it")
        return
    state, detail = listed_state(said)
    detail = re.sub(r"(?i)(bearer\s+)\S+", r"\1<token>", detail)
    trust = folder_trust(agent, project)
    trust_fix = "; or ".join(trust.advice()) if trust is not None else ""
    if state in ("connected", "listed"):
        report.add("ok", f"{where}: {SERVER_NAME} {state}")
    elif state == "absent":
        report.add("warn", f"{where}: {SERVER_NAME} is not listed",
                   f"`openab config write --agent {agent} --dir {project}`, then `{check}` again")
    elif state == "untrusted" or (state == "pending approval" and trust is not None and not trust.trusted):
        shown = "disabled" if state == "untrusted" else state
        report.add("warn", f"{where}: {SERVER_NAME} {shown}, because {agent} does not trust {project}",
                   trust_fix)
    elif state == "pending approval":
        report.add("warn", f"{where}: {SERVER_NAME} pending approval: the folder is trusted, but "
                           ".claude/settings.local.json does not approve the server",
                   f"`openab config write --agent {agent} --dir {project}` writes that approval")
    elif state == "disabled":
        report.add("warn", f"{where}: {SERVER_NAME} disabled", f"`{argv[0]} mcp enable {SERVER_NAME}`")
    elif state == "blocked":
        report.add("warn", f"{where}: {SERVER_NAME} blocked by an admin setting or an allow/exclude list",
                   f"ask whoever manages {agent}'s settings to allow {SERVER_NAME}")
    else:
        report.add("warn", f"{where}: {SERVER_NAME} is loaded but does not connect" + (f": {detail}" if detail else ""),
                   "a bridge entry needs `openab run --browser-mode bridge` running here and `openab` on the CLI's "
                   "PATH; a proxy entry, its session still open")


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text.strip())[:200]


def _run_bounded(argv: list[str], cwd: Path) -> tuple[str, str | None]:
    """What ``argv`` printed (stdout and stderr: gemini lists on stderr), and what went wrong (``None``:
    nothing). It runs in its own process group, killed as a whole after it: ``mcp list`` starts every MCP server
    it checks, and a stdio one can outlive it."""
    import contextlib
    import os
    import signal
    import subprocess

    try:
        process = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as exc:
        return "", f"could not be run: {exc.strerror or exc}"
    with process:
        try:
            out, _ = process.communicate(timeout=MCP_LIST_TIMEOUT)
        except subprocess.TimeoutExpired:
            return "", f"did not finish within {MCP_LIST_TIMEOUT:g} s"
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
    said = out.decode("utf-8", errors="replace")
    if process.returncode != 0:
        return said, f"exited with status {process.returncode}"
    return said, None


# -- the state dir and the bridge's socket -------------------------------------------------------------------


def _check_state(settings: Settings, report: Report) -> None:
    import os
    import stat

    state = settings.state_dir
    if not state.exists():
        report.add("ok", f"state dir {state}: not made yet (`openab run` makes it 0700)")
    else:
        mode = stat.S_IMODE(state.stat().st_mode)
        if state.stat().st_uid != os.getuid():
            report.add("FAIL", f"state dir {state}: owned by uid {state.stat().st_uid}, not this user",
                       f"run as its owner, or `chown -R {os.getuid()} {state}`")
        elif mode & 0o077:
            report.add("FAIL", f"state dir {state}: mode {mode:04o}, other users can reach the sessions' files",
                       f"`chmod 700 {state}`")
        else:
            report.add("ok", f"state dir {state}: mode {mode:04o}")
    if settings.browser_mode != "bridge":
        report.add("ok", "browser: proxy mode (a loopback endpoint per session; no socket to check)")
        return
    sock = settings.socket_path
    if not sock.exists():
        report.add("ok", f"bridge socket {sock}: not there (made when `openab run --browser-mode bridge` starts)")
        return
    info = sock.lstat()
    parent_mode = stat.S_IMODE(sock.parent.stat().st_mode)
    if not stat.S_ISSOCK(info.st_mode):
        report.add("FAIL", f"bridge socket {sock}: not a socket", f"remove {sock}; the pod makes the socket itself")
    elif stat.S_IMODE(info.st_mode) & 0o077 or parent_mode & 0o077:
        report.add("FAIL", f"bridge socket {sock}: mode {stat.S_IMODE(info.st_mode):04o} in a {parent_mode:04o} "
                           "folder: other users could reach the browser",
                   f"`chmod 600 {sock} && chmod 700 {sock.parent}`, or restart the pod, which makes them so")
    else:
        report.add("ok", f"bridge socket {sock}: mode {stat.S_IMODE(info.st_mode):04o}, folder {parent_mode:04o}")


# -- the running pod -----------------------------------------------------------------------------------------


def _check_pod(settings: Settings, report: Report) -> RunningPod | None:
    """The pod running on this state dir, as its ``pod.json`` says, when its process is alive."""
    from openab_browser.core.errors import ConfigurationError

    from .pod_file import POD_FILE, read_pod_file

    path = settings.state_dir / POD_FILE
    try:
        running = read_pod_file(settings.state_dir)
    except ConfigurationError as exc:
        report.add("FAIL", f"pod: {exc}", f"remove {path}; `openab run` writes it anew when it starts")
        return None
    if running is None:
        report.add("ok", f"pod: none running on {settings.state_dir} (no {POD_FILE})")
        return None
    if not running.alive():
        report.add("warn", f"pod: {path} names pid {running.pid}, which is not running: that pod did not exit "
                           "cleanly (killed?)", f"remove {path}, or start the pod again (`openab run`)")
        return None
    report.add("ok", f"pod: pid {running.pid} serves {running.ws_url}, since {running.started} (from {path})")
    return running


# -- TLS -----------------------------------------------------------------------------------------------------


def _check_tls(settings: Settings, report: Report) -> None:
    from openab_browser.core.addresses import is_loopback
    from openab_browser.core.errors import ConfigurationError

    if settings.tls_cert is None or settings.tls_key is None:
        if is_loopback(settings.host):
            report.add("ok", f"TLS: none, bound to loopback ({settings.host})")
        elif settings.behind_proxy:
            report.add("ok", f"TLS: terminated by the proxy at {', '.join(settings.behind_proxy)}")
        else:
            report.add("FAIL", f"TLS: none, and bound to {settings.host}: the key would cross the network in clear",
                       "give --tls-cert/--tls-key, or --behind-proxy ADDRESS for an ingress that terminates TLS")
        return
    from .server import ReloadingTls

    try:
        ReloadingTls(settings.tls_cert, settings.tls_key)
    except ConfigurationError as exc:
        report.add("FAIL", f"TLS: {exc}", "give the PEM chain and its unencrypted key, readable by this user")
        return
    _check_certificate_dates(settings.tls_cert, report)


# A certificate this close to its end is one renewal that did not happen away from cutting every panel off.
RENEW_WITHIN = datetime.timedelta(days=14)


def _check_certificate_dates(cert: Path, report: Report, now: datetime.datetime | None = None) -> None:
    from .certificates import CertificateError, read_validity

    try:
        validity = read_validity(cert)
    except CertificateError as exc:
        report.add("warn", f"TLS: {cert} loads with its key, but its dates cannot be read: {exc}")
        return
    now = now or datetime.datetime.now(datetime.UTC)
    until = f"{validity.not_after:%Y-%m-%d %H:%M} UTC"
    renew = "renew it, write the new pair over the files and send the pod SIGHUP (no restart)"
    if validity.not_after <= now:
        report.add("FAIL", f"TLS: {cert} expired on {until}: Chrome refuses the pod's wss://", renew)
    elif validity.not_before > now:
        report.add("FAIL", f"TLS: {cert} is valid only from {validity.not_before:%Y-%m-%d %H:%M} UTC",
                   "check the clock of this machine, or the certificate's issuer")
    elif validity.not_after - now < RENEW_WITHIN:
        days = (validity.not_after - now).days
        report.add("warn", f"TLS: {cert} loads with its key and expires on {until}, in {days} day(s)", renew)
    else:
        report.add("ok", f"TLS: {cert} loads with its key, valid until {until}")


# -- the gateway ---------------------------------------------------------------------------------------------


def _check_gateway(settings: Settings, url: str, key: str | None, ca_file: str | None, report: Report) -> None:
    import asyncio

    try:
        asyncio.run(_reach(url, key, ca_file, report))
    except TimeoutError:
        report.add("FAIL", f"gateway {url}: no answer within {GATEWAY_TIMEOUT:g} s",
                   "check the pod runs and the address, port and any ingress in between")


async def _reach(url: str, key: str | None, ca_file: str | None, report: Report) -> None:
    import asyncio
    import json
    import ssl
    from urllib.parse import urlsplit

    import httpx
    from websockets.asyncio.client import connect
    from websockets.exceptions import InvalidHandshake, InvalidStatus
    from websockets.typing import Subprotocol

    parts = urlsplit(url)
    if parts.scheme not in ("ws", "wss"):
        report.add("FAIL", f"gateway {url}: not a ws:// or wss:// URL", "give --url wss://HOST/acp")
        return
    context = ssl.create_default_context(cafile=ca_file) if parts.scheme == "wss" else None
    health = parts._replace(scheme="https" if context else "http", path="/healthz", query="").geturl()
    try:
        async with httpx.AsyncClient(verify=context or True, timeout=GATEWAY_TIMEOUT, trust_env=False) as http:
            answer = await http.get(health)
    except httpx.HTTPError as exc:
        fix = ("trust its CA with --ca-file, or give the pod a certificate from a CA this machine trusts"
               if "CERTIFICATE_VERIFY_FAILED" in str(exc) else "start it (`openab run`), or give --url where it runs")
        report.add("FAIL", f"gateway {health}: {type(exc).__name__}: {exc}", fix)
        return
    if answer.status_code != 200:
        report.add("FAIL", f"gateway {health}: HTTP {answer.status_code}",
                   "the address answers but is not an openab pod, or the ingress does not route /healthz")
        return
    report.add("ok", f"gateway {health}: alive")
    if key is None:
        report.add("warn", f"gateway {url}: /acp not tried, no key known here",
                   "set OPENAB_ACP_AUTH_KEY or --key-file to the pod's key to check the handshake too (a key "
                   "the pod made is kept only as its verifier)")
        return
    protocols = [Subprotocol(f"openab.bearer.{key}"), Subprotocol("acp.v1")]
    try:
        async with asyncio.timeout(GATEWAY_TIMEOUT), connect(url, subprotocols=protocols, ssl=context,
                                                             open_timeout=GATEWAY_TIMEOUT, ping_interval=None) as ws:
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                      "params": {"protocolVersion": 1, "clientCapabilities": {}}}))
            reply = json.loads(await ws.recv())
    except InvalidStatus as exc:
        status = exc.response.status_code
        report.add("FAIL", f"gateway {url}: the handshake was refused with HTTP {status}",
                   "the key here is not the pod's: pair with the key the pod printed (a key the pod made is not "
                   "kept: `openab key rotate` makes a new one)"
                   if status == 401 else "an ingress or the Origin/Host checks refused it: see docs/troubleshooting.md")
        return
    except (OSError, InvalidHandshake) as exc:
        report.add("FAIL", f"gateway {url}: {type(exc).__name__}: {exc}",
                   "the ingress must pass WebSocket upgrades on /acp: see docs/deploy.md")
        return
    if (reply.get("result") or {}).get("protocolVersion") != 1:
        report.add("FAIL", f"gateway {url}: initialize answered {json.dumps(reply)[:200]}",
                   "this is not an openab gateway, or a different version: `openab --version` on both ends")
        return
    report.add("ok", f"gateway {url}: key accepted, ACP protocol 1")
