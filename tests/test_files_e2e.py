"""Files across the gap end to end (docs/files.md): the official `mcp` client as the agent, the real gateway, a fake
extension on the real `/acp` socket that reads an upload and writes a download chunk by chunk with
``_openab/file/read`` and ``write``, through the proxy and through the bridge."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest
from bridge_harness import bridge_pod, browser_session, relay_params, text_of
from fake_extension import FakeExtension, RemoteError, connect_extension, text_result
from gateway_harness import RunningGateway, run_gateway
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult
from waits import eventually

from openab_browser.core.files import CHUNK
from openab_browser.core.mcp.access import HttpEndpoint
from openab_browser.core.mcp.audit_read import read_records
from openab_browser.core.pod import Pod
from openab_browser.core.statedir import session_workdir
from openab_browser.gateway.cli import main

pytestmark = pytest.mark.anyio

BROWSER = {"type": "acp", "name": "browser", "serverId": "browser-1"}
READ, WRITE = "_openab/file/read", "_openab/file/write"


@dataclass
class Browser:
    """The file tools of one fake extension: what it was sent, what it got, what it will download."""

    ext: FakeExtension
    session_id: str = ""
    uploads: list[tuple[dict[str, Any], bytes]] = field(default_factory=list)
    download_body: bytes = b""
    reported: dict[str, Any] = field(default_factory=dict)  # overrides of the _meta it reports
    during: Callable[[dict[str, Any]], Awaitable[None]] | None = None  # run once a transfer is known
    stall_after_first_write: bool = False

    async def upload(self, arguments: dict[str, Any]) -> dict[str, Any]:
        file = arguments["file"]
        if self.during is not None:
            await self.during(file)
        got, offset = b"", 0
        while True:
            chunk = await self.ext.request(READ, {"sessionId": self.session_id, "transfer": file["transfer"],
                                                  "offset": offset})
            data = base64.b64decode(chunk["data"])
            got += data
            offset += len(data)
            if chunk["eof"]:
                break
        self.uploads.append((arguments, got))
        assert hashlib.sha256(got).hexdigest() == file["sha256"]
        return text_result(f"{file['name']} ({file['size']} bytes) set on {arguments['ref']}")

    async def download(self, arguments: dict[str, Any]) -> dict[str, Any]:
        file = arguments["file"]
        self.uploads.append((arguments, b""))
        body, offset = self.download_body, 0
        while offset < len(body) or offset == 0:
            piece = body[offset:offset + CHUNK]
            answer = await self.ext.request(WRITE, {"sessionId": self.session_id, "transfer": file["transfer"],
                                                    "offset": offset, "data": base64.b64encode(piece).decode()})
            offset += len(piece)
            assert answer == {"written": offset}
            if self.stall_after_first_write:
                await self.ext.closed.wait()  # a download that never ends: only a cancel stops it
            if not piece:
                break
        meta = {"name": "invoice.pdf", "size": len(body), "sha256": hashlib.sha256(body).hexdigest(),
                "type": "application/pdf", "url": "https://shop.test/invoice?id=7", **self.reported}
        return {"content": [{"type": "text", "text": "downloaded"}],
                "_meta": {"dev.openab/download": meta, "dev.openab/guard": "allowed"}}

    def install(self) -> None:
        file_schema = {"type": "object", "properties": {"ref": {"type": "string"}, "path": {"type": "string"}}}
        self.ext.add_tool("browser_upload", self.upload, file_schema)
        self.ext.add_tool("browser_download", self.download, file_schema)


def workdir(pod: Pod, session_id: str) -> Path:
    return session_workdir(pod.settings.state_dir, pod.sessions.naming.channel(session_id), create=True)


@contextlib.asynccontextmanager
async def proxied_browser(gateway: RunningGateway) -> AsyncIterator[tuple[Browser, Client]]:
    """A fake extension with the file tools, its session, and the agent's MCP client on the session's proxy."""
    async with connect_extension(gateway.ws_url, gateway.token) as ext:
        browser = Browser(ext)
        browser.install()
        await ext.initialize()
        browser.session_id = await ext.new_session([BROWSER])
        await gateway.pod.tunnels.wait_attached(browser.session_id, timeout=10)
        session = gateway.pod.sessions.get(browser.session_id)
        assert session is not None and gateway.pod.browser is not None
        entry = (await gateway.pod.browser.open(session)).entry
        assert isinstance(entry, HttpEndpoint)
        headers = {"Authorization": f"Bearer {entry.token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http,
            Client(streamable_http_client(entry.url, http_client=http), mode="legacy") as client,
        ):
            yield browser, client


def text(result: CallToolResult) -> str:
    return text_of(result)


def files_in(work: Path) -> list[str]:
    """The files in a working folder, at any depth, by their relative paths; the browser socket's own left out."""
    return sorted(str(p.relative_to(work)) for p in work.rglob("*")
                  if not p.is_dir() and not p.name.startswith(".openab-browser"))


