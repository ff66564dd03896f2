"""Real headless Chromium loading the real extension, and the local test site it browses.

Chromium runs as a plain subprocess (no CDP attached), because a DevTools attachment keeps the
extension's service worker alive and would hide lifetime bugs. The extension is staged into a
temp copy with a `defaults.json` pointing at the test's gateway; its manifest `key` keeps the
extension id the same for every copy.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import email.parser
import email.policy
import functools
import hashlib
import html
import http.server
import json
import os
import shutil
import signal
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.parse
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from playwright.async_api import BrowserContext, Page, async_playwright, expect
from waits import eventually

REPO = Path(__file__).resolve().parents[2]
EXTENSION_SRC = REPO / "extension"
SITE = REPO / "tests" / "site"
# Debian's chromium; the real binary first, because /usr/bin/chromium is a wrapper script that
# adds flags of its own. OPENAB_CHROMIUM points elsewhere.
CHROMIUM = next((p for p in (os.environ.get("OPENAB_CHROMIUM", ""), "/usr/lib/chromium/chromium",
                             "/usr/bin/chromium") if p and os.path.exists(p)), "")

FLAGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
    "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-default-apps",
    "--disable-dev-shm-usage", "--password-store=basic",
    # headless=new keeps 143 px of the window for invisible browser UI: this gives a 1280x800 viewport.
    "--window-size=1280,943",
]


@functools.cache
def screenshot_dir() -> Path:
    """Where panel screenshots go: docs/screenshots/ with OPENAB_UPDATE_SCREENSHOTS=1, else a temp dir.

    An ordinary test run must not rewrite files in the working tree.
    """
    if os.environ.get("OPENAB_UPDATE_SCREENSHOTS") == "1":
        target = REPO / "docs" / "screenshots"
        target.mkdir(parents=True, exist_ok=True)
        return target
    return Path(tempfile.mkdtemp(prefix="openab-screenshots-"))


def extension_id() -> str:
    """The id Chrome derives from the manifest key: stable across copies and machines."""
    key = json.loads((EXTENSION_SRC / "manifest.json").read_text())["key"]
    digest = hashlib.sha256(base64.b64decode(key)).hexdigest()[:32]
    return "".join(chr(ord("a") + int(c, 16)) for c in digest)


def stage_extension(dest: Path, defaults: dict[str, Any]) -> Path:
    """A copy of extension/ with a defaults.json the extension reads on its first start."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(EXTENSION_SRC, dest)
    (dest / "defaults.json").write_text(json.dumps(defaults))
    return dest


