// The tools that act on the agent tab's page: click, type, press a key, choose options, select text, scroll, hover,
// drag. Every action on an element describes it, asks the guard, then acts on the very element described, and waits
// for the page it led to when it started a navigation (lib/loads.js). Clicks, typing, keys, hovering and dragging
// are real input from Chrome (lib/input.js), with the default actions a person's keyboard and mouse have; where
// Chrome takes none (lib/input.js, NO_REAL_INPUT), a click and typing are script events, and the result says so.

import { ToolError, BAD_ARGS, BAD_TARGET, FOCUS_MOVED, NO_FOCUS, TOOL_ERROR } from './errors.js';
import { addressOf, checkNavigable } from './tabs.js';
import { keyPress, modifierFlags } from './guard.js';
import { modifierBits } from './input.js';
import { ledTo } from './loads.js';
import { lookAhead, lookedAhead } from './receipts.js';
import { text, withPage } from './results.js';
import { DROPPED_WORDS, checkUsable, openTab } from './tools-tabs.js';

const MAX_VALUES = 100;
const MAX_OFFSET = 10_000;
// What the agent is told when a framed element would need real mouse events.
const FRAMED = 'real mouse events reach elements of the top frame only for now, and this element is inside a frame ' +
  'of the page. Open the frame\'s own page with browser_navigate (browser_read_dom shows its src) to act on it there';
// A real click's aim taken as its element was described is used when the guard decided within this long and asked no
// one: to the guard, the same moment as an aim after its decision (one call into the page fewer).
const AIM_FRESH_MS = 50;

/**
 * The real keys for a press or a text that `act` found ready (the gate in page/agent.js is armed), or a real
 * click: `send(stays)` sends them if the tab still holds the document `documentId` (PageScript.stillAt), and only
 * while `stays()` (no other page committed in the tab since), then the page says what became of them. `left`: the
 * document started leaving, or is gone. `keyless`: the text is all line breaks and tabs, which go in as text, so no
 * key reaches the gate.
 */
async function sendKeys(b, tab, documentId, send, keyless = false) {
  let sent;
  let acted;
  const seen = b.loads.commits(tab.id);
  await b.page.stillAt(tab.id, documentId, b.loads.topDocument(tab.id));
  try {
    await send(() => b.loads.commits(tab.id) === seen);
  } finally {
    acted = Date.now();
    sent = await pressed(b, tab, documentId);
  }
  const res = sent && sent.result;
  if (!res || res.error) return { left: true, acted };
  if (res.refused) {
    throw new ToolError(FOCUS_MOVED, 'nothing was pressed: the keyboard focus moved to another element after the key ' +
      'was checked. Take a new browser_snapshot, and press the key on the element by its ref');
  }
  if (!res.passed && !keyless) {
    throw new ToolError(TOOL_ERROR, 'the key did not reach the element: Chrome gave it to another part of the window. ' +
      'Take a browser_screenshot to see the tab, then try again');
  }
  return { left: res.left, acted };
}

/**
 * The page's word on the real input just sent (page/agent.js, pressed), from the top frame's document `documentId`,
 * which real input reaches; null when it did not answer. Where the step's receipt looks at the page after it
 * (lib/receipts.js, lookAhead), the page's outline is read in the same pass, and kept for the receipt unless the page
 * began to leave or has frames (their outlines are the receipt's own look's, after the step, in every frame).
 */
async function pressed(b, tab, documentId) {
  const look = lookAhead(tab.id);
  const [sent] = await b.page.exec({ tabId: tab.id, documentIds: [documentId] }, look ? 'pressedLook' : 'pressed',
    look ? [look.options, look.spec] : []).catch(() => [null]);
  if (!look || !sent || !sent.result) return sent;
  const { pressed: res, look: seen } = sent.result;
  if (res && !res.error && !res.left && seen && !seen.frames) lookedAhead(tab.id, [{ ...sent, result: seen }]);
  return { ...sent, result: res };
}

/**
 * Describe, ask the guard, then act on the very element that was described. When `opensTab`
 * says the element is a link to a new tab, the tab is opened here instead: a page may not open
 * tabs from a script's click (no user gesture), so clicking it would silently do nothing.
 * `focused`: the element is the one with the keyboard focus, held to that one element from then on.
 */
