"""Delivery lifecycle: the one home of a delivery's rules (DESIGN.md decision 4).

    queued -> sending -> sent -> delivered -> read
                 |  \\-> unknown (ambiguous send, lease expired: never resent automatically)
                 |   \\-> queued (retry later, or the sender could not send)
                 +-> failed | skipped (opted out, unsendable)

Every change of a row's state is one of :data:`MOVES` (its name, the states a row may
leave by it, the state it takes); storage's statements receive their move. States only
move forward: a status event raises a row's rank (:data:`RANK`), a failure lands only on
a row that has not progressed past sent (:data:`FAILED_FROM`). Here live the
states' order, which gateway status moves a row where (:data:`STATUS_TO_STATE`), what a
send's outcome makes of a row (:func:`classify`), the time a status gives its state
(:data:`STATUS_TIMES`), when a status event settles an ``unknown`` row
(:func:`is_evidence`) and how long ``retry --unknown`` waits for one
(:data:`UNKNOWN_SETTLE_PERIOD`), when a reply belongs to a delivery (:data:`REPLY_CAMPAIGN_WINDOW`,
:data:`REPLY_CLOCK_SKEW`, :func:`reply_time`), and the pauses of senders (connection
problems, error 463, failure bursts). Storage runs the statements and receives these rules
as parameters; ``storage.states`` holds only the names of the states (the column's
vocabulary, re-exported here) and the shape of a move.
"""

from __future__ import annotations

import enum
from datetime import datetime, timedelta
from typing import NamedTuple, Protocol

from campaigns.cooldown import is_cooldown_error
from gateway.events import DeliveryStatus
from gateway.outcomes import InstanceProblem, OutcomeKind, SendOutcome
from storage.queries.events import StatusRules
from storage.states import (
    ALL,
    DELIVERED,
    FAILED,
    QUEUED,
    READ,
    SENDING,
    SENT,
    SKIPPED,
    UNKNOWN,
    Move,
)

#: Rank of each progress state; a status event only ever raises the rank.
RANK: dict[str, int] = {QUEUED: 0, SENDING: 1, UNKNOWN: 1, SENT: 2, DELIVERED: 3, READ: 4}

#: States a row never leaves on its own.
TERMINAL = frozenset({FAILED, SKIPPED, READ})

#: States of a row still to be sent or being sent: a campaign with none is finished.
OPEN = (QUEUED, SENDING)

#: States of a row whose send was attempted: the failure rate's denominator.
ATTEMPTED = (SENT, DELIVERED, READ, FAILED, UNKNOWN)

#: States a row may be in for each progress status to move it there (in rank order).
FORWARD_FROM: dict[str, tuple[str, ...]] = {
    SENT: (QUEUED, SENDING, UNKNOWN),
    DELIVERED: (QUEUED, SENDING, UNKNOWN, SENT),
    READ: (QUEUED, SENDING, UNKNOWN, SENT, DELIVERED),
}

#: A failure only lands on a row that has not progressed past sent.
FAILED_FROM = (SENDING, SENT, UNKNOWN)
#: The error of a row a failed status event fails ("... (code N)" with the gateway's code).
GATEWAY_FAILED_ERROR = "failed by the gateway"

#: The time a status gives its state: the gateway's stamp when plausible, else the
#: receipt time, never before the time of the state before it (``lower``: the first of
#: these states' times that is set) and never after a later state's time already
#: recorded (``upper``), so sent_at <= delivered_at <= read_at in any arrival order.
#: status -> (lower, upper)
STATUS_TIMES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    SENT: ((), ()),
    DELIVERED: ((SENT,), (READ,)),
    READ: ((DELIVERED, SENT), ()),
    FAILED: ((SENT,), ()),
}