# The files of tests/browser/test_files.py's downloads: what the server sends, which the test checks byte for byte.
SESSION_COOKIE = "openab_site_session=only-the-browser-holds-this"
PRIVATE_REPORT = b"order,amount\n" + b"".join(b"%d,%d.00\n" % (i, i * 7 % 1000) for i in range(80_000))
PLAIN_REPORT = b"id,name\n1,kettle\n2,mug\n"
ODD_NAME = "../../etc/evil\x07\nname.csv"
MAX_UPLOAD_ECHO = 64 * 1024 * 1024
_ONCE_USED: set[str] = set()
_ONCE_LOCK = threading.Lock()
SLOW_VISITS: collections.Counter[str] = collections.Counter()  # /slowly, by path and query
_SLOW_LOCK = threading.Lock()


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/files/sign-in":
            # A page visit that leaves a session cookie in the browser (SameSite=Lax, HttpOnly: no script reads it).
            self._send(200, b"<!doctype html><title>Signed in</title><h1>Signed in</h1>"
                       b"<p><a href=/files/private/report.csv>Your report</a></p>", "text/html; charset=utf-8",
                       (("set-cookie", f"{SESSION_COOKIE}; Path=/; SameSite=Lax; HttpOnly"),))
        elif path == "/files/private/report.csv":
            self._private_report("report.csv")
        elif path == "/files/plain.csv":
            self._send(200, PLAIN_REPORT, "text/csv", (("content-disposition", 'attachment; filename="plain.csv"'),))
        elif path == "/files/odd-name":
            encoded = "".join(c if c.isalnum() or c in ".-_" else f"%{ord(c):02X}" for c in ODD_NAME)
            self._send(200, PLAIN_REPORT, "text/csv",
                       (("content-disposition", f"attachment; filename=\"odd.csv\"; filename*=UTF-8''{encoded}"),))
        elif path == "/files/endless":
            self._endless()
        elif path == "/slowly":
            # A page that takes its time to answer (?ms=): a navigation to it is under way that long. Its visits are
            # counted (SLOW_VISITS), so a test knows the navigation began.
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            with _SLOW_LOCK:
                SLOW_VISITS[self.path] += 1
            time.sleep(min(float(query.get("ms", ["0"])[0]), 10_000) / 1000)
            # ?field=1: with a field that takes the focus at once, where keys sent to the tab would land.
            field = b'<input id="landed" aria-label="Landed" autofocus>' if query.get("field") else b""
            self._send(200, b"<!doctype html><title>Arrived</title><h1>Arrived slowly</h1>" + field,
                       "text/html; charset=utf-8")
        elif path == "/files/once":
            # A one-time link (a signed receipt URL): its file the first time, gone after.
            with _ONCE_LOCK:
                first = self.path not in _ONCE_USED
                _ONCE_USED.add(self.path)
            if first:
                self._send(200, PLAIN_REPORT, "application/octet-stream")
            else:
                self._send(410, b"this link was used", "text/plain")
        else:
            super().do_GET()

    def _private_report(self, name: str) -> None:
        """The report, for the browser holding the session cookie only."""
        cookies = [c.strip() for c in (self.headers.get("cookie") or "").split(";")]
        if SESSION_COOKIE not in cookies:
            self._send(403, b"sign in first", "text/plain")
        else:
            self._send(200, PRIVATE_REPORT, "text/csv", (("content-disposition", f'attachment; filename="{name}"'),))

    def _send(self, status: int, body: bytes, kind: str, headers: tuple[tuple[str, str], ...] = ()) -> None:
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _endless(self) -> None:
        """A download that never ends: no length, and bytes for as long as the client reads them."""
        self.send_response(200)
        self.send_header("content-type", "application/octet-stream")
        self.send_header("content-disposition", 'attachment; filename="endless.bin"')
        self.end_headers()
        piece = bytes(range(256)) * 256
        with contextlib.suppress(OSError):
            while True:
                self.wfile.write(piece)

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/slowly":  # a page's beacon: counted, as a visit is
            with _SLOW_LOCK:
                SLOW_VISITS[self.path] += 1
            self.rfile.read(min(int(self.headers.get("content-length") or 0), 65536))
            self._send(204, b"", "text/plain")
            return
        if path == "/upload-echo":
            self._upload_echo()
            return
        if path == "/files/export":
            # An "Export" form: the file is the answer to the POST itself, for the signed-in browser only; the same
            # address fetched again with GET is not found (as on many sites).
            self.rfile.read(min(int(self.headers.get("content-length") or 0), 65536))
            self._private_report("orders.csv")
            return
        if path == "/files/endless":
            self._endless()
            return
        if path == "/files/export-huge":
            # An answer that announces 200 MiB: refused on its headers, before a byte of it is read.
            self.send_response(200)
            self.send_header("content-type", "application/octet-stream")
            self.send_header("content-length", str(200 << 20))
            self.end_headers()
            with contextlib.suppress(OSError):
                self.wfile.write(b"\0" * 65536)
            return
        # The form's real submission target: a page that says what was posted.
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(min(length, 65536)).decode(errors="replace")
        page = f"<!doctype html><title>Posted</title><h1>Posted</h1><p id=posted>{len(body)} bytes</p>"
        data = page.encode()
        self.send_response(200)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _upload_echo(self) -> None:
        """A multipart form's target that says what it received: each file's field, name, size and sha256."""
        length = int(self.headers.get("content-length") or 0)
        if length > MAX_UPLOAD_ECHO:
            self._send(413, b"too large", "text/plain")
            return
        body = self.rfile.read(length)
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"content-type: {self.headers.get('content-type', '')}\r\n\r\n".encode() + body)
        rows = []
        for part in message.walk():
            filename = part.get_filename()
            if filename is None:
                continue
            payload = part.get_payload(decode=True)
            data = payload if isinstance(payload, bytes) else b""
            field = str(part.get_param("name", header="content-disposition") or "")
            rows.append(f"<li class=file data-field='{html.escape(field)}' "
                        f"data-name='{html.escape(filename)}' data-size={len(data)} "
                        f"data-sha256={hashlib.sha256(data).hexdigest()}>{html.escape(filename)}</li>")
        page = f"<!doctype html><title>Received</title><h1>Received</h1><ul id=received>{''.join(rows)}</ul>"
        self._send(200, page.encode(), "text/html; charset=utf-8")


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # the browser closing a connection mid-request is not a test failure


