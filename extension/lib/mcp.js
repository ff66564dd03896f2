// The browser as an MCP server, tunnelled over the ACP socket. Both generations of
// MCP-over-ACP are served on the same socket, told apart per message:
//  - connection form: mcp/connect -> connectionId; mcp/message {connectionId, method, params}
//    whose outer result IS the inner result and whose inner errors are the outer error;
//  - stateless form: mcp/message {serverId, requestId, method, params} answered with the
//    carrier {result} or {error}; outer errors are kept for binding failures.

import { RpcError, INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, REQUEST_CANCELLED, SERVER_OVERLOADED, SERVER_UNAVAILABLE } from './rpc.js';
import { VERSION } from './link.js';
import { MCP_REVISIONS } from './catalogue.js';
import { ActionLog, actionOf, earlierOf, echoed } from './actions.js';

const SERVER_INFO = { name: 'openab-browser', title: 'openab browser', version: VERSION };
const MAX_CONNECTIONS = 16;
const MAX_INFLIGHT = 64;

export class McpServer {
  /**
   * @param {import('./tools.js').BrowserTools} tools
   * @param {() => string} serverId
   * @param {() => void} onChange  tunnel state changed (for the status pill)
   * @param {ActionLog} actions  the actions this browser ran, by the pod's action id (lib/actions.js)
   */
  constructor(tools, serverId, onChange, actions = new ActionLog()) {
    this.tools = tools;
    this.actions = actions;
    this.serverId = serverId;
    this.onChange = onChange;
    // Hears the guard's decision on a journalled step as it is made: `(action, decision, rule)` (lib/acp.js tells
    // the pod, whose record of the step keeps it even if the step's answer is lost).
    this.onDecided = () => {};
    // Hears a journalled step's call arrive: `(action, tool)`; the panel marks the step running from it, so the pod
    // sends no notification of its own before the call (`dev.openab/marksRunning`, core/journal/telling.py).
    this.onRunning = () => {};
    this.connections = new Map(); // connectionId -> {initialized, protocolVersion}
    this.inflight = new Map(); // outer request id -> AbortController
    this.statelessSeen = false;
  }

  get attached() {
    return this.connections.size > 0 || this.statelessSeen;
  }

  /** The socket is gone: every tunnel on it is gone too. */
  reset() {
    for (const ctl of this.inflight.values()) ctl.abort();
    this.inflight.clear();
    this.connections.clear();
    this.statelessSeen = false;
    this.onChange();
  }

  handles(method) {
    return method === 'mcp/connect' || method === 'mcp/message' || method === 'mcp/disconnect';
  }

  async onRequest(method, params, outerId) {
    const p = params && typeof params === 'object' ? params : {};
    if (method === 'mcp/connect') return this._connect(p);
    if (method === 'mcp/disconnect') {
      this.connections.delete(p.connectionId);
      this.onChange();
      return {};
    }
    if (typeof p.method !== 'string') throw new RpcError(INVALID_PARAMS, 'mcp/message needs an inner "method"');
    if (typeof p.connectionId === 'string') {
      const conn = this.connections.get(p.connectionId);
      if (!conn) throw new RpcError(INVALID_PARAMS, `unknown connection: ${p.connectionId}; send mcp/connect first`);
      return this._inner(p.method, p.params, outerId, conn);
    }
    if (typeof p.serverId === 'string' && p.requestId !== undefined) return this._stateless(p, outerId);
    throw new RpcError(INVALID_PARAMS, 'mcp/message needs connectionId, or serverId and requestId');
  }

  onNotification(method, params) {
    const p = params && typeof params === 'object' ? params : {};
    if (method === 'mcp/cancel' || method === '$/cancel_request') {
      this.inflight.get(p.requestId)?.abort();
      return;
    }
    if (method === 'mcp/message' && p.method === 'notifications/initialized') {
      const conn = this.connections.get(p.connectionId);
      if (conn) conn.initialized = true;
    }
    // Other inner notifications (cancelled, progress) carry nothing this server acts on.
  }

