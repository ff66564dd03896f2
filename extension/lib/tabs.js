// Which tabs the agent may touch: tabs it opened (kept in a visible "openab" tab group, plus popups
// their pages open) and tabs the person shared, from the panel or by moving the tab into the openab
// group. Nothing else, ever: a tab the person opens themselves (Ctrl+T, the new tab page) is theirs even
// when they opened it from an agent tab, and a tab moved out of the group is theirs again. They belong
// to the chat that has them: a new chat starts with none (`releaseAll`), and the person can take a tab
// they shared back at any time (`unshare`).

import { ToolError, BAD_URL, BROWSER_RESTRICTED, CHAT_ENDED, NOT_OWNED, NO_TAB, NO_WINDOW } from './errors.js';

const STORE = 'openab.tabs';
const GROUP_TITLE = 'openab';
// What the panel lists: page titles are the page's to choose, so they are cut to a line's worth.
const MAX_LISTED = 50;
const MAX_TITLE = 200;

/** Where a tab is: the page it shows, or the one it is on its way to before the first commits; '' for neither. */
export function addressOf(tab) {
  return tab.url || tab.pendingUrl || '';
}

/** Why Chrome will not let an extension act on this URL, or '' when it will. */
export function restrictedReason(url) {
  if (!url || url === 'about:blank') return '';
  let u;
  try {
    u = new URL(url);
  } catch {
    return 'the tab has no usable URL';
  }
  if (u.protocol === 'http:' || u.protocol === 'https:') {
    const store = u.hostname === 'chromewebstore.google.com' ||
      (u.hostname === 'chrome.google.com' && u.pathname.startsWith('/webstore'));
    return store ? 'the Chrome Web Store is a browser-owned page' : '';
  }
  return `${u.protocol}// pages belong to the browser`;
}

