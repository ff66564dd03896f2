// The chat side of the socket: the extension as the gateway's ACP client. It owns the Link (lib/link.js), sends
// the person's prompts and Stop, folds the session's updates into the transcript, answers the agent's permission
// questions the gateway relays with a card, and tells the gateway while a card waits for the person. The
// gateway's MCP requests on the same socket go to the browser's MCP server (lib/mcp.js).

import { Link, SESSION_MOVED_DETAIL } from './link.js';
import { RpcError, METHOD_NOT_FOUND } from './rpc.js';
import { META, PROMPT_WAIT_MS } from './protocol.js';

// How long the panel waits for a prompt's answer; the pod holds its permission wait under it (core/settings.py).
const PROMPT_TIMEOUT_MS = PROMPT_WAIT_MS;
const MAX_PROMPT_CHARS = 100_000;
// Why a turn was cancelled that the person did not stop (the gateway's session/prompt answer, core/acp/schema.py).
const STOPPED_META = META.stopped;
// What the pod's journal knows of the session's steps (docs/journal.md): their states, on the panel's rows.
const JOURNAL = '_openab/journal';
// To the pod: the guard's decision on a journalled step, as it is made (docs/journal.md, the journal on disk).
const STEP_DECIDED = '_openab/step';

/**
 * What the transcript says of a cancelled turn the person did not stop, or '' for the usual "Stopped: <reason>":
 * "cancelled" alone would read as their own Stop.
 */
function stoppedNote(res, turn, lost) {
  if (!res || res.stopReason !== 'cancelled') return '';
  if (res._meta && res._meta[STOPPED_META] === 'gateway_shutdown') {
    // A step it was running may have happened: the note names it (panel/render.js), and asking again comes after a look.
    return lost.length ? 'The gateway shut down during this turn, so the agent stopped before it finished.'
      : 'The gateway shut down during this turn, so the agent stopped before it finished. ' +
        'Send your message again once the gateway is back.';
  }
  return turn && turn.stopped ? '' : 'The turn was cancelled by the gateway or the agent, not by you.';
}

export class AcpClient {
  /**
   * @param {{mcp: import('./mcp.js').McpServer, guard: import('./guard.js').Guard,
   *          transcript: import('./chat.js').Transcript, onChange: () => void}} parts
   *   `onChange`: the connection or the turn changed (for the panel's state)
   */
  constructor({ mcp, guard, transcript, onChange }) {
    this.guard = guard;
    this.transcript = transcript;
    this.onChange = onChange;
    this.turn = null; // the prompt waiting for its answer: {startedAt, sessionId}
    this._permissionWaits = new Map(); // outer request id -> AbortController
    this._askingSaid = false;
    this._binaryWs = null; // the socket whose binary frames go to its RPC peer (_takeBinary)
    this.link = new Link({
      onRequest: async (method, params, id) => {
        if (mcp.handles(method)) return mcp.onRequest(method, params, id);
        if (method === 'session/request_permission') return this._relayPermission(params, id);
        throw new RpcError(METHOD_NOT_FOUND, `Method not found: ${method}`);
      },
      onNotification: (method, params) => {
        if (method === 'session/update') {
          if (params && params.sessionId === this.link.sessionId) transcript.apply(params.update);
          return;
        }
        if (method === JOURNAL) {
          if (params && params.sessionId === this.link.sessionId) this._journal(mcp, params.steps);
          return;
        }
        if (method === '$/cancel_request') this._permissionWaits.get(params && params.requestId)?.abort();
        mcp.onNotification(method, params);
      },
      onState: () => {
        this._takeBinary();
        this._followSession();
        onChange();
      },
      onSocketClosed: () => {
        // Tunnels and questions belong to the socket; nothing on a dead socket can be answered.
        mcp.reset();
        guard.cancelAll();
      },
      sessionMeta: () => ({ [META.permissionRelay]: true, [META.marksRunning]: true }),
    });
    // The element a step acts on, by its name, on the step's row: as it is described (the row says "Clicking "Buy
    // now"", not the agent's selector), and as it ends in this browser after the pod lost its answer.
    mcp.actions.onNamed = (action, element) => transcript.named(action, element);
    mcp.onRunning = (action, tool) => {
      transcript.journal([{ action, tool, state: 'running', site: null, at: new Date().toISOString() }]);
    };
    mcp.onDecided = (action, guard, rule) => {
      if (this.link.connected) this.link.notify(STEP_DECIDED, { sessionId: this.link.sessionId, action, guard, rule });
    };
  }

