// The browser tools: which implementation runs a call, one call at a time, and what its result carries. Their
// definitions are in ../catalogue.json (lib/catalogue.js); their implementations, by kind, in tools-read.js
// (reading the page), tools-act.js (acting on it), tools-tabs.js (pages and tabs), tools-screenshot.js and
// tools-person.js (a JavaScript dialog, the person's turn), tools-files.js (a file into a page, a file from the
// web into the agent's working folder), and the plan the person approves in plan.js. Every
// failure the agent can fix comes back as an isError result that says what to do next.

import { ToolError, NOT_ALLOWED, throwIfCancelled } from './errors.js';
import { TOOLS } from './catalogue.js';
import { Loads } from './loads.js';
import { PageScript } from './page-script.js';
import { text, withPage } from './results.js';
import { READING_TOOLS } from './tools-read.js';
import { ACTING_TOOLS } from './tools-act.js';
import { TAB_TOOLS } from './tools-tabs.js';
import { SCREENSHOT_TOOLS } from './tools-screenshot.js';
import { PERSON_TOOLS, dialogMet } from './tools-person.js';
import { PLAN_TOOLS } from './plan.js';
import { FILE_TOOLS } from './tools-files.js';
import { Dialogs } from './dialogs.js';
import { RealInput } from './input.js';
import { Receipts } from './receipts.js';

export { TOOLS };

const MAX_QUEUE = 16;
// What the guard decided for a call, in its result's _meta: the pod keeps it in its audit log
// (core/mcp_vocabulary.py, META_GUARD; core/mcp/audit.py, GUARD_DECISIONS). Absent when the guard was not consulted.
const GUARD_META = 'dev.openab/guard';
const ALLOWED = 'allowed'; // the guard let it run (no question, autopilot, a site rule)
const ASKED_ALLOWED = 'asked-allowed'; // the person was asked and said yes
const DENIED = 'denied'; // a site rule or the person said no

// Tools that never wait on the page's script: an open dialog neither blocks nor ends them.
const DIALOG_FREE = new Set(['browser_tabs', 'browser_plan']);
// The person has the tab during a handoff and answers the dialogs they meet themselves.
const PERSONS_TURN = new Set(['browser_handoff']);

/**
 * Each tool's implementation by its catalogue name, `(parts, args, call) => result`, from the tables of the
 * modules by kind. One implemented twice stops the extension as it loads; see checkImplemented for the rest.
 */
const IMPLEMENTATIONS = (() => {
  const all = new Map();
  for (const kind of [READING_TOOLS, ACTING_TOOLS, TAB_TOOLS, SCREENSHOT_TOOLS, PERSON_TOOLS, PLAN_TOOLS, FILE_TOOLS]) {
    for (const [name, run] of Object.entries(kind)) {
      if (all.has(name)) throw new Error(`the browser tool ${name} is implemented twice`);
      all.set(name, run);
    }
  }
  return all;
})();

/**
 * Once the catalogue is loaded: a tool in it with no implementation, or one implemented under a name it does not
 * have, stops the extension at start-up rather than fail the agent's call.
 */
export function checkImplemented() {
  const listed = new Set(TOOLS.map((t) => t.name));
  for (const name of listed) if (!IMPLEMENTATIONS.has(name)) throw new Error(`the browser tool ${name} (catalogue.json) has no implementation`);
  for (const name of IMPLEMENTATIONS.keys()) if (!listed.has(name)) throw new Error(`the browser tool ${name} is not in catalogue.json`);
}

/**
 * One call as its implementation sees it: its cancel signal, and what the guard decided for it, which its
 * result carries (GUARD_META). Each call has its own, so no decision can be read into another call's result.
 */
class ToolCall {
  constructor(guard, signal) {
    this._guard = guard;
    this.signal = signal;
    this.decision = ''; // '' until the guard is consulted
  }

  throwIfCancelled() {
    throwIfCancelled(this.signal);
  }

  /** Asks the guard whether a page action may run, noting its decision. */
  async check(tool, desc, args, tabUrl) {
    try {
      const { asked } = await this._guard.check(tool, desc, args, this.signal, tabUrl);
      this.decision = asked ? ASKED_ALLOWED : ALLOWED;
    } catch (e) {
      if (e instanceof ToolError && e.code === NOT_ALLOWED) this.decision = DENIED;
      throw e;
    }
  }

  /** The guard's site rules on a destination, noting the decision (a yes the person gave already stands). */
  destination(url) {
    try {
      const allowed = this._guard.checkDestination(url);
      this.decision = this.decision || ALLOWED;
      return allowed;
    } catch (e) {
      this.decision = DENIED;
      throw e;
    }
  }

  /**
   * A page the call is about to load: the site rules (destination), then, off an approved plan's sites, the
   * person's yes (lib/plan.js); a yes to the very step that leads there (a link the card named) stands.
   */
  async going(url) {
    this.destination(url);
    const plan = this._guard.plan;
    if (this.decision === ASKED_ALLOWED || !plan) return url;
    try {
      if (await plan.checkDestination(this._guard, url, this.signal)) this.decision = ASKED_ALLOWED;
    } catch (e) {
      if (e instanceof ToolError && e.code === NOT_ALLOWED) this.decision = DENIED;
      throw e;
    }
    return url;
  }

  /** A step the person's yes to an earlier one covers (the dialog their approved click opened). */
  allowed() {
    this.decision = ALLOWED;
  }

  /** Whether the person was asked about this call and said yes. */
  get personAllowed() {
    return this.decision === ASKED_ALLOWED;
  }
}

