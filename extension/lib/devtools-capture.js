// What a developer opens DevTools for, kept per agent tab: the page's console messages and uncaught errors, and its
// requests (browser_console, browser_network: lib/tools-dev.js). Both come over the debugger session the tab already
// has while the agent works there (lib/dialogs.js): a second session is not possible, and this one costs no new
// bar. A session attached after the page loaded still gets the console's earlier messages (Runtime.enable replays
// what the page kept), but not its earlier requests: the network list says from when it knows them.
//
// Each tab keeps a ring of each kind with a count of what it dropped, so a page that logs in a loop costs a bounded
// amount of the worker's memory; a page load empties both (they are "since its page loaded"). Text is kept as the
// page gave it, cut to its bound: redaction happens where it leaves the browser (lib/results.js, untrusted).

const MAX_MESSAGES = 500;
const MAX_REQUESTS = 500;
const MAX_TEXT = 4_000;
const MAX_STACK_FRAMES = 12;
const MAX_HEADERS = 60;
const MAX_HEADER_VALUE = 1_000;
// A request's headers together, each way: 500 requests a tab then hold at most about 4 MB of them.
const MAX_HEADERS_TEXT = 4_000;
const MAX_URL = 2_000;
// Whether capture runs: on unless this key of chrome.storage.local says false (bench/bench_devtools.py measures a
// page load both ways in one run).
const SWITCH = 'openab.devCapture';
// How long a read waits for a new session's capture to be set up (the console's replay) before it reads what is there.
const SETUP_MS = 5_000;
// How long a question to the page or to Chrome's buffers may take: a page busy in a loop never answers one.
const ASK_MS = 3_000;

/** `promise`'s value, or null if it fails or takes longer than `ms`. */
function bounded(promise, ms = ASK_MS) {
  let timer;
  const late = new Promise((resolve) => {
    timer = setTimeout(() => resolve(null), ms);
  });
  return Promise.race([promise.catch(() => null), late]).finally(() => clearTimeout(timer));
}

/** A bounded ring: the newest `max` entries, and how many older ones it dropped. */
class Ring {
  constructor(max) {
    this.max = max;
    this.items = [];
    this.dropped = 0;
  }

  push(item) {
    this.items.push(item);
    if (this.items.length > this.max) {
      this.items.shift();
      this.dropped++;
    }
  }

  clear() {
    this.items = [];
    this.dropped = 0;
  }
}

const cut = (s, max = MAX_TEXT) => {
  const t = String(s ?? '');
  return t.length > max ? `${t.slice(0, max)}… [${t.length - max} more characters]` : t;
};

/** A console argument as the console prints it: a string bare, an object by its preview or its description. */
function argText(arg) {
  if (!arg) return '';
  if (arg.type === 'string') return String(arg.value);
  if ('value' in arg && arg.type !== 'object') return String(arg.value);
  if (arg.unserializableValue) return String(arg.unserializableValue);
  const p = arg.preview;
  if (p && Array.isArray(p.properties)) {
    const inner = p.properties.map((q) => (p.subtype === 'array' ? q.value : `${q.name}: ${q.type === 'string' ? JSON.stringify(q.value) : q.value}`));
    const [open, close] = p.subtype === 'array' ? ['[', ']'] : ['{', '}'];
    return `${open}${inner.join(', ')}${p.overflow ? ', …' : ''}${close}`;
  }
  return String(arg.description || arg.type || '');
}

// A preview of an object the console printed, as DevTools' collapsed line shows it: its first own properties or
// items, read without calling a getter. It runs on the page's object, in the page.
const PREVIEW = `function () {
  const show = (v) => (typeof v === 'string' ? JSON.stringify(v.length > 100 ? v.slice(0, 100) + '…' : v)
    : v && typeof v === 'object' ? (Array.isArray(v) ? 'Array(' + v.length + ')' : 'Object')
      : typeof v === 'function' ? 'ƒ' : String(v));
  if (Array.isArray(this)) {
    return '[' + Array.prototype.slice.call(this, 0, 5).map(show).join(', ') + (this.length > 5 ? ', …' : '') + ']';
  }
  const own = Object.getOwnPropertyDescriptors(this);
  const keys = Object.keys(own);
  return '{' + keys.slice(0, 5).map((k) => k + ': ' + ('value' in own[k] ? show(own[k].value) : '(...)')).join(', ') +
    (keys.length > 5 ? ', …' : '') + '}';
}`;
const MAX_PREVIEWS = 50;
const MAX_PREVIEW_ARGS = 10;
/** An object argument that came without a preview (a replayed message's), which can be asked for. */
const bare = (a) => Boolean(a && a.type === 'object' && !a.preview && a.objectId && a.subtype !== 'null');

