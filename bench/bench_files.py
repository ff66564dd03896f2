"""Issue 24: a 20 MiB file each way across the gap (browser_upload, browser_download) against the raw socket.

The path (docs/files.md): the real pod (``openab_browser.gateway`` on uvicorn, no tap in between), the real extension in
headless Chromium, and the official ``mcp`` client at the session's proxy endpoint as the agent. The bytes cross
the ``/acp`` WebSocket in 512 KiB chunks: in binary frames, a window of them in flight, where pod and extension both
offer it; else base64 in JSON-RPC, one request answered before the next.

* upload: ``browser_upload`` of a 20 MiB file of noise from the session's working folder into the test site's
  form (tests/site/upload.html), timed from ``tools/call`` to its result; then (untimed) the form is sent and the
  site's echo (tests/browser/harness.py, ``/upload-echo``) must name the file's sha256.
* download: ``browser_download`` of a 20 MiB file of noise the test site serves only with the session cookie the
  browser holds (the same rule as ``/files/private/report.csv``), timed to its result; the file written in the
  working folder must have the served bytes' sha256.

The baseline, in the same rounds and the same run: the same 20 MiB pushed over a plain loopback WebSocket
(``websockets``, its server in a process of its own, as the pod is) in 512 KiB binary frames, each direction;
beside it, the same chunks as openab moves them (lock-step: a JSON request answered with base64, or base64 sent
and acknowledged) on the same plain socket: the floor of the protocol's shape, without the browser. And the socket
the file itself crosses: Chromium's own WebSocket, in the extension's service worker, moving the same bytes in the
same frames to a plain ``websockets`` server (deflate as the pod is set, in this process) each way, with nothing of
openab's (``ratio_openab_over_browser_socket``). It hands all the frames to the socket at once and reads with one
await per message: one way of pushing from the browser, not the socket's ceiling (openab's window of acknowledged
frames has moved more than it on a loaded machine).

Chrome offers permessage-deflate and the pod accepts it by default (``ws_deflate``): both are run, a pod and a
Chromium each, the raw socket with the same choice. Where the time goes is measured, not guessed: the pod's
file methods are wrapped in this process (timestamps and durations of each chunk; no product code changes), the
page's ``change`` event is stamped when the file lands in the field, and the extension's own codecs and digests
(lib/file-transfer.js, lib/sha256.js) are timed on 20 MiB in an extension page of the same Chromium.

No DevTools client stays attached while a path is timed: Playwright's keeps the ``Network`` domain on in every
target, so Chromium copies each WebSocket frame of the file, in base64, to it (a 100 MiB file ran two to four times
slower with it attached). The page and the service worker are reached through bench/cdp.py, one bare
``Runtime.evaluate`` at a time; Playwright connects only for the untimed codec figures at the end.

Run: ``python bench/bench_files.py [--quick] [--mib N] [--rounds N] [--deflate both|on|off] [--out DIR]`` (from the
repository, venv active; ``--mib 100`` for issue 39's 100 MiB). It measures an older tree with that tree's link farm
first on the path and its extension staged: ``PYTHONPATH=WORKTREE/.dev python bench/bench_files.py --extension
WORKTREE/extension``; the instrumentation wraps what that tree has. ``--cloned-messages`` stages the manifest with
``"message_serialization": "structured_clone"`` (Chrome 148+), under which the upload hands the page one Blob instead
of base64 pieces (docs/files.md).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import hashlib
import itertools
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import httpx
import httpx2
import websockets
from browser.harness import (
    CHROMIUM,
    EXTENSION_SRC,
    MAX_UPLOAD_ECHO,
    SESSION_COOKIE,
    SITE,
    _Handler,
    _Server,
    chromium,
    extension_id,
    serving,
    stage_extension,
)
from browser.live_pod import KEY
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from playwright.async_api import async_playwright
from pydantic import SecretStr
from waits import eventually

from bench.bench_browser_tools import ref_of
from bench.browser_socket import browser_raw_server, browser_socket, open_browser_socket, service_worker
from bench.cdp import evaluate, wait_target
from bench.common import arguments, interleaved, plot_latencies, summary, write_result
from bench.raw_socket import RawClient, raw_process
from openab_browser.core.acp.backend import NoAgentBackend
from openab_browser.core.acp.file_methods import FileMethods
from openab_browser.core.files.transfers import CHUNK, Transfers
from openab_browser.core.mcp.access import HttpEndpoint
from openab_browser.core.mcp.proxy import BrowserProxy
from openab_browser.core.pod import Pod
from openab_browser.core.settings import Settings
from openab_browser.core.statedir import session_workdir
from openab_browser.gateway.app import create_app
from openab_browser.gateway.assemble import assemble
from openab_browser.gateway.server import running_server

NAME = "files"
MiB = 1 << 20
SIZE = 20 * MiB
QUICK_SIZE = 2 * MiB
CALL_TIMEOUT = 120.0
UPLOAD = "openab upload (pod -> page)"
DOWNLOAD = "openab download (site -> pod)"
RAW_DOWN = "raw push, pod -> browser"
RAW_UP = "raw push, browser -> pod"
LOCK_READ = "lock-step base64 JSON, pod -> browser"
LOCK_WRITE = "lock-step base64 JSON, browser -> pod"
BROWSER_DOWN = "Chromium's raw socket, pod -> browser"
BROWSER_UP = "Chromium's raw socket, browser -> pod"
PATHS = (UPLOAD, DOWNLOAD, RAW_DOWN, RAW_UP, LOCK_READ, LOCK_WRITE, BROWSER_DOWN, BROWSER_UP)
# Each openab direction against the raw push in the same direction.
AGAINST = {UPLOAD: RAW_DOWN, DOWNLOAD: RAW_UP}
# And against the browser's own WebSocket, the one the file crosses, moving the same bytes in the same frames.
AGAINST_BROWSER = {UPLOAD: BROWSER_DOWN, DOWNLOAD: BROWSER_UP}
BENCH_FILE = "/files/private/bench.bin"


# -- the test site, with one more file ----------------------------------------------------------------------------


class _BenchSite(_Handler):
    """tests/browser/harness.py's site (its upload form and echo, its sign-in) and a file of noise served, as its
    private report is, only with the session cookie the browser holds."""

    payload = b""

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] != BENCH_FILE:
            super().do_GET()
            return
        cookies = [c.strip() for c in (self.headers.get("cookie") or "").split(";")]
        if SESSION_COOKIE not in cookies:
            self._send(403, b"sign in first", "text/plain")
        else:
            self._send(200, self.payload, "application/octet-stream",
                       (("content-disposition", 'attachment; filename="bench.bin"'),))


@contextlib.contextmanager
def bench_site(payload: bytes) -> Iterator[str]:
    handler = type("Site", (_BenchSite,), {"payload": payload})
    srv = _Server(("127.0.0.1", 0), functools.partial(handler, directory=str(SITE)))
    with serving(srv) as port:
        yield f"http://127.0.0.1:{port}"


# -- where the time goes, in the pod -------------------------------------------------------------------------------


@dataclass
class Stamp:
    what: str  # "read" or "write" (one chunk: the ACP method, base64 and file I/O), "open", "finish"
    start: float
    seconds: float


@dataclass
class Clock:
    """The pod's file work, stamped as it happens (perf_counter, this process)."""

    stamps: list[Stamp] = field(default_factory=list)

    def of(self, what: str) -> list[Stamp]:
        return [s for s in self.stamps if s.what == what]


