// The tools that read the agent tab: its outline (browser_snapshot, and what changed since the last one), its
// HTML (browser_read_dom), and a wait for something to show in it (browser_wait_for). Each gets the browser's
// parts (`b`, lib/tools.js), its arguments and its call.

import { ToolError, BAD_ARGS, BAD_SELECTOR, TIMEOUT } from './errors.js';
import { redactTokens } from './redact.js';
import { pageSlice, text, untrusted } from './results.js';
import { DEFAULTS } from './catalogue.js';

// Where the page script put a link's ref in a line of text: its local element id between two U+0001 marks.
// eslint-disable-next-line no-control-regex
const INLINE_REF = /\u0001(\d+)\u0001/g;
// eslint-disable-next-line no-control-regex
const INLINE_LINK = /\[[^\]]*\]\(\u0001\d+\u0001[^)]*\)/g;
// The ref of a cut mark (`… [cut at 8000 of ~9600 characters: browser_snapshot region=e7 reads it whole]`), which
// names a part to read, not something to act on.
// eslint-disable-next-line no-control-regex
const CUT_REF = /region=\u0001(\d+)\u0001 reads it whole\]/g;
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

// How o200k_base (GPT-4o's tokenizer) cuts a text before it looks words up: a word with the one space or mark
// before it, numbers by three digits, a run of marks with the space before it, white space.
const PIECES = /([^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+)|\p{N}{1,3}| ?([^\s\p{L}\p{N}]+)|\s+(?!\S)|\s+/gu;
// The same for a text all in ASCII, most of a page's lines: a third of the time.
const ASCII_PIECES = /([^\r\nA-Za-z0-9]?[A-Za-z]+)|[0-9]{1,3}| ?([^\sA-Za-z0-9]+)|\s+(?!\S)|\s+/g;
// eslint-disable-next-line no-control-regex
const ASCII = /^[\x00-\x7f]*$/;

/**
 * What a text costs the model, estimated without a tokenizer (its tables would weigh megabytes here): the
 * tokenizer's own pieces, each a token, a long word one more per ten letters past five, a run of four marks or
 * more one per two, a word in another script one per character. On real pages (Python's documentation, a Django
 * admin) within 10% of o200k_base, rather over than under: a client refuses a result past its own limit (Claude
 * Code's is 25,000 tokens). Counting each mark as a token, as before, put code-heavy pages 40% over.
 */
export function estimateTokens(t) {
  let n = 0;
  const text = String(t);
  for (const [, word, marks] of text.matchAll(ASCII.test(text) ? ASCII_PIECES : PIECES)) {
    if (word) {
      let wide = 0;
      for (let i = 0; i < word.length; i++) if (word.charCodeAt(i) > 127) wide++;
      n += wide || 1 + Math.max(0, word.length - 5) / 10;
    } else n += marks && marks.length > 3 ? Math.ceil(marks.length / 2) : 1;
  }
  return Math.ceil(n);
}

// The budget of one snapshot in tokens: the whole page when it fits; else its outline and as much of its text as
// fits, and how to get the rest. Below Claude Code's default limit on an MCP result (25,000), and more than a long
// documentation page takes in our lines.
const MIN_TOKENS = 500;
const MAX_TOKENS = 200_000;
// The outline of a page over budget takes at most this part of it; the rest goes to the page's text.
const OUTLINE_SHARE = 0.3;
// browser_find: this many matches at most, each with the lines around it.
const FIND_DEFAULT = 20;
const FIND_MAX = 100;
// A found line longer than this reads as its start and the words around the match, this many characters each side.
const FIND_LINE = 600;
const FIND_AROUND = 160;

const tokenBudget = (args) => {
  const asked = Number.isInteger(args.max_tokens) ? args.max_tokens : DEFAULTS.maxTokens;
  return Math.min(Math.max(asked, MIN_TOKENS), MAX_TOKENS);
};

/**
 * The agent tab's outline as lines, every frame's after the top one's, and for each line what the outline of a
 * long page and its regions need: its depth, a heading's level, a landmark's or table's kind, the ref that names
 * it as a region, and whether it is a table's header (`g`). `tab`: the agent's current tab unless given (a receipt,
 * lib/receipts.js, names the tab its step began in). `part`: `{whole: true}`, every word (nothing cut, for
 * browser_find); `{at}`, a ref's element (the table's lookup) alone and whole.
 */
export async function render(b, linksOnly, tab = null, part = {}) {
  tab = tab || await b.tabs.target();
  const where = part.at ? { tabId: tab.id, documentIds: [part.at.documentId] } : { tabId: tab.id, allFrames: true };
  const options = { whole: Boolean(part.whole), root: part.at ? part.at.local : 0 };
  const results = await b.page.exec(where, 'snapshot', [options]);
  results.sort((x, y) => x.frameId - y.frameId);
  const table = b.page.table(tab.id);
  const lines = [];
  const meta = [];
  let page = null;
  let documentId = null; // the top frame's document: what a receipt compares with
  for (const r of results) {
    const snap = r.result;
    if (!snap) continue;
    const top = r.frameId === 0;
    if (top) {
      page = snap;
      documentId = r.documentId;
    }
    else {
      lines.push(`- frame ${JSON.stringify(snap.url)}:`);
      meta.push({ d: 0, k: 'frame' });
    }
    const base = top ? 0 : 1;
    for (const e of snap.entries) {
      const inline = Array.isArray(e.r) ? e.r : [];
      const grid = e.g === 'head' || e.g === 'row';
      const marks = new Set(Array.from(e.t.matchAll(CUT_REF), (m) => Number(m[1])));
      // With interactive_only a table keeps its header and the rows that hold a control, whole: a row's values
      // tell which one to act on. A cut mark alone keeps no line.
      if (linksOnly && !e.l && !inline.some((n) => !marks.has(n)) && !e.h && !e.k && e.g !== 'head') continue;
      const ref = e.l ? ` [ref=${table.refFor(r.documentId, r.frameId, e.l)}]` : '';
      // Links inside a line of text: the page script marked where each one's ref goes (INLINE_REF). With
      // interactive_only the line keeps its links alone, each with its address; the whole text leaves out the
      // same-site ones, which the sentence around a link already describes.
      const asLinks = inline.length && linksOnly && !grid && !e.h && !e.k;
      const source = asLinks ? `links: ${(e.t.match(INLINE_LINK) || []).join(' ')}` : e.t;
      const t = inline.length ? source.replace(INLINE_REF, (_, n) =>
        (inline.includes(Number(n)) ? table.refFor(r.documentId, r.frameId, Number(n)) : ''))
        .replace(INLINE_ADDRESS, linksOnly ? '$1' : '') : e.t;
      // The page's own text and its headings read without the "- " that opens each of the outline's lines. One
      // space per level keeps the tree as plain to read as two did, for fewer tokens on every nested line.
      const dash = e.c && !asLinks ? '' : '- ';
      lines.push(`${' '.repeat(e.d + base)}${dash}${t}${ref}${e.tail || ''}`);
      meta.push({
        d: e.d + base, h: e.h || 0, k: e.k || '', g: e.g || '',
        // The element that names this line's part as a region; its ref is made only when an outline shows it.
        at: e.x || e.l ? { documentId: r.documentId, frameId: r.frameId, local: e.x || e.l } : null,
      });
    }
  }
  return { page, lines, meta, table, documentId };
}

/** Where the part of the outline that `start` opens ends: a heading's section, a container's lines. */
function regionEnd(meta, start) {
  const m = meta[start];
  for (let i = start + 1; i < meta.length; i++) {
    if (m.h ? meta[i].h && meta[i].h <= m.h : meta[i].d <= m.d) return i;
    if (meta[i].k === 'frame' && m.k !== 'frame') return i;
  }
  return meta.length;
}

/** The lines from `from` that fit in `budget` tokens, whole lines only (a first line too long is cut). */
function fitLines(lines, from, budget) {
  let used = 0;
  let i = from;
  for (; i < lines.length; i++) {
    const cost = estimateTokens(lines[i]) + 1;
    if (used + cost > budget) break;
    used += cost;
  }
  if (i === from && from < lines.length) return { end: from + 1, cut: budget * 4 };
  return { end: i, cut: 0 };
}

/** The headings, landmarks, forms and tables of an outline, each with its region ref and what it costs. */
function outlineOf(table, lines, meta, budget) {
  const items = [];
  const sums = [0];
  for (const l of lines) sums.push(sums[sums.length - 1] + estimateTokens(l) + 1);
  for (let i = 0; i < meta.length; i++) {
    const m = meta[i];
    if ((!m.h && !m.k) || !m.at) continue;
    const end = regionEnd(meta, i);
    const cost = sums[end] - sums[i];
    const line = lines[i].replace(/:$/, '');
    const ref = table.refFor(m.at.documentId, m.at.frameId, m.at.local);
    items.push({ h: m.h, text: `${line} [region=${ref}, ~${cost} tokens]` });
  }
  // A page of thousands of headings keeps its upper levels whole rather than its first headings alone.
  for (let level = 6; level >= 1; level--) {
    const total = items.reduce((n, it) => n + estimateTokens(it.text) + 1, 0);
    if (total <= budget) break;
    for (let i = items.length - 1; i >= 0; i--) if (items[i].h >= level) items.splice(i, 1);
  }
  const fit = fitLines(items.map((it) => it.text), 0, budget);
  const more = items.length - fit.end;
  return items.slice(0, fit.end).map((it) => it.text).join('\n') + (more > 0 ? `\n… and ${more} more` : '');
}

/**
 * The offset's line and where in it: the agent continues from where a note said, a line's start, or inside a line
 * longer than the budget (a whole cell or paragraph read as a region), which the last piece cut.
 */
function lineAt(lines, offset) {
  let at = 0;
  for (let i = 0; i < lines.length; i++) {
    if (at + lines[i].length >= offset) return { index: i, at: Math.max(at, offset), skip: Math.max(offset - at, 0) };
    at += lines[i].length + 1;
  }
  return { index: lines.length, at, skip: 0 };
}

export async function snapshot(b, args) {
  const linksOnly = args.interactive_only === true;
  const whole = await render(b, linksOnly);
  const { page, table, documentId } = whole;
  let { lines, meta } = whole;
  const head = page ? `Page: ${page.title}\nURL: ${page.url}\n` : '';
  const shot = { url: page ? page.url : '', interactiveOnly: linksOnly, lines, documentId };
  const region = typeof args.region === 'string' && args.region ? args.region : '';
  // The next pages of one answer (offset > 0) are cut from the same comparison as its first page; a region is a
  // part, not a new look at the page.
  if (!(args.offset > 0) && !region) {
    table.base = table.last;
    table.last = lines.reduce((n, l) => n + l.length, 0) <= MAX_KEPT_SNAPSHOT ? shot : null;
  }
  const base = table.base;
  let ours = '';
  let body = lines;
  let bodyMeta = meta;
  let diff = false;
  if (region) {
    let hit = null;
    try {
      hit = table.lookup(region);
    } catch {
      // an unknown ref: said below, with what to do
    }
    let start = hit ? meta.findIndex((m) => m.at && m.at.documentId === hit.documentId && m.at.local === hit.local) : -1;
    let end = start === -1 ? -1 : regionEnd(meta, start);
    let said = `Region ${region} of the page, lines ${start + 1}-${end} of ${lines.length}.\n`;
    // No line starts with it (a cell, a text a mark says was cut), or the one that does is cut (a landmark of text
    // alone): the element alone, every word of it.
    if (hit && (start === -1 || lines[start].includes(`region=${region} reads it whole]`))) {
      ({ lines, meta } = await render(b, linksOnly, null, { at: hit }));
      [start, end] = [0, lines.length];
      said = `Region ${region} of the page: that element alone, whole.\n`;
    }
    if (!lines.length || start === -1) {
      throw new ToolError(BAD_ARGS, `no region ${region} in the page as it is now: take a browser_snapshot and use ` +
        'a region= ref from its outline (a heading, a landmark, a form or a table), or a ref of any line');
    }
    body = lines.slice(start, end);
    bodyMeta = meta.slice(start, end);
    ours = said;
  } else if (args.since === true) {
    if (!base) ours = 'No earlier snapshot of this page to compare with: this is all of it.\n';
    else if (base.url !== shot.url) ours = 'The page is at another URL since the last snapshot: this is all of it.\n';
    else if (base.interactiveOnly !== shot.interactiveOnly) {
      ours = 'The last snapshot was taken with another interactive_only: this is all of it.\n';
    } else {
      const changes = lineDiff(base.lines, lines);
      ours = changes ? 'What changed since the last snapshot, as a unified diff (" " an unchanged line, "-" gone, "+" new); ' +
        'every other line and its ref is as it was.\n' : 'Nothing changed since the last snapshot.\n';
      body = changes ? changes.split('\n') : [];
      diff = true;
    }
  }
  // Paging by characters, as the agent asked with max_chars: cut where the count says. Redacted before paging, so
  // a token is never cut in two halves that each pass as harmless.
  if (Number.isInteger(args.max_chars)) {
    const { body: piece, note } = pageSlice(redactTokens(head + body.join('\n')), args.offset, args.max_chars);
    return text(ours + untrusted(piece) + (note ? `\n${note}` : ''));
  }
  const budget = tokenBudget(args);
  const all = redactTokens(body.join('\n')).split('\n');
  const cost = all.reduce((n, l) => n + estimateTokens(l) + 1, estimateTokens(head));
  const offset = Math.max(0, Number(args.offset) | 0);
  const more = region ? ` region=${region}` : (diff ? ' since=true' : '');
  if (!offset && cost <= budget) return text(ours + untrusted(head + all.join('\n')));
  let top = '';
  let left = budget - estimateTokens(head);
  if (!offset && !diff) {
    const outline = outlineOf(table, all, bodyMeta, Math.floor(budget * OUTLINE_SHARE));
    if (outline) {
      top = `Outline (each part's region= ref gives it whole):\n${outline}\n\nThe page from its start:\n`;
      left -= estimateTokens(top);
    }
  }
  const { index, at, skip } = lineAt(all, offset);
  // A piece that starts among a table's rows begins with the table's line and header row again, so its cells
  // still read with their columns.
  let context = '';
  if (!diff && index > 0 && bodyMeta[index]?.g === 'row') {
    let t = index - 1;
    while (t > 0 && bodyMeta[t].k !== 'table' && bodyMeta[t].g) t--;
    if (bodyMeta[t].k === 'table') {
      const heads = [];
      for (let j = t + 1; j < index && bodyMeta[j].g === 'head'; j++) heads.push(all[j]);
      context = `${[all[t], ...heads].join('\n')}\n`;
      left -= estimateTokens(context);
    }
  }
  const from = skip ? [...all.slice(0, index), all[index].slice(skip), ...all.slice(index + 1)] : all;
  const fit = fitLines(from, index, Math.max(left, 100));
  let piece = from.slice(index, fit.end).join('\n');
  if (fit.cut) piece = piece.slice(0, fit.cut);
  const end = at + piece.length + (fit.cut ? 0 : 1);
  piece = context + piece;
  const total = all.reduce((n, l) => n + l.length + 1, 0);
  const rest = fit.end < all.length || fit.cut
    ? `Call again with offset=${Math.min(end, total)}${more} for the rest, region= for one part, or use browser_find to find words.`
    : 'This is the end.';
  const note = `[lines ${index + 1}-${fit.end} of ${all.length} (~${cost} tokens in all, over max_tokens=${budget}). ${rest}]`;
  return text(`${ours}${untrusted((offset ? '' : head) + top + piece)}\n${note}`);
}

/**
 * A found line as long as it reads well: a line past FIND_LINE (a row with a long cell, a long paragraph) keeps its
 * start, which says which row or paragraph it is, and the words around the match, cut between words.
 */
function excerpt(line, needle) {
  if (line.length <= FIND_LINE) return line;
  const at = line.toLowerCase().indexOf(needle);
  const start = line.lastIndexOf(' ', Math.max(at - FIND_AROUND, 0)) + 1;
  const stop = line.indexOf(' ', Math.min(at + needle.length + FIND_AROUND, line.length));
  const tail = stop === -1 ? line.length : stop;
  const head = line.slice(0, line.lastIndexOf(' ', FIND_AROUND) + 1 || FIND_AROUND);
  const middle = start <= head.length ? line.slice(0, tail) : `${head}… ${line.slice(start, tail)}`;
  return tail < line.length ? `${middle} …` : middle;
}

/**
 * browser_find: the lines of the page that hold `text` (any case), each with the heading it is under and, in a
 * table, its header row, so a value reads with its column and a control in it with its ref. It reads every word of
 * the page, what a snapshot cuts too (a long cell, a table's rows past its shown ones); text that runs across lines
 * is found in the page's own text.
 */
async function find(b, args) {
  const needle = typeof args.text === 'string' ? args.text.replace(/\s+/g, ' ').trim().toLowerCase() : '';
  if (!needle) throw new ToolError(BAD_ARGS, 'give text: the words to find on the page');
  const limit = Math.min(Math.max(Number.isInteger(args.max_results) ? args.max_results : FIND_DEFAULT, 1), FIND_MAX);
  const { page, lines, meta } = await render(b, false, null, { whole: true });
  // On the redacted lines, so a search cannot tell the agent what a redacted secret says.
  const all = redactTokens(lines.join('\n')).split('\n');
  const hits = [];
  let shortened = false;
  const shorten = (line, words) => {
    const shown = excerpt(line, words);
    shortened ||= shown !== line;
    return shown;
  };
  let count = 0;
  let heading = -1;
  let header = -1; // the first header row of the table the line is in
  for (let i = 0; i < all.length; i++) {
    if (meta[i].h) heading = i;
    if (meta[i].k === 'table') header = -1;
    if (meta[i].g === 'head' && header === -1) header = i;
    if (!all[i].toLowerCase().includes(needle)) continue;
    count++;
    if (hits.length >= limit) continue;
    const around = [];
    if (heading !== -1 && heading < i - 1) around.push(`(under ${all[heading].trim()})`);
    if (meta[i].g === 'row' && header !== -1) around.push(all[header]);
    else if (i > 0 && i - 1 !== heading) around.push(shorten(all[i - 1], ''));
    around.push(shorten(all[i], needle));
    if (i + 1 < all.length && meta[i].g !== 'row') around.push(shorten(all[i + 1], ''));
    hits.push(`@@ line ${i + 1}\n${around.join('\n')}`);
  }
  const head = page ? `Page: ${page.title}\nURL: ${page.url}\n` : '';
  if (!count) return findAcross(b, args.text, needle, head);
  const ours = `${count} line(s) of the page hold ${JSON.stringify(args.text)}` +
    (count > hits.length ? `; the first ${hits.length} (max_results for more)` : '') +
    `, each after the lines that place it${shortened ? ' (a long line as its start and the words around the match)' : ''}` +
    '; the refs work as in browser_snapshot.\n';
  return text(ours + untrusted(head + hits.join('\n')));
}

/** Words no one line holds may run across lines (a label and its value): the top frame's own text is asked. */
async function findAcross(b, asked, needle, head) {
  const tab = await b.tabs.target();
  const res = await b.page.top(tab, 'check', { text: asked }).catch(() => null);
  // On the redacted text, so a search cannot tell the agent what a redacted secret says.
  const words = redactTokens(String((res && res.text) || '')).replace(/\s+/g, ' ');
  const at = words.toLowerCase().indexOf(needle);
  if (at === -1) return text(`No line of the page holds ${JSON.stringify(asked)}.\n`);
  const [start, stop] = [Math.max(at - FIND_AROUND, 0), at + needle.length + FIND_AROUND];
  const piece = `${start ? '… ' : ''}${words.slice(start, stop)}${stop < words.length ? ' …' : ''}`;
  return text(`No one line of the outline holds ${JSON.stringify(asked)}, but the page's text does, across lines ` +
    '(its words below); browser_find a shorter part of it gives the lines with their refs.\n' + untrusted(head + piece));
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
  browser_find: find,
  browser_read_dom: readDom,
  browser_wait_for: waitFor,
};
