"""The agent runtime: one agent CLI per ACP session, behind the :class:`AgentBackend` seam.

For each session it starts the configured agent (:mod:`openab.core.agent_recipes`) as a child speaking ACP
on stdio (:mod:`openab.core.agent_process`), in the session's own working directory under the state dir, with
a scrubbed environment and ``OPENAB_BROWSER_CHANNEL`` set, and hands it the session's browser endpoint. The
agent is started when the session opens, kept across prompts and across ``session/resume`` (the session id is
the key, whatever socket holds it), and stopped, with its whole process group, when its session is evicted or
after it has been idle for ``agent_idle_ttl``.

A turn relays ``session/prompt`` to the agent and every ``session/update`` back as it comes; ``session/cancel``
is sent on to the agent; a crash, or an agent that says nothing for ``agent_silence_timeout``, ends the prompt
with an error that says what happened, and the next prompt starts a fresh agent. Permission requests go to
the person when the extension can ask, else to the policy (:mod:`openab.core.agent_permissions`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from .. import package_version
from ..acp.backend import PermissionUnavailable, PromptTurn
from ..acp.sessions import Session
from ..jsonrpc import (
    INTERNAL_ERROR,
    ConnectionClosed,
    JsonObject,
    Later,
    Notification,
    Request,
    RequestTimeout,
    RpcError,
)
from ..mcp.access import BROWSER_CHANNEL_ENV, BrowserAccess, BrowserEndpoint
from ..pod import Pod
from . import config as mcp_config
from .config import write_private
from .permissions import cancelled as cancelled_outcome
from .permissions import decide, reject
from .process import AgentExited, AgentNotFound, AgentProcess, scrubbed_env
from .recipes import Recipe, recipe_for, running_as_root

__all__ = ["AgentRuntime", "operator_env"]

log = logging.getLogger(__name__)

ACP_PROTOCOL_VERSION: Final = 1
# A hard cap on one turn; the silence watchdog is what normally ends a stuck one.
_MAX_TURN_SECONDS: Final = 6 * 3600.0
_TOOL_CALLS_REMEMBERED: Final = 256


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


class _SessionAgent:
    """One session's agent process and the ACP client side we play towards it."""

    def __init__(self, runtime: AgentRuntime, session: Session, cwd: Path) -> None:
        self.runtime = runtime
        self.session = session
        self.cwd = cwd
        self.process: AgentProcess | None = None
        self.acp_session_id: str | None = None
        self.endpoint: BrowserEndpoint | None = None
        self.config_home: Path | None = None
        self.config_env: dict[str, str] = {}
        self.wrote_config = False
        self.turn: PromptTurn | None = None
        self.cancelling = False
        self.last_used = time.monotonic()
        self._tool_calls: collections.OrderedDict[str, JsonObject] = collections.OrderedDict()
        self._asks: set[asyncio.Future[JsonObject]] = set()
        self._asking = 0
        self._quiet_since = time.monotonic()
        self._settling: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        return f"agent[{self.session.id}]"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.alive and not self.process.rpc.closed

    # -- the agent calls us ------------------------------------------------------------------------------

    def handle_request(self, request: Request) -> Any:
        self._heard()
        if request.method == "session/request_permission":
            params = request.params if isinstance(request.params, dict) else {}
            return Later(self._permission(params))
        # We advertise no fs and no terminal: the agent works in the pod, the browser is its only reach.
        raise RpcError.method_not_found(request.method)

    def handle_notification(self, notification: Notification) -> None:
        self._heard()
        if notification.method != "session/update" or not isinstance(notification.params, dict):
            return
        params = notification.params
        update = params.get("update")
        if params.get("sessionId") != self.acp_session_id or not isinstance(update, dict):
            return
        if update.get("sessionUpdate") in ("tool_call", "tool_call_update"):
            self._remember_tool_call(update)
        if self.turn is not None:
            self.turn.send_update(update)

    def _heard(self) -> None:
        self._quiet_since = time.monotonic()

    def _remember_tool_call(self, update: JsonObject) -> None:
        call_id = update.get("toolCallId")
        if not isinstance(call_id, str):
            return
        known = self._tool_calls.pop(call_id, {})
        self._tool_calls[call_id] = {**known, **{k: v for k, v in update.items() if k != "sessionUpdate"}}
        while len(self._tool_calls) > _TOOL_CALLS_REMEMBERED:
            self._tool_calls.popitem(last=False)

    async def _permission(self, params: JsonObject) -> JsonObject:
        runtime = self.runtime
        turn = self.turn
        if turn is None or self.cancelling:
            return cancelled_outcome()
        raw_call = params.get("toolCall") if isinstance(params.get("toolCall"), dict) else {}
        assert isinstance(raw_call, dict)
        call_id = raw_call.get("toolCallId")
        # Codex sends sparse requests: what it streamed earlier for the same call fills the gaps.
        tool_call = {**self._tool_calls.get(call_id, {}), **raw_call} if isinstance(call_id, str) else raw_call
        if turn.can_ask_permission:
            relayed = {k: v for k, v in params.items() if k != "sessionId"}
            ask = asyncio.ensure_future(
                turn.request_permission(relayed, timeout=runtime.pod.settings.permission_timeout)
            )
            self._asks.add(ask)
            self._asking += 1
            try:
                outcome = _offered(await ask, params)
                log.info("%s: permission for %r answered in the browser", self.name, _title(tool_call))
                return outcome
            except asyncio.CancelledError:
                if self.cancelling:
                    return cancelled_outcome()
                ask.cancel()  # the agent went away: nobody needs the card any more
                raise
            except PermissionUnavailable as exc:
                log.info("%s: %s; the %s policy decides", self.name, exc, runtime.policy)
            except TimeoutError as exc:
                log.info("%s: %s; rejected", self.name, exc)
                return reject(params)
            finally:
                self._asks.discard(ask)
                self._asking -= 1
                self._heard()
        log.debug("%s: permission request %s over %s", self.name, _preview(params, 4000), _preview(tool_call, 4000))
        outcome = decide(
            runtime.policy, params, identify=runtime.recipe.identify, tool_call=tool_call,
            browser_tools=runtime.browser_tools(self.session.id),
        )
        log.info("%s: permission for %r: %s by the %s policy", self.name, _title(tool_call),
                 outcome["outcome"].get("optionId", "cancelled"), runtime.policy)
        return outcome

    # -- life --------------------------------------------------------------------------------------------

    async def start(self, previous: str | None = None) -> None:
        runtime = self.runtime
        settings = runtime.pod.settings
        recipe = runtime.recipe
        self.cwd.mkdir(mode=0o700, parents=True, exist_ok=True)
        if runtime.browser is not None:
            self.endpoint = await runtime.browser.endpoint_for(self.session)
        env = runtime.agent_env(self.session, self.endpoint)
        servers: list[JsonObject] = []
        if self.endpoint is not None:
            if recipe.browser_via == "config" and recipe.config_agent:
                self.config_home = Path(env.get("HOME") or Path.home())
                writer = getattr(runtime.browser, "write_config", None)
                self.config_env = env  # CODEX_HOME and the like say where the CLI reads its config
                if callable(writer):
                    # The proxy remembers what it wrote, refuses a file another session holds, strips on close.
                    writer(self.session, recipe.config_agent, self.cwd, home=self.config_home, env=env)
                else:
                    mcp_config.write(recipe.config_agent, self.endpoint.config, dir=self.cwd,
                                     home=self.config_home, env=env)
                    self.wrote_config = True
            elif self.endpoint.acp_server is not None:
                servers.append(self.endpoint.acp_server)
        self.process = AgentProcess(runtime.argv, handler=self, env=env, cwd=self.cwd, name=self.name)
        await self.process.start()
        rpc = self.process.rpc
        try:
            async with asyncio.timeout(settings.agent_start_timeout):
                init = await rpc.request(
                    "initialize",
                    {
                        "protocolVersion": ACP_PROTOCOL_VERSION,
                        "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False},
                                               "terminal": False},
                        "clientInfo": {"name": "openab", "title": "openab pod", "version": package_version()},
                    },
                    timeout=settings.agent_start_timeout,
                )
                if not isinstance(init, dict) or init.get("protocolVersion") != ACP_PROTOCOL_VERSION:
                    raise AgentExited(f"the agent does not speak ACP v1 (initialize said {_preview(init)})")
                session_id = await self._open_conversation(init, servers, previous)
        except TimeoutError:
            await self.stop(f"it did not start within {settings.agent_start_timeout:g} s")
            raise AgentExited(
                f"the agent did not answer initialize/session/new within {settings.agent_start_timeout:g} s "
                f"({self.process.exit_message()})"
            ) from None
        except (ConnectionClosed, RequestTimeout):
            await self.stop()
            raise AgentExited(self.process.exit_message()) from None
        except RpcError as exc:
            await self.stop()
            raise AgentExited(f"the agent refused to start a session: {_agent_error_text(exc)}") from None
        except AgentExited:
            await self.stop()
            raise
        self.acp_session_id = session_id
        self._heard()
        log.info("%s: %s ready (pid %s, browser via %s%s)", self.name, recipe.title, self.process.pid,
                 "none" if self.endpoint is None else recipe.browser_via,
                 ", conversation resumed" if session_id == previous else "")

    async def _open_conversation(self, init: JsonObject, servers: list[JsonObject], previous: str | None) -> str:
        """The agent's session id: the session's earlier conversation when the agent can take it up again
        (this is a fresh process after an idle stop or a crash), else a new one."""
        assert self.process is not None
        rpc, timeout = self.process.rpc, self.runtime.pod.settings.agent_start_timeout
        params: JsonObject = {"cwd": str(self.cwd), "mcpServers": servers}
        capabilities = init.get("agentCapabilities") if isinstance(init.get("agentCapabilities"), dict) else {}
        assert isinstance(capabilities, dict)
        resumable = isinstance((capabilities.get("sessionCapabilities") or {}).get("resume"), dict)
        # session/resume takes the conversation up without replaying it; session/load replays it as updates,
        # which no turn is there to receive.
        method = "session/resume" if resumable else "session/load" if capabilities.get("loadSession") is True else None
        if previous is not None and method is not None:
            try:
                await rpc.request(method, {**params, "sessionId": previous}, timeout=timeout)
                return previous
            except RpcError as exc:
                log.info("%s: %s refused (%s); starting a new conversation", self.name, method, exc.message)
        created = await rpc.request("session/new", params, timeout=timeout)
        session_id = created.get("sessionId") if isinstance(created, dict) else None
        if not isinstance(session_id, str) or not session_id:
            raise AgentExited(f"the agent's session/new answer has no sessionId: {_preview(created)}")
        return session_id

    async def run_turn(self, turn: PromptTurn, blocks: list[JsonObject]) -> str:
        if self._settling is not None and not self._settling.done():
            # The previous turn was abandoned mid-cancel; the agent gets its grace to finish it first.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.runtime.pod.settings.cancel_grace + 5):
                    await asyncio.shield(self._settling)
        if not self.alive:
            raise _agent_gone(self)
        assert self.process is not None
        rpc = self.process.rpc
        self.turn, self.cancelling, self.last_used = turn, False, time.monotonic()
        self._heard()
        silence = self.runtime.pod.settings.agent_silence_timeout
        request = asyncio.ensure_future(
            rpc.request("session/prompt", {"sessionId": self.acp_session_id, "prompt": blocks},
                        timeout=_MAX_TURN_SECONDS)
        )
        try:
            while not request.done():
                quiet = time.monotonic() - self._quiet_since
                if self._asking == 0 and quiet >= silence:
                    reason = f"it said nothing for {silence:g} s"
                    rpc.notify("session/cancel", {"sessionId": self.acp_session_id})
                    await self.stop(reason)
                    raise RpcError(INTERNAL_ERROR, f"The agent stopped answering: {reason}, so it was stopped. "
                                                   "Prompt again to start a fresh agent.")
                await asyncio.wait({request}, timeout=max(0.05, silence - quiet) if self._asking == 0 else 1.0)
            result = request.result()
        except (ConnectionClosed, RequestTimeout):
            raise _agent_gone(self) from None
        except RpcError as exc:
            if request.done() and not request.cancelled() and request.exception() is exc:
                raise RpcError(INTERNAL_ERROR, f"The agent failed: {_agent_error_text(exc)}", exc.data) from None
            raise
        except asyncio.CancelledError:
            if not request.done():
                self._abandon(request)
            raise
        finally:
            self.turn = None
            self.last_used = time.monotonic()
            if not request.done():
                request.add_done_callback(_consume)
        stop_reason = result.get("stopReason") if isinstance(result, dict) else None
        return stop_reason if isinstance(stop_reason, str) else "end_turn"

    def cancel(self) -> None:
        if self.turn is None or self.cancelling:
            return
        self.cancelling = True
        if self.alive and self.process is not None:
            self.process.rpc.notify("session/cancel", {"sessionId": self.acp_session_id})
            log.info("%s: turn cancelled", self.name)
        for ask in list(self._asks):
            ask.cancel()  # ACP: after session/cancel the client answers pending permissions with cancelled

    def _abandon(self, request: asyncio.Future[Any]) -> None:
        """The gateway gave up on this turn: cancel it at the agent; an agent that ignores that is stopped."""
        self.cancel()
        grace = self.runtime.pod.settings.cancel_grace

        async def settle() -> None:
            try:
                async with asyncio.timeout(grace):
                    await asyncio.wait({request})
            except TimeoutError:
                await self.stop(f"it did not end a cancelled turn within {grace:g} s")
            finally:
                request.cancel()

        self._settling = self.runtime.pod.spawn(settle(), name=f"settle {self.session.id}")

    async def stop(self, reason: str | None = None) -> None:
        if self.process is not None:
            await self.process.stop(reason=reason)

    async def close(self) -> None:
        await self.stop("its session was closed")
        if self.wrote_config and self.endpoint is not None and self.runtime.recipe.config_agent:
            with contextlib.suppress(mcp_config.ConfigError, OSError):
                mcp_config.strip(self.runtime.recipe.config_agent, self.endpoint.config, dir=self.cwd,
                                 home=self.config_home, env=self.config_env)


