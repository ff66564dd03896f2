// Files across the gap (docs/files.md): browser_upload puts a file from the agent's working folder in the pod into a
// page's file field or drop zone, and browser_download fetches a file with the person's browser (their cookies) into
// that folder. The bytes travel on the /acp socket in chunks the extension asks for (`_openab/file/read`) or sends
// (`_openab/file/write`). A pod that offers them (`file.frames`, `file.window`) gets them as binary frames, up to its
// window of chunks in flight, each download chunk with its sha256; any other gets JSON and base64, each chunk answered
// before the next. The pod rewrites the agent's call before it comes here: `file` names the transfer it opened for
// this one call, and the agent can never set it.

import { ToolError, BAD_ARGS, BAD_TARGET, BAD_URL, CANCELLED, LOAD_FAILED, NOT_FOUND, STALE_REF, TIMEOUT, TOOL_ERROR } from './errors.js';
import { humanSize } from './guard.js';
import { text, withPage } from './results.js';
import { Sha256 } from './sha256.js';
import { MAX_HELD_FILE_BYTES, PENDING_SECONDS } from './downloads.js';
import { META } from './protocol.js';
import { BYTES } from './rpc.js';

// The contract's chunk (docs/files.md): at most this many bytes per read answer and per write.
export const CHUNK = 512 * 1024;
// Raw bytes per piece handed to the page, and how many at once. An extension's messages are JSON unless its manifest
// opts in to the structured clone (`message_serialization`, Chrome 148+): then a piece goes as its bytes, else as
// base64, which costs the worker, the browser process (it relays the message) and the page about 40 ms a MiB between
// them; a message costs about a third of a script's (executeScript) with the same argument, and several overlap.
const PIECE = 1024 * 1024;
const PIECES_IN_FLIGHT = 8;
// Bytes per Blob where messages are cloned: Chrome registers each Blob with the browser process, about 1.5 ms apiece
// whatever its size (measured: 100 MiB as 200 Blobs of 512 KiB took 150-440 ms of the worker, as 13 of 8 MiB 65-180).
const STRETCH = 8 * 1024 * 1024;
// Both ends of a message follow the one manifest, so the worker knows what the page receives; a Chrome older than the
// key ignores it (and keeps JSON), so its version is read too.
// Read at the first upload, not on import: the module is also loaded where there is no browser (the catalogue's
// checks under Node).
let cloned = null;
export function clonedMessages() {
  if (cloned === null) {
    const major = Number((/Chrome\/(\d+)/.exec(globalThis.navigator?.userAgent || '') || [])[1] || 0);
    cloned = chrome.runtime.getManifest().message_serialization === 'structured_clone' && major >= 148;
  }
  return cloned;
}
// Each answer of the pod's, each read of a download's body, and each answer of the page to a piece of the file,
// within this (the pod's own idle bound is 30 s).
const ANSWER_MS = 30_000;
// An upload is held whole to be checked before the page gets it: in the worker's memory, or as Blobs in the browser
// process where messages are cloned (its pieces wait in the page's isolated world meanwhile, out of the page's reach).
const MAX_UPLOAD = 512 * 1024 * 1024;
const MAX_NAME = 1000;
const MAX_TYPE = 200;
const DOWNLOAD_META = META.download;
// The binary frames this extension speaks (lib/rpc.js), and the most chunks it keeps in flight whatever a pod offers.
const FRAME_VERSION = 1;
const MAX_WINDOW = 16;
const NO_BYTES = new Uint8Array(0);
const READ = '_openab/file/read';
const WRITE = '_openab/file/write';
const NOT_HTTP = {
  'file:': 'a file on the person\'s own computer is not the page\'s to give',
  'data:': 'its bytes are in the URL itself',
  'blob:': 'it is a page\'s own object, which exists only inside that page',
  'javascript:': 'it is a script, not a file',
  'chrome:': 'it is one of the browser\'s own pages',
};

