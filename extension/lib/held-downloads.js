// Downloads an action of the agent's starts in a watched agent tab, caught at their answer. lib/downloads.js takes a
// download Chrome has begun and fetches its address again, which a form's POST ("Export" buttons) or a one-time link
// cannot give twice. While an action that may start one runs in a tab the debugger watches (lib/dialogs.js), and
// until its page has settled (lib/loads.js), the tab's document answers stop at their headers (the protocol's Fetch
// domain): one that is a file, not a page, is read there, in the worker, and its request cancelled, so Chrome neither
// shows nor saves it, and the bytes are the tab's pending download, which browser_download with no ref or url takes.
// Every other answer goes on at once, untouched. Only then: a stop at the headers costs a page load ~9 ms, which
// browser_navigate, the most frequent call, does not pay. A download the page starts later is lib/downloads.js's.

import { MAX_HELD_FILE_BYTES } from './downloads.js';
import { within } from './page-script.js';
import { fromBase64 } from './file-transfer.js';

const READ_BYTES = 1024 * 1024;
// Each read of the body, and each command, waits this long at most: the tab's navigation waits on us meanwhile.
const ANSWER_MS = 30_000;
const PATTERNS = [{ urlPattern: '*', resourceType: 'Document', requestStage: 'Response' }];
// The types Chrome shows in the tab rather than saves (with a suffix's: +xml, +json); any other is a download.
const SHOWN = /^(text\/.*|image\/.*|audio\/.*|video\/.*|application\/(pdf|json|xml|javascript|ecmascript|xhtml\+xml|[\w.-]+\+(xml|json))|multipart\/x-mixed-replace)$/;

/** A response header's value (the first of that name), or ''. */
function header(headers, name) {
  const h = (headers || []).find((x) => String(x.name).toLowerCase() === name);
  return h ? String(h.value) : '';
}

/**
 * Whether a document's answer is a file Chrome would save rather than show: 2xx with `Content-Disposition:
 * attachment`, or of a type Chrome does not show (application/octet-stream, a zip, a spreadsheet). A response with
 * no type is sniffed by Chrome, so it is left to it. Pure.
 */
export function isDownload(method, status, headers) {
  if (String(method || 'GET').toUpperCase() === 'HEAD' || !(status >= 200 && status < 300)) return false;
  if (header(headers, 'content-disposition').trim().toLowerCase().startsWith('attachment')) return true;
  const type = header(headers, 'content-type').split(';')[0].trim().toLowerCase();
  return type !== '' && !SHOWN.test(type);
}

export class HeldDownloads {
  /**
   * @param {import('./downloads.js').AgentDownloads} downloads  where a caught file becomes the tab's pending download
   * @param {(tabId: number, entry: object) => void} onCaught  the tab's navigation ended in a download (lib/loads.js)
   */
  constructor(downloads, onCaught = () => {}) {
    this._downloads = downloads;
    this._onCaught = onCaught;
    this.caught = 0; // downloads caught so far (the tests read it)
    this._armed = new Map(); // tabId -> {actions: how many run there now, reading: answers being read, ready}
    // tabId -> the last Fetch.enable or Fetch.disable asked for: each waits for the one before, so the last asked wins.
    this._commands = new Map();
    chrome.debugger.onEvent.addListener((source, method, params) => {
      if (method === 'Fetch.requestPaused' && source.tabId != null) this._paused(source.tabId, params || {});
    });
    // A session gone takes its interception with it.
    chrome.debugger.onDetach.addListener((source) => {
      this._armed.delete(source.tabId);
      this._commands.delete(source.tabId);
    });
  }

  /**
   * An action that may start a download begins in `tabId`: its documents' answers stop at their headers until
   * `disarm`. Resolves once that holds, or at once when the tab has no session (then a download is left to Chrome
   * and lib/downloads.js).
   */
  async arm(tabId) {
    const a = this._armed.get(tabId) || { actions: 0, reading: 0, ready: null };
    this._armed.set(tabId, a);
    a.actions++;
    if (!a.ready) a.ready = this._inTurn(tabId, 'Fetch.enable', { patterns: PATTERNS });
    await a.ready;
  }

