"""The contact cooldown (``[safety] contact_cooldown_hours``; default
``GATECAST_CONTACT_COOLDOWN_HOURS``, filled in at create; 0: off): a contact messaged by
any campaign in the last N hours is not messaged again.

Checked twice, each time in bulk over ``ix_deliveries_contact_sent`` (contact, sent_at):

- at materialisation (the start's last step, :func:`skip_cooled`): the campaign's queued
  rows whose contact has a row sent since ``now - N h`` are skipped, with
  :func:`cooldown_error` as the reason the report shows, in one statement;
- at send time (:func:`cooled_contacts`, beside the opted-out check in
  ``scheduler.sending``): a contact another campaign messaged since the start is skipped
  with the same reason. It is skipped rather than left waiting: the report then says why
  at once, and a campaign never stalls waiting for a cooldown to end.

The preview and create count (:func:`count_cooled`) says how many recipients the
cooldown would skip now.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import Connection

from storage.queries import deliveries as dq
from storage.states import Move

#: how a cooldown skip's reason starts (the rest names the hours)
COOLDOWN_PREFIX = "cooldown:"


def cooldown_error(hours: float) -> str:
    """The reason a row is skipped for the cooldown, as its report row shows it."""
    return f"{COOLDOWN_PREFIX} contact messaged by a campaign in the last {hours:g} h"


def is_cooldown_error(error: str | None) -> bool:
    """True for a reason written by :func:`cooldown_error`."""
    return error is not None and error.startswith(COOLDOWN_PREFIX)


def _since(hours: float, now: datetime) -> datetime:
    return now - timedelta(hours=hours)


def skip_cooled(
    conn: Connection, campaign_id: int, hours: float, *, move: Move, now: datetime
) -> int:
    """``move`` (skip) the campaign's queued rows of contacts messaged in the last
    ``hours``; how many (0 when ``hours`` is 0). The move comes from the caller
    (``delivery_lifecycle.SKIP_QUEUED``: that module reads this one's reasons)."""
    if hours <= 0:
        return 0
    return dq.skip_recently_messaged(
        conn, campaign_id, move=move, since=_since(hours, now), error=cooldown_error(hours)
    )


def cooled_contacts(
    conn: Connection, contact_ids: Sequence[int], hours: float, *, now: datetime
) -> set[int]:
    """Which of ``contact_ids`` were messaged in the last ``hours`` (none when 0)."""
    if hours <= 0 or not contact_ids:
        return set()
    return dq.contacts_messaged_since(conn, contact_ids, _since(hours, now))


def count_cooled(
    conn: Connection, contact_ids: Sequence[int], hours: float, *, now: datetime
) -> int:
    """How many of ``contact_ids`` the cooldown would skip now."""
    return len(cooled_contacts(conn, contact_ids, hours, now=now))


__all__ = [
    "COOLDOWN_PREFIX",
    "cooldown_error",
    "cooled_contacts",
    "count_cooled",
    "is_cooldown_error",
    "skip_cooled",
]