class _Conversations:
    """Which agent conversation each session had, in a 0600 JSON file under the state dir.

    A session that comes back under its id (``session/resume`` after a socket drop, an idle eviction or a pod
    restart) gets its conversation back when the same kind of agent can take it up. Entries older than ``ttl``
    are forgotten: upstream expired its agent sessions the same way.
    """

    def __init__(self, path: Path, *, agent: str, ttl: float) -> None:
        self.path = path
        self._agent = agent
        self._ttl = ttl
        self._entries: dict[str, JsonObject] = {}
        try:
            loaded = json.loads(path.read_text())
        except (OSError, ValueError):
            loaded = {}
        if isinstance(loaded, dict):
            self._entries = {k: v for k, v in loaded.items() if isinstance(v, dict) and isinstance(v.get("id"), str)}

    def get(self, session_id: str) -> str | None:
        entry = self._entries.get(session_id)
        if entry is None or entry.get("agent") != self._agent:
            return None
        if not isinstance(entry.get("at"), (int, float)) or time.time() - entry["at"] > self._ttl:
            return None
        return str(entry["id"])

    def remember(self, session_id: str, conversation: str) -> None:
        now = time.time()
        self._entries = {k: v for k, v in self._entries.items()
                         if isinstance(v.get("at"), (int, float)) and now - v["at"] <= self._ttl}
        self._entries[session_id] = {"agent": self._agent, "id": conversation, "at": now}
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            write_private(self.path, json.dumps(self._entries))
        except OSError as exc:
            log.warning("could not save %s: %s", self.path, exc)  # conversations then last as long as the pod


