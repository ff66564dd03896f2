// browser_upload (docs/files.md): a file from the agent's working folder in the pod into a page's file field or drop
// zone. Its chunks come from the pod (file-transfer.js: binary frames with a window in flight where the pod offers
// them, else JSON one at a time), are checked against the sha256 the person was shown, and reach the page's isolated
// world (page/files.js) as pieces or one Blob; the page gets the file only once it is whole and checked.

import { ToolError, BAD_ARGS, BAD_TARGET, STALE_REF, TIMEOUT, TOOL_ERROR } from './errors.js';
import { humanSize } from './guard.js';
import { text, withPage } from './results.js';
import { BYTES } from './rpc.js';
import {
  ANSWER_MS, CHUNK, MAX_NAME, MAX_TYPE, fromBase64, hex, podRequest, toBase64, transferOf, windowOf,
} from './file-transfer.js';

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
// An upload is held whole to be checked before the page gets it: in the worker's memory, or as Blobs in the browser
// process where messages are cloned (its pieces wait in the page's isolated world meanwhile, out of the page's reach).
const MAX_UPLOAD = 512 * 1024 * 1024;
const NO_BYTES = new Uint8Array(0);
const READ = '_openab/file/read';

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

export const UPLOAD_TOOLS = {
  browser_upload: upload,
};
