// Real input in the agent tab: key presses and mouse moves, presses and drags that Chrome itself delivers, with
// their default actions (a key types, moves a slider, scrolls a textarea, runs Control+A/C/V; a mouse opens a
// hover menu, drags a thumb or a card). A script's synthetic events have none of that. Chrome takes such input
// only from the debugger protocol, and an extension has one session per tab, the one lib/dialogs.js holds while
// the agent works: every event goes through it.
//
// The agent tab is usually behind the person's. Chrome handles a page's mouse moves at its next frame, and a hidden
// page draws none: each move waited for Chrome's fallback, 5 s (a drag took a minute), and handlers that run in
// animation frames (a sortable list's) never ran. Focus emulation makes the page count as focused and visible, which
// gives it a frame a second; a screencast of the tab, while an action runs, has Chrome draw it at the rate of a tab in
// front. Neither brings the tab forward or touches the person's focus: both are the agent tab's own session's, the
// screencast stops when the action ends, and the emulation with the session (lib/dialogs.js: 20 s after a call).

import { ToolError, TOOL_ERROR } from './errors.js';
import { pageLeftError, within } from './page-script.js';

export const NO_REAL_INPUT = 'no_real_input';

// What the agent can still do when no real input can be sent, in our words.
const STILL_WORKS = 'browser_click and browser_type still work as script events (a click moves no mouse, typing ' +
  'sends no keys), and browser_select_option, browser_select_text and browser_scroll work as before';
const WHY_NOT = {
  declined: "the user cancelled Chrome's debugging bar, and real mouse and key events go through the debugger; a new " +
    'chat asks again',
  unwatched: 'another debugger (such as DevTools) holds the agent tab, and Chrome lets only one send it input; the ' +
    'user can close it',
};

// Windows virtual key codes, which Chrome's default actions read (an arrow on a slider, Home in a textarea).
const KEY_CODES = {
  Backspace: 8, Tab: 9, Enter: 13, Shift: 16, Control: 17, Alt: 18, Pause: 19, CapsLock: 20, Escape: 27, ' ': 32,
  PageUp: 33, PageDown: 34, End: 35, Home: 36, ArrowLeft: 37, ArrowUp: 38, ArrowRight: 39, ArrowDown: 40,
  Insert: 45, Delete: 46, Meta: 91, ContextMenu: 93,
  ';': 186, '=': 187, ',': 188, '-': 189, '.': 190, '/': 191, '`': 192, '[': 219, '\\': 220, ']': 221, "'": 222,
};
// The protocol's modifier bits, and the order a person holds modifiers down in.
const MODIFIER_BITS = { altKey: 1, ctrlKey: 2, metaKey: 4, shiftKey: 8 };
const MODIFIER_KEYS = [['ctrlKey', 'Control'], ['altKey', 'Alt'], ['shiftKey', 'Shift'], ['metaKey', 'Meta']];
// Editing shortcuts as Chrome's own commands: on macOS Chrome runs them from the menu, not from the key, so a
// key event alone would do nothing there; with the command named, it does what the person's key would.
const EDIT_COMMANDS = { a: 'selectAll', c: 'copy', x: 'cut', v: 'paste', z: 'undo', y: 'redo' };

function keyCode(key) {
  if (Object.hasOwn(KEY_CODES, key)) return KEY_CODES[key];
  if (/^[a-z0-9]$/i.test(key)) return key.toUpperCase().charCodeAt(0);
  const f = /^F([1-9]|1[0-2])$/.exec(key);
  return f ? 111 + Number(f[1]) : 0;
}

/** The modifier bits of a press or a click's `{ctrlKey, ...}`. Pure. */
export function modifierBits(mods) {
  return Object.entries(MODIFIER_BITS).reduce((bits, [flag, bit]) => (mods[flag] ? bits | bit : bits), 0);
}

/**
 * The protocol's key events for one press (guard.js, keyPress): the modifiers held down in order, the key down
 * and up, the modifiers released. Pure.
 */
