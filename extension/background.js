// The service worker owns the socket, the session, the MCP server and the guard, so all of it
// survives the side panel being closed. Panels are views: they attach over a runtime port,
// receive the state and the conversation, and send the user's input back.

import { RpcError, METHOD_NOT_FOUND } from './lib/rpc.js';
import { Link, SESSION_MOVED_DETAIL } from './lib/link.js';
import { McpServer } from './lib/mcp.js';
import { BrowserTools } from './lib/tools.js';
import { AgentTabs, ChatCalls } from './lib/tabs.js';
import { Guard } from './lib/guard.js';
import { Dialogs } from './lib/dialogs.js';
import { Transcript } from './lib/chat.js';
import { DEFAULTS, checkKey, checkUrl, loadSettings, normaliseOrigin, publicSettings, saveSettings } from './lib/settings.js';
import { activeGateway, addGateway, removeGateway, useGateway } from './lib/settings.js';

const PROMPT_TIMEOUT_MS = 30 * 60_000;
const MAX_PROMPT_CHARS = 100_000;

let settings = { ...DEFAULTS };
let activeCalls = 0;
let lastToolAt = 0;
let turn = null;
const panels = new Set();
const permissionWaits = new Map(); // outer request id -> AbortController

const dialogs = new Dialogs(() => pushState());
const tabs = new AgentTabs(() => {
  // The debugger that sees JavaScript dialogs is on the tabs the agent may use, from the moment it may
  // (a page can ask as it loads), and on no other.
  dialogs.keepOnly(tabs.owned.keys());
  for (const tabId of tabs.owned.keys()) dialogs.watch(tabId);
  pushState();
});
const guard = new Guard(
  () => settings,
  async (origin, rule) => {
    settings = await saveSettings(settings, { siteRules: { ...settings.siteRules, [origin]: rule } });
    pushState();
  },
  () => {
    chrome.action.setBadgeText({ text: guard.cards.size ? '!' : '' }).catch(() => {});
    sayAsking();
    pushState();
  },
);

// While a card waits for the person, the gateway stops the turn's timers and its tool calls' timeouts
// (`_openab/person`, docs/mcp-over-acp-tunnel-contract.md): a person taking their time must not fail the turn.
let askingSaid = false;
function sayAsking() {
  const asking = guard.cards.size > 0;
  if (!link.connected) {
    askingSaid = false; // the gateway forgets it with the socket
    return;
  }
  if (asking === askingSaid) return;
  askingSaid = asking;
  link.notify('_openab/person', { asking });
}
const tools = new BrowserTools(tabs, guard, (delta) => {
  activeCalls += delta;
  lastToolAt = Date.now();
  pushState();
}, dialogs);
const transcript = new Transcript(
  (item) => broadcast({ type: 'item', item }),
  (items) => broadcast({ type: 'transcript', items }),
);

/** The conversation on screen is that of the session the socket holds, per gateway and session. */
function followSession() {
  const gateway = link.settings ? link.settings.id || link.settings.url : '';
  transcript.follow(gateway, link.connected ? link.sessionId : null);
}

const link = new Link({
  onRequest: async (method, params, id) => {
    if (mcp.handles(method)) return mcp.onRequest(method, params, id);
    if (method === 'session/request_permission') return relayPermission(params, id);
    throw new RpcError(METHOD_NOT_FOUND, `Method not found: ${method}`);
  },
  onNotification: (method, params) => {
    if (method === 'session/update') {
      if (params && params.sessionId === link.sessionId) transcript.apply(params.update);
      return;
    }
    if (method === '$/cancel_request') permissionWaits.get(params && params.requestId)?.abort();
    mcp.onNotification(method, params);
  },
  onState: () => {
    followSession();
    pushState();
  },
  onSocketClosed: () => {
    // Tunnels and questions belong to the socket; nothing on a dead socket can be answered.
    mcp.reset();
    guard.cancelAll();
  },
  sessionMeta: () => ({ 'dev.openab/permissionRelay': true }),
});
// Each call is tied to the chat it arrived in: New chat stops the old chat's calls (lib/tabs.js).
const calls = new ChatCalls(tools);
const mcp = new McpServer(calls, () => link.serverId, () => pushState());

