// The conversation's rows in the panel. Everything in an item came from the agent, and through it
// from web pages: it reaches the DOM as text nodes (the agent's markdown through markdown.js, which
// builds elements, never HTML), and pictures only as data: URLs of the types chat.js checked.

import { render as markdown } from './markdown.js';
import { el } from './dom.js';
import { describeStep } from './steps.js';
import { stepCall } from '../lib/catalogue.js';

const STATUS_WORDS = { pending: 'waiting', in_progress: 'running', completed: 'completed', failed: 'failed', declined: 'declined',
  interrupted: 'not finished', unknown: 'unknown', deduplicated: 'not repeated' };
const MARKDOWN_KINDS = new Set(['agent', 'thought']);
// A streamed reply is parsed again as it grows: at most this often, not on every chunk.
const RENDER_EVERY_MS = 40;

function imageUrl(image) {
  return `data:${image.mimeType};base64,${image.data}`;
}

/** The words a note says of the steps that may have happened (chat.js lostSteps): what each was asked to do. */
function lostWords(lost) {
  const names = lost.slice(0, 4).map((s) => describeStep({ kind: 'tool', title: String(s.title || ''),
    input: String(s.input || ''), journal: { state: 'effect_unknown' } }).words);
  const more = lost.length > 4 ? ` and ${lost.length - 4} more` : '';
  return ` ${names.join('; ')}${more} may or may not have happened: check the page before you ask for it again.`;
}

export class TranscriptView {
  /** `send(msg)`: a message to the worker (a row's Check the page). */
  constructor(log, send = () => {}) {
    this.log = log;
    this.send = send;
    this.rows = new Map(); // transcript item id -> element
    this._pending = new Map(); // row -> markdown text not rendered yet
    this._timer = null;
    this._lightbox = null;
    // Whether the person is reading the end of the conversation: kept as they scroll, not measured when a row
    // comes, because the log's own box shrinks when the agent's tab list or a card appears under it, and a
    // measure taken then reads "scrolled up" though the person never scrolled.
    this._atEnd = true;
    log.addEventListener('scroll', () => {
      this._atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 40;
    }, { passive: true });
    // The log's box changes (the tab list, a card, the composer's note): the end stays in view if it was.
    if (typeof ResizeObserver === 'function') {
      new ResizeObserver(() => {
        if (this._atEnd) log.scrollTop = log.scrollHeight;
      }).observe(log);
    }
  }

  /** Renders every item afresh: another conversation, or the same one after the panel reopened. */
  showAll(items) {
    this.rows.clear();
    this._pending.clear();
    this.log.replaceChildren();
    for (const item of items) this.show(item);
  }