async def upload_and_download(pod: Pod, browser: Browser, client: Client) -> None:
    """One upload and one download, as the contract says they go, and their audit records."""
    work = workdir(pod, browser.session_id)
    body = os.urandom(CHUNK * 2 + 12345)  # three chunks, the last a short one
    (work / "report.bin").write_bytes(body)
    # The agent's own `file` is never sent on: the pod's replaces it.
    result = await client.call_tool("browser_upload", {"ref": "e12", "path": "report.bin",
                                                       "file": {"transfer": "forged", "name": "/etc/shadow"}})
    assert not result.is_error, text(result)
    sent, got = browser.uploads[-1]
    assert got == body
    assert set(sent) == {"ref", "file"}  # no `path`: the browser has no use for it
    digest = hashlib.sha256(body).hexdigest()
    assert sent["file"]["name"] == "report.bin" and sent["file"]["size"] == len(body)
    assert sent["file"]["sha256"] == digest and sent["file"]["transfer"] != "forged"
    assert len(sent["file"]["transfer"]) >= 22  # 128 bits, url-safe base64

    browser.download_body = os.urandom(CHUNK + 7)
    result = await client.call_tool("browser_download", {"url": "https://shop.test/invoice?id=7"})
    assert not result.is_error, text(result)
    sent, _ = browser.uploads[-1]
    assert sent["file"]["max_bytes"] == pod.settings.max_file_bytes and sent["url"] == "https://shop.test/invoice?id=7"
    down = hashlib.sha256(browser.download_body).hexdigest()
    assert text(result) == (f"Downloaded from https://shop.test/invoice?id=7 to downloads/invoice.pdf in your working "
                            f"folder: {CHUNK + 7} bytes, sha256 {down}, type application/pdf. Read it there with your "
                            "own tools.")
    placed = work / "downloads" / "invoice.pdf"
    assert placed.read_bytes() == browser.download_body
    assert stat.S_IMODE(placed.stat().st_mode) == 0o600
    assert sorted(str(p.relative_to(work)) for p in work.rglob("*") if not p.name.startswith(".openab-browser")) == [
        "downloads", "downloads/invoice.pdf", "report.bin"]
    assert len(pod.files or ()) == 0  # both transfers forgotten with their calls

    records = [r for r in read_records(pod.settings.state_dir) if "file" in r]
    assert [r["file"] for r in records[-2:]] == [
        {"name": "report.bin", "size": len(body), "sha256": digest},
        {"name": "downloads/invoice.pdf", "size": CHUNK + 7, "sha256": down},
    ]


async def test_an_upload_and_a_download_through_the_proxy(capsys: pytest.CaptureFixture[str]) -> None:
    async with run_gateway() as gateway, proxied_browser(gateway) as (browser, client):
        await upload_and_download(gateway.pod, browser, client)
        state_dir = gateway.pod.settings.state_dir
        capsys.readouterr()
        # `openab audit SESSION` shows each file call's file: its name, size and the start of its digest.
        assert main(["audit", browser.session_id, "--state-dir", str(state_dir)]) == 0
        lines = capsys.readouterr().out.splitlines()
    header = lines[0].split()  # the other columns are tests/test_audit.py's
    assert header[:2] == ["TIME", "TOOL"] and header[-1] == "FILE", header
    upload, download = lines[-2], lines[-1]
    assert "browser_upload" in upload and f"report.bin {CHUNK * 2 + 12345} B sha256:" in upload
    assert "browser_download" in download and f"downloads/invoice.pdf {CHUNK + 7} B sha256:" in download


