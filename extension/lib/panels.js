// The side panels' side of the service worker. Panels are views: each attaches over a runtime port, receives
// the state and the conversation, and sends the person's input back, which this routes to the ACP client, the
// guard, the tabs and the settings.

import { showTab } from './guard.js';
import { RpcError, SESSION_BUSY } from './rpc.js';
import { activeGateway, addGateway, checkKey, checkUrl, gatewayAt, normaliseOrigin, publicSettings, removeGateway, setGatewayKey,
  useGateway } from './settings.js';

// What the link says when a connection or a chat starts (lib/link.js): news until the conversation goes on.
// How long a row's Show me keeps the element outlined in its page.
const SHOW_STEP_MS = 8000;
const GREETINGS = new Set(['Session resumed', 'New session']);
const RESUMED = 'Session resumed';

/** A moment of today as the person reads a clock: "14:05" (or "2:05 PM", as their locale writes it). */
function clock(ms) {
  return new Date(ms).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
}

export class Panels {
  /**
   * @param {{acp: import('./acp.js').AcpClient, mcp: import('./mcp.js').McpServer,
   *          guard: import('./guard.js').Guard, tabs: import('./tabs.js').AgentTabs,
   *          calls: import('./tabs.js').ChatCalls, transcript: import('./chat.js').Transcript,
   *          settings: import('./settings.js').SavedSettings}} parts
   */
  constructor({ acp, mcp, guard, tabs, calls, transcript, settings }) {
    this.acp = acp;
    this.mcp = mcp;
    this.guard = guard;
    this.tabs = tabs;
    this.calls = calls;
    this.transcript = transcript;
    this.settings = settings;
    this.ports = new Set();
    this._activeCalls = 0;
    this._lastToolAt = 0;
    this._statePending = false;
    // The link line the person has read past: a greeting once they write again, a refused edit once they save a
    // valid one (the link, still connected to the same gateway, has nothing new to say then).
    this._spokeAfter = null; // {since, detail} of the link when the person last sent a message
    this._refusedEdit = '';
    this._settledEdit = '';
    this._resumedAt = 0; // the link's `since` of the resumption last put in the conversation
  }

  /** The line under the pill: the link's, less what the person has read past (see the constructor). */
  _linkDetail() {
    const { state } = this.acp.link;
    const detail = state.detail;
    if (detail && detail === this._settledEdit) return '';
    if (!GREETINGS.has(detail)) return detail;
    const spoke = this._spokeAfter;
    if (spoke && spoke.since === state.since && spoke.detail === detail) return '';
    // Once the chat has gone on (anything said in it since), the greeting is old news: it does not stay on top.
    if (this.transcript.items.some((i) => i.kind !== 'event' && i.at >= state.since)) return '';
    // A resumption is an event, said with its time (and kept in the conversation, `_noteResumed`), not a state.
    return detail === RESUMED && state.status === 'connected' ? `${RESUMED} at ${clock(state.since)}` : detail;
  }

  /**
   * A session resumed (the socket came back, the worker or Chrome started again) is an event in the conversation,
   * at its place in time, once per connection; not a second one in a row when nothing was said between them.
   */
  _noteResumed() {
    const { state } = this.acp.link;
    if (state.status !== 'connected' || state.detail !== RESUMED || this._resumedAt === state.since) return;
    this._resumedAt = state.since;
    const items = this.transcript.items;
    const last = items[items.length - 1];
    if (last && last.kind === 'event' && last.text === RESUMED) return;
    this.transcript.add('event', { text: RESUMED });
  }

  /** A tool call started (+1) or ended (-1): the pill says "browser in use" meanwhile. */
  toolActivity(delta) {
    this._activeCalls += delta;
    this._lastToolAt = Date.now();
    this.pushState();
  }

  /** A port opened to the service worker; a panel's is served once the worker is `ready`, any other closed. */
  accept(port, ready) {
    // Only our own extension pages: the page agent injected into web pages has runtime access too.
    const fromPanel = port.sender?.id === chrome.runtime.id && String(port.sender?.url || '').startsWith(chrome.runtime.getURL('panel/'));
    if (port.name !== 'panel' || !fromPanel) {
      port.disconnect();
      return;
    }
    this.ports.add(port);
    port.onMessage.addListener((msg) => ready.then(() => this._onMessage(port, msg)).catch((e) => console.error('openab:', e)));
    port.onDisconnect.addListener(() => this.ports.delete(port));
    ready.then(() => {
      port.postMessage({ type: 'transcript', items: this.transcript.items });
      port.postMessage(this._state());
      this.acp.link.poke();
    });
  }

