"""Evidence settles ambiguity: ``unknown`` rows settled by status events for their
recipient and sender within the attempt's window; ``retry --unknown`` leaves alone rows
still within the settle period."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import Engine, select, update

from campaigns import delivery_lifecycle as dl
from campaigns import gateway_events, lifecycle, service
from campaigns.delivery_rows import materialise
from gatecast.settings import DEFAULT_OPT_OUT_KEYWORDS
from gateway.events import DeliveryStatus, MessageStatus
from storage import tables
from tests.campaigns.campaign_fixtures import NOW, phone, spec
from tests.campaigns.test_gateway_events import _campaign as campaign_of

deliveries = tables.deliveries
status_events = tables.status_events


def _campaign(engine: Engine, n: int, *, unknown: int, attempted: Any = NOW) -> int:
    """``n`` rows of sender A; the first ``unknown`` are ``unknown``, attempted at ``attempted``."""
    cid = campaign_of(engine, n, sent=0)
    with engine.begin() as conn:
        conn.execute(
            update(deliveries)
            .where(deliveries.c.target.in_([phone(i) for i in range(unknown)]))
            .values(state="unknown", attempts=1, attempted_at=attempted, error="timeout")
        )
    return cid


def _second_campaign(engine: Engine, state: str) -> int:
    """Another campaign to the same people through A; its row to ``phone(0)`` attempted
    at NOW and left in ``state``."""
    cid = service.create_campaign(engine, spec(name="again"), now=NOW).id
    with engine.begin() as conn:
        lifecycle.transition(conn, cid, lifecycle.RUNNING, now=NOW)
        materialise(conn, cid, now=NOW, instances=["A"])
        conn.execute(
            update(deliveries)
            .where(deliveries.c.campaign_id == cid, deliveries.c.target == phone(0))
            .values(state=state, attempts=1, attempted_at=NOW)
        )
    return cid


def _status(
    mid: str, status: DeliveryStatus, i: int, at: Any, *, instance: str = "A"
) -> MessageStatus:
    return MessageStatus(instance, mid, status, chat=f"{phone(i)[1:]}@s.whatsapp.net", at=at)


def _record(engine: Engine, events: list[Any], now: Any) -> None:
    gateway_events.record_events(engine, events, opt_out_keywords=DEFAULT_OPT_OUT_KEYWORDS, now=now)


def _row(engine: Engine, i: int) -> Any:
    with engine.connect() as conn:
        return conn.execute(select(deliveries).where(deliveries.c.target == phone(i))).one()


def test_chat_target() -> None:
    assert gateway_events.chat_target("14150000001@s.whatsapp.net") == "+14150000001"
    assert gateway_events.chat_target("14150000001:12@c.us") == "+14150000001"
    assert gateway_events.chat_target("12036300@g.us") == "12036300@g.us"
    assert gateway_events.chat_target("998877@lid") == "998877@lid"
    assert gateway_events.chat_target(None) is None


def test_status_events_keep_their_chat(engine: Engine) -> None:
    _campaign(engine, 1, unknown=0)
    _record(engine, [_status("x1", DeliveryStatus.SENT, 0, NOW)], NOW)
    with engine.connect() as conn:
        assert conn.execute(select(status_events.c.chat)).scalar_one() == phone(0)


def test_is_evidence_window() -> None:
    start = NOW
    assert dl.is_evidence(start, start + timedelta(seconds=3), start + timedelta(seconds=3))
    assert dl.is_evidence(start, start - timedelta(seconds=4), start + timedelta(seconds=1))
    late = start + dl.EVIDENCE_WINDOW + timedelta(seconds=1)
    assert not dl.is_evidence(start, late, late)
    early = start - dl.EVIDENCE_CLOCK_SKEW - timedelta(seconds=1)
    assert not dl.is_evidence(start, early, early)
    # the gateway's stamp is off but gatecast received it in the window
    assert dl.is_evidence(start, early, start + timedelta(seconds=2))


def test_unknown_row_settled_by_evidence_when_events_arrive(engine: Engine) -> None:
    _campaign(engine, 3, unknown=3)
    t = NOW + timedelta(seconds=2)
    _record(
        engine,
        [
            _status("e0", DeliveryStatus.SENT, 0, t),
            _status("e0", DeliveryStatus.READ, 0, t + timedelta(minutes=30)),  # later statuses
            _status("e1", DeliveryStatus.DELIVERED, 1, NOW + timedelta(hours=1)),  # too late
            _status("e2", DeliveryStatus.SENT, 2, t, instance="OTHER"),  # another sender
        ],
        NOW + timedelta(hours=1),
    )
    r0 = _row(engine, 0)
    assert (r0.state, r0.message_id, r0.error) == ("read", "e0", None)
    assert r0.sent_at is not None and r0.read_at is not None
    assert (_row(engine, 1).state, _row(engine, 1).message_id) == ("unknown", None)
    assert (_row(engine, 2).state, _row(engine, 2).message_id) == ("unknown", None)


def test_one_message_id_settles_one_row_and_a_known_id_none(engine: Engine) -> None:
    cid = _campaign(engine, 2, unknown=1)
    with engine.begin() as conn:  # row 1 already carries the message id "known"
        conn.execute(
            update(deliveries)
            .where(deliveries.c.target == phone(1))
            .values(state="sent", message_id="known", sent_at=NOW)
        )
    t = NOW + timedelta(seconds=1)
    _record(engine, [_status("known", DeliveryStatus.SENT, 0, t)], t)
    assert _row(engine, 0).state == "unknown"  # the event belongs to another delivery
    # a second campaign to the same recipient through the same sender: one id, one row
    cid2 = _second_campaign(engine, "unknown")
    _record(engine, [_status("fresh", DeliveryStatus.SENT, 0, t)], t)
    with engine.connect() as conn:
        rows = conn.execute(
            select(deliveries.c.campaign_id, deliveries.c.state).where(
                deliveries.c.target == phone(0)
            )
        ).all()
    assert sorted(s for _, s in rows) == ["sent", "unknown"]
    assert cid != cid2


def test_sweep_settles_evidence_stored_before_the_row_became_unknown(engine: Engine) -> None:
    _campaign(engine, 1, unknown=0)
    t = NOW + timedelta(seconds=1)
    _record(engine, [_status("early", DeliveryStatus.DELIVERED, 0, t)], t)
    with engine.begin() as conn:  # the lease expired afterwards: unknown, evidence stored
        conn.execute(update(deliveries).values(state="unknown", attempts=1, attempted_at=NOW))
    assert gateway_events.apply_all_pending(engine, now=NOW + timedelta(minutes=1)) == 1
    assert (_row(engine, 0).state, _row(engine, 0).message_id) == ("delivered", "early")


def test_retry_unknown_leaves_rows_with_evidence_or_in_the_settle_period(engine: Engine) -> None:
    cid = _campaign(engine, 4, unknown=3)
    with engine.begin() as conn:  # row 2 was attempted recently: its evidence may still come
        conn.execute(
            update(deliveries)
            .where(deliveries.c.target == phone(2))
            .values(attempted_at=NOW + timedelta(minutes=55))
        )
        conn.execute(  # row 3 failed: retried as always
            update(deliveries)
            .where(deliveries.c.target == phone(3))
            .values(state="failed", attempts=1, error="refused")
        )
        # evidence for row 0 stored but not applied yet (the retry settles it first)
        conn.execute(
            status_events.insert().values(
                message_id="ev0",
                instance_id="A",
                chat=phone(0),
                status="read",
                occurred_at=NOW + timedelta(seconds=2),
                received_at=NOW + timedelta(seconds=2),
                applied=False,
            )
        )
    later = NOW + timedelta(hours=1)
    result = service.retry_campaign(engine, cid, include_unknown=True, now=later)
    assert result.requeued == 2  # row 1 (no evidence, settle period over) and row 3
    assert result.settled == 1
    assert result.waiting == 1
    assert result.waiting_until == NOW + timedelta(minutes=55) + dl.UNKNOWN_SETTLE_PERIOD
    assert (_row(engine, 0).state, _row(engine, 0).message_id) == ("read", "ev0")
    assert _row(engine, 1).state == "queued"
    assert _row(engine, 2).state == "unknown"
    assert _row(engine, 3).state == "queued"
    assert "left alone" in result.describe()


def test_no_settling_while_another_send_to_the_recipient_is_in_flight(engine: Engine) -> None:
    _campaign(engine, 1, unknown=1)
    cid2 = _second_campaign(engine, "sending")  # its send to the recipient is in flight
    t = NOW + timedelta(seconds=1)
    _record(engine, [_status("theirs", DeliveryStatus.SENT, 0, t)], t)
    with engine.connect() as conn:
        mine = conn.execute(
            select(deliveries.c.state).where(
                deliveries.c.campaign_id != cid2, deliveries.c.target == phone(0)
            )
        ).scalar_one()
    assert mine == "unknown"  # the event may be the in-flight send's: decided later
