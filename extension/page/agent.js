// Injected into each frame of an agent tab, in the extension's isolated world: it shares the DOM
// with the page but none of the page's JavaScript. Classic script, idempotent: a second
// injection into the same document keeps the first instance and its element ids.
(() => {
  if (globalThis.__openab) return;

  const INTERACTIVE = [
    'a[href]', 'button', 'input:not([type=hidden])', 'select', 'textarea', 'summary', 'iframe', 'frame',
    '[contenteditable=""]', '[contenteditable=true]', '[role=button]', '[role=link]', '[role=checkbox]',
    '[role=radio]', '[role=tab]', '[role=menuitem]', '[role=switch]', '[role=textbox]', '[role=combobox]',
    '[role=option]', '[onclick]', '[tabindex]:not([tabindex="-1"])',
  ].join(',');
  const FOCUSABLE = 'a[href], button, input:not([type=hidden]), select, textarea, [tabindex]:not([tabindex="-1"]), [contenteditable=true]';
  const SKIP = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'HEAD', 'META', 'LINK', 'svg', 'SVG']);
  const CONTAINERS = {
    FORM: 'form', NAV: 'navigation', MAIN: 'main', HEADER: 'banner', FOOTER: 'contentinfo', ASIDE: 'complementary',
    UL: 'list', OL: 'list', DIALOG: 'dialog', TABLE: 'table', FIELDSET: 'group',
  };
  const PAYMENT = /(^|[^a-z])(cc|card|cvv|cvc|csc|iban|expir|security.?code|card.?number)/i;
  const MAX_NAME = 120;
  const MAX_VALUE = 200;
  const MAX_TEXT = 2000;
  // A text line is a paragraph-like element: one with block children is split along them.
  const BLOCKS = new Set(['DIV', 'P', 'LI', 'UL', 'OL', 'DL', 'DT', 'DD', 'TABLE', 'TBODY', 'THEAD', 'TR', 'TD', 'TH',
    'SECTION', 'ARTICLE', 'HEADER', 'FOOTER', 'NAV', 'MAIN', 'ASIDE', 'FIGURE', 'FORM', 'FIELDSET', 'PRE',
    'BLOCKQUOTE', 'H1', 'H2', 'H3', 'H4', 'H5', 'H6', 'DETAILS', 'DIALOG', 'HR']);

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

  function sensitiveKind(el) {
    if (el.tagName !== 'INPUT' && el.tagName !== 'TEXTAREA' && el.tagName !== 'SELECT') return null;
    const type = (el.getAttribute('type') || '').toLowerCase();
    if (type === 'password') return 'password';
    if (type === 'file') return 'file';
    const ac = (el.getAttribute('autocomplete') || '').toLowerCase();
    if (ac.includes('cc-') || ac.includes('current-password') || ac.includes('new-password')) {
      return ac.includes('cc-') ? 'payment' : 'password';
    }
    const hint = `${el.name || ''} ${el.id || ''} ${el.getAttribute('placeholder') || ''} ${el.getAttribute('aria-label') || ''}`;
    return PAYMENT.test(hint) ? 'payment' : null;
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
    if (el.isContentEditable) return squash(el.innerText, MAX_VALUE) || null;
    return null;
  }

  function flags(el) {
    const out = [];
    if (el.checked) out.push('[checked]');
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
    const walk = (node, depth) => {
      for (const el of node.children) {
        if (SKIP.has(el.tagName)) continue;
        if (el.shadowRoot && visible(el)) {
          collect(el.shadowRoot);
          walk(el.shadowRoot, depth);
        }
        if (!visible(el)) continue;
        if (el.matches(INTERACTIVE) && !(el.tagName === 'A' && !el.getAttribute('href'))) {
          const sensitive = sensitiveKind(el);
          const role = roleOf(el);
          let tail = flags(el);
          if (el.tagName === 'A') tail += ` [url=${el.href}]`;
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
          entries.push({ d: depth, t: `heading ${q(squash(el.innerText, MAX_NAME))} [level=${heading[1]}]` });
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
        const container = el.getAttribute('role') || CONTAINERS[el.tagName];
        if (container) {
          const label = labelText(el) || el.getAttribute('name') || '';
          entries.push({ d: depth, t: `${container}${label ? ` ${q(squash(label, MAX_NAME))}` : ''}:` });
          walk(el, depth + 1);
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
          if (text) entries.push({ d: depth, t: `text: ${text}` });
          continue;
        }
        // Text directly inside a mixed container would otherwise be lost.
        const own = Array.from(el.childNodes).filter((n) => n.nodeType === 3).map((n) => n.textContent).join(' ');
        if (own.trim()) entries.push({ d: depth, t: `text: ${squash(own, MAX_TEXT)}` });
        walk(el, depth);
      }
    };
    if (document.body) walk(document.body, 0);
    return { url: location.href, title: document.title, entries };
  }

  function resolve(target) {
    if (target.focused) {
      // activeElement, not :focus: a background tab has no system focus, so :focus matches nothing.
      const el = document.activeElement;
      if (!el || el === document.body || el === document.documentElement) {
        return { error: 'not_found', message: 'no element has the focus' };
      }
      return { el };
    }
    if (target.local) {
      const el = byLocal.get(target.local)?.deref();
      if (!el || !el.isConnected) {
        return { error: 'stale_ref', message: 'that element is gone from the page' };
      }
      return { el };
    }
    if (target.selector) {
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
      disabled: Boolean(el.disabled), url: location.href,
      newTab: el.tagName === 'A' && /^_blank$/i.test(el.getAttribute('target') || ''),
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

  const ACTIONS = {
    click(el) {
      if (el.disabled) throw new Error('the element is disabled; wait for the page or pick another element');
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
        throw new Error('a file input cannot be typed into; ask the user to choose the file');
      }
      if (el.disabled || el.readOnly) throw new Error('the field is disabled or read-only');
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
        if (clear) document.execCommand('selectAll', false);
        document.execCommand('insertText', false, text);
        return 'typed into';
      }
      throw new Error(`a ${el.tagName.toLowerCase()} cannot take text; target an input, textarea or editable element`);
    },
    select(el, { value }) {
      if (el.tagName !== 'SELECT') throw new Error('browser_select_option needs a <select> element');
      const opt = Array.from(el.options).find((o) => o.value === value) ||
        Array.from(el.options).find((o) => squash(o.label || o.text, 1000) === squash(value, 1000));
      if (!opt) {
        const have = Array.from(el.options).slice(0, 30).map((o) => q(o.label || o.text)).join(', ');
        throw new Error(`no option ${q(value)}; the options are ${have}`);
      }
      el.focus();
      el.value = opt.value;
      el.dispatchEvent(new Event('input', { bubbles: true }));
      el.dispatchEvent(new Event('change', { bubbles: true }));
      return `selected ${q(opt.label || opt.text)} in`;
    },
    press(el, { key }) {
      const target = el || document.activeElement || document.body;
      if (el && typeof el.focus === 'function') el.focus();
      const code = /^[a-z]$/i.test(key) ? `Key${key.toUpperCase()}` : /^[0-9]$/.test(key) ? `Digit${key}` : key === ' ' ? 'Space' : key;
      const init = { key, code, bubbles: true, cancelable: true, composed: true };
      const go = target.dispatchEvent(new KeyboardEvent('keydown', init));
      if (key.length === 1) target.dispatchEvent(new KeyboardEvent('keypress', init));
      target.dispatchEvent(new KeyboardEvent('keyup', init));
      // Synthetic key events do not trigger default actions, so do the ones agents rely on.
      if (go && key === 'Enter' && target.form && target.tagName === 'INPUT') target.form.requestSubmit();
      if (go && key === 'Tab') {
        const order = Array.from(document.querySelectorAll(FOCUSABLE)).filter((e) => visible(e) && !e.disabled);
        const next = order[(order.indexOf(target) + 1) % order.length];
        if (next) next.focus();
      }
      return `pressed ${key} in`;
    },
  };

  function act(op, target, args, expected) {
    const found = target ? resolve(target) : { el: null };
    if (found.error) return found;
    const el = found.el;
    if (el && expected && describe(el).fingerprint !== expected) {
      return { error: 'stale_ref', message: 'the element changed after it was checked' };
    }
    try {
      const verb = ACTIONS[op](el, args || {});
      return { ok: true, verb, desc: el ? describe(el) : null };
    } catch (e) {
      return { error: 'action_failed', message: e.message };
    }
  }

  function redactedHtml(el) {
    const clone = el.cloneNode(true);
    const live = [el, ...el.querySelectorAll('input,textarea,select')];
    const copies = [clone, ...clone.querySelectorAll('input,textarea,select')];
    live.forEach((src, i) => {
      const dst = copies[i];
      if (!dst || !(src instanceof HTMLElement) || !/^(INPUT|TEXTAREA|SELECT)$/.test(src.tagName)) return;
      if (sensitiveKind(src)) {
        if (dst.hasAttribute('value')) dst.setAttribute('value', '[redacted]');
        if (src.tagName === 'TEXTAREA') dst.textContent = '[redacted]';
      }
    });
    return clone.outerHTML;
  }

  globalThis.__openab = {
    snapshot,
    describeTarget(target) {
      const found = resolve(target);
      return found.error ? found : { ok: true, desc: describe(found.el) };
    },
    act,
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
      if (text && !(document.body && document.body.innerText.includes(text))) return { ok: false };
      return { ok: true };
    },
  };
})();
