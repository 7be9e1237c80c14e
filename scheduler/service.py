"""Everything the scheduler runs in one process: leader election, APScheduler jobs, the
dispatcher, the reconnection of dropped instances, the webhook check and the pruning of
applied status events (the HTTP app is served beside it by
:class:`gatecast.runtime.http_server.AsgiServer`).

Every process dispatches, each for its share of the senders with queued work (sender
leases: :mod:`scheduler.sender_leases`; the claim stays safe for many workers without
them); on PostgreSQL a listener thread wakes the dispatcher on new work
(:mod:`storage.wakeups`) instead of its next poll. Only the holder of the
``scheduler`` lease runs the APScheduler jobs, the reconnections, the webhook check and
the pruning (:mod:`scheduler.retention`), so starts and recurrences fire once and one
process talks to a dropped instance.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy import Engine

from campaigns.followups import evaluate as evaluate_followups
from campaigns.reply_rules import answer_due
from campaigns.search_index import catch_up_search
from gateway.client import GatewayClient
from scheduler import leader
from scheduler.clock import Clock, SystemClock
from scheduler.defaults import (
    DEFAULT_EVENT_RETENTION_DAYS,
    DEFAULT_SEND_CONCURRENCY,
    DEFAULT_SENDER_GRACE_SECONDS,
    DEFAULT_SENDER_LEASE_SECONDS,
    DEFAULT_WEBHOOK_REGISTER_CONCURRENCY,
)
from scheduler.dispatcher import Dispatcher, SupportsSend
from scheduler.jobs import CampaignJobs
from scheduler.outbound import OutboundPolicy, OutboundSender
from scheduler.reconnect import DEFAULT_BACKOFF, Reconnector
from scheduler.recording import SendObserved
from scheduler.retention import EventPruner
from scheduler.sender_leases import SenderLeases
from scheduler.webhook_keeper import ProvenLinks, Registrations, WebhookKeeper
from storage.engine import log_failure
from storage.queries import tallies
from storage.wakeups import listener_for

log = logging.getLogger("gatecast.service")


@dataclass(frozen=True)
class ServiceOptions:
    """Tuning of a :class:`Service` (the defaults suit a paced production run)."""

    workers: int = 4
    #: most paced sends waiting on the gateway at once (``GATECAST_SEND_CONCURRENCY``)
    send_concurrency: int = DEFAULT_SEND_CONCURRENCY
    batch_size: int = 256
    lease_seconds: float = 120.0
    leader_ttl_seconds: float = 30.0
    sync_seconds: float = 10.0
    poll_seconds: float = 1.0
    run_jobs: bool = True
    reconnect_check_seconds: float = 10.0
    reconnect_backoff: tuple[float, ...] = DEFAULT_BACKOFF
    sender_grace_seconds: float = DEFAULT_SENDER_GRACE_SECONDS
    webhook_check_seconds: float = 300.0
    #: most webhook registrations waiting on the gateway at once
    #: (``GATECAST_WEBHOOK_REGISTER_CONCURRENCY``)
    webhook_register_concurrency: int = DEFAULT_WEBHOOK_REGISTER_CONCURRENCY
    #: register the webhook for every linked instance as the service starts, beside the
    #: dispatcher (:meth:`scheduler.webhook_keeper.WebhookKeeper.start_pass`)
    register_webhooks_at_start: bool = False
    #: applied status events older than this are pruned by the leader (0: kept forever)
    event_retention_days: float = DEFAULT_EVENT_RETENTION_DAYS
    retention_check_seconds: float = 60.0
    #: a worker's lease on its share of the senders (0: no leases, claim for every sender)
    sender_lease_seconds: float = DEFAULT_SENDER_LEASE_SECONDS
    #: wake the dispatcher on new work (PostgreSQL ``LISTEN``; SQLite always polls)
    listen: bool = True
    #: how often the leader looks for outbound webhook messages due (0: never sends them)
    outbound_poll_seconds: float = 0.5
    outbound_policy: OutboundPolicy = field(default_factory=OutboundPolicy)
    #: how often the leader fills the search rows of contacts written since (0: never)
    search_catch_up_seconds: float = 2.0
    #: how often the leader evaluates the campaigns' follow-up steps (0: never)
    followup_seconds: float = 2.0
    #: how often the leader answers incoming messages by the reply rules (0: never)
    reply_rules_seconds: float = 1.0


class Service:
    """Runs the scheduler (when it holds the lease) and the dispatcher in threads."""

    def __init__(
        self,
        engine: Engine,
        client_factory: Callable[[], SupportsSend],
        *,
        options: ServiceOptions | None = None,
        clock: Clock | None = None,
        holder: str | None = None,
        campaign_ids: Sequence[int] | None = None,
        on_outcome: Callable[[SendObserved], None] | None = None,
        instance_client: Callable[[], GatewayClient] | None = None,
        webhook_url: str | None = None,
        on_webhooks_registered: Callable[[Registrations], None] | None = None,
    ) -> None:
        """``instance_client`` makes clients for instance operations: with it, the leader
        reconnects instances whose connection dropped (:mod:`scheduler.reconnect`) and,
        given ``webhook_url``, keeps the connected instances' webhook at that URL
        (:mod:`scheduler.webhook_keeper`); with ``options.register_webhooks_at_start``, it
        registers them all as it starts, while the dispatcher already runs, and hands what
        it did to ``on_webhooks_registered``. Given both, a sender a send proves linked
        that was never registered at that URL is held and registered at once
        (:class:`scheduler.webhook_keeper.ProvenLinks`), leader or not."""
        self.engine = engine
        self.options = options or ServiceOptions()
        self.clock: Clock = clock or SystemClock()
        self.holder = holder or f"{socket.gethostname()}:{uuid.uuid4().hex[:8]}"
        lease = self.options.sender_lease_seconds
        self.leases = (
            SenderLeases(engine, self.holder, timedelta(seconds=lease)) if lease > 0 else None
        )
        self.dispatcher = Dispatcher(
            engine,
            client_factory,
            clock=self.clock,
            workers=self.options.workers,
            batch_size=self.options.batch_size,
            lease_seconds=self.options.lease_seconds,
            campaign_ids=campaign_ids,
            poll_seconds=self.options.poll_seconds,
            on_outcome=on_outcome,
            sender_grace_seconds=self.options.sender_grace_seconds,
            send_concurrency=self.options.send_concurrency,
            leases=self.leases,
            on_linked=self._linked_by_send,
        )
        self.jobs = CampaignJobs(engine, now=self.clock.now)
        self.reconnector = (
            Reconnector(engine, instance_client, backoff=self.options.reconnect_backoff)
            if instance_client is not None
            else None
        )
        self.webhook_keeper = (
            WebhookKeeper(
                engine,
                instance_client,
                webhook_url,
                every_seconds=self.options.webhook_check_seconds,
                concurrency=self.options.webhook_register_concurrency,
            )
            if instance_client is not None and webhook_url
            else None
        )
        #: a send proved a sender linked that no pass registered: held, registered at once
        self.proven_links = (
            ProvenLinks(
                engine,
                instance_client,
                webhook_url,
                concurrency=self.options.webhook_register_concurrency,
            )
            if instance_client is not None and webhook_url
            else None
        )
        days = self.options.event_retention_days
        self.pruner = EventPruner(engine, timedelta(days=days)) if days > 0 else None
        self.outbound = (
            OutboundSender(engine, policy=self.options.outbound_policy, now=self.clock.now)
            if self.options.outbound_poll_seconds > 0
            else None
        )
        self.on_webhooks_registered = on_webhooks_registered
        self.is_leader = False
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Start the leader loop (if jobs run here) and the dispatch loop."""
        self._stop.clear()
        if self.options.run_jobs and self.options.register_webhooks_at_start:
            keeper = self.webhook_keeper
            if keeper is not None:  # never registered at this URL: held until it is
                self.dispatcher.hold_unregistered(keeper.unproven())
        if self.options.run_jobs:
            self._spawn("gatecast-leader", self._leader_loop)
            if self.reconnector is not None:
                self._spawn("gatecast-reconnect", self._reconnect_loop)
            if self.webhook_keeper is not None:
                self._spawn("gatecast-webhooks", self._webhook_loop)
            if self.pruner is not None:
                self._spawn("gatecast-retention", self._retention_loop)
            if self.outbound is not None:
                self._spawn("gatecast-outbound", self._outbound_loop)
            if self.options.search_catch_up_seconds > 0:
                self._spawn("gatecast-search", self._search_loop)
            if self.options.followup_seconds > 0:
                self._spawn("gatecast-followups", self._followup_loop)
            if self.options.reply_rules_seconds > 0:
                self._spawn("gatecast-reply-rules", self._rules_loop)
        self._spawn("gatecast-dispatch", self._dispatch_loop)
        if self.options.listen and listener_for(self.engine) is not None:
            self._spawn("gatecast-wakeups", self._wakeup_loop)

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _linked_by_send(self, instance_ids: list[str]) -> None:
        # on the dispatch thread, right after the batch that proved them was recorded:
        # held before its next claim (docs/architecture.md, decision 40)
        if self.proven_links is None:
            return
        try:
            self.proven_links.proven(instance_ids, self.dispatcher, self.clock.now())
        except Exception as exc:  # the leader's check registers them instead
            log_failure(log, "holding senders a send proved linked failed", exc)

    def _dispatch_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.dispatcher.run(self._stop)
            except Exception as exc:
                log_failure(log, "the dispatcher stopped; restarting in 1 s", exc)
                self._stop.wait(1.0)

    def _wakeup_loop(self) -> None:
        # its own thread and connection: a NOTIFY ends the dispatcher's sleep at once
        listener = listener_for(self.engine)
        assert listener is not None
        try:
            while not self._stop.is_set():
                if listener.wait(1.0) and not self._stop.is_set():
                    self.dispatcher.wake()
                    self._stop.wait(0.01)  # a burst of notifications: one wake-up
        finally:
            listener.close()

    def _leader_loop(self) -> None:
        ttl = self.options.leader_ttl_seconds
        renew_every = min(self.options.sync_seconds, ttl / 3)
        while not self._stop.is_set():
            try:
                held = leader.try_acquire(
                    self.engine,
                    leader.SCHEDULER_LEASE,
                    self.holder,
                    now=self.clock.now(),
                    ttl=ttl,
                )
                if held and not self.is_leader:
                    log.info("this process (%s) now runs the scheduler", self.holder)
                    self.is_leader = True
                    self.jobs.start()
                elif held:
                    self.jobs.sync()
                    with self.engine.begin() as conn:
                        tallies.fold(conn)  # the counts' per-backend slots into one
                elif self.is_leader:
                    log.warning("scheduler lease lost: another process fires the jobs now")
                    self.is_leader = False
                    self.jobs.clear()
            except Exception as exc:
                log_failure(log, "scheduler loop error", exc)
            self._stop.wait(renew_every)

    def _reconnect_loop(self) -> None:
        # its own thread: a slow gateway must not delay the lease renewal
        assert self.reconnector is not None
        while not self._stop.wait(self.options.reconnect_check_seconds):
            if not self.is_leader:
                continue
            try:
                self.reconnector.run_once(self.clock.now())
            except Exception as exc:
                log_failure(log, "reconnect loop error", exc)

    def _webhook_loop(self) -> None:
        # its own thread, like reconnection; a newly connected instance waits at most a tick
        keeper = self.webhook_keeper
        assert keeper is not None
        tick = min(1.0, self.options.webhook_check_seconds)
        if self.options.register_webhooks_at_start:  # leader or not, beside the dispatcher
            try:
                done = keeper.start_pass(self.clock.now(), on_done=self.dispatcher.registered)
            except Exception as exc:
                log_failure(log, "webhook registration at start failed", exc)
                self.dispatcher.release_unregistered()  # they send without it, as before
            else:
                if self.on_webhooks_registered is not None:
                    self.on_webhooks_registered(done)
        while not self._stop.wait(tick):
            if not self.is_leader:
                keeper.forget()
                continue
            try:
                keeper.run_once(self.clock.now())
            except Exception as exc:
                log_failure(log, "webhook check error", exc)

    def _retention_loop(self) -> None:
        # its own thread: a long prune must not delay the lease renewal; the first prune
        # runs as soon as this process leads, then every retention_check_seconds
        assert self.pruner is not None
        last: float | None = None
        while not self._stop.wait(1.0):
            if not self.is_leader:
                last = None
                continue
            if last is not None and time.monotonic() - last < self.options.retention_check_seconds:
                continue
            last = time.monotonic()
            try:
                self.pruner.run_once(self.clock.now())
            except Exception:
                log.exception("event retention error")

    def _outbound_loop(self) -> None:
        # its own thread: a slow receiver must not delay the lease renewal
        sender = self.outbound
        assert sender is not None
        while not self._stop.wait(self.options.outbound_poll_seconds):
            if not self.is_leader:
                continue
            try:
                while sender.run_once() and not self._stop.is_set():
                    pass  # a full pass: the next one at once
            except Exception as exc:
                log_failure(log, "outbound webhook error", exc)

    def _search_loop(self) -> None:
        # its own thread: filling the search rows of a big write must not delay the rest
        while not self._stop.wait(self.options.search_catch_up_seconds):
            if not self.is_leader:
                continue
            try:
                catch_up_search(self.engine, stop=self._stop)
            except Exception as exc:
                log_failure(log, "contact search catch-up error", exc)

    def _followup_loop(self) -> None:
        # the follow-up steps due (campaigns/followups.py, decision 70): rows made here
        # are claimed by every process's dispatcher like any others
        while not self._stop.wait(self.options.followup_seconds):
            if not self.is_leader:
                continue
            try:
                if evaluate_followups(self.engine, self.clock.now()):
                    self.dispatcher.wake()
            except Exception as exc:
                log_failure(log, "follow-up evaluation error", exc)

    def _rules_loop(self) -> None:
        # its own thread: answering stores messages, which must not delay the lease renewal
        while not self._stop.wait(self.options.reply_rules_seconds):
            if not self.is_leader:
                continue
            try:
                batch = 200
                while not self._stop.is_set():
                    if answer_due(self.engine, now=self.clock.now(), batch=batch) < batch:
                        break  # else a full batch looked at: the next one at once
            except Exception as exc:
                log_failure(log, "reply rules error", exc)

    def stop(self) -> None:
        """Stop the loops, the scheduler and the dispatcher; give the lease up."""
        self._stop.set()
        wake = getattr(self.clock, "wake", None)
        if callable(wake):
            wake()
        for thread in self._threads:
            thread.join(timeout=30)
        self._threads.clear()
        self.jobs.shutdown()
        self.dispatcher.close()
        if self.proven_links is not None:
            self.proven_links.close()
        if self.outbound is not None:
            self.outbound.close()
        if self.is_leader:
            try:
                leader.release(self.engine, leader.SCHEDULER_LEASE, self.holder)
            except Exception:
                log.exception("releasing the scheduler lease failed")
            self.is_leader = False

    def __enter__(self) -> Service:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
