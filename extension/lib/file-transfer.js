// A file's transfer on the /acp socket (docs/files.md), what browser_upload (tools-upload.js) and browser_download
// (tools-download.js) share: the contract's chunk, the transfer the pod opens for a call, the window of chunks in
// flight it offers, the requests that move them, and the base64 of the JSON form. The bytes travel in chunks the
// extension asks for (`_openab/file/read`) or sends (`_openab/file/write`). A pod that offers them (`file.frames`,
// `file.window`) gets them as binary frames (lib/rpc.js), up to its window of chunks in flight, each download chunk
// with its sha256; any other gets JSON and base64, each chunk answered before the next. The pod rewrites the agent's
// call before it comes here: `file` names the transfer it opened for this one call, and the agent can never set it.

import { ToolError, BAD_ARGS, CANCELLED, TOOL_ERROR } from './errors.js';
import { FRAME_VERSION } from './rpc.js';

// The contract's chunk (docs/files.md): at most this many bytes per read answer and per write.
export const CHUNK = 512 * 1024;

// Each answer of the pod's, each read of a download's body, and each answer of the page to a piece of the file,
// within this (the pod's own idle bound is 30 s).
export const ANSWER_MS = 30_000;
// What a file's name and type are cut to, wherever they come from.
export const MAX_NAME = 1000;
export const MAX_TYPE = 200;
// The most chunks this extension keeps in flight whatever a pod offers.
const MAX_WINDOW = 16;

// -- the pod's side of a transfer ----------------------------------------------------------------------------------

/** The transfer the pod opened for this call, from the rewritten arguments; throws when the pod sent none. */
export function transferOf(args, tool) {
  const f = args.file;
  if (!f || typeof f !== 'object' || typeof f.transfer !== 'string' || !f.transfer) {
    throw new ToolError(BAD_ARGS, `${tool} needs the openab pod to carry the file: this call came without the transfer ` +
      'the pod opens for it (an older pod?). Nothing was done');
  }
  return f;
}

/** The chunks to keep in flight: the pod's window when it offered the binary frames lib/rpc.js speaks, else 0 (JSON,
 * one at a time). */
export function windowOf(f) {
  if (f.frames !== FRAME_VERSION || !Number.isSafeInteger(f.window) || f.window < 1) return 0;
  return Math.min(f.window, MAX_WINDOW);
}

/** A request of ours on the /acp socket, bounded, and given up at once when the call is cancelled. */
export function podRequest(b, call, method, params, doing) {
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

/** A digest's bytes as the lowercase hex the pod writes it in. */
export const hex = (buffer) => Array.from(new Uint8Array(buffer), (v) => v.toString(16).padStart(2, '0')).join('');
