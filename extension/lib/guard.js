// The guard: decides, before each page action, whether it runs, needs the user's confirmation
// in the panel, or is refused. Page text never reaches this decision as instructions; it only
// looks at the element's kind, its label words and the site.

import { ToolError, BAD_ARGS, NOT_ALLOWED } from './errors.js';
import { factsOf } from './catalogue.js';
import { riskyWord } from './risky-words.js';
import { CARD_WAIT_MS } from './protocol.js';
import { ruleFor, webOrigin } from './settings.js';

const CARD_TIMEOUT_MS = CARD_WAIT_MS;
export const MAX_CARDS = 32;
// The answer of a card whose tab closed while it waited.
export const TAB_CLOSED = 'tab_closed';

/** Brings a tab to the front of its window and the window forward, where the person looks; false if it is gone. */
export async function showTab(tabId) {
  try {
    const tab = await chrome.tabs.update(tabId, { active: true });
    await chrome.windows.update(tab.windowId, { focused: true }).catch(() => {});
    return true;
  } catch {
    return false;
  }
}

function host(url) {
  try {
    return new URL(url).host;
  } catch {
    return '';
  }
}

// The kinds of field a site rule or autopilot never answers for: the person is asked every time.
const SECRET_FIELDS = { password: 'password', otp: 'one-time code', secret: 'secret', payment: 'payment' };

/**
 * Returns null when the action is routine, else `{risk, rule, action, what, target, secret?}`. Pure.
 * `action` completes "The agent wants to ..." on the card (with the page's words for the element);
 * `what` is the same step in our words only and `target` the page's words, so an error can keep
 * the two apart. `rule` names the rule that found it risky (recorded with the decision). `secret` (password,
 * one-time code, secret, payment) marks a step that always asks: typing into or choosing in such a field, or
 * submitting a form that has one.
 *
 * Which rule judges a step comes from the tool's facts in catalogue.json (`facts.guard`), never from its name: a
 * tool that drops is judged on where it drops, one that presses keys on what the key can do where it lands.
 */
export function classify(tool, desc, args = {}) {
  if (!desc) return null;
  const facets = (factsOf(tool) || { guard: [] }).guard;
  const label = `${desc.role} "${desc.name}"`;
  const guarded = inGuardedForm(desc);
  if (facets.includes('transfers') && desc.file) return classifyUpload(desc, label);
  if (desc.sensitive === 'file') {
    return { risk: 'upload', rule: 'file-field', action: `use the file field ${label}`, what: 'use a file field', target: label };
  }
  if (facets.includes('answers')) return classifyDialog(desc, args);
  if (facets.includes('drops')) return classifyDrop(desc, label);
  if (facets.includes('presses')) return classifyKey(desc, args, label, guarded);
  if (facets.includes('chooses')) return classifyChoice(desc, args, label, guarded);
  if (facets.includes('types')) return secretField(desc, label);
  if (facets.includes('activates')) return classifyClick(desc, label, guarded);
  return null;
}

/**
 * A finding made a step that always asks when `desc` would submit a form with a password, one-time code, secret or
 * payment field (`desc.guarded`); as it is otherwise.
 */
function inGuardedForm(desc) {
  const kind = SECRET_FIELDS[desc.guarded];
  return (finding) => (kind ? { ...finding, secret: kind } : finding);
}

/** Typing into (or choosing in) a password, one-time code, secret or payment field: always the person's. */
function secretField(desc, label) {
  const kind = SECRET_FIELDS[desc.sensitive];
  if (!kind) return null;
  return { risk: 'sensitive_field', rule: 'secret-field', action: `fill the ${kind} field ${label}`, what: `fill a ${kind} field`,
    target: label, secret: kind };
}

/** A risky word's finding, for a step in our words (`verb` + the element) on `label`. */
function wordRisk(word, rule, action, what, target) {
  return { risk: word.risk, rule: `${rule}:${word.risk.replace(/\s+/g, '-')}`, action, what: `${what} "${word.said}"`, target };
}

