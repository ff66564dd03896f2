"""A real JupyterHub on one machine, run from openab's one-machine recipe as an admin installs it
(``docker/jupyterhub/one-machine``, docs/deploy.md "A team on one machine"): the recipe's ``jupyterhub_config.py``
with LocalProcessSpawner starting each person's ``openab run --jupyterhub`` as their own Unix user, PAM, the idle
culler as a service of the hub with its four scopes, and configurable-http-proxy (tests/hub/package.json) started
apart from the hub with the arguments of the recipe's own unit file, as systemd would.

What the test changes, appended below the recipe and nothing else (:func:`_machine_overlay`): its free ports and
folder instead of 8000/8001/8081 and /srv, its people, two services of its own (an admin to make tokens, as an
operator's script would, and Prometheus), shorter activity reports, optionally a short culler timeout, and a
wrapper that makes a marked pod start slowly. The people are real Unix users made with ``adduser`` (the recipe's
words), marked as the test's and removed at the end; so the hub needs root, as the recipe's unit runs it.

The hub and the pods run from a venv every person can read, as the recipe's ``/opt/openab`` (:func:`shared_install`):
built once per checkout from a Python outside root's home, with this checkout installed in it editable.

The hub can be stopped and started again (:meth:`Hub.stop_hub`, :meth:`Hub.start_hub`), as systemd restarts it:
the proxy and the pods go on. Everything listens on 127.0.0.1 and is stopped at the end.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import pwd
import secrets
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from ports import free_port
from proc_table import all_gone, children_of, described, none_left, processes_of, runs_as, subreaper
from waits import eventually_sync

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "docker" / "jupyterhub" / "one-machine"
CHP = ROOT / "tests" / "hub" / "node_modules" / ".bin" / "configurable-http-proxy"
PEOPLE = ("alice", "bob")
# The GECOS field of the Unix users the harness makes: it removes only those, and refuses to touch a real account.
PERSON_MARK = "openab hub test person"
# How often each pod tells the hub it is in use, and how long it trusts the hub's answer about a token: short,
# so the culler's and a revocation's effects come within the test's bound.
ACTIVITY_INTERVAL = 1
AUTH_CACHE_SECS = 2
# Seconds the hub has to stop on SIGTERM before it is killed: it stops in well under a second, but clean-clone CI runs
# saw it wait whole 30 s bounds in "Cleaning up 1 services..." (the warning then says what its processes were doing).
HUB_STOP_SECS = 10
# Seconds a pod marked to start slowly (Hub.start_slowly) waits before it starts.
SLOW_START = 4
# Interpreters a shared venv can be made from, in order: one whose files every user can read.
_BASE_PYTHONS = (Path(sys.base_prefix) / "bin" / "python3", Path("/usr/bin/python3"))


def _readable_by_all(path: Path) -> bool:
    """Every folder on the way is searchable by others, and the file readable: a person's pod can run it."""
    path = path.resolve()
    return all(p.stat().st_mode & stat.S_IXOTH for p in path.parents) and bool(path.stat().st_mode & stat.S_IROTH)


def _base_python() -> Path | None:
    for python in _BASE_PYTHONS:
        if python.exists() and _readable_by_all(python) and subprocess.run(
                [str(python), "-c", "import ensurepip, venv"], capture_output=True, timeout=30).returncode == 0:
            return python
    return None


def available() -> str | None:
    """Why the hub cannot run here, or None."""
    try:
        import jupyterhub  # noqa: F401
        import jupyterhub_idle_culler  # noqa: F401
    except ImportError:
        return "jupyterhub and jupyterhub-idle-culler are not installed (pip install -e '.[dev,hub]')"
    if not CHP.exists():
        return "configurable-http-proxy is not installed (npm ci in tests/hub)"
    if sys.platform != "linux" or os.geteuid() != 0:
        return "the one-machine recipe's hub runs as root (it starts each person's pod as their own Unix user)"
    if shutil.which("adduser") is None or shutil.which("deluser") is None:
        return "adduser and deluser are not installed (Debian's adduser package)"
    if not _readable_by_all(ROOT / "pyproject.toml"):
        return f"the checkout is not readable by other users, whose pods run its code: chmod o+rx {ROOT}"
    if _base_python() is None:
        return "no Python every user can run with venv (Debian: apt-get install python3-venv)"
    return None