def instrumented(clock: Clock) -> contextlib.ExitStack:
    """Wraps the pod's chunk methods (the ACP side: parse, base64, file I/O) and a transfer's opening and end,
    for as long as the stack is open; the product's code is unchanged."""
    stack = contextlib.ExitStack()

    def wrap(owner: type, name: str, what: str) -> None:
        original = getattr(owner, name)
        if asyncio.iscoroutinefunction(original):
            @functools.wraps(original)
            async def timed_async(*args: Any, **kwargs: Any) -> Any:
                start = time.perf_counter()
                try:
                    return await original(*args, **kwargs)
                finally:
                    clock.stamps.append(Stamp(what, start, time.perf_counter() - start))
            setattr(owner, name, timed_async)
        else:
            @functools.wraps(original)
            def timed(*args: Any, **kwargs: Any) -> Any:
                start = time.perf_counter()
                try:
                    return original(*args, **kwargs)
                finally:
                    clock.stamps.append(Stamp(what, start, time.perf_counter() - start))
            setattr(owner, name, timed)
        stack.callback(setattr, owner, name, original)

    wrap(FileMethods, "read", "read")
    wrap(FileMethods, "write", "write")
    for name, what in (("_read_bytes", "read"), ("_write_bytes", "write")):  # binary frames, where the tree has them
        if hasattr(FileMethods, name):
            wrap(FileMethods, name, what)
    wrap(Transfers, "open_upload", "open")
    wrap(Transfers, "open_download", "open")
    wrap(Transfers, "finish_download", "finish")
    return stack


