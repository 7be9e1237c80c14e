"""The delivery lifecycle's rules on their own: outcome to bucket, reply times, the order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from campaigns import delivery_lifecycle as dl
from campaigns.delivery_lifecycle import Bucket, Verdict
from gateway.outcomes import InstanceProblem, OutcomeKind, SendOutcome
from scheduler.retry import RetryPolicy

RETRY = RetryPolicy(max_attempts=3)
T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("outcome", "attempts", "expected"),
    [
        (SendOutcome(OutcomeKind.ACCEPTED, message_id="m1"), 1, Verdict(Bucket.SENT)),
        (
            SendOutcome(OutcomeKind.ACCEPTED, reason="no id"),
            1,
            Verdict(Bucket.UNKNOWN, "no id"),
        ),
        (SendOutcome(OutcomeKind.AMBIGUOUS), 1, Verdict(Bucket.UNKNOWN, "ambiguous send outcome")),
        (SendOutcome(OutcomeKind.RETRYABLE, reason="429"), 2, Verdict(Bucket.REQUEUE, "429")),
        (
            SendOutcome(OutcomeKind.RETRYABLE, reason="429", error_code="429"),
            3,
            Verdict(Bucket.FAILED, "gave up after 3 attempts: 429", "429"),
        ),
        (
            SendOutcome(
                OutcomeKind.INSTANCE, reason="log in", problem=InstanceProblem.RELOGIN_REQUIRED
            ),
            1,
            Verdict(Bucket.REFUND, "log in"),
        ),
        (
            SendOutcome(OutcomeKind.PERMANENT, error_code="404"),
            1,
            Verdict(Bucket.FAILED, "refused", "404"),
        ),
    ],
)
def test_classify_puts_each_outcome_in_its_bucket(
    outcome: SendOutcome, attempts: int, expected: Verdict
) -> None:
    assert dl.classify(outcome, attempts, RETRY) == expected


def test_rows_not_sent_are_skipped_when_opted_out_else_failed() -> None:
    assert dl.classify(None, 1, RETRY, dl.OPTED_OUT_ERROR) == (
        Bucket.SKIPPED,
        dl.OPTED_OUT_ERROR,
        None,
    )
    assert dl.classify(None, 1, RETRY, "unsendable content: x") == (
        Bucket.FAILED,
        "unsendable content: x",
        None,
    )


def test_reply_time_is_the_gateway_stamp_only_between_send_and_receipt() -> None:
    received = T0 + timedelta(minutes=1)
    assert dl.reply_time(T0, received, T0 - timedelta(seconds=5)) == T0
    assert dl.reply_time(T0, received, None) == T0  # in flight: no send time yet
    assert dl.reply_time(T0, received, T0 + timedelta(seconds=1)) == received  # before the send
    assert dl.reply_time(received + timedelta(seconds=1), received, None) == received  # ahead


def test_status_moves_only_forward() -> None:
    for status, sources in dl.FORWARD_FROM.items():
        assert all(dl.RANK[s] < dl.RANK[status] for s in sources), status
    ranks = [dl.RANK[s] for s in dl.FORWARD_FROM]
    assert ranks == sorted(ranks)  # storage applies them in this order
    assert dict(dl.STATUS_RULES.forward_from) == dl.FORWARD_FROM
    assert set(dl.STATUS_TO_STATE.values()) <= {*dl.FORWARD_FROM, dl.FAILED}
    assert set(dl.OPEN) | set(dl.ATTEMPTED) | {dl.SKIPPED} == set(dl.ALL)