#: The moves: every change of ``deliveries.state``, by name, with the states a row may
#: leave by it and the state it takes. Storage's statements receive their move (or, for
#: status events, :data:`STATUS_RULES` built from the same table); ``tests/campaigns/
#: test_delivery_moves.py`` checks that no statement sets a state otherwise.
#: The claim and the send's outcome (the lease: only a ``sending`` row is recorded)
CLAIM = Move("claim", (QUEUED,), SENDING)
SEND_ACCEPTED = Move("send_accepted", (SENDING,), SENT)
SEND_REQUEUED = Move("send_requeued", (SENDING,), QUEUED)  # retry later, or refunded
SEND_FAILED = Move("send_failed", (SENDING,), FAILED)
SEND_UNKNOWN = Move("send_unknown", (SENDING,), UNKNOWN)
SEND_SKIPPED = Move("send_skipped", (SENDING,), SKIPPED)  # opted out or cooled at send
LEASE_EXPIRED = Move("lease_expired", (SENDING,), UNKNOWN)  # the sender died mid-send
#: Status events (forward only; a failure only before delivered)
STATUS_SENT = Move("status_sent", FORWARD_FROM[SENT], SENT)
STATUS_DELIVERED = Move("status_delivered", FORWARD_FROM[DELIVERED], DELIVERED)
STATUS_READ = Move("status_read", FORWARD_FROM[READ], READ)
STATUS_FAILED = Move("status_failed", FAILED_FROM, FAILED)
#: Queued rows that will not be sent: a cancel, an interrupted start, the contact
#: cooldown at start, a message that no longer renders after an edit or an A/B pick,
#: an erased contact
SKIP_QUEUED = Move("skip_queued", (QUEUED,), SKIPPED)
ERASED = Move("erased", (QUEUED,), SKIPPED)
#: Retries over days: queued rows past their horizon
GIVE_UP = Move("give_up", (QUEUED,), FAILED)
#: The 463 timelock: claimed rows to cold contacts wait for its end; rows the gateway
#: refused under it (sent, then failed with 463) go back to the queue
PARKED = Move("parked", (SENDING,), QUEUED)
REFUSED_UNDER_LOCK = Move("refused_under_lock", (SENT, FAILED), QUEUED)
#: ``campaign retry`` (``--unknown``: ambiguous sends too)
RETRY = Move("retry", (FAILED,), QUEUED)
RETRY_UNKNOWN = Move("retry_unknown", (FAILED, UNKNOWN), QUEUED)

MOVES: dict[str, Move] = {
    m.name: m
    for m in (
        CLAIM,
        SEND_ACCEPTED,
        SEND_REQUEUED,
        SEND_FAILED,
        SEND_UNKNOWN,
        SEND_SKIPPED,
        LEASE_EXPIRED,
        STATUS_SENT,
        STATUS_DELIVERED,
        STATUS_READ,
        STATUS_FAILED,
        SKIP_QUEUED,
        ERASED,
        GIVE_UP,
        PARKED,
        REFUSED_UNDER_LOCK,
        RETRY,
        RETRY_UNKNOWN,
    )
}

#: A send's outcome bucket -> its move (a refund re-queues like a retry)
SEND_MOVES: dict[str, Move] = {
    FAILED: SEND_FAILED,
    UNKNOWN: SEND_UNKNOWN,
    SKIPPED: SEND_SKIPPED,
}

#: The rules above as storage applies them (hashable: its statements are cached by them).
STATUS_RULES = StatusRules(
    forward_from=tuple((m.to, m.from_states) for m in (STATUS_SENT, STATUS_DELIVERED, STATUS_READ)),
    failed_from=STATUS_FAILED.from_states,
    failed_error=GATEWAY_FAILED_ERROR,
    times=tuple(STATUS_TIMES.items()),
)

#: gateway statuses -> the delivery state they move a row to (pending moves nothing)
STATUS_TO_STATE: dict[DeliveryStatus, str] = {
    DeliveryStatus.SENT: SENT,
    DeliveryStatus.DELIVERED: DELIVERED,
    DeliveryStatus.READ: READ,
    DeliveryStatus.PLAYED: READ,
    DeliveryStatus.FAILED: FAILED,
}

#: The error of a row whose lease ran out while it was being sent (it becomes unknown).
LEASE_EXPIRED_ERROR = "lease expired while sending: the process stopped mid-send"

#: The error of a delivery skipped because its contact opted out.
OPTED_OUT_ERROR = "opted out"
#: a row skipped because the gateway's number check said its number is not on the app
#: (scheduler/number_checks.py); campaigns/failure_reasons.py words it "not on WhatsApp"
NOT_ON_APP_ERROR = "not on WhatsApp (the gateway's number check)"

#: Why a contact is opted out after replying with an opt-out keyword.
OPT_OUT_REASON = "replied with an opt-out keyword"

#: Paused reasons (prefixes) that a reconnect (a "connected" event), a new QR code shown
#: for the sender, or a send it got accepted clears.
CONNECTION_PAUSE_REASONS = ("relogin_required", "not_activated", "disconnected", "logged_out")

