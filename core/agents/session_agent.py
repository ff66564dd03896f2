"""One session's agent process, and the ACP client we play towards it: the turn relay, cancellation, the
silence watchdog and permission requests (to the person when the extension can ask, else to the policy).

It gets what it uses of the pod as an :class:`AgentContext`, built by the agent runtime, and never the runtime
itself; the watchdog and the cancel grace run on the turn's own clock
(:class:`~openab_browser.core.turn_watch.TurnClock`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from .. import package_version
from ..acp.backend import PromptTurn
from ..acp.schema import AUTH_REQUIRED
from ..errors import AgentExited, PermissionUnavailable, TransportError
from ..jsonrpc import INTERNAL_ERROR, JsonObject, Later, LocalRpcError, Notification, RemoteRpcError, Request, RpcError
from ..mcp.access import BrowserEndpoint
from ..sessions import Session
from ..turn_watch import SILENCE, TurnClock
from .permissions import Policy, decide, decide_ours, reject
from .permissions import cancelled as cancelled_outcome
from .process import AgentProcess
from .provision import BrowserProvision, Provided
from .recipes import Recipe, recipe_reported

if TYPE_CHECKING:
    from ..mcp.access import BrowserAccess
    from ..settings import Settings
    from ..tasks import Spawn

__all__ = ["ACP_PROTOCOL_VERSION", "AgentContext", "Learned", "OfferedAgent", "SessionAgent", "named_itself"]

log = logging.getLogger(__name__)

ACP_PROTOCOL_VERSION: Final = 1
# A hard cap on one turn; the silence watchdog is what normally ends a stuck one.
_MAX_TURN_SECONDS: Final = 6 * 3600.0
_TOOL_CALLS_REMEMBERED: Final = 256


class Learned:
    """What a command that is not its recipe's own turned out to be: the recipe of the CLI its runtime named in its
    last ``initialize`` (``None`` before it started once), and that recipe's way of being given the browser."""

    def __init__(self) -> None:
        self.recipe: Recipe | None = None
        self.provision: BrowserProvision | None = None


@dataclass(frozen=True, slots=True)
class OfferedAgent:
    """One agent a session may choose: its recipe, the command that starts it, and how it gets the browser.

    A command that is not the recipe's own (``--agent-cmd``: a wrapper, ``npx ...``) runs as the CLI its ACP
    runtime says it is in ``initialize`` (:func:`named_itself`); that is learned once and kept in ``learned``, so
    later starts, in any session, run it as that CLI from the outset.
    """

    recipe: Recipe
    argv: list[str]
    provision: BrowserProvision
    learned: Learned = field(default_factory=Learned, compare=False)

    @classmethod
    def of(cls, recipe: Recipe, command: list[str] | None) -> OfferedAgent:
        argv = recipe.command(command)
        if not argv:
            raise ValueError(f"agent {recipe.name!r} has no command: give --agent-cmd")
        return cls(recipe, argv, BrowserProvision(recipe))

    @property
    def own_command(self) -> bool:
        return list(self.argv) == list(self.recipe.argv)

    def runs_as(self) -> tuple[Recipe, BrowserProvision]:
        """The recipe the next start uses (its env, its allow-list, how it gets the browser, how its permission
        requests are read), and that recipe's provision."""
        learned = self.learned
        if learned.recipe is None or learned.provision is None:
            return self.recipe, self.provision
        return learned.recipe, learned.provision

    def learn(self, recipe: Recipe) -> None:
        self.learned.recipe = recipe
        self.learned.provision = self.provision if recipe is self.recipe else BrowserProvision(recipe)


def named_itself(offered: OfferedAgent, agent_info: object) -> tuple[Recipe, str]:
    """The recipe ``offered`` runs as, now that its runtime has answered ``initialize`` with ``agent_info``, and
    what the log says of it (``""``: nothing to say, the command is the recipe's own).

    A command that names a recipe's CLI runs as that CLI, whatever ``--agent`` said; one that names no CLI runs as
    ``--agent`` said (``custom``: no request of its is known to be for our browser tools, so each one goes to
    the person or the policy).
    """
    if offered.own_command:
        return offered.recipe, ""
    reported = recipe_reported(agent_info)
    info = agent_info if isinstance(agent_info, dict) else {}
    said = f"{str(info.get('name', ''))[:80]!r} {str(info.get('version', ''))[:40]}".strip()
    if not info.get("name"):
        said = "nothing (initialize has no agentInfo.name)"
    if reported is not None:
        if offered.recipe.name not in ("custom", reported.name):
            return reported, (f"--agent {offered.recipe.name} was given, but its command names itself {said}: it runs "
                              f"as {reported.title}")
        return reported, f"its command names itself {said}: it runs as {reported.title}"
    if offered.recipe.name == "custom":
        return offered.recipe, (f"its command names itself {said}, which no recipe knows: every permission request "
                                "it sends, for the browser tools too, goes to the person (a card) or the policy")
    return offered.recipe, (f"its command names itself {said}, not {offered.recipe.title}: it runs as "
                            f"{offered.recipe.title}, as --agent says")


