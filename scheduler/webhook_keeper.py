"""The leader keeps every linked instance's webhook at the deployment's URL.

The gateway cannot report an instance's current webhook (its spec has no such
operation), so what it holds is unknown: another process, a user or the gateway itself
may have changed it. The leader therefore registers the deployment's URL
(:func:`campaigns.instances.webhook_address`) again for every linked instance (connected,
or unconfirmed: its QR code shown) each ``every_seconds``, and at once for an instance
that became linked or changed state (a new link, a first send that confirmed it, a
reconnect after a connection loss). An instance whose row says gatecast last registered
another URL (its ``webhook_digest``: by hand, or a process without
``GATECAST_PUBLIC_URL``) or none is named in a warning (never the URL: it holds the
secret).

Registrations run concurrently, at most ``concurrency`` waiting on the gateway at once
(``GATECAST_WEBHOOK_REGISTER_CONCURRENCY``: :func:`register_concurrently`), so a pass
over 500 senders on a gateway answering in 1 s takes seconds, not minutes; a failure is
kept per sender and never stops the others. ``serve`` and ``worker`` run the first pass
at start beside the dispatcher (:meth:`WebhookKeeper.start_pass`; docs/architecture.md,
decision "start-up registers the webhooks beside dispatch"). A sender a send proved
linked that was never registered at this URL (linked at the gateway behind gatecast's
back) is held and registered at once by the process that sent (:class:`ProvenLinks`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from sqlalchemy import Engine

from campaigns.instances import (
    InstanceGone,
    linked_states,
    registered_webhook_digests,
    set_webhook,
    webhook_digest,
)
from gateway.client import GatewayClient
from gateway.errors import GatewayError
from gateway.fan_out import each_at_most
from scheduler.defaults import DEFAULT_WEBHOOK_REGISTER_CONCURRENCY
from storage.engine import log_failure
from storage.queries.instances import CONNECTED

log = logging.getLogger("gatecast.webhooks")


@dataclass(frozen=True)
class Registrations:
    """What a pass of registrations did: the senders registered (in the order asked) and,
    per sender that failed, why (the gateway's refusal, or the instance is gone)."""

    registered: list[str]
    failed: dict[str, str]


def never_registered_at(engine: Engine, url: str, instance_ids: Iterable[str]) -> list[str]:
    """Those of ``instance_ids`` (once each, in order) whose webhook gatecast never
    registered at ``url`` (none recorded, or another address last)."""
    ids = list(dict.fromkeys(instance_ids))
    recorded = registered_webhook_digests(engine, ids)
    expected = webhook_digest(url)
    return [i for i in ids if recorded.get(i) != expected]


def register_concurrently(
    engine: Engine,
    client: GatewayClient,
    url: str,
    instance_ids: Sequence[str],
    *,
    now: datetime,
    concurrency: int = DEFAULT_WEBHOOK_REGISTER_CONCURRENCY,
    on_done: Callable[[str], None] | None = None,
    enable: bool = True,
) -> Registrations:
    """:func:`campaigns.instances.set_webhook` to ``url`` (``enable=False``: turn it off)
    for each of ``instance_ids``, at most ``concurrency`` at once (threads sharing
    ``client``, whose connection pool is thread-safe: :mod:`gateway.fan_out`). A failure
    is kept for its sender; the others go on. ``on_done`` hears of each sender as its
    registration ends (done or refused)."""
    failed: dict[str, str] = {}

    def one(instance_id: str) -> str:
        try:
            set_webhook(engine, client, instance_id, url, now=now, enable=enable)
        except (GatewayError, InstanceGone) as exc:
            failed[instance_id] = str(exc)
        finally:
            if on_done is not None:
                on_done(instance_id)
        return instance_id

    ids = each_at_most(one, instance_ids, concurrency)
    return Registrations([i for i in ids if i not in failed], failed)


class _Registers(Protocol):
    """Who registers ``url`` through clients of its own (the keeper, :class:`ProvenLinks`)."""

    engine: Engine
    url: str
    concurrency: int

    @property
    def client_factory(self) -> Callable[[], GatewayClient]: ...


def _register(
    owner: _Registers, ids: list[str], now: datetime, on_done: Callable[[str], None] | None
) -> Registrations:
    with owner.client_factory() as client:
        return register_concurrently(
            owner.engine,
            client,
            owner.url,
            ids,
            now=now,
            concurrency=owner.concurrency,
            on_done=on_done,
        )


class SenderHolds(Protocol):
    """What holds a sender's claims while its webhook is registered (the dispatcher)."""

    def hold_unregistered(self, instance_ids: Iterable[str]) -> None: ...

    def registered(self, instance_id: str) -> None: ...


@dataclass(eq=False)
class ProvenLinks:
    """Registers ``url`` for a sender a send just proved linked (decision 37) whose webhook
    gatecast never registered at this URL: a sender linked at the gateway behind
    gatecast's back, recorded ``created``, which no start pass or check registered (they
    register linked senders only). :meth:`proven` holds it (``SenderHolds``) and
    registers it in the background at once, in whichever process sent; it is released as
    its registration ends, done or refused, as at start (decision 40)."""

    engine: Engine
    client_factory: Callable[[], GatewayClient]
    url: str
    concurrency: int = DEFAULT_WEBHOOK_REGISTER_CONCURRENCY
    #: hears of what each registration did (a process reports it; default: logged)
    on_registered: Callable[[Registrations], None] | None = None
    _pool: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="gatecast-proven"),
        init=False,
    )

    def proven(self, instance_ids: Sequence[str], holds: SenderHolds, now: datetime) -> list[str]:
        """Hold those of ``instance_ids`` never registered at this URL and register them in
        the background; returns the ids held (one read when none needs it)."""
        due = never_registered_at(self.engine, self.url, instance_ids)
        if due:
            holds.hold_unregistered(due)
            self._pool.submit(self._registered, due, holds, now)
        return due

    def _registered(self, due: list[str], holds: SenderHolds, now: datetime) -> None:
        try:
            done = _register(self, due, now, holds.registered)
        except Exception as exc:  # they send without it, as before
            log_failure(log, "webhook registration of senders a send proved linked failed", exc)
            for instance_id in due:
                holds.registered(instance_id)
            return
        if self.on_registered is not None:
            self.on_registered(done)
            return
        for instance_id, why in done.failed.items():
            log.warning("webhook of instance %s not registered: %s", instance_id, why)
        if done.registered:
            log.info("webhook registered for %s (a send proved it linked)", _names(done.registered))

    def close(self) -> None:
        """Wait for the registrations under way (each ends within the client's timeout)."""
        self._pool.shutdown(wait=True)