#: Why a sender is paused once it is logged out (``instance logout``, the dashboard's Log
#: out, or a ``logged_out`` connection event): nothing is sent through it until it is
#: linked again (a new QR code, then its first send or a connection event confirms it).
LOGGED_OUT_PAUSE = "logged_out: link it again with a new QR code"

#: Why a sender is paused when the gateway refuses the access token: one token serves
#: every sender, so the fix is the token setting, not this sender's link.
BAD_TOKEN_PAUSE = (
    "bad_token: the gateway refused the access token; it is the same for every sender: "  # noqa: S105  (words, not a secret)
    "correct the access token setting, then resume the senders"
)


def instance_pause_reason(problem: InstanceProblem | None) -> str:
    """Why a sender whose send met the instance ``problem`` is paused (the reason starts
    with the problem's name)."""
    if problem is InstanceProblem.BAD_TOKEN:
        return BAD_TOKEN_PAUSE
    return problem.value if problem else "instance problem"


#: The state a send refused for these problems shows the session is in (not linked).
UNLINKED_BY_PROBLEM = {
    InstanceProblem.RELOGIN_REQUIRED: "logged_out",
    InstanceProblem.NOT_ACTIVATED: "waiting_scan",
}
#: States such a refusal leaves alone: a dropped connection (gateways refuse its sends
#: as "relogin required" too, and the reconnect heals it) and gone.
KEPT_BY_REFUSAL = ("disconnected", "gone")

#: The gateway's error code for "this account may not reach new contacts for a while"
#: (an early ban sign): a failed status with it starts a timelock for cold contacts
#: (``scheduler/timelock.py``).
RESTRICTION_CODE = "463"

#: replies are matched against the deliveries of this many most recent campaigns
REPLY_CAMPAIGN_WINDOW = 50
#: how far a gateway's message time may trail our clock: its stamps are whole seconds
#: and its clock is not ours (a delivery sent later than reply time + this is not a match)
REPLY_CLOCK_SKEW = timedelta(minutes=5)


#: Evidence settles ambiguity: an ``unknown`` row (its send may or may not have left) is
#: settled by a status event of its sender for its recipient (the event's chat is the
#: row's target) on a message id no delivery carries, when the event's time (the
#: gateway's stamp, or when gatecast received it) lies between the start of the row's
#: last attempt less EVIDENCE_CLOCK_SKEW (the gateway stamps whole seconds of its own
#: clock) and that start plus EVIDENCE_WINDOW (the send's HTTP timeout and the gateway's
#: own 60 s backend timeout, with room). The row takes that message id and its events
#: move it (sent, delivered, read; or failed) like any other row's.
EVIDENCE_CLOCK_SKEW = timedelta(seconds=5)
EVIDENCE_WINDOW = timedelta(minutes=5)
#: how far back the routine passes look for unknown rows to settle (the start-up pass
#: looks at every one)
EVIDENCE_LOOKBACK = timedelta(days=2)
#: ``retry --unknown`` leaves alone a row whose attempt started less than this ago: its
#: evidence may still be on its way (``GATECAST_UNKNOWN_SETTLE_SECONDS``)
UNKNOWN_SETTLE_PERIOD = timedelta(minutes=10)


def is_evidence(attempted_at: datetime, occurred_at: datetime, received_at: datetime) -> bool:
    """True when a status event at ``occurred_at`` (received at ``received_at``) falls in
    the window of an attempt that started at ``attempted_at`` (:data:`EVIDENCE_WINDOW`)."""
    low, high = attempted_at - EVIDENCE_CLOCK_SKEW, attempted_at + EVIDENCE_WINDOW
    return low <= occurred_at <= high or low <= received_at <= high


def reply_time(at: datetime, received_at: datetime, sent_at: datetime | None) -> datetime:
    """A reply's ``replied_at``: the gateway's time ``at`` when it lies between the send
    and our receipt (``received_at``), else ``received_at`` (a truncated or skewed stamp
    says nothing better)."""
    plausible = at <= received_at and (sent_at is None or sent_at <= at)
    return at if plausible else received_at


def burst_pause_reason(failures: int) -> str:
    """Why a sender is paused after ``failures`` permanent failures in a row."""
    return f"burst of {failures} consecutive failures"


