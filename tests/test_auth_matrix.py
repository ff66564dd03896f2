"""The auth matrix: who gets through each door of the pod, one row per kind of request, as the contract has it.

The doors: `/acp` (gateway/auth.py; docs/architecture.md, "The `/acp` endpoint"), a session's proxy endpoint
(core/mcp/http.py) and the pod's browser socket (bridge/server.py). Every row runs against the real thing on
loopback: uvicorn for `/acp` and the proxy, the Unix socket and a separate process for the bridge. The floods,
slow sockets and process-tree escapes behind these rows are in test_gateway_security.py, test_proxy_attacks.py
and test_bridge_attacks.py.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from fake_extension import FakeExtension, connect_extension, text_result
from gateway_harness import RunningGateway, run_gateway
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from pydantic import SecretStr
from test_bridge import other_user  # noqa: F401 - the fixture that makes a second uid
from test_bridge_attacks import Agent, attack_pod
from test_proxy import ACCEPT, INIT, endpoint, first_text, proxied

from openab_browser.bridge.framing import BRIDGE_REFUSED, READY_METHOD
from openab_browser.core.acp.backend import NoAgentBackend
from openab_browser.core.errors import ConfigurationError
from openab_browser.core.settings import Settings
from openab_browser.gateway.acp_key import KeptVerifier, settle_kept_key, verifier_path
from openab_browser.gateway.app import create_app
from openab_browser.gateway.assemble import assemble
from openab_browser.gateway.pairing import KeptKey
from openab_browser.gateway.server import running_server

pytestmark = pytest.mark.anyio

EXTENSION_ORIGIN = "chrome-extension://abcdefghijklmnopabcdefghijklmnop"
LOOPBACK_HOST = "127.0.0.1:{port}"
REBOUND_HOST = "evil.example:{port}"  # a page whose name was rebound to 127.0.0.1 names itself in Host
REBOUND_ORIGIN = "http://evil.example:{port}"


def _fill(template: str, **values: str) -> str:
    return template.format(**values)


# -- /acp ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AcpRow:
    """One upgrade request to `/acp` and its answer. ``{key}`` and ``{port}`` are filled in per gateway."""

    name: str
    status: int  # 101: an ACP connection; otherwise the HTTP refusal before the upgrade
    headers: Mapping[str, str] = field(default_factory=dict)
    host: str = LOOPBACK_HOST
    query: str = ""
    subprotocol: str | None = None  # what a 101 echoes


BEARER = "Authorization"
OFFER = "Sec-WebSocket-Protocol"

KEYED_ROWS = [
    AcpRow("no key", 401, {OFFER: "acp.v1"}),
    AcpRow("a wrong key", 401, {BEARER: "Bearer wrong-{key}"}),
    AcpRow("the key but its last character", 401, {BEARER: "Bearer {key_prefix}"}),
    AcpRow("the key with the Basic scheme", 401, {BEARER: "Basic {key}"}),
    AcpRow("the key glued to the scheme", 401, {BEARER: "Bearer{key}"}),
    AcpRow("the key, Bearer", 101, {BEARER: "Bearer {key}"}),
    AcpRow("the key, bearer", 101, {BEARER: "bearer {key}"}),
    AcpRow("the key, BEARER", 101, {BEARER: "BEARER {key}"}),
    AcpRow("the key, bEaReR", 101, {BEARER: "bEaReR {key}"}),
    AcpRow("the key as subprotocol with acp.v1", 101, {OFFER: "openab.bearer.{key}, acp.v1"}, subprotocol="acp.v1"),
    AcpRow("the key as subprotocol alone", 101, {OFFER: "openab.bearer.{key}"}),
    AcpRow("a wrong key as subprotocol", 401, {OFFER: "openab.bearer.wrong-{key}, acp.v1"}),
    # URLs end up in proxies' logs and browsers' histories: a key there is never taken.
    AcpRow("the key in ?token=", 401, {OFFER: "acp.v1"}, query="?token={key}"),
    AcpRow("the key in ?key=", 401, {OFFER: "acp.v1"}, query="?key={key}"),
    AcpRow("the key in ?access_token=", 401, {OFFER: "acp.v1"}, query="?access_token={key}"),
    AcpRow("the extension's Origin with the key", 101, {"Origin": EXTENSION_ORIGIN, BEARER: "Bearer {key}"}),
    # With a key the key is the credential: a page cannot know it, whatever its Origin.
    AcpRow("a page's Origin with the key", 101, {"Origin": "http://evil.example", BEARER: "Bearer {key}"}),
    AcpRow("a page's Origin, no key", 401, {"Origin": "http://evil.example"}),
    AcpRow("Origin null, no key", 401, {"Origin": "null"}),
    AcpRow("DNS rebinding, no key", 401, {"Origin": REBOUND_ORIGIN}, host=REBOUND_HOST),
    # A TLS proxy in front of a keyed pod may give it any name: Host is not what admits a client, the key is.
    AcpRow("another Host name with the key", 101, {OFFER: "openab.bearer.{key}, acp.v1"}, host=REBOUND_HOST,
           subprotocol="acp.v1"),
]

KEYLESS_ROWS = [
    AcpRow("no Origin (a local client)", 101, {OFFER: "acp.v1"}, subprotocol="acp.v1"),
    AcpRow("the allowed extension", 101, {"Origin": EXTENSION_ORIGIN}),
    AcpRow("another extension", 403, {"Origin": "chrome-extension://ponmlkjihgfedcbaponmlkjihgfedcba"}),
    AcpRow("a web page", 403, {"Origin": "http://evil.example"}),
    AcpRow("Origin null (a sandboxed frame, a file)", 403, {"Origin": "null"}),
    AcpRow("a page on loopback itself", 403, {"Origin": "http://127.0.0.1:{port}"}),
    AcpRow("DNS rebinding", 403, {"Origin": REBOUND_ORIGIN}, host=REBOUND_HOST),
    # What a proxy forwarding a public name to the loopback port sends, or a client that hides its Origin.
    AcpRow("DNS rebinding without an Origin", 403, host=REBOUND_HOST),
    AcpRow("a public name that resolves to 127.0.0.1", 403, host="127.0.0.1.nip.io:{port}"),
    AcpRow("Host localhost", 101, host="localhost:{port}"),
    AcpRow("Host LOCALHOST", 101, host="LOCALHOST:{port}"),
    AcpRow("Host 127.0.0.1 without a port", 101, host="127.0.0.1"),
    AcpRow("a key nobody asked for", 101, {BEARER: "Bearer {key}"}),
]


@dataclass
class Upgrade:
    status: int
    headers: dict[str, str]
    body: bytes
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter


async def upgrade(port: int, path: str, host: str, headers: Mapping[str, str]) -> Upgrade:
    """A WebSocket upgrade written by hand, so that Host says what an attacker's would."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    lines = [f"GET {path} HTTP/1.1", f"Host: {host}", "Upgrade: websocket", "Connection: Upgrade",
             f"Sec-WebSocket-Key: {base64.b64encode(secrets.token_bytes(16)).decode()}", "Sec-WebSocket-Version: 13",
             *(f"{name}: {value}" for name, value in headers.items())]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
    async with asyncio.timeout(10):
        head = await reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        answer = {k.lower(): v for k, v in (line.split(": ", 1) for line in header_lines if line)}
        body = await reader.readexactly(int(answer.get("content-length", "0")))
    return Upgrade(int(status_line.split(" ")[1]), answer, body, reader, writer)