def shared_install() -> Path:
    """The recipe's /opt/openab for this checkout: a venv every person can read, with ``openab-browser[hub]`` at
    the versions of constraints.txt, this checkout installed editable (so the pods run the code under test). Made
    once per checkout and dependency set, under a lock (two test runs may ask at once)."""
    key = hashlib.sha256(b"\0".join([str(ROOT).encode(), (ROOT / "pyproject.toml").read_bytes(),
                                     (ROOT / "constraints.txt").read_bytes()])).hexdigest()[:12]
    venv = Path("/var/tmp") / f"openab-hub-{key}"
    lock = Path("/var/tmp") / "openab-hub.lock"
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if not (venv / "bin" / "openab").exists():
            python = _base_python()
            assert python is not None, available()
            shutil.rmtree(venv, ignore_errors=True)
            # An install, like /opt: readable by everyone, written by root only.
            old = os.umask(0o022)
            try:
                subprocess.run([str(python), "-m", "venv", str(venv)], check=True, capture_output=True, timeout=120)
                made = subprocess.run(
                    [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check",
                     "-c", str(ROOT / "constraints.txt"), "-e", f"{ROOT}[hub]"],
                    capture_output=True, text=True, timeout=900)
            finally:
                os.umask(old)
            if made.returncode != 0:
                shutil.rmtree(venv, ignore_errors=True)
                raise AssertionError(f"the shared install failed: {made.stderr[-2000:]}")
    return venv


