"""What confining an agent costs its start (issue 35): the same pod, the same CLI, with and without Landlock.

A real pod (the test suite's ``run_pod``: the runtime, the proxy, a scripted extension) starts a session's agent as
its first prompt would (``start_agent``: spawn, held until it is in its cgroup, ``initialize`` and ``session/new``
answered), then closes the session, again and again; the paths alternate in rounds:

* the launcher alone: ``/bin/true`` exec'd directly, and through ``python -I -S confine.py`` with a session's
  policy (its Python start-up, the ruleset, ``restrict_self``, the exec);
* each CLI's start, confined (the kernel's Landlock) and unconfined (a probe that says there is none, with
  ``--unconfined-agents``).

The CLIs run offline against the suite's fake model (tests/agents/harness.py); a CLI that is not installed is
left out. Run: ``python bench/bench_confinement.py [--quick] [--out DIR]`` from the repository, venv active.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents.fake_model import FakeModel, serving
from agents.harness import ACP_COMMANDS, NODE_BIN, agent_env
from test_runtime_pod import RunningPod, open_session, run_pod

from bench.common import arguments, interleaved, plot_latencies, ratio, summary, timed, write_result
from openab_browser.core.agents import confine
from openab_browser.core.agents.confinement import Launch, agent_policy, launcher_argv
from openab_browser.core.agents.recipes import RECIPES

NAME = "confinement"
CLIS = ("codex", "claude", "opencode", "gemini", "qwen")
START_TIMEOUT = 60.0


def _no_landlock() -> tuple[int, str]:
    return 0, "the benchmark's unconfined side"


async def _exec(argv: list[str]) -> None:
    process = await asyncio.create_subprocess_exec(*argv, stdout=subprocess.DEVNULL)
    async with asyncio.timeout(START_TIMEOUT):
        assert await process.wait() == 0


@contextlib.asynccontextmanager
async def _pod(cli: str, root: Path, model: FakeModel, *, confined: bool) -> AsyncIterator[RunningPod]:
    agent = agent_env(cli, model.url, root / f"{cli}-{'on' if confined else 'off'}")
    agent.env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{agent.env['PATH']}"
    recipe = RECIPES[cli]
    recipe = dataclasses.replace(recipe, argv=(str(NODE_BIN / ACP_COMMANDS[cli][0]), *recipe.argv[1:]))
    async with run_pod(root / f"state-{cli}-{'on' if confined else 'off'}", env=agent.env, recipe=recipe,
                       probe=None if confined else _no_landlock, unconfined_agents=not confined) as running:
        yield running


def _start(running: RunningPod) -> Callable[[], Any]:
    async def one() -> None:
        async with running.extension() as ext:
            await ext.initialize()
            session_id = await open_session(running, ext)
            async with asyncio.timeout(START_TIMEOUT):
                assert await running.runtime.start_agent(session_id) is not None
            await ext.request("session/close", {"sessionId": session_id}, timeout=START_TIMEOUT)

    return one


async def measure(quick: bool) -> tuple[dict[str, Any], dict[str, list[float]]]:
    rounds, per_round = (2, 1) if quick else (6, 2)
    abi, why = confine.probe()
    if abi < 1:
        raise SystemExit(f"no Landlock here ({why}): nothing to compare")
    root = Path(tempfile.mkdtemp(prefix="oab-bench-"))
    clis = [cli for cli in CLIS if (NODE_BIN / ACP_COMMANDS[cli][0]).exists()]
    policy = agent_policy(abi, workdir=str(root / "w"), tmpdir=str(root / "t"), state_dir=str(root / "s"),
                          path=os.environ.get("PATH", ""))
    paths: dict[str, Callable[[], Any]] = {
        "/bin/true: exec to exit": timed(per_round, lambda: _exec(["/bin/true"])),
        "/bin/true through the launcher: exec to exit": timed(per_round, lambda: _exec(
            launcher_argv(policy, ["/bin/true"], Launch(sys.executable, confine.__file__)))),
    }
    try:
        with serving(FakeModel()) as model:
            async with contextlib.AsyncExitStack() as stack:
                for cli in clis:
                    for confined in (False, True):
                        running = await stack.enter_async_context(_pod(cli, root, model, confined=confined))
                        label = f"{cli}: start to session/new answered, {'confined' if confined else 'unconfined'}"
                        paths[label] = timed(per_round, _start(running))
                for run in paths.values():  # the page cache warm, as in a pod that has started one session
                    await run()
                samples = await interleaved(rounds, paths)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    table = {name: summary(values) for name, values in samples.items()}
    costs = {
        cli: ratio(table[f"{cli}: start to session/new answered, confined"],
                   table[f"{cli}: start to session/new answered, unconfined"])
        for cli in clis
    }
    result: dict[str, Any] = {
        "what": "an agent's start by the pod's runtime, with and without Landlock; runs alternate in rounds",
        "landlock_abi": abi,
        "rounds": rounds,
        "runs_per_round": per_round,
        "paths": table,
        "confined_to_unconfined": costs,
        "launcher_to_direct": ratio(table["/bin/true through the launcher: exec to exit"],
                                    table["/bin/true: exec to exit"]),
    }
    return result, samples


def main(argv: Sequence[str] | None = None) -> Path:
    args = arguments(__doc__ or NAME, argv)
    result, samples = asyncio.run(measure(args.quick))
    plot_latencies(NAME, samples, args.out, title="An agent's start, confined and not (same run)")
    written: Path = write_result(NAME, result, args.out)
    return written


if __name__ == "__main__":
    main()
