"""A whole pod for runtime tests: the real gateway, the agent runtime, the proxy, and a scripted browser.

``run_pod(...)`` serves the gateway on 127.0.0.1 with the :class:`AgentRuntime` and the proxy (or the bridge)
that `openab run` assembles; ``FakeBrowser`` gives a :class:`FakeExtension` the browser tools over the real
MCP-over-ACP tunnel and records what each tool was asked to do, so a test checks the effect in the
"browser", not the agent's words about it. No tests live here.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import secrets
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fake_extension import FakeExtension, connect_extension, text_result
from gateway_harness import run_gateway
from pydantic import SecretStr

from openab_browser.core.agents.recipes import Recipe
from openab_browser.core.agents.runtime import AgentRuntime
from openab_browser.core.pod import Pod
from openab_browser.core.settings import Settings
from openab_browser.gateway.acp_key import rotate_key
from openab_browser.gateway.assemble import assemble
from openab_browser.gateway.run_command import resolve_key

BROWSER_SERVER = {"type": "acp", "id": "browser-1", "name": "openab_browser"}
# A real 1x1 JPEG, so whatever decodes the screenshot gets an image.
TINY_JPEG = base64.b64encode(bytes.fromhex(
    "ffd8ffe000104a46494600010100000100010000ffdb004300080606070605080707070909080a0c140d0c0b0b0c1912130f"
    "141d1a1f1e1d1a1c1c20242e2720222c231c1c2837292c30313434341f27393d38323c2e333432ffc0000b080001000101011100"
    "ffc4001f0000010501010101010100000000000000000102030405060708090a0bffc400b5100002010303020403050504040000"
    "017d01020300041105122131410613516107227114328191a1082342b1c11552d1f02433627282090a161718191a25262728292a"
    "3435363738393a434445464748494a535455565758595a636465666768696a737475767778797a838485868788898a9293949596"
    "9798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae1e2e3e4e5e6e7e8e9eaf1f2f3"
    "f4f5f6f7f8f9faffda0008010100003f00fbd3ffd9"
)).decode()


@dataclass
class RunningPod:
    pod: Pod
    runtime: AgentRuntime
    browser: Any  # BrowserProxy or BridgeServer
    base_url: str
    token: str

    @property
    def ws_url(self) -> str:
        return "ws" + self.base_url.removeprefix("http") + "/acp"

    @contextlib.asynccontextmanager
    async def extension(self) -> AsyncIterator[FakeExtension]:
        async with connect_extension(self.ws_url, self.token) as ext:
            await ext.initialize()
            yield ext


@contextlib.asynccontextmanager
async def run_pod(
    state_dir: Path,
    *,
    env: Mapping[str, str] | None = None,
    recipe: Recipe | None = None,
    base_env: Mapping[str, str] | None = None,
    probe: Callable[[], tuple[int, str]] | None = None,
    **settings: Any,
) -> AsyncIterator[RunningPod]:
    """The pod `openab run` assembles (runtime, proxy or bridge), served on 127.0.0.1 at a free port."""
    token = secrets.token_urlsafe(24)
    if settings.get("browser_mode") == "bridge" and "browser_socket" not in settings:
        # A short path: a Unix socket address holds 107 bytes, pytest's tmp_path may not fit.
        settings["browser_socket"] = Path(tempfile.mkdtemp(prefix="openab-")) / "browser.sock"
    pod = assemble(Settings(token=SecretStr(token), port=0, state_dir=state_dir, **settings), env=env,
                   recipe=recipe, base_env=base_env, probe=probe)
    assert isinstance(pod.backend, AgentRuntime)
    try:
        async with run_gateway(pod=pod) as gateway:
            yield RunningPod(pod, pod.backend, pod.browser, gateway.base_url, token)
    finally:
        if pod.settings.browser_socket is not None and pod.settings.browser_socket.parent.name.startswith("openab-"):
            shutil.rmtree(pod.settings.browser_socket.parent, ignore_errors=True)


@dataclass
class FakeBrowser:
    """The browser tools, scripted: one page at a time, with a snapshot outline of named elements."""

    ext: FakeExtension
    url: str = "about:blank"
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    typed: dict[str, str] = field(default_factory=dict)
    clicked: list[str] = field(default_factory=list)
    elements: dict[str, tuple[str, str]] = field(default_factory=lambda: {
        "e1": ("heading", "Example Domain"),
        "e2": ("textbox", "Name"),
        "e3": ("button", "Sign in"),
        "e4": ("link", "More information..."),
    })
    hold: asyncio.Event | None = None  # when set, browser_navigate waits for it (a tool still running)
    navigating: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        tools = {
            "browser_navigate": ({"url": {"type": "string"}}, self._navigate),
            "browser_snapshot": ({}, self._snapshot),
            "browser_click": ({"ref": {"type": "string"}, "selector": {"type": "string"}}, self._click),
            "browser_type": ({"ref": {"type": "string"}, "text": {"type": "string"}}, self._type),
            "browser_read_dom": ({"selector": {"type": "string"}}, self._read_dom),
            "browser_screenshot": ({}, self._screenshot),
        }
        for name, (properties, function) in tools.items():
            self.ext.add_tool(name, self._recorded(name, function), {"type": "object", "properties": properties})

    def _recorded(self, name: str, function: Any) -> Any:
        async def call(arguments: dict[str, Any]) -> dict[str, Any]:
            self.calls.append((name, arguments))
            result: dict[str, Any] = await function(arguments)
            return result

        return call

    async def _navigate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        self.navigating.set()
        if self.hold is not None:
            await self.hold.wait()
        self.url = str(arguments.get("url"))
        return text_result(f"navigated to {self.url}")

    def outline(self) -> str:
        lines = [f"page {self.url}"]
        lines += [f'- {role} "{name}" [ref={ref}]' for ref, (role, name) in self.elements.items()]
        return "\n".join(lines)

    async def _snapshot(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return text_result(self.outline())

    async def _click(self, arguments: dict[str, Any]) -> dict[str, Any]:
        ref = str(arguments.get("ref") or arguments.get("selector"))
        if ref not in self.elements:
            return {"content": [{"type": "text", "text": f"no element {ref}"}], "isError": True}
        self.clicked.append(self.elements[ref][1])
        return text_result(f"clicked {ref}")

    async def _type(self, arguments: dict[str, Any]) -> dict[str, Any]:
        ref = str(arguments.get("ref"))
        self.typed[self.elements[ref][1]] = str(arguments.get("text"))
        return text_result(f"typed into {ref}")

    async def _read_dom(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return text_result(f"<html><title>{self.url}</title></html>")

    async def _screenshot(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "image", "data": TINY_JPEG, "mimeType": "image/jpeg"}]}


@contextlib.asynccontextmanager
async def first_run(
    settings: Settings, **assembly: Any
) -> AsyncIterator[tuple[Pod, FakeExtension, FakeBrowser, str]]:
    """`openab run`'s start on ``settings`` (the pairing key made and its verifier kept, as on a first run), then an
    extension with a scripted browser and one session declaring it."""
    kept = resolve_key(settings)
    assert kept is not None
    if settings.token is None:  # a later start on the same state dir knows no key: a new one, as the operator does
        settings.token = SecretStr(rotate_key(settings.state_dir)[1])
    pod = assemble(settings, **assembly)
    async with run_gateway(pod=pod) as gateway, connect_extension(gateway.ws_url, gateway.token) as ext:
        await ext.initialize()
        browser = FakeBrowser(ext)
        session_id = await ext.new_session([BROWSER_SERVER])
        await pod.tunnels.wait_attached(session_id, timeout=15)
        yield pod, ext, browser, session_id


async def open_session(pod: RunningPod, ext: FakeExtension, **params: Any) -> str:
    """session/new declaring the browser, then wait until its tunnel is attached. No agent runs yet: the
    session's first prompt starts it."""
    session_id = await ext.new_session([BROWSER_SERVER], **params)
    await pod.pod.tunnels.wait_attached(session_id, timeout=15)
    return session_id


