// The actions this browser ran, by the pod's action id (docs/journal.md): every tunnelled tools/call of a step that
// changes something carries one in params._meta, made by the pod, unique per step. The result echoes it, and an id
// this browser has already run is never run again: a second call with it (a re-issue, a pod that lost track) is
// answered with what the first one did, or, if that was never recorded, with words saying it may have happened.
//
// The record is short (the last KEPT actions) and lives in chrome.storage.session, one key an action (a write is one
// small record, not the whole list: the list's write made every click slower): it outlives a service worker that
// Chrome stopped mid-step, not the browser.

import { META } from './protocol.js';
import { EFFECT_UNKNOWN } from './stages/page-left.js';

export const ACTION_META = META.action;
// On a step the pod runs over an earlier one that may already have happened (`repeat`, docs/journal.md): that step,
// `{action, tool, at, why}`, for the card that asks the person before the browser does it again.
export const EARLIER_META = META.earlier;
// On an answer that came from the record instead of the browser acting.
export const RECORDED_META = 'dev.openab/recorded';
const RECEIPT_META = META.receipt;
const OUTCOME_META = META.outcome;

const KEPT = 200;
const STORE = 'openab.action:'; // + the action id
// `act-` and 16 random bytes in URL-safe base64 (22 characters) as the pod makes them; a little room either way.
const ACTION_ID = /^act-[A-Za-z0-9_-]{8,64}$/;
// What is kept of a result's text to answer a second call with.
const MAX_TEXT = 4000;

/** The action id a tools/call's params carry, or null for none (or one not shaped as the pod makes them). */
export function actionOf(params) {
  const meta = params && typeof params === 'object' ? params._meta : null;
  const action = meta && typeof meta === 'object' ? meta[ACTION_META] : undefined;
  return typeof action === 'string' && ACTION_ID.test(action) ? action : null;
}

const EARLIER_WHY = new Set(['lost', 'restart']);

/**
 * The earlier step a tools/call's params name (EARLIER_META), checked field by field, or null: `{action, tool, at,
 * why}`, `at` in epoch milliseconds. The pod sends it; its words only ever become ours on a card through these checks.
 */
export function earlierOf(params) {
  const meta = params && typeof params === 'object' ? params._meta : null;
  const e = meta && typeof meta === 'object' ? meta[EARLIER_META] : null;
  if (!e || typeof e !== 'object') return null;
  const at = typeof e.at === 'string' && e.at.length <= 40 ? Date.parse(e.at) : NaN;
  if (typeof e.action !== 'string' || !ACTION_ID.test(e.action) || typeof e.tool !== 'string'
      || !/^browser_[a-z_]{1,40}$/.test(e.tool) || !Number.isFinite(at) || !EARLIER_WHY.has(e.why)) return null;
  return { action: e.action, tool: e.tool, at, why: e.why };
}

/** The result with its action id echoed in `_meta`. */
export function echoed(result, action) {
  return { ...result, _meta: { ...(result && result._meta), [ACTION_META]: action } };
}

/** The name of the element a recorded action acted on, from its receipt; '' when it gives none. */
function elementName(record) {
  const receipt = record.answer && record.answer.receipt;
  const name = receipt && receipt.element && receipt.element.name;
  return typeof name === 'string' ? name.slice(0, 200) : '';
}

function textOf(result) {
  const content = result && Array.isArray(result.content) ? result.content : [];
  const text = content.filter((c) => c && c.type === 'text').map((c) => String(c.text)).join('\n');
  return text.length > MAX_TEXT ? `${text.slice(0, MAX_TEXT)}\n… (${text.length - MAX_TEXT} more characters)` : text;
}

function ago(at) {
  const s = Math.max(0, Math.round((Date.now() - at) / 1000));
  return s < 1 ? 'just now' : `${s} s ago`;
}

export class ActionLog {
  /** @param {() => chrome.storage.StorageArea | undefined} storage  where the record lives (none: memory only) */
  constructor(storage = () => globalThis.chrome?.storage?.session) {
    this._storage = storage;
    this._records = null; // [{action, tool, started, ended, outcome: 'committed' | 'failed' | 'effect_unknown' | null, answer}]
    this._loading = null;
    this._running = new Map(); // action -> promise of its result, until its record holds the outcome
    // Hears the name of the element an action acts on: `(action, name)`, as the step describes it and from its
    // receipt as it ends (lib/acp.js puts it on the panel's row of the step).
    this.onNamed = () => {};
  }

  /**
   * Runs `work` for `action` unless this browser has run it already. Whatever arrives with an action id that is
   * running or ran gets that run's outcome, marked (RECORDED_META) and said in words; the page is not touched again.
   */
  run(action, tool, work) {
    const running = this._running.get(action);
    // Checked and set in one go, before any wait: two arrivals of one id never both start.
    if (running) return running.then((result) => again(result, action, tool, 'running'), () => unknown(action, tool, null));
    const first = this._first(action, tool, work);
    this._running.set(action, first);
    const done = () => this._running.delete(action);
    first.then(done, done);
    return first;
  }

