// browser_download (docs/files.md): a file fetched with the person's browser (their cookies), or caught at its
// answer (lib/held-downloads.js), into the agent's working folder in the pod. The body goes to the pod as it is read,
// in chunks (file-transfer.js): binary frames with a window in flight and each chunk's sha256 where the pod offers
// them, else JSON one at a time with the whole body hashed here.

import { ToolError, BAD_ARGS, BAD_TARGET, BAD_URL, LOAD_FAILED, NOT_FOUND, TIMEOUT, TOOL_ERROR } from './errors.js';
import { humanSize } from './guard.js';
import { text, withPage } from './results.js';
import { Sha256 } from './sha256.js';
import { MAX_HELD_FILE_BYTES, PENDING_SECONDS } from './downloads.js';
import { META } from './protocol.js';
import { BYTES, FRAME_ROOM, IN_PLACE } from './rpc.js';
import {
  ANSWER_MS, CHUNK, MAX_NAME, MAX_TYPE, hex, podRequest, toBase64, transferOf, windowOf,
} from './file-transfer.js';

const DOWNLOAD_META = META.download;
const WRITE = '_openab/file/write';
const NOT_HTTP = {
  'file:': 'a file on the person\'s own computer is not the page\'s to give',
  'data:': 'its bytes are in the URL itself',
  'blob:': 'it is a page\'s own object, which exists only inside that page',
  'javascript:': 'it is a script, not a file',
  'chrome:': 'it is one of the browser\'s own pages',
};

function downloadFile(args) {
  const f = transferOf(args, 'browser_download');
  if (!Number.isSafeInteger(f.max_bytes) || f.max_bytes < 0) {
    throw new ToolError(BAD_ARGS, 'the pod opened the download without its cap (max_bytes); nothing was done');
  }
  return { transfer: f.transfer, max: f.max_bytes, window: windowOf(f) };
}