class AgentRuntime:
    """The pod's :class:`AgentBackend` for real agent CLIs (and the built-in agent, run the same way)."""

    def __init__(
        self,
        pod: Pod,
        *,
        recipe: Recipe | None = None,
        browser: BrowserAccess | None = None,
        env: Mapping[str, str] | None = None,
        base_env: Mapping[str, str] | None = None,
    ) -> None:
        settings = pod.settings
        self.pod = pod
        self.recipe = recipe or recipe_for(settings.agent, settings.agent_cmd)
        self.argv = self.recipe.command(settings.agent_cmd)
        if not self.argv:
            raise ValueError(f"agent {self.recipe.name!r} has no command: give --agent-cmd")
        self.browser = browser
        self.policy = settings.permissions
        self._base_env = dict(os.environ if base_env is None else base_env)
        self._extra_env = dict(env or {})
        self._agents: dict[str, _SessionAgent] = {}
        self._starting: dict[str, asyncio.Task[_SessionAgent]] = {}
        # Session id -> the agent's own session id, so a fresh process (after an idle stop, a crash, or a pod
        # restart: the file outlives the pod) can take the conversation up again.
        self._conversations = _Conversations(
            settings.state_dir / "conversations.json", agent=self.recipe.name, ttl=settings.agent_conversation_ttl
        )
        self._sweeper: asyncio.Task[Any] | None = None

    # -- what the agent gets -----------------------------------------------------------------------------

    def agent_env(self, session: Session, endpoint: BrowserEndpoint | None) -> dict[str, str]:
        settings = self.pod.settings
        extra: dict[str, str] = dict(self.recipe.env)
        if running_as_root():
            extra.update(self.recipe.root_env)
        if self.recipe.name == "builtin":
            extra.update(self._builtin_env())
        extra.update(operator_env(settings.agent_env, self._base_env))
        extra.update(self._extra_env)
        if endpoint is not None:
            extra.update(endpoint.env)
        extra[BROWSER_CHANNEL_ENV] = session.channel
        return scrubbed_env(self._base_env, extra=extra)

    def _builtin_env(self) -> dict[str, str]:
        settings = self.pod.settings
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
            for tunnel in self.pod.tunnels.tunnels(session_id)
            for tool in tunnel.tools or []
            if isinstance(tool.get("name"), str)
        }

    def workdir(self, session: Session) -> Path:
        return self.pod.settings.state_dir / "sessions" / session.channel / "work"

    # -- AgentBackend ------------------------------------------------------------------------------------

    async def session_opened(self, session: Session) -> None:
        """Start the agent now, so the first prompt does not wait for a CLI to boot."""
        if self._sweeper is None:
            self._sweeper = self.pod.spawn(self._sweep(), name="agent idle sweeper")
        try:
            await self._ensure(session)
        except RpcError as exc:
            log.warning("session %s: %s", session.id, exc.message)  # the first prompt says it again

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
        agent = await self._ensure(turn.session)
        log.info("session %s: prompt to %s", turn.session.id, self.recipe.title)
        try:
            stop_reason = await agent.run_turn(turn, prompt)
        except RpcError as exc:
            log.info("session %s: prompt failed: %s", turn.session.id, exc.message)
            if not agent.alive:
                self._forget(turn.session.id, agent)
            raise
        log.info("session %s: turn ended (%s)", turn.session.id, stop_reason)
        return stop_reason

    async def cancel(self, session_id: str) -> None:
        agent = self._agents.get(session_id)
        if agent is not None:
            agent.cancel()

    # -- agents ------------------------------------------------------------------------------------------

    async def _ensure(self, session: Session) -> _SessionAgent:
        """The session's live agent, started (once, however many callers wait) when there is none."""
        agent = self._agents.get(session.id)
        if agent is not None and agent.alive:
            return agent
        if agent is not None:
            self._forget(session.id, agent)
        task = self._starting.get(session.id)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._start(session), name=f"start {session.id}")
            self._starting[session.id] = task
        try:
            return await asyncio.shield(task)
        finally:
            if task.done() and self._starting.get(session.id) is task:
                del self._starting[session.id]

    async def _start(self, session: Session) -> _SessionAgent:
        agent = _SessionAgent(self, session, self.workdir(session))
        try:
            await agent.start(self._conversations.get(session.id))
        except AgentExited as exc:
            await agent.close()
            how = f" ({self.recipe.install})" if isinstance(exc, AgentNotFound) and self.recipe.install else ""
            raise RpcError(INTERNAL_ERROR, f"Could not start {self.recipe.title}: {exc}{how}") from None
        except (mcp_config.ConfigError, OSError) as exc:
            await agent.close()
            raise RpcError(INTERNAL_ERROR, f"Could not prepare {self.recipe.title}: {exc}") from None
        except BaseException:
            await agent.close()
            raise
        if self.pod.sessions.get(session.id) is not session:
            await agent.close()  # the session was evicted while its agent was starting
            raise RpcError(INTERNAL_ERROR, "The session was closed while its agent was starting")
        self._agents[session.id] = agent
        if agent.acp_session_id is not None:
            self._conversations.remember(session.id, agent.acp_session_id)
        return agent

    def _forget(self, session_id: str, agent: _SessionAgent) -> None:
        if self._agents.get(session_id) is agent:
            del self._agents[session_id]
        self.pod.spawn(agent.close(), name=f"close agent {session_id}")

    def sweep_idle(self) -> None:
        """Stop the agents idle for ``agent_idle_ttl``; their sessions stay, and start a fresh agent on use."""
        ttl = self.pod.settings.agent_idle_ttl
        cutoff = time.monotonic() - ttl
        for session_id, agent in list(self._agents.items()):
            if agent.turn is None and agent.last_used <= cutoff:
                log.info("session %s: agent stopped after %g s idle", session_id, ttl)
                self._forget(session_id, agent)

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(min(60.0, max(0.2, self.pod.settings.agent_idle_ttl / 4)))
            self.sweep_idle()

    async def wait_ready(self, session_id: str, *, timeout: float) -> int | None:
        """Wait for the session's agent to finish starting; returns its pid (``None``: it failed or is gone)."""
        async with asyncio.timeout(timeout):
            while session_id not in self._agents:
                task = self._starting.get(session_id)
                if task is None:
                    await asyncio.sleep(0.05)  # session_opened has not run yet
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


