"""Campaign lifecycle: every state change goes through :func:`transition`.

    draft -> scheduled -> running -> completed
                 |           |  \\-> failed (failure-rate threshold, missed start,
                 |           |       a start that cannot happen)
                 |           v
                 +------> paused -> running | scheduled
    any non-final state -> cancelled
    completed | failed -> running          (retry re-queues failed recipients)

The change is one conditional UPDATE, so two processes racing on the same campaign
cannot both win. A move to running (a start, a resume, a retry's requeue) wakes the
listening workers when it commits (:func:`storage.wakeups.notify_work`, PostgreSQL).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, select, update

from storage import tables
from storage.types import utcnow
from storage.wakeups import notify_work

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

#: what a user asks for (in the words of the refusal) -> the states it applies to
ACTIONS: dict[str, frozenset[str]] = {
    "paused": ALLOWED_FROM[PAUSED],
    "resumed": frozenset({PAUSED}),
    "cancelled": ALLOWED_FROM[CANCELLED],
    # an edit changes the file of a campaign not sending now (campaigns.editing)
    "edited": frozenset({SCHEDULED, PAUSED}),
}

_campaigns = tables.campaigns


def _either(states: frozenset[str]) -> str:
    names = sorted(states)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


class InvalidTransition(Exception):
    """The campaign is not in a state from which the requested change is allowed.

    ``action`` (a key of :data:`ACTIONS`, e.g. ``"resumed"``) words the refusal as the
    user asked: "campaign 3 is completed; only a paused campaign can be resumed".
    """

    def __init__(
        self, campaign_id: int, current: str | None, target: str, action: str | None = None
    ) -> None:
        self.campaign_id = campaign_id
        self.current = current
        self.target = target
        self.action = action
        if current is None:
            msg = f"campaign {campaign_id} does not exist"
        elif action is not None:
            msg = (
                f"campaign {campaign_id} is {current}; "
                f"only a {_either(ACTIONS[action])} campaign can be {action}"
            )
        else:
            allowed = ALLOWED_FROM.get(target, frozenset()) - {current}
            msg = (
                f"campaign {campaign_id} is {current}; it can become {target} only when "
                f"{_either(allowed) if allowed else 'never'}"
            )
        super().__init__(msg)


def transition(
    conn: Connection,
    campaign_id: int,
    target: str,
    *,
    reason: str | None = None,
    now: datetime | None = None,
    action: str | None = None,
) -> str:
    """Move campaign ``campaign_id`` to ``target`` or raise :class:`InvalidTransition`.

    ``action`` names the user's request in a refusal (see :class:`InvalidTransition`).

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
        raise InvalidTransition(campaign_id, current, target, action)
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
        raise InvalidTransition(campaign_id, latest, target, action)
    if target == RUNNING:
        conn.execute(
            update(_campaigns)
            .where(_campaigns.c.id == campaign_id, _campaigns.c.started_at.is_(None))
            .values(started_at=now)
        )
        notify_work(conn)  # new work: workers wake at commit instead of at their next poll
    return str(current)


def resume(conn: Connection, campaign_id: int, *, now: datetime | None = None) -> str:
    """Resume a paused campaign: running if it had started, else scheduled. Returns it.

    Only ``paused`` can be resumed; anything else raises :class:`InvalidTransition`
    saying so.
    """
    row = conn.execute(
        select(_campaigns.c.state, _campaigns.c.started_at).where(_campaigns.c.id == campaign_id)
    ).first()
    current = None if row is None else str(row.state)
    target = RUNNING if row is not None and row.started_at is not None else SCHEDULED
    if current != PAUSED:
        raise InvalidTransition(campaign_id, current, target, "resumed")
    transition(conn, campaign_id, target, reason="resumed by user", now=now, action="resumed")
    return target