def _client_frame(text: str) -> bytes:
    payload = text.encode()
    mask = secrets.token_bytes(4)
    size = len(payload)
    length = bytes([0x80 | size]) if size < 126 else bytes([0x80 | 126]) + size.to_bytes(2, "big")
    return b"\x81" + length + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


async def _server_frame(reader: asyncio.StreamReader) -> str:
    async with asyncio.timeout(10):
        first, second = await reader.readexactly(2)
        assert first == 0x81, f"a text frame, not {first:#x}"
        size = second & 0x7F
        if size == 126:
            size = int.from_bytes(await reader.readexactly(2), "big")
        return (await reader.readexactly(size)).decode()


async def _check_acp_row(gateway: RunningGateway, row: AcpRow, key: str) -> None:
    port = gateway.base_url.rsplit(":", 1)[1]
    values = {"key": key, "key_prefix": key[:-1], "port": port}
    headers = {name: _fill(value, **values) for name, value in row.headers.items()}
    answer = await upgrade(int(port), "/acp" + _fill(row.query, **values), _fill(row.host, **values), headers)
    try:
        assert answer.status == row.status, (row.name, answer.status, answer.body)
        assert key.encode() not in answer.body
        if row.status == 101:
            assert answer.headers.get("sec-websocket-protocol") == row.subprotocol, row.name
            assert len(answer.headers["acp-connection-id"]) == 36
            # Admitted means an ACP connection: it answers initialize.
            answer.writer.write(_client_frame(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                                          "params": {"protocolVersion": 1}})))
            assert json.loads(await _server_frame(answer.reader))["result"]["protocolVersion"] == 1
        elif row.status == 401:
            assert answer.headers["www-authenticate"] == "Bearer"
            assert b"openab.bearer.<key>" in answer.body, "a refusal says how to present the key"
        else:
            assert b"OPENAB_ACP_ALLOWED_ORIGINS" in answer.body or b"loopback" in answer.body, answer.body
    finally:
        answer.writer.close()


