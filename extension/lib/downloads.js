// Downloads a click in an agent tab started: Chrome would save them in the person's downloads folder and list them
// in their history. Such a download is cancelled and erased at once (its file removed if it was already written),
// and kept as the tab's pending download, which browser_download (with no ref or url) then fetches for the agent
// (lib/tools-download.js). Chrome's DownloadItem names no tab, so a download is the agent's while a call runs in an
// agent tab or within moments after, when that tab navigated to the download's address (a link, a script setting
// location), or when its referrer is the tab's page (a link with the download attribute) and no tab of the person's
// is at that page too. Every other download is the person's and is never touched.

// How long after an agent call in a tab a download it started can still begin (a page's script may start it a
// moment after the click's call returned), and how long the agent has to take it.
const AFTER_CALL_MS = 10_000;
const PENDING_MS = 60_000;
const MAX_PENDING = 8;
// A download caught at its answer (lib/held-downloads.js) is held whole in the worker until the agent takes it: one
// at most this big, and at most MAX_HELD_BYTES of them at once, across tabs.
export const MAX_HELD_FILE_BYTES = 64 * 1024 * 1024;
const MAX_HELD_BYTES = 2 * MAX_HELD_FILE_BYTES;
// How long browser_download with no ref or url waits for a download Chrome has not reported yet.
const ARRIVAL_MS = 2_000;

/** Whether a download's referrer is the page `tabUrl` (the full URL, or its origin under a stricter referrer policy). */
export function referredBy(referrer, tabUrl) {
  if (!referrer || !tabUrl) return false;
  let r;
  let t;
  try {
    r = new URL(referrer);
    t = new URL(tabUrl);
  } catch {
    return false;
  }
  if (r.origin !== t.origin) return false;
  const bare = (u) => `${u.origin}${u.pathname}${u.search}`;
  // A referrer carries no #fragment; "origin" and "strict-origin" policies send the origin alone.
  return bare(r) === bare(t) || (r.pathname === '/' && !r.search && referrer.replace(/\/$/, '') === r.origin);
}

export class AgentDownloads {
  /** @param {(tabId: number) => Promise<string|null>} tabUrl  the URL of an agent tab (null: not one) */
  constructor(tabUrl) {
    this._tabUrl = tabUrl;
    this._calls = new Map(); // tabId -> {running: number, until: ms, url: the tab's URL during the call}
    this._pending = new Map(); // tabId -> {url, finalUrl, referrer, mime, name, at}
    this._waiters = new Set(); // calls waiting for a download to arrive: {tabId, resolve}
    this.taken = 0; // downloads taken from the person's browser so far (the tests read it)
  }

  /** A call starts (+1) or ends (-1) in the agent tab `tabId`; the tab's page then is kept to know its downloads by. */
  activity(tabId, delta) {
    if (tabId == null) return;
    const c = this._calls.get(tabId) || { running: 0, until: 0, urls: [], navigations: [] };
    c.running = Math.max(0, c.running + delta);
    if (delta > 0 && c.running === 1 && c.until < Date.now()) c.navigations = []; // from calls long over
    if (delta < 0) c.until = Date.now() + AFTER_CALL_MS;
    this._calls.set(tabId, c);
    this._tabUrl(tabId).then((url) => {
      if (url && !c.urls.includes(url)) c.urls = [url, ...c.urls].slice(0, 4);
    }, () => {});
  }

  /** webNavigation.onBeforeNavigate: where an agent tab with a call goes (a download's address, if it is one). */
  navigating(details) {
    const c = details && this._calls.get(details.tabId);
    if (!c) return;
    c.navigations = [details.url, ...c.navigations.filter((u) => u !== details.url)].slice(0, 8);
  }

  /** The agent tab that navigated to `url` (the download's own address), its navigation taken: it started one download. */
  _navigatedTo(live, url) {
    const hit = live.find(([, c]) => c.navigations.includes(url));
    if (!hit) return null;
    hit[1].navigations = hit[1].navigations.filter((u) => u !== url);
    return hit[0];
  }

