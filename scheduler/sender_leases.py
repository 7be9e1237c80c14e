"""Sender leases: the workers share out the senders with queued work.

Each worker (one id per process) keeps a heartbeat and leases at most its fair share of
the senders with queued work, ``ceil(senders with work / live workers)``
(:func:`fair_share`). At each renewal (every third of the lease, or sooner when the
senders with work change or another worker's release wakes it) it, in one transaction:
marks itself alive and counts the live workers; renews its leases; gives up those of
senders without queued work and those above its share (a worker joined); and takes
senders nobody holds (never leased, given up, or left by a worker whose leases expired)
up to its share. A worker claims only the senders it holds.

A lease is an optimisation for sharing, not the safety rule: a worker whose lease
expired while it was stalled may claim once more for a sender another worker took; the
pace slot's conditional UPDATE and ``SKIP LOCKED`` still keep every row to one send
(decision 2). Releases wake the other workers at once on PostgreSQL
(:func:`storage.wakeups.notify_work`).
"""

from __future__ import annotations

import logging
import math
import zlib
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import Engine

from storage.queries import sender_leases as q
from storage.wakeups import notify_work

log = logging.getLogger("gatecast.dispatch")


def fair_share(with_work: int, live_workers: int) -> int:
    """Most senders one worker may hold: ``ceil(senders with work / live workers)``."""
    return math.ceil(with_work / max(1, live_workers))


@dataclass(eq=False)
class SenderLeases:
    """One worker's leases: which senders it may claim for (:attr:`held`)."""

    engine: Engine
    holder: str
    ttl: timedelta
    #: the senders this worker holds (it claims for these only)
    held: frozenset[str] = field(default=frozenset(), init=False)
    #: live workers at the last renewal
    live_workers: int = field(default=0, init=False)
    _renewed_at: datetime | None = field(default=None, init=False)
    _with_work: frozenset[str] = field(default=frozenset(), init=False)
    _poked: bool = field(default=False, init=False)

    def poke(self) -> None:
        """Renew at the next :meth:`refresh` (another worker released senders)."""
        self._poked = True

    def refresh(self, now: datetime, with_work: Collection[str]) -> frozenset[str]:
        """The senders held after renewing if it is due (every third of the lease, when
        ``with_work`` changed, or after :meth:`poke`)."""
        wanted = frozenset(with_work)
        last = self._renewed_at
        if self._poked or last is None or wanted != self._with_work or now - last >= self.ttl / 3:
            self._poked = False
            self.rebalance(now, wanted)
        return self.held

    def rebalance(self, now: datetime, with_work: frozenset[str]) -> None:
        """Heartbeat, renew, give up the excess, take a fair share (module docstring)."""
        until = now + self.ttl
        with self.engine.begin() as conn:
            live = q.heartbeat(conn, self.holder, now=now, until=until)
            mine = q.renew(conn, self.holder, until=until)
            share = fair_share(len(with_work), live)
            keep = sorted(mine & with_work, key=self._order)[:share]
            give_up = mine - set(keep)
            q.release(conn, self.holder, give_up)
            held = set(keep)
            if len(held) < share:
                free = sorted(q.unheld(conn, with_work - held, now=now), key=self._order)
                held |= q.take(conn, self.holder, free[: share - len(held)], now=now, until=until)
            if give_up & with_work:  # senders with work for the others to take
                notify_work(conn)
        took, gave = held - self.held, self.held - held
        if took or gave:  # an operator can follow who sends for which sender
            log.info(
                "sender leases: holding %d of %d senders with work (%d live workers)%s%s",
                len(held),
                len(with_work),
                live,
                f"; took {', '.join(sorted(took))}" if took else "",
                f"; gave up {', '.join(sorted(gave))}" if gave else "",
            )
        self.held, self.live_workers = frozenset(held), live
        self._renewed_at, self._with_work = now, with_work

    def _order(self, sender: str) -> int:
        """This worker's own order of preference (workers prefer different senders, so
        they rarely race for the same free ones)."""
        return zlib.crc32(f"{self.holder}/{sender}".encode())

    def retire(self) -> None:
        """Give up every lease and the heartbeat (a clean stop); the others are woken."""
        with self.engine.begin() as conn:
            if q.retire(conn, self.holder):
                notify_work(conn)
        self.held, self._renewed_at = frozenset(), None


__all__ = ["SenderLeases", "fair_share"]
