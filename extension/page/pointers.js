// The second of the page scripts (page/elements.js says how they share their namespace): which elements with no
// role the page makes clickable by its looks alone (cursor: pointer, the outermost one, not inside a control and
// with none inside). A script's click handler is invisible from here; its cursor is not. page/read.js gives them
// refs in the snapshot.
(() => {
  const ns = globalThis.__openabPage;
  if (ns.pointers) return;
  const { INTERACTIVE } = ns.elements;
  const SKIP = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'HEAD', 'META', 'LINK', 'svg', 'SVG']);
  // Style rules that set the pointer cursor read from the page's sheets, at most; past that every element is asked.
  const MAX_POINTER_RULES = 2000;

  /** Adds to `pointers` the clickable-looking elements of `root` (a document or a shadow root). */
  function seek(root, pointers) {
    const pointerAt = (el) => {
      if (SKIP.has(el.tagName) || el.tagName === 'LABEL' || el.closest(INTERACTIVE) || el.querySelector(INTERACTIVE)) return;
      if (getComputedStyle(el).cursor !== 'pointer') return;
      const parent = el.parentElement;
      if (parent && getComputedStyle(parent).cursor === 'pointer') return; // inherited: the outer one is the target
      pointers.add(el);
    };
    const findPointers = (el, inherited) => {
      for (const child of el.children) {
        if (SKIP.has(child.tagName)) continue;
        if (child.matches(INTERACTIVE)) continue;
        const pointer = getComputedStyle(child).cursor === 'pointer';
        if (pointer && !inherited && child.tagName !== 'LABEL' && !child.querySelector(INTERACTIVE)) {
          pointers.add(child);
          continue;
        }
        if (child.shadowRoot) findPointers(child.shadowRoot, pointer);
        if (child.children.length) findPointers(child, pointer);
      }
    };
    // Asking every element for its cursor costs a style lookup each (a tenth of a second on a page of prose); the
    // page's own style sheets say which selectors set the pointer, so only their elements are asked. A sheet of
    // another origin cannot be read: then every element is.
    const pointerSelectors = (doc) => {
      const found = [];
      const read = (rules) => {
        for (const rule of rules) {
          if (found.length > MAX_POINTER_RULES) return false;
          if (rule.styleSheet) {
            if (read(rule.styleSheet.cssRules) === false) return false;
          } else if (rule.cssRules && !rule.selectorText) {
            if (read(rule.cssRules) === false) return false;
          }
          if (rule.selectorText && rule.style && rule.style.cursor === 'pointer') {
            found.push(rule.selectorText.replace(/::?(before|after|marker|placeholder)\b/g, '')
              .replace(/:(hover|focus|focus-visible|focus-within|active|visited|link)\b/g, ''));
          }
        }
        return true;
      };
      try {
        for (const sheet of [...doc.styleSheets, ...(doc.adoptedStyleSheets || [])]) {
          if (read(sheet.cssRules) === false) return null;
        }
      } catch {
        return null; // another origin's sheet
      }
      return found;
    };
    const selectors = root.styleSheets ? pointerSelectors(root) : null;
    if (!selectors) {
      findPointers(root.body || root, false);
      return;
    }
    const seen = new Set();
    for (const sel of [...selectors, '[style*="cursor"]']) {
      let hits;
      try {
        hits = root.querySelectorAll(sel || '*:not(*)');
      } catch {
        continue; // a selector this engine's querySelectorAll does not take
      }
      for (const el of hits) {
        if (!seen.has(el)) pointerAt(el);
        seen.add(el);
      }
    }
  }

  ns.pointers = { seek };
})();
