// The one WebSocket to the gateway: dialing, the ACP handshake, keepalive and reconnection.
// It reports an honest state: 'connected' only after the session handshake, and it drops
// straight back to 'retrying' the moment the socket or a keepalive says the peer is gone.

import { RpcPeer, RpcError } from './rpc.js';
import { checkKey, checkUrl } from './settings.js';

export const VERSION = chrome.runtime.getManifest().version;

// An application message at least every 20 s: Chrome stops an idle service worker after 30 s,
// and protocol-level ping frames do not count as activity.
const KEEPALIVE_MS = 20_000;
const KEEPALIVE_ANSWER_MS = 10_000;
const HANDSHAKE_MS = 20_000;
const BACKOFF_MIN_MS = 500;
const BACKOFF_MAX_MS = 30_000;
const SESSION_KEY = 'openab.session';
const SESSION_BUSY = -32001;
const SERVER_ID_KEY = 'openab.serverId';

export const SERVER_NAME = 'browser';

async function stableServerId() {
  const got = (await chrome.storage.local.get(SERVER_ID_KEY))[SERVER_ID_KEY];
  if (got) return got;
  // Stable per install: a resumed session re-declares the same server, so the gateway replaces
  // the old tunnel instead of listing two browsers.
  const id = `browser:${crypto.randomUUID()}`;
  await chrome.storage.local.set({ [SERVER_ID_KEY]: id });
  return id;
}

/** Exponential backoff with full jitter, so many browsers do not reconnect in lock-step. */
export function backoffDelay(attempt) {
  const cap = Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** Math.min(attempt, 10));
  return Math.round(cap / 2 + Math.random() * (cap / 2));
}

export class Link {
  /**
   * @param {{onRequest, onNotification, onState, onSocketClosed, sessionMeta: () => object}} hooks
   */
  constructor(hooks) {
    this.hooks = hooks;
    this.ws = null;
    this.peer = null;
    this.settings = null;
    this.sessionId = null;
    this.serverId = null;
    this.state = { status: 'off', detail: 'Not configured', retryAt: 0, attempts: 0, since: Date.now() };
    this._retryTimer = null;
    this._keepaliveTimer = null;
    this._generation = 0;
  }

  /** (Re)starts with new settings; safe to call repeatedly. */
  async configure(settings) {
    const changed = !this.settings || this.settings.url !== settings.url || this.settings.key !== settings.key;
    this.settings = settings;
    if (!changed && this.ws) return;
    this.serverId = this.serverId || (await stableServerId());
    this._teardown('settings changed');
    this.state.attempts = 0;
    const problem = checkUrl(settings.url) || checkKey(settings.key);
    if (problem) {
      this._setState({ status: 'off', detail: problem });
      return;
    }
    this._dial();
  }

  /** A wake-up (alarm, panel opened, user asked): dial now if we are waiting to retry. */
  poke() {
    if (!this.settings || checkUrl(this.settings.url) || checkKey(this.settings.key)) return;
    if (!this.ws) {
      clearTimeout(this._retryTimer);
      this._dial();
    }
  }

  get connected() {
    return this.state.status === 'connected';
  }

  request(method, params, timeoutMs) {
    if (!this.peer || !this.connected) {
      return Promise.reject(new RpcError(-32603, 'Not connected to the gateway; check the connection settings.'));
    }
    return this.peer.request(method, params, timeoutMs);
  }

  notify(method, params) {
    if (this.peer && this.connected) this.peer.notify(method, params);
  }

  declaration() {
    // `id` is the older spelling of `serverId`; sending both keeps older and newer gateways happy.
    return { type: 'acp', name: SERVER_NAME, id: this.serverId, serverId: this.serverId };
  }

  async newSession() {
    const params = { cwd: '/', mcpServers: [this.declaration()], _meta: this.hooks.sessionMeta() };
    const res = await this.peer.request('session/new', params, HANDSHAKE_MS);
    if (!res || typeof res.sessionId !== 'string') throw new Error('gateway sent no sessionId');
    this.sessionId = res.sessionId;
    await chrome.storage.local.set({ [SESSION_KEY]: { url: this.settings.url, sessionId: this.sessionId } });
    return this.sessionId;
  }

  /** Starts a fresh conversation on the live socket (the user's "New chat"). */
  async restartSession() {
    if (!this.connected) throw new Error('Not connected to the gateway.');
    return this.newSession();
  }

  _setState(patch) {
    const status = patch.status ?? this.state.status;
    if (status !== this.state.status) patch.since = Date.now();
    this.state = { ...this.state, ...patch };
    this.hooks.onState(this.state);
  }

