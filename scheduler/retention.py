"""History retention: status events folded into their delivery rows are pruned.

The rule: a status event applied to its delivery (its state and times are on the row)
is deleted once it was received longer ago than the retention
(``GATECAST_EVENT_RETENTION_DAYS``, default
:data:`scheduler.defaults.DEFAULT_EVENT_RETENTION_DAYS`; 0 keeps every event). Events
not applied are kept: an event on a message id no delivery carries is the evidence that
settles an ``unknown`` row (``campaigns.delivery_lifecycle.is_evidence``), and the
retention is never shorter than that settling looks back
(:data:`scheduler.defaults.MIN_EVENT_RETENTION_DAYS`). The leader prunes, in small
batches, each its own short transaction, so the webhook intake never waits long on it.

The outbound webhooks' history goes with the same retention: attempts of the delivery
log made longer ago, and messages delivered or failed longer ago (messages still waiting
are kept, however old).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Engine

from scheduler.defaults import MIN_EVENT_RETENTION_DAYS
from storage.queries import events as eq
from storage.queries import outbound as oq

log = logging.getLogger("gatecast.retention")


@dataclass(eq=False)
class EventPruner:
    """Deletes applied status events older than ``retention``, ``batch`` at a time."""

    engine: Engine
    retention: timedelta
    batch: int = 2000
    #: batches per :meth:`run_once` (the rest waits for the next run)
    max_batches: int = 25

    def __post_init__(self) -> None:
        if self.retention < timedelta(days=MIN_EVENT_RETENTION_DAYS):
            raise ValueError(
                f"the event retention must be at least {MIN_EVENT_RETENTION_DAYS:g} days"
            )

    def run_once(self, now: datetime) -> int:
        """Prune up to ``max_batches`` batches of each; returns how many rows went."""
        before = now - self.retention
        deleted = 0
        for _ in range(self.max_batches):
            with self.engine.begin() as conn:
                n = eq.prune_applied_events(conn, received_before=before, limit=self.batch)
            deleted += n
            if n < self.batch:
                break
        if deleted:
            log.info("pruned %d applied status events received before %s", deleted, before)
        outbound = 0
        for _ in range(self.max_batches):
            with self.engine.begin() as conn:
                n = oq.prune_history(conn, before=before, limit=self.batch)
            outbound += n
            if n < self.batch:
                break
        if outbound:
            log.info("pruned %d outbound webhook attempts and messages before %s", outbound, before)
        return deleted + outbound


__all__ = ["EventPruner"]
