"""`/metrics`: the pod's state for Prometheus, read at scrape time, on the gateway's port behind the key.

Nothing is counted on a hot path for it: one collector reads what the pod already keeps when Prometheus asks
(sessions, attached tunnels, agent processes, open sockets, the guard's refusals and byte counts, the audit
log's call counts) and ``prometheus-client`` writes the exposition format. Each pod has a registry of its own,
never the library's global one, so two pods in one process (the tests, the demo) never share a series.

The key is a metrics key of its own when the operator sets one (``OPENAB_METRICS_KEY_FILE``,
``--metrics-key-file``): then that key alone opens ``/metrics`` and the person's ``/acp`` key does not, and it
never opens ``/acp`` (:func:`.auth.admit_scrape`). Without one, it is the key ``/acp`` takes, checked the same
way (:func:`.auth.admit_connection`): ``Authorization: Bearer <key>``. A pod without a key serves only loopback,
and ``/metrics`` then answers only loopback names and allowed origins, as ``/acp`` does.

No label holds a session id, a tag, a token or any page text; the labels are fixed words, and tool names only
the catalogue's (every other name is ``other``), so a hostile extension cannot grow the operator's series
without bound.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector
from pydantic import SecretStr
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from openab_browser.core.agents.runtime import AgentRuntime
from openab_browser.core.mcp.audit import CALL_SECONDS_BUCKETS, AuditLog
from openab_browser.core.pod import Pod
from openab_browser.core.settings import Settings
from openab_browser.core.tunnel.registry import TunnelAttached, TunnelDetached, TunnelEvent

from .auth import Admitted
from .hub import admit_metrics
from .server import REFUSAL_KINDS, ConnectionGuard

if TYPE_CHECKING:
    from .acp_key import KeptVerifier, KeyVerifier

__all__ = ["AUTH_REFUSAL_KINDS", "PodCollector", "metrics_endpoint", "metrics_registry", "resolve_metrics_key"]

AUTH_REFUSAL_KINDS = ("key", "host", "origin", "scope", "hub")
"""Why :func:`.auth.admit` refused a request to ``/acp`` or ``/metrics`` (see :class:`.auth.Refused`); under a hub
(:mod:`.hub`) also ``scope`` (a live hub token without access to this pod) and ``hub`` (the hub did not answer)."""


class _AttachedTunnels:
    """Live browser tunnels per session, kept from the registry's attach and detach events (the registry has
    no count of its own to read, and walking every session's tunnels at each scrape would cost sessions x
    tunnels). Bounded by the tunnels themselves: a session's entry goes with its last tunnel."""

    def __init__(self) -> None:
        self.by_session: Counter[str] = Counter()

    def __call__(self, event: TunnelEvent) -> None:
        if isinstance(event, TunnelAttached):
            self.by_session[event.session_id] += 1
        elif isinstance(event, TunnelDetached):
            self.by_session[event.session_id] -= 1
            if self.by_session[event.session_id] <= 0:
                del self.by_session[event.session_id]


class PodCollector(Collector):
    """The pod's metrics, each read from the pod, its ``guard`` and its ``refusals`` when Prometheus scrapes."""

    def __init__(self, pod: Pod, guard: ConnectionGuard, refusals: Counter[str]) -> None:
        self.pod, self.guard, self.refusals = pod, guard, refusals
        self._tunnels = _AttachedTunnels()
        # Held for the pod's life: the registry lives as long as the pod, and so does this collector.
        pod.tunnels.add_listener(self._tunnels)

    def collect(self) -> Iterable[Metric]:
        pod, guard = self.pod, self.guard
        sessions = pod.sessions.all()
        yield GaugeMetricFamily("openab_sessions", "Sessions the pod holds, with or without a socket.",
                                value=len(sessions))
        yield GaugeMetricFamily("openab_sessions_connected", "Sessions a socket holds now.",
                                value=sum(1 for s in sessions if s.owner is not None))
        yield GaugeMetricFamily("openab_sessions_with_browser", "Sessions with a browser tunnel attached.",
                                value=len(self._tunnels.by_session))
        yield GaugeMetricFamily("openab_tunnels_attached", "Browser tunnels (MCP over ACP) attached.",
                                value=sum(self._tunnels.by_session.values()))
        yield GaugeMetricFamily("openab_acp_connections", "Open /acp WebSocket connections.",
                                value=len(pod.connections))
        yield GaugeMetricFamily("openab_turns_in_flight", "Prompt turns running.",
                                value=pod.connections.turns_in_flight)
        yield GaugeMetricFamily("openab_tool_calls_in_flight", "Tool calls sent to a browser, not yet answered.",
                                value=pod.tunnels.calls_in_flight)
        if isinstance(pod.backend, AgentRuntime):
            yield GaugeMetricFamily("openab_agent_processes", "Agent CLI processes alive in the pod.",
                                    value=len(pod.backend.agents))
        yield GaugeMetricFamily("openab_sockets_open", "TCP sockets the gateway holds (HTTP and WebSocket).",
                                value=len(guard))

        refused = CounterMetricFamily(
            "openab_refused_connections",
            "Connections refused, by reason: connection-cap, address-cap, head-timeout (the socket guard); key, "
            "host, origin (the /acp and /metrics door).",
            labels=["reason"],
        )
        for kind in REFUSAL_KINDS:
            refused.add_metric([kind], guard.refused_by_kind[kind])
        for kind in AUTH_REFUSAL_KINDS:
            refused.add_metric([kind], self.refusals[kind])
        yield refused

        wire = CounterMetricFamily(
            "openab_websocket_bytes", "Bytes on WebSocket connections (frames, their headers, the handshake).",
            labels=["direction"],
        )
        wire.add_metric(["received"], guard.websocket_bytes_received)
        wire.add_metric(["sent"], guard.websocket_bytes_sent)
        yield wire

        audit = getattr(pod.browser, "audit", None)
        if isinstance(audit, AuditLog):
            yield from _tool_calls(audit)