@contextlib.contextmanager
def site_server(tls: tuple[Path, Path] | None = None) -> Iterator[str]:
    """Serves tests/site on 127.0.0.1:<free port>, over HTTPS with ``tls``'s certificate and key when given; yields
    the base URL."""
    srv = _Server(("127.0.0.1", 0), functools.partial(_Handler, directory=str(SITE)))
    if tls is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(*tls)
        srv.socket = context.wrap_socket(srv.socket, server_side=True)
    with serving(srv) as port:
        yield f"{'http' if tls is None else 'https'}://127.0.0.1:{port}"


@contextlib.contextmanager
def serving(srv: http.server.HTTPServer) -> Iterator[int]:
    """Runs ``srv`` in a thread until the block ends; yields its port."""
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(srv.server_address[1])
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=10)


@contextlib.contextmanager
def chromium(ext: Path, user_data_dir: Path, start_url: str, log: Path | None = None,
             extra: tuple[str, ...] = ()) -> Iterator[subprocess.Popen[bytes]]:
    """Headless Chromium with the extension loaded; killed (its whole process group) on exit."""
    cmd = [CHROMIUM, *FLAGS, *extra, f"--user-data-dir={user_data_dir}",
           f"--disable-extensions-except={ext}", f"--load-extension={ext}", start_url]
    err = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                            start_new_session=True)
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
        if log:
            err.close()  # type: ignore[union-attr]


@contextlib.asynccontextmanager
async def playwright_browser(ext: Path, user_data_dir: Path, start_url: str, extra: tuple[str, ...] = (),
                             downloads: Path | None = None) -> AsyncIterator[BrowserContext]:
    """The same Chromium and extension under Playwright, for tests that need a person's clicks.

    DevTools is attached here, which keeps the service worker alive: lifetime tests use `chromium()`. ``downloads``:
    the folder the browser saves the person's downloads in (Playwright's own temporary one when not given).
    """
    flags = [f for f in FLAGS if not f.startswith("--headless")]
    async with async_playwright() as p:
        ctx = await p.chromium.launch_persistent_context(
            str(user_data_dir), executable_path=CHROMIUM, headless=True, no_viewport=True,
            ignore_default_args=["--disable-extensions"],
            args=[*flags, *extra, f"--disable-extensions-except={ext}", f"--load-extension={ext}"],
            downloads_path=downloads,
        )
        # Generous bounds, not speed targets: a loaded 2-core machine must not fail a correct UI.
        ctx.set_default_timeout(30_000)
        expect.set_options(timeout=15_000)
        try:
            await ctx.pages[0].goto(start_url)
            yield ctx
        finally:
            await ctx.close()


async def service_worker_url(ctx: BrowserContext) -> str:
    """Waits for the extension's service worker to run and returns its URL."""
    workers = [w for w in ctx.service_workers if w.url.startswith(f"chrome-extension://{extension_id()}/")]
    if workers:
        return workers[0].url
    worker = await ctx.wait_for_event(
        "serviceworker", lambda w: w.url.startswith(f"chrome-extension://{extension_id()}/"), timeout=30_000
    )
    return str(worker.url)


async def open_panel(ctx: BrowserContext) -> Page:
    """The side panel's page, opened as a tab at a side panel's size."""
    page = await ctx.new_page()
    await page.set_viewport_size({"width": 400, "height": 720})
    await page.goto(f"chrome-extension://{extension_id()}/panel/sidepanel.html")
    return page


