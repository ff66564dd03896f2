"""What an agent may take from the pod: processes that outlive their session (``setsid``, double-forked
daemons), zombies left to a PID 1 that never reaps, and memory (agents start on the first prompt, at most
``max_agents`` at once). Real agent processes: a tiny ACP agent of our own that spawns escapees, and the
built-in agent."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from fake_extension import RemoteError, connect_extension
from test_runtime_pod import BROWSER_SERVER, FakeBrowser, live_group, prompt, run_pod
from waits import eventually

from openab_browser.core.agents.process import AgentProcess, find_program
from openab_browser.core.agents.tree import HOLDING_SHELL, RELEASE_LINE, Tree, own_cgroup
from openab_browser.core.errors import ConnectionClosed
from openab_browser.core.event_loop import loop_factory
from openab_browser.core.jsonrpc import SERVER_OVERLOADED
from openab_browser.core.settings import Settings
from openab_browser.gateway.run_command import register, runtime_overrides

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "uvloop"])
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    # The pod runs on uvloop when it is installed (core/event_loop.py): every agent's life here is tried on both.
    _, new_loop = loop_factory(request.param)
    return "asyncio", {"loop_factory": new_loop}

# An ACP agent that, before it answers anything, sets two processes loose, both ignoring SIGTERM: a child
# that calls setsid and sheds its environment, and a daemon (double fork + setsid, re-parented away from the
# agent at once) that runs ``argv[2]`` when given, else sleeps holding the agent's stdio pipes. Their pids
# go to ``argv[1]/pids.json``.
ESCAPING_AGENT = r"""
import json, os, signal, subprocess, sys, time

out = sys.argv[1]
child = subprocess.Popen(
    [sys.executable, "-c", "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); os.setsid(); "
     "time.sleep(600)"],
    env={"PATH": os.defpath},
)
deadline = time.monotonic() + 30
while os.getsid(child.pid) != child.pid and time.monotonic() < deadline:
    time.sleep(0.01)
read, write = os.pipe()
first = os.fork()
if first == 0:
    if os.fork() == 0:
        os.setsid()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        os.write(write, str(os.getpid()).encode())
        os.close(write)
        if len(sys.argv) > 2:
            os.execv(sys.argv[2], [sys.argv[2], "600"])
        time.sleep(600)
    os._exit(0)
os.waitpid(first, 0)
os.close(write)
daemon = int(os.read(read, 64))
with open(out + "/pids.tmp", "w") as f:
    # Its pids as its own PID namespace numbers them (a confined agent may have one): the namespace says which.
    json.dump({"agent": os.getpid(), "child": child.pid, "daemon": daemon, "ns": os.readlink("/proc/self/ns/pid")}, f)
os.rename(out + "/pids.tmp", out + "/pids.json")

for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message or "method" not in message:
        continue
    method = message["method"]
    answer = {"jsonrpc": "2.0", "id": message["id"]}
    if method == "initialize":
        answer["result"] = {"protocolVersion": 1, "agentCapabilities": {}}
    elif method == "session/new":
        answer["result"] = {"sessionId": "escaping-1"}
    elif method == "session/prompt":
        answer["result"] = {"stopReason": "end_turn"}
    else:
        answer["error"] = {"code": -32601, "message": "Method not found: " + method}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
"""


def escaping_agent(tmp_path: Path, *extra: str) -> list[str]:
    script = tmp_path / "escaping_agent.py"
    script.write_text(ESCAPING_AGENT)
    # Its pids go to its working folder: the one folder of the pod a confined agent may write.
    return [sys.executable, str(script), ".", *extra]


def _written_pids(tmp_path: Path) -> dict[str, int] | None:
    path = next(tmp_path.glob("**/sessions/*/work/pids.json"), None)
    if path is None:
        return None
    try:
        written = json.loads(path.read_text())
    except ValueError:  # still being written
        return None
    ns = written.pop("ns")
    return {name: host_pid(ns, pid) for name, pid in written.items()}


def host_pid(ns: str, pid: int) -> int:
    """The pid the pod sees for ``pid`` of PID namespace ``ns`` (the agent's own, when its launcher made one)."""
    if ns == os.readlink("/proc/self/ns/pid"):
        return pid
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, StopIteration, ValueError):
            if entry.name.isdigit() and os.readlink(entry / "ns" / "pid") == ns:
                line = next(x for x in (entry / "status").read_text().splitlines() if x.startswith("NSpid:"))
                if int(line.split()[-1]) == pid:
                    return int(entry.name)
    raise AssertionError(f"no process {pid} in {ns}")