export function keyEvents(press) {
  const events = [];
  let held = 0;
  for (const [flag, key] of MODIFIER_KEYS) {
    if (!press[flag]) continue;
    held |= MODIFIER_BITS[flag];
    events.push({ type: 'rawKeyDown', key, code: `${key}Left`, windowsVirtualKeyCode: KEY_CODES[key], modifiers: held, location: 1 });
  }
  const shortcut = press.ctrlKey || press.metaKey || press.altKey;
  let key = press.key;
  // A letter's key is its capital with Shift only: "Control+A" is the A key with Control, whose key is "a".
  if (/^[a-z]$/i.test(key)) key = press.shiftKey ? key.toUpperCase() : shortcut ? key.toLowerCase() : key;
  // The text a key types: none while a shortcut modifier is held, as on a keyboard; Enter types a return.
  const text = shortcut ? '' : key === 'Enter' ? '\r' : key.length === 1 ? key : '';
  const code = keyCode(press.key);
  const main = { key, code: press.code, windowsVirtualKeyCode: code, nativeVirtualKeyCode: code, modifiers: held };
  if (press.code === 'NumpadEnter') main.location = 3;
  const command = (press.ctrlKey || press.metaKey) && !press.altKey && EDIT_COMMANDS[press.key.toLowerCase()];
  const commands = command === 'undo' && press.shiftKey ? ['redo'] : command ? [command] : [];
  events.push({ ...main, type: text ? 'keyDown' : 'rawKeyDown', ...(text && { text, unmodifiedText: text }),
    ...(commands.length && { commands }) });
  events.push({ ...main, type: 'keyUp' });
  for (const [flag, k] of [...MODIFIER_KEYS].reverse()) {
    if (!press[flag]) continue;
    held &= ~MODIFIER_BITS[flag];
    events.push({ type: 'keyUp', key: k, code: `${k}Left`, windowsVirtualKeyCode: KEY_CODES[k], modifiers: held, location: 1 });
  }
  return events;
}

// A drag moves in steps, as a hand does: pages start a drag only past a few pixels, and a slider follows each. A
// step waits a frame, so a list that handles moves in animation frames sees each, and the hand rests on the target
// a moment before letting go, as a list makes room only once it has seen the pointer there.
const DRAG_STEPS = 12;
const FRAME_MS = 17;
const REST_MS = 50;
const BUTTONS = { left: 1, right: 2, middle: 4 };
// Typing sends each character's keys without waiting for each answer (Chrome keeps their order): a chunk at a time.
const TYPE_CHUNK = 64;
// Long text (a millisecond a character as keys) goes in faster: its first character and its last TAIL as keys, so
// the page's focus check (the gate) and its key listeners (an autocomplete) see typing, the rest as one insertion,
// as a paste's. LONG_TEXT characters at most are all keys.
const LONG_TEXT = 1_000;
const TAIL = 16;
// Characters typed as text, not keys: a line break or a tab would be Enter or Tab, which submit or move the focus.
const AS_TEXT = /[\r\n\t]/;
// What the page's own script hears of typing. Where it listens for none of it on the way to the focused field (the
// field, the elements and shadow roots around it, the document, the window), keys and one insertion leave the same
// page, and the insertion costs one answer from the page where keys cost one a character: the first character is a
// key (the gate in page/agent.js checks the focus on it, and holds the insertion as it holds keys), the rest one
// insertion. The listeners are the page's own, listed by the protocol for its main world's objects (ours, in our
// isolated world, are not listed for them). The look's answers from the page come after any key already sent (the
// page handles its input first), so it goes before the second key: a page that listens pays them, and text shorter
// than QUIET_MIN, where they would cost about what keys do, is all keys. It is two answers where the page listens
// on no element at all (the field's document and window, then their listeners and all of the document's elements'
// in one), and where it listens on some element, three more to walk the way to the field, node by node. The
// document and window objects are kept for the next look in the same document (a form's next field): one answer
// then, for the listeners as they are now and whether a field has the focus.
const HEARD = new Set(['keydown', 'keypress', 'keyup', 'beforeinput', 'input', 'textInput', 'compositionstart',
  'compositionupdate', 'compositionend', 'selectionchange', 'select']);