# -- the rig -------------------------------------------------------------------------------------------------------


@dataclass
class Rig:
    site: str
    client: Client
    workdir: Path
    devtools: int  # Chromium's DevTools port: bench/cdp.py evaluates in a tab or the service worker through it
    chromium_version: str

    async def in_tab(self, url: str, expression: str, timeout: float = 60) -> Any:
        """``expression``'s value in the agent's tab, once it is at ``url``."""
        return await evaluate(self.devtools, lambda t: t.get("type") == "page" and t.get("url") == url, expression,
                              timeout=timeout, what=f"the tab at {url}")


@contextlib.asynccontextmanager
async def pod_and_browser(tmp: Path, payload: bytes, *, ws_deflate: bool, extension: Path = EXTENSION_SRC,
                          cloned_messages: bool = False) -> AsyncIterator[Rig]:
    """The real pod on uvicorn (as `openab run` serves it, with ``ws_deflate``), the real extension (``extension``:
    another tree's to measure it) in headless Chromium with an `Always allow` rule for the test site (the one thing
    besides the person that lets a file go), and the agent's official MCP client at the session's proxy endpoint.
    No DevTools client stays attached (bench/cdp.py says why). ``cloned_messages``: the staged manifest opts in to
    structured-clone extension messages (``message_serialization``), which the upload's page hand-over uses."""
    settings = Settings(token=SecretStr(KEY), port=0, state_dir=tmp / "state", ws_deflate=ws_deflate,
                        max_session_file_bytes=64 << 30)
    pod: Pod = assemble(settings, backend=NoAgentBackend())
    with bench_site(payload) as site:
        async with running_server(create_app(pod), max_frame_bytes=settings.max_frame_bytes,
                                  ws_deflate=ws_deflate) as base:
            url = f"ws://127.0.0.1:{base.rsplit(':', 1)[1]}/acp"
            host = site.removeprefix("http://")
            ext = stage_extension(tmp / "ext", {"url": url, "key": KEY, "autopilot": True,
                                                "siteRules": {host: "always"}})
            if extension != EXTENSION_SRC:  # another tree's files under the same defaults
                shutil.copytree(extension, ext, dirs_exist_ok=True, ignore=shutil.ignore_patterns("defaults.json"))
            if cloned_messages:
                manifest = json.loads((ext / "manifest.json").read_text())
                manifest["message_serialization"] = "structured_clone"
                (ext / "manifest.json").write_text(json.dumps(manifest))
            with chromium(ext, tmp / "profile", f"{site}/index.html", log=tmp / "chromium.log",
                          extra=("--remote-debugging-port=0",)):
                port_file = tmp / "profile" / "DevToolsActivePort"
                await eventually(lambda: port_file.exists() and bool(port_file.read_text().split()), 30,
                                 what="Chromium's DevTools port")
                session_id = await attached_session(pod)
                session = pod.sessions.get(session_id)
                assert session is not None and isinstance(pod.browser, BrowserProxy)
                endpoint = (await pod.browser.open(session)).entry
                assert isinstance(endpoint, HttpEndpoint)
                workdir = session_workdir(settings.state_dir, pod.sessions.naming.channel(session_id), create=True)
                headers = {"Authorization": f"Bearer {endpoint.token}"}
                devtools = int(port_file.read_text().split()[0])
                await wait_target(devtools, service_worker(extension_id()), 30, what="the extension's service worker")
                async with httpx.AsyncClient(timeout=10) as http:
                    version = (await http.get(f"http://127.0.0.1:{devtools}/json/version")).json()["Browser"]
                async with (
                    httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=CALL_TIMEOUT)) as http2,
                    Client(streamable_http_client(endpoint.url, http_client=http2), mode="legacy") as client,
                ):
                    yield Rig(site, client, workdir, devtools, version.split("/", 1)[-1])


