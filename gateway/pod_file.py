"""``pod.json``: where a running `openab run` serves, so `openab doctor` on the same machine needs no flags.

`openab run` writes it in its state dir once the gateway listens (the real port, also with ``--port 0``) and
removes it when it stops; a pod that was killed leaves it behind, and a reader tells so by its pid::

    {"pid": 4242, "host": "127.0.0.1", "port": 8080, "scheme": "ws", "started": "2026-12-01T21:00:00.000Z"}

It holds no secret, but it says where to dial with the key: it is written as every file in the state dir is
(0600, through a fresh name moved into place, never through a link) and read the same way (ours only, private,
not a link, at most 4 KiB), so a link or another user's file planted there is refused, not believed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson
import uvicorn

from openab_browser.core.errors import ConfigurationError
from openab_browser.core.statedir import read_private_file
from openab_browser.core.timestamps import iso_utc

from .server import DrainingServer

__all__ = ["POD_FILE", "AnnouncedServer", "RunningPod", "read_pod_file", "remove_pod_file", "write_pod_file"]

POD_FILE: Final = "pod.json"


@dataclass(frozen=True, slots=True)
class RunningPod:
    """What ``pod.json`` says of the pod that wrote it."""

    pid: int
    host: str
    port: int
    scheme: str
    started: str

    @property
    def ws_url(self) -> str:
        """The pod's ``/acp`` on this machine (a wildcard bind is reached on loopback)."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else "::1" if self.host == "::" else self.host
        return f"{self.scheme}://{f'[{host}]' if ':' in host else host}:{self.port}/acp"

    def alive(self) -> bool:
        """Whether a process with the pod's pid runs (a pid reused since is not told apart)."""
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # another user's process: it exists
            return True
        return True


def write_pod_file(state_dir: Path, *, host: str, port: int, tls: bool) -> Path:
    """Write ``pod.json`` for this process in ``state_dir`` (which `openab run` has made private)."""
    path = state_dir / POD_FILE
    entry = {"pid": os.getpid(), "host": host, "port": port, "scheme": "wss" if tls else "ws",
             "started": iso_utc(time.time())}
    fresh = state_dir / f".{POD_FILE}.{os.getpid()}"
    # O_EXCL and O_NOFOLLOW: a file or link planted at the fresh name is never written through.
    with contextlib.suppress(FileNotFoundError):
        os.unlink(fresh)
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, orjson.dumps(entry) + b"\n")
    finally:
        os.close(fd)
    os.replace(fresh, path)  # moves the name: a link planted at pod.json is replaced, not followed
    return path


def remove_pod_file(state_dir: Path) -> None:
    """Remove ``pod.json`` if it is still this process's (another pod may have started on the dir since)."""
    try:
        running = read_pod_file(state_dir)
    except ConfigurationError:
        return
    if running is not None and running.pid == os.getpid():
        with contextlib.suppress(FileNotFoundError):
            os.unlink(state_dir / POD_FILE)


def read_pod_file(state_dir: Path) -> RunningPod | None:
    """What ``state_dir``'s ``pod.json`` says (``None``: there is none); a file that is refused (a link, not
    ours, readable by others, too large) or is not what `openab run` writes raises ConfigurationError."""
    path = state_dir / POD_FILE
    if not os.path.lexists(path):
        return None
    text = read_private_file(path, what="the running pod's file")
    try:
        entry: Any = orjson.loads(text)
        running = RunningPod(pid=entry["pid"], host=entry["host"], port=entry["port"], scheme=entry["scheme"],
                             started=entry["started"])
    except (orjson.JSONDecodeError, TypeError, KeyError):
        raise ConfigurationError(f"{path} is not what `openab run` writes; remove it") from None
    if (not all(isinstance(v, int) and not isinstance(v, bool) for v in (running.pid, running.port))
            or running.pid <= 0 or not 0 < running.port < 65536 or running.scheme not in ("ws", "wss")
            or not isinstance(running.host, str) or not isinstance(running.started, str)):
        raise ConfigurationError(f"{path} is not what `openab run` writes; remove it")
    return running


class AnnouncedServer(DrainingServer):
    """The pod's server, which writes ``pod.json`` once it listens and removes it when it stops."""

    def __init__(self, config: uvicorn.Config, *, drain: Any, state_dir: Path, tls: bool,
                 listening: Callable[[int], None] | None = None) -> None:
        super().__init__(config, drain=drain)
        self._state_dir, self._tls, self._listening = state_dir, tls, listening

    async def startup(self, sockets: list[Any] | None = None) -> None:
        await super().startup(sockets)
        if self.should_exit or not self.servers:  # uvicorn could not listen: nothing to announce
            return
        bound = self.servers[0].sockets[0].getsockname()
        try:
            write_pod_file(self._state_dir, host=str(bound[0]), port=int(bound[1]), tls=self._tls)
        except OSError as exc:  # the pod serves all the same; doctor then needs --url
            logging.getLogger("openab_browser.run").warning("could not write %s: %s", self._state_dir / POD_FILE,
                                                    exc.strerror or exc)

    def _log_started_message(self, listeners: Any) -> None:
        # Just before uvicorn's start line, which is what scripts wait for: the port is bound by now, so the
        # pairing text names the real one (also with --port 0), and it comes only from a pod that listens.
        if self._listening is not None and listeners:
            self._listening(int(listeners[0].getsockname()[1]))
        super()._log_started_message(listeners)

    async def serve(self, sockets: list[Any] | None = None) -> None:
        try:
            await super().serve(sockets)
        finally:
            remove_pod_file(self._state_dir)