const QUIET_MIN = 10;
const LISTENERS = 'openab-listeners'; // the object group the look holds its objects in, let go of after it
const KEPT = 'openab-listeners-kept'; // the group of the document and window kept for the next look
const KEPT_TABS = 64; // tabs whose objects are kept, those kept longest let go of first
// The look runs the page's own getters (its main world's); one that takes longer is given up, and the text is keys.
const LISTENED_MS = 1_000;
const PATH_MS = 200; // Chrome stops the expression itself past this
// The focused field, in the page's main world; a field in a closed shadow root (the focus stops at its host, which
// is no field) gives none, and is typed by keys. Whether there is one, its document, and the way to it are read
// from it.
const FOCUSED_FIELD = `(() => {
  let el = document.activeElement;
  while (el && el.shadowRoot && el.shadowRoot.activeElement) el = el.shadowRoot.activeElement;
  return el && (el.tagName === 'INPUT' || el.tagName === 'TEXTAREA' || el.isContentEditable) ? el : null;
})()`;
const FIELD_FOCUSED = `Boolean(${FOCUSED_FIELD})`;
const FIELD_DOCUMENT = `(${FOCUSED_FIELD} ? document : null)`;
const PATH = `((el) => {
  if (!el) return null;
  const path = [];
  for (let n = el; n; n = n.parentNode || n.host) path.push(n);
  path.push(window);
  return path;
})(${FOCUSED_FIELD})`;

const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The key events that type one character, as a keyboard's key for it would. Pure. */
export function charEvents(ch) {
  const upper = ch.toUpperCase();
  const code = /^[a-z]$/i.test(ch) ? `Key${upper}` : /^[0-9]$/.test(ch) ? `Digit${ch}` : ch === ' ' ? 'Space' : '';
  const vk = keyCode(ch);
  const key = { key: ch, code, windowsVirtualKeyCode: vk, nativeVirtualKeyCode: vk };
  return [{ type: 'keyDown', ...key, text: ch, unmodifiedText: ch }, { type: 'keyUp', ...key }];
}

export class RealInput {
  /** @param {import('./dialogs.js').Dialogs | null} dialogs  the holder of each agent tab's debugger session */
  constructor(dialogs) {
    this.dialogs = dialogs;
    this.drags = new Map(); // tabId -> (data) => void: a drag Chrome handed us instead of starting it
    this.choosers = new Map(); // tabId -> () => void: a file chooser a click opened, kept closed
    this.emulating = new WeakSet(); // the debugger sessions (lib/dialogs.js's attach promises) with focus emulation on
    // tabId -> {session, documentId, doc, win, node}: the objects of the tab's document the last look used, in
    // that debugger session (a session's object ids mean nothing in another's) and for that document (a page the
    // tab left may live on in the back-forward cache, its objects still answering for it)
    this.kept = new Map();
    this._listening = false;
  }

  _listen() {
    if (this._listening) return;
    this._listening = true;
    chrome.debugger.onEvent.addListener((source, method, params) => {
      if (method === 'Input.dragIntercepted' && this.drags.has(source.tabId)) this.drags.get(source.tabId)(params.data);
      if (method === 'Page.fileChooserOpened' && this.choosers.has(source.tabId)) this.choosers.get(source.tabId)();
    });
  }

  /** '' when real input can go to the tab now, else why not and what still works, in our words. */
  async unavailable(tabId) {
    const state = this.dialogs ? await this.dialogs.session(tabId) : 'unwatched';
    if (state === 'ok') return '';
    return `real mouse and key events cannot be sent now: ${WHY_NOT[state] || WHY_NOT.unwatched}. ${STILL_WORKS}`;
  }

  /** Throws unless real input can go to the tab now; `what` names the step ("hover", "a drag"). */
  async require(tabId, what) {
    const why = await this.unavailable(tabId);
    if (why) throw new ToolError(NO_REAL_INPUT, `${what} was not done: ${why}.`);
  }

  /**
   * Runs `work` with the page awake, in front or behind (see the top): focused and visible, once a session, and, for
   * `frames` (a mouse's moves, a scroll), drawn at a tab in front's rate while it runs; its one screencast frame is
   * never acknowledged, so no more are encoded. `chooser`: a file chooser the work opens is handed over, not shown.
   */
  async awake(tabId, work, { frames = true, chooser = false } = {}) {
    const send = (method, params) => this.dialogs.send(tabId, method, params).catch(() => {});
    const session = this._session(tabId);
    const setup = [];
    if (!session || !this.emulating.has(session)) {
      if (session) this.emulating.add(session);
      setup.push(send('Emulation.setFocusEmulationEnabled', { enabled: true }));
    }
    if (frames) setup.push(send('Page.startScreencast', { format: 'jpeg', quality: 1, maxWidth: 16, maxHeight: 16 }));
    // The file chooser's hand-over is set in Chrome itself, in the order the session's commands come: the input
    // sent after it finds it set without waiting for its answer; and so for the two commands that end the work.
    if (chooser) send('Page.setInterceptFileChooserDialog', { enabled: true });
    await Promise.all(setup);
    try {
      return await work();
    } finally {
      if (frames) send('Page.stopScreencast');
      if (chooser) send('Page.setInterceptFileChooserDialog', { enabled: false });
    }
  }

