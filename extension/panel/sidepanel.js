// The side panel is a view over the service worker: it renders state and conversation and sends
// the user's input back. Page and model text only ever reach the DOM through textContent. Its parts:
// the header (header.js), the conversation (render.js), the cards (cards.js), the agent's tabs (tab-list.js), the settings
// (settings-view.js); this file holds the header, the composer and the port to the worker.

import { TranscriptView } from './render.js';
import { renderCards } from './cards.js';
import { renderAgentTabs } from './tab-list.js';
import { endAddingGateway, renderSettings, showFieldError, showSettings, wireSettings } from './settings-view.js';
import { renderHeader } from './header.js';
import { $, el } from './dom.js';

const transcript = new TranscriptView($('log'), (msg) => send(msg));
let port = null;
let state = null;
let windowId = null;

function renderState(s) {
  state = s;
  renderHeader(s);
  renderPastChats(s.pastChats || []);
  $('stop').disabled = !s.busy && !s.cards.length;
  $('send').disabled = s.busy || readOnly;

  const cfg = s.settings;
  renderSettings(cfg, send);
  if (s.link.status === 'off' && !cfg.url) showSettings(true);
  renderCards(s.cards, send);
  renderAgentTabs(s.tabList || { tabs: [], more: 0 }, send);
  // Retry now: while the link waits out its backoff (up to 30 s), the person can have it dial at once. It stays
  // in place (disabled) while a try runs, so the panel does not jump at each one.
  $('retry-row').hidden = s.link.status !== 'retrying' && s.link.status !== 'connecting';
  $('retry-now').disabled = s.link.status !== 'retrying';
  renderComposerNote();
  if (!$('new-chat-confirm').hidden) askNewChat();
}

// What the composer says about the message in its box: why it was not sent (it stays in the box). A gateway
// out of reach is followed live: its countdown, then that it is back.
let composerNote = null; // {reason, text, retryAt}
function renderComposerNote() {
  const n = $('composer-note');
  n.hidden = !composerNote;
  if (!composerNote) return;
  let text = composerNote.text;
  let ok = false;
  if (composerNote.reason === 'unreachable' && state) {
    const link = state.link;
    if (link.status === 'connected') {
      text = 'Connected again. Your message is kept: press Send to send it.';
      ok = true;
    } else if (link.status === 'retrying' && link.retryAt) {
      const secs = Math.round((link.retryAt - Date.now()) / 1000);
      text = text.replace(/\(retrying in \d+\ss\)/, secs > 0 ? `(retrying in ${secs}\u00a0s)` : '(retrying now)');
    } else if (link.status === 'connecting') {
      text = text.replace(/\(retrying in \d+\ss\)/, '(retrying now)');
    }
  }
  n.textContent = text;
  n.className = ok ? 'composer-note ok' : 'composer-note';
}

function sayComposer(note) {
  composerNote = note;
  renderComposerNote();
}

// The prompt sent and not yet answered by the worker: its text stays in the box until the worker accepts it.
let pendingPrompt = null; // {id, text}
let promptSeq = 0;
function onPromptAnswer(msg) {
  if (!pendingPrompt || msg.id !== pendingPrompt.id) return;
  const { text } = pendingPrompt;
  pendingPrompt = null;
  if (msg.type === 'prompt-accepted') {
    // What the person typed after pressing Send is theirs to keep.
    if ($('prompt').value === text) $('prompt').value = '';
    sayComposer(null);
  } else {
    sayComposer({ reason: msg.reason, text: msg.text, retryAt: msg.retryAt });
  }
}

// New chat asks first, in the panel: the conversation goes, and the person says what becomes of the agent's tabs.
function agentOpenedTabs() {
  return ((state && state.tabList && state.tabList.tabs) || []).filter((t) => t.by === 'agent').length;
}

function hasSomethingToLose() {
  // An event line alone (a session resumed) is not a conversation to lose.
  const said = [...$('log').children].some((row) => row.dataset.kind !== 'event');
  return Boolean(said || (state && (state.tabList?.tabs?.length || state.cards.length || state.busy)));
}

function askNewChat() {
  const n = agentOpenedTabs();
  $('new-chat-tabs').hidden = !n;
  $('new-chat-tabs-legend').textContent = n === 1 ? 'The tab the agent opened:' : `The ${n} tabs the agent opened:`;
  $('new-chat-confirm').hidden = false;
}

function closeNewChatQuestion() {
  $('new-chat-confirm').hidden = true;
}

function startNewChat(closeTabs) {
  closeNewChatQuestion();
  const picker = $('new-chat-agent');
  send({ type: 'new-chat', closeTabs, ...(picker.hidden || !picker.value ? {} : { agent: picker.value }) });
}

// Past chats: this gateway's saved chats, newest first, each a button (its first message, when it was last used).
// Their titles are the person's words: text nodes only.
function whenUsed(ms) {
  if (!ms) return '';
  const d = new Date(ms);
  const today = new Date().toDateString() === d.toDateString();
  const time = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  return today ? `today ${time}` : `${d.toLocaleDateString([], { day: 'numeric', month: 'short' })} ${time}`;
}

