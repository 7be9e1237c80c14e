"""Recording: every outcome of a batch in bulk, in one transaction.

Each row goes where :func:`campaigns.delivery_lifecycle.classify` puts it (a sent row's
``sent_at`` is the moment the gateway's answer to its own send came back); senders with
instance problems or a burst of permanent failures are paused; webhook events that
arrived before their send was recorded are then applied (``apply_pending``).
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta

from sqlalchemy import Connection, Engine

from campaigns import delivery_lifecycle as dl
from campaigns.delivery_lifecycle import Bucket
from gateway.outcomes import InstanceProblem, OutcomeKind
from scheduler import health
from scheduler.claiming import Job
from scheduler.clock import Clock
from scheduler.retry_horizon import gave_up, next_try, retry_note
from storage.queries import deliveries as dq
from storage.queries import instances as iq
from storage.queries import sender_care as sc

log = logging.getLogger("gatecast.dispatch")

#: applies stored status events of these message ids (``campaigns.gateway_events.apply_pending``)
ApplyPending = Callable[[Connection, Sequence[str], datetime], int]


def default_apply_pending(conn: Connection, message_ids: Sequence[str], now: datetime) -> int:
    """``campaigns.gateway_events.apply_pending`` (imported when first used)."""
    from campaigns.gateway_events import apply_pending

    return int(apply_pending(conn, message_ids, now=now))


@dataclass
class Recorded:
    """How many rows went where."""

    sent: int = 0
    retried: int = 0
    failed: int = 0
    unknown: int = 0
    skipped: int = 0

    def add(self, other: Recorded) -> None:
        """Count ``other``'s rows too."""
        for f in fields(Recorded):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclass(frozen=True)
class SendObserved:
    """One send's figures for the layer above's metrics (the ``on_outcome`` hook).

    ``outcome``: the gateway outcome's kind; ``message_type``: text, media, ...;
    ``send_seconds``: how long the gateway took to answer; ``claim_late_seconds``: how
    long after the row was due the claim took it (the scheduler's lag)."""

    outcome: str
    message_type: str
    send_seconds: float | None
    claim_late_seconds: float | None


def observed(job: Job, outcome_kind: str) -> SendObserved:
    """The figures of ``job``'s send."""
    row = job.row
    late = None
    if row.due_at is not None and row.attempted_at is not None:
        late = max(0.0, (row.attempted_at - row.due_at).total_seconds())
    kind = str(row.content.get("type", "")) or "unknown"
    return SendObserved(outcome_kind, kind, job.send_seconds, late)