  show(item) {
    let row = this.rows.get(item.id);
    const fresh = !row;
    if (item.kind === 'tool') {
      if (fresh) row = this._toolRow();
      this._fillTool(row, item);
    } else if (item.kind === 'event') {
      // Something that happened to the chat (its session resumed), at its place in time: a line, not a message.
      if (fresh) row = el('div');
      row.className = 'event';
      const at = el('time', '', Number.isFinite(item.at)
        ? new Date(item.at).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }) : '');
      if (Number.isFinite(item.at)) at.dateTime = new Date(item.at).toISOString();
      const said = el('span', '', `${item.text || ''}${at.textContent ? ' at ' : ''}`);
      said.append(at);
      row.replaceChildren(said);
    } else {
      if (fresh) row = el('div');
      const md = MARKDOWN_KINDS.has(item.kind);
      row.className = `msg ${item.kind}${md ? ' md' : ''}`;
      if (!md) row.textContent = (item.text || '') + (Array.isArray(item.lost) && item.lost.length ? lostWords(item.lost) : '');
      else if (fresh) row.replaceChildren(markdown(item.text || ''));
      else this._later(row, item.text || '');
    }
    row.dataset.kind = item.kind;
    if (fresh) {
      this.rows.set(item.id, row);
      this._keepBottom(() => this.log.append(row));
    }
  }

  /** Runs `change` and, if the person was reading the log's end, keeps it in view. */
  _keepBottom(change) {
    const log = this.log;
    const stick = this._atEnd || log.scrollTop + log.clientHeight >= log.scrollHeight - 40;
    change();
    if (stick) {
      log.scrollTop = log.scrollHeight;
      this._atEnd = true;
    }
  }

  _later(row, text) {
    this._pending.set(row, text);
    if (this._timer) return;
    this._timer = setTimeout(() => {
      this._timer = null;
      const pending = [...this._pending];
      this._pending.clear();
      this._keepBottom(() => {
        for (const [r, t] of pending) r.replaceChildren(markdown(t));
      });
    }, RENDER_EVERY_MS);
  }

  _toolRow() {
    const row = el('div');
    const details = el('details', 'step-details');
    const summary = el('summary', 'step-head');
    summary.append(el('span', 'title'), el('span', 'status'));
    const body = el('div', 'step-body');
    // The agent's own name for the step (a tool name, "Read file"), under the words the row says it in.
    body.append(el('div', 'step-label', 'Step'), el('pre', 'step-tool'), el('div', 'step-label', 'Arguments'), el('pre', 'step-input'),
      el('div', 'step-label', 'Result'), el('pre', 'step-result'));
    details.append(summary, body);
    // What the pod's journal says of the step (panel/steps.js), under its words.
    const note = el('div', 'journal');
    note.hidden = true;
    // Why a failed step failed, in short (panel/steps.js); the whole text is its Result, under the details.
    const why = el('div', 'why');
    why.hidden = true;
    // A step that may or may not have happened: the person looks before anyone does it again.
    const look = el('div', 'look');
    look.hidden = true;
    const check = el('button', 'quiet check-page', 'Check the page');
    check.type = 'button';
    check.addEventListener('click', () => this.send({ type: 'check-page', site: row.dataset.site || '' }));
    // The element it acted on, outlined in that tab, while it is still there (the agent's ref or selector).
    const show = el('button', 'quiet show-step', 'Show me');
    show.type = 'button';
    show.addEventListener('click', () => this.send({ type: 'show-step', site: row.dataset.site || '',
      ref: row.dataset.ref || '', selector: row.dataset.selector || '' }));
    look.append(check, show);
    row.append(details, why, note, look, el('div', 'shots'));
    return row;
  }

  _fillTool(row, item) {
    const step = describeStep(item);
    row.className = `step ${step.state}${step.browser ? ' browser' : ''}`;
    // The agent's and the page's words (a name, a URL, a key) as quoted text of their own, never as ours.
    row.querySelector('.title').replaceChildren(...step.parts.map((p) => (p.quoted ? el('q', 'quoted', p.text) : p.text)));
    row.querySelector('.status').textContent = step.status || STATUS_WORDS[step.state] || step.state;
    const note = row.querySelector('.journal');
    note.textContent = step.note || '';
    note.hidden = !step.note;
    row.querySelector('.look').hidden = step.state !== 'unknown';
    row.dataset.site = (item.journal && item.journal.site) || '';
    const target = (stepCall(item.title, item.input) || { args: {} }).args;
    row.dataset.ref = typeof target.ref === 'string' ? target.ref : '';
    row.dataset.selector = typeof target.selector === 'string' ? target.selector : '';
    row.querySelector('.show-step').hidden = !row.dataset.ref && !row.dataset.selector;
    const why = row.querySelector('.why');
    why.replaceChildren(...(step.whyParts || []).map((p) => (p.quoted ? el('q', 'quoted', p.text) : p.text)));
    why.hidden = !step.why;
    row.querySelector('.step-tool').textContent = item.title || 'tool call';
    row.querySelector('.step-input').textContent = item.input || '(none reported)';
    row.querySelector('.step-result').textContent = item.text || (item.status === 'completed' || item.status === 'failed'
      ? '(no text)' : '(not finished)');
    const images = Array.isArray(item.images) ? item.images : [];
    const signature = images.map((im) => (im.data ? `${im.data.length}:${im.data.slice(-16)}` : im.dropped)).join('|');
    const shots = row.querySelector('.shots');
    if (shots.dataset.signature === signature) return;
    shots.dataset.signature = signature;
    shots.replaceChildren(...images.map((im, n) => this._thumbnail(item, im, n)));
  }

  _thumbnail(item, image, n) {
    if (!image.data) return el('span', 'shot-gone', `(screenshot: ${image.dropped || 'not shown'})`);
    const button = el('button', 'thumb');
    button.type = 'button';
    button.title = 'Show this screenshot larger';
    const img = el('img');
    img.src = imageUrl(image);
    img.alt = `Screenshot ${n + 1} from ${describeStep(item).words}`;
    button.append(img);
    button.addEventListener('click', () => this.enlarge(image, img.alt));
    return button;
  }

  /**
   * The picture over the whole panel, until Close, a click beside it or Escape. It opens fitted to the panel's
   * width (a tall page scrolls down, it is not shrunk to the panel's height); Full size (or a click on it) shows it
   * at its own size, a pixel of it to a pixel of the screen, to scroll around in; Fit to panel goes back.
   */
  enlarge(image, alt) {
    this.closeEnlarged();
    const box = el('div', 'lightbox fit');
    box.setAttribute('role', 'dialog');
    box.setAttribute('aria-label', alt);
    const bar = el('div', 'lightbox-bar');
    const size = el('button', 'lightbox-size', 'Full size');
    size.type = 'button';
    size.setAttribute('aria-pressed', 'false');
    const close = el('button', 'lightbox-close', 'Close');
    close.type = 'button';
    bar.append(size, close);
    const view = el('div', 'lightbox-view');
    const img = el('img');
    img.src = imageUrl(image);
    img.alt = alt;
    view.append(img);
    box.append(bar, view);
    const toggle = () => {
      const full = !box.classList.contains('full');
      box.classList.toggle('full', full);
      box.classList.toggle('fit', !full);
      img.style.width = full && img.naturalWidth ? `${img.naturalWidth / (window.devicePixelRatio || 1)}px` : '';
      size.textContent = full ? 'Fit to panel' : 'Full size';
      size.setAttribute('aria-pressed', String(full));
    };
    size.addEventListener('click', toggle);
    img.addEventListener('click', toggle);
    close.addEventListener('click', () => this.closeEnlarged());
    // A click beside the picture closes it, as a click on it did before it could be seen whole.
    for (const around of [box, bar, view]) around.addEventListener('click', (e) => e.target === around && this.closeEnlarged());
    document.body.append(box);
    this._lightbox = box;
    close.focus();
  }

  closeEnlarged() {
    if (!this._lightbox) return false;
    this._lightbox.remove();
    this._lightbox = null;
    return true;
  }
}
