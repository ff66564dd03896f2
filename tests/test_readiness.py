"""`/readyz` says the pod cannot answer when none of its named agents can start (issue 36, item 2): a real
`openab run` whose PATH is an empty folder, as the image built with no agent CLI inside runs the example overlay's
`claude,codex`. And the panel hears why at connect: initialize's `_meta`."""

from __future__ import annotations

import asyncio
import os
import re
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_runtime_pod import run_pod
from test_runtime_run_command import OPENAB

from openab_browser.core.acp.schema import AGENTS_UNAVAILABLE_META
from openab_browser.core.agents.availability import AgentAvailability

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def openab_run(tmp_path: Path, *agents: str) -> AsyncIterator[tuple[str, list[str]]]:
    """`openab run --agent ...` with PATH an empty folder, serving: yields its base URL and its stderr so far."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty), "OPENAB_ACP_AUTH_KEY": "k" * 32}
    args = [arg for agent in agents for arg in ("--agent", agent)]
    process = await asyncio.create_subprocess_exec(
        *OPENAB, "run", "--port", "0", "--state-dir", str(tmp_path / "state"), *args, env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, start_new_session=True)
    assert process.stderr is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(60):
            while not (found := re.search(r"running on (http://127\.0\.0\.1:\d+)", "".join(lines), re.IGNORECASE)):
                line = (await process.stderr.readline()).decode()
                assert line, "openab run exited while starting:\n" + "".join(lines)
                lines.append(line)
        yield found.group(1), lines
    finally:
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            await process.stderr.read()
            await process.wait()


async def readyz(base: str) -> tuple[int, dict[str, Any]]:
    async with httpx.AsyncClient(timeout=10, trust_env=False) as http:
        response = await http.get(base + "/readyz")
    return response.status_code, response.json()


async def test_a_pod_whose_named_agents_are_all_missing_is_not_ready_and_says_why(tmp_path: Path) -> None:
    async with openab_run(tmp_path, "claude", "codex") as (base, log):
        status, body = await readyz(base)
    assert status == 503, body
    assert body["ready"] is False and body["state"] == "no_agent", body
    assert body["cannot_start"] == {"claude": "claude-agent-acp not found on PATH",
                                    "codex": "codex-acp not found on PATH"}, body
    assert "claude: claude-agent-acp not found on PATH; codex: codex-acp not found on PATH" in body["reason"], body
    assert any("not ready: none of the pod's agents can start" in line for line in log), "".join(log)


async def test_the_built_in_agent_can_always_start_and_the_missing_ones_are_named(tmp_path: Path) -> None:
    async with openab_run(tmp_path, "builtin", "codex") as (base, log):
        status, body = await readyz(base)
    assert status == 200, body
    assert body["ready"] is True and body["state"] == "ready", body
    assert body["cannot_start"] == {"codex": "codex-acp not found on PATH"}, body
    assert any("ready, but some of the pod's agents cannot start" in line for line in log), "".join(log)


async def test_a_built_in_pod_is_ready_with_nothing_to_say(tmp_path: Path) -> None:
    async with openab_run(tmp_path, "builtin") as (base, _log):
        status, body = await readyz(base)
    assert (status, body) == (200, {"ready": True, "state": "ready"})


async def test_the_panel_hears_at_connect_that_no_agent_can_start(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    async with run_pod(tmp_path / "state", agent=["claude", "codex"], base_env={"PATH": str(empty)}) as pod, \
            pod.extension() as ext:
        init = await ext.initialize()
    assert init["_meta"][AGENTS_UNAVAILABLE_META] == (
        "This pod cannot start any of its agents (claude: claude-agent-acp not found on PATH; codex: codex-acp not "
        "found on PATH): ask its admin."
    )


async def test_a_pod_with_one_startable_agent_says_nothing_at_connect(tmp_path: Path) -> None:
    async with run_pod(tmp_path / "state", agent=["builtin", "codex"], base_env={"PATH": str(tmp_path)}) as pod, \
            pod.extension() as ext:
        init = await ext.initialize()
    assert AGENTS_UNAVAILABLE_META not in init["_meta"]


def test_the_lookup_is_cached_within_its_bound_and_sees_an_install_after_it(tmp_path: Path) -> None:
    now = [0.0]
    availability = AgentAvailability({"codex": ["codex-acp"]}, str(tmp_path), ttl=10, clock=lambda: now[0])
    assert not availability.now().any_startable
    program = tmp_path / "codex-acp"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    now[0] = 9.9
    assert not availability.now().any_startable  # the answer of the last look, within its bound
    now[0] = 10.0
    assert availability.now().any_startable and availability.for_person() is None
