// The conversation as the panel shows it, folded from ACP session/update notifications.
// Held by the service worker so a panel opened later (or re-opened) sees the same history.
// One conversation per gateway and session: the one on screen is that of the session the socket
// holds, and another gateway's is kept (bounded) for when the person switches back.

import { onlyReads, stepCall } from './catalogue.js';
import { META } from './protocol.js';

const MAX_ITEMS = 400;
const MAX_TEXT = 200_000;
// A tool row's details: what the agent passed and what came back, text only and bounded.
const MAX_INPUT = 4000;
const MAX_RESULT = 8000;
// Screenshots the agent took, shown as thumbnails; only the newest keep their pixels.
const IMAGE_TYPES = new Set(['image/jpeg', 'image/png', 'image/webp', 'image/gif']);
const MAX_IMAGE_CHARS = 1_500_000; // base64: about 1.1 MB of image
const IMAGES_PER_CALL = 4;
const IMAGES_KEPT = 8;

function textOf(content) {
  if (!content) return '';
  if (Array.isArray(content)) return content.map(textOf).filter(Boolean).join('\n');
  if (content.type === 'text') return String(content.text ?? '');
  if (content.type === 'content') return textOf(content.content);
  if (content.type === 'diff') return `(diff of ${content.path || 'a file'})`;
  if (content.type === 'image') return '(image)';
  if (content.type === 'resource_link') return `${content.name || ''} ${content.uri || ''}`.trim();
  return '';
}

/** The image blocks among a tool's content (ACP `content` wrappers or bare MCP blocks), checked. */
export function imagesOf(content) {
  const out = [];
  for (const block of Array.isArray(content) ? content : []) {
    const b = block && block.type === 'content' ? block.content : block;
    if (!b || b.type !== 'image' || out.length >= IMAGES_PER_CALL) continue;
    const mimeType = String(b.mimeType || '');
    const data = typeof b.data === 'string' ? b.data : '';
    if (!IMAGE_TYPES.has(mimeType)) out.push({ mimeType: mimeType.slice(0, 40), dropped: 'not a picture type the panel shows' });
    else if (!data || data.length > MAX_IMAGE_CHARS || !/^[A-Za-z0-9+/]+={0,2}$/.test(data)) {
      out.push({ mimeType, dropped: data.length > MAX_IMAGE_CHARS ? 'too large to keep' : 'not valid base64' });
    } else out.push({ mimeType, data });
  }
  return out;
}

/** A tool's arguments as the row shows them: indented JSON (or the text it was), bounded. */
function inputText(raw) {
  if (raw === undefined || raw === null) return '';
  let text;
  try {
    text = typeof raw === 'string' ? raw : JSON.stringify(raw, null, 2);
  } catch {
    text = String(raw);
  }
  return text.length > MAX_INPUT ? `${text.slice(0, MAX_INPUT)}\n… (${text.length - MAX_INPUT} more characters)` : text;
}

function resultText(update) {
  let text = update.content ? textOf(update.content) : '';
  // An agent that reports only the raw result (MCP's CallToolResult) still gets a row with it.
  if (!text && update.rawOutput !== undefined) {
    const raw = update.rawOutput;
    text = raw && Array.isArray(raw.content) ? textOf(raw.content) : inputText(raw);
  }
  return text.length > MAX_RESULT ? `${text.slice(0, MAX_RESULT)}\n… (${text.length - MAX_RESULT} more characters)` : text;
}

// Local storage, not session storage: Chrome empties session storage when the browser restarts, and the person
// who reopens it must find the chat they left (bounded as below; New chat and clearing remove it). It holds what
// the panel showed, never the gateway's key.
const storage = () => chrome.storage.local;
const INDEX = 'openab.transcripts';
const STORE = 'openab.transcript:';
const SAVED_CONVERSATIONS = 3;
const SAVED_ITEMS = 200;
const SAVED_TEXT = 20_000;
const SAVED_IMAGES = 4;
// Local storage holds 10 MB for the whole extension: three conversations of at most 2.5 M characters each
// leave room for the rest.
const SAVED_CHARS = 2_500_000;
const SAVE_DELAY_MS = 500;
// A saved conversation's title in the Past chats list: the person's first message, one line's worth.
const TITLE_CHARS = 120;

const GUARD_META = META.guard;
const UNFINISHED = new Set(['pending', 'in_progress']);
// A step as the pod's journal tells it (`_openab/journal`, docs/journal.md).
const JOURNAL_STATES = new Set(['prepared', 'running', 'committed', 'failed', 'effect_unknown']);
const MAX_JOURNAL_STEPS = 200;