/** A stack's frames, the newest first: function, URL, line and column (1-based, as DevTools shows them), bounded. */
function frames(stackTrace) {
  const calls = (stackTrace && Array.isArray(stackTrace.callFrames)) ? stackTrace.callFrames : [];
  return calls.slice(0, MAX_STACK_FRAMES).map((f) => ({ fn: cut(f.functionName || '(anonymous)', 200), url: cut(f.url, MAX_URL),
    line: f.lineNumber + 1, column: f.columnNumber + 1 }));
}

const LEVELS = { error: 'error', assert: 'error', warning: 'warning', warn: 'warning', debug: 'debug', info: 'info' };

// Headers whose values are credentials: never kept, whatever the redaction would make of them.
const SECRET_HEADERS = new Set(['cookie', 'set-cookie', 'set-cookie2', 'authorization', 'proxy-authorization']);

/** A request's or response's headers with the credentials left out (named as withheld), bounded. */
function headersOf(raw) {
  const out = [];
  let room = MAX_HEADERS_TEXT;
  for (const [name, value] of Object.entries(raw || {}).slice(0, MAX_HEADERS)) {
    const secret = SECRET_HEADERS.has(name.toLowerCase());
    const kept = secret ? '[withheld]' : cut(value, Math.min(MAX_HEADER_VALUE, Math.max(0, room - name.length)));
    room -= name.length + kept.length;
    out.push([cut(name, 200), kept]);
    if (room <= 0) break;
  }
  return out;
}

/** One tab's capture: its console ring, its request ring, and what it knows of its page. */
class TabCapture {
  constructor() {
    this.messages = new Ring(MAX_MESSAGES);
    this.requests = new Ring(MAX_REQUESTS);
    this.byId = new Map(); // Chrome's requestId -> its newest entry in `requests`
    this.bySeq = new Map(); // our request number -> its entry, in order
    this.nextSeq = 1; // message numbers, for `since`
    this.nextReq = 1; // request numbers: short, and never given again once the agent has read them
    this.mainFrame = ''; // the tab's top frame
    this.loaderId = ''; // the top document's, to tell a new page from the one we knew
    this.knownSince = 0; // when the request list starts: the page's load, or the session's attach after it
    this.ignored = new Set(); // execution contexts that are not the page's own (extensions' isolated worlds)
    this.partial = false;
    this.listed = false;
    this.backfilled = new Set();
  }

  /** `seen`: its load was seen (its document's request is in the list), not found loaded at an attach. */
  newPage(loaderId, at, seen = false) {
    this.sawLoad = seen;
    this.partial = false; // found loaded: its record is read again for what it finished since
    this.listed = false; // the agent has read its requests' numbers
    this.backfilled = new Set(); // the record's entries taken, by URL and start
    this.messages.clear();
    this.requests.clear();
    this.byId.clear();
    this.bySeq.clear();
    this.loaderId = loaderId;
    this.knownSince = at;
  }

  addMessage(m) {
    this.messages.push({ seq: this.nextSeq++, ...m });
  }

  addRequest(r, was = null) {
    this.requests.push(r);
    if (r.cdpId && (!was || this.byId.get(r.cdpId) === was)) this.byId.set(r.cdpId, r);
    this.bySeq.set(r.seq, r);
    // What the ring dropped goes from the maps too.
    while (this.bySeq.size > this.requests.items.length) {
      const [seq, old] = this.bySeq.entries().next().value;
      this.bySeq.delete(seq);
      if (this.byId.get(old.cdpId) === old) this.byId.delete(old.cdpId);
    }
  }
}

export class DevCapture {
  /** @param {import('./dialogs.js').Dialogs} dialogs  the agent tabs' debugger sessions */
  constructor(dialogs) {
    this.dialogs = dialogs;
    this.tabs = new Map(); // tabId -> TabCapture
    this.enabled = true;
    this.limits = { messages: MAX_MESSAGES, requests: MAX_REQUESTS };
    this.setting = new Map(); // tabId -> the setting up of its capture on a new session, while it runs
    chrome.storage.local.get(SWITCH).then((got) => {
      this.enabled = got[SWITCH] !== false;
    }, () => {});
    chrome.storage.onChanged.addListener((changes, area) => {
      if (area === 'local' && changes[SWITCH]) this._switch(changes[SWITCH].newValue !== false);
    });
    chrome.tabs.onRemoved.addListener((tabId) => this.tabs.delete(tabId));
    dialogs.addReader(this);
  }

