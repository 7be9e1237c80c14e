"""Retries over days (``[retry] until``, ``every``): the retry horizon.

The short retries of one send (``scheduler.retry.RetryPolicy``: ``max_attempts`` with
backoff) handle a refusal that passes in seconds. Some refusals last hours: a sender's
quota, a gateway refusing for a while. With a horizon, a retryable failure past
``max_attempts`` is not failed: its row goes back to ``queued`` due ``every`` later, again
and again, until ``until`` after the row was made; only then does it fail, with the
attempts made and the last reason. A sender paused for its quota
(``quota_exhausted``) is resumed ``every`` after its pause while a running campaign with a
horizon has it among its senders, so its rows are tried again rather than waiting for a
person. The campaign stays running while such rows are queued (a queued row is pending
work), so it is not completed before its last retry. Rows that wait on a sender paused
for another reason (error 463, logged out) and cannot be handed to a healthy sender fail
once their horizon has passed, with the pause's reason (:func:`fail_stranded`, about once
a minute), so the campaign ends.

This is apart from the operator's ``campaign retry``, which stays manual: it re-queues
failed rows at once, whatever their horizon.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta

from sqlalchemy import Connection

from campaigns.delivery_lifecycle import GIVE_UP
from gateway.outcomes import InstanceProblem
from scheduler.retry import RetryPolicy
from storage.queries import horizon as hq
from storage.queries import instances as iq

log = logging.getLogger("gatecast.dispatch")

#: the pause reason the horizon lifts by itself (``InstanceProblem.QUOTA_EXHAUSTED``)
QUOTA_PAUSE = InstanceProblem.QUOTA_EXHAUSTED.value


def next_try(policy: RetryPolicy, made_at: datetime | None, now: datetime) -> datetime | None:
    """When a row made at ``made_at`` whose retries ran out is tried again, or None when
    the campaign has no horizon or the next try would fall past it."""
    if policy.horizon_seconds <= 0 or made_at is None:
        return None
    at = now + timedelta(seconds=policy.every_seconds)
    return at if at <= made_at + timedelta(seconds=policy.horizon_seconds) else None


def retry_note(reason: str | None, attempts: int, at: datetime) -> str:
    """The row's error while it waits for its next try within the horizon."""
    return f"attempt {attempts} failed ({reason or 'refused'}); next try {at:%Y-%m-%d %H:%M} UTC"


def gave_up(reason: str | None, attempts: int, policy: RetryPolicy) -> str:
    """The final reason of a row whose horizon passed."""
    hours = policy.horizon_seconds / 3600
    return f"gave up after {attempts} attempts over {hours:g} h: {reason or 'refused'}"


def fail_stranded(
    conn: Connection,
    horizons: Iterable[tuple[int, RetryPolicy, Iterable[str]]],
    now: datetime,
) -> int:
    """End the horizon of rows whose sender stayed paused: in each running campaign with a
    horizon (``horizons``: id, retry policy, senders), the queued rows of a paused sender
    made longer than ``until`` ago fail with the pause's reason (rows that can go to a
    healthy sender were handed over after the sender grace). Returns how many."""
    failed = 0
    for campaign_id, policy, senders in horizons:
        if policy.horizon_seconds <= 0:
            continue
        paused = {s: r for s, r in iq.pause_state(conn, sorted(set(senders))).items() if r}
        cutoff = now - timedelta(seconds=policy.horizon_seconds)
        for sender, reason in sorted(paused.items()):
            hours = policy.horizon_seconds / 3600
            error = f"gave up after {hours:g} h: its sender stayed paused ({reason})"
            n = hq.fail_waiting_since(
                conn,
                campaign_id,
                sender,
                move=GIVE_UP,
                made_before=cutoff,
                error=error,
                now=now,
            )
            if n:
                log.warning(
                    "campaign %s: %d recipient(s) of paused sender %s failed past the horizon",
                    campaign_id,
                    n,
                    sender,
                )
            failed += n
    return failed


def resume_quota_pauses(
    conn: Connection, horizons: Iterable[tuple[RetryPolicy, Iterable[str]]], now: datetime
) -> list[str]:
    """Resume senders paused for their quota ``every`` after the pause, when a running
    campaign with a horizon sends through them (``horizons``: each campaign's retry
    policy and senders). Returns the senders resumed."""
    spacing: dict[str, float] = {}
    for policy, senders in horizons:
        if policy.horizon_seconds <= 0:
            continue
        for sender in senders:
            spacing[sender] = min(spacing.get(sender, policy.every_seconds), policy.every_seconds)
    if not spacing:
        return []
    resumed: list[str] = []
    for sender, paused_at in iq.paused_with(conn, sorted(spacing), QUOTA_PAUSE).items():
        if paused_at is not None and now - paused_at < timedelta(seconds=spacing[sender]):
            continue
        if iq.resume(conn, sender, now=now):
            resumed.append(sender)
            hours = spacing[sender] / 3600
            log.info("sender %s resumed: its quota pause is over %g h old", sender, hours)
    return resumed


__all__ = [
    "QUOTA_PAUSE",
    "fail_stranded",
    "gave_up",
    "next_try",
    "resume_quota_pauses",
    "retry_note",
]
