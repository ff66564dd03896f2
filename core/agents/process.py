"""One agent CLI child process speaking ACP (newline-delimited JSON-RPC) on its stdio.

The process runs in its own process group (``start_new_session``), so stopping it kills the npm launcher *and*
the native binary it spawned *and* the stdio MCP servers those started: signalling only the leader orphans them
(codex-acp and ``gemini --acp`` also ignore stdin EOF). A process that calls ``setsid`` leaves that group, so
each agent also gets a tree that nothing leaves (:mod:`openab_browser.core.agents.tree`). Its stdout is read in bounded
lines and fed to an :class:`openab_browser.core.jsonrpc.RpcConnection`; its stderr is drained to the log, so a chatty
agent can never block on a full pipe.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import errno
import logging
import os
import re
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ..addresses import LOOPBACK_NAMES
from ..errors import AgentExited, AgentNotFound
from ..jsonrpc import Handler, Peer, RpcConnection
from .child import Child
from .tree import REAPER, RELEASE_LINE, TREE_LOOK_INTERVAL, TREE_MARK_ENV, Tree

__all__ = ["AgentExited", "AgentNotFound", "AgentProcess", "scrubbed_env"]

log = logging.getLogger(__name__)

MAX_LINE_BYTES = 8 << 20
_STDERR_TAIL_LINES = 20

# What an agent inherits from the pod's own environment: who and where it is, how it reaches the network
# (proxy, CA bundle), nothing else. API keys and tokens reach it only when the recipe or the operator says so.
_INHERITED = (
    "HOME", "USER", "LOGNAME", "SHELL", "PATH", "TMPDIR", "TZ", "LANG", "LANGUAGE",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR",
)


_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|AUTH", re.IGNORECASE)


def scrubbed_env(
    base: Mapping[str, str] | None = None, *, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The pod's identity, locale, proxy and CA variables from ``base`` (default ``os.environ``), plus ``extra``."""
    base = os.environ if base is None else base
    env = {k: base[k] for k in _INHERITED if base.get(k)}
    env.update({k: v for k, v in base.items() if k.startswith("LC_")})
    env.setdefault("PATH", os.defpath)
    env.update(extra or {})
    if any(k.lower().endswith("_proxy") and k.lower() != "no_proxy" for k in env):
        # The browser endpoint is on loopback: a corporate proxy must never be asked to reach it.
        for name in ("NO_PROXY", "no_proxy"):
            listed = [h for h in env.get(name, "").split(",") if h.strip()]
            env[name] = ",".join(listed + [h for h in LOOPBACK_NAMES if h not in listed])
    return env


def find_program(program: str, env: Mapping[str, str], cwd: Path) -> str:
    """Where ``exec`` would find ``program`` for a child with ``env`` in ``cwd``, as ``subprocess`` looks for it.

    Raises :class:`FileNotFoundError` or :class:`PermissionError` as a failed spawn would.
    """
    if os.sep in program:
        path = os.path.normpath(os.path.join(cwd, program))
        if not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
        if os.path.isdir(path) or not os.access(path, os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
        return path
    for directory in env.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.normpath(os.path.join(cwd, directory, program))  # an empty or relative entry: the cwd
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)