async def attached_session(pod: Pod) -> str:
    """The session whose browser tunnel the extension installed."""

    def found() -> str | None:
        return next((s.id for s in pod.sessions.all() if pod.tunnels.tunnels(s.id)), None)

    await eventually(lambda: found() is not None, 60, what="the extension's session and tunnel")
    session_id = found()
    assert session_id is not None
    return session_id


async def call(client: Client, name: str, args: dict[str, Any]) -> str:
    """A tool call's text; an error result stops the benchmark, since its timing would measure a failure."""
    result = await asyncio.wait_for(client.call_tool(name, args), CALL_TIMEOUT)
    text = "\n".join(getattr(c, "text", "") for c in result.content)
    if result.is_error:
        raise RuntimeError(f"{name} failed: {text[:500]}")
    return text


# -- the openab paths ----------------------------------------------------------------------------------------------


Phases = dict[str, list[float]]  # seconds, by phase


def between(clock: Clock, start: float, end: float, what: str) -> list[Stamp]:
    return [s for s in clock.stamps if s.what == what and start <= s.start <= end]


def record(phases: Phases, name: str, seconds: float) -> None:
    phases.setdefault(name, []).append(seconds)


async def upload_form(rig: Rig, number: int) -> tuple[str, str]:
    """The form in the agent's tab, at a new address each time (a real load), and its file field's ref. The tab
    was just at the form's echo, after a POST of 20 MiB: should a snapshot still see that page, it is taken again."""
    url = f"{rig.site}/upload.html?n={number}"
    snapshot = ""
    for _ in range(3):
        await call(rig.client, "browser_navigate", {"url": url})
        snapshot = await call(rig.client, "browser_snapshot", {})
        if '"Document"' in snapshot:
            return ref_of(snapshot, '"Document"'), url
        print(f"the form was not in the snapshot after browser_navigate: again\n{snapshot[:300]}", file=sys.stderr)
        await asyncio.sleep(1)
    return ref_of(snapshot, '"Document"'), url


async def upload_once(rig: Rig, clock: Clock, phases: Phases, payload: bytes, number: int) -> float:
    field_ref, tab = await upload_form(rig, number)
    # The moment the page's field holds the file, in this process's clock: the page stamps its wall clock.
    await rig.in_tab(tab, """window.__landed = 0; document.getElementById('doc').addEventListener('change',
        () => { window.__landed = performance.timeOrigin + performance.now(); }); true""")
    wall, start = time.time(), time.perf_counter()
    said = await call(rig.client, "browser_upload", {"ref": field_ref, "path": "bench-upload.bin"})
    end = time.perf_counter()
    digest = hashlib.sha256(payload).hexdigest()
    if digest not in said:
        raise RuntimeError(f"the upload's result does not name the file's sha256: {said[:300]}")
    landed = start + (await rig.in_tab(tab, "window.__landed") / 1000 - wall)
    # Untimed: the form goes to its server, whose echo must name the same bytes; a file larger than the echo takes
    # is read in the page instead, from the field.
    if len(payload) > MAX_UPLOAD_ECHO:
        size, sha = await rig.in_tab(tab, """(async () => { const f = document.getElementById('doc').files[0];
            const d = new Uint8Array(await crypto.subtle.digest('SHA-256', await f.arrayBuffer()));
            return [f.size, Array.from(d, (v) => v.toString(16).padStart(2, '0')).join('')]; })()""")
        if sha != digest or size != len(payload):
            raise RuntimeError("the page's file field does not hold the uploaded file's size and sha256")
    else:
        snapshot = await call(rig.client, "browser_snapshot", {})
        await call(rig.client, "browser_click", {"ref": ref_of(snapshot, 'button "Send"')})
        named = await rig.in_tab(f"{rig.site}/upload-echo", """new Promise((ok) => { const look = () => {
            const li = document.querySelector('#received li.file');
            if (li) ok([li.dataset.sha256, li.dataset.size]); else setTimeout(look, 50); }; look(); })""")
        if named != [digest, str(len(payload))]:
            raise RuntimeError("the site's echo does not name the uploaded file's size and sha256")
    reads = between(clock, start, end, "read")
    [opened] = between(clock, start, end, "open")
    record(phases, "call -> first chunk asked", reads[0].start - start)
    record(phases, "  of which the pod opens and hashes the file", opened.seconds)
    record(phases, "first chunk asked -> last chunk answered", reads[-1].start + reads[-1].seconds - reads[0].start)
    record(phases, "  of which the pod's work on the chunks", sum(s.seconds for s in reads))
    record(phases, "  per chunk, pod's answer -> next ask", statistics.median(
        b.start - (a.start + a.seconds) for a, b in itertools.pairwise(reads)))
    record(phases, "last chunk answered -> file in the page's field", landed - (reads[-1].start + reads[-1].seconds))
    record(phases, "file in the field -> result at the agent", end - landed)
    record(phases, "chunks", len(reads))
    return end - start