/** The URL to fetch, absolute and http(s) only: anything else is refused, saying why. */
export function downloadUrl(raw) {
  const s = String(raw ?? '').trim();
  let u;
  try {
    u = new URL(s);
  } catch {
    throw new ToolError(BAD_URL, `"${s.slice(0, 200)}" is not an absolute URL; give the file's http(s) URL`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') {
    const why = NOT_HTTP[u.protocol] || 'only files a web server serves can be downloaded';
    throw new ToolError(BAD_URL, `only http(s) URLs can be downloaded, not ${u.protocol} (${why}); nothing was downloaded`);
  }
  if (u.username || u.password) throw new ToolError(BAD_URL, 'a URL with a user name or password in it is not downloaded; nothing was downloaded');
  return u.href;
}

/**
 * The file's name as its server suggests it: Content-Disposition's `filename*` (RFC 6266/8187), else its
 * `filename`, else the URL's last part. Raw: the pod makes it safe for its folder (docs/files.md). Pure.
 */
export function suggestedName(disposition, url) {
  const d = String(disposition || '');
  const star = /filename\*\s*=\s*([^']*)'[^']*'([^;]+)/i.exec(d);
  if (star) {
    try {
      return decodeURIComponent(star[2].trim()).slice(0, MAX_NAME);
    } catch {
      /* not percent-encoded after all: the plain filename, or the URL, names it */
    }
  }
  const plain = /(?:^|;)\s*filename\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;]*))/i.exec(d);
  if (plain) {
    const name = plain[1] !== undefined ? plain[1].replace(/\\(.)/g, '$1') : plain[2].trim();
    if (name) return name.slice(0, MAX_NAME);
  }
  try {
    const last = new URL(url).pathname.split('/').filter(Boolean).pop() || '';
    return (decodeURIComponent(last) || 'download').slice(0, MAX_NAME);
  } catch {
    return 'download';
  }
}

/** Where the call's download comes from: `{url, how}`; the guard's site rules are asked by the caller. */
async function source(b, args, call) {
  const hasRef = args.ref != null && args.ref !== '';
  const hasUrl = args.url != null && args.url !== '';
  if (hasRef && hasUrl) throw new ToolError(BAD_ARGS, 'give "ref" or "url", not both');
  if (hasUrl) return { url: downloadUrl(args.url), how: 'url' };
  const tab = await b.tabs.target();
  if (hasRef) {
    const loc = await b.page.locate(tab, { ref: args.ref });
    const [d] = await b.page.exec(loc.target, 'describeTarget', [loc.spec]);
    if (!d || !d.result || d.result.error) throw b.page.error(d && d.result, loc, args);
    const desc = d.result.desc;
    if (!desc.href) {
      throw new ToolError(BAD_TARGET, `${loc.label} is not a link, so it has no address to download. If it is a button that ` +
        'starts a download, click it with browser_click, then call browser_download with no ref or url',
      `element: ${desc.role} "${desc.name}"`);
    }
    return { url: downloadUrl(desc.href), how: 'ref' };
  }
  const pending = b.files.downloads && (await b.files.downloads.take(tab.id, call.signal));
  if (!pending) {
    throw new ToolError(NOT_FOUND, 'no download is waiting from the agent tab: none started, or it was taken, or it started ' +
      `more than ${PENDING_SECONDS} s ago. Click the link or button that starts it, then call browser_download with no ref ` +
      'or url; or give the link\'s ref, or the file\'s url');
  }
  return { url: downloadUrl(pending.finalUrl || pending.url), how: 'click', fallbackName: pending.name,
    ...((pending.body || pending.over) && { held: pending }) };
}

/** A reader over bytes already held (a download caught at its answer, lib/held-downloads.js), as a body's reader reads. */
function heldReader(parts) {
  let i = 0;
  return { read: async () => (i < parts.length ? { done: false, value: parts[i++] } : { done: true }), cancel: async () => {} };
}

/** A download caught at its answer, its bytes already read in the browser: to the pod as a fetched one goes. */
async function downloadHeld(b, call, file, held, url) {
  if (held.over) {
    const size = held.size ? `${humanSize(held.size)}, ` : '';
    throw new ToolError(TOOL_ERROR, `the file the page sent (in answer to a ${held.method}) is ${size}over the ` +
      `${humanSize(MAX_HELD_FILE_BYTES)} the browser holds of a download it cannot fetch again; nothing was downloaded. ` +
      'If the site offers a link to the file, download that instead (browser_download with its ref)');
  }
  if (held.size > file.max) {
    throw new ToolError(TOOL_ERROR, `the file is ${humanSize(held.size)}, over the cap of ${file.max} bytes (${humanSize(file.max)}); ` +
      'nothing was downloaded');
  }
  const sum = await stream(b, call, file, heldReader(held.body || []));
  return downloaded(sum, held.mime, suggestedName(held.disposition, url) || 'download', url);
}

/** The call's result for a file now in the working folder. */
function downloaded(sum, contentType, name, url) {
  const type = String(contentType || '').slice(0, MAX_TYPE);
  // Without the file's sha256, each chunk's went with it, and the pod checked them (docs/files.md).
  const meta = { name, size: sum.size, ...(sum.sha256 && { sha256: sum.sha256 }), type, url };
  const digest = sum.sha256 ? `sha256 ${sum.sha256}` : 'each chunk\'s sha256 checked by the pod';
  const result = text(withPage(`downloaded ${sum.size} bytes (${humanSize(sum.size)}, ${digest}, type ` +
    `${JSON.stringify(type)}); the server named it ${JSON.stringify(name.slice(0, 200))}; its address is in the block below`,
  `URL: ${url}`));
  return { ...result, _meta: { [DOWNLOAD_META]: meta } };
}

/**
 * A body's reader that reads into the buffers it is given where the browser has one (a fetch's body is a byte
 * stream): the body's bytes then land in the download's chunk buffers, with no buffer of the browser's made for each
 * read and copied from (measured: 100 MiB read in 132-176 ms against 220-300).
 */
function bodyReader(body) {
  try {
    return body.getReader({ mode: 'byob' });
  } catch {
    return body.getReader();
  }
}

/**
 * One read of a body, within ANSWER_MS (the whole body is bounded by the call's signal and the cap); `into`: where a
 * reader of the first kind above puts the bytes (the view's buffer moves to the answer's value).
 */
async function readPiece(reader, into) {
  let timer;
  const idle = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new ToolError(TIMEOUT, `the server sent nothing for ${ANSWER_MS / 1000} s; the ` +
      'download was stopped and nothing was kept')), ANSWER_MS);
  });
  try {
    return await Promise.race([into ? reader.read(into) : reader.read(), idle]);
  } finally {
    clearTimeout(timer);
  }
}