const bounded = (v, max) => (typeof v === 'string' && v && v.length <= max ? v : '');

/** A journal step checked field by field, or null: it came from the pod, but it only ever becomes words on a row. */
function journalStep(raw) {
  if (!raw || typeof raw !== 'object') return null;
  const action = bounded(raw.action, 100);
  const tool = bounded(raw.tool, 64);
  const state = JOURNAL_STATES.has(raw.state) ? raw.state : '';
  if (!action || !tool || !state) return null;
  const step = { action, tool, state, site: bounded(raw.site, 200), at: Number.isFinite(raw.at) ? raw.at : String(raw.at ?? '').slice(0, 40) };
  const toolCallId = bounded(raw.toolCallId, 200);
  if (toolCallId) step.toolCallId = toolCallId;
  const again = bounded(raw.deduplicated, 100);
  if (again) step.deduplicated = again;
  return step;
}

/**
 * Which row a journal step is about, by its action; a re-issued call answered from the journal is a row of its
 * own (the agent's call for it), whatever action id it names.
 */
function journalKey(step) {
  return step.deduplicated ? `again\n${step.toolCallId || `${step.action}@${step.at}`}` : step.action;
}

function newTurn() {
  return crypto.randomUUID();
}

/** A tool row's key: its turn and the agent's id. Rows saved before turns were kept have no turn. */
function toolCallKey(turn, toolCallId) {
  return `${turn || ''}\n${toolCallId}`;
}

function gatewayOf(key) {
  return key.slice(0, key.lastIndexOf('#'));
}

/** What is kept of a conversation in storage: the newest items that fit, the newest pictures. */
export function savedItems(items) {
  const out = [];
  let chars = 0;
  let images = 0;
  for (let i = items.length - 1; i >= 0 && out.length < SAVED_ITEMS; i--) {
    let item = items[i];
    if (typeof item.text === 'string' && item.text.length > SAVED_TEXT) item = { ...item, text: item.text.slice(-SAVED_TEXT) };
    if (item.images) {
      item = { ...item, images: item.images.map((im) => (im.data && images++ < SAVED_IMAGES ? im : dropped(im))) };
    }
    chars += JSON.stringify(item).length;
    if (chars > SAVED_CHARS) break;
    out.push(item);
  }
  return out.reverse();
}

/** A conversation's title: the person's first message, on one line, bounded; '' before they said anything. */
function titleOf(items) {
  const first = items.find((i) => i.kind === 'user' && typeof i.text === 'string' && i.text.trim());
  return first ? first.text.replace(/\s+/g, ' ').trim().slice(0, TITLE_CHARS) : '';
}

function dropped(image) {
  return image.data ? { mimeType: image.mimeType, dropped: 'an older screenshot, no longer kept' } : image;
}

export class Transcript {
  /**
   * @param {(item) => void} onItem for every added or changed item
   * @param {(items) => void} onReset when the whole conversation on screen is another one
   */
  constructor(onItem, onReset = () => {}) {
    this.onItem = onItem;
    this.onReset = onReset;
    this.items = [];
    this.key = null; // `${gateway}#${sessionId}` of the conversation on screen; null: none yet
    this._index = []; // saved conversations, newest first: [{key, at, title, agent}]
    this._keep = null; // the key of the conversation a switch on its gateway keeps (lib/panels.js, keepCurrent)
    this.agent = ''; // the agent of the conversation on screen, kept with it for the Past chats list
    this._next = 1;
    this._toolIds = new Map(); // toolCallKey(turn, toolCallId) -> item
    this._steps = new Map(); // journalKey(step) -> the item that shows it
    // The turn the agent's updates belong to, new with each prompt and with each worker. An agent's ids are
    // unique within a turn only: one restarted with the gateway (or a CLI that counts again) reuses them, and
    // its steps must not overwrite the rows of an earlier turn.
    this._turn = newTurn();
    this._saveTimer = null;
    this._loads = 0; // a conversation being loaded is shown only if it is still the one to show
  }

