// Settings live in chrome.storage.local so they survive the service worker being stopped and the
// browser restarting. Keys never leave this module except as the WebSocket subprotocol: never in sync
// storage, never in what the panel sees, never in a log line.
//
// Several gateways may be saved (a work pod, a home pod), each with its own URL, key and saved session;
// one is active at a time. Installs from before kept one `url` and `key`: loadSettings() moves them into
// the first saved gateway.

const KEY = 'openab.settings';
const MAX_GATEWAYS = 20;
const MAX_NAME = 60;

export const DEFAULTS = Object.freeze({
  gateways: [], // {id, name, url, key}
  active: '', // the id of the gateway the link dials
  autopilot: false,
  askBeforeActing: false, // every task starts with a plan the person approves (lib/plan.js)
  siteRules: {}, // origin (scheme://host[:port]) or host[:port] -> 'always' | 'never' (normaliseOrigin)
});

const BLANK_GATEWAY = Object.freeze({ id: '', name: '', url: '', key: '' });

// RFC 7230 token characters: anything else cannot travel in Sec-WebSocket-Protocol.
const TCHAR = /^[A-Za-z0-9!#$%&'*+\-.^_`|~]+$/;
const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

/** Returns an error message a user can act on, or '' when the URL is usable. */
export function checkUrl(url) {
  if (!url) return 'Set the gateway URL, for example wss://openab.example.com/acp.';
  let u;
  try {
    u = new URL(url);
  } catch {
    return `"${url}" is not a URL. Use wss://host/acp.`;
  }
  if (u.protocol === 'wss:') return '';
  if (u.protocol === 'ws:' && LOOPBACK.has(u.hostname)) return '';
  if (u.protocol === 'ws:') return 'Plain ws:// is only allowed for localhost. Use wss:// for a remote gateway.';
  return `The gateway URL must start with wss:// (or ws:// for localhost), not ${u.protocol}//.`;
}

/**
 * The gateway URL and key from the pairing text `openab run` prints, pasted whole: its terminal block or its
 * one log line ("Gateway URL: wss://host/acp", "Key: <key>", lines or "; "-separated parts). A value counts only
 * as the single word ending its part, so "Key: not printed (...)" or "Gateway URL: the ingress's wss://
 * address" fill in nothing, and only a URL and key this panel accepts are taken. Null when there is no usable
 * URL in the text: it is then an ordinary paste.
 */
export function parsePairing(text) {
  let url = '';
  let key = '';
  for (const part of String(text || '').split(/\r?\n|; /)) {
    const u = /(?:^|\s)Gateway URL:\s*(\S+)\s*$/.exec(part);
    const k = /(?:^|\s)Key:\s*(\S+)\s*$/.exec(part);
    if (u && !url && !checkUrl(u[1])) url = u[1];
    if (k && !key && !checkKey(k[1])) key = k[1];
  }
  return url ? { url, key } : null;
}

export function checkKey(key) {
  if (!key) return '';
  if (!TCHAR.test(key)) {
    return 'The key has characters a WebSocket subprotocol cannot carry (such as / = or spaces). ' +
      'Use letters, digits and - _ . ~ only.';
  }
  return '';
}

/**
 * The key a site rule typed by the person is saved under. Typed with a scheme ("http://localhost:8080/x") it is
 * that origin and covers that scheme only; typed without one ("example.com", "127.0.0.1:18950") it is the host
 * with its port, and covers the site over http and https alike: the person named a site, not a scheme, and a
 * rule guessed as https:// would never apply to an http site. '' when the text names no web site.
 */
export function normaliseOrigin(text) {
  const t = String(text || '').trim();
  if (!t) return '';
  const schemed = /^[a-z][a-z0-9+.-]*:\/\//i.test(t);
  try {
    const u = new URL(schemed ? t : `https://${t}`);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return '';
    // The URL parser percent-encodes odd hosts ("exa mple.com"); such a rule could never match a site.
    if (!/^([a-z0-9-]+\.)*[a-z0-9-]+$|^\[[0-9a-f:.]+\]$/i.test(u.hostname)) return '';
    if (schemed) return u.origin;
    // The port as typed: the parser would drop ":443" as https's default, which is not http's.
    const port = /^[^/?#]*:(\d+)(?:[/?#]|$)/.exec(t.replace(/^\[[^\]]*\]/, ''));
    return port ? `${u.hostname}:${Number(port[1])}` : u.hostname;
  } catch {
    return '';
  }
}

/** Whether a saved rule key is a host rule (typed without a scheme), which covers http and https. */
export function isHostRule(key) {
  return !/^https?:\/\//.test(key);
}

/** The origin of a web page's URL (http or https), which site rules and cards name; '' for any other URL. */
export function webOrigin(url) {
  try {
    const u = new URL(url);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.origin : '';
  } catch {
    return '';
  }
}

/**
 * The rule ('always' | 'never' | '') that covers `origin` (scheme://host[:port]): the origin's own, else its host
 * rule's. A host rule without a port covers the site on its scheme's default port; one with a port, that port
 * (":443" is https://host, ":80" http://host).
 */
export function ruleFor(siteRules, origin) {
  if (!origin) return '';
  if (siteRules[origin]) return siteRules[origin];
  let u;
  try {
    u = new URL(origin);
  } catch {
    return '';
  }
  const port = u.port || (u.protocol === 'https:' ? '443' : '80');
  return siteRules[u.host] || siteRules[`${u.hostname}:${port}`] || '';
}

async function readDefaults() {
  // A packaged defaults.json pre-seeds a managed or test install; an ordinary install has none.
  try {
    const r = await fetch(chrome.runtime.getURL('defaults.json'));
    if (!r.ok) return {};
    const d = await r.json();
    return d && typeof d === 'object' ? d : {};
  } catch {
    return {};
  }
}

function newGatewayId() {
  return `gw-${crypto.randomUUID()}`;
}

/** A name for a gateway the person did not name: its host, else its place in the list. */
function defaultName(url, index) {
  try {
    return new URL(url).host || `Gateway ${index + 1}`;
  } catch {
    return `Gateway ${index + 1}`;
  }
}

function sanitiseGateway(g, index) {
  const url = typeof g.url === 'string' ? g.url.trim() : '';
  const name = typeof g.name === 'string' ? g.name.trim().slice(0, MAX_NAME) : '';
  return {
    id: typeof g.id === 'string' && /^[\w-]{1,64}$/.test(g.id) ? g.id : newGatewayId(),
    name: name || defaultName(url, index),
    url,
    key: typeof g.key === 'string' ? g.key.trim() : '',
  };
}

/** Settings in the current shape, whatever was stored: a legacy single url/key becomes the first gateway. */
function normalise(stored) {
  const s = { ...DEFAULTS, ...stored };
  let gateways = Array.isArray(s.gateways) ? s.gateways.filter((g) => g && typeof g === 'object') : [];
  if (!gateways.length && (s.url || s.key)) gateways = [{ url: s.url, key: s.key }];
  gateways = gateways.slice(0, MAX_GATEWAYS).map(sanitiseGateway);
  if (!gateways.length) gateways = [sanitiseGateway({}, 0)];
  const active = gateways.some((g) => g.id === s.active) ? s.active : gateways[0].id;
  const out = { ...s, gateways, active };
  delete out.url; // the legacy single gateway, now gateways[0]
  delete out.key;
  return out;
}

export async function loadSettings() {
  const stored = (await chrome.storage.local.get(KEY))[KEY];
  const settings = normalise(stored || sanitise(await readDefaults()));
  if (JSON.stringify(settings) !== JSON.stringify(stored)) await chrome.storage.local.set({ [KEY]: settings });
  return settings;
}

export function sanitise(input) {
  const out = {};
  // url, key and name are the active gateway's (the settings form edits the one in use).
  if (typeof input.url === 'string') out.url = input.url.trim();
  if (typeof input.key === 'string') out.key = input.key.trim();
  if (typeof input.name === 'string') out.name = input.name.trim().slice(0, MAX_NAME);
  if (typeof input.autopilot === 'boolean') out.autopilot = input.autopilot;
  if (typeof input.askBeforeActing === 'boolean') out.askBeforeActing = input.askBeforeActing;
  if (Array.isArray(input.gateways)) out.gateways = input.gateways;
  if (typeof input.active === 'string') out.active = input.active;
  if (input.siteRules && typeof input.siteRules === 'object') {
    out.siteRules = {};
    for (const [origin, rule] of Object.entries(input.siteRules)) {
      const o = normaliseOrigin(origin);
      if (o && (rule === 'always' || rule === 'never')) out.siteRules[o] = rule;
    }
  }
  return out;
}

async function store(settings) {
  const next = normalise(settings);
  await chrome.storage.local.set({ [KEY]: next });
  return next;
}

export async function saveSettings(current, patch) {
  const { url, key, name, ...rest } = sanitise(patch);
  const edits = Object.fromEntries(Object.entries({ url, key, name }).filter(([, v]) => v !== undefined));
  const gateways = current.gateways.map((g) => (g.id === current.active ? { ...g, ...edits } : g));
  return store({ ...current, ...rest, gateways });
}

/** The gateway the link dials (a blank one when none is set up yet). */
export function activeGateway(s) {
  return s.gateways.find((g) => g.id === s.active) || { ...BLANK_GATEWAY };
}

/** Saves a new gateway and makes it the active one; returns the settings and the message for a refusal. */
export async function addGateway(current, { name = '', url = '', key = '' } = {}) {
  if (current.gateways.length >= MAX_GATEWAYS) return [current, `At most ${MAX_GATEWAYS} gateways can be saved; remove one first.`];
  const gateway = sanitiseGateway({ name, url, key }, current.gateways.length);
  return [await store({ ...current, gateways: [...current.gateways, gateway], active: gateway.id }), ''];
}

/** The address of a gateway as it is dialled: scheme, host, port and path, whatever the spelling (case, a default
 * port, a trailing slash); '' for no URL. */
function dialled(url) {
  try {
    const u = new URL(String(url || '').trim());
    return `${u.protocol}//${u.host}${u.pathname.replace(/\/+$/, '')}${u.search}`;
  } catch {
    return '';
  }
}

/** The saved gateway at `url` (the same address, spelled either way), or null: a pairing link for a gateway
 * already saved names that entry, never a second one. */
export function gatewayAt(current, url) {
  const want = dialled(url);
  return (want && current.gateways.find((g) => dialled(g.url) === want)) || null;
}

/** A saved gateway's new key (a pod that made another): that entry keeps its id, name and saved session. */
export async function setGatewayKey(current, id, key) {
  const gateways = current.gateways.map((g) => (g.id === id ? { ...g, key: String(key || '').trim() } : g));
  return store({ ...current, gateways });
}

export async function useGateway(current, id) {
  return current.gateways.some((g) => g.id === id) ? store({ ...current, active: id }) : current;
}

/** Forgets a gateway and its key; removing the active one makes the first left active. */
export async function removeGateway(current, id) {
  const gateways = current.gateways.filter((g) => g.id !== id);
  return store({ ...current, gateways, active: current.active === id ? '' : current.active });
}

/** What the panel may see: never a key itself. */
export function publicSettings(s) {
  const active = activeGateway(s);
  return {
    url: active.url,
    name: active.name,
    hasKey: Boolean(active.key),
    active: s.active,
    gateways: s.gateways.map((g) => ({ id: g.id, name: g.name, url: g.url, hasKey: Boolean(g.key) })),
    autopilot: s.autopilot,
    askBeforeActing: s.askBeforeActing,
    siteRules: { ...s.siteRules },
  };
}

/**
 * The service worker's settings in use: what the guard, the link and the panel read. `current` is replaced by
 * the settings each change saved (saveSettings, addGateway and the like store before they return), never edited
 * in place, so what is read is what storage holds.
 */
export class SavedSettings {
  constructor() {
    this.current = { ...DEFAULTS };
  }

  async load() {
    this.current = await loadSettings();
  }

  async save(patch) {
    this.current = await saveSettings(this.current, patch);
  }
}
