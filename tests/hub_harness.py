"""A real JupyterHub on one machine for openab's hub mode: `jupyterhub` (the package openab[hub] installs) with
configurable-http-proxy (tests/hub/package.json) as its proxy, SimpleLocalProcessSpawner starting each person's
`openab run --jupyterhub` as a local process, and jupyterhub-idle-culler when a test asks for it.

Everything listens on 127.0.0.1 (ports picked free), lives in one temporary folder and is stopped at the end:
the hub stops its proxy and, with ``cleanup_servers``, every pod it started. Tokens are made through the hub's
REST API with an admin service's token, as an operator's script would (a person makes theirs on /hub/token).

With ``proxy_apart`` the test runs the proxy itself, as Zero to JupyterHub does (its own pod, the hub told
``should_start = False``, and ``cleanup_servers = False`` so a hub that stops leaves the pods running), and the hub
can be stopped and started again (:meth:`Hub.stop_hub`, :meth:`Hub.start_hub`) as ``helm upgrade`` replaces the
hub pod; the test then stops the pods through the hub, and the proxy, itself.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from waits import eventually_sync

ROOT = Path(__file__).resolve().parent.parent
CHP = ROOT / "tests" / "hub" / "node_modules" / ".bin" / "configurable-http-proxy"
PEOPLE = ("alice", "bob")
# How often each pod tells the hub it is in use, and how long it trusts the hub's answer about a token: short,
# so the culler's and a revocation's effects come within the test's bound.
ACTIVITY_INTERVAL = 1
AUTH_CACHE_SECS = 2
# Seconds a pod marked to start slowly (Hub.start_slowly) waits before it starts.
SLOW_START = 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def available() -> str | None:
    """Why the hub cannot run here, or None."""
    try:
        import jupyterhub  # noqa: F401
        import jupyterhub_idle_culler  # noqa: F401
    except ImportError:
        return "jupyterhub and jupyterhub-idle-culler are not installed (pip install -e '.[dev,hub]')"
    if not CHP.exists():
        return "configurable-http-proxy is not installed (npm ci in tests/hub)"
    return None


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
    proxy_api: str = ""
    proxy_token: str = ""
    culler: subprocess.Popen[bytes] | None = None
    minted: list[str] = field(default_factory=list)  # every token made, for the log scan
    proxy: subprocess.Popen[bytes] | None = None  # the proxy the test runs apart from the hub (proxy_apart)
    env: Mapping[str, str] = field(default_factory=dict, repr=False)  # the hub's environment, for a restart
    pids: dict[str, int] = field(default_factory=dict)  # each pod's process, as the hub's state names it

    def start_hub(self) -> None:
        """Starts the hub process (the same config, database and environment as before) and waits for it to
        answer through the proxy."""
        self.process = _launch_hub(self.folder, self.env)
        self.wait_up()

    def wait_up(self) -> None:
        def up() -> bool:
            assert self.process.poll() is None, f"the hub exited: {self.log_tail()}"
            try:
                return self.request("GET", "/").status_code == 200
            except httpx.HTTPError:
                return False

        eventually_sync(up, timeout=30, interval=0.1, what=lambda: f"the hub answering: {self.log_tail()}")

    def stop_hub(self) -> None:
        """Stops the hub process as Kubernetes stops its pod (SIGTERM); with ``proxy_apart`` the proxy and the pods
        go on without it."""
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

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

    def stopped(self, name: str) -> bool:
        return "" not in self.user(name).get("servers", {})

    def start(self, name: str) -> None:
        response = self.request("POST", f"/users/{name}/server")
        assert response.status_code in (201, 202), response.text
        eventually_sync(lambda: self.running(name), timeout=30, interval=0.1,
                        what=lambda: f"{name}'s pod ready: {self.log_tail()}")
        self.pids[name] = self.pod_pid(name)

    def pod_pid(self, name: str) -> int:
        """The process of ``name``'s pod, from the state the hub keeps in its database."""
        return int(self.user(name)["servers"][""]["state"]["pid"])

    def start_slowly(self, name: str) -> None:
        """``name``'s pod takes :data:`SLOW_START` seconds more to start from now on."""
        home = self.folder / "home" / name
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        (home / "start-slowly").touch(mode=0o600)

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
        """Every log the hub, its proxy, the culler and the pods wrote."""
        return "\n".join(p.read_text(errors="replace") for p in self.folder.glob("*.log"))