  /** The agent tab a download comes from, or null when it is the person's. */
  async _agentTabOf(item) {
    const now = Date.now();
    const live = [];
    for (const [tabId, c] of this._calls) {
      if ((c.running || c.until >= now) && (await this._tabUrl(tabId)) != null) live.push([tabId, c]);
    }
    // The one with a call running first, else the latest.
    live.sort((a, b) => (b[1].running - a[1].running) || (b[1].until - a[1].until));
    const navigated = this._navigatedTo(live, item.url);
    if (navigated != null) return navigated;
    const referred = [];
    for (const [tabId, c] of live) {
      if ([await this._tabUrl(tabId), ...c.urls].some((u) => referredBy(item.referrer, u))) referred.push(tabId);
    }
    if (!referred.length) return null;
    // A page the person has open too could be where it started: then it is theirs.
    const tabs = await chrome.tabs.query({}).catch(() => []);
    for (const t of tabs) {
      if (referred.includes(t.id) || (await this._tabUrl(t.id)) != null) continue;
      if (referredBy(item.referrer, t.url || '')) return null;
    }
    return referred[0];
  }

  /** chrome.downloads.onCreated: an agent tab's download is taken out of the person's downloads. */
  async onCreated(item) {
    if (!item || item.byExtensionId) return;
    const tabId = await this._agentTabOf(item);
    if (tabId == null) return;
    await chrome.downloads.cancel(item.id).catch(() => {});
    // A small file can be complete before the cancel: its file goes too, then its line in the history.
    const [now] = await chrome.downloads.search({ id: item.id }).catch(() => []);
    if (now && now.state === 'complete' && now.exists !== false) await chrome.downloads.removeFile(item.id).catch(() => {});
    await chrome.downloads.erase({ id: item.id }).catch(() => {});
    this.taken++;
    this._hold(tabId, {
      url: item.url, finalUrl: item.finalUrl || item.url, referrer: item.referrer || '', mime: item.mime || '',
      name: nameFromPath(item.filename), at: Date.now(),
    });
  }

  /**
   * A download in agent tab `tabId` caught at its answer, before Chrome saw it (lib/held-downloads.js): the tab's
   * pending download, its bytes held here until taken. The bytes held at once are bounded: the oldest go first.
   */
  caught(tabId, entry) {
    this.taken++;
    this._pending.delete(tabId);
    let held = entry.body ? entry.size : 0;
    for (const [other, p] of [...this._pending].reverse()) {
      if (!p.body) continue;
      if (held + p.size > MAX_HELD_BYTES) this._pending.delete(other);
      else held += p.size;
    }
    this._hold(tabId, entry);
  }

  _hold(tabId, entry) {
    if (this._pending.size >= MAX_PENDING && !this._pending.has(tabId)) this._pending.delete(this._pending.keys().next().value);
    this._pending.set(tabId, entry);
    // Untaken, it goes when it can no longer be taken: held bytes are not kept for nothing.
    setTimeout(() => {
      if (this._pending.get(tabId) === entry) this._pending.delete(tabId);
    }, PENDING_MS + 1_000);
    for (const w of [...this._waiters]) if (w.tabId === tabId) w.resolve();
  }

  /**
   * The tab's pending download, taken (a second call finds none), or null; an expired one is dropped. Chrome tells
   * of a download a moment after the click that started it, so with none yet this waits for one up to `waitMs`
   * (or until `signal` aborts).
   */
  async take(tabId, signal = null, waitMs = ARRIVAL_MS) {
    if (!this._pending.has(tabId) && waitMs > 0 && !(signal && signal.aborted)) {
      await new Promise((resolve) => {
        const waiter = { tabId, resolve: () => done() };
        const timer = setTimeout(() => done(), waitMs);
        const done = () => {
          clearTimeout(timer);
          this._waiters.delete(waiter);
          if (signal) signal.removeEventListener('abort', done);
          resolve();
        };
        if (signal) signal.addEventListener('abort', done, { once: true });
        if (this._waiters.size < MAX_PENDING) this._waiters.add(waiter);
      });
    }
    const p = this._pending.get(tabId);
    this._pending.delete(tabId);
    if (!p || Date.now() - p.at > PENDING_MS) return null;
    return p;
  }

  forget(tabId) {
    this._pending.delete(tabId);
    this._calls.delete(tabId);
  }
}

function nameFromPath(path) {
  const parts = String(path || '').split(/[\\/]/);
  return parts[parts.length - 1] || '';
}

export const PENDING_SECONDS = PENDING_MS / 1000;
