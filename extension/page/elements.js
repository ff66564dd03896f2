// The first of the page scripts (lib/page-script.js injects page/elements.js, page/read.js, page/agent.js in this
// order into each frame of an agent tab, in the extension's isolated world: they share the DOM with the page but
// none of the page's JavaScript). Classic scripts, idempotent: a second injection into the same document keeps
// the first instance of each and its element ids. They share one namespace, `globalThis.__openabPage`.
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

  ns.elements = {
    INTERACTIVE, MAX_NAME, MAX_VALUE, idFor, elementOf, squash, q, visible, editableHost, sensitiveKind, guardedFields,
    startPersonTurn, agentTypes, personTyped, redacts, labelText, roleOf, nameOf, isSubmitControl, valueOf, flags,
    shortUrl, sameSite,
  };
})();