async function action(b, call, tool, op, args, opArgs, options = {}) {
  // `options.tab`: the call's own look at the agent tab a moment ago, still its current one and owned.
  const tab = options.tab && b.tabs.current === options.tab.id && b.tabs.owned.has(options.tab.id) ? options.tab
    : await b.tabs.target();
  // Anything but typing may start a download: caught at its answer until the page has settled
  // (lib/held-downloads.js). Asked for now, so the browser sets it up while the element is described and checked.
  const held = op !== 'type' && b.files && b.files.held;
  const armed = held ? held.arm(tab.id) : null;
  try {
    return await actOn(b, call, tool, op, args, opArgs, options, tab, armed);
  } finally {
    if (held) held.disarm(tab.id);
  }
}

async function actOn(b, call, tool, op, args, opArgs, { opensTab = () => false, focused = false, want = {} }, tab, armed) {
  let loc = await b.page.locate(tab, args, focused);
  const [d] = await b.page.exec(loc.target, 'describeTarget', [loc.spec, want]);
  if (!d || !d.result || d.result.error) throw b.page.error(d && d.result, loc, args);
  const describedAt = Date.now();
  const desc = d.result.desc;
  // Real keys go where the page's focus is; one meant for an element in a frame is sent as the page's events.
  if (opArgs.real && d.frameId !== 0) opArgs = { ...opArgs, real: false, framed: true };
  if (focused) {
    // Bound to the element described, in the document that described it: a focus that moves on before the
    // press, to an element the guard never saw, makes the page refuse the press.
    loc = { ...loc, target: { tabId: tab.id, documentIds: [d.documentId] }, spec: { local: d.result.local, focused: true } };
  }
  // A card about this step can show the person the tab and the element, in its page (page/agent.js, outline).
  const show = (on) => b.page.exec(loc.target, 'outline', [on ? loc.spec : null]);
  await call.check(tool, desc, { ...opArgs }, { url: tab.url, tabId: tab.id, ref: args.ref, show });
  call.throwIfCancelled();
  const aimed = d.result.aimed && d.frameId === 0 && !call.personAllowed && Date.now() - describedAt <= AIM_FRESH_MS
    ? d.result.aimed : null;
  // Chrome would offer to save a password the agent typed as the person's own (lib/passwords.js).
  if (op === 'type' && desc.sensitive === 'password' && b.passwords) await b.passwords.typing(tab.id);
  // `what` is ours (the ref, or the agent's own selector); the element's role and name are the page's.
  const what = loc.label;
  const element = args.ref || focused ? `element: ${desc.role} "${desc.name}"` : '';
  if (opensTab(desc)) {
    const url = await call.going(checkNavigable(desc.href));
    return { verb: 'clicked', what, element, desc, opened: { url, loaded: await openTab(b, url, call.signal, tab.id) } };
  }
  // Typing and selecting never leave the page (Enter is browser_press_key), so they wait for nothing.
  if (STAYS.has(op)) return { ...(await act(b, loc, op, args, opArgs, desc, tab, d.documentId)), what, element, desc };
  await armed;
  const watch = b.loads.watch(tab.id);
  let r;
  try {
    r = await act(b, loc, op, args, opArgs, desc, tab, d.documentId, aimed);
  } catch (e) {
    watch.stop();
    throw e;
  }
  const loaded = await b.loads.settle(watch, r.left, r.acted);
  return { ...r, what, element, desc, loaded, download: watch.download };
}

/**
 * A click on a link that opens in a new tab, answered for that tab's load as browser_tabs open is (lib/tools-tabs.js):
 * where it is (the link's address is the page's text), or that its page did not load, loaded nothing, or led to a
 * page the agent may not use.
 */