  tab(tabId) {
    let t = this.tabs.get(tabId);
    if (!t) this.tabs.set(tabId, (t = new TabCapture()));
    return t;
  }

  /**
   * The tab's session is up (lib/dialogs.js): the console and the network are read from now. The console's
   * earlier messages come again on Runtime.enable, so what was kept of them is dropped first.
   */
  attached(tabId) {
    const work = this._attach(tabId);
    this.setting.set(tabId, work);
    return work.finally(() => {
      if (this.setting.get(tabId) === work) this.setting.delete(tabId);
    });
  }

  /**
   * Returns once the tab's capture is set up (its console replayed) and the objects the replay named without a
   * preview have one, or after SETUP_MS.
   */
  async ready(tabId) {
    const deadline = Date.now() + SETUP_MS;
    const setting = this.setting.get(tabId);
    if (setting) await bounded(setting, SETUP_MS);
    const t = this.tabs.get(tabId);
    const waiting = t ? t.messages.items.filter((m) => m.bare).slice(-MAX_PREVIEWS) : [];
    if (waiting.length) await bounded(Promise.all(waiting.map((m) => this._preview(tabId, m))), Math.max(0, deadline - Date.now()));
  }

  async _attach(tabId) {
    if (!this.enabled) return;
    const t = this.tab(tabId);
    const tree = await bounded(this.dialogs.send(tabId, 'Page.getFrameTree'));
    const top = tree && tree.frameTree ? tree.frameTree.frame : {};
    t.mainFrame = String(top.id || '');
    const loaderId = String(top.loaderId || '');
    const found = loaderId !== t.loaderId;
    if (found) t.newPage(loaderId, Date.now());
    t.messages.clear();
    t.ignored.clear();
    await Promise.all([
      this.dialogs.send(tabId, 'Network.enable', { maxTotalBufferSize: 8_000_000, maxResourceBufferSize: 1_000_000 }),
      this.dialogs.send(tabId, 'Runtime.enable'),
      // The browser's own lines in the console: a resource that failed to load, a blocked request.
      this.dialogs.send(tabId, 'Log.enable'),
    ]);
    if (found) {
      t.partial = true;
      await this._backfill(tabId, t);
    }
  }

  /** Before the tab's requests are read: a page found loaded gets what it finished since from its own record. */
  async catchUp(tabId) {
    await this.ready(tabId);
    const t = this.tabs.get(tabId);
    if (this.enabled && t && t.partial) await this._backfill(tabId, t);
  }

  /** Capture turned on or off: the sessions up now start or stop it, so off costs what no capture costs. */
  _switch(on) {
    if (on === this.enabled) return;
    this.enabled = on;
    for (const tabId of this.dialogs.attached.keys()) {
      if (on) this.attached(tabId).catch(() => {});
      else for (const domain of ['Network', 'Runtime', 'Log']) this.dialogs.send(tabId, `${domain}.disable`).catch(() => {});
    }
  }

