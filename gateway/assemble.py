"""The composition root: one :func:`assemble` builds a whole pod from settings, for `openab run`, `openab demo`
and the test harness alike. Nothing is wired later; each part gets only what it uses."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI imports nothing heavy at module level (see gateway/cli.py)
    from openab.core.acp.backend import AgentBackend
    from openab.core.acp.sessions import SessionStore
    from openab.core.agents.recipes import Recipe
    from openab.core.mcp.access import BrowserAccess
    from openab.core.pod import Pod
    from openab.core.settings import Settings
    from openab.core.tunnel.registry import TunnelRegistry

__all__ = ["assemble"]


def assemble(
    settings: Settings,
    *,
    backend: AgentBackend | None = None,
    browser: bool = True,
    env: Mapping[str, str] | None = None,
    recipe: Recipe | None = None,
    base_env: Mapping[str, str] | None = None,
) -> Pod:
    """A pod with its browser access (``settings.browser_mode``: proxy or bridge) and its agent runtime, not
    yet serving (``await pod.start()`` before serving, ``await pod.aclose()`` after).

    ``backend`` replaces the agent runtime (a test's scripted agent); ``browser=False`` leaves browser access
    out (only a pod with a ``backend`` of its own can do without). For the runtime: ``env`` is added to every
    agent's environment, ``recipe`` replaces the one ``settings.agent`` names, ``base_env`` is the environment
    agents inherit from (default: this process's). Raises ``ConfigurationError`` (a ``ValueError``) for an
    unknown agent or a missing ``--agent-cmd``.
    """
    from openab.core.acp.sessions import SessionStore
    from openab.core.pod import BackgroundTasks, Pod
    from openab.core.tunnel.registry import TunnelRegistry

    sessions = SessionStore()
    tunnels = TunnelRegistry(call_timeout=settings.tunnel_timeout)
    tasks = BackgroundTasks()
    access: BrowserAccess | None = None
    if browser:
        access = _browser_access(settings, sessions, tunnels)
    if backend is None:
        from openab.core.agents.runtime import AgentRuntime

        if access is None:
            raise ValueError("the agent runtime needs browser access: assemble(browser=True)")
        backend = AgentRuntime(
            settings, sessions, tunnels, access, tasks.spawn, recipe=recipe, env=env, base_env=base_env
        )
    return Pod(settings, sessions=sessions, tunnels=tunnels, tasks=tasks, backend=backend, browser=access)


def _browser_access(settings: Settings, sessions: SessionStore, tunnels: TunnelRegistry) -> BrowserAccess:
    if settings.browser_mode == "bridge":
        from openab.bridge.server import BridgeServer

        return BridgeServer(tunnels, settings.socket_path)
    from openab.core.mcp.proxy import BrowserProxy

    return BrowserProxy(sessions, tunnels)
