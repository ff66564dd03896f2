// The last page script (page/elements.js says how the three share their namespace): the element a call names,
// the actions on it (each bound to the element the guard saw), and `globalThis.__openab`, the functions the
// service worker calls (lib/page-script.js).
(() => {
  if (globalThis.__openab) return;
  const {
    MAX_VALUE, idFor, elementOf, squash, q, visible, editableHost, sensitiveKind, guardedFields, startPersonTurn,
    agentTypes, redacts, roleOf, nameOf, isSubmitControl, valueOf, personTyped, optionNamed, choiceOf, selectedThere,
  } = globalThis.__openabPage.elements;
  const { snapshot, redactedHtml, readableText } = globalThis.__openabPage.read;
  const { typedByKeys, caret, rangeOf, onScreen, topAt, scrollInside, settled } = globalThis.__openabPage.input;

  const FOCUSABLE = 'a[href], button, input:not([type=hidden]), select, textarea, [tabindex]:not([tabindex="-1"]), [contenteditable=true]';

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
      const el = elementOf(target.local);
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

  /** The page itself as a key's target when no element has the focus: its site, and nothing of its own words. */
  function describePage() {
    const d = { page: true, role: 'page', name: '', tag: 'body', type: '', sensitive: null, submit: false, href: '',
      origin: location.origin, inForm: false, formAction: '', formMethod: '', disabled: false, url: location.href,
      guarded: null, newTab: false, editable: false };
    d.fingerprint = JSON.stringify(['page', location.href]);
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
    // Where the real mouse cannot go (lib/tools-act.js): the events a click makes, as a script can make them.
    click(el, { mods = null, button = 'left', count = 1 }) {
      if (el.disabled) throw new Refusal('the element is disabled; wait for the page or pick another element');
      const at = { ...pointAt(el), ...mods, button: { left: 0, middle: 1, right: 2 }[button] };
      el.dispatchEvent(new PointerEvent('pointerdown', at));
      el.dispatchEvent(new MouseEvent('mousedown', at));
      if (typeof el.focus === 'function') el.focus({ preventScroll: true });
      el.dispatchEvent(new PointerEvent('pointerup', at));
      el.dispatchEvent(new MouseEvent('mouseup', at));
      if (button === 'right') el.dispatchEvent(new MouseEvent('contextmenu', { ...at, view: window }));
      // el.click() carries no modifier, so a click with Control or Shift held is its own event, as a mouse's is.
      else if (mods || count > 1) el.dispatchEvent(new MouseEvent('click', { ...at, detail: 1, view: window }));
      else el.click();
      if (count > 1 && button === 'left') el.dispatchEvent(new MouseEvent('dblclick', { ...at, detail: 2, view: window }));
      return `${count > 1 ? 'double-' : ''}${button === 'left' ? '' : `${button}-`}clicked`;
    },
    type(el, { text, clear = true, real = false }, spec) {
      if (el.tagName === 'INPUT' && (el.getAttribute('type') || '').toLowerCase() === 'file') {
        throw new Refusal('a file input cannot be typed into; ask the user to choose the file');
      }
      if (el.disabled || el.readOnly) throw new Refusal('the field is disabled or read-only');
      pointAt(el);
      el.focus();
      // Real keys (lib/input.js) replace what is selected here, or go in at its end; the gate holds them to `el`.
      if (real && typedByKeys(el)) {
        if (!holds(focusHolder(), el)) {
          throw new Refusal('the element cannot take the keyboard focus, so typed keys would reach another element');
        }
        if (caret(el, clear)) {
          arm(el, spec);
          return 'ready';
        }
      }
      if (el.tagName === 'INPUT' || el.tagName === 'TEXTAREA') {
        const next = clear ? text : el.value + text;
        // The prototype's setter, because frameworks like React track the instance property.
        nativeValueSetter(el).call(el, next);
        el.dispatchEvent(new InputEvent('input', { bubbles: true, inputType: 'insertText', data: text }));
        el.dispatchEvent(new Event('change', { bubbles: true }));
        return 'typed into';
      }
      if (el.isContentEditable) {
        agentTypes(() => {
          if (clear) document.execCommand('selectAll', false);
          document.execCommand('insertText', false, text);
        });
        return 'typed into';
      }
      throw new Refusal('this element cannot take text; target an input, textarea or editable element');
    },
    selectText(el, { text }) {
      const field = el.tagName === 'INPUT' || el.tagName === 'TEXTAREA';
      if (redacts(el) || (field && !typedByKeys(el))) throw new Refusal('the text of this element cannot be selected (it is secret or not text)');
      const at = field && text ? el.value.indexOf(text) : 0;
      const range = field ? null : text ? rangeOf(el, text) : document.createRange();
      if (at < 0 || (!field && range === null)) throw new Refusal(`the words are not on the page${el === document.body ? '' : ' in this element'} as given`);
      if (field) {
        el.focus();
        el.setSelectionRange(at, text ? at + text.length : el.value.length);
        return { verb: 'selected text in', chosen: squash(text || el.value, MAX_VALUE) };
      }
      // As a hand's selection: the focus leaves any field, so a later Control+C copies this.
      if (focusHolder()) focusHolder().blur();
      if (!text) range.selectNodeContents(el);
      (range.startContainer.parentElement || el).scrollIntoView({ block: 'center' });
      getSelection().removeAllRanges();
      getSelection().addRange(range);
      return { verb: 'selected text in', chosen: squash(getSelection().toString(), MAX_VALUE) };
    },
    select(el, { value, values }) {
      if (el.tagName !== 'SELECT') throw new Refusal('browser_select_option needs a <select> element');
      const wanted = values || [value];
      if (wanted.length > 1 && !el.multiple) {
        throw new Refusal('this list takes one choice only (it is not a multiple-choice list); give one "value"');
      }
      const options = Array.from(el.options);
      const chosen = wanted.map((v) => {
        const opt = optionNamed(options, v);
        if (!opt) {
          const have = options.slice(0, 30).map((o) => q(o.label || o.text)).join(', ');
          throw new Refusal(`no option ${q(v)}; the options the page offers are in the block below`, `options: ${have}`);
        }
        if (opt.disabled) throw new Refusal(`the option ${q(v)} is disabled; the page does not offer it now`);
        return opt;
      });
      el.focus();
      // A multiple list ends with exactly the options named chosen, as a person's Control-clicks leave it.
      if (el.multiple) for (const o of options) o.selected = chosen.includes(o);
      else el.value = chosen[0].value;
      el.dispatchEvent(new Event('input', { bubbles: true }));
      el.dispatchEvent(new Event('change', { bubbles: true }));
      const said = redacts(el) ? ['[redacted]'] : chosen.map((o) => squash(o.label || o.text, MAX_VALUE));
      return wanted.length > 1 ? { verb: `selected ${chosen.length} options in`, chosen: said }
        : { verb: 'selected an option in', chosen: said[0] };
    },
    press(el, { press, real = false }, spec) {
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
      // Real keys come from Chrome (lib/input.js) once this answers: the gate holds them to this element.
      if (real) {
        arm(el, spec);
        return 'ready';
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

  // Real keys (lib/input.js) reach the page a moment after `act` found the focus where the guard decided: the
  // gate, armed meanwhile, lets them through only while it still is there, and keeps them all from the page once
  // it is not (a script that moved the focus in that moment). Its listeners are on the window in the capture
  // phase, ahead of the page's own on any element. Only the first key that is not a modifier is checked: what its
  // own handler does with the focus after it is the page's. Text that goes in without keys (lib/input.js inserts
  // it where the page hears no typing) is held the same way: its beforeinput, cancelled once the gate has refused.
  // A click's gate holds no key (it is armed as the element is described, before the guard decides, while the person
  // may type in the page): it keeps the click's submission and leaving.
  const GATE_MS = 10_000;
  const MODIFIER_KEYS = new Set(['Control', 'Shift', 'Alt', 'Meta']);
  const GATED = ['keydown', 'keypress', 'keyup', 'beforeinput'];
  let gate = null;

  function gateKey(e) {
    const g = gate;
    if (!g || !g.keys || !e.isTrusted) return;
    if (!g.passed && !g.refused && (e.type === 'keydown' || e.type === 'beforeinput')) {
      const now = focusHolder();
      if (!(g.page ? now === null : holds(now, g.el))) g.refused = true;
      else if (!MODIFIER_KEYS.has(e.key)) g.passed = true;
    }
    if (g.refused) {
      e.preventDefault();
      e.stopImmediatePropagation();
    }
  }

  function gateSubmit(e) {
    if (gate) gate.submits.push(e);
  }

  function arm(el, spec, keys = true) {
    disarm();
    watchLeaving();
    gate = { el, page: Boolean(spec.page), keys, passed: false, refused: false, left: false, submits: [],
      timer: setTimeout(disarm, GATE_MS) };
    if (keys) for (const type of GATED) addEventListener(type, gateKey, true);
    addEventListener('submit', gateSubmit, true);
  }

  function disarm() {
    const g = gate;
    if (!g) return null;
    gate = null;
    clearTimeout(g.timer);
    for (const type of GATED) removeEventListener(type, gateKey, true);
    removeEventListener('submit', gateSubmit, true);
    leaveSent = false;
    watchUntil = performance.now() + LEAVE_WATCH_MS;
    return g;
  }

  /** What became of the real key the gate was armed for: let through, kept from the page, or never seen. */
  function pressed() {
    const g = disarm();
    if (!g) return { error: 'action_failed', message: 'the key was not checked in this page' };
    const left = g.left || g.submits.some((e) => !e.defaultPrevented);
    return { ok: true, passed: g.passed, refused: g.refused, left, desc: g.page || !g.el.isConnected ? null : describe(g.el) };
  }

  function leaving() {
    if (gate) gate.left = true;
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

  // Show me (a card in the panel): the element a step is about, outlined until the card is answered, or for
  // OUTLINE_MS at most. The outline lives in a closed shadow root outside the body (no snapshot or read sees it, no
  // page style reaches in), takes no clicks, dims the rest of the page and says it is openab's, so it cannot pass
  // for the page's own content.
  const OUTLINE_MS = 60_000;
  let unoutline = () => {};

  function outline(target) {
    unoutline();
    if (!target) return { ok: true };
    const found = resolve(target);
    if (found.error) return found;
    const el = found.el;
    el.scrollIntoView({ block: 'center', inline: 'center' });
    const host = document.createElement('openab-outline');
    const root = host.attachShadow({ mode: 'closed' });
    const style = document.createElement('style');
    // Important :host rules beat the page's own, even its important ones; the place is the host's inline style.
    style.textContent = ':host { display: block !important; position: fixed !important; z-index: 2147483647 !important; ' +
      'margin: 0 !important; padding: 0 !important; opacity: 1 !important; visibility: visible !important; ' +
      'transform: none !important; filter: none !important; pointer-events: none !important; ' +
      'box-sizing: border-box !important; border: 3px solid #1a66d9 !important; border-radius: 4px !important; ' +
      'box-shadow: 0 0 0 100vmax rgba(20, 22, 26, .35) !important; } ' +
      'b { position: absolute; left: -3px; bottom: 100%; margin-bottom: 2px; padding: 1px 6px; white-space: nowrap; ' +
      'font: 600 12px/1.4 system-ui, sans-serif; color: #fff; background: #1a66d9; border-radius: 3px; }';
    const label = document.createElement('b');
    label.textContent = 'openab: the step the agent asks about';
    root.append(style, label);
    let frame = 0;
    const place = () => {
      const r = el.getBoundingClientRect();
      for (const [k, v] of [['left', r.left - 4], ['top', r.top - 4], ['width', r.width + 8], ['height', r.height + 8]]) {
        host.style.setProperty(k, `${Math.round(v)}px`, 'important');
      }
      frame = requestAnimationFrame(place);
    };
    place();
    document.documentElement.append(host);
    const timer = setTimeout(() => unoutline(), OUTLINE_MS);
    unoutline = () => {
      cancelAnimationFrame(frame);
      clearTimeout(timer);
      host.remove();
      unoutline = () => {};
    };
    return { ok: true };
  }

  /** The middle of `el` on screen, where a person's pointer would take it; a refusal when the mouse cannot. */
  function middleOf(el, what) {
    const r = el.getBoundingClientRect();
    if (!r.width || !r.height) throw new Refusal(`${what} takes no room on the page (it is hidden), so the mouse cannot reach it`);
    const at = { x: Math.round(r.left + r.width / 2), y: Math.round(r.top + r.height / 2) };
    if (!onScreen(at)) throw new Refusal(`${what} is not on screen with the rest of the step; scroll so that it shows, and try again`);
    const top = topAt(at);
    if (top && top !== el && !el.contains(top) && !(top.shadowRoot && top.contains(el))) {
      throw new Refusal(`another element covers the middle of ${what}, so the mouse would reach that one instead ` +
        '(it is in the block below). Close or move what covers it first', `covering: ${roleOf(top)} "${nameOf(top)}"`);
    }
    return at;
  }

  /**
   * Where real mouse events for a step go (lib/input.js): the middle of the element, scrolled into view, and for a
   * drag the middle of the element it drops onto, or the point `offset` away and the element there. `expected`
   * binds the points to the elements the guard saw (their fingerprints); without it, they are being described.
   * `still`: the page is not scrolled (an element off screen is refused).
   */
  function aim({ target, to, offset, click = false, right = false, still = false }, expected = null) {
    try {
      const found = resolve(target);
      if (found.error) return found;
      const el = found.el;
      if (expected && describe(el).fingerprint !== expected.from) return { error: 'stale_ref', message: 'the element changed after it was checked' };
      if (expected) {
        // The real input comes once this answers: a page it makes leave is heard of, as after `act`, and a click's
        // submission is kept for `pressed` to tell, as a key's is.
        watchLeaving();
        watchUntil = performance.now() + LEAVE_WATCH_MS;
        if (click) arm(el, {}, false);
        // A right click on a page with no menu of its own would open Chrome's, over the person's window; the
        // person's own right click later is left alone.
        if (right) {
          const shut = (e) => e.preventDefault();
          addEventListener('contextmenu', shut, { once: true });
          setTimeout(() => removeEventListener('contextmenu', shut), GATE_MS);
        }
      }
      if (!still) el.scrollIntoView({ block: 'center', inline: 'center' });
      let drop = null;
      if (to) {
        const there = resolve(to);
        if (there.error) return there;
        drop = there.el;
        drop.scrollIntoView({ block: 'nearest', inline: 'nearest' });
      }
      const from = middleOf(el, 'the element');
      let at = null;
      if (drop) at = middleOf(drop, 'the element to drop onto');
      else if (offset) {
        at = { x: from.x + offset.x, y: from.y + offset.y };
        if (!onScreen(at)) throw new Refusal('the point to drag to is off screen; drag a shorter way, or in steps');
        drop = topAt(at);
      }
      const dropDesc = drop ? describe(drop) : null;
      // Compared as strings, '' for none: a null did not come through the trip to the page and back as null.
      if (expected && (dropDesc ? dropDesc.fingerprint : '') !== (expected.to || '')) {
        return { error: 'stale_ref', message: 'what the drag drops onto changed after it was checked' };
      }
      return { ok: true, from, to: at, desc: describe(el), drop: dropDesc };
    } catch (e) {
      if (e instanceof Refusal) return { error: 'action_failed', message: e.message, page: e.page };
      throw e;
    }
  }

  // A receipt's value is short: the agent checks it, the snapshot has the rest.
  const RECEIPT_VALUE = 100;
  const ARIA_STATES = ['checked', 'selected', 'expanded', 'pressed'];

  /**
   * The element a step acted on, as it is after the step (lib/receipts.js): gone, or its role, name and the state
   * that applies to it. A secret field's value (a password, a code, what the person typed) is never read out.
   */
  function stateAfter(target) {
    const found = resolve(target);
    if (found.error || !found.el.isConnected) return { ok: true, gone: true };
    const el = found.el;
    const state = {};
    const sensitive = sensitiveKind(el) || (personTyped(el) ? 'typed' : null);
    const value = valueOf(el, sensitive && sensitive !== 'file');
    if (value !== null) state.value = squash(value, RECEIPT_VALUE);
    for (const name of ARIA_STATES) {
      const said = el.getAttribute(`aria-${name}`);
      if (said === 'true' || said === 'false') state[name] = said === 'true';
      else if (said === 'mixed') state[name] = 'mixed';
    }
    const type = (el.getAttribute('type') || '').toLowerCase();
    if (el.tagName === 'INPUT' && (type === 'checkbox' || type === 'radio')) state.checked = el.indeterminate ? 'mixed' : el.checked;
    if (el.tagName === 'OPTION') state.selected = el.selected;
    if (el.tagName === 'SUMMARY' && el.parentElement && el.parentElement.tagName === 'DETAILS') state.expanded = el.parentElement.open;
    if (el.tagName === 'DETAILS') state.expanded = el.open;
    if (el.disabled || el.getAttribute('aria-disabled') === 'true') state.disabled = true;
    return { ok: true, local: idFor(el), role: roleOf(el), name: nameOf(el), state };
  }

  // What page/files.js builds on (it is injected after this file).
  globalThis.__openabPage.agent = { resolve, describe };

  globalThis.__openab = {
    outline,
    aim,
    pressed,
    snapshot,
    describeTarget(target, want = {}) {
      const found = resolve(target);
      // `local`: the element's identity in this document, which binds a press on the focused element to it.
      if (found.error) return found;
      const desc = target.page ? describePage() : describe(found.el);
      // What the guard judges beyond the element (lib/guard.js): a list's choice, and for a key what is selected.
      if (want.chosen && found.el.tagName === 'SELECT') desc.choice = choiceOf(found.el, want.chosen);
      if (want.keys) {
        const selected = selectedThere(target.page ? null : found.el);
        if (selected) desc.selected = selected;
      }
      // A real click's aim in the same pass (lib/tools-act.js, realClick), moving nothing before the guard decides:
      // not for an element off screen, in a frame, disabled, a link to a new tab or a field of `want.aim.skip`.
      const aimed = want.aim && window.top === window && !target.page && !desc.disabled && !desc.newTab
        && !new RegExp(want.aim.skip).test(desc.tag === 'input' ? `input:${desc.type}` : desc.tag)
        && aim({ target, click: true, still: true }, { from: desc.fingerprint, to: '' });
      return { ok: true, desc, ...(target.focused && { local: idFor(found.el) }), ...(aimed && aimed.ok && { aimed }) };
    },
    act,
    stateAfter,
    // A receipt's look after a step in one pass (lib/receipts.js): the outline, and in the top frame the element now.
    receiptLook(options, target) {
      const snap = snapshot(options);
      return target && window.top === window ? { ...snap, after: stateAfter(target) } : snap;
    },
    // `pressed` and the receipt's look in one call (lib/tools-act.js); a page with frames is looked at in each later.
    pressedLook(options, target) {
      return { pressed: pressed(), look: window.frames.length ? { frames: true } : this.receiptLook(options, target) };
    },
    personTurn() { startPersonTurn(); return { ok: true }; },
    readDom(selector) {
      let el = document.body || document.documentElement;
      if (selector) {
        const found = resolve({ selector });
        if (found.error) return found;
        el = found.el;
      }
      return { ok: true, html: redactedHtml(el), url: location.href, title: document.title };
    },
    async scroll({ direction, pixels, target, inside = false }) {
      const found = target ? resolve(target) : { el: null };
      if (found.error) return found;
      const at = () => `${scrollX},${scrollY},${found.el ? found.el.getBoundingClientRect().top : ''}`;
      const before = at();
      if (inside) {
        const top = scrollInside(found.el, null, 0).scrollY;
        const done = scrollInside(found.el, direction, pixels);
        if (done.error) return done;
        await settled(done.scrollY !== top);
        return scrollInside(found.el, null, 0);
      }
      if (found.el) found.el.scrollIntoView({ block: 'center' });
      else {
        const step = pixels || Math.round(innerHeight * 0.8);
        if (direction === 'top') scrollTo(0, 0);
        else if (direction === 'bottom') scrollTo(0, document.documentElement.scrollHeight);
        else scrollBy(0, direction === 'up' ? -step : step);
      }
      await settled(at() !== before);
      return { ok: true, scrollY: Math.round(scrollY), height: document.documentElement.scrollHeight, viewport: innerHeight };
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
