"""An agent turn with a real agent CLI, through openab against the same CLI given an MCP server directly
(issue 12, target 8).

The CLI is codex-acp (tests/agents, ``npm ci``) against the test suite's scripted fake model: asked to open a
page, the model calls ``browser_navigate`` once, then answers with the tool's result. Two paths, same CLI, same
argv and config, same model:

* **openab**: a pod as ``openab run`` assembles it (the agent runtime, browser mode ``proxy``, policy
  ``browser-only``) on 127.0.0.1, with the test suite's scripted extension on ``/acp``: the extension declares
  its browser in ``session/new`` and sends ``session/prompt``; the pod starts codex-acp, hands it the session's
  proxy endpoint, relays the turn; the tool call reaches the extension through the proxy and the tunnel;
* **direct**: this process spawns codex-acp itself (ACP on stdio) and hands it, in ``session/new``, a
  Streamable HTTP MCP server on the official ``mcp`` SDK that answers ``browser_navigate`` at once.

Each round runs, per path, a **cold** turn (a new session: from the prompt to the end, the agent's start
included, as the first prompt of a session starts the agent in the pod) then ``warm`` turns in the same session.
Timed: from the prompt to the tool call reaching the browser (or the MCP server), and to the turn's answer.
The paths alternate in rounds (``bench/common.py``); the figure is openab's p50 and p99 over the direct path's.
Target: openab adds less than 5 %.

Run: ``python bench/bench_agent_turn.py [--quick] [--out DIR]`` (from the repository, with the venv active).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, cast

# The test suite's fakes, and this folder as the package `bench` (for bench.common), run as a script or imported.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import mcp_types as types
from acp import PROTOCOL_VERSION, connect_to_agent, text_block
from acp.interfaces import Client as AcpClient
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    ClientCapabilities,
    HttpHeader,
    HttpMcpServer,
    Implementation,
    PermissionOption,
    RequestPermissionResponse,
)
from agents.fake_model import Call, FakeModel, Script, serving
from agents.harness import AgentEnv, agent_env, kill_group, require
from fake_extension import FakeExtension, text_result
from mcp.server import Server
from test_runtime_pod import RunningPod, open_session, prompt, run_pod

from bench.common import arguments, plot_latencies, ratio, serving_in_loop, summary, write_result
from openab_browser.core.agents.process import scrubbed_env
from openab_browser.core.agents.recipes import RECIPES, Recipe

_HERE = Path(__file__).resolve().parent
NAME = "agent_turn"
CLI = "codex"
PAGE = "https://example.org/bench"
NAVIGATE_SCHEMA = {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}
TURN_TIMEOUT = 120.0
START_TIMEOUT = 30.0
# Side requests (titles, summaries) offer no tools and never match: this pads the script past earlier turns.
NO_TOOL = Call("no_such_tool_in_this_turn")

Timings = dict[str, list[float]]  # measure -> seconds


def script_for(earlier_results: int) -> Script:
    """The fake model's script for a turn after ``earlier_results`` tool results in the session: the model
    counts every result in the conversation, so this turn's one call sits at that index. Each turn opens a page of
    its own: the same navigation straight after the last one would be answered from the pod's journal as a
    re-issue (docs/journal.md), not run."""
    page = f"{PAGE}?turn={earlier_results}"
    return Script(calls=[NO_TOOL] * earlier_results + [Call("browser_navigate", {"url": page})])


class Arrivals:
    """When the tool call reached the far end (the extension, or the MCP server), by the clock of this process."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def mark(self, arguments: dict[str, Any]) -> str:
        self.times.append(time.perf_counter())
        return f"navigated to {arguments.get('url')}"

    def first_after(self, start: float) -> float:
        later = [t for t in self.times if t >= start]
        if not later:
            raise RuntimeError("the turn ended without calling browser_navigate: see the agent's stderr")
        return later[0] - start


def navigate_server(arrivals: Arrivals) -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="browser_navigate", description="Open a URL in the tab",
                                                       input_schema=NAVIGATE_SCHEMA)])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text=arrivals.mark(dict(params.arguments or {})))])

    return Server("openab_browser", version="1", on_list_tools=list_tools, on_call_tool=call_tool)