function openedAnswer(call, { what, element, opened: { url, loaded } }) {
  const block = (at) => [element, `URL: ${at}`].filter(Boolean).join('\n');
  const lead = `clicked ${what}: it opens in a new tab`;
  const { tab } = loaded;
  if (!tab) {
    return text(withPage(`${lead}, but its address loaded no page: ${DROPPED_WORDS}. Chrome closed the tab it had ` +
      'opened for it (the address is in the block below); browser_tabs {"action":"list"} shows your tabs', block(url)));
  }
  const at = addressOf(tab) || url;
  const opened = `${lead}, so tab ${tab.id} was opened`;
  if (loaded.unfinished) {
    return text(withPage(`${opened} (at the URL in the block below) and is now the current agent tab; ` +
      `${loaded.unfinished}.`, block(at)));
  }
  // The click is done either way: what its link led to is what the answer is about (as ledTo for the tab itself).
  if (loaded.failure) {
    return text(withPage(`${opened} and is now the current agent tab, but its page did not load: ` +
      `${loaded.failure}. The tab shows the browser's error page for the URL in the block below.`, block(at)));
  }
  if (loaded.dropped) {
    return text(withPage(`${opened} and is now the current agent tab, but its address loaded no page: ` +
      `${DROPPED_WORDS}. The tab is at the URL in the block below.`, block(at)));
  }
  if (at !== url) checkUsable(call, at, `${opened}, and it led to`, `${opened}, and it was redirected to another site:`);
  return text(withPage(`${opened} (at the URL in the block below) and is now the current agent tab.`, block(at)));
}

// The acts that never leave the page.
const STAYS = new Set(['type', 'selectText']);

/**
 * The act itself: a real click where the mouse can reach the element, else in the page, and a key's real press or
 * a text's real keys where the page readied them: `{verb, chosen, left, framed, unreached, keyed, inserted}`.
 */
async function act(b, loc, op, args, opArgs, desc, tab, documentId, aimed = null) {
  let unreached = '';
  let keyed = false;
  let inserted = 0;
  if (op === 'click' && opArgs.real) {
    const clicked = await realClick(b, loc, opArgs, desc, tab, documentId, aimed);
    if (clicked.verb) return clicked;
    unreached = clicked.unreached;
  }
  const [r] = await b.page.exec(loc.target, 'act', [op, loc.spec, opArgs, desc.fingerprint]);
  let acted = Date.now();
  if (!r || !r.result || r.result.error) throw b.page.error(r && r.result, loc, args);
  let left = r.result.left === true;
  let verb = r.result.verb;
  let keys = null;
  if (verb === 'ready' && op === 'type') {
    const { text: typed, clear } = opArgs;
    const send = typed || !clear ? async (stays) => {
      inserted = await b.input.type(tab.id, typed, stays, documentId);
    } : () => b.input.key(tab.id, keyPress('Delete'));
    keys = await sendKeys(b, tab, documentId, send, Boolean(typed) && !/[^\r\n\t]/.test(typed));
    verb = 'typed into';
    keyed = true;
  } else if (verb === 'ready') {
    keys = await sendKeys(b, tab, documentId, () => b.input.key(tab.id, opArgs.press));
    verb = `pressed ${keyName(opArgs.press)} in`;
  }
  if (keys) {
    left = keys.left || left;
    acted = keys.acted;
  }
  return { verb, chosen: r.result.chosen, left, framed: opArgs.framed === true, unreached, keyed, inserted, acted };
}

// A click's words by its button and count.
const CLICKED = { left: 'clicked', right: 'right-clicked', middle: 'middle-clicked' };
// Fields a real click opens a window of the browser's own for (a list, a date or colour picker, the system's file
// chooser), which would come over the person's screen: they are clicked by script, as before real clicks.
const PICKERS = /^(select|input:(file|date|datetime-local|month|week|time|color))$/;

/**
 * A click with the real mouse at the element's visible middle, aimed again at the element the guard saw (or by
 * `early`, the page's answer to the aim taken as it was described, when it stands: actOn). Where the mouse cannot
 * reach it (hidden, off screen, covered), `{unreached}` says why and the page's click is used.
 */