  _connect(p) {
    const asked = p.serverId ?? p.acpId;
    if (asked !== undefined && asked !== this.serverId()) {
      throw new RpcError(INVALID_PARAMS, `unknown MCP server: ${asked}; this browser serves ${this.serverId()}`);
    }
    if (this.connections.size >= MAX_CONNECTIONS) {
      // Gateways reconnect; the oldest connection is the one most likely abandoned.
      this.connections.delete(this.connections.keys().next().value);
    }
    const connectionId = `conn-${crypto.randomUUID()}`;
    this.connections.set(connectionId, { initialized: false, protocolVersion: null });
    this.onChange();
    return { connectionId };
  }

  async _stateless(p, outerId) {
    if (p.serverId !== this.serverId()) {
      throw new RpcError(SERVER_UNAVAILABLE, 'MCP server registration unavailable', { serverId: p.serverId });
    }
    if (!this.statelessSeen) {
      this.statelessSeen = true;
      this.onChange();
    }
    try {
      return { result: await this._inner(p.method, p.params, outerId, null) };
    } catch (e) {
      if (e instanceof RpcError && e.code === REQUEST_CANCELLED) throw e;
      return { error: { code: Number.isInteger(e.code) ? e.code : INTERNAL_ERROR, message: String(e.message || e) } };
    }
  }

  async _inner(method, params, outerId, conn) {
    const p = params && typeof params === 'object' ? params : {};
    switch (method) {
      case 'initialize': {
        const asked = p.protocolVersion;
        // The catalogue's revisions, which the pod reads too: a handshake-era one is answered as asked, any other
        // with the one the pod's own clients request.
        const { handshakeVersions, requestedHandshakeVersion } = MCP_REVISIONS;
        const protocolVersion = handshakeVersions.includes(asked) ? asked : requestedHandshakeVersion;
        if (conn) conn.protocolVersion = protocolVersion;
        return { protocolVersion, capabilities: { tools: { listChanged: true } }, serverInfo: SERVER_INFO };
      }
      case 'server/discover':
        return {
          supportedVersions: [MCP_REVISIONS.statelessVersion],
          capabilities: { tools: { listChanged: true } },
          serverInfo: SERVER_INFO,
          _meta: { 'io.modelcontextprotocol/serverInfo': SERVER_INFO },
        };
      case 'ping':
        return {};
      case 'tools/list':
        return { tools: this.tools.list() };
      case 'tools/call':
        return this._call(p, outerId);
      default:
        throw new RpcError(METHOD_NOT_FOUND, `Method not found: ${method}`);
    }
  }

  async _call(p, outerId) {
    if (typeof p.name !== 'string' || !this.tools.has(p.name)) {
      throw new RpcError(INVALID_PARAMS, `Unknown tool: ${p.name}`);
    }
    if (this.inflight.size >= MAX_INFLIGHT) throw new RpcError(SERVER_OVERLOADED, 'too many tool calls in flight');
    const ctl = new AbortController();
    this.inflight.set(outerId, ctl);
    // A step the pod journals: never run twice under one action id, which its result echoes (docs/journal.md).
    const action = actionOf(p);
    // A repeat of a step that may already have happened: the person is asked first, on a card that names it with
    // what this browser knows of it (lib/stages/again.js).
    const earlier = action && earlierOf(p);
    try {
      if (action) this.onRunning(action, p.name);
      if (earlier) earlier.record = await this.actions.recordOf(earlier.action);
      const journal = action ? { earlier, decided: (decision, rule) => this.onDecided(action, decision, rule),
        described: (name) => this.actions.onNamed(action, name) } : null;
      const work = () => this.tools.call(p.name, p.arguments, ctl.signal, journal);
      const result = action ? echoed(await this.actions.run(action, p.name, work), action) : await work();
      if (ctl.signal.aborted) throw new RpcError(REQUEST_CANCELLED, 'Request cancelled');
      return result;
    } finally {
      this.inflight.delete(outerId);
    }
  }
}
