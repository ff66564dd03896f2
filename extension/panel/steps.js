// A browser step as the person reads it: what happened, in words ("Opened shop.example/checkout", "Clicked
// "Buy now"", "You declined: Type into Email"), from the tool's name and arguments, and the element's name from
// the agent's own description of it or from the result. Steps that are not browser tools (a CLI's own "Read file")
// keep the agent's title. Everything here came from the agent or the page: it only ever becomes text nodes.

import { FACTS, loadCatalogue, picks, stepCall } from '../lib/catalogue.js';
import { oneLine } from '../lib/quoted.js';

// Each tool's row words are its catalogue facts.row (`verbs`: imperative, past, progressive; `object`: the kind of
// what it acts on, or `says`: fixed words; `when`: other words for some argument values). The panel reads the
// packaged file itself, as the worker does: it needs no worker to be running to name a step.
await loadCatalogue();

// What a step acts on, by the kind its row names, from the arguments and the element.
const OBJECTS = {
  place: (a) => place(a.url),
  element: (a, el) => el.plain,
  'named-element': (a, el) => el.quoted,
  key: (a, el) => `${short(a.key) || 'a key'}${el.given ? ` in ${el.plain}` : ''}`,
  option: (a, el) => `${quote(a.value) || 'an option'} in ${el.plain}`,
  scroll: (a, el) => (a.ref != null ? `to ${el.plain}` : short(a.direction) || 'down'),
  wait: (a) => waitedFor(a),
  search: (a) => `the page for ${quote(a.text) || 'text'}`,
  html: (a) => (a.selector ? `the HTML of ${short(a.selector)}` : "the page's HTML"),
  'new-tab': (a) => (a.url ? `a tab at ${place(a.url)}` : 'a tab'),
  'to-tab': (a) => `to tab ${short(a.tab_id)}`,
  tab: (a) => `tab ${short(a.tab_id)}`,
  upload: (a, el) => `${fileName(a.path) || 'a file'}${el.given ? ` into ${el.plain}` : ''}`,
  download: (a) => `${fileName(a.path) || 'a file'}${a.url ? ` from ${place(a.url)}` : ''}`,
  'page-tool': (a) => (quote(a.name) ? `the page's tool ${quote(a.name)}` : "a tool of the page"),
};

// Every tool of extension/catalogue.json, by name: its row (tests/browser/test_rendering.py holds the lists equal).
const ROWS = new Map([...FACTS].map(([name, facts]) => [name, facts.row]));
for (const [name, row] of ROWS) {
  for (const words of [row, ...(row.when || [])]) {
    if (words.object && !OBJECTS[words.object]) throw new Error(`panel/steps.js has no words for ${name}'s object ${words.object}`);
  }
}

export const BROWSER_TOOLS = [...ROWS.keys()];

/** A step's three verb forms and its object, from its tool's row and the call's arguments. */
function rowWords(tool, args, el) {
  const row = ROWS.get(tool);
  const words = (row.when || []).find((w) => picks(w.args, args)) || row;
  return [words.verbs, words.object ? OBJECTS[words.object](args, el) : words.says];
}

const MAX_OBJECT = 60;
const MAX_NAME = 50;

// The agent's and the page's words are marked in a row's words by two control characters, which oneLine escapes
// out of the words themselves, so only this module's marks mark: describeStep hands the row its `parts`, and
// render.js shows each marked stretch as quoted text, set apart from ours.
const OPEN = '\u0001';
const CLOSE = '\u0002';
const MARKED = new RegExp(`${OPEN}([^${OPEN}${CLOSE}]*)${CLOSE}`, 'g');
const theirs = (text) => (text ? `${OPEN}${text}${CLOSE}` : '');

