// The second page script (page/elements.js says how the three share their namespace): what the agent reads of
// the page. The accessibility-style outline of browser_snapshot, the HTML of browser_read_dom and the text
// browser_wait_for looks for, each with the values of secret fields taken out.
(() => {
  const ns = globalThis.__openabPage;
  if (ns.read) return;
  const {
    INTERACTIVE, MAX_NAME, idFor, squash, q, visible, editableHost, sensitiveKind, personTyped, redacts, labelText,
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

  /**
   * A paragraph-like element with links inside its sentences, as one line of text that keeps them in place:
   * "See [our guide](… /guide.html) for schedules": its ref, then its address, marked when the link stays on
   * this site (another site's is always shown: that a link leaves the site matters). `refs` are the links' local
   * ids, in order. Null when the element holds anything that needs its own line (a control, a block, an image, a
   * shadow root), or when it is only links (each then reads best on its own line).
   */
  function inlineText(el) {
    const refs = [];
    let out = '';
    let prose = false;
    const clean = (s) => String(s || '').replaceAll(REF_MARK, '').replaceAll(ADDRESS_MARK, '');
    const add = (node) => {
      for (const child of node.childNodes) {
        if (child.nodeType === 3) {
          const t = clean(child.textContent);
          if (t.trim()) prose = true;
          out += t;
          continue;
        }
        if (child.nodeType !== 1 || SKIP.has(child.tagName)) continue;
        if (!INLINE.has(child.tagName) || child.shadowRoot) return false;
        if (child.tagName === 'BR') {
          out += ' ';
          continue;
        }
        if (!visible(child)) continue;
        if (child.tagName === 'A' && child.getAttribute('href')) {
          if (child.querySelector(`${INTERACTIVE},img`)) return false;
          const local = idFor(child);
          refs.push(local);
          const tab = /^_blank$/i.test(child.getAttribute('target') || '') ? ', new tab' : '';
          const where = clean(shortUrl(child));
          const address = sameSite(child) ? `${ADDRESS_MARK} ${where}${ADDRESS_MARK}` : ` ${where}`;
          out += ` [${clean(nameOf(child)).replace(/[[\]]/g, '')}](${REF_MARK}${local}${REF_MARK}${address}${tab}) `;
          continue;
        }
        if (child.matches(INTERACTIVE) || editableHost(child) === child) return false;
        if (add(child) === false) return false;
      }
      return true;
    };
    if (add(el) === false || !prose || !refs.length) return null;
    const text = out.replace(/\s+/g, ' ').replace(/ ([.,;:!?)])/g, '$1').trim();
    return text.length > MAX_TEXT ? null : { text, refs };
  }

  /**
   * A line of the page's own text: `c` marks it as content, which reads without the "- " of the outline's lines.
   * Text that begins like one of those ("- button …") or like a heading ("# …") is labelled, so a page cannot
   * pass its words off as a control or a heading.
   */
  const textEntry = (d, text) => ({ d, c: true, t: /^[-#]/.test(text) ? `text: ${text}` : text });

  /** Accessibility-style outline. Entries carry a local element id where an action can target. */
  function snapshot() {
    const entries = [];
    // Every ancestor of something the outline must show on its own line, found in one pass:
    // asking each element for its descendants instead is quadratic on big pages.
    const holders = new Set();
    const collect = (root) => {
      for (const e of root.querySelectorAll(`${INTERACTIVE},h1,h2,h3,h4,h5,h6,img[alt]`)) {
        for (let p = e.parentElement; p && !holders.has(p); p = p.parentElement) holders.add(p);
      }
    };
    collect(document);
    // The last text line made of a phrasing element, and whose children it was among.
    let flowing = null;
    let flowingIn = null;
    const walk = (node, depth) => {
      for (const el of node.children) {
        if (SKIP.has(el.tagName)) continue;
        if (el.shadowRoot && visible(el)) {
          collect(el.shadowRoot);
          walk(el.shadowRoot, depth);
        }
        if (!visible(el)) continue;
        const interactive = el.matches(INTERACTIVE) || editableHost(el) === el;
        if (interactive && !(el.tagName === 'A' && !el.getAttribute('href'))) {
          const sensitive = sensitiveKind(el) || (personTyped(el) ? 'typed by the person' : null);
          const role = roleOf(el);
          let tail = flags(el);
          if (sensitive === 'typed by the person') tail += ` [${sensitive}]`;
          // A same-site link as its path: the snapshot names the page's URL once, and browser_navigate takes paths.
          if (el.tagName === 'A') tail += ` [url=${shortUrl(el)}]`;
          if (el.tagName === 'SELECT') {
            const opts = Array.from(el.options).slice(0, 30).map((o) => q(squash(o.label || o.text, 60)));
            tail += ` options: ${opts.join(', ')}`;
          }
          const value = valueOf(el, sensitive);
          entries.push({
            d: depth, t: `${role} ${q(nameOf(el))}`, l: idFor(el),
            tail: (tail ? ` ${tail.trim()}` : '') + (value !== null ? `: ${value}` : ''),
          });
          continue;
        }
        const heading = /^H([1-6])$/.exec(el.tagName);
        if (heading) {
          // Markdown's spelling: a heading's words and level in a token or two, where `heading "…" [level=2]` took eight.
          entries.push({ d: depth, c: true, h: Number(heading[1]), t: `${'#'.repeat(Number(heading[1]))} ${squash(el.innerText, MAX_NAME)}` });
          continue;
        }
        if (el.tagName === 'IMG') {
          if (el.alt) entries.push({ d: depth, t: `img ${q(squash(el.alt, MAX_NAME))}` });
          continue;
        }
        if (el.tagName === 'LABEL' && el.control) {
          // The control's own line carries the label as its name; a text line would repeat it.
          walk(el, depth);
          continue;
        }
        if (el.tagName === 'LEGEND' && el.parentElement?.tagName === 'FIELDSET' && !holders.has(el)) {
          continue; // the group's line carries it as its name
        }
        const container = el.getAttribute('role') || CONTAINERS[el.tagName];
        if (container) {
          const legend = el.tagName === 'FIELDSET' ? el.querySelector(':scope > legend') : null;
          const label = labelText(el) || el.getAttribute('name') || (legend ? legend.innerText : '');
          const line = { d: depth, t: `${container}${label ? ` ${q(squash(label, MAX_NAME))}` : ''}:` };
          entries.push(line);
          if (!el.children.length && !el.shadowRoot) {
            // Text alone (a status, an alert) reads on its container's line.
            const text = squash(el.innerText, MAX_TEXT);
            if (text) line.t += ` ${text}`;
            continue;
          }
          // Text directly inside, beside elements, would otherwise be lost.
          const own = Array.from(el.childNodes).filter((n) => n.nodeType === 3).map((n) => n.textContent).join(' ');
          if (own.trim()) entries.push(textEntry(depth + 1, squash(own, MAX_TEXT)));
          walk(el, depth + 1);
          // A container with nothing to show and no name tells the agent nothing.
          if (!label && entries[entries.length - 1] === line) entries.pop();
          continue;
        }
        if (el.tagName === 'TR' && !holders.has(el)) {
          // A table row reads as one line; cell by cell it would lose which values belong together.
          const cells = Array.from(el.cells, (c) => squash(c.innerText, MAX_NAME));
          if (cells.some(Boolean)) entries.push({ d: depth, t: `row: ${cells.join(' | ')}` });
          continue;
        }
        const hasBlocks = Array.from(el.children).some((c) => BLOCKS.has(c.tagName));
        if (!hasBlocks && !holders.has(el) && !el.shadowRoot) {
          const text = squash(el.innerText, MAX_TEXT);
          if (!text) continue;
          const last = entries[entries.length - 1];
          if (INLINE.has(el.tagName) && last && last === flowing && flowingIn === node && last.t.length + text.length < MAX_TEXT) {
            // Phrasing siblings (a task's name, its project, its date) read on as one line, as on the page.
            last.t += ` ${text}`;
          } else {
            entries.push(textEntry(depth, text));
            flowing = INLINE.has(el.tagName) ? entries[entries.length - 1] : null;
            flowingIn = node;
          }
          continue;
        }
        if (!hasBlocks && !el.shadowRoot) {
          // Links inside a sentence stay in it, so the text reads as written.
          const line = inlineText(el);
          if (line) {
            entries.push({ ...textEntry(depth, line.text), r: line.refs });
            continue;
          }
        }
        // Text directly inside a mixed container would otherwise be lost.
        const own = Array.from(el.childNodes).filter((n) => n.nodeType === 3).map((n) => n.textContent).join(' ');
        if (own.trim()) entries.push(textEntry(depth, squash(own, MAX_TEXT)));
        walk(el, depth);
      }
    };
    if (document.body) walk(document.body, 0);
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