class AgentProcess:
    """A started agent: ``rpc`` talks to it; :meth:`stop` kills its whole process tree.

    ``cgroups``: the pod's own cgroup v2 directory (:func:`own_cgroup`), for a cgroup per agent; ``None``
    tracks the tree through ``/proc`` instead. ``wrap``: what the command becomes, its program resolved on the
    agent's PATH (the confinement's launcher, :mod:`openab_browser.core.agents.confinement`).
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        handler: Handler,
        env: Mapping[str, str],
        cwd: Path,
        name: str,
        max_line_bytes: int = MAX_LINE_BYTES,
        cgroups: Path | None = None,
        wrap: Callable[[list[str]], list[str]] | None = None,
    ) -> None:
        if not argv:
            raise ValueError("an agent command needs at least a program name")
        self.argv = list(argv)
        self._wrap = wrap
        self.name = name
        self._env = dict(env)
        self._cwd = cwd
        self._max_line = max_line_bytes
        self.rpc = RpcConnection(handler, name=name, peer=Peer(max_open_requests=64))
        self.exited = asyncio.Event()
        self.returncode: int | None = None
        self._process: Child | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=_STDERR_TAIL_LINES)
        # Agents echo their keys in error messages; what they say goes to the log and to the person.
        self._secrets = sorted(
            {v for k, v in self._env.items() if _SECRET_NAME.search(k) and len(v) >= 8}, key=len, reverse=True
        )
        self._exit_reason: str | None = None
        self.tree = Tree(name, cgroups)
        self._env[TREE_MARK_ENV] = self.tree.mark

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def alive(self) -> bool:
        # The returncode comes first: a prompt right after a crash then starts a fresh agent, instead of
        # writing to this one while its tree is still being taken down.
        return self._process is not None and self._process.returncode is None and not self.exited.is_set()

    async def start(self) -> None:
        """Spawn the process; raises :class:`AgentExited` saying what to install when the program is missing."""
        try:
            argv = self.argv
            if self._wrap is not None:
                argv = self._wrap([find_program(argv[0], self._env, self._cwd), *argv[1:]])
            with REAPER.spawning():
                if self.tree.prepare():
                    self._process = await self._spawn_held(argv)
                else:
                    self._process = await self._spawn(argv)
                    self.tree.spawned(self._process.pid)
                REAPER.track(self._process.pid)
        except FileNotFoundError:
            self.tree.spawned(None)
            raise AgentNotFound(
                f"agent command {self.argv[0]!r} not found on PATH: install it or give its full path "
                "(--agent-cmd)"
            ) from None
        except PermissionError as exc:
            self.tree.spawned(None)
            raise AgentExited(f"agent command {self.argv[0]!r} cannot be run: {exc}") from None
        except BaseException:
            self.tree.spawned(None)
            raise
        log.info("%s: started %s (pid %d) in %s", self.name, Path(self.argv[0]).name, self._process.pid, self._cwd)
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._read_stdout(), name=f"{self.name} stdout"),
            loop.create_task(self._drain_stderr(), name=f"{self.name} stderr"),
            loop.create_task(self.rpc.run(self._write), name=f"{self.name} stdin"),
            loop.create_task(self._watch(), name=f"{self.name} wait"),
            loop.create_task(self._stop_when_unreachable(), name=f"{self.name} rpc watch"),
        ]

    async def _spawn(self, argv: Sequence[str]) -> Child:
        return await Child.spawn(argv, env=self._env, cwd=self._cwd, limit=self._max_line)

    async def _spawn_held(self, argv: Sequence[str]) -> Child:
        """Starts the agent held (:meth:`Tree.held`), moves it into its cgroup, then lets it run."""
        # The shell's own "not found" would read as the agent exiting: the program is found here first.
        process = await self._spawn(self.tree.held([find_program(argv[0], self._env, self._cwd), *argv[1:]]))
        # Moving a process between cgroups can wait for an RCU grace period (milliseconds, up to about 20 here):
        # the pod's other sessions do not wait with it.
        entering = asyncio.ensure_future(asyncio.to_thread(self.tree.enter, process.pid))
        try:
            await asyncio.shield(entering)
        except BaseException:
            # Cancelled meanwhile: the move ends first (it writes to a descriptor the tree then closes), and the
            # held shell goes without ever running the agent, so its cgroup can go too.
            await asyncio.wait([entering])
            process.kill()
            await process.wait()
            raise
        process.stdio.stdin.write(RELEASE_LINE)  # before any message: the shell takes this line, the agent the rest
        return process

    async def _stop_when_unreachable(self) -> None:
        """An agent whose ACP connection closed while it runs (it closed its stdin, stopped reading it until the
        send buffer overflowed) can never be spoken to again: it goes, rather than idling as a live agent."""
        reason = await self.rpc.wait_closed()
        if self.alive:
            self._exit_reason = f"its ACP connection closed: {reason}"
            log.warning("%s: %s; stopping it", self.name, self._exit_reason)
            await self.stop()

    async def _write(self, message: bytes) -> None:
        assert self._process is not None
        stdin = self._process.stdio.stdin
        if stdin.is_closing():  # uvloop's transport refuses a write once its pipe is gone; asyncio's drops it
            raise ConnectionResetError("the agent closed its stdin")
        stdin.write(message + b"\n")
        await stdin.drain()

    async def _read_stdout(self) -> None:
        assert self._process is not None
        stdout = self._process.stdio.stdout
        try:
            while True:
                try:
                    line = await stdout.readline()
                except ValueError:
                    # A line over the bound: the framing cannot be trusted after it, so the agent goes.
                    self._exit_reason = f"it wrote a line over {self._max_line} bytes on stdout"
                    log.warning("%s: %s; stopping it", self.name, self._exit_reason)
                    await self.stop()
                    return
                if not line:
                    return
                if line.strip():
                    self.rpc.feed(line)
        except (ConnectionError, OSError):
            return

    async def _drain_stderr(self) -> None:
        assert self._process is not None
        stderr = self._process.stdio.stderr
        with contextlib.suppress(ConnectionError, OSError):
            while True:
                try:
                    line = await stderr.readline()
                except ValueError:
                    continue  # an over-long stderr line is dropped, not fatal
                if not line:
                    return
                text = self._redact(line.decode("utf-8", "replace").rstrip())
                if text:
                    self._stderr_tail.append(text)
                    log.debug("%s stderr: %s", self.name, text)

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "[redacted]")
        return text

    async def _watch(self) -> None:
        process = self._process
        assert process is not None
        # Waited in steps: without a cgroup the tree is looked at meanwhile (below).
        waiter = asyncio.ensure_future(process.wait())
        look_again = time.monotonic() + TREE_LOOK_INTERVAL
        while process.returncode is None and not waiter.done():
            await asyncio.wait({waiter}, timeout=0.2)
            if self.tree.cgroup is None and time.monotonic() >= look_again:
                # Without a cgroup, a descendant's parent link is its only tie when the agent dies alone: the
                # tree is remembered from time to time, so what a crash orphans is still found.
                look_again = time.monotonic() + TREE_LOOK_INTERVAL
                self.tree.members(marked=False)
        self.returncode = process.returncode
        REAPER.untrack(process.pid)
        # A launcher that dies leaves its native binary and MCP servers behind in the group: they go too, and
        # so does whatever left the group (setsid) but not the tree.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        await self.tree.kill()
        self.tree.remove()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5.0):
                await waiter
        # Let the readers take what is still in the pipes, so the last words are in the message.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):
                await asyncio.gather(*self._tasks[:2], return_exceptions=True)
        process.close()  # an orphan still holding the pipes keeps them, not the pod's descriptors
        reason = self.exit_message()
        log.info("%s: %s", self.name, reason)
        self.rpc.close(reason)
        self.exited.set()

    def exit_message(self) -> str:
        code = self.returncode
        if self._exit_reason:
            how = f"the agent was stopped: {self._exit_reason}"
        elif code is None:
            how = "the agent is still running"
        elif code < 0:
            how = f"the agent was killed by signal {-code}"
        else:
            how = f"the agent exited with code {code}"
        tail = [line for line in self._stderr_tail if line.strip()][-3:]
        return how + (f" (stderr: {' | '.join(tail)[-600:]})" if tail else "")

    async def stop(self, *, grace: float = 3.0, reason: str | None = None) -> None:
        """SIGTERM the process group (and what left it), SIGKILL the whole tree after ``grace`` seconds, or as
        soon as the agent itself is gone; safe to call more than once."""
        if reason and not self._exit_reason:
            self._exit_reason = reason
        process = self._process
        if process is None:
            return
        if process.returncode is None:
            # Read while the agent lives: its descendants are still linked to it. The group gets its SIGTERM below.
            self.tree.signal(signal.SIGTERM, except_group=process.pid)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)
            if process.returncode is not None:
                # The leader is gone; its children may not be, and they share its group id.
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
                break
            try:
                async with asyncio.timeout(grace):
                    await process.wait()
            except TimeoutError:
                continue
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await self.exited.wait()
        if not self.exited.is_set():
            await self.tree.kill()  # the agent is stuck (uninterruptible): its tree goes anyway
        for task in self._tasks:
            task.cancel()
        process.close()
