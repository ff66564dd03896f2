"""A real gateway in a process of its own, for the benchmarks that measure the gateway apart from its clients
(its memory, its CPU): uvicorn on 127.0.0.1 with a pod exactly as the test suite makes one.

The parent reads one JSON line on stdout (``ws_url``, ``token``, ``pid``), then asks on stdin, one JSON line
each, and reads one JSON line back:

- ``{"endpoint": "<session id>"}``: waits for the session's browser to attach, opens its proxy endpoint and
  answers ``{"url": ..., "token": ...}`` (the endpoint an agent of that session is given);
- ``{"sessions": true}``: how many sessions the pod holds;
- ``{"gc": true}``: the cyclic GC's passes since the last such question, by generation (count, longest, total).

Its settings are ``run_gateway``'s, and one of its own: ``parse_whole=True`` makes the pod parse every frame
whole, as before answers' long strings were passed through (``openab_browser.core.jsonrpc.passthrough``), for a
same-run comparison.

It ends when stdin closes. Run by :class:`PodProcess`; not a command of its own. With ``--extensions`` it
plays scripted extensions instead, in their own process (:class:`ExtensionsProcess`). ``PodProcess(tree=DIR)``
runs the gateway of another checkout instead (``git worktree add DIR REV``: the tree before a change, measured
in the same run as this one), its ``openab_browser`` imported from there and its own copy of this script run.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

_SCRIPT = str(Path(__file__).resolve())
# The test suite's fakes, and this folder as the package `bench` (for bench.common), run as a script or imported.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import stop_child  # noqa: E402

ANSWER_TIMEOUT = 60.0


# Runs a checkout's bench/pod_process.py with openab_browser imported from that checkout: a link farm of its
# folders first on sys.path, and the editable install's finder (which maps the package to this checkout) gone.
_FROM_TREE = """
import atexit, os, runpy, shutil, sys, tempfile
tree = sys.argv[1]
farm = tempfile.mkdtemp(prefix="openab-tree-")
atexit.register(shutil.rmtree, farm, True)
os.mkdir(os.path.join(farm, "openab_browser"))
for part in ("core", "gateway", "bridge", "extension"):
    os.symlink(os.path.join(tree, part), os.path.join(farm, "openab_browser", part))