class Bucket(enum.Enum):
    """Where a send's outcome puts its row."""

    SENT = "sent"  # accepted, with a message id
    REQUEUE = "requeue"  # refused before sending: queued again after a backoff
    REFUND = "refund"  # the sender cannot send: queued again, the attempt given back
    FAILED = "failed"
    UNKNOWN = "unknown"  # may or may not have left: never resent automatically
    SKIPPED = "skipped"  # opted out, or in the contact cooldown, at send time


class Verdict(NamedTuple):
    """A row's bucket, with the error and gateway error code it records."""

    bucket: Bucket
    error: str | None = None
    error_code: str | None = None


class SupportsRetry(Protocol):
    """What :func:`classify` needs of a retry policy (``scheduler.retry.RetryPolicy``)."""

    def should_retry(self, attempts: int) -> bool:
        """True when a row that has made ``attempts`` attempts may try again."""
        ...


_SENT = Verdict(Bucket.SENT)
_SKIPPED = Verdict(Bucket.SKIPPED, OPTED_OUT_ERROR)


def classify(
    outcome: SendOutcome | None, attempts: int, retry: SupportsRetry, error: str | None = None
) -> Verdict:
    """What a send's ``outcome`` makes of its row, after ``attempts`` attempts.

    ``outcome`` None: the row was not sent, for ``error`` (opted out or in the contact
    cooldown: skipped; anything else, such as unsendable content: failed).
    """
    if outcome is None:
        if error == OPTED_OUT_ERROR:
            return _SKIPPED
        if is_cooldown_error(error) or error == NOT_ON_APP_ERROR:
            return Verdict(Bucket.SKIPPED, error)
        return Verdict(Bucket.FAILED, error)
    kind = outcome.kind
    if kind is OutcomeKind.ACCEPTED and outcome.message_id:
        return _SENT
    if kind is OutcomeKind.RETRYABLE:
        if retry.should_retry(attempts):
            return Verdict(Bucket.REQUEUE, outcome.reason)
        msg = f"gave up after {attempts} attempts: {outcome.reason}"
        return Verdict(Bucket.FAILED, msg, outcome.error_code)
    if kind is OutcomeKind.INSTANCE:
        return Verdict(Bucket.REFUND, outcome.reason)
    if kind is OutcomeKind.PERMANENT:
        return Verdict(Bucket.FAILED, outcome.reason or "refused", outcome.error_code)
    # AMBIGUOUS, or "accepted" without an id
    return Verdict(Bucket.UNKNOWN, outcome.reason or "ambiguous send outcome")


__all__ = [
    "ALL",
    "ATTEMPTED",
    "BAD_TOKEN_PAUSE",
    "CLAIM",
    "CONNECTION_PAUSE_REASONS",
    "DELIVERED",
    "ERASED",
    "EVIDENCE_CLOCK_SKEW",
    "EVIDENCE_LOOKBACK",
    "EVIDENCE_WINDOW",
    "FAILED",
    "FAILED_FROM",
    "FORWARD_FROM",
    "GATEWAY_FAILED_ERROR",
    "GIVE_UP",
    "KEPT_BY_REFUSAL",
    "LEASE_EXPIRED",
    "LEASE_EXPIRED_ERROR",
    "LOGGED_OUT_PAUSE",
    "MOVES",
    "NOT_ON_APP_ERROR",
    "OPEN",
    "OPTED_OUT_ERROR",
    "OPT_OUT_REASON",
    "PARKED",
    "QUEUED",
    "RANK",
    "READ",
    "REFUSED_UNDER_LOCK",
    "REPLY_CAMPAIGN_WINDOW",
    "REPLY_CLOCK_SKEW",
    "RESTRICTION_CODE",
    "RETRY",
    "RETRY_UNKNOWN",
    "SENDING",
    "SEND_ACCEPTED",
    "SEND_FAILED",
    "SEND_MOVES",
    "SEND_REQUEUED",
    "SEND_SKIPPED",
    "SEND_UNKNOWN",
    "SENT",
    "SKIPPED",
    "SKIP_QUEUED",
    "STATUS_DELIVERED",
    "STATUS_FAILED",
    "STATUS_READ",
    "STATUS_RULES",
    "STATUS_SENT",
    "STATUS_TIMES",
    "STATUS_TO_STATE",
    "TERMINAL",
    "UNKNOWN",
    "UNKNOWN_SETTLE_PERIOD",
    "UNLINKED_BY_PROBLEM",
    "Bucket",
    "Move",
    "SupportsRetry",
    "Verdict",
    "burst_pause_reason",
    "classify",
    "instance_pause_reason",
    "is_evidence",
    "reply_time",
]