/** The gateway relays the agent's own permission question; the user answers on a card. */
async function relayPermission(params, id) {
  const p = params && typeof params === 'object' ? params : {};
  const options = (Array.isArray(p.options) ? p.options : [])
    .filter((o) => o && typeof o.optionId === 'string')
    .slice(0, 8)
    .map((o) => ({ optionId: o.optionId, name: String(o.name || o.optionId).slice(0, 80), kind: String(o.kind || '') }));
  if (!options.length || p.sessionId !== link.sessionId) return { outcome: { outcome: 'cancelled' } };
  const ctl = new AbortController();
  permissionWaits.set(id, ctl);
  try {
    const tc = p.toolCall && typeof p.toolCall === 'object' ? p.toolCall : {};
    const answer = await guard.ask({
      kind: 'permission', title: `The agent asks to run: ${String(tc.title || 'a tool').slice(0, 200)}`,
      site: '', detail: String(tc.kind || ''), options,
    }, ctl.signal);
    // Nobody answered: that one action is declined (the agent's own reject), not the whole turn cancelled.
    const picked = answer === 'timeout'
      ? options.find((o) => o.kind === 'reject_once') || options.find((o) => o.kind === 'reject_always')
      : options.find((o) => o.optionId === answer);
    return picked ? { outcome: { outcome: 'selected', optionId: picked.optionId } } : { outcome: { outcome: 'cancelled' } };
  } finally {
    permissionWaits.delete(id);
  }
}

async function sendPrompt(text) {
  const body = String(text || '').slice(0, MAX_PROMPT_CHARS);
  if (!body.trim()) return;
  if (turn) {
    transcript.add('error', { text: 'The agent is still answering. Wait, or press Stop.' });
    return;
  }
  if (!link.connected) {
    transcript.add('error', { text: `Not connected to the gateway (${link.state.detail}). Check the settings.` });
    return;
  }
  if (link.moved) {
    transcript.add('error', { text: SESSION_MOVED_DETAIL });
    return;
  }
  transcript.add('user', { text: body });
  turn = { startedAt: Date.now(), sessionId: link.sessionId };
  pushState();
  try {
    const res = await link.request('session/prompt', {
      sessionId: link.sessionId, prompt: [{ type: 'text', text: body }],
    }, PROMPT_TIMEOUT_MS);
    transcript.endTurn(res && res.stopReason);
  } catch (e) {
    transcript.endTurn();
    transcript.add('error', { text: `The prompt failed: ${e.message}` });
  } finally {
    turn = null;
    pushState();
  }
}

function stop() {
  if (turn) link.notify('session/cancel', { sessionId: turn.sessionId });
  // A pending confirmation must not outlive Stop and be approved later by accident.
  guard.cancelAll();
}

function statePayload() {
  const connected = link.connected;
  return {
    type: 'state',
    link: { status: link.state.status, detail: link.state.detail, retryAt: link.state.retryAt, moved: link.moved },
    tunnel: connected && mcp.attached,
    toolsInUse: connected && activeCalls > 0,
    lastToolAt,
    busy: Boolean(turn),
    settings: publicSettings(settings),
    agents: connected ? link.agents : [],
    agent: connected ? link.agent : '',
    cards: guard.publicCards(),
    agentTabs: [...tabs.owned.keys()],
    currentTab: tabs.current,
    tabList: tabs.view(),
  };
}

let statePending = false;
function pushState() {
  // Coalesce bursts (streamed chunks, many tool calls) into one message per tick.
  if (statePending) return;
  statePending = true;
  setTimeout(() => {
    statePending = false;
    broadcast(statePayload());
  }, 0);
}

function broadcast(msg) {
  for (const port of panels) {
    try {
      port.postMessage(msg);
    } catch {
      panels.delete(port);
    }
  }
}