@pytest.mark.parametrize("row", KEYED_ROWS, ids=lambda row: row.name)
async def test_acp_with_a_key(row: AcpRow) -> None:
    key = secrets.token_urlsafe(32)
    async with run_gateway(token=key) as gateway:
        await _check_acp_row(gateway, row, key)


@pytest.mark.parametrize("row", KEYED_ROWS, ids=lambda row: row.name)
async def test_acp_with_only_the_kept_verifier(row: AcpRow, tmp_path: Path) -> None:
    """The same rows against a pod that holds no key at all, only the verifier of the one it made at an earlier
    start (gateway/acp_key.py): every later start of `openab run` without a key of the operator's."""
    state = tmp_path / "state"
    made = settle_kept_key(state, strong=32).key
    assert made is not None
    kept = KeptKey(verifier_path(state), KeptVerifier(verifier_path(state)))
    pod = assemble(Settings(state_dir=state, port=0), backend=NoAgentBackend())
    assert pod.settings.token is None
    app = create_app(pod, kept=kept)
    async with running_server(app, guard=app.state.guard) as base_url:
        await _check_acp_row(RunningGateway(pod, base_url, None, app.state.guard), row, made)


@pytest.mark.parametrize("row", KEYLESS_ROWS, ids=lambda row: row.name)
async def test_acp_without_a_key_on_loopback(row: AcpRow) -> None:
    async with run_gateway(keyless=True, allowed_origins=[EXTENSION_ORIGIN]) as gateway:
        await _check_acp_row(gateway, row, secrets.token_urlsafe(32))


@pytest.mark.parametrize(
    ("host", "key", "insecure_no_key", "refusal"),
    [
        ("127.0.0.1", None, False, "refusing to serve /acp without a key"),
        ("127.0.0.1", None, True, None),
        ("::1", None, True, None),
        ("localhost", None, True, None),
        ("0.0.0.0", None, True, "on 0.0.0.0 without a key"),
        ("::", None, True, "on :: without a key"),
        ("10.0.0.5", None, True, "on 10.0.0.5 without a key"),
        ("0.0.0.0", "k" * 16, False, "with a 16-character key"),
        ("0.0.0.0", "k" * 43, False, None),
    ],
    ids=["no key, no flag", "keyless on 127.0.0.1", "keyless on ::1", "keyless on localhost", "keyless on 0.0.0.0",
         "keyless on ::", "keyless on a LAN address", "a short key off loopback", "a key off loopback"],
)
def test_which_binds_serve_at_all(host: str, key: str | None, insecure_no_key: bool, refusal: str | None) -> None:
    settings = Settings(host=host, token=SecretStr(key) if key else None, insecure_no_key=insecure_no_key)
    pod = assemble(settings, backend=NoAgentBackend())
    if refusal is None:
        create_app(pod)
    else:
        with pytest.raises(ConfigurationError, match=refusal):
            create_app(pod)


# -- the proxy endpoint ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProxyRow:
    """One request to alice's endpoint. ``{token}`` is hers, ``{other}`` bob's, ``{port}`` her listener's."""

    name: str
    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    method: str = "POST"
    path: str = "/mcp"
    host: str = LOOPBACK_HOST


OWN = {BEARER: "Bearer {token}"}