class DirectClient:
    """The ACP client of the direct path: collects the answer and allows a tool call once if asked."""

    def __init__(self) -> None:
        self.text: list[str] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if isinstance(update, AgentMessageChunk) and getattr(update.content, "text", None):
            self.text.append(update.content.text)

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        once = next((o for o in options if o.kind == "allow_once"), options[0])
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=once.option_id))


@dataclasses.dataclass
class Setup:
    model: FakeModel
    recipe: Recipe
    openab_agent: AgentEnv
    direct_agent: AgentEnv
    pod: RunningPod
    extension: FakeExtension
    openab_arrivals: Arrivals
    direct_arrivals: Arrivals
    direct_url: str

    @property
    def direct_env(self) -> dict[str, str]:
        """The environment the pod would give the CLI, without the pod's own variables: what this machine passes
        through (the CA bundle: without SSL_CERT_FILE and SSL_CERT_DIR codex used about 1.7 times the CPU in a
        session), the recipe's (no update notifier) and the CLI's."""
        return scrubbed_env(extra={**self.direct_agent.env, **self.recipe.env})


def record(into: Timings, cold: bool, arrivals: Arrivals, start: float, end: float) -> None:
    kind = "cold" if cold else "warm"
    into.setdefault(f"{kind}: prompt to first tool call", []).append(arrivals.first_after(start))
    into.setdefault(f"{kind}: whole turn", []).append(end - start)


async def openab_session(setup: Setup, warm: int, into: Timings) -> None:
    """One session through the pod: a cold turn (the agent starts), then ``warm`` turns."""
    session_id = await open_session(setup.pod, setup.extension)
    try:
        for turn in range(1 + warm):
            setup.model.set_script(script_for(turn))
            start = time.perf_counter()
            answer = await prompt(setup.extension, session_id, "Open the page, please.", timeout=TURN_TIMEOUT)
            end = time.perf_counter()
            if answer.result != {"stopReason": "end_turn"} or f"navigated to {PAGE}" not in answer.text:
                raise RuntimeError(f"the turn through openab did not end as scripted: {answer.error or answer.result}")
            record(into, turn == 0, setup.openab_arrivals, start, end)
    finally:
        await setup.pod.pod.evict(session_id, "benchmark round done")


async def direct_session(setup: Setup, warm: int, into: Timings) -> None:
    """One codex-acp of our own, with the MCP server in ``session/new``: a cold turn, then ``warm`` turns."""
    agent = setup.direct_agent
    client = DirectClient()
    # A bearer header, as the pod hands its agent one: the CLI then skips its OAuth discovery on both paths.
    server = HttpMcpServer(type="http", name="openab_browser", url=setup.direct_url,
                           headers=[HttpHeader(name="Authorization", value=f"Bearer {secrets.token_urlsafe(24)}")])
    setup.model.set_script(script_for(0))
    start = time.perf_counter()  # the prompt: from here the agent starts, as the pod starts it on a first prompt
    process = await asyncio.create_subprocess_exec(
        *setup.recipe.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL, env=setup.direct_env, cwd=agent.cwd, start_new_session=True,
        limit=64 * 1024 * 1024,
    )
    assert process.stdin is not None and process.stdout is not None
    conn = connect_to_agent(cast(AcpClient, client), process.stdin, process.stdout)
    try:
        async with asyncio.timeout(TURN_TIMEOUT * (1 + warm)):
            await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities(),
                                  client_info=Implementation(name="openab-bench", version="0"))
            session = await conn.new_session(cwd=str(agent.cwd), mcp_servers=[server])
            for turn in range(1 + warm):
                if turn:
                    setup.model.set_script(script_for(turn))
                    start = time.perf_counter()
                client.text.clear()
                result = await conn.prompt(session_id=session.session_id, prompt=[text_block("Open the page, please.")])
                end = time.perf_counter()
                if result.stop_reason != "end_turn" or f"navigated to {PAGE}" not in "".join(client.text):
                    raise RuntimeError(f"the direct turn did not end as scripted: {result.stop_reason}")
                record(into, turn == 0, setup.direct_arrivals, start, end)
    finally:
        with contextlib.suppress(Exception):
            await conn.close()
        await kill_group(process)


