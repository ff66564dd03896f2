// Which tabs the agent may touch: tabs it opened (kept in a visible "openab" tab group, plus
// popups they open) and tabs the user attached from the panel. Nothing else, ever.

import { ToolError } from './errors.js';

const STORE = 'openab.tabs';
const GROUP_TITLE = 'openab';

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
    throw new ToolError('bad_url', `"${url}" is not an absolute URL; use https://...`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') {
    throw new ToolError('bad_url', `only http(s) URLs can be opened, not ${u.protocol}//`);
  }
  const why = restrictedReason(u.href);
  if (why) throw new ToolError('browser_restricted', `cannot open ${u.href}: ${why}`);
  return u.href;
}

export class AgentTabs {
  constructor(onChange) {
    this.onChange = onChange;
    this.owned = new Map(); // tabId -> {by: 'agent' | 'user'}
    this.current = null;
    this.groups = new Map(); // windowId -> groupId
    chrome.tabs.onRemoved.addListener((id) => this._forget(id));
    chrome.tabs.onCreated.addListener((tab) => this._adoptPopup(tab));
    chrome.tabGroups?.onRemoved.addListener((g) => {
      for (const [w, id] of this.groups) if (id === g.id) this.groups.delete(w);
    });
  }

  async restore() {
    const saved = (await chrome.storage.session.get(STORE))[STORE];
    if (!saved) return;
    const alive = new Set((await chrome.tabs.query({})).map((t) => t.id));
    for (const [id, info] of saved.owned || []) if (alive.has(id)) this.owned.set(id, info);
    this.current = alive.has(saved.current) ? saved.current : null;
    this.groups = new Map(saved.groups || []);
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

  async _adoptPopup(tab) {
    // A page the agent drives may open a popup; following it keeps the task in agent tabs.
    if (tab.openerTabId == null || !this.owned.has(tab.openerTabId) || this.owned.has(tab.id)) return;
    if (this.owned.get(tab.openerTabId).by !== 'agent') return;
    this.owned.set(tab.id, { by: 'agent' });
    await this._group(tab);
    this._save();
  }

  async _group(tab) {
    try {
      const groupId = this.groups.get(tab.windowId);
      const gid = await chrome.tabs.group(groupId != null ? { tabIds: [tab.id], groupId } : {
        tabIds: [tab.id], createProperties: { windowId: tab.windowId },
      });
      if (gid !== groupId) {
        this.groups.set(tab.windowId, gid);
        await chrome.tabGroups.update(gid, { title: GROUP_TITLE, color: 'blue' });
      }
    } catch (e) {
      // The stored group may be gone; a fresh one is the fix. Never fail the tool over a group.
      if (this.groups.has(tab.windowId)) {
        this.groups.delete(tab.windowId);
        return this._group(tab);
      }
      console.warn('openab: could not group the tab', e.message);
    }
  }

  async open(url, openerTabId = undefined) {
    const windows = await chrome.windows.getAll({ windowTypes: ['normal'] });
    if (!windows.length) throw new ToolError('no_window', 'there is no browser window to open a tab in');
    const cur = this.current != null ? await chrome.tabs.get(this.current).catch(() => null) : null;
    const windowId = cur ? cur.windowId : (windows.find((w) => w.focused) || windows[0]).id;
    // In the background: the agent never takes the user's current tab away from them.
    const tab = await chrome.tabs.create({ url, windowId, active: false, ...(openerTabId != null && { openerTabId }) });
    this.owned.set(tab.id, { by: 'agent' });
    this.current = tab.id;
    await this._group(tab);
    this._save();
    return tab;
  }

  async attach(tabId) {
    const tab = await chrome.tabs.get(tabId);
    const why = restrictedReason(tab.url || tab.pendingUrl);
    if (why) throw new Error(`This tab cannot be shared: ${why}.`);
    if (!this.owned.has(tabId)) this.owned.set(tabId, { by: 'user' });
    this.current = tabId;
    this._save();
    return tab;
  }

  release(tabId) {
    this._forget(tabId);
  }

  async switchTo(tabId) {
    this._mustOwn(tabId);
    // Switches the agent's attention, not the user's view.
    const tab = await chrome.tabs.get(tabId);
    this.current = tabId;
    this._save();
    return tab;
  }

  async close(tabId) {
    this._mustOwn(tabId);
    if (this.owned.get(tabId).by !== 'agent') {
      throw new ToolError('not_owned', `tab ${tabId} belongs to the user; only tabs the agent opened can be closed`);
    }
    await chrome.tabs.remove(tabId);
    this._forget(tabId);
  }

  async list() {
    const out = [];
    for (const [id, info] of this.owned) {
      const tab = await chrome.tabs.get(id).catch(() => null);
      if (tab) out.push({ id, by: info.by, current: id === this.current, title: tab.title || '', url: tab.url || tab.pendingUrl || '' });
    }
    return out;
  }

  _mustOwn(tabId) {
    if (!this.owned.has(tabId)) {
      throw new ToolError('not_owned', `tab ${tabId} is not an agent tab; list yours with browser_tabs {"action":"list"}`);
    }
  }

  /** The tab a page tool acts in, checked to be alive, owned, and not browser-owned. */
  async target() {
    if (this.current == null || !this.owned.has(this.current)) {
      throw new ToolError('no_tab', 'no agent tab yet: open one with browser_navigate {"url": ...} or ' +
        'browser_tabs {"action":"open","url":...}, or ask the user to share a tab from the openab panel');
    }
    const tab = await chrome.tabs.get(this.current).catch(() => null);
    if (!tab) {
      this._forget(this.current);
      return this.target();
    }
    const why = restrictedReason(tab.url || tab.pendingUrl);
    if (why) {
      throw new ToolError('browser_restricted', `Chrome does not let extensions act on the page in the block below: ${why}. ` +
        'Navigate the tab to an http(s) page first.', `URL: ${tab.url || tab.pendingUrl}`);
    }
    return tab;
  }
}