def _config(folder: Path, *, public_port: int, hub_port: int, proxy_api_port: int,
            admin: str, culler: str, metrics: str, proxy_apart: bool) -> str:
    openab = Path(sys.executable).parent / "openab"
    start = (f'if [ -e "$HOME/start-slowly" ]; then sleep {SLOW_START}; fi; '
             f"exec {shlex.quote(str(openab))} run --jupyterhub")
    pod_env = {
        "OPENAB_HUB_ACTIVITY_INTERVAL": str(ACTIVITY_INTERVAL),
        "OPENAB_HUB_AUTH_CACHE_SECS": str(AUTH_CACHE_SECS),
    }
    apart = textwrap.dedent("""
        # As Zero to JupyterHub runs it: the proxy is a process of its own, which the hub finds at api_url with the
        # same CONFIGPROXY_AUTH_TOKEN, and a hub that stops leaves every pod running.
        c.ConfigurableHTTPProxy.should_start = False
        c.JupyterHub.cleanup_servers = False
    """) if proxy_apart else ""
    return textwrap.dedent(f"""
        c = get_config()  # noqa: F821
        c.JupyterHub.bind_url = "http://127.0.0.1:{public_port}"
        c.JupyterHub.public_url = "http://127.0.0.1:{public_port}"
        c.JupyterHub.hub_bind_url = "http://127.0.0.1:{hub_port}"
        c.ConfigurableHTTPProxy.command = [{str(CHP)!r}]
        c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api_port}"
        c.ConfigurableHTTPProxy.debug = False
        c.JupyterHub.db_url = "sqlite:///{folder}/hub.sqlite"
        c.JupyterHub.cookie_secret_file = "{folder}/cookie_secret"
        c.JupyterHub.cleanup_servers = True
        c.JupyterHub.authenticator_class = "dummy"
        c.Authenticator.allowed_users = {set(PEOPLE)!r}
        c.JupyterHub.spawner_class = "simple"
        c.SimpleLocalProcessSpawner.home_dir_template = "{folder}/home/{{username}}"
        # A pod whose home has start-slowly takes a few seconds more to start, as one on Kubernetes does (its image
        # pulled, its volume attached): long enough for a panel to be seen saying so.
        c.Spawner.cmd = ["/bin/sh", "-c", {start!r}]
        c.Spawner.environment = {pod_env!r}
        c.Spawner.start_timeout = 30
        c.Spawner.http_timeout = 30
        c.JupyterHub.services = [
            {{"name": "test-admin", "api_token": {admin!r}}},
            {{"name": "idle-culler", "api_token": {culler!r}}},
            {{"name": "prometheus", "api_token": {metrics!r}}},
        ]
        c.JupyterHub.load_roles = [
            {{"name": "test-admin", "services": ["test-admin"],
              "scopes": ["admin:users", "admin:servers", "admin:server_state", "tokens", "read:users"]}},
            {{"name": "idle-culler", "services": ["idle-culler"],
              "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"]}},
            {{"name": "prometheus", "services": ["prometheus"], "scopes": ["read:metrics"]}},
        ]
    """) + apart


