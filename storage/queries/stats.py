"""Whole-database figures for monitoring (the metrics a scrape reads): one short read.

The deliveries by state and the counters come from the counts the triggers keep
(:mod:`storage.queries.tallies`): a scrape reads a few rows per campaign, never the
deliveries or the event history."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, func, select, true

from storage import states, tables
from storage.queries import tallies

_d = tables.deliveries
_c = tables.campaigns
_i = tables.instances
_se = tables.status_events


@dataclass(frozen=True)
class Snapshot:
    """Counts across every campaign at one moment."""

    deliveries_by_state: dict[str, int]
    due: int  # queued and due
    #: counters that never go down, by name (``storage.queries.tallies``): sends by
    #: outcome (``sends_accepted`` ...), webhook events stored (``webhook_status_<status>``,
    #: ``webhook_message``)
    counters: dict[str, int]
    #: when the oldest applied status event still stored was received (None: none is);
    #: history retention keeps it within the retention
    oldest_applied_event: datetime | None
    instances: list[tuple[str, str | None]]  # (instance id, paused reason)
    #: instance id -> its connection state as gatecast last saw it (``connected``, ...)
    instance_states: dict[str, str]
    campaigns_by_state: dict[str, int]


def snapshot(conn: Connection, now: datetime) -> Snapshot:
    """The figures at ``now`` (run it in one transaction for a consistent view)."""
    by_state = dict.fromkeys(states.ALL, 0)
    for counts in tallies.delivery_counts_by_campaign(conn).values():
        for state, n in counts.items():
            by_state[state] = by_state.get(state, 0) + n
    due = conn.execute(
        select(func.count()).where(_d.c.state == states.QUEUED, _d.c.due_at <= now)
    ).scalar_one()
    instances = conn.execute(select(_i.c.instance_id, _i.c.paused_reason, _i.c.state)).all()
    campaigns: dict[str, int] = {
        str(k): int(v)
        for k, v in conn.execute(
            # direct messages (POST /api/v1/messages) are not campaigns: their sends count
            select(_c.c.state, func.count()).where(_c.c.direct.is_(False)).group_by(_c.c.state)
        ).all()
    }
    return Snapshot(
        deliveries_by_state=by_state,
        due=int(due),
        counters=tallies.counters(conn),
        oldest_applied_event=conn.execute(
            select(_se.c.received_at)
            .where(_se.c.applied == true())
            .order_by(_se.c.received_at)
            .limit(1)
        ).scalar(),
        instances=[(str(i), reason) for i, reason, _ in instances],
        instance_states={str(i): str(state) for i, _, state in instances},
        campaigns_by_state=campaigns,
    )


__all__ = ["Snapshot", "snapshot"]