async def test_an_upload_and_a_download_through_the_bridge() -> None:
    async with bridge_pod() as pod:
        browser: Browser | None = None
        async with browser_session(pod, "alice") as (session_id, ext):
            browser = Browser(ext, session_id)
            browser.install()
            await ext.tools_changed()
            async with Client(relay_params(pod.channel(session_id), pod.socket), mode="auto") as client:
                await upload_and_download(pod.gateway.pod, browser, client)


def stolen_reads(theirs: str, own: str, transfer: str) -> list[dict[str, Any]]:
    """What another socket (holding session ``theirs``) tries on ``own``'s upload ``transfer``: the transfer id
    under its own session, and under the session it does not hold."""
    return [{"sessionId": theirs, "transfer": transfer, "offset": 0},
            {"sessionId": own, "transfer": transfer, "offset": 0}]


async def test_another_sessions_transfer_or_session_is_refused_on_the_socket() -> None:
    async with (
        run_gateway() as gateway,
        proxied_browser(gateway) as (alice, client),
        connect_extension(gateway.ws_url, gateway.token) as mallory,
    ):
        await mallory.initialize()
        mallory_session = await mallory.new_session([])
        (workdir(gateway.pod, alice.session_id) / "secret.txt").write_bytes(b"alice's")
        refusals: list[str] = []

        async def attack(file: dict[str, Any]) -> None:
            for params in stolen_reads(mallory_session, alice.session_id, file["transfer"]):
                try:
                    await mallory.request(READ, params)
                except RemoteError as exc:
                    assert exc.code == -32602
                    refusals.append(str(exc.message))
                else:
                    raise AssertionError("another socket read alice's file")
            with pytest.raises(RemoteError, match="cannot be written"):  # an upload is never written to
                await alice.ext.request(WRITE, {"sessionId": alice.session_id, "transfer": file["transfer"],
                                                "offset": 0, "data": ""})

        alice.during = attack
        result = await client.call_tool("browser_upload", {"ref": "e1", "path": "secret.txt"})
        assert not result.is_error, text(result)
        assert refusals[0] == "no such transfer in this session: it ended or was never opened"
        assert refusals[1].startswith("Unknown session")
        with pytest.raises(RemoteError, match="no such transfer in this session"):  # over once the call ended
            await alice.ext.request(READ, {"sessionId": alice.session_id, "transfer": alice.uploads[0][0]["file"][
                "transfer"], "offset": 0})


async def test_refused_paths_never_reach_the_browser() -> None:
    async with run_gateway() as gateway, proxied_browser(gateway) as (browser, client):
        work = workdir(gateway.pod, browser.session_id)
        (work / "out").symlink_to("/etc")
        for path, words in (("../x", "'..'"), ("/etc/passwd", "absolute"), ("out/passwd", "leads out")):
            result = await client.call_tool("browser_upload", {"ref": "e1", "path": path})
            assert result.is_error and text(result).startswith("browser_upload was not run: ") and words in text(result)
        result = await client.call_tool("browser_download", {"url": "file:///etc/passwd"})
        assert result.is_error and "http or https" in text(result)
        assert browser.uploads == []


async def test_a_digest_mismatch_removes_the_download() -> None:
    async with run_gateway() as gateway, proxied_browser(gateway) as (browser, client):
        browser.download_body = b"%PDF-1.7 ..."
        browser.reported = {"sha256": "ab" * 32}
        result = await client.call_tool("browser_download", {"ref": "e3", "path": "bill.pdf"})
        assert result.is_error and "sha256 the browser gave is not" in text(result) and "removed" in text(result)
        assert files_in(workdir(gateway.pod, browser.session_id)) == []


