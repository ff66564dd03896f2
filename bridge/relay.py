"""``openab browser-bridge``: the stdio MCP server an agent CLI spawns, relaying to the pod's browser socket.

This module is the relay's logic with no I/O in it (:mod:`openab_browser.bridge.relay_loop` runs it over stdin, stdout
and the socket): it is fed the lines that arrive, the socket's comings and goings and the time, and it says what
to write where, whether it wants the socket, and when to be asked again.

The relay moves lines. The MCP server itself (both eras, tools, errors, size bounds) runs in the pod, one per
connection (:mod:`openab_browser.bridge.server`), so the relay knows MCP only as far as it must to stand in when the
socket is down:

* it remembers which of the agent's requests are unanswered, and answers them with an error if the socket
  closes under them (a tool call may or may not have run; the error says so);
* while the socket is down (the pod restarting), requests wait, each for at most ``wait`` seconds, while it
  reconnects; after a reconnect it replays the agent's ``initialize`` (and ``notifications/initialized``)
  under a private id, so the new server is where the old one was, and tells a handshake-era agent that the
  tool list may have changed;
* when the pod refuses it (no session in its ancestry, another uid), every request gets that refusal as
  its error: an agent sees a clear MCP error, never a hang and never another session's browser.

Only MCP goes to stdout; diagnostics go to stderr.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Final, Literal

import orjson

from openab_browser.core.jsonrpc import (
    INTERNAL_ERROR,
    SERVER_OVERLOADED,
    LocalRpcError,
    Peer,
    RemoteRpcError,
    Request,
    RpcError,
    dumps,
    notification_message,
)

from .framing import BRIDGE_REFUSED, MAX_FRAME_BYTES, READY_METHOD, TooLarge, error_line, frame_too_large

__all__ = ["Relay", "RelayState"]

_PRIVATE_PREFIX: Final = "openab-relay/"
_MAX_IN_FLIGHT: Final = 1024
# Agent lines held while the socket is down; past it the relay stops reading stdin until they have gone.
_MAX_WAITING: Final = 256
_FIRST_RETRY: Final = 0.05
_LAST_RETRY: Final = 1.0

RelayState = Literal["down", "connecting", "greeting", "reinitializing", "ready", "refused"]


def _say(text: str) -> None:
    sys.stderr.write(f"[openab browser-bridge] {text}\n")
    sys.stderr.flush()


def _key(request_id: Any) -> tuple[str, Any]:
    return (type(request_id).__name__, request_id)


class Relay:
    """One agent's stdio MCP connection, carried over the pod's socket at ``path`` (named in messages only).

    Inputs: :meth:`agent_frames`, :meth:`agent_ended`, :meth:`connecting`, :meth:`connected`, :meth:`connect_failed`,
    :meth:`pod_frames`, :meth:`pod_closed`, :meth:`tick`. Outputs: :meth:`data_to_agent`, :meth:`data_to_pod`,
    :attr:`wants_socket`, :meth:`should_connect`, :attr:`wants_agent_input`, :meth:`next_deadline`,
    :meth:`finished`. Times are the driver's monotonic clock, in seconds.
    """

    def __init__(
        self,
        path: str,
        *,
        wait: float = 10.0,
        connect_timeout: float = 5.0,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        drain_timeout: float = 2.0,
        say: Callable[[str], None] = _say,
    ) -> None:
        self.path = path
        self.wait = wait
        self.connect_timeout = connect_timeout
        self.max_frame_bytes = max_frame_bytes
        self.drain_timeout = drain_timeout
        self._say = say
        self.state: RelayState = "down"
        self.channel: str | None = None
        self.connects = 0
        self._refused: RpcError | None = None
        self._down_reason = "not connected yet"
        self._connect_at = 0.0
        self._retry = _FIRST_RETRY
        self._deadline: float | None = None  # of the connect, the greeting, or the replayed initialize
        self._to_agent: list[bytes] = []
        self._to_pod: list[bytes] = []
        # Agent lines not yet forwarded, each parsed once (None: not a JSON object) with the time it stops waiting
        # for the socket.
        self._waiting: deque[tuple[bytes, dict[str, Any] | None, float]] = deque()
        # key -> (id, method, tool name for tools/call): a lost call's error names the tool.
        self._in_flight: dict[tuple[str, Any], tuple[Any, str, str | None]] = {}
        self._initialize: dict[str, Any] | None = None
        self._initialized = False
        self._private_id: str | None = None
        self._private_ids = 0
        self._ended_at: float | None = None

    # -- outputs ------------------------------------------------------------------------------------------

    def data_to_agent(self) -> list[bytes]:
        """Lines for stdout, each ending in ``\\n``, in order; taken once."""
        out, self._to_agent = self._to_agent, []
        return out

    def data_to_pod(self) -> list[bytes]:
        """Lines for the socket, each ending in ``\\n``, in order; taken once."""
        out, self._to_pod = self._to_pod, []
        return out

    @property
    def wants_socket(self) -> bool:
        """Whether a socket the driver holds should stay open (``False``: close it, then :meth:`pod_closed`)."""
        return self.state in ("connecting", "greeting", "reinitializing", "ready")

    def should_connect(self, now: float) -> bool:
        return self.state == "down" and now >= self._connect_at and not self.finished(now, unsent=False)

    @property
    def wants_agent_input(self) -> bool:
        return self._ended_at is None and len(self._waiting) < _MAX_WAITING

    def next_deadline(self) -> float | None:
        """When :meth:`tick` has something to do, unless input comes first."""
        times: list[float] = []
        if self.state == "down":
            times.append(self._connect_at)
        if self._deadline is not None:
            times.append(self._deadline)
        if self._waiting and self.state != "ready":
            times.append(self._waiting[0][2])
        if self._ended_at is not None:
            times.append(self._ended_at + self.drain_timeout)
        return min(times) if times else None

    def finished(self, now: float, *, unsent: bool) -> bool:
        """The agent closed stdin and what it asked is answered, or the time to wait for that is over.
        ``unsent``: the driver still holds lines for the pod that the socket has not taken."""
        if self._ended_at is None:
            return False
        if now >= self._ended_at + self.drain_timeout:
            return True
        if self._waiting or self._to_pod or (unsent and self.state == "ready"):
            return False
        # A listen stream ends only when its server does: no reason to stay for it.
        return self.state != "ready" or not any(m != "subscriptions/listen" for _, m, _t in self._in_flight.values())

    def close(self) -> None:
        """The relay stops: what still waits for the socket gets its error, since nothing will carry it now."""
        while self._waiting:
            frame, _, _ = self._waiting.popleft()
            self._answer_locally(frame, self._unreachable())

    # -- the agent ----------------------------------------------------------------------------------------

    def agent_frames(self, frames: Iterable[bytes | TooLarge], now: float) -> None:
        for frame in frames:
            if isinstance(frame, TooLarge):
                self._to_agent.append(error_line(frame_too_large(self.max_frame_bytes)))
            elif frame.strip():
                try:
                    message = orjson.loads(frame)
                except orjson.JSONDecodeError:
                    message = None
                self._waiting.append((frame, message if isinstance(message, dict) else None, now + self.wait))
        self._advance(now)

    def agent_ended(self, now: float) -> None:
        self._ended_at = now

    def _advance(self, now: float) -> None:
        """Forward, answer or let expire the waiting lines, in the order the agent wrote them."""
        while self._waiting:
            frame, message, deadline = self._waiting[0]
            if message is None:
                self._answer_locally(frame, None)  # the engine's parse and envelope errors
            elif self._refused is not None:
                self._answer_locally(frame, self._refused)
            elif self.state == "ready":
                if self._track(message):
                    self._to_pod.append(frame + b"\n")
                else:
                    self._answer_locally(frame, LocalRpcError(
                        SERVER_OVERLOADED, f"Too many requests in flight (max {_MAX_IN_FLIGHT})"
                    ))
            elif now >= deadline:
                self._answer_locally(frame, self._unreachable())
            else:
                return
            self._waiting.popleft()

    def _unreachable(self) -> RpcError:
        return LocalRpcError(
            INTERNAL_ERROR,
            f"the openab pod is not reachable at {self.path} ({self._down_reason}); waited {self.wait:g} s. "
            "Is `openab run --browser-mode bridge` running in this pod?",
        )

    def _track(self, message: dict[str, Any]) -> bool:
        """Note what the relay must remember of a message it forwards; ``False`` when it must not go."""
        method = message.get("method")
        if "id" in message and isinstance(method, str):
            if len(self._in_flight) >= _MAX_IN_FLIGHT:
                return False
            params = message.get("params")
            tool = params.get("name") if method == "tools/call" and isinstance(params, dict) else None
            self._in_flight[_key(message["id"])] = (message["id"], method, tool if isinstance(tool, str) else None)
            if method == "initialize":
                self._initialize = message
        elif method == "notifications/initialized":
            self._initialized = True
        elif method == "notifications/cancelled":
            params = message.get("params")
            if isinstance(params, dict):
                # A cancelled request gets no answer; stop waiting for one.
                self._in_flight.pop(_key(params.get("requestId")), None)
        return True

    def _answer_locally(self, frame: bytes, error: RpcError | None) -> None:
        peer = Peer()
        for event in peer.receive(frame):
            if isinstance(event, Request) and error is not None:
                peer.send_error(event.id, error)
        self._to_agent.extend(line + b"\n" for line in peer.data_to_send())

    # -- the pod ------------------------------------------------------------------------------------------

    def connecting(self, now: float) -> None:
        """The driver began to connect (:meth:`should_connect` said so)."""
        self.state, self._deadline = "connecting", now + self.connect_timeout

    def connected(self, now: float) -> None:
        """The driver's socket is open; the pod speaks first."""
        self.state, self._deadline = "greeting", now + self.connect_timeout

    def connect_failed(self, reason: str, now: float) -> None:
        self.state, self._deadline = "down", None
        self._note_down(f"cannot connect: {reason}")
        self._retry_later(now)

    def pod_frames(self, frames: Iterable[bytes | TooLarge], now: float) -> None:
        for frame in frames:
            if not self.wants_socket:
                return  # the rest of a socket being closed
            if isinstance(frame, TooLarge):
                if self.state == "greeting":
                    self._greeted(None, now)
                else:
                    self._say(f"dropped a message from the pod over the {self.max_frame_bytes}-byte bound")
                continue
            try:
                message = orjson.loads(frame)
            except orjson.JSONDecodeError:
                message = None
            if self.state == "greeting":
                self._greeted(message, now)
            elif message is None:
                self._say("dropped a line from the pod that is not JSON")
            else:
                self._from_pod(frame, message, now)

    def pod_closed(self, now: float) -> None:
        """The socket closed (the pod's doing, or the driver's because :attr:`wants_socket` went false)."""
        if self.state == "refused":
            return
        was_usable = self.state == "ready"
        if self.state != "down":
            self._note_down("the pod closed the socket")
        self.state, self._deadline, self._private_id = "down", None, None
        self._to_pod.clear()  # what was not sent goes nowhere: the calls among it are lost below
        self._lose_in_flight()
        if was_usable:
            self._retry = _FIRST_RETRY
        self._retry_later(now)

    def tick(self, now: float) -> None:
        if self._deadline is not None and now >= self._deadline:
            self._deadline = None
            self._note_down({"connecting": "cannot connect: no answer in time",
                             "greeting": "no greeting in time"}.get(self.state,
                                                                     "the pod did not answer initialize again"))
            self.state = "down"  # the driver closes the socket and reports pod_closed
        self._advance(now)

    def _greeted(self, hello: Any, now: float) -> None:
        self._deadline = None
        if isinstance(hello, dict) and hello.get("method") == READY_METHOD:
            raw = hello.get("params")
            params: dict[str, Any] = raw if isinstance(raw, dict) else {}
            self.channel = str(params.get("channel"))
            self.connects += 1
            self._down_reason = "connected"
            self._say(f"connected to {self.path} on channel {self.channel}")
            if self.connects > 1 and self._initialize is not None:
                self._reinitialize(now)
            else:
                self._became_ready(now)
            return
        self.state = "down"
        if isinstance(hello, dict) and "error" in hello:
            error = RemoteRpcError.from_json(hello["error"])
            if error.code == BRIDGE_REFUSED:
                self._refused, self.state = error, "refused"
                self._say(f"the pod refused this relay: {error.message}")
                self._advance(now)  # waiting requests get the refusal now
                return
            self._note_down(f"the pod answered {error.message!r}")
        else:
            self._note_down("the socket did not greet as an openab pod")

    def _reinitialize(self, now: float) -> None:
        """Put the new server where the old one was: the agent's own ``initialize``, under a private id."""
        assert self._initialize is not None
        self._private_ids += 1
        self._private_id = f"{_PRIVATE_PREFIX}initialize/{self._private_ids}"
        self._to_pod.append(dumps({**self._initialize, "id": self._private_id}) + b"\n")
        self.state, self._deadline = "reinitializing", now + self.connect_timeout

    def _became_ready(self, now: float) -> None:
        self.state = "ready"
        if self.connects > 1 and self._initialize is not None:
            # The browser may have come or gone while we were away.
            self._to_agent.append(dumps(notification_message("notifications/tools/list_changed")) + b"\n")
        self._advance(now)

    def _from_pod(self, frame: bytes, message: Any, now: float) -> None:
        if isinstance(message, dict) and "id" in message and "method" not in message:
            request_id = message["id"]
            if self._private_id is not None and request_id == self._private_id:
                self._private_id, self._deadline = None, None
                if "error" in message:
                    self._note_down(f"the pod refused initialize again: {message['error']}")
                    self.state = "down"
                    return
                if self._initialized:
                    self._to_pod.append(dumps(notification_message("notifications/initialized")) + b"\n")
                self._say("re-initialized after reconnecting")
                self._became_ready(now)
                return
            if isinstance(request_id, str) and request_id.startswith(_PRIVATE_PREFIX):
                return  # the answer to a replay given up on
            self._in_flight.pop(_key(request_id), None)
        self._to_agent.append(frame + b"\n")

    def _lose_in_flight(self) -> None:
        lost, self._in_flight = list(self._in_flight.values()), {}
        closed = "the openab pod's browser socket closed before this request was answered (the pod restarted?)"
        for request_id, method, tool in lost:
            if method == "subscriptions/listen":
                reason = f"{closed}; the stream ended without its close: listen again, and list the tools afresh"
            elif tool is not None:
                # Nothing re-sends a lost call, and the agent must not either before it has looked: the click
                # may have happened.
                reason = (
                    f"{closed}; the outcome of {tool} is unknown: it may or may not have run in the browser. "
                    f"Call browser_snapshot to see the page as it is now before calling {tool} again"
                )
            else:
                reason = f"{closed}; the outcome of {method} is unknown: it may or may not have run"
            self._to_agent.append(error_line(LocalRpcError(INTERNAL_ERROR, reason), request_id))

    def _retry_later(self, now: float) -> None:
        self._connect_at = now + self._retry
        self._retry = min(self._retry * 2, _LAST_RETRY)

    def _note_down(self, reason: str) -> None:
        if reason != self._down_reason:
            self._say(f"{self.path}: {reason}; retrying")
        self._down_reason = reason