/** A click (and what activates like one): a form's submit control, or an element whose label says a risky word. */
function classifyClick(desc, label, guarded) {
  if (desc.submit) {
    const to = host(desc.formAction);
    return guarded({ risk: 'submit', rule: 'submit', action: `submit a form${to ? ` to ${to}` : ''} with ${label}`,
      what: 'submit a form', target: to ? `${label}, form to ${to}` : label });
  }
  const word = riskyWord(desc.name);
  // The words are ours (the list's), so they may appear in our own words.
  if (word) return guarded(wordRisk(word, 'risky-word', `click ${label}`, 'click an element whose label says', label));
  return null;
}

/**
 * A choice in a list is judged as what it can do: choosing in a secret field is filling it; a list whose change
 * submits its form or opens another page is that submit or that navigation; and the list's name or the option
 * chosen saying a risky word ("Delete selected accounts", "Pay $5,000") is a click on a button that says it.
 * `desc.choice` (page/agent.js) holds the options asked for as the page labels them and what a change of the list
 * can do.
 */
function classifyChoice(desc, args, label, guarded) {
  const secret = secretField(desc, label);
  if (secret) return secret;
  const choice = desc.choice || {};
  const chosen = (Array.isArray(choice.chosen) ? choice.chosen : []).map((c) => `"${String(c).slice(0, 120)}"`).join(', ');
  const target = chosen ? `${label}, option ${chosen}` : label;
  const act = `choose ${chosen || 'an option'} in ${label}`;
  for (const said of [...(choice.chosen || []), desc.name]) {
    const word = riskyWord(said);
    if (word) return guarded(wordRisk(word, 'choice-risky-word', act, 'choose an option where the list or the option says', target));
  }
  if (choice.submits) {
    const to = host(desc.formAction);
    return guarded({ risk: 'submit', rule: 'choice-submits', action: `${act}, which submits its form${to ? ` to ${to}` : ''}`,
      what: 'choose in a list whose change submits a form', target: to ? `${target}, form to ${to}` : target });
  }
  if (choice.navigates) {
    return { risk: 'navigate', rule: 'choice-navigates', action: `${act}, which opens another page`,
      what: 'choose in a list whose change opens another page', target };
  }
  return null;
}

