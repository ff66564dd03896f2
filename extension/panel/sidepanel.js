// The side panel is a view over the service worker: it renders state and conversation and sends
// the user's input back. Page and model text only ever reach the DOM through textContent. Its parts:
// the header (header.js), the conversation (render.js), the cards (cards.js), the agent's tabs (tab-list.js), the settings
// (settings-view.js); this file holds the header, the composer and the port to the worker.

import { TranscriptView } from './render.js';
import { renderCards } from './cards.js';
import { renderAgentTabs } from './tab-list.js';
import { renderSettings, showFieldError, showSettings, wireSettings } from './settings-view.js';
import { renderHeader } from './header.js';
import { $ } from './dom.js';

const transcript = new TranscriptView($('log'));
let port = null;
let state = null;
let windowId = null;

function renderState(s) {
  state = s;
  renderHeader(s);
  $('stop').disabled = !s.busy && !s.cards.length;
  $('send').disabled = s.busy;

  const cfg = s.settings;
  renderSettings(cfg, send);
  if (s.link.status === 'off' && !cfg.url) showSettings(true);
  renderCards(s.cards, send);
  renderAgentTabs(s.tabList || { tabs: [], more: 0 }, send);
}

let noticeTimer = null;
function notice(text, level) {
  const n = $('notice');
  n.textContent = text;
  n.className = `notice ${level || ''}`;
  n.hidden = false;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => (n.hidden = true), level === 'error' ? 12000 : 4000);
}

function send(msg) {
  if (!port) connect();
  try {
    port.postMessage(msg);
  } catch {
    connect();
    port.postMessage(msg);
  }
}

function connect() {
  // The worker may have been stopped; connecting wakes it, and it sends the whole state back.
  port = chrome.runtime.connect({ name: 'panel' });
  port.onMessage.addListener((msg) => {
    if (msg.type === 'state') renderState(msg);
    else if (msg.type === 'item') transcript.show(msg.item);
    else if (msg.type === 'transcript') transcript.showAll(msg.items);
    // A notice about a settings box shows under that box.
    else if (msg.type === 'notice' && !(msg.field && showFieldError(msg.field, msg.text))) notice(msg.text, msg.level);
  });
  port.onDisconnect.addListener(() => {
    port = null;
    setTimeout(connect, 500);
  });
}

$('composer').addEventListener('submit', (e) => {
  e.preventDefault();
  const text = $('prompt').value;
  if (!text.trim() || (state && state.busy)) return;
  send({ type: 'prompt', text });
  $('prompt').value = '';
});
$('prompt').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    $('composer').requestSubmit();
  }
});
$('stop').addEventListener('click', () => send({ type: 'cancel' }));
wireSettings(send);
$('share-tab').addEventListener('click', () => send({ type: 'share-tab', windowId }));
$('new-chat').addEventListener('click', () => {
  const picker = $('new-chat-agent');
  send({ type: 'new-chat', ...(picker.hidden || !picker.value ? {} : { agent: picker.value }) });
});
window.addEventListener('keydown', (e) => {
  // Escape closes an enlarged screenshot first; only then does it mean Stop.
  if (e.key === 'Escape' && transcript.closeEnlarged()) e.stopPropagation();
}, true);
document.addEventListener('keydown', (e) => {
  if (e.key === 'Escape' && state && (state.busy || state.cards.length)) send({ type: 'cancel' });
});
setInterval(() => state && state.link.status === 'retrying' && renderState(state), 1000);

chrome.windows.getCurrent().then((w) => (windowId = w.id)).catch(() => {});
connect();
