// The panel's header: the connection pill (link, tools, activity), the detail line under it, and the agent
// answering with the picker for the next chat's agent.

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
  renderAgents(s.agents || [], s.agent || '');
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
