// The page script (page/*.js) in agent tabs as the tools use it: injected where a call finds it missing and asked
// to run one of its functions, bounded in time; the tab-wide refs (e1, e2, ...) the agent sees for its local element ids; and
// what its refusals mean for the agent.

import {
  ToolError, BAD_TARGET, BROWSER_RESTRICTED, FOCUS_MOVED, NO_FOCUS, NOT_FOUND, PAGE_LEFT, STALE_REF, TIMEOUT, TOOL_ERROR,
} from './errors.js';

// Injected in this order into every frame a call reaches: the later files use what the earlier ones put in the
// page script's namespace. A document that has them already keeps its first instance and its element ids.
const PAGE_SCRIPTS = ['page/elements.js', 'page/pointers.js', 'page/read.js', 'page/input.js', 'page/agent.js', 'page/files.js'];
// What a document without the page script answers a call with (page/agent.js sets globalThis.__openab last).
const MISSING = 'openab: no page script here';
export const PAGE_ANSWER_MS = 20_000;
const MAX_REFS_PER_TAB = 50_000;
// What the agent can do when the key it meant for the focused element found the focus elsewhere.
const NO_FOCUS_ADVICE = 'nothing was pressed. Take a new browser_snapshot, and press the key on the element by its ref';
// Chrome's refusal of a call whose frame got another document on the way (the tab navigated meanwhile).
const FRAME_REMOVED = /Frame with ID \d+ was removed|frame was removed/i;

/** The page went to another page during the call. `unsent`: before the step sent its input (nothing was done). */
export function pageLeftError({ unsent = false } = {}) {
  const e = new ToolError(PAGE_LEFT, 'the page went to another page during the call; take a new browser_snapshot');
  e.unsent = unsent;
  return e;
}

/** A page stuck in a busy loop never answers a script; the agent must hear that, not wait forever. */
export function within(ms, promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new ToolError(TIMEOUT, `${what} did not answer in ${ms / 1000} s; ` +
      'the page may be busy. Try again, or take a browser_screenshot to see it.')), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Tab-wide refs: numbers are never reused in a tab, even across documents. */
class RefTable {
  constructor() {
    this.next = 1;
    this.byRef = new Map();
    this.byKey = new Map();
  }

  refFor(documentId, frameId, local) {
    const key = `${documentId}:${local}`;
    let ref = this.byKey.get(key);
    if (!ref) {
      ref = `e${this.next++}`;
      this.byKey.set(key, ref);
      this.byRef.set(ref, { documentId, frameId, local });
      if (this.byRef.size > MAX_REFS_PER_TAB) {
        const [oldRef, old] = this.byRef.entries().next().value;
        this.byRef.delete(oldRef);
        this.byKey.delete(`${old.documentId}:${old.local}`);
      }
    }
    return ref;
  }

  lookup(ref) {
    const hit = this.byRef.get(String(ref));
    if (!hit) throw staleRef(ref);
    return hit;
  }
}

function staleRef(ref) {
  return new ToolError(STALE_REF, `stale_ref: ref ${ref} is not in the current page (the page changed or the ref ` +
    'is from another tab). Take a new browser_snapshot and use its refs.');
}

/** The page script of every agent tab, and each tab's refs (dropped with the tab). */
export class PageScript {
  constructor() {
    this.refs = new Map(); // tabId -> RefTable
    chrome.tabs.onRemoved.addListener((id) => this.refs.delete(id));
  }

  table(tabId) {
    let t = this.refs.get(tabId);
    if (!t) this.refs.set(tabId, (t = new RefTable()));
    return t;
  }

  /** Runs the page script's function `name` in every frame of `target`: one result per frame. */
  async exec(target, name, args) {
    let results;
    try {
      results = await within(PAGE_ANSWER_MS, this._run(target, name, args), 'the page');
    } catch (e) {
      if (e instanceof ToolError) throw e;
      const m = String(e.message || e);
      if (FRAME_REMOVED.test(m)) throw pageLeftError();
      if (/No (document|frame) with id/i.test(m)) throw new ToolError(STALE_REF, 'stale_ref: that part of the page is gone. Take a new browser_snapshot.');
      if (/Cannot access|cannot be scripted|extensions gallery/i.test(m)) {
        throw new ToolError(BROWSER_RESTRICTED, "Chrome does not let extensions act on this page (Chrome's message is in the " +
          'block below). Navigate to an http(s) page first.', m);
      }
      throw new ToolError(TOOL_ERROR, 'tool error; the browser said:', m);
    }
    const top = results.find((r) => r.frameId === 0);
    if (top && top.result == null && await this._replaced(target.tabId, top.documentId)) throw pageLeftError();
    return results;
  }