  pushState() {
    // Coalesce bursts (streamed chunks, many tool calls) into one message per tick.
    if (this._statePending) return;
    this._statePending = true;
    setTimeout(() => {
      this._statePending = false;
      this._noteResumed();
      this.broadcast(this._state());
    }, 0);
  }

  broadcast(msg) {
    for (const port of this.ports) this._tell(port, msg);
  }

  _state() {
    const link = this.acp.link;
    const connected = link.connected;
    return {
      type: 'state',
      link: { status: link.state.status, detail: this._linkDetail(), retryAt: link.state.retryAt, moved: link.moved },
      tunnel: connected && this.mcp.attached,
      toolsInUse: connected && this._activeCalls > 0,
      lastToolAt: this._lastToolAt,
      busy: Boolean(this.acp.turn),
      settings: publicSettings(this.settings.current),
      agents: connected ? link.agents : [],
      agent: connected ? link.agent : '',
      unavailable: connected ? link.unavailable : '',
      cards: this.guard.publicCards(),
      agentTabs: [...this.tabs.owned.keys()],
      currentTab: this.tabs.current,
      tabList: this.tabs.view(),
      pastChats: this.transcript.past(this._gatewayId()),
    };
  }

  /** The gateway whose conversations the transcript keeps under its id (lib/acp.js, _followSession). */
  _gatewayId() {
    const s = this.acp.link.settings;
    return s ? s.id || s.url : '';
  }

  /**
   * Past chats: the person chose an earlier chat of this gateway (`key`, one the list showed). The pod takes its
   * session up again (the agent goes on with it) and the chat on screen stays in the list; tabs belong to a chat,
   * as at New chat, and stay open as the person's. A chat the pod no longer takes is shown read-only to that panel,
   * with the pod's reason, and nothing else changes.
   */
  async _pastChat(port, key) {
    const chat = this.transcript.past(this._gatewayId()).find((c) => c.key === key);
    if (!chat) return port.postMessage({ type: 'notice', level: 'error', text: 'That chat is no longer saved in this browser.' });
    if (chat.current) return port.postMessage({ type: 'transcript', items: this.transcript.items });
    if (this.acp.turn) {
      return port.postMessage({ type: 'notice', level: 'error', text: 'The agent is still answering: wait, or press Stop, then go back to that chat.' });
    }
    const offline = this.acp.whyNotConnected();
    if (offline && offline.reason !== 'moved') {
      const items = await this.transcript.saved(key);
      return port.postMessage({ type: 'past-chat', key, items, gone: `Not connected, so this chat cannot go on now: ${offline.why}` });
    }
    this.guard.cancelAll();
    this.guard.plan?.end();
    this.calls.endChat();
    try {
      await this.tabs.releaseAll();
      this.transcript.keepCurrent();
      let resumed;
      try {
        resumed = await this.acp.link.resumeSession(chat.sessionId, chat.agent);
      } catch (e) {
        this.transcript.keepCurrent(false); // nothing was replaced: the next switch decides afresh
        if (e instanceof RpcError && e.code === SESSION_BUSY) {
          return port.postMessage({ type: 'notice', level: 'error',
            text: 'That chat is answering in another window or device now: go back to it once its answer ends.' });
        }
        const items = await this.transcript.saved(key);
        // The pod's reason is written for a client and an operator: its first clause is what the person reads.
        const said = String(e.message || e).split(/[:;]/)[0].trim().slice(0, 200);
        return port.postMessage({ type: 'past-chat', key, items,
          gone: 'The gateway no longer has this chat, so the agent cannot go on with it. '
            + 'Its messages as this browser saved them are below, read-only. Start a new chat to go on.',
          why: said ? `The gateway said: ${said}.` : '' });
      }
      this._spokeAfter = null;
      this.transcript.add('event', { text: 'Back to this chat' });
      if (resumed.fresh) {
        this.transcript.add('system', { text: 'The gateway had forgotten this chat (it restarted, or the chat was closed ' +
          'or idle too long), so it takes it up again afresh: the agent may still remember the conversation, but what ' +
          'the gateway kept of it (its steps, its files) is gone.' });
      }
      return undefined;
    } finally {
      this.calls.chatOpened();
      this.pushState();
    }
  }