PROXY_ROWS = [
    ProxyRow("no bearer", 401),
    ProxyRow("a wrong bearer", 401, {BEARER: "Bearer x{token}"}),
    ProxyRow("another session's bearer", 401, {BEARER: "Bearer {other}"}),
    ProxyRow("another session's bearer, lower-case scheme", 401, {BEARER: "bearer {other}"}),
    ProxyRow("the token with the Basic scheme", 401, {BEARER: "Basic {token}"}),
    ProxyRow("the right bearer", 200, OWN),
    ProxyRow("the right bearer, lower-case scheme", 200, {BEARER: "bearer {token}"}),
    ProxyRow("Host localhost", 200, OWN, host="localhost:{port}"),
    ProxyRow("DNS rebinding: Host evil.example", 403, OWN, host=REBOUND_HOST),
    ProxyRow("a public name that resolves to 127.0.0.1", 403, OWN, host="127.0.0.1.nip.io:{port}"),
    # Host is checked before the token: a rebound page learns nothing, not even that a token is wanted.
    ProxyRow("DNS rebinding without a bearer", 403, host=REBOUND_HOST),
    ProxyRow("a web page's Origin", 403, {**OWN, "Origin": "http://evil.example"}),
    ProxyRow("a rebound page's Origin", 403, {**OWN, "Origin": REBOUND_ORIGIN}),
    ProxyRow("an extension's Origin", 403, {**OWN, "Origin": EXTENSION_ORIGIN}),
    ProxyRow("Origin null", 403, {**OWN, "Origin": "null"}),
    ProxyRow("a CORS preflight", 403, {"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"},
             method="OPTIONS"),
    ProxyRow("OPTIONS with the bearer", 405, OWN, method="OPTIONS"),
    ProxyRow("OPTIONS without a bearer", 401, method="OPTIONS"),
    ProxyRow("PUT with the bearer", 405, OWN, method="PUT"),
    ProxyRow("GET without a bearer", 401, method="GET"),
    ProxyRow("GET with the bearer, no MCP session", 400, OWN, method="GET"),
    ProxyRow("DELETE without a bearer", 401, {"Mcp-Session-Id": "{other_session}"}, method="DELETE"),
    # MCP sessions belong to one endpoint: bob's is unknown at alice's, even with alice's token.
    ProxyRow("DELETE of another session's MCP session", 404, {**OWN, "Mcp-Session-Id": "{other_session}"},
             method="DELETE"),
    ProxyRow("another path with the bearer", 404, OWN, path="/other"),
]


def whoami_for(ext: FakeExtension, who: str) -> None:
    async def whoami(_arguments: dict[str, Any]) -> dict[str, Any]:
        return text_result(f"browser of {who}")

    ext.add_tool("browser_whoami", whoami)


async def _browser_session(gateway: RunningGateway, ext: FakeExtension, who: str) -> str:
    session_id = await ext.new_session([{"type": "acp", "name": "browser", "serverId": f"browser-{who}"}])
    await gateway.pod.tunnels.wait_attached(session_id, timeout=10)
    return session_id


Endpoint = tuple[str, str]  # an agent's MCP URL and bearer token


@contextlib.asynccontextmanager
async def alice_and_bob() -> AsyncIterator[tuple[FakeExtension, Endpoint, FakeExtension, Endpoint]]:
    """Two people's browsers on one pod, each with a session and the endpoint its agent was handed."""
    async with (
        proxied() as (gateway, proxy),
        connect_extension(gateway.ws_url, gateway.token) as alice_browser,
        connect_extension(gateway.ws_url, gateway.token) as bob_browser,
    ):
        for ext, who in ((alice_browser, "alice"), (bob_browser, "bob")):
            whoami_for(ext, who)
            await ext.initialize()
        alice = await endpoint(gateway, proxy, await _browser_session(gateway, alice_browser, "alice"))
        bob = await endpoint(gateway, proxy, await _browser_session(gateway, bob_browser, "bob"))
        yield alice_browser, alice, bob_browser, bob


def _tool_calls(ext: FakeExtension) -> list[dict[str, Any]]:
    return [m for m in ext.server_requests
            if m.get("method") == "mcp/message" and m.get("params", {}).get("method") == "tools/call"]


