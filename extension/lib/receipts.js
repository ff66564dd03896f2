// Receipts (docs/journal.md): what a step that changes something left, so the agent checks instead of guessing. A
// step that went through carries `_meta[META.receipt]` (`dev.openab/receipt`) = {url_before, url_after,
// title_after, element, delta} (after a reload: reloaded, element, changed), and its text ends with the same in
// words, the page's words in an untrusted block.
//
// What each tool's receipt holds (its catalogue.json facts.receipt): a step on an element (a click, typing, a key, a
// choice, a drag, a hover, an upload) has the element as it is after it and the lines of the page's outline that
// changed, which takes a look at the page before the step and one after; every other step (a navigation, going
// back, tabs, a dialog, a handoff, a scroll, a download) has where the agent tab is, which costs no look, but for a
// navigation to the address the tab is at: a reload, told as below.
// browser_plan changes no page and has none.
//
// A step after which the page is another document at the same URL (a form POST answered back to its own address, a
// reload) is "the page reloaded", never "gone": its element is looked for again in the new page (by its selector, or
// by its line's role, name and place in the outline) and given with its new ref, and the receipt says what changed
// that the person sees (`changed`: "~ In cart: 1 -> 2", a new status or heading), the page's landmarks and the lines
// nearest the element first, at most DELTA_LINES of at most LINE_CHARS characters (about 600 tokens at most).

import { factsOf, onlyReads } from './catalogue.js';
import { within } from './page-script.js';
import { addressOf } from './tabs.js';
import { oneLine } from './quoted.js';
import { META } from './protocol.js';
import { redactTokens } from './redact.js';
import { untrusted } from './results.js';
import { lineDiff, render } from './tools-read.js';

export const RECEIPT_META = META.receipt;

const DELTA_LINES = 12;
const LINE_CHARS = 200;
// The lines that changed are those between the last outline the agent was given of the page (its last whole
// browser_snapshot, or the last receipt's look if it is newer) and a look after the step. A look costs about 3 ms on a small page and 12 us a line of outline
// more, so a page whose outline is longer is not looked at; without an outline of it, it is looked at before the
// step only if its count of elements, asked in one cheap call, is under MAX_COMPARED_ELEMENTS (docs/journal.md).
export const MAX_COMPARED_LINES = 300;
const MAX_COMPARED_ELEMENTS = 1000;
// A look for a receipt that takes longer is given up: the step's own result never waits on its receipt for long.
const LOOK_MS = 1500;
// The look after a step with real input is taken in the step's own last call into its page (lib/tools-act.js,
// sendKeys: the page says what became of the input and, in the same pass, how it looks now), one call where there
// were two. By tab, for the step running there: the step's element in the top frame as the look reads it (`spec`),
// and once taken, the page's answer as render reads it. Where the page began to leave or has frames, none is kept,
// and the look after the step is taken as before, in every frame.
const ahead = new Map(); // tabId -> {spec, results: null | frames' answers to receiptLook}
const LOOK_OPTIONS = { whole: false, root: 0 }; // render's for a whole outline (lib/tools-read.js)

/** What the running step's last call into the page of tab `tabId` also reads for its receipt: `{options, spec}`, or null. */
export function lookAhead(tabId) {
  const want = ahead.get(tabId);
  return want && !want.results ? { options: LOOK_OPTIONS, spec: want.spec } : null;
}

/** The page's answers to that look (the top frame's receiptLook), taken once the step's input was handled. */
export function lookedAhead(tabId, results) {
  const want = ahead.get(tabId);
  if (want && Array.isArray(results)) want.results = results;
}

/**
 * 'element', 'page', or null: what the receipt of `name` holds, its catalogue's facts.receipt. Reads have none, nor
 * does a call of an acting tool that only reads (facts.journal.reads: a listing of the tabs).
 */
export function receiptKind(name, args) {
  const facts = factsOf(name);
  if (!facts || facts.receipt === 'none' || onlyReads(name, args)) return null;
  return facts.receipt;
}

const cut = (s, n) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

