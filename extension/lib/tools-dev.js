// The developer's tools: what the person would open DevTools for in the agent tab, the console and the network
// (browser_console, browser_network), read from lib/devtools-capture.js. Both only read. Everything in them is the
// page's (its messages, its URLs, its headers and bodies), so it all goes in the untrusted block, which redacts
// token-shaped secrets (lib/results.js); the credentials in headers are never kept at all.

import { ToolError, BAD_ARGS, TOOL_ERROR } from './errors.js';
import { text, untrusted, pageSlice } from './results.js';
import { humanSize } from './guard.js';
import { DEFAULT_MAX_CHARS } from './catalogue.js';
import { redactCardNumbers } from './redact.js';

// Chrome's own line for a failed load says its status in many words; the status is what matters.
const RESPONDED = /(?<=^Failed to load resource: )the server responded with a status of /;
const LEVEL_ORDER = { debug: 0, log: 1, info: 1, warning: 2, error: 3 };
const DEFAULT_MAX = 100;
const MAX_ITEMS = 500;
const MAX_BODY_CHARS = 200_000;
// Bodies worth showing as text; anything else is named by its type and size only.
const TEXTUAL = /^(text\/|application\/(json|javascript|ecmascript|xml|x-www-form-urlencoded)|[^;]*\+(json|xml))/i;

function count(args, name, dflt, max) {
  const v = args[name];
  if (v === undefined || v === null) return dflt;
  if (!Number.isInteger(v) || v < 0 || v > max) throw new ToolError(BAD_ARGS, `"${name}" must be a whole number from 0 to ${max}`);
  return v;
}

/** A URL as short as it reads unambiguously: the path when it is on the tab's own origin. */
function short(url, origin) {
  return origin && url.startsWith(`${origin}/`) ? url.slice(origin.length) : url;
}

function originOf(url) {
  try {
    const u = new URL(url);
    return /^https?:$/.test(u.protocol) ? u.origin : '';
  } catch {
    return '';
  }
}

/** The tab's capture; none without a debugger session (lib/dialogs.js), which is the only way to it. */
function captureOf(b) {
  if (!b.capture || !b.capture.enabled) throw new ToolError(TOOL_ERROR, 'this browser does not capture the console and network of agent tabs now');
  return b.capture;
}

async function consoleMessages(b, args, call) {
  captureOf(b);
  const level = args.level ?? 'debug';
  if (!Object.hasOwn(LEVEL_ORDER, level)) throw new ToolError(BAD_ARGS, '"level" must be one of error, warning, info, log, debug');
  const since = count(args, 'since', 0, Number.MAX_SAFE_INTEGER);
  const max = count(args, 'max', DEFAULT_MAX, MAX_ITEMS);
  const tab = await b.tabs.target();
  call.throwIfCancelled();
  await b.capture.ready(tab.id);
  const { messages, dropped } = b.capture.messages(tab.id);
  const origin = originOf(tab.url);
  const picked = messages.filter((m) => m.seq > since && LEVEL_ORDER[m.level] >= LEVEL_ORDER[level]);
  const shown = picked.slice(-max);
  const lines = shown.map((m) => {
    const where = m.url ? ` ${short(m.url, origin)}${m.line ? `:${m.line}` : ''}` : '';
    // A stack of one frame says no more than the message's own place.
    const frames = m.stack && (m.uncaught || m.stack.length > 1) ? m.stack : [];
    const stack = frames.map((f) => `    at ${f.fn === '(anonymous)' ? '' : `${f.fn} `}${short(f.url, origin)}:${f.line}:${f.column}`);
    return [`#${m.seq} ${m.level}${where} ${m.text.replace(RESPONDED, '')}`, ...stack].join('\n');
  });
  const filter = `${level !== 'debug' ? ` at level ${level} or above` : ''}${since ? ` after #${since}` : ''}`;
  const head = `${picked.length} console message${picked.length === 1 ? '' : 's'} since the page loaded${filter}` +
    `${shown.length < picked.length ? ` (the newest ${shown.length} shown)` : ''}` +
    `${dropped ? `; ${dropped} older ones were dropped (the tab keeps its newest ${b.capture.limits.messages})` : ''}.`;
  return text(lines.length ? `${head}\n${untrusted(redactCardNumbers(lines.join('\n')))}` : head);
}