def in_tree(pid: int, root: int) -> bool:
    """Whether ``pid`` is ``root`` or below it (the agent below its launcher, in a PID namespace of its own)."""
    while pid > 1:
        if pid == root:
            return True
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat[stat.rindex(")") + 2:].split()[1])
    return False


async def escapee_pids(tmp_path: Path) -> dict[str, int]:
    """The pids the escaping agent wrote, in its session's working folder (under a state dir in ``tmp_path``)."""
    await eventually(lambda: _written_pids(tmp_path) is not None)
    pids = _written_pids(tmp_path)
    assert pids is not None
    return pids


def in_proc(pid: int) -> bool:
    """Whether /proc has the pid at all: alive, or a zombie nobody reaped."""
    return Path(f"/proc/{pid}").exists()


def cgroup_of(pid: int) -> str:
    return next(line[3:] for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines() if line.startswith("0::"))


cgroup_modes = pytest.mark.parametrize("cgroups", [
    pytest.param(True, id="cgroup", marks=pytest.mark.skipif(own_cgroup() is None, reason="no writable cgroup v2")),
    pytest.param(False, id="proc"),
])


@cgroup_modes
async def test_what_an_agent_sets_loose_dies_with_its_session_and_leaves_no_zombie(
    tmp_path: Path, cgroups: bool
) -> None:
    async with run_pod(tmp_path / "state", agent_cmd=escaping_agent(tmp_path), agent_cgroups=cgroups) as pod, \
            pod.extension() as ext:
        session_id = await ext.new_session([])
        turn = await prompt(ext, session_id, "hello")
        pids = await escapee_pids(tmp_path)
        agent = pids["agent"]
        started = pod.runtime.agents[session_id]  # the agent's launcher, or the agent itself
        assert started is not None and in_tree(agent, started)
        for escapee in (pids["child"], pids["daemon"]):
            assert os.getsid(escapee) == escapee != started, "it left the agent's session and process group"
            assert escapee not in live_group(started)
            # ... but not its tree: a cgroup made for the agent, or the /proc fallback.
            assert ("openab-agent-" in cgroup_of(escapee)) is cgroups
        assert cgroup_of(pids["daemon"]) == cgroup_of(agent)

        await pod.pod.evict(session_id, "test")
        await eventually(lambda: not any(in_proc(pid) for pid in pids.values()), timeout=15)

    assert turn.result == {"stopReason": "end_turn"}, turn.error
    if cgroups:
        left = await asyncio.to_thread(lambda: list(Path(str(own_cgroup())).glob(f"openab-agent-{os.getpid()}-*")))
        assert not left, "its cgroup was removed"


@cgroup_modes
async def test_an_agent_that_dies_alone_takes_what_it_set_loose_along(tmp_path: Path, cgroups: bool) -> None:
    async with run_pod(tmp_path / "state", agent_cmd=escaping_agent(tmp_path), agent_cgroups=cgroups) as pod, \
            pod.extension() as ext:
        session_id = await ext.new_session([])
        await prompt(ext, session_id, "hello")
        pids = await escapee_pids(tmp_path)
        if not cgroups:
            # Without a cgroup, the child that shed its environment is tied to the agent only by its parent link,
            # which the agent's death cuts: the pod remembers the tree every few seconds; this is that look.
            process = pod.runtime._agents[session_id].process
            assert process is not None
            assert pids["child"] in process.tree.members(marked=False)
        os.kill(pids["agent"], signal.SIGKILL)  # as an OOM kill would: no chance to clean up
        await eventually(lambda: not any(in_proc(pid) for pid in pids.values()), timeout=15)
        # Its launcher, which the pod started, ends as the agent did, a moment after.
        await eventually(lambda: session_id not in pod.runtime.agents, timeout=15)
        again = await prompt(ext, session_id, "hello again")

    assert again.result == {"stopReason": "end_turn"}, "the session goes on with a fresh agent"