  /** The tab's debugger session (lib/dialogs.js's attach promise), or undefined: what DevTools state is kept under. */
  _session(tabId) {
    return this.dialogs.attached && this.dialogs.attached.get(tabId);
  }

  async _send(tabId, method, params) {
    try {
      await this.dialogs.send(tabId, method, params);
    } catch (e) {
      throw new ToolError(TOOL_ERROR, `Chrome did not take the ${method === 'Input.dispatchKeyEvent' ? 'key' : 'mouse'} event; ` +
        'it said:', String(e.message || e));
    }
  }

  /** Presses one key, with its modifiers, where the page's keyboard focus is. */
  async key(tabId, press) {
    // Keys are not held for a frame, as moves are: the page needs none drawn.
    await this.awake(tabId, async () => {
      for (const event of keyEvents(press)) await this._send(tabId, 'Input.dispatchKeyEvent', event);
    }, { frames: false });
  }

  /**
   * Types `text` where the page's keyboard focus is: each character's keydown, keypress, input and keyup, as a
   * keyboard's (past LONG_TEXT, the middle as one insertion). Line breaks and tabs go in as text (as pasted), never as
   * Enter or Tab. Says how many characters went in as one insertion. `stays()`, asked before each part goes, says
   * the tab still shows the page the text is for: once it does not, the rest is never sent (PAGE_LEFT, `unsent`
   * when nothing was), as Chrome would give it to the page that came. `documentId`: Chrome's id of the top
   * document the focused field is in, under which the look keeps its objects (none: nothing kept).
   */
  async type(tabId, text, stays = () => true, documentId = '') {
    const chars = [...text];
    const inserted = chars.length > LONG_TEXT ? chars.length - 1 - TAIL : 0;
    let sent = false;
    const still = () => {
      if (!stays()) throw pageLeftError({ unsent: !sent });
      sent = true;
    };
    await this.awake(tabId, async () => {
      if (!inserted && chars.length < QUIET_MIN) return this._keys(tabId, chars, still);
      // Asked as the first character's keys go, and before them: the page answers in the order it was asked.
      const look = inserted ? Promise.resolve(true) : this._listened(tabId, documentId);
      await this._keys(tabId, chars.slice(0, 1), still);
      const listened = await look;
      if (!inserted) {
        if (listened) await this._keys(tabId, chars.slice(1), still);
        else {
          still();
          await this._send(tabId, 'Input.insertText', { text: chars.slice(1).join('') });
        }
        return;
      }
      still();
      await this._send(tabId, 'Input.insertText', { text: chars.slice(1, 1 + inserted).join('') });
      await this._keys(tabId, chars.slice(1 + inserted), still);
    }, { frames: false });
    return inserted;
  }

  /**
   * Whether the page's own script listens for typing (HEARD) on the way to the focused field: the field, the
   * elements and shadow roots around it, the document, the window. True when it cannot be told.
   */
  async _listened(tabId, documentId = '') {
    const send = (method, params) => this.dialogs.send(tabId, method, params);
    try {
      return await within(LISTENED_MS, this._lookForListeners(send, tabId, documentId), 'the page');
    } catch {
      return true;
    }
  }

  async _lookForListeners(send, tabId, documentId) {
    const session = this._session(tabId);
    const kept = this.kept.get(tabId);
    const release = () => send('Runtime.releaseObjectGroup', { objectGroup: KEPT }).catch(() => {});
    let where = kept && documentId && kept.documentId === documentId && kept.session === session
      ? await this._listenersKept(send, kept).catch(() => null) : null;
    if (!where) {
      if (kept) {
        this.kept.delete(tabId);
        release();
      }
      try {
        where = await this._listenersAnywhere(send, (objects) => {
          if (!session || !documentId) return;
          this.kept.set(tabId, { session, documentId, ...objects });
          if (this.kept.size > KEPT_TABS) this.kept.delete(this.kept.keys().next().value);
        });
      } finally {
        if (!this.kept.has(tabId)) release(); // nothing kept: nothing held for it either
      }
    }
    return where === 'elsewhere' ? this._listenersOnTheWay(send) : where === 'heard';
  }

