"""Whole-database figures for monitoring (the metrics a scrape reads): one short read."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, func, select

from storage import states, tables

_d = tables.deliveries
_c = tables.campaigns
_i = tables.instances
_se = tables.status_events
_in = tables.inbound_messages


@dataclass(frozen=True)
class Snapshot:
    """Counts across every campaign at one moment."""

    deliveries_by_state: dict[str, int]
    due: int  # queued and due
    accepted: int  # rows the gateway accepted (a message id came back)
    status_events: dict[str, int]  # stored status events by status
    inbound: int  # stored incoming messages
    instances: list[tuple[str, str | None]]  # (instance id, paused reason)
    campaigns_by_state: dict[str, int]


def snapshot(conn: Connection, now: datetime) -> Snapshot:
    """The figures at ``now`` (run it in one transaction for a consistent view)."""
    by_state: dict[str, int] = {
        str(k): int(v)
        for k, v in conn.execute(select(_d.c.state, func.count()).group_by(_d.c.state)).all()
    }
    due = conn.execute(
        select(func.count()).where(_d.c.state == states.QUEUED, _d.c.due_at <= now)
    ).scalar_one()
    accepted = conn.execute(select(func.count()).where(_d.c.sent_at.is_not(None))).scalar_one()
    events = conn.execute(select(_se.c.status, func.count()).group_by(_se.c.status))
    event_counts = {str(k): int(v) for k, v in events.all()}
    inbound = conn.execute(select(func.count()).select_from(_in)).scalar_one()
    instances = conn.execute(select(_i.c.instance_id, _i.c.paused_reason)).all()
    campaigns: dict[str, int] = {
        str(k): int(v)
        for k, v in conn.execute(select(_c.c.state, func.count()).group_by(_c.c.state)).all()
    }
    return Snapshot(
        deliveries_by_state=by_state,
        due=int(due),
        accepted=int(accepted),
        status_events=event_counts,
        inbound=int(inbound),
        instances=[(str(i), reason) for i, reason in instances],
        campaigns_by_state=campaigns,
    )


__all__ = ["Snapshot", "snapshot"]