@pytest.mark.parametrize("row", PROXY_ROWS, ids=lambda row: row.name)
async def test_proxy_endpoint(row: ProxyRow) -> None:
    async with alice_and_bob() as (alice_browser, (url, token), bob_browser, (bob_url, bob_token)):
        port = url.rsplit(":", 1)[1].split("/")[0]
        async with httpx.AsyncClient(timeout=10) as http:
            bob_init = await http.post(bob_url, json=INIT, headers={**ACCEPT, BEARER: f"Bearer {bob_token}"})
            values = {"token": token, "other": bob_token, "port": port,
                      "other_session": bob_init.headers["mcp-session-id"]}
            headers = {name: _fill(value, **values) for name, value in row.headers.items()}
            answer = await http.request(
                row.method, f"http://127.0.0.1:{port}{row.path}", headers={
                    **ACCEPT, "Host": _fill(row.host, **values), **headers,
                }, content=json.dumps(INIT).encode() if row.method == "POST" else None,
            )
    assert answer.status_code == row.status, (row.name, answer.text)
    assert token not in answer.text and bob_token not in answer.text
    assert "access-control-allow-origin" not in answer.headers
    if row.status == 200:
        assert answer.json()["result"]["serverInfo"]["name"] == "openab_browser"
    elif row.status == 401:
        assert answer.headers["www-authenticate"].startswith("Bearer")
    elif row.status == 405:
        assert answer.headers["allow"] == "GET, POST, DELETE"
    assert _tool_calls(alice_browser) == [] and _tool_calls(bob_browser) == []


async def test_each_bearer_reaches_its_own_sessions_browser_only() -> None:
    async with alice_and_bob() as (alice_browser, (alice_url, alice_token), bob_browser, (_bob_url, bob_token)):
        # What an agent sends: the official client, the scheme in lower case as some CLIs write it.
        async with (
            httpx2.AsyncClient(headers={BEARER: f"bearer {alice_token}"}, timeout=httpx2.Timeout(30)) as http,
            Client(streamable_http_client(alice_url, http_client=http), mode="legacy") as client,
        ):
            assert first_text(await client.call_tool("browser_whoami", {})) == "browser of alice"
        # Bob's token at alice's endpoint: refused before any MCP, so it cannot reach either browser.
        with pytest.raises(BaseException) as refused:  # the SDK wraps the refusal in task groups
            async with (
                httpx2.AsyncClient(headers={BEARER: f"Bearer {bob_token}"}, timeout=httpx2.Timeout(30)) as http,
                Client(streamable_http_client(alice_url, http_client=http), mode="legacy") as client,
            ):
                await client.call_tool("browser_whoami", {})
        assert "Missing or wrong bearer token" in repr(refused.value), refused.value
    assert len(_tool_calls(alice_browser)) == 1 and _tool_calls(bob_browser) == []


# -- the bridge -------------------------------------------------------------------------------------------------

# A client of the browser socket: waits for "go" (so it can be registered as an agent first), dials, prints the
# greeting, then sends each line of argv[1] and prints each answer, then whatever follows; "EOF" when the socket
# closed, "DENIED
# <errno name>" when it could not even connect. Standard library only: another uid runs it with the system's.
RAW_CLIENT = r"""
import errno, json, os, socket, sys
assert os.read(0, 3) == b"go\n"
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(20)
try:
    s.connect(os.environ["OPENAB_BROWSER_SOCKET"])
except OSError as exc:
    print("DENIED", errno.errorcode.get(exc.errno, exc.errno), flush=True)
    sys.exit(0)
f = s.makefile("rwb")
def answer():
    line = f.readline().decode().rstrip("\n")
    print(line or "EOF", flush=True)
    return line
try:
    if answer():
        for line in json.loads(sys.argv[1]):
            f.write(line.encode() + b"\n")
            f.flush()
            if not answer():
                break
        else:
            s.shutdown(socket.SHUT_WR)  # done: whatever the server still sends, then its EOF
            while answer():
                pass
except OSError:  # the server closed first
    print("EOF", flush=True)
"""

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "matrix"}}}
WHOAMI = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "whoami", "arguments": {}}}


@dataclass(frozen=True)
class BridgeRow:
    """A process dialling the socket. ``channel`` names whose channel its environment claims (a session's name,
    or a literal value); ``agent_of`` whose agent the pod registered it as (``None``: not an agent at all)."""

    name: str
    channel: str | None
    agent_of: str | None
    refusal: str | None  # what the refusal says; None: admitted, and its whoami answers from alice's browser
    frames: tuple[dict[str, Any], ...] = (INITIALIZE, WHOAMI)
    other_uid: bool = False