async function download(b, args, call) {
  const file = downloadFile(args);
  const from = await source(b, args, call);
  const url = await call.going(from.url);
  call.throwIfCancelled();
  if (from.held) return downloadHeld(b, call, file, from.held, url);
  const stop = new AbortController();
  const signal = call.signal ? AbortSignal.any([call.signal, stop.signal]) : stop.signal;
  let res;
  try {
    // The person's cookies go with it: the worker's fetch is the browser's own (host access to every site).
    res = await fetch(url, { credentials: 'include', cache: 'no-store', redirect: 'follow', signal });
  } catch (e) {
    call.throwIfCancelled();
    throw new ToolError(LOAD_FAILED, `${url} could not be fetched; nothing was downloaded. The browser said:`, String(e.message || e));
  }
  const reader = res.body ? bodyReader(res.body) : null;
  try {
    const finalUrl = res.url || url;
    // A redirect is a page's choice of where the file comes from: the person's site rules are asked again.
    if (finalUrl !== url) call.destination(downloadUrl(finalUrl));
    if (!res.ok) {
      throw new ToolError(LOAD_FAILED, `the server answered HTTP ${res.status} (its address is in the block below); ` +
        'nothing was downloaded', `URL: ${finalUrl}`);
    }
    const announced = Number(res.headers.get('content-length'));
    if (Number.isFinite(announced) && announced > file.max) {
      throw new ToolError(TOOL_ERROR, `the file is ${humanSize(announced)}, over the cap of ${file.max} bytes (${humanSize(file.max)}); ` +
        'nothing was downloaded');
    }
    const sum = await stream(b, call, file, reader);
    const name = suggestedName(res.headers.get('content-disposition'), finalUrl) || from.fallbackName || 'download';
    return downloaded(sum, res.headers.get('content-type'), name, finalUrl);
  } finally {
    stop.abort();
    if (reader) reader.cancel().catch(() => {});
  }
}

/**
 * The body to the pod in chunks of at most CHUNK bytes, stopped at the cap. To a pod that offered binary frames: each
 * chunk with its sha256 (WebCrypto, native, taken while the body is read on), `file.window` chunks in flight, and the
 * pod hashes the file; to any other, in JSON, each write answered before the next, the whole body hashed here
 * (lib/sha256.js).
 */
