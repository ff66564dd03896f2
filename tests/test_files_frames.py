"""Files in binary frames (docs/files.md): a fake extension on the real `/acp` socket of the real gateway reads an
upload and writes a download as binary frames, several chunks in flight, and the pod holds the same rules as for
JSON: only a transfer of a session the socket holds, at most its window ahead, each chunk the bytes its digest
names; a frame that is not one is answered with an error, and the socket goes on."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import os
import struct
from collections.abc import AsyncIterator
from typing import Any

import pytest
from fake_extension import RemoteError, connect_extension
from gateway_harness import RunningGateway, run_gateway
from mcp import Client
from test_files_e2e import READ, WRITE, Browser, files_in, proxied_browser, stolen_reads, text, workdir

from openab_browser.core.acp.file_methods import MAX_FRAME_HEADER, frame
from openab_browser.core.files import CHUNK, FRAME_VERSION, WINDOW
from openab_browser.core.mcp_vocabulary import META_DOWNLOAD

pytestmark = pytest.mark.anyio


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class FramedBrowser(Browser):
    """The fake extension's file tools in binary frames, as lib/tools-upload.js and tools-download.js move them when
    the pod offers it: reads `window` at a time, each download chunk with its sha256 and the file's own digest left
    out."""

    corrupt_chunk: int | None = None  # the write whose bytes differ from its digest

    async def upload(self, arguments: dict[str, Any]) -> dict[str, Any]:
        file = arguments["file"]
        assert file["frames"] == FRAME_VERSION and file["window"] == WINDOW
        if self.during is not None:
            await self.during(file)
        count = max(1, -(-file["size"] // CHUNK))
        answers: list[Any] = []
        for start in range(0, count, file["window"]):  # a window's reads sent at once, then the next window's
            answers += await asyncio.gather(*(
                self.ext.request_frame(READ, {"sessionId": self.session_id, "transfer": file["transfer"],
                                              "offset": i * CHUNK})
                for i in range(start, min(count, start + file["window"]))))
        got = b"".join(a["bytes"] for a in answers)
        assert [a["eof"] for a in answers] == [False] * (count - 1) + [True]
        assert [a["size"] for a in answers] == [len(a["bytes"]) for a in answers]
        # Each chunk comes with its digest, and the last with the file's: every byte left in order and hashed to it.
        assert [a["sha256"] for a in answers] == [digest(a["bytes"]) for a in answers]
        assert [a.get("file_sha256") for a in answers] == [None] * (count - 1) + [file["sha256"]]
        assert file["sha256"] == digest(got)
        self.uploads.append((arguments, got))
        return {"content": [{"type": "text", "text": f"{file['name']} set"}]}

    async def download(self, arguments: dict[str, Any]) -> dict[str, Any]:
        file = arguments["file"]
        assert file["frames"] == FRAME_VERSION and file["window"] == WINDOW
        self.uploads.append((arguments, b""))
        body = self.download_body
        pieces = [body[at:at + CHUNK] for at in range(0, len(body), CHUNK)]
        sends = []
        for i, piece in enumerate(pieces):
            sent = piece if i != self.corrupt_chunk else bytes([piece[0] ^ 1]) + piece[1:]
            sends.append(self.ext.request_frame(WRITE, {"sessionId": self.session_id, "transfer": file["transfer"],
                                                        "offset": i * CHUNK, "sha256": digest(piece)}, sent))
        answers = await asyncio.gather(*sends, return_exceptions=True)
        failed = [a for a in answers if isinstance(a, BaseException)]
        if failed:
            return {"content": [{"type": "text", "text": f"the pod refused: {failed[0]}"}], "isError": True}
        assert answers[-1] == {"written": len(body)}
        meta = {"name": "data.bin", "size": len(body), "type": "application/octet-stream",
                "url": "https://shop.test/data.bin", **self.reported}
        return {"content": [{"type": "text", "text": "downloaded"}], "_meta": {META_DOWNLOAD: meta}}


async def test_an_upload_and_a_download_in_binary_frames_with_chunks_in_flight() -> None:
    async with run_framed() as (gateway, browser, client):
        work = workdir(gateway.pod, browser.session_id)
        body = os.urandom(CHUNK * (WINDOW + 3) + 99)  # more chunks than a window, the last a short one
        (work / "big.bin").write_bytes(body)
        result = await client.call_tool("browser_upload", {"ref": "e1", "path": "big.bin"})
        assert not result.is_error, text(result)
        assert browser.uploads[-1][1] == body

        empty = work / "empty.bin"
        empty.write_bytes(b"")
        result = await client.call_tool("browser_upload", {"ref": "e1", "path": "empty.bin"})
        assert not result.is_error and browser.uploads[-1][1] == b"", text(result)

        browser.download_body = os.urandom(CHUNK * 5 + 1)
        result = await client.call_tool("browser_download", {"url": "https://shop.test/data.bin", "path": "d.bin"})
        assert not result.is_error, text(result)
        # The file's digest is the pod's own, of the bytes that arrived, each chunk checked against the browser's.
        assert f"sha256 {digest(browser.download_body)}" in text(result)
        assert (work / "d.bin").read_bytes() == browser.download_body
        assert len(gateway.pod.files or ()) == 0


async def test_a_chunk_that_is_not_the_bytes_its_digest_names_fails_the_download_and_leaves_nothing() -> None:
    async with run_framed() as (gateway, browser, client):
        browser.download_body = os.urandom(CHUNK * 3)
        browser.corrupt_chunk = 1
        result = await client.call_tool("browser_download", {"url": "https://shop.test/data.bin"})
        assert result.is_error and "is not the bytes the browser read" in text(result), text(result)
        assert files_in(workdir(gateway.pod, browser.session_id)) == []


async def test_a_download_of_json_chunks_without_the_files_digest_is_refused() -> None:
    # A chunk that came without its digest (JSON, as an older extension sends it) leaves the file's own digest to the
    # browser's word: without it, nothing is kept.
    async with run_framed() as (gateway, browser, client):
        browser.download_body = b"%PDF-1.7 ..."

        async def json_download(arguments: dict[str, Any]) -> dict[str, Any]:
            file = arguments["file"]
            await browser.ext.request(WRITE, {"sessionId": browser.session_id, "transfer": file["transfer"],
                                              "offset": 0, "data": base64.b64encode(browser.download_body).decode()})
            meta = {"name": "x.pdf", "size": len(browser.download_body), "type": "application/pdf", "url": ""}
            return {"content": [{"type": "text", "text": "downloaded"}], "_meta": {META_DOWNLOAD: meta}}

        browser.ext.add_tool("browser_download", json_download)
        result = await client.call_tool("browser_download", {"url": "https://shop.test/x.pdf"})
        assert result.is_error and "sha256 the browser gave is not" in text(result), text(result)
        assert files_in(workdir(gateway.pod, browser.session_id)) == []


async def test_another_sessions_transfer_or_an_unknown_one_is_refused_in_a_frame() -> None:
    async with run_framed() as (gateway, alice, client), connect_extension(gateway.ws_url, gateway.token) as mallory:
        await mallory.initialize()
        mallory_session = await mallory.new_session([])
        (workdir(gateway.pod, alice.session_id) / "secret.txt").write_bytes(b"alice's")
        refusals: list[str] = []

        async def attack(file: dict[str, Any]) -> None:
            for params in (*stolen_reads(mallory_session, alice.session_id, file["transfer"]),
                           {"sessionId": mallory_session, "transfer": "A" * 22, "offset": 0}):  # no transfer's id
                with pytest.raises(RemoteError) as refused:
                    await mallory.request_frame(READ, params)
                assert refused.value.code == -32602
                refusals.append(str(refused.value.message))
            with pytest.raises(RemoteError, match="cannot be written"):  # an upload is never written to
                await alice.ext.request_frame(WRITE, {"sessionId": alice.session_id, "transfer": file["transfer"],
                                                      "offset": 0}, b"x")

        alice.during = attack
        result = await client.call_tool("browser_upload", {"ref": "e1", "path": "secret.txt"})
        assert not result.is_error, text(result)
        assert alice.uploads[-1][1] == b"alice's"
        assert refusals[0] == refusals[2] == "no such transfer in this session: it ended or was never opened"
        assert refusals[1].startswith("Unknown session")


async def test_a_read_past_the_window_is_refused_and_the_transfer_goes_on() -> None:
    async with run_framed() as (gateway, browser, client):
        body = os.urandom(CHUNK * (WINDOW + 2))
        (workdir(gateway.pod, browser.session_id) / "w.bin").write_bytes(body)

        async def overflow(file: dict[str, Any]) -> None:
            params = {"sessionId": browser.session_id, "transfer": file["transfer"]}
            with pytest.raises(RemoteError, match=f"more than {WINDOW} chunks ahead") as refused:
                await browser.ext.request_frame(READ, {**params, "offset": WINDOW * CHUNK})
            assert refused.value.code == -32602
            # The last chunk of the window is not past it.
            last = await browser.ext.request_frame(READ, {**params, "offset": (WINDOW - 1) * CHUNK})
            assert last["bytes"] == body[(WINDOW - 1) * CHUNK:WINDOW * CHUNK]

        browser.during = overflow
        result = await client.call_tool("browser_upload", {"ref": "e1", "path": "w.bin"})
        assert not result.is_error, text(result)
        assert browser.uploads[-1][1] == body


async def test_the_last_chunk_vouches_for_the_files_digest_only_when_every_byte_left_in_order() -> None:
    # The extension keeps a chunk's bytes on its digest and the whole file on the last answer's word (docs/files.md):
    # a last chunk read before the ones ahead of it says nothing of the file, whatever is read after.
    async with run_framed() as (gateway, browser, client):
        body = os.urandom(CHUNK * 2 + 5)
        (workdir(gateway.pod, browser.session_id) / "o.bin").write_bytes(body)
        seen: list[dict[str, Any]] = []

        async def out_of_order(file: dict[str, Any]) -> None:
            params = {"sessionId": browser.session_id, "transfer": file["transfer"]}
            for offset in (2 * CHUNK, 0, CHUNK):
                seen.append(await browser.ext.request_frame(READ, {**params, "offset": offset}))

        browser.during = out_of_order
        result = await client.call_tool("browser_upload", {"ref": "e1", "path": "o.bin"})
        assert not result.is_error, text(result)
        last, first, middle = seen
        assert last["eof"] and "file_sha256" not in last and last["sha256"] == digest(body[2 * CHUNK:])
        assert "file_sha256" not in first and "file_sha256" not in middle
        assert b"".join(a["bytes"] for a in (first, middle, last)) == body
        assert browser.uploads[-1][1] == body  # then read in order: the last answer vouches (FramedBrowser checks)


async def test_a_file_that_changed_after_the_call_began_fails_at_its_last_chunk_which_vouches_for_nothing() -> None:
    async with run_framed() as (gateway, browser, client):
        path = workdir(gateway.pod, browser.session_id) / "c.bin"
        before = os.urandom(CHUNK * 2 + 7)
        path.write_bytes(before)
        seen: list[dict[str, Any]] = []

        async def rewrite(file: dict[str, Any]) -> None:
            path.write_bytes(os.urandom(CHUNK * 2 + 7))  # the same size, other bytes: after the digest was taken
            params = {"sessionId": browser.session_id, "transfer": file["transfer"]}
            for offset in (0, CHUNK):
                seen.append(await browser.ext.request_frame(READ, {**params, "offset": offset}))
            with pytest.raises(RemoteError, match="changed while it was uploaded"):
                await browser.ext.request_frame(READ, {**params, "offset": 2 * CHUNK})

        browser.during = rewrite
        result = await client.call_tool("browser_upload", {"ref": "e1", "path": "c.bin"})
        assert result.is_error, text(result)
        # Each chunk's digest is the one it had when the call began: the extension refuses the first that changed.
        assert [a["sha256"] for a in seen] == [digest(before[:CHUNK]), digest(before[CHUNK:2 * CHUNK])]
        assert all(a["sha256"] != digest(a["bytes"]) for a in seen)
        assert not any("file_sha256" in a for a in seen)
        assert browser.uploads == []


async def test_a_frame_that_is_not_one_is_answered_with_an_error_and_the_socket_goes_on() -> None:
    async with run_framed() as (_gateway, browser, _client):
        ext = browser.ext
        header = b'{"jsonrpc":"2.0","id":7,"method":"_openab/file/read","params":{}}'
        broken = (
            (b"\x01\x00", "starts with 5 bytes"),  # truncated before its header's length
            (struct.pack(">BI", FRAME_VERSION, len(header) + 10) + header, "truncated"),  # shorter than it says
            (struct.pack(">BI", FRAME_VERSION, MAX_FRAME_HEADER + 1) + b"{" * (MAX_FRAME_HEADER + 1), "at most"),
            (struct.pack(">BI", FRAME_VERSION, 3) + b"{x}", "not JSON"),
            (struct.pack(">BI", FRAME_VERSION, 2) + b"[]", "not a JSON object"),
        )
        # Another kind of binary frame (not starting as a file frame) is ignored, as every binary frame once was:
        # the first answer below is the next frame's.
        await ext.ws.send(struct.pack(">BI", 9, len(header)) + header)
        for data, words in broken:
            await ext.ws.send(data)
            error = await ext.next_message()
            assert error["id"] is None and error["error"]["code"] == -32700, error
            assert words in error["error"]["message"], error
        await ext.ws.send(frame({"jsonrpc": "2.0", "id": "seven", "method": READ, "params": {}}))
        error = await ext.next_message()
        assert error["id"] is None and error["error"]["code"] == -32600, error
        with pytest.raises(RemoteError, match="binary frames carry") as refused:
            await ext.request_frame("session/new", {})
        assert refused.value.code == -32601
        with pytest.raises(RemoteError, match="a read carries no bytes"):
            await ext.request_frame(READ, {"sessionId": browser.session_id, "transfer": "x", "offset": 0}, b"x")
        with pytest.raises(RemoteError, match="sha256"):
            await ext.request_frame(WRITE, {"sessionId": browser.session_id, "transfer": "x", "offset": 0,
                                            "sha256": "not hex"}, b"x")
        # The socket goes on: the pod still holds the session and answers for it.
        with pytest.raises(RemoteError, match="no such transfer in this session"):
            await ext.request_frame(READ, {"sessionId": browser.session_id, "transfer": "x", "offset": 0})
        assert not ext.closed.is_set()


async def test_a_binary_frame_over_the_transport_limit_closes_the_socket_with_1009() -> None:
    async with run_framed(max_frame_bytes=1 << 20) as (_gateway, browser, _client):
        await browser.ext.ws.send(b"\x01" + bytes(1 << 20))
        async with asyncio.timeout(10):
            await browser.ext.closed.wait()
        assert browser.ext.close_code == 1009


# -- the rig ----------------------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def run_framed(**settings: Any) -> AsyncIterator[tuple[RunningGateway, FramedBrowser, Client]]:
    """The real gateway, a fake extension with the framed file tools, its session, and the agent's MCP client."""
    async with run_gateway(**settings) as gateway, proxied_browser(gateway) as (plain, client):
        browser = FramedBrowser(plain.ext, plain.session_id)
        browser.install()
        yield gateway, browser, client
