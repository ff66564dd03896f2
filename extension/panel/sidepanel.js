// The side panel is a view over the service worker: it renders state and conversation and sends
// the user's input back. Page and model text only ever reach the DOM through textContent.

import { parsePairing } from '../lib/settings.js';
import { TranscriptView } from './render.js';

const $ = (id) => document.getElementById(id);
const transcript = new TranscriptView($('log'));
let port = null;
let state = null;
let windowId = null;

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function renderItem(item) {
  transcript.show(item);
}

function renderTranscript(items) {
  transcript.showAll(items);
}

function seg(id, text, cls) {
  const s = $(id);
  s.textContent = text;
  s.className = `seg ${cls || ''}`;
}

function renderState(s) {
  state = s;
  const st = s.link.status;
  if (st === 'connected' && s.link.moved) seg('pill-link', 'chat moved', 'wait');
  else seg('pill-link', st === 'connected' ? 'connected' : st === 'off' ? 'offline' : st, st === 'connected' ? 'on' : st === 'off' ? '' : 'wait');
  seg('pill-tunnel', s.tunnel ? 'tools attached' : 'no tools', s.tunnel ? 'on' : '');
  seg('pill-tools', s.toolsInUse ? 'browser in use' : 'idle', s.toolsInUse ? 'busy' : '');
  $('pill').dataset.status = st;
  $('pill').dataset.tunnel = String(s.tunnel);
  let detail = s.link.detail || '';
  if (st === 'retrying' && s.link.retryAt) {
    const secs = Math.max(0, Math.round((s.link.retryAt - Date.now()) / 1000));
    detail = `${detail.replace(/[.\s]*$/, '')}. Retrying in ${secs} s.`;
  }
  $('link-detail').textContent = detail;
  $('stop').disabled = !s.busy && !s.cards.length;
  $('send').disabled = s.busy;

  const cfg = s.settings;
  renderGateways(cfg);
  renderAgents(s.agents || [], s.agent || '');
  fillSettingsForm(cfg);
  if (st === 'off' && !cfg.url) showSettings(true);

  const rules = $('rules');
  rules.replaceChildren();
  for (const [origin, rule] of Object.entries(cfg.siteRules)) {
    const li = el('li');
    const remove = el('button', 'quiet', 'Remove');
    remove.type = 'button';
    remove.addEventListener('click', () => send({ type: 'site-rule', origin, rule: '' }));
    li.append(el('span', '', `${rule === 'always' ? 'Always' : 'Never'}: ${origin}`), remove);
    rules.append(li);
  }
  renderCards(s.cards);
  renderAgentTabs(s.tabList || { tabs: [], more: 0 });
}

/** The tabs the agent may use, as the worker keeps them live (opened, closed, navigated, shared). */
function renderAgentTabs({ tabs, more }) {
  const box = $('agent-tabs');
  box.hidden = !tabs.length;
  const total = tabs.length + more;
  $('agent-tabs-count').textContent = total === 1 ? '1 tab' : `${total} tabs`;
  const list = $('agent-tab-list');
  list.replaceChildren(...tabs.map((t) => {
    // Titles and sites are the pages' own words: text nodes only.
    const li = el('li', t.current ? 'agent-tab current' : 'agent-tab');
    li.dataset.tabId = String(t.id);
    li.dataset.by = t.by;
    const label = el('span', 'tab-label');
    label.title = `${t.title}\n${t.site}`;
    label.append(el('span', 'tab-title', t.title || t.site || 'Untitled'), el('span', 'tab-site', t.site));
    li.append(label, el('span', 'tab-by', t.by === 'user' ? 'shared by you' : 'opened by the agent'));
    if (t.by === 'user') {
      const b = el('button', 'quiet unshare', 'Stop sharing');
      b.type = 'button';
      b.addEventListener('click', () => send({ type: 'unshare-tab', tabId: t.id }));
      li.append(b);
    }
    return li;
  }));
  if (more > 0) list.append(el('li', 'agent-tab more', `and ${more} more`));
}

// The settings boxes the person has changed and not saved. The panel redraws on every state, once a
// second while retrying, and a redraw must not put the stored values back over what they typed. An
// edit is dropped when the active gateway's stored settings change: a save, a switch, another window.
const edited = new Set();
let storedForm = '';
for (const id of ['set-name', 'set-url', 'set-autopilot']) $(id).addEventListener('input', () => edited.add(id));

function fillSettingsForm(cfg) {
  const stored = JSON.stringify([cfg.active, cfg.name, cfg.url, cfg.autopilot]);
  if (stored !== storedForm) {
    storedForm = stored;
    edited.clear();
  }
  const free = (id) => !edited.has(id) && document.activeElement !== $(id);
  if (free('set-url')) $('set-url').value = cfg.url;
  if (free('set-name')) $('set-name').value = cfg.name || '';
  if (free('set-autopilot')) $('set-autopilot').checked = cfg.autopilot;
  $('set-key').placeholder = cfg.hasKey ? 'saved (type to replace)' : 'none';
}