async function realClick(b, loc, opArgs, desc, tab, documentId, early = null) {
  if (desc.disabled) throw new ToolError(TOOL_ERROR, `the element is disabled; wait for the page or pick another element (${loc.label})`);
  if (PICKERS.test(desc.tag === 'input' ? `input:${desc.type}` : desc.tag)) {
    return { unreached: "it opens a window of the browser's own (a list, a picker, a file chooser), which would come over " +
      "the person's screen; browser_select_option chooses in a list, browser_type fills a date, browser_upload gives a file" };
  }
  const at = { tabId: tab.id, documentIds: [documentId] };
  const ask = { target: loc.spec, click: true, right: opArgs.button === 'right' };
  const res = early || (await b.page.exec(at, 'aim', [ask, { from: desc.fingerprint, to: '' }]).then(([aimed]) => aimed && aimed.result));
  if (!res || res.error === 'stale_ref' || res.error === 'not_found') throw b.page.error(res, loc, {});
  if (res.error) return { unreached: res.message };
  const how = { button: opArgs.button, count: opArgs.count, modifiers: modifierBits(opArgs.mods || {}) };
  // The page tells whether the click submitted a form or began to leave, as for a key (sendKeys).
  let chooser = false;
  const { left, acted } = await sendKeys(b, tab, documentId, async () => {
    ({ chooser } = await b.input.click(tab.id, res.from, how));
  }, true);
  const verb = `${opArgs.count === 2 ? 'double-' : ''}${CLICKED[opArgs.button]}`;
  return { verb, left, framed: false, unreached: '', chooser, acted };
}

/** A press in our words: its modifiers and its key ("Control+a", "Space"). */
function keyName(press) {
  const mods = [['ctrlKey', 'Control'], ['altKey', 'Alt'], ['shiftKey', 'Shift'], ['metaKey', 'Meta']].filter(([f]) => press[f]);
  return [...mods.map(([, m]) => m), press.key === ' ' ? 'Space' : press.key].join('+');
}

/** A click's or a press's modifiers as event flags, or null for none. */
function modifiersOf(args) {
  const flags = modifierFlags(args.modifiers);
  return flags.length ? Object.fromEntries(flags.map((f) => [f, true])) : null;
}

// What an action that started a download is told (lib/held-downloads.js caught it).
const STARTED_DOWNLOAD = "started a download, which the browser kept out of the person's downloads and holds for you: " +
  'browser_download with no ref or url takes it into your working folder. The page stays as it was.';

async function click(b, args, call) {
  const mods = modifiersOf(args);
  const button = args.button == null ? 'left' : args.button;
  if (!Object.hasOwn(CLICKED, button)) throw new ToolError(BAD_ARGS, '"button" is "left", "right" or "middle"');
  const count = args.double_click === true ? 2 : 1;
  const tab = await b.tabs.target();
  const why = await b.input.unavailable(tab.id);
  // A link clicked with Control, Meta or Shift held opens in a new tab or window, as it does for a person.
  const newTab = (desc) => desc.newTab || Boolean(desc.href && mods && (mods.ctrlKey || mods.metaKey || mods.shiftKey));
  // A plain real click is aimed as its element is described (realClick); a right click (it shuts the page's menu
  // as it aims) and one with modifiers (a link may open a tab instead) are aimed after the guard's decision only.
  const want = !why && !mods && button !== 'right' ? { aim: { skip: PICKERS.source } } : {};
  const r = await action(b, call, 'browser_click', 'click', args, { mods, modifiers: args.modifiers, button, count, real: !why },
    { tab, want, opensTab: (desc) => button === 'left' && newTab(desc) && /^https?:/i.test(desc.href) });
  if (r.opened) return openedAnswer(call, r);
  const chose = r.chooser ? '; it opened a file chooser, which was kept closed (it would have come over the person\'s ' +
    'screen): to give the page a file, use browser_upload with the ref of its file field or drop zone' : '';
  const did = `${r.verb} ${r.what}${scriptClickNote(r, why)}${chose}`;
  if (r.download) return text(withPage(`${did}; it ${STARTED_DOWNLOAD}`, r.element));
  if (r.loaded) {
    // Where the click led is the page's to choose, so the URL is the page's text.
    return text(withPage(`${did}; ${ledTo(r.loaded)}`, [r.element, `URL: ${r.loaded.url}`].filter(Boolean).join('\n')));
  }
  return text(withPage(`${did}. If the page changed, take a new browser_snapshot.`, r.element));
}

/** What a click's result adds when it was the page's script events, not the mouse, and why. */
function scriptClickNote(r, why) {
  const reason = r.framed ? 'the element is in a frame' : r.unreached ? `the mouse could not reach it: ${r.unreached}`
    : why ? why : '';
  return reason ? ` (as script events, without moving the mouse: ${reason})` : '';
}