  /**
   * A file chunk's answer comes as a binary frame (docs/files.md), which the link's socket leaves aside: it goes to
   * the socket's RPC peer here, as an ArrayBuffer. Taken once per socket, as soon as the link has it.
   */
  _takeBinary() {
    const ws = this.link.ws;
    if (!ws || ws === this._binaryWs) return;
    this._binaryWs = ws;
    ws.binaryType = 'arraybuffer';
    ws.addEventListener('message', (ev) => {
      if (ev.data instanceof ArrayBuffer && this.link.ws === ws && this.link.peer) this.link.peer.receiveBinary(ev.data);
    });
  }

  /** The journal's steps on the panel's rows, each named by the element this browser recorded for it. */
  async _journal(mcp, steps) {
    const named = new Map();
    if (Array.isArray(steps)) {
      for (const step of steps.slice(0, 200)) {
        const action = step && typeof step.action === 'string' ? step.action : '';
        const record = action ? await mcp.actions.recordOf(action).catch(() => null) : null;
        if (record && record.element) named.set(action, record.element);
      }
    }
    this.transcript.journal(steps, named);
  }

  /**
   * While a card waits for the person, the gateway stops the turn's timers and its tool calls' timeouts
   * (`_openab/person`, docs/mcp-over-acp-tunnel-contract.md): a person taking their time must not fail the turn.
   * Called whenever the cards change.
   */
  sayAsking() {
    const asking = this.guard.cards.size > 0;
    if (!this.link.connected) {
      this._askingSaid = false; // the gateway forgets it with the socket
      return;
    }
    if (asking === this._askingSaid) return;
    this._askingSaid = asking;
    this.link.notify('_openab/person', { asking });
  }

  /** The conversation on screen is that of the session the socket holds, per gateway and session. */
  _followSession() {
    const link = this.link;
    const gateway = link.settings ? link.settings.id || link.settings.url : '';
    this.transcript.follow(gateway, link.connected ? link.sessionId : null, link.agent);
  }

  /** The gateway relays the agent's own permission question; the user answers on a card. */
  async _relayPermission(params, id) {
    const p = params && typeof params === 'object' ? params : {};
    const options = (Array.isArray(p.options) ? p.options : [])
      .filter((o) => o && typeof o.optionId === 'string')
      .slice(0, 8)
      .map((o) => ({ optionId: o.optionId, name: String(o.name || o.optionId).slice(0, 80), kind: String(o.kind || '') }));
    if (!options.length || p.sessionId !== this.link.sessionId) return { outcome: { outcome: 'cancelled' } };
    const ctl = new AbortController();
    this._permissionWaits.set(id, ctl);
    try {
      const tc = p.toolCall && typeof p.toolCall === 'object' ? p.toolCall : {};
      const answer = await this.guard.ask({
        kind: 'permission', title: `The agent asks to run: ${String(tc.title || 'a tool').slice(0, 200)}`,
        site: '', detail: String(tc.kind || ''), options,
      }, ctl.signal);
      // Nobody answered: that one action is declined (the agent's own reject), not the whole turn cancelled.
      const picked = answer === 'timeout'
        ? options.find((o) => o.kind === 'reject_once') || options.find((o) => o.kind === 'reject_always')
        : options.find((o) => o.optionId === answer);
      return picked ? { outcome: { outcome: 'selected', optionId: picked.optionId } } : { outcome: { outcome: 'cancelled' } };
    } finally {
      this._permissionWaits.delete(id);
    }
  }