needs_cgroup = pytest.mark.skipif(own_cgroup() is None, reason="no writable cgroup v2")


def blocked_reading(pid: int) -> bool:
    """Whether the process sleeps in a read of a pipe (its stdin, for a held agent)."""
    proc = Path(f"/proc/{pid}")
    return "pipe_read" in (proc / "wchan").read_text() or (proc / "syscall").read_text().startswith("0 ")


def reports_its_cgroup(out: Path) -> list[str]:
    """An agent whose first act is to write down its cgroup."""
    code = f"import pathlib; pathlib.Path({str(out)!r}).write_text(open('/proc/self/cgroup').read())"
    return [sys.executable, "-c", code]


@needs_cgroup
async def test_a_held_agent_runs_nothing_until_it_is_in_its_cgroup(tmp_path: Path) -> None:
    tree = Tree("held", own_cgroup())
    assert tree.prepare() and tree.cgroup is not None
    out = tmp_path / "cgroup"
    child = await asyncio.create_subprocess_exec(*tree.held(reports_its_cgroup(out)), stdin=asyncio.subprocess.PIPE,
                                                 start_new_session=True)
    try:
        await eventually(lambda: blocked_reading(child.pid), timeout=10)
        assert not out.exists(), "the agent ran before it was released"
        cmdline = await asyncio.to_thread(Path(f"/proc/{child.pid}/cmdline").read_bytes)
        assert cmdline.startswith(HOLDING_SHELL.encode())
        tree.enter(child.pid)
        assert child.stdin is not None
        child.stdin.write(RELEASE_LINE)
        assert await asyncio.wait_for(child.wait(), 30) == 0
        assert f"/{tree.cgroup.name}\n" in out.read_text(), "the agent's first instruction ran inside its cgroup"
    finally:
        with contextlib.suppress(ProcessLookupError):
            child.kill()
        await child.wait()
        tree.remove()
    assert tree.cgroup is None


@needs_cgroup
async def test_a_held_agent_whose_gateway_goes_away_never_runs(tmp_path: Path) -> None:
    tree = Tree("orphaned", own_cgroup())
    assert tree.prepare()
    out = tmp_path / "cgroup"
    child = await asyncio.create_subprocess_exec(*tree.held(reports_its_cgroup(out)), stdin=asyncio.subprocess.PIPE,
                                                 start_new_session=True)
    assert child.stdin is not None
    child.stdin.close()  # end of input, no release line
    assert await asyncio.wait_for(child.wait(), 30) != 0
    assert not out.exists()
    tree.spawned(None)
    assert tree.cgroup is None