  /**
   * A page found loaded: the requests it made before the session came, from the page's own resource timing (the
   * URL, the kind, the status, the time and the size; no method, no headers, no body). A request still in flight
   * then is in neither the record nor the session's events: it is taken from the record when it is read again
   * (catchUp). The session saw a URL's latest requests, so as many of the record's latest for that URL are left to
   * it. The page could forge its record, as it can any of its words.
   */
  async _backfill(tabId, t, documentOnly = false) {
    const kinds = documentOnly ? "performance.getEntriesByType('navigation')"
      : "performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))";
    const expression = `JSON.stringify(${kinds}.slice(0, ${MAX_REQUESTS}).map((e) => [e.name,
      e.entryType === 'navigation' ? 'Document' : e.initiatorType, e.responseEnd - e.startTime, e.transferSize,
      e.decodedBodySize, e.responseStatus || 0, performance.timeOrigin + e.startTime]))`;
    const loaderId = t.loaderId;
    const got = await bounded(this.dialogs.send(tabId, 'Runtime.evaluate', { expression, returnByValue: true }));
    let entries;
    try {
      entries = JSON.parse(got && got.result ? got.result.value : '[]');
    } catch {
      return;
    }
    if (!Array.isArray(entries) || t.loaderId !== loaderId) return; // another page came meanwhile
    const seen = new Map(); // URL -> how many of its requests the session saw
    for (const r of t.requests.items) if (!r.early) seen.set(r.url, (seen.get(r.url) || 0) + 1);
    const fresh = [];
    for (const e of entries.filter((x) => Array.isArray(x) && /^https?:/.test(String(x[0]))).reverse()) {
      const [url, kind, duration, transfer, decoded, status, at] = e;
      const left = seen.get(url) || 0;
      if (left) {
        seen.set(url, left - 1);
        continue;
      }
      const key = `${url}@${at}`;
      if (t.backfilled.has(key)) continue;
      t.backfilled.add(key);
      fresh.push({ seq: 0, cdpId: '', early: true, method: '', url: cut(url, MAX_URL), type: String(kind || 'other'),
        status: Number(status) || 0, duration: Math.round(Number(duration) || 0), size: Number(transfer) || 0,
        cached: !transfer && Number(decoded) > 0, time: Math.round(Number(at) || 0) });
    }
    if (!fresh.length) return;
    // In the order they were made, the ones the session saw among them.
    const all = [...t.requests.items.splice(0), ...fresh.reverse()].sort((a, b) => a.time - b.time);
    t.bySeq.clear();
    // Numbers nobody has read yet are given again in that order; once the agent has a list, they stay.
    let n = t.listed ? 0 : Math.min(t.nextReq, ...all.filter((r) => r.seq).map((r) => r.seq));
    for (const r of all) {
      const seq = t.listed ? r.seq || t.nextReq++ : n++;
      t.addRequest(seq === r.seq ? r : Object.assign(r, { seq }), r);
    }
    if (!t.listed) t.nextReq = n;
    if (all[0].early && all[0].type === 'Document') t.sawLoad = true;
  }

  /** One event of a tab's session. */
  event(tabId, method, params) {
    if (!this.enabled || !this.tabs.has(tabId)) return;
    const t = this.tabs.get(tabId);
    switch (method) {
      case 'Runtime.executionContextCreated': {
        const c = params.context || {};
        if (c.auxData && c.auxData.type && c.auxData.type !== 'default') t.ignored.add(c.id);
        break;
      }
      case 'Runtime.consoleAPICalled': {
        if (t.ignored.has(params.executionContextId)) break;
        const message = this._consoleMessage(params);
        t.addMessage(message);
        // Chrome replays earlier messages to a new session without their objects' previews: they are asked for when
        // the console is read (ready), the newest MAX_PREVIEWS messages' at most.
        const args = params.args || [];
        if (args.some(bare)) message.bare = args.slice(0, MAX_PREVIEW_ARGS);
        break;
      }
      case 'Log.entryAdded': {
        const e = params.entry || {};
        t.addMessage({ level: LEVELS[e.level] || (e.level === 'verbose' ? 'debug' : 'log'), text: cut(e.text),
          time: Math.round(e.timestamp || Date.now()), url: cut(e.url || '', MAX_URL), line: e.lineNumber != null ? e.lineNumber + 1 : 0 });
        break;
      }
      case 'Runtime.exceptionThrown':
        t.addMessage(this._uncaught(params.exceptionDetails || {}, params.timestamp));
        break;
      case 'Page.frameNavigated': {
        // A new top document whose request came before the session: the page's own record of it.
        const f = params.frame || {};
        if (!f.parentId && f.id === t.mainFrame && f.loaderId && f.loaderId !== t.loaderId) {
          t.newPage(f.loaderId, Date.now());
          t.partial = true;
          this._backfill(tabId, t, true).catch(() => {});
        }
        break;
      }
      case 'Network.requestWillBeSent':
        this._request(t, params);
        break;
      case 'Network.responseReceived': {
        const r = t.byId.get(params.requestId);
        if (!r) break;
        const res = params.response || {};
        Object.assign(r, { status: res.status, statusText: cut(res.statusText, 200), mimeType: String(res.mimeType || ''),
          responseHeaders: headersOf(res.headers), type: String(params.type || r.type),
          cached: Boolean(res.fromDiskCache || res.fromPrefetchCache || res.fromServiceWorker) });
        break;
      }
      case 'Network.loadingFinished':
      case 'Network.loadingFailed': {
        const r = t.byId.get(params.requestId);
        if (!r) break;
        r.duration = Math.max(0, Math.round((params.timestamp - r.started) * 1000));
        if (method === 'Network.loadingFinished') r.size = params.encodedDataLength;
        else r.failed = cut(params.errorText || (params.canceled ? 'canceled' : 'failed'), 200);
        break;
      }
      default:
    }
  }

