"""A tool call over the bridge path against the same call through ``mcp-proxy`` (issue 12, target 2).

Both paths are stdio MCP servers an agent CLI would spawn, driven by the same client (the official ``mcp``
SDK's ``Client`` in legacy mode, keeping one connection, as an agent does):

* **openab**: ``openab browser-bridge`` (the stdio relay) -> the pod's Unix socket -> the gateway's MCP server
  -> the tunnel -> ``/acp`` WebSocket -> the test suite's scripted extension, which answers at once;
* **mcp-proxy** (PyPI, the usual stdio-to-HTTP bridge): ``mcp-proxy --transport streamablehttp URL`` -> a
  Streamable HTTP echo server on the official ``mcp`` SDK's ``Server``, which answers at once.

The gateway, the extension and the echo server run in this process's event loop, so both paths share the
machine alike; calls alternate between them in rounds (``bench/common.py``). The figure is openab's p50 and p99
over mcp-proxy's; the target is below 1 on both.

``mcp-proxy`` pins ``mcp<2`` while openab's tests use ``mcp`` 2.x, so it lives in a venv of its own (a bench
tool, not a dependency): ``python -m venv .venv/mcp-proxy && .venv/mcp-proxy/bin/pip install mcp-proxy==0.13.0``.
``$MCP_PROXY`` names another; without one, only the openab path is measured.

Run: ``python bench/bench_bridge_path.py [--quick] [--out DIR] [--relay NAME=OPENAB ...]`` (from the repository, with
the venv active; ``--relay`` adds another installation's relay to the same rounds).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

# The test suite's fakes, and this folder as the package `bench` (for bench.common), run as a script or imported.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import mcp_types as types
from fake_extension import connect_extension, text_result
from gateway_harness import run_gateway
from mcp import Client, StdioServerParameters
from mcp.server import Server

from bench.common import arguments, interleaved, plot_latencies, ratio, serving_in_loop, summary, write_result
from openab_browser.bridge.server import BridgeServer

_HERE = Path(__file__).resolve().parent
NAME = "bridge_path"
OPENAB = str(Path(sys.executable).parent / "openab")
DEFAULT_MCP_PROXY = _HERE.parent / ".venv" / "mcp-proxy" / "bin" / "mcp-proxy"
ECHO_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
ARGUMENTS = {"text": "hello from the agent"}
START_TIMEOUT = 30.0
CALL_TIMEOUT = 30.0


def find_mcp_proxy() -> str | None:
    """The ``mcp-proxy`` command: ``$MCP_PROXY``, the bench venv, else on PATH."""
    for candidate in (os.environ.get("MCP_PROXY"), str(DEFAULT_MCP_PROXY)):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("mcp-proxy")


@contextlib.asynccontextmanager
async def pod_with_echo(root: Path) -> AsyncIterator[dict[str, str]]:
    """A live pod in bridge mode with one session whose browser offers ``echo``, answered at once; yields the
    environment a relay of that session is spawned with."""

    async def echo(arguments: dict[str, Any]) -> dict[str, Any]:
        return text_result(str(arguments.get("text")))

    async with (
        run_gateway(browser_mode="bridge", browser_socket=root / "browser.sock") as gateway,
        connect_extension(gateway.ws_url, gateway.token) as extension,
    ):
        bridge = gateway.pod.browser
        assert isinstance(bridge, BridgeServer)
        extension.add_tool("echo", echo, ECHO_SCHEMA)
        await extension.initialize()
        session_id = await extension.new_session([{"type": "acp", "id": "srv", "name": "browser"}])
        await gateway.pod.tunnels.wait_attached(session_id, timeout=START_TIMEOUT)
        # The relays are this process's children: stand in for the agent the runtime would register.
        bridge.trusted_parent = os.getppid()
        session = gateway.pod.sessions.get(session_id)
        assert session is not None
        bridge.agent_started(session, os.getpid())
        endpoint = await bridge.open(session)
        yield {"PATH": os.environ["PATH"], **endpoint.env}


def echo_server() -> Server[Any]:
    """The peer's server: the official SDK's low-level ``Server`` with one ``echo`` tool."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="echo", description="Echo text", input_schema=ECHO_SCHEMA)])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        text = str((params.arguments or {}).get("text"))
        return types.CallToolResult(content=[types.TextContent(text=text)])

    return Server("echo", version="1", on_list_tools=list_tools, on_call_tool=call_tool)


@contextlib.asynccontextmanager
async def serving_echo() -> AsyncIterator[str]:
    """The echo server's Streamable HTTP app under uvicorn on 127.0.0.1, in this event loop; yields its URL."""
    async with serving_in_loop(echo_server().streamable_http_app(), START_TIMEOUT) as port:
        yield f"http://127.0.0.1:{port}/mcp"


