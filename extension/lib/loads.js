// Page loads in agent tabs: waiting for a tab to finish loading, and for the navigation an action started
// (a click on a link, a form's submission, a script's redirect), so the call that follows meets the new
// page, not the old one.

import { ToolError, NO_TAB, TIMEOUT, throwIfCancelled } from './errors.js';

const LOAD_TIMEOUT_MS = 30_000;
const SETTLE_TIMEOUT_MS = 10_000;
// After a click, a key or a choice: its own call names the page it led to when the page said it began leaving by the
// time it answered for the action (a link, a form's submission, a script setting the location in its handler or in
// a task that ran before that answer), or when the tab reports loading by then. It sleeps for no window after that:
// every such action paid it (a click a turn apart spent a third of its time asleep in a 10 ms one), and nothing is
// lost without it: a navigation that starts later, up to LATE_WINDOW_MS after the action, holds the next call until
// its load, and the next call waits out what is left of that window (an agent's next call comes a model turn later,
// when it has passed). One that starts within LATE_NAVIGATION_MS holds the next call too. What a later start
// changes is that the action's own result does not name the page it loads.
const LATE_WINDOW_MS = 80;
const LATE_NAVIGATION_MS = 1_000;
// A navigation the page saw begin that never reaches the tab (a download, a 204) stops being waited for.
const NAVIGATION_START_MS = 1_000;
// How long browser_navigate waits for its navigation to show in the tab (its URL, its pending URL or its status),
// and from a tab whose last load failed, where only the first two can show it.
const NAVIGATION_SHOWS_MS = 1_000;
const NAVIGATION_SHOWS_AFTER_FAILURE_MS = 5_000;

/**
 * A tab watched for a navigation from the moment an action runs: `started` once the tab begins loading,
 * `complete` once that load ends. Chrome's own events, so a timer-throttled background tab costs nothing.
 */
class LoadWatch {
  constructor(tabId, watches) {
    this.tabId = tabId;
    this.started = false;
    this.complete = false;
    this.left = false; // the page said it started leaving (page/agent.js)
    this.download = null; // the navigation was a download, caught at its answer (lib/held-downloads.js)
    this._watches = watches;
    watches.add(this);
    this._wake = new Set();
    this._listener = (id, change) => {
      if (id !== tabId) return;
      if (change.status === 'loading') {
        this.started = true;
        this.complete = false;
      } else if (change.status === 'complete') this.complete = true;
      else return;
      this._wakeAll();
    };
    chrome.tabs.onUpdated.addListener(this._listener);
  }

  /** Whether `test()` holds, at once or within `ms`. */
  async until(test, ms) {
    if (test()) return true;
    if (ms <= 0) return false;
    await new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this._wake.delete(check);
        resolve();
      };
      const check = () => test() && done();
      const timer = setTimeout(done, ms);
      this._wake.add(check);
    });
    return test();
  }

  leave() {
    this.left = true;
    this._wakeAll();
  }

  downloaded(entry) {
    this.download = entry;
    this._wakeAll();
  }

  _wakeAll() {
    for (const wake of [...this._wake]) wake();
  }

  stop() {
    this._watches.delete(this);
    chrome.tabs.onUpdated.removeListener(this._listener);
  }
}

/**
 * The tab's next change that Chrome reports, or `ms` passing, whichever comes first. Armed before a look at the
 * tab, so a change made between the look and the wait is not missed: a wait for a load ends when the tab says it
 * has loaded, not at the next of a poll's 100 ms steps (which put 50 ms on an average navigation). `ms` stays as
 * the floor of how often the tab is looked at, whatever Chrome reports.
 */
export function nextUpdate(tabId, ms) {
  let finish;
  const done = new Promise((resolve) => {
    // Only a change of load state or address: a page retitling itself in a loop must not drive the looks.
    const listener = (id, change) => {
      if (id === tabId && (change.status !== undefined || change.url !== undefined)) finish();
    };
    const timer = setTimeout(() => finish(), ms);
    finish = () => {
      clearTimeout(timer);
      chrome.tabs.onUpdated.removeListener(listener);
      resolve();
    };
    chrome.tabs.onUpdated.addListener(listener);
  });
  return { done, cancel: () => finish() };
}

