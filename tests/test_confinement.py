"""The attack of issue 35, from inside a real agent process the pod started: each probe refused with the agent
confined, and the same probe succeeding with it unconfined, so the test can fail.

The agent is tests/shell_agent.py run by the pod's runtime as any agent CLI is (held, in its cgroup, through the
confinement's launcher): every prompt is a shell command, as a CLI's shell tool runs what a prompt-injected model
asks. "Unconfined" is a kernel the probe says has no Landlock, with the operator's --unconfined-agents; without
that flag the same pod refuses to start the agent, which is the refusal's own test.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import secrets
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from agents.fake_model import Call, FakeModel, Script, serving
from agents.harness import ACP_COMMANDS, agent_env, require
from fake_extension import FakeExtension
from test_runtime_pod import FakeBrowser, RunningPod, Turn, open_session, prompt, run_pod

from openab_browser.core.agents.confine import probe as kernel_probe
from openab_browser.core.agents.confinement import (
    READ_WRITE,
    Launch,
    Support,
    agent_policy,
    expand_folder,
    handled_access,
    launcher_argv,
)
from openab_browser.core.agents.recipes import RECIPES, Recipe
from openab_browser.core.errors import ConfigurationError

pytestmark = pytest.mark.anyio

SHELL_AGENT = Recipe("custom", "shell agent", (sys.executable, "-c", (Path(__file__).parent / "shell_agent.py")
                                               .read_text()))
LANDLOCK = kernel_probe()[0]
needs_landlock = pytest.mark.skipif(LANDLOCK < 6, reason=f"this kernel's Landlock ABI is {LANDLOCK}, not 6 or more")


def no_landlock() -> tuple[int, str]:
    return 0, "the test's kernel has none"


class Attack:
    """Two sessions of one pod, each with its shell agent running; ``run`` sends A's agent a command."""

    def __init__(self, running: RunningPod, ext: FakeExtension, a: str, b: str, b_pid: int, held_fd: int) -> None:
        self.running, self.ext, self.a, self.b, self.b_pid, self.held_fd = running, ext, a, b, b_pid, held_fd
        self.state = running.pod.settings.state_dir
        self.pod_pid = os.getpid()

    def workdir(self, session_id: str) -> Path:
        session = self.running.pod.sessions.get(session_id)
        assert session is not None
        return self.running.runtime.workdir(session)

    async def run(self, command: str) -> tuple[int, str]:
        turn: Turn = await prompt(self.ext, self.a, command, timeout=60)
        assert turn.error is None, turn.error
        status, _, out = turn.text.partition("\n")
        return int(status.removeprefix("exit ")), out


@pytest.fixture(params=["confined", "unconfined"])
async def attack(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Attack]:
    confined = request.param == "confined"
    if confined and LANDLOCK < 6:
        pytest.skip(f"this kernel's Landlock ABI is {LANDLOCK}, not 6 or more")
    probe: Callable[[], tuple[int, str]] | None = None if confined else no_landlock
    state = tmp_path / "state"
    async with run_pod(state, recipe=SHELL_AGENT, probe=probe, unconfined_agents=not confined) as running:
        # What `openab run` keeps on a first run in keys/, 0600: the secret that names sessions (made at start) and
        # the verifier of the /acp key it made.
        key = state / "keys" / "session-names.key"
        assert key.exists()
        verifier = state / "keys" / "acp.verifier"
        verifier.write_text('{"format": "openab-acp-key-verifier"}\n')
        verifier.chmod(0o600)
        (state / "audit.jsonl").touch()
        held_fd = os.open(key, os.O_RDONLY | os.O_CLOEXEC)  # a file the pod holds open, as it holds its own
        try:
            async with running.extension() as ext:
                await ext.initialize()
                a = await open_session(running, ext)
                b = await open_session(running, ext)
                b_pid = await running.runtime.start_agent(b)
                await running.runtime.start_agent(a)
                assert b_pid is not None
                attack = Attack(running, ext, a, b, b_pid, held_fd)
                (attack.workdir(b) / "notes.txt").write_text("session B's own notes")
                assert (state / "conversations.json").exists(), "the runtime remembers the agents' conversations"
                yield attack
        finally:
            os.close(held_fd)


