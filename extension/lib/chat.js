// The conversation as the panel shows it, folded from ACP session/update notifications.
// Held by the service worker so a panel opened later (or re-opened) sees the same history.

const MAX_ITEMS = 400;
const MAX_TEXT = 200_000;

function textOf(content) {
  if (!content) return '';
  if (Array.isArray(content)) return content.map(textOf).join('');
  if (content.type === 'text') return String(content.text ?? '');
  if (content.type === 'content') return textOf(content.content);
  if (content.type === 'diff') return `(diff of ${content.path || 'a file'})`;
  if (content.type === 'image') return '(image)';
  if (content.type === 'resource_link') return `${content.name || ''} ${content.uri || ''}`.trim();
  return '';
}

const STORE = 'openab.transcript';
const SAVED_ITEMS = 200;
const SAVED_TEXT = 20_000;
const SAVE_DELAY_MS = 500;

export class Transcript {
  constructor(onItem) {
    this.onItem = onItem; // (item) => void, for every added or changed item
    this.items = [];
    this._next = 1;
    this._toolIds = new Map();
    this._saveTimer = null;
  }

  /**
   * Chrome stops an idle service worker (say, while the gateway is down) and its memory with it;
   * the conversation is kept in session storage so the panel still shows it afterwards.
   */
  async restore() {
    const saved = (await chrome.storage.session.get(STORE))[STORE];
    if (!saved || !Array.isArray(saved.items)) return;
    // A turn cannot outlive the worker that ran it: nothing restored is still streaming.
    this.items = saved.items.map((i) => ({ ...i, open: false }));
    this._next = Math.max(0, ...this.items.map((i) => i.id)) + 1;
    for (const item of this.items) if (item.kind === 'tool' && item.toolCallId) this._toolIds.set(item.toolCallId, item);
  }

  _save() {
    if (this._saveTimer) return;
    this._saveTimer = setTimeout(() => {
      this._saveTimer = null;
      const items = this.items.slice(-SAVED_ITEMS).map((i) =>
        typeof i.text === 'string' && i.text.length > SAVED_TEXT ? { ...i, text: i.text.slice(-SAVED_TEXT) } : i);
      chrome.storage.session.set({ [STORE]: { items } }).catch((e) => console.warn('openab: transcript not saved', e.message));
    }, SAVE_DELAY_MS);
  }

  _changed(item) {
    this.onItem(item);
    this._save();
  }

  clear() {
    this.items = [];
    this._toolIds.clear();
    this._save();
  }

  add(kind, fields) {
    const item = { id: this._next++, kind, at: Date.now(), ...fields };
    if (typeof item.text === 'string') item.text = item.text.slice(0, MAX_TEXT);
    this.items.push(item);
    if (this.items.length > MAX_ITEMS) this.items.splice(0, this.items.length - MAX_ITEMS);
    this._changed(item);
    return item;
  }

  _update(item, fields) {
    Object.assign(item, fields);
    if (typeof item.text === 'string' && item.text.length > MAX_TEXT) item.text = item.text.slice(0, MAX_TEXT);
    this._changed(item);
  }

  /** Appends a streamed chunk to the open item of that kind, or starts one. */
  _append(kind, chunk) {
    const last = this.items[this.items.length - 1];
    if (last && last.kind === kind && last.open) this._update(last, { text: last.text + chunk });
    else this.add(kind, { text: chunk, open: true });
  }

  /** Closes streamed items so the next turn starts new ones. */
  endTurn(stopReason) {
    for (const item of this.items) if (item.open) this._update(item, { open: false });
    if (stopReason && stopReason !== 'end_turn') this.add('system', { text: `Stopped: ${stopReason}` });
  }

  apply(update) {
    if (!update || typeof update !== 'object') return;
    switch (update.sessionUpdate) {
      case 'agent_message_chunk':
        this._append('agent', textOf(update.content));
        break;
      case 'agent_thought_chunk':
        this._append('thought', textOf(update.content));
        break;
      case 'user_message_chunk':
        break; // our own prompt, already shown
      case 'tool_call': {
        const id = String(update.toolCallId || '');
        const existing = this._toolIds.get(id);
        const fields = { title: String(update.title || 'tool call'), status: update.status || 'pending', toolKind: update.kind || '' };
        if (existing) this._update(existing, fields);
        else this._toolIds.set(id, this.add('tool', { ...fields, text: '', toolCallId: id }));
        this._closeStreams();
        break;
      }
      case 'tool_call_update': {
        const item = this._toolIds.get(String(update.toolCallId || ''));
        const fields = {};
        if (update.title) fields.title = String(update.title);
        if (update.status) fields.status = update.status;
        if (update.content) fields.text = textOf(update.content).slice(0, 2000);
        if (item) this._update(item, fields);
        else if (update.toolCallId) {
          const id = String(update.toolCallId);
          this._toolIds.set(id, this.add('tool', { title: 'tool call', status: 'pending', text: '', toolCallId: id, ...fields }));
        }
        break;
      }
      case 'plan': {
        const entries = Array.isArray(update.entries) ? update.entries : [];
        const text = entries.map((e) => `${e.status === 'completed' ? '✓' : e.status === 'in_progress' ? '…' : '○'} ${e.content}`).join('\n');
        const last = [...this.items].reverse().find((i) => i.kind === 'plan' && i.open);
        if (last) this._update(last, { text });
        else this.add('plan', { text, open: true });
        break;
      }
      default:
        break; // modes, commands, session info: nothing to show
    }
  }

  _closeStreams() {
    // Text after a tool call is a new paragraph, not a continuation of the text before it.
    const last = this.items[this.items.length - 1];
    for (const item of this.items) if (item.open && item.kind !== 'plan' && item !== last) this._update(item, { open: false });
    const prev = this.items[this.items.length - 2];
    if (prev && prev.open && prev.kind !== 'plan') this._update(prev, { open: false });
  }
}
