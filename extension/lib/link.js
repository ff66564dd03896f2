// The one WebSocket to the gateway: dialing, the ACP handshake, keepalive and reconnection.
// It reports an honest state: 'connected' only after the session handshake, and it drops
// straight back to 'retrying' the moment the socket or a keepalive says the peer is gone.

import { RpcPeer, RpcError, INTERNAL_ERROR, METHOD_NOT_FOUND, SESSION_BUSY } from './rpc.js';
import { META } from './protocol.js';
import { checkKey, checkUrl } from './settings.js';

export const VERSION = chrome.runtime.getManifest().version;

// An application message at least every 20 s: Chrome stops an idle service worker after 30 s,
// and protocol-level ping frames do not count as activity.
const KEEPALIVE_MS = 20_000;
const KEEPALIVE_ANSWER_MS = 10_000;
const HANDSHAKE_MS = 20_000;
const BACKOFF_MIN_MS = 500;
const BACKOFF_MAX_MS = 30_000;
// Each saved gateway keeps its own session: `openab.session.<gateway id>`; installs from before kept one.
const SESSION_KEY = 'openab.session';
const AGENTS_META = META.agents;
const AGENT_META = META.agent;
// Why none of the pod's agents can start (initialize's `_meta`, only then): said to the person at connect.
const AGENTS_UNAVAILABLE_META = META.agentsUnavailable;
const SERVER_ID_KEY = 'openab.serverId';
const SESSION_MOVED = '_openab/session/moved';
export const SESSION_MOVED_DETAIL =
  'This chat was taken over by another connection (another window or device). Start a New chat to go on here.';

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

/** The agents a gateway offers (initialize's `_meta`), as [{id, title}]; the first is its default. */
export function offeredAgents(initializeResult) {
  const list = initializeResult && initializeResult._meta && initializeResult._meta[AGENTS_META];
  if (!Array.isArray(list)) return [];
  return list
    .filter((a) => a && typeof a.id === 'string' && a.id)
    .map((a) => ({ id: a.id, title: typeof a.title === 'string' && a.title ? a.title : a.id }));
}

/** Why the gateway can start none of its agents (initialize's `_meta`), or '' when it can start one. */
export function unavailableAgents(initializeResult) {
  const why = initializeResult && initializeResult._meta && initializeResult._meta[AGENTS_UNAVAILABLE_META];
  return typeof why === 'string' ? why.slice(0, 1000) : '';
}

function agentOf(result) {
  const agent = result && result._meta && result._meta[AGENT_META];
  return typeof agent === 'string' ? agent : '';
}

// A pod that JupyterHub spawns is served at .../user/<name>/acp; the hub answers 424 for it while it is not running.
const HUB_POD_PATH = /^(.*)\/user\/([^/]+)\//;
export const POD_QUEUED = 'Your pod waits its turn to start: the hub is starting many pods at once, and this panel '
  + 'asks again in a moment.';
export const POD_STARTING = 'Your pod is starting: the hub is starting it again, and this panel connects as soon as it is up.';
// How often a panel looks again while its pod starts (a pod starts in seconds to a minute).
const STARTING_RETRY_MAX_MS = 3000;

/**
 * What to tell the person when the socket to `url` never opened, from the HTTP `status` the same
 * address gave a plain request with the same key (`null`: no HTTP answer at all). `keySent`: whether
 * a key went with it; a 401 to no key is a gateway asking for one, not refusing one.
 */
