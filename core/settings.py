"""Settings of one pod, validated once at start-up (flags and ``OPENAB_*`` environment variables)."""

from __future__ import annotations

import ipaddress
import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, field_validator

from .addresses import LOOPBACK_NAMES
from .agent_names import canonical_agent
from .errors import ConfigurationError
from .event_loop import EventLoopChoice
from .protocol_file import CARD_WAIT, PROMPT_WAIT

__all__ = ["ENV_VARS", "Settings"]

MiB = 1 << 20
# How long the side panel waits for a prompt's answer (extension/lib/protocol.js, which the panel reads too).
PANEL_PROMPT_WAIT = PROMPT_WAIT

# Environment variable -> settings field. Flags override these; these override the defaults.
ENV_VARS: Mapping[str, str] = {
    "OPENAB_HOST": "host",
    "OPENAB_PORT": "port",
    "OPENAB_ACP_AUTH_KEY": "token",
    "OPENAB_ACP_AUTH_KEY_FILE": "token_file",
    # A key of its own for Prometheus: it opens /metrics only, never /acp (docs/deploy.md, "Metrics").
    "OPENAB_METRICS_KEY": "metrics_token",
    "OPENAB_METRICS_KEY_FILE": "metrics_token_file",
    "OPENAB_ACP_ALLOWED_ORIGINS": "allowed_origins",
    "OPENAB_BROWSER_MODE": "browser_mode",
    "OPENAB_STATE_DIR": "state_dir",
    "OPENAB_BROWSER_SOCKET": "browser_socket",
    "OPENAB_TUNNEL_TIMEOUT": "tunnel_timeout",
    "OPENAB_ACP_IDLE_TIMEOUT_SECS": "prompt_idle_timeout",
    "OPENAB_SESSION_IDLE_TTL": "session_idle_ttl",
    "OPENAB_AUDIT_LOG": "audit_log",
    "OPENAB_AUDIT_MAX_BYTES": "audit_max_bytes",
    "OPENAB_AUDIT_BACKUPS": "audit_backups",
    "OPENAB_DRAIN_TIMEOUT": "drain_timeout",
    # The action journal (docs/journal.md): how long a step holds a re-issue of the same call.
    "OPENAB_JOURNAL_WINDOW": "journal_window",
    # How long a step whose outcome never came back holds the same call back (docs/journal.md, "Unsettled steps").
    "OPENAB_JOURNAL_SETTLE": "journal_settle",
    "OPENAB_CANCEL_GRACE": "cancel_grace",
    # Files carried between the agent's working folder and the browser (docs/files.md).
    "OPENAB_MAX_FILE_BYTES": "max_file_bytes",
    "OPENAB_MAX_SESSION_FILE_BYTES": "max_session_file_bytes",
    "OPENAB_FILE_IDLE_TIMEOUT": "file_idle_timeout",
    # The agent runtime (docs/runtime.md).
    "OPENAB_AGENT": "agent",
    "OPENAB_AGENT_CMD": "agent_cmd",
    "OPENAB_AGENT_ENV": "agent_env",
    "OPENAB_PERMISSIONS": "permissions",
    "OPENAB_MODEL_URL": "model_url",
    "OPENAB_MODEL": "model_name",
    "OPENAB_AGENT_IDLE_TTL": "agent_idle_ttl",
    "OPENAB_AGENT_SILENCE_TIMEOUT": "agent_silence_timeout",
    "OPENAB_AGENT_START_TIMEOUT": "agent_start_timeout",
    "OPENAB_MAX_TOOL_CALLS": "max_tool_calls_per_turn",
    "OPENAB_AGENT_CONVERSATION_TTL": "agent_conversation_ttl",
    "OPENAB_MAX_AGENTS": "max_agents",
    "OPENAB_AGENT_CGROUPS": "agent_cgroups",
    # Where the kernel cannot confine agent CLIs (no Landlock), run them anyway (docs/security.md).
    "OPENAB_UNCONFINED_AGENTS": "unconfined_agents",
    # How the pod is reached off loopback (docs/deploy.md).
    "OPENAB_TLS_CERT": "tls_cert",
    "OPENAB_TLS_KEY": "tls_key",
    "OPENAB_BEHIND_PROXY": "behind_proxy",
    "OPENAB_INSECURE_NO_TLS": "insecure_no_tls",
    "OPENAB_WS_DEFLATE": "ws_deflate",
    "OPENAB_EVENT_LOOP": "event_loop",
    # Bounds on what any key holder may open (docs/security.md, "The pod").
    "OPENAB_MAX_SESSIONS": "max_sessions",
    "OPENAB_MAX_SESSIONS_PER_CONNECTION": "max_sessions_per_connection",
    "OPENAB_HANDSHAKE_TIMEOUT": "handshake_timeout",
    # Sockets in all and from one address (a hub's proxy or an ingress is one address for everyone behind it).
    "OPENAB_MAX_CONNECTIONS": "max_connections",
    "OPENAB_MAX_CONNECTIONS_PER_PEER": "max_connections_per_peer",
    "OPENAB_PUBLIC_URL": "public_url",
    # openab as a JupyterHub single-user server (docs/deploy.md, "A team on JupyterHub").
    "OPENAB_JUPYTERHUB": "jupyterhub",
    "OPENAB_HUB_AUTH_CACHE_SECS": "hub_auth_cache_secs",
    "OPENAB_HUB_ACTIVITY_INTERVAL": "hub_activity_interval",
}
# OPENAB_AGENT_CMD_<NAME>: one agent's command when the pod offers several (as --agent-cmd NAME=COMMAND).
AGENT_CMD_PREFIX = "OPENAB_AGENT_CMD_"


