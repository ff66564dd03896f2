// Page loads in agent tabs: waiting for a tab to finish loading, and for the navigation an action started
// (a click on a link, a form's submission, a script's redirect), so the call that follows meets the new
// page, not the old one.

import { ToolError, NO_TAB, throwIfCancelled } from './errors.js';

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
// A navigation's end that loaded nothing into the tab: a download, an answer with no content, or a newer navigation
// that replaced it (Chrome's own word for a load it dropped, not a failure of the page).
const DROPPED = 'net::ERR_ABORTED';

/**
 * Whether `test()` holds, at once or once it holds when `wakers` are woken (wakeAll), before `deadline` (a Date.now()
 * time) or the `signal`'s cancel, whichever comes first (which throws).
 */
async function whenWoken(wakers, test, deadline, signal) {
  while (!test()) {
    throwIfCancelled(signal);
    const ms = deadline - Date.now();
    if (ms <= 0) return false;
    await new Promise((resolve) => {
      let timer = null;
      const wake = () => {
        clearTimeout(timer);
        wakers.delete(wake);
        if (signal) signal.removeEventListener('abort', wake);
        resolve();
      };
      timer = setTimeout(wake, ms);
      wakers.add(wake);
      if (signal) signal.addEventListener('abort', wake);
    });
  }
  return true;
}

/** Wakes every waiter of `wakers` (whenWoken), each to look at its test again. */
function wakeAll(wakers) {
  for (const wake of [...wakers]) wake();
}

/**
 * A tab watched for a navigation from the moment an action runs: `started` once the tab begins loading,
 * `complete` once that load ends. `failure`: why the latest navigation of its page did not load, in our words, when
 * the tab shows the browser's error page in its place ('' when it loaded, or loaded nothing: Chrome's webNavigation
 * events, as NavigationWatch reads them). Chrome's own events, so a timer-throttled background tab costs nothing.
 */
class LoadWatch {
  constructor(tabId, watches) {
    this.tabId = tabId;
    this.started = false;
    this.complete = false;
    this.left = false; // the page said it started leaving (page/agent.js)
    this.download = null; // the navigation was a download, caught at its answer (lib/held-downloads.js)
    this.failure = '';
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
    // Only the page's own frame: a frame inside it that fails is the page's business.
    this._began = ({ tabId: id, frameId }) => {
      if (id === tabId && frameId === 0) this.failure = '';
    };
    this._failed = ({ tabId: id, frameId, error }) => {
      if (id === tabId && frameId === 0 && error !== DROPPED) this.failure = failureWords(error);
    };
    chrome.webNavigation.onBeforeNavigate.addListener(this._began);
    chrome.webNavigation.onErrorOccurred.addListener(this._failed);
  }

  /** Whether `test()` holds, at once or within `ms`. */
  until(test, ms) {
    return whenWoken(this._wake, test, Date.now() + ms);
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
    wakeAll(this._wake);
  }