async function type(b, args, call) {
  if (typeof args.text !== 'string') throw new ToolError(BAD_ARGS, '"text" must be a string');
  const tab = await b.tabs.target();
  const why = await b.input.unavailable(tab.id);
  const r = await action(b, call, 'browser_type', 'type', args, { text: args.text, clear: args.clear !== false, real: !why },
    { tab });
  const long = r.inserted ? ` (${r.inserted} of its characters went in as one insertion, as a paste, with no key ` +
    'events of their own: the first and the last ones were typed as keys)' : '';
  return text(withPage(`typed into ${r.what}${r.keyed ? long : ` (${why ? `as a value set by script: ${why}` : 'as a value ' +
    'set by script, with no key events, as this field takes no typed keys or is in a frame'})`}`, r.element));
}

/**
 * Selects text as a hand would: the words given (as the snapshot shows them) within the element given or the whole
 * page, or the element's whole text. A later Control+C copies it; the page's own "quote" or "comment" reads it.
 */
async function selectText(b, args, call) {
  const words = args.text == null ? '' : args.text;
  const whole = (args.ref == null || args.ref === '') && !args.selector;
  if (typeof words !== 'string' || (whole && !words.trim())) {
    throw new ToolError(BAD_ARGS, 'give "text" (the words to select, as the snapshot shows them), "ref" or "selector" ' +
      '(to select its whole text), or both (the words within that element)');
  }
  const r = await action(b, call, 'browser_select_text', 'selectText', whole ? { ...args, selector: 'body' } : args, { text: words });
  const where = whole ? 'the page' : r.what;
  return text(withPage(`selected text in ${where}; it is the page's selection now (browser_press_key Control+C copies ` +
    'it).', [r.element, `selected: ${JSON.stringify(r.chosen)}`].filter(Boolean).join('\n')));
}

/** What a press's result adds when its key could not be a real one. */
function scriptKeyNote(why, framed) {
  if (framed) return ' (sent as script events, as the element is in a frame: a key\'s own action, such as typing or ' +
    'moving a slider, did not happen; use browser_type for text)';
  return why ? ` (sent as script events only, without the key's own action such as typing, scrolling or a shortcut: ${why})` : '';
}

async function pressKey(b, args, call) {
  const press = keyPress(args.key, args.modifiers);
  const focused = args.ref == null && !args.selector;
  const tab = await b.tabs.target();
  const why = await b.input.unavailable(tab.id);
  const real = !why;
  const opArgs = { key: args.key, modifiers: args.modifiers, press, real };
  try {
    // The key goes to the element named, or else to the focused one, and is decided on as that element's.
    const r = await action(b, call, 'browser_press_key', 'press', args, opArgs, { tab, focused, want: { keys: true } });
    const led = r.download ? ` It ${STARTED_DOWNLOAD}`
      : r.loaded ? ` ${ledTo(r.loaded, { first: true })}` : '';
    return text(withPage(`${r.verb} ${r.what}${scriptKeyNote(why, r.framed)}${led && `.${led}`}`,
      [r.element, r.loaded && `URL: ${r.loaded.url}`].filter(Boolean).join('\n')));
  } catch (e) {
    // With no element focused, a key that activates nothing (Escape, a scroll key) goes to the page itself.
    if (!(e instanceof ToolError && e.code === NO_FOCUS)) throw e;
    if (press.activates) {
      throw new ToolError(NO_FOCUS, `no element has the keyboard focus, so ${press.label} would go to the page ` +
        'itself; nothing was pressed. Give the ref (from browser_snapshot) of the element to press it on');
    }
  }
  // No element has the focus: the key lands on the page itself, where its own shortcuts listen; it is judged there.
  const pageTarget = { tabId: tab.id, frameIds: [0] };
  const [described] = await b.page.exec(pageTarget, 'describeTarget', [{ page: true }, { keys: true }]);
  if (!described || !described.result || described.result.error) throw b.page.error(described && described.result, { label: 'the page' }, args);
  await call.check('browser_press_key', described.result.desc, { key: args.key, modifiers: args.modifiers }, { url: tab.url, tabId: tab.id });
  call.throwIfCancelled();
  const watch = b.loads.watch(tab.id);
  const [top] = await b.page.exec({ tabId: tab.id, frameIds: [0] }, 'act', ['press', { page: true }, { press, real }, null])
    .catch((e) => {
      watch.stop();
      throw e;
    });
  const res = top && top.result;
  if (!res || res.error) {
    watch.stop();
    throw b.page.error(res, { label: 'the page' }, args);
  }
  let left = res.left === true;
  if (res.verb === 'ready') {
    try {
      left = (await sendKeys(b, tab, top.documentId, () => b.input.key(tab.id, press))).left || left;
    } catch (e) {
      watch.stop();
      throw e;
    }
  }
  await b.loads.settle(watch, left);
  return text(`pressed ${args.key} in the page (no element has the focus)${scriptKeyNote(why, false)}`);
}