/** A size as a person reads it: "812 bytes", "4.2 KB", "12.5 MB" (units of 1024, as Chrome's downloads show them). Pure. */
export function humanSize(bytes) {
  const n = Number(bytes);
  if (!Number.isFinite(n) || n < 0) return 'an unknown size';
  if (n < 1024) return `${n} ${n === 1 ? 'byte' : 'bytes'}`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let v = n / 1024;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${v >= 100 ? Math.round(v) : v.toFixed(1)} ${units[u]}`;
}

/**
 * A file from the agent's working folder going into the page: the card names the file, its size and the site.
 * `desc.file` is {name, size}; `desc.dropZone` says the element takes it as a drop. Uploads are never covered by
 * autopilot nor an approved plan (Guard.check, lib/plan.js): only the person, or their site rule, lets one go.
 */
function classifyUpload(desc, label) {
  const f = desc.file || {};
  // The name is the agent's (its file's): shown whole but on one line, and bounded.
  const name = Array.from(String(f.name || ''), (ch) => (/\p{Cc}/u.test(ch) ? ' ' : ch)).join('').slice(0, 120);
  const size = humanSize(f.size);
  const site = host(desc.origin || desc.url || '');
  const into = desc.dropZone ? `drop it on ${label}` : `put it in the file field ${label}`;
  return {
    risk: 'upload', rule: 'upload', upload: true, what: 'upload a file from the agent\'s working folder', target: label,
    action: `upload the file "${name}" (${size}) to ${site || 'this page'}: ${into}`,
  };
}

// Modifier names an agent may put before a key ("Control+Enter"), and the event flag each sets.
const MODIFIERS = {
  shift: 'shiftKey', control: 'ctrlKey', ctrl: 'ctrlKey', alt: 'altKey', option: 'altKey', meta: 'metaKey',
  command: 'metaKey', cmd: 'metaKey',
};
const MODIFIER_NAMES = { ctrlKey: 'Control', altKey: 'Alt', shiftKey: 'Shift', metaKey: 'Meta' };
// The spellings of the two keys that activate what has the focus (a button's click, a link, a form's submit, a
// page's own key handler on a role=button), folded to the key value a page's handler compares with.
const ACTIVATING = {
  enter: ['Enter', 'Enter'], return: ['Enter', 'Enter'], numpadenter: ['Enter', 'NumpadEnter'], '\n': ['Enter', 'Enter'],
  '\r': ['Enter', 'Enter'], ' ': [' ', 'Space'], space: [' ', 'Space'], spacebar: [' ', 'Space'],
};
const MAX_KEY_NAME = 64;
const MAX_MODIFIERS = 4;
// The named keys, by the spellings agents use for them ("esc", "pagedown", "Down"), as their events name them.
const NAMED_KEYS = Object.fromEntries([
  'Tab', 'Escape', 'Backspace', 'Delete', 'Insert', 'Home', 'End', 'PageUp', 'PageDown', 'ArrowUp', 'ArrowDown',
  'ArrowLeft', 'ArrowRight', 'CapsLock', 'ContextMenu', 'Pause', ...Array.from({ length: 12 }, (_, i) => `F${i + 1}`),
].map((k) => [k.toLowerCase(), k]).concat([['esc', 'Escape'], ['del', 'Delete'], ['up', 'ArrowUp'], ['down', 'ArrowDown'],
  ['left', 'ArrowLeft'], ['right', 'ArrowRight']]));
// A modifier pressed on its own ("Shift"), as its key event names it.
const LONE_MODIFIERS = { shift: 'Shift', control: 'Control', ctrl: 'Control', alt: 'Alt', meta: 'Meta' };
// The `code` of the punctuation keys, where a US keyboard has them.
const PUNCTUATION_CODES = {
  ';': 'Semicolon', '=': 'Equal', ',': 'Comma', '-': 'Minus', '.': 'Period', '/': 'Slash', '`': 'Backquote',
  '[': 'BracketLeft', '\\': 'Backslash', ']': 'BracketRight', "'": 'Quote',
};

/**
 * The key press that `name` spells ("Enter", "a", "Control+Enter", "Shift+Tab", "NumpadEnter", "Space", "+"), with
 * `modifiers` held as well (["Control"], ["Shift", "Alt"]): the `key` and `code` its events carry, its modifier
 * flags, `activates` ('Enter', 'Space' or ''), and `label`, its name in our words ("Control+a", "Space"). Throws
 * bad_args on a name that is not a key. Pure.
 */
export function keyPress(name, modifiers = []) {
  const bad = () => new ToolError(BAD_ARGS, '"key" must be a key name like "Enter", "Tab", "a" or "Control+Enter"');
  if (typeof name !== 'string' || !name || name.length > MAX_KEY_NAME) throw bad();
  const press = { shiftKey: false, ctrlKey: false, altKey: false, metaKey: false };
  for (const flag of modifierFlags(modifiers)) press[flag] = true;
  // "+" and "Shift++" press the plus key itself.
  const plus = name === '+' || name.endsWith('++');
  const parts = plus ? [...(name === '+' ? [] : name.slice(0, -2).split('+')), '+'] : name.length > 1 ? name.split('+') : [name];
  for (const m of parts.slice(0, -1)) {
    const flag = MODIFIERS[m.toLowerCase()];
    if (!flag) throw bad();
    press[flag] = true;
  }
  const given = parts[parts.length - 1];
  if (!given) throw bad();
  const folded = ACTIVATING[given.toLowerCase()];
  const named = given.length > 1 && (NAMED_KEYS[given.toLowerCase()] || LONE_MODIFIERS[given.toLowerCase()]);
  // A key is one character or a named key: any other word is no key, and would stand in the person's card as ours.
  if (!folded && !named && [...given].length !== 1) throw bad();
  const key = folded ? folded[0] : named || given;
  const code = folded ? folded[1] : /^[a-z]$/i.test(key) ? `Key${key.toUpperCase()}` : /^[0-9]$/.test(key) ? `Digit${key}`
    : PUNCTUATION_CODES[key] || key;
  const activates = folded ? (key === 'Enter' ? 'Enter' : 'Space') : '';
  const mods = Object.keys(MODIFIER_NAMES).filter((f) => press[f]).map((f) => MODIFIER_NAMES[f]);
  return { ...press, key, code, activates, label: [...mods, activates || (key === ' ' ? 'Space' : key)].join('+') };
}