# Each probe of issue 35 as the agent's shell would run it, from its working folder.
PROBES: dict[str, Callable[[Attack], str]] = {
    "the pod's secret through ../../../keys/session-names.key": lambda t: "cat ../../../keys/session-names.key",
    "the pod's key verifier by the state dir's path": lambda t: f"cat {t.state}/keys/acp.verifier",
    "the audit log read": lambda t: f"cat {t.state}/audit.jsonl",
    "the audit log written": lambda t: f"echo '{{\"forged\": 1}}' >> {t.state}/audit.jsonl",
    "conversations.json read": lambda t: f"cat {t.state}/conversations.json",
    "conversations.json written": lambda t: f"echo '{{}}' > {t.state}/conversations.json",
    "session B's folder listed": lambda t: f"ls {t.workdir(t.b)}",
    "session B's file read": lambda t: f"cat {t.workdir(t.b)}/notes.txt",
    "/proc/<pod>/environ": lambda t: f"cat /proc/{t.pod_pid}/environ",
    "/proc/<pod>/maps": lambda t: f"cat /proc/{t.pod_pid}/maps",
    "/proc/<pod>/fd links read": lambda t: f"ls -l /proc/{t.pod_pid}/fd",
    "a file the pod holds reopened through /proc/<pod>/fd": lambda t: f"cat /proc/{t.pod_pid}/fd/{t.held_fd}",
    "kill -0 the pod": lambda t: f"kill -0 {t.pod_pid}",
    "session B's agent's stdin written through /proc/<pid>/fd/0": lambda t: f"printf '\\n' > /proc/{t.b_pid}/fd/0",
    "kill -0 session B's agent": lambda t: f"kill -0 {t.b_pid}",
}


@pytest.mark.parametrize("probe", list(PROBES))
async def test_each_probe_of_the_issue_is_refused_only_when_the_agent_is_confined(attack: Attack, probe: str) -> None:
    status, out = await attack.run(PROBES[probe](attack))
    if attack.running.runtime.kernel.confines:
        assert status != 0, f"{probe}: reached from a confined agent: {out[:300]}"
    else:
        assert status == 0, f"{probe}: refused even unconfined, so the test proves nothing: {out[:300]}"


async def test_a_confined_agent_still_works_in_its_own_folders(attack: Attack) -> None:
    status, out = await attack.run('echo mine > mine.txt && cat mine.txt && echo t > "$TMPDIR/t" && cat "$TMPDIR/t" '
                                   "&& ls /usr >/dev/null && echo ok > /dev/null && cat /proc/self/status | head -1")
    assert status == 0, out
    assert (attack.workdir(attack.a) / "mine.txt").read_text() == "mine\n"


async def test_an_agent_cli_is_refused_where_the_kernel_cannot_confine_it(tmp_path: Path) -> None:
    async with run_pod(tmp_path / "state", recipe=SHELL_AGENT, probe=no_landlock) as running:
        assert not running.runtime.kernel.confines
        async with running.extension() as ext:
            await ext.initialize()
            session_id = await open_session(running, ext)
            turn = await prompt(ext, session_id, "echo ran > ran.txt", timeout=60)
        assert turn.error is not None
        message = str(turn.error)
        assert "cannot confine agent CLIs" in message and "--unconfined-agents" in message, message
        assert running.runtime.agents == {}, "no agent process was started"


async def test_the_builtin_agent_runs_where_the_kernel_cannot_confine(tmp_path: Path) -> None:
    async with run_pod(tmp_path / "state", probe=no_landlock) as running:
        async with running.extension() as ext:
            await ext.initialize()
            session_id = await open_session(running, ext)
            turn = await prompt(ext, session_id, "hello", timeout=60)
        assert turn.error is None, turn.error
        assert running.runtime.agents, "the built-in agent ran"


# -- the agent CLIs, confined, still reach the browser ------------------------------------------------------


