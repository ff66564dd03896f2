// The tools that read the agent tab: its outline (browser_snapshot, and what changed since the last one), its
// HTML (browser_read_dom), and a wait for something to show in it (browser_wait_for). Each gets the browser's
// parts (`b`, lib/tools.js), its arguments and its call.

import { ToolError, BAD_ARGS, BAD_SELECTOR, TIMEOUT } from './errors.js';
import { redactTokens } from './redact.js';
import { pageSlice, text, untrusted } from './results.js';

// Where the page script put a link's ref in a line of text: its local element id between two U+0001 marks.
// eslint-disable-next-line no-control-regex
const INLINE_REF = /\u0001(\d+)\u0001/g;
// eslint-disable-next-line no-control-regex
const INLINE_LINK = /\[[^\]]*\]\(\u0001\d+\u0001[^)]*\)/g;
// A same-site address of a link inside a sentence, between two U+0002 marks: shown with interactive_only only.
// eslint-disable-next-line no-control-regex
const INLINE_ADDRESS = /\u0002([^\u0002]*)\u0002/g;
// browser_snapshot's `since`: the last snapshot of each tab is kept up to this size, and the changed middle of
// two snapshots is compared line by line up to this many line pairs (a 2,000-line change both ways).
const MAX_KEPT_SNAPSHOT = 2_000_000;
const MAX_DIFF_CELLS = 4_000_000;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * The lines that changed from `before` to `after` as unified-diff hunks, each after one unchanged line for its
 * place; '' when none did. Minimal where the changed middle is small enough to compare line by line, else the
 * whole middle as removed and added: the work is bounded whatever the page.
 */
export function lineDiff(before, after) {
  let start = 0;
  while (start < before.length && start < after.length && before[start] === after[start]) start++;
  let endB = before.length;
  let endA = after.length;
  while (endB > start && endA > start && before[endB - 1] === after[endA - 1]) {
    endB--;
    endA--;
  }
  if (start === endB && start === endA) return '';
  const a = before.slice(start, endB);
  const b = after.slice(start, endA);
  const ops = []; // [' ' | '-' | '+', line]
  if (a.length * b.length <= MAX_DIFF_CELLS) {
    // Longest common subsequence, from the end, then one walk from the start.
    const w = b.length + 1;
    const lcs = new Uint16Array((a.length + 1) * w);
    for (let i = a.length - 1; i >= 0; i--) {
      for (let j = b.length - 1; j >= 0; j--) {
        lcs[i * w + j] = a[i] === b[j] ? lcs[(i + 1) * w + j + 1] + 1 : Math.max(lcs[(i + 1) * w + j], lcs[i * w + j + 1]);
      }
    }
    let i = 0;
    let j = 0;
    while (i < a.length || j < b.length) {
      if (i < a.length && j < b.length && a[i] === b[j]) {
        ops.push([' ', a[i++]]);
        j++;
      } else if (i < a.length && (j === b.length || lcs[(i + 1) * w + j] >= lcs[i * w + j + 1])) ops.push(['-', a[i++]]);
      else ops.push(['+', b[j++]]);
    }
  } else {
    for (const l of a) ops.push(['-', l]);
    for (const l of b) ops.push(['+', l]);
  }
  const out = [];
  let context = start > 0 ? before[start - 1] : null;
  let open = false;
  for (const [op, line] of ops) {
    if (op === ' ') {
      context = line;
      open = false;
      continue;
    }
    if (!open) {
      out.push('@@');
      if (context !== null) out.push(` ${context}`);
      open = true;
    }
    out.push(`${op}${line}`);
  }
  return out.join('\n');
}

