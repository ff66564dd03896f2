// The tools that move the agent between pages and tabs: load a URL (browser_navigate), go back one page
// (browser_back), and list, open, switch and close its tabs (browser_tabs). Every destination passes the
// guard's site rules first.

import { ToolError, BAD_ARGS, BAD_URL, BROWSER_RESTRICTED, LOAD_FAILED, NO_HISTORY, NO_TAB, TIMEOUT } from './errors.js';
import { addressOf, checkNavigable, restrictedReason } from './tabs.js';
import { watchTab } from './loads.js';
import { text, untrusted, withPage } from './results.js';

/** A path (`/orders?page=2`), as snapshots show same-site links, made absolute on the agent tab's site. */
async function onAgentSite(b, url) {
  if (typeof url !== 'string' || !url.startsWith('/') || url.startsWith('//')) return url;
  const tab = b.tabs.current == null ? null : await chrome.tabs.get(b.tabs.current).catch(() => null);
  let base = null;
  try {
    base = new URL(tab && tab.url);
  } catch {
    /* no tab, or no address in it */
  }
  if (!base || (base.protocol !== 'http:' && base.protocol !== 'https:')) {
    throw new ToolError(BAD_URL, `"${url}" is a path, and the agent tab shows no web page to take it from; ` +
      'give an absolute URL (https://...)');
  }
  // The URL parser reads `/\\host` and `/<tab>/host` as another host: a path must stay on the tab's site.
  const resolved = new URL(url, base.origin);
  if (resolved.origin !== base.origin) {
    throw new ToolError(BAD_URL, `"${url}" is not a path on ${base.origin}; give an absolute URL (https://...)`);
  }
  return resolved.href;
}

/**
 * Throws unless the load of `url` (`loaded`, lib/loads.js's word on it) ended on a page the agent may use: one that
 * loaded (not the browser's error page), on a site the person's rules do not block and that the browser does not own
 * (a redirect can lead to either). Says where the tab is.
 */
function checkLanded(call, url, { tab, failure, dropped }) {
  if (failure) {
    throw new ToolError(LOAD_FAILED, `${url} did not load: ${failure}. The tab shows the browser's error page; ` +
      'check the URL, or tell the user if the task needs this site.');
  }
  const at = addressOf(tab) || url;
  if (dropped || at === url) return at;
  return checkUsable(call, at, `${url} led to`, `${url} redirected to another site:`);
}

/**
 * Throws unless the page the tab arrived at, `at` (a URL the agent did not name: a redirect's, a history entry's), is
 * one the agent may use: not the browser's own, and on a site the person's rules do not block (they may have changed
 * since the tab was there). `led` and `ruled` begin the two refusals. Returns `at`.
 */
export function checkUsable(call, at, led, ruled) {
  const why = restrictedReason(at);
  if (why) {
    throw new ToolError(BROWSER_RESTRICTED, `${led} a page the agent cannot use (${why}); page tools will ` +
      'not work in this tab. Its URL is in the block below.', `URL: ${at}`);
  }
  try {
    call.destination(at);
  } catch (e) {
    throw new ToolError(e.code, `${ruled} ${e.message}`, `URL: ${at}`);
  }
  return at;
}

// Chrome closes a tab it opened whose first navigation loaded nothing (a download): how long that takes to show.
const EMPTY_TAB_CLOSES_MS = 1_000;

// What the agent is told of a navigation that loaded nothing into the tab (lib/loads.js, load).
export const DROPPED_WORDS = 'the browser ended the navigation without loading a page (the address may have answered with a ' +
  'download, which browser_download with no ref or url takes, or with no content; or the browser cancelled the load, or ' +
  'another navigation took its place)';

/**
 * Opens `url` in a new agent tab (beside `openerTabId`, the tab of a link that opens it) and follows its load:
 * lib/loads.js's answer, with `tab` null when Chrome closed the tab because its address loaded no page (a download).
 */
export async function openTab(b, url, signal, openerTabId = undefined) {
  const loaded = await b.loads.load(() => b.tabs.open(url, openerTabId), signal);
  const { tab } = loaded;
  if (tab && loaded.dropped && (await watchTab(tab.id, EMPTY_TAB_CLOSES_MS, 100, (t) => !t)) === null) {
    return { ...loaded, tab: null };
  }
  return loaded;
}