def _default_state_dir() -> Path:
    if base := os.environ.get("XDG_STATE_HOME"):
        return Path(base) / "openab"
    try:
        return Path.home() / ".local" / "state" / "openab"
    except RuntimeError:  # no HOME and no passwd entry: an arbitrary uid in a container
        raise ConfigurationError(
            "no HOME to keep the pod's state in: set OPENAB_STATE_DIR (--state-dir) to a writable folder, or HOME "
            "to a writable volume"
        ) from None


class Settings(BaseModel):
    """Everything an operator sets, validated once at start-up; :data:`ENV_VARS` names the variables."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    token: SecretStr | None = None
    token_file: Path | None = None
    # With one, /metrics takes this key and no longer the person's /acp key; without, it takes the /acp key.
    metrics_token: SecretStr | None = None
    metrics_token_file: Path | None = None
    # Development only, loopback only: serve /acp with no key at all (any local process can then connect).
    insecure_no_key: bool = False
    allowed_origins: list[str] = Field(default_factory=list)
    browser_mode: Literal["proxy", "bridge"] = "proxy"
    state_dir: Path = Field(default_factory=_default_state_dir)
    browser_socket: Path | None = None

    max_frame_bytes: int = Field(default=8 * MiB, ge=1024)
    max_method_frame_bytes: int = Field(default=1 * MiB, ge=1024)
    keepalive_interval: float = Field(default=15.0, gt=0, le=20.0)
    tunnel_timeout: float = Field(default=170.0, gt=0)
    tunnel_connect_timeout: float = Field(default=30.0, gt=0)
    prompt_idle_timeout: float = Field(default=180.0, gt=0)
    cancel_grace: float = Field(default=10.0, gt=0)
    # Checked against prompt_idle_timeout even when not given (validate_default): the two fit the panel's wait.
    permission_timeout: float = Field(default=CARD_WAIT, gt=0, validate_default=True)
    session_idle_ttl: float = Field(default=3600.0, gt=0)
    # One record per browser tool call in <state_dir>/audit.jsonl (docs/runtime.md, "Audit log"); past
    # audit_max_bytes it becomes audit.jsonl.1, and audit_backups such files are kept.
    audit_log: bool = True
    audit_max_bytes: int = Field(default=10 * MiB, ge=4096)
    audit_backups: int = Field(default=3, ge=0, le=99)
    # On SIGTERM, how long tool calls already in the browser get to be answered before the sockets close.
    drain_timeout: float = Field(default=10.0, ge=0)
    # A re-issue of a state-changing call (same tool, same arguments) within this many seconds of its step joins it
    # or gets its outcome; a step whose caller's stream broke runs on this long for the re-issue to join it.
    journal_window: float = Field(default=15.0, ge=0, le=600)
    # A step that may or may not have happened (effect_unknown) holds the same call back this many seconds after
    # its outcome was lost, whatever came in between: the agent is told to look, then say "repeat" (0: the window).
    journal_settle: float = Field(default=600.0, ge=0, le=86400)
    # Files across the gap (docs/files.md): one upload or download, all of a session's over its life (both ways),
    # and how long a transfer may go without a chunk once its first came (the tool call's timeout bounds the rest).
    max_file_bytes: int = Field(default=100 * MiB, ge=1)
    max_session_file_bytes: int = Field(default=1024 * MiB, ge=1)
    file_idle_timeout: float = Field(default=30.0, gt=0)

    # The agent runtime: which agent CLIs a session may run (the first is the default) and how far they are
    # trusted. ``agent_cmd`` is the command of the only agent; with several, ``agent_cmds`` names each one's.
    agent: list[str] = Field(default_factory=lambda: ["builtin"], min_length=1)
    agent_cmd: list[str] | None = None
    agent_cmds: dict[str, list[str]] = Field(default_factory=dict, validate_default=True)
    agent_env: list[str] = Field(default_factory=list)
    permissions: Literal["auto", "browser-only", "deny"] = "browser-only"
    model_url: str | None = None
    model_name: str | None = None
    agent_idle_ttl: float = Field(default=1800.0, gt=0)
    agent_start_timeout: float = Field(default=120.0, gt=0)
    agent_silence_timeout: float = Field(default=600.0, gt=0)
    agent_conversation_ttl: float = Field(default=24 * 3600.0, gt=0)
    max_tool_calls_per_turn: int = Field(default=25, ge=1)
    # How many agent CLIs may live in the pod at once (each costs tens of MB); the one idle longest makes room.
    max_agents: int = Field(default=16, ge=1)
    # Each agent in a cgroup v2 of its own when the pod's cgroup is writable (off: its tree is read from /proc).
    agent_cgroups: bool = True
    # An agent CLI runs confined to its own session by Landlock (core/agents/confinement.py); on a kernel without
    # it the pod refuses to start one unless this says to run them unconfined (the built-in agent runs either way).
    unconfined_agents: bool = False

    # Off loopback the key must not cross the network in clear: the pod serves TLS itself (a PEM certificate
    # chain and its key, read again on SIGHUP), or sits behind a proxy that terminates it, whose addresses
    # (IPs or CIDRs) are the only peers whose X-Forwarded-For/-Proto are believed. insecure_no_tls: neither.
    tls_cert: Path | None = None
    tls_key: Path | None = Field(default=None, validate_default=True)
    behind_proxy: list[str] = Field(default_factory=list)
    insecure_no_tls: bool = False
    # The wss:// URL people enter in the side panel when only the operator knows it (behind an ingress); the
    # pairing text names it. Never dialled by the pod itself.
    public_url: str | None = None
    # permessage-deflate on /acp, which Chrome offers: across the internet it shrinks the snapshots' and pages'
    # text; on loopback or a LAN it is pure cost (a 6 MiB screenshot: about 0.45 s of compressing in the
    # browser and 50 ms of inflating here; docs/benchmarks.md, large results).
    ws_deflate: bool = True
    # uvloop when installed (core/event_loop.py): what the pod's sockets and timers cost in Python, a part of
    # every proxied call.
    event_loop: EventLoopChoice = "auto"

    # The pod's sessions in all (when full, one that no socket holds and that never ran a prompt makes room) and
    # the ones a single socket may hold.
    max_sessions: int = Field(default=4096, ge=1)
    max_sessions_per_connection: int = Field(default=128, ge=1)
    max_inflight_prompts: int = Field(default=32, ge=1)
    max_servers_per_session: int = Field(default=8, ge=1)
    max_inflight_establishes: int = Field(default=64, ge=1)

    # Before a socket is an ACP connection: its TLS handshake and a whole request head within this from its
    # accept, and bounded sockets in all and per address.
    handshake_timeout: float = Field(default=10.0, gt=0)
    max_connections: int = Field(default=1024, ge=1)
    max_connections_per_peer: int = Field(default=256, ge=1)

    # A JupyterHub single-user server: the hub spawns the pod (JUPYTERHUB_* in its environment), routes
    # /user/<name>/ to it and people open /acp with a hub API token allowed to access this server, checked with
    # the hub (gateway/hub.py), instead of a key of the pod's own. A token's answer is cached this long (a revoked
    # token opens new sockets until then), and the pod tells the hub it is in use this often (the idle culler
    # stops a pod whose last activity is older than its timeout: keep this well under it).
    jupyterhub: bool = False
    hub_auth_cache_secs: int = Field(default=60, ge=1, le=3600)
    hub_activity_interval: float = Field(default=60.0, gt=0, le=3600)

    @field_validator("prompt_idle_timeout", "permission_timeout")
    @classmethod
    def _turn_limits_fit_the_panels_wait(cls, value: float, info: ValidationInfo) -> float:
        # The one place for the turn's limits that depend on each other (core/turn_watch.py runs them). A person's
        # card stops every clock of the turn (idle, the agent's silence, the tool call) for up to
        # permission_timeout, so the person's wait may outlast them all; then the idle timeout ends a turn whose
        # agent says nothing. Both, one after the other, must fit in the panel's wait for the prompt's answer, or
        # the panel gives up while the person is still asked, or before the gateway says why. The tool call's
        # and the cancel's limits are not bound to these: a call cut short by the idle timeout ends with its
        # turn, and a cancel's grace runs alone. A field validator, not a model one: its error quotes this field's
        # input only, never the key. Each field checks against the other once that one is known (the later one
        # at start-up, either on assignment).
        other = "permission_timeout" if info.field_name == "prompt_idle_timeout" else "prompt_idle_timeout"
        known = info.data.get(other)
        if not isinstance(known, float | int):
            return value
        values = {info.field_name: value, other: float(known)}
        person, idle = values["permission_timeout"], values["prompt_idle_timeout"]
        if person + idle > PANEL_PROMPT_WAIT:
            raise ConfigurationError(
                f"permission_timeout {person:g} s and then prompt_idle_timeout {idle:g} s "
                f"(OPENAB_ACP_IDLE_TIMEOUT_SECS) come to {person + idle:g} s, longer than the side panel waits for a "
                f"prompt's answer ({PANEL_PROMPT_WAIT:g} s): a person's card stops the turn's clocks for up to the "
                "first, a silent agent's turn then ends after the second, and the panel would give up first; lower "
                f"one of them so that the two add up to at most {PANEL_PROMPT_WAIT:g} s"
            )
        return value

    @field_validator("token", "metrics_token", mode="before")
    @classmethod
    def _empty_token_is_none(cls, value: Any) -> Any:
        return None if value in ("", None) else value

    @field_validator("tls_key")
    @classmethod
    def _tls_pair(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if (value is None) != (info.data.get("tls_cert") is None):
            raise ConfigurationError("TLS needs both --tls-cert and --tls-key (OPENAB_TLS_CERT, OPENAB_TLS_KEY)")
        return value

    @field_validator("public_url")
    @classmethod
    def _panel_url(cls, value: str | None) -> str | None:
        # What the panel itself accepts (extension/lib/settings.js): wss://, or ws:// on loopback; an https://
        # origin is taken as its /acp.
        if value is None:
            return None
        text = value.strip()
        url = urlsplit("" if any(c.isspace() or not c.isprintable() for c in text) else text)
        try:
            url.port  # noqa: B018 (parsing it is the check)
        except ValueError:
            url = url._replace(netloc="")
        if url.scheme == "https" and url.path in ("", "/"):
            url = url._replace(scheme="wss", path="/acp")
        loopback = url.hostname in LOOPBACK_NAMES
        if (url.scheme not in ("wss", "ws") or (url.scheme == "ws" and not loopback) or not url.hostname
                or url.username is not None or url.query or url.fragment or not url.path.endswith("/acp")):
            raise ConfigurationError(
                f"--public-url {value!r} is not an address the side panel dials: give the wss:// URL people "
                "reach the pod by, ending /acp (wss://openab.example.com/acp), or its https:// origin"
            )
        return urlunsplit(url)

    @field_validator("behind_proxy", mode="before")
    @classmethod
    def _split_proxies(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [item for item in re.split(r"[,\s]+", value) if item]
        return value

    @field_validator("behind_proxy")
    @classmethod
    def _proxy_addresses(cls, value: list[str]) -> list[str]:
        # Addresses only: a name would be resolved by nobody, and "*" would believe any peer's headers.
        networks = []
        for item in value:
            try:
                networks.append(str(ipaddress.ip_network(item, strict=False)))
            except ValueError:
                raise ConfigurationError(
                    f"--behind-proxy {item!r} is not an IP address or network: give the addresses the proxy "
                    "connects from, e.g. 10.0.0.0/8 or 10.1.2.3,10.1.2.4"
                ) from None
        return networks

    @field_validator("allowed_origins", mode="before")
    @classmethod
    def _split_origins(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [o.strip() for o in value.split(",") if o.strip()]
        return value

    @field_validator("agent_cmd", mode="before")
    @classmethod
    def _split_command(cls, value: Any) -> Any:
        if isinstance(value, str):
            return shlex.split(value) or None
        return value

    @field_validator("agent_env", mode="before")
    @classmethod
    def _split_env(cls, value: Any) -> Any:
        # NAME passes the pod's own value through; NAME=VALUE sets one. Comma- or space-separated in env.
        if isinstance(value, str):
            return [item for item in re.split(r"[,\s]+", value) if item]
        return value

    @field_validator("permissions", mode="before")
    @classmethod
    def _normalise_permissions(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("agent", mode="before")
    @classmethod
    def _canonical_agents(cls, value: Any) -> Any:
        # The same names and aliases whether they come from --agent (repeated) or OPENAB_AGENT (a comma list).
        words = [value] if isinstance(value, str) else value
        if not isinstance(words, list | tuple):
            return value
        names: list[str] = []
        for word in words:
            for part in str(word).split(","):
                if part.strip() and (name := canonical_agent(part)) not in names:
                    names.append(name)
        return names

    @field_validator("agent_cmds", mode="before")
    @classmethod
    def _agent_commands(cls, value: Any) -> Any:
        if not isinstance(value, Mapping):
            return value
        return {canonical_agent(str(name)): shlex.split(cmd) if isinstance(cmd, str) else cmd
                for name, cmd in value.items()}

    @field_validator("agent_cmds")
    @classmethod
    def _commands_name_offered_agents(cls, value: dict[str, list[str]], info: ValidationInfo) -> Any:
        # A field validator, not a model one: its error quotes this field's input only, never the key.
        agents: list[str] = info.data.get("agent") or []
        if info.data.get("agent_cmd") and len(agents) > 1:
            raise ConfigurationError(
                f"--agent-cmd COMMAND names no agent, and this pod offers {', '.join(agents)}: "
                "give --agent-cmd NAME=COMMAND for each agent whose command you replace"
            )
        for name in value:
            if name not in agents:
                raise ConfigurationError(f"--agent-cmd {name}=... names an agent the pod does not offer: "
                                         f"add --agent {name}, or drop that command")
        return value

    def agent_command(self, agent: str) -> list[str] | None:
        """The operator's command for ``agent`` (``None``: its recipe's own)."""
        return self.agent_cmds.get(agent) or (self.agent_cmd if self.agent == [agent] else None)

    @field_validator("browser_mode", mode="before")
    @classmethod
    def _normalise_mode(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Defaults, then ``OPENAB_*`` variables, then ``overrides`` (flags; ``None`` means not given)."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {field: env[var] for var, field in ENV_VARS.items() if env.get(var)}
        commands = {var.removeprefix(AGENT_CMD_PREFIX).replace("_", "-"): cmd
                    for var, cmd in env.items() if var.startswith(AGENT_CMD_PREFIX) and cmd}
        values.update({k: v for k, v in overrides.items() if v is not None})
        if commands:  # a flag replaces one agent's command, not the others' (later keys win in the validator)
            values["agent_cmds"] = {**commands, **values.get("agent_cmds", {})}
        return cls(**values)

    @property
    def socket_path(self) -> Path:
        return self.browser_socket or self.state_dir / "browser" / "browser.sock"
