// The service worker owns the socket, the session, the MCP server and the guard, so all of it
// survives the side panel being closed. This file only wires the parts together: the ACP client
// (lib/acp.js), the browser's MCP server (lib/mcp.js) and its tools (lib/tools.js), the guard, the
// agent's tabs and the side panels (lib/panels.js). Chrome's listeners are registered here, at the
// top level, so a worker Chrome restarts for an event hears it.

import { McpServer } from './lib/mcp.js';
import { BrowserTools, checkImplemented } from './lib/tools.js';
import { loadCatalogue } from './lib/catalogue.js';
import { AgentTabs, ChatCalls, addressOf } from './lib/tabs.js';
import { Guard } from './lib/guard.js';
import { Plan } from './lib/plan.js';
import { Dialogs } from './lib/dialogs.js';
import { AgentPasswords } from './lib/passwords.js';
import { Transcript } from './lib/chat.js';
import { SavedSettings, activeGateway } from './lib/settings.js';
import { AcpClient } from './lib/acp.js';
import { Panels } from './lib/panels.js';
import { PairLinks } from './lib/pairing.js';
import { AgentDownloads } from './lib/downloads.js';
import { HeldDownloads } from './lib/held-downloads.js';

const settings = new SavedSettings();
const dialogs = new Dialogs(() => panels.pushState());
let chatEpoch = 0;
const tabs = new AgentTabs(() => {
  // The debugger that sees JavaScript dialogs is only ever on tabs the agent may use (lib/dialogs.js says when).
  dialogs.keepOnly(tabs.owned.keys());
  // A new chat asks again for the debugging bar the person cancelled in the last one.
  if (tabs.epoch !== chatEpoch) {
    chatEpoch = tabs.epoch;
    dialogs.allowAgain();
  }
  panels.pushState();
}, {
  watched: () => dialogs.view(),
  opened: (tabId) => dialogs.look(tabId),
  // Moving the tab out of the openab group is taking it back, as Stop sharing is (lib/panels.js).
  takenBack: () => calls.tabTakenBack(),
});
const guard = new Guard(
  () => settings.current,
  async (origin, rule) => {
    await settings.save({ siteRules: { ...settings.current.siteRules, [origin]: rule } });
    panels.pushState();
  },
  () => {
    chrome.action.setBadgeText({ text: guard.cards.size ? '!' : '' }).catch(() => {});
    acp.sayAsking();
    panels.pushState();
  },
  new Plan(() => settings.current),
);
// Downloads a click in an agent tab starts are the agent's: kept from the person's downloads (lib/downloads.js).
const downloads = new AgentDownloads(async (tabId) => {
  if (!tabs.owned.has(tabId)) return null;
  const tab = await chrome.tabs.get(tabId).catch(() => null);
  return tab ? addressOf(tab) : null;
});
chrome.downloads?.onCreated.addListener((item) => {
  ready.then(() => downloads.onCreated(item)).catch((e) => console.error('openab: a download', e));
});
chrome.webNavigation.onBeforeNavigate.addListener((details) => downloads.navigating(details));
// A download an action of the agent's starts in a watched agent tab is read at its answer, before Chrome would save it
// (lib/held-downloads.js); the action learns so at once (lib/loads.js).
const heldDownloads = new HeldDownloads(downloads, (tabId, entry) => tools.loads.downloaded(tabId, entry));
chrome.tabs.onRemoved.addListener((tabId) => downloads.forget(tabId));
// Files go to and come from the pod on the chat's socket (lib/file-transfer.js).
const files = {
  request: (method, params, ms) => acp.link.request(method, params, ms),
  sessionId: () => acp.link.sessionId,
  downloads,
  held: heldDownloads,
};
const tools = new BrowserTools(tabs, guard, (delta) => panels.toolActivity(delta), dialogs, new AgentPasswords(), files);
const transcript = new Transcript(
  (item) => panels.broadcast({ type: 'item', item }),
  (items) => panels.broadcast({ type: 'transcript', items }),
);
// Each call is tied to the chat it arrived in: New chat stops the old chat's calls (lib/tabs.js).
const calls = new ChatCalls(tools);
const mcp = new McpServer(calls, () => acp.link.serverId, () => panels.pushState());
const acp = new AcpClient({ mcp, guard, transcript, onChange: () => panels.pushState() });
const panels = new Panels({ acp, mcp, guard, tabs, calls, transcript, settings });

chrome.runtime.onConnect.addListener((port) => panels.accept(port, ready));

// The pairing link (lib/pairing.js): its gateway is added as the panel's own Add gateway adds one.
const pairing = new PairLinks({
  isAgentTab: (tabId) => tabs.owned.has(tabId),
  addGateway: async (gateway) => {
    await ready;
    return panels.addPairedGateway(gateway);
  },
});
// After the start: which tabs are the agent's is known once they are restored.
chrome.tabs.onUpdated.addListener((tabId, change) => { ready.then(() => pairing.onUpdated(tabId, change)); });
chrome.runtime.onMessage.addListener((msg, sender, reply) => pairing.onMessage(msg, sender, reply));

async function boot() {
  // Before the socket: every MCP message and tool call reads the catalogue (lib/catalogue.js says why it is
  // fetched and not imported).
  await loadCatalogue();
  checkImplemented();
  await settings.load();
  await tabs.restore();
  await transcript.restore();
  await acp.link.configure(activeGateway(settings.current));
}
const ready = boot().catch((e) => console.error('openab: start-up failed', e));

// A safety net, not the keepalive: if Chrome ever stops this worker, the alarm restarts it and
// the restart re-dials with the stored session.
chrome.alarms.create('openab-wake', { periodInMinutes: 0.5 });
chrome.alarms.onAlarm.addListener(() => ready.then(() => acp.link.poke()));
chrome.sidePanel?.setPanelBehavior({ openPanelOnActionClick: true }).catch(() => {});