@dataclass
class Hub:
    """One running hub: its public URL (the proxy's), its API, the admin, culler and Prometheus services' tokens."""

    folder: Path
    public: str
    api: str
    admin_token: str
    culler_token: str
    metrics_token: str
    process: subprocess.Popen[bytes]
    proxy: subprocess.Popen[bytes]
    proxy_api: str
    proxy_token: str
    command: list[str] = field(repr=False)  # the hub's command line, from the recipe's unit
    env: Mapping[str, str] = field(repr=False)  # the hub's environment, as the unit gives it
    people: tuple[str, ...] = PEOPLE
    culler: subprocess.Popen[bytes] | None = None
    minted: list[str] = field(default_factory=list)  # every token made, for the log scan
    pids: dict[str, int] = field(default_factory=dict)  # each pod's process, as the hub's state names it

    def start_hub(self) -> None:
        """Starts the hub process (the same config, database and environment as before) and waits for it to
        answer through the proxy."""
        self.process = _launch_hub(self.folder, self.command, self.env)
        self.wait_up()

    def wait_up(self) -> None:
        def up() -> bool:
            assert self.process.poll() is None, f"the hub exited: {self.log_tail()}"
            try:
                return self.request("GET", "/").status_code == 200
            except httpx.HTTPError:
                return False

        eventually_sync(up, timeout=60, interval=0.1, what=lambda: f"the hub answering: {self.log_tail()}")

    def stop_hub(self) -> None:
        """Stops the hub process as systemd stops its unit (SIGTERM to the hub alone): the proxy and the pods go
        on without it."""
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(HUB_STOP_SECS)
        except subprocess.TimeoutExpired:
            warnings.warn(f"the hub did not stop within {HUB_STOP_SECS} s of SIGTERM (killed now); its processes:\n"
                          + described([self.process.pid, *children_of(self.process.pid)])
                          + "\nits log ends:\n" + self.log_tail(15), stacklevel=2)
            # The services the hub runs (its culler) run as the hub's own user, in sessions of their own: killed with
            # it, or they would outlive it, asking a hub that is gone every second and logging their token with each
            # failure. The recipe's culler ends with the hub by itself (its parent-death signal; test_hub_restart
            # checks that): this is for any service a test's config runs without one. The pods run as their
            # persons, and go on as the hub's absence means them to.
            services = [pid for pid in children_of(self.process.pid) if runs_as(pid, os.getuid())]
            for pid in [self.process.pid, *services]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self.process.wait(10)
            # Now this process's children (the subreaper's): reaped here.
            eventually_sync(functools.partial(all_gone, services), timeout=10, interval=0.1, what="the hub's services")

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.api, headers={"Authorization": f"token {self.admin_token}"},
                            timeout=15.0, trust_env=False)

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        with self.client() as c:
            return c.request(method, path, **kwargs)

    def user(self, name: str) -> dict[str, Any]:
        response = self.request("GET", f"/users/{name}")
        response.raise_for_status()
        model: dict[str, Any] = response.json()
        return model

    def running(self, name: str) -> bool:
        server = self.user(name).get("servers", {}).get("")
        return bool(server and server.get("ready"))

    def last_activity(self, name: str) -> datetime | None:
        """When ``name``'s pod last told the hub it was in use."""
        stamp = self.user(name).get("servers", {}).get("", {}).get("last_activity")
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")) if stamp else None

    def stopped(self, name: str) -> bool:
        return "" not in self.user(name).get("servers", {})

    def start(self, name: str, *, timeout: float = 60) -> None:
        response = self.request("POST", f"/users/{name}/server")
        assert response.status_code in (201, 202), response.text
        eventually_sync(lambda: self.running(name), timeout=timeout, interval=0.1,
                        what=lambda: f"{name}'s pod ready: {self.log_tail()}")
        self.pids[name] = self.pod_pid(name)

    def pod_pid(self, name: str) -> int:
        """The process of ``name``'s pod, from the state the hub keeps in its database."""
        return int(self.user(name)["servers"][""]["state"]["pid"])

    def home(self, name: str) -> Path:
        return Path(pwd.getpwnam(name).pw_dir)

    def start_slowly(self, name: str) -> None:
        """``name``'s pod takes :data:`SLOW_START` seconds more to start from now on."""
        (self.home(name) / "start-slowly").touch(mode=0o644)

    def token(self, name: str, scopes: list[str] | None = None) -> tuple[str, str]:
        """A new API token of ``name`` (its id, its value): with ``scopes`` only those, else what the hub gives a
        token its owner makes on /hub/token."""
        body: dict[str, Any] = {"note": "openab side panel", "expires_in": 3600}
        if scopes is not None:
            body["scopes"] = scopes
        response = self.request("POST", f"/users/{name}/tokens", json=body)
        assert response.status_code == 201, response.text
        made = response.json()
        self.minted.append(made["token"])
        return made["id"], made["token"]

    def revoke(self, name: str, token_id: str) -> None:
        response = self.request("DELETE", f"/users/{name}/tokens/{token_id}")
        assert response.status_code == 204, response.text

    def acp_url(self, name: str) -> str:
        return self.public.replace("http", "ws", 1) + f"/user/{name}/acp"

    def start_culler(self, timeout: int, every: int) -> None:
        """One more culler run by hand with the recipe's culler credential (its four scopes), as a one-off pass
        an admin times; the recipe's own culler runs as the hub's service all along."""
        env = {**os.environ, "JUPYTERHUB_API_TOKEN": self.culler_token}
        log = (self.folder / "culler.log").open("ab")
        self.culler = subprocess.Popen(
            [sys.executable, "-m", "jupyterhub_idle_culler", f"--url={self.api}", f"--timeout={timeout}",
             f"--cull-every={every}"], env=env, stdout=log, stderr=subprocess.STDOUT)

    def stop_culler(self) -> None:
        if self.culler is not None:
            _stop(self.culler)
            self.culler = None

    def pod_address(self, name: str) -> str:
        """Where the hub's proxy sends ``name``'s requests: the pod's own address (as a kubelet reaches it)."""
        prefix = self.user(name)["servers"][""]["url"].rstrip("/")
        with httpx.Client(timeout=15.0, trust_env=False) as c:
            routes = c.get(f"{self.proxy_api}/api/routes", headers={"Authorization": f"token {self.proxy_token}"})
        target: str = routes.json()[prefix]["target"]
        return target

    def log_tail(self, lines: int = 40) -> str:
        text = (self.folder / "hub.log").read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def logs(self) -> str:
        """Every log the hub (its culler service and the pods it started included) and its proxy wrote."""
        return "\n".join(p.read_text(errors="replace") for p in self.folder.glob("*.log"))


def _unit(name: str) -> dict[str, str]:
    """The [Service] settings of one of the recipe's unit files."""
    settings: dict[str, str] = {}
    for line in (RECIPE / name).read_text().splitlines():
        key, equals, value = line.partition("=")
        if equals and not line.startswith("#"):
            settings[key.strip()] = value.strip()
    return settings


def _replaced(text: str, replacements: Mapping[str, str]) -> str:
    """``text`` with each of ``replacements``, every one of which must occur: a recipe that moved a port or a
    path fails here, not in a hub that listens somewhere else."""
    for old, new in replacements.items():
        assert old in text, f"the recipe no longer says {old!r}: update tests/hub_harness.py"
        text = text.replace(old, new)
    return text