  async _first(action, tool, work) {
    const records = await this._load();
    const seen = records.find((r) => r.action === action);
    if (seen) return seen.outcome ? recorded(seen) : unknown(action, seen.tool, seen.started);
    const record = { action, tool, started: Date.now(), ended: null, outcome: null, answer: null };
    records.push(record);
    const gone = records.length > KEPT ? records.splice(0, records.length - KEPT) : [];
    // Sent before the step runs (a call into Chrome leaves at once, and its writes land in order), not waited for:
    // a worker that stops in the middle leaves a record with no outcome.
    this._save(record, gone);
    try {
      const result = await work();
      record.outcome = !result || !result.isError ? 'committed'
        : result._meta && result._meta[OUTCOME_META] === EFFECT_UNKNOWN ? EFFECT_UNKNOWN : 'failed';
      record.answer = { text: textOf(result), ...(result && result._meta && result._meta[RECEIPT_META] && {
        receipt: result._meta[RECEIPT_META] }) };
      return result;
    } catch (e) {
      record.outcome = 'failed';
      record.answer = { text: `the call failed: ${String((e && e.message) || e).slice(0, 500)}` };
      throw e;
    } finally {
      record.ended = Date.now();
      this._save(record);
      const name = elementName(record);
      if (name) this.onNamed(action, name);
    }
  }

  /** What this browser recorded of `action`: `{outcome: 'committed' | 'failed' | 'effect_unknown' | null, element?}`, or null if it never ran it. */
  async recordOf(action) {
    const record = (await this._load()).find((r) => r.action === action);
    if (!record) return null;
    const element = elementName(record);
    return { outcome: record.outcome, ended: record.ended, ...(element && { element }) };
  }

  /** The actions recorded, oldest first (for tests and the panel's curious). */
  async records() {
    return [...(await this._load())];
  }

  _load() {
    this._loading ??= (async () => {
      let saved = [];
      try {
        const area = this._storage();
        if (area) {
          saved = Object.entries(await area.get(null))
            .filter(([key, r]) => key.startsWith(STORE) && r && r.action === key.slice(STORE.length) && Number.isFinite(r.started))
            .map(([, r]) => r)
            .sort((a, b) => a.started - b.started);
        }
      } catch (e) {
        console.warn('openab: the action record was not read', e.message);
      }
      this._records = saved.slice(-KEPT);
      return this._records;
    })();
    return this._loading;
  }

  /** Writes `record` (and forgets the `gone` ones) now: Chrome applies one extension's writes in the order made. */
  _save(record, gone = []) {
    const area = this._storage();
    if (!area) return;
    const failed = (e) => console.warn('openab: the action record was not saved', e.message);
    area.set({ [STORE + record.action]: { ...record } }).catch(failed);
    if (gone.length) area.remove(gone.map((r) => STORE + r.action)).catch(failed);
  }
}

/** What a second arrival of an action id is told: the first one's result, said to be that. */
function again(result, action, tool, when) {
  if (result && result._meta && result._meta[RECORDED_META]) return result;
  const what = when === 'running' ? `was already running it (${tool})` : `already ran it (${tool}, ${when})`;
  const note = `Not done again: this browser ${what} for action ${action}; this is the outcome of that run.`;
  return {
    ...result,
    content: [{ type: 'text', text: note }, ...(result && Array.isArray(result.content) ? result.content : [])],
    _meta: { ...(result && result._meta), [ACTION_META]: action, [RECORDED_META]: true },
  };
}

function recorded(record) {
  const answer = record.answer || { text: '' };
  return again({
    content: answer.text ? [{ type: 'text', text: answer.text }] : [],
    ...(record.outcome !== 'committed' && { isError: true }),
    _meta: { ...(answer.receipt && { [RECEIPT_META]: answer.receipt }),
      ...(record.outcome === EFFECT_UNKNOWN && { [OUTCOME_META]: EFFECT_UNKNOWN }) },
  }, record.action, record.tool, ago(record.ended || record.started));
}

/** An action that started here and whose end was never recorded: it may or may not have happened. */
function unknown(action, tool, started) {
  const when = started ? ` ${ago(started)}` : '';
  return {
    content: [{ type: 'text', text: `Not done again: this browser started action ${action} (${tool})${when} and has no ` +
      'record of how it ended (the browser\'s worker stopped during it), so it may or may not have happened. Take a ' +
      'browser_snapshot to see the page before acting again.' }],
    isError: true,
    _meta: { [ACTION_META]: action, [RECORDED_META]: true },
  };
}