/**
 * The event flags of a list of modifier names (["Control", "Shift"]), as a press or a click takes them. Throws
 * bad_args on anything else. Pure.
 */
export function modifierFlags(modifiers) {
  if (modifiers == null) return [];
  const bad = () => new ToolError(BAD_ARGS, '"modifiers" must be a list of "Control", "Shift", "Alt" or "Meta"');
  if (!Array.isArray(modifiers) || modifiers.length > MAX_MODIFIERS) throw bad();
  return modifiers.map((m) => {
    const flag = typeof m === 'string' && Object.hasOwn(MODIFIERS, m.toLowerCase()) && MODIFIERS[m.toLowerCase()];
    if (!flag) throw bad();
    return flag;
  });
}

// Input types Enter in which is no typing: a press on them is a press on a control.
const CONTROL_INPUTS = new Set(['submit', 'button', 'reset', 'image', 'checkbox', 'radio', 'file', 'range', 'color']);

/** Whether the element takes typed text: Enter in it is the "send" or "submit" of what it holds. */
function takesText(desc) {
  if (desc.tag === 'input') return !CONTROL_INPUTS.has(desc.type);
  return desc.tag === 'textarea' || desc.tag === 'select' || desc.editable === true ||
    desc.role === 'textbox' || desc.role === 'searchbox';
}

// Keys that move the focus, scroll or close a menu: what they do is the browser's, whatever element has the focus.
const MOVING = new Set(['Tab', 'ArrowUp', 'ArrowDown', 'ArrowLeft', 'ArrowRight', 'PageUp', 'PageDown', 'Home', 'End', 'Escape']);
// Keys that edit the text of the field they land in.
const EDITING = new Set(['Backspace', 'Delete', 'Insert']);
// With Control or Meta held in a text field: select all, copy, cut, paste, undo, redo, as a person edits text.
const EDITING_CHORDS = new Set(['a', 'c', 'x', 'v', 'z', 'y', 'Backspace', 'Delete', 'ArrowLeft', 'ArrowRight', 'ArrowUp',
  'ArrowDown', 'Home', 'End']);

/** Whether the element takes typed text as a plain field does: a key typed there is typing, not a page's shortcut. */
function textField(desc) {
  return !desc.page && takesText(desc) && desc.tag !== 'select';
}

/**
 * A key press, judged on what it can do where it lands: the element that has (or is given) the focus, or the
 * page itself when none has it (`desc.page`).
 * - Enter or Space that activates a control is a click on it, by the click's own rule; Enter in a field is the
 *   submit of its form or, outside any form (a chat composer), a send.
 * - Printable text, Backspace and Delete in a text field are typing (into a secret field: filling it); the
 *   editing chords (Control+A, C, X, V, Z, Y) are editing.
 * - Moving the focus or scrolling (Tab, the arrows, Page Up/Down, Home, End, Escape) is routine, without Alt or Meta
 *   (Alt+Left is the browser's Back).
 * - Any other key or chord outside a text field (Delete on a selected row, "#" on a mail list, Control+Enter on the
 *   page) reaches the page's own keyboard shortcuts, which no word on the page names: it asks, naming the key and
 *   where it lands (with what is selected there).
 */