function renderPastChats(chats) {
  const list = $('past-chat-list');
  const focused = document.activeElement && list.contains(document.activeElement) ? document.activeElement.dataset.key : '';
  list.replaceChildren(...chats.map((c) => {
    const b = el('button', 'past-chat');
    b.type = 'button';
    b.dataset.key = c.key;
    b.append(el('span', 'past-title', c.title || (c.current ? 'This chat (nothing said yet)' : 'A chat with nothing said')));
    const used = whenUsed(c.at);
    b.append(el('span', 'past-when', c.current ? `This chat${used ? ` · last used ${used}` : ''}` : `Last used ${used || 'earlier'}`));
    if (c.current) b.setAttribute('aria-current', 'true');
    b.addEventListener('click', () => openPastChat(c));
    const li = el('li');
    li.append(b);
    return li;
  }));
  $('past-chats-empty').hidden = chats.some((c) => !c.current);
  if (focused) list.querySelector(`[data-key="${CSS.escape(focused)}"]`)?.focus();
}

function showPastChats(open) {
  $('past-chats').hidden = !open;
  $('toggle-past').setAttribute('aria-expanded', String(open));
  if (open) ($('past-chat-list').querySelector('button') || $('toggle-past')).focus();
}

function openPastChat(chat) {
  showPastChats(false);
  leaveReadOnly();
  if (!chat.current) send({ type: 'past-chat', key: chat.key });
  $('prompt').focus();
}

// A past chat the gateway no longer has: its saved messages, read-only, and why; New chat or back to the current one.
let readOnly = false;
function showGoneChat(msg) {
  readOnly = true;
  transcript.showAll(Array.isArray(msg.items) ? msg.items : []);
  $('past-gone-why').textContent = String(msg.gone || '');
  $('past-gone-said').textContent = String(msg.why || '');
  $('past-gone-said').hidden = !msg.why;
  $('past-gone').hidden = false;
  $('prompt').disabled = true;
  $('send').disabled = true;
  $('past-gone-new').focus();
}

function leaveReadOnly() {
  if (!readOnly) return;
  readOnly = false;
  $('past-gone').hidden = true;
  $('prompt').disabled = false;
  $('send').disabled = Boolean(state && state.busy);
  send({ type: 'current-chat' });
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
    // While the person reads a past chat the gateway no longer has, the worker's conversation waits behind it (it
    // is asked for again as they leave it).
    else if (readOnly && (msg.type === 'item' || msg.type === 'transcript')) return;
    else if (msg.type === 'item') transcript.show(msg.item);
    else if (msg.type === 'transcript') transcript.showAll(msg.items);
    else if (msg.type === 'past-chat') showGoneChat(msg);
    // A notice about a settings box shows under that box.
    else if (msg.type === 'notice' && !(msg.field && showFieldError(msg.field, msg.text))) notice(msg.text, msg.level);
    else if (msg.type === 'prompt-accepted' || msg.type === 'prompt-refused') onPromptAnswer(msg);
    else if (msg.type === 'gateway-added') endAddingGateway();
  });
  port.onDisconnect.addListener(() => {
    port = null;
    // A worker that went away never answers: the text is still in the box, to be sent again.
    pendingPrompt = null;
    setTimeout(connect, 500);
  });
}

$('composer').addEventListener('submit', (e) => {
  e.preventDefault();
  const text = $('prompt').value;
  if (!text.trim() || pendingPrompt || (state && state.busy)) return;
  // The box keeps the text until the worker says the prompt went: offline, nothing typed is lost.
  pendingPrompt = { id: ++promptSeq, text };
  send({ type: 'prompt', text, id: pendingPrompt.id });
});
$('prompt').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    $('composer').requestSubmit();
  }
});
// A note about a message that is no longer in the box (the person emptied it) has nothing left to say.
$('prompt').addEventListener('input', () => composerNote && !$('prompt').value.trim() && sayComposer(null));
$('stop').addEventListener('click', () => send({ type: 'cancel' }));
$('retry-now').addEventListener('click', () => send({ type: 'reconnect' }));
wireSettings(send);
$('share-tab').addEventListener('click', () => send({ type: 'share-tab', windowId }));
$('new-chat').addEventListener('click', () => {
  leaveReadOnly(); // from a past chat the gateway no longer has: the question is about the chat on the gateway
  // Nothing to lose, or no connection to start one on (the worker says why): no question.
  if (!hasSomethingToLose() || !state || state.link.status !== 'connected') return startNewChat(false);
  $('new-chat-confirm').querySelector('input[value=keep]').checked = true;
  askNewChat();
  $('new-chat-no').focus();
});
$('new-chat-yes').addEventListener('click', () => {
  const close = !$('new-chat-tabs').hidden && $('new-chat-confirm').querySelector('input[value=close]').checked;
  startNewChat(close);
});
$('new-chat-no').addEventListener('click', closeNewChatQuestion);
$('toggle-past').addEventListener('click', () => showPastChats($('past-chats').hidden));
$('past-gone-back').addEventListener('click', () => {
  leaveReadOnly();
  $('prompt').focus();
});
$('past-gone-new').addEventListener('click', () => $('new-chat').click());
// Escape dismisses what is open over the panel (an enlarged screenshot, New chat's question) and nothing else:
// it never stops the turn, in the message box or anywhere, since a key that means "never mind" everywhere must
// not throw away the agent's work. Stop is the Stop button.
window.addEventListener('keydown', (e) => {
  if (e.key !== 'Escape') return;
  if (transcript.closeEnlarged()) e.stopPropagation();
  else if (!$('new-chat-confirm').hidden) closeNewChatQuestion();
  else if (!$('past-chats').hidden) {
    showPastChats(false);
    $('toggle-past').focus();
  }
}, true);
setInterval(() => state && state.link.status === 'retrying' && renderState(state), 1000);

chrome.windows.getCurrent().then((w) => (windowId = w.id)).catch(() => {});
connect();
