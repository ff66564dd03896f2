// JavaScript dialogs (alert, confirm, prompt, beforeunload) in agent tabs. A dialog blocks its page: no
// script of ours runs there until it is answered, so a tool call would only time out. The debugger
// protocol is the one thing in MV3 that sees a dialog the page opens by itself (a timer, a load handler,
// leaving the page) as well as one our own click opens, and that can answer it: each agent tab gets a
// debugger session with the Page domain on, and a call racing its page work against a dialog opening
// reports the dialog instead of waiting.

import { ToolError, NO_DIALOG, TOOL_ERROR } from './errors.js';

const PROTOCOL = '1.3';
// A page chooses its dialog's text and may make it huge: the agent gets this much of it.
const MAX_MESSAGE = 2_000;
const MAX_DEFAULT = 500;
const ATTACH_TIMEOUT_MS = 3_000;
const DECLINED = 'openab.debuggerDeclined';

function originOf(url) {
  try {
    return new URL(url).origin;
  } catch {
    return '';
  }
}

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
  /** @param {(tabId: number) => void} onChange  a dialog opened or closed in a tab */
  constructor(onChange = () => {}) {
    this.onChange = onChange;
    this.attached = new Map(); // tabId -> Promise<boolean>: the debugger session, once asked for
    this.open = new Map(); // tabId -> {type, message, defaultPrompt, url, openedAt, ...}
    this.waiters = new Map(); // tabId -> Set<(dialog) => void>
    chrome.debugger.onEvent.addListener((source, method, params) => this._onEvent(source.tabId, method, params || {}));
    this.declined = false; // the person pressed Cancel on Chrome's debugging bar (kept across worker restarts)
    chrome.storage.session.get(DECLINED).then((got) => {
      if (got[DECLINED]) this.declined = true;
    }, () => {});
    chrome.debugger.onDetach.addListener((source, reason) => {
      // Their Cancel is a no to the bar: no tab is attached again until the extension starts afresh.
      if (reason === 'canceled_by_user') {
        this.declined = true;
        chrome.storage.session.set({ [DECLINED]: true }).catch(() => {});
        this.keepOnly([]);
      }
      this._forget(source.tabId);
    });
    chrome.tabs.onRemoved.addListener((tabId) => this._forget(tabId));
  }

  /**
   * Watches a tab for dialogs from now on; true when it is watched. A tab another debugger holds (the
   * person's DevTools) cannot be watched, and calls there behave as before: a dialog makes them time out.
   */
  watch(tabId) {
    if (tabId == null || this.declined) return Promise.resolve(false);
    let attached = this.attached.get(tabId);
    if (!attached) {
      // Chrome does not finish attaching to a page whose dialog is already open: a page tool there then
      // times out as it did before dialogs were watched, and the session counts once the dialog closes.
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
          // Page.enable also reports a dialog that was already open when we attached.
          await chrome.debugger.sendCommand({ tabId }, 'Page.enable');
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

  /** Stops watching a tab that is no longer the agent's. */
  async release(tabId) {
    if (!this.attached.has(tabId)) return;
    this._forget(tabId);
    await chrome.debugger.detach({ tabId }).catch(() => {});
  }

  /** Stops watching every tab but the agent's own (a tab released or un-shared is the person's again). */
  keepOnly(tabIds) {
    const keep = new Set(tabIds);
    for (const tabId of [...this.attached.keys()]) if (!keep.has(tabId)) this.release(tabId);
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
    if (method === 'Page.javascriptDialogOpening') {
      const dialog = {
        type: String(params.type || 'alert'), message: String(params.message || ''),
        defaultPrompt: String(params.defaultPrompt || ''), url: String(params.url || ''), origin: originOf(params.url),
        openedAt: Date.now(),
      };
      this.open.set(tabId, dialog);
      for (const resolve of this.waiters.get(tabId) || []) resolve(dialog);
      this.onChange(tabId);
    } else if (method === 'Page.javascriptDialogClosed') {
      this._closed(tabId);
    }
  }

  _closed(tabId) {
    if (this.open.delete(tabId)) this.onChange(tabId);
  }

  _forget(tabId) {
    this.attached.delete(tabId);
    this._closed(tabId);
  }
}
