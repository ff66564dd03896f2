// The service worker owns the socket, the session, the MCP server and the guard, so all of it
// survives the side panel being closed. Panels are views: they attach over a runtime port,
// receive the state and the conversation, and send the user's input back.

import { RpcError, METHOD_NOT_FOUND } from './lib/rpc.js';
import { Link } from './lib/link.js';
import { McpServer } from './lib/mcp.js';
import { BrowserTools } from './lib/tools.js';
import { AgentTabs } from './lib/tabs.js';
import { Guard } from './lib/guard.js';
import { Transcript } from './lib/chat.js';
import { DEFAULTS, checkKey, checkUrl, loadSettings, normaliseOrigin, publicSettings, saveSettings } from './lib/settings.js';

const PROMPT_TIMEOUT_MS = 30 * 60_000;
const MAX_PROMPT_CHARS = 100_000;

let settings = { ...DEFAULTS };
let activeCalls = 0;
let lastToolAt = 0;
let turn = null;
const panels = new Set();
const permissionWaits = new Map(); // outer request id -> AbortController

const tabs = new AgentTabs(() => pushState());
const guard = new Guard(
  () => settings,
  async (origin, rule) => {
    settings = await saveSettings(settings, { siteRules: { ...settings.siteRules, [origin]: rule } });
    pushState();
  },
  () => {
    chrome.action.setBadgeText({ text: guard.cards.size ? '!' : '' }).catch(() => {});
    pushState();
  },
);
const tools = new BrowserTools(tabs, guard, (delta) => {
  activeCalls += delta;
  lastToolAt = Date.now();
  pushState();
});
const transcript = new Transcript((item) => broadcast({ type: 'item', item }));

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
  onState: () => pushState(),
  onSocketClosed: () => {
    // Tunnels and questions belong to the socket; nothing on a dead socket can be answered.
    mcp.reset();
    guard.cancelAll();
  },
  sessionMeta: () => ({ 'dev.openab/permissionRelay': true }),
});
const mcp = new McpServer(tools, () => link.serverId, () => pushState());

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
    const picked = options.find((o) => o.optionId === answer);
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
    link: { status: link.state.status, detail: link.state.detail, retryAt: link.state.retryAt },
    tunnel: connected && mcp.attached,
    toolsInUse: connected && activeCalls > 0,
    lastToolAt,
    busy: Boolean(turn),
    settings: publicSettings(settings),
    cards: guard.publicCards(),
    agentTabs: [...tabs.owned.keys()],
    currentTab: tabs.current,
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
      return link.configure(settings);
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
      try {
        await link.restartSession();
        transcript.clear();
        port.postMessage({ type: 'transcript', items: [] });
      } catch (e) {
        port.postMessage({ type: 'notice', level: 'error', text: e.message });
      }
      return pushState();
    case 'reconnect':
      return link.poke();
    default:
      return undefined;
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
  await link.configure(settings);
}
const ready = boot().catch((e) => console.error('openab: start-up failed', e));

// A safety net, not the keepalive: if Chrome ever stops this worker, the alarm restarts it and
// the restart re-dials with the stored session.
chrome.alarms.create('openab-wake', { periodInMinutes: 0.5 });
chrome.alarms.onAlarm.addListener(() => ready.then(() => link.poke()));
chrome.sidePanel?.setPanelBehavior({ openPanelOnActionClick: true }).catch(() => {});
