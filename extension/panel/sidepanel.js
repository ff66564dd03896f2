// The side panel is a view over the service worker: it renders state and conversation and sends
// the user's input back. Page and model text only ever reach the DOM through textContent.

const $ = (id) => document.getElementById(id);
const rows = new Map(); // transcript item id -> element
const STATUS_WORDS = { pending: 'waiting', in_progress: 'running', completed: 'completed', failed: 'failed' };
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
  let row = rows.get(item.id);
  const fresh = !row;
  if (item.kind === 'tool') {
    if (fresh) {
      row = el('div');
      row.append(el('span', 'title'), el('span', 'status'));
    }
    row.className = `step ${item.status || ''}`;
    row.querySelector('.title').textContent = item.title || 'tool call';
    row.querySelector('.status').textContent = STATUS_WORDS[item.status] || item.status || '';
    row.title = item.text || '';
  } else {
    if (fresh) row = el('div');
    row.className = `msg ${item.kind}`;
    row.textContent = item.text || '';
  }
  row.dataset.kind = item.kind;
  if (fresh) {
    rows.set(item.id, row);
    const log = $('log');
    const stick = log.scrollTop + log.clientHeight >= log.scrollHeight - 40;
    log.append(row);
    if (stick) log.scrollTop = log.scrollHeight;
  }
}

function renderTranscript(items) {
  rows.clear();
  $('log').replaceChildren();
  for (const item of items) renderItem(item);
}

function seg(id, text, cls) {
  const s = $(id);
  s.textContent = text;
  s.className = `seg ${cls || ''}`;
}

function renderState(s) {
  state = s;
  const st = s.link.status;
  seg('pill-link', st === 'connected' ? 'connected' : st === 'off' ? 'offline' : st, st === 'connected' ? 'on' : st === 'off' ? '' : 'wait');
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
  if (document.activeElement !== $('set-url')) $('set-url').value = cfg.url;
  $('set-key').placeholder = cfg.hasKey ? 'saved (type to replace)' : 'none';
  $('set-autopilot').checked = cfg.autopilot;
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
    if (c.kind === 'permission') {
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
  send({ type: 'settings', patch: { url: $('set-url').value, key: $('set-key').value, autopilot: $('set-autopilot').checked } });
  $('set-key').value = '';
});
$('clear-key').addEventListener('click', () => send({ type: 'settings', patch: { clearKey: true } }));
$('rule-form').addEventListener('submit', (e) => {
  e.preventDefault();
  send({ type: 'site-rule', origin: $('rule-origin').value, rule: $('rule-kind').value });
  $('rule-origin').value = '';
});
$('share-tab').addEventListener('click', () => send({ type: 'share-tab', windowId }));
$('new-chat').addEventListener('click', () => send({ type: 'new-chat' }));
document.addEventListener('keydown', (e) => {
  if (e.key === 'Escape' && state && (state.busy || state.cards.length)) send({ type: 'cancel' });
});
setInterval(() => state && state.link.status === 'retrying' && renderState(state), 1000);

chrome.windows.getCurrent().then((w) => (windowId = w.id)).catch(() => {});
connect();
