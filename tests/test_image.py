"""The container image, as far as it can be tested with no container engine: its install step on exactly the
files its build stage copies, the pod it yields started as the image's non-root user, the health check against
a real pod on another port, the agent selection of its build argument, and the rules its files must keep.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped]
from image.constraints import canonical, unpinned
from ports import free_port
from pydantic import SecretStr
from waits import eventually

from openab_browser.core.acp.backend import NoAgentBackend
from openab_browser.core.settings import Settings
from openab_browser.gateway.app import create_app, drainer
from openab_browser.gateway.assemble import assemble
from openab_browser.gateway.server import running_server

ROOT = Path(__file__).resolve().parent.parent
DOCKER = ROOT / "docker"
DOCKERFILE = (DOCKER / "Dockerfile").read_text()
HEALTHCHECK = DOCKER / "healthcheck.py"
INSTALL_AGENTS = DOCKER / "install-agents.sh"
IMAGE_UID = 10001


def stages() -> dict[str, str]:
    """The Dockerfile's stages by name (the last, unnamed one is "runtime")."""
    parts = re.split(r"^FROM\s+", DOCKERFILE, flags=re.MULTILINE)[1:]
    named: dict[str, str] = {}
    for part in parts:
        head = part.splitlines()[0]
        match = re.search(r"\bAS\s+(\S+)", head, re.IGNORECASE)
        named[match.group(1) if match else "runtime"] = part
    return named


def copied_sources(stage: str) -> list[str]:
    """What a stage COPYs from the build context (not --from another stage)."""
    sources: list[str] = []
    for line in stage.splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            sources += line.split()[1:-1]
    return sources


# -- the install step ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def image_venv() -> Iterator[Path]:
    """The build stage's `pip install -c constraints.txt .`, into a fresh venv, from a copy of only the files that
    stage copies."""
    with tempfile.TemporaryDirectory(prefix="oab-image-") as tmp:
        src, venv = Path(tmp) / "src", Path(tmp) / "venv"
        src.mkdir()
        for source in copied_sources(stages()["build"]):
            origin = ROOT / source
            if origin.is_dir():
                ignored = shutil.ignore_patterns("__pycache__", "*.pyc", "node_modules")
                shutil.copytree(origin, src / source, ignore=ignored)
            else:
                shutil.copy2(origin, src / source)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
        installed = subprocess.run(
            [str(venv / "bin" / "pip"), "install", "--no-cache-dir", "--quiet", "-c", str(src / "constraints.txt"),
             str(src)],
            capture_output=True, text=True, timeout=540,
        )
        assert installed.returncode == 0, installed.stderr[-4000:]
        # The image's user reads it, as the image's runtime stage does with /opt/openab.
        os.chmod(tmp, 0o755)
        yield venv


def test_the_install_step_yields_openab_from_the_declared_files_and_nothing_else(image_venv: Path) -> None:
    declared = ["constraints.txt", "pyproject.toml", "README.md", "core", "gateway", "bridge", "extension"]
    assert copied_sources(stages()["build"]) == declared
    version = subprocess.run([str(image_venv / "bin" / "openab"), "--version"], capture_output=True, text=True,
                             timeout=60, cwd="/")
    assert version.returncode == 0 and version.stdout.startswith("openab "), version.stderr
    # Imported from the venv, not from this checkout.
    where = subprocess.run(
        [str(image_venv / "bin" / "python"), "-c",
         "import openab_browser.gateway.run_command as m, openab_browser.bridge, "
         "openab_browser.core.agents.builtin as b; print(m.__file__)"],
        capture_output=True, text=True, timeout=60, cwd="/",
    )
    assert where.returncode == 0, where.stderr
    assert where.stdout.startswith(str(image_venv)), where.stdout
    site = next((image_venv / "lib").glob("python3*/site-packages/openab_browser"))
    shipped = {p.relative_to(site).parts[0] for p in site.iterdir()}
    assert shipped == {"gateway", "core", "bridge", "extension"}, "tests, bench and scripts stay out of the image"