  /**
   * Why nothing can be sent to the gateway now, as a sentence for the person, or null when it can. The truth of
   * the state: a gateway out of reach is said to be so (and when it is tried again); only a problem the person
   * can fix (a URL, a key, what the gateway refused) names it, in the link's own words.
   * `reason`: 'unreachable' | 'connecting' | 'moved' | 'refused' (the panel follows an unreachable one live).
   */
  whyNotConnected() {
    const link = this.link;
    const st = link.state;
    if (link.connected) {
      if (link.moved) return { reason: 'moved', why: SESSION_MOVED_DETAIL };
      // Connected, but the pod can start none of its agents: a prompt could only fail, so it is not sent.
      return link.unavailable ? { reason: 'unavailable', why: link.unavailable } : null;
    }
    if (st.status === 'connecting') {
      // Dialling again after a refusal the person can fix: that refusal still stands until this try says otherwise.
      if (st.refused) return { reason: 'refused', why: String(st.refused).replace(/[.\s]*$/, '.') };
      return { reason: 'connecting', why: 'Still connecting to the gateway.' };
    }
    if (st.status === 'retrying' && st.cause === 'starting') {
      const secs = Math.max(1, Math.round((st.retryAt - Date.now()) / 1000));
      return { reason: 'unreachable', why: `Your pod is starting (retrying in ${secs}\u00a0s).`, retryAt: st.retryAt };
    }
    if (st.status === 'retrying' && st.cause === 'unreachable') {
      const secs = Math.max(1, Math.round((st.retryAt - Date.now()) / 1000));
      return { reason: 'unreachable', why: `The gateway is not reachable (retrying in ${secs}\u00a0s).`, retryAt: st.retryAt };
    }
    const detail = String(st.detail || 'Not connected to the gateway').replace(/[.\s]*$/, '.');
    return { reason: 'refused', why: detail };
  }

  /**
   * Sends the person's prompt and waits for the turn to end; what goes wrong in the turn is said in the transcript.
   * `answer` hears once, before the turn runs, whether the prompt went: null when it is on its way to the agent
   * (and in the transcript), else {reason, text} saying why not, so the panel keeps the text in its box.
   */
  async prompt(text, answer = () => {}) {
    const link = this.link;
    const transcript = this.transcript;
    const body = String(text || '').slice(0, MAX_PROMPT_CHARS);
    if (!body.trim()) return answer({ reason: 'empty', text: 'Nothing to send.' });
    if (this.turn) {
      return answer({ reason: 'busy', text: 'Not sent: the agent is still answering. Wait, or press Stop. Your message is kept.' });
    }
    const offline = this.whyNotConnected();
    if (offline) {
      const why = offline.why.charAt(0).toLowerCase() + offline.why.slice(1);
      return answer({ ...offline, text: `Not sent: ${why} Your message is kept.` });
    }
    transcript.add('user', { text: body });
    this.turn = { startedAt: Date.now(), sessionId: link.sessionId };
    this.onChange();
    try {
      const turn = link.request('session/prompt', {
        sessionId: link.sessionId, prompt: [{ type: 'text', text: body }],
      }, PROMPT_TIMEOUT_MS);
      answer(null);
      const res = await turn;
      const lost = res && res.stopReason === 'cancelled' ? transcript.lostSteps() : [];
      transcript.endTurn(res && res.stopReason, stoppedNote(res, this.turn, lost), lost);
    } catch (e) {
      transcript.endTurn();
      // The connection dropped under the turn: a step it was running may have happened, and the note names it
      // rather than ask for the message again (the pod's journal holds a repeat of it, and asks the person).
      const lost = transcript.lostSteps();
      if (lost.length) transcript.add('error', { text: 'The connection to the gateway dropped during this turn.', lost });
      else transcript.add('error', { text: `The prompt failed: ${e.message}` });
    } finally {
      this.turn = null;
      this.onChange();
    }
  }

  /** Stop: the turn running is cancelled. */
  stop() {
    if (this.turn) {
      this.turn.stopped = true; // the person's Stop: a cancel they did not ask for is worded otherwise
      this.link.notify('session/cancel', { sessionId: this.turn.sessionId });
    }
    // A pending confirmation must not outlive Stop and be approved later by accident.
    this.guard.cancelAll();
  }
}
