// The browser tools: which implementation runs a call, one call at a time, and what its result carries. Their
// definitions are in ../catalogue.json (lib/catalogue.js); their implementations, by kind, in tools-read.js
// (reading the page), tools-act.js (acting on it), tools-tabs.js (pages and tabs), tools-screenshot.js and
// tools-person.js (a JavaScript dialog, the person's turn), tools-upload.js (a file into a page), tools-download.js
// (a file from the web into the agent's working folder), and the plan the person approves in plan.js. Every call
// takes one path, the stages of pipeline.js (queue, the person's turn, errors, the call's turn, the plan, receipts,
// downloads, late loads, dialogs, the implementation, the guard's decision in _meta). Every failure the agent can
// fix comes back as an isError result that says what to do next.

import { ToolError, NOT_ALLOWED, throwIfCancelled } from './errors.js';
import { TOOLS, factsOf } from './catalogue.js';
import { Loads } from './loads.js';
import { PageScript } from './page-script.js';
import { text } from './results.js';
import { READING_TOOLS } from './tools-read.js';
import { ACTING_TOOLS } from './tools-act.js';
import { TAB_TOOLS } from './tools-tabs.js';
import { SCREENSHOT_TOOLS } from './tools-screenshot.js';
import { PERSON_TOOLS } from './tools-person.js';
import { PLAN_TOOLS } from './plan.js';
import { UPLOAD_TOOLS } from './tools-upload.js';
import { DOWNLOAD_TOOLS } from './tools-download.js';
import { RealInput } from './input.js';
import { Receipts } from './receipts.js';
import { actionPipeline, stepPipeline } from './pipeline.js';
import { DEV_TOOLS } from './tools-dev.js';
import { DevCapture } from './devtools-capture.js';
import { WEBMCP_TOOLS } from './webmcp.js';
import { FORM_TOOLS } from './tools-form.js';

export { TOOLS };

const MAX_QUEUE = 16;
// What the guard decided for a call (stages/meta.js puts it in the result's _meta, beside the rule that decided).
const ALLOWED = 'allowed'; // the guard let it run (no question, autopilot, a site rule)
const ASKED_ALLOWED = 'asked-allowed'; // the person was asked and said yes
const DENIED = 'denied'; // a site rule or the person said no
const AGAIN_RULE = 'person:again'; // the person's answer on the card of a step that may already have happened
// Which decision a call of several steps reports: the gravest of its steps'.
const GRAVITY = { [ALLOWED]: 0, [ASKED_ALLOWED]: 1, [DENIED]: 2 };

/**
 * Each tool's implementation by its catalogue name, `(parts, args, call) => result`, from the tables of the
 * modules by kind. One implemented twice stops the extension as it loads; see checkImplemented for the rest.
 */
