"""Archive and delete campaigns (docs/architecture.md, "Decision NEW: archive and delete").

* **Archive** marks a campaign (``archived_at``): the default list leaves it out, the
  list's ``archived`` filter shows it; nothing else changes (an archived campaign still
  sends if it is running). Reversible: :func:`unarchive_campaign`.
* **Delete** is a soft delete (``deleted_at``): refused while the campaign is running
  (pause or cancel it first); a scheduled, paused or draft campaign is cancelled first
  (its queued rows skipped: it never sends). Its delivery rows, replies and events stay,
  so its reports still read them (``GET /campaigns/{id}/report.*``, ``gatecast report``)
  and every count across campaigns stays true; it leaves every list, and no action
  (pause, resume, retry, cancel, test send) applies to it any more. Not reversible from
  the faces.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Engine, update

from campaigns import lifecycle
from campaigns.delivery_lifecycle import SKIP_QUEUED
from campaigns.reading import campaign_row
from campaigns.service import CANCELLED_ERROR, CampaignDeleted
from storage import tables
from storage.queries import campaigns as q
from storage.types import utcnow

_campaigns = tables.campaigns

#: the reason a deleted campaign that had not finished is cancelled with
DELETED_REASON = "deleted"


class DeleteRefused(ValueError):
    """The campaign may not be deleted now (it is running)."""

    def __init__(self, campaign_id: int, state: str) -> None:
        self.campaign_id = campaign_id
        self.state = state
        super().__init__(
            f"campaign {campaign_id} is {state}: pause or cancel it before deleting it"
        )


def _mark(engine: Engine, campaign_id: int, *, archived: bool, now: datetime | None) -> None:
    with engine.begin() as conn:
        row = campaign_row(conn, campaign_id)
        if row.deleted_at is not None:
            raise CampaignDeleted(campaign_id)
        value = (now or utcnow()) if archived else None
        if (row.archived_at is None) == archived:  # a change: archiving twice keeps the first
            conn.execute(
                update(_campaigns).where(_campaigns.c.id == campaign_id).values(archived_at=value)
            )


def archive_campaign(engine: Engine, campaign_id: int, *, now: datetime | None = None) -> None:
    """Hide a campaign from the default list (any state; idempotent)."""
    _mark(engine, campaign_id, archived=True, now=now)


def unarchive_campaign(engine: Engine, campaign_id: int, *, now: datetime | None = None) -> None:
    """Show an archived campaign in the default list again (idempotent)."""
    _mark(engine, campaign_id, archived=False, now=now)


def delete_campaign(engine: Engine, campaign_id: int, *, now: datetime | None = None) -> int:
    """Delete a campaign softly (see the module); returns the queued rows skipped.

    :class:`DeleteRefused` while running; :class:`CampaignDeleted` when already deleted.
    """
    now = now or utcnow()
    with engine.begin() as conn:
        row = campaign_row(conn, campaign_id)
        if row.deleted_at is not None:
            raise CampaignDeleted(campaign_id)
        if row.state == lifecycle.RUNNING:
            raise DeleteRefused(campaign_id, row.state)
        skipped = 0
        if row.state in lifecycle.ALLOWED_FROM[lifecycle.CANCELLED]:
            lifecycle.transition(
                conn, campaign_id, lifecycle.CANCELLED, reason=DELETED_REASON, now=now
            )
            skipped = q.skip_queued(conn, campaign_id, CANCELLED_ERROR, move=SKIP_QUEUED, now=now)
        conn.execute(
            update(_campaigns).where(_campaigns.c.id == campaign_id).values(deleted_at=now)
        )
    return skipped


__all__ = [
    "DELETED_REASON",
    "DeleteRefused",
    "archive_campaign",
    "delete_campaign",
    "unarchive_campaign",
]