@dataclass(frozen=True, slots=True)
class AgentContext:
    """What a session's agent uses of the pod, built by the agent runtime that runs it.

    ``settings``: the pod's, read when used (the start, silence, permission and cancel limits); ``policy``: who
    decides what the person is not asked; ``browser``: the session's endpoint, and who hears the agent's pid;
    ``spawn``: background work (the settling of a turn the gateway gave up on); ``workdir(session)``: the
    session's working folder, made 0700; ``agent_env(session, endpoint, recipe)``: the CLI's scrubbed environment,
    as ``recipe`` runs it; ``browser_tools(session_id)``: the tools the session's browser offers right now;
    ``cgroups``: where each agent gets a cgroup of its own (``None``: its tree is tracked through ``/proc``);
    ``confine(session, recipe, env)``: what wraps the agent's command in its confinement (``None``: it runs
    unconfined), raising :class:`AgentExited` for an agent the pod must not run unconfined.
    """

    settings: Settings
    policy: Policy
    browser: BrowserAccess
    spawn: Spawn
    workdir: Callable[[Session], Path]
    agent_env: Callable[[Session, BrowserEndpoint, Recipe], dict[str, str]]
    browser_tools: Callable[[str], set[str]]
    cgroups: Path | None
    confine: Callable[[Session, Recipe, Mapping[str, str]], Callable[[list[str]], list[str]] | None]