function classifyKey(desc, args, label, guarded) {
  const press = keyPress(args.key, args.modifiers);
  const k = press.label;
  const chord = press.ctrlKey || press.altKey || press.metaKey;
  if (press.activates && !desc.page) {
    const activated = classifyActivation(desc, press, label, guarded);
    // A click on it is routine, but with Control, Alt or Meta held the key can also be one of the page's shortcuts.
    if (activated !== undefined && (activated !== null || !chord)) return activated;
  }
  if ((MOVING.has(press.key) && !press.altKey && !press.metaKey) || Object.values(LONE_MODIFIERS).includes(press.key)) return null;
  if (textField(desc)) {
    const typing = !chord && (press.key.length === 1 || EDITING.has(press.key));
    if (typing) return press.key.length === 1 ? secretField(desc, label) : null;
    if ((press.ctrlKey || press.metaKey) && !press.altKey && EDITING_CHORDS.has(press.key.length === 1 ? press.key.toLowerCase() : press.key)) return null;
  }
  // A letter in a closed list picks the option it starts with, as typing does.
  if (desc.tag === 'select' && !chord && press.key.length === 1 && !desc.page) return null;
  const where = desc.page ? `the page${desc.origin ? ` at ${host(desc.origin)}` : ''}` : label;
  const selected = desc.selected ? ` (selected there: ${desc.selected})` : '';
  return guarded({ risk: 'shortcut', rule: 'key-shortcut',
    action: `press ${k} on ${where}${selected}, which the page may take as one of its own keyboard shortcuts`,
    what: `press ${k}, which the page may take as one of its own keyboard shortcuts`, target: `${where}${selected}` });
}

/**
 * Enter or Space on an element: null when it is routine, a finding when it activates something risky, undefined
 * when the key does not activate here (Space in a field types a space) and the other key rules judge it.
 */
function classifyActivation(desc, press, label, guarded) {
  const k = press.label;
  if (press.activates === 'Space' && textField(desc)) return undefined;
  // A submit control's Enter is its click, which names the form's destination.
  if (press.activates === 'Enter' && !desc.submit) {
    if (desc.inForm && (takesText(desc) || desc.tag === 'input')) {
      return guarded({ risk: 'submit', rule: 'key-submits', action: `press ${k} in ${label}, which can submit a form`,
        what: `press ${k} in a field, which can submit a form`, target: label });
    }
    if (takesText(desc)) {
      return guarded({ risk: 'send', rule: 'key-sends', action: `press ${k} in ${label}, which can send what it holds`,
        what: `press ${k} in a field, which can send what it holds`, target: label });
    }
  }
  const click = classifyClick(desc, label, guarded);
  if (!click) return null;
  return { ...click, rule: `key-activates:${click.rule}`, action: `press ${k} on ${label}, which can ${click.action}`,
    what: `press ${k}, which can ${click.what}` };
}

/**
 * A drag is decided by where it drops, as a click on that element is: onto a submit control, or onto an element
 * whose label says a risky word ("Delete", "Move to trash"), it asks. `desc.drop` is that element, described as
 * `desc` is.
 */
function classifyDrop(desc, label) {
  const drop = desc.drop;
  if (!drop) return null;
  const onto = `${drop.role} "${drop.name}"`;
  const action = `drag ${label} onto ${onto}`;
  const target = `${label} onto ${onto}`;
  if (drop.submit) {
    return inGuardedForm(drop)({ risk: 'submit', rule: 'drop-target:submit', action,
      what: 'drop an element onto a form\'s submit control', target });
  }
  const word = riskyWord(drop.name);
  if (!word) return null;
  return inGuardedForm(drop)(wordRisk(word, 'drop-target:risky-word', action, 'drop an element onto one whose label says',
    target));
}

// A prompt asking for one of these is a credential step, whatever the rules say.
const SECRET_PROMPT = /\b(password|passcode|pin|one.?time|verification code|2fa|card number|cvc|cvv)\b/i;

/**
 * Accepting a page's dialog is the page's action: a confirm or prompt whose text says a risky word is
 * asked about like a click on a button that says it. Dismissing, an alert's OK and leaving a page
 * (its text is the browser's, never the page's) are routine. `desc` is {type, message, origin}.
 */
function classifyDialog(desc, args) {
  if (args.accept !== true || (desc.type !== 'confirm' && desc.type !== 'prompt')) return null;
  const target = `${desc.type} dialog "${String(desc.message).replace(/\s+/g, ' ').slice(0, 200)}"`;
  if (desc.type === 'prompt' && SECRET_PROMPT.test(desc.message)) {
    return { risk: 'sensitive_field', rule: 'dialog-secret', action: `answer the page's ${target}`, what: `answer a prompt dialog that asks for a secret`,
      target, secret: 'secret' };
  }
  const word = riskyWord(desc.message);
  if (!word) return null;
  return wordRisk(word, 'dialog', `accept the page's ${target}`, `accept a ${desc.type} dialog whose text says`, target);
}