function requestLine(r, origin) {
  const status = r.failed ? `failed (${r.failed})` : r.status ? String(r.status) : r.early ? '?' : 'pending';
  const took = r.duration !== undefined ? ` ${r.duration} ms` : '';
  const size = r.cached ? ' cached' : r.size !== undefined ? ` ${humanSize(r.size)}` : '';
  return `#${r.seq} ${r.method || '?'} ${status} ${r.type.toLowerCase()} ${short(r.url, origin)}${took}${size}`;
}

async function networkRequests(b, args, call) {
  captureOf(b);
  const tab = await b.tabs.target();
  call.throwIfCancelled();
  if (args.id !== undefined) return oneRequest(b, tab, args);
  if (args.url !== undefined && typeof args.url !== 'string') throw new ToolError(BAD_ARGS, '"url" must be text found in the URLs');
  const max = count(args, 'max', DEFAULT_MAX, MAX_ITEMS);
  await b.capture.catchUp(tab.id);
  const { requests, dropped, since } = b.capture.requests(tab.id);
  const origin = originOf(tab.url);
  const picked = args.url ? requests.filter((r) => r.url.toLowerCase().includes(args.url.toLowerCase())) : requests;
  const shown = picked.slice(-max);
  const from = since ? new Date(since).toISOString().slice(11, 19) : '';
  const head = `${picked.length} request${picked.length === 1 ? '' : 's'} since the page loaded${args.url ? ' matching the url filter' : ''}` +
    `${from ? ` (only those from ${from} UTC, when openab began watching the page)` : ''}` +
    `${shown.length < picked.length ? `; the newest ${shown.length} shown` : ''}` +
    `${dropped ? `; ${dropped} older ones were dropped (the tab keeps its newest ${b.capture.limits.requests})` : ''}` +
    `${shown.some((r) => r.early) ? '; a ? is what the page\'s own record leaves out, for those before openab watched it' : ''}.`;
  const lines = shown.map((r) => requestLine(r, origin));
  return text(lines.length ? `${head}\n${untrusted(lines.join('\n'))}` : head);
}

async function oneRequest(b, tab, args) {
  const id = args.id;
  if (!Number.isInteger(id) || id < 1) throw new ToolError(BAD_ARGS, '"id" must be a request\'s number from the list (#12 is 12)');
  const maxChars = count(args, 'max_chars', DEFAULT_MAX_CHARS, MAX_BODY_CHARS);
  const r = b.capture.request(tab.id, id);
  if (!r) {
    throw new ToolError(BAD_ARGS, `no request #${id} in the agent tab's page: it is from an earlier page, or was dropped. ` +
      'Call browser_network without id for the list.');
  }
  if (r.early) {
    return text(`request #${id} came before openab watched the page: only what the page's own record says of it is ` +
      `known (its headers and body are not).\n${untrusted(requestLine(r, originOf(tab.url)))}`);
  }
  const origin = originOf(tab.url);
  const headers = (list) => (list && list.length ? list.map(([n, v]) => `  ${n}: ${v}`).join('\n') : '  (none known)');
  const page = [requestLine(r, origin), `url: ${r.url}`, 'request headers:', headers(r.requestHeaders)];
  if (r.responseHeaders) page.push(`response: ${r.status} ${r.statusText || ''}`.trimEnd(), 'response headers:', headers(r.responseHeaders));
  let ours = `request #${id}: its headers (cookies and credentials withheld) and its response body are in the block below.`;
  const got = r.redirected || r.failed || !r.responseHeaders ? null : await b.capture.body(tab.id, id);
  if (!got) {
    ours += ' No body: the request was redirected, failed, has not finished, or Chrome no longer holds it.';
  } else if (got.base64 || !TEXTUAL.test(r.mimeType || '')) {
    ours += ` The body is ${r.mimeType || 'of an unknown type'} (not text), ${humanSize(r.size ?? got.body.length)}: not shown.`;
  } else {
    const { body, note } = pageSlice(got.body, args.offset ?? 0, maxChars);
    page.push('response body:', body);
    if (note) ours += ` ${note}`;
  }
  return text(`${ours}\n${untrusted(redactCardNumbers(page.join('\n')))}`);
}

export const DEV_TOOLS = {
  browser_console: consoleMessages,
  browser_network: networkRequests,
};