export class BrowserTools {
  /**
   * @param {import('./tabs.js').AgentTabs} tabs
   * @param {import('./guard.js').Guard} guard
   * @param {(delta: number) => void} onActivity  +1 when a call starts, -1 when it ends
   * @param {import('./dialogs.js').Dialogs | null} dialogs  JavaScript dialogs in agent tabs (null: not watched)
   */
  /**
   * `passwords`: the holder of Chrome's "Save password?" while the agent types one (lib/passwords.js). `files`: the
   * file transfers' way to the pod, `{request(method, params, ms), sessionId(), downloads}` (lib/tools-files.js;
   * `downloads`, the agent tabs' downloads, lib/downloads.js), null where there is no socket.
   */
  constructor(tabs, guard, onActivity, dialogs = null, passwords = null, files = null) {
    this.tabs = tabs;
    this.guard = guard;
    this.onActivity = onActivity;
    this.dialogs = dialogs;
    this.loads = new Loads();
    this.page = new PageScript();
    // What every implementation works with.
    this._parts = Object.freeze({
      tabs, guard, dialogs, passwords, files, page: this.page, loads: this.loads, input: new RealInput(dialogs),
    });
    this.receipts = new Receipts(this._parts);
    this._downloads = files && files.downloads;
    this._chain = Promise.resolve();
    this._queued = 0;
    this._handingOff = false; // a browser_handoff is queued or waits for the person
  }

  list() {
    return TOOLS;
  }

  has(name) {
    return IMPLEMENTATIONS.has(name);
  }

  /** Runs one call; page actions are serialized so two calls never interleave on a page. */
  async call(name, args, signal) {
    if (this._queued >= MAX_QUEUE) {
      return { ...text(`the browser is busy with ${this._queued} queued calls; wait for them and retry`), isError: true };
    }
    // While the person has the tab nothing else runs: a call queued behind a handoff would wait minutes
    // for an answer and then act on a page the person changed.
    if (this._handingOff) {
      const why = name === 'browser_handoff'
        ? 'refused: a browser_handoff already waits for the person; wait for its result before handing off again'
        : `${name} was not run: the person has the agent tab (a browser_handoff waits for them); wait for its result`;
      return { ...text(why), isError: true };
    }
    if (name === 'browser_handoff') this._handingOff = true;
    this._queued++;
    const call = new ToolCall(this.guard, signal);
    const run = this._chain.then(async () => {
      call.throwIfCancelled();
      this.onActivity(+1);
      try {
        const given = args && typeof args === 'object' ? args : {};
        // A step that changes something leaves a receipt (lib/receipts.js), taken inside the queue: no other call
        // acts on the page between the step and its look after.
        const start = await this.receipts.before(name, given);
        return await this.receipts.after(start, given, await this._run(name, given, call));
      } finally {
        this.onActivity(-1);
      }
    });
    this._chain = run.catch(() => {});
    let result;
    try {
      result = await run;
    } catch (e) {
      // Chrome's own messages can quote a page's URL, so they count as the page's text.
      const msg = e instanceof ToolError ? withPage(e.message, e.page) : withPage('tool error; the browser said:', String(e.message || e));
      result = { ...text(msg), isError: true };
    } finally {
      this._queued--;
      if (name === 'browser_handoff') this._handingOff = false;
    }
    return call.decision ? { ...result, _meta: { ...result._meta, [GUARD_META]: call.decision } } : result;
  }

  /**
   * Runs a tool's body in the agent tab. A JavaScript dialog blocks the page's script, so a dialog open
   * there is what a call reports instead of running, and one that opens while it runs ends it.
   */
  async _run(name, args, call) {
    // "Ask before acting": a step that changes something waits for an approved plan (lib/plan.js), decided once
    // the calls queued before it (a browser_plan among them) are done.
    const unplanned = this.guard.plan ? this.guard.plan.refusal(name, args) : '';
    if (unplanned) return { ...text(unplanned), isError: true };
    const implementation = IMPLEMENTATIONS.get(name);
    const body = () => implementation(this._parts, args, call);
    const tabId = this.tabs.current;
    // A download a call's click starts in its tab is the agent's, not the person's (lib/downloads.js).
    if (this._downloads) this._downloads.activity(tabId, +1);
    try {
      return await this._inTab(name, body, tabId, call);
    } finally {
      if (this._downloads) this._downloads.activity(tabId, -1);
    }
  }

  async _inTab(name, body, tabId, call) {
    await this.loads.lateLoad(tabId);
    if (!this.dialogs || DIALOG_FREE.has(name) || tabId == null) return body();
    // The tab is watched only while calls run there (lib/dialogs.js says why).
    const watch = await this.dialogs.hold(tabId);
    try {
      return await this._watched(name, body, tabId, call, watch);
    } finally {
      this.dialogs.settle(tabId);
    }
  }

  async _watched(name, body, tabId, call, watch) {
    if (watch === 'blocked' && name !== 'browser_handoff') return { ...text(Dialogs.blocked(name)), isError: true };
    if (watch !== 'watched') {
      // Unseen, a dialog may be what a failure is about: the agent is told it cannot know.
      const note = this.dialogs.blindNote();
      if (!note) return body();
      try {
        const result = await body();
        return result && result.isError ? { ...result, content: [...result.content, { type: 'text', text: note }] } : result;
      } catch (e) {
        if (e instanceof ToolError) e.message += ` (${note})`;
        throw e;
      }
    }
    const open = this.dialogs.pending(tabId);
    if (open && name !== 'browser_handle_dialog') return dialogMet(open, name, false, call);
    if (PERSONS_TURN.has(name)) return body();
    const { result, dialog } = await this.dialogs.race(tabId, body);
    return dialog ? dialogMet(dialog, name, true, call) : result;
  }
}