/** `error`, carrying the rule that refused the step (recorded with the decision: the result's guard_rule). */
export function ruled(error, rule) {
  error.rule = rule;
  return error;
}

/** Whether an openab panel (the side panel, or the panel in a tab) is open in the browser; true when unknown. */
async function panelOpen() {
  if (!chrome.runtime.getContexts) return true;
  const panel = chrome.runtime.getURL('panel/');
  const open = await chrome.runtime.getContexts({ contextTypes: ['SIDE_PANEL', 'TAB', 'POPUP'] }).catch(() => null);
  return !open || open.some((c) => String(c.documentUrl || '').startsWith(panel));
}

export class Guard {
  /**
   * @param {() => object} getSettings  current settings (autopilot, siteRules)
   * @param {(origin: string, rule: string) => Promise<void>} setRule  persists a site rule
   * @param {() => void} onChange  the pending cards changed
   * @param {import('./plan.js').Plan | null} plan  the plan the person approved for the task (Ask before acting)
   */
  constructor(getSettings, setRule, onChange, plan = null) {
    this.getSettings = getSettings;
    this.plan = plan;
    this.setRule = setRule;
    this.onChange = onChange;
    this.cards = new Map();
    this._next = 1;
    /** Whether someone can answer a card now: an openab panel is open. */
    this.attended = panelOpen;
    // A question about a page nobody can see any more has no answer: its card goes, and the step is declined.
    chrome.tabs.onRemoved.addListener((closed) => {
      for (const card of [...this.cards.values()]) if (card.tabId === closed) card.done(TAB_CLOSED);
    });
  }

  /**
   * Show me: brings the card's tab to the front of its window, the window forward, and outlines the element the
   * step is about until the card is answered. False when the card or its tab is gone.
   */
  async show(id) {
    const card = this.cards.get(id);
    if (!card || card.tabId == null || !(await showTab(card.tabId))) return false;
    if (card.show) {
      card.outlined = true;
      await card.show(true).catch(() => {});
    }
    return true;
  }

  /** Throws unless the user's site rules let the agent load `url`; returns it. */
  checkDestination(url) {
    this._refuseNever(webOrigin(url));
    return url;
  }

  _refuseNever(...origins) {
    const { siteRules } = this.getSettings();
    for (const origin of origins) {
      if (ruleFor(siteRules, origin) === 'never') {
        throw ruled(new ToolError(NOT_ALLOWED, `not allowed by the user: actions on ${origin} are blocked by the user's ` +
          'site rule (openab settings). Do not retry; tell the user if the task needs this site.'), 'site-rule-never');
      }
    }
  }

