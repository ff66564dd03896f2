"""The extension's file modules on their own, as shipped, in its own page (docs/files.md): the streamed digest, the
server's name for a file, binary frames at the extension's end, which answers are files, sizes in a person's words.
The whole path, with the pod and the person, is tests/browser/test_files.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from playwright.async_api import Page

from .harness import unpaired_panel
from .test_units import run

pytestmark = pytest.mark.anyio

WRITE = "_openab/file/write"


@pytest.fixture(scope="module")
async def page(site: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Page]:
    async with unpaired_panel(site, tmp_path_factory.mktemp("files-units")) as page:
        yield page


async def test_the_streamed_digest_is_sha256(page: Page) -> None:
    same = await page.evaluate("""async () => {
        const { Sha256 } = await import('/lib/sha256.js');
        const out = [];
        for (const n of [0, 1, 55, 56, 63, 64, 65, 127, 1000, 300000]) {
            const bytes = crypto.getRandomValues(new Uint8Array(n > 65536 ? 65536 : n));
            const data = new Uint8Array(n);
            for (let i = 0; i < n; i += bytes.length || 1) {
                data.set(bytes.subarray(0, Math.min(bytes.length, n - i)), i);
            }
            const h = new Sha256();
            for (let i = 0; i < n; i += 37) h.update(data.subarray(i, i + 37));
            const want = Array.from(new Uint8Array(await crypto.subtle.digest('SHA-256', data)),
                (b) => b.toString(16).padStart(2, '0')).join('');
            out.push(h.hex() === want);
        }
        return out;
    }""")
    assert same == [True] * 10


@pytest.mark.parametrize(("disposition", "url", "name"), [
    ('attachment; filename="report.csv"', "https://a.example/x", "report.csv"),
    ("attachment; filename*=UTF-8''na%C3%AFve%20plan.pdf", "https://a.example/x", "naïve plan.pdf"),
    ('attachment; filename="fallback.txt"; filename*=UTF-8\'\'real.txt', "https://a.example/x", "real.txt"),
    ('attachment; filename="say \\"hi\\".txt"', "https://a.example/x", 'say "hi".txt'),
    ("attachment", "https://a.example/files/Q3%20sales.xlsx?v=2", "Q3 sales.xlsx"),
    ("", "https://a.example/", "download"),
])
async def test_the_servers_name_for_a_file(page: Page, disposition: str, url: str, name: str) -> None:
    assert await run(page, "tools-download.js", "m.suggestedName(arg[0], arg[1])", [disposition, url]) == name


RPC_FRAMES = """(async () => {
  const frames = [];
  const peer = new m.RpcPeer((f) => frames.push(f), { onRequest: async () => null, onNotification: () => {} });
  const params = { transfer: 't', offset: 0, [m.BYTES]: new Uint8Array([7, 8, 9]) };
  const asked = peer.request('_openab/file/write', params, 5000);
  const sent = frames[0];
  const length = new DataView(sent.buffer).getUint32(1);
  const header = JSON.parse(new TextDecoder().decode(sent.subarray(5, 5 + length)));
  const answer = (version, id, declared, body, extra = []) => {
    const h = new TextEncoder().encode(JSON.stringify({ jsonrpc: '2.0', id, result: { eof: true, size: 2 } }));
    const f = new Uint8Array(5 + h.length + extra.length);
    new DataView(f.buffer).setUint8(0, version);
    new DataView(f.buffer).setUint32(1, declared === 'long' ? h.length + 50 : declared === null ? h.length : declared);
    f.set(h, 5);
    f.set(extra, 5 + h.length);
    return body ? f.buffer.slice(0, body) : f.buffer;
  };
  let settled = false;
  asked.then(() => { settled = true; }, () => { settled = true; });
  peer.receiveBinary(answer(1, header.id, 'long', null, [1, 2]));  // a header longer than the frame: dropped
  peer.receiveBinary(answer(1, header.id, 5000, null, [1, 2]));  // a header over 4096 bytes: dropped
  peer.receiveBinary(answer(2, header.id, null, null, [1, 2]));  // another version: dropped
  peer.receiveBinary(answer(1, header.id, null, 3));  // truncated before its header: dropped
  peer.receiveBinary(new ArrayBuffer(2));
  await new Promise((r) => setTimeout(r, 0));
  const early = settled;
  peer.receiveBinary(answer(1, header.id, null, null, [5, 6]));
  const got = await asked;
  return { version: sent[0], header, payload: Array.from(sent.subarray(5 + length)), early,
    bytes: Array.from(got[m.BYTES]), eof: got.eof, inJson: JSON.stringify(got) };
})()"""


async def test_binary_frames_at_the_extensions_end(page: Page) -> None:
    got = await run(page, "rpc.js", RPC_FRAMES)
    assert got["version"] == 1 and got["payload"] == [7, 8, 9]
    header = got["header"]
    assert header["method"] == WRITE and header["params"] == {"transfer": "t", "offset": 0}  # the bytes not in JSON
    assert got["early"] is False  # no broken frame settled the request
    assert got["bytes"] == [5, 6] and got["eof"] is True and "5" not in got["inJson"]


READ_BLOB = """(async () => {
  const { BYTES } = await import('/lib/rpc.js');
  const { CHUNK } = await import('/lib/file-transfer.js');
  const size = 17 * CHUNK + 3;  // past one Blob's stretch, the last chunk a short one
  const data = new Uint8Array(size);
  for (let i = 0; i < size; i += 65536) crypto.getRandomValues(data.subarray(i, Math.min(size, i + 65536)));
  const hex = async (b) => Array.from(new Uint8Array(await crypto.subtle.digest('SHA-256', b)),
    (v) => v.toString(16).padStart(2, '0')).join('');
  const whole = await hex(data);
  const upload = async (pod) => {
    const asked = [];
    const b = { files: { sessionId: () => 's', request: async (method, params) => {
      asked.push(params.offset);
      const chunk = data.slice(params.offset, Math.min(size, params.offset + CHUNK));
      const r = { eof: params.offset + CHUNK >= size, size: chunk.length, [BYTES]: chunk };
      if (pod !== 'no digests' && pod !== 'no digests, a chunk changed') r.sha256 = await hex(chunk);
      if (pod.endsWith('a chunk changed') && params.offset === 3 * CHUNK) chunk[9] ^= 1;
      if (r.eof && pod === 'digests') r.file_sha256 = whole;
      if (r.eof && pod === 'another file') r.file_sha256 = '0'.repeat(64);
      return r;
    } } };
    try {
      const blob = await m.readBlob(b, { throwIfCancelled() {}, signal: null },
        { transfer: 't', size, sha256: whole, window: 8 });
      return { same: blob.size === size && (await hex(await blob.arrayBuffer())) === whole, asked: asked.length };
    } catch (e) {
      return { error: String(e.message), asked: asked.length };
    }
  };
  const out = {};
  for (const pod of ['digests', 'no digests', 'a chunk changed', 'not vouched', 'another file',
    'no digests, a chunk changed']) out[pod] = await upload(pod);
  return out;
})()"""


async def test_an_upload_in_binary_frames_is_kept_only_as_the_bytes_its_digests_name(page: Page) -> None:
    # Where messages are cloned, each chunk is checked against the digest the pod sent with it and the file against
    # the last answer's word; a pod that sends no digests has the whole file hashed here after its last chunk.
    got = await run(page, "tools-upload.js", READ_BLOB)
    assert got["digests"] == {"same": True, "asked": 18}
    assert got["no digests"] == {"same": True, "asked": 18}
    changed = got["a chunk changed"]
    assert changed["error"] == "the chunk at 1572864 is not the bytes whose sha256 the pod sent with it (the file " \
        "may have changed since the call began); nothing was uploaded"
    for pod in ("not vouched", "another file"):
        assert "did not confirm that the bytes it sent have the sha256 the person was shown" in got[pod]["error"]
    assert "do not match the sha256 the person was shown" in got["no digests, a chunk changed"]["error"]


STREAM = """(async ([size, piece, kind]) => {
  const { RpcPeer } = await import('/lib/rpc.js');
  const body = new Uint8Array(size);
  for (let i = 0; i < size; i += 65536) crypto.getRandomValues(body.subarray(i, Math.min(size, i + 65536)));
  const hex = async (b) => Array.from(new Uint8Array(await crypto.subtle.digest('SHA-256', b)),
    (v) => v.toString(16).padStart(2, '0')).join('');
  let outstanding = 0;
  let most = 0;
  const offsets = [];
  const received = [];
  const checked = [];
  let inPlace = 0;
  // The extension's own peer frames each write, as on the /acp socket; the pod's side reads the frames.
  const peer = new RpcPeer((frame) => {
    if (frame.buffer.byteLength !== frame.length) inPlace += 1;  // a view of the chunk's own buffer
    const copy = frame.slice();  // WebSocket.send copies the frame as it is called
    const length = new DataView(copy.buffer).getUint32(1);
    const { id, params } = JSON.parse(new TextDecoder().decode(copy.subarray(5, 5 + length)));
    const bytes = copy.subarray(5 + length);
    offsets.push(params.offset);
    received.push(bytes);
    checked.push(hex(bytes).then((h) => h === params.sha256));
    outstanding += 1;
    most = Math.max(most, outstanding);
    const written = params.offset + bytes.length;
    setTimeout(() => {
      outstanding -= 1;
      peer.receive(JSON.stringify({ jsonrpc: '2.0', id, result: { written } }));
    }, 20);
  }, { onRequest: async () => null, onNotification: () => {} });
  const b = { files: { sessionId: () => 's', request: (method, params, ms) => peer.request(method, params, ms) } };
  let at = 0;
  const next = () => {
    const value = body.slice(at, at + piece);  // a body's read is bytes of its own
    at += value.length;
    return value;
  };
  // A fetch's body is a byte stream, read into the download's buffers; a download held at its answer is read as is.
  const reader = kind === 'bytes'
    ? new ReadableStream({ type: 'bytes', pull: (c) => {
      if (at < size) return c.enqueue(next());
      c.close();
      return c.byobRequest && c.byobRequest.respond(0);  // a read waiting gets its buffer back, empty, and done
    } }).getReader({ mode: 'byob' })
    : { read: async () => (at >= size ? { done: true } : { done: false, value: next() }) };
  const got = await m.stream(b, { throwIfCancelled() {}, signal: null }, { transfer: 't', max: 1 << 30, window: 4 },
    reader);
  const whole = new Uint8Array(await new Blob(received).arrayBuffer());
  return { most, offsets, size: got.size, same: (await hex(whole)) === (await hex(body)),
    digests: (await Promise.all(checked)).every(Boolean), inPlace };
})(arg)"""


@pytest.mark.parametrize("kind", ["bytes", "held"])
@pytest.mark.parametrize("piece", [40_000, 1_300_000])  # reads smaller than a chunk, and larger
async def test_a_download_keeps_its_window_of_chunks_in_flight(page: Page, piece: int, kind: str) -> None:
    # Each chunk goes once its digest is taken and the one before it went, not once the pod answered the one before.
    got = await run(page, "tools-download.js", STREAM, [8_000_000, piece, kind])
    assert got["size"] == 8_000_000 and len(got["offsets"]) == 16
    assert got["offsets"] == [i * 512 * 1024 for i in range(16)]
    assert got["same"] and got["digests"]  # the pod gets the body's bytes, each chunk with its own digest
    assert got["most"] == 4  # the window, every time the pod is slower than the body
    # A chunk gathered in the download's buffers is framed where it lies; one a body's read gave whole is copied.
    if kind == "bytes" or piece < 512 * 1024:
        assert got["inPlace"] == 16
    else:
        assert 0 < got["inPlace"] < 16


FRAMED_IN_PLACE = """(() => {
  const bytes = crypto.getRandomValues(new Uint8Array(700));
  const sessionId = `sess_${crypto.randomUUID()}`;  // the pod's form
  const framed = (transfer) => {
    const out = {};
    for (const how of ['copied', 'in place']) {
      const sent = [];
      const peer = new m.RpcPeer((f) => sent.push(f), { onRequest: async () => null, onNotification: () => {} });
      peer._nextId = Number.MAX_SAFE_INTEGER;  // the longest id, as the longest offset below
      const buffer = new Uint8Array(m.FRAME_ROOM + bytes.length).fill(0xee);
      const chunk = buffer.subarray(m.FRAME_ROOM);
      chunk.set(bytes);
      const params = { sessionId, transfer, offset: Number.MAX_SAFE_INTEGER, sha256: 'f'.repeat(64), [m.BYTES]: chunk };
      if (how === 'in place') params[m.IN_PLACE] = true;
      peer.request('_openab/file/write', params, 5000).catch(() => {});
      peer.close();
      const frame = sent[0];
      out[how] = { frame: Array.from(frame), inBuffer: frame.buffer === buffer.buffer,
        kept: chunk.every((v, i) => v === bytes[i]) };
    }
    return out;
  };
  return { pods: framed('t'.repeat(22)), longer: framed('t'.repeat(400)) };
})()"""


async def test_a_frame_built_in_place_is_the_frame_a_copy_makes(page: Page) -> None:
    # A download's chunk buffers keep FRAME_ROOM free in front of the bytes for the frame's prefix and header; a
    # header too large for it (a pod with longer ids) is framed the copying way.
    got = await run(page, "rpc.js", FRAMED_IN_PLACE)
    pods, longer = got["pods"], got["longer"]
    assert pods["in place"]["frame"] == pods["copied"]["frame"]  # byte for byte
    assert pods["in place"]["inBuffer"] is True and pods["copied"]["inBuffer"] is False
    assert len(pods["copied"]["frame"]) - 700 == 279  # the largest prefix and header a pod's ids make
    assert longer["in place"]["frame"] == longer["copied"]["frame"]
    assert longer["in place"]["inBuffer"] is False and len(longer["copied"]["frame"]) - 700 > 512
    assert all(side["kept"] for case in (pods, longer) for side in case.values())  # the bytes themselves untouched


@pytest.mark.parametrize(("method", "status", "headers", "download"), [
    ("POST", 200, {"Content-Type": "text/csv", "Content-Disposition": 'attachment; filename="a.csv"'}, True),
    ("GET", 200, {"content-type": "application/octet-stream"}, True),
    ("GET", 200, {"content-type": "application/zip"}, True),
    ("POST", 200, {"content-type": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"}, True),
    # What Chrome shows in the tab goes on to it: pages, text, images, PDFs, JSON, feeds.
    ("POST", 200, {"content-type": "text/html; charset=utf-8"}, False),
    ("GET", 200, {"content-type": "text/csv"}, False),
    ("GET", 200, {"content-type": "image/png"}, False),
    ("GET", 200, {"content-type": "application/pdf"}, False),
    ("GET", 200, {"content-type": "application/json"}, False),
    ("GET", 200, {"content-type": "application/atom+xml"}, False),
    ("GET", 200, {"content-disposition": "inline", "content-type": "application/pdf"}, False),
    # No type: Chrome sniffs it. Not 2xx, or HEAD: no file.
    ("GET", 200, {}, False),
    ("POST", 500, {"content-disposition": "attachment"}, False),
    ("GET", 302, {"content-type": "application/zip"}, False),
    ("HEAD", 200, {"content-disposition": "attachment"}, False),
])
async def test_which_answers_are_files_and_not_pages(
        page: Page, method: str, status: int, headers: dict[str, str], download: bool) -> None:
    as_sent = [{"name": k, "value": v} for k, v in headers.items()]
    assert await run(page, "held-downloads.js", "m.isDownload(...arg)", [method, status, as_sent]) is download


@pytest.mark.parametrize(("size", "said"), [(0, "0 bytes"), (1, "1 byte"), (1023, "1023 bytes"), (1536, "1.5 KB"),
                                            (1_572_864, "1.5 MB"), (734_003_200, "700 MB"), (3 << 30, "3.0 GB")])
async def test_sizes_as_a_person_reads_them(page: Page, size: int, said: str) -> None:
    assert await run(page, "guard.js", "m.humanSize(arg)", size) == said
