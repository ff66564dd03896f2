"""A team on one hub (issue 36, item 4): people's pods started by a real JupyterHub on the one-machine recipe, each
person prompting the built-in agent through the hub's proxy and at the pod's own address, the culler over them all
(bench/bench_hub_team.py runs and measures it; docs/scaling.md reads its figures).

What a person would notice is asserted, never a time: every pod up and reached at the person's URL, every turn
answered with all its tool calls to the session that asked, no error of any kind, the culler stopping every idle
pod. The CI-sized variant (three people, two short phases) always runs; the issue's hundred people for a few
minutes is ``@pytest.mark.long`` (OPENAB_LONG=1, about 15 minutes on two cores, 14 GiB of memory).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from hub_harness import available

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_hub_team import CALLS_PER_TURN, PATHS, Plan, measure

pytestmark = pytest.mark.skipif(available() is not None, reason=available() or "")

LONG = bool(os.environ.get("OPENAB_LONG"))


def check(result: dict[str, Any], plan: Plan) -> None:
    print("team on one hub:", {k: v for k, v in result.items() if k != "load"})
    for phase in result["load"]["phases"]:
        print("load phase:", {k: v for k, v in phase.items() if not k.startswith("_")})
    assert result["errors"] == {}, result["errors"]
    for name, start in result["starts"].items():
        assert start["up"] == plan.people and "spawn failed" not in start["refused"], (name, start)
    load = result["load"]
    assert load["people_connected"] == plan.people
    assert load["first_turn"]["n"] == plan.people * len(PATHS)
    assert [phase["think_s"] for phase in load["phases"]] == list(plan.thinks)
    for phase in load["phases"]:
        assert phase["errors"] == {}, phase
        # Every turn came back with its four calls, each answered to the session that asked (turn() counts any
        # other outcome as an error, above).
        assert phase["tool_calls"] == phase["turns"] * CALLS_PER_TURN > 0
        for figure in ("tool_call", "turn"):
            for path in PATHS:
                row = phase[figure][path]
                assert row["n"] > 0 and 0 < row["p50_ms"] <= row["p99_ms"], (figure, path, row)
            assert set(phase[figure]["proxy_over_direct"]) == {"p50", "p99"}
        busy = phase["busy_memory"]
        # A busy pod is its gateway and one agent per session (two), each agent with its confinement launchers.
        assert busy["pods"] == plan.people and busy["processes_per_pod"]["min"] >= 3
        assert 0 < busy["per_agent_pss_mib"]["median"] < busy["gateway_pss_mib"]["median"]
        assert busy["pss_mib"]["median"] > result["idle_memory"]["pss_mib"]["median"]
        assert set(phase["cpu_s"]) >= {"gateways", "agents", "hub", "proxy"}
    idle = result["idle_memory"]
    assert idle["pods"] == plan.people and idle["processes_per_pod"]["max"] == 1  # no agent before a prompt
    # Python, the gateway and its dependencies: tens of MiB, not a few and not a GiB.
    assert 20 < idle["pss_mib"]["median"] <= idle["rss_mib"]["median"] < 1024, idle
    assert result["culler_pass_quiet"]["culled"] == 0
    assert set(load["connected_quiet"]["cpu_ms_per_s_per_connected_pod"]) >= {"gateways", "agents", "hub"}
    culler = result["culler"]
    assert culler["nothing_to_cull"]["culled"] == 0 and culler["cull_all"]["culled"] == plan.people
    assert culler["left_running"] == 0
    assert result["log"]["errors"]["lines"] == 0, result["log"]


def test_a_small_team_on_one_hub(tmp_path: Path) -> None:
    plan = Plan(people=3, stagger=0.5, duration=8.0, thinks=(0.5, 0.0), quiet=3.0)
    check(measure(plan, tmp_path / "hub"), plan)


@pytest.mark.long
@pytest.mark.skipif(not LONG, reason="the full-size run: OPENAB_LONG=1")
def test_a_hundred_people_on_one_hub(tmp_path: Path) -> None:
    plan = Plan()
    check(measure(plan, tmp_path / "hub"), plan)
