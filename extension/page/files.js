// The last page script (page/elements.js says how they share their namespace): a file from the agent's working
// folder put into the page (browser_upload, lib/tools-upload.js). The service worker names the file field or the drop
// zone, hands the file's bytes over in pieces (base64 where its messages to this isolated world are JSON, as a script's
// arguments are; bytes where the manifest has them cloned), then asks for it to be set:
// the File is built here, in the isolated world, and given to the page as a person's pick or drop would be, only if
// the element is still the one the person was asked about.
(() => {
  const api = globalThis.__openab;
  if (!api || api.fileTarget) return;
  const { resolve, describe } = globalThis.__openabPage.agent;
  const { idFor } = globalThis.__openabPage.elements;

  // One file at a time per document: a new one replaces pieces left by a call that stopped.
  let incoming = null; // {key, size, received, parts}
  const MAX_PIECES = 4096;

  const isFileInput = (el) => el instanceof HTMLInputElement && el.type === 'file';
  const FORM_CONTROLS = 'input, select, textarea, option, optgroup';

  /** The element a ref names as a place for a file: a file field (or its label's), or a drop zone. */
  function fileTargetOf(target) {
    const found = resolve(target);
    if (found.error) return found;
    let el = found.el;
    if (el instanceof HTMLLabelElement && el.control && isFileInput(el.control)) el = el.control;
    if (isFileInput(el)) {
      if (el.disabled) return { error: 'bad_target', message: 'the file field is disabled' };
      return { el, kind: 'input' };
    }
    if (el.matches(FORM_CONTROLS)) {
      return { error: 'bad_target', message: 'this element is a form field, not a file field nor a drop zone' };
    }
    return { el, kind: 'drop' };
  }

  function accepts(accept, name, type) {
    const list = String(accept || '').split(',').map((s) => s.trim().toLowerCase()).filter(Boolean);
    if (!list.length) return true;
    const n = String(name).toLowerCase();
    const t = String(type || '').toLowerCase();
    return list.some((a) => (a.startsWith('.') ? n.endsWith(a) : a.endsWith('/*') ? t.startsWith(a.slice(0, -1)) : t === a));
  }

  function decode(b64) {
    if (typeof Uint8Array.fromBase64 === 'function') return Uint8Array.fromBase64(b64);
    const bin = atob(b64);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  // The worker's pieces come as messages (lib/tools-upload.js, PageFeed): only the extension's own, never a page's.
  chrome.runtime.onMessage.addListener((message, sender, reply) => {
    if (!message || message.openab !== 'filePiece' || sender.id !== chrome.runtime.id || sender.tab) return false;
    reply(api.filePiece(message.key, message.data, message.offset));
    return false;
  });

  Object.assign(api, {
    /** What the element is to an upload: `kind` 'input' or 'drop', its local id, its description and origin. */
    fileTarget(target) {
      const t = fileTargetOf(target);
      if (t.error) return t;
      const el = t.el;
      return {
        ok: true, kind: t.kind, local: idFor(el), desc: describe(el), origin: location.origin,
        multiple: t.kind === 'input' && el.multiple, accept: t.kind === 'input' ? el.accept : '',
      };
    },

    fileBegin(key, size) {
      incoming = { key, size, received: 0, parts: [] };
      return { ok: true };
    },

    /**
     * A piece of the file: the base64 of its bytes where messages are JSON; where they are cloned, a Blob (the
     * whole file, its bytes in the browser process) or its bytes.
     */
    filePiece(key, data, offset = incoming && incoming.received) {
      if (!incoming || incoming.key !== key) return { error: 'stale_ref', message: 'the page was reloaded while the file came' };
      const known = typeof data === 'string' || data instanceof Uint8Array || data instanceof Blob;
      if (!known || offset !== incoming.received) {
        incoming = null;
        return { error: 'action_failed', message: known ? 'a piece of the file came out of order' :
          'a piece of the file came in a form this page script does not read' };
      }
      const piece = typeof data === 'string' ? decode(data) : data;
      const length = piece instanceof Blob ? piece.size : piece.length;
      if (incoming.received + length > incoming.size || incoming.parts.length >= MAX_PIECES) {
        incoming = null;
        return { error: 'action_failed', message: 'more bytes came than the file has' };
      }
      incoming.parts.push(piece);
      incoming.received += length;
      return { ok: true, received: incoming.received };
    },

    fileDiscard(key) {
      if (incoming && incoming.key === key) incoming = null;
      return { ok: true };
    },

    /**
     * Sets the file on the element, if it is still the one described (`expected`: kind, fingerprint, origin): a
     * file field gets it as its files, with input and change events; a drop zone gets dragenter, dragover and a drop
     * holding it. `meta`: {name, type}.
     */
    fileCommit(key, target, expected, meta) {
      const t = incoming;
      incoming = null;
      if (!t || t.key !== key) return { error: 'stale_ref', message: 'the page was reloaded while the file came' };
      if (t.received !== t.size) return { error: 'action_failed', message: 'the file did not arrive whole' };
      const found = fileTargetOf(target);
      if (found.error) return { error: 'stale_ref', message: found.message };
      const el = found.el;
      if (found.kind !== expected.kind || describe(el).fingerprint !== expected.fingerprint || location.origin !== expected.origin) {
        return { error: 'stale_ref', message: 'the page changed the element after it was checked' };
      }
      const file = new File(t.parts, meta.name, { type: meta.type || '', lastModified: Date.now() });
      const dt = new DataTransfer();
      dt.items.add(file);
      if (found.kind === 'input') {
        // As a person's pick: the selection is replaced (a field that takes several gets this one file).
        el.files = dt.files;
        el.dispatchEvent(new Event('input', { bubbles: true, composed: true }));
        el.dispatchEvent(new Event('change', { bubbles: true }));
        return { ok: true, kind: 'input', set: el.files.length === 1, accepted: accepts(el.accept, meta.name, meta.type) };
      }
      const r = el.getBoundingClientRect();
      const at = { clientX: Math.round(r.left + r.width / 2), clientY: Math.round(r.top + r.height / 2) };
      const opts = { bubbles: true, cancelable: true, composed: true, dataTransfer: dt, ...at };
      el.dispatchEvent(new DragEvent('dragenter', opts));
      el.dispatchEvent(new DragEvent('dragover', opts));
      // A zone that takes the drop cancels it (the browser would open the file otherwise).
      const taken = !el.dispatchEvent(new DragEvent('drop', opts));
      return { ok: true, kind: 'drop', taken };
    },
  });
})();