def _machine_overlay(folder: Path, ports: Mapping[str, int], people: Sequence[str], *, admin: str, culler: str,
                     metrics: str, cull_timeout: int | None) -> str:
    """What this test's machine sets after the recipe: nothing of how people are kept apart or of the culler's
    scopes."""
    culling = textwrap.dedent(f"""
        # The culler's timeout shortened to the test's bound (the recipe: an hour, checked every 5 minutes).
        for service in c.JupyterHub.services:
            if service["name"] == "idle-culler":
                service["command"] = [a for a in service["command"] if not a.startswith(("--timeout", "--cull"))]
                service["command"] += ["--timeout={cull_timeout}", "--cull-every=1"]
    """) if cull_timeout is not None else ""
    return textwrap.dedent(f"""

        # -- The test's machine (tests/hub_harness.py) ------------------------------------------------------------
        c.JupyterHub.bind_url = "http://127.0.0.1:{ports["public"]}"
        c.JupyterHub.public_url = "http://127.0.0.1:{ports["public"]}"
        c.JupyterHub.hub_bind_url = "http://127.0.0.1:{ports["hub"]}"
        c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{ports["proxy_api"]}"
        c.JupyterHub.db_url = "sqlite:///{folder}/jupyterhub.sqlite"
        c.JupyterHub.cookie_secret_file = "{folder}/jupyterhub_cookie_secret"
        c.Authenticator.allowed_users = {set(people)!r}
        c.Spawner.environment = {{"OPENAB_HUB_ACTIVITY_INTERVAL": "{ACTIVITY_INTERVAL}",
                                  "OPENAB_HUB_AUTH_CACHE_SECS": "{AUTH_CACHE_SECS}"}}
        # A pod whose home has start-slowly takes a few seconds more to start, as one on Kubernetes does (its
        # image pulled, its volume attached): long enough for a panel to be seen saying so.
        c.Spawner.cmd = ["/bin/sh", "-c", 'if [ -e "$HOME/start-slowly" ]; then sleep {SLOW_START}; fi; exec "$@"',
                         "sh", *c.Spawner.cmd]
        # The culler's credential known to the test too, to time a pass of its own (Hub.start_culler).
        for service in c.JupyterHub.services:
            if service["name"] == "idle-culler":
                service["api_token"] = {culler!r}
        c.JupyterHub.services = [*c.JupyterHub.services,
                                 {{"name": "test-admin", "api_token": {admin!r}}},
                                 {{"name": "prometheus", "api_token": {metrics!r}}}]
        c.JupyterHub.load_roles = [
            *c.JupyterHub.load_roles,
            {{"name": "test-admin", "services": ["test-admin"],
              "scopes": ["admin:users", "admin:servers", "admin:server_state", "tokens", "read:users"]}},
            {{"name": "prometheus", "services": ["prometheus"], "scopes": ["read:metrics"]}},
        ]
    """) + culling