  /**
   * Throws PAGE_LEFT (unsent) when the tab's top frame no longer holds `documentId`: right before real input goes
   * to the tab, which Chrome gives to whatever page is there, so a page that left as it was readied (a field whose
   * focus sends the tab elsewhere) never gets keys or a click meant for the page the guard saw. `top`: the document
   * Chrome last said the tab committed (lib/loads.js), which spares asking Chrome; asked when it has not said.
   */
  async stillAt(tabId, documentId, top = undefined) {
    if (top ? top !== documentId : await this._replaced(tabId, documentId)) throw pageLeftError({ unsent: true });
  }

  /**
   * Whether the tab's top frame holds another document than `documentId` now. A document the tab left while a call
   * was in it answers nothing, which is not the page's silence: the page it was is gone (a frame's own navigation
   * is not the step's, and is left to the tools). A tab that closed is the tools' to say.
   */
  async _replaced(tabId, documentId) {
    const frame = await chrome.webNavigation.getFrame({ tabId, frameId: 0 }).catch(() => null);
    return Boolean(frame && documentId && frame.documentId !== documentId);
  }

  // One round trip where the documents have the page script (every call after a document's first); the ones that
  // lack it get the files and then the call. A document that ran the call is never asked to run it again.
  async _run(target, name, args) {
    const call = {
      func: (fn, a, missing) => (globalThis.__openab ? globalThis.__openab[fn](...a) : missing),
      args: [name, args, MISSING],
    };
    const results = await chrome.scripting.executeScript({ target, ...call });
    const lacking = results.filter((r) => r.result === MISSING).map((r) => r.documentId);
    if (!lacking.length) return results;
    const where = { tabId: target.tabId, documentIds: lacking };
    await chrome.scripting.executeScript({ target: where, files: PAGE_SCRIPTS });
    const ran = new Map((await chrome.scripting.executeScript({ target: where, ...call })).map((r) => [r.documentId, r]));
    // A document gone in between has no answer, which the tools read as a page that did not answer.
    return results.map((r) => (r.result === MISSING ? (ran.get(r.documentId) ?? { ...r, result: undefined }) : r));
  }

  /** The answer of the tab's top frame. */
  async top(tab, name, ...args) {
    const [res] = await this.exec({ tabId: tab.id, frameIds: [0] }, name, args);
    return res && res.result;
  }

  /** Where the element the agent named is: its frames, how the page script finds it, and our label for it. */
  async locate(tab, args, focused = false) {
    if (focused) return { target: { tabId: tab.id, frameIds: [0] }, spec: { focused: true }, label: 'the focused element' };
    if (args.ref != null && args.ref !== '') {
      const hit = this.table(tab.id).lookup(args.ref);
      return { target: { tabId: tab.id, documentIds: [hit.documentId] }, spec: { local: hit.local }, label: `[ref=${String(args.ref)}]` };
    }
    if (typeof args.selector === 'string' && args.selector) {
      return { target: { tabId: tab.id, frameIds: [0] }, spec: { selector: args.selector }, label: args.selector };
    }
    throw new ToolError(BAD_TARGET, 'give "ref" (from browser_snapshot) or "selector" (CSS)');
  }

  /** The page script's refusal (or its silence) as the agent's error. */
  error(res, loc, args) {
    if (!res) return new ToolError(TOOL_ERROR, 'tool error: the page did not answer; try again');
    if (res.error === STALE_REF) return args.ref ? staleRef(args.ref) : new ToolError(STALE_REF, `stale_ref: ${res.message}; take a new browser_snapshot`);
    if (res.error === NO_FOCUS || res.error === FOCUS_MOVED) return new ToolError(res.error, `${res.message}; ${NO_FOCUS_ADVICE}`);
    if (res.error === NOT_FOUND) {
      return new ToolError(NOT_FOUND, `no element for selector: ${args.selector}. Check the selector, or take a browser_snapshot and use a ref.`);
    }
    return new ToolError(res.error || TOOL_ERROR, `${res.message || 'the action failed'} (${loc.label})`, res.page || '');
  }
}