  /**
   * Where the page listens for typing, in two answers: 'heard' on the field's document or its window (on the way to
   * any field), or when it cannot be told; 'elsewhere' on an element of the document, its shadow roots or frames,
   * which may or may not be on the way; 'none'. `keep({doc, win, node})` is given the objects it looked at.
   */
  async _listenersAnywhere(send, keep) {
    const look = (expression) => send('Runtime.evaluate', { expression, objectGroup: KEPT, silent: true, timeout: PATH_MS });
    const [doc, win] = (await Promise.all([look(FIELD_DOCUMENT), look('window')])).map((r) => r && r.result && r.result.objectId);
    if (!doc || !win) return 'heard';
    const [own, onWindow, under, { node }] = await Promise.all([...this._listenersOf(send, doc, win),
      send('DOM.describeNode', { objectId: doc })]);
    if (!node) return 'heard';
    keep({ doc, win, node: node.backendNodeId });
    return this._where(own, onWindow, under, node.backendNodeId);
  }

  /**
   * The same, in one answer, from the kept objects of the document; throws where they are gone (another document
   * in the frame, the session detached and attached again), and the look starts afresh.
   */
  async _listenersKept(send, { doc, win, node }) {
    const [focused, own, onWindow, under] = await Promise.all([
      send('Runtime.evaluate', { expression: FIELD_FOCUSED, returnByValue: true, silent: true, timeout: PATH_MS }),
      ...this._listenersOf(send, doc, win)]);
    if (!own || !onWindow || !under) throw new Error('the kept objects are gone');
    if (!focused || focused.exceptionDetails || !focused.result || focused.result.value !== true) return 'heard';
    return this._where(own, onWindow, under, node);
  }

  // At depth 0 without piercing, the protocol lists the main world's listeners only; deeper, every world's, which
  // on the document itself are ours too (page/*.js listens there), so the document's own are the shallow list's.
  _listenersOf(send, doc, win) {
    const listeners = (objectId, depth) => send('DOMDebugger.getEventListeners', { objectId, depth, pierce: depth !== 0 })
      .then((r) => (r && Array.isArray(r.listeners) ? r.listeners : null));
    return [listeners(doc, 0), listeners(win, 0), listeners(doc, -1)];
  }

  _where(own, onWindow, under, documentNode) {
    const heard = (l) => HEARD.has(l.type);
    if (!own || !onWindow || !under || own.some(heard) || onWindow.some(heard)) return 'heard';
    return under.some((l) => heard(l) && l.backendNodeId !== documentNode) ? 'elsewhere' : 'none';
  }

  /** Whether the page listens for typing on the way to the focused field, node by node. */
  async _listenersOnTheWay(send) {
    try {
      const look = { expression: PATH, objectGroup: LISTENERS, silent: true, timeout: PATH_MS };
      const { result } = await send('Runtime.evaluate', look);
      if (!result || !result.objectId || result.subtype !== 'array') return true;
      const { result: items } = await send('Runtime.getProperties', { objectId: result.objectId, ownProperties: true });
      const path = (items || []).filter((p) => /^\d+$/.test(p.name) && p.value && p.value.objectId);
      if (!path.length) return true;
      const heard = await Promise.all(path.map(async (p) => {
        const { listeners } = await send('DOMDebugger.getEventListeners', { objectId: p.value.objectId, depth: 0 });
        return !Array.isArray(listeners) || listeners.some((l) => HEARD.has(l.type));
      }));
      return heard.some(Boolean);
    } finally {
      send('Runtime.releaseObjectGroup', { objectGroup: LISTENERS }).catch(() => {});
    }
  }

  async _keys(tabId, chars, still = () => {}) {
    for (let i = 0; i < chars.length; i += TYPE_CHUNK) {
      still();
      const sent = [];
      for (const ch of chars.slice(i, i + TYPE_CHUNK)) {
        if (AS_TEXT.test(ch)) sent.push(this._send(tabId, 'Input.insertText', { text: ch }));
        else for (const event of charEvents(ch)) sent.push(this._send(tabId, 'Input.dispatchKeyEvent', event));
      }
      await Promise.all(sent);
    }
  }