def _tool_calls(audit: AuditLog) -> Iterable[Metric]:
    stats = audit.stats
    calls = CounterMetricFamily(
        "openab_tool_calls", "Browser tool calls by tool (the catalogue's names, else other) and outcome.",
        labels=["tool", "outcome"],
    )
    # Copied first: a call may end while the scrape runs (same thread today; cheap insurance for later).
    for (tool, outcome), count in sorted(stats.calls.copy().items()):
        calls.add_metric([tool, outcome], count)
    yield calls
    seconds = HistogramMetricFamily(
        "openab_tool_call_seconds", "How long browser tool calls took, by tool.", labels=["tool"]
    )
    for tool, counts in sorted(stats.buckets.copy().items()):
        cumulative, buckets = 0, []
        for bound, count in zip((*CALL_SECONDS_BUCKETS, float("inf")), counts, strict=True):
            cumulative += count
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), float(cumulative)))
        seconds.add_metric([tool], buckets, sum_value=stats.seconds[tool])
    yield seconds


def resolve_metrics_key(settings: Settings, kept: KeptVerifier | KeyVerifier | None = None) -> None:
    """Read the metrics key from ``metrics_token_file`` (as the ``/acp`` key's file is read: a plain 0600 file or
    a Kubernetes Secret's) unless it was given itself; refuse one equal to the ``/acp`` key (or matching the
    ``kept`` key's verifier), which it would then open."""
    from openab_browser.core.errors import ConfigurationError

    from .pairing import read_key_file

    if settings.metrics_token is None and settings.metrics_token_file is not None:
        settings.metrics_token = SecretStr(read_key_file(settings.metrics_token_file))
    if settings.metrics_token is None:
        return
    metrics_key = settings.metrics_token.get_secret_value()
    if ((settings.token is not None and metrics_key == settings.token.get_secret_value())
            or (kept is not None and kept.matches(metrics_key))):
        raise ConfigurationError("the metrics key is the /acp key: give /metrics a key of its own "
                                 "(`openssl rand -hex 32`), which opens the counts and never a browser")


def metrics_registry(pod: Pod, guard: ConnectionGuard, refusals: Counter[str]) -> CollectorRegistry:
    """A registry of this pod's own: its :class:`PodCollector` and the process's memory, CPU and descriptors."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PodCollector(pod, guard, refusals))
    ProcessCollector(registry=registry)
    return registry


async def metrics_endpoint(request: Request) -> Response:
    """``GET /metrics``: the exposition text, for the metrics key if one is set, else the pod's key (401
    without it, as ``/acp``)."""
    verdict = await admit_metrics(request)
    if not isinstance(verdict, Admitted):
        if verdict.status == 401 and request.app.state.pod.settings.metrics_token is None:
            return PlainTextResponse(
                "Missing or wrong key: scrape /metrics with `Authorization: Bearer <key>` (the key /acp takes; in "
                "Prometheus, `authorization: {credentials_file: ...}`)",
                401, headers={"WWW-Authenticate": "Bearer"},
            )
        headers = {"WWW-Authenticate": "Bearer"} if verdict.status == 401 else None
        return PlainTextResponse(verdict.reason, verdict.status, headers=headers)
    registry: CollectorRegistry = request.app.state.metrics
    # The format the scraper asks for (Prometheus offers OpenMetrics first); the classic text by default.
    encode, content_type = choose_encoder(request.headers.get("accept", ""))
    return Response(encode(registry), headers={"Content-Type": content_type})
