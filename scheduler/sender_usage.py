"""What a sender instance has sent today, counted as its daily cap counts it.

One rule for "sends today", shared by the dispatcher (which enforces the cap) and the
faces (the API, the dashboard and the metrics, which show it):

- a send counts from the moment it is claimed: rows sent since the day began, plus rows
  being sent right now (:func:`storage.queries.deliveries.sends_since`);
- the day begins at local midnight in the timezone of the campaign whose cap applies.
  A sender's cap in force is the smallest daily cap of the active (scheduled or running)
  campaigns sending through it; a campaign that names no instances sends through all of
  them. A sender that no active campaign caps counts from midnight UTC.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from sqlalchemy import Connection, Engine

from campaigns import lifecycle
from scheduler.policy import policy_from_spec
from scheduler.windows import local_day_start
from storage.queries import campaigns as cq
from storage.queries import deliveries as dq

_UTC = ZoneInfo("UTC")

#: campaign states whose daily caps are in force
ACTIVE = (lifecycle.SCHEDULED, lifecycle.RUNNING)


@dataclass(frozen=True)
class SenderUsage:
    """One sender's sends today under the cap in force (``daily_cap`` None: none)."""

    sends_today: int
    daily_cap: int | None
    day_start: datetime
    #: the zone of that day (the capping campaign's; UTC when none caps)
    timezone: ZoneInfo = _UTC


def sends_today(
    conn: Connection, sender: str, now: datetime, tz: ZoneInfo, *, at_most: int | None = None
) -> int:
    """Sends of ``sender`` (sent or being sent, all campaigns) since local midnight in ``tz``;
    with ``at_most`` (the cap), the sent ones are counted up to that many (enough to tell
    what the cap leaves, at a cost bounded by the cap)."""
    return dq.sends_since(conn, sender, local_day_start(now, tz), at_most=at_most)


def sends_today_by_sender(
    conn: Connection,
    senders: Sequence[str],
    now: datetime,
    tz: ZoneInfo,
    *,
    at_most: int | None = None,
) -> dict[str, int]:
    """:func:`sends_today` of several senders in one read (every sender present); with
    ``at_most`` (the cap) each sender's sent rows are counted up to that many."""
    counts = dq.sends_since_by_sender(conn, senders, local_day_start(now, tz), at_most=at_most)
    return {s: counts.get(s, 0) for s in senders}


def _caps(
    conn: Connection, ids: Sequence[str], now: datetime
) -> dict[str, tuple[int, datetime, str]]:
    """Per sender of ``ids``: ``(cap, day start, zone)`` of the smallest cap in force (of
    equal caps, the one whose day began first)."""
    caps: dict[str, tuple[int, datetime, str]] = {}
    wanted = set(ids)  # a set: hundreds of campaigns times hundreds of senders
    for _, spec in cq.specs_in_states(conn, ACTIVE):
        try:
            policy = policy_from_spec(spec or {})
        except ValueError:
            continue
        cap = policy.pace.daily_cap
        if cap is None:
            continue
        found = (cap, local_day_start(now, policy.timezone), policy.timezone.key)
        for sender in policy.instances or wanted:
            if sender in wanted:
                caps[sender] = min(found, caps.get(sender, found))
    return caps


def sender_usage(
    conn_or_engine: Connection | Engine, ids: Sequence[str], now: datetime
) -> dict[str, SenderUsage]:
    """Sends today and the cap in force of each sender in ``ids`` (see the module doc)."""
    if isinstance(conn_or_engine, Engine):
        with conn_or_engine.connect() as conn:
            return sender_usage(conn, ids, now)
    conn = conn_or_engine
    caps = _caps(conn, ids, now)
    midnight_utc = local_day_start(now, ZoneInfo("UTC"))
    starts = {s: caps[s][1] if s in caps else midnight_utc for s in ids}
    counts: dict[str, int] = {}
    for start in sorted(set(starts.values())):
        senders = [s for s in ids if starts[s] == start]
        counts.update(dq.sends_since_by_sender(conn, senders, start))
    return {
        s: SenderUsage(
            sends_today=counts.get(s, 0),
            daily_cap=caps[s][0] if s in caps else None,
            day_start=starts[s],
            timezone=ZoneInfo(caps[s][2]) if s in caps else ZoneInfo("UTC"),
        )
        for s in ids
    }


__all__ = ["ACTIVE", "SenderUsage", "sender_usage", "sends_today", "sends_today_by_sender"]