  stop() {
    this._watches.delete(this);
    chrome.tabs.onUpdated.removeListener(this._listener);
    chrome.webNavigation.onBeforeNavigate.removeListener(this._began);
    chrome.webNavigation.onErrorOccurred.removeListener(this._failed);
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
 * One navigation of a tab's top frame, asked for by us, followed by Chrome's webNavigation events from just before it
 * is asked for. Only these say that it began and how it ended: the tab's fields show the page there was until the
 * new one commits, one that was dropped leaves them as they were, and the browser's error page reads as a page that
 * loaded. `nav` is the latest navigation seen in the tab, `{url, end}`, where `end` is `{committed: url}`,
 * `{failed: error, url}` or `{dropped: url}`, null until it ends. A new tab's id is known only
 * once Chrome made it, after its navigation may have begun: until `follow(tabId)`, each tab's latest is kept.
 * With `traversal`, the navigation asked for is a step in the tab's history (browser_back): one within the page (an
 * entry the page pushed, a #fragment) counts only as that step, which Chrome marks forward_back, never as the page
 * moving itself; and a page the browser kept whole and shows again commits with no start of its own.
 */
class NavigationWatch {
  constructor({ traversal = false } = {}) {
    this._tabId = null;
    this._traversal = traversal;
    this._navs = new Map(); // tabId -> its latest navigation, as above
    this._wake = new Set();
    const on = (kind) => (details) => this._on(kind, details);
    this._listeners = [
      [chrome.webNavigation.onBeforeNavigate, on('began')],
      [chrome.webNavigation.onReferenceFragmentUpdated, on('within')],
      [chrome.webNavigation.onCommitted, on('committed')],
      [chrome.webNavigation.onErrorOccurred, on('error')],
    ];
    if (traversal) this._listeners.push([chrome.webNavigation.onHistoryStateUpdated, on('within')]);
    for (const [event, listener] of this._listeners) event.addListener(listener);
  }

  /** The navigation asked for is in tab `tabId`: from now on, only its events count. */
  follow(tabId) {
    this._tabId = tabId;
    for (const id of [...this._navs.keys()]) if (id !== tabId) this._navs.delete(id);
  }

  /** The latest navigation in the followed tab since the watch began, or null. */
  get nav() {
    return this._tabId == null ? null : this._navs.get(this._tabId) || null;
  }

  /** Whether `test()` holds, at once or once an event makes it hold before `deadline` (a Date.now() time). */
  until(test, deadline, signal) {
    return whenWoken(this._wake, test, deadline, signal);
  }

  stop() {
    for (const [event, listener] of this._listeners) event.removeListener(listener);
    wakeAll(this._wake);
  }

  _on(kind, { tabId, frameId, url, error, transitionQualifiers }) {
    if (frameId !== 0 || (this._tabId != null && tabId !== this._tabId)) return;
    const traversed = this._traversal && Boolean(transitionQualifiers && transitionQualifiers.includes('forward_back'));
    let nav = this._navs.get(tabId);
    if (kind === 'began') nav = { url, end: null };
    // A move within the page loads nothing: it began and ended at once. While a navigation to another document is on
    // its way, one is the page being left moving itself, not where the tab goes; so is any but a step in the history
    // when that is what was asked for.
    else if (kind === 'within') {
      if ((nav && !nav.end) || (this._traversal && !traversed)) return;
      nav = { url, end: { committed: url } };
    }
    // A page shown again from the browser's back-forward cache.
    else if (kind === 'committed' && !nav && traversed) nav = { url, end: { committed: url } };
    // The end of a navigation that began before the watch: not ours.
    else if (!nav) return;
    else if (kind === 'committed') nav.end = { committed: url };
    // An error page commits in place of the page; a dropped navigation leaves the page there was.
    else nav.end = error === DROPPED ? { dropped: url } : { failed: String(error), url };
    this._navs.set(tabId, nav);
    if (this._navs.size > MAX_WATCHED_TABS) this._navs.delete(this._navs.keys().next().value);
    wakeAll(this._wake);
  }
}

/**
 * What an action's answer says of the page it led to (Loads.settle's `{url, failure}`), its URL in the page block
 * after it: the new page to look at, or the browser's error page in its place and why. A clause, "it ...": `first`
 * spells it to begin a sentence.
 */
export function ledTo({ failure }, { first = false } = {}) {
  const words = failure ? `it led to a page that did not load: ${failure}. The tab shows the browser's error page for ` +
    'the URL in the block below; browser_navigate or browser_back takes it on.'
    : 'it loaded a new page (its URL is in the block below). Take a new browser_snapshot to see it.';
  return first ? `I${words.slice(1)}` : words;
}

/** Whether Chrome has stopped loading in the tab (its page and what that loads), or the tab is gone. */
function atRest(tab) {
  return !tab || tab.status === 'complete';
}

// The tabs a NavigationWatch keeps a latest navigation for before it knows its own (other tabs' loads meanwhile).
const MAX_WATCHED_TABS = 16;

/**
 * Each tab's top frame as Chrome reports it: the navigation to another document under way there (begun, neither
 * committed nor ended), and how many documents it has committed. Real input goes to whatever page a tab shows when
 * it arrives, so what a step readied must still be the page when its input goes (`commits` read before and while it
 * sends), and a step waits for a page on its way out to land before it starts (Loads.lateLoad).
 */
class TopFrames {
  constructor() {
    this._underWay = new Map(); // tabId -> the navigation under way: {url, at} (Date.now() when it began)
    this._commits = new Map(); // tabId -> documents committed since the worker started
    this._documents = new Map(); // tabId -> the document committed last (its documentId), when Chrome said
    this._wake = new Set();
    chrome.webNavigation.onBeforeNavigate.addListener(({ tabId, frameId, url }) => {
      if (frameId === 0) this._underWay.set(tabId, { url, at: Date.now() });
    });
    chrome.webNavigation.onCommitted.addListener(({ tabId, frameId, documentId }) => {
      if (frameId !== 0) return;
      this._underWay.delete(tabId);
      this._commits.set(tabId, (this._commits.get(tabId) || 0) + 1);
      if (documentId) this._documents.set(tabId, documentId);
      else this._documents.delete(tabId);
      wakeAll(this._wake);
    });
    // Only the navigation's own end: a newer one replacing it ends it after the newer one began.
    chrome.webNavigation.onErrorOccurred.addListener(({ tabId, frameId, url }) => {
      if (frameId !== 0 || this._underWay.get(tabId)?.url !== url) return;
      this._underWay.delete(tabId);
      wakeAll(this._wake);
    });
    chrome.tabs.onRemoved.addListener((tabId) => {
      this._underWay.delete(tabId);
      this._commits.delete(tabId);
      this._documents.delete(tabId);
      wakeAll(this._wake);
    });
  }

  commits(tabId) {
    return this._commits.get(tabId) || 0;
  }

  document(tabId) {
    return this._documents.get(tabId);
  }

  /**
   * Until the navigation under way in the tab commits or ends, `ms` after it began at most (a server that never
   * answers holds each call no longer than that, in all): whether one was under way.
   */
  async landed(tabId, ms, signal) {
    const nav = this._underWay.get(tabId);
    if (!nav || Date.now() >= nav.at + ms) return false;
    // Its end may have come under another address (a redirect's), which the mark cannot be matched with: a tab
    // Chrome has stopped loading in has nothing under way.
    const tab = await chrome.tabs.get(tabId).catch(() => null);
    if (!tab || tab.status === 'complete') {
      if (this._underWay.get(tabId) === nav) this._underWay.delete(tabId);
      return false;
    }
    await whenWoken(this._wake, () => this._underWay.get(tabId) !== nav, nav.at + ms, signal);
    return true;
  }
}

/**
 * The loads of the agent's tabs, and the navigation each action started. Owns the watches running and the
 * one left over from the last action that started none in its window (held for the next call).
 */
export class Loads {
  constructor() {
    this._late = null; // the LoadWatch of the last action that started no navigation in its window
    this._watches = new Set(); // the LoadWatches running
    this._top = new TopFrames();
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
   * `{url, failure}`, where the tab is and why its page did not load ('' when it did: ledTo says which in words);
   * null at once when it started none. A navigation the page starts later is left to `lateLoad`, so
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

  /** Where the navigation `watch` saw begin has landed, `{url, failure}`; null when it never reached the tab. */
  async _landed(watch) {
    // A navigation Chrome began before the page let it go (a "leave this page?" dialog) is loading already.
    if (!watch.started) watch.started = (await chrome.tabs.get(watch.tabId).catch(() => null))?.status === 'loading';
    if (!(await watch.until(() => watch.started || watch.download, NAVIGATION_START_MS))) return null;
    // A download leaves the tab at its page: nothing loads.
    if (await watch.until(() => watch.complete || watch.download, SETTLE_TIMEOUT_MS) && watch.download) return null;
    const tab = await chrome.tabs.get(watch.tabId).catch(() => null);
    return tab && { url: tab.url, failure: watch.failure };
  }

  /**
   * The tab once Chrome has stopped loading in it (SETTLE_TIMEOUT_MS at most): after a call whose page went to
   * another one under it, so what the step says next is of the page that came. Null once the tab is gone.
   */
  async atRest(tabId, signal) {
    return watchTab(tabId, SETTLE_TIMEOUT_MS, 100, atRest, signal);
  }

  /**
   * Before a call: the load of a navigation the last action's page started after its call returned, and of any
   * navigation under way in the tab (a page's own timer, a script's redirect, a submission that outlasted the
   * action's window), so the call meets the page that comes, not one on its way out.
   */
  async lateLoad(tabId) {
    const late = this._late;
    this._late = null;
    try {
      if (late && late.tabId === tabId && await late.until(() => late.started || late.left, late.windowEnd - Date.now())) {
        await this._landed(late);
      }
    } finally {
      if (late) late.stop();
    }
    await this.landing(tabId);
  }

  /**
   * Until a navigation to another document under way in the tab has landed and Chrome has stopped loading there
   * (SETTLE_TIMEOUT_MS at most for each): whether one was under way. No wait, and no call to Chrome, when none is.
   */
  async landing(tabId, signal) {
    if (tabId == null || !(await this._top.landed(tabId, SETTLE_TIMEOUT_MS, signal))) return false;
    await this.atRest(tabId, signal);
    return true;
  }

  /** How many documents the tab's top frame has committed: another count than before means another page. */
  commits(tabId) {
    return this._top.commits(tabId);
  }

  /** The documentId of the tab's top frame as Chrome last said it committed; undefined when it has not said. */
  topDocument(tabId) {
    return this._top.document(tabId);
  }

  /**
   * Starts a navigation with `start()` (chrome.tabs.update, or a new tab; it says the tab) and waits for it to end
   * (LOAD_TIMEOUT_MS at most): `{tab, failure, dropped, unfinished, began}`, `tab` as it is then (null for a dropped
   * navigation's new tab that Chrome closed). `failure`: why the page
   * did not load, in our words, when the tab shows the browser's error page in its place ('' when it loaded).
   * `dropped`: the navigation loaded nothing into the tab, which stays at the page it had (a download, an answer with
   * no content, a newer navigation in its place). `unfinished`: what `LOAD_TIMEOUT_MS` left undone ('' for none):
   * its words, as "the page is still loading after 30 s". `began`: whether the navigation showed at all (within
   * `beginsWithin` ms, LOAD_TIMEOUT_MS by default; when it did not, the tab is as it is then and `unfinished` says so).
   * Chrome's own events of the navigation say which (NavigationWatch, `traversal` as there: a step in the tab's
   * history); the navigation is followed to its latest, as through a page that sends the tab on at once.
   */
  async load(start, signal, { traversal = false, beginsWithin = LOAD_TIMEOUT_MS } = {}) {
    const deadline = Date.now() + LOAD_TIMEOUT_MS;
    const watch = new NavigationWatch({ traversal });
    try {
      throwIfCancelled(signal);
      const asked = await start();
      watch.follow(asked.id);
      if (!(await watch.until(() => watch.nav !== null, Math.min(deadline, Date.now() + beginsWithin), signal))) {
        const tab = await chrome.tabs.get(asked.id).catch(() => null);
        if (!tab) throw new ToolError(NO_TAB, 'the agent tab was closed');
        const s = Math.round(beginsWithin / 1000);
        return { tab, failure: '', dropped: false, unfinished: `the tab did not start loading the page within ${s} s`, began: false };
      }
      const ended = () => Boolean(watch.nav && watch.nav.end);
      let tab = null;
      for (;;) {
        const over = await watch.until(ended, deadline, signal);
        // Then Chrome's loading in the tab has stopped: the page and what it loads, or the error page that Chrome
        // is still committing in its place after the failure, so the next call meets the tab at rest.
        tab = over ? await watchTab(asked.id, Math.max(0, deadline - Date.now()), 100, atRest, signal)
          : await chrome.tabs.get(asked.id).catch(() => null);
        // A newer navigation that began meanwhile (a page that sends the tab on at once) is followed to its end.
        if (!over || !tab || !atRest(tab) || ended()) break;
      }
      // Chrome closes a tab it opened whose first navigation loaded nothing (a download), at once or a moment later.
      if (!tab && ended() && watch.nav.end.dropped) return { tab: null, failure: '', dropped: true, unfinished: '', began: true };
      if (!tab) throw new ToolError(NO_TAB, 'the agent tab was closed');
      if (!ended() || !atRest(tab)) {
        const unfinished = `the page is still loading after ${Math.round(LOAD_TIMEOUT_MS / 1000)} s`;
        return { tab, failure: '', dropped: false, unfinished, began: true };
      }
      const { end } = watch.nav;
      return { tab, failure: end.failed ? failureWords(end.failed) : '', dropped: Boolean(end.dropped), unfinished: '', began: true };
    } finally {
      watch.stop();
    }
  }
}
