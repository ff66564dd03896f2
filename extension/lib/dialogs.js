// JavaScript dialogs (alert, confirm, prompt, beforeunload) in agent tabs. A dialog blocks its page: no
// script of ours runs there until it is answered, so a tool call would only time out. The debugger
// protocol is the one thing in MV3 that sees a dialog the page opens by itself (a timer, a load handler,
// leaving the page) as well as one our own click opens, and that can answer it. A debugger session puts
// Chrome's "started debugging this browser" bar over every window, so a tab has one only while the agent
// works in it: from a call's start until the page has been quiet for LINGER_MS after the last call, and for
// as long as a dialog it saw is open (only the session that saw a dialog can answer it). Chrome never tells
// a session that arrives after a dialog opened about it (Page.enable waits for the page, which the dialog
// blocks), so a call that finds its page that way says the page is blocked instead of waiting on it.

import { ToolError, NO_DIALOG, TOOL_ERROR } from './errors.js';
import { webOrigin } from './settings.js';

const PROTOCOL = '1.3';
// A page chooses its dialog's text and may make it huge: the agent gets this much of it.
const MAX_MESSAGE = 2_000;
const MAX_DEFAULT = 500;
const ATTACH_TIMEOUT_MS = 3_000;
// How long a tab stays watched after the agent's last call there: what the call started (a page loading, a
// timer it set) can still ask, and the agent's next call usually comes within it.
const LINGER_MS = 20_000;
const DECLINED = 'openab.debuggerDeclined';
/** What the panel and the agent are told once the person has pressed Cancel on Chrome's debugging bar. */
export const DECLINED_NOTE = "You cancelled Chrome's debugging bar: openab can no longer see page dialogs (alert, confirm, " +
  '"Leave this page?") in the agent\'s tabs until you start a new chat. A dialog there waits for you to answer it.';
const DECLINED_FOR_AGENT = 'note: openab cannot see JavaScript dialogs in the agent tab now (the user cancelled Chrome\'s ' +
  'debugging bar), so a dialog may be what blocks this page: ask the user to answer it, or wait for them.';
const BLOCKED = 'was not run: the page in the agent tab does not respond. Most likely a JavaScript dialog opened there ' +
  'while no call of yours was running, and Chrome shows such a dialog only to whoever watched the tab when it opened. ' +
  'Ask the user to answer it (browser_handoff gives them the tab), then try again.';

/** The buttons of each kind, in the words a person sees on them. */
const BUTTONS = {
  alert: 'it has only OK, so accept it',
  confirm: 'accept is OK, dismiss is Cancel',
  prompt: 'accept is OK (with prompt_text as the answer), dismiss is Cancel',
  beforeunload: 'the page asks whether to leave it: accept leaves (unsaved changes are lost), dismiss stays',
};

/**
 * What the agent is told about an open dialog: ours first, the page's text apart (the caller wraps it as
 * untrusted content). `ran` is the tool that opened or met it; `run` says whether that tool did its work.
 */
export function dialogReport(dialog, tool, ran) {
  const kind = Object.hasOwn(BUTTONS, dialog.type) ? dialog.type : 'alert';
  const head = ran
    ? `a JavaScript ${kind} dialog opened in the agent tab during ${tool}`
    : `${tool} was not run: a JavaScript ${kind} dialog is open in the agent tab`;
  const message = String(dialog.message);
  const page = [`dialog: ${kind}`, `message: ${message.slice(0, MAX_MESSAGE)}`];
  if (kind === 'prompt' && dialog.defaultPrompt) page.push(`default answer: ${String(dialog.defaultPrompt).slice(0, MAX_DEFAULT)}`);
  const cut = message.length > MAX_MESSAGE ? `; only the first ${MAX_MESSAGE} of its ${message.length} characters are shown` : '';
  return {
    ours: `${head}, and the page is blocked until it is answered (its text is in the block below${cut}). ` +
      `Answer it with browser_handle_dialog: ${BUTTONS[kind]}.`,
    page: page.join('\n'),
  };
}

