// Injected into each frame of an agent tab, in the extension's isolated world: it shares the DOM
// with the page but none of the page's JavaScript. Classic script, idempotent: a second
// injection into the same document keeps the first instance and its element ids.
(() => {
  if (globalThis.__openab) return;

  const INTERACTIVE = [
    'a[href]', 'button', 'input:not([type=hidden])', 'select', 'textarea', 'summary', 'iframe', 'frame',
    '[contenteditable=""]', '[contenteditable=true]', '[contenteditable=plaintext-only]', '[role=button]', '[role=link]',
    '[role=checkbox]', '[role=radio]', '[role=tab]', '[role=menuitem]', '[role=switch]', '[role=textbox]', '[role=combobox]',
    '[role=option]', '[onclick]', '[tabindex]:not([tabindex="-1"])',
  ].join(',');
  const FOCUSABLE = 'a[href], button, input:not([type=hidden]), select, textarea, [tabindex]:not([tabindex="-1"]), [contenteditable=true]';
  const SKIP = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'HEAD', 'META', 'LINK', 'svg', 'SVG']);
  const CONTAINERS = {
    FORM: 'form', NAV: 'navigation', MAIN: 'main', HEADER: 'banner', FOOTER: 'contentinfo', ASIDE: 'complementary',
    UL: 'list', OL: 'list', DIALOG: 'dialog', TABLE: 'table', FIELDSET: 'group',
  };
  const PAYMENT = /(^|[^a-z])(cc|card|cvv|cvc|csc|iban|expir|security.?code|card.?number)/i;
  // Matched against a field's name, id, placeholder, aria-label and label, split into lower-case
  // words ("apiKey", "api_key" and "API key" all read " api key ").
  const OTP_WORDS = / (otp|totp|hotp|2fa|mfa|one time (code|password|passcode|pin)|passcode|verification code|auth(entication)? code|security pin|sms code|2 step code|two factor( code)?) /;
  const PASSWORD_WORDS = / (password|passwd|passphrase|pwd) /;
  const SECRET_WORDS = / (secret|api key|apikey|access key|private key|token|recovery code|backup code|seed phrase|mnemonic) /;
  // A field named just "code" is a one-time code unless its words say it is something else.
  const NOT_OTP = / (promo|coupon|discount|voucher|gift|referral|invite|invitation|zip|postal|post|country|area|source|embed|product|item|order|tracking|language|currency) /;
  const TEXT_TYPES = new Set(['', 'text', 'search', 'tel', 'number']);
  // Kinds whose values never leave the page; all but `file` are also what the guard always asks about.
  const CREDENTIALS = new Set(['password', 'otp', 'secret']);
  const MAX_NAME = 120;
  const MAX_VALUE = 200;
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

  // Element ids are local to this document and never reused in it; the service worker maps them
  // to the tab-wide refs (e1, e2, ...) it shows the agent.
  let nextLocal = 1;
  const localOf = new WeakMap();
  const byLocal = new Map();

  function idFor(el) {
    let id = localOf.get(el);
    if (!id) {
      id = nextLocal++;
      localOf.set(el, id);
      byLocal.set(id, new WeakRef(el));
    }
    return id;
  }

  const squash = (s, max) => {
    const t = String(s || '').replace(/\s+/g, ' ').trim();
    return t.length > max ? `${t.slice(0, max - 1)}…` : t;
  };
  const q = (s) => JSON.stringify(s);

  function visible(el) {
    if (el.closest('[aria-hidden="true"],[hidden],[inert]')) return false;
    if (typeof el.checkVisibility === 'function') return el.checkVisibility({ visibilityProperty: true });
    const cs = getComputedStyle(el);
    return cs.display !== 'none' && cs.visibility !== 'hidden';
  }

  const words = (s) => ` ${String(s || '').replace(/([a-z0-9])([A-Z])/g, '$1 $2').replace(/([A-Z])([A-Z][a-z])/g, '$1 $2')
    .toLowerCase().replace(/[^a-z0-9]+/g, ' ').trim()} `;

  /** What the words around a field say it holds: 'otp' | 'password' | 'secret' | null. */
  function kindFromWords(w, name) {
    if (OTP_WORDS.test(w)) return 'otp';
    if (PASSWORD_WORDS.test(w)) return 'password';
    if (SECRET_WORDS.test(w)) return 'secret';
    if (/^code$/i.test(name) && !NOT_OTP.test(w)) return 'otp';
    return null;
  }

  /** The outermost element of the editable region `el` is in, or null when it is not editable. */
  function editableHost(el) {
    if (!el.isContentEditable) return null;
    let host = el;
    while (host.parentElement && host.parentElement.isContentEditable) host = host.parentElement;
    return host;
  }

  /**
   * 'password' | 'payment' | 'otp' | 'secret' | 'file' | null. Every kind but 'file' has its value
   * redacted; an editable region is secret when it masks its text, when its name or label says
   * so, or when it sits in a form with a credential field.
   */
  function sensitiveKind(el) {
    const host = editableHost(el);
    if (host) {
      const masked = getComputedStyle(host).getPropertyValue('-webkit-text-security');
      if (masked && masked !== 'none') return 'password';
      const hint = words(`${host.getAttribute('name') || ''} ${host.id || ''} ${host.getAttribute('aria-label') || ''} ` +
        `${labelText(host)} ${host.title || ''} ${host.getAttribute('aria-placeholder') || ''} ${host.getAttribute('data-placeholder') || ''}`);
      const kind = kindFromWords(hint, host.getAttribute('name') || host.id || '');
      if (kind) return kind;
      const form = host.closest('form');
      return form && credentialIn(form) ? 'secret' : null;
    }
    if (el.tagName !== 'INPUT' && el.tagName !== 'TEXTAREA' && el.tagName !== 'SELECT') return null;
    const type = (el.getAttribute('type') || '').toLowerCase();
    if (type === 'password') return 'password';
    if (type === 'file') return 'file';
    const ac = (el.getAttribute('autocomplete') || '').toLowerCase();
    if (ac.includes('cc-') || ac.includes('current-password') || ac.includes('new-password')) {
      return ac.includes('cc-') ? 'payment' : 'password';
    }
    if (ac.includes('one-time-code')) return 'otp';
    const hint = `${el.name || ''} ${el.id || ''} ${el.getAttribute('placeholder') || ''} ${el.getAttribute('aria-label') || ''}`;
    if (PAYMENT.test(hint)) return 'payment';
    if (el.tagName === 'SELECT' || (el.tagName === 'INPUT' && !TEXT_TYPES.has(type))) return null;
    return kindFromWords(words(`${hint} ${labelText(el)}`), el.name || el.id || '');
  }

  /** Whether `scope` holds a password, one-time code or secret field. */
  function credentialIn(scope) {
    return Array.from(scope.querySelectorAll('input,textarea')).some((f) => CREDENTIALS.has(sensitiveKind(f)));
  }

  /**
   * The credential or payment kind of the fields the element would submit with: those of its
   * form, or, outside any form, of its nearest ancestor (up to four levels) that has such fields.
   */
  function guardedFields(el) {
    const scopeKind = (scope) => {
      const kinds = new Set(Array.from(scope.querySelectorAll('input,textarea,select,[contenteditable]'), sensitiveKind));
      return ['password', 'otp', 'secret', 'payment'].find((k) => kinds.has(k)) || null;
    };
    const form = el.form || el.closest('form');
    if (form) return scopeKind(form);
    let p = el.parentElement;
    for (let i = 0; p && i < 4 && p !== document.body && p !== document.documentElement; i++, p = p.parentElement) {
      const kind = scopeKind(p);
      if (kind) return kind;
    }
    return null;
  }

  // Fields the person typed into after a handoff (browser_handoff) gave them the tab: what they type is
  // theirs, whatever the field is, so it never reaches the agent. Only trusted input counts, and the
  // agent's own typing into an editable region (execCommand, which is trusted) is left out.
  const typedByPerson = new WeakSet();
  let personsTurn = false;
  let agentTyping = false;
  document.addEventListener('input', (e) => {
    if (!personsTurn || agentTyping || !e.isTrusted || !(e.target instanceof Element)) return;
    typedByPerson.add(editableHost(e.target) || e.target);
  }, true);

  const personTyped = (el) => typedByPerson.has(el) || typedByPerson.has(editableHost(el));

  /** Whether the element's value must never leave the page. */
  function redacts(el) {
    if (personTyped(el)) return true;
    const kind = sensitiveKind(el);
    return Boolean(kind && kind !== 'file');
  }

  function labelText(el) {
    const aria = el.getAttribute('aria-label');
    if (aria) return aria;
    const by = el.getAttribute('aria-labelledby');
    if (by) {
      const t = by.split(/\s+/).map((id) => document.getElementById(id)?.textContent || '').join(' ');
      if (t.trim()) return t;
    }
    if (el.labels && el.labels.length) return Array.from(el.labels, (l) => l.textContent).join(' ');
    return '';
  }

  function roleOf(el) {
    const explicit = el.getAttribute('role');
    if (explicit) return explicit.split(/\s+/)[0];
    const tag = el.tagName;
    if (tag === 'A') return 'link';
    if (tag === 'BUTTON' || tag === 'SUMMARY') return 'button';
    if (tag === 'SELECT') return el.multiple ? 'listbox' : 'combobox';
    if (tag === 'TEXTAREA') return 'textbox';
    if (tag === 'IFRAME' || tag === 'FRAME') return 'iframe';
    if (tag === 'INPUT') {
      const type = (el.getAttribute('type') || 'text').toLowerCase();
      if (['submit', 'button', 'reset', 'image'].includes(type)) return 'button';
      if (type === 'checkbox' || type === 'radio') return type;
      if (type === 'range') return 'slider';
      if (type === 'search') return 'searchbox';
      if (type === 'file') return 'button';
      return 'textbox';
    }
    if (el.isContentEditable) return 'textbox';
    return 'generic';
  }

  function nameOf(el) {
    const label = labelText(el);
    if (label) return squash(label, MAX_NAME);
    const tag = el.tagName;
    if (tag === 'INPUT') {
      const type = (el.getAttribute('type') || 'text').toLowerCase();
      if (['submit', 'button', 'reset'].includes(type)) return squash(el.value || type, MAX_NAME);
      if (type === 'image') return squash(el.alt || 'submit', MAX_NAME);
      if (type === 'file') return 'Choose file';
      return squash(el.getAttribute('placeholder') || el.title || el.name || '', MAX_NAME);
    }
    if (tag === 'TEXTAREA' || tag === 'SELECT') {
      return squash(el.getAttribute('placeholder') || el.title || el.name || '', MAX_NAME);
    }
    if (tag === 'IFRAME' || tag === 'FRAME') return squash(el.title || el.name || el.src || '', MAX_NAME);
    if (el.isContentEditable && redacts(el)) {
      // Its text is the secret: name it by its placeholder or title only.
      return squash(el.getAttribute('aria-placeholder') || el.getAttribute('data-placeholder') || el.title || '', MAX_NAME);
    }
    const text = el.innerText || el.textContent || '';
    if (text.trim()) return squash(text, MAX_NAME);
    const img = el.querySelector('img[alt]');
    return squash((img && img.alt) || el.title || '', MAX_NAME);
  }

  function isSubmitControl(el) {
    if (el.tagName === 'INPUT') return ['submit', 'image'].includes((el.getAttribute('type') || '').toLowerCase());
    if (el.tagName === 'BUTTON') return (el.getAttribute('type') || 'submit').toLowerCase() === 'submit' && Boolean(el.form);
    return false;
  }

  function valueOf(el, sensitive) {
    if (el.tagName === 'SELECT') {
      const opts = Array.from(el.selectedOptions || [], (o) => o.label || o.text);
      return sensitive ? '[redacted]' : squash(opts.join(', '), MAX_VALUE);
    }
    if (el.tagName === 'INPUT' || el.tagName === 'TEXTAREA') {
      const type = (el.getAttribute('type') || '').toLowerCase();
      if (['checkbox', 'radio', 'submit', 'button', 'reset', 'image'].includes(type)) return null;
      if (type === 'file') return el.files && el.files.length ? `${el.files.length} file(s)` : null;
      if (!el.value) return null;
      return sensitive ? '[redacted]' : squash(el.value, MAX_VALUE);
    }
    if (el.isContentEditable) {
      const t = squash(el.innerText, MAX_VALUE);
      return t ? (sensitive && sensitive !== 'file' ? '[redacted]' : t) : null;
    }
    return null;
  }

  function flags(el) {
    const out = [];
    if (el.checked || el.getAttribute('aria-checked') === 'true') out.push('[checked]');
    if (el.getAttribute('aria-selected') === 'true') out.push('[selected]');
    if (el.getAttribute('aria-pressed') === 'true') out.push('[pressed]');
    if (el.disabled || el.getAttribute('aria-disabled') === 'true') out.push('[disabled]');
    if (el.readOnly) out.push('[readonly]');
    if (el.required) out.push('[required]');
    if (el.getAttribute('aria-expanded')) out.push(`[expanded=${el.getAttribute('aria-expanded')}]`);
    if (el === document.activeElement) out.push('[focused]');
    if (el.tagName === 'A' && /^_blank$/i.test(el.getAttribute('target') || '')) out.push('[new tab]');
    if (isSubmitControl(el)) out.push('[submit]');
    const kind = sensitiveKind(el);
    if (kind) out.push(`[${kind}]`);
    return out.join(' ');
  }

  /**
   * A link's destination as short as it stays unambiguous: `#part` within this document, the path on this
   * page's origin, else the whole URL.
   */
  function shortUrl(a) {
    const href = a.href;
    let url;
    try {
      url = new URL(href);
    } catch {
      return href;
    }
    if (url.origin !== location.origin) return href;
    if (url.hash && url.pathname === location.pathname && url.search === location.search) return url.hash;
    return `${url.pathname}${url.search}${url.hash}`;
  }

  /** Whether a link stays on this page's origin. */
  function sameSite(a) {
    try {
      return new URL(a.href).origin === location.origin;
    } catch {
      return false;
    }
  }

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

  // `[value^="a"]` found or not found would read a hidden token one character at a time.
  const PROBE = /\[\s*(?:[^\]|]*\|)?\s*(?:value|content)\s*(?:[~|^$*]?=|\])/i;

  /**
   * The element a key press reaches: the document's active element, inside open shadow roots down to the element
   * itself; null when none has the focus. activeElement, not :focus: a background tab has no system focus, so
   * :focus matches nothing.
   */
  function focusHolder() {
    let el = document.activeElement;
    while (el && el.shadowRoot && el.shadowRoot.activeElement) el = el.shadowRoot.activeElement;
    return !el || el === document.body || el === document.documentElement ? null : el;
  }

  function resolve(target) {
    if (target.page) {
      // A key for the page itself: only while still no element has the focus.
      return focusHolder() ? { error: 'focus_moved', message: 'an element took the keyboard focus after the key was checked' }
        : { el: document.body || document.documentElement };
    }
    if (target.focused && !target.local) {
      const el = focusHolder();
      return el ? { el } : { error: 'no_focus', message: 'no element has the keyboard focus' };
    }
    if (target.local) {
      const el = byLocal.get(target.local)?.deref();
      if (!el || !el.isConnected) {
        return { error: 'stale_ref', message: 'that element is gone from the page' };
      }
      return { el };
    }
    if (target.selector) {
      if (PROBE.test(target.selector) || /\[[^\]]*\\/.test(target.selector)) {
        return { error: 'bad_selector', message: 'a selector may not test the value or content attribute (it can hold a ' +
          'secret); take a browser_snapshot and use a ref' };
      }
      let el;
      try {
        el = document.querySelector(target.selector);
      } catch {
        return { error: 'bad_selector', message: `${q(target.selector)} is not a valid CSS selector` };
      }
      if (!el) return { error: 'not_found', message: `no element for selector: ${target.selector}` };
      return { el };
    }
    return { error: 'bad_target', message: 'give a ref (from browser_snapshot) or a CSS selector' };
  }

  function describe(el) {
    const form = el.form || el.closest('form');
    const d = {
      role: roleOf(el), name: nameOf(el), tag: el.tagName.toLowerCase(),
      type: (el.getAttribute('type') || '').toLowerCase(), sensitive: sensitiveKind(el),
      submit: isSubmitControl(el), href: el.tagName === 'A' ? el.href : '', origin: location.origin,
      inForm: Boolean(form), formAction: form ? form.action : '', formMethod: form ? form.method : '',
      disabled: Boolean(el.disabled), url: location.href, guarded: guardedFields(el),
      newTab: el.tagName === 'A' && /^_blank$/i.test(el.getAttribute('target') || ''), editable: el.isContentEditable,
    };
    // The approval binds to what was described: a page that relabels or retargets the element
    // between the question and the action fails the check instead of getting the approval.
    d.fingerprint = JSON.stringify([d.role, d.name, d.tag, d.type, d.href, d.formAction, d.formMethod]);
    return d;
  }

  function pointAt(el) {
    el.scrollIntoView({ block: 'center', inline: 'center' });
    const r = el.getBoundingClientRect();
    return { clientX: r.left + r.width / 2, clientY: r.top + r.height / 2, bubbles: true, cancelable: true, composed: true };
  }

  const nativeValueSetter = (el) =>
    Object.getOwnPropertyDescriptor(Object.getPrototypeOf(el), 'value')?.set ||
    Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set;

  /** A failure the agent can act on: `message` is ours, `page` (optional) is text from the page. */
  class Refusal extends Error {
    constructor(message, page = '') {
      super(message);
      this.page = page;
    }
  }

  const ACTIONS = {
    click(el) {
      if (el.disabled) throw new Refusal('the element is disabled; wait for the page or pick another element');
      const at = pointAt(el);
      el.dispatchEvent(new PointerEvent('pointerdown', at));
      el.dispatchEvent(new MouseEvent('mousedown', at));
      if (typeof el.focus === 'function') el.focus({ preventScroll: true });
      el.dispatchEvent(new PointerEvent('pointerup', at));
      el.dispatchEvent(new MouseEvent('mouseup', at));
      el.click();
      return 'clicked';
    },
    type(el, { text, clear = true }) {
      if (el.tagName === 'INPUT' && (el.getAttribute('type') || '').toLowerCase() === 'file') {
        throw new Refusal('a file input cannot be typed into; ask the user to choose the file');
      }
      if (el.disabled || el.readOnly) throw new Refusal('the field is disabled or read-only');
      pointAt(el);
      el.focus();
      if (el.tagName === 'INPUT' || el.tagName === 'TEXTAREA') {
        const next = clear ? text : el.value + text;
        // The prototype's setter, because frameworks like React track the instance property.
        nativeValueSetter(el).call(el, next);
        el.dispatchEvent(new InputEvent('input', { bubbles: true, inputType: 'insertText', data: text }));
        el.dispatchEvent(new Event('change', { bubbles: true }));
        return 'typed into';
      }
      if (el.isContentEditable) {
        agentTyping = true;
        try {
          if (clear) document.execCommand('selectAll', false);
          document.execCommand('insertText', false, text);
        } finally {
          agentTyping = false;
        }
        return 'typed into';
      }
      throw new Refusal('this element cannot take text; target an input, textarea or editable element');
    },
    select(el, { value }) {
      if (el.tagName !== 'SELECT') throw new Refusal('browser_select_option needs a <select> element');
      const opt = Array.from(el.options).find((o) => o.value === value) ||
        Array.from(el.options).find((o) => squash(o.label || o.text, 1000) === squash(value, 1000));
      if (!opt) {
        const have = Array.from(el.options).slice(0, 30).map((o) => q(o.label || o.text)).join(', ');
        throw new Refusal(`no option ${q(value)}; the options the page offers are in the block below`, `options: ${have}`);
      }
      el.focus();
      el.value = opt.value;
      el.dispatchEvent(new Event('input', { bubbles: true }));
      el.dispatchEvent(new Event('change', { bubbles: true }));
      return { verb: 'selected an option in', chosen: redacts(el) ? '[redacted]' : squash(opt.label || opt.text, MAX_VALUE) };
    },
    press(el, { press }, spec) {
      // A key goes where the focus is, and what the guard decided on is `el`: the press happens only while the
      // focus is on it. The agent's named element is focused first; the focused element's press is refused when
      // the focus has moved since it was described, and the page's own press when an element has taken it.
      const before = focusHolder();
      if (!spec.focused && !spec.page && !holds(before, el) && typeof el.focus === 'function') el.focus();
      const now = focusHolder();
      if (!spec.page && !holds(now, el)) {
        if (spec.focused) {
          throw new Refusal('nothing was pressed: the keyboard focus moved to another element after the key was ' +
            'checked. Take a new browser_snapshot, and press the key on the element by its ref');
        }
        if (now === before) {
          throw new Refusal('nothing was pressed: the element cannot take the keyboard focus, so a key press would ' +
            'reach another element. Click it, or press the key on a focusable element');
        }
        throw new Refusal('nothing was pressed: the page moved the keyboard focus to another element when this one ' +
          'was focused. Take a new browser_snapshot before acting on this page');
      }
      const { key, code, shiftKey, ctrlKey, altKey, metaKey } = press;
      const init = { key, code, shiftKey, ctrlKey, altKey, metaKey, bubbles: true, cancelable: true, composed: true };
      const go = el.dispatchEvent(new KeyboardEvent('keydown', init));
      // As a keyboard does: a character key and Enter also send keypress, unless a shortcut modifier is held.
      if ((key.length === 1 || key === 'Enter') && !ctrlKey && !metaKey && !altKey) {
        el.dispatchEvent(new KeyboardEvent('keypress', init));
      }
      el.dispatchEvent(new KeyboardEvent('keyup', init));
      // Synthetic key events do not trigger default actions, so do the ones agents rely on.
      if (go && key === 'Enter' && el.form && el.tagName === 'INPUT') el.form.requestSubmit();
      if (go && key === 'Tab') {
        const order = Array.from(document.querySelectorAll(FOCUSABLE)).filter((e) => visible(e) && !e.disabled);
        const at = order.indexOf(el);
        const next = order[at < 0 ? (shiftKey ? order.length - 1 : 0) : (at + (shiftKey ? order.length - 1 : 1)) % order.length];
        if (next) next.focus();
      }
      return `pressed ${key === ' ' ? 'Space' : key} in`;
    },
  };

  /** Whether the focus `holder` is on `el`: the element itself, or the editable region `el` is part of. */
  function holds(holder, el) {
    return holder === el || (holder !== null && el.isContentEditable && editableHost(el) === holder);
  }

  // A page may leave a moment after an action (a script redirects once its request is answered): for this long
  // after one, the service worker hears of it, and holds the agent's next call until the next page has loaded.
  const LEAVE_WATCH_MS = 1000;
  let acting = false;
  let leftNow = false;
  let watchUntil = 0;
  let leaveSent = false;
  let watchingLeaves = false;

  function leaving() {
    if (acting) leftNow = true;
    else if (!leaveSent && performance.now() < watchUntil) {
      leaveSent = true;
      chrome.runtime.sendMessage({ openab: 'leaving' }).catch(() => {});
    }
  }

  function watchLeaving() {
    if (watchingLeaves) return;
    watchingLeaves = true;
    const nav = globalThis.navigation;
    if (nav) {
      nav.addEventListener('navigate', (e) => {
        if (!(e.destination && e.destination.sameDocument)) leaving();
      });
    }
    addEventListener('beforeunload', leaving);
  }

  function act(op, target, args, expected) {
    const found = target ? resolve(target) : { el: null };
    if (found.error) return found;
    const el = found.el;
    if (el && expected && describe(el).fingerprint !== expected) {
      return { error: 'stale_ref', message: 'the element changed after it was checked' };
    }
    // `left`: the action made this document start leaving (a link, a form, a script setting location), so the
    // service worker waits for the next page's load instead of watching for one.
    watchLeaving();
    leftNow = false;
    acting = true;
    // A form's submission navigates in the page's next task: its submit event, if no script cancels it, says so.
    const submits = [];
    const submitting = (e) => submits.push(e);
    addEventListener('submit', submitting, true);
    try {
      const done = ACTIONS[op](el, args || {}, target || {});
      const { verb, chosen } = typeof done === 'string' ? { verb: done } : done;
      const left = leftNow || submits.some((e) => !e.defaultPrevented);
      return { ok: true, verb, chosen, left, desc: el ? describe(el) : null };
    } catch (e) {
      // Only our own refusals speak in our words; anything else the page's DOM threw is its text.
      if (e instanceof Refusal) return { error: 'action_failed', message: e.message, page: e.page };
      return { error: 'action_failed', message: 'the action failed in the page', page: String((e && e.message) || e) };
    } finally {
      acting = false;
      leaveSent = false;
      watchUntil = performance.now() + LEAVE_WATCH_MS;
      removeEventListener('submit', submitting, true);
    }
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

  globalThis.__openab = {
    snapshot,
    describeTarget(target) {
      const found = resolve(target);
      // `local`: the element's identity in this document, which binds a press on the focused element to it.
      if (found.error) return found;
      return { ok: true, desc: describe(found.el), ...(target.focused && { local: idFor(found.el) }) };
    },
    act,
    personTurn() {
      personsTurn = true;
      return { ok: true };
    },
    readDom(selector) {
      let el = document.body || document.documentElement;
      if (selector) {
        const found = resolve({ selector });
        if (found.error) return found;
        el = found.el;
      }
      return { ok: true, html: redactedHtml(el), url: location.href, title: document.title };
    },
    scroll({ direction, pixels, target }) {
      if (target) {
        const found = resolve(target);
        if (found.error) return found;
        found.el.scrollIntoView({ block: 'center' });
      } else {
        const step = pixels || Math.round(innerHeight * 0.8);
        if (direction === 'top') scrollTo(0, 0);
        else if (direction === 'bottom') scrollTo(0, document.documentElement.scrollHeight);
        else scrollBy(0, direction === 'up' ? -step : step);
      }
      const h = document.documentElement.scrollHeight;
      return { ok: true, scrollY: Math.round(scrollY), height: h, viewport: innerHeight };
    },
    check({ text, selector }) {
      if (selector) {
        const found = resolve({ selector });
        if (found.error === 'bad_selector') return found;
        if (!found.el || !visible(found.el)) return { ok: false };
      }
      // The text test is the service worker's, on the redacted text, so it cannot probe for secrets.
      return { ok: true, text: text ? readableText() : undefined };
    },
  };
})();