const IMPLEMENTATIONS = (() => {
  const all = new Map();
  for (const kind of [READING_TOOLS, ACTING_TOOLS, TAB_TOOLS, SCREENSHOT_TOOLS, PERSON_TOOLS, PLAN_TOOLS, UPLOAD_TOOLS,
    DOWNLOAD_TOOLS, DEV_TOOLS, WEBMCP_TOOLS, FORM_TOOLS]) {
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
 * One call as its implementation sees it: its cancel signal, and what the guard decided for it and by which rule,
 * which its result carries (stages/meta.js). Each call has its own, so no decision can be read into another call's
 * result.
 */
class ToolCall {
  /**
   * `journal`, for a step the pod journals: `earlier`, the step it repeats that may already have happened
   * (lib/actions.js earlierOf), `decided(decision, rule)`, told each decision as it is made, before the step
   * acts: the pod's record of the step keeps it even if the step's answer is lost; and `described(name)`, told the
   * element's name once it is described, for the panel's row of the step while it runs.
   */
  constructor(guard, signal, journal = null) {
    this._guard = guard;
    this.signal = signal;
    this.earlier = (journal && journal.earlier) || null;
    this._decided = (journal && journal.decided) || null;
    this._described = (journal && journal.described) || null;
    this.decision = ''; // '' until the guard is consulted
    this.rule = ''; // the rule that made the decision (lib/guard.js names them), '' when none was named
  }

  _decide(decision, rule) {
    this.decision = decision;
    this.rule = rule;
    if (this._decided) this._decided(decision, rule);
  }

  throwIfCancelled() {
    throwIfCancelled(this.signal);
  }

  /** Whether the guard let the step act (or the person said yes to it): from then on the page may have been changed. */
  mayHaveActed() {
    return this.decision === ALLOWED || this.decision === ASKED_ALLOWED;
  }

  /** Asks the guard whether a page action may run, noting its decision and rule. */
  async check(tool, desc, args, tabUrl) {
    if (this._described && desc && typeof desc.name === 'string' && desc.name) this._described(desc.name);
    try {
      // The person said "Do it again" on the card that named this very step (lib/stages/again.js): asked already.
      const again = this.rule === AGAIN_RULE ? { approved: AGAIN_RULE } : {};
      const { asked, rule } = await this._guard.check(tool, desc, args, this.signal, tabUrl, again);
      this._decide(asked ? ASKED_ALLOWED : ALLOWED, rule || '');
    } catch (e) {
      this._refused(e, '');
      throw e;
    }
  }

  /** The guard's site rules on a destination, noting the decision (a yes the person gave already stands). */
  destination(url) {
    try {
      const allowed = this._guard.checkDestination(url);
      this._decide(this.decision || ALLOWED, this.rule || 'routine');
      return allowed;
    } catch (e) {
      this._decide(DENIED, e.rule || 'site-rule-never');
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
      if (await plan.checkDestination(this._guard, url, this.signal)) {
        this._decide(ASKED_ALLOWED, 'plan-off-site');
      }
    } catch (e) {
      this._refused(e, 'plan-off-site');
      throw e;
    }
    return url;
  }

  /** The person's answer on the card of a step that may already have happened (lib/stages/again.js). */
  again(allowed) {
    this._decide(allowed ? ASKED_ALLOWED : DENIED, AGAIN_RULE);
  }

  /** A step the person's yes to an earlier one covers (the dialog their approved click opened). */
  allowed() {
    this._decide(ALLOWED, 'approved-step');
  }

  /**
   * One step of this call, when it carries several (lib/tools-form.js): a ToolCall of its own, judged by
   * `wrap(guard)`, whose decisions this call keeps as its own, the gravest standing (a refusal over a yes).
   */
  step(wrap) {
    return new ToolCall(wrap(this._guard), this.signal, {
      decided: (decision, rule) => {
        if (GRAVITY[decision] >= (GRAVITY[this.decision] ?? -1)) this._decide(decision, rule);
      },
      described: this._described,
    });
  }

  /** Whether the person was asked about this call and said yes. */
  get personAllowed() {
    return this.decision === ASKED_ALLOWED;
  }

  _refused(e, rule) {
    if (!(e instanceof ToolError && e.code === NOT_ALLOWED)) return;
    this._decide(DENIED, e.rule || rule);
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
   * file transfers' way to the pod, `{request(method, params, ms), sessionId(), downloads}` (lib/file-transfer.js;
   * `downloads`, the agent tabs' downloads, lib/downloads.js), null where there is no socket.
   */
  constructor(tabs, guard, onActivity, dialogs = null, passwords = null, files = null) {
    this.tabs = tabs;
    this.guard = guard;
    this.onActivity = onActivity;
    this.dialogs = dialogs;
    this.loads = new Loads();
    this.page = new PageScript();
    // What every implementation works with; `step(name, args, call)` takes one step of a call that carries several.
    this._parts = Object.freeze({
      tabs, guard, dialogs, passwords, files, page: this.page, loads: this.loads, input: new RealInput(dialogs),
      capture: dialogs ? new DevCapture(dialogs) : null,
      step: (name, args, call) => this._step({ name, args, facts: factsOf(name), call, parts: this._parts, tabId: tabs.current }),
    });
    this.receipts = new Receipts(this._parts);
    this._pipeline = actionPipeline({ maxQueue: MAX_QUEUE, onActivity, receipts: this.receipts,
      implementations: IMPLEMENTATIONS });
    this._step = stepPipeline({ receipts: this.receipts, implementations: IMPLEMENTATIONS });
  }

  list() {
    return TOOLS;
  }

  has(name) {
    return IMPLEMENTATIONS.has(name);
  }

  /**
   * Runs one call through the stages of pipeline.js, which every call of every tool takes. `journal`: what a step
   * the pod journals carries (see ToolCall): the step it repeats that may already have happened, which the person is
   * asked about first (lib/stages/again.js), and who hears the guard's decision.
   */
  async call(name, args, signal, journal = null) {
    const facts = factsOf(name);
    if (!facts || !IMPLEMENTATIONS.has(name)) return { ...text(`${name} is not a tool of this browser`), isError: true };
    const given = args && typeof args === 'object' ? args : {};
    return this._pipeline({ name, args: given, facts, call: new ToolCall(this.guard, signal, journal),
      parts: this._parts, tabId: null });
  }
}