  /**
   * Chrome stops an idle service worker (say, while the gateway is down) and its memory with it, and the
   * person may close the browser: the conversation is kept in storage so the panel still shows it afterwards.
   */
  async restore() {
    const index = (await storage().get(INDEX))[INDEX];
    if (!index || !Array.isArray(index.keys)) return;
    this._index = index.keys.filter((k) => k && typeof k.key === 'string').slice(0, SAVED_CONVERSATIONS)
      .map((k) => ({ key: k.key, at: Number(k.at) || 0, title: bounded(k.title, TITLE_CHARS), agent: bounded(k.agent, 64) }));
    if (typeof index.current !== 'string' || this.key !== null || this.items.length) return;
    const items = await this._load(index.current);
    if (this.key !== null || this.items.length) return; // the socket was quicker
    this.key = index.current;
    this._show(items);
  }

  async _load(key) {
    const saved = (await storage().get(STORE + key))[STORE + key];
    // A turn cannot outlive the worker that ran it: nothing restored is still streaming, and a step saved while it
    // ran never finished here (the row must not say "Opening …" for ever).
    return saved && Array.isArray(saved.items) ? saved.items.map((i) => ({
      ...i, open: false, ...(i.kind === 'tool' && UNFINISHED.has(i.status) && { status: 'interrupted' }),
    })) : [];
  }

  _show(items) {
    // New ids: a panel keys its rows by id, and these come from another numbering.
    this.items = items.map((i) => ({ ...i, id: this._next++ }));
    this._toolIds.clear();
    this._steps.clear();
    for (const item of this.items) {
      if (item.kind === 'tool' && item.toolCallId) this._toolIds.set(toolCallKey(item.turn, item.toolCallId), item);
      if (item.kind === 'tool' && item.journal) this._steps.set(journalKey(item.journal), item);
    }
    this.onReset(this.items);
  }

  /**
   * Shows the conversation of `sessionId` on `gateway`. `sessionId` null means none is held yet:
   * the conversation on screen stays while that gateway reconnects, and goes if it is another one.
   * Another session on the same gateway replaces the previous one: the previous conversation is kept
   * when the person asked for the change (New chat, Past chats: keepCurrent), else forgotten (a gateway
   * that no longer had it). Resolves once a saved conversation being switched to is on screen.
   */
  async follow(gateway, sessionId, agent = '') {
    if (!gateway) return;
    if (sessionId && typeof agent === 'string' && agent) this.agent = agent.slice(0, 64);
    if (!sessionId) {
      if (this.key !== null && gatewayOf(this.key) !== gateway) await this._switch(null);
      return;
    }
    const key = `${gateway}#${sessionId}`;
    if (key === this.key) return;
    if (this.key === null && !this._index.some((k) => k.key === key)) {
      this.key = key; // what was said before the first session (say, "not connected") belongs to it
      this._save();
      return;
    }
    await this._switch(key);
  }

  async _switch(key) {
    const previous = this.key;
    const kept = previous !== null && previous === this._keep;
    this._keep = null;
    if (!kept && previous !== null && key !== null && gatewayOf(previous) === gatewayOf(key)) this._forget(previous);
    else this.flush();
    this.key = key;
    this._show([]);
    this._save();
    if (key === null) return;
    const generation = ++this._loads;
    try {
      const items = await this._load(key);
      // Anything said meanwhile comes after the saved conversation.
      if (this.key === key && generation === this._loads && items.length) this._show([...items, ...this.items]);
    } catch (e) {
      console.warn('openab: transcript not restored', e.message);
    }
  }

  /**
   * The conversation on screen stays saved when the next one on its gateway replaces it (New chat, or going back to
   * a past chat): it is then one of the Past chats. A replacement nobody asked for (the gateway took a session
   * up afresh) still forgets it.
   */
  keepCurrent(keep = true) {
    this._keep = keep ? this.key : null;
  }

  /**
   * The saved conversations of `gateway`, newest first, as the Past chats list shows them: its session, its title
   * (the person's first message), when it was last used, and whether it is the one on screen. Bounded by
   * SAVED_CONVERSATIONS; the titles are the person's words, only ever shown as text.
   */
  past(gateway) {
    return this._index.filter((k) => gatewayOf(k.key) === gateway).map((k) => ({
      key: k.key, sessionId: k.key.slice(k.key.lastIndexOf('#') + 1), at: k.at || 0,
      title: k.title || (k.key === this.key ? titleOf(this.items) : ''), agent: k.agent || '', current: k.key === this.key,
    }));
  }

  /** A saved conversation's items (read-only: nothing on screen changes). */
  async saved(key) {
    if (!this._index.some((k) => k.key === key)) return [];
    return (await this._load(key)).map((i, n) => ({ ...i, id: n + 1 }));
  }