  _dial() {
    const gen = ++this._generation;
    const { url, key } = this.settings;
    const protocols = key ? [`openab.bearer.${key}`, 'acp.v1'] : ['acp.v1'];
    this._setState({ status: 'connecting', detail: `Connecting to ${new URL(url).host}`, retryAt: 0 });
    let ws;
    try {
      ws = new WebSocket(url, protocols);
    } catch (e) {
      this._scheduleRetry(`Cannot open the socket: ${e.message}`);
      return;
    }
    this.ws = ws;
    const peer = new RpcPeer((t) => ws.send(t), {
      onRequest: (m, p, id) => this.hooks.onRequest(m, p, id),
      onNotification: (m, p) => this.hooks.onNotification(m, p),
    });
    this.peer = peer;
    let opened = false;
    ws.onopen = () => {
      opened = true;
      if (gen === this._generation) this._handshake(gen);
    };
    ws.onmessage = (ev) => {
      if (gen === this._generation && typeof ev.data === 'string') peer.receive(ev.data);
    };
    ws.onclose = async (ev) => {
      if (gen !== this._generation) return;
      const why = opened ? `Connection closed (${ev.code}${ev.reason ? `: ${ev.reason}` : ''})` : await this._whyRefused(url);
      if (gen === this._generation) this._lost(why);
    };
  }

  /**
   * A WebSocket that never opened does not say why. A plain HTTP request to the same address
   * does: any HTTP answer means the gateway is there and refused us (the key), none means the
   * address is wrong or the gateway is down.
   */
  async _whyRefused(url) {
    const http = url.replace(/^ws/, 'http');
    try {
      const res = await fetch(http, { method: 'GET', cache: 'no-store', credentials: 'omit', signal: AbortSignal.timeout(3000) });
      const u = new URL(url);
      return res.status === 404
        ? `The gateway at ${u.host} has no ${u.pathname}. Check the URL path (usually /acp).`
        : `The gateway at ${u.host} refused the connection. Check the key in the settings.`;
    } catch {
      return `Cannot reach the gateway at ${new URL(url).host}. Check the URL, and that the gateway is running.`;
    }
  }

  async _handshake(gen) {
    const peer = this.peer;
    try {
      await peer.request('initialize', {
        protocolVersion: 1,
        clientCapabilities: {},
        clientInfo: { name: 'openab-extension', title: 'openab', version: VERSION },
      }, HANDSHAKE_MS);
      const saved = (await chrome.storage.local.get(SESSION_KEY))[SESSION_KEY];
      let resumed = false;
      if (saved && saved.url === this.settings.url && saved.sessionId) {
        try {
          await peer.request('session/resume', {
            sessionId: saved.sessionId, cwd: '/', mcpServers: [this.declaration()], _meta: this.hooks.sessionMeta(),
          }, HANDSHAKE_MS);
          this.sessionId = saved.sessionId;
          resumed = true;
        } catch (e) {
          if (gen !== this._generation) return;
          // Busy means the session lives on (a prompt from the dropped socket is finishing):
          // try again shortly rather than throwing the conversation away.
          if (e instanceof RpcError && e.code === SESSION_BUSY) throw e;
          console.info('openab: resume refused, starting a new session:', e.message);
        }
      }
      if (!resumed) await this.newSession();
      if (gen !== this._generation) return;
      this.state.attempts = 0;
      this._setState({ status: 'connected', detail: resumed ? 'Session resumed' : 'New session', resumed });
      this._startKeepalive(gen);
    } catch (e) {
      if (gen !== this._generation) return;
      this._closeSocket(4000, 'handshake failed');
      this._lost(`Handshake failed: ${e.message}`);
    }
  }

  _startKeepalive(gen) {
    clearInterval(this._keepaliveTimer);
    this._keepaliveTimer = setInterval(async () => {
      if (gen !== this._generation || !this.peer) return;
      try {
        await this.peer.request('openab/ping', {}, KEEPALIVE_ANSWER_MS);
      } catch (e) {
        // "Method not found" is the expected answer: any answer proves the socket is alive.
        if (e instanceof RpcError && e.code === -32601) return;
        if (gen !== this._generation) return;
        this._closeSocket(4001, 'keepalive unanswered');
        this._lost('The gateway stopped answering; reconnecting.');
      }
    }, KEEPALIVE_MS);
  }

  _lost(why) {
    this._teardown(why);
    this._scheduleRetry(why);
  }

  _scheduleRetry(why) {
    const attempt = this.state.attempts;
    const delay = backoffDelay(attempt);
    this._setState({ status: 'retrying', detail: why, retryAt: Date.now() + delay, attempts: attempt + 1 });
    clearTimeout(this._retryTimer);
    this._retryTimer = setTimeout(() => this._dial(), delay);
  }

  _closeSocket(code, reason) {
    try {
      this.ws && this.ws.close(code, reason);
    } catch {
      /* already closed */
    }
  }

  _teardown(why) {
    this._generation++;
    clearInterval(this._keepaliveTimer);
    clearTimeout(this._retryTimer);
    if (this.peer) this.peer.close(why);
    if (this.ws) {
      this.ws.onopen = this.ws.onmessage = this.ws.onclose = null;
      this._closeSocket(1000, 'closing');
    }
    const hadSocket = Boolean(this.ws);
    this.ws = null;
    this.peer = null;
    if (hadSocket) this.hooks.onSocketClosed(why);
  }
}