// What a new document gives every line anew, and so no change the person sees: its refs (a control's, a link's in
// a sentence) and the focus.
const FRESH = / \[ref=e\d+\]|(?<=\]\()e\d+| \[focused\]/g;
const plain = (line) => line.replace(FRESH, '');
// A line the person reads as the page's news: a heading, an alert, a status or a dialog.
const LANDMARK = /^\s*(?:- )?(?:#|(?:alert|alertdialog|status|log|dialog)\b)/;
const REF_AT = / \[ref=(e\d+)\]/;

/** Whether `url` is the address `at` (a navigation there reloads the page). */
function sameAddress(url, at) {
  try {
    return typeof url === 'string' && Boolean(at) && new URL(url).href === new URL(at).href;
  } catch {
    return false;
  }
}

/** Where a control's line is in an outline: its role and name with their indent (`key`), and which of such it is. */
function placeOf(lines, ref) {
  const i = lines.findIndex((l) => l.includes(` [ref=${ref}]`));
  if (i < 0) return null;
  const key = lines[i].slice(0, lines[i].indexOf(' [ref='));
  let nth = 0;
  for (let j = 0; j < i; j++) if (lines[j].startsWith(`${key} [ref=`)) nth++;
  return { i, key, nth };
}

/** The ref of the line at `place` (the same role, name, indent and rank) in another outline, or null. */
function findAgain(lines, place) {
  let nth = 0;
  for (const l of lines) {
    if (!l.startsWith(`${place.key} [ref=`)) continue;
    if (nth++ === place.nth) return (REF_AT.exec(l) || [])[1] || null;
  }
  return null;
}

/**
 * What changed from one document's outline to another's at the same URL, as the person sees it: a line that
 * changed in place as `~ In cart: 1 -> 2` (the words they share said once), one that came as `+ line`, one that
 * went as `- line`: each starts with its sign, so none reads as the block's `element:` line (panel/steps.js). Refs
 * and focus are not compared. The landmarks' first, then the lines nearest `near` (a line's index), in the page's
 * order; at most DELTA_LINES of at most LINE_CHARS characters.
 */
export function changesOf(before, after, near = 0) {
  const a = after.map(plain);
  const hunks = [];
  let hunk = null;
  for (const l of lineDiff(before.map(plain), a).split('\n')) {
    if (l === '@@') hunks.push((hunk = { at: -1, gone: [], came: [] }));
    else if (hunk && l[0] === ' ') hunk.at = a.indexOf(l.slice(1));
    else if (hunk && l[0] === '-') hunk.gone.push(l.slice(1));
    else if (hunk && l[0] === '+') hunk.came.push(l.slice(1));
  }
  const bare = (l) => redactTokens(l.replace(/^\s*(?:- )?/, ''));
  const found = [];
  for (const h of hunks) {
    const where = (l) => {
      const i = a.indexOf(l);
      return i >= 0 ? i : h.at + 1;
    };
    // A line that went is paired with the first that came and starts with the same words: changed in place.
    const left = [...h.came];
    for (const was of h.gone) {
      let shared = '';
      const k = left.findIndex((is) => (shared = sharedWords(bare(was), bare(is))));
      if (k < 0) {
        found.push({ i: h.at + 1, news: LANDMARK.test(was), line: `- ${bare(was)}` });
        continue;
      }
      const [is] = left.splice(k, 1);
      found.push({ i: where(is), news: LANDMARK.test(is) || LANDMARK.test(was),
        line: `~ ${shared}${bare(was).slice(shared.length)} -> ${bare(is).slice(shared.length)}` });
    }
    for (const is of left) found.push({ i: where(is), news: LANDMARK.test(is), line: `+ ${bare(is)}` });
  }
  const kept = found.map((c, order) => ({ ...c, order }))
    .sort((x, y) => (y.news - x.news) || (Math.abs(x.i - near) - Math.abs(y.i - near)) || (x.order - y.order))
    .slice(0, DELTA_LINES)
    .sort((x, y) => x.order - y.order);
  return { lines: kept.map((c) => cut(c.line, LINE_CHARS)), total: found.length };
}

/** The whole words two lines start with (through the last space or colon they share outside quotes), or ''. */
function sharedWords(x, y) {
  let end = 0;
  let quoted = false;
  for (let n = 0; n < x.length && n < y.length && x[n] === y[n]; n++) {
    if (x[n] === '"') quoted = !quoted;
    else if (!quoted && (x[n] === ' ' || x[n] === ':')) end = n + 1;
  }
  return x.slice(0, end);
}

/** The changed lines of two outlines as a receipt has them: `+ line` and `- line`, at most DELTA_LINES. */
export function deltaOf(before, after) {
  const changed = lineDiff(before, after).split('\n').filter((l) => l.startsWith('+') || l.startsWith('-'));
  // A line's own "- " (a control's) and its indent say nothing once it stands alone after its sign.
  const lines = changed.slice(0, DELTA_LINES).map((l) => cut(`${l[0]} ${redactTokens(l.slice(1).replace(/^\s*(?:- )?/, ''))}`, LINE_CHARS));
  return { lines, total: changed.length };
}

function stateWords(state) {
  const out = [];
  const pair = (key, yes, no) => {
    if (state[key] === true) out.push(yes);
    else if (state[key] === false) out.push(no);
    else if (state[key] === 'mixed') out.push(`partly ${yes}`);
  };
  pair('checked', 'checked', 'not checked');
  pair('selected', 'selected', 'not selected');
  pair('expanded', 'expanded', 'collapsed');
  pair('pressed', 'pressed', 'not pressed');
  if (state.disabled) out.push('disabled');
  return out;
}

/**
 * The receipt in words: our summary, then the page's words (URLs, title, names, values, lines) in an untrusted block,
 * each on its one line (`q`): a page's newline or bidi control cannot start a line of the block's own (an `element:`
 * line the panel and the agent read the step's element from) or turn the words around it.
 */
export function receiptWords(r) {
  const ours = [];
  const page = [];
  const q = oneLine;
  if (r.url_before !== undefined && r.url_after !== undefined) {
    const same = r.reloaded ? 'the page reloaded at the same URL' : 'the page stayed at its URL';
    ours.push(r.url_before === r.url_after ? same : 'the page went to another URL');
    page.push(r.url_before === r.url_after ? `URL: ${q(r.url_after)}` : `URL before: ${q(r.url_before)}\nURL after: ${q(r.url_after)}`);
  } else if (r.url_after !== undefined) {
    ours.push('the agent tab is at the URL in the block');
    page.push(`URL: ${q(r.url_after)}`);
  }
  if (r.title_after) page.push(`title: ${q(r.title_after)}`);
  const el = r.element;
  if (el && el.gone) {
    ours.push(r.reloaded ? 'the element was not found again in the reloaded page'
      : 'the element is gone from the page');
    const where = r.reloaded ? 'not in the reloaded page' : 'gone';
    if (el.ref) page.push(`element: [ref=${q(el.ref)}] ${where}`);
    else if (el.selector) page.push(`element: ${q(el.selector)} ${where}`);
  } else if (el) {
    const state = el.state || {};
    const words = stateWords(state);
    const value = state.value !== undefined ? ', its value in the block' : '';
    const now = words.length ? `${words.join(', ')} now` : '';
    if (el.ref_before) ours.push(`the element is there again with a new ref${now ? `, ${now}` : ''}${value}`);
    else ours.push(`the element is ${now || 'still there'}${value}`);
    page.push(`element: ${q(el.role)} ${JSON.stringify(q(el.name || ''))} [ref=${q(el.ref)}]` +
      `${el.ref_before ? ` (was [ref=${q(el.ref_before)}])` : ''}` +
      `${state.value !== undefined ? `: ${q(state.value)}` : ''}`);
  }
  if (r.delta) {
    const n = r.delta_total ?? r.delta.length;
    if (!n) ours.push('no line of the page outline changed since your last snapshot or receipt');
    else {
      ours.push(`${n} line${n === 1 ? '' : 's'} of the page outline changed since your last snapshot or receipt` +
        `${n > r.delta.length ? ` (the first ${r.delta.length} in the block)` : ''}`);
      page.push(`changed:\n${r.delta.map(q).join('\n')}`);
    }
  } else if (r.changed) {
    const n = r.changed_total ?? r.changed.length;
    if (!n) ours.push('nothing the person sees changed on the page');
    else {
      ours.push(`${n} thing${n === 1 ? '' : 's'} changed on the page ` +
        `${n > r.changed.length ? `(the first ${r.changed.length} in the block)` : '(in the block)'}`);
      page.push(`changed:\n${r.changed.map(q).join('\n')}`);
    }
  } else if (r.delta_skipped) ours.push(r.delta_skipped);
  const said = `Receipt: ${ours.join('; ') || 'the step went through'}.`;
  return page.length ? `${said}\n${untrusted(page.join('\n'))}` : said;
}

export class Receipts {
  /** @param {{tabs, page, dialogs}} parts  the browser's parts (lib/tools.js) */
  constructor(parts) {
    this.parts = parts;
    this._looks = new Map(); // tabId -> the last receipt's look {url, lines, documentId, after: table.last then}
    chrome.tabs.onRemoved.addListener((id) => this._looks.delete(id));
  }

  /** What a step's receipt starts from, taken before it runs; null for a tool without one. */
  async before(name, args) {
    const tabId = this.parts.tabs.current;
    ahead.delete(tabId);
    const kind = receiptKind(name, args);
    if (!kind) return null;
    const tab = await this._tab(tabId);
    const at = { kind, tabId, url: tab ? addressOf(tab) : undefined, look: null, skipped: '' };
    // The lines that changed need a look before (a dialog open blocks the page: no look then), on a page small
    // enough to look at twice.
    if (kind === 'element' && tab && !this._blocked(tabId) && (args.ref != null || args.selector)) {
      const last = this._lastOutline(tab);
      const elements = last ? 0 : await this._elements(tab);
      if ((last && last.lines.length > MAX_COMPARED_LINES) || elements > MAX_COMPARED_ELEMENTS) {
        const size = last ? `${last.lines.length} lines of outline` : `${elements} elements`;
        at.skipped = `the page is too long (${size}) to say here which lines changed; browser_snapshot since=true ` +
          'compares it with your last snapshot';
      } else at.look = last ? { lines: last.lines, documentId: last.documentId } : await this._look(tab);
      const named = at.look && this._named(at, args, true);
      if (named && named.frameId === 0) ahead.set(tabId, { spec: named.spec, results: null });
    } else if (kind === 'page' && tab && !this._blocked(tabId) && sameAddress(args.url, at.url)) {
      // Going to the address the tab is at reloads the page: its receipt says what changed, as after a form's
      // POST, from the same outline and within the same bounds.
      const last = this._lastOutline(tab);
      if (last ? last.lines.length <= MAX_COMPARED_LINES : await this._elements(tab) <= MAX_COMPARED_ELEMENTS) {
        at.look = last ? { lines: last.lines, documentId: last.documentId } : await this._look(tab);
      }
    }
    return at;
  }

  /** The step's result with its receipt, when it went through; any failure here leaves the result as it was. */
  async after(at, args, result) {
    const taken = at && ahead.get(at.tabId);
    if (at) ahead.delete(at.tabId);
    if (!at || !result || result.isError) return result;
    try {
      at.taken = taken && taken.results;
      const receipt = await this._receipt(at, args);
      return {
        ...result,
        content: [...(Array.isArray(result.content) ? result.content : []), { type: 'text', text: receiptWords(receipt) }],
        _meta: { ...result._meta, [RECEIPT_META]: receipt },
      };
    } catch (e) {
      console.warn('openab: no receipt', e.message);
      return result;
    }
  }

  async _receipt(at, args) {
    const receipt = {};
    const tabId = this.parts.tabs.current; // a step may have made another tab the agent's current one
    const tab = await this._tab(tabId);
    if (at.url !== undefined) receipt.url_before = at.url;
    if (tab) {
      receipt.url_after = addressOf(tab);
      if (tab.title) receipt.title_after = cut(tab.title, LINE_CHARS);
    }
    if ((at.kind !== 'element' && !at.look) || this._blocked(at.tabId)) return receipt;
    // Lines compared only on the same document of the same tab: a page that another replaced is all new.
    const compare = at.look && tab && tabId === at.tabId && receipt.url_after === at.url && !this._blocked(tabId);
    const samePage = receipt.url_after === at.url;
    const [element, now] = await this._elementAndLook(at, args, samePage, compare ? tab : null);
    if (element) receipt.element = element;
    if (at.skipped) receipt.delta_skipped = at.skipped;
    if (now && now.documentId === at.look.documentId) {
      const { lines, total } = deltaOf(at.look.lines, now.lines);
      receipt.delta = lines;
      receipt.delta_total = total;
    } else if (now && now.documentId) {
      // Another document at the same URL: the page reloaded (a form POST answered back to its own address).
      receipt.reloaded = true;
      const again = at.kind === 'element' && (!element || element.gone) ? await this._foundAgain(at, args, now) : null;
      if (again) receipt.element = again;
      else if (element && element.gone) receipt.element = element;
      if (now.lines.length > MAX_COMPARED_LINES) {
        receipt.delta_skipped = `the reloaded page is too long (${now.lines.length} lines of outline) to say here ` +
          'what changed; browser_snapshot shows it';
      } else {
        const mine = receipt.element && receipt.element.ref ? placeOf(now.lines, receipt.element.ref) : null;
        const was = args.ref != null && args.ref !== '' ? placeOf(at.look.lines, String(args.ref)) : null;
        const { lines, total } = changesOf(at.look.lines, now.lines, mine ? mine.i : was ? was.i : 0);
        receipt.changed = lines;
        receipt.changed_total = total;
      }
    }
    if (now) {
      // The next receipt starts from this look, unless the agent takes a snapshot meanwhile (`since=true` keeps
      // comparing with the agent's own last snapshot: a receipt shows 12 lines of what changed, not all).
      this._looks.set(tab.id, { url: receipt.url_after, lines: now.lines, documentId: now.documentId,
        after: this.parts.page.table(tab.id).last });
    }
    return receipt;
  }

  /**
   * The step's element in the page that replaced its own at the same URL (`now`, a look at it): by the agent's
   * selector, or the control whose line has the same role, name, indent and rank as its ref's line had; null if
   * none is.
   */
  async _foundAgain(at, args, now) {
    let spec;
    let ref = null;
    if (args.ref != null && args.ref !== '') {
      const place = placeOf(at.look.lines, String(args.ref));
      ref = place && findAgain(now.lines, place);
      if (!ref) return null;
      try {
        spec = { local: this.parts.page.table(at.tabId).lookup(ref).local };
      } catch {
        return null; // a ref the table let go of since the look (past its bound): not found again
      }
    } else if (typeof args.selector === 'string' && args.selector) spec = { selector: args.selector };
    else return null;
    const found = await this._stateIn({ tabId: at.tabId, documentIds: [now.documentId] }, spec);
    if (!found || found.gone) return null;
    return ref ? { ...found, ref, ref_before: String(args.ref) } : found;
  }

  /**
   * The step's element as it is now (`_element`) and a look at the page (`tab`, null for none), at once. Where the
   * element is in the top frame, both are one call into the page (page/agent.js, receiptLook): the outline's pass
   * reads the element too. Says `[element, look]`.
   */
  async _elementAndLook(at, args, samePage, tab) {
    const named = at.kind === 'element' ? this._named(at, args, samePage) : null;
    if (!tab) return [named ? await this._element(named, args) : null, null];
    if (!named || named.frameId !== 0) return Promise.all([named ? this._element(named, args) : null, this._look(tab)]);
    let after;
    const now = await this._look(tab, named.spec, (r) => {
      after = r;
    }, at.taken);
    // The element's document is no longer the top frame's (the step loaded another page): it is gone with it.
    if (now && after && named.documentId && after.documentId !== named.documentId) after = { result: { ok: true, gone: true } };
    return [now && after ? this._found(named, args, after) : await this._element(named, args), now];
  }

  /**
   * Where the element the step named is looked for after it: `{target, spec, ref, frameId, documentId}`, its
   * document's frame and id when known, or null when it is not looked for.
   */
  _named(at, args, samePage) {
    if (args.ref != null && args.ref !== '') {
      let hit;
      try {
        hit = this.parts.page.table(at.tabId).lookup(args.ref);
      } catch {
        return null;
      }
      return { target: { tabId: at.tabId, documentIds: [hit.documentId] }, spec: { local: hit.local }, ref: String(args.ref),
        frameId: hit.frameId, documentId: hit.documentId };
    }
    if (typeof args.selector === 'string' && args.selector) {
      // In the document the step began in: a page loaded since has other elements, whatever they match.
      if (!at.look && !samePage) return null;
      const target = at.look ? { tabId: at.tabId, documentIds: [at.look.documentId] } : { tabId: at.tabId, frameIds: [0] };
      return { target, spec: { selector: args.selector }, frameId: 0, documentId: at.look ? at.look.documentId : null };
    }
    return null;
  }

  /** The element the step named (`named`), as it is now: its ref, role, name and state, or gone. */
  async _element(named, args) {
    return this._found(named, args, await this._stateOf(named.target, named.spec));
  }

  /** What the page said of the element (`r`, its page script's stateAfter in a frame, or null) in a receipt's words. */
  _found(named, args, r) {
    const found = this._stateFrom(named.target.tabId, r);
    // A target named by its selector that left keeps the selector: the agent can tell which it was.
    if (found && found.gone) return named.ref ? { ref: named.ref, gone: true } : { selector: args.selector, gone: true };
    return found && named.ref ? { ...found, ref: named.ref } : found;
  }

  /** The page script's stateAfter of `spec` in `target`'s document: one frame's answer, or null. */
  async _stateOf(target, spec) {
    try {
      const [r] = await within(LOOK_MS, this.parts.page.exec(target, 'stateAfter', [spec]), 'the page');
      return r || null;
    } catch (e) {
      // The document is gone (the step loaded another page): so is the element.
      return /gone/.test(String(e.message)) ? { result: { ok: true, gone: true } } : null;
    }
  }

  /** The element `spec` names in `target`'s document: {ref, role, name, state}, {gone: true}, or null. */
  async _stateIn(target, spec) {
    return this._stateFrom(target.tabId, await this._stateOf(target, spec));
  }

  /** A frame's answer to stateAfter as {ref, role, name, state}, {gone: true}, or null. */
  _stateFrom(tabId, r) {
    const res = r && r.result;
    if (!res || !res.ok) return null;
    if (res.gone) return { gone: true };
    const state = { ...res.state };
    if (typeof state.value === 'string') state.value = redactTokens(state.value);
    const ref = this.parts.page.table(tabId).refFor(r.documentId, r.frameId, res.local);
    return { ref, role: res.role, name: redactTokens(res.name || ''), state };
  }

  /**
   * A look at the tab's page: its outline's lines and its top frame's document. With `spec`, the same pass reads
   * the element it names in the top frame, handed to `element` as a frame's answer to stateAfter.
   */
  async _look(tab, spec = null, element = () => {}, taken = null) {
    const parts = spec ? { ...this.parts, page: this._lookingFor(spec, element, taken) } : this.parts;
    try {
      const { lines, documentId } = await within(LOOK_MS, render(parts, false, tab), 'the page');
      return { lines, documentId };
    } catch {
      return null; // a page that cannot be read (or is slow to) gets a receipt without its lines
    }
  }

  /**
   * The page script as render (lib/tools-read.js) uses it, its outline's pass also reading `spec`'s element; its
   * answers are `taken` where the step's last call into the page took them (lookAhead).
   */
  _lookingFor(spec, element, taken = null) {
    const { page } = this.parts;
    return {
      table: (tabId) => page.table(tabId),
      exec: async (target, name, args) => {
        if (name !== 'snapshot') return page.exec(target, name, args);
        const results = taken || await page.exec(target, 'receiptLook', [...args, spec]);
        const top = results.find((r) => r.frameId === 0 && r.result);
        if (top && top.result.after) element({ documentId: top.documentId, frameId: 0, result: top.result.after });
        return results;
      },
    };
  }

  /** The last whole outline of the tab's page at its URL the agent was given: a receipt's, or its last snapshot. */
  _lastOutline(tab) {
    const last = this.parts.page.table(tab.id).last;
    const mine = this._looks.get(tab.id);
    if (mine && mine.after === last && mine.url === tab.url) return mine;
    return last && !last.interactiveOnly && last.url === tab.url && last.documentId ? last : null;
  }

  /** How many elements the tab's page has, in one short call (a page that does not say counts as too many). */
  async _elements(tab) {
    try {
      const [r] = await within(LOOK_MS, chrome.scripting.executeScript({ target: { tabId: tab.id, frameIds: [0] },
        func: () => document.getElementsByTagName('*').length }), 'the page');
      return Number.isInteger(r && r.result) ? r.result : Infinity;
    } catch {
      return Infinity;
    }
  }

  async _tab(tabId) {
    if (tabId == null || !this.parts.tabs.owned.has(tabId)) return null;
    return chrome.tabs.get(tabId).catch(() => null);
  }

  _blocked(tabId) {
    const { dialogs } = this.parts;
    return Boolean(dialogs && tabId != null && dialogs.pending(tabId));
  }
}