def _launch_hub(folder: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    with (folder / "hub.log").open("ab") as log:
        return subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(folder / "jupyterhub_config.py")],
                                cwd=folder, env=dict(env), stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _start_proxy(folder: Path, env: Mapping[str, str], *, public_port: int, hub_port: int,
                 proxy_api_port: int) -> subprocess.Popen[bytes]:
    """configurable-http-proxy as Zero to JupyterHub's proxy pod runs it: every path it has no route for goes to
    the hub, and its error pages too."""
    hub = f"http://127.0.0.1:{hub_port}"
    with (folder / "proxy.log").open("ab") as log:
        return subprocess.Popen(
            [str(CHP), "--ip=127.0.0.1", f"--port={public_port}", "--api-ip=127.0.0.1",
             f"--api-port={proxy_api_port}", f"--default-target={hub}", f"--error-target={hub}/hub/error",
             "--log-level=warn"], env=dict(env), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _wait_proxy(proxy: subprocess.Popen[bytes], api: str, token: str) -> None:
    def up() -> bool:
        assert proxy.poll() is None, "the proxy exited (proxy.log)"
        with contextlib.suppress(httpx.HTTPError), httpx.Client(timeout=5, trust_env=False) as c:
            return c.get(f"{api}/api/routes", headers={"Authorization": f"token {token}"}).status_code == 200
        return False

    eventually_sync(up, timeout=30, interval=0.1, what="the proxy's API answering")


def _subreaper(on: bool) -> None:
    """While on, a process whose parent goes (a pod, once the hub that started it is stopped) becomes this one's
    child, so it is reaped here when it stops: PID 1 of a container may reap nobody, and a zombie pod looks alive
    to the hub, which would wait its whole kill timeout for it."""
    if sys.platform == "linux":
        set_child_subreaper = 36  # PR_SET_CHILD_SUBREAPER
        ctypes.CDLL(None, use_errno=True).prctl(set_child_subreaper, int(on), 0, 0, 0)


def _gone(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):  # not this process's child: its parent (the hub) reaps it
        os.waitpid(pid, os.WNOHANG)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _stop_pods(hub: Hub) -> None:
    """Stops every pod through the hub (a hub started again stops the pods it picked up), else by its pid. The
    hub's answer waits until the pod is gone, so the pods this process is the parent of are reaped meanwhile."""
    for name, pid in hub.pids.items():
        asked: threading.Thread | None = None
        if hub.process.poll() is None:
            def ask(name: str = name) -> None:
                with contextlib.suppress(httpx.HTTPError):
                    hub.request("DELETE", f"/users/{name}/server")

            asked = threading.Thread(target=ask, daemon=True)
            asked.start()
        gone = functools.partial(_gone, pid)
        with contextlib.suppress(TimeoutError):
            eventually_sync(gone, timeout=15, interval=0.1, what=f"{name}'s pod stopped by the hub")
        if asked is not None:
            asked.join(15)
        if not gone():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            eventually_sync(gone, timeout=10, interval=0.1, what=f"{name}'s pod killed")


@contextlib.contextmanager
def running_hub(folder: Path, *, proxy_apart: bool = False) -> Iterator[Hub]:
    """A hub with its proxy on 127.0.0.1, both people created; stopped (pods and proxy with it) on exit. With
    ``proxy_apart``, the proxy is the test's own process and the hub may be stopped and started again."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    (folder / "home").mkdir(mode=0o700, exist_ok=True)
    public_port, hub_port, proxy_api_port = free_port(), free_port(), free_port()
    admin, culler, metrics = (secrets.token_hex(32) for _ in range(3))
    config = folder / "jupyterhub_config.py"
    config.write_text(_config(folder, public_port=public_port, hub_port=hub_port, proxy_api_port=proxy_api_port,
                              admin=admin, culler=culler, metrics=metrics, proxy_apart=proxy_apart))
    config.chmod(0o600)
    proxy_token = secrets.token_hex(32)
    env = {**os.environ, "CONFIGPROXY_AUTH_TOKEN": proxy_token}
    proxy: subprocess.Popen[bytes] | None = None
    if proxy_apart:
        _subreaper(True)
        proxy = _start_proxy(folder, env, public_port=public_port, hub_port=hub_port, proxy_api_port=proxy_api_port)
        try:
            _wait_proxy(proxy, f"http://127.0.0.1:{proxy_api_port}", proxy_token)
        except BaseException:
            proxy.kill()
            proxy.wait(10)
            raise
    hub = Hub(folder, f"http://127.0.0.1:{public_port}", f"http://127.0.0.1:{public_port}/hub/api",
              admin, culler, metrics, _launch_hub(folder, env), proxy_api=f"http://127.0.0.1:{proxy_api_port}",
              proxy_token=proxy_token, minted=[admin, culler, metrics, proxy_token], proxy=proxy, env=env)
    try:
        hub.wait_up()
        for name in PEOPLE:
            response = hub.request("POST", f"/users/{name}")
            assert response.status_code in (201, 409), response.text
        yield hub
    finally:
        hub.stop_culler()
        try:
            if proxy_apart:  # the hub stops no pod on its way out (cleanup_servers off): they are stopped first
                _stop_pods(hub)
        finally:
            if hub.process.poll() is None:
                hub.stop_hub()
            if hub.proxy is not None:
                _stop(hub.proxy)
            if proxy_apart:
                _subreaper(False)


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
    """The hub with alice's and bob's pods started. On the way out, no token of anyone's (the people's, the pods'
    own or the services') may have reached a log."""
    with running_hub(folder) as running:
        running.start("alice")
        running.start("bob")
        yield running
        logs = running.logs()
    leaked = [t[:6] for t in running.minted if t in logs]
    assert not leaked, f"tokens in the logs (their first characters): {leaked}"
