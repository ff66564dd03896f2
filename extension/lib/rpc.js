// JSON-RPC 2.0 peer, independent of the transport: feed it text frames (and a file chunk's binary frames), give it a
// send function.
// The socket code owns I/O; this file owns ids, correlation, timeouts and error shapes.

export class RpcError extends Error {
  constructor(code, message, data) {
    super(message);
    this.code = code;
    this.data = data;
  }
}

// The error codes of every JSON-RPC hop the extension speaks, named as the pod's core/jsonrpc/ names them.
export const PARSE_ERROR = -32700;
export const METHOD_NOT_FOUND = -32601;
export const INVALID_PARAMS = -32602;
export const INTERNAL_ERROR = -32603;
// Implementation-defined server errors (-32000 to -32099): too much in flight, and a session that another
// socket's prompt still holds (the gateway's answer to session/resume).
export const SERVER_OVERLOADED = -32000;
export const SESSION_BUSY = -32001;
export const REQUEST_CANCELLED = -32800;
// MCP-over-ACP's stateless form: no MCP server is registered under the serverId a message names.
export const SERVER_UNAVAILABLE = -33001;

// Bounds every outstanding request so a silent peer can never pile up promises forever.
const MAX_PENDING = 256;

// A message's raw bytes, beside its JSON (docs/files.md, binary file frames): a request whose params hold them under
// this key goes as a binary frame, and a binary answer's result holds them. JSON.stringify skips a symbol key.
export const BYTES = Symbol('bytes');
// A binary frame: this version byte, the header's length (4 bytes, big-endian), the header (the JSON-RPC message
// without its bytes), the bytes. The pod reads the same (core/acp/file_methods.py).
export const FRAME_VERSION = 1;
const FRAME_PREFIX = 5;
const MAX_FRAME_HEADER = 4096;
// A sender that keeps this many bytes free in its buffer in front of its bytes says so with IN_PLACE: the frame's
// prefix and header are written there, and the frame goes as one view of that buffer, its bytes never copied into a
// new one (those copies cost the worker 90-111 ms per 100 MiB downloaded). A file write's prefix and header take at
// most 279 bytes (a 16-digit id and offset, the pod's session and transfer ids, a sha256); a larger one, from a pod
// with longer ids, is framed the copying way.
export const FRAME_ROOM = 512;
export const IN_PLACE = Symbol('in place');
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * The binary frame of message `obj` (its params' BYTES left out of the JSON) and `bytes`. `inPlace`: the FRAME_ROOM
 * bytes in front of `bytes` in its buffer are free, and the frame is written over them when its prefix and header fit
 * (a view of that buffer, which the caller may fill again once the frame was sent), else into a buffer of its own.
 */
export function frameOf(obj, bytes, inPlace = false) {
  const header = encoder.encode(JSON.stringify(obj));
  const front = FRAME_PREFIX + header.length;
  const room = inPlace && front <= FRAME_ROOM && bytes.byteOffset >= FRAME_ROOM;
  const frame = room ? new Uint8Array(bytes.buffer, bytes.byteOffset - front, front + bytes.length)
    : new Uint8Array(front + bytes.length);
  const view = new DataView(frame.buffer, frame.byteOffset, FRAME_PREFIX);
  view.setUint8(0, FRAME_VERSION);
  view.setUint32(1, header.length);
  frame.set(header, FRAME_PREFIX);
  if (!room) frame.set(bytes, front);
  return frame;
}

export class RpcPeer {
  /**
   * @param {(text: string) => void} send  writes one text frame
   * @param {{onRequest: (method: string, params: any, id: any) => Promise<any>,
   *          onNotification: (method: string, params: any) => void}} handlers
   */
  constructor(send, handlers) {
    this._send = send;
    this._handlers = handlers;
    this._nextId = 1;
    this._pending = new Map();
    this.closed = false;
  }

  request(method, params, timeoutMs) {
    if (this.closed) return Promise.reject(new RpcError(INTERNAL_ERROR, 'connection closed'));
    if (this._pending.size >= MAX_PENDING) {
      return Promise.reject(new RpcError(INTERNAL_ERROR, 'too many requests in flight'));
    }
    const id = this._nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this._pending.delete(id);
        reject(new RpcError(INTERNAL_ERROR, `${method} got no answer in ${Math.round(timeoutMs / 1000)} s`));
      }, timeoutMs);
      this._pending.set(id, { resolve, reject, timer, method });
      const bytes = params && params[BYTES];
      if (bytes instanceof Uint8Array) {
        this._writeFrame({ jsonrpc: '2.0', id, method, params }, bytes, params[IN_PLACE] === true);
      } else {
        this._write({ jsonrpc: '2.0', id, method, params });
      }
    });
  }

  notify(method, params) {
    if (!this.closed) this._write({ jsonrpc: '2.0', method, params });
  }

  /** Ends every wait at once: callers learn the socket is gone instead of timing out later. */
  close(reason = 'connection closed') {
    this.closed = true;
    for (const [, p] of this._pending) {
      clearTimeout(p.timer);
      p.reject(new RpcError(INTERNAL_ERROR, reason));
    }
    this._pending.clear();
  }

  /** Handles one inbound text frame. Never throws: bad input is answered or dropped. */
  receive(text) {
    let msg;
    try {
      msg = JSON.parse(text);
    } catch {
      this._write({ jsonrpc: '2.0', id: null, error: { code: PARSE_ERROR, message: 'Parse error' } });
      return;
    }
    if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) return;
    const hasId = Object.prototype.hasOwnProperty.call(msg, 'id');
    if (typeof msg.method !== 'string') {
      if (hasId && ('result' in msg || 'error' in msg)) this._settle(msg);
      return;
    }
    if (!hasId) {
      try {
        this._handlers.onNotification(msg.method, msg.params);
      } catch (e) {
        console.warn('openab: notification handler failed', msg.method, e);
      }
      return;
    }
    this._answer(msg.id, msg.method, msg.params);
  }

  async _answer(id, method, params) {
    try {
      const result = await this._handlers.onRequest(method, params, id);
      this._write({ jsonrpc: '2.0', id, result: result === undefined ? null : result });
    } catch (e) {
      const code = Number.isInteger(e && e.code) ? e.code : INTERNAL_ERROR;
      const error = { code, message: String((e && e.message) || e) };
      if (e && e.data !== undefined) error.data = e.data;
      this._write({ jsonrpc: '2.0', id, error });
    }
  }

  /** Handles one inbound binary frame: an answer whose result carries bytes. Never throws: a bad one is dropped. */
  receiveBinary(buffer) {
    if (!(buffer instanceof ArrayBuffer) || buffer.byteLength < FRAME_PREFIX) return;
    const view = new DataView(buffer);
    const length = view.getUint32(1);
    if (view.getUint8(0) !== FRAME_VERSION || length > MAX_FRAME_HEADER || FRAME_PREFIX + length > buffer.byteLength) return;
    let msg;
    try {
      msg = JSON.parse(decoder.decode(new Uint8Array(buffer, FRAME_PREFIX, length)));
    } catch {
      return;
    }
    if (!msg || typeof msg !== 'object' || !('id' in msg)) return;
    if (msg.result && typeof msg.result === 'object') msg.result[BYTES] = new Uint8Array(buffer, FRAME_PREFIX + length);
    this._settle(msg);
  }

  _settle(msg) {
    const p = this._pending.get(msg.id);
    if (!p) return; // late answer to a request we already gave up on
    this._pending.delete(msg.id);
    clearTimeout(p.timer);
    if (msg.error) {
      const err = msg.error;
      p.reject(new RpcError(err.code ?? INTERNAL_ERROR, String(err.message ?? 'error'), err.data));
    } else {
      p.resolve(msg.result);
    }
  }

  _writeFrame(obj, bytes, inPlace) {
    if (this.closed) return;
    const frame = frameOf(obj, bytes, inPlace);
    try {
      this._send(frame);
    } catch (e) {
      console.warn('openab: send failed', e);
    }
  }

  _write(obj) {
    if (this.closed) return;
    try {
      this._send(JSON.stringify(obj));
    } catch (e) {
      console.warn('openab: send failed', e);
    }
  }
}