@dataclass(eq=False)
class WebhookKeeper:
    """Registers ``url`` for connected instances: all of them every ``every_seconds``,
    a newly connected one at the next :meth:`run_once`; at most ``concurrency`` at once."""

    engine: Engine
    client_factory: Callable[[], GatewayClient]
    url: str
    every_seconds: float
    monotonic: Callable[[], float] = time.monotonic
    concurrency: int = DEFAULT_WEBHOOK_REGISTER_CONCURRENCY
    _known: dict[str, str] = field(default_factory=dict, init=False)
    _last_full: float | None = field(default=None, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def forget(self) -> None:
        """Start over (leadership lost): the next run registers every connected instance."""
        with self._lock:
            self._known.clear()
            self._last_full = None

    def unproven(self) -> list[str]:
        """The linked instances whose webhook gatecast never registered at this URL (none,
        or another address, last): the start's pass holds them until theirs is done."""
        return never_registered_at(self.engine, self.url, linked_states(self.engine))

    def start_pass(
        self, now: datetime, on_done: Callable[[str], None] | None = None
    ) -> Registrations:
        """The pass at a process's start, leader or not: every linked instance, concurrently;
        what it did, for the process to report (a summary and each failure). ``on_done``
        hears of each instance as its registration ends."""
        return self._run(now, start=True, on_done=on_done)

    def run_once(self, now: datetime) -> list[str]:
        """Register the webhook where it is due; returns the instances registered."""
        return self._run(now, start=False).registered

    def _run(
        self, now: datetime, *, start: bool, on_done: Callable[[str], None] | None = None
    ) -> Registrations:
        with self._lock:  # one pass at a time (the start pass and the leader's check)
            states = linked_states(self.engine)
            ids = list(states)
            clock = self.monotonic()
            full = start or self._last_full is None or clock - self._last_full >= self.every_seconds
            # due: every one on a full pass, else those newly linked or whose state changed
            # (an unconfirmed one that a send confirmed)
            due = ids if full else [i for i in ids if self._known.get(i) != states[i]]
            if full:
                self._last_full = clock
            self._known = dict(states)
            if not due:
                return Registrations([], {})
            recorded = registered_webhook_digests(self.engine, due)
            expected = webhook_digest(self.url)
            done = _register(self, due, now, on_done)
            for instance_id in done.failed:
                if states[instance_id] == CONNECTED:  # try again at the next run
                    self._known.pop(instance_id, None)
                # an unconfirmed one (some gateways refuse the webhook before the
                # scan) again once its state changes, or at the next full pass
            if start:  # the process reports it (what the last run registered, put back)
                return done
            for instance_id, why in done.failed.items():
                log.warning("webhook of instance %s not registered: %s", instance_id, why)
            replaced = [i for i in done.registered if recorded.get(i) != expected]
            for instance_id in replaced[:_NAMED]:
                log.warning(
                    "the webhook of instance %s was not the deployment's webhook URL "
                    "(another address, or none, was registered last): registered it again",
                    instance_id,
                )
            if len(replaced) > _NAMED:
                log.warning("and of %d other instance(s): registered again", len(replaced) - _NAMED)
            if done.registered:
                log.info("webhook registered again for %s", _names(done.registered))
            return done


#: how many instances a line names before it counts the rest
_NAMED = 10


def _names(ids: Sequence[str]) -> str:
    """``ids`` for one line: all of them up to :data:`_NAMED`, else the first and a count."""
    if len(ids) <= _NAMED:
        return ", ".join(ids)
    return f"{', '.join(ids[:_NAMED])} and {len(ids) - _NAMED} more"
