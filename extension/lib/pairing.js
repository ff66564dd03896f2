// The one-click pairing link `openab run` prints: `https://<pod>/pair#code=<one-time code>` (http on loopback).
// When a tab of the person's navigates to such a link, its page is replaced by this extension's own
// pair/pair.html, which names the host and asks; only on Connect does the worker claim the code at
// `<origin><path>/claim` (POST, JSON), receive the gateway's URL and key, and save that gateway as the one in use.
//
// Any site can serve a page at /pair with a #code= fragment, so nothing here is trusted from the page: the
// confirmation names the host the code is claimed from, the claimed URL must be on that same host, and a
// plain-http page off loopback (where the key would travel in clear) is refused. A tab the agent owns is never
// intercepted: the agent could open a pairing link of its own choosing, and the person's consent is for the
// person's tabs. The key goes from the claim to the settings in this worker: the pair page never sees it.

import { checkKey, checkUrl } from './settings.js';

const PAIR_PAGE = 'pair/pair.html';
const CODE = /^#code=([A-Za-z0-9_-]{8,128})$/;
const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);
const CLAIM_TIMEOUT_MS = 15_000;
const MAX_REPLY_CHARS = 8192;

/** The pairing link in `url`, as {at (the page without its fragment), host, code}, or null when it is none. */
export function pairLink(url) {
  let u;
  try {
    u = new URL(url);
  } catch {
    return null;
  }
  const code = CODE.exec(u.hash);
  if (!code || (u.protocol !== 'https:' && u.protocol !== 'http:') || !u.pathname.endsWith('/pair')) return null;
  if (u.username || u.password) return null;
  return { at: `${u.origin}${u.pathname}`, host: u.host, code: code[1] };
}

/** Why the page at `at` cannot pair (plain http off loopback), or ''. */
export function pairProblem(at) {
  const u = new URL(at);
  if (u.protocol === 'http:' && !LOOPBACK.has(u.hostname)) {
    return `${u.host} is not served over https, so the key would travel in clear: this browser does not pair with it.`;
  }
  return '';
}

export class PairLinks {
  /**
   * @param {{isAgentTab: (tabId: number) => boolean,
   *          addGateway: (gateway: {name: string, url: string, key: string}) => Promise<string>}} parts
   *   `addGateway` saves the gateway and makes it the one in use, as the panel's Add gateway does; it resolves
   *   to the refusal's message, or ''.
   */
  constructor({ isAgentTab, addGateway }) {
    this.isAgentTab = isAgentTab;
    this.addGateway = addGateway;
  }

  /** chrome.tabs.onUpdated: a top-level navigation to a pairing link shows the confirmation in its place. */
  onUpdated(tabId, change) {
    if (!change.url) return;
    const link = pairLink(change.url);
    if (!link || this.isAgentTab(tabId)) return;
    const page = new URL(chrome.runtime.getURL(PAIR_PAGE));
    page.hash = new URLSearchParams({ at: link.at, code: link.code, tab: String(tabId) }).toString();
    chrome.tabs.update(tabId, { url: page.href }).catch((e) => console.warn('openab: could not show the pairing page', e));
  }

  /** chrome.runtime.onMessage: the pair page's Connect. Returns true (a reply will come) for its message only. */
  onMessage(msg, sender, reply) {
    if (!msg || msg.type !== 'pair-connect') return false;
    const fromPairPage = sender.id === chrome.runtime.id && String(sender.url || '').startsWith(chrome.runtime.getURL(PAIR_PAGE));
    if (!fromPairPage) return false;
    this.connect(String(msg.at || ''), String(msg.code || ''))
      .then(reply, (e) => reply({ ok: false, error: `Pairing failed: ${e.message || e}` }));
    return true;
  }

  /** Claims `code` at the pairing page `at` and saves the gateway it names; {ok, host} or {ok: false, error}. */
  async connect(at, code) {
    const link = pairLink(`${at}#code=${code}`);
    if (!link || link.at !== at) return { ok: false, error: 'This is not a pairing link.' };
    const problem = pairProblem(at);
    if (problem) return { ok: false, error: problem };
    let response;
    try {
      response = await fetch(`${at}/claim`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ code }),
        credentials: 'omit',
        cache: 'no-store',
        redirect: 'error',
        signal: AbortSignal.timeout(CLAIM_TIMEOUT_MS),
      });
    } catch (e) {
      const why = e.name === 'TimeoutError' ? `did not answer within ${CLAIM_TIMEOUT_MS / 1000} s` : 'could not be reached';
      return { ok: false, error: `The gateway at ${link.host} ${why}.` };
    }
    const text = (await response.text()).slice(0, MAX_REPLY_CHARS);
    let body = null;
    try {
      body = JSON.parse(text);
    } catch {
      // answered below as a refusal
    }
    if (!response.ok) {
      const said = body && typeof body.error === 'string' ? body.error : `HTTP ${response.status}`;
      return { ok: false, error: `The gateway at ${link.host} refused: ${said}` };
    }
    const url = body && typeof body.url === 'string' ? body.url.trim() : '';
    const key = body && typeof body.key === 'string' ? body.key.trim() : '';
    let sameHost = false;
    try {
      sameHost = new URL(url).host === link.host;
    } catch {
      // not a URL: refused below
    }
    if (!sameHost) return { ok: false, error: `The gateway at ${link.host} named another gateway address than its own.` };
    const unusable = checkUrl(url) || checkKey(key);
    if (unusable) return { ok: false, error: `The gateway at ${link.host} gave an unusable address or key: ${unusable}` };
    const refused = await this.addGateway({ name: link.host, url, key });
    return refused ? { ok: false, error: refused } : { ok: true, host: link.host };
  }
}