  /** Sends `method` once the tab's command before it has been answered; resolves true when it was done. */
  _inTurn(tabId, method, params) {
    const before = this._commands.get(tabId) || Promise.resolve(true);
    const done = before.then(() => this._send(tabId, method, params)).then(() => true, () => false);
    this._commands.set(tabId, done);
    return done;
  }

  /** The action's page has settled: once no action runs there and no answer is being read, answers go on unstopped. */
  disarm(tabId) {
    const a = this._armed.get(tabId);
    if (!a) return;
    a.actions = Math.max(0, a.actions - 1);
    this._release(tabId, a);
  }

  _release(tabId, a) {
    if (a.actions || a.reading || this._armed.get(tabId) !== a) return;
    this._armed.delete(tabId);
    const done = this._inTurn(tabId, 'Fetch.disable');
    done.then(() => {
      if (this._commands.get(tabId) === done) this._commands.delete(tabId);
    });
  }

  _send(tabId, method, params) {
    return within(ANSWER_MS, chrome.debugger.sendCommand({ tabId }, method, params), method);
  }

  async _paused(tabId, p) {
    const request = p.request || {};
    const a = this._armed.get(tabId);
    if (a) a.reading++;
    let caught = null;
    const body = { taken: false };
    try {
      if (p.responseStatusCode != null && isDownload(request.method, p.responseStatusCode, p.responseHeaders)) {
        caught = await this._read(tabId, p, body);
      }
    } catch (e) {
      console.warn('openab: a download could not be read', e);
    } finally {
      // Whatever happened above, the page's navigation must not wait on us: a download's request is cancelled
      // (Chrome keeps the page as it was, as it does for a download), as is one whose body we began to read and
      // could not finish (it cannot go on without it); any other goes on.
      const [method, params] = caught || body.taken
        ? ['Fetch.failRequest', { requestId: p.requestId, errorReason: 'Aborted' }]
        : ['Fetch.continueRequest', { requestId: p.requestId }];
      await this._send(tabId, method, params).catch(() => {});
      if (a) {
        a.reading--;
        this._release(tabId, a);
      }
    }
    if (caught) {
      this.caught++;
      this._downloads.caught(tabId, caught);
      this._onCaught(tabId, caught);
    }
  }

  /**
   * The download's pending entry: its bytes, read whole; or, past what the worker holds, none of them, and then a
   * GET is fetched again at its address (lib/downloads.js's way) and anything else is refused, saying why.
   */
  async _read(tabId, p, body) {
    const headers = p.responseHeaders;
    const url = String(p.request.url || '');
    const get = String(p.request.method || 'GET').toUpperCase() === 'GET';
    const entry = {
      url, finalUrl: url, referrer: '', mime: header(headers, 'content-type').slice(0, 200),
      disposition: header(headers, 'content-disposition').slice(0, 2000), name: '', at: Date.now(),
      body: null, size: 0, over: false, method: get ? 'GET' : String(p.request.method).slice(0, 20),
    };
    const announced = Number(header(headers, 'content-length'));
    if (Number.isFinite(announced) && announced > MAX_HELD_FILE_BYTES) return { ...entry, over: !get, size: announced };
    body.taken = true;
    const { stream } = await this._send(tabId, 'Fetch.takeResponseBodyAsStream', { requestId: p.requestId });
    const parts = [];
    let size = 0;
    try {
      for (;;) {
        const r = await this._send(tabId, 'IO.read', { handle: stream, size: READ_BYTES });
        const piece = r.base64Encoded ? fromBase64(r.data || '') : new TextEncoder().encode(r.data || '');
        size += piece.length;
        if (size > MAX_HELD_FILE_BYTES) return { ...entry, over: !get };
        if (piece.length) parts.push(piece);
        if (r.eof) break;
      }
    } finally {
      this._send(tabId, 'IO.close', { handle: stream }).catch(() => {});
    }
    return { ...entry, body: parts, size };
  }
}