@contextlib.asynccontextmanager
async def setup_both(root: Path) -> AsyncIterator[Setup]:
    binary = require(RECIPES[CLI].argv[0])
    with serving(FakeModel()) as model:
        openab_agent = agent_env(CLI, model.url, root / "openab")
        direct_agent = agent_env(CLI, model.url, root / "direct")
        recipe = dataclasses.replace(RECIPES[CLI], argv=(str(binary), *RECIPES[CLI].argv[1:]))
        openab_arrivals, direct_arrivals = Arrivals(), Arrivals()
        async with (
            # JSON answers, not an SSE stream per call: the SDK server at its fastest, so the baseline is not slow.
            serving_in_loop(navigate_server(direct_arrivals).streamable_http_app(json_response=True)) as port,
            run_pod(root / "state", env=openab_agent.env, recipe=recipe, permissions="browser-only",
                    browser_mode="proxy") as pod,
            pod.extension() as extension,
        ):
            async def navigate(arguments: dict[str, Any]) -> dict[str, Any]:
                return text_result(openab_arrivals.mark(arguments))

            extension.add_tool("browser_navigate", navigate, NAVIGATE_SCHEMA)
            yield Setup(model, recipe, openab_agent, direct_agent, pod, extension, openab_arrivals, direct_arrivals,
                        f"http://127.0.0.1:{port}/mcp")


async def measure(quick: bool) -> tuple[dict[str, Any], Timings]:
    rounds, warm = (2, 1) if quick else (20, 4)
    root = Path(tempfile.mkdtemp(prefix="oab-bench-turn-"))
    timings: dict[str, Timings] = {"openab": {}, "direct": {}}
    paths: dict[str, Callable[[Setup], Awaitable[None]]] = {
        "openab": lambda setup: openab_session(setup, warm, timings["openab"]),
        "direct": lambda setup: direct_session(setup, warm, timings["direct"]),
    }
    try:
        async with setup_both(root) as setup:
            # One untimed session each: the CLI's binary and the model's first answers in the page cache.
            await openab_session(setup, 0, {})
            await direct_session(setup, 0, {})
            order = list(paths)
            for number in range(rounds):
                for name in order if number % 2 == 0 else reversed(order):
                    await paths[name](setup)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    measures = list(timings["direct"])
    table = {
        measure: {
            "openab": summary(timings["openab"][measure]),
            "direct": summary(timings["direct"][measure]),
        }
        for measure in measures
    }
    for row in table.values():
        row["ratio"] = ratio(row["openab"], row["direct"])
        row["added_ms"] = {key: round(row["openab"][f"{key}_ms"] - row["direct"][f"{key}_ms"], 2)
                           for key in ("p50", "p99")}
    result: dict[str, Any] = {
        "what": "a codex-acp turn (prompt -> browser_navigate -> answer) against the scripted fake model, through "
                "an openab pod (proxy mode) and with an MCP server handed to the CLI directly, alternating",
        "cli": CLI,
        "cli_version": cli_version(),
        "rounds": rounds,
        "warm_turns_per_session": warm,
        "measures": table,
        "target": "openab adds < 5% (ratio < 1.05) to the prompt-to-first-tool-call time and to the whole turn",
        "target_met_p50": all(row["ratio"]["p50"] < 1.05 for row in table.values()),
        "target_met_p99": all(row["ratio"]["p99"] < 1.05 for row in table.values()),
    }
    samples = {f"{path} {measure}": timings[path][measure] for measure in measures for path in ("openab", "direct")}
    return result, samples


def cli_version() -> str | None:
    package = _HERE.parent / "tests" / "agents" / "node_modules" / "@zed-industries" / "codex-acp" / "package.json"
    with contextlib.suppress(OSError, ValueError):
        import json

        return str(json.loads(package.read_text())["version"])
    return None


def main(argv: Sequence[str] | None = None) -> Path:
    args = arguments(__doc__ or NAME, argv)
    result, samples = asyncio.run(measure(args.quick))
    plot_latencies(NAME, samples, args.out, title="A codex-acp turn: through openab vs direct (same run)")
    written: Path = write_result(NAME, result, args.out)
    return written


if __name__ == "__main__":
    main()
