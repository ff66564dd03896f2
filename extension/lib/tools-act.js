// The tools that act on the agent tab's page: click, type, press a key, choose an option, scroll. Every action
// on an element describes it, asks the guard, then acts on the very element described, and waits for the
// page it led to when it started a navigation (lib/loads.js).

import { ToolError, BAD_ARGS, NO_FOCUS } from './errors.js';
import { checkNavigable } from './tabs.js';
import { keyPress } from './guard.js';
import { text, withPage } from './results.js';

/**
 * Describe, ask the guard, then act on the very element that was described. When `opensTab`
 * says the element is a link to a new tab, the tab is opened here instead: a page may not open
 * tabs from a script's click (no user gesture), so clicking it would silently do nothing.
 * `focused`: the element is the one with the keyboard focus, held to that one element from then on.
 */
async function action(b, call, tool, op, args, opArgs, { opensTab = () => false, focused = false } = {}) {
  const tab = await b.tabs.target();
  let loc = await b.page.locate(tab, args, focused);
  const [d] = await b.page.exec(loc.target, 'describeTarget', [loc.spec]);
  if (!d || !d.result || d.result.error) throw b.page.error(d && d.result, loc, args);
  const desc = d.result.desc;
  if (focused) {
    // Bound to the element described, in the document that described it: a focus that moves on before the
    // press, to an element the guard never saw, makes the page refuse the press.
    loc = { ...loc, target: { tabId: tab.id, documentIds: [d.documentId] }, spec: { local: d.result.local, focused: true } };
  }
  // A card about this step can show the person the tab and the element, in its page (page/agent.js, outline).
  const show = (on) => b.page.exec(loc.target, 'outline', [on ? loc.spec : null]);
  await call.check(tool, desc, { ...opArgs }, { url: tab.url, tabId: tab.id, ref: args.ref, show });
  call.throwIfCancelled();
  // Chrome would offer to save a password the agent typed as the person's own (lib/passwords.js).
  if (op === 'type' && desc.sensitive === 'password' && b.passwords) await b.passwords.typing(tab.id);
  // `what` is ours (the ref, or the agent's own selector); the element's role and name are the page's.
  const what = loc.label;
  const element = args.ref || focused ? `element: ${desc.role} "${desc.name}"` : '';
  if (opensTab(desc)) {
    const opened = await b.tabs.open(await call.going(checkNavigable(desc.href)), tab.id);
    const done = await b.loads.waitLoaded(opened.id, call.signal).catch(() => opened);
    return { verb: 'clicked', what, element, desc, opened: { id: opened.id, url: done.url || desc.href } };
  }
  // Typing never leaves the page (Enter is browser_press_key), so it waits for nothing.
  const watch = op === 'type' ? null : b.loads.watch(tab.id);
  let r;
  try {
    [r] = await b.page.exec(loc.target, 'act', [op, loc.spec, opArgs, desc.fingerprint]);
  } catch (e) {
    if (watch) watch.stop();
    throw e;
  }
  if (!r || !r.result || r.result.error) {
    if (watch) watch.stop();
    throw b.page.error(r && r.result, loc, args);
  }
  const loaded = watch ? await b.loads.settle(watch, r.result.left === true) : null;
  return { verb: r.result.verb, what, element, chosen: r.result.chosen, desc, loaded };
}

async function click(b, args, call) {
  const r = await action(b, call, 'browser_click', 'click', args, {}, { opensTab: (desc) => desc.newTab && /^https?:/i.test(desc.href) });
  if (r.opened) {
    return text(withPage(`clicked ${r.what}: it opens in a new tab, so tab ${r.opened.id} was opened (at the URL in the ` +
      'block below) and is now the current agent tab.', [r.element, `URL: ${r.opened.url}`].filter(Boolean).join('\n')));
  }
  if (r.loaded) {
    // Where the click led is the page's to choose, so the URL is the page's text.
    return text(withPage(`clicked ${r.what}; it loaded a new page (its URL is in the block below). Take a new ` +
      'browser_snapshot to see it.', [r.element, `URL: ${r.loaded.url}`].filter(Boolean).join('\n')));
  }
  return text(withPage(`clicked ${r.what}. If the page changed, take a new browser_snapshot.`, r.element));
}

async function type(b, args, call) {
  if (typeof args.text !== 'string') throw new ToolError(BAD_ARGS, '"text" must be a string');
  const r = await action(b, call, 'browser_type', 'type', args, { text: args.text, clear: args.clear !== false });
  return text(withPage(`typed into ${r.what}`, r.element));
}

async function pressKey(b, args, call) {
  const press = keyPress(args.key);
  const focused = args.ref == null && !args.selector;
  try {
    // The key goes to the element named, or else to the focused one, and is decided on as that element's.
    const r = await action(b, call, 'browser_press_key', 'press', args, { key: args.key, press }, { focused });
    return text(withPage(`${r.verb} ${r.what}`, r.element));
  } catch (e) {
    // With no element focused, a key that activates nothing (Escape, a scroll key) goes to the page itself.
    if (!(e instanceof ToolError && e.code === NO_FOCUS)) throw e;
    if (press.activates) {
      throw new ToolError(NO_FOCUS, `no element has the keyboard focus, so ${press.label} would go to the page ` +
        'itself; nothing was pressed. Give the ref (from browser_snapshot) of the element to press it on');
    }
  }
  const tab = await b.tabs.target();
  await call.check('browser_press_key', null, { key: args.key }, tab.url);
  call.throwIfCancelled();
  const watch = b.loads.watch(tab.id);
  const res = await b.page.top(tab, 'act', 'press', { page: true }, { press }, null).catch((e) => {
    watch.stop();
    throw e;
  });
  if (!res || res.error) {
    watch.stop();
    throw b.page.error(res, { label: 'the page' }, args);
  }
  await b.loads.settle(watch, res.left === true);
  return text(`pressed ${args.key} in the page (no element has the focus)`);
}

async function selectOption(b, args, call) {
  if (typeof args.value !== 'string') throw new ToolError(BAD_ARGS, '"value" must be a string');
  const r = await action(b, call, 'browser_select_option', 'select', args, { value: args.value });
  const chosen = r.chosen == null ? '' : `option: ${JSON.stringify(r.chosen)}`;
  return text(withPage(`${r.verb} ${r.what}`, [r.element, chosen].filter(Boolean).join('\n')));
}

async function scroll(b, args, call) {
  const tab = await b.tabs.target();
  call.throwIfCancelled();
  let spec = null;
  let t = { tabId: tab.id, frameIds: [0] };
  if (args.ref != null) {
    const hit = b.page.table(tab.id).lookup(args.ref);
    spec = { local: hit.local };
    t = { tabId: tab.id, documentIds: [hit.documentId] };
  }
  const [r] = await b.page.exec(t, 'scroll', [{ direction: args.direction || 'down', pixels: args.pixels, target: spec }]);
  const res = r && r.result;
  if (!res || res.error) throw b.page.error(res, { label: `[ref=${args.ref}]` }, args);
  const atEnd = res.scrollY + res.viewport >= res.height - 2;
  return text(`scrolled to y=${res.scrollY} of ${res.height} px (viewport ${res.viewport} px)${atEnd ? '; this is the bottom' : ''}`);
}

export const ACTING_TOOLS = {
  browser_click: click,
  browser_type: type,
  browser_press_key: pressKey,
  browser_select_option: selectOption,
  browser_scroll: scroll,
};
