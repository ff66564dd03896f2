// The agent's markdown as DOM nodes. The text is the agent's (and, through it, any web page's):
// it only ever reaches the page as text nodes inside a fixed set of elements this module makes,
// so markup in it is shown, never parsed. Links are made only for http(s) URLs.
//
// `parse` is pure (text in, plain objects out) and linear in the text's length; `render` builds
// the DOM from its result.

/** Lists and quotes nested deeper than this are shown as plain text inside the last level. */
export const MAX_DEPTH = 8;
const MAX_COLUMNS = 32;
const LINK_SCHEMES = new Set(['http:', 'https:']);

/** The URL to link to, or '' when it must be shown as text (javascript:, data:, relative, malformed). */
export function safeHref(raw) {
  const text = String(raw || '').trim();
  if (!/^https?:\/\//i.test(text)) return '';
  try {
    const url = new URL(text);
    return LINK_SCHEMES.has(url.protocol) && url.hostname ? url.href : '';
  } catch {
    return '';
  }
}

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+|$)/;
const RULE = /^ {0,3}([-*_])[ \t]*(?:\1[ \t]*){2,}$/;
const QUOTE = /^ {0,3}> ?/;
const ITEM = /^( *)([-*+]|\d{1,9}[.)])(?:[ \t]+|$)/;
const TABLE_RULE = /^ *\|? *:?-+:? *(?:\| *:?-+:? *)*\|? *$/;
const BLANK = /^\s*$/;

function indentOf(line) {
  return line.length - line.replace(/^ +/, '').length;
}

function startsBlock(line) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) || ITEM.test(line);
}