  /** The current conversation's entry in the index, told its title and that it was used now. */
  _describe() {
    const entry = this._index.find((k) => k.key === this.key);
    if (!entry) return;
    entry.at = Date.now();
    if (this.agent) entry.agent = this.agent;
    if (!entry.title) entry.title = titleOf(this.items);
  }

  _forget(key) {
    clearTimeout(this._saveTimer);
    this._saveTimer = null;
    this._index = this._index.filter((k) => k.key !== key);
    storage().remove(STORE + key).catch(() => {});
  }

  _touch() {
    const dropped = [];
    const entry = this._index.find((k) => k.key === this.key) || { key: this.key, title: '', agent: '' };
    this._index = [{ ...entry, at: Date.now() }, ...this._index.filter((k) => k.key !== this.key)];
    while (this._index.length > SAVED_CONVERSATIONS) dropped.push(STORE + this._index.pop().key);
    if (dropped.length) storage().remove(dropped).catch(() => {});
  }

  /** Writes a pending save now (before the conversation on screen changes); resolves once stored. */
  async flush() {
    if (!this._saveTimer) return;
    clearTimeout(this._saveTimer);
    this._saveTimer = null;
    await this._write();
  }

  async _write() {
    if (this.key !== null) this._describe();
    const index = { current: this.key, keys: this._index };
    const data = { [INDEX]: index };
    if (this.key !== null) data[STORE + this.key] = { items: savedItems(this.items) };
    try {
      await storage().set(data);
    } catch (e) {
      console.warn('openab: transcript not saved', e.message);
    }
  }

  _save() {
    if (this._saveTimer) return;
    if (this.key !== null && this._index[0]?.key !== this.key) this._touch();
    this._saveTimer = setTimeout(() => {
      this._saveTimer = null;
      this._write();
    }, SAVE_DELAY_MS);
  }

  _changed(item) {
    this.onItem(item);
    this._save();
  }

  clear() {
    this.items = [];
    this._toolIds.clear();
    this._steps.clear();
    this._save();
  }