BRIDGE_ROWS = [
    BridgeRow("alice's agent", "alice", "alice", None),
    BridgeRow("another uid, with alice's channel, the modes opened", "alice", None, "runs as uid", other_uid=True),
    BridgeRow("a process outside any agent's tree, with alice's channel", "alice", None, "not a descendant"),
    BridgeRow("bob's agent, with alice's channel in its environment", "alice", "bob", "not a descendant"),
    BridgeRow("a forged channel", "acp_not-hex", None, "not a channel of the form acp_"),
    BridgeRow("the channel of no session", "acp_" + "0" * 32, None, "no agent"),
    BridgeRow("no channel at all", None, None, "no OPENAB_BROWSER_CHANNEL"),
    BridgeRow("alice's agent sending a frame that claims bob's channel", "alice", "alice",
              "may not name another channel", frames=(INITIALIZE, {**WHOAMI, "channel_id": "bob"})),
]


async def _dial(row: BridgeRow, pod: Any, user: int | None) -> list[str]:
    """Run ``row``'s process against the pod's socket; what it printed."""
    sessions: dict[str, str] = pod.sessions

    def claimed(value: str | None) -> str | None:
        return pod.channel(value) if value in sessions else value

    env = {"PATH": os.environ["PATH"], "OPENAB_BROWSER_SOCKET": str(pod.bridge.path)}
    if (channel := claimed(row.channel)) is not None:
        env["OPENAB_BROWSER_CHANNEL"] = channel
    frames = [{**frame, "channel_id": claimed(frame["channel_id"])} if "channel_id" in frame else frame
              for frame in row.frames]
    # The system interpreter for another uid: the venv's lives under /root, which it cannot enter.
    python = "/usr/bin/python3" if user is not None else sys.executable
    process = await asyncio.create_subprocess_exec(
        python, "-I", "-S", "-c", RAW_CLIENT, json.dumps([json.dumps(f) for f in frames]), env=env, user=user,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    pod.agents.append(Agent(process))  # ended by the harness whatever happens
    if row.agent_of is not None:
        session = pod.gateway.pod.sessions.get(sessions[row.agent_of])
        pod.bridge.agent_started(session, process.pid)
    async with asyncio.timeout(60):
        out, err = await process.communicate(b"go\n")
    return out.decode().splitlines() + [f"STDERR {line}" for line in err.decode().splitlines()]


@pytest.mark.parametrize("row", BRIDGE_ROWS, ids=lambda row: row.name)
async def test_bridge_socket(row: BridgeRow, request: pytest.FixtureRequest) -> None:
    user: int | None = request.getfixturevalue("other_user") if row.other_uid else None
    async with attack_pod("alice", "bob") as pod:
        # Alice's real agent is running: the rows that are not it must be told apart from it.
        with pod.log.open("ab") as errors:
            held = await asyncio.create_subprocess_exec(
                sys.executable, "-I", "-c", "import sys; sys.stdin.read()", env=pod.env(pod.channel("alice")),
                stdin=subprocess.PIPE, stderr=errors,
            )
        pod.agents.append(Agent(held))
        session = pod.gateway.pod.sessions.get(pod.sessions["alice"])
        assert session is not None
        pod.bridge.agent_started(session, held.pid)
        if user is not None:
            # The file modes keep another uid out first (test_bridge.py); opened up (a shared volume, a mistake)
            # the kernel's credentials must still refuse it.
            for folder in (pod.log.parent, pod.bridge.path.parent):
                os.chmod(folder, 0o711)
            os.chmod(pod.bridge.path, 0o666)
        lines = await _dial(row, pod, user)
        if row.refusal is None:
            greeting, initialized, answer = (json.loads(line) for line in lines[:3])
            assert greeting["method"] == READY_METHOD and greeting["params"]["channel"] == pod.channel("alice")
            assert initialized["result"]["serverInfo"]["name"] == "openab_browser"
            assert answer["result"]["content"] == [{"type": "text", "text": "browser of alice"}], answer
            assert lines[3:] == ["EOF"], lines
            return
        refusal = next(json.loads(line) for line in lines if "error" in line)
        assert refusal["error"]["code"] == BRIDGE_REFUSED and row.refusal in refusal["error"]["message"], lines
        assert lines[-1] == "EOF", f"a refused connection is closed: {lines}"
        assert not any("browser of" in line for line in lines), lines
        assert pod.bridge.connections == 0