async def download_once(rig: Rig, clock: Clock, phases: Phases, payload: bytes, number: int) -> float:
    name = f"bench-download-{number}.bin"
    start = time.perf_counter()
    said = await call(rig.client, "browser_download", {"url": rig.site + BENCH_FILE, "path": name})
    end = time.perf_counter()
    written = rig.workdir / name
    digest = hashlib.sha256(written.read_bytes()).hexdigest()
    written.unlink()
    if digest != hashlib.sha256(payload).hexdigest() or digest not in said:
        raise RuntimeError(f"the downloaded file is not the served one: {said[:300]}")
    writes = between(clock, start, end, "write")
    [finish] = between(clock, start, end, "finish")
    record(phases, "call -> first chunk written", writes[0].start - start)
    record(phases, "first chunk written -> last chunk answered",
           writes[-1].start + writes[-1].seconds - writes[0].start)
    record(phases, "  of which the pod's work on the chunks", sum(s.seconds for s in writes))
    record(phases, "  per chunk, pod's answer -> next write", statistics.median(
        b.start - (a.start + a.seconds) for a, b in itertools.pairwise(writes)))
    record(phases, "last chunk answered -> result at the agent", end - (writes[-1].start + writes[-1].seconds))
    record(phases, "  of which the pod checks, fsyncs and places the file", finish.seconds)
    record(phases, "chunks", len(writes))
    return end - start


# The extension's own work on a file, in an extension page of the same Chromium: its codecs and digests, and the
# pieces the worker hands the page (1 MiB each, as base64 in a script's arguments).
EXTENSION_WORK = """async ([size, site]) => {
    // An older tree (--extension) has them in its tools-files.js, before it was split by tool.
    const { toBase64, fromBase64, CHUNK } = await import('/lib/file-transfer.js')
        .catch(() => import('/lib/tools-files.js'));
    const { Sha256 } = await import('/lib/sha256.js');
    const data = new Uint8Array(size);
    for (let i = 0; i < size; i += 65536) crypto.getRandomValues(data.subarray(i, i + 65536));
    const t = () => performance.now();
    const out = {};
    let s = t();
    const chunks = [];
    for (let i = 0; i < size; i += CHUNK) chunks.push(toBase64(data.subarray(i, i + CHUNK)));
    out['base64 encode, 512 KiB chunks'] = t() - s;
    s = t();
    for (const c of chunks) fromBase64(c);
    out['base64 decode, 512 KiB chunks'] = t() - s;
    s = t();
    for (const c of chunks) JSON.parse(JSON.stringify({ jsonrpc: '2.0', id: 1, result: { data: c, eof: false } }));
    out['JSON write + parse of the chunk messages'] = t() - s;
    s = t();
    await crypto.subtle.digest('SHA-256', data);
    out['sha256, crypto.subtle (upload check)'] = t() - s;
    s = t();
    const h = new Sha256();
    for (let i = 0; i < size; i += 65536) h.update(data.subarray(i, i + 65536));
    h.hex();
    out['sha256, lib/sha256.js in 64 KiB pieces (download)'] = t() - s;
    s = t();
    const pieces = [];
    for (let i = 0; i < size; i += 1048576) pieces.push(toBase64(data.subarray(i, i + 1048576)));
    out['base64 encode, 1 MiB pieces for the page'] = t() - s;
    // The pieces into the agent's tab as lib/page-script.js hands them: one executeScript each, its argument the
    // base64 (JSON), decoded in the page's isolated world; then the same number of calls that carry nothing.
    const [tab] = (await chrome.tabs.query({})).filter((x) => x.url && x.url.startsWith(site));
    const target = { tabId: tab.id, frameIds: [0] };
    s = t();
    for (const p of pieces) {
        await chrome.scripting.executeScript({ target, func: (b) => Uint8Array.fromBase64(b).length, args: [p] });
    }
    out['executeScript with each 1 MiB piece, decoded in the page'] = t() - s;
    s = t();
    for (const _ of pieces) await chrome.scripting.executeScript({ target, func: (b) => b.length, args: [''] });
    out['executeScript as many times, carrying nothing'] = t() - s;
    return out;
}"""