async function navigate(b, args, call) {
  const url = await call.going(checkNavigable(await onAgentSite(b, args.url)));
  let start;
  if (b.tabs.current == null) start = () => b.tabs.open(url);
  else {
    const cur = await b.tabs.target().catch((e) => {
      // A browser-owned page in the agent tab is exactly what navigating away fixes.
      if (e.code === BROWSER_RESTRICTED) return chrome.tabs.get(b.tabs.current);
      throw e;
    });
    start = () => chrome.tabs.update(cur.id, { url });
  }
  const loaded = await b.loads.load(start, call.signal);
  if (!loaded.tab) throw new ToolError(NO_TAB, 'the agent tab was closed');
  if (loaded.unfinished) throw new ToolError(TIMEOUT, `${url}: ${loaded.unfinished}`);
  const at = checkLanded(call, url, loaded);
  if (loaded.dropped) return text(withPage(`${url} did not open: ${DROPPED_WORDS}. The tab stays at the URL in the block below`, `URL: ${at}`));
  if (at === url) return text(`navigated to ${url}`);
  return text(withPage(`navigated to ${url}; the page is now at the URL in the block below`, `URL: ${at}`));
}

// The step back shows in the tab within moments; a tab with no earlier page never moves.
const BACK_SHOWS_MS = 3_000;

async function back(b, args, call) {
  const tab = await b.tabs.target();
  const start = async () => {
    try {
      await chrome.tabs.goBack(tab.id);
    } catch {
      // Chrome's back button skips entries a page added without a user gesture (the agent's
      // clicks have none); the page's own history.back() does not skip them.
      await chrome.scripting.executeScript({ target: { tabId: tab.id, frameIds: [0] }, func: () => history.back() });
    }
    return tab;
  };
  // Answered as browser_navigate is, from Chrome's events of the step (lib/loads.js): the page the tab went back to
  // may not load any more, or may be on a site the person has blocked since.
  const loaded = await b.loads.load(start, call.signal, { traversal: true, beginsWithin: BACK_SHOWS_MS });
  if (!loaded.tab) throw new ToolError(NO_TAB, 'the agent tab was closed');
  if (!loaded.began) throw new ToolError(NO_HISTORY, 'there is no earlier page in this tab; use browser_navigate instead');
  if (loaded.unfinished) throw new ToolError(TIMEOUT, `went back one page, but ${loaded.unfinished}`);
  // A page can put any same-site URL in its history, so the URL is the page's text.
  const at = addressOf(loaded.tab);
  if (loaded.failure) {
    throw new ToolError(LOAD_FAILED, `went back one page, but it did not load: ${loaded.failure}. The tab shows the ` +
      "browser's error page for the URL in the block below; browser_navigate takes the tab on.", `URL: ${at}`);
  }
  if (loaded.dropped) {
    return text(withPage(`did not go back: ${DROPPED_WORDS}. The tab stays at the URL in the block below`, `URL: ${at}`));
  }
  checkUsable(call, at, 'went back one page, to', 'went back one page, onto a site the agent may not use:');
  return text(withPage('went back one page, to the URL in the block below', `URL: ${at}`));
}

async function tabs(b, args, call) {
  switch (args.action) {
    case 'list': {
      const listed = await b.tabs.list();
      if (!listed.length) return text('no agent tabs. Open one with browser_tabs {"action":"open","url":...}.');
      const lines = listed.map((t) => `- tab ${t.id}${t.current ? ' (current)' : ''}${t.by === 'user' ? ' (shared by the user)' : ''}: ${JSON.stringify(t.title)} ${t.url}`);
      return text(untrusted(lines.join('\n')));
    }
    case 'open': {
      const url = await call.going(checkNavigable(args.url));
      const loaded = await openTab(b, url, call.signal);
      const { tab } = loaded;
      if (!tab) {
        return text(`${url} did not open: ${DROPPED_WORDS}. Chrome closed the tab it had opened for it; ` +
          'browser_tabs {"action":"list"} shows your tabs');
      }
      // The tab is open and the agent's, loaded or not.
      if (loaded.unfinished) return text(`opened tab ${tab.id} at ${url}; it is now the current agent tab (${loaded.unfinished})`);
      const at = checkLanded(call, url, loaded);
      if (loaded.dropped) {
        return text(withPage(`opened tab ${tab.id}; it is now the current agent tab, but ${url} did not open in it: ` +
          `${DROPPED_WORDS}. The tab is at the URL in the block below`, `URL: ${at}`));
      }
      if (at === url) return text(`opened tab ${tab.id} at ${url}; it is now the current agent tab`);
      return text(withPage(`opened tab ${tab.id}; it is now the current agent tab, at the URL in the block below`, `URL: ${at}`));
    }
    case 'switch': {
      const tab = await b.tabs.switchTo(Number(args.tab_id));
      const why = restrictedReason(tab.url);
      return text(`switched to tab ${tab.id}${why ? ` (note: ${why}; page tools will not work there)` : ''}`);
    }
    case 'close':
      await b.tabs.close(Number(args.tab_id));
      return text(`closed tab ${args.tab_id}`);
    default:
      throw new ToolError(BAD_ARGS, 'action must be one of list, open, switch, close');
  }
}

export const TAB_TOOLS = {
  browser_navigate: navigate,
  browser_back: back,
  browser_tabs: tabs,
};