export class Dialogs {
  /** @param {(tabId: number) => void} onChange  a dialog opened or closed in a tab, or the watch was declined */
  constructor(onChange = () => {}) {
    this.onChange = onChange;
    this.attached = new Map(); // tabId -> Promise<boolean>: the debugger session, once asked for
    this.open = new Map(); // tabId -> {type, message, defaultPrompt, url, openedAt, ...}
    this.waiters = new Map(); // tabId -> Set<(dialog) => void>
    this.busy = new Map(); // tabId -> how many calls run there now
    this.lingering = new Map(); // tabId -> the timer that lets its session go
    this.readers = new Set(); // others that read the same sessions (lib/devtools-capture.js)
    chrome.debugger.onEvent.addListener((source, method, params) => this._onEvent(source.tabId, method, params || {}));
    this.declined = false; // the person pressed Cancel on Chrome's debugging bar (kept across worker restarts)
    chrome.storage.session.get(DECLINED).then((got) => {
      if (got[DECLINED]) this.declined = true;
    }, () => {});
    chrome.debugger.onDetach.addListener((source, reason) => {
      // Their Cancel is a no to the bar: no tab is attached again in this chat, and the panel says so.
      if (reason === 'canceled_by_user') {
        this.declined = true;
        chrome.storage.session.set({ [DECLINED]: true }).catch(() => {});
        this.keepOnly([]);
      }
      this._forget(source.tabId);
      this.onChange(source.tabId);
    });
    chrome.tabs.onRemoved.addListener((tabId) => this._forget(tabId));
  }

  /** What the panel shows: the kind of dialog open in each watched tab, and a line when watching was declined. */
  view() {
    return { open: new Map([...this.open].map(([tabId, d]) => [tabId, d.type])), note: this.declined ? DECLINED_NOTE : '' };
  }

  /** A new chat asks again: the person's Cancel was about the chat they were in. */
  allowAgain() {
    if (!this.declined) return;
    this.declined = false;
    chrome.storage.session.remove(DECLINED).catch(() => {});
    this.onChange(null);
  }

  /**
   * A call starts in a tab: watches it until `settle(tabId)` and LINGER_MS after. Says 'watched', or 'declined'
   * (the person cancelled the debugging bar), 'blocked' (the page does not answer: a dialog opened unseen), or
   * 'unwatched' (another debugger holds the tab, such as the person's DevTools: calls there behave as before,
   * and a dialog makes them time out).
   */
  async hold(tabId) {
    if (this.declined) return 'declined';
    this.busy.set(tabId, (this.busy.get(tabId) || 0) + 1);
    this._stopLinger(tabId);
    if (await this.watch(tabId)) return 'watched';
    if (this.declined) return 'declined';
    // Attached, but Page.enable has not come back: the page's renderer is stuck, as a dialog leaves it.
    return this.attached.has(tabId) ? 'blocked' : 'unwatched';
  }

  /** The call that held the tab ended: it stays watched LINGER_MS more, or while a dialog there is open. */
  settle(tabId) {
    const n = (this.busy.get(tabId) || 1) - 1;
    if (n > 0) this.busy.set(tabId, n);
    else this.busy.delete(tabId);
    this._linger(tabId);
  }

  /** A tab the agent just opened (or a popup its page opened): watched from its first load, as if a call ran there. */
  look(tabId) {
    if (this.declined) return;
    this.hold(tabId).finally(() => this.settle(tabId));
  }

  /** What a failed call adds when it ran unwatched because the person declined the bar; '' otherwise. */
  blindNote() {
    return this.declined ? DECLINED_FOR_AGENT : '';
  }

  /** The result of a call that found its page blocked by a dialog it cannot see. */
  static blocked(tool) {
    return `${tool} ${BLOCKED}`;
  }

  _linger(tabId) {
    this._stopLinger(tabId);
    if (this.busy.has(tabId) || this.open.has(tabId) || !this.attached.has(tabId)) return;
    this.lingering.set(tabId, setTimeout(() => {
      this.lingering.delete(tabId);
      if (!this.busy.has(tabId) && !this.open.has(tabId)) this.release(tabId);
    }, LINGER_MS));
  }

  _stopLinger(tabId) {
    clearTimeout(this.lingering.get(tabId));
    this.lingering.delete(tabId);
  }

  /**
   * Attaches to a tab (once); true when it is watched. Chrome does not finish attaching to a page whose
   * dialog is already open: Page.enable answers only once the dialog closes, and says nothing of it.
   */
  watch(tabId) {
    if (tabId == null || this.declined) return Promise.resolve(false);
    let attached = this.attached.get(tabId);
    if (!attached) {
      attached = (async () => {
        try {
          await chrome.debugger.attach({ tabId }, PROTOCOL);
        } catch (e) {
          if (!/already attached/i.test(String(e.message))) {
            this.attached.delete(tabId);
            return false;
          }
        }
        try {
          await chrome.debugger.sendCommand({ tabId }, 'Page.enable');
          // Not awaited: the dialogs are watched now, whatever a reader still sets up (it waits for that itself).
          for (const r of this.readers) r.attached(tabId).catch(() => {});
          return true;
        } catch {
          this.attached.delete(tabId);
          return false;
        }
      })();
      this.attached.set(tabId, attached);
    }
    let timer;
    const late = new Promise((resolve) => {
      timer = setTimeout(() => resolve(false), ATTACH_TIMEOUT_MS);
    });
    return Promise.race([attached, late]).finally(() => clearTimeout(timer));
  }