async function onPanelMessage(port, msg) {
  if (!msg || typeof msg !== 'object') return;
  switch (msg.type) {
    case 'prompt':
      return sendPrompt(msg.text);
    case 'cancel':
      return stop();
    case 'decide':
      return guard.decide(String(msg.id), String(msg.decision));
    case 'settings': {
      const patch = msg.patch && typeof msg.patch === 'object' ? msg.patch : {};
      const problem = ('url' in patch && checkUrl(String(patch.url).trim())) || ('key' in patch && checkKey(String(patch.key).trim()));
      if (problem) return port.postMessage({ type: 'notice', level: 'error', text: problem });
      if (!patch.key) delete patch.key; // an empty key box means "keep the saved key"
      if (patch.clearKey) patch.key = '';
      settings = await saveSettings(settings, patch);
      port.postMessage({ type: 'notice', level: 'ok', text: 'Settings saved.' });
      pushState();
      return link.configure(activeGateway(settings));
    }
    case 'site-rule': {
      const origin = normaliseOrigin(msg.origin);
      if (!origin) return port.postMessage({ type: 'notice', level: 'error', text: 'Type a site such as example.com or https://example.com.' });
      const rules = { ...settings.siteRules };
      if (msg.rule === 'always' || msg.rule === 'never') rules[origin] = msg.rule;
      else delete rules[origin];
      settings = await saveSettings(settings, { siteRules: rules });
      return pushState();
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
      await newChat(port, typeof msg.agent === 'string' ? msg.agent : undefined);
      return pushState();
    case 'unshare-tab': {
      const tabId = Number(msg.tabId);
      const wasCurrent = tabs.current === tabId;
      const title = tabs.owned.get(tabId)?.title;
      if (!tabs.unshare(tabId)) {
        return port.postMessage({ type: 'notice', level: 'error', text: 'That tab is not one you shared with the agent.' });
      }
      // The agent may be mid-step in it: that step stops rather than land in a tab it no longer has.
      if (wasCurrent) calls.tabTakenBack();
      return port.postMessage({ type: 'notice', level: 'ok', text: `The agent can no longer use "${title || 'that tab'}".` });
    }
    case 'reconnect':
      return link.poke();
    case 'gateway-add':
    case 'gateway-use':
    case 'gateway-remove':
      return onGatewayMessage(port, msg);
    default:
      return undefined;
  }
}

/**
 * New chat: the session it replaces ends now (`restartSession` closes it, so the pod stops its agent) and
 * gives up its tabs. Its calls still in the browser stop first, so its agent acts in none of them again.
 */
async function newChat(port, agent) {
  if (!link.connected) {
    port.postMessage({ type: 'notice', level: 'error', text: `Not connected to the gateway (${link.state.detail}). Check the settings.` });
    return;
  }
  calls.endChat();
  try {
    const { kept, unshared } = await tabs.releaseAll();
    await link.restartSession(agent);
    transcript.clear();
    port.postMessage({ type: 'transcript', items: [] });
    const said = [
      kept && `${kept === 1 ? 'The tab' : `The ${kept} tabs`} the agent opened stay${kept === 1 ? 's' : ''} open as yours.`,
      unshared && `${unshared === 1 ? 'The tab' : `The ${unshared} tabs`} you shared ${unshared === 1 ? 'is' : 'are'} no longer shared.`,
    ].filter(Boolean);
    if (said.length) port.postMessage({ type: 'notice', level: 'ok', text: `New chat. ${said.join(' ')}` });
  } catch (e) {
    port.postMessage({ type: 'notice', level: 'error', text: e.message });
  } finally {
    calls.chatOpened();
  }
}

/** The saved gateways: add, switch, remove (the settings form renames the one in use). A switch closes the
 * socket and dials the other one. */
async function onGatewayMessage(port, msg) {
  const before = settings.active;
  if (msg.type === 'gateway-add') {
    const [next, refused] = await addGateway(settings, { name: String(msg.name || '') });
    if (refused) return port.postMessage({ type: 'notice', level: 'error', text: refused });
    settings = next;
  } else if (msg.type === 'gateway-use') {
    settings = await useGateway(settings, String(msg.id));
  } else {
    settings = await removeGateway(settings, String(msg.id));
  }
  if (settings.active !== before) {
    // The conversation on screen is the other gateway's session; it stays there, saved with that gateway.
    transcript.follow(activeGateway(settings).id, null);
    // Tabs belong to a chat: the other gateway's agent never inherits this one's (lib/tabs.js, releaseAll).
    calls.endChat();
    await tabs.releaseAll();
  }
  pushState();
  try {
    return await link.configure(activeGateway(settings));
  } finally {
    calls.chatOpened();
  }
}

chrome.runtime.onConnect.addListener((port) => {
  // Only our own extension pages: the page agent injected into web pages has runtime access too.
  const fromPanel = port.sender?.id === chrome.runtime.id && String(port.sender?.url || '').startsWith(chrome.runtime.getURL('panel/'));
  if (port.name !== 'panel' || !fromPanel) {
    port.disconnect();
    return;
  }
  panels.add(port);
  port.onMessage.addListener((msg) => ready.then(() => onPanelMessage(port, msg)).catch((e) => console.error('openab:', e)));
  port.onDisconnect.addListener(() => panels.delete(port));
  ready.then(() => {
    port.postMessage({ type: 'transcript', items: transcript.items });
    port.postMessage(statePayload());
    link.poke();
  });
});

async function boot() {
  settings = await loadSettings();
  await tabs.restore();
  await transcript.restore();
  await link.configure(activeGateway(settings));
}
const ready = boot().catch((e) => console.error('openab: start-up failed', e));

// A safety net, not the keepalive: if Chrome ever stops this worker, the alarm restarts it and
// the restart re-dials with the stored session.
chrome.alarms.create('openab-wake', { periodInMinutes: 0.5 });
chrome.alarms.onAlarm.addListener(() => ready.then(() => link.poke()));
chrome.sidePanel?.setPanelBehavior({ openPanelOnActionClick: true }).catch(() => {});