def test_the_install_step_installs_only_what_constraints_txt_pins_at_its_version(image_venv: Path) -> None:
    """The image ships the versions the suite ran on: every distribution in the build stage's venv is pinned."""
    listed = subprocess.run([str(image_venv / "bin" / "python"), "-m", "pip", "list", "--format=json",
                             "--disable-pip-version-check"], capture_output=True, text=True, timeout=120, cwd="/")
    assert listed.returncode == 0, listed.stderr
    installed = {d["name"]: d["version"] for d in json.loads(listed.stdout)}
    assert "openab-browser" in installed and unpinned(installed) == {}
    # And what this checkout's venv (the suite's) runs on is the same file: bootstrap.sh installs with it.
    here = subprocess.run([sys.executable, "-m", "pip", "freeze", "--exclude-editable", "--disable-pip-version-check"],
                          capture_output=True, text=True, timeout=120)
    frozen = {name: version for name, _, version in
              (line.partition("==") for line in here.stdout.splitlines() if "==" in line)}
    shipped = {canonical(name) for name in installed}
    drifted = unpinned({name: version for name, version in frozen.items() if canonical(name) in shipped})
    assert drifted == {}, f"the suite's venv runs other versions than the image's: {drifted} (scripts/bootstrap.sh)"


@pytest.fixture
def image_home() -> Iterator[Path]:
    """/home/agent: the image user's own home, not under pytest's tmp_path, whose parents only root may enter."""
    if os.geteuid() != 0:
        pytest.skip("switching to the image's uid needs root (CI runs as root)")
    top = Path(tempfile.mkdtemp(prefix="oab-image-home-"))
    top.chmod(0o755)
    home = top / "agent"
    home.mkdir()
    os.chown(home, IMAGE_UID, IMAGE_UID)
    yield home
    shutil.rmtree(top, ignore_errors=True)


def real_uid(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"^Uid:\s+(\d+)\s", status, re.MULTILINE)
    assert match is not None
    return int(match.group(1))


@pytest.mark.anyio
async def test_the_image_user_starts_the_pod_and_the_health_check_follows_its_port(
    image_venv: Path, image_home: Path,
) -> None:
    """As the image's ENTRYPOINT and USER: `openab run` as uid 10001 with the image's environment, on a port
    that is not 8080, checked by the image's own HEALTHCHECK command; then `docker stop`'s SIGTERM."""
    home = image_home
    port = free_port()
    env = {
        "PATH": f"{image_venv / 'bin'}:/usr/bin:/bin", "HOME": str(home), "OPENAB_HOST": "0.0.0.0",
        "OPENAB_PORT": str(port), "OPENAB_STATE_DIR": str(home / ".local/state/openab"),
        "OPENAB_ACP_AUTH_KEY": secrets.token_hex(32), "OPENAB_INSECURE_NO_TLS": "1", "PYTHONUNBUFFERED": "1",
    }
    process = await asyncio.create_subprocess_exec(
        "setpriv", f"--reuid={IMAGE_UID}", f"--regid={IMAGE_UID}", "--clear-groups", "--",
        "openab", "run", env=env, cwd=str(home), stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )
    try:
        log = await wait_for_line(process, r"running on http://")
        assert "running on http://0.0.0.0:" + str(port) in log
        # The check as the HEALTHCHECK runs it: the image's python, the container's environment.
        check = await healthcheck(env, python=str(image_venv / "bin" / "python"))
        assert check.returncode == 0, check.stderr
        # The pod wrote its state as that user, private.
        state = home / ".local/state/openab"
        assert state.stat().st_uid == IMAGE_UID and state.stat().st_mode & 0o077 == 0
        assert real_uid(process.pid) == IMAGE_UID, "the pod runs as the image's user"
    finally:
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            _, rest = await process.communicate()
    assert process.returncode == 0, rest.decode()[-2000:]