@pytest.mark.agents
@pytest.mark.parametrize("mode", ["proxy", "bridge"])
@pytest.mark.parametrize("cli", ["codex", "claude", "gemini", "opencode", "qwen", "copilot"])
async def test_each_cli_confined_reaches_its_browser(tmp_path: Path, cli: str, mode: str) -> None:
    if LANDLOCK < 6:
        pytest.skip(f"this kernel's Landlock ABI is {LANDLOCK}, not 6 or more")
    binary = require(ACP_COMMANDS[cli][0])
    page = f"https://example.org/{secrets.token_hex(4)}"
    with serving(FakeModel()) as model:
        agent = agent_env(cli, model.url, tmp_path / cli)
        # The bridge's entry is the `openab browser-bridge` command: the agent's MCP client runs it from PATH.
        agent.env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{agent.env['PATH']}"
        recipe = dataclasses.replace(RECIPES[cli], argv=(str(binary), *RECIPES[cli].argv[1:]))
        model.set_script(Script(calls=[Call("browser_navigate", {"url": page})]))
        async with run_pod(tmp_path / "state", env=agent.env, recipe=recipe, browser_mode=mode) as running, \
                running.extension() as ext:
            assert running.runtime.kernel.full
            browser = FakeBrowser(ext)
            session_id = await open_session(running, ext)
            turn = await prompt(ext, session_id, "Open the page, please.", timeout=120)
            pid = running.runtime.agents[session_id]
            assert pid is not None
            tree = await asyncio.to_thread(agent_processes, pid)

    assert turn.error is None, turn.error
    assert browser.calls == [("browser_navigate", {"url": page})]
    assert f"navigated to {page}" in turn.text
    # What only the launcher leaves on the agent it execs (it fails closed, so the ruleset is on too), on every
    # process of the agent's tree but the launcher's own, and the agent's pid in a namespace of its own.
    assert tree, "the agent's processes"
    for status in tree:
        assert "NoNewPrivs:\t1" in status and "CapEff:\t0000000000000000" in status, status
        assert len(next(line for line in status.splitlines() if line.startswith("NSpid:")).split()) == 3, status


def agent_processes(launcher: int) -> list[str]:
    """The /proc status of every process below the agent's launcher but the launcher's own (its supervisor and the
    namespace's first process): the agent and what it started."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = (entry / "stat").read_text()
                children.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(int(entry.name))
    found, todo = [], list(children.get(launcher, []))
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        with contextlib.suppress(OSError):
            if b"confine.py" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(Path(f"/proc/{pid}/status").read_text())
    return found


# -- the policy, without a kernel -----------------------------------------------------------------------------


def test_a_policy_refuses_a_folder_that_holds_the_state_dir() -> None:
    with pytest.raises(ConfigurationError, match=r"state dir /home/u/\.codex/s is inside /home/u/\.codex"):
        agent_policy(7, workdir="/s/sessions/c/work", tmpdir="/s/sessions/c/tmp", state_dir="/home/u/.codex/s",
                     home_dirs=["/home/u/.codex"])
    with pytest.raises(ConfigurationError, match="the key file /etc/openab/key is inside /etc"):
        agent_policy(7, workdir="/s/sessions/c/work", tmpdir="/s/sessions/c/tmp", state_dir="/s",
                     secrets=["/etc/openab/key"])
    with pytest.raises(ConfigurationError, match="inside /home/u/bin"):
        agent_policy(7, workdir="/s/sessions/c/work", tmpdir="/s/sessions/c/tmp", state_dir="/home/u/bin/state",
                     path="/usr/bin:/home/u/bin")


def test_a_policy_gives_the_session_its_own_folders_and_the_kernel_only_rights_it_knows() -> None:
    policy = agent_policy(2, workdir="/s/sessions/c/work", tmpdir="/s/sessions/c/tmp", state_dir="/s",
                          home_dirs=["/home/u/.codex"], program="/opt/n/node_modules/@x/y/bin/y.js")
    rules = {r.path: r for r in policy.rules}
    assert rules["/s/sessions/c/work"].access == READ_WRITE & handled_access(2)
    assert rules["/home/u/.codex"].make and "/opt/n/node_modules" in rules
    assert "/s" not in rules and "/tmp" not in rules and "/home/u" not in rules
    assert policy.scoped == 0 and agent_policy(6, workdir="/w", tmpdir="/t", state_dir="/s").scoped == 3


def test_a_recipe_folder_follows_the_variable_the_agent_is_given() -> None:
    assert expand_folder("${CODEX_HOME:-~/.codex}", {}, "/home/u") == "/home/u/.codex"
    assert expand_folder("${CODEX_HOME:-~/.codex}", {"CODEX_HOME": "/srv/codex"}, "/home/u") == "/srv/codex"
    assert expand_folder("${XDG_DATA_HOME:-~/.local/share}/opencode", {"XDG_DATA_HOME": "rel"}, "/h") == (
        "/h/.local/share/opencode")
    assert expand_folder("~/.gemini", {}, None) is None


def test_the_kernel_support_says_what_a_confined_agent_could_still_do() -> None:
    assert Support(7).full and Support(7).gaps() == []
    assert "signal the pod" in Support(5).describe()
    assert "truncate" in Support(2).describe()
    assert not Support(0, "ENOSYS").confines and "cannot be confined" in Support(0, "ENOSYS").describe()


@needs_landlock
def test_the_launcher_fails_closed_when_the_kernel_refuses_the_policy(tmp_path: Path) -> None:
    import subprocess

    from openab_browser.core.agents import confine

    policy = agent_policy(LANDLOCK, workdir=str(tmp_path / "w"), tmpdir=str(tmp_path / "t"), state_dir="/nowhere")
    broken = policy.to_json().replace('"handled":', '"handled":1099511627776,"x":')  # a right no kernel has
    argv = launcher_argv(policy, ["/bin/true"], Launch(sys.executable, confine.__file__))
    argv[argv.index("--policy") + 1] = broken
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == confine.EXIT_REFUSED and "could not be confined" in done.stderr, done.stderr


# -- the same probes as the image's user ----------------------------------------------------------------------

IMAGE_UID = 10001
# A stand-in for the pod, run as the image's uid: it lays out a state dir as `openab run` does, holds the key open,
# starts session B's agent (a shell waiting on its stdin) and runs each probe as session A's agent, both through
# the launcher when confined; it prints each probe's exit status.
STAND_IN = r"""
import json, os, subprocess, sys
spec = json.loads(sys.argv[1])
st = spec["state"]
for d in ("keys", "sessions/A/work", "sessions/A/tmp", "sessions/B/work", "sessions/B/tmp"):
    os.makedirs(f"{st}/{d}", mode=0o700, exist_ok=True)