/**
 * Looks at the tab until `until(tab)` holds or `ms` have passed, and returns the last look (null once the tab is
 * gone). Between two looks it waits for the tab's next change, at most `step` ms (nextUpdate).
 */
export async function watchTab(tabId, ms, step, until, signal) {
  const end = Date.now() + ms;
  for (;;) {
    throwIfCancelled(signal);
    const update = nextUpdate(tabId, step);
    const tab = await chrome.tabs.get(tabId).catch(() => null);
    if (until(tab) || Date.now() >= end) {
      update.cancel();
      return tab;
    }
    await update.done;
  }
}

// The browser's net errors a person or an agent can act on, in words; any other is named by its code alone.
const NET_ERRORS = {
  'net::ERR_NAME_NOT_RESOLVED': 'the host name does not resolve',
  'net::ERR_CONNECTION_REFUSED': 'nothing accepts connections at that address',
  'net::ERR_CONNECTION_TIMED_OUT': 'the site did not answer',
  'net::ERR_ADDRESS_UNREACHABLE': 'the address cannot be reached',
  'net::ERR_INTERNET_DISCONNECTED': 'the browser is offline',
  'net::ERR_CERT_AUTHORITY_INVALID': "the browser does not trust the site's certificate",
  'net::ERR_CERT_COMMON_NAME_INVALID': "the site's certificate is for another name",
  'net::ERR_BLOCKED_BY_CLIENT': 'the browser refused the load (an extension or filter blocks this address)',
  'net::ERR_BLOCKED_BY_ADMINISTRATOR': "the browser refused the load (the administrator's policy blocks this address)",
  'net::ERR_BLOCKED_BY_RESPONSE': 'the browser refused to show the response',
  'net::ERR_UNSAFE_PORT': 'the browser refuses to load anything from this port',
};

function failureWords(error) {
  const words = NET_ERRORS[error];
  return words ? `${words} (${error})` : `the browser could not load it (${error})`;
}

/**
 * Keeps in `failed` each tab's top-frame load that failed, until that frame navigates again. An abort is no
 * failure of the page: it is a load another replaced, a download or a 204, and the tab's address says where it is.
 */
function watchFailures(failed) {
  if (!chrome.webNavigation) return;
  const clear = ({ tabId, frameId }) => frameId === 0 && failed.delete(tabId);
  chrome.webNavigation.onBeforeNavigate.addListener(clear);
  chrome.webNavigation.onCommitted.addListener(clear);
  chrome.webNavigation.onErrorOccurred.addListener(({ tabId, frameId, error, url }) => {
    if (frameId === 0 && error !== 'net::ERR_ABORTED') failed.set(tabId, { error: String(error), url });
  });
  chrome.tabs.onRemoved.addListener((tabId) => failed.delete(tabId));
}

/**
 * The loads of the agent's tabs, and the navigation each action started. Owns the watches running and the
 * one left over from the last action that started none in its window (held for the next call).
 */
export class Loads {
  constructor() {
    this._late = null; // the LoadWatch of the last action that started no navigation in its window
    this._watches = new Set(); // the LoadWatches running
    this._failed = new Map(); // tabId -> {error, url}: the top frame's last load that failed, until it navigates again
    watchFailures(this._failed);
    // The page script in an agent tab says when its page starts leaving after an action; only our own
    // isolated world can send this (pages cannot message the extension), and it only ever makes a call wait.
    chrome.runtime.onMessage.addListener((msg, sender) => {
      if (sender.id !== chrome.runtime.id || !sender.tab || sender.frameId !== 0 || !msg || msg.openab !== 'leaving') return;
      for (const watch of this._watches) if (watch.tabId === sender.tab.id) watch.leave();
    });
  }

  /** The navigation in tab `tabId` was a download, caught at its answer: a watch of it stops waiting for a load. */
  downloaded(tabId, entry) {
    for (const watch of this._watches) if (watch.tabId === tabId) watch.downloaded(entry);
  }

  /** Starts watching the tab for a navigation, right before an action that may start one. */
  watch(tabId) {
    return new LoadWatch(tabId, this._watches);
  }