/** Words of the agent or a page on one line, cut to `max`, unmarked (`short` marks them). */
function clip(value, max = MAX_OBJECT) {
  if (value === undefined || value === null || typeof value === 'object') return '';
  const text = oneLine(String(value).replace(/\s+/g, ' ').trim());
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

const short = (value, max = MAX_OBJECT) => theirs(clip(value, max));

function quote(value) {
  const text = clip(value, MAX_NAME);
  return text ? `"${theirs(text)}"` : '';
}

/** A URL as a person names a place: no scheme, no trailing slash. */
function place(url) {
  const text = clip(url, 200).replace(/^https?:\/\//i, '').replace(/\/$/, '');
  return short(text) || 'a page';
}

/** A file the agent names by its path in its working folder, as its name alone: "report.pdf". */
function fileName(path) {
  const last = clip(path, 200).split('/').filter(Boolean).pop() || '';
  return quote(last);
}

function waitedFor(a) {
  if (a.text) return `for ${quote(a.text)}`;
  if (a.selector) return `for ${short(a.selector)}`;
  if (a.url) return `for ${place(a.url)}`;
  return 'for the page to load';
}

// The element as the browser's result (or the guard's refusal) names it, in the page's block: `button "Buy now"`.
const ELEMENT_LINE = /^(?:element: )?([a-z][\w-]*) "((?:[^"\\]|\\.)*)"/im;
const PAGE_BLOCK = /<<<page-content (\d+)\n([\s\S]*?)\n>>>page-content \1/;
const PAGE_BLOCKS = new RegExp(PAGE_BLOCK.source, 'g');

/** The element a step acts on: the agent's description, else the page's name for it, else what targets it. */
function elementOf(args, resultText) {
  const given = clip(args.element, MAX_NAME);
  if (given) return { given: true, plain: theirs(given), quoted: `"${theirs(given)}"` };
  // The first block that names one: a result may open with another (the pod's list of steps a restart left).
  const found = [...String(resultText || '').matchAll(PAGE_BLOCKS)].map((b) => ELEMENT_LINE.exec(b[2])).find(Boolean);
  if (found) {
    const name = clip(found[2].replace(/\\(.)/g, '$1'), MAX_NAME);
    if (name) return { given: true, plain: theirs(name), quoted: `"${theirs(name)}"` };
    return { given: true, plain: `a ${theirs(found[1])}`, quoted: `a ${theirs(found[1])}` };
  }
  if (args.selector) return { given: true, plain: short(args.selector), quoted: short(args.selector) };
  return { given: false, plain: 'a field', quoted: 'an element' };
}

/**
 * Why the browser did not take the step, when the person (or their rule) said no: the guard's refusal opens with
 * these words (lib/guard.js), outside the page's block, which could otherwise pretend one.
 */
function refusal(item) {
  const ours = String(item.text || '').replace(PAGE_BLOCK, '');
  const said = /(?:^|\n)\s*(?:error:\s*)?not allowed by the user(?: \(([^)]*)\))?/i.exec(ours);
  if (!said && item.guard !== 'denied') return '';
  const why = said ? said[1] || '' : '';
  if (/did not answer/i.test(why)) return 'You did not answer in time';
  // A repeat of a step that may already have happened, on its card (lib/stages/again.js).
  if (/check the page/i.test(why)) return 'You chose to check the page first';
  // The guard's TAB_CLOSED: the card went with its tab, unanswered; nobody declined anything.
  if (/tab closed/i.test(why)) return 'The tab closed before you answered';
  if (/declined/i.test(why)) return 'You declined';
  if (said && /site rule/i.test(ours)) return 'Blocked by your site rule';
  return 'You declined';
}

const lower = (s) => s.charAt(0).toLowerCase() + s.slice(1);

// A failure's words are written for the model (what to call next, with which arguments): the row says them short,
// and the whole text stays under the step's details. Some of our messages open with their code (lib/errors.js).
const CODE_WORDS = {
  stale_ref: 'That part of the page changed or is gone',
  no_focus: 'No element had the keyboard focus',
  focus_moved: 'The keyboard focus moved to another element',
  not_found: 'The element was not found on the page',
  bad_selector: 'The selector is not valid',
  bad_target: 'The agent did not say which element',
  action_failed: 'The page did not take the action',
};
const OPENINGS = [
  [/^tool error\b/i, 'The browser did not take the step'],
  [/^no (?:current )?agent tab\b/i, 'No tab open for the agent yet'],
  [/^no element for selector\b/i, CODE_WORDS.not_found],
];
const THEIRS_IN_OURS = /"[^"]*"|\b[a-z][a-z0-9+.-]*:\/\/\S+/gi;

/** Why a failed step failed, for the person: a phrase of ours, else the first clause of our words. */
function failureWords(text) {
  const ours = String(text || '').replace(PAGE_BLOCKS, '').replace(/^Untrusted page content follows.*$/gim, '').trim();
  const code = /^([a-z]+(?:_[a-z]+)+):\s/.exec(ours);
  if (code && Object.hasOwn(CODE_WORDS, code[1])) return CODE_WORDS[code[1]];
  const opening = OPENINGS.find(([re]) => re.test(ours));
  if (opening) return opening[1];
  const first = ours.split(/[.;:](?:\s|$)/)[0].trim();
  // A clause that names a tool or its arguments is still talking to the model.
  if (!first || /browser_|[{}[\]]/.test(first) || first.length > 120) return first ? 'The browser could not do it' : '';
  // The agent's own words in it (a URL, a quoted value) are marked as theirs.
  const said = oneLine(first.charAt(0).toUpperCase() + first.slice(1));
  return said.replace(THEIRS_IN_OURS, (m) => theirs(m));
}

