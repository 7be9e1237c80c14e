"""Campaign lifecycle: every state change goes through :func:`transition`.

    draft -> scheduled -> running -> completed
                 |           |  \\-> failed (failure-rate threshold, missed start)
                 |           v
                 +------> paused -> running | scheduled
    any non-final state -> cancelled
    completed | failed -> running          (retry re-queues failed recipients)

The change is one conditional UPDATE, so two processes racing on the same campaign
cannot both win.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, select, update

from storage.models import Campaign
from storage.types import utcnow

DRAFT = "draft"
SCHEDULED = "scheduled"
RUNNING = "running"
PAUSED = "paused"
COMPLETED = "completed"
CANCELLED = "cancelled"
FAILED = "failed"

STATES = (DRAFT, SCHEDULED, RUNNING, PAUSED, COMPLETED, CANCELLED, FAILED)

#: to-state -> the states it may be entered from
ALLOWED_FROM: dict[str, frozenset[str]] = {
    SCHEDULED: frozenset({DRAFT, PAUSED}),
    RUNNING: frozenset({DRAFT, SCHEDULED, PAUSED, COMPLETED, FAILED}),
    PAUSED: frozenset({SCHEDULED, RUNNING}),
    COMPLETED: frozenset({RUNNING}),
    FAILED: frozenset({SCHEDULED, RUNNING, PAUSED}),
    CANCELLED: frozenset({DRAFT, SCHEDULED, RUNNING, PAUSED}),
}

_campaigns = Campaign.__table__  # type: ignore[attr-defined]


class InvalidTransition(Exception):
    """The campaign is not in a state from which the requested change is allowed."""

    def __init__(self, campaign_id: int, current: str | None, target: str) -> None:
        self.campaign_id = campaign_id
        self.current = current
        self.target = target
        if current is None:
            msg = f"campaign {campaign_id} does not exist"
        else:
            allowed = ", ".join(sorted(ALLOWED_FROM.get(target, ()))) or "nothing"
            msg = (
                f"campaign {campaign_id} is {current}; it can become {target} only from: {allowed}"
            )
        super().__init__(msg)


def transition(
    conn: Connection,
    campaign_id: int,
    target: str,
    *,
    reason: str | None = None,
    now: datetime | None = None,
) -> str:
    """Move campaign ``campaign_id`` to ``target`` or raise :class:`InvalidTransition`.

    Sets ``started_at`` on the first run and ``finished_at`` on completed, failed and
    cancelled. Returns the state the campaign came from. The caller owns the transaction.
    """
    if target not in ALLOWED_FROM:
        raise ValueError(f"unknown campaign state {target!r}")
    now = now or utcnow()
    current = conn.execute(
        select(_campaigns.c.state).where(_campaigns.c.id == campaign_id)
    ).scalar_one_or_none()
    if current is None or current not in ALLOWED_FROM[target]:
        raise InvalidTransition(campaign_id, current, target)
    values: dict[str, object] = {"state": target, "state_reason": reason, "updated_at": now}
    if target == RUNNING:
        values["finished_at"] = None
    if target in (COMPLETED, FAILED, CANCELLED):
        values["finished_at"] = now
    result = conn.execute(
        update(_campaigns)
        .where(_campaigns.c.id == campaign_id, _campaigns.c.state == current)
        .values(**values)
    )
    if result.rowcount != 1:
        # somebody else changed it between our read and our write
        latest = conn.execute(
            select(_campaigns.c.state).where(_campaigns.c.id == campaign_id)
        ).scalar_one_or_none()
        raise InvalidTransition(campaign_id, latest, target)
    if target == RUNNING:
        conn.execute(
            update(_campaigns)
            .where(_campaigns.c.id == campaign_id, _campaigns.c.started_at.is_(None))
            .values(started_at=now)
        )
    return str(current)