async def browser_session(pod: RunningPod, ext: FakeExtension, **params: Any) -> tuple[FakeBrowser, str, int]:
    """A scripted browser on ``ext``, a session declaring it, and the pid of the session's agent, started the
    way its first prompt would start it (for tests that need the process before the first turn)."""
    browser = FakeBrowser(ext)
    session_id = await open_session(pod, ext, **params)
    pid = await pod.runtime.start_agent(session_id)
    assert pid is not None and pod.runtime.agents.get(session_id) == pid, "the session's agent did not start"
    return browser, session_id, pid


@dataclass
class Turn:
    updates: list[dict[str, Any]]
    permissions: list[dict[str, Any]] = field(default_factory=list)
    result: Any = None
    error: Exception | None = None

    @property
    def text(self) -> str:
        return "".join(
            u["content"].get("text", "") for u in self.updates
            if u.get("sessionUpdate") == "agent_message_chunk" and isinstance(u.get("content"), dict)
        )

    def kinds(self) -> list[str]:
        return [str(u.get("sessionUpdate")) for u in self.updates]


PermissionAnswer = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


async def prompt(
    ext: FakeExtension, session_id: str, text: str, *, timeout: float = 60,
    on_permission: PermissionAnswer | None = None,
) -> Turn:
    """Send one prompt; collect this session's updates until the answer comes.

    Permission requests are answered by ``on_permission`` (and recorded in ``turn.permissions``).
    """
    turn = Turn([])
    answering: set[asyncio.Task[None]] = set()

    async def answer(message: dict[str, Any]) -> None:
        assert on_permission is not None
        result = await on_permission(message["params"])
        await ext.send({"jsonrpc": "2.0", "id": message["id"], "result": result})

    request = asyncio.ensure_future(ext.request(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}, timeout=timeout
    ))
    try:
        while not request.done():
            reader = asyncio.ensure_future(ext.inbox.get())
            await asyncio.wait({request, reader}, return_when=asyncio.FIRST_COMPLETED)
            if reader.done():
                message = reader.result()
                if message.get("method") == "session/request_permission" and on_permission is not None:
                    turn.permissions.append(message["params"])
                    answering.add(asyncio.ensure_future(answer(message)))  # a person may take their time
                _take(turn, session_id, message)
            else:
                reader.cancel()
        while not ext.inbox.empty():
            _take(turn, session_id, ext.inbox.get_nowait())
        turn.result = request.result()
    except Exception as exc:
        turn.error = exc
    finally:
        for task in answering:
            task.cancel()
    return turn


def _take(turn: Turn, session_id: str, message: dict[str, Any]) -> None:
    params = message.get("params") or {}
    if message.get("method") == "session/update" and params.get("sessionId") == session_id:
        turn.updates.append(params["update"])


def environ(pid: int) -> dict[str, str]:
    """A process's environment, as the kernel holds it."""
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


def live_group(pgid: int) -> set[int]:
    """Processes of process group ``pgid`` that are not zombies (PID 1 here may not reap orphans)."""
    members = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.add(int(entry.name))
    return members