export function refusalReason(url, status, keySent = true) {
  const u = new URL(url);
  const where = `The gateway at ${u.host}`;
  if (status === null) {
    return u.protocol === 'wss:'
      ? `Cannot reach the gateway at ${u.host} over TLS. Check the URL and that the gateway is running; if it is, `
        + `Chrome may not trust its certificate (open https://${u.host}/healthz in a tab to see why).`
      : `Cannot reach the gateway at ${u.host}. Check the URL, and that the gateway is running.`;
  }
  const hub = u.pathname.match(HUB_POD_PATH);
  if (hub && (status === 401 || status === 403)) {
    const tokens = `${u.protocol === 'wss:' ? 'https:' : 'http:'}//${u.host}${hub[1]}/hub/token`;
    return status === 401
      ? `The hub did not take this token (missing, wrong, expired or revoked). Make one at ${tokens} and paste it as the key.`
      : `This token may not open ${hub[2]}'s pod: a hub token opens only its owner's own pod. Paste your own token from ${tokens}.`;
  }
  switch (status) {
    case 401:
      return keySent
        ? `${where} refused the key. Paste the key from the gateway's pairing line into the settings.`
        : `${where} needs a key: paste the key from the gateway's pairing line into the settings.`;
    case 403:
      return `${where} refused this browser (HTTP 403: its origin or host name is not allowed). `
        + 'Set a key on the gateway, or add this extension to OPENAB_ACP_ALLOWED_ORIGINS.';
    case 404:
      return `${where} has no ${u.pathname}. Check the URL path (usually /acp).`;
    case 503:
      return `${where} is not answering yet: it may be starting or stopping. This panel keeps trying.`;
    case 426:
      return `${where} accepts the key, but the WebSocket did not get through: `
        + 'a proxy or ingress in between does not pass WebSocket upgrades.';
    default:
      return `${u.host} answered HTTP ${status} at ${u.pathname}: not an openab gateway's WebSocket endpoint. Check the URL.`;
  }
}


/**
 * The hub's stopped pod, in words: ask the hub to start it with the person's own token (the hub's REST API,
 * `POST users/<name>/server`, which a token made on the hub may do for its owner) and say what happens.
 * Returns [detail, cause]: 'starting' while it starts, 'refused' when the person must start it on the hub.
 */
export async function startHubPod(url, key) {
  const http = new URL(url.replace(/^ws/, 'http'));
  const found = http.pathname.match(HUB_POD_PATH);
  const home = `${http.origin}${found ? found[1] : ''}/hub/home`;
  if (!found || !key) return [`Your pod at ${http.host} is stopped. Start it on the hub: ${home}`, 'refused'];
  try {
    const res = await fetch(`${http.origin}${found[1]}/hub/api/users/${found[2]}/server`, {
      method: 'POST', cache: 'no-store', credentials: 'omit', headers: { Authorization: `token ${key}` },
      // The hub answers once the pod started or after its slow_spawn_timeout (10 s by default) with 202.
      signal: AbortSignal.timeout(15_000),
    });
    // 201 started, 202 starting, 400 already starting (or still stopping): each time, waiting is the answer.
    if (res.status === 201 || res.status === 202 || res.status === 400) return [POD_STARTING, 'starting'];
    // 429: the hub is starting as many pods as it allows at once (its spawn limit); the next dial asks again.
    if (res.status === 429) return [POD_QUEUED, 'starting'];
    return [`Your pod at ${http.host} is stopped, and this token may not start it. Start it on the hub: ${home}`, 'refused'];
  } catch {
    return [`Your pod at ${http.host} is stopped, and the hub did not answer. Start it on the hub: ${home}`, 'unreachable'];
  }
}

