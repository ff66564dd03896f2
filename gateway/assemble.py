"""The composition root: one :func:`assemble` builds a whole pod from settings, for `openab run`, `openab demo`
and the test harness alike. Nothing is wired later; each part gets only what it uses."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI imports nothing heavy at module level (see gateway/cli.py)
    from openab_browser.core.acp.backend import AgentBackend
    from openab_browser.core.acp.schema import AgentOffer
    from openab_browser.core.agents.recipes import Recipe
    from openab_browser.core.files import Transfers
    from openab_browser.core.mcp.access import BrowserAccess
    from openab_browser.core.mcp.audit import AuditLog
    from openab_browser.core.mcp.journal import ActionJournal
    from openab_browser.core.pod import Pod
    from openab_browser.core.sessions import SessionStore
    from openab_browser.core.settings import Settings
    from openab_browser.core.tunnel.registry import TunnelRegistry

__all__ = ["assemble"]


def assemble(
    settings: Settings,
    *,
    backend: AgentBackend | None = None,
    browser: bool = True,
    env: Mapping[str, str] | None = None,
    recipe: Recipe | None = None,
    base_env: Mapping[str, str] | None = None,
    probe: Callable[[], tuple[int, str]] | None = None,
) -> Pod:
    """A pod with its browser access (``settings.browser_mode``: proxy or bridge) and its agent runtime, not
    yet serving (``await pod.start()`` before serving, ``await pod.aclose()`` after).

    ``backend`` replaces the agent runtime (a test's scripted agent); ``browser=False`` leaves browser access
    out (only a pod with a ``backend`` of its own can do without). For the runtime: ``env`` is added to every
    agent's environment, ``recipe`` replaces the default agent's (the first of ``settings.agent``), ``base_env``
    is the environment agents inherit from (default: this process's), ``probe`` what says the kernel's Landlock ABI
    (default: the kernel's own answer; a test's says 0 to play a kernel that cannot confine). The sessions are
    named with the secret kept in the state dir (made there, 0600, on first use), and the log shows them by those names
    (:func:`.logs.name_sessions`), as does the audit log of tool calls (``settings.audit_log``, in the state dir).
    Raises ``ConfigurationError`` (a ``ValueError``) for an unknown agent, a missing ``--agent-cmd`` or a state
    dir other users can enter.
    """
    from openab_browser.core.files import FileLimits, Transfers
    from openab_browser.core.pod import Pod
    from openab_browser.core.session_naming import SessionNaming
    from openab_browser.core.sessions import SessionStore
    from openab_browser.core.statedir import naming_secret, session_workdir
    from openab_browser.core.tasks import BackgroundTasks
    from openab_browser.core.tunnel.registry import TunnelRegistry

    from .logs import name_sessions

    naming = SessionNaming(naming_secret(settings.state_dir))
    name_sessions(naming.tag)
    sessions = SessionStore(max_sessions=settings.max_sessions, naming=naming)
    tunnels = TunnelRegistry(call_timeout=settings.tunnel_timeout)
    tasks = BackgroundTasks()

    def workdir(session_id: str) -> Path:
        # The agent's cwd (as the runtime makes it, core/agents/runtime.py), made if no agent ran yet.
        return session_workdir(settings.state_dir, naming.channel(session_id), create=True)

    files = Transfers(FileLimits.from_settings(settings), workdir)
    access: BrowserAccess | None = None
    journal: ActionJournal | None = None
    if browser:
        from openab_browser.core.mcp.journal import ActionJournal

        audit = _audit_log(settings, naming.tag)
        # The action journal (docs/journal.md): one per pod, shared by the proxy's or the bridge's MCP sessions.
        journal = ActionJournal(window=settings.journal_window, settle=settings.journal_settle, audit=audit,
                                tag=naming.tag, state_dir=settings.state_dir)
        access = _browser_access(settings, sessions, tunnels, audit, files, journal)
    if backend is None:
        from openab_browser.core.agents.runtime import AgentRuntime

        if access is None:
            raise ValueError("the agent runtime needs browser access: assemble(browser=True)")
        runtime = AgentRuntime(
            settings, sessions, tunnels, access, tasks.spawn, recipe=recipe, env=env, base_env=base_env,
            **({"probe": probe} if probe is not None else {}),
        )
        backend, agents = runtime, runtime.offer
    else:
        agents = _named_offer(settings)
    return Pod(settings, sessions=sessions, tunnels=tunnels, tasks=tasks, backend=backend, agents=agents,
               browser=access, files=files, journal=journal)


def _named_offer(settings: Settings) -> AgentOffer:
    """The offer of a pod whose backend is its own (a test's scripted agent): the agents named by the
    settings, titled as their recipes are."""
    from openab_browser.core.acp.schema import AgentChoice, AgentOffer
    from openab_browser.core.agents.recipes import RECIPES

    return AgentOffer(tuple(AgentChoice(name, RECIPES[name].title) for name in settings.agent))


def _browser_access(
    settings: Settings, sessions: SessionStore, tunnels: TunnelRegistry, audit: AuditLog | None, files: Transfers,
    journal: ActionJournal,
) -> BrowserAccess:
    if settings.browser_mode == "bridge":
        from openab_browser.bridge.server import BridgeServer

        return BridgeServer(tunnels, settings.socket_path, audit=audit, files=files, journal=journal)
    from openab_browser.core.mcp.proxy import BrowserProxy

    return BrowserProxy(sessions, tunnels, audit=audit, files=files, journal=journal)


def _audit_log(settings: Settings, tag: Callable[[str], str]) -> AuditLog:
    from openab_browser.core.mcp.audit import AuditLog

    # Made even with the audit file off: it counts the calls /metrics shows.
    return AuditLog(settings.state_dir, tag=tag, max_bytes=settings.audit_max_bytes, backups=settings.audit_backups,
                    keep=settings.audit_log)