// -- the pod's side of a transfer ----------------------------------------------------------------------------------

/** The transfer the pod opened for this call, from the rewritten arguments; throws when the pod sent none. */
function transferOf(args, tool) {
  const f = args.file;
  if (!f || typeof f !== 'object' || typeof f.transfer !== 'string' || !f.transfer) {
    throw new ToolError(BAD_ARGS, `${tool} needs the openab pod to carry the file: this call came without the transfer ` +
      'the pod opens for it (an older pod?). Nothing was done');
  }
  return f;
}

/** The chunks to keep in flight: the pod's window when it offered binary frames, else 0 (JSON, one at a time). */
function windowOf(f) {
  if (f.frames !== FRAME_VERSION || !Number.isSafeInteger(f.window) || f.window < 1) return 0;
  return Math.min(f.window, MAX_WINDOW);
}

function uploadFile(args) {
  const f = transferOf(args, 'browser_upload');
  const size = f.size;
  if (!Number.isSafeInteger(size) || size < 0 || typeof f.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(f.sha256) ||
      typeof f.name !== 'string' || !f.name) {
    throw new ToolError(BAD_ARGS, 'the pod described the file without its name, size or sha256; nothing was done');
  }
  if (size > MAX_UPLOAD) {
    throw new ToolError(BAD_ARGS, `the file is ${humanSize(size)}; the browser takes uploads of at most ${humanSize(MAX_UPLOAD)}`);
  }
  return { transfer: f.transfer, name: f.name.slice(0, MAX_NAME), size, sha256: f.sha256,
    type: typeof f.type === 'string' ? f.type.slice(0, MAX_TYPE) : '', window: windowOf(f) };
}

/** A request of ours on the /acp socket, bounded, and given up at once when the call is cancelled. */
function podRequest(b, call, method, params, doing) {
  call.throwIfCancelled();
  const sent = b.files.request(method, { sessionId: b.files.sessionId(), ...params }, ANSWER_MS);
  return new Promise((resolve, reject) => {
    const cancelled = () => reject(new ToolError(CANCELLED, 'the call was cancelled'));
    if (call.signal) call.signal.addEventListener('abort', cancelled, { once: true });
    sent.then(resolve, (e) => reject(new ToolError(TOOL_ERROR, `the pod did not ${doing}: ${String(e.message || e)}`)))
      .finally(() => call.signal && call.signal.removeEventListener('abort', cancelled));
  });
}

export function toBase64(bytes) {
  if (typeof bytes.toBase64 === 'function') return bytes.toBase64();
  let bin = '';
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(bin);
}

