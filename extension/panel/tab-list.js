// The tabs the agent may use, listed under the conversation as the worker keeps them live (opened, closed,
// navigated, shared); a click on one shows it.

import { $, el } from './dom.js';

/** @param {{tabs: object[], more: number, note?: string}} list  @param {(msg: object) => void} send */
export function renderAgentTabs({ tabs, more, note = '' }, send) {
  const box = $('agent-tabs');
  box.hidden = !tabs.length && !note;
  const total = tabs.length + more;
  $('agent-tabs-count').textContent = total === 1 ? '1 tab' : `${total} tabs`;
  const list = $('agent-tab-list');
  list.replaceChildren(...tabs.map((t) => {
    // Titles and sites are the pages' own words: text nodes only.
    const li = el('li', t.current ? 'agent-tab current' : 'agent-tab');
    li.dataset.tabId = String(t.id);
    li.dataset.by = t.by;
    // The agent's tabs open in the background: the entry is a link to its tab, which it brings to the front.
    const label = el('a', 'tab-label');
    label.href = '#';
    label.title = `Show this tab: ${t.title}\n${t.site}`;
    label.append(el('span', 'tab-title', t.title || t.site || 'Untitled'), el('span', 'tab-site', t.site));
    label.addEventListener('click', (e) => {
      e.preventDefault();
      send({ type: 'show-tab', tabId: t.id });
    });
    li.append(label, el('span', 'tab-by', t.by === 'user' ? 'shared by you' : 'opened by the agent'));
    if (t.dialog) {
      li.dataset.dialog = t.dialog;
      li.append(el('span', 'tab-by tab-dialog', `${t.dialog === 'beforeunload' ? '"Leave page?"' : t.dialog} dialog open`));
    }
    if (t.by === 'user') {
      const b = el('button', 'quiet unshare', 'Stop sharing');
      b.type = 'button';
      b.addEventListener('click', () => send({ type: 'unshare-tab', tabId: t.id }));
      li.append(b);
    }
    return li;
  }));
  if (more > 0) list.append(el('li', 'agent-tab more', `and ${more} more`));
  // What the person did to Chrome's debugging bar changes what openab can do for them: said where the tabs are.
  if (note) {
    const line = el('li', 'agent-tab note', note);
    line.id = 'agent-tabs-note';
    list.prepend(line);
  }
}
