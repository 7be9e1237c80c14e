"""Whole-database figures for monitoring: deliveries, events, instances and campaigns."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection

from storage.queries import stats as q
from storage.queries.stats import Snapshot


def snapshot(conn: Connection, now: datetime) -> Snapshot:
    """Counts across every campaign at ``now`` (:class:`storage.queries.stats.Snapshot`)."""
    return q.snapshot(conn, now)


__all__ = ["Snapshot", "snapshot"]
