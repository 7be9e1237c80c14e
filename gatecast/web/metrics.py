"""Prometheus metrics, computed from the database at scrape time.

Everything durable lives in the database, so the figures are read from it when
Prometheus scrapes: several gatecast processes report the same truth, and a restart
loses nothing. Every ``*_total`` is a counter kept by the database
(``storage.queries.tallies``: it never goes down, not when a failed row is retried nor
when history retention prunes events); the other families are gauges. The families:

- ``gatecast_queue_depth`` (queued deliveries) and ``gatecast_queue_due`` (queued and due);
- ``gatecast_deliveries{state}``: deliveries by state;
- ``gatecast_sends_total{outcome}`` (counter): sends by outcome: ``accepted`` (a message
  id came back), ``ambiguous`` (a row became unknown), ``failed`` (a row failed);
- ``gatecast_webhook_events_total{kind}`` (counter): status events by status and incoming
  messages stored by the webhook;
- ``gatecast_oldest_applied_event_age_seconds``: how long ago the oldest applied status
  event still stored was received (0 when none is): history retention keeps it under
  ``GATECAST_EVENT_RETENTION_DAYS``;
- ``gatecast_instance_sends_today{instance}``: per sender instance, messages sent (or
  being sent) today as its daily cap counts them (:mod:`scheduler.sender_usage`);
  ``gatecast_instance_paused{instance}`` (1 when gatecast paused it);
  ``gatecast_instance_state{instance,state}`` (1 for its connection state);
- ``gatecast_sender_health_changes_total{level}`` (counter): changes of a sender's health
  level, by the level it went to (``sender_health_changes``); and
  ``gatecast_instance_health_score{instance,level}``: each sender's score now
  (:mod:`scheduler.health`);
- ``gatecast_campaigns{state}``;
- ``gatecast_build_info{version,schema}`` (always 1), and this process's ``process_*`` and
  ``python_info``.

``observe_send`` is an in-process hook for callers that want an exact per-attempt count
(``gatecast_send_attempts_total{outcome}``); scheduler/ must not import this module, so
the application layer passes it to the dispatcher as a plain callback. It counts only
where the dispatcher runs in the process serving ``/metrics`` (``serve --in-process``
or ``--sandbox``); the default ``serve`` sends from a worker without HTTP, so its receiver shows
no attempts and ``gatecast_sends_total`` (from the database) is the figure to read.
``observe_refused`` counts the webhook's refusals in this process
(``gatecast_webhook_events_refused_total{reason}``: ``unknown_instance``, events of an
instance gatecast does not hold; ``source_not_allowed``, requests from an address outside
the allow-list).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from importlib.metadata import version

from prometheus_client import CollectorRegistry, Counter, PlatformCollector, ProcessCollector
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from campaigns import stats
from gatecast.web.context import AppContext
from scheduler.care_view import health_figures
from scheduler.health import LEVELS
from scheduler.sender_usage import sender_usage
from storage import states
from storage.engine import Engine
from storage.models import HEAD_REVISION

_VERSION = version("gatecast")

_ATTEMPTS_REGISTRY = CollectorRegistry(auto_describe=True)
_SEND_ATTEMPTS = Counter(
    "gatecast_send_attempts",
    "Send attempts seen by this process, by outcome kind",
    ["outcome"],
    registry=_ATTEMPTS_REGISTRY,
)


_REFUSED = Counter(
    "gatecast_webhook_events_refused",
    "Webhook events (or requests) refused by this process, by reason",
    ["reason"],
    registry=_ATTEMPTS_REGISTRY,
)


def observe_refused(reason: str, count: int = 1) -> None:
    """Count ``count`` webhook events (or requests) refused for ``reason``."""
    _REFUSED.labels(reason=reason).inc(count)


def observe_send(outcome_kind: str) -> None:
    """Count one send attempt of ``outcome_kind`` (accepted, retryable, ambiguous, ...)."""
    _SEND_ATTEMPTS.labels(outcome=str(outcome_kind)).inc()


class DatabaseCollector(Collector):
    """Reads the figures from the database on every scrape."""

    def __init__(self, ctx: AppContext) -> None:
        self._engine: Engine = ctx.engine
        self._clock = ctx.clock

    def collect(self) -> Iterable[Metric]:
        """Yield every metric family (one short read transaction)."""
        return list(self._families(self._clock()))

    def _families(self, now: datetime) -> Iterator[Metric]:
        with self._engine.connect() as conn:
            snap = stats.snapshot(conn, now)
            usage = sender_usage(conn, [i for i, _ in snap.instances], now)
            care = health_figures(conn, [i for i, _ in snap.instances], now)
        by_state = snap.deliveries_by_state

        depth = GaugeMetricFamily("gatecast_queue_depth", "Deliveries waiting to be sent")
        depth.add_metric([], by_state.get(states.QUEUED, 0))
        yield depth
        due_family = GaugeMetricFamily("gatecast_queue_due", "Queued deliveries that are due")
        due_family.add_metric([], snap.due)
        yield due_family

        deliveries = GaugeMetricFamily(
            "gatecast_deliveries", "Deliveries by state", labels=["state"]
        )
        for state in states.ALL:
            deliveries.add_metric([state], by_state.get(state, 0))
        yield deliveries

        counters = snap.counters
        sends = CounterMetricFamily(
            "gatecast_sends_total",
            "Sends by outcome, since the database was created",
            labels=["outcome"],
        )
        for outcome in ("accepted", "ambiguous", "failed"):
            sends.add_metric([outcome], counters.get(f"sends_{outcome}", 0))
        yield sends

        hooks = CounterMetricFamily(
            "gatecast_webhook_events_total",
            "Webhook events stored, by kind, since the database was created",
            labels=["kind"],
        )
        for status in ("sent", "delivered", "read", "failed"):
            hooks.add_metric([f"status_{status}"], counters.get(f"webhook_status_{status}", 0))
        hooks.add_metric(["message"], counters.get("webhook_message", 0))
        yield hooks

        oldest = GaugeMetricFamily(
            "gatecast_oldest_applied_event_age_seconds",
            "Age of the oldest applied status event still stored (0: none)",
        )
        if snap.oldest_applied_event is None:
            oldest.add_metric([], 0)
        else:
            oldest.add_metric([], max(0.0, (now - snap.oldest_applied_event).total_seconds()))
        yield oldest

        per_instance = GaugeMetricFamily(
            "gatecast_instance_sends_today",
            "Messages sent (or being sent) today per sender instance, as its daily cap counts",
            labels=["instance"],
        )
        paused = GaugeMetricFamily(
            "gatecast_instance_paused",
            "1 when gatecast stopped sending through the instance",
            labels=["instance"],
        )
        for instance_id in sorted(usage):
            per_instance.add_metric([instance_id], usage[instance_id].sends_today)
        for instance_id, paused_reason in snap.instances:
            paused.add_metric([instance_id], 1 if paused_reason else 0)
        yield per_instance
        yield paused
        connection = GaugeMetricFamily(
            "gatecast_instance_state",
            "1 for each instance's connection state as gatecast last saw it",
            labels=["instance", "state"],
        )
        for instance_id, state in sorted(snap.instance_states.items()):
            connection.add_metric([instance_id, state], 1)
        yield connection
        changes = CounterMetricFamily(
            "gatecast_sender_health_changes",
            "Changes of a sender's health level, by the level it went to",
            labels=["level"],
        )
        for level in LEVELS:
            changes.add_metric([level], care.changes.get(level, 0))
        yield changes
        score = GaugeMetricFamily(
            "gatecast_instance_health_score",
            "Each sender's health score now (0-100, decaying; levels by threshold)",
            labels=["instance", "level"],
        )
        for instance_id, (value, level) in sorted(care.scores.items()):
            score.add_metric([instance_id, level], round(value, 2))
        yield score

        by_campaign_state = GaugeMetricFamily(
            "gatecast_campaigns", "Campaigns by state", labels=["state"]
        )
        for state, count in sorted(snap.campaigns_by_state.items()):
            by_campaign_state.add_metric([state], count)
        yield by_campaign_state

        build = GaugeMetricFamily(
            "gatecast_build_info",
            "The running gatecast's version and the database schema it needs (always 1)",
            labels=["version", "schema"],
        )
        build.add_metric([_VERSION, HEAD_REVISION], 1)
        yield build

        yield from _ATTEMPTS_REGISTRY.collect()


def build_registry(ctx: AppContext) -> CollectorRegistry:
    """A registry for one app, reading ``ctx.engine`` at scrape time, with this process's
    own figures (``process_*``: CPU, memory, open files; ``python_info``)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DatabaseCollector(ctx))
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    return registry


def render(registry: CollectorRegistry, accept: str | None) -> tuple[bytes, str]:
    """The exposition body and content type for the client's ``Accept`` header."""
    encoder, content_type = choose_encoder(accept or "")
    return encoder(registry), content_type


__all__ = ["DatabaseCollector", "build_registry", "observe_refused", "observe_send", "render"]