/** A heading's text without its optional closing #s (by hand: a regex for it backtracks on long lines). */
function headingText(rest) {
  const text = rest.trimEnd();
  const bare = text.replace(/#+$/, '');
  if (bare.length === text.length) return text;
  return bare === '' || /[ \t]$/.test(bare) ? bare.trimEnd() : text;
}

function splitRow(line) {
  let row = line.trim();
  if (row.startsWith('|')) row = row.slice(1);
  if (row.endsWith('|') && !row.endsWith('\\|')) row = row.slice(0, -1);
  const cells = [];
  let cell = '';
  for (let i = 0; i < row.length; i++) {
    if (row[i] === '\\' && row[i + 1] === '|') {
      cell += '|';
      i++;
    } else if (row[i] === '|') {
      cells.push(cell.trim());
      cell = '';
    } else cell += row[i];
  }
  cells.push(cell.trim());
  return cells.slice(0, MAX_COLUMNS);
}

/** Block structure of `text`: [{t: 'p'|'h'|'code'|'hr'|'quote'|'list'|'table', ...}]. */
export function parse(text) {
  const lines = String(text ?? '').replace(/\r\n?/g, '\n').split('\n');
  return blocks(lines, 0);
}

function blocks(lines, depth) {
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (BLANK.test(line)) {
      i++;
      continue;
    }
    let m;
    if ((m = FENCE.exec(line))) {
      const fence = m[1];
      const body = [];
      i++;
      while (i < lines.length && !(lines[i].trim().startsWith(fence) && lines[i].trim().replace(/[`~]/g, '') === '')) {
        body.push(lines[i++]);
      }
      i++; // the closing fence (or the end of the text: an open fence runs to the end)
      out.push({ t: 'code', lang: m[2].slice(0, 40), text: body.join('\n') });
    } else if ((m = HEADING.exec(line))) {
      out.push({ t: 'h', level: m[1].length, inline: inline(headingText(line.slice(m[0].length))) });
      i++;
    } else if (RULE.test(line)) {
      out.push({ t: 'hr' });
      i++;
    } else if (QUOTE.test(line) && depth < MAX_DEPTH) {
      const body = [];
      while (i < lines.length && QUOTE.test(lines[i])) body.push(lines[i++].replace(QUOTE, ''));
      out.push({ t: 'quote', children: blocks(body, depth + 1) });
    } else if (ITEM.test(line) && depth < MAX_DEPTH) {
      i = list(lines, i, depth, out);
    } else if (line.includes('|') && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1]) && lines[i + 1].includes('-')) {
      const head = splitRow(line);
      const rows = [];
      i += 2;
      while (i < lines.length && lines[i].includes('|') && !BLANK.test(lines[i])) rows.push(splitRow(lines[i++]));
      out.push({ t: 'table', head: head.map(inline), rows: rows.map((r) => r.map(inline)) });
    } else {
      const body = [line.trim()];
      i++;
      while (i < lines.length && !BLANK.test(lines[i]) && (depth >= MAX_DEPTH || !startsBlock(lines[i]))) {
        body.push(lines[i++].trim());
      }
      out.push({ t: 'p', inline: inline(body.join('\n')) });
    }
  }
  return out;
}

/** One list from lines[start]; each item's lines (dedented) are parsed as blocks one level deeper. */
function list(lines, start, depth, out) {
  const first = ITEM.exec(lines[start]);
  const base = first[1].length;
  const ordered = /\d/.test(first[2]);
  const node = { t: 'list', ordered, start: ordered ? parseInt(first[2], 10) : 1, items: [] };
  let i = start;
  while (i < lines.length) {
    const m = ITEM.exec(lines[i]);
    if (!m || m[1].length !== base || /\d/.test(m[2]) !== ordered) break;
    const offset = m[0].length;
    const body = [lines[i].slice(offset)];
    i++;
    while (i < lines.length) {
      const line = lines[i];
      if (BLANK.test(line)) {
        // A blank line ends the item unless the item goes on, indented, after it.
        const next = lines[i + 1];
        if (next !== undefined && !BLANK.test(next) && indentOf(next) > base) {
          body.push('');
          i++;
          continue;
        }
        break;
      }
      const indent = indentOf(line);
      if (indent <= base && (ITEM.test(line) || startsBlock(line))) break;
      body.push(line.slice(Math.min(indent, offset)));
      i++;
    }
    node.items.push(blocks(body, depth + 1));
  }
  out.push(node);
  return i;
}

/**
 * Inline spans of one block's text: [{t: 'text'|'code'|'strong'|'em'|'del'|'a'|'br', ...}].
 * The last search for each closing mark is remembered, so a text full of unmatched marks stays
 * linear instead of searching to its end again from each one; links and URLs are bounded.
 */
export function inline(text) {
  return spans(String(text), 0);
}

const EMPHASIS = [['**', 'strong'], ['__', 'strong'], ['~~', 'del'], ['*', 'em'], ['_', 'em']];
const WORD = /[\p{L}\p{N}]/u;
const URL_END = /[\s<>"'`]/;
const MAX_URL = 2048;
const MAX_LABEL = 1000;

function spans(text, depth) {
  const out = [];
  let plain = '';
  const flush = () => {
    if (plain) out.push({ t: 'text', text: plain });
    plain = '';
  };
  const found = new Map(); // mark -> {from, at}: indexOf(mark, from) was at (-1: none)
  const find = (mark, from) => {
    const last = found.get(mark);
    if (last && from >= last.from && (last.at < 0 || from <= last.at)) return last.at;
    const at = text.indexOf(mark, from);
    found.set(mark, { from, at });
    return at;
  };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === '\\' && i + 1 < text.length && /[!-/:-@[-`{-~]/.test(text[i + 1])) {
      plain += text[i + 1];
      i += 2;
      continue;
    }
    if (c === '\n') {
      flush();
      out.push({ t: 'br' });
      i++;
      continue;
    }
    if (c === '`') {
      let n = 1;
      while (text[i + n] === '`') n++;
      const mark = '`'.repeat(n);
      const end = find(mark, i + n);
      if (end > 0) {
        flush();
        out.push({ t: 'code', text: text.slice(i + n, end).replace(/\n/g, ' ') });
        i = end + n;
      } else {
        plain += mark;
        i += n;
      }
      continue;
    }
    if ((c === '[' || (c === '!' && text[i + 1] === '[')) && depth < MAX_DEPTH) {
      const open = c === '!' ? i + 1 : i;
      const close = find('](', open + 1);
      const end = close > 0 ? find(')', close + 2) : -1;
      const label = close > 0 && close - open <= MAX_LABEL ? text.slice(open + 1, close) : '\n';
      if (end > 0 && end - close <= MAX_URL && !label.includes('\n') && !label.includes(']')) {
        const target = text.slice(close + 2, end).trim().split(/\s+/)[0] || '';
        const href = safeHref(target.replace(/^<|>$/g, ''));
        if (href) {
          flush();
          // An image is linked, never loaded: a picture's address can carry data out of the panel.
          const children = c === '!' ? [{ t: 'text', text: `image: ${label || href}` }] : spans(label, MAX_DEPTH);
          out.push({ t: 'a', href, children });
          i = end + 1;
          continue;
        }
      }
    }
    if (c === '<') {
      const end = find('>', i + 1);
      const href = end > 0 && end - i <= MAX_URL ? safeHref(text.slice(i + 1, end)) : '';
      if (href && !/\s/.test(text.slice(i + 1, end))) {
        flush();
        out.push({ t: 'a', href, children: [{ t: 'text', text: text.slice(i + 1, end) }] });
        i = end + 1;
        continue;
      }
    }
    if ((c === 'h' || c === 'H') && !WORD.test(text[i - 1] || ' ') && /^https?:\/\//i.test(text.slice(i, i + 8))) {
      let end = i;
      while (end < text.length && !URL_END.test(text[end])) end++;
      if (end - i > MAX_URL) {
        plain += text.slice(i, end); // too long to be a link a person would follow
        i = end;
        continue;
      }
      // Sentence punctuation after a URL is not part of it.
      while (end > i && '.,;:!?*_~'.includes(text[end - 1])) end--;
      let raw = text.slice(i, end);
      if (raw.endsWith(')') && !raw.includes('(')) raw = raw.slice(0, -1);
      const href = safeHref(raw);
      if (href) {
        flush();
        out.push({ t: 'a', href, children: [{ t: 'text', text: raw }] });
        i += raw.length;
        continue;
      }
    }
    const emphasis = depth < MAX_DEPTH && EMPHASIS.find(([mark]) => text.startsWith(mark, i));
    if (emphasis) {
      const [mark, t] = emphasis;
      const underscore = mark[0] === '_';
      const opens = !/\s/.test(text[i + mark.length] || ' ') && !(underscore && WORD.test(text[i - 1] || ' '));
      const end = opens ? find(mark, i + mark.length + 1) : -1;
      const closes = end > 0 && !/\s/.test(text[end - 1]) && !(underscore && WORD.test(text[end + mark.length] || ' '));
      if (closes) {
        flush();
        out.push({ t, children: spans(text.slice(i + mark.length, end), depth + 1) });
        i = end + mark.length;
        continue;
      }
      plain += mark;
      i += mark.length;
      continue;
    }
    plain += c;
    i++;
  }
  flush();
  return out;
}

const INLINE_TAGS = { strong: 'strong', em: 'em', del: 'del' };

function renderSpans(doc, parent, list) {
  for (const s of list) {
    if (s.t === 'text') parent.append(doc.createTextNode(s.text));
    else if (s.t === 'br') parent.append(doc.createElement('br'));
    else if (s.t === 'code') {
      const code = doc.createElement('code');
      code.textContent = s.text;
      parent.append(code);
    } else if (s.t === 'a') {
      const a = doc.createElement('a');
      a.href = s.href;
      a.title = s.href; // where it goes, whatever its text claims
      a.target = '_blank';
      a.rel = 'noopener noreferrer';
      renderSpans(doc, a, s.children);
      parent.append(a);
    } else if (INLINE_TAGS[s.t]) {
      const e = doc.createElement(INLINE_TAGS[s.t]);
      renderSpans(doc, e, s.children);
      parent.append(e);
    }
  }
}

function renderBlocks(doc, parent, list) {
  for (const b of list) {
    let e;
    if (b.t === 'p' || b.t === 'h') {
      e = doc.createElement(b.t === 'p' ? 'p' : `h${b.level}`);
      renderSpans(doc, e, b.inline);
    } else if (b.t === 'code') {
      e = doc.createElement('pre');
      const code = doc.createElement('code');
      code.textContent = b.text;
      if (b.lang) code.dataset.lang = b.lang;
      e.append(code);
    } else if (b.t === 'hr') {
      e = doc.createElement('hr');
    } else if (b.t === 'quote') {
      e = doc.createElement('blockquote');
      renderBlocks(doc, e, b.children);
    } else if (b.t === 'list') {
      e = doc.createElement(b.ordered ? 'ol' : 'ul');
      if (b.ordered && b.start !== 1) e.start = b.start;
      for (const item of b.items) {
        const li = doc.createElement('li');
        // An item's first paragraph is its text, not a paragraph with margins.
        const [first, ...rest] = item;
        if (first && first.t === 'p') renderSpans(doc, li, first.inline);
        renderBlocks(doc, li, first && first.t === 'p' ? rest : item);
        e.append(li);
      }
    } else if (b.t === 'table') {
      e = doc.createElement('table');
      const row = (cells, tag) => {
        const tr = doc.createElement('tr');
        for (const cell of cells) {
          const td = doc.createElement(tag);
          renderSpans(doc, td, cell);
          tr.append(td);
        }
        return tr;
      };
      const thead = doc.createElement('thead');
      thead.append(row(b.head, 'th'));
      const tbody = doc.createElement('tbody');
      for (const r of b.rows) tbody.append(row(r, 'td'));
      e.append(thead, tbody);
    }
    if (e) parent.append(e);
  }
}

/** `text` as a DocumentFragment of the elements above and text nodes, nothing else. */
export function render(text, doc = document) {
  const fragment = doc.createDocumentFragment();
  renderBlocks(doc, fragment, parse(text));
  return fragment;
}
