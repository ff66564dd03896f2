// The cards that wait for the person's answer: the guard's risky steps, the agent's own permission questions
// and its handoffs. A card's words come from the agent or the page: text nodes only.

import { stillAsksSentence } from '../lib/still-asks.js';
import { $, el } from './dom.js';

/**
 * The plan the agent asks the person to approve (lib/plan.js), and a step off it. The summary, the steps and the
 * sites are the agent's words; each site is shown as the host (or origin) it lets the agent act on.
 */
function renderPlanCard(card, c, button) {
  if (c.kind === 'off-plan') {
    button('Allow once', 'allow', 'allow');
    if (c.site) button(`Add ${c.site} to the plan`, 'add', 'quiet');
    button("Don't allow", 'deny');
    return;
  }
  const plan = c.plan || { steps: [], sites: [] };
  card.append(el('div', 'reason', c.reason || ''));
  const steps = el('ol', 'plan-steps');
  for (const s of plan.steps) steps.append(el('li', '', s));
  // The sites in the note's larger type, each host in bold: what the approval lets the agent act on.
  const sites = el('ul', 'plan-sites');
  for (const s of plan.sites) {
    const li = el('li', 'site');
    li.append(el('strong', '', s));
    sites.append(li);
  }
  const where = el('div', 'note', 'Sites it will use:');
  where.append(sites);
  card.append(steps, where);
  card.append(el('div', 'note', 'Approving lets routine steps on these sites run without asking, until your next ' +
    `message. ${stillAsksSentence()}; any other site asks first.`));
  button('Approve', 'approve', 'allow');
  button("Don't approve", 'deny');
}

/** @param {object[]} cards  @param {(msg: object) => void} send */
export function renderCards(cards, send) {
  const box = $('cards');
  const keep = new Set(cards.map((c) => c.id));
  for (const node of [...box.children]) if (!keep.has(node.dataset.id)) node.remove();
  for (const c of cards) {
    if (box.querySelector(`[data-id="${CSS.escape(c.id)}"]`)) continue;
    const card = el('div', 'card');
    card.dataset.id = c.id;
    card.dataset.kind = c.kind;
    if (c.tabId != null) card.dataset.tabId = String(c.tabId);
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
    if (c.kind === 'plan' || c.kind === 'off-plan') {
      renderPlanCard(card, c, button);
    } else if (c.kind === 'handoff') {
      // The agent's words, shown as its request to the person; they act in the tab, not on this card.
      card.insertBefore(el('div', 'reason', c.reason || ''), card.querySelector('.where'));
      const until = c.expiresAt ? new Date(c.expiresAt).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }) : '';
      card.append(el('div', 'note', 'Do it in the agent\'s tab, then press Done. The agent does not see what you type' +
        `${until ? `; it waits until ${until}` : ''}.`));
      button('Done', 'done', 'allow');
      button('Cancel', 'cancel');
    } else if (c.kind === 'again') {
      // A step that may already have happened (lib/stages/again.js): looking is the safe answer, so it comes first.
      button('Check the page', 'check', 'allow');
      button('Do it again', 'again');
    } else if (c.kind === 'permission') {
      for (const o of c.options || []) button(o.name, o.optionId, o.kind.startsWith('allow') ? 'allow' : '');
    } else {
      button('Allow', 'allow', 'allow');
      button("Don't allow", 'deny');
      // A site rule never covers passwords, one-time codes, secrets or payments: no button claims it would.
      if (c.site && !c.secret) button(`Always allow on ${c.site}`, 'always', 'quiet always');
    }
    if (c.secret) {
      card.append(el('div', 'note', `A ${c.secret} step: you are asked every time, whatever the site rules or autopilot say.`));
    }
    card.append(row);
    if (c.tabId != null) {
      // Agent tabs open in the background: the person may not see the page the card is about.
      const show = el('button', 'quiet show', 'Show me');
      show.type = 'button';
      show.title = c.element ? `Show the tab, with ${c.element} outlined` : 'Show the tab';
      show.addEventListener('click', () => send({ type: 'show-card', id: c.id }));
      row.insertBefore(show, row.querySelector('.always')); // before "Always allow", which takes a row of its own
    }
    box.append(card);
  }
}