/** Only http(s) URLs may be opened by the agent. Returns the normalised URL. */
export function checkNavigable(url) {
  let u;
  try {
    u = new URL(String(url));
  } catch {
    throw new ToolError(BAD_URL, `"${url}" is not an absolute URL; use https://...`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') {
    throw new ToolError(BAD_URL, `only http(s) URLs can be opened, not ${u.protocol}//`);
  }
  const why = restrictedReason(u.href);
  if (why) throw new ToolError(BROWSER_RESTRICTED, `cannot open ${u.href}: ${why}`);
  return u.href;
}

/** Where a tab is, as the panel names it: the host of a web page, the scheme and host of anything else. */
export function siteOf(url) {
  let u;
  try {
    u = new URL(String(url || ''));
  } catch {
    return '';
  }
  if (u.protocol === 'http:' || u.protocol === 'https:') return u.host;
  return u.host ? `${u.protocol}//${u.host}` : u.href.slice(0, 60);
}

function described(by, tab) {
  return { by, title: String(tab.title || '').slice(0, MAX_TITLE), url: String(addressOf(tab)) };
}

export class AgentTabs {
  /**
   * @param {() => void} onChange  the tabs or their titles changed
   * @param {{watched?: () => {open: Map<number, string>, note: string}, opened?: (tabId: number) => void,
   *          takenBack?: () => void}} hooks
   *   `watched`: what the dialog watch says of the tabs (lib/dialogs.js); `opened`: a tab became the agent's
   *   by its own doing (it opened it, or its page opened a popup), before its page can ask anything;
   *   `takenBack`: the person moved the agent's current tab out of its group
   */
  constructor(onChange, { watched = () => ({ open: new Map(), note: '' }), opened = () => {}, takenBack = () => {} } = {}) {
    this.onChange = onChange;
    this.watched = watched;
    this.opened = opened;
    this.onTakenBack = takenBack;
    this.owned = new Map(); // tabId -> {by: 'agent' | 'user', title, url}
    this.current = null;
    this.groups = new Map(); // windowId -> groupId
    // Counts releases: a step that awaited Chrome across one must not hand the new chat a tab.
    this.epoch = 0;
    chrome.tabs.onRemoved.addListener((id) => this._forget(id));
    chrome.tabs.onCreated.addListener((tab) => this._created(tab));
    // Only a page opens a tab this way (window.open, a target=_blank link), never the person's Ctrl+T or the
    // new tab button, nor an extension: it is how a popup of an agent tab's page is told from the person's tab.
    chrome.webNavigation?.onCreatedNavigationTarget.addListener((d) => this._popup(d.sourceTabId, d.tabId));
    chrome.tabs.onUpdated.addListener((id, change, tab) => this._updated(id, change, tab));
    chrome.tabGroups?.onRemoved.addListener((g) => {
      for (const [w, id] of this.groups) if (id === g.id) this.groups.delete(w);
    });
  }

  async restore() {
    const saved = (await chrome.storage.session.get(STORE))[STORE];
    if (!saved) return;
    const alive = new Map((await chrome.tabs.query({})).map((t) => [t.id, t]));
    for (const [id, info] of saved.owned || []) {
      if (alive.has(id) && (info.by === 'agent' || info.by === 'user')) {
        this.owned.set(id, { ...described(info.by, alive.get(id)), grouped: info.grouped === true });
      }
    }
    this.current = alive.has(saved.current) && this.owned.has(saved.current) ? saved.current : null;
    this.groups = new Map(saved.groups || []);
  }

  /** The panel's list: what the person sees of each tab the agent may use, live. */
  view() {
    const { open, note } = this.watched();
    const tabs = [];
    for (const [id, info] of this.owned) {
      if (tabs.length >= MAX_LISTED) break;
      tabs.push({ id, by: info.by, current: id === this.current, title: info.title, site: siteOf(info.url), dialog: open.get(id) || '' });
    }
    return { tabs, more: this.owned.size - tabs.length, note };
  }

  _updated(tabId, change, tab) {
    if ('groupId' in change) this._regrouped(tab);
    const info = this.owned.get(tabId);
    if (!info || !('title' in change || 'url' in change)) return;
    const now = { ...info, ...described(info.by, tab) };
    if (now.title === info.title && now.url === info.url) return;
    this.owned.set(tabId, now);
    this._save();
  }

  /** Whether a tab sits in this chat's openab group of its window. */
  _inGroup(tab) {
    const groupId = this.groups.get(tab.windowId);
    return groupId != null && tab.groupId === groupId;
  }

  /**
   * The person moved a tab into the openab group or out of it (Chrome says so for a drag, the tab's menu,
   * and the extension's own calls alike; ours happen only to tabs already owned or already let go). In is
   * sharing it; out is taking it back, whoever opened it.
   */
  _regrouped(tab) {
    const info = this.owned.get(tab.id);
    if (this._inGroup(tab)) {
      if (info) {
        if (!info.grouped) this.owned.set(tab.id, { ...info, grouped: true });
        return;
      }
      this.owned.set(tab.id, { ...described('user', tab), grouped: true });
      this._save();
    } else if (info && info.grouped) {
      this._leftGroup(tab.id);
    }
  }

  /**
   * Chrome also takes a tab out of its group as it closes it, just before tabs.onRemoved: only a tab still open
   * was moved out. A closed one is forgotten as closed (`_forget`), so what waited on it says the tab closed.
   */
  _leftGroup(tabId) {
    chrome.tabs.get(tabId).then((t) => {
      if (this.owned.get(tabId)?.grouped && !this._inGroup(t)) this._letGo(tabId);
    }, () => {});
  }

  /** A tab leaves the agent (moved out of its group): its calls there stop as an un-share stops them. */
  _letGo(tabId) {
    this.owned.delete(tabId);
    if (this.current === tabId) {
      this.current = null;
      this.onTakenBack();
    }
    this._save();
  }

  _save() {
    chrome.storage.session.set({
      [STORE]: { owned: [...this.owned], current: this.current, groups: [...this.groups] },
    }).catch(() => {});
    this.onChange();
  }

  _forget(tabId) {
    if (!this.owned.delete(tabId)) return;
    if (this.current === tabId) this.current = [...this.owned.keys()].pop() ?? null;
    this._save();
  }

  _created(tab) {
    // Chrome puts a tab opened next to a grouped one in that group: the person placed it among the agent's.
    if (this._inGroup(tab)) this._regrouped(tab);
  }

  /** A page in tab `sourceTabId` opened tab `tabId`: a popup of an agent tab's page is the agent's too. */
  async _popup(sourceTabId, tabId) {
    const opener = this.owned.get(sourceTabId);
    const info = this.owned.get(tabId);
    // Chrome may have grouped it beside its opener a moment before, which read as the person's doing.
    if (!opener || opener.by !== 'agent' || (info && !(info.by === 'user' && info.grouped))) return;
    const tab = await chrome.tabs.get(tabId).catch(() => null);
    if (!tab || this.owned.get(tabId) !== info) return;
    // Following a popup keeps the task in agent tabs.
    this.owned.set(tab.id, described('agent', tab));
    this.opened(tab.id);
    const epoch = this.epoch;
    await this._group(tab);
    if (epoch !== this.epoch) await this._ungroup([tab.id]);
    this._save();
  }

  async _group(tab) {
    try {
      let groupId = this.groups.get(tab.windowId);
      let strays = [];
      if (groupId == null) [groupId, strays] = await this._leftoverGroup(tab.windowId);
      const gid = await chrome.tabs.group(groupId != null ? { tabIds: [tab.id], groupId } : {
        tabIds: [tab.id], createProperties: { windowId: tab.windowId },
      });
      const info = this.owned.get(tab.id);
      if (info) this.owned.set(tab.id, { ...info, grouped: true });
      if (gid !== this.groups.get(tab.windowId)) {
        this.groups.set(tab.windowId, gid);
        await chrome.tabGroups.update(gid, { title: GROUP_TITLE, color: 'blue' });
      }
      await this._ungroup(strays);
    } catch (e) {
      // The stored group may be gone; a fresh one is the fix. Never fail the tool over a group.
      if (this.groups.has(tab.windowId)) {
        this.groups.delete(tab.windowId);
        return this._group(tab);
      }
      console.warn('openab: could not group the tab', e.message);
    }
  }

  /**
   * An "openab" group already in a window where this chat has none (one a release could not empty, one Chrome
   * restored with the window): the agent's next tab joins it rather than making a second "openab" beside it.
   * The tabs in it are not the agent's, so they are to be taken out once its tab is in (an emptied group would
   * be gone): the group keeps meaning "the agent's tabs". [its id, those tabs], or [undefined, []].
   */
  async _leftoverGroup(windowId) {
    const [found] = await chrome.tabGroups.query({ windowId, title: GROUP_TITLE }).catch(() => []);
    if (!found) return [undefined, []];
    const inside = await chrome.tabs.query({ groupId: found.id }).catch(() => []);
    return [found.id, inside.map((t) => t.id).filter((id) => !this.owned.has(id))];
  }

  async open(url, openerTabId = undefined) {
    const epoch = this.epoch;
    const windows = await chrome.windows.getAll({ windowTypes: ['normal'] });
    if (!windows.length) throw new ToolError(NO_WINDOW, 'there is no browser window to open a tab in');
    const cur = this.current != null ? await chrome.tabs.get(this.current).catch(() => null) : null;
    const windowId = cur ? cur.windowId : (windows.find((w) => w.focused) || windows[0]).id;
    this._sameChat(epoch);
    // In the background: the agent never takes the user's current tab away from them.
    const tab = await chrome.tabs.create({ url, windowId, active: false, ...(openerTabId != null && { openerTabId }) });
    if (epoch !== this.epoch) {
      // Opened for a chat that ended while Chrome made it: nobody's work is in it yet, and nobody may drive it.
      await chrome.tabs.remove(tab.id).catch(() => {});
      this._sameChat(epoch);
    }
    this.owned.set(tab.id, described('agent', tab));
    this.current = tab.id;
    this.opened(tab.id);
    await this._group(tab);
    if (epoch !== this.epoch) await this._ungroup([tab.id]);
    this._save();
    this._sameChat(epoch);
    return tab;
  }

  async attach(tabId) {
    const tab = await chrome.tabs.get(tabId);
    const why = restrictedReason(addressOf(tab));
    if (why) throw new Error(`This tab cannot be shared: ${why}.`);
    if (!this.owned.has(tabId)) this.owned.set(tabId, described('user', tab));
    this.current = tabId;
    this._save();
    return tab;
  }

  /**
   * The person takes back a tab they shared. The agent loses it at once; if it was the agent's current
   * tab, the agent has no current tab until it picks one, so a step meant for that tab never lands in
   * another. Returns false for a tab that is not shared (the agent's own tabs are not the person's to un-share).
   */
  unshare(tabId) {
    const info = this.owned.get(tabId);
    if (!info || info.by !== 'user') return false;
    this.owned.delete(tabId);
    if (this.current === tabId) this.current = null;
    this._save();
    // One they moved into the openab group leaves it: the group shows only what the agent may use.
    if (info.grouped) this._ungroup([tabId]);
    return true;
  }

  /**
   * A new chat starts with no tabs. Tabs the agent opened stay open as the person's own (they leave the
   * openab group): the person may have signed in, typed or read in them, and closing them could lose that.
   * Tabs the person shared are un-shared, never closed. Returns how many of each were let go.
   */
  async releaseAll() {
    this.epoch++;
    const mine = [...this.owned].filter(([, info]) => info.by === 'agent').map(([id]) => id);
    const unshared = this.owned.size - mine.length;
    const groups = [...this.groups.values()];
    this.owned.clear();
    this.current = null;
    this.groups.clear();
    this._save();
    // Everything in the chat's groups leaves them, the person's tabs moved in as well as the agent's: a tab no
    // longer shared must not sit in "openab" (where it would read as shared, and its close would make Chrome ask
    // "Close tab and delete group?"). The emptied groups go, so the next chat's first tab starts the only one.
    const inGroups = (await Promise.all(groups.map((groupId) => chrome.tabs.query({ groupId }).catch(() => []))))
      .flat().map((t) => t.id);
    await this._ungroup([...new Set([...mine, ...inGroups])]);
    return { kept: mine.length, unshared };
  }

  async _ungroup(tabIds) {
    // One at a time: Chrome refuses the whole list if any one tab has been closed meanwhile.
    await Promise.all(tabIds.map((id) => chrome.tabs.ungroup(id).catch(() => {})));
  }

  _sameChat(epoch) {
    if (epoch !== this.epoch) {
      throw new ToolError(CHAT_ENDED, 'this chat has ended: the user started a new chat and its tabs were released');
    }
  }

  async switchTo(tabId) {
    this._mustOwn(tabId);
    // Switches the agent's attention, not the user's view.
    const tab = await chrome.tabs.get(tabId);
    this._mustOwn(tabId); // still, after the wait: it may have been un-shared or released meanwhile
    this.current = tabId;
    this._save();
    return tab;
  }

  async close(tabId) {
    this._mustOwn(tabId);
    if (this.owned.get(tabId).by !== 'agent') {
      throw new ToolError(NOT_OWNED, `tab ${tabId} belongs to the user; only tabs the agent opened can be closed`);
    }
    // Chrome's "Close tab and delete group?" comes only from its tab strip (a tab's close button or menu closing
    // a saved group's last tab); chrome.tabs.remove and ungroup never ask. The tab leaves the group before it
    // closes all the same, so no version of Chrome has a group's last tab to ask about; its leaving the group
    // (ours, or Chrome's as it closes a tab) is not the person taking it back.
    this.owned.set(tabId, { ...this.owned.get(tabId), grouped: false });
    await chrome.tabs.ungroup(tabId).catch(() => {});
    await chrome.tabs.remove(tabId);
    this._forget(tabId);
  }

  async list() {
    const out = [];
    for (const [id, info] of this.owned) {
      const tab = await chrome.tabs.get(id).catch(() => null);
      if (tab) out.push({ id, by: info.by, current: id === this.current, title: tab.title || '', url: addressOf(tab) });
    }
    return out;
  }

  _mustOwn(tabId) {
    if (!this.owned.has(tabId)) {
      throw new ToolError(NOT_OWNED, `tab ${tabId} is not an agent tab; list yours with browser_tabs {"action":"list"}`);
    }
  }

  /** The tab a page tool acts in, checked to be alive, owned, and not browser-owned. */
  async target() {
    if (this.current == null || !this.owned.has(this.current)) {
      if (this.owned.size) {
        throw new ToolError(NO_TAB, 'no current agent tab (the user stopped sharing the one you were using, or it closed): ' +
          'list yours with browser_tabs {"action":"list"} and switch to one, or open one');
      }
      throw new ToolError(NO_TAB, 'no agent tab yet: open one with browser_navigate {"url": ...} or ' +
        'browser_tabs {"action":"open","url":...}, or ask the user to share a tab from the openab panel');
    }
    const current = this.current;
    const tab = await chrome.tabs.get(current).catch(() => null);
    if (!tab || !this.owned.has(current)) {
      // Closed, un-shared or released while Chrome answered: never act in it.
      if (!tab) this._forget(current);
      return this.target();
    }
    const why = restrictedReason(addressOf(tab));
    if (why) {
      throw new ToolError(BROWSER_RESTRICTED, `Chrome does not let extensions act on the page in the block below: ${why}. ` +
        'Navigate the tab to an http(s) page first.', `URL: ${addressOf(tab)}`);
    }
    return tab;
  }
}

const CHAT_ENDED_MESSAGE = 'stopped: this chat has ended (the user started a new one) and its browser tabs were released; ' +
  'the call ended at its next step.';
const TAB_UNSHARED = 'stopped: the user stopped sharing the tab this call was using; the call ended at its next step ' +
  'and what it saw there is withheld. List the tabs you may still use with browser_tabs {"action":"list"}.';

/**
 * The browser tools as the MCP server serves them, with each call tied to the chat it arrived in. When
 * the person starts a new chat, the old chat's calls still here stop (a queued one never starts, a
 * waiting one stops waiting) and calls that arrive before the new chat is open are refused, so the old
 * agent can neither act in the tabs it gave up nor open one the new chat would inherit. Un-sharing the
 * tab the agent is working in stops its calls in flight the same way.
 */
export class ChatCalls {
  /** @param {import('./tools.js').BrowserTools} tools */
  constructor(tools) {
    this.tools = tools;
    this.running = new Set(); // {ctl: AbortController, why: string}; bounded by the MCP server's in-flight cap
    this.ending = false;
  }

  list() {
    return this.tools.list();
  }

  has(name) {
    return this.tools.has(name);
  }

  async call(name, args, signal, journal = null) {
    if (this.ending) return { content: [{ type: 'text', text: CHAT_ENDED_MESSAGE }], isError: true };
    const entry = { ctl: new AbortController(), why: '' };
    const passOn = () => entry.ctl.abort();
    if (signal) {
      if (signal.aborted) passOn();
      signal.addEventListener('abort', passOn, { once: true });
    }
    this.running.add(entry);
    try {
      const result = await this.tools.call(name, args, entry.ctl.signal, journal);
      // Whatever it did or saw after it was stopped is not the agent's any more; the guard's record stays.
      return entry.why ? { content: [{ type: 'text', text: entry.why }], isError: true, _meta: result && result._meta } : result;
    } finally {
      this.running.delete(entry);
      if (signal) signal.removeEventListener('abort', passOn);
    }
  }

  _stop(why) {
    for (const entry of this.running) {
      entry.why = entry.why || why;
      entry.ctl.abort();
    }
  }

  /** The person un-shared the tab the agent works in: its calls in flight stop. */
  tabTakenBack() {
    this._stop(TAB_UNSHARED);
  }

  /** New chat: the old chat's calls stop, and none is taken until `chatOpened()`. */
  endChat() {
    this.ending = true;
    this._stop(CHAT_ENDED_MESSAGE);
  }

  chatOpened() {
    this.ending = false;
  }
}