async def wait_for_line(process: asyncio.subprocess.Process, pattern: str, timeout: float = 30) -> str:
    assert process.stderr is not None
    seen: list[str] = []
    async with asyncio.timeout(timeout):
        while line := (await process.stderr.readline()).decode():
            seen.append(line)
            if re.search(pattern, line):
                return line
    raise AssertionError("the pod exited while starting:\n" + "".join(seen))


async def healthcheck(env: dict[str, str], *, python: str = sys.executable) -> subprocess.CompletedProcess[str]:
    process = await asyncio.create_subprocess_exec(
        python, str(HEALTHCHECK), env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(20):
        out, err = await process.communicate()
    return subprocess.CompletedProcess([python], process.returncode or 0, out.decode(), err.decode())


# -- the health check against real pods ------------------------------------------------------------------------

@contextlib.asynccontextmanager
async def pod_on(port: int) -> AsyncIterator[object]:
    with tempfile.TemporaryDirectory(prefix="oab-state-") as state:
        app = create_app(assemble(Settings(token=SecretStr(secrets.token_hex(32)), state_dir=Path(state)),
                                  backend=NoAgentBackend()))
        async with running_server(app, port=port):
            yield app


@pytest.mark.anyio
async def test_the_health_check_answers_for_the_configured_port_only() -> None:
    port = free_port()
    base = {"PATH": os.environ["PATH"]}
    async with pod_on(port) as app:
        assert (await healthcheck({**base, "OPENAB_PORT": str(port)})).returncode == 0
        # A pod on another port than 8080 is not judged by 8080 (the old hard-coded check).
        missing = await healthcheck({**base, "OPENAB_PORT": str(free_port())})
        assert missing.returncode == 1 and "/healthz" in missing.stderr
        # Draining is still alive: Docker must not kill a pod that is answering its last tool calls.
        await drainer(app)()  # type: ignore[arg-type]
        assert (await healthcheck({**base, "OPENAB_PORT": str(port)})).returncode == 0


@pytest.mark.anyio
async def test_the_health_check_is_not_fooled_by_another_server_on_the_port(tmp_path: Path) -> None:
    port = free_port()
    (tmp_path / "healthz").write_text("ok")
    other = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(tmp_path),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )

    async def listening() -> bool:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            return False
        writer.close()
        return True

    try:
        await eventually(listening, 20, what=f"the other server to listen on {port}", interval=0.05)
        check = await healthcheck({"PATH": os.environ["PATH"], "OPENAB_PORT": str(port)})
        assert check.returncode == 1
    finally:
        other.terminate()
        await other.wait()


# -- AGENTS, the build argument ------------------------------------------------------------------------------------

def plan(agents: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", str(INSTALL_AGENTS), "--plan"], env={"PATH": os.environ["PATH"], "AGENTS": agents},
                          capture_output=True, text=True, timeout=30, cwd=str(ROOT))


def test_agents_installs_the_pinned_versions_the_suite_drives() -> None:
    tested = json.loads((ROOT / "tests" / "agents" / "package.json").read_text())["dependencies"]
    for agents in ("claude codex", "claude,codex", "gemini opencode copilot"):
        result = plan(agents)
        assert result.returncode == 0, result.stderr
        packages = result.stdout.split()
        assert packages
        for package in packages:
            name, _, version = package.rpartition("@")
            assert tested.get(name) == version, f"{package}: not the version tests/agents/package.json drives"
    assert plan("claude codex").stdout.split() == [
        "@agentclientprotocol/claude-agent-acp@0.101.0", "@anthropic-ai/claude-code@2.1.332",
        "@zed-industries/codex-acp@0.16.0",
    ]