def _launch_hub(folder: Path, command: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    with (folder / "hub.log").open("ab") as log:
        return subprocess.Popen(list(command), cwd=folder, env=dict(env), stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _start_proxy(folder: Path, env: Mapping[str, str], ports: Mapping[str, int]) -> subprocess.Popen[bytes]:
    """configurable-http-proxy with the arguments of the recipe's unit, on the test's ports."""
    line = _replaced(_unit("configurable-http-proxy.service")["ExecStart"], {
        "/usr/local/bin/configurable-http-proxy": shlex.quote(str(CHP)),
        "--port=8000": f"--port={ports['public']}", "--api-port=8001": f"--api-port={ports['proxy_api']}",
        "http://127.0.0.1:8081": f"http://127.0.0.1:{ports['hub']}"})
    with (folder / "proxy.log").open("ab") as log:
        return subprocess.Popen(shlex.split(line), env=dict(env), stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _wait_proxy(proxy: subprocess.Popen[bytes], api: str, token: str) -> None:
    def up() -> bool:
        assert proxy.poll() is None, "the proxy exited (proxy.log)"
        with contextlib.suppress(httpx.HTTPError), httpx.Client(timeout=5, trust_env=False) as c:
            return c.get(f"{api}/api/routes", headers={"Authorization": f"token {token}"}).status_code == 200
        return False

    eventually_sync(up, timeout=30, interval=0.1, what="the proxy's API answering")


def _outlived(hub: Hub, name: str, pids: Sequence[int]) -> None:
    """Says which of ``name``'s processes outlived 15 s of the hub stopping their pod (killed next), in a warning
    and in the hub's folder: a pod slow to stop, or an agent outliving its pod."""
    report = f"{name}'s processes still running 15 s after the hub was asked to stop their pod:\n" + described(pids)
    # The hub's folder goes with the test's tmp_path: its last words on the person say where the stop got to.
    said = [line for line in hub.log_tail(2000).splitlines() if name in line][-12:]
    report += "\nthe hub's last log lines naming them:\n" + "\n".join(said)
    with (hub.folder / "outlived.txt").open("a") as out:
        out.write(report + "\n")
    warnings.warn(report, stacklevel=2)


def _stop_pods(hub: Hub) -> None:
    """Stops every pod through the hub, as an admin would (each drains like a SIGTERM), then whatever a test
    person still runs. The hub's answer waits until the pod is gone, so the pods this process is the parent of
    are reaped meanwhile."""
    asked = []
    if hub.process.poll() is None:
        for name in hub.people:
            def ask(name: str = name) -> None:
                with contextlib.suppress(httpx.HTTPError):
                    hub.request("DELETE", f"/users/{name}/server")

            asked.append(threading.Thread(target=ask, daemon=True))
            asked[-1].start()
    uids = [pwd.getpwnam(name).pw_uid for name in hub.people]
    for name, uid in zip(hub.people, uids, strict=True):
        # Looked at again each time: a process that ends between two looks is reaped at the next.
        with contextlib.suppress(TimeoutError):
            eventually_sync(functools.partial(none_left, uid), timeout=15, interval=0.1,
                            what=f"{name}'s pod stopped by the hub")
        left = processes_of(uid)
        if left:
            _outlived(hub, name, left)
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        eventually_sync(functools.partial(all_gone, left), timeout=10, interval=0.1,
                        what=f"{name}'s processes killed")
    # The hub answers once it sees each pod gone, which for a pod of ours means reaped here: reaping goes on while
    # the answers are awaited.
    deadline = time.monotonic() + 15
    while any(thread.is_alive() for thread in asked) and time.monotonic() < deadline:
        for uid in uids:
            processes_of(uid)
        for thread in asked:
            thread.join(0.05)


@contextlib.contextmanager
def unix_people(people: Sequence[str]) -> Iterator[None]:
    """The people as Unix users, made as the recipe says (``adduser``), marked as the test's; those made here are
    removed on exit with their homes. A real account of the same name is never touched."""
    made: list[str] = []
    with contextlib.ExitStack() as held:
        for name in sorted(people):  # one order for every holder: no two wait on each other
            held.enter_context(_only_holder(name))
        try:
            for name in people:
                _made_person(name, made)
            yield
        finally:
            for name in made:
                subprocess.run(["deluser", "--quiet", "--remove-home", name], capture_output=True, timeout=60)


def _made_person(name: str, made: list[str]) -> None:
    try:
        known = pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["adduser", "--quiet", "--disabled-password", "--gecos", PERSON_MARK, name],
                       check=True, capture_output=True, timeout=60)
        made.append(name)
    else:
        assert known.pw_gecos.split(",")[0] == PERSON_MARK, (
            f"a Unix user {name!r} exists that the test did not make: not touching it")


@contextlib.contextmanager
def _only_holder(name: str, *, timeout: float = 120.0) -> Iterator[None]:
    """The test person ``name`` held by this process alone: a test that holds one removes the user at its end and
    kills whatever the user runs, so a second test run on this machine (or a second pytest-xdist worker, which
    tests/conftest.py's scheduler keeps off) waits its turn, or says why it could not start."""
    with (Path("/var/tmp") / f"openab-hub-person-{name}.lock").open("a") as lock:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                assert time.monotonic() < deadline, (
                    f"another test on this machine has held the test person {name!r} for {timeout:.0f} s: one hub "
                    "test at a time (its Unix users are the machine's)")
                time.sleep(0.2)
        yield


@contextlib.contextmanager
def running_hub(folder: Path, *, people: Sequence[str] = PEOPLE, cull_timeout: int | None = None) -> Iterator[Hub]:
    """The recipe's hub and proxy on 127.0.0.1, ``people`` made Unix users and hub users; on exit every pod, the
    hub and the proxy stopped and the people removed, and no token of anyone's (the people's, the pods' own or the
    services') may have reached a log. With ``cull_timeout`` the recipe's culler stops a pod idle that many
    seconds."""
    checked = False
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    venv = shared_install()
    ports = {"public": free_port(), "hub": free_port(), "proxy_api": free_port()}
    admin, culler, metrics, proxy_token = (secrets.token_hex(32) for _ in range(4))
    config = folder / "jupyterhub_config.py"
    config.write_text((RECIPE / "jupyterhub_config.py").read_text() + _machine_overlay(
        folder, ports, people, admin=admin, culler=culler, metrics=metrics, cull_timeout=cull_timeout))
    config.chmod(0o600)
    # The units' EnvironmentFile, as systemd reads it.
    env_file = folder / "proxy.env"
    env_file.write_text(f"CONFIGPROXY_AUTH_TOKEN={proxy_token}\n")
    env_file.chmod(0o600)
    hub_unit = _unit("jupyterhub.service")
    env = {**os.environ, **dict(line.split("=", 1) for line in env_file.read_text().splitlines())}
    command = shlex.split(_replaced(hub_unit["ExecStart"], {"/opt/openab": str(venv),
                                                            "/etc/openab-hub": str(folder)}))
    with unix_people(people):
        subreaper(True)
        proxy = _start_proxy(folder, env, ports)
        try:
            _wait_proxy(proxy, f"http://127.0.0.1:{ports['proxy_api']}", proxy_token)
            hub = Hub(folder, f"http://127.0.0.1:{ports['public']}", f"http://127.0.0.1:{ports['public']}/hub/api",
                      admin, culler, metrics, _launch_hub(folder, command, env), proxy,
                      f"http://127.0.0.1:{ports['proxy_api']}", proxy_token, command, env, tuple(people),
                      minted=[admin, culler, metrics, proxy_token])
            try:
                hub.wait_up()
                for name in people:  # the hub made each allowed person its user at start
                    hub.user(name)
                yield hub
                checked = True
            finally:
                hub.stop_culler()
                try:
                    _stop_pods(hub)
                finally:
                    if hub.process.poll() is None:
                        hub.stop_hub()
        finally:
            _stop(proxy)
            subreaper(False)
    if checked:
        logs = hub.logs()
        leaked = [t for t in hub.minted if t in logs]
        # Where each leaked, the token itself blotted out: the line says which part of the stack wrote it.
        lines = [line.replace(t, f"<token {t[:6]}>")[:300] for t in leaked for line in logs.splitlines() if t in line]
        assert not leaked, f"tokens in the logs (their first characters): {[t[:6] for t in leaked]}: {lines[:5]}"


def ws_handshake(url: str, token: str | None, *, extra: dict[str, str] | None = None,
                 timeout: float = 15.0) -> tuple[int, bytes]:
    """One WebSocket upgrade as a browser's would be (the token in the subprotocol when given): the status line's
    code and the head and start of the body that came back. Raw, so a refusal's status is seen as it is."""
    parts = httpx.URL(url.replace("ws", "http", 1))
    protocols = f"openab.bearer.{token}, acp.v1" if token is not None else "acp.v1"
    headers = {
        "Host": f"{parts.host}:{parts.port}", "Upgrade": "websocket", "Connection": "Upgrade",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Protocol": protocols, **(extra or {}),
    }
    head = f"GET {parts.raw_path.decode()} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    with socket.create_connection((parts.host, parts.port or 80), timeout=timeout) as s:
        s.sendall((head + "\r\n").encode())
        received = b""
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in received and time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            received += chunk
        head_end = received.find(b"\r\n\r\n")
        length = next((int(line.split(b":", 1)[1]) for line in received[:head_end].split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while head_end >= 0 and len(received) < head_end + 4 + length and time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            received += chunk
    status_line = received.split(b"\r\n", 1)[0]
    code = int(status_line.split()[1]) if len(status_line.split()) > 1 else 0
    return code, received


def json_of(response: httpx.Response) -> Any:
    return json.loads(response.text)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, and SIGKILL if it has not gone within 10 s."""
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


@contextlib.contextmanager
def two_people(folder: Path) -> Iterator[Hub]:
    """The hub with alice's and bob's pods started."""
    with running_hub(folder) as running:
        running.start("alice")
        running.start("bob")
        yield running