/** The options asked for: `values` (a list, for a multiple-choice list) or `value`. */
function optionsAsked(args) {
  if (Array.isArray(args.values)) {
    if (!args.values.length || args.values.length > MAX_VALUES || !args.values.every((v) => typeof v === 'string')) {
      throw new ToolError(BAD_ARGS, `"values" must be a list of 1 to ${MAX_VALUES} option values or labels`);
    }
    return { values: args.values };
  }
  if (typeof args.value !== 'string') throw new ToolError(BAD_ARGS, '"value" must be a string (or give "values", a list)');
  return { value: args.value };
}

async function selectOption(b, args, call) {
  const asked = optionsAsked(args);
  // The guard judges the options chosen by the page's words for them, and what the list's change can do.
  const r = await action(b, call, 'browser_select_option', 'select', args, asked, { want: { chosen: asked.values || [asked.value] } });
  const chosen = r.chosen == null ? '' : Array.isArray(r.chosen) ? `options: ${r.chosen.map((c) => JSON.stringify(c)).join(', ')}`
    : `option: ${JSON.stringify(r.chosen)}`;
  return text(withPage(`${r.verb} ${r.what}`, [r.element, chosen].filter(Boolean).join('\n')));
}

/** Where a drag ends: `to_ref` / `to_selector` (an element), or `dx` / `dy` (pixels from where it starts). */
function dropOf(b, tab, args) {
  if (args.to_ref != null && args.to_ref !== '') {
    const hit = b.page.table(tab.id).lookup(args.to_ref);
    return { spec: { local: hit.local }, documentId: hit.documentId, frameId: hit.frameId, label: `[ref=${String(args.to_ref)}]` };
  }
  if (typeof args.to_selector === 'string' && args.to_selector) return { spec: { selector: args.to_selector }, frameId: 0, label: args.to_selector };
  const n = (v) => (v == null ? 0 : v);
  const dx = n(args.dx);
  const dy = n(args.dy);
  if (![dx, dy].every((v) => Number.isFinite(v) && Math.abs(v) <= MAX_OFFSET) || (!dx && !dy)) {
    throw new ToolError(BAD_ARGS, 'say where to drop: "to_ref" (from browser_snapshot), "to_selector", or "dx"/"dy" ' +
      `(pixels from the element's middle, up to ${MAX_OFFSET}; a slider's thumb moves by them)`);
  }
  return { offset: { x: Math.round(dx), y: Math.round(dy) }, label: `${Math.round(dx)}, ${Math.round(dy)} px away` };
}

/**
 * Hover and drag: real mouse events at the element's middle (and, for a drag, at where it drops), in the top
 * frame. Described, asked of the guard (a drag by what it drops onto), aimed again at the very elements described.
 */
