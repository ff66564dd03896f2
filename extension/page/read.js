// The third page script (page/elements.js says how they share their namespace): what the agent reads of
// the page. The accessibility-style outline of browser_snapshot, the HTML of browser_read_dom and the text
// browser_wait_for looks for, each with the values of secret fields taken out.
(() => {
  const ns = globalThis.__openabPage;
  if (ns.read) return;
  const {
    INTERACTIVE, MAX_NAME, idFor, elementOf, squash, q, visible, editableHost, sensitiveKind, personTyped, redacts, labelName,
    roleOf, nameOf, valueOf, flags, shortUrl, sameSite,
  } = ns.elements;

  const SKIP = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'HEAD', 'META', 'LINK', 'svg', 'SVG']);
  const CONTAINERS = {
    FORM: 'form', NAV: 'navigation', MAIN: 'main', HEADER: 'banner', FOOTER: 'contentinfo', ASIDE: 'complementary',
    UL: 'list', OL: 'list', DIALOG: 'dialog', TABLE: 'table', FIELDSET: 'group',
  };
  const MAX_TEXT = 2000;
  // A text line is a paragraph-like element: one with block children is split along them.
  const BLOCKS = new Set(['DIV', 'P', 'LI', 'UL', 'OL', 'DL', 'DT', 'DD', 'TABLE', 'TBODY', 'THEAD', 'TR', 'TD', 'TH',
    'SECTION', 'ARTICLE', 'HEADER', 'FOOTER', 'NAV', 'MAIN', 'ASIDE', 'FIGURE', 'FORM', 'FIELDSET', 'PRE',
    'BLOCKQUOTE', 'H1', 'H2', 'H3', 'H4', 'H5', 'H6', 'DETAILS', 'DIALOG', 'HR']);
  // Phrasing elements: text in them flows on within its sentence.
  const INLINE = new Set(['A', 'ABBR', 'B', 'BDI', 'BDO', 'BR', 'CITE', 'CODE', 'DATA', 'DEL', 'DFN', 'EM', 'FONT', 'I',
    'INS', 'KBD', 'MARK', 'Q', 'S', 'SAMP', 'SMALL', 'SPAN', 'STRONG', 'SUB', 'SUP', 'TIME', 'U', 'VAR', 'WBR']);
  // Where a link's ref goes in a line of text: the service worker puts the tab-wide ref there. Page text never
  // carries the marker (inlineText strips it), so a page cannot forge one.
  const REF_MARK = '\u0001';
  // Around a same-site address of a link inside a sentence: the service worker shows it only when asked
  // (interactive_only), because on a page of prose the addresses cost more than the agent reads in them.
  const ADDRESS_MARK = '\u0002';

  // A line that mixes text and links holds at most MAX_TEXT; one with more links than MAX_INLINE_LINKS reads as
  // one line per link instead.
  const MAX_INLINE_LINKS = 60;
  const MAX_GRID_COLS = 60;
  // What one outline holds at most: `plain`, a text line of the page's own words; `cell`, a table's cell; `rows`, a
  // table's rows (the rest is said to be there); `heading`, a heading's words; `options`, a list's. A text or a
  // cell cut says so where it is cut, and by which ref it reads whole. `whole`: browser_find, which looks at every
  // word, and a region of one element, asked for because its line was cut.
  const LIMITS = {
    outline: { plain: 10_000, cell: 8000, rows: 2000, heading: MAX_NAME, options: 30 },
    whole: { plain: 1_000_000, cell: 1_000_000, rows: 100_000, heading: 10_000, options: 5000 },
  };
  // What makes a table that does not say it holds data (no caption, head or header cell of its own) one of layout:
  // no grid of cells then, its parts read as any other.
  const NOT_A_GRID = 'table,h1,h2,h3,h4,h5,h6,iframe,frame,form,fieldset,dialog,ul,ol,dl,blockquote,pre';
  const WRAPPERS = /^(presentation|none|generic)\b/;
  const LANDMARKS = new Set(['navigation', 'main', 'banner', 'contentinfo', 'complementary', 'search', 'form',
    'dialog', 'region']);
  const clean = (s) => String(s || '').replaceAll(REF_MARK, '').replaceAll(ADDRESS_MARK, '');
  // Inside a cell, where no "text:" label can say a line is the page's: the page cannot write a ref of its own.
  const defang = (s) => s.replaceAll('[ref=', '[ref =').replaceAll('](', '] (');

  /**
   * A line of the page's own text: `c` marks it as content, which reads without the "- " of the outline's lines.
   * Text that begins like one of those ("- button …"), like a heading ("# …") or like a row of a table ("| …") is
   * labelled, so a page cannot pass its words off as a control, a heading or a cell.
   */
  const textEntry = (d, text) => ({ d, c: true, t: /^[-#|]/.test(text) ? `text: ${text}` : text });

  /** The name of a container (a form, a landmark, a group): its aria label, legend or caption, never `name`. */
  function containerName(el) {
    const label = labelName(el);
    if (label) return label;
    if (el.tagName === 'FIELDSET') return el.querySelector(':scope > legend')?.innerText || '';
    if (el.tagName === 'TABLE') return el.caption?.innerText || '';
    return el.title || '';
  }

  /**
   * Accessibility-style outline. Entries carry a local element id where an action can target. `whole`: nothing cut
   * (LIMITS); `root`: the local id of the one element to read, alone and whole.
   */
  function snapshot({ whole = false, root = 0 } = {}) {
    const entries = [];
    const most = LIMITS[whole || root ? 'whole' : 'outline'];
    /**
     * `text` within `max` characters, or (past it, or `cut` already) cut with a mark that says how much is shown
     * and gives the ref that reads `el` whole: never a silent cut.
     */
    const fitted = (text, max, el, refs, cut = false) => {
      const t = text.replace(/\s+/g, ' ').trim();
      if (t.length <= max && !cut) return t;
      const shown = t.slice(0, max);
      const local = idFor(el);
      refs.push(local);
      const total = (el.textContent || '').replace(/\s+/g, ' ').trim().length;
      return `${shown}… [cut at ${shown.length} of ~${Math.max(total, t.length)} characters: ` +
        `browser_snapshot region=${REF_MARK}${local}${REF_MARK} reads it whole]`;
    };
    /** A text line of `el`'s own words, cut as `fitted` says. */
    const plainEntry = (depth, el, text) => {
      const refs = [];
      return { ...textEntry(depth, fitted(clean(text), most.plain, el, refs)), ...(refs.length && { r: refs }) };
    };
    // Every ancestor of something the outline must show on its own line, found in one pass:
    // asking each element for its descendants instead is quadratic on big pages. `controlHolders`: the
    // ancestors of something an action targets, alone.
    const holders = new Set();
    const controlHolders = new Set();
    // Elements with no role that the page makes clickable by its looks alone (page/pointers.js).
    const pointers = new Set();
    const clickable = (el) => el.matches(INTERACTIVE) || editableHost(el) === el || pointers.has(el);
    const collect = (root) => {
      if (root.body || root.host) ns.pointers.seek(root, pointers);
      const mark = (e, set) => {
        for (let p = e.parentElement; p && !set.has(p); p = p.parentElement) set.add(p);
      };
      for (const e of root.querySelectorAll(`${INTERACTIVE},h1,h2,h3,h4,h5,h6,img[alt],table`)) {
        mark(e, holders);
        if (e.matches(INTERACTIVE)) mark(e, controlHolders);
      }
      for (const e of pointers) {
        mark(e, holders);
        mark(e, controlHolders);
      }
    };
    collect(document);

    /** A link that reads well inside a sentence: words of its own, no image and no control inside. */
    const plainLink = (a) => a.tagName === 'A' && a.getAttribute('href') && !a.querySelector(`${INTERACTIVE},img,svg`);

    /** The line a control reads as: role, name, flags, value; `inCell` without the "- " and with its ref marked. */
    function controlLine(el) {
      const sensitive = sensitiveKind(el) || (personTyped(el) ? 'typed by the person' : null);
      // The role as the guard's card names the element too (page/agent.js): one name for it everywhere.
      const role = roleOf(el);
      let tail = flags(el);
      if (sensitive === 'typed by the person') tail += ` [${sensitive}]`;
      // A same-site link as its path: the snapshot names the page's URL once, and browser_navigate takes paths.
      if (el.tagName === 'A' && el.getAttribute('href')) tail += ` [url=${shortUrl(el)}]`;
      if (el.tagName === 'SELECT') {
        const opts = Array.from(el.options).slice(0, most.options).map((o) => q(squash(o.label || o.text, 60)));
        const more = el.options.length > most.options ? `, … (${el.options.length} in all)` : '';
        tail += ` options: ${opts.join(', ')}${more}`;
      }
      const value = valueOf(el, sensitive);
      return { role, tail: (tail ? ` ${tail.trim()}` : '') + (value !== null ? `: ${value}` : '') };
    }

    /**
     * Words and links in the order they read, gathered across sibling nodes: `parts` are strings and links.
     * `add` takes a phrasing element whole or not at all (false: something in it needs a line of its own).
     */
    const newRun = () => ({ parts: [] });
    function addInline(run, node) {
      const mark = run.parts.length;
      const go = (n) => {
        for (const child of n.childNodes) {
          if (child.nodeType === 3) {
            run.parts.push(clean(child.textContent));
            continue;
          }
          if (child.nodeType !== 1 || SKIP.has(child.tagName)) continue;
          if (child.tagName === 'BR') {
            run.parts.push(' ');
            continue;
          }
          if (!visible(child)) continue;
          if (plainLink(child)) {
            run.parts.push({ link: child });
            continue;
          }
          if (!INLINE.has(child.tagName) || child.shadowRoot || clickable(child)) return false;
          if (go(child) === false) return false;
        }
        return true;
      };
      if (go(node) !== false) return true;
      run.parts.length = mark;
      return false;
    }

    /** A run's words as one line, each plain link in place as `[its words](ref address)`; null if too long. */
    function runLine(run) {
      let text = '';
      const refs = [];
      for (const p of run.parts) {
        if (typeof p === 'string') {
          text += p;
          continue;
        }
        const local = idFor(p.link);
        refs.push(local);
        const tab = /^_blank$/i.test(p.link.getAttribute('target') || '') ? ', new tab' : '';
        const where = clean(shortUrl(p.link));
        const address = sameSite(p.link) ? `${ADDRESS_MARK} ${where}${ADDRESS_MARK}` : ` ${where}`;
        text += ` [${clean(nameOf(p.link)).replace(/[[\]]/g, '')}](${REF_MARK}${local}${REF_MARK}${address}${tab}) `;
      }
      text = text.replace(/\s+/g, ' ').replace(/ ([.,;:!?)])/g, '$1').trim();
      return { text, refs };
    }

    /** Puts a run's lines in the outline: one line of text with its links in place, or each part on its own. */
    function flushRun(run, depth, controlsOnly) {
      const parts = run.parts;
      run.parts = [];
      const links = parts.filter((p) => typeof p !== 'string');
      const words = parts.filter((p) => typeof p === 'string').join('');
      const prose = /\w/.test(words);
      if (!controlsOnly && prose && links.length && links.length <= MAX_INLINE_LINKS) {
        const line = runLine({ parts });
        if (line.text.length <= MAX_TEXT) {
          entries.push({ ...textEntry(depth, line.text), r: line.refs });
          return;
        }
      }
      // Only links, or too many for one line: the words between them each on a line, each link on its own.
      let between = '';
      const flushWords = () => {
        if (!controlsOnly && /\w/.test(between)) entries.push(textEntry(depth, squash(between, most.plain)));
        between = '';
      };
      for (const p of parts) {
        if (typeof p === 'string') {
          between += p;
          continue;
        }
        flushWords();
        pushControl(p.link, depth);
      }
      flushWords();
    }

    function pushControl(el, depth) {
      const { role, tail } = controlLine(el);
      const entry = { d: depth, t: `${role} ${q(nameOf(el))}`, l: idFor(el), tail };
      entries.push(entry);
      return entry;
    }

    /**
     * The text of one cell, its controls in place with their refs: `[words](ref)` for a link, else its line. What
     * the cell holds reads in place whatever it is: a list's items apart by `;`, a heading's or code's words, a
     * table inside as `(table: a, b; c, d)`. A long cell is cut where `fitted` says, with its own ref to read it.
     */
    function cellOf(cell, refs) {
      let out = '';
      let cut = false;
      const room = () => !(cut ||= out.length > most.cell);
      const go = (n, quiet = false) => {
        for (const child of n.childNodes) {
          if (!room()) return;
          if (child.nodeType === 3) {
            const words = quiet ? '' : defang(clean(child.textContent)).replace(/\s+/g, ' ');
            // Cut inside the page's words only, never inside a control's or a link's marks.
            const left = Math.max(most.cell - out.length, 0);
            out += words.slice(0, left);
            if (words.length > left) return void (cut = true);
            continue;
          }
          if (child.nodeType !== 1 || SKIP.has(child.tagName) || !visible(child)) continue;
          if (child.tagName === 'BR') {
            out += ' ';
            continue;
          }
          if (child.tagName === 'IMG') {
            if (child.alt && !quiet) out += ` ${defang(clean(child.alt))} `;
            continue;
          }
          if (plainLink(child) || clickable(child)) {
            const local = idFor(child);
            refs.push(local);
            const name = defang(clean(nameOf(child)).replace(/[[\]]/g, ''));
            if (child.tagName === 'A' && child.getAttribute('href')) {
              const where = clean(shortUrl(child));
              const address = sameSite(child) ? `${ADDRESS_MARK} ${where}${ADDRESS_MARK}` : ` ${where}`;
              out += ` [${name}](${REF_MARK}${local}${REF_MARK}${address}) `;
            } else {
              const { role, tail } = controlLine(child);
              out += ` ${role} ${q(name)} [ref=${REF_MARK}${local}${REF_MARK}]${defang(clean(tail))} `;
            }
            continue;
          }
          if (child.tagName === 'TABLE') {
            out += ' (table: ';
            Array.from(child.rows).filter(visible).forEach((tr, i) => {
              if (i) out += '; ';
              Array.from(tr.cells).filter(visible).forEach((c, j) => {
                if (j) out += ', ';
                go(c, quiet);
              });
            });
            out += ') ';
            continue;
          }
          if (child.tagName === 'LI' && child.previousElementSibling) out += ';';
          // A label's words name its control, which is in the cell: said once, on the control.
          const named = child.tagName === 'LABEL' && child.control && cell.contains(child.control);
          out += BLOCKS.has(child.tagName) ? ' ' : '';
          go(child.shadowRoot || child, quiet || named);
          out += BLOCKS.has(child.tagName) ? ' ' : '';
        }
      };
      go(cell);
      return fitted(out.replace(/\s+([;,)])/g, '$1'), Infinity, cell, refs, cut).replaceAll('|', '\\|');
    }

    /** Whether a table holds data in rows and columns (a grid reads it best) rather than a page's layout. */
    function isGrid(table) {
      const role = (table.getAttribute('role') || '').toLowerCase();
      if (role === 'presentation' || role === 'none' || !table.rows.length) return false;
      // A table that says it holds data (its role, a caption, a head, a header cell of its own) is a grid whatever
      // its cells hold: a CMS's listing puts lists, forms, headings and tables in them. Firefox's guess goes so too.
      const rows = Array.from(table.rows);
      if (/^(table|grid|treegrid)$/.test(role) || table.caption || table.tHead ||
        rows.some((r) => Array.from(r.cells).some((c) => c.tagName === 'TH'))) return true;
      if (table.querySelector(NOT_A_GRID)) return false;
      return rows.some((r) => r.cells.length > 1);
    }

    /**
     * A table as a grid: one line per row, `| a | b |`, every cell in its column (an empty one stays, a cell
     * that spans columns or rows leaves the places it covers empty), a header row followed by `|-|-|`, and
     * each control in a cell with its ref. The table's line says its size.
     */
    function pushGrid(table, depth) {
      const rows = Array.from(table.rows).filter((r) => visible(r));
      const name = containerName(table);
      const line = { d: depth, t: '', k: 'table', x: idFor(table) };
      entries.push(line);
      const covered = []; // rows still covered in each column by a cell above
      let width = 0;
      let header = -1;
      const shown = rows.slice(0, most.rows);
      const made = shown.map((tr, i) => {
        const cells = [];
        const refs = [];
        let col = 0;
        const skipCovered = () => {
          while (covered[col] > 0) {
            covered[col]--;
            cells[col++] = '';
          }
        };
        for (const cell of tr.cells) {
          if (col >= MAX_GRID_COLS) break;
          skipCovered();
          if (!visible(cell)) continue;
          cells[col] = cellOf(cell, refs);
          const span = Math.min(Math.max(cell.colSpan || 1, 1), MAX_GRID_COLS - col);
          const down = Math.min(Math.max(cell.rowSpan || 1, 1), most.rows);
          for (let k = 0; k < span; k++) {
            if (k) cells[col + k] = '';
            if (down > 1) covered[col + k] = down - 1;
          }
          col += span;
        }
        for (; col < covered.length; col++) {
          if (covered[col] > 0) covered[col]--;
          cells[col] = '';
        }
        width = Math.max(width, cells.length);
        const head = tr.parentElement?.tagName === 'THEAD' ||
          (i === 0 && tr.cells.length > 0 && Array.from(tr.cells).every((c) => c.tagName === 'TH'));
        if (head && header === i - 1) header = i;
        return { cells, refs };
      });
      const body = made.length - (header + 1);
      // A caption that is a link (an admin's app list: "Shop" leads to the app) keeps its ref, as in a heading.
      let title = name ? ` ${q(squash(name, MAX_NAME))}` : '';
      const caption = table.caption;
      const run = newRun();
      if (caption && !labelName(table) && visible(caption) && addInline(run, caption) &&
          run.parts.some((p) => typeof p !== 'string')) {
        const captioned = runLine(run);
        title = ` ${captioned.text}`;
        line.r = captioned.refs;
      }
      line.t = `table${title} (${rows.length - (header + 1)} rows, ${width} columns):`;
      made.forEach((row, i) => {
        while (row.cells.length < width) row.cells.push('');
        const cells = Array.from(row.cells, (c) => c || '');
        entries.push({ d: depth + 1, c: true, t: `| ${cells.join(' | ')} |`.replace(/ {2}\|/g, ' |'), r: row.refs, g: i <= header ? 'head' : 'row' });
        if (i === header) entries.push({ d: depth + 1, c: true, t: `|${'-|'.repeat(width)}`, g: 'head' });
      });
      if (rows.length > shown.length) {
        entries.push({ d: depth + 1, t: `(rows 1-${body} of ${rows.length - (header + 1)} shown; browser_find finds a row by its words)` });
      }
    }

    const walk = (node, depth, controlsOnly = false) => {
      const run = newRun();
      const flush = () => {
        if (run.parts.length) flushRun(run, depth, controlsOnly);
      };
      for (const child of node.childNodes) {
        if (child.nodeType === 3) {
          if (!controlsOnly) run.parts.push(clean(child.textContent));
          continue;
        }
        if (child.nodeType !== 1) continue;
        const el = child;
        if (SKIP.has(el.tagName)) continue;
        if (el.shadowRoot && visible(el)) {
          flush();
          collect(el.shadowRoot);
          walk(el.shadowRoot, depth, controlsOnly);
        }
        if (!visible(el)) continue;
        if (el.tagName === 'BR') {
          run.parts.push(' ');
          continue;
        }
        if (plainLink(el)) {
          run.parts.push({ link: el });
          continue;
        }
        if (!controlsOnly && INLINE.has(el.tagName) && !el.shadowRoot && !clickable(el) && addInline(run, el)) continue;
        flush();
        element(el, depth, controlsOnly);
      }
      flush();
    };

    /** One element that does not flow on in a run of text: a control, a heading, an image, a container, a block. */
    const element = (el, depth, controlsOnly) => {
      if (clickable(el)) {
        // A role-less clickable that holds more than a name (a card, a row) reads as a container with its ref.
        const generic = roleOf(el) === 'generic' && !editableHost(el);
        const long = generic && (controlHolders.has(el) || (el.innerText || '').length > MAX_NAME);
        if (long) {
          entries.push({ d: depth, t: 'generic', l: idFor(el), tail: ':' });
          walk(el, depth + 1, controlsOnly);
          return;
        }
        pushControl(el, depth);
        // Controls inside a control (a link in a summary, a button in a clickable row) keep their own refs.
        if (controlHolders.has(el) && !/^(SELECT|TEXTAREA)$/.test(el.tagName)) walk(el, depth + 1, true);
        return;
      }
      if (controlsOnly) {
        walk(el, depth, true);
        return;
      }
      const heading = /^H([1-6])$/.exec(el.tagName);
      if (heading) {
        // Markdown's spelling: a heading's words and level in a token or two, where `heading "…" [level=2]` took
        // eight. A link inside keeps its ref, in place: `## [Show counts](e7)`.
        const level = Number(heading[1]);
        const run = newRun();
        const hashes = '#'.repeat(level);
        if (!el.shadowRoot && addInline(run, el) && run.parts.some((p) => typeof p !== 'string')) {
          const line = runLine(run);
          entries.push({ d: depth, c: true, h: level, x: idFor(el), t: `${hashes} ${line.text}`, r: line.refs });
          return;
        }
        entries.push({ d: depth, c: true, h: level, x: idFor(el), t: `${hashes} ${squash(el.innerText, most.heading)}` });
        if (controlHolders.has(el)) walk(el, depth + 1, true);
        return;
      }
      if (el.tagName === 'IMG') {
        if (el.alt) entries.push({ d: depth, t: `img ${q(squash(el.alt, MAX_NAME))}` });
        return;
      }
      if (el.tagName === 'LABEL' && el.control) {
        // The control's own line carries the label as its name; a text line would repeat it.
        walk(el, depth, true);
        return;
      }
      if (el.tagName === 'LEGEND' && el.parentElement?.tagName === 'FIELDSET' && !holders.has(el)) {
        return; // the group's line carries it as its name
      }
      if (el.tagName === 'TABLE' && isGrid(el)) {
        pushGrid(el, depth);
        return;
      }
      const own = (el.getAttribute('role') || '').trim().toLowerCase();
      // An editor's wrappers say they are nothing (presentation, none): their content reads in their place.
      const container = WRAPPERS.test(own) ? '' : own || CONTAINERS[el.tagName];
      if (container) {
        const label = containerName(el);
        const role = container.split(/\s+/)[0];
        const line = { d: depth, t: `${role}${label ? ` ${q(squash(label, MAX_NAME))}` : ''}:` };
        if (LANDMARKS.has(role) || role === 'table') Object.assign(line, { k: role, x: idFor(el) });
        entries.push(line);
        if (!el.children.length && !el.shadowRoot) {
          // Text alone (a status, an alert) reads on its container's line.
          const refs = [];
          const text = fitted(clean(el.innerText), most.plain, el, refs);
          if (text) Object.assign(line, { t: `${line.t} ${text}`, ...(refs.length && { r: refs }) });
          return;
        }
        walk(el, depth + 1);
        // A container with nothing to show and no name tells the agent nothing.
        if (!label && entries[entries.length - 1] === line) entries.pop();
        return;
      }
      if (el.tagName === 'TR' && !holders.has(el)) {
        // A row of a layout table reads as one line; cell by cell it would lose which values belong together.
        const refs = [];
        const cells = Array.from(el.cells, (c) => fitted(clean(c.innerText), most.cell, c, refs));
        if (cells.some(Boolean)) entries.push({ d: depth, t: `row: ${cells.join(' | ')}`, ...(refs.length && { r: refs }) });
        return;
      }
      const hasBlocks = Array.from(el.children).some((c) => BLOCKS.has(c.tagName));
      if (!hasBlocks && !holders.has(el) && !el.shadowRoot) {
        const text = plainEntry(depth, el, el.innerText);
        if (text.t) entries.push(text);
        return;
      }
      walk(el, depth);
    };
    if (root) {
      const el = elementOf(root);
      if (!el || !el.isConnected) return null;
      const home = el.getRootNode();
      if (home.host) collect(home);
      element(el, 0, false);
    } else if (document.body) walk(document.body, 0);
    return { url: location.href, title: document.title, entries };
  }

  // <meta name="csrf-token" content="..."> and the like.
  const SECRET_META = /csrf|xsrf|token|secret|nonce|api.?key/i;
  const REDACT_SCAN = 'input,textarea,select,[contenteditable],meta';

  function redactedHtml(el) {
    const clone = el.cloneNode(true);
    // The clone has the same structure, so the n-th match in each is the same element.
    const live = [el, ...el.querySelectorAll(REDACT_SCAN)];
    const copies = [clone, ...clone.querySelectorAll(REDACT_SCAN)];
    live.forEach((src, i) => {
      const dst = copies[i];
      if (!dst || !(src instanceof Element)) return;
      if (src.tagName === 'META') {
        const key = `${src.getAttribute('name') || ''} ${src.getAttribute('property') || ''} ${src.getAttribute('http-equiv') || ''}`;
        if (SECRET_META.test(key) && dst.hasAttribute('content')) dst.setAttribute('content', '[redacted]');
        return;
      }
      const hidden = src.tagName === 'INPUT' && (src.getAttribute('type') || '').toLowerCase() === 'hidden';
      if (!hidden && !redacts(src)) return;
      if (/^(INPUT|TEXTAREA|SELECT)$/.test(src.tagName)) {
        if (dst.hasAttribute('value')) dst.setAttribute('value', '[redacted]');
        if (src.tagName === 'TEXTAREA') dst.textContent = '[redacted]';
      } else if (src.isContentEditable && (i === 0 || editableHost(src) === src)) {
        // The region's host, or the part of a secret region the read started at.
        dst.textContent = '[redacted]';
      }
    });
    return clone.outerHTML;
  }

  /** The page's text with the text of secret editable regions taken out. */
  function readableText() {
    let t = document.body ? document.body.innerText : '';
    for (const el of document.querySelectorAll('[contenteditable]')) {
      if (editableHost(el) !== el || !redacts(el)) continue;
      const own = el.innerText;
      if (own && own.trim()) t = t.split(own).join('[redacted]');
    }
    return t;
  }

  ns.read = { snapshot, redactedHtml, readableText };
})();