def test_no_npm_agent_means_no_node_in_the_image(tmp_path: Path) -> None:
    for agents in ("", "builtin"):
        assert plan(agents).returncode == 0 and plan(agents).stdout == ""
        prefix = tmp_path / f"agents-{agents or 'none'}"
        run = subprocess.run(["sh", str(INSTALL_AGENTS), str(prefix)], capture_output=True, text=True, timeout=30,
                             env={"PATH": os.environ["PATH"], "AGENTS": agents})
        assert run.returncode == 0 and "no Node" in run.stdout
        assert list((prefix / "bin").iterdir()) == []


def test_a_build_argument_that_is_not_an_agent_list_is_refused_before_npm_runs(tmp_path: Path) -> None:
    (tmp_path / "claude").write_text("")  # a glob in AGENTS must not expand to a file's name
    for hostile in ("claude; touch /tmp/owned", "$(id)", "claude\ncodex@latest", "*", "../../etc", "-g"):
        result = subprocess.run(["sh", str(INSTALL_AGENTS), "--plan"], capture_output=True, text=True, timeout=30,
                                env={"PATH": os.environ["PATH"], "AGENTS": hostile}, cwd=str(tmp_path))
        assert result.returncode == 2 and result.stdout == "", hostile
        assert "is not an agent's name" in result.stderr or "unknown agent" in result.stderr
    for own_installer in ("cursor", "kiro", "goose"):
        result = plan(own_installer)
        assert result.returncode == 2 and "derived image" in result.stderr


# -- what the image's files must keep saying -------------------------------------------------------------------

def test_the_image_runs_non_root_under_tini_and_checks_the_configured_port() -> None:
    runtime = stages()["runtime"]
    user = re.search(r"^USER\s+(\S+)", runtime, re.MULTILINE)
    assert user is not None and user.group(1).split(":")[0] == str(IMAGE_UID)
    assert re.search(r'^ENTRYPOINT \["tini", "--", "openab", "run"\]', runtime, re.MULTILINE)
    health = re.search(r"^HEALTHCHECK .*CMD (.*)$", runtime, re.MULTILINE)
    assert health is not None and "healthcheck.py" in health.group(1) and "8080" not in health.group(1)
    # The runtime stage takes from the context only the health check: the rest comes built from the stages.
    assert copied_sources(runtime) == ["docker/healthcheck.py"]
    assert copied_sources(stages()["agents"]) == ["docker/install-agents.sh"]
    assert "npm" not in runtime and "nodejs" not in runtime, "Node only arrives with an npm agent"


def test_the_compose_state_volume_lands_on_a_folder_the_image_made_private_for_its_user() -> None:
    """An engine mounts a named volume on a folder the image lacks as a new root 0755 folder, which openab
    refuses; on the image's own folder the volume takes its owner and mode (tests/test_image_container.py runs it)."""
    runtime = stages()["runtime"]
    state = re.search(r"OPENAB_STATE_DIR=(\S+)", runtime)
    assert state is not None
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    targets = [volume.split(":")[1] for volume in compose["services"]["openab"]["volumes"]]
    assert targets == [state.group(1)]
    made = re.search(r"install -d -o (\d+) -g (\d+) -m (\d+) ([^\n]*)", runtime)
    assert made is not None and made.group(1) == made.group(2) == str(IMAGE_UID) and made.group(3) == "0700"
    assert state.group(1) in made.group(4).split()


def test_the_compose_file_publishes_on_loopback_and_stops_slower_than_the_drain() -> None:
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    service = compose["services"]["openab"]
    assert service["build"]["dockerfile"] == "docker/Dockerfile"
    assert all(str(port).startswith("127.0.0.1:") for port in service["ports"]), "the key travels in clear here"
    grace = float(str(service["stop_grace_period"]).removesuffix("s"))
    defaults = Settings()
    assert grace >= defaults.drain_timeout + defaults.cancel_grace + 10
    assert service["cap_drop"] == ["ALL"]