  /**
   * After an action: the load of the navigation it started (the page saw itself leave, or the tab is loading now), as
   * the loaded tab; null at once when it started none. A navigation the page starts later is left to `lateLoad`, so
   * the next call meets the new page, not the old one. `acted`: when the action reached the page (lib/tools-act.js,
   * sendKeys), from which the late window runs.
   */
  async settle(watch, left, acted = Date.now()) {
    if (!left && !watch.started && !watch.left) {
      if (this._late) this._late.stop();
      watch.windowEnd = acted + LATE_WINDOW_MS;
      this._late = watch;
      setTimeout(() => {
        if (this._late !== watch) return;
        this._late = null;
        watch.stop();
      }, LATE_NAVIGATION_MS);
      return null;
    }
    try {
      return await this._landed(watch);
    } finally {
      watch.stop();
    }
  }

  /** The tab once the navigation `watch` saw begin has loaded; null when it never reached the tab. */
  async _landed(watch) {
    // A navigation Chrome began before the page let it go (a "leave this page?" dialog) is loading already.
    if (!watch.started) watch.started = (await chrome.tabs.get(watch.tabId).catch(() => null))?.status === 'loading';
    if (!(await watch.until(() => watch.started || watch.download, NAVIGATION_START_MS))) return null;
    // A download leaves the tab at its page: nothing loads.
    if (await watch.until(() => watch.complete || watch.download, SETTLE_TIMEOUT_MS) && watch.download) return null;
    return chrome.tabs.get(watch.tabId).catch(() => null);
  }

  /** Before a call: the load of a navigation the last action's page started after its call returned. */
  async lateLoad(tabId) {
    const late = this._late;
    if (!late) return;
    this._late = null;
    try {
      if (late.tabId !== tabId) return;
      if (await late.until(() => late.started || late.left, late.windowEnd - Date.now())) await this._landed(late);
    } finally {
      late.stop();
    }
  }

  /**
   * Why the tab's page did not load, in our words, or '' when it did: a tab whose top frame failed (no such host,
   * a refused connection, a load the browser or a policy blocked) shows the browser's error page at the very URL
   * asked for, so neither the address nor the load state tells it from a page that loaded.
   */
  failure(tabId) {
    const failed = this._failed.get(tabId);
    return failed ? failureWords(failed.error) : '';
  }

  /** The tab once it has loaded (LOAD_TIMEOUT_MS at most). */
  async waitLoaded(tabId, signal, pending = false) {
    // `pending`: a navigation this call started is not loaded while the tab still has it pending (an error page
    // the previous load left reads "complete" until the new one commits).
    const loaded = (t) => !t || (t.status === 'complete' && !(pending && t.pendingUrl));
    const tab = await watchTab(tabId, LOAD_TIMEOUT_MS, 100, loaded, signal);
    if (!tab) throw new ToolError(NO_TAB, 'the agent tab was closed');
    if (loaded(tab)) return tab;
    throw new ToolError(TIMEOUT, `the page is still loading after ${Math.round(LOAD_TIMEOUT_MS / 1000)} s`);
  }

  /** Loads `url` in the tab and waits for that load, not the one that may still be running there. */
  async navigate(tabId, url, signal) {
    const before = await chrome.tabs.get(tabId);
    // A tab at the error page of a load that failed reads "complete" at that address until the new load commits,
    // so nothing but the URL or the pending URL can tell that the tab took the new one: wait for them longer (a
    // busy machine's Chrome took over a second to show either, and the call answered with the error page).
    const showsMs = this._failed.has(tabId) ? NAVIGATION_SHOWS_AFTER_FAILURE_MS : NAVIGATION_SHOWS_MS;
    throwIfCancelled(signal);
    await chrome.tabs.update(tabId, { url });
    // Wait (briefly) for the navigation to show up in the tab, so the load we wait for is the new one. A tab still
    // "loading" a page that failed (its error page) is not the new load: only a status that changes, the URL, or
    // the pending URL says the tab took the new one.
    const started = (t) => !t || t.url !== before.url || t.pendingUrl === url || (before.status === 'complete' && t.status !== 'complete');
    await watchTab(tabId, showsMs, 50, started);
    return this.waitLoaded(tabId, signal, true);
  }
}