async function pointer(b, call, tool, args) {
  const tab = await b.tabs.target();
  const loc = await b.page.locate(tab, args);
  if (args.ref != null && args.ref !== '' && b.page.table(tab.id).lookup(args.ref).frameId !== 0) {
    throw new ToolError(BAD_TARGET, `${tool} was not done: ${FRAMED}.`);
  }
  const drop = tool === 'browser_drag' ? dropOf(b, tab, args) : null;
  if (drop && drop.frameId != null && drop.frameId !== 0) throw new ToolError(BAD_TARGET, `${tool} was not done: ${FRAMED}.`);
  await b.input.require(tab.id, tool);
  const ask = { target: loc.spec, ...(drop && drop.spec && { to: drop.spec }), ...(drop && drop.offset && { offset: drop.offset }) };
  const [first] = await b.page.exec(loc.target, 'aim', [ask]);
  if (!first || !first.result || first.result.error) throw b.page.error(first && first.result, loc, args);
  if (drop && drop.documentId && drop.documentId !== first.documentId) {
    throw new ToolError(BAD_TARGET, `${tool} was not done: the two elements are in different documents of the page (a ` +
      'frame); a drag goes within one. Take a new browser_snapshot');
  }
  const desc = { ...first.result.desc, drop: first.result.drop };
  const at = { tabId: tab.id, documentIds: [first.documentId] };
  const show = (on) => b.page.exec(at, 'outline', [on ? loc.spec : null]);
  await call.check(tool, desc, {}, { url: tab.url, tabId: tab.id, ref: args.ref, show });
  call.throwIfCancelled();
  const [again] = await b.page.exec(at, 'aim', [ask, { from: desc.fingerprint, to: desc.drop ? desc.drop.fingerprint : '' }]);
  if (!again || !again.result || again.result.error) throw b.page.error(again && again.result, loc, args);
  const watch = b.loads.watch(tab.id);
  let how = 'hovered';
  try {
    if (drop) how = await b.input.drag(tab.id, again.result.from, again.result.to);
    else await b.input.move(tab.id, again.result.from);
  } catch (e) {
    watch.stop();
    throw e;
  }
  const loaded = await b.loads.settle(watch, false);
  const element = args.ref ? `element: ${desc.role} "${desc.name}"` : '';
  const onto = desc.drop ? `dropped onto: ${desc.drop.role} "${desc.drop.name}"` : '';
  const block = [element, onto, loaded && `URL: ${loaded.url}`].filter(Boolean).join('\n');
  const after = loaded ? ledTo(loaded, { first: true }) : 'Take a new browser_snapshot to see what changed.';
  if (!drop) return text(withPage(`the mouse is over ${loc.label} now (what opens on hover is open). ${after}`, block));
  const way = how === 'dropped' ? 'dragged and dropped' : 'dragged';
  return text(withPage(`${way} ${loc.label} to ${drop.label}, with the mouse button held. ${after}`, block));
}

const hover = (b, args, call) => pointer(b, call, 'browser_hover', args);
const drag = (b, args, call) => pointer(b, call, 'browser_drag', args);

/**
 * Scrolls the page, an element into view, or inside an element (a ref or selector with a direction or pixels), and
 * answers once the page has settled: its own scroll handlers (page/input.js, settled) have run.
 */
async function scroll(b, args, call) {
  const tab = await b.tabs.target();
  call.throwIfCancelled();
  const named = (args.ref != null && args.ref !== '') || Boolean(args.selector);
  const loc = named ? await b.page.locate(tab, args) : { target: { tabId: tab.id, frameIds: [0] }, spec: null, label: 'the page' };
  // A ref alone is scrolled into view; with a direction or pixels, its own content scrolls (a list, a textarea).
  const inside = named && (args.direction != null || args.pixels != null);
  const scrolled = () => b.page.exec(loc.target, 'scroll', [{ direction: args.direction || 'down', pixels: args.pixels, target: loc.spec, inside }]);
  // A page behind the person's draws a frame a second, and its scroll events wait for one: awake, as in front.
  const [r] = await ((await b.input.unavailable(tab.id)) ? scrolled() : b.input.awake(tab.id, scrolled));
  const res = r && r.result;
  if (!res || res.error) throw b.page.error(res, loc, args);
  const atEnd = res.scrollY + res.viewport >= res.height - 2;
  if (res.inside) {
    const what = res.own ? loc.label : `the element around ${loc.label} that scrolls`;
    return text(`scrolled inside ${what} to y=${res.scrollY} of ${res.height} px (its view ${res.viewport} px)` +
      `${atEnd ? '; this is its end' : ''}. Take a new browser_snapshot to see what shows now.`);
  }
  return text(`scrolled to y=${res.scrollY} of ${res.height} px (viewport ${res.viewport} px)${atEnd ? '; this is the bottom' : ''}`);
}

export const ACTING_TOOLS = {
  browser_click: click,
  browser_type: type,
  browser_press_key: pressKey,
  browser_select_option: selectOption,
  browser_select_text: selectText,
  browser_scroll: scroll,
  browser_hover: hover,
  browser_drag: drag,
};