@dataclass(eq=False)
class Recorder:
    """Records outcomes; keeps each sender's streak of permanent failures."""

    engine: Engine
    clock: Clock
    rng: random.Random
    failure_burst: int
    apply_pending: ApplyPending
    on_outcome: Callable[[SendObserved], None] | None  # e.g. the metrics of the layer above
    note_pause: Callable[[str, str], None]
    check_safety: Callable[[Iterable[int], datetime], None]
    #: hears of the senders a send just proved linked (not connected before), once the
    #: batch is committed: the process registers their webhook (decisions 37 and 40)
    on_linked: Callable[[list[str]], None] | None = None
    _streaks: dict[str, int] = field(default_factory=dict, init=False)

    def record(self, jobs: list[Job]) -> Recorded:
        """Record the outcomes of ``jobs`` (see the module doc); returns the counts."""
        now = self.clock.now()
        sent: list[tuple[int, str, datetime]] = []
        requeue: list[tuple[int, datetime, str | None]] = []
        refund: list[tuple[int, datetime, str | None]] = []
        failed: list[tuple[int, str | None, str | None]] = []
        unknown: list[tuple[int, str | None, str | None]] = []
        skipped: list[tuple[int, str | None, str | None]] = []
        pauses: dict[str, str] = {}
        gone: set[str] = set()
        linked: dict[str, datetime] = {}  # sender -> when its first accepted send started
        unlinked: dict[str, str] = {}  # sender -> the state a refused send shows
        refused_at: dict[str, datetime] = {}  # sender -> when its latest refused send started
        chats: list[tuple[str, str]] = []  # (sender, target) messaged
        signals: dict[str, Counter[str]] = {}  # sender -> health signals
        for job in jobs:
            row, outcome = job.row, job.outcome
            sender = row.sender or ""
            bucket, error, code = dl.classify(outcome, row.attempts, job.policy.retry, job.error)
            if outcome is None:
                (skipped if bucket is Bucket.SKIPPED else failed).append((row.id, error, code))
                continue
            if self.on_outcome is not None:
                self.on_outcome(observed(job, outcome.kind.value))
            if bucket is Bucket.SENT:
                assert outcome.message_id is not None
                # sent_at: the gateway's acceptance of this send, not this batch's recording
                sent.append((row.id, outcome.message_id, job.answered_at or now))
                self._streaks[sender] = 0
                started = row.attempted_at or now
                linked[sender] = min(linked.get(sender, started), started)
                chats.append((sender, row.target))
            elif bucket is Bucket.REQUEUE:
                delay = job.policy.retry.delay(row.attempts, self.rng, outcome.retry_after)
                requeue.append((row.id, now + timedelta(seconds=delay), error))
            elif bucket is Bucket.REFUND:
                reason = dl.instance_pause_reason(outcome.problem)
                pauses.setdefault(sender, reason)
                if outcome.problem is InstanceProblem.INVALID_INSTANCE:
                    gone.add(sender)
                if outcome.problem in dl.UNLINKED_BY_PROBLEM:
                    unlinked[sender] = dl.UNLINKED_BY_PROBLEM[outcome.problem]
                    started = row.attempted_at or now
                    refused_at[sender] = max(refused_at.get(sender, started), started)
                if outcome.problem is not InstanceProblem.QUOTA_EXHAUSTED or (
                    job.policy.retry.horizon_seconds <= 0
                ):
                    refund.append((row.id, now, error))
                elif self._within_horizon(job, now, reason, requeue) is None:
                    failed.append((row.id, gave_up(reason, row.attempts, job.policy.retry), code))
                log.warning(
                    "sender %s cannot send (%s): %s; its rows wait",
                    sender,
                    reason,
                    outcome.reason,
                )
            elif bucket is Bucket.FAILED:
                if outcome.kind is OutcomeKind.RETRYABLE:
                    if self._within_horizon(job, now, outcome.reason, requeue) is not None:
                        continue
                    if job.policy.retry.horizon_seconds > 0:
                        error = gave_up(outcome.reason, row.attempts, job.policy.retry)
                failed.append((row.id, error, code))
                if outcome.kind is OutcomeKind.PERMANENT:
                    signals.setdefault(sender, Counter())["failed"] += 1
                    self._streaks[sender] = self._streaks.get(sender, 0) + 1
                    if self.failure_burst and self._streaks[sender] >= self.failure_burst:
                        pauses.setdefault(sender, dl.burst_pause_reason(self._streaks[sender]))
                        self._streaks[sender] = 0
            else:
                unknown.append((row.id, error, code))
        with self.engine.begin() as conn:
            # the chats first, as a webhook batch writes its own (gateway_events._known_chats):
            # a wait on a chat then never holds a delivery or sender row (no deadlock)
            sc.remember_sent(conn, chats, now=now)
            dq.record_sent(conn, sent, move=dl.SEND_ACCEPTED)
            dq.record_requeued(conn, requeue, move=dl.SEND_REQUEUED)
            dq.record_requeued(conn, refund, move=dl.SEND_REQUEUED, refund_attempt=True)
            dq.record_terminal(conn, failed, move=dl.SEND_FAILED, now=now)
            dq.record_terminal(conn, unknown, move=dl.SEND_UNKNOWN, now=now)
            dq.record_terminal(conn, skipped, move=dl.SEND_SKIPPED, now=now)
            for sender, state in sorted(unlinked.items()):
                # no health signal here: gateways refuse a dropped connection's sends as
                # "relogin required" too; the reconnect tells a drop from a logout and the
                # reconnector counts a logout it proves (decision 48)
                before = iq.mark_unlinked_by_send(
                    conn,
                    sender,
                    state,
                    started=refused_at[sender],
                    now=now,
                    kept=dl.KEPT_BY_REFUSAL,
                )
                if before is None:  # its state was recorded after the send: older news
                    if pauses.get(sender, "").startswith(dl.CONNECTION_PAUSE_REASONS):
                        del pauses[sender]
                elif state == "logged_out" and before not in (iq.CONNECTED, *dl.KEPT_BY_REFUSAL):
                    # never linked as far as we know (decision 37): no drop to heal
                    pauses[sender] = dl.LOGGED_OUT_PAUSE
            for sender, reason in pauses.items():
                if iq.pause(conn, sender, reason, now=now):
                    self.note_pause(sender, reason)
            for sender in gone:  # the gateway no longer knows this id
                iq.mark_state(conn, sender, iq.GONE, now=now)
            proofs = [(s, at) for s, at in sorted(linked.items()) if s not in pauses]
            newly = iq.mark_linked_by_send(
                conn, proofs, now=now, clears=dl.CONNECTION_PAUSE_REASONS
            )
            for sender, counts in sorted(signals.items()):
                health.add_signals(conn, sender, counts, now, note_pause=self.note_pause)
            if sent:
                self.apply_pending(conn, [m for _, m, _ in sent], now)
        if newly and self.on_linked is not None:
            self.on_linked(newly)
        if failed or unknown:
            self.check_safety({j.row.campaign_id for j in jobs}, now)
        return Recorded(len(sent), len(requeue), len(failed), len(unknown), len(skipped))

    @staticmethod
    def _within_horizon(
        job: Job,
        now: datetime,
        reason: str | None,
        requeue: list[tuple[int, datetime, str | None]],
    ) -> datetime | None:
        """Re-queue ``job``'s row at its next try within the campaign's retry horizon
        (``scheduler.retry_horizon``); None when there is no horizon or it has passed."""
        at = next_try(job.policy.retry, job.row.queued_at, now)
        if at is not None:
            requeue.append((job.row.id, at, retry_note(reason, job.row.attempts, at)))
        return at


__all__ = [
    "ApplyPending",
    "Recorded",
    "Recorder",
    "SendObserved",
    "default_apply_pending",
    "observed",
]
