"""A real JupyterHub on one machine for openab's hub mode: `jupyterhub` (the package openab[hub] installs) with
configurable-http-proxy (tests/hub/package.json) as its proxy, SimpleLocalProcessSpawner starting each person's
`openab run --jupyterhub` as a local process, and jupyterhub-idle-culler when a test asks for it.

Everything listens on 127.0.0.1 (ports picked free), lives in one temporary folder and is stopped at the end:
the hub stops its proxy and, with ``cleanup_servers``, every pod it started. Tokens are made through the hub's
REST API with an admin service's token, as an operator's script would (a person makes theirs on /hub/token).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
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
            self.culler.terminate()
            try:
                self.culler.wait(10)
            except subprocess.TimeoutExpired:
                self.culler.kill()
                self.culler.wait(10)
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
            admin: str, culler: str, metrics: str) -> str:
    openab = Path(sys.executable).parent / "openab"
    start = (f'if [ -e "$HOME/start-slowly" ]; then sleep {SLOW_START}; fi; '
             f"exec {shlex.quote(str(openab))} run --jupyterhub")
    pod_env = {
        "OPENAB_HUB_ACTIVITY_INTERVAL": str(ACTIVITY_INTERVAL),
        "OPENAB_HUB_AUTH_CACHE_SECS": str(AUTH_CACHE_SECS),
    }
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
              "scopes": ["admin:users", "admin:servers", "tokens", "read:users"]}},
            {{"name": "idle-culler", "services": ["idle-culler"],
              "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"]}},
            {{"name": "prometheus", "services": ["prometheus"], "scopes": ["read:metrics"]}},
        ]
    """)


@contextlib.contextmanager
def running_hub(folder: Path) -> Iterator[Hub]:
    """A hub with its proxy on 127.0.0.1, both people created; stopped (pods and proxy with it) on exit."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    (folder / "home").mkdir(mode=0o700, exist_ok=True)
    public_port, hub_port, proxy_api_port = free_port(), free_port(), free_port()
    admin, culler, metrics = (secrets.token_hex(32) for _ in range(3))
    config = folder / "jupyterhub_config.py"
    config.write_text(_config(folder, public_port=public_port, hub_port=hub_port, proxy_api_port=proxy_api_port,
                              admin=admin, culler=culler, metrics=metrics))
    config.chmod(0o600)
    log = (folder / "hub.log").open("ab")
    proxy_token = secrets.token_hex(32)
    env = {**os.environ, "CONFIGPROXY_AUTH_TOKEN": proxy_token}
    process = subprocess.Popen(
        [sys.executable, "-m", "jupyterhub", "-f", str(config)], cwd=folder, env=env, stdout=log,
        stderr=subprocess.STDOUT, start_new_session=True,
    )
    hub = Hub(folder, f"http://127.0.0.1:{public_port}", f"http://127.0.0.1:{public_port}/hub/api",
              admin, culler, metrics, process, proxy_api=f"http://127.0.0.1:{proxy_api_port}",
              proxy_token=proxy_token, minted=[admin, culler, metrics, proxy_token])
    try:
        def up() -> bool:
            assert process.poll() is None, f"the hub exited: {hub.log_tail()}"
            try:
                return hub.request("GET", "/").status_code == 200
            except httpx.HTTPError:
                return False

        eventually_sync(up, timeout=30, interval=0.1, what=lambda: f"the hub answering: {hub.log_tail()}")
        for name in PEOPLE:
            response = hub.request("POST", f"/users/{name}")
            assert response.status_code in (201, 409), response.text
        yield hub
    finally:
        hub.stop_culler()
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
        log.close()


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