@needs_cgroup
async def test_a_refused_cgroup_move_still_runs_the_agent_tracked_through_proc(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tree = Tree("refused", own_cgroup())
    assert tree.prepare() and tree.cgroup is not None
    tree.cgroup.rmdir()  # gone between its making and the move: the write is refused
    out = tmp_path / "cgroup"
    child = await asyncio.create_subprocess_exec(*tree.held(reports_its_cgroup(out)), stdin=asyncio.subprocess.PIPE,
                                                 start_new_session=True)
    tree.enter(child.pid)
    assert tree.cgroup is None and "could not enter its cgroup" in caplog.text
    assert child.stdin is not None
    child.stdin.write(RELEASE_LINE)
    assert await asyncio.wait_for(child.wait(), 30) == 0
    assert "openab-agent-" not in out.read_text()


@needs_cgroup
async def test_a_held_agents_arguments_are_never_read_by_the_shell(tmp_path: Path) -> None:
    tree = Tree("quoted", own_cgroup())
    assert tree.prepare()
    words = ["$(touch pwned)", "; touch pwned2", "`touch pwned3`", "*", "a b", ""]
    child = await asyncio.create_subprocess_exec(
        *tree.held([sys.executable, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))", *words]),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, cwd=tmp_path, start_new_session=True)
    tree.enter(child.pid)
    out, _ = await asyncio.wait_for(child.communicate(RELEASE_LINE), 30)
    assert json.loads(out) == words and not await asyncio.to_thread(lambda: list(tmp_path.iterdir()))
    tree.remove()


class Silent:
    """An agent's handler that answers nothing."""

    def handle_request(self, request: Any) -> Any:
        return None

    def handle_notification(self, notification: Any) -> None:
        return None


@needs_cgroup
async def test_a_start_cancelled_while_its_agent_enters_the_cgroup_runs_nothing_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    moving, finish = threading.Event(), threading.Event()
    enter = Tree.enter

    def slow_enter(tree: Tree, pid: int) -> None:  # a cgroup move that waits long for its grace period
        moving.set()
        finish.wait(30)
        enter(tree, pid)

    monkeypatch.setattr(Tree, "enter", slow_enter)
    out = tmp_path / "cgroup"
    agent = AgentProcess(reports_its_cgroup(out), handler=Silent(), env=dict(os.environ), cwd=tmp_path,
                         name="cancelled agent", cgroups=own_cgroup())
    start = asyncio.create_task(agent.start())
    assert await asyncio.to_thread(moving.wait, 30)
    start.cancel()
    # A turn of the loop, not a wait for time: the cancel queued the start's wakeup ahead of this test's own, so
    # when the test runs again the start has taken the cancellation and either ended or waits for the move.
    await asyncio.sleep(0)
    assert not start.done(), "the start waits for the move it began"
    finish.set()
    with pytest.raises(asyncio.CancelledError):
        await start
    assert agent.tree.leader is not None and not in_proc(agent.tree.leader.pid), "the held shell is gone, reaped"
    assert not out.exists(), "the agent never ran"
    assert agent.tree.cgroup is None
    left = await asyncio.to_thread(lambda: list(Path(str(own_cgroup())).glob(f"openab-agent-{os.getpid()}-*")))
    assert not left, "its cgroup was removed"


def test_the_agent_program_is_found_as_exec_would_find_it(tmp_path: Path) -> None:
    bin_dir, work = tmp_path / "bin", tmp_path / "work"
    bin_dir.mkdir()
    work.mkdir()
    tool = bin_dir / "tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    (bin_dir / "plain").write_text("not a program")
    (work / "local").write_text("#!/bin/sh\n")
    (work / "local").chmod(0o755)
    env = {"PATH": f"/nonexistent:{bin_dir}"}
    assert find_program("tool", env, work) == str(tool)
    assert find_program("./local", env, work) == str(work / "local")  # relative to the agent's cwd, not ours
    assert find_program("local", {"PATH": ":/nonexistent"}, work) == str(work / "local")  # empty entry: cwd
    with pytest.raises(FileNotFoundError):
        find_program("plain", env, work)  # not executable: exec would pass it by
    with pytest.raises(FileNotFoundError):
        find_program("./missing", env, work)
    with pytest.raises(PermissionError):
        find_program(str(bin_dir / "plain"), env, work)
    with pytest.raises(PermissionError):
        find_program(str(bin_dir), env, work)


async def pid_1_pod(tmp_path: Path, agent_cmd: list[str]) -> tuple[asyncio.subprocess.Process, str, str]:
    """`openab run` as PID 1 of a pid namespace of its own, with no init in front of it."""
    token = secrets.token_urlsafe(24)
    process = await asyncio.create_subprocess_exec(
        "unshare", "--pid", "--fork", "--mount-proc", "--kill-child",
        sys.executable, "-m", "openab_browser.gateway.cli", "run", "--port", "0",
        "--state-dir", str(tmp_path / "state"),
        "--agent", "custom", "--agent-cmd", " ".join(agent_cmd),
        env={**os.environ, "OPENAB_ACP_AUTH_KEY": token}, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    seen = []
    async with asyncio.timeout(30):
        while line := (await process.stderr.readline()).decode():
            seen.append(line)
            if match := re.search(r"running on (http://\S+)", line, re.IGNORECASE):
                return process, "ws" + match.group(1).removeprefix("http") + "/acp", token
    raise AssertionError("openab run exited while starting:\n" + "".join(seen))


def named(comm: str) -> list[tuple[int, str]]:
    """(pid, state) of the processes whose command name is ``comm``, zombies included."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if stat[stat.index("(") + 1 : stat.rindex(")")] == comm:
                found.append((int(entry.name), stat[stat.rindex(")") + 2]))
    return found


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare")
async def test_openab_as_pid_1_reaps_the_orphans_its_agents_leave(tmp_path: Path) -> None:
    # A daemon under a name of its own, so it can be found from outside the namespace, zombie or not.
    comm = f"oabz{secrets.token_hex(4)}"
    sleeper = tmp_path / comm
    shutil.copy(shutil.which("sleep") or "/bin/sleep", sleeper)
    process, ws_url, token = await pid_1_pod(tmp_path, escaping_agent(tmp_path, str(sleeper)))
    try:
        async with connect_extension(ws_url, token) as ext:
            await ext.initialize()
            session_id = await ext.new_session([])
            turn = await prompt(ext, session_id, "hello")
            assert turn.result == {"stopReason": "end_turn"}, turn.error
            await eventually(lambda: [state for _, state in named(comm)] == ["S"])
            [(daemon, _)] = named(comm)
            os.kill(daemon, signal.SIGKILL)  # the daemon ends; its parent is now openab, PID 1
            await eventually(lambda: not named(comm), timeout=10)
    finally:
        # unshare ignores SIGTERM while it waits: openab gets it, and unshare ends with it.
        children = Path(f"/proc/{process.pid}/task/{process.pid}/children")
        for pid in (await asyncio.to_thread(children.read_text)).split():
            os.kill(int(pid), signal.SIGTERM)
        async with asyncio.timeout(30):
            await process.communicate()


# -- memory: agents on demand, and a cap ---------------------------------------------------------------------


def agent_processes() -> set[int]:
    """Our child processes that are agents (they carry a session's browser channel)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            if int(stat[stat.rindex(")") + 2 :].split()[1]) != os.getpid():
                continue
            environ = (entry / "environ").read_bytes()
        except (OSError, ValueError):
            continue
        if any(item.startswith(b"OPENAB_BROWSER_CHANNEL=") for item in environ.split(b"\0")):
            found.add(int(entry.name))
    return found


async def test_sessions_start_no_agent_until_their_first_prompt(tmp_path: Path) -> None:
    async with run_pod(tmp_path / "state") as pod, pod.extension() as ext:
        FakeBrowser(ext)
        sessions = [await ext.new_session([BROWSER_SERVER]) for _ in range(20)]
        for session_id in sessions:
            await pod.pod.tunnels.wait_attached(session_id, timeout=15)  # each session is fully open
        idle_agents = (dict(pod.runtime.agents), agent_processes())

        turn = await prompt(ext, sessions[7], "open example.org")
        after_prompt = (dict(pod.runtime.agents), agent_processes())

    assert idle_agents == ({}, set()), "20 open sessions and no prompt: no agent runs"
    assert turn.result == {"stopReason": "end_turn"}, turn.error
    [(session_id, pid)] = after_prompt[0].items()
    assert session_id == sessions[7] and after_prompt[1] == {pid}, "one prompt, exactly one agent"


async def test_at_the_cap_the_agent_idle_longest_makes_room_and_a_busy_pod_says_what_to_do(tmp_path: Path) -> None:
    async with run_pod(tmp_path / "state", max_agents=2) as pod, pod.extension() as a, pod.extension() as b, \
            pod.extension() as c:
        exts = {"a": a, "b": b, "c": c}
        browsers = {name: FakeBrowser(ext, hold=asyncio.Event()) for name, ext in exts.items()}
        ids = {name: await ext.new_session([BROWSER_SERVER]) for name, ext in exts.items()}
        for session_id in ids.values():
            await pod.pod.tunnels.wait_attached(session_id, timeout=15)
        warm = [await prompt(exts[name], ids[name], "hello") for name in "ab"]
        two_idle = dict(pod.runtime.agents)
        first_pid = two_idle[ids["a"]]
        assert first_pid is not None

        # A third agent: the one idle longest (a's) is stopped to make room.
        third = await prompt(c, ids["c"], "hello")
        await eventually(lambda: not live_group(first_pid))
        made_room = dict(pod.runtime.agents)

        # Two turns in the browser at once (a's fresh agent takes b's place), then a third session asks.
        running = [asyncio.ensure_future(prompt(exts[name], ids[name], f"open example.org/{name}")) for name in "ac"]
        async with asyncio.timeout(60):
            await browsers["a"].navigating.wait()
            await browsers["c"].navigating.wait()
        refused = await prompt(b, ids["b"], "hello")
        while_busy = dict(pod.runtime.agents)
        for name in "ac":
            hold = browsers[name].hold
            assert hold is not None
            hold.set()
        finished = await asyncio.gather(*running)
        accepted = await prompt(b, ids["b"], "hello")
        at_the_end = dict(pod.runtime.agents)

    assert [turn.result for turn in [*warm, third, *finished, accepted]] == [{"stopReason": "end_turn"}] * 6
    assert two_idle.keys() == {ids["a"], ids["b"]}
    assert made_room.keys() == {ids["b"], ids["c"]} and made_room[ids["b"]] == two_idle[ids["b"]]
    assert while_busy.keys() == {ids["a"], ids["c"]}
    assert isinstance(refused.error, RemoteError) and refused.error.code == SERVER_OVERLOADED
    assert "Every agent this pod may run (2) is busy" in str(refused.error.message)
    assert "close another chat" in str(refused.error.message) and "--max-agents" in str(refused.error.message)
    assert ids["b"] in at_the_end and len(at_the_end) == 2, "once a turn ended, its idle agent made room"


@pytest.mark.parametrize("source", ["flag", "env"])
def test_max_agents_comes_from_the_flag_or_the_environment(source: str) -> None:
    import argparse

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["run", "--max-agents", "3"] if source == "flag" else ["run"])
    env = {} if source == "flag" else {"OPENAB_MAX_AGENTS": "3"}
    assert Settings.from_env(env, **runtime_overrides(args)).max_agents == 3
    assert Settings().max_agents == 16


async def test_an_agent_that_cannot_be_spoken_to_any_more_is_stopped(tmp_path: Path) -> None:
    # It closes its stdin and lives on: every message to it fails from then on, and it would idle forever.
    deaf = "import os, time\nos.close(0)\nprint('ready', flush=True)\ntime.sleep(120)\n"
    agent = AgentProcess([sys.executable, "-c", deaf], handler=Silent(), env=dict(os.environ), cwd=tmp_path,
                         name="deaf agent")
    await agent.start()
    try:
        pid = agent.pid
        assert pid is not None
        with pytest.raises(ConnectionClosed, match="send failed"):
            await agent.rpc.request("session/new", {"cwd": str(tmp_path), "mcpServers": []}, timeout=10)
        async with asyncio.timeout(15):
            await agent.exited.wait()
        assert not agent.alive
        assert "its ACP connection closed" in agent.exit_message()
    finally:
        await agent.stop(grace=1)


async def test_an_agent_holds_no_descriptor_of_the_pods_but_its_three_pipes(tmp_path: Path) -> None:
    # uvloop's own spawn would leave second descriptors of the pipes (and more) open in the child: an agent
    # could then hold its stdin open after closing it, or write to what it was never given.
    listing = tmp_path / "fds.json"
    lister = ("import json, os, sys, time\n"
              "fds = {}\n"
              "for fd in os.listdir('/proc/self/fd'):\n"
              "    try: fds[fd] = os.readlink(f'/proc/self/fd/{fd}')\n"
              "    except FileNotFoundError: pass  # the listing's own, closed already\n"
              f"with open({str(listing)!r} + '.part', 'w') as f: f.write(json.dumps(fds))\n"
              f"os.rename({str(listing)!r} + '.part', {str(listing)!r})\n"
              "time.sleep(60)\n")
    held = socket.socket()  # one of the pod's own, open while the agent starts
    agent = AgentProcess([sys.executable, "-c", lister], handler=Silent(), env=dict(os.environ), cwd=tmp_path,
                         name="lister")
    await agent.start()
    try:
        await eventually(listing.exists, timeout=10)
        fds = json.loads(listing.read_text())
    finally:
        await agent.stop(grace=1)
        held.close()
    assert sorted(fds) == ["0", "1", "2"], fds
    assert all(fds[fd].startswith("pipe:") for fd in ("0", "1", "2")), fds