  /**
   * Throws a ToolError unless the action may run now. `signal` aborts a pending question.
   * A never rule on the tab's site also covers frames from other sites inside it.
   * `at` is the tab's URL, or `{url, tabId, ref, show}`: the tab the step is in (its card can show it, and goes when
   * it closes), the agent's ref, and `show(on)`, which outlines the element in its page or takes the outline away.
   * `approved`: the rule of a card the person already said yes to for this very step (lib/stages/again.js); the
   * site rules' never still refuses it.
   */
  async check(tool, desc, args, signal, at = '', { approved = '' } = {}) {
    const { url: tabUrl = '', tabId, ref, show } = typeof at === 'string' ? { url: at } : at;
    const { autopilot, siteRules } = this.getSettings();
    const origin = desc && desc.origin;
    this._refuseNever(origin, webOrigin(tabUrl));
    const rule = ruleFor(siteRules, origin);
    const risky = classify(tool, desc, args);
    // The person said yes to this very step on a card of its own (`approved` names that rule): one card a step.
    if (approved) return { asked: true, risky, rule: approved };
    // An approved plan keeps the task on its sites, and there lets the routine risky steps run (lib/plan.js); what
    // its card says still asks (lib/still-asks.js) is never its to wave through.
    const planned = this.plan && (await this.plan.check(this, { tool, desc, risky, tabUrl, signal }));
    if (planned) return planned;
    if (!risky) return { asked: false, risky, rule: 'routine' };
    // A site rule or autopilot covers routine risky steps; credentials and payment fields always ask. A file leaving
    // the pod for a page is the person's to allow, or their rule's for that site: autopilot does not cover it.
    if (!risky.secret && rule === 'always') return { asked: false, risky, rule: `site-rule-always:${risky.rule}` };
    if (!risky.secret && autopilot && !risky.upload) return { asked: false, risky, rule: `autopilot:${risky.rule}` };
    // A password, a one-time code or a card number is the person's to type: with no panel open, its card would wait
    // minutes for no one while the agent hears nothing. Another step that asks (a payment's button) still waits on
    // its card, which the person may open the panel to answer.
    if (risky.risk === 'sensitive_field' && !(await this.attended())) {
      throw ruled(new ToolError(NOT_ALLOWED, `this step needs the person and was not taken: ${risky.what} (the element is in ` +
        'the block below) is theirs to do or approve, and no openab panel is open in the browser to ask them. ' +
        'Hand it to them: call browser_handoff with a reason such as "Sign in to this site", and go on once they ' +
        'are done.', risky.target), `no-panel:${risky.rule}`);
    }
    const decision = await this.ask({
      kind: 'action', tool, risk: risky.risk, secret: risky.secret || '', title: `The agent wants to ${risky.action}`,
      site: origin || '', detail: desc.url || '', tabId, ref: ref == null ? '' : String(ref), element: risky.target, show,
    }, signal);
    if (decision === 'always' && origin && !risky.secret) await this.setRule(origin, 'always');
    if (decision !== 'allow' && decision !== 'always') {
      const why = decision === 'timeout' ? `the person did not answer in ${CARD_TIMEOUT_MS / 1000} s; the action was not taken`
        : decision === TAB_CLOSED ? 'the tab closed before the person answered; the action was not taken' : 'the user declined';
      throw ruled(new ToolError(NOT_ALLOWED, `not allowed by the user (${why}): ${risky.what} (the element is in the block ` +
        'below). Do not retry it; ask the user in the chat if it is needed.', risky.target), `person:${risky.rule}`);
    }
    return { asked: true, risky, rule: `person:${risky.rule}` };
  }

  /**
   * Shows a card in the panel and waits for the answer: 'allow' | 'always' | 'deny' | 'timeout' | TAB_CLOSED (the
   * card's `tabId` closed) | optionId.
   */
  ask(card, signal) {
    if (this.cards.size >= MAX_CARDS) return Promise.resolve('deny');
    const id = `c${this._next++}`;
    return new Promise((resolve) => {
      const done = (decision) => {
        if (!this.cards.has(id)) return;
        clearTimeout(entry.timer);
        if (entry.outlined && decision !== TAB_CLOSED) entry.show(false).catch(() => {});
        this.cards.delete(id);
        this.onChange();
        resolve(decision);
      };
      const wait = card.timeoutMs || CARD_TIMEOUT_MS;
      const entry = { ...card, id, createdAt: Date.now(), expiresAt: Date.now() + wait, done, timer: setTimeout(() => done('timeout'), wait) };
      this.cards.set(id, entry);
      if (signal) signal.addEventListener('abort', () => done('cancelled'), { once: true });
      this.onChange();
    });
  }

  decide(id, decision) {
    const card = this.cards.get(id);
    if (!card || typeof decision !== 'string') return; // stale or forged: ignore
    card.done(decision);
  }

  cancelAll() {
    for (const card of [...this.cards.values()]) card.done('cancelled');
  }

  /** What the panel renders: no callbacks, no timers. */
  publicCards() {
    return [...this.cards.values()].map(({ id, kind, plan, tool, risk, secret, title, site, detail, options, createdAt, expiresAt, reason, tabId, ref, element }) =>
      ({ id, kind, plan, tool, risk, secret, title, site, detail, options, createdAt, expiresAt, reason, tabId, ref, element }));
  }
}