export function fromBase64(b64) {
  if (typeof b64 !== 'string') throw new TypeError('not base64');
  if (typeof Uint8Array.fromBase64 === 'function') return Uint8Array.fromBase64(b64);
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

const hex = (buffer) => Array.from(new Uint8Array(buffer), (v) => v.toString(16).padStart(2, '0')).join('');

/**
 * Up to `window` of `count` requests in flight, in order: `ask(i)` starts the i-th, `took(i, answer)` takes its answer
 * (in order too). The first failure ends it; the answers still on their way are dropped.
 */
async function windowed(count, window, ask, took) {
  const flying = [];
  let next = 0;
  for (let i = 0; i < count; i++) {
    while (next < count && next - i < window) {
      const sent = ask(next++);
      sent.catch(() => {}); // awaited in its turn below; a later one's failure after an earlier one's is not unhandled
      flying.push(sent);
    }
    await took(i, await flying.shift());
  }
}

/** Chunk `i` of an upload's `count` in binary frames, `file.window` of them in flight, each answer to `took(i, r)`. */
function readChunks(b, call, file, count, took) {
  return windowed(count, file.window,
    (i) => podRequest(b, call, READ, { transfer: file.transfer, offset: i * CHUNK, [BYTES]: NO_BYTES }, 'give the file'),
    took);
}

/** The bytes of a read's answer `r` for chunk `i` of `count`: throws unless they are as many as were asked. */
function chunkOf(file, i, count, r) {
  const chunk = r && r[BYTES];
  const want = Math.min(CHUNK, file.size - i * CHUNK);
  if (!(chunk instanceof Uint8Array) || chunk.length !== want || r.eof !== (i === count - 1)) {
    throw new ToolError(TOOL_ERROR, `the pod sent ${chunk instanceof Uint8Array ? chunk.length : 'no'} bytes where ` +
      `${want} of the file's ${file.size} were asked; nothing was uploaded`);
  }
  return chunk;
}

/** The whole upload from the pod into `bytes` in binary frames, `file.window` chunks in flight; `took` after each. */
async function readFrames(b, call, file, bytes, took) {
  const count = Math.max(1, Math.ceil(file.size / CHUNK)); // a file of 0 bytes is one read, answered eof
  await readChunks(b, call, file, count, (i, r) => {
    const chunk = chunkOf(file, i, count, r);
    bytes.set(chunk, i * CHUNK);
    return took(bytes, i * CHUNK + chunk.length);
  });
}

/**
 * The upload from the pod in binary frames as one Blob (where messages are cloned), made of Blobs of STRETCH bytes as
 * the chunks come: the worker never holds the whole file in one buffer. Each chunk is checked against the sha256 the
 * pod sent with it (WebCrypto, on threads of its own, while the next chunks come), and the last answer must carry the
 * file's, which the pod sends only once every byte left it in order and hashed to the digest it announced before the
 * card (core/files/transfers.py): the Blob then holds the bytes whose sha256 the person was shown, with no pass over
 * the whole file after the last chunk. From a pod that sends no chunk digests (before them) the chunks are kept and
 * the whole file is hashed here after the last, as checkUpload does.
 */
export async function readBlob(b, call, file) {
  const count = Math.max(1, Math.ceil(file.size / CHUNK));
  const parts = [];
  const checks = [];
  let stretch = [];
  let stretched = 0;
  let kept = null; // every chunk, from a pod that sends no digests
  let last = null;
  await readChunks(b, call, file, count, async (i, r) => {
    const chunk = chunkOf(file, i, count, r);
    if (i === 0 && typeof r.sha256 !== 'string') kept = [];
    if (kept) kept.push(chunk);
    else checks.push(chunkChecked(chunk, r.sha256, i * CHUNK));
    stretch.push(chunk);
    stretched += chunk.length;
    if (stretched >= STRETCH || i === count - 1) {
      parts.push(new Blob(stretch));
      stretch = [];
      stretched = 0;
    }
    last = r;
    // A chunk unlike its digest stops the reads a window after it, and the checks waiting stay bounded.
    if (checks.length > file.window) await checks.shift();
  });
  if (kept) {
    const bytes = new Uint8Array(file.size);
    kept.reduce((at, c) => (bytes.set(c, at), at + c.length), 0);
    await checkUpload(file, bytes);
  } else {
    while (checks.length) await checks.shift();
    if (last.file_sha256 !== file.sha256) {
      throw new ToolError(TOOL_ERROR, 'the pod did not confirm that the bytes it sent have the sha256 the person was ' +
        'shown; nothing was uploaded');
    }
  }
  return new Blob(parts);
}

/**
 * Resolves once `chunk` has the sha256 the pod sent with it (`sha256`, taken with the file's when the call began),
 * else rejects saying which chunk differs.
 */
function chunkChecked(chunk, sha256, offset) {
  if (typeof sha256 !== 'string') {
    throw new ToolError(TOOL_ERROR, `the pod sent the chunk at ${offset} without its sha256, the chunks before it with ` +
      'theirs; nothing was uploaded');
  }
  const checked = crypto.subtle.digest('SHA-256', chunk).then((d) => {
    if (hex(d) !== sha256) {
      throw new ToolError(TOOL_ERROR, `the chunk at ${offset} is not the bytes whose sha256 the pod sent with it (the ` +
        'file may have changed since the call began); nothing was uploaded');
    }
  });
  checked.catch(() => {}); // awaited in its turn
  return checked;
}

/**
 * The whole upload from the pod, of the size the pod gave before the card (its digest is checkUpload's).
 * `took(bytes, n)` hears each time the first `n` bytes are in (awaited: it may hold the reads back).
 */
async function readUpload(b, call, file, took) {
  const bytes = new Uint8Array(file.size);
  await (file.window ? readFrames(b, call, file, bytes, took) : readJson(b, call, file, bytes, took));
  return bytes;
}

/** Throws unless `bytes` have the sha256 the pod gave before the card, the one the person was shown. */
async function checkUpload(file, bytes) {
  if (hex(await crypto.subtle.digest('SHA-256', bytes)) !== file.sha256) {
    throw new ToolError(TOOL_ERROR, 'the file\'s bytes do not match the sha256 the person was shown; nothing was uploaded');
  }
}

/** The whole upload from the pod into `bytes` in JSON, one chunk at a time (a pod that offers no binary frames). */
async function readJson(b, call, file, bytes, took) {
  let offset = 0;
  for (;;) {
    const r = await podRequest(b, call, READ, { transfer: file.transfer, offset }, 'give the file');
    let chunk;
    try {
      chunk = fromBase64(r && r.data);
    } catch {
      throw new ToolError(TOOL_ERROR, 'the pod sent a piece of the file that is not base64; nothing was uploaded');
    }
    if (chunk.length > CHUNK || offset + chunk.length > file.size) {
      throw new ToolError(TOOL_ERROR, `the pod sent more than the file's ${file.size} bytes; nothing was uploaded`);
    }
    bytes.set(chunk, offset);
    offset += chunk.length;
    await took(bytes, offset);
    if (r.eof === true) break;
    if (!chunk.length) throw new ToolError(TOOL_ERROR, 'the pod sent an empty piece before the end; nothing was uploaded');
  }
  if (offset !== file.size) {
    throw new ToolError(TOOL_ERROR, `the file came with ${offset} bytes, not the ${file.size} it had when the person was asked; ` +
      'nothing was uploaded');
  }
}

// -- browser_upload ------------------------------------------------------------------------------------------------

const SWAPPED = 'nothing was uploaded: the page changed or replaced the element after the person was asked, so the ' +
  'file was not given to it';

/** The element a call names, as the place for a file: `{first, res, at, spec}`, or the page's refusal. */
async function fileTarget(b, tab, args) {
  if (args.ref == null || args.ref === '') throw new ToolError(BAD_TARGET, 'give "ref": the file field or drop zone, from browser_snapshot');
  const loc = await b.page.locate(tab, { ref: args.ref });
  const [first] = await b.page.exec(loc.target, 'fileTarget', [loc.spec]);
  const res = first && first.result;
  if (!res || res.error) {
    if (res && res.error === 'bad_target') {
      throw new ToolError(BAD_TARGET, `${res.message} (${loc.label}); give the ref of a file field (an input of type file, ` +
        'or its label) or of the element files are dropped on', res.desc ? `element: ${res.desc.role} "${res.desc.name}"` : '');
    }
    throw b.page.error(res, loc, args);
  }
  return { first, res, label: loc.label, at: { tabId: tab.id, documentIds: [first.documentId] }, spec: { local: res.local } };
}

async function upload(b, args, call) {
  const file = uploadFile(args);
  const tab = await b.tabs.target();
  const { first, res, label, at, spec } = await fileTarget(b, tab, args);
  const desc = { ...res.desc, file: { name: file.name, size: file.size }, dropZone: res.kind === 'drop' };
  const show = (on) => b.page.exec(at, 'outline', [on ? spec : null]);
  await call.check('browser_upload', desc, {}, { url: tab.url, tabId: tab.id, ref: args.ref, show });
  call.throwIfCancelled();
  // The person said yes to this element in this document on this site: a page that swapped it meanwhile (another
  // field, another form, a frame that moved elsewhere) gets nothing, and nothing is read from the pod.
  const [again] = await b.page.exec(at, 'fileTarget', [spec]).catch(() => [null]);
  const now = again && again.result;
  if (!now || now.error || again.documentId !== first.documentId || now.kind !== res.kind || now.local !== res.local ||
      now.desc.fingerprint !== res.desc.fingerprint || now.origin !== res.origin) {
    throw new ToolError(STALE_REF, `${SWAPPED}. Nothing was read from your file. Take a new browser_snapshot and call ` +
      'browser_upload again if the task still needs it');
  }
  const key = crypto.randomUUID();
  const expected = { kind: res.kind, fingerprint: res.desc.fingerprint, origin: res.origin };
  let done;
  try {
    // The page's isolated world stages the pieces as they come from the pod; the page itself gets the file only at
    // fileCommit, once its sha256 is checked, and only if the element is still the one the person was asked about.
    await pageCall(b, at, 'fileBegin', [key, file.size]);
    if (file.window && clonedMessages()) {
      await toPage(at, { openab: 'filePiece', key, offset: 0, data: await readBlob(b, call, file) });
    } else {
      const feed = new PageFeed(at, key);
      const bytes = await readUpload(b, call, file, (got, n) => feed.upTo(got, n));
      // WebCrypto hashes on a thread of its own while the last pieces go to the page; the commit waits for both.
      const checked = checkUpload(file, bytes);
      checked.catch(() => {}); // awaited below, unless the page's pieces fail first
      await feed.upTo(bytes, file.size);
      await feed.drained();
      await checked;
    }
    call.throwIfCancelled();
    done = await pageCall(b, at, 'fileCommit', [key, spec, expected, { name: file.name, type: file.type }]);
  } catch (e) {
    b.page.exec(at, 'fileDiscard', [key]).catch(() => {});
    if (e instanceof ToolError && e.code === STALE_REF) {
      throw new ToolError(STALE_REF, `${SWAPPED} (${e.message.replace(/^stale_ref: /, '')}). Take a new browser_snapshot`);
    }
    throw e;
  }
  const said = `uploaded ${file.name} (${humanSize(file.size)}, ${file.size} bytes, sha256 ${file.sha256})`;
  const element = `element: ${res.desc.role} "${res.desc.name}"`;
  if (done.kind === 'drop') {
    const taken = done.taken ? '' : ' The page did not take the drop (its handler did not accept it): the element may ' +
      'not be a drop zone; look for a file field (an input of type file) instead.';
    return text(withPage(`${said}: dropped on ${label}.${taken} Take a new browser_snapshot to see what the page did.`, element));
  }
  const note = done.accepted ? '' : ` The field says which files it takes (accept="${res.accept.slice(0, 200)}"), and this ` +
    'file\'s name or type is not among them: the page may refuse it.';
  const several = res.multiple ? ' The field takes several files: it now holds this one (a person\'s pick replaces the selection too).' : '';
  return text(withPage(`${said} into the file field ${label}.${note}${several} Submitting the form is a separate step.`, element));
}

/**
 * The file's bytes into the page's isolated world (page/files.js) as they come from the pod, each message to the one
 * document the person was asked about (`at`). Where messages are JSON: base64 pieces, a few in flight. Where they are
 * cloned: each stretch of STRETCH bytes becomes a Blob as it comes (Chrome keeps a Blob's bytes in the browser
 * process), and the file goes as one Blob of them once it is all in, passed by reference: the page's renderer never
 * copies the bytes, and its File is made of the same Blob (readBlob does the same from binary frames).
 */
class PageFeed {
  constructor(at, key) {
    this.at = at;
    this.key = key;
    this.fed = 0;
    this.flying = [];
    this.parts = clonedMessages() ? [] : null;
  }

  /** Sends the whole pieces of the first `n` bytes not sent yet, and the last short one once `n` is the size. */
  async upTo(bytes, n) {
    if (this.parts) {
      if (n - this.fed >= STRETCH || (n === bytes.length && n > this.fed)) {
        this.parts.push(new Blob([bytes.subarray(this.fed, n)]));
        this.fed = n;
      }
      if (n === bytes.length && !this.whole) {
        this.whole = true;
        this.send(0, new Blob(this.parts));
      }
      return;
    }
    while (this.fed < n && (n - this.fed >= PIECE || n === bytes.length)) {
      const end = Math.min(this.fed + PIECE, n);
      this.send(this.fed, toBase64(bytes.subarray(this.fed, end)));
      this.fed = end;
      if (this.flying.length >= PIECES_IN_FLIGHT) await this.flying.shift();
    }
  }

  send(offset, data) {
    const sent = toPage(this.at, { openab: 'filePiece', key: this.key, offset, data });
    sent.catch(() => {}); // awaited in its turn
    this.flying.push(sent);
  }

  async drained() {
    while (this.flying.length) await this.flying.shift();
  }
}

/**
 * A piece of the file to the page's isolated world (page/files.js), in the one document the person was asked about,
 * and the page's answer, within ANSWER_MS: a page that never answers (its renderer hung, or frozen in a background
 * tab) ends the upload instead of holding the call until the pod's own bound.
 */
function toPage(at, message) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new ToolError(TIMEOUT, `the page did not take a piece of the file within ` +
      `${ANSWER_MS / 1000} s (its tab may be frozen or busy); nothing was uploaded`)), ANSWER_MS);
  });
  const sent = chrome.tabs.sendMessage(at.tabId, message, { documentId: at.documentIds[0] }).then(pageAnswer, () => {
    throw new ToolError(STALE_REF, 'stale_ref: the page was reloaded or closed while the file came');
  });
  return Promise.race([sent, late]).finally(() => clearTimeout(timer));
}

