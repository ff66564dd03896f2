// The first of the page scripts (lib/page-script.js injects page/elements.js, pointers.js, read.js, agent.js and
// files.js in this order into each frame of an agent tab, in the extension's isolated world: they share the DOM
// with the page but none of the page's JavaScript). Classic scripts, idempotent: a second injection into the same
// document keeps the first instance of each and its element ids. They share one namespace, `globalThis.__openabPage`.
//
// This one: what an element is to the agent. Its local id, role, name, value and flags, and whether its value is
// a secret that never leaves the page (a password, a one-time code, a payment field, what the person typed).
(() => {
  const ns = (globalThis.__openabPage ??= {});
  if (ns.elements) return;

  const INTERACTIVE = [
    'a[href]', 'button', 'input:not([type=hidden])', 'select', 'textarea', 'summary', 'iframe', 'frame',
    '[contenteditable=""]', '[contenteditable=true]', '[contenteditable=plaintext-only]', '[role=button]', '[role=link]',
    '[role=checkbox]', '[role=radio]', '[role=tab]', '[role=menuitem]', '[role=switch]', '[role=textbox]', '[role=combobox]',
    '[role=option]', '[onclick]', '[tabindex]:not([tabindex="-1"])',
  ].join(',');
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

  // Element ids are local to this document and never reused in it; the service worker maps them
  // to the tab-wide refs (e1, e2, ...) it shows the agent.
  let nextLocal = 1;
  const localOf = new WeakMap();
  const byLocal = new Map();

  const elementOf = (local) => byLocal.get(local)?.deref();

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

  /** From a handoff on, what the person types in this document is theirs. */
  const startPersonTurn = () => {
    personsTurn = true;
  };

  /** Runs the agent's own typing into an editable region, which is not the person's. */
  function agentTypes(type) {
    agentTyping = true;
    try {
      type();
    } finally {
      agentTyping = false;
    }
  }

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

  // Roles whose name comes from their content when no label names them (accname 1.2, "name from content"). A
  // textbox, a select or a list is never named by its content: a select's content is every one of its options.
  const NAME_FROM_CONTENT = new Set(['button', 'link', 'checkbox', 'radio', 'switch', 'tab', 'menuitem',
    'menuitemcheckbox', 'menuitemradio', 'option', 'treeitem', 'heading', 'cell', 'gridcell', 'columnheader',
    'rowheader', 'row', 'tooltip', 'generic', 'iframe']);
  // A name is computed on at most this many nodes and characters: a label that holds a whole page stays cheap.
  const NAME_NODES = 400;
  const NAME_CHARS = MAX_NAME * 4;
  const BLOCK_DISPLAY = /^(block|flex|grid|table|list-item|flow-root)/;

  /** Whether `el` is a control whose value stands for it inside another element's name (accname 2E). */
  function embeddedValue(el) {
    const tag = el.tagName;
    if (redacts(el)) return '';
    if (tag === 'SELECT') return Array.from(el.selectedOptions || [], (o) => o.label || o.text).join(' ');
    if (tag === 'TEXTAREA') return el.value;
    if (tag === 'INPUT') {
      const type = (el.getAttribute('type') || 'text').toLowerCase();
      if (['checkbox', 'radio', 'file', 'image', 'submit', 'reset', 'button', 'hidden'].includes(type)) return null;
      return el.value;
    }
    const role = el.getAttribute('role');
    if (role === 'textbox' || role === 'searchbox') return el.textContent;
    if (['slider', 'spinbutton', 'scrollbar', 'progressbar'].includes(role)) {
      return el.getAttribute('aria-valuetext') || el.getAttribute('aria-valuenow') || '';
    }
    if (role === 'combobox' || role === 'listbox') {
      const chosen = el.querySelector('[aria-selected=true]');
      return chosen ? chosen.textContent : '';
    }
    return null;
  }

  /**
   * The text alternative of `el` as the accessible-name algorithm (WAI-ARIA accname 1.2) computes it, from
   * aria-labelledby, aria-label, the host language's label (a <label>, alt, a legend, a caption, an SVG title),
   * the element's content where its role allows, its title, and last a field's placeholder. Never the `name`
   * attribute: that is the form's key for the value, not what the person reads. `ctx` carries the recursion:
   * the nodes already visited, whether this is inside an aria-labelledby reference (which is not followed
   * twice) and the budget of nodes.
   */
  function textAlternative(el, ctx, root) {
    if (ctx.seen.has(el) || ctx.nodes++ > NAME_NODES) return '';
    ctx.seen.add(el);
    const tag = el.tagName;
    // A hidden node counts only when an aria-labelledby reference asked for it by id.
    if (!root && !ctx.referenced && !visible(el)) return '';
    ctx.referenced = false;
    const by = ctx.labelledBy ? null : el.getAttribute('aria-labelledby');
    if (by) {
      const parts = by.split(/\s+/).slice(0, 16).map((id) => {
        const ref = el.getRootNode().getElementById?.(id) || document.getElementById(id);
        if (!ref) return '';
        return textAlternative(ref, { ...ctx, labelledBy: true, referenced: true, seen: new Set([...ctx.seen].filter((n) => n !== ref)) }, false);
      });
      const t = parts.join(' ').trim();
      if (t) return t;
    }
    // A secret region's text is its value: it never names anything.
    if (el.isContentEditable && editableHost(el) === el && redacts(el)) return '';
    const embedded = root ? null : embeddedValue(el);
    if (embedded !== null) return embedded;
    const aria = (el.getAttribute('aria-label') || '').trim();
    if (aria) return aria;
    const role = root ? roleOf(el) : null;
    if (tag === 'INPUT') {
      const type = (el.getAttribute('type') || 'text').toLowerCase();
      if (['submit', 'button', 'reset'].includes(type)) {
        return el.value || (type === 'submit' ? 'Submit' : type === 'reset' ? 'Reset' : '');
      }
      if (type === 'image') return el.alt || el.value || el.title || 'Submit';
    }
    if (el.labels && el.labels.length) {
      const t = Array.from(el.labels, (l) => contentText(l, ctx)).join(' ').trim();
      if (t) return t;
    }
    if (tag === 'IMG' || tag === 'AREA') {
      if (el.hasAttribute('alt')) return el.alt;
    } else if (tag === 'FIELDSET') {
      const legend = el.querySelector(':scope > legend');
      if (legend) return contentText(legend, ctx);
    } else if (tag === 'TABLE') {
      if (el.caption) return contentText(el.caption, ctx);
    } else if (tag === 'svg' || tag === 'SVG') {
      const title = el.querySelector(':scope > title');
      if (title && title.textContent.trim()) return title.textContent;
    } else if (tag === 'IFRAME' || tag === 'FRAME') {
      if (el.title) return el.title;
    }
    const fromContent = !root || NAME_FROM_CONTENT.has(role) || el.matches('[onclick],[tabindex]');
    const isField = /^(INPUT|TEXTAREA|SELECT)$/.test(tag) || el.isContentEditable;
    if (fromContent && !isField && tag !== 'IFRAME' && tag !== 'FRAME') {
      // A part keeps its spaces: Sphinx's `<span>1. </span>Whetting` reads "1. Whetting", not "1.Whetting".
      const t = contentText(el, ctx);
      if (t.trim()) return root ? t.trim() : t;
    }
    if (el.title) return el.title;
    if (root && (tag === 'INPUT' || tag === 'TEXTAREA')) return el.getAttribute('placeholder') || '';
    if (root && el.isContentEditable) return el.getAttribute('aria-placeholder') || el.getAttribute('data-placeholder') || '';
    return '';
  }

  /** The names of `el`'s children, in order: text as it reads, each element by its own text alternative. */
  function contentText(el, ctx) {
    let out = '';
    const from = el.shadowRoot || el;
    for (const child of from.childNodes) {
      if (out.length > NAME_CHARS) break;
      if (child.nodeType === 3) {
        out += child.textContent;
        continue;
      }
      if (child.nodeType !== 1 || /^(SCRIPT|STYLE|TEMPLATE|NOSCRIPT)$/.test(child.tagName)) continue;
      if (child.tagName === 'BR') {
        out += ' ';
        continue;
      }
      const t = textAlternative(child, ctx, false);
      // Block-level children read as separate words, inline ones run on as the page shows them.
      const block = ctx.nodes < 64 && BLOCK_DISPLAY.test(getComputedStyle(child).display);
      out += block ? ` ${t} ` : t;
    }
    return out;
  }

  /** The element's accessible name, squashed to one line of at most MAX_NAME characters. */
  function nameOf(el) {
    const tag = el.tagName;
    if (tag === 'INPUT' && (el.getAttribute('type') || '').toLowerCase() === 'file') {
      return squash(labelName(el) || 'Choose file', MAX_NAME);
    }
    if (el.isContentEditable && redacts(el)) {
      // Its text is the secret: name it by its label, placeholder or title only.
      return squash(labelName(el) || el.getAttribute('aria-placeholder') || el.getAttribute('data-placeholder') || el.title || '', MAX_NAME);
    }
    let name = textAlternative(el, { seen: new Set(), nodes: 0, labelledBy: false, referenced: false }, true);
    // A glyph alone (an icon font's star, a "×") says less than the element's title does.
    if (!/[\p{L}\p{N}]/u.test(name) && el.title) name = el.title;
    if (!name.trim() && (tag === 'IFRAME' || tag === 'FRAME')) name = el.src || '';
    if (!name.trim() && tag === 'A') {
      // An icon link with nothing to read (a bare image, a CSS icon) is named by where it goes.
      const img = el.querySelector('img[src]');
      name = img ? fileWords(img.getAttribute('src')) : '';
    }
    return squash(name, MAX_NAME);
  }

  /** aria-labelledby, aria-label or a <label>: what names a field without its content. */
  function labelName(el) {
    const aria = (el.getAttribute('aria-label') || '').trim();
    const by = el.getAttribute('aria-labelledby');
    if (by) {
      const t = by.split(/\s+/).map((id) => document.getElementById(id)?.textContent || '').join(' ');
      if (t.trim()) return t;
    }
    if (aria) return aria;
    if (el.labels && el.labels.length) return Array.from(el.labels, (l) => l.textContent).join(' ');
    return '';
  }

  /** "icons/calendar-day.png" as "calendar day": the words of a file name, for an image with no text. */
  function fileWords(src) {
    const file = String(src || '').split(/[?#]/)[0].split('/').pop() || '';
    return file.replace(/\.[a-z0-9]+$/i, '').replace(/[-_.]+/g, ' ').trim();
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

  /** The option of a list that `v` names: by its value, else by its label as the page shows it; undefined if none. */
  function optionNamed(options, v) {
    return options.find((o) => o.value === v) || options.find((o) => squash(o.label || o.text, 1000) === squash(v, 1000));
  }

  const MAX_CHOSEN = 20;
  // An inline handler that sends a form or leaves the page when the list changes.
  const SUBMITS = /\b(submit|requestSubmit)\b/;
  const LEAVES = /\b(location|href|navigate|assign|replace)\b|window\.open/;

  /**
   * What choosing `wanted` (values or labels, as optionNamed matches them) in the list `el` is: the chosen options as
   * the page labels them, and whether the list's change submits its form (an inline handler that submits, or a form
   * with no submit control of its own, which only its lists can send) or opens another page (an inline handler that
   * goes, or options whose values are addresses: a jump menu).
   */
  function choiceOf(el, wanted) {
    const options = Array.from(el.options);
    const chosen = [];
    for (const v of Array.isArray(wanted) ? wanted.slice(0, MAX_CHOSEN) : []) {
      const opt = optionNamed(options, String(v));
      if (opt) chosen.push(squash(opt.label || opt.text, MAX_VALUE));
    }
    const form = el.form;
    const inline = [el, form].filter(Boolean).map((n) => `${n.getAttribute('onchange') || ''} ${n.getAttribute('oninput') || ''}`).join(' ');
    const sendsItself = form && !Array.from(form.elements).some((c) => isSubmitControl(c));
    const submits = Boolean(form) && (SUBMITS.test(inline) || Boolean(sendsItself));
    const values = options.map((o) => o.value).filter(Boolean);
    const addresses = values.filter((v) => /^(https?:\/\/|\/)/i.test(v)).length;
    const navigates = LEAVES.test(inline) || (values.length > 1 && addresses * 2 > values.length);
    return { chosen, submits, navigates };
  }

  const MAX_SELECTED = 160;
  // What a page marks as selected for its shortcuts: a row, an option, a tree item or a cell (a tab strip's
  // selected tab is where the person is, not what a shortcut acts on).
  const SELECTED = '[aria-selected="true"]:not([role="tab"]), [role="row"][aria-checked="true"], [role="option"][aria-checked="true"]';
  // Rows picked with a checkbox, as mail lists do.
  const CHECKED_ROWS = 'tr input[type="checkbox"]:checked, [role="row"] input[type="checkbox"]:checked, li input[type="checkbox"]:checked';

  /** The element a page's shortcut would act on, in our words with the page's name for it; '' when none is. */
  function selectedThere(focused) {
    const marked = Array.from(document.querySelectorAll(SELECTED)).filter((e) => e !== focused && visible(e));
    const checked = Array.from(document.querySelectorAll(CHECKED_ROWS)).filter(visible);
    const first = marked[0] || (checked[0] && (checked[0].closest('tr, [role="row"], li') || checked[0]));
    if (!first) return '';
    const count = marked.length || checked.length;
    const named = `${roleOf(first)} "${squash(nameOf(first), MAX_SELECTED)}"`;
    return count > 1 ? `${named} and ${count - 1} more` : named;
  }

  ns.elements = {
    INTERACTIVE, MAX_NAME, MAX_VALUE, idFor, elementOf, squash, q, visible, editableHost, sensitiveKind, guardedFields,
    startPersonTurn, agentTypes, personTyped, redacts, labelText, labelName, roleOf, nameOf, isSubmitControl, valueOf,
    flags, shortUrl, sameSite, optionNamed, choiceOf, selectedThere,
  };
})();