export async function snapshot(b, args) {
  const tab = await b.tabs.target();
  const results = await b.page.exec({ tabId: tab.id, allFrames: true }, 'snapshot', []);
  results.sort((x, y) => x.frameId - y.frameId);
  const table = b.page.table(tab.id);
  const linksOnly = args.interactive_only === true;
  const lines = [];
  let page = null;
  for (const r of results) {
    const snap = r.result;
    if (!snap) continue;
    const top = r.frameId === 0;
    if (top) page = snap;
    else lines.push(`- frame ${JSON.stringify(snap.url)}:`);
    const base = top ? 0 : 1;
    for (const e of snap.entries) {
      const inline = Array.isArray(e.r) ? e.r : [];
      if (linksOnly && !e.l && !inline.length && !e.h) continue;
      const ref = e.l ? ` [ref=${table.refFor(r.documentId, r.frameId, e.l)}]` : '';
      // Links inside a line of text: the page script marked where each one's ref goes (INLINE_REF). With
      // interactive_only the line keeps its links alone, each with its address; the whole text leaves out the
      // same-site ones, which the sentence around a link already describes.
      const source = inline.length && linksOnly ? `links: ${(e.t.match(INLINE_LINK) || []).join(' ')}` : e.t;
      const t = inline.length ? source.replace(INLINE_REF, (_, n) =>
        (inline.includes(Number(n)) ? table.refFor(r.documentId, r.frameId, Number(n)) : ''))
        .replace(INLINE_ADDRESS, linksOnly ? '$1' : '') : e.t;
      // The page's own text and its headings read without the "- " that opens each of the outline's lines. One
      // space per level keeps the tree as plain to read as two did, for fewer tokens on every nested line.
      const dash = e.c && !(inline.length && linksOnly) ? '' : '- ';
      lines.push(`${' '.repeat(e.d + base)}${dash}${t}${ref}${e.tail || ''}`);
    }
  }
  const head = page ? `Page: ${page.title}\nURL: ${page.url}\n` : '';
  const shot = { url: page ? page.url : '', interactiveOnly: args.interactive_only === true, lines };
  // The next pages of one answer (offset > 0) are cut from the same comparison as its first page.
  if (!(args.offset > 0)) {
    table.base = table.last;
    table.last = lines.reduce((n, l) => n + l.length, 0) <= MAX_KEPT_SNAPSHOT ? shot : null;
  }
  const base = table.base;
  let ours = '';
  let outline = lines.join('\n');
  if (args.since === true) {
    if (!base) ours = 'No earlier snapshot of this page to compare with: this is all of it.\n';
    else if (base.url !== shot.url) ours = 'The page is at another URL since the last snapshot: this is all of it.\n';
    else if (base.interactiveOnly !== shot.interactiveOnly) {
      ours = 'The last snapshot was taken with another interactive_only: this is all of it.\n';
    } else {
      const changes = lineDiff(base.lines, lines);
      ours = changes ? 'What changed since the last snapshot, as a unified diff (" " an unchanged line, "-" gone, "+" new); ' +
        'every other line and its ref is as it was.\n' : 'Nothing changed since the last snapshot.\n';
      outline = changes;
    }
  }
  // Redacted before paging, so a token is never cut in two halves that each pass as harmless.
  const { body, note } = pageSlice(redactTokens(head + outline), args.offset, args.max_chars);
  return text(ours + untrusted(body) + (note ? `\n${note}` : ''));
}

async function readDom(b, args) {
  const tab = await b.tabs.target();
  const res = await b.page.top(tab, 'readDom', typeof args.selector === 'string' ? args.selector : '');
  if (!res || res.error) throw b.page.error(res, { label: args.selector || 'body' }, args);
  const { body, note } = pageSlice(redactTokens(res.html), args.offset, args.max_chars);
  return text(untrusted(body) + (note ? `\n${note}` : ''));
}

async function waitFor(b, args, call) {
  const timeout = Math.min(Math.max(Number(args.timeout_ms) || 10_000, 100), 60_000);
  const conds = ['text', 'selector', 'url'].filter((k) => typeof args[k] === 'string' && args[k]);
  if (!conds.length && args.load !== true) throw new ToolError(BAD_ARGS, 'give text, selector, url, or load: true');
  const end = Date.now() + timeout;
  for (;;) {
    call.throwIfCancelled();
    const tab = await b.tabs.target();
    let ok = tab.status === 'complete' || args.load !== true;
    if (ok && args.url) ok = (tab.url || '').includes(args.url);
    if (ok && (args.text || args.selector)) {
      const res = await b.page.top(tab, 'check', { text: args.text, selector: args.selector }).catch(() => null);
      if (res && res.error === BAD_SELECTOR) throw new ToolError(BAD_SELECTOR, res.message);
      // On the redacted text, so waiting cannot tell the agent what a redacted secret says.
      ok = Boolean(res && res.ok) && (!args.text || redactTokens(res.text || '').includes(args.text));
    }
    if (ok) return text(`done waiting: ${conds.map((k) => `${k} ${JSON.stringify(args[k])}`).concat(args.load ? ['page loaded'] : []).join(', ')}`);
    if (Date.now() >= end) {
      throw new ToolError(TIMEOUT, `timed out after ${timeout} ms waiting for ${conds.map((k) => `${k} ${JSON.stringify(args[k])}`).join(', ') || 'the page to load'}. Take a browser_snapshot to see the page.`);
    }
    await sleep(200);
  }
}

export const READING_TOOLS = {
  browser_snapshot: snapshot,
  browser_read_dom: readDom,
  browser_wait_for: waitFor,
};
