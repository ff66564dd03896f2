"""The agent runtime: one agent CLI per ACP session, behind the :class:`AgentBackend` seam.

For each session it starts the configured agent (:mod:`openab_browser.core.agents.recipes`) as a child speaking ACP
on stdio (:mod:`openab_browser.core.agents.process`), in the session's own working directory under the state dir, with
a scrubbed environment and ``OPENAB_BROWSER_CHANNEL`` set, and hands it the session's browser endpoint
(:mod:`openab_browser.core.agents.provision`). The
agent is started by the session's first prompt (not when it opens: an idle CLI costs tens of MB, and a page can
open sessions at will), kept across prompts and across ``session/resume`` (the session id is the key, whatever
socket holds it), and stopped, with its whole process tree, when its session is evicted or after it has been
idle for ``agent_idle_ttl``. At most ``max_agents`` run at once, pod-wide: a prompt that needs one more stops the
agent idle the longest, and fails saying so when every agent is in a turn.

A turn relays ``session/prompt`` to the agent and every ``session/update`` back as it comes; ``session/cancel``
is sent on to the agent; a crash, or an agent that says nothing for ``agent_silence_timeout``, ends the prompt
with an error that says what happened, and the next prompt starts a fresh agent. Permission requests go to
the person when the extension can ask, else to the policy (:mod:`openab_browser.core.agents.permissions`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..acp.backend import PromptTurn
from ..acp.schema import AgentChoice, AgentOffer
from ..errors import AgentExited, AgentNotFound, ConfigError, ConfigurationError
from ..jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, SERVER_OVERLOADED, JsonObject, LocalRpcError, RpcError
from ..mcp.access import BROWSER_CHANNEL_ENV, BrowserAccess, BrowserEndpoint
from ..sessions import Session, SessionStore
from ..settings import Settings
from ..statedir import make_private_dir, session_workdir
from ..tunnel.registry import TunnelRegistry
from . import confine
from .availability import AgentAvailability
from .confinement import Launch, Policy, Support, agent_policy, expand_folder, launcher_argv
from .conversations import Conversations
from .process import scrubbed_env
from .recipes import RECIPES, Recipe, recipe_for, running_as_root
from .session_agent import AgentContext, OfferedAgent, SessionAgent
from .tree import REAPER, own_cgroup

if TYPE_CHECKING:
    from ..tasks import Spawn

__all__ = ["AgentRuntime", "OfferedAgent", "operator_env"]

log = logging.getLogger(__name__)


def operator_env(entries: list[str], base: Mapping[str, str]) -> dict[str, str]:
    """``--agent-env`` entries: ``NAME=VALUE`` sets a variable, ``NAME`` passes the pod's own value through."""
    env: dict[str, str] = {}
    for entry in entries:
        name, sep, value = entry.partition("=")
        if sep:
            env[name] = value
        elif name in base:
            env[name] = base[name]
    return env


def how_to_install(agent: OfferedAgent) -> str:
    """What makes a missing agent startable, for the log: its recipe's install command, else its program."""
    program = agent.argv[0]
    if agent.recipe.install and list(agent.argv) == list(agent.recipe.argv):
        return agent.recipe.install
    if os.sep in program:
        return f"no executable file at {program}"
    return f"{program!r} is not on PATH: install it, or give its path with --agent-cmd"