/** A page function's answer (page/files.js), its refusal as an error. */
function pageAnswer(res) {
  if (!res) throw new ToolError(STALE_REF, 'stale_ref: the page did not answer (it was reloaded or closed)');
  if (res.error) throw new ToolError(res.error === 'stale_ref' ? STALE_REF : TOOL_ERROR, `${res.error === 'stale_ref' ? 'stale_ref: ' : ''}${res.message}`);
  return res;
}

/** One of page/files.js's functions in the document the file goes to, its refusal as an error. */
async function pageCall(b, at, name, args) {
  const [r] = await b.page.exec(at, name, args);
  return pageAnswer(r && r.result);
}

// -- browser_download ----------------------------------------------------------------------------------------------

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
  let buf = new Uint8Array(CHUNK);
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
    if (held) buf = spare.pop() || new Uint8Array(CHUNK);
    const digest = crypto.subtle.digest('SHA-256', chunk); // WebCrypto copies the bytes as it is called
    // The queue holds each frame until the one before it went, not until it was answered: the answer comes wrapped,
    // since a promise returned bare would be adopted, and each chunk would wait for the last one's answer (one chunk
    // in flight, whatever the window).
    const went = queue.then(async () => {
      params.sha256 = hex(await digest);
      params[BYTES] = chunk;
      // The socket's frame is a copy made as the request is sent (lib/rpc.js); were it ever made later, the reused
      // bytes would differ from the digest taken above, and the pod would refuse the chunk rather than keep it.
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
    const { done, value } = await readPiece(reader, new Uint8Array(buf.buffer, filled, CHUNK - filled));
    // The read moved the buffer: the same bytes, the ones read before included, are the value's buffer now.
    if (!value) throw new ToolError(TOOL_ERROR, 'the browser gave back no buffer for the body\'s bytes; nothing was kept');
    buf = new Uint8Array(value.buffer);
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

export const FILE_TOOLS = {
  browser_upload: upload,
  browser_download: download,
};