function hostOf(url) {
  try {
    return new URL(url).host;
  } catch {
    return '';
  }
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
    this.moved = false;
    this.serverId = null;
    this.agents = []; // what the gateway offers, [{id, title}]
    this.agent = ''; // the one this session runs
    this.unavailable = ''; // why the gateway can start none of its agents ('' when it can start one)
    this.state = { status: 'off', detail: 'Not configured', retryAt: 0, attempts: 0, since: Date.now() };
    this._retryTimer = null;
    this.held = false; // the person's edit was refused: the saved gateway is not redialled until a save (refuseEdit)
    this._keepaliveTimer = null;
    this._generation = 0;
  }

  /**
   * (Re)starts with the active gateway ({id, url, key}); safe to call repeatedly. Another gateway (a
   * switch) or another address or key closes the socket and dials afresh.
   */
  async configure(gateway) {
    const was = this.settings;
    const changed = !was || was.id !== gateway.id || was.url !== gateway.url || was.key !== gateway.key;
    this.settings = { id: gateway.id, url: gateway.url, key: gateway.key };
    if (!changed && this.ws) return;
    this.serverId = this.serverId || (await stableServerId());
    this._teardown(was && was.id !== gateway.id ? 'switched gateway' : 'settings changed');
    if (!was || was.id !== gateway.id) {
      this.sessionId = null;
      this.agents = [];
      this.agent = '';
    }
    this.state.attempts = 0;
    this.held = false;
    const problem = checkUrl(gateway.url) || checkKey(gateway.key);
    if (problem) {
      this._setState({ status: 'off', detail: problem });
      return;
    }
    this._dial(false); // new settings: what refused the old ones says nothing of these
  }

  /** A wake-up (alarm, panel opened, the person's Retry now): dial now if we are waiting to retry. */
  poke() {
    if (!this.settings || this.held || checkUrl(this.settings.url) || checkKey(this.settings.key)) return;
    if (!this.ws) {
      clearTimeout(this._retryTimer);
      this._dial();
    }
  }

  /**
   * The person's new gateway URL or key (`what`) was refused before it was saved, for `problem`. The saved
   * gateway stays configured: a live connection carries on, and one that was failing is not dialled again
   * (nor its old error repeated) until the person saves a value that is valid, which configure() dials.
   */
  refuseEdit(what, problem) {
    const host = this.settings ? hostOf(this.settings.url) : '';
    const why = `The new ${what} was not saved: ${problem.replace(/[.\s]*$/, '')}.`;
    if (this.connected) {
      this._setState({ detail: `${why} Still connected to ${host}.` });
      return;
    }
    this.held = true;
    this._teardown('the settings changed');
    const kept = host ? ` The saved gateway (${host}) is kept, and not dialled until a valid ${what} is saved.` : '';
    this._setState({ status: 'off', detail: `${why}${kept}`, retryAt: 0 });
  }

  get connected() {
    return this.state.status === 'connected';
  }

  request(method, params, timeoutMs) {
    if (!this.peer || !this.connected) {
      return Promise.reject(new RpcError(INTERNAL_ERROR, 'Not connected to the gateway; check the connection settings.'));
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

  get sessionKey() {
    return `${SESSION_KEY}.${this.settings.id}`;
  }

  /** This gateway's saved session; a pre-gateways install's one is taken over when its URL matches. */
  async _savedSession() {
    const key = this.sessionKey;
    const got = await chrome.storage.local.get([key, SESSION_KEY]);
    if (got[key]) return got[key];
    const legacy = got[SESSION_KEY];
    if (!legacy || legacy.url !== this.settings.url) return null;
    await chrome.storage.local.set({ [key]: legacy });
    await chrome.storage.local.remove(SESSION_KEY);
    return legacy;
  }

  /** `agent`: one of `this.agents` ids; none means the gateway's default. */
  async newSession(agent) {
    const meta = { ...this.hooks.sessionMeta(), ...(agent ? { [AGENT_META]: agent } : {}) };
    const params = { cwd: '/', mcpServers: [this.declaration()], _meta: meta };
    const res = await this.peer.request('session/new', params, HANDSHAKE_MS);
    if (!res || typeof res.sessionId !== 'string') throw new Error('gateway sent no sessionId');
    this.sessionId = res.sessionId;
    this.agent = agentOf(res) || agent || '';
    await chrome.storage.local.set({
      [this.sessionKey]: { url: this.settings.url, sessionId: this.sessionId, agent: this.agent },
    });
    return this.sessionId;
  }

  /**
   * Starts a fresh conversation on the live socket (the user's "New chat"). The one it replaces is
   * closed first, so the gateway stops its agent and withdraws its browser tools now, not at its
   * idle timeout; a gateway that cannot close sessions only leaves it to that timeout.
   */
  async restartSession(agent) {
    if (!this.connected) throw new Error('Not connected to the gateway.');
    const previous = this.moved ? null : this.sessionId;
    if (previous) {
      try {
        await this.peer.request('session/close', { sessionId: previous }, HANDSHAKE_MS);
      } catch (e) {
        console.info('openab: the gateway did not close the previous session:', e.message);
      }
    }
    const sessionId = await this.newSession(agent);
    this.moved = false;
    this._setState({ detail: 'New session', moved: false });
    return sessionId;
  }

  /**
   * Takes an earlier chat of this gateway up again on the live socket (the panel's Past chats): `session/resume`
   * with its id, naming its agent. Only once the pod took it is the chat on screen closed (as New chat closes it),
   * so a refusal changes nothing here; the refusal is thrown, in the pod's words.
   */
  async resumeSession(sessionId, agent) {
    if (!this.connected) throw new Error('Not connected to the gateway.');
    const previous = this.moved ? null : this.sessionId;
    const meta = { ...this.hooks.sessionMeta(), ...(agent ? { [AGENT_META]: agent } : {}) };
    const res = await this.peer.request('session/resume', {
      sessionId, cwd: '/', mcpServers: [this.declaration()], _meta: meta,
    }, HANDSHAKE_MS);
    if (previous && previous !== sessionId) {
      try {
        await this.peer.request('session/close', { sessionId: previous }, HANDSHAKE_MS);
      } catch (e) {
        console.info('openab: the gateway did not close the previous session:', e.message);
      }
    }
    this.sessionId = sessionId;
    this.agent = agentOf(res) || agent || '';
    await chrome.storage.local.set({
      [this.sessionKey]: { url: this.settings.url, sessionId, agent: this.agent },
    });
    this.moved = false;
    this._setState({ detail: '', moved: false }); // the panel says it in the conversation, at its place in time
    // Whether the pod had forgotten the session and took its id up afresh (core/acp/schema.py FRESH_META).
    return { sessionId, fresh: Boolean(res && res._meta && res._meta[META.fresh] === true) };
  }

  /**
   * Another connection resumed our session (another window, another device, or someone holding
   * its id): the gateway has stopped serving it here. Forget it, so a reconnect does not take it
   * back behind the person's back; the panel says what happened and New chat starts afresh.
   */
  async _sessionMoved(params) {
    if (!params || params.sessionId !== this.sessionId) return;
    this.moved = true;
    const saved = (await chrome.storage.local.get(this.sessionKey))[this.sessionKey];
    if (saved && saved.sessionId === params.sessionId) await chrome.storage.local.remove(this.sessionKey);
    this._setState({ detail: SESSION_MOVED_DETAIL, moved: true });
  }

  _setState(patch) {
    const status = patch.status ?? this.state.status;
    if (status !== this.state.status) patch.since = Date.now();
    this.state = { ...this.state, ...patch };
    this.hooks.onState(this.state);
  }

  /**
   * Opens the socket. `again`: the same settings dialled again (a retry, Retry now), so a refusal the person can fix
   * (a key, a path) still stands while this try runs: the panel keeps saying it, and a message sent meanwhile is told
   * it, not "still connecting".
   */
  _dial(again = true) {
    const gen = ++this._generation;
    const { url, key } = this.settings;
    const protocols = key ? [`openab.bearer.${key}`, 'acp.v1'] : ['acp.v1'];
    const st = this.state;
    const lastRefusal = again && st.status === 'retrying' && st.cause === 'refused' ? st.detail : '';
    this._setState({
      status: 'connecting', detail: lastRefusal || `Connecting to ${new URL(url).host}`, retryAt: 0, refused: lastRefusal,
    });
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
      onNotification: (m, p) => {
        if (m === SESSION_MOVED) this._sessionMoved(p).catch((e) => console.error('openab:', e));
        else this.hooks.onNotification(m, p);
      },
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
      const [why, cause] = opened
        ? [`Connection closed (${ev.code}${ev.reason ? `: ${ev.reason}` : ''})`, 'unreachable']
        : await this._whyRefused(url);
      if (gen === this._generation) this._lost(why, cause);
    };
  }

  /**
   * A WebSocket that never opened does not say why. A plain HTTP request to the same address
   * with the same key does: the gateway's /acp answers it as the WebSocket door would. Returns the
   * reason and its cause: 'unreachable' when nothing answered, 'refused' when something did (a key,
   * a path, a proxy: the reason names what to change).
   */
  async _whyRefused(url) {
    const http = url.replace(/^ws/, 'http');
    // JSON asked for: a JupyterHub in front answers for a pod it is not running with 424, where a page would be sent
    // to its spawn-pending page (a 200 that says nothing here).
    const headers = { Accept: 'application/json', ...(this.settings.key ? { Authorization: `Bearer ${this.settings.key}` } : {}) };
    try {
      const res = await fetch(http, {
        method: 'GET', cache: 'no-store', credentials: 'omit', headers, signal: AbortSignal.timeout(3000),
      });
      // The hub answers for a pod it is not running (its proxy has no route to it): start it and say so.
      if (res.status === 424) {
        // The hub starts it as it answers the request below (in seconds to a minute, bounded by its timeout).
        this._setState({ detail: POD_STARTING });
        return await startHubPod(url, this.settings.key);
      }
      if (res.status === 503) return [refusalReason(url, res.status), 'unreachable'];
      return [refusalReason(url, res.status, Boolean(this.settings.key)), 'refused'];
    } catch {
      return [refusalReason(url, null), 'unreachable'];
    }
  }

  async _handshake(gen) {
    const peer = this.peer;
    try {
      const init = await peer.request('initialize', {
        protocolVersion: 1,
        clientCapabilities: {},
        clientInfo: { name: 'openab-extension', title: 'openab', version: VERSION },
      }, HANDSHAKE_MS);
      this.agents = offeredAgents(init);
      this.unavailable = unavailableAgents(init);
      const saved = await this._savedSession();
      let resumed = false;
      if (saved && saved.url === this.settings.url && saved.sessionId) {
        try {
          // Naming the session's agent lets a restarted gateway bring it back with the same one.
          const meta = { ...this.hooks.sessionMeta(), ...(saved.agent ? { [AGENT_META]: saved.agent } : {}) };
          const res = await peer.request('session/resume', {
            sessionId: saved.sessionId, cwd: '/', mcpServers: [this.declaration()], _meta: meta,
          }, HANDSHAKE_MS);
          this.sessionId = saved.sessionId;
          this.agent = agentOf(res) || saved.agent || '';
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
      this.moved = false;
      this._setState({ status: 'connected', detail: resumed ? 'Session resumed' : 'New session', resumed, moved: false,
        refused: '' });
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
        if (e instanceof RpcError && e.code === METHOD_NOT_FOUND) return;
        if (gen !== this._generation) return;
        this._closeSocket(4001, 'keepalive unanswered');
        this._lost('The gateway stopped answering; reconnecting.', 'unreachable');
      }
    }, KEEPALIVE_MS);
  }

  /**
   * `cause`: 'unreachable' (nothing answers: only waiting helps), 'starting' (the hub is starting the person's pod:
   * looked at again every few seconds) or 'refused' (the detail says what to change).
   */
  _lost(why, cause = 'refused') {
    this._teardown(why);
    this._scheduleRetry(why, cause);
  }

  _scheduleRetry(why, cause = 'refused') {
    const attempt = this.state.attempts;
    const delay = cause === 'starting' ? Math.min(backoffDelay(attempt), STARTING_RETRY_MAX_MS) : backoffDelay(attempt);
    this._setState({ status: 'retrying', detail: why, cause, retryAt: Date.now() + delay, attempts: attempt + 1 });
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