  /** The agent's tab on `site` (a host), the newest first, else its current tab; null when it has none. */
  _tabOn(site) {
    const on = site && [...this.tabs.owned].reverse().find(([, info]) => {
      try {
        return new URL(info.url).host === site;
      } catch {
        return false;
      }
    });
    return on ? on[0] : this.tabs.current;
  }

  async _showStep(port, site, target) {
    const tabId = this._tabOn(site);
    if (!(await showTab(tabId))) return port.postMessage({ type: 'notice', level: 'error', text: 'The agent has no tab open now.' });
    const page = this.calls.tools.page;
    const args = target.ref ? { ref: target.ref } : { selector: target.selector.slice(0, 1000) };
    try {
      const loc = await page.locate(await chrome.tabs.get(tabId), args);
      const [shown] = await page.exec(loc.target, 'outline', [loc.spec]);
      if (!shown || !shown.result || shown.result.error) throw new Error('not there');
      setTimeout(() => page.exec(loc.target, 'outline', [null]).catch(() => {}), SHOW_STEP_MS);
    } catch {
      port.postMessage({ type: 'notice', level: 'info', text: 'That element is not on the page any more: the tab is in front.' });
    }
    return undefined;
  }

  async _onMessage(port, msg) {
    if (!msg || typeof msg !== 'object') return;
    const { acp, guard, tabs, settings } = this;
    switch (msg.type) {
      case 'prompt':
        // A plan covers the task the person asked: a message that starts a new turn is a new task (lib/plan.js).
        if (!acp.turn) guard.plan?.end();
        this._spokeAfter = { since: acp.link.state.since, detail: acp.link.state.detail };
        // The panel keeps the text in its box until this says the prompt went (or why it did not).
        return acp.prompt(msg.text, (refused) => this._tell(port, refused
          ? { type: 'prompt-refused', id: msg.id, ...refused }
          : { type: 'prompt-accepted', id: msg.id }));
      case 'cancel':
        guard.plan?.end();
        return acp.stop();
      case 'decide':
        return guard.decide(String(msg.id), String(msg.decision));
      case 'show-card':
        // Show me: the card's tab in front, its element outlined (lib/guard.js, show).
        if (!(await guard.show(String(msg.id)))) port.postMessage({ type: 'notice', level: 'error', text: 'That tab is gone.' });
        return undefined;
      case 'check-page':
        // A step that may or may not have happened: the agent's tab on its site (else the agent's current one) in
        // front, for the person to look.
        if (!(await showTab(this._tabOn(String(msg.site || ''))))) {
          port.postMessage({ type: 'notice', level: 'error', text: 'The agent has no tab open now.' });
        }
        return undefined;
      case 'show-step':
        // Show me, on a step that may or may not have happened: its tab in front, its element outlined a moment.
        return this._showStep(port, String(msg.site || ''), { ref: String(msg.ref || ''), selector: String(msg.selector || '') });
      case 'show-tab':
        // Only a tab the agent may use: the panel lists no other.
        if (!tabs.owned.has(Number(msg.tabId)) || !(await showTab(Number(msg.tabId)))) {
          port.postMessage({ type: 'notice', level: 'error', text: 'That tab is gone.' });
        }
        return undefined;
      case 'settings': {
        const patch = msg.patch && typeof msg.patch === 'object' ? msg.patch : {};
        const urlProblem = 'url' in patch && checkUrl(String(patch.url).trim());
        const problem = urlProblem || ('key' in patch && checkKey(String(patch.key).trim()));
        if (problem) {
          // Said under the box it is about; the link line says the saved gateway stays, not the old error.
          port.postMessage({ type: 'notice', level: 'error', text: problem, field: urlProblem ? 'set-url' : 'set-key' });
          acp.link.refuseEdit(urlProblem ? 'URL' : 'key', problem);
          this._refusedEdit = acp.link.state.detail;
          this._settledEdit = '';
          return this.pushState();
        }
        if (!patch.key) delete patch.key; // an empty key box means "keep the saved key"
        if (patch.clearKey) patch.key = '';
        await settings.save(patch);
        // A valid save answers the refused edit the line still shows, whether or not the link dials again.
        this._settledEdit = this._refusedEdit;
        port.postMessage({ type: 'notice', level: 'ok', text: patch.clearKey ? 'Key forgotten.' : 'Settings saved.' });
        this.pushState();
        return acp.link.configure(activeGateway(settings.current));
      }
      case 'site-rule': {
        const origin = normaliseOrigin(msg.origin);
        if (!origin) {
          return port.postMessage({ type: 'notice', level: 'error', field: 'rule-origin',
            text: 'Type a site such as example.com (http and https) or https://example.com (that scheme only).' });
        }
        const rules = { ...settings.current.siteRules };
        if (msg.rule === 'always' || msg.rule === 'never') rules[origin] = msg.rule;
        else delete rules[origin];
        await settings.save({ siteRules: rules });
        return this.pushState();
      }
      case 'share-tab': {
        try {
          const [tab] = await chrome.tabs.query({ active: true, windowId: msg.windowId });
          if (!tab) throw new Error('No active tab in this window.');
          await tabs.attach(tab.id);
          port.postMessage({ type: 'notice', level: 'ok', text: `The agent may now use "${tab.title}".` });
        } catch (e) {
          port.postMessage({ type: 'notice', level: 'error', text: e.message });
        }
        return;
      }
      case 'new-chat':
        // The session it ends may be waiting on the person (a handoff, a guard card): that wait ends too.
        guard.cancelAll();
        guard.plan?.end();
        await this._newChat(port, typeof msg.agent === 'string' ? msg.agent : undefined, msg.closeTabs === true);
        return this.pushState();
      case 'unshare-tab': {
        const tabId = Number(msg.tabId);
        const wasCurrent = tabs.current === tabId;
        const title = tabs.owned.get(tabId)?.title;
        if (!tabs.unshare(tabId)) {
          return port.postMessage({ type: 'notice', level: 'error', text: 'That tab is not one you shared with the agent.' });
        }
        // The agent may be mid-step in it: that step stops rather than land in a tab it no longer has.
        if (wasCurrent) this.calls.tabTakenBack();
        return port.postMessage({ type: 'notice', level: 'ok', text: `The agent can no longer use "${title || 'that tab'}".` });
      }
      case 'past-chat':
        return this._pastChat(port, String(msg.key || ''));
      case 'current-chat':
        return port.postMessage({ type: 'transcript', items: this.transcript.items });
      case 'reconnect':
        return acp.link.poke();
      case 'gateway-add':
      case 'gateway-use':
      case 'gateway-remove':
        return this._onGatewayMessage(port, msg);
      default:
        return undefined;
    }
  }

