// The settings section: the saved gateways, the active gateway's form (name, URL, key, autopilot) and the
// site rules. It never sees a key: the worker sends only whether one is saved.

import { checkKey, isHostRule, normaliseOrigin, parsePairing } from '../lib/settings.js';
import { $, el } from './dom.js';

// The settings boxes the person has changed and not saved. The panel redraws on every state, once a
// second while retrying, and a redraw must not put the stored values back over what they typed. An
// edit is dropped when the active gateway's stored settings change: a save, a switch, another window.
const edited = new Set();
let storedForm = '';

// Add gateway fills in a new one in the form while the gateway in use stays connected; the worker saves it (and
// switches to it) only once its URL is usable, then says 'gateway-added' (endAddingGateway).
let adding = false;
let shownCfg = null;

function startAddingGateway() {
  adding = true;
  for (const id of ['set-name', 'set-url', 'set-key']) $(id).value = '';
  $('set-key').placeholder = 'none';
  $('save-settings').textContent = 'Add and use';
  $('add-gateway').textContent = 'Cancel adding';
  $('clear-key').hidden = true; // the new gateway has no key to forget yet
  const note = el('p', 'adding-note', 'A new gateway. The one in use stays connected until you add this one.');
  note.id = 'adding-note';
  $('settings-form').before(note);
  $('set-url').focus();
}

/** The new gateway is saved (or the person gave up on it): the form edits the gateway in use again. */
export function endAddingGateway() {
  adding = false;
  storedForm = ''; // refill from the stored settings on the next redraw
  $('set-key').value = '';
  $('save-settings').textContent = 'Save';
  $('add-gateway').textContent = 'Add gateway';
  $('clear-key').hidden = false;
  document.getElementById('adding-note')?.remove();
  if (shownCfg) fillSettingsForm(shownCfg);
}

function fillSettingsForm(cfg) {
  shownCfg = cfg;
  if (adding) return;
  const stored = JSON.stringify([cfg.active, cfg.name, cfg.url, cfg.autopilot, cfg.askBeforeActing]);
  if (stored !== storedForm) {
    storedForm = stored;
    edited.clear();
  }
  const free = (id) => !edited.has(id) && document.activeElement !== $(id);
  if (free('set-url')) $('set-url').value = cfg.url;
  if (free('set-name')) $('set-name').value = cfg.name || '';
  if (free('set-autopilot')) $('set-autopilot').checked = cfg.autopilot;
  if (free('set-ask-first')) $('set-ask-first').checked = Boolean(cfg.askBeforeActing);
  $('set-key').placeholder = cfg.hasKey ? 'saved (type to replace)' : 'none';
}

function renderGateways(cfg, send) {
  const list = $('gateways');
  list.replaceChildren();
  for (const g of cfg.gateways || []) {
    const li = el('li', g.id === cfg.active ? 'gateway active' : 'gateway');
    li.dataset.id = g.id;
    const label = el('span', 'gateway-label');
    label.append(el('strong', '', g.name), el('span', 'where', `${g.url || 'no URL yet'}${g.hasKey ? '' : ' · no key'}`));
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

function renderRules(cfg, send) {
  const rules = $('rules');
  rules.replaceChildren();
  for (const [origin, rule] of Object.entries(cfg.siteRules)) {
    const li = el('li');
    const remove = el('button', 'quiet', 'Remove');
    remove.type = 'button';
    remove.addEventListener('click', () => send({ type: 'site-rule', origin, rule: '' }));
    // What the rule covers: a site typed without a scheme is the site over both, one with a scheme only that.
    const covers = isHostRule(origin) ? 'http and https' : `${origin.split(':')[0]} only`;
    li.append(el('span', '', `${rule === 'always' ? 'Always' : 'Never'}: ${origin} `), el('span', 'where', `(${covers})`), remove);
    rules.append(li);
  }
}

// The boxes an error can be about, each with its line under it (`${id}-error`, the box's aria-describedby).
const FIELDS = ['set-url', 'set-key', 'rule-origin'];

/**
 * Shows the worker's refusal of what the person typed next to the box it is about, and takes them there. An
 * error about a box sits under that box, not at the foot of the settings, where it reads as another's.
 */
export function showFieldError(field, text) {
  if (!FIELDS.includes(field)) return false;
  const line = $(`${field}-error`);
  line.textContent = text;
  line.hidden = false;
  $(field).setAttribute('aria-invalid', 'true');
  showSettings(true);
  $(field).focus();
  return true;
}

function clearFieldError(field) {
  $(`${field}-error`).hidden = true;
  $(`${field}-error`).textContent = '';
  $(field).removeAttribute('aria-invalid');
}

/** Redraws the section from the worker's public settings. */
export function renderSettings(cfg, send) {
  renderGateways(cfg, send);
  fillSettingsForm(cfg);
  renderRules(cfg, send);
}

export function showSettings(open) {
  $('settings').hidden = !open;
  $('toggle-settings').setAttribute('aria-expanded', String(open));
}

/** Wires the section's forms and buttons to the worker, once. */
export function wireSettings(send) {
  for (const id of ['set-name', 'set-url', 'set-autopilot', 'set-ask-first']) $(id).addEventListener('input', () => edited.add(id));
  $('toggle-settings').addEventListener('click', () => showSettings($('settings').hidden));
  // An error stands until the box it is about is changed, or sent again.
  for (const id of FIELDS) $(id).addEventListener('input', () => clearFieldError(id));
  $('settings-form').addEventListener('submit', (e) => {
    e.preventDefault();
    clearFieldError('set-url');
    clearFieldError('set-key');
    if (adding) {
      send({ type: 'gateway-add', name: $('set-name').value, url: $('set-url').value, key: $('set-key').value });
      return;
    }
    send({ type: 'settings', patch: { name: $('set-name').value, url: $('set-url').value, key: $('set-key').value, autopilot: $('set-autopilot').checked,
      askBeforeActing: $('set-ask-first').checked } });
    // A key the worker will refuse stays in its box, under its error, for the person to correct.
    if (!checkKey($('set-key').value.trim())) $('set-key').value = '';
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
    clearFieldError('rule-origin');
    send({ type: 'site-rule', origin: $('rule-origin').value, rule: $('rule-kind').value });
    if (normaliseOrigin($('rule-origin').value)) $('rule-origin').value = ''; // else it stays, under its error
  });
  $('add-gateway').addEventListener('click', () => (adding ? endAddingGateway() : startAddingGateway()));
}
