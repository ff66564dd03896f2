// The fourth page script (page/elements.js says how they share their namespace): where real input goes and what
// comes of it, for page/agent.js. The caret real keys type at, the range of words a selection takes, the point the
// mouse reaches, the element that scrolls, and when a page has settled after a scroll.
(() => {
  const ns = globalThis.__openabPage;
  if (ns.input) return;
  const { editableHost, redacts } = ns.elements;

  // The fields typed by real keys; the others (a date, a colour) take their value as before.
  const KEYED = /^(text|search|email|url|tel|password|number)$/;
  const typedByKeys = (el) => el.isContentEditable || el.tagName === 'TEXTAREA' || (el.tagName === 'INPUT' && KEYED.test(el.type));

  /** Puts what real keys will type in place: over the whole value (`replace`) or after it; false where it cannot. */
  function caret(el, replace) {
    try {
      if (!el.isContentEditable) {
        if (replace) el.select();
        else el.setSelectionRange(el.value.length, el.value.length);
        return true;
      }
      const range = document.createRange();
      range.selectNodeContents(editableHost(el) || el);
      if (!replace) range.collapse(false);
      getSelection().removeAllRanges();
      getSelection().addRange(range);
      return true;
    } catch {
      return false; // an email or number field has no caret a script can place
    }
  }

  /**
   * The range of `text` in what `root` shows (hidden and secret text left out), its spaces as the snapshot reads
   * them; the first match, else the first in any case; null when none.
   */
  function rangeOf(root, text) {
    const want = text.replace(/\s+/g, ' ').trim();
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    let flat = '';
    const at = [];
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const host = n.parentElement;
      if (!host || /^(SCRIPT|STYLE|NOSCRIPT|TEXTAREA)$/.test(host.tagName) || !host.getClientRects().length || redacts(host)) continue;
      for (let i = 0; i < n.data.length; i++) {
        const ch = /\s/.test(n.data[i]) ? ' ' : n.data[i];
        if (ch === ' ' && (!flat || flat.endsWith(' '))) continue;
        flat += ch;
        at.push([n, i]);
      }
    }
    let i = flat.indexOf(want);
    if (i < 0) i = flat.toLowerCase().indexOf(want.toLowerCase());
    if (i < 0 || !want) return null;
    const range = document.createRange();
    range.setStart(...at[i]);
    range.setEnd(at[i + want.length - 1][0], at[i + want.length - 1][1] + 1);
    return range;
  }

  /** Whether a point of the viewport is on screen, where the mouse can be. */
  const onScreen = ({ x, y }) => x >= 0 && y >= 0 && x < innerWidth && y < innerHeight;

  /** The element the mouse reaches at a point: the topmost there, inside open shadow roots. */
  function topAt({ x, y }) {
    let el = document.elementFromPoint(x, y);
    while (el && el.shadowRoot) {
      const inner = el.shadowRoot.elementFromPoint(x, y);
      if (!inner || inner === el) break;
      el = inner;
    }
    return el;
  }

  /** The nearest element from `el` outwards that scrolls its own content, or null. */
  function scroller(el) {
    for (let at = el; at && at !== document.body && at !== document.documentElement; at = at.parentElement || at.getRootNode().host) {
      const style = getComputedStyle(at);
      if (at.scrollHeight > at.clientHeight + 1 && /(auto|scroll|overlay)/.test(style.overflowY)) return at;
      if (at.tagName === 'TEXTAREA' && at.scrollHeight > at.clientHeight + 1) return at;
    }
    return null;
  }

  /** Scrolls inside an element (a scrollable list, a textarea) as the page scrolls: its own position (none: read it). */
  function scrollInside(el, direction, pixels) {
    const box = scroller(el);
    if (!box) return { error: 'action_failed', message: 'neither the element nor any element around it scrolls; scroll the page (no ref)' };
    const step = pixels || Math.round(box.clientHeight * 0.8);
    const top = direction === 'top' ? 0 : direction === 'bottom' ? box.scrollHeight
      : box.scrollTop + (direction === 'up' ? -step : step);
    if (direction) box.scrollTo({ top, behavior: 'instant' });
    return { ok: true, inside: true, scrollY: Math.round(box.scrollTop), height: box.scrollHeight, viewport: box.clientHeight,
      own: box === el };
  }

  // A page acts on a scroll once it stops: its handlers run a moment after the last scroll event (debounced), and
  // change the page (a field enabled, more items). Settled is quiet that long: no scroll event, no change. A tab
  // behind the person's draws few frames, so its scroll event can come late: a scroll that moved waits for it.
  const SETTLE_QUIET_MS = 500;
  const SETTLE_MAX_MS = 2_000;

  /** Resolves once the page has settled after a scroll (`moved`: the scroll changed a position). */
  function settled(moved) {
    return new Promise((done) => {
      let quiet = 0;
      let scrolled = !moved;
      const changes = new MutationObserver(() => again());
      const finish = () => {
        clearTimeout(quiet);
        clearTimeout(cap);
        changes.disconnect();
        removeEventListener('scroll', again, true);
        done();
      };
      const again = (e) => {
        if (e && e.type === 'scroll') scrolled = true;
        clearTimeout(quiet);
        if (scrolled) quiet = setTimeout(finish, SETTLE_QUIET_MS);
      };
      const cap = setTimeout(finish, SETTLE_MAX_MS);
      changes.observe(document.documentElement, { subtree: true, childList: true, attributes: true, characterData: true });
      addEventListener('scroll', again, true);
      again();
    });
  }

  ns.input = { typedByKeys, caret, rangeOf, onScreen, topAt, scrollInside, settled };
})();