  /**
   * A message to one panel, which may have gone meanwhile: its port is then forgotten. Any other refusal (a message
   * Chrome cannot clone, a defect of ours) is said in the console and the port kept, so the panel goes on hearing
   * the messages after it.
   */
  _tell(port, msg) {
    try {
      port.postMessage(msg);
    } catch (e) {
      if (/disconnected port/i.test(String(e && e.message))) this.ports.delete(port);
      else console.error('openab: a message to the side panel could not be sent:', msg && msg.type, e);
    }
  }

  /**
   * New chat: the session it replaces ends now (`restartSession` closes it, so the pod stops its agent) and
   * gives up its tabs. Its calls still in the browser stop first, so its agent acts in none of them again.
   * The panel asked the person first; `closeTabs` is their choice for the tabs the agent opened: closed, or
   * kept open as theirs.
   */
  async _newChat(port, agent, closeTabs) {
    const link = this.acp.link;
    const offline = this.acp.whyNotConnected();
    if (offline && offline.reason !== 'moved') {
      const why = offline.why.charAt(0).toLowerCase() + offline.why.slice(1);
      port.postMessage({ type: 'notice', level: 'error', text: `No new chat: ${why} This chat stays as it is.` });
      return;
    }
    this.calls.endChat();
    try {
      // Read before the release, which forgets them: the agent's own tabs, never one the person shared.
      const opened = [...this.tabs.owned].filter(([, info]) => info.by === 'agent').map(([id]) => id);
      const { kept, unshared } = await this.tabs.releaseAll();
      // The chat it replaces stays in Past chats (lib/chat.js, keepCurrent).
      this.transcript.keepCurrent();
      await link.restartSession(agent);
      this._spokeAfter = null; // the new chat's greeting is news
      this.transcript.clear();
      port.postMessage({ type: 'transcript', items: [] });
      let closed = 0;
      if (closeTabs) {
        // One at a time: a tab the person closed meanwhile must not keep the others open.
        const results = await Promise.allSettled(opened.map((id) => chrome.tabs.remove(id)));
        closed = results.filter((r) => r.status === 'fulfilled').length;
      }
      const open = closeTabs ? 0 : kept;
      const said = [
        closed && `${closed === 1 ? 'The tab' : `The ${closed} tabs`} the agent opened ${closed === 1 ? 'was' : 'were'} closed.`,
        open && `${open === 1 ? 'The tab' : `The ${open} tabs`} the agent opened stay${open === 1 ? 's' : ''} open as yours.`,
        unshared && `${unshared === 1 ? 'The tab' : `The ${unshared} tabs`} you shared ${unshared === 1 ? 'is' : 'are'} no longer shared.`,
      ].filter(Boolean);
      if (said.length) port.postMessage({ type: 'notice', level: 'ok', text: `New chat. ${said.join(' ')}` });
    } catch (e) {
      this.transcript.keepCurrent(false);
      port.postMessage({ type: 'notice', level: 'error', text: e.message });
    } finally {
      this.calls.chatOpened();
    }
  }