  /**
   * Another reader of the agent tabs' sessions, which an extension cannot open twice: `attached(tabId)` once a
   * session is up, `event(tabId, method, params)` for each of its events.
   */
  addReader(reader) {
    this.readers.add(reader);
  }

  /** Stops watching a tab (no longer the agent's, or quiet since its last call). */
  async release(tabId) {
    if (!this.attached.has(tabId)) return;
    this._forget(tabId);
    this.busy.delete(tabId);
    await chrome.debugger.detach({ tabId }).catch(() => {});
  }

  /** Stops watching every tab but the agent's own (a tab released or un-shared is the person's again). */
  keepOnly(tabIds) {
    const keep = new Set(tabIds);
    for (const tabId of [...this.attached.keys()]) if (!keep.has(tabId)) this.release(tabId);
  }

  /**
   * Whether the tab's session can carry the agent's real input (lib/input.js): 'ok', 'declined' (the person
   * cancelled the bar) or 'unwatched' (no session: another debugger holds the tab). A second session from this
   * extension would fail, so input goes through this one.
   */
  async session(tabId) {
    if (this.declined) return 'declined';
    if (await this.watch(tabId)) return 'ok';
    return this.declined ? 'declined' : 'unwatched';
  }

  /** Sends one protocol command through the tab's session; `session(tabId)` says whether there is one. */
  send(tabId, method, params) {
    return chrome.debugger.sendCommand({ tabId }, method, params);
  }

  /** The dialog open in a tab, or null. */
  pending(tabId) {
    return this.open.get(tabId) || null;
  }

  /**
   * Runs `work` (a page tool's body) in a watched tab, and settles with `{dialog}` if a dialog opens there
   * before it ends, else with `{result}`. Work still running when the dialog wins goes on in the
   * background (it resumes once the dialog is answered) and its outcome is dropped.
   */
  async race(tabId, work) {
    let stop = () => {};
    const opened = new Promise((resolve) => {
      const waiters = this.waiters.get(tabId) || new Set();
      waiters.add(resolve);
      this.waiters.set(tabId, waiters);
      stop = () => waiters.delete(resolve);
    });
    const running = work();
    try {
      return await Promise.race([running.then((result) => ({ result })), opened.then((dialog) => ({ dialog }))]);
    } finally {
      stop();
      running.catch(() => {});
    }
  }

  /** Answers the tab's open dialog; resolves once the page has it. */
  async answer(tabId, accept, promptText) {
    const dialog = this.pending(tabId);
    if (!dialog) throw new ToolError(NO_DIALOG, 'no JavaScript dialog is open in the agent tab; take a browser_snapshot');
    const params = { accept: Boolean(accept), ...(typeof promptText === 'string' && { promptText }) };
    try {
      await chrome.debugger.sendCommand({ tabId }, 'Page.handleJavaScriptDialog', params);
    } catch (e) {
      // The person may have answered it in the tab a moment earlier.
      if (!this.pending(tabId)) throw new ToolError(NO_DIALOG, 'the dialog was already answered (by the person?); take a browser_snapshot');
      throw new ToolError(TOOL_ERROR, 'could not answer the dialog; the browser said:', String(e.message || e));
    }
    if (this.open.get(tabId) === dialog) this._closed(tabId);
  }

  _onEvent(tabId, method, params) {
    for (const r of this.readers) r.event(tabId, method, params);
    if (method === 'Page.javascriptDialogOpening') {
      const dialog = {
        type: String(params.type || 'alert'), message: String(params.message || ''),
        defaultPrompt: String(params.defaultPrompt || ''), url: String(params.url || ''), origin: webOrigin(params.url),
        openedAt: Date.now(),
      };
      this.open.set(tabId, dialog);
      this._stopLinger(tabId);
      for (const resolve of this.waiters.get(tabId) || []) resolve(dialog);
      this.onChange(tabId);
    } else if (method === 'Page.javascriptDialogClosed') {
      this._closed(tabId);
    }
  }

  _closed(tabId) {
    if (!this.open.delete(tabId)) return;
    this._linger(tabId);
    this.onChange(tabId);
  }

  _forget(tabId) {
    this._stopLinger(tabId);
    this.attached.delete(tabId);
    this._closed(tabId);
  }
}