async def extension_work(rig: Rig, size: int) -> dict[str, float]:
    """Milliseconds the extension's own codecs and digests take on ``size`` bytes (lib/file-transfer.js, sha256.js),
    in an extension page Playwright opens once the timed paths are done."""
    async with async_playwright() as p:
        browser = await p.chromium.connect_over_cdp(f"http://127.0.0.1:{rig.devtools}")
        own = await browser.contexts[0].new_page()
        try:
            await own.goto(f"chrome-extension://{extension_id()}/pair/pair.html")
            said = await own.evaluate(EXTENSION_WORK, [size, rig.site])
        finally:
            await own.close()
            await browser.close()  # over CDP: disconnects, Chromium stays
    return {name: round(float(ms), 1) for name, ms in said.items()}


# -- the run -------------------------------------------------------------------------------------------------------


def repeated(times: int, once: Callable[[int], Awaitable[float]]) -> Callable[[], Awaitable[list[float]]]:
    counter = 0

    async def run() -> list[float]:
        nonlocal counter
        out = []
        for _ in range(times):
            counter += 1
            out.append(await once(counter))
        return out

    return run


def throughput(samples: Sequence[float], size: int) -> dict[str, Any]:
    """MiB/s at the median, and its spread: the slowest and fastest run, and the p90's."""
    mib = size / MiB
    return {"p50_mib_s": round(mib / statistics.median(samples), 1), "min_mib_s": round(mib / max(samples), 1),
            "max_mib_s": round(mib / min(samples), 1), "seconds": [round(s, 3) for s in samples],
            **summary(samples)}


def phase_medians(phases: Phases) -> dict[str, float]:
    return {name: (round(statistics.median(v)) if name == "chunks" else round(statistics.median(v) * 1000, 1))
            for name, v in phases.items()}


