"""Prometheus metrics, computed from the database at scrape time.

Everything durable lives in the database, so the figures are read from it when
Prometheus scrapes: several gatecast processes report the same truth, and a restart
loses nothing. Every ``*_total`` is a counter kept by the database
(the storage layer's tallies: it never goes down, not when a failed row is retried nor
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
- outbound webhooks (:mod:`scheduler.outbound`): ``gatecast_outbound_webhook_attempts_total
  {outcome}`` (counter: ``delivered``, ``retrying``, ``failed`` = given up),
  ``gatecast_outbound_webhook_failures_total`` (counter: attempts that did not deliver),
  ``gatecast_outbound_webhook_waiting`` (messages not yet delivered) and
  ``gatecast_outbound_webhook_lag_seconds`` (how long ago the oldest of them happened; 0
  when none waits);
- ``gatecast_build_info{version,schema}`` (always 1), and this process's ``process_*`` and
  ``python_info``.

The in-process series are observed where the event happens, never by a scan at scrape
time: ``observe_send`` (the dispatcher's ``on_outcome`` hook, a
:class:`scheduler.recording.SendObserved`; scheduler/ must not import this module, so
the application layer passes it as a callback) feeds ``gatecast_send_attempts_total``,
``gatecast_send_outcomes_total``, ``gatecast_gateway_send_seconds`` and
``gatecast_scheduler_claim_lateness_seconds``; the webhook appliers feed
``gatecast_webhook_lag_seconds`` and ``gatecast_time_to_status_seconds``; the app's
outermost layer ``gatecast_http_requests_total`` and ``gatecast_http_request_seconds``;
the webhook guard ``gatecast_webhook_events_refused_total``. ``serve``, ``worker`` and
``receive`` call :func:`share_in` first, so these live in files of the state folder that
every process on the machine shares, and the receiver's ``/metrics`` sums them
(prometheus_client's multiprocess mode); without it (tests, an app in a thread) they are
this process's own.
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Iterable, Iterator
from datetime import datetime
from importlib.metadata import version
from pathlib import Path

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    values,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from campaigns import stats
from campaigns.webhook_endpoints import Backlog, backlog
from gatecast.web.context import AppContext
from scheduler.care_view import health_figures
from scheduler.health import LEVELS
from scheduler.recording import SendObserved
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


#: seconds: a gateway answers in tens of milliseconds; a slow one takes seconds
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
#: seconds: lags and times to delivered / read run from a second to days
_LAG_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 86400)

_SEND_SECONDS = Histogram(
    "gatecast_gateway_send_seconds",
    "How long the gateway took to answer a send, by outcome kind (this process's sends)",
    ["outcome"],
    buckets=_LATENCY_BUCKETS,
    registry=_ATTEMPTS_REGISTRY,
)
_SENDS_BY_TYPE = Counter(
    "gatecast_send_outcomes",
    "Send attempts seen by this process, by outcome kind and message type",
    ["outcome", "message_type"],
    registry=_ATTEMPTS_REGISTRY,
)


@functools.cache
def _claim_late() -> Histogram:
    # made at first use, not at import: an unlabelled series takes its storage when made,
    # and :func:`share_in` must choose that storage first (every labelled one waits for
    # its first ``labels()``)
    return Histogram(
        "gatecast_scheduler_claim_lateness_seconds",
        "How long after it was due a delivery was claimed for sending (the scheduler's lag)",
        buckets=_LAG_BUCKETS,
        registry=_ATTEMPTS_REGISTRY,
    )


_WEBHOOK_LAG = Histogram(
    "gatecast_webhook_lag_seconds",
    "From a gateway event's own time to its being stored and applied by this process, by kind",
    ["kind"],
    buckets=_LAG_BUCKETS,
    registry=_ATTEMPTS_REGISTRY,
)
_TIMED_STATUSES = ("delivered", "read")
_TIME_TO = Histogram(
    "gatecast_time_to_status_seconds",
    "From a delivery's sent_at to the gateway's delivered or read event, by status "
    "(per event applied by this process)",
    ["status"],
    buckets=_LAG_BUCKETS,
    registry=_ATTEMPTS_REGISTRY,
)
_HTTP_REQUESTS = Counter(
    "gatecast_http_requests",
    "HTTP requests answered by this process, by route template, method and status",
    ["route", "method", "status"],
    registry=_ATTEMPTS_REGISTRY,
)
_HTTP_SECONDS = Histogram(
    "gatecast_http_request_seconds",
    "How long this process took to answer HTTP requests, by route template and method",
    ["route", "method"],
    buckets=_LATENCY_BUCKETS,
    registry=_ATTEMPTS_REGISTRY,
)


#: prometheus_client's variable naming the folder the processes share their series in
MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"
#: the folder's name in the state folder
FOLDER_NAME = "gatecast-metrics"


def share_in(state_folder: Path, *, fresh: bool = False) -> Path:
    """Keep this process's in-process series (send latency, scheduler lag, webhook lag,
    HTTP requests, ...) in files under ``state_folder`` that every gatecast process of
    the deployment on this machine shares (prometheus_client's multiprocess mode), so the
    receiver's ``/metrics`` shows the sum over ``serve``, its workers and its receiver.
    The variable is inherited by the processes this one starts. ``fresh``: empty the
    folder first (``serve`` does, starting the whole set: the counters then restart from
    0, which Prometheus reads as a reset). Call it before any series is observed."""
    folder = state_folder / FOLDER_NAME
    if fresh and folder.is_dir():
        shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    os.environ[MULTIPROCESS_ENV] = str(folder)
    values.ValueClass = values.get_value_class()  # type: ignore[no-untyped-call]
    return folder


def _shared_folder() -> str | None:
    folder = os.environ.get(MULTIPROCESS_ENV)
    return folder if folder and Path(folder).is_dir() else None


def process_value(name: str, **labels: str) -> float:
    """This process's value of one sample of an in-process series (0 when not yet seen)."""
    return _ATTEMPTS_REGISTRY.get_sample_value(name, labels) or 0.0


def observe_http(route: str, method: str, status: int, seconds: float) -> None:
    """Count one answered HTTP request (``route``: its template, e.g.
    ``/api/v1/campaigns/{campaign_id}``; unmatched paths are ``unmatched``)."""
    _HTTP_REQUESTS.labels(route=route, method=method, status=str(status)).inc()
    _HTTP_SECONDS.labels(route=route, method=method).observe(seconds)


def observe_webhook_lag(kind: str, seconds: float) -> None:
    """One gateway event of ``kind`` applied ``seconds`` after its own time."""
    _WEBHOOK_LAG.labels(kind=kind).observe(max(0.0, seconds))


def observe_time_to(status: str, seconds: float) -> None:
    """A delivery reached ``status`` (delivered, read) ``seconds`` after it was sent;
    other statuses are not timed."""
    if status in _TIMED_STATUSES:
        _TIME_TO.labels(status=status).observe(max(0.0, seconds))


def observe_refused(reason: str, count: int = 1) -> None:
    """Count ``count`` webhook events (or requests) refused for ``reason``."""
    _REFUSED.labels(reason=reason).inc(count)


def observe_send(sent: SendObserved) -> None:
    """One send attempt: its outcome kind (accepted, retryable, ambiguous, ...), the
    gateway's answer time and how late the claim came (the dispatcher's hook)."""
    outcome = str(sent.outcome)
    _SEND_ATTEMPTS.labels(outcome=outcome).inc()
    _SENDS_BY_TYPE.labels(outcome=outcome, message_type=sent.message_type).inc()
    if sent.send_seconds is not None:
        _SEND_SECONDS.labels(outcome=outcome).observe(sent.send_seconds)
    if sent.claim_late_seconds is not None:
        _claim_late().observe(sent.claim_late_seconds)


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
            outbox = backlog(conn)
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

        yield from _outbound(snap.counters, outbox, now)

        build = GaugeMetricFamily(
            "gatecast_build_info",
            "The running gatecast's version and the database schema it needs (always 1)",
            labels=["version", "schema"],
        )
        build.add_metric([_VERSION, HEAD_REVISION], 1)
        yield build

        if _shared_folder() is None:  # else the MultiProcessCollector reads the files
            yield from _ATTEMPTS_REGISTRY.collect()


#: the outcomes of an outbound webhook attempt (``scheduler.outbound``)
_OUTBOUND_OUTCOMES = ("delivered", "retrying", "failed")


def _outbound(counters: dict[str, int], outbox: Backlog, now: datetime) -> Iterator[Metric]:
    """The outbound webhooks' families: attempts by outcome, failures, backlog and lag."""
    attempts = CounterMetricFamily(
        "gatecast_outbound_webhook_attempts_total",
        "Outbound webhook attempts by outcome (failed: given up), since the database was created",
        labels=["outcome"],
    )
    for outcome in _OUTBOUND_OUTCOMES:
        attempts.add_metric([outcome], counters.get(f"outbound_attempts_{outcome}", 0))
    yield attempts
    failures = CounterMetricFamily(
        "gatecast_outbound_webhook_failures_total",
        "Outbound webhook attempts that did not deliver (an error status, a timeout, refused)",
    )
    failures.add_metric(
        [], sum(counters.get(f"outbound_attempts_{o}", 0) for o in _OUTBOUND_OUTCOMES[1:])
    )
    yield failures
    waiting = GaugeMetricFamily(
        "gatecast_outbound_webhook_waiting", "Outbound webhook messages not yet delivered"
    )
    waiting.add_metric([], outbox.waiting)
    yield waiting
    lag = GaugeMetricFamily(
        "gatecast_outbound_webhook_lag_seconds",
        "How long ago the oldest outbound webhook message still waiting happened (0: none waits)",
    )
    oldest = outbox.oldest_at
    lag.add_metric([], 0 if oldest is None else max(0.0, (now - oldest).total_seconds()))
    yield lag


def build_registry(ctx: AppContext) -> CollectorRegistry:
    """A registry for one app, reading ``ctx.engine`` at scrape time, with this process's
    own figures (``process_*``: CPU, memory, open files; ``python_info``)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DatabaseCollector(ctx))
    shared = _shared_folder()
    if shared is not None:  # every process's series, from the files they share
        MultiProcessCollector(registry, path=shared)  # type: ignore[no-untyped-call]
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    return registry


def render(registry: CollectorRegistry, accept: str | None) -> tuple[bytes, str]:
    """The exposition body and content type for the client's ``Accept`` header."""
    encoder, content_type = choose_encoder(accept or "")
    return encoder(registry), content_type


__all__ = [
    "DatabaseCollector",
    "build_registry",
    "observe_http",
    "observe_refused",
    "observe_send",
    "observe_time_to",
    "observe_webhook_lag",
    "process_value",
    "render",
    "share_in",
]