class AgentRuntime:
    """The pod's :class:`AgentBackend` for real agent CLIs (and the built-in agent, run the same way).

    It offers the agents of ``settings.agent`` whose command is installed (the others are ``missing``, said in the
    log as the pod starts); each session runs the one it chose (``session.agent``).
    """

    def __init__(
        self,
        settings: Settings,
        sessions: SessionStore,
        tunnels: TunnelRegistry,
        browser: BrowserAccess,
        spawn: Spawn,
        *,
        recipe: Recipe | None = None,
        env: Mapping[str, str] | None = None,
        base_env: Mapping[str, str] | None = None,
        probe: Callable[[], tuple[int, str]] = confine.probe,
    ) -> None:
        self.settings = settings
        self.sessions = sessions
        self.tunnels = tunnels
        self.spawn = spawn
        # Keyed by the offered name (what session/new sends), which a recipe override need not share.
        configured: dict[str, OfferedAgent] = {
            name: OfferedAgent.of(recipe_for(name, settings.agent_command(name)), settings.agent_command(name))
            for name in settings.agent
        }
        if recipe is not None:  # a test's or operator's own recipe, in place of the default agent's
            configured[settings.agent[0]] = OfferedAgent.of(recipe, settings.agent_command(settings.agent[0]))
        self.browser = browser
        self.policy = settings.permissions
        self._base_env = dict(os.environ if base_env is None else base_env)
        self._extra_env = dict(env or {})
        # Looked up on the PATH the agent is started with. The person's picker must not offer a chat that can only
        # fail; with none installed every configured one stays offered, so a chat's error says what to install.
        path = {**scrubbed_env(self._base_env), **operator_env(settings.agent_env, self._base_env),
                **self._extra_env}.get("PATH")
        # What /readyz and the panel at connect say: which can start, looked up again within a bound.
        self.availability = AgentAvailability(
            {name: o.argv for name, o in configured.items()}, path,
            always=[name for name, o in configured.items() if o.recipe.name == "builtin"],
        )
        self.missing: dict[str, OfferedAgent] = {
            name: o for name, o in configured.items() if name in self.availability.now().cannot_start
        }
        self._offered = {name: o for name, o in configured.items() if name not in self.missing} or configured
        self._default = next(iter(self._offered))
        for name, o in self.missing.items():
            log.warning("agent %s: not installed (%s)%s", name, how_to_install(o),
                        ", so it is not offered" if name not in self._offered else "")
        # Whether the kernel can hold each agent to its own session (docs/security.md, "The agent's process").
        self.kernel = Support(*probe())
        self._say_confinement()
        self._agents: dict[str, SessionAgent] = {}
        self._starting: dict[str, asyncio.Task[SessionAgent]] = {}
        self._claims: collections.Counter[str] = collections.Counter()
        # Session id -> the agent's own session id, so a fresh process (after an idle stop, a crash, or a pod
        # restart: the file outlives the pod) can take the conversation up again.
        self._conversations = Conversations(
            settings.state_dir / "conversations.json", ttl=settings.agent_conversation_ttl
        )
        self._sweeper: asyncio.Task[Any] | None = None
        self._reaper: asyncio.Task[Any] | None = None

    # -- which agent -------------------------------------------------------------------------------------

    @property
    def offer(self) -> AgentOffer:
        """The agents on offer, for the ACP handshake (the first is the default)."""
        return AgentOffer(tuple(AgentChoice(name, o.recipe.title) for name, o in self._offered.items()),
                          unavailable=self.availability.for_person)

    @property
    def recipe(self) -> Recipe:
        """The default agent's recipe."""
        return self._offered[self._default].recipe

    def offered(self, session: Session) -> OfferedAgent:
        """The agent ``session`` chose (the default for a session that chose none, as a test's pod may open)."""
        return self._offered.get(session.agent or "") or self._offered[self._default]

    # -- confinement -------------------------------------------------------------------------------------

    def _say_confinement(self) -> None:
        clis = [name for name, o in self._offered.items() if o.recipe.name != "builtin"]
        if self.kernel.confines:
            # Said now rather than at a person's first prompt: a state dir an agent's folders would hold.
            env = {**scrubbed_env(self._base_env), **operator_env(self.settings.agent_env, self._base_env),
                   **self._extra_env}
            sessions = self.settings.state_dir / "sessions" / "-"
            for name, offered in self._offered.items():
                try:
                    self._policy(offered.recipe, env, sessions / "work", sessions / "tmp", list(offered.argv))
                except ConfigurationError as exc:
                    log.error("agent %s will not start: %s", name, exc)
        if self.kernel.full:
            log.info("agents: %s", self.kernel.describe())
        elif self.kernel.confines:
            log.warning("agents: %s", self.kernel.describe())
        elif self.settings.unconfined_agents:
            log.warning("agents: %s; they run unconfined, as --unconfined-agents says: a prompt-injected agent can "
                        "read the pod's key and every session (docs/deploy.md, \"The agents' "
                        "confinement\")", self.kernel.describe())
        elif clis:
            log.error("agents: %s, so %s will not be started: run the agents in a container of their own "
                      "(docs/deploy.md, \"The agents' confinement\") or pass --unconfined-agents",
                      self.kernel.describe(), ", ".join(clis))

    def confined(self, recipe: Recipe) -> bool:
        """Whether ``recipe``'s agent runs confined; raises :class:`AgentExited` for an agent CLI this pod must
        not run: the kernel cannot confine it and the operator did not say ``--unconfined-agents``."""
        if self.kernel.confines:
            return True
        if self.settings.unconfined_agents or recipe.name == "builtin":  # the built-in agent runs no shell
            return False
        raise AgentExited(
            f"this pod cannot confine agent CLIs ({self.kernel.describe()}), and an unconfined one that a web page "
            "prompt-injects could read the pod's key and every other session. The operator can run the agents in "
            "a container of their own (docs/deploy.md) or start the pod with --unconfined-agents "
            "(OPENAB_UNCONFINED_AGENTS=1) to accept that risk"
        )

    def tmpdir(self, session: Session) -> Path:
        """The confined agent's own temporary folder (its TMPDIR), removed with the session: the shared /tmp is not
        the agent's, since the state dir or another session's files may be there."""
        return self.workdir(session).parent / "tmp"

    def _policy(self, recipe: Recipe, env: Mapping[str, str], workdir: Path, tmp: Path, argv: list[str]) -> Policy:
        """The policy of ``recipe``'s agent started as ``argv`` (its program resolved) with ``env`` in ``workdir``.

        Raises :class:`ConfigurationError` for one whose folders would hold the state dir or a key file.
        """
        home = env.get("HOME")
        # A command the pod does not know yet (--agent-cmd) may be any CLI: it gets every known CLI's folders until
        # its initialize names it, and the runtime starts it again as that one (session_agent.py).
        known = [recipe] if recipe.name != "custom" else list(RECIPES.values())
        return agent_policy(
            self.kernel.abi, workdir=str(workdir.resolve()), tmpdir=str(tmp.resolve()),
            state_dir=str(self.settings.state_dir.resolve()),
            home_dirs=[f for r in known for template in r.writes if (f := expand_folder(template, env, home))],
            home_files=[f for r in known for template in r.rewrites if (f := expand_folder(template, env, home))],
            extra_read_exec=[env[name] for r in known for name in r.reads_env if env.get(name, "").startswith("/")],
            runtimes=_runtimes(), path=env.get("PATH", ""), program=os.path.realpath(argv[0]),
            command_files=[arg for arg in argv if arg.startswith("/") and os.path.isfile(arg)],
            secrets=[str(f) for f in (self.settings.token_file, self.settings.metrics_token_file) if f],
        )

    def confine(self, session: Session, recipe: Recipe, env: Mapping[str, str]) -> Callable[[list[str]], list[str]]:
        """What wraps the agent's command (its program resolved) in the launcher with the session's policy."""
        tmp = make_private_dir(self.tmpdir(session))

        def wrap(argv: list[str]) -> list[str]:
            try:
                policy = self._policy(recipe, env, self.workdir(session), tmp, argv)
            except ConfigurationError as exc:  # the person's prompt says what the operator must move
                raise AgentExited(str(exc)) from None
            return launcher_argv(policy, argv, Launch(sys.executable, confine.__file__))

        return wrap

    # -- what the agent gets -----------------------------------------------------------------------------

    def agent_env(self, session: Session, endpoint: BrowserEndpoint, recipe: Recipe) -> dict[str, str]:
        settings = self.settings
        extra: dict[str, str] = dict(recipe.env)
        if running_as_root():
            extra.update(recipe.root_env)
        if recipe.name == "builtin":
            extra.update(self._builtin_env())
        extra.update(operator_env(settings.agent_env, self._base_env))
        extra.update(self._extra_env)
        extra.update(endpoint.env)
        extra[BROWSER_CHANNEL_ENV] = session.channel
        if self.kernel.confines:
            # The shared /tmp is outside a confined agent's reach: its own takes its place.
            tmp = str(self.tmpdir(session))
            extra.update(TMPDIR=tmp, TMP=tmp, TEMP=tmp)
        return scrubbed_env(self._base_env, extra=extra)

    def _builtin_env(self) -> dict[str, str]:
        settings = self.settings
        env = {"OPENAB_MAX_TOOL_CALLS": str(settings.max_tool_calls_per_turn)}
        if settings.model_url:
            env["OPENAB_MODEL_URL"] = settings.model_url
        if settings.model_name:
            env["OPENAB_MODEL"] = settings.model_name
        if self._base_env.get("OPENAB_MODEL_API_KEY"):
            env["OPENAB_MODEL_API_KEY"] = self._base_env["OPENAB_MODEL_API_KEY"]
        return env

    def browser_tools(self, session_id: str) -> set[str]:
        """The tool names the session's browser offers right now."""
        return {
            str(tool["name"])
            for tunnel in self.tunnels.tunnels(session_id)
            for tool in tunnel.tools or []
            if isinstance(tool.get("name"), str)
        }

    def workdir(self, session: Session, *, create: bool = False) -> Path:
        """The session's working folder (made, 0700, with ``create``): the agent's cwd."""
        return session_workdir(self.settings.state_dir, session.channel, create=create)

    @property
    def cgroups(self) -> Path | None:
        """Where each agent gets a cgroup of its own (``None``: its tree is tracked through ``/proc``)."""
        return own_cgroup() if self.settings.agent_cgroups else None

    def agent_context(self) -> AgentContext:
        """What a session's agent gets of the pod: exactly what it uses, never the runtime itself."""
        return AgentContext(
            settings=self.settings, policy=self.policy, browser=self.browser, spawn=self.spawn,
            workdir=functools.partial(self.workdir, create=True), agent_env=self.agent_env,
            browser_tools=self.browser_tools, cgroups=self.cgroups,
            confine=lambda session, recipe, env: self.confine(session, recipe, env) if self.confined(recipe) else None,
        )

    # -- AgentBackend ------------------------------------------------------------------------------------

    async def session_opened(self, session: Session) -> None:
        """Nothing starts yet: the session's first prompt starts its agent (see the module's docstring)."""
        self._background()

    def _background(self) -> None:
        if self._sweeper is None:
            self._sweeper = self.spawn(self._sweep(), name="agent idle sweeper")
        if self._reaper is None:
            self._reaper = self.spawn(REAPER.serve(), name="orphan reaper")

    async def session_closed(self, session: Session) -> None:
        starting = self._starting.pop(session.id, None)
        if starting is not None:
            starting.cancel()
            with contextlib.suppress(BaseException):
                await starting
        agent = self._agents.pop(session.id, None)
        if agent is not None:
            await agent.close()
            log.info("session %s: agent stopped (session closed)", session.id)
        with contextlib.suppress(OSError):
            shutil.rmtree(self.workdir(session).parent)

    async def prompt(self, turn: PromptTurn, prompt: list[JsonObject]) -> str:
        session_id = turn.session.id
        with self._claim(session_id):
            agent = await self._ensure(turn.session)
            log.info("session %s: prompt to %s", session_id, agent.recipe.title)
            try:
                stop_reason = await agent.run_turn(turn, prompt)
            except RpcError as exc:
                log.info("session %s: prompt failed: %s", session_id, exc.message)
                if not agent.alive:
                    self._forget(session_id, agent)
                raise
        log.info("session %s: turn ended (%s)", session_id, stop_reason)
        return stop_reason

    async def start_agent(self, session_id: str) -> int | None:
        """Start the session's agent now, as its first prompt would (same cap, same errors); returns its pid.

        For an operator who wants the first turn not to wait for a CLI to boot, and for tests that need the
        process before the first turn.
        """
        session = self.sessions.get(session_id)
        if session is None:
            raise LocalRpcError(INVALID_PARAMS, f"Unknown session: {session_id}")
        with self._claim(session_id):
            agent = await self._ensure(session)
        return agent.process.pid if agent.process is not None else None

    @contextlib.contextmanager
    def _claim(self, session_id: str) -> Iterator[None]:
        """While a prompt holds (or is getting) the session's agent, it is never the one stopped for room."""
        self._claims[session_id] += 1
        try:
            yield
        finally:
            self._claims[session_id] -= 1
            if self._claims[session_id] <= 0:
                del self._claims[session_id]

    async def cancel(self, session_id: str) -> None:
        agent = self._agents.get(session_id)
        if agent is not None:
            agent.cancel()

    # -- agents ------------------------------------------------------------------------------------------

    async def _ensure(self, session: Session) -> SessionAgent:
        """The session's live agent, started (once, however many callers wait) when there is none."""
        agent = self._agents.get(session.id)
        if agent is not None and agent.alive:
            return agent
        if agent is not None:
            self._forget(session.id, agent)
        task = self._starting.get(session.id)
        if task is None:
            self._background()
            # Chosen and taken out of the count before anything awaits: two prompts never pick the same one.
            victim = self._make_room(session.id)
            task = asyncio.get_running_loop().create_task(self._start(session, victim), name=f"start {session.id}")
            self._starting[session.id] = task
        try:
            return await asyncio.shield(task)
        finally:
            if task.done() and self._starting.get(session.id) is task:
                del self._starting[session.id]

    def _make_room(self, session_id: str) -> SessionAgent | None:
        """Below ``max_agents``: nothing to do. At it: the agent idle the longest, to be stopped for this one.
        Raises a clear error when every agent is in a turn."""
        for sid, agent in list(self._agents.items()):
            if not agent.alive:
                self._forget(sid, agent)  # a crashed agent holds no place
        cap = self.settings.max_agents
        if len(self._agents) + len(self._starting) < cap:
            return None
        idle = [(agent.last_used, sid) for sid, agent in self._agents.items()
                if not agent.busy and not self._claims.get(sid)]
        if not idle:
            log.warning("session %s: no agent started: all %d agents of the pod are busy", session_id, cap)
            raise LocalRpcError(
                SERVER_OVERLOADED,
                f"Every agent this pod may run ({cap}) is busy in a turn: wait for one to finish, close another "
                "chat, or ask the operator to raise the cap (--max-agents, OPENAB_MAX_AGENTS).",
            )
        _, sid = min(idle)
        log.info("session %s: agent stopped to make room for session %s (max_agents %d)", sid, session_id, cap)
        return self._agents.pop(sid)

    async def _start(self, session: Session, victim: SessionAgent | None = None) -> SessionAgent:
        if victim is not None:
            await victim.close()  # its memory is free before the next CLI boots
        agent = SessionAgent(self.agent_context(), session, self.offered(session), self.workdir(session))
        recipe = agent.offered.recipe
        try:
            await agent.start(self._conversations.get(session.channel, recipe.name))
        except AgentExited as exc:
            await agent.close()
            how = f" ({recipe.install})" if isinstance(exc, AgentNotFound) and recipe.install else ""
            raise LocalRpcError(INTERNAL_ERROR, f"Could not start {recipe.title}: {exc}{how}") from None
        except (ConfigError, OSError) as exc:
            await agent.close()
            raise LocalRpcError(INTERNAL_ERROR, f"Could not prepare {recipe.title}: {exc}") from None
        except BaseException:
            await agent.close()
            raise
        if self.sessions.get(session.id) is not session:
            await agent.close()  # the session was evicted while its agent was starting
            raise LocalRpcError(INTERNAL_ERROR, "The session was closed while its agent was starting")
        self._agents[session.id] = agent
        if agent.acp_session_id is not None:
            self._conversations.remember(session.channel, recipe.name, agent.acp_session_id)
        return agent

    def _forget(self, session_id: str, agent: SessionAgent) -> None:
        if self._agents.get(session_id) is agent:
            del self._agents[session_id]
        self.spawn(agent.close(), name=f"close agent {session_id}")

    def sweep_idle(self) -> None:
        """Stop the agents idle for ``agent_idle_ttl``; their sessions stay, and start a fresh agent on use."""
        ttl = self.settings.agent_idle_ttl
        cutoff = time.monotonic() - ttl
        for session_id, agent in list(self._agents.items()):
            if not agent.busy and not self._claims.get(session_id) and agent.last_used <= cutoff:
                log.info("session %s: agent stopped after %g s idle", session_id, ttl)
                self._forget(session_id, agent)

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(min(60.0, max(0.2, self.settings.agent_idle_ttl / 4)))
            self.sweep_idle()

    async def wait_ready(self, session_id: str, *, timeout: float) -> int | None:
        """Wait for the session's agent (started by a prompt or :meth:`start_agent`) to finish starting; returns
        its pid (``None``: it failed or is gone)."""
        async with asyncio.timeout(timeout):
            while session_id not in self._agents:
                task = self._starting.get(session_id)
                if task is None:
                    await asyncio.sleep(0.05)  # no prompt has asked for it yet
                    continue
                with contextlib.suppress(Exception):
                    await asyncio.shield(task)
                if task.done() and (task.cancelled() or task.exception() is not None):
                    return None
        return self.agents.get(session_id)

    @property
    def agents(self) -> dict[str, int | None]:
        """Session id -> agent pid, for the live agents (operators' and tests' view)."""
        return {sid: a.process.pid if a.process else None for sid, a in self._agents.items() if a.alive}


@functools.cache
def _runtimes() -> tuple[str, ...]:
    """What runs the launcher and ``openab browser-bridge``: this Python, its environment and openab's packages
    (an editable install keeps them outside site-packages), and the browser tools' catalogue they read."""
    import importlib.util

    from ..catalogue import CATALOGUE_PATH

    found = {sys.prefix, sys.base_prefix, sys.exec_prefix,
             os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))}
    for name in ("openab_browser.core", "openab_browser.bridge", "openab_browser.gateway"):
        spec = importlib.util.find_spec(name)
        found.update(spec.submodule_search_locations or () if spec else ())
    found.add(str(CATALOGUE_PATH.parent))
    return tuple(sorted(os.path.realpath(p) for p in found))