  /** The saved gateways: add, switch, remove (the settings form renames the one in use). A switch closes the
   * socket and dials the other one. */
  /**
   * A gateway the person paired by its link (lib/pairing.js): added and put in use as the panel's own Add gateway
   * does, by the same checks; a blank first gateway (a fresh install's) is dropped rather than left in the list.
   * A gateway already saved at that address (its pod started again and printed a new link) is that entry, never a
   * second one beside it: it takes the link's key if that is new, and it is put in use, so its own chat is what
   * the panel shows (the same session, resumed). Resolves to why it was refused, or '' once it is the gateway in use.
   */
  async addPairedGateway({ name, url, key }) {
    const said = [];
    const collect = { postMessage: (msg) => said.push(msg) };
    const known = gatewayAt(this.settings.current, url);
    if (known) {
      if (known.key !== key) this.settings.current = await setGatewayKey(this.settings.current, known.id, key);
      if (this.settings.current.active !== known.id) {
        await this._onGatewayMessage(collect, { type: 'gateway-use', id: known.id });
      } else {
        this.pushState();
        // A new key redials and resumes the same session; the same key leaves a live connection as it is.
        await this.acp.link.configure(activeGateway(this.settings.current));
      }
      return '';
    }
    const before = activeGateway(this.settings.current);
    await this._onGatewayMessage(collect, { type: 'gateway-add', name, url, key });
    const refused = said.find((m) => m.type === 'notice' && m.level === 'error');
    if (refused) return refused.text;
    if (!before.url && !before.key && this.settings.current.gateways.length > 1) {
      await this._onGatewayMessage(collect, { type: 'gateway-remove', id: before.id });
    }
    return '';
  }

  async _onGatewayMessage(port, msg) {
    const settings = this.settings;
    const before = settings.current.active;
    if (msg.type === 'gateway-add') {
      // The gateway in use stays connected while the person fills in the new one (the panel's own form): only a
      // new gateway with a usable URL is saved, and it is then the one in use.
      const url = String(msg.url || '').trim();
      const key = String(msg.key || '').trim();
      const urlProblem = checkUrl(url);
      const problem = urlProblem || checkKey(key);
      if (problem) return port.postMessage({ type: 'notice', level: 'error', text: problem, field: urlProblem ? 'set-url' : 'set-key' });
      const [next, refused] = await addGateway(settings.current, { name: String(msg.name || ''), url, key });
      if (refused) return port.postMessage({ type: 'notice', level: 'error', text: refused });
      settings.current = next;
      this._tell(port, { type: 'gateway-added', id: next.active });
    } else if (msg.type === 'gateway-use') {
      settings.current = await useGateway(settings.current, String(msg.id));
    } else {
      settings.current = await removeGateway(settings.current, String(msg.id));
    }
    if (settings.current.active !== before) {
      this.guard.plan?.end();
      // The conversation on screen is the other gateway's session; it stays there, saved with that gateway.
      this.transcript.follow(activeGateway(settings.current).id, null);
      // Tabs belong to a chat: the other gateway's agent never inherits this one's (lib/tabs.js, releaseAll).
      this.calls.endChat();
      await this.tabs.releaseAll();
    }
    this.pushState();
    try {
      return await this.acp.link.configure(activeGateway(settings.current));
    } finally {
      this.calls.chatOpened();
    }
  }
}
