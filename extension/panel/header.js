// The panel's header, laid out for Chrome's side panel widths (320-400 px) on two lines: the brand, the agent
// answering and Settings; the connection pill (link, tools, activity) and the picker for the next chat's agent;
// then the detail line under it.

import { $, el } from './dom.js';

function seg(id, text, cls) {
  const s = $(id);
  s.textContent = text;
  s.className = `seg ${cls || ''}`;
}

/** Redraws the header from the worker's state. */
export function renderHeader(s) {
  const st = s.link.status;
  if (st === 'connected' && s.link.moved) seg('pill-link', 'chat moved', 'wait');
  else if (st === 'connected' && s.unavailable) seg('pill-link', 'no agent', 'wait');
  else seg('pill-link', st === 'connected' ? 'connected' : st === 'off' ? 'offline' : st, st === 'connected' ? 'on' : st === 'off' ? '' : 'wait');
  seg('pill-tunnel', s.tunnel ? 'tools attached' : 'no tools', s.tunnel ? 'on' : '');
  seg('pill-tools', s.toolsInUse ? 'browser in use' : 'idle', s.toolsInUse ? 'busy' : '');
  $('pill').dataset.status = st;
  $('pill').dataset.tunnel = String(s.tunnel);
  // A pod that can start none of its agents says so at connect, not at each prompt.
  let detail = (st === 'connected' && s.unavailable) || s.link.detail || '';
  if (st === 'retrying' && s.link.retryAt) {
    const secs = Math.max(0, Math.round((s.link.retryAt - Date.now()) / 1000));
    detail = `${detail.replace(/[.\s]*$/, '')}. Retrying in ${secs} s.`;
  }
  $('link-detail').textContent = detail;
  renderAgents(s.agents || [], s.agent || '');
}

// What the header last showed, for the note the picker's change redraws.
let shown = { agents: [], agent: '' };

function renderAgents(agents, agent) {
  // The header names the agent answering; the picker, labelled "Next chat", offers the gateway's agents for the next
  // chat: picking one changes nothing in this chat, and the note under it says so.
  shown = { agents, agent };
  const title = titleOf(agent);
  const name = $('agent-name');
  name.textContent = title;
  name.title = `The agent answering in this chat: ${title}`;
  name.hidden = !title;
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
  $('next-chat').hidden = picker.hidden;
  renderNextChatNote();
}

function titleOf(id) {
  return (shown.agents.find((a) => a.id === id) || {}).title || id;
}

function renderNextChatNote() {
  const picker = $('new-chat-agent');
  const note = $('next-chat-note');
  const next = picker.value;
  note.hidden = picker.hidden || !next || !shown.agent || next === shown.agent;
  if (!note.hidden) note.textContent = `${titleOf(next)} answers from your next chat (New chat); this chat stays with ${titleOf(shown.agent)}.`;
}

$('new-chat-agent').addEventListener('change', renderNextChatNote);