  /** A message's text again, with the previews of its objects that came without one (the page's own words). */
  async _preview(tabId, message) {
    const args = message.bare;
    delete message.bare;
    const texts = await Promise.all(args.map((a) => (bare(a)
      ? bounded(this.dialogs.send(tabId, 'Runtime.callFunctionOn', { objectId: a.objectId, functionDeclaration: PREVIEW,
        returnByValue: true })).then((got) => (got && got.result && typeof got.result.value === 'string' ? got.result.value : argText(a)))
      : argText(a))));
    message.text = cut(texts.join(' '));
  }

  _consoleMessage(p) {
    const top = p.stackTrace && p.stackTrace.callFrames && p.stackTrace.callFrames[0];
    return {
      level: LEVELS[p.type] || 'log', text: cut((p.args || []).map(argText).join(' ')), time: Math.round(p.timestamp || Date.now()),
      url: top ? cut(top.url, MAX_URL) : '', line: top ? top.lineNumber + 1 : 0,
      ...(LEVELS[p.type] === 'error' && { stack: frames(p.stackTrace) }),
    };
  }

  _uncaught(d, timestamp) {
    const described = d.exception && d.exception.description;
    // An Error's description is its message followed by its stack in the page's words: the stack is kept apart.
    const first = described ? String(described).split('\n')[0] : '';
    return {
      level: 'error', uncaught: true, text: cut(first ? `${d.text || 'Uncaught'} ${first}` : d.text), time: Math.round(timestamp || Date.now()),
      url: cut(d.url || '', MAX_URL), line: (d.lineNumber ?? -1) + 1, stack: frames(d.stackTrace),
    };
  }

  _request(t, p) {
    const req = p.request || {};
    // A new top document is a new page: what was known of the last one goes.
    if (p.type === 'Document' && p.frameId === t.mainFrame && !p.redirectResponse && p.loaderId !== t.loaderId) {
      t.newPage(p.loaderId, Date.now(), true);
    }
    const prior = t.byId.get(p.requestId);
    if (prior && p.redirectResponse) {
      // A redirect keeps Chrome's request id: the hop before stays a request of its own, ended by the redirect.
      prior.status = p.redirectResponse.status;
      prior.responseHeaders = headersOf(p.redirectResponse.headers);
      prior.duration = Math.max(0, Math.round((p.timestamp - prior.started) * 1000));
      prior.redirected = true;
    }
    t.addRequest({
      seq: t.nextReq++, cdpId: String(p.requestId), method: String(req.method || 'GET'), url: cut(req.url, MAX_URL),
      type: String(p.type || 'Other'), started: p.timestamp, time: Math.round((p.wallTime || Date.now() / 1000) * 1000),
      requestHeaders: headersOf(req.headers), hasPostData: Boolean(req.hasPostData),
    });
  }

  /** The console messages kept for the tab: `{messages, dropped}`. */
  messages(tabId) {
    const t = this.tabs.get(tabId);
    return t ? { messages: t.messages.items, dropped: t.messages.dropped } : { messages: [], dropped: 0 };
  }

  /**
   * The requests kept for the tab: `{requests, dropped, since}`; `since` (ms) when openab began watching a page it
   * found loaded, whose earlier requests it cannot know, else 0.
   */
  requests(tabId) {
    const t = this.tabs.get(tabId);
    if (t) t.listed = true;
    return t ? { requests: t.requests.items, dropped: t.requests.dropped, since: t.sawLoad ? 0 : t.knownSince }
      : { requests: [], dropped: 0, since: 0 };
  }

  /** One request by its number, or null. */
  request(tabId, seq) {
    const t = this.tabs.get(tabId);
    return (t && t.bySeq.get(Number(seq))) || null;
  }

  /**
   * A request's response body as Chrome still holds it: `{body, base64}`, or null when it is gone (the session was
   * attached again since, or Chrome let it go).
   */
  async body(tabId, seq) {
    const r = this.request(tabId, seq);
    if (!r || r.redirected) return null; // a redirect's hop has no body
    const got = await bounded(this.dialogs.send(tabId, 'Network.getResponseBody', { requestId: r.cdpId }));
    return got ? { body: String(got.body || ''), base64: Boolean(got.base64Encoded) } : null;
  }
}