  /** Moves the mouse to a point of the top frame's viewport (CSS pixels), as the person's pointer would. */
  async move(tabId, at, modifiers = 0) {
    await this.awake(tabId, () => this._move(tabId, at, modifiers));
  }

  _move(tabId, { x, y }, modifiers = 0) {
    return this._send(tabId, 'Input.dispatchMouseEvent', { type: 'mouseMoved', x, y, button: 'none', buttons: 0, modifiers });
  }

  /**
   * Clicks at a point as a hand does: the mouse moved there (where it stays), the button pressed and let go,
   * `count` times for a double click; `button` 'left', 'right' or 'middle'. A real click may open a file chooser
   * (a label, an "Attach" button): the system's dialog would come over the person's screen, so Chrome is asked to
   * hand it over instead, and it stays closed. Says `{chooser}`: whether one was opened.
   */
  async click(tabId, at, { button = 'left', count = 1, modifiers = 0 } = {}) {
    const mouse = { x: at.x, y: at.y, button, modifiers };
    let chooser = false;
    this._listen();
    this.choosers.set(tabId, () => {
      chooser = true;
    });
    try {
      // Sent at once, not each after the last's answer: Chrome keeps their order, and the press that follows the
      // move has the page handle the move at once, where a move alone waits for the page's next frame (up to 16 ms
      // in front, none drawn behind). So a click needs no screencast to be drawn.
      await this.awake(tabId, () => {
        const sent = [this._move(tabId, at, modifiers)];
        for (let clickCount = 1; clickCount <= count; clickCount++) {
          sent.push(this._send(tabId, 'Input.dispatchMouseEvent', { ...mouse, type: 'mousePressed', buttons: BUTTONS[button], clickCount }));
          sent.push(this._send(tabId, 'Input.dispatchMouseEvent', { ...mouse, type: 'mouseReleased', buttons: 0, clickCount }));
        }
        return Promise.all(sent);
      }, { frames: false, chooser: true });
    } finally {
      this.choosers.delete(tabId);
    }
    return { chooser };
  }

  /**
   * Presses the left button at `from`, moves in steps to `to` and lets go there. A page's own drag (a slider, a
   * sortable list) follows the moves; an HTML drag-and-drop, which Chrome would hand to the system's drag loop
   * where no protocol event reaches it, is taken back from Chrome, and the rest of the way is the drag's own
   * events (over each point, then the drop at `to`), as a person's drag would be.
   */
  drag(tabId, from, to) {
    return this.awake(tabId, () => this._drag(tabId, from, to));
  }

  async _drag(tabId, from, to) {
    this._listen();
    let handed = null;
    this.drags.set(tabId, (data) => {
      handed = data;
    });
    const mouse = (type, at, buttons, extra = {}) =>
      this._send(tabId, 'Input.dispatchMouseEvent', { type, x: at.x, y: at.y, button: type === 'mouseMoved' && !buttons ? 'none' : 'left', buttons, ...extra });
    const over = (type, at) => this._send(tabId, 'Input.dispatchDragEvent', { type, x: at.x, y: at.y, data: handed });
    const along = (t) => ({ x: Math.round(from.x + (to.x - from.x) * t), y: Math.round(from.y + (to.y - from.y) * t) });
    try {
      await this.dialogs.send(tabId, 'Input.setInterceptDrags', { enabled: true }).catch(() => {});
      await this._move(tabId, from);
      await mouse('mousePressed', from, 1, { clickCount: 1 });
      let entered = false;
      for (let i = 1; i <= DRAG_STEPS; i++) {
        await pause(FRAME_MS);
        const at = along(i / DRAG_STEPS);
        if (!handed) await mouse('mouseMoved', at, 1);
        else {
          // Chrome says a drag began once the page started it, which may come after the move that started it.
          await over(entered ? 'dragOver' : 'dragEnter', at);
          entered = true;
        }
      }
      await pause(REST_MS);
      if (handed) {
        if (!entered) await over('dragEnter', to);
        await over('dragOver', to);
        await over('drop', to);
      } else {
        await mouse('mouseMoved', to, 1);
        await pause(FRAME_MS);
      }
      await mouse('mouseReleased', to, 0, { clickCount: 1 });
      return handed ? 'dropped' : 'moved';
    } finally {
      this.drags.delete(tabId);
      await this.dialogs.send(tabId, 'Input.setInterceptDrags', { enabled: false }).catch(() => {});
    }
  }
}
