// The tabs the agent may use, listed under the conversation as the worker keeps them live (opened, closed,
// navigated, shared).

import { $, el } from './dom.js';

/** @param {{tabs: object[], more: number}} list  @param {(msg: object) => void} send */
export function renderAgentTabs({ tabs, more }, send) {
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