export async function stream(b, call, file, reader) {
  const hash = file.window ? null : new Sha256();
  const flying = [];
  // A chunk's bytes with FRAME_ROOM free in front of them in their buffer: its frame is built there (lib/rpc.js).
  const chunkBuffer = () => new Uint8Array(new ArrayBuffer(FRAME_ROOM + CHUNK), FRAME_ROOM, CHUNK);
  let buf = chunkBuffer();
  let filled = 0;
  let sent = 0;
  let written = 0;
  let queue = Promise.resolve(); // the frames go in order, each once its digest is taken
  const spare = []; // chunk buffers whose frame went
  const answered = (end) => (r) => {
    if (!r || r.written !== end) {
      throw new ToolError(TOOL_ERROR, `the pod counted ${r && r.written} bytes written where ${end} were sent; ` +
        'the download was stopped');
    }
    written = end;
  };
  // `whole`: a chunk's bytes as the body gave them, sent from there instead of copied into a buffer first.
  const flush = async (whole) => {
    if (!whole && !filled) return;
    const chunk = whole || buf.subarray(0, filled);
    const params = { transfer: file.transfer, offset: sent };
    const end = sent + chunk.length;
    sent = end;
    if (!whole) filled = 0;
    if (!file.window) {
      params.data = toBase64(chunk);
      answered(end)(await podRequest(b, call, WRITE, params, 'take the file'));
      return;
    }
    // The frame's until it is sent, then reused: a download allocates a window of them, not 200.
    const held = whole ? null : buf;
    if (held) buf = spare.pop() || chunkBuffer();
    const digest = crypto.subtle.digest('SHA-256', chunk); // WebCrypto copies the bytes as it is called
    // The queue holds each frame until the one before it went, not until it was answered: the answer comes wrapped,
    // since a promise returned bare would be adopted, and each chunk would wait for the last one's answer (one chunk
    // in flight, whatever the window).
    const went = queue.then(async () => {
      params.sha256 = hex(await digest);
      params[BYTES] = chunk;
      if (held) params[IN_PLACE] = true;
      // The frame is written in the chunk's own buffer and sent as the request is made (lib/rpc.js), and the
      // socket's send copies it as it is called (Chrome's WebSocket queues a copy): so the buffer is free to read
      // into again once the request is made. Were the copy ever made later, the reused bytes would differ from the
      // digest taken above, and the pod would refuse the chunk rather than keep it.
      const answer = podRequest(b, call, WRITE, params, 'take the file');
      answer.catch(() => {}); // taken by `acked` below
      if (held) spare.push(held);
      return { answer };
    });
    queue = went;
    const acked = went.then((w) => w.answer).then(answered(end));
    acked.catch(() => {}); // awaited in its turn
    flying.push(acked);
    if (flying.length >= file.window) await flying.shift();
  };
  const over = () => new ToolError(TOOL_ERROR, `the download is over the cap of ${file.max} bytes ` +
    `(${humanSize(file.max)}): it was stopped and nothing was kept`);
  const byob = typeof ReadableStreamBYOBReader === 'function' && reader instanceof ReadableStreamBYOBReader;
  while (byob) {
    call.throwIfCancelled();
    const { done, value } = await readPiece(reader, new Uint8Array(buf.buffer, FRAME_ROOM + filled, CHUNK - filled));
    // The read moved the buffer: the same bytes, the ones read before included, are the value's buffer now.
    if (!value) throw new ToolError(TOOL_ERROR, 'the browser gave back no buffer for the body\'s bytes; nothing was kept');
    buf = new Uint8Array(value.buffer, FRAME_ROOM, CHUNK);
    if (done) break;
    if (sent + filled + value.length > file.max) throw over();
    if (hash) hash.update(value);
    filled += value.length;
    if (filled === CHUNK) await flush();
  }
  while (!byob) {
    call.throwIfCancelled();
    const { done, value } = reader ? await readPiece(reader) : { done: true };
    if (done) break;
    if (sent + filled + value.length > file.max) throw over();
    if (hash) hash.update(value);
    for (let at = 0; at < value.length;) {
      if (!filled && value.length - at >= CHUNK) {
        await flush(value.subarray(at, at + CHUNK));
        at += CHUNK;
        continue;
      }
      const take = Math.min(CHUNK - filled, value.length - at);
      buf.set(value.subarray(at, at + take), filled);
      filled += take;
      at += take;
      if (filled === CHUNK) await flush();
    }
  }
  await flush();
  while (flying.length) await flying.shift();
  return { size: written, sha256: hash ? hash.hex() : null };
}

export const DOWNLOAD_TOOLS = {
  browser_download: download,
};