// What the pod's journal says of a step, in the person's words (docs/journal.md).
export const JOURNAL_NOTES = {
  unknown: 'may or may not have happened: look before acting again',
  deduplicated: 'answered from the journal: not done a second time',
  held: 'not done again: the earlier one may already have happened',
};

/**
 * A step the journal knows more of than the agent's row says: one whose outcome is unknown, or a call answered
 * from the journal. Named as what was asked (`Click "Buy now"`), with the journal's words as its note; a row of the
 * journal's own has no arguments, so it names the site.
 */
function journalled(item, call, verb, what) {
  const j = item.journal;
  const state = j.deduplicated ? 'deduplicated' : j.state === 'effect_unknown' ? 'unknown' : '';
  if (!state) return null;
  const site = !item.toolCallId && j.site ? ` on ${place(j.site)}` : '';
  // A call held back because the step it repeats may already have happened (docs/journal.md, unsettled steps).
  const note = state === 'deduplicated' && j.state === 'effect_unknown' ? JOURNAL_NOTES.held : JOURNAL_NOTES[state];
  return { words: `${verb}${what}${site}`, state, browser: true, note };
}

/**
 * What a tool row says: `{words, parts, state, browser, note?, why?, whyParts?}`; `parts` are the words as
 * `{text, quoted}`, `quoted` for the agent's or a page's words (an element's name, a URL, a key, an option, a file's
 * name, a title); `why`, for a failed browser step, is its failure in short (the whole text is the step's result).
 */
export function describeStep(item) {
  const step = describe(item);
  const parts = partsOf(step.words);
  const why = step.why ? partsOf(step.why) : null;
  return { ...step, words: parts.map((p) => p.text).join(''), parts,
    ...(why && { why: why.map((p) => p.text).join(''), whyParts: why }) };
}

function partsOf(words) {
  const parts = [];
  let at = 0;
  for (const m of words.matchAll(MARKED)) {
    if (m.index > at) parts.push({ text: words.slice(at, m.index), quoted: false });
    parts.push({ text: m[1], quoted: true });
    at = m.index + m[0].length;
  }
  if (at < words.length) parts.push({ text: words.slice(at), quoted: false });
  return parts;
}

/**
 * What a tool row says, the agent's and the page's words marked: `{words, state, browser, note?}`. `state` is the
 * item's status, or `declined` when the person (or their site rule, or their silence) refused the step, which is not
 * a failure of the agent or the page, or what the pod's journal says of it (`unknown`, `deduplicated`), with its
 * words in `note`.
 */
function describe(item) {
  const status = String(item.status || '');
  const call = stepCall(item.title, item.input);
  if (!call) return { words: short(item.title, 200) || 'A step', state: status, browser: false };
  // The element's name the browser recorded for the step, where the journal brought it (a step whose answer was lost).
  const args = item.journal && item.journal.element ? { ...call.args, element: item.journal.element } : call.args;
  const [[verb, past, doing], object] = rowWords(call.tool, args, elementOf(args, item.text));
  const what = object ? ` ${object}` : '';
  const journal = item.journal && journalled(item, call, verb, what);
  if (journal) return journal;
  if (status === 'failed') {
    const refused = refusal(item);
    // Not the person's no when the card's tab closed: the status says it went unanswered.
    const unanswered = refused.startsWith('The tab closed') && { status: 'not answered' };
    if (refused) return { words: `${refused}: ${verb}${what}`, state: 'declined', browser: true, ...unanswered };
    return { words: `Could not ${lower(verb)}${what}`, state: status, browser: true, why: failureWords(item.text) };
  }
  if (status === 'completed') return { words: `${past}${what}`, state: status, browser: true };
  // Saved while it ran, in a worker or a browser that stopped since (lib/chat.js): how it ended is not known.
  if (status === 'interrupted') return { words: `Not finished: ${verb}${what}`, state: status, browser: true };
  return { words: `${doing}${what}${status === 'pending' ? ' (waiting)' : ' …'}`, state: status, browser: true };
}