async def test_a_write_past_the_cap_fails_the_call_and_leaves_nothing() -> None:
    async with run_gateway(max_file_bytes=1000) as gateway, proxied_browser(gateway) as (browser, client):
        browser.download_body = b"x" * 1500
        result = await client.call_tool("browser_download", {"url": "https://shop.test/big"})
        assert result.is_error
        assert "over the cap of 1000 bytes" in text(result), text(result)
        assert browser.uploads[-1][0]["file"]["max_bytes"] == 1000
        assert files_in(workdir(gateway.pod, browser.session_id)) == []


async def test_a_download_that_stops_sending_fails_and_is_cancelled_in_the_browser() -> None:
    async with run_gateway(file_idle_timeout=0.5) as gateway, proxied_browser(gateway) as (browser, client):
        browser.download_body = b"y" * 100
        browser.stall_after_first_write = True
        result = await client.call_tool("browser_download", {"url": "https://shop.test/slow"})
        assert result.is_error and "no chunk came for 0.5 s" in text(result), text(result)
        # Cancelled in the browser (the tunnel's mcp/cancel, which the fake reads in its own task), and the partial
        # file removed.
        await eventually(lambda: browser.ext.cancelled, what="the download's mcp/cancel at the extension")
        assert files_in(workdir(gateway.pod, browser.session_id)) == []


async def test_a_third_transfer_at_once_in_a_session_is_refused_and_the_slot_comes_back() -> None:
    async with run_gateway() as gateway, proxied_browser(gateway) as (browser, client):
        work = workdir(gateway.pod, browser.session_id)
        for name in ("a.txt", "b.txt", "c.txt"):
            (work / name).write_text(name)
        arrived, release = asyncio.Semaphore(0), asyncio.Event()

        async def hold(_file: dict[str, Any]) -> None:
            arrived.release()
            await asyncio.wait_for(release.wait(), 30)

        browser.during = hold
        first = asyncio.ensure_future(client.call_tool("browser_upload", {"ref": "e1", "path": "a.txt"}))
        second = asyncio.ensure_future(client.call_tool("browser_upload", {"ref": "e2", "path": "b.txt"}))
        async with asyncio.timeout(30):
            await arrived.acquire()
            await arrived.acquire()
        refused = await client.call_tool("browser_upload", {"ref": "e3", "path": "c.txt"})
        assert refused.is_error
        assert "2 files are already being transferred in this session" in text(refused)
        release.set()
        async with asyncio.timeout(30):
            assert not (await first).is_error and not (await second).is_error
        browser.during = None
        assert not (await client.call_tool("browser_upload", {"ref": "e3", "path": "c.txt"})).is_error
        assert sorted(got for _args, got in browser.uploads) == [b"a.txt", b"b.txt", b"c.txt"]


async def test_closing_the_session_mid_download_removes_its_partial_file() -> None:
    async with run_gateway() as gateway, proxied_browser(gateway) as (browser, client):
        work = workdir(gateway.pod, browser.session_id)
        browser.download_body = b"z" * 10
        browser.stall_after_first_write = True
        call = asyncio.ensure_future(client.call_tool("browser_download", {"url": "https://shop.test/f"}))
        downloads = work / "downloads"  # no path given: the temporary file is made where the file will land
        await eventually(lambda: downloads.is_dir() and any(p.name.startswith(".openab-download-")
                                                            for p in downloads.iterdir()),
                         what="the download's temporary file")
        await eventually(lambda: any(p.stat().st_size == 10 for p in downloads.iterdir()
                                     if p.name.startswith(".openab-download-")), what="its first chunk")
        await browser.ext.request("session/close", {"sessionId": browser.session_id})
        # The eviction failed the transfer before session/close answered; the call's endpoint closed with the
        # session, so what the agent's client makes of it is its own business.
        assert len(gateway.pod.files or ()) == 0
        assert files_in(work) == []
        call.cancel()
        with contextlib.suppress(BaseException):
            await call