  add(kind, fields) {
    if (kind === 'user') this._turn = newTurn(); // the person's prompt starts a turn
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

  /**
   * Closes streamed items so the next turn starts new ones. `note`: what to say instead of "Stopped: <reason>";
   * `lost`: the steps it was running that may have happened (lostSteps), which the note names.
   */
  endTurn(stopReason, note = '', lost = []) {
    for (const item of this.items) if (item.open) this._update(item, { open: false });
    if (note) this.add('system', { text: note, ...(lost.length && { lost }) });
    else if (stopReason && stopReason !== 'end_turn') this.add('system', { text: `Stopped: ${stopReason}` });
  }

  /** The fields of a tool row that a tool_call or tool_call_update carries. */
  _toolFields(update) {
    const fields = {};
    if (update.title) fields.title = String(update.title);
    if (update.status) fields.status = String(update.status);
    if (update.kind) fields.toolKind = String(update.kind);
    if (update.rawInput !== undefined) fields.input = inputText(update.rawInput);
    if (update.content || update.rawOutput !== undefined) fields.text = resultText(update);
    const raw = update.rawOutput;
    // What the guard decided, where the agent relays the tool result whole (lib/tools.js, GUARD_META).
    const guard = raw && typeof raw === 'object' && raw._meta && typeof raw._meta === 'object' ? raw._meta[GUARD_META] : undefined;
    if (typeof guard === 'string') fields.guard = guard.slice(0, 40);
    const images = imagesOf(update.content || (raw && Array.isArray(raw.content) ? raw.content : []));
    if (images.length) fields.images = images;
    return fields;
  }

  /** Only the newest pictures keep their pixels: a long session must not hold every screenshot. */
  _keepImages() {
    let kept = 0;
    for (let i = this.items.length - 1; i >= 0; i--) {
      const item = this.items[i];
      if (!item.images || !item.images.some((im) => im.data)) continue;
      if (kept >= IMAGES_KEPT) this._update(item, { images: item.images.map(dropped) });
      else kept += item.images.filter((im) => im.data).length;
    }
  }

  _tool(update, fields) {
    const id = String(update.toolCallId || '');
    const key = toolCallKey(this._turn, id);
    const existing = this._toolIds.get(key);
    if (existing) this._update(existing, fields);
    else if (id) {
      const item = this.add('tool', { title: 'tool call', status: 'pending', text: '', toolCallId: id, turn: this._turn, ...fields });
      this._toolIds.set(key, item);
    }
    if (fields.images) this._keepImages();
  }

  /**
   * What the pod's journal says of steps (`named`: the element's name of each, by action, as this browser recorded
   * it): each on the row of the agent's call for it (the same toolCallId), or on a
   * row of its own when there is none and the person must know of it (a step that may or may not have happened,
   * listed when the session is resumed after the pod restarted; a call answered from the journal).
   */
  journal(steps, named = new Map()) {
    if (!Array.isArray(steps)) return;
    for (const raw of steps.slice(0, MAX_JOURNAL_STEPS)) {
      const step = journalStep(raw);
      if (!step) continue;
      // The element's name as this browser recorded it when it did the step (its receipt): the row names it so.
      const element = bounded(named.get(step.action), 200);
      if (element) step.element = element;
      const key = journalKey(step);
      let item = this._steps.get(key) || (step.toolCallId ? this._rowOf(step.toolCallId) : this._rowFor(step));
      if (item) this._update(item, { journal: item.journal && item.journal.lost ? { ...step, lost: true } : step });
      else if (step.state === 'effect_unknown' || step.deduplicated) {
        item = this.add('tool', { title: step.tool, status: step.state === 'failed' ? 'failed' : 'completed', text: '', journal: step });
      } else continue;
      this._steps.set(key, item);
    }
  }

  /**
   * The steps of the turn still running when the connection dropped (or the gateway shut down, or the worker
   * stopped): each may or may not have happened. Marked so on its own row, which the pod's journal takes up when it
   * lists the step after the reconnect (by the agent's call id, or after a pod restart by the tool: one row a step);
   * returned as `{title, input}`, for the note that names them.
   */
  lostSteps() {
    const lost = [];
    for (const item of this.items) {
      if (item.kind !== 'tool' || item.turn !== this._turn || !UNFINISHED.has(item.status)) continue;
      const call = stepCall(item.title, item.input);
      if (!call || onlyReads(call.tool, call.args)) {
        this._update(item, { status: 'interrupted' }); // a read, or not the browser's: nothing may have happened
        continue;
      }
      this._update(item, { journal: { ...item.journal, tool: call.tool, state: 'effect_unknown', lost: true } });
      lost.push({ title: item.title, input: item.input || '' });
    }
    return lost;
  }

  /**
   * The row of a step the journal names without the agent's call id (the pod cannot always tell it): one row a
   * step. A step lost with the connection (or listed after a pod restart) is the row marked lost for its tool; any
   * other is the agent's newest call of its tool in this turn still running that no step of the journal has taken
   * yet (the agent shows a call before it makes it, and the browser runs one at a time).
   */
  _rowFor(step) {
    const lost = this._lostRowOf(step);
    if (lost) return lost;
    for (let i = this.items.length - 1; i >= 0; i--) {
      const item = this.items[i];
      if (item.kind !== 'tool' || item.turn !== this._turn || item.journal || !UNFINISHED.has(item.status)) continue;
      if (stepCall(item.title, item.input)?.tool === step.tool) return item;
    }
    return null;
  }

  /** A row of a step the connection dropped in that the journal has not named yet, for its step of `step.tool`. */
  _lostRowOf(step) {
    if (step.deduplicated || step.state !== 'effect_unknown') return null;
    for (let i = this.items.length - 1; i >= 0; i--) {
      const item = this.items[i];
      const j = item.journal;
      if (item.kind !== 'tool' || (j && j.action)) continue;
      // Marked when the connection dropped, or saved while it ran by a worker that stopped since.
      const lost = j ? j.lost && j.tool : item.status === 'interrupted' && stepCall(item.title, item.input)?.tool;
      if (lost === step.tool) return item;
    }
    return null;
  }

  /** The row of the journal's step `action`, if one shows it, takes `element` as its element's name. */
  named(action, element) {
    const item = this._steps.get(action);
    const name = bounded(element, 200);
    if (item && name && item.journal && item.journal.element !== name) this._update(item, { journal: { ...item.journal, element: name } });
  }

  /** The newest row of the agent's call `toolCallId`: this turn's, else an earlier one's. */
  _rowOf(toolCallId) {
    const mine = this._toolIds.get(toolCallKey(this._turn, toolCallId));
    if (mine) return mine;
    for (let i = this.items.length - 1; i >= 0; i--) {
      const item = this.items[i];
      if (item.kind === 'tool' && item.toolCallId === toolCallId) return item;
    }
    return null;
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
      case 'tool_call':
        this._tool(update, { title: 'tool call', status: 'pending', ...this._toolFields(update) });
        this._closeStreams();
        break;
      case 'tool_call_update':
        this._tool(update, this._toolFields(update));
        break;
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