def _consume(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _agent_gone(agent: _SessionAgent) -> RpcError:
    how = agent.process.exit_message() if agent.process is not None else "the agent is not running"
    return RpcError(INTERNAL_ERROR, f"The agent ended mid-turn: {how}. Prompt again to start a fresh agent.")


def _agent_error_text(exc: RpcError) -> str:
    text = exc.message or f"error {exc.code}"
    # Several agents put the useful words in data and say only "Internal error" in the message.
    if isinstance(exc.data, str) and exc.data:
        text = f"{text}: {exc.data}"
    elif isinstance(exc.data, dict) and isinstance(exc.data.get("message"), str):
        text = f"{text}: {exc.data['message']}"
    if exc.code == -32000:
        text += " (the agent needs to sign in: log it in inside the pod, or give it its API key with --agent-env)"
    return text[:2000]


def _offered(answer: JsonObject, params: JsonObject) -> JsonObject:
    """The person's answer, if it picks one of the options the agent offered; else a rejection."""
    outcome = answer.get("outcome")
    if isinstance(outcome, dict) and outcome.get("outcome") == "cancelled":
        return cancelled_outcome()
    offered = {o.get("optionId") for o in params.get("options") or [] if isinstance(o, dict)}
    if isinstance(outcome, dict) and outcome.get("outcome") == "selected" and outcome.get("optionId") in offered:
        return {"outcome": {"outcome": "selected", "optionId": outcome["optionId"]}}
    log.warning("the extension answered a permission request with an option the agent did not offer; rejected")
    return reject(params)


def _title(tool_call: JsonObject) -> str:
    title = tool_call.get("title")
    return str(title)[:120] if title else str(tool_call.get("toolCallId", "?"))


def _preview(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