def proxy_version(mcp_proxy: str | None) -> str | None:
    """``mcp-proxy --version`` (it runs from a venv of its own, which ``machine()`` does not see)."""
    if mcp_proxy is None:
        return None
    done = subprocess.run([mcp_proxy, "--version"], capture_output=True, text=True, timeout=30, check=False)
    return (done.stdout or done.stderr).strip() or None


async def call_echo(client: Client) -> None:
    async with asyncio.timeout(CALL_TIMEOUT):
        result = await client.call_tool("echo", ARGUMENTS)
    text = result.content[0]
    assert not result.is_error and isinstance(text, types.TextContent) and text.text == ARGUMENTS["text"], result


def calls_of(client: Client, count: int) -> Callable[[], Awaitable[list[float]]]:
    async def run() -> list[float]:
        samples = []
        for _ in range(count):
            start = time.perf_counter()
            await call_echo(client)
            samples.append(time.perf_counter() - start)
        return samples

    return run


def relay_options(parser: argparse.ArgumentParser) -> None:
    """``--relay NAME=OPENAB``: another installation's relay in the same rounds, for a before and after."""
    parser.add_argument("--relay", action="append", default=[], metavar="NAME=OPENAB",
                        help="another installation's openab command (e.g. an earlier commit's wheel in a venv of "
                             "its own) whose relay runs in the same rounds")


def other_relays(args: argparse.Namespace) -> dict[str, str]:
    return dict(item.split("=", 1) for item in args.relay)


async def measure(quick: bool, mcp_proxy: str | None, others: dict[str, str] | None = None) -> dict[str, Any]:
    rounds, per_round, warm = (4, 10, 10) if quick else (40, 100, 200)
    root = Path(tempfile.mkdtemp(prefix="oab-bench-"))
    paths: dict[str, Callable[[], Awaitable[list[float]]]] = {}
    labels = {"openab": "openab browser-bridge -> socket -> gateway -> tunnel -> extension",
              "mcp-proxy": "mcp-proxy -> Streamable HTTP echo (mcp SDK)"}
    try:
        async with contextlib.AsyncExitStack() as stack:
            env = await stack.enter_async_context(pod_with_echo(root))
            bridge = await stack.enter_async_context(
                Client(StdioServerParameters(command=OPENAB, args=["browser-bridge"], env=env), mode="legacy")
            )
            paths[labels["openab"]] = calls_of(bridge, per_round)
            clients = [bridge]
            for name, command in (others or {}).items():
                other = await stack.enter_async_context(
                    Client(StdioServerParameters(command=command, args=["browser-bridge"], env=env), mode="legacy"))
                paths[f"{name}: {labels['openab']}"] = calls_of(other, per_round)
                clients.append(other)
            if mcp_proxy is not None:
                url = await stack.enter_async_context(serving_echo())
                peer = await stack.enter_async_context(Client(StdioServerParameters(
                    command=mcp_proxy, args=["--transport", "streamablehttp", "--log-level", "WARNING", url],
                    env={"PATH": os.environ["PATH"]},
                ), mode="legacy"))
                paths[labels["mcp-proxy"]] = calls_of(peer, per_round)
                clients.append(peer)
            for client in clients:
                for _ in range(warm):  # connections, caches, the interpreter's own warm-up
                    await call_echo(client)
            samples = await interleaved(rounds, paths)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result: dict[str, Any] = {
        "what": "one tools/call of `echo` through a stdio MCP server an agent spawns, answered at once at the far "
                "end; the official mcp Client (legacy mode) drives both, calls alternating in rounds",
        "rounds": rounds,
        "calls_per_round": per_round,
        "paths": {name: summary(values) for name, values in samples.items()},
        # Its name, not its path: a result file names no directory of the machine it ran on.
        "mcp_proxy": None if mcp_proxy is None else Path(mcp_proxy).name,
        "mcp_proxy_version": proxy_version(mcp_proxy),
    }
    if mcp_proxy is not None:
        ours, theirs = result["paths"][labels["openab"]], result["paths"][labels["mcp-proxy"]]
        result["ratio_openab_to_mcp_proxy"] = ratio(ours, theirs)
        result["target"] = "openab faster than mcp-proxy at p50 and p99 (ratio < 1)"
        result["target_met"] = all(value < 1 for value in result["ratio_openab_to_mcp_proxy"].values())
    result["samples"] = samples
    return result


def main(argv: Sequence[str] | None = None) -> Path:
    args = arguments(__doc__ or NAME, argv, relay_options)
    mcp_proxy = find_mcp_proxy()
    if mcp_proxy is None:
        print("mcp-proxy not found: measuring the openab path alone (see the module docstring)", file=sys.stderr)
    result = asyncio.run(measure(args.quick, mcp_proxy, other_relays(args)))
    samples = result.pop("samples")
    plot_latencies(NAME, samples, args.out, title="A tool call through a stdio MCP bridge (same run, alternating)")
    written: Path = write_result(NAME, result, args.out)
    return written


if __name__ == "__main__":
    main()