# For `side_panel()`: a DevTools port beside Playwright's pipe, written to <profile>/DevToolsActivePort.
SIDE_PANEL_FLAGS = ("--remote-debugging-port=0",)


async def snap(page: Page, name: str) -> None:
    """A screenshot of ``page`` in front, into docs/screenshots (the panel's states the docs show)."""
    await page.bring_to_front()
    await page.screenshot(path=str(screenshot_dir() / name))


@contextlib.asynccontextmanager
async def panel_browser(url: str, key: str, site: str, tmp: Path, *, autopilot: bool = False,
                        extra: tuple[str, ...] = ()) -> AsyncIterator[BrowserContext]:
    """The browser of a panel test: Chromium under Playwright on the test site, the extension set to reach the pod
    at ``url`` with ``key`` (autopilot off unless asked: risky steps come to the panel); ``extra``: Chromium flags
    of the module's own (a feature it turns on)."""
    ext = stage_extension(tmp / "ext", {"url": url, "key": key, "autopilot": autopilot})
    async with playwright_browser(ext, tmp / "profile", f"{site}/index.html", extra=extra) as ctx:
        yield ctx


@contextlib.asynccontextmanager
async def unpaired_panel(site: str, tmp: Path) -> AsyncIterator[Page]:
    """The panel's page of an extension with no pod set (nothing dials out): for the extension's own modules."""
    ext = stage_extension(tmp / "ext", {})
    async with playwright_browser(ext, tmp / "profile", f"{site}/index.html") as ctx:
        yield await open_panel(ctx)


@contextlib.asynccontextmanager
async def side_panel(ctx: BrowserContext, user_data_dir: Path) -> AsyncIterator[Page]:
    """The panel opened as Chrome's own side panel of the first window, as a Playwright page.

    `chrome.sidePanel.open()` needs a user gesture: Playwright's evaluate in an extension page is one
    (a tab opened for it and closed again). Playwright does not list a side panel among a launched
    context's pages, but a second connection over the DevTools port (the browser must have been
    started with SIDE_PANEL_FLAGS) does.
    """
    url = f"chrome-extension://{extension_id()}/panel/sidepanel.html"
    opener = await ctx.new_page()
    try:
        await opener.goto(url)
        await opener.evaluate("""async () => {
            const [w] = await chrome.windows.getAll({windowTypes: ['normal']});
            await chrome.sidePanel.open({windowId: w.id});
        }""")
    finally:
        await opener.close()
    port = (user_data_dir / "DevToolsActivePort").read_text().split()[0]
    async with async_playwright() as p:
        browser = await p.chromium.connect_over_cdp(f"http://127.0.0.1:{port}")

        def panels() -> list[Page]:
            return [pg for c in browser.contexts for pg in c.pages if pg.url == url]

        await eventually(lambda: bool(panels()), 30)
        yield panels()[0]


async def page_at(context: BrowserContext, url: str, *, prefix: bool = False) -> Page:
    """The one page of `context` at `url` (or at an address starting with it), once Playwright knows it is there.

    The extension answers a navigation when Chrome says the tab has loaded; Playwright hears of the same navigation
    through its own DevTools events, which on a busy machine come a moment later. Reading `context.pages` at once
    then finds the page still at its old address.
    """

    def matching() -> list[Page]:
        return [p for p in context.pages if (p.url.startswith(url) if prefix else p.url == url)]

    await eventually(lambda: bool(matching()), 15)
    [page] = matching()
    return page


def jpeg_size(data: bytes) -> tuple[int, int]:
    """Width and height from a JPEG's SOF marker, so the test decodes the real bytes it got."""
    if data[:3] != b"\xff\xd8\xff":
        raise ValueError("not a JPEG")
    i = 2
    while i < len(data):
        if data[i] != 0xFF:
            raise ValueError("corrupt JPEG marker stream")
        marker = data[i + 1]
        length = int.from_bytes(data[i + 2:i + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            h = int.from_bytes(data[i + 5:i + 7], "big")
            w = int.from_bytes(data[i + 7:i + 9], "big")
            return w, h
        i += 2 + length
    raise ValueError("no frame header in JPEG")