for name, text in (("keys/session-names.key", "secret"), ("keys/acp.verifier", "{}\n"), ("audit.jsonl", "{}\n"),
                   ("conversations.json", "{}"), ("sessions/B/work/notes.txt", "B's notes")):
    with open(f"{st}/{name}", "w") as f:
        f.write(text)
held = os.open(f"{st}/keys/session-names.key", os.O_RDONLY)
env = {"PATH": "/usr/bin:/bin", "TMPDIR": f"{st}/sessions/A/tmp"}
b = subprocess.Popen(spec["b_prefix"] + ["/bin/sh", "-c", "read x"], stdin=subprocess.PIPE, env=env)
results = {}
for name, command in spec["probes"].items():
    command = command.format(state=st, pod=os.getpid(), fd=held, b=b.pid)
    done = subprocess.run(spec["a_prefix"] + ["/bin/sh", "-c", command], cwd=f"{st}/sessions/A/work", env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    results[name] = done.returncode
b.stdin.close()
b.wait(timeout=30)
print(json.dumps(results))
"""
IMAGE_PROBES = {
    "the pod's secret through ../../../keys/session-names.key": "cat ../../../keys/session-names.key",
    "the pod's key verifier by the state dir's path": "cat {state}/keys/acp.verifier",
    "the audit log read": "cat {state}/audit.jsonl",
    "the audit log written": "echo forged >> {state}/audit.jsonl",
    "conversations.json read": "cat {state}/conversations.json",
    "conversations.json written": "echo '{{}}' > {state}/conversations.json",
    "session B's folder listed": "ls {state}/sessions/B/work",
    "session B's file read": "cat {state}/sessions/B/work/notes.txt",
    "/proc/<pod>/environ": "cat /proc/{pod}/environ",
    "/proc/<pod>/maps": "cat /proc/{pod}/maps",
    "/proc/<pod>/fd links read": "ls -l /proc/{pod}/fd",
    "a file the pod holds reopened through /proc/<pod>/fd": "cat /proc/{pod}/fd/{fd}",
    "kill -0 the pod": "kill -0 {pod}",
    "session B's agent's stdin written through /proc/<pid>/fd/0": "printf '\\n' > /proc/{b}/fd/0",
    "kill -0 session B's agent": "kill -0 {b}",
}


@pytest.mark.parametrize(("confined", "private_pids"), [(True, True), (True, False), (False, False)],
                         ids=["confined", "confined, the pod's PID view", "unconfined"])
def test_each_probe_as_the_images_user(request: pytest.FixtureRequest, confined: bool, private_pids: bool) -> None:
    import shutil
    import subprocess
    import tempfile

    from openab_browser.core.agents import confine

    if confined and LANDLOCK < 6:
        pytest.skip(f"this kernel's Landlock ABI is {LANDLOCK}, not 6 or more")
    as_image = os.geteuid() == 0
    python = "/usr/bin/python3" if as_image else sys.executable  # the pod's own may sit in root's 0700 home
    setpriv = shutil.which("setpriv")
    if as_image and (setpriv is None or not os.access(python, os.X_OK)):
        pytest.skip("needs setpriv and /usr/bin/python3 to run as the image's user")
    # Outside pytest's folders, which are root's and closed to the image's user.
    root = Path(tempfile.mkdtemp(prefix="openab-image-"))
    request.addfinalizer(lambda: shutil.rmtree(root, ignore_errors=True))
    state = root / "state"
    launcher = root / "confine.py"  # a copy the image's user can read, wherever the repository is
    shutil.copy(confine.__file__, launcher)
    if as_image:
        os.chown(root, IMAGE_UID, IMAGE_UID)
        os.chown(launcher, IMAGE_UID, IMAGE_UID)

    def prefix(session: str) -> list[str]:
        if not confined:
            return []
        policy = agent_policy(LANDLOCK, workdir=f"{state}/sessions/{session}/work",
                              tmpdir=f"{state}/sessions/{session}/tmp", state_dir=str(state), path="/usr/bin:/bin",
                              private_pids=private_pids)
        return launcher_argv(policy, [], Launch(python, str(launcher)))

    spec = {"state": str(state), "a_prefix": prefix("A"), "b_prefix": prefix("B"), "probes": IMAGE_PROBES}
    argv = [python, "-c", STAND_IN, json.dumps(spec)]
    if as_image:
        assert setpriv is not None
        argv = [setpriv, f"--reuid={IMAGE_UID}", f"--regid={IMAGE_UID}", "--clear-groups", *argv]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    results: dict[str, int] = json.loads(done.stdout)
    if confined:
        assert {name for name, status in results.items() if status == 0} == set(), results
    else:
        assert {name for name, status in results.items() if status != 0} == set(), results


def test_a_path_folder_out_of_the_users_reach_is_left_out_not_a_refusal(request: pytest.FixtureRequest) -> None:
    """A person's pod on one machine inherits a PATH with another user's folders (root's ~/.cargo/bin under a 0700
    home): the launcher, run as that person, cannot open them. It leaves them out of the ruleset (a rule only
    allows, so nothing the person has is denied) and starts the agent, instead of refusing every agent."""
    import shutil
    import subprocess
    import tempfile

    from openab_browser.core.agents import confine

    python, setpriv = "/usr/bin/python3", shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None or not os.access(python, os.X_OK):
        pytest.skip("needs root, setpriv and /usr/bin/python3 to run as another user")
    closed = Path(tempfile.mkdtemp(prefix="openab-closed-"))  # root's, 0700: as root's home is
    (closed / "bin").mkdir()
    request.addfinalizer(lambda: shutil.rmtree(closed, ignore_errors=True))
    root = Path(tempfile.mkdtemp(prefix="openab-person-"))
    request.addfinalizer(lambda: shutil.rmtree(root, ignore_errors=True))
    launcher = root / "confine.py"
    shutil.copy(confine.__file__, launcher)
    for owned in (root, launcher):
        os.chown(owned, IMAGE_UID, IMAGE_UID)
    policy = agent_policy(LANDLOCK, workdir=f"{root}/work", tmpdir=f"{root}/tmp", state_dir=f"{root}/state",
                          path=f"{closed}/bin:/usr/bin:/bin")
    argv = [setpriv, f"--reuid={IMAGE_UID}", f"--regid={IMAGE_UID}", "--clear-groups",
            *launcher_argv(policy, ["/bin/sh", "-c", "echo started"], Launch(python, str(launcher)))]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stdout == "started\n", done.stderr


# -- openab doctor ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("agents", "abi", "unconfined", "status", "words"), [
    (["codex"], 7, False, "ok", "confined to their own session"),
    (["codex"], 5, False, "warn", "could still signal the pod"),
    (["codex"], 0, False, "FAIL", "so the pod will not start codex"),
    (["codex"], 0, True, "warn", "run unconfined (OPENAB_UNCONFINED_AGENTS)"),
    (["builtin"], 0, False, "ok", "the built-in agent runs unconfined"),
])
def test_doctor_says_what_the_kernel_confines(
    tmp_path: Path, agents: list[str], abi: int, unconfined: bool, status: str, words: str
) -> None:
    from openab_browser.core.settings import Settings
    from openab_browser.gateway.doctor_command import Report, _check_confinement

    report = Report()
    settings = Settings(state_dir=tmp_path / "state", agent=agents, unconfined_agents=unconfined)
    _check_confinement(settings, report, probe=lambda: (abi, "" if abi else "ENOSYS"))
    (finding,) = [f for f in report.findings if f.what.startswith("confinement") and "PID" not in f.what]
    assert finding.status == status and words in finding.what, finding


def test_doctor_fails_a_state_dir_an_agent_could_reach(tmp_path: Path) -> None:
    from openab_browser.core.settings import Settings
    from openab_browser.gateway.doctor_command import Report, _check_confinement

    report = Report()
    home = os.environ.get("HOME", "/root")
    settings = Settings(state_dir=Path(home) / ".codex" / "openab-state", agent=["codex"])
    _check_confinement(settings, report, probe=lambda: (7, ""))
    assert any(f.status == "FAIL" and "is inside" in f.what and ".codex" in f.what for f in report.findings), \
        report.findings


@needs_landlock
@pytest.mark.parametrize("private_pids", [True, False], ids=["own PID view", "the pod's PID view"])
def test_the_launcher_ends_as_its_agent_ends(tmp_path: Path, private_pids: bool) -> None:
    import subprocess

    from openab_browser.core.agents import confine

    policy = agent_policy(LANDLOCK, workdir=str(tmp_path / "w"), tmpdir=str(tmp_path / "t"), state_dir="/nowhere",
                          path="/usr/bin:/bin", private_pids=private_pids)

    def run(command: str) -> subprocess.CompletedProcess[str]:
        argv = launcher_argv(policy, ["/bin/sh", "-c", command], Launch(sys.executable, confine.__file__))
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)

    assert run("exit 7").returncode == 7
    assert run("kill -TERM $$").returncode == -15  # the pod says "killed by signal 15", as for an agent run bare
    ps = run("echo $$; ls /proc | grep -c '^[0-9]'")
    pid, listed = ps.stdout.split()
    if private_pids:
        assert pid == "2", "the agent is not its namespace's first process, which drops unhandled signals"
        assert int(listed) <= 4, "only the namespace's own processes are listed: its first, sh, ls, grep"
    else:
        assert int(listed) > 4


async def test_a_state_dir_an_agent_could_reach_is_said_at_start_and_refused_at_the_prompt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    if LANDLOCK < 1:
        pytest.skip("no Landlock here")
    home = tmp_path / "home"
    state = home / ".codex" / "openab"  # inside the folder codex's recipe lets its agent write
    recipe = dataclasses.replace(SHELL_AGENT, name="codex", writes=RECIPES["codex"].writes)
    async with run_pod(state, recipe=recipe, env={"HOME": str(home), "PATH": os.defpath}) as running:
        assert f"is inside {home / '.codex'}" in caplog.text and "will not start" in caplog.text
        async with running.extension() as ext:
            await ext.initialize()
            session_id = await open_session(running, ext)
            turn = await prompt(ext, session_id, "echo ran", timeout=60)
    assert turn.error is not None and "move the state dir" in str(turn.error), turn.error
    assert running.runtime.agents == {}


def test_a_file_its_cli_rewrites_in_place_is_the_only_one_of_home() -> None:
    policy = agent_policy(7, workdir="/w", tmpdir="/t", state_dir="/s", home_dirs=["/h/.claude"],
                          home_files=["/h/.claude.json"])
    rules = {r.path: r for r in policy.rules}
    assert not rules["/h/.claude.json"].make and rules["/h/.claude"].make and "/h" not in rules


async def test_conversations_json_names_sessions_by_channel_never_by_id(tmp_path: Path) -> None:
    async with run_pod(tmp_path / "state", recipe=SHELL_AGENT, probe=no_landlock, unconfined_agents=True) as running:
        async with running.extension() as ext:
            await ext.initialize()
            session_id = await open_session(running, ext)
            await running.runtime.start_agent(session_id)
        session = running.pod.sessions.get(session_id)
        assert session is not None
        kept = json.loads(await asyncio.to_thread((tmp_path / "state" / "conversations.json").read_text))
    # An id resumes its session with the key; a copy of the file must not hand one out.
    assert list(kept) == [session.channel] and session_id not in json.dumps(kept)


# -- the attack through a real CLI's own shell tool -------------------------------------------------------------


@pytest.mark.agents
@pytest.mark.parametrize("confined", [True, False], ids=["confined", "unconfined"])
@pytest.mark.parametrize("cli", ["claude", "codex"])
async def test_a_real_clis_shell_tool_reads_the_pods_key_only_unconfined(
    tmp_path: Path, cli: str, confined: bool
) -> None:
    """The model (a page's words, in a real attack) has the CLI's shell tool copy the pod's secret (the key that names
    sessions in logs and folders; the /acp key itself is kept as a verifier only) into the working folder, and the
    person says yes to the command: confined, the copy holds the kernel's refusal, not the secret."""
    if confined and LANDLOCK < 6:
        pytest.skip(f"this kernel's Landlock ABI is {LANDLOCK}, not 6 or more")
    binary = require(ACP_COMMANDS[cli][0])
    state = tmp_path / "state"
    command = f"od -An -tx1 {state}/keys/session-names.key > stolen.txt 2>&1; echo ran >> stolen.txt"
    shell = {
        "claude": Call("Bash", {"command": command, "description": "Tidy up"}),
        # require_escalated: out of codex's own read-only sandbox, which the person is asked about.
        "codex": Call("exec_command", {"cmd": command, "sandbox_permissions": "require_escalated",
                                       "justification": "Tidy up"}),
    }[cli]

    async def allow(params: dict[str, Any]) -> dict[str, Any]:
        once = next(o for o in params["options"] if o["kind"] == "allow_once")
        return {"outcome": {"outcome": "selected", "optionId": once["optionId"]}}

    with serving(FakeModel()) as model:
        agent = agent_env(cli, model.url, tmp_path / cli)
        if cli == "codex":  # as a person runs it: asking before a command leaves codex's sandbox
            toml = agent.files["config"]
            toml.write_text(toml.read_text().replace('approval_policy = "never"', 'approval_policy = "on-request"'))
        recipe = dataclasses.replace(RECIPES[cli], argv=(str(binary), *RECIPES[cli].argv[1:]))
        model.set_script(Script(calls=[shell]))
        async with run_pod(state, env=agent.env, recipe=recipe, probe=None if confined else no_landlock,
                           unconfined_agents=not confined) as running:
            secret = " ".join(f"{b:02x}" for b in (state / "keys" / "session-names.key").read_bytes()[:8])
            async with running.extension() as ext:
                FakeBrowser(ext)
                session_id = await open_session(running, ext, _meta={"dev.openab/permissionRelay": True})
                turn = await prompt(ext, session_id, "Tidy up.", timeout=150, on_permission=allow)
                stolen = next(state.glob("sessions/*/work/stolen.txt"), None)
                said = await asyncio.to_thread(stolen.read_text) if stolen is not None else ""

    assert turn.error is None, turn.error
    assert said.endswith("ran\n"), f"the shell command never ran: {said!r}"
    if confined:
        assert secret not in said and "Permission denied" in said, said
    else:
        assert secret in said, "unconfined, the CLI's shell reads the pod's secret: the test can fail"