async def one_setting(ws_deflate: bool, rounds: int, size: int, payload: bytes,
                      samples_out: dict[str, list[float]], extension: Path, cloned_messages: bool) -> dict[str, Any]:
    clock = Clock()
    phases: dict[str, Phases] = {UPLOAD: {}, DOWNLOAD: {}}
    with tempfile.TemporaryDirectory(prefix="openab-bench-files-") as tmp_name, instrumented(clock):
        tmp = Path(tmp_name)
        (tmp / "state").mkdir(mode=0o700)
        async with (
            pod_and_browser(tmp, payload, ws_deflate=ws_deflate, extension=extension,
                            cloned_messages=cloned_messages) as rig,
            raw_process(size) as raw_url,
            browser_raw_server(size, ws_deflate=ws_deflate) as browser_url,
            websockets.connect(raw_url, max_size=4 * MiB, compression="deflate" if ws_deflate else None) as ws,
        ):
            (rig.workdir / "bench-upload.bin").write_bytes(payload)
            await call(rig.client, "browser_navigate", {"url": f"{rig.site}/files/sign-in"})  # the session cookie
            raw = RawClient(ws, size)
            await open_browser_socket(rig.devtools, extension_id(), browser_url, size, CHUNK)
            paths: dict[str, Callable[[], Awaitable[list[float]]]] = {
                UPLOAD: repeated(1, lambda n: upload_once(rig, clock, phases[UPLOAD], payload, n)),
                DOWNLOAD: repeated(1, lambda n: download_once(rig, clock, phases[DOWNLOAD], payload, n)),
                RAW_DOWN: repeated(1, lambda _n: raw.push_down()),
                RAW_UP: repeated(1, lambda _n: raw.push_up()),
                LOCK_READ: repeated(1, lambda _n: raw.lock_read()),
                LOCK_WRITE: repeated(1, lambda _n: raw.lock_write()),
                BROWSER_DOWN: repeated(1, lambda _n: browser_socket(rig.devtools, extension_id(), "push")),
                BROWSER_UP: repeated(1, lambda _n: browser_socket(rig.devtools, extension_id(), "take")),
            }
            for run in paths.values():  # warm: the page scripts, the sockets' buffers, the allocator's arenas
                await run()
            for kept in phases.values():
                kept.clear()
            samples = await interleaved(rounds, paths)
            work = await extension_work(rig, size)
    label = "deflate" if ws_deflate else "no deflate"
    for name, values in samples.items():
        if not name.startswith("lock-step"):  # in the JSON; the plot keeps to the figures the issue asks for
            samples_out[f"{name}, {label}"] = values
    figures = {name: throughput(values, size) for name, values in samples.items()}
    return {
        "ws_deflate": ws_deflate,
        "chromium": rig.chromium_version,
        "paths": figures,
        "ratio_raw_over_openab": {name: round(figures[base]["p50_mib_s"] / figures[name]["p50_mib_s"], 1)
                                  for name, base in AGAINST.items()},
        "ratio_openab_over_browser_socket": {
            name: round(figures[name]["p50_mib_s"] / figures[base]["p50_mib_s"], 3)
            for name, base in AGAINST_BROWSER.items()},
        "ratio_lock_step_over_openab": {
            UPLOAD: round(figures[LOCK_READ]["p50_mib_s"] / figures[UPLOAD]["p50_mib_s"], 1),
            DOWNLOAD: round(figures[LOCK_WRITE]["p50_mib_s"] / figures[DOWNLOAD]["p50_mib_s"], 1)},
        "phases_p50_ms": {name: phase_medians(kept) for name, kept in phases.items()},
        "extension_work_ms": work,
    }


async def run(quick: bool, out: Path, mib: int | None = None, rounds: int | None = None, deflate: str = "both",
              extension: Path = EXTENSION_SRC, cloned_messages: bool = False) -> Path:
    size, default_rounds = (QUICK_SIZE, 2) if quick else (SIZE, 7)
    size = mib * MiB if mib else size
    rounds = rounds or default_rounds
    payload = random.Random(7).randbytes(size)
    samples: dict[str, list[float]] = {}
    settings = {}
    for ws_deflate in {"both": (True, False), "on": (True,), "off": (False,)}[deflate]:
        settings["deflate" if ws_deflate else "no deflate"] = await one_setting(ws_deflate, rounds, size, payload,
                                                                               samples, extension, cloned_messages)
    result = {
        "file_bytes": size, "chunk_bytes": CHUNK, "rounds": rounds, "quick": quick, "cloned_messages": cloned_messages,
        "settings": settings,
    }
    path = write_result(NAME, result, out)
    plot_latencies(NAME, samples, out, title=f"a {size // MiB} MiB file: openab each way vs a plain WebSocket")
    return path


def main(argv: Sequence[str] | None = None) -> Path:
    def more(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--mib", type=int, default=None, help="the file's size in MiB (default 20; 2 with --quick)")
        parser.add_argument("--rounds", type=int, default=None, help="rounds of every path (default 7; 2 with --quick)")
        parser.add_argument("--deflate", choices=("both", "on", "off"), default="both",
                            help="the pod's and the raw socket's permessage-deflate: both settings (default), or one")
        parser.add_argument("--extension", type=Path, default=EXTENSION_SRC,
                            help="the extension folder to stage (another tree's, to measure it; default this one's)")
        parser.add_argument("--cloned-messages", action="store_true",
                            help="stage the manifest with message_serialization: structured_clone (Chrome 148+)")

    args = arguments(__doc__.splitlines()[0] if __doc__ else NAME, argv, more)
    if not CHROMIUM:
        raise SystemExit("Debian chromium is not installed: apt-get install chromium")
    out: Path = args.out
    return asyncio.run(run(bool(args.quick), out, args.mib, args.rounds, args.deflate, args.extension,
                           bool(args.cloned_messages)))


if __name__ == "__main__":
    main()