function renderGateways(cfg) {
  const list = $('gateways');
  list.replaceChildren();
  for (const g of cfg.gateways || []) {
    const li = el('li', g.id === cfg.active ? 'gateway active' : 'gateway');
    li.dataset.id = g.id;
    const label = el('span', 'gateway-label');
    label.append(el('strong', '', g.name), el('span', 'where', ` ${g.url || 'no URL yet'}${g.hasKey ? '' : ' · no key'}`));
    li.append(label);
    const button = (text, type, cls) => {
      const b = el('button', cls || 'quiet', text);
      b.type = 'button';
      b.addEventListener('click', () => send({ type, id: g.id }));
      li.append(b);
    };
    if (g.id === cfg.active) li.append(el('span', 'badge', 'in use'));
    else button('Use', 'gateway-use', '');
    button('Remove', 'gateway-remove');
    list.append(li);
  }
}

function renderAgents(agents, agent) {
  // The header names the agent answering; the picker offers the gateway's agents for the next chat.
  const title = (agents.find((a) => a.id === agent) || {}).title || agent;
  $('agent-name').textContent = title;
  $('agent-name').hidden = !title;
  const picker = $('new-chat-agent');
  const ids = agents.map((a) => a.id).join('\n');
  if (picker.dataset.ids !== ids) {
    picker.replaceChildren(...agents.map((a) => {
      const o = el('option', '', a.title);
      o.value = a.id;
      return o;
    }));
    picker.dataset.ids = ids;
    if (agents.some((a) => a.id === agent)) picker.value = agent;
  }
  picker.hidden = agents.length < 2;
}

function renderCards(cards) {
  const box = $('cards');
  const keep = new Set(cards.map((c) => c.id));
  for (const node of [...box.children]) if (!keep.has(node.dataset.id)) node.remove();
  for (const c of cards) {
    if (box.querySelector(`[data-id="${CSS.escape(c.id)}"]`)) continue;
    const card = el('div', 'card');
    card.dataset.id = c.id;
    card.dataset.kind = c.kind;
    card.append(el('div', 'title', c.title));
    const where = c.detail && c.site && c.detail.startsWith(c.site) ? c.detail : [c.site, c.detail].filter(Boolean).join(' · ');
    if (where) card.append(el('div', 'where', where));
    const row = el('div', 'row');
    const button = (label, decision, cls) => {
      const b = el('button', cls || '', label);
      b.type = 'button';
      b.dataset.decision = decision;
      b.addEventListener('click', () => send({ type: 'decide', id: c.id, decision }));
      row.append(b);
    };
    if (c.kind === 'handoff') {
      // The agent's words, shown as its request to the person; they act in the tab, not on this card.
      card.insertBefore(el('div', 'reason', c.reason || ''), card.querySelector('.where'));
      const until = c.expiresAt ? new Date(c.expiresAt).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }) : '';
      card.append(el('div', 'note', 'Do it in the agent\'s tab, then press Done. The agent does not see what you type' +
        `${until ? `; it waits until ${until}` : ''}.`));
      button('Done', 'done', 'allow');
      button('Cancel', 'cancel');
    } else if (c.kind === 'permission') {
      for (const o of c.options || []) button(o.name, o.optionId, o.kind.startsWith('allow') ? 'allow' : '');
    } else {
      button('Allow', 'allow', 'allow');
      button("Don't allow", 'deny');
      // A site rule never covers passwords, one-time codes, secrets or payments: no button claims it would.
      if (c.site && !c.secret) button(`Always allow on ${c.site}`, 'always', 'quiet');
    }
    if (c.secret) {
      card.append(el('div', 'note', `A ${c.secret} step: you are asked every time, whatever the site rules or autopilot say.`));
    }
    card.append(row);
    box.append(card);
  }
}

function showSettings(open) {
  $('settings').hidden = !open;
  $('toggle-settings').setAttribute('aria-expanded', String(open));
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
    else if (msg.type === 'item') renderItem(msg.item);
    else if (msg.type === 'transcript') renderTranscript(msg.items);
    else if (msg.type === 'notice') notice(msg.text, msg.level);
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
$('toggle-settings').addEventListener('click', () => showSettings($('settings').hidden));
$('settings-form').addEventListener('submit', (e) => {
  e.preventDefault();
  send({ type: 'settings', patch: { name: $('set-name').value, url: $('set-url').value, key: $('set-key').value, autopilot: $('set-autopilot').checked } });
  $('set-key').value = '';
});
$('clear-key').addEventListener('click', () => send({ type: 'settings', patch: { clearKey: true } }));
// The pod's whole pairing text pasted into the URL or key box fills both: a URL field would drop its line
// breaks and keep the lot. Anything else is pasted as usual.
for (const id of ['set-url', 'set-key']) {
  $(id).addEventListener('paste', (e) => {
    const paired = parsePairing(e.clipboardData?.getData('text/plain'));
    if (!paired) return;
    e.preventDefault();
    $('set-url').value = paired.url;
    edited.add('set-url');
    if (paired.key) $('set-key').value = paired.key;
  });
}
$('rule-form').addEventListener('submit', (e) => {
  e.preventDefault();
  send({ type: 'site-rule', origin: $('rule-origin').value, rule: $('rule-kind').value });
  $('rule-origin').value = '';
});
$('share-tab').addEventListener('click', () => send({ type: 'share-tab', windowId }));
$('new-chat').addEventListener('click', () => {
  const picker = $('new-chat-agent');
  send({ type: 'new-chat', ...(picker.hidden || !picker.value ? {} : { agent: picker.value }) });
});
$('add-gateway').addEventListener('click', () => send({ type: 'gateway-add' }));
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