sys.meta_path[:] = [f for f in sys.meta_path if "Editable" not in getattr(f, "__name__", type(f).__name__)]
sys.path.insert(0, farm)
sys.argv = [os.path.join(tree, "bench", "pod_process.py"), *sys.argv[2:]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


class PodProcess:
    """``python bench/pod_process.py`` as a child: its address, and :meth:`ask` for the control lines above;
    ``tree``: another checkout's gateway (the module docstring)."""

    def __init__(self, *, tree: Path | None = None, **settings: Any) -> None:
        self._settings = settings
        self._tree = tree
        self._child: asyncio.subprocess.Process | None = None
        self.ws_url = ""
        self.token = ""
        self.pid = 0
        self.source = ""

    async def __aenter__(self) -> PodProcess:
        command = [_SCRIPT] if self._tree is None else ["-c", _FROM_TREE, str(self._tree.resolve())]
        self._child = await asyncio.create_subprocess_exec(
            sys.executable, *command, json.dumps(self._settings),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, limit=1 << 20,
        )
        hello = await self._line()
        self.ws_url, self.token, self.pid = hello["ws_url"], hello["token"], hello["pid"]
        self.source = hello.get("source", "?")  # the checkout whose gateway this is
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await stop_child(self._child)

    async def _line(self) -> dict[str, Any]:
        assert self._child is not None and self._child.stdout is not None
        line = await asyncio.wait_for(self._child.stdout.readline(), ANSWER_TIMEOUT)
        if not line:
            raise RuntimeError("the gateway process ended before it answered (its stderr says why)")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"the gateway process: {answer['error']}")
        return answer

    async def ask(self, question: dict[str, Any]) -> dict[str, Any]:
        assert self._child is not None and self._child.stdin is not None
        self._child.stdin.write(json.dumps(question).encode() + b"\n")
        await self._child.stdin.drain()
        return await self._line()

    def status(self, field: str) -> int:
        """A ``/proc/<pid>/status`` figure of the gateway in bytes (``VmRSS``, ``VmHWM``)."""
        with open(f"/proc/{self.pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        raise LookupError(field)

    def reset_peak(self) -> None:
        """Start ``VmHWM`` again from the present RSS (the kernel's clear_refs 5), to time one peak."""
        with open(f"/proc/{self.pid}/clear_refs", "w", encoding="ascii") as clear:
            clear.write("5")


def _time_collections() -> dict[int, list[float]]:
    """Every cyclic-GC pass's seconds, by generation: a pause the busy session waits through."""
    import gc
    import time

    passes: dict[int, list[float]] = {0: [], 1: [], 2: []}
    started = [0.0]

    def timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            passes[info["generation"]].append(time.perf_counter() - started[0])

    gc.callbacks.append(timed)
    return passes


async def _serve(settings: dict[str, Any]) -> None:
    from gateway_harness import run_gateway

    from openab_browser.core.heap import prepare_heap
    from openab_browser.core.mcp.access import HttpEndpoint

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    def say(answer: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()

    if settings.pop("parse_whole", False):
        import orjson

        from openab_browser.core.jsonrpc import passthrough

        passthrough.loads = lambda data, _rule: orjson.loads(data)  # type: ignore[assignment]
    collections = _time_collections()
    async with run_gateway(**settings) as gw:
        prepare_heap()  # as `openab run` does once its pod is built
        say({"ws_url": gw.ws_url, "token": gw.token, "pid": os.getpid(),
             "source": str(Path(sys.modules["openab_browser.gateway"].__file__ or "?").parent.parent)})
        while line := await reader.readline():
            question = json.loads(line)
            try:
                if "endpoint" in question:
                    session_id = question["endpoint"]
                    await gw.pod.tunnels.wait_attached(session_id, timeout=30)
                    session = gw.pod.sessions.get(session_id)
                    if session is None or gw.pod.browser is None:
                        raise LookupError(f"no session {session_id} or no browser access in this pod")
                    entry = (await gw.pod.browser.open(session)).entry
                    if not isinstance(entry, HttpEndpoint):
                        raise TypeError("the pod is not in proxy mode: no HTTP endpoint")
                    say({"url": entry.url, "token": entry.token})
                elif "sessions" in question:
                    say({"sessions": len(gw.pod.sessions)})
                elif "gc" in question:  # the GC passes since the last question, and clears them
                    say({str(generation): {"passes": len(seconds), "max_ms": round(max(seconds, default=0) * 1e3, 2),
                                           "total_ms": round(sum(seconds) * 1e3, 1)}
                         for generation, seconds in collections.items()})
                    for seconds in collections.values():
                        seconds.clear()
                else:
                    say({"error": f"unknown question {sorted(question)}"})
            except Exception as exc:  # the parent hears it, in a line, instead of waiting for nothing
                say({"error": f"{type(exc).__name__}: {exc}"})


class ExtensionsProcess:
    """``count`` scripted extensions in a child process (``python bench/pod_process.py --extensions``), each on
    its own WebSocket with one session whose browser offers ``browser_small`` (answers at once); so neither
    the gateway's process nor the clients' pays for them. ``session_ids`` once entered."""

    def __init__(self, ws_url: str, token: str, count: int, *, batch: int = 64) -> None:
        self._args = json.dumps({"ws_url": ws_url, "token": token, "count": count, "batch": batch})
        self._child: asyncio.subprocess.Process | None = None
        self.session_ids: list[str] = []
        self.pid = 0

    async def __aenter__(self) -> ExtensionsProcess:
        self._child = await asyncio.create_subprocess_exec(
            sys.executable, _SCRIPT, "--extensions", self._args,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, limit=64 << 20,
        )
        assert self._child.stdout is not None
        line = await asyncio.wait_for(self._child.stdout.readline(), 600)
        if not line:
            raise RuntimeError("the extensions process ended before its sessions were made (its stderr says why)")
        hello = json.loads(line)
        if "error" in hello:
            raise RuntimeError(f"the extensions process: {hello['error']}")
        self.session_ids, self.pid = hello["sessions"], hello["pid"]
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await stop_child(self._child, 120)


async def _extensions(args: dict[str, Any]) -> None:
    import contextlib

    from fake_extension import FakeExtension, connect_extension, text_result

    async def small(_arguments: dict[str, Any]) -> dict[str, Any]:
        return text_result("ok")

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    async def attach(stack: contextlib.AsyncExitStack) -> str:
        ext: FakeExtension = await stack.enter_async_context(connect_extension(args["ws_url"], args["token"]))
        ext.add_tool("browser_small", small)
        await ext.initialize()
        return await ext.new_session([{"type": "acp", "name": "browser", "serverId": "b"}])

    async with contextlib.AsyncExitStack() as stack:
        sessions: list[str] = []
        try:
            while len(sessions) < args["count"]:
                batch = min(args["batch"], args["count"] - len(sessions))
                sessions += await asyncio.gather(*(attach(stack) for _ in range(batch)))
        except Exception as exc:
            sys.stdout.write(json.dumps({"error": f"after {len(sessions)} sessions: {type(exc).__name__}: {exc}"})
                             + "\n")
            sys.stdout.flush()
            return
        sys.stdout.write(json.dumps({"sessions": sessions, "pid": os.getpid()}) + "\n")
        sys.stdout.flush()
        await reader.read()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--extensions"]:
        asyncio.run(_extensions(json.loads(sys.argv[2])))
    else:
        from openab_browser.core.event_loop import run

        pod_settings = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
        run(_serve(pod_settings), pod_settings.get("event_loop", "auto"))  # the loop `openab run` takes
