"""The inbox: what the gateway tells us, from a parsed webhook body to the delivery rows.

The HTTP face (``gatecast.web.webhook``) checks the secret and the source, parses the
body (:func:`gateway.event_parsing.parse_webhook`) and calls :meth:`Inbox.accept`, which
returns once the events are durable (committed, or fsynced in the journal) and raises
:class:`NotStored` when they cannot be (the face answers 503). Inside:

* :mod:`campaigns.inbox.guard`: only the events of instances gatecast holds are taken;
* :mod:`campaigns.inbox.batcher`: group commit, the inbox pass, the journal's drain;
* :mod:`campaigns.inbox.store`: the one way a batch is stored and stored events applied
  (through :func:`storage.event_store.open_writer`'s connections for the dialect);
* :mod:`campaigns.inbox.journal`: the file a batch goes to while the database is away.

What an event does to a delivery row is :mod:`campaigns.gateway_events`' (and its rules
:mod:`campaigns.delivery_lifecycle`'s); the outbound webhooks a status or a reply queues
are written in the same transaction (:mod:`campaigns.webhook_endpoints`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from campaigns.gateway_events import held_instance_ids
from campaigns.inbox.batcher import BatcherConfig, EventBatcher
from campaigns.inbox.guard import HeldInstances, InstancesUnknown, NotStored, RefusalLog
from campaigns.inbox.journal import EventJournal, JournalSettings
from campaigns.inbox.store import InboxHooks, InboxStore
from gateway.events import ConnectionStatus, Event, IncomingMessage, MessageStatus
from storage.engine import Engine
from storage.event_store import open_writer

log = logging.getLogger("gatecast.webhook")

#: the events the inbox takes; others (e.g. a QR code) are parsed and dropped
ACTIONABLE = (MessageStatus, IncomingMessage, ConnectionStatus)


class InboxSettings(JournalSettings, Protocol):
    """What the inbox reads of the settings (``gatecast.settings.Settings`` has it)."""

    @property
    def opt_out_keywords(self) -> tuple[str, ...]:
        """The replies that opt a contact out."""
        ...


@dataclass(frozen=True)
class Accepted:
    """What :meth:`Inbox.accept` took of a body's events."""

    events: int  # parsed
    applied: int  # durable now (stored or journalled)
    refused: int  # of instances gatecast does not hold


class Inbox:
    """One process's inbox: its guard, its batcher and its store (module docstring).

    :meth:`start` and :meth:`stop` bracket its life (an app's lifespan); an inbox never
    started records each body in a worker thread, applied at once.
    """

    def __init__(
        self,
        store: InboxStore,
        *,
        journal: EventJournal | None = None,
        config: BatcherConfig | None = None,
    ) -> None:
        self.store = store
        self.batcher = EventBatcher(store, config, journal)
        self.held = HeldInstances(lambda: held_instance_ids(store.engine))
        self.refusals = RefusalLog(count=store.hooks.refused)

    @classmethod
    def open(
        cls,
        engine: Engine,
        settings: InboxSettings,
        *,
        clock: Callable[[], datetime],
        hooks: InboxHooks | None = None,
    ) -> Inbox:
        """The inbox of ``engine``: the writer for its dialect, the journal ``settings``
        place (none for an in-memory database)."""
        store = InboxStore(
            open_writer(engine),
            opt_out_keywords=settings.opt_out_keywords,
            clock=clock,
            hooks=hooks,
        )
        return cls(store, journal=EventJournal.for_settings(settings, engine))

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`stop`."""
        return self.batcher.running

    async def start(self) -> None:
        """Start the batcher (on the running loop): a journal left is drained, events a
        previous process stored and never applied are applied."""
        await self.batcher.start()

    async def stop(self) -> None:
        """Store and apply what is queued, then give the connections back."""
        await self.batcher.stop()
        await self.store.close()

    async def accept(self, events: list[Event]) -> Accepted:
        """Take a body's parsed ``events``; durable on return.

        Raises :class:`NotStored` (logged) when they cannot be stored now: the database and
        the journal cannot take them, or the instances held are not known yet
        (:class:`InstancesUnknown`: the database has not answered since start).
        """
        actionable: list[Event] = [e for e in events if isinstance(e, ACTIONABLE)]
        refused: list[Event] = []
        if actionable:
            try:
                actionable, refused = await self.held.split(actionable)
            except InstancesUnknown:
                raise
            except Exception as exc:
                log.exception("reading the instances held failed")
                raise NotStored("the instances held could not be read") from exc
            self.refusals.note(refused)
        if actionable:
            try:
                if self.batcher.running:
                    # a big body goes in batches (each its own transaction, the loop free
                    # in between: /healthz and other posts are answered meanwhile); durable
                    # once all are stored (a retry after a 503 half-way is harmless: the
                    # stores dedupe)
                    step = self.batcher.max_events
                    for start in range(0, len(actionable), step):
                        await self.batcher.submit(actionable[start : start + step])
                else:  # never started (an app served without its lifespan): at once
                    await asyncio.to_thread(self.store.record, actionable)
            except NotStored:
                raise
            except Exception as exc:
                raise NotStored("the events could not be stored") from exc
        return Accepted(events=len(events), applied=len(actionable), refused=len(refused))


__all__ = [
    "ACTIONABLE",
    "Accepted",
    "BatcherConfig",
    "Inbox",
    "InboxHooks",
    "InboxSettings",
    "InboxStore",
    "InstancesUnknown",
    "NotStored",
]
