"""An agent's process tree without a cgroup (core/agents/tree.py): the runtime's periodic look walks the kernel's
lists of children from what the tree last held, never every process on the machine, and finds what the full
scan of /proc finds; a process that left the agent's session, and one whose parent died, stay in the tree."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from waits import eventually_sync as eventually

from openab_browser.core.agents import tree as tree_module
from openab_browser.core.agents.tree import Tree
from openab_browser.core.procfs import read_stat

pytestmark = pytest.mark.skipif(not os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children"),
                                reason="the kernel keeps no lists of children (CONFIG_PROC_CHILDREN)")

# The agent: a child that leaves the session (setsid) and a grandchild under it; each writes its pid down and sleeps.
_AGENT = """
import os, subprocess, sys, time
out = sys.argv[1]
child = subprocess.Popen([sys.executable, "-c", '''
import os, subprocess, sys, time
os.setsid()
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
open(sys.argv[1] + ".grandchild", "w").write(str(grandchild.pid))
time.sleep(120)
''', out])
open(out + ".child", "w").write(str(child.pid))
time.sleep(120)
"""


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[tuple[Tree, dict[str, int]]]:
    out = tmp_path / "pid"
    process = subprocess.Popen([sys.executable, "-c", _AGENT, str(out)])
    tree = Tree("test agent", None)
    tree.spawned(process.pid)
    pids: dict[str, int] = {"agent": process.pid}
    try:
        def written() -> bool:
            for name in ("child", "grandchild"):
                path = Path(f"{out}.{name}")
                if name not in pids and path.exists() and path.read_text():
                    pids[name] = int(path.read_text())
            return len(pids) == 3

        eventually(written, timeout=15, what="the agent's child and grandchild to start")
        yield tree, pids
    finally:
        for pid in pids.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        process.wait(10)


def test_the_walk_reads_no_other_process_and_finds_what_the_scan_finds(
    agent: tuple[Tree, dict[str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    tree, pids = agent
    scanned = tree._scanned({tree.leader.pid: tree.leader} if tree.leader else {}, marked=False)

    def no_scan() -> dict[int, object]:
        raise AssertionError("the look listed every process in /proc")

    monkeypatch.setattr(tree_module, "_processes", no_scan)
    walked = tree.members(marked=False)
    assert set(walked) == set(pids.values()) == set(scanned)
    # The same processes, as the same parents' children started at the same times. Not the state letter: a
    # grandchild still starting Python is running at one look and sleeping at the next.
    assert {pid: (st.ppid, st.start) for pid, st in walked.items()} == {
        pid: (st.ppid, st.start) for pid, st in scanned.items() if st.state != "Z"}


def test_a_grandchild_whose_parent_died_stays_in_the_tree(agent: tuple[Tree, dict[str, int]]) -> None:
    tree, pids = agent
    assert set(tree.members(marked=False)) == set(pids.values())  # the look that remembers it
    os.kill(pids["child"], signal.SIGKILL)
    eventually(lambda: (st := read_stat(pids["grandchild"])) is not None and st.ppid != pids["child"],
               timeout=15, what="the grandchild to lose its parent")
    members = tree.members(marked=False)
    assert pids["grandchild"] in members and pids["agent"] in members
    assert pids["child"] not in members or members[pids["child"]].state == "Z"


def test_a_pid_taken_by_another_process_is_not_the_tree(agent: tuple[Tree, dict[str, int]]) -> None:
    tree, _pids = agent
    assert tree.leader is not None
    # As if the leader had been another process, started at another time, with this pid: not ours.
    tree.leader = type(tree.leader)(tree.leader.pid, "S", 1, 1, 1, tree.leader.start + 1)
    tree._known = {}
    assert tree.members(marked=False) == {}


def test_without_children_lists_the_look_scans_proc(agent: tuple[Tree, dict[str, int]],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    tree, pids = agent
    monkeypatch.setattr(tree_module, "_listed_children", lambda _pid: None)
    assert set(tree.members(marked=False)) == set(pids.values())
