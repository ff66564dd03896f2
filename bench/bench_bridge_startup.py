"""How fast `openab browser-bridge` starts: from ``exec`` to the first ``tools/list`` answer (issue 12, target 2).

Agent CLIs spawn the relay once per session, and some give an MCP server only a few seconds to answer. This
spawns it again and again, with the pod's socket live and one session's browser attached (the test suite's
scripted extension), and times, in alternating rounds:

* the interpreter alone (``python -c pass``), the floor any Python relay stands on;
* the relay to its ``initialize`` answer, and to its ``tools/list`` answer (``initialize``,
  ``notifications/initialized``, ``tools/list``, as an agent's MCP client sends them), through raw pipes;
* the official ``mcp`` client (legacy mode) from spawn to a listed tool set;
* ``mcp-proxy`` (PyPI, in a venv of its own: see bench/bench_bridge_path.py) to its ``tools/list`` answer,
  relaying to a Streamable HTTP echo server on the official ``mcp`` SDK: the peer an agent would otherwise run.

Target: the relay's ``tools/list`` answer under 100 ms at the median.

Run: ``python bench/bench_bridge_startup.py [--quick] [--out DIR] [--relay NAME=OPENAB ...]`` (from the
repository, with the venv active). ``--relay`` adds the relay of another installation (its ``openab`` command,
e.g. a wheel of an earlier commit in a venv of its own) to the same rounds, for a before and after.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# This folder as the package `bench` (bench.common, bench.bench_bridge_path), run as a script or imported.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp import Client, StdioServerParameters

from bench.bench_bridge_path import (
    OPENAB,
    find_mcp_proxy,
    other_relays,
    pod_with_echo,
    proxy_version,
    relay_options,
    serving_echo,
)
from bench.common import arguments, interleaved, plot_latencies, ratio, summary, timed, write_result

NAME = "bridge_startup"
ANSWER_TIMEOUT = 30.0
TARGET_MS = 100.0


def _request(request_id: int, method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode() + b"\n"


INITIALIZE = _request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                        "clientInfo": {"name": "bench", "version": "0"}})
INITIALIZED = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode() + b"\n"
TOOLS_LIST = _request(2, "tools/list")


async def exec_to_exit(argv: list[str]) -> None:
    process = await asyncio.create_subprocess_exec(*argv, stdout=subprocess.DEVNULL)
    async with asyncio.timeout(ANSWER_TIMEOUT):
        await process.wait()


async def exec_to_answer(argv: list[str], env: dict[str, str], *, list_tools: bool) -> None:
    """Spawn a stdio MCP server; wait for its ``initialize`` answer and, with ``list_tools``, its tool list."""
    process = await asyncio.create_subprocess_exec(
        *argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        async with asyncio.timeout(ANSWER_TIMEOUT):
            process.stdin.write(INITIALIZE)
            await process.stdin.drain()
            answer = json.loads(await process.stdout.readline())
            assert "result" in answer, answer
            if list_tools:
                process.stdin.write(INITIALIZED + TOOLS_LIST)
                await process.stdin.drain()
                while (answer := json.loads(await process.stdout.readline())).get("id") != 2:
                    continue  # a notification before the answer
                assert [tool["name"] for tool in answer["result"]["tools"]] == ["echo"], answer
            process.stdin.close()
            await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def client_to_tools(params: StdioServerParameters) -> None:
    async with asyncio.timeout(ANSWER_TIMEOUT), Client(params, mode="legacy") as client:
        listed = await client.list_tools()
        assert [tool.name for tool in listed.tools] == ["echo"], listed


async def measure(
    quick: bool, mcp_proxy: str | None, others: dict[str, str] | None = None,
) -> tuple[dict[str, Any], dict[str, list[float]]]:
    rounds, per_round = (2, 2) if quick else (20, 5)
    root = Path(tempfile.mkdtemp(prefix="oab-bench-"))
    labels = {
        "python": "`python -c pass`: exec to exit",
        "initialize": "openab browser-bridge: exec to initialize answered",
        "tools": "openab browser-bridge: exec to tools/list answered",
        "client": "openab browser-bridge, mcp Client (legacy): spawn to tools listed",
        "mcp-proxy": "mcp-proxy -> Streamable HTTP echo: exec to tools/list answered",
    }
    relay = [OPENAB, "browser-bridge"]
    try:
        async with contextlib.AsyncExitStack() as stack:
            env = await stack.enter_async_context(pod_with_echo(root))
            paths = {
                labels["python"]: timed(per_round, lambda: exec_to_exit([sys.executable, "-c", "pass"])),
                labels["initialize"]: timed(per_round, lambda: exec_to_answer(relay, env, list_tools=False)),
                labels["tools"]: timed(per_round, lambda: exec_to_answer(relay, env, list_tools=True)),
                labels["client"]: timed(per_round, lambda: client_to_tools(
                    StdioServerParameters(command=OPENAB, args=["browser-bridge"], env=env))),
            }
            for name, command in (others or {}).items():
                paths[f"{name} ({Path(command).name} browser-bridge): exec to tools/list answered"] = timed(
                    per_round, functools.partial(exec_to_answer, [command, "browser-bridge"], env, list_tools=True))
            if mcp_proxy is not None:
                url = await stack.enter_async_context(serving_echo())
                peer = [mcp_proxy, "--transport", "streamablehttp", "--log-level", "WARNING", url]
                paths[labels["mcp-proxy"]] = timed(per_round, lambda: exec_to_answer(
                    peer, {"PATH": os.environ["PATH"]}, list_tools=True))
            for run in paths.values():  # the page cache warm, as in a pod that has started one session
                await run()
            samples = await interleaved(rounds, paths)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    table = {name: summary(values) for name, values in samples.items()}
    tools = table[labels["tools"]]
    result: dict[str, Any] = {
        "what": "spawn of a stdio MCP server to its answers, with the pod's socket live; runs alternate in rounds",
        "rounds": rounds,
        "runs_per_round": per_round,
        "paths": table,
        "ratio_to_interpreter": {name: ratio(row, table[labels["python"]]) for name, row in table.items()},
        # Its name, not its path: a result file names no directory of the machine it ran on.
        "mcp_proxy": None if mcp_proxy is None else Path(mcp_proxy).name,
        "mcp_proxy_version": proxy_version(mcp_proxy),
        "target": f"openab browser-bridge: exec to tools/list answered < {TARGET_MS:g} ms at p50",
        "target_met": tools["p50_ms"] < TARGET_MS,
    }
    if mcp_proxy is not None:
        result["ratio_openab_to_mcp_proxy"] = ratio(tools, table[labels["mcp-proxy"]])
    return result, samples


def main(argv: Sequence[str] | None = None) -> Path:
    args = arguments(__doc__ or NAME, argv, relay_options)
    result, samples = asyncio.run(measure(args.quick, find_mcp_proxy(), other_relays(args)))
    plot_latencies(NAME, samples, args.out, title="Spawn to first answers of a stdio MCP server (same run)")
    written: Path = write_result(NAME, result, args.out)
    return written


if __name__ == "__main__":
    main()
