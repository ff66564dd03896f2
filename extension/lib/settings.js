// Settings live in chrome.storage.local so they survive the service worker being stopped and the
// browser restarting. The key never leaves this module except as the WebSocket subprotocol.

const KEY = 'openab.settings';

export const DEFAULTS = Object.freeze({
  url: '',
  key: '',
  autopilot: false,
  siteRules: {}, // origin -> 'always' | 'never'
});

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

export function checkKey(key) {
  if (!key) return '';
  if (!TCHAR.test(key)) {
    return 'The key has characters a WebSocket subprotocol cannot carry (such as / = or spaces). ' +
      'Use letters, digits and - _ . ~ only.';
  }
  return '';
}

/** Normalises an origin typed by the user ("example.com" means https://example.com). */
export function normaliseOrigin(text) {
  const t = String(text || '').trim();
  if (!t) return '';
  try {
    const u = new URL(/^[a-z]+:\/\//i.test(t) ? t : `https://${t}`);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return '';
    // The URL parser percent-encodes odd hosts ("exa mple.com"); such a rule could never match a site.
    if (!/^([a-z0-9-]+\.)*[a-z0-9-]+$|^\[[0-9a-f:.]+\]$/i.test(u.hostname)) return '';
    return u.origin;
  } catch {
    return '';
  }
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

export async function loadSettings() {
  const stored = (await chrome.storage.local.get(KEY))[KEY];
  if (stored) return { ...DEFAULTS, ...stored };
  const seeded = { ...DEFAULTS, ...sanitise(await readDefaults()) };
  await chrome.storage.local.set({ [KEY]: seeded });
  return seeded;
}

export function sanitise(input) {
  const out = {};
  if (typeof input.url === 'string') out.url = input.url.trim();
  if (typeof input.key === 'string') out.key = input.key.trim();
  if (typeof input.autopilot === 'boolean') out.autopilot = input.autopilot;
  if (input.siteRules && typeof input.siteRules === 'object') {
    out.siteRules = {};
    for (const [origin, rule] of Object.entries(input.siteRules)) {
      const o = normaliseOrigin(origin);
      if (o && (rule === 'always' || rule === 'never')) out.siteRules[o] = rule;
    }
  }
  return out;
}

export async function saveSettings(current, patch) {
  const next = { ...current, ...sanitise(patch) };
  await chrome.storage.local.set({ [KEY]: next });
  return next;
}

/** What the panel may see: never the key itself. */
export function publicSettings(s) {
  return { url: s.url, hasKey: Boolean(s.key), autopilot: s.autopilot, siteRules: { ...s.siteRules } };
}