class SessionAgent:
    """One session's agent process and the ACP client side we play towards it."""

    def __init__(self, context: AgentContext, session: Session, offered: OfferedAgent, cwd: Path) -> None:
        self.context = context
        self.session = session
        # The agent the session chose at session/new; it stays the session's across restarts and resumes.
        self.offered = offered
        # What it runs as, and how it was given the browser: the recipe's own until its runtime says otherwise.
        self.recipe = offered.recipe
        self.provision = offered.provision
        self.cwd = cwd
        self.process: AgentProcess | None = None
        self.acp_session_id: str | None = None
        self.endpoint: BrowserEndpoint | None = None
        self.provided: Provided | None = None
        self.turn: PromptTurn | None = None
        self.cancelling = False
        self.last_used = time.monotonic()
        self._tool_calls: collections.OrderedDict[str, JsonObject] = collections.OrderedDict()
        self._asks: set[asyncio.Future[JsonObject]] = set()
        # The running turn's clock, the gateway's: a person asked stops both sides' timers.
        self._clock: TurnClock | None = None
        self._settling: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        return f"agent[{self.session.id}]"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.alive and not self.process.rpc.closed

    @property
    def busy(self) -> bool:
        """In a turn, or still settling one the gateway gave up on: not an agent to stop to make room."""
        return self.turn is not None or (self._settling is not None and not self._settling.done())

    # -- the agent calls us ------------------------------------------------------------------------------

    def handle_request(self, request: Request) -> Any:
        self._heard()
        if request.method == "session/request_permission":
            params = request.params if isinstance(request.params, dict) else {}
            return Later(self._permission(params))
        # We advertise no fs and no terminal: the agent works in the pod, the browser is its only reach.
        raise LocalRpcError.method_not_found(request.method)

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
        if self._clock is not None:
            self._clock.active(SILENCE)

    def _remember_tool_call(self, update: JsonObject) -> None:
        call_id = update.get("toolCallId")
        if not isinstance(call_id, str):
            return
        known = self._tool_calls.pop(call_id, {})
        self._tool_calls[call_id] = {**known, **{k: v for k, v in update.items() if k != "sessionUpdate"}}
        while len(self._tool_calls) > _TOOL_CALLS_REMEMBERED:
            self._tool_calls.popitem(last=False)

    async def _permission(self, params: JsonObject) -> JsonObject:
        context = self.context
        turn = self.turn
        if turn is None or self.cancelling:
            return cancelled_outcome()
        raw_call = params.get("toolCall") if isinstance(params.get("toolCall"), dict) else {}
        assert isinstance(raw_call, dict)
        call_id = raw_call.get("toolCallId")
        # Codex sends sparse requests: what it streamed earlier for the same call fills the gaps.
        tool_call = {**self._tool_calls.get(call_id, {}), **raw_call} if isinstance(call_id, str) else raw_call
        recipe = self.recipe
        ours = decide_ours(context.policy, params, identify=recipe.identify, tool_call=tool_call,
                           browser_tools=context.browser_tools(self.session.id))
        if ours is not None:
            # Our own browser tool: the policy decides here and the browser's guard stops what is risky, so the
            # person is not asked twice for one click.
            log.info("%s: permission for %r: %s by the %s policy (a browser tool)", self.name, _title(tool_call),
                     ours["outcome"].get("optionId", "cancelled"), context.policy)
            return ours
        if turn.can_ask_permission:
            relayed = {k: v for k, v in params.items() if k != "sessionId"}
            # The turn stops its clocks, ours included, while the person is asked.
            ask = asyncio.ensure_future(turn.request_permission(relayed, timeout=context.settings.permission_timeout))
            self._asks.add(ask)
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
                log.info("%s: %s; the %s policy decides", self.name, exc, context.policy)
            except TimeoutError as exc:
                log.info("%s: %s; rejected", self.name, exc)
                return reject(params)
            finally:
                self._asks.discard(ask)
        log.debug("%s: permission request %s over %s", self.name, _preview(params, 4000), _preview(tool_call, 4000))
        outcome = decide(
            context.policy, params, identify=recipe.identify, tool_call=tool_call,
            browser_tools=context.browser_tools(self.session.id),
        )
        log.info("%s: permission for %r: %s by the %s policy", self.name, _title(tool_call),
                 outcome["outcome"].get("optionId", "cancelled"), context.policy)
        return outcome

    # -- life --------------------------------------------------------------------------------------------

    async def start(self, previous: str | None = None) -> None:
        context = self.context
        self.context.workdir(self.session)
        self.endpoint = await context.browser.open(self.session)
        recipe, provision = self.offered.runs_as()
        init = await self._launch(recipe, provision)
        named, why = named_itself(self.offered, init.get("agentInfo"))
        if why:
            log.info("%s: %s", self.name, why)
        if named is not recipe:
            # What it is decides how it is started (its env, its allow-list, where it reads the browser from), not
            # only how its requests are read: it is started again as that CLI, and later starts are so from the outset.
            self.offered.learn(named)
            await self._retire(f"it is started again as {named.title}")
            recipe, provision = self.offered.runs_as()
            init = await self._launch(recipe, provision)
        self.recipe = recipe
        assert self.process is not None and self.provided is not None
        async with self._starting():
            session_id = await self._open_conversation(init, self.provided.servers, previous)
        self.acp_session_id = session_id
        self._heard()
        log.info("%s: %s ready (pid %s, browser via %s%s)", self.name, recipe.title, self.process.pid,
                 recipe.browser_via,
                 ", conversation resumed" if session_id == previous else "")

    async def _launch(self, recipe: Recipe, provision: BrowserProvision) -> JsonObject:
        """Starts the agent's process as ``recipe`` says and answers its ``initialize``."""
        context = self.context
        settings = context.settings
        assert self.endpoint is not None
        env = context.agent_env(self.session, self.endpoint, recipe)
        argv = [*self.offered.argv, *recipe.flags]
        if context.policy != "deny":
            # The CLI's own allow-list runs our browser tools unasked (the guard in the browser still stops what
            # is risky); a variable the operator set is theirs, not replaced.
            argv += recipe.allow_browser_argv
            env.update({k: v for k, v in recipe.allow_browser_env.items() if env.get(k) == recipe.env.get(k)})
        self.provision = provision
        self.provided = provision.provide(self.session.id, self.endpoint, self.cwd, env)
        argv += self.provided.argv
        self.process = AgentProcess(argv, handler=self, env=env, cwd=self.cwd, name=self.name,
                                    cgroups=context.cgroups, wrap=context.confine(self.session, recipe, env))
        await self.process.start()
        if self.process.pid is not None:
            context.browser.agent_started(self.session, self.process.pid)
        async with self._starting():
            init = await self.process.rpc.request(
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
        return init

    @contextlib.asynccontextmanager
    async def _starting(self) -> AsyncIterator[None]:
        """One step of the start (``initialize``, ``session/new``) within the start timeout; a failure stops the
        process and says why as :class:`AgentExited`."""
        assert self.process is not None
        timeout = self.context.settings.agent_start_timeout
        try:
            async with asyncio.timeout(timeout):
                yield
        except TimeoutError:
            await self.stop(f"it did not start within {timeout:g} s")
            raise AgentExited(
                f"the agent did not answer initialize/session/new within {timeout:g} s "
                f"({self.process.exit_message()})"
            ) from None
        except TransportError:
            await self.stop()
            raise AgentExited(self.process.exit_message()) from None
        except RemoteRpcError as exc:
            await self.stop()
            raise AgentExited(f"the agent refused to start a session: {_agent_error_text(exc)}") from None
        except AgentExited:
            await self.stop()
            raise

    async def _retire(self, reason: str) -> None:
        """Stops the process and takes back what it was given, for a start that replaces it."""
        await self.stop(reason)
        if self.provided is not None:
            self.provision.withdraw(self.provided)
            self.provided = None

    async def _open_conversation(self, init: JsonObject, servers: list[JsonObject], previous: str | None) -> str:
        """The agent's session id: the session's earlier conversation when the agent can take it up again
        (this is a fresh process after an idle stop or a crash), else a new one."""
        assert self.process is not None
        rpc, timeout = self.process.rpc, self.context.settings.agent_start_timeout
        params: JsonObject = {"cwd": str(self.cwd), "mcpServers": servers}
        allow_browser = self.recipe.allow_browser
        if allow_browser and self.context.policy != "deny":
            params["_meta"] = allow_browser
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
            except RemoteRpcError as exc:
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
                async with asyncio.timeout(self.context.settings.cancel_grace + 5):
                    await asyncio.shield(self._settling)
        if not self.alive:
            raise _agent_gone(self)
        assert self.process is not None
        rpc = self.process.rpc
        self.turn, self.cancelling, self.last_used = turn, False, time.monotonic()
        silence = self.context.settings.agent_silence_timeout
        # Stopped while a person is asked, in a card here or in the browser: the gateway's clock when it has one.
        clock = self._clock = turn.clock
        clock.arm(SILENCE, silence)
        request = asyncio.ensure_future(
            rpc.request("session/prompt", {"sessionId": self.acp_session_id, "prompt": blocks},
                        timeout=_MAX_TURN_SECONDS)
        )
        try:
            while not request.done():
                left = clock.left(SILENCE)
                if left <= 0:
                    reason = f"it said nothing for {silence:g} s"
                    rpc.notify("session/cancel", {"sessionId": self.acp_session_id})
                    await self.stop(reason)
                    raise LocalRpcError(INTERNAL_ERROR, f"The agent stopped answering: {reason}, so it was stopped. "
                                                   "Prompt again to start a fresh agent.")
                await asyncio.wait({request}, timeout=max(0.05, left))
            result = request.result()
        except TransportError:
            raise _agent_gone(self) from None
        except RemoteRpcError as exc:
            if request.done() and not request.cancelled() and request.exception() is exc:
                raise LocalRpcError(INTERNAL_ERROR, f"The agent failed: {_agent_error_text(exc)}", exc.data) from None
            raise
        except asyncio.CancelledError:
            if not request.done():
                self._abandon(request, clock)
            raise
        finally:
            self.turn, self._clock = None, None
            clock.disarm(SILENCE)
            self.last_used = time.monotonic()
            # Whatever ended the turn, the request's own failure is read (a stopped agent fails it, maybe only
            # while we stop it): left unread, asyncio would log it as an error nobody handled.
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

    def _abandon(self, request: asyncio.Future[Any], clock: TurnClock) -> None:
        """The gateway gave up on this turn: cancel it at the agent; an agent that has not ended it when the turn's
        cancel grace runs out is stopped. One grace per turn: if the gateway cancelled first, it is that one."""
        self.cancel()
        grace = self.context.settings.cancel_grace
        clock.cancel(grace=grace)

        async def settle() -> None:
            try:
                if not request.done():
                    async with asyncio.timeout(max(0.0, clock.grace_left())):
                        await asyncio.wait({request})
            except TimeoutError:
                await self.stop(f"it did not end a cancelled turn within {grace:g} s")
            finally:
                request.cancel()

        self._settling = self.context.spawn(settle(), name=f"settle {self.session.id}")

    async def stop(self, reason: str | None = None) -> None:
        if self.process is not None:
            await self.process.stop(reason=reason)

    async def close(self) -> None:
        await self._retire("its session was closed")


def _consume(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _agent_gone(agent: SessionAgent) -> RpcError:
    how = agent.process.exit_message() if agent.process is not None else "the agent is not running"
    return LocalRpcError(INTERNAL_ERROR, f"The agent ended mid-turn: {how}. Prompt again to start a fresh agent.")


def _agent_error_text(exc: RpcError) -> str:
    text = exc.message or f"error {exc.code}"
    # Several agents put the useful words in data and say only "Internal error" in the message.
    if isinstance(exc.data, str) and exc.data:
        text = f"{text}: {exc.data}"
    elif isinstance(exc.data, dict) and isinstance(exc.data.get("message"), str):
        text = f"{text}: {exc.data['message']}"
    if exc.code == AUTH_REQUIRED:
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
