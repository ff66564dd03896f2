"""How fast `openab browser-bridge` starts, and what the bridge adds to a tool call.

Agent CLIs spawn the relay once per session and some give an MCP server 10 s to answer ``initialize``; this
measures from ``exec`` to the first answer, with the pod's socket live, through raw pipes and through the
official ``mcp`` client in both of its modes. Then it calls tools through the whole path: relay, Unix socket,
gateway, WebSocket, the test suite's scripted extension.

Run: ``python bench/bench_bridge_startup.py`` (from the repository, with the venv active). Prints a Markdown
table for docs/benchmarks.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fake_extension import connect_extension, text_result
from gateway_harness import run_gateway
from mcp import Client, StdioServerParameters

from openab.bridge.server import BridgeServer

OPENAB = str(Path(sys.executable).parent / "openab")
RUNS = 30


def summary(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"{statistics.median(ordered) * 1000:.0f} ms (p95 {p95 * 1000:.0f} ms, max {ordered[-1] * 1000:.0f} ms)"


async def timed(runs: int, once: Callable[[], Awaitable[None]]) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        await once()
        samples.append(time.perf_counter() - start)
    return samples


@contextlib.asynccontextmanager
async def pod_with_browser() -> AsyncIterator[tuple[Path, str]]:
    """A live pod socket and one session whose browser answers ``ping`` and a 6 MiB ``screenshot``."""
    big = "A" * (6 << 20)

    async def ping(arguments: dict[str, Any]) -> dict[str, Any]:
        return text_result("pong")

    async def screenshot(arguments: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "image", "data": big, "mimeType": "image/jpeg"}]}

    root = Path(tempfile.mkdtemp(prefix="oab-bench-"))
    try:
        async with (
            run_gateway(browser_mode="bridge", browser_socket=root / "browser.sock") as gateway,
            connect_extension(gateway.ws_url, gateway.token) as extension,
        ):
            bridge = gateway.pod.browser
            assert isinstance(bridge, BridgeServer)
            extension.add_tool("ping", ping)
            extension.add_tool("screenshot", screenshot)
            await extension.initialize()
            session_id = await extension.new_session([{"type": "acp", "id": "srv", "name": "browser"}])
            await gateway.pod.tunnels.wait_attached(session_id, timeout=10)
            # The relays here are this process's children: stand in for the agent the runtime would register.
            bridge.trusted_parent = os.getppid()
            session = gateway.pod.sessions.get(session_id)
            assert session is not None
            bridge.agent_started(session, os.getpid())
            yield bridge.path, "acp_" + session_id.removeprefix("sess_")
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def exec_to_exit(argv: list[str]) -> None:
    process = await asyncio.create_subprocess_exec(*argv, stdout=subprocess.DEVNULL)
    await process.wait()


async def exec_to_initialize(env: dict[str, str]) -> None:
    """Spawn the relay and wait for its answer to ``initialize``, as an agent's MCP client does."""
    process = await asyncio.create_subprocess_exec(
        OPENAB, "browser-bridge", env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert process.stdin is not None and process.stdout is not None
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench"}}}
    process.stdin.write(json.dumps(initialize).encode() + b"\n")
    await process.stdin.drain()
    answer = json.loads(await process.stdout.readline())
    assert answer["result"]["serverInfo"]["name"] == "openab_browser", answer
    process.stdin.close()
    await process.wait()


async def main() -> None:
    results: dict[str, str] = {}
    async with pod_with_browser() as (socket, channel):
        env = {"PATH": os.environ["PATH"], "OPENAB_BROWSER_CHANNEL": channel, "OPENAB_BROWSER_SOCKET": str(socket)}
        params = StdioServerParameters(command=OPENAB, args=["browser-bridge"], env=env)
        await exec_to_initialize(env)  # warm the page cache once, as a pod that has run one session has

        results["`python -c pass` (the interpreter alone), exec to exit"] = summary(
            await timed(RUNS, lambda: exec_to_exit([sys.executable, "-c", "pass"]))
        )
        results["`openab browser-bridge`, exec to `initialize` answered (raw pipes)"] = summary(
            await timed(RUNS, lambda: exec_to_initialize(env))
        )

        async def connect(mode: str) -> None:
            async with Client(params, mode=mode):
                pass

        results["official `mcp` client, `mode=\"legacy\"`: spawn to connected"] = summary(
            await timed(RUNS, lambda: connect("legacy"))
        )
        results["official `mcp` client, `mode=\"auto\"` (`server/discover` probe): spawn to connected"] = summary(
            await timed(RUNS, lambda: connect("auto"))
        )

        async with Client(params, mode="legacy") as client:
            calls = sorted(await timed(300, lambda: client.call_tool("ping", {})))  # type: ignore[arg-type,return-value]
            path = "tool call through relay + socket + gateway + extension"
            results[f"{path}, p50"] = f"{statistics.median(calls) * 1000:.2f} ms"
            results[f"{path}, p99"] = f"{calls[int(0.99 * len(calls))] * 1000:.2f} ms"
            shots = await timed(10, lambda: client.call_tool("screenshot", {}))  # type: ignore[arg-type,return-value]
            results["6 MiB screenshot result through the same path, median"] = (
                f"{statistics.median(shots) * 1000:.0f} ms"
            )

    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {RUNS} runs each\n")
    print("| measure | result |\n|---|---|")
    for name, value in results.items():
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    asyncio.run(main())
