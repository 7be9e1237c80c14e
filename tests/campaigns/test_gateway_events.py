"""Webhook event application: dedupe, forward-only, late matching, replies, opt-outs."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine, insert, select, update

from campaigns import delivery_lifecycle, gateway_events, lifecycle, service
from campaigns.delivery_rows import materialise
from gatecast.settings import DEFAULT_OPT_OUT_KEYWORDS
from gateway.events import (
    ConnectionStatus,
    DeliveryStatus,
    Event,
    IncomingMessage,
    MessageStatus,
    Presence,
)
from storage import tables
from tests.campaigns.campaign_fixtures import NOW, make_list, people, phone, spec

deliveries = tables.deliveries
status_events = tables.status_events
inbound = tables.inbound_messages
contacts = tables.contacts
instances = tables.instances

T1 = NOW + timedelta(minutes=1)
T2 = NOW + timedelta(minutes=2)
T3 = NOW + timedelta(minutes=3)


def _campaign(engine: Engine, n: int, *, sent: int) -> int:
    """A running campaign of ``n`` rows; the first ``sent`` are sent with ids m0, m1, ..."""
    make_list(engine, "customers", people(n))
    cid = service.create_campaign(engine, spec(), now=NOW).id
    with engine.begin() as conn:
        lifecycle.transition(conn, cid, lifecycle.RUNNING, now=NOW)
        materialise(conn, cid, now=NOW, instances=["A"])
        for i in range(sent):
            conn.execute(
                update(deliveries)
                .where(deliveries.c.target == phone(i))
                .values(state="sent", message_id=f"m{i}", sent_at=NOW, attempts=1)
            )
    return cid


def _row(engine: Engine, i: int) -> Any:
    with engine.connect() as conn:
        return conn.execute(select(deliveries).where(deliveries.c.target == phone(i))).one()


def _record(engine: Engine, events: list[Event]) -> gateway_events.ApplyStats:
    return gateway_events.record_events(
        engine, events, opt_out_keywords=DEFAULT_OPT_OUT_KEYWORDS, now=T3
    )


def st(i: int, status: DeliveryStatus, at: Any = None, code: str | None = None) -> MessageStatus:
    return MessageStatus("A", f"m{i}", status, error_code=code, at=at)


def test_forward_only_any_order_and_duplicates(engine: Engine) -> None:
    _campaign(engine, 3, sent=3)
    stats = _record(
        engine,
        [
            st(0, DeliveryStatus.READ, T2),
            st(0, DeliveryStatus.DELIVERED, T1),
            st(0, DeliveryStatus.DELIVERED, T1),
            st(1, DeliveryStatus.DELIVERED, T1),
            st(2, DeliveryStatus.PENDING),
        ],
    )
    assert stats.applied == 3 and stats.ignored == 1
    r0 = _row(engine, 0)
    assert (r0.state, r0.delivered_at, r0.read_at) == ("read", T1, T2)
    # a late "sent" and a failure after delivery change nothing
    _record(engine, [st(1, DeliveryStatus.SENT, T1), st(1, DeliveryStatus.FAILED, T2, "463")])
    assert _row(engine, 1).state == "delivered"
    # duplicates are stored once
    _record(engine, [st(0, DeliveryStatus.READ, T2)] * 3)
    with engine.connect() as conn:
        n = conn.execute(select(status_events.c.id).where(status_events.c.message_id == "m0")).all()
    assert len(n) == 2


def test_read_without_delivered_sets_both_and_played_is_read(engine: Engine) -> None:
    _campaign(engine, 2, sent=2)
    _record(engine, [st(0, DeliveryStatus.PLAYED, T2), st(1, DeliveryStatus.READ, T2)])
    for i in (0, 1):
        r = _row(engine, i)
        assert (r.state, r.delivered_at, r.read_at) == ("read", T2, T2)
    # a delivered event arriving later corrects delivered_at to the earlier time
    _record(engine, [st(1, DeliveryStatus.DELIVERED, T1)])
    assert _row(engine, 1).delivered_at == T1


def test_failed_from_sent_with_code(engine: Engine) -> None:
    _campaign(engine, 1, sent=1)
    _record(engine, [st(0, DeliveryStatus.FAILED, T1, "463")])
    r = _row(engine, 0)
    assert (r.state, r.error_code, r.failed_at) == ("failed", "463", T1)
    assert "463" in r.error
    # failed is terminal: a later delivered does not resurrect it
    _record(engine, [st(0, DeliveryStatus.DELIVERED, T2)])
    assert _row(engine, 0).state == "failed"


def test_unknown_rows_reconciled(engine: Engine) -> None:
    _campaign(engine, 1, sent=0)
    with engine.begin() as conn:
        conn.execute(update(deliveries).values(state="unknown", message_id="m0", sent_at=None))
    _record(engine, [st(0, DeliveryStatus.DELIVERED, T1)])
    r = _row(engine, 0)
    assert (r.state, r.sent_at, r.delivered_at) == ("delivered", T1, T1)


def test_events_before_the_send_is_recorded_apply_later(engine: Engine) -> None:
    _campaign(engine, 1, sent=0)
    stats = _record(engine, [st(0, DeliveryStatus.DELIVERED, T1)])
    assert stats.applied == 0
    with engine.connect() as conn:
        assert conn.execute(select(status_events.c.applied)).scalar_one() is False
    # the dispatcher records the id, then applies what is pending, in one transaction
    with engine.begin() as conn:
        conn.execute(update(deliveries).values(state="sent", message_id="m0", sent_at=NOW))
        assert gateway_events.apply_pending(conn, ["m0"], now=T3) == 1
    assert _row(engine, 0).state == "delivered"
    with engine.connect() as conn:
        assert conn.execute(select(status_events.c.applied)).scalar_one() is True


def test_random_orders_and_duplicates_converge(engine: Engine) -> None:
    _campaign(engine, 20, sent=20)
    rng = random.Random(5)
    final: dict[int, str] = {}
    events: list[Event] = []
    for i in range(20):
        path = rng.choice(
            [["sent"], ["sent", "delivered"], ["sent", "delivered", "read"], ["sent", "failed"]]
        )
        final[i] = path[-1]
        for k, status in enumerate(path):
            events += [st(i, DeliveryStatus(status), NOW + timedelta(seconds=k + 1))] * rng.randint(
                1, 3
            )
    rng.shuffle(events)
    for start in range(0, len(events), 7):
        _record(engine, events[start : start + 7])
    for i in range(20):
        row = _row(engine, i)
        assert row.state == final[i], i
        # whatever the order, each time is its own event's (an earlier one corrects a later)
        if final[i] in ("delivered", "read"):
            assert row.delivered_at == NOW + timedelta(seconds=2), i
        if final[i] == "read":
            assert row.read_at == NOW + timedelta(seconds=3), i


def test_replies_and_opt_out(engine: Engine) -> None:
    _campaign(engine, 3, sent=2)
    digits = phone(0)[1:]
    stats = _record(
        engine,
        [
            IncomingMessage("A", "in1", f"{digits}@s.whatsapp.net", "Thanks!", digits, at=T1),
            IncomingMessage("A", "in1", f"{digits}@s.whatsapp.net", "Thanks!", digits, at=T1),
            IncomingMessage("A", "in2", f"{phone(1)[1:]}@c.us", "  arrêt ", phone(1)[1:], at=T2),
            IncomingMessage("A", "in3", "x@lid", "STOP", None, at=T2),
            IncomingMessage("A", "in4", "1@g.us", "stop", None, is_group=True, at=T2),
        ],
    )
    assert stats.inbound == 4 and stats.duplicates_inbound == 1
    assert stats.replies == 2 and stats.opt_outs == 1
    r0 = _row(engine, 0)
    assert (r0.replied_at, r0.reply_text) == (T1, "Thanks!")
    assert _row(engine, 1).reply_text == "  arrêt "
    with engine.connect() as conn:
        opted: dict[str, bool] = dict(
            conn.execute(select(contacts.c.phone, contacts.c.opted_out)).all()
        )
        stored = conn.execute(select(inbound.c.message_id, inbound.c.is_opt_out)).all()
    assert opted[phone(1)] is True and opted[phone(0)] is False
    assert dict(stored) == {"in1": False, "in2": True, "in3": False, "in4": False}
    # the same reply again changes nothing
    again = _record(
        engine, [IncomingMessage("A", "in1", f"{digits}@s.whatsapp.net", "Thanks!", digits)]
    )
    assert again.inbound == 0 and again.duplicates_inbound == 1


def test_reply_matching_allows_for_the_gateway_clock(engine: Engine) -> None:
    _campaign(engine, 3, sent=0)
    sent_at = NOW + timedelta(microseconds=400_000)  # our clock, after the gateway's stamp
    late = NOW + timedelta(minutes=10)  # sent long after the reply was written
    with engine.begin() as conn:
        for i, values in enumerate(
            [
                {"state": "sent", "message_id": "m0", "sent_at": sent_at},
                {"state": "sending", "attempts": 1},  # in flight: the dispatcher is recording
                {"state": "sent", "message_id": "m2", "sent_at": late},
            ]
        ):
            conn.execute(update(deliveries).where(deliveries.c.target == phone(i)).values(values))

    def reply(i: int) -> IncomingMessage:
        digits = phone(i)[1:]
        return IncomingMessage("A", f"in{i}", f"{digits}@c.us", f"hi {i}", digits, at=NOW)

    stats = _record(engine, [reply(0), reply(1), reply(2)])
    assert stats.replies == 2
    r0, r1, r2 = (_row(engine, i) for i in range(3))
    assert (r0.reply_text, r0.replied_at) == ("hi 0", T3)  # stamp before the send: receipt
    assert (r1.reply_text, r1.replied_at) == ("hi 1", NOW)
    assert (r2.reply_text, r2.replied_at) == (None, None)
    assert late - NOW > delivery_lifecycle.REPLY_CLOCK_SKEW


def test_opt_out_matching() -> None:
    kw = DEFAULT_OPT_OUT_KEYWORDS
    assert gateway_events.is_opt_out(" Stop ", kw)
    assert gateway_events.is_opt_out("ARRÊT", kw) and gateway_events.is_opt_out("arret", kw)
    assert gateway_events.is_opt_out("opt   out", kw)
    assert not gateway_events.is_opt_out("please stop", kw)
    assert not gateway_events.is_opt_out("", kw)


def test_connection_status_clears_connection_pause(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(
            insert(instances),
            [
                {
                    "instance_id": "A",
                    "label": "",
                    "state": "disconnected",
                    "paused_reason": "relogin_required: relogin",
                    "created_at": NOW,
                    "updated_at": NOW,
                    "webhook_url_registered": False,
                },
                {
                    "instance_id": "B",
                    "label": "",
                    "state": "connected",
                    "paused_reason": "restricted: error 463",
                    "created_at": NOW,
                    "updated_at": NOW,
                    "webhook_url_registered": False,
                },
            ],
        )
    stats = _record(
        engine,
        [
            ConnectionStatus("A", "connected", phone="14155550000"),
            ConnectionStatus("B", "connected"),
            ConnectionStatus("Z", "connected"),
            Presence("A", "x@s.whatsapp.net", "available"),
        ],
    )
    assert stats.connection_updates == 2 and stats.ignored == 1
    with engine.connect() as conn:
        rows = {r.instance_id: r for r in conn.execute(select(instances)).all()}
    assert rows["A"].state == "connected" and rows["A"].paused_reason is None
    assert rows["A"].phone == "14155550000"
    assert rows["B"].paused_reason == "restricted: error 463"


def test_race_between_webhook_and_dispatcher_is_closed(pg_url: str) -> None:
    """On PostgreSQL both transactions can commit without seeing each other's rows."""
    from storage.engine import make_engine, upgrade

    engine = make_engine(pg_url)
    upgrade(engine)
    try:
        _campaign(engine, 1, sent=0)
        webhook_conn = engine.connect()
        dispatcher_conn = engine.connect()
        with webhook_conn.begin():
            gateway_events._record_statuses(
                webhook_conn, [st(0, DeliveryStatus.DELIVERED, T1)], T3, gateway_events.ApplyStats()
            )
            with dispatcher_conn.begin():
                dispatcher_conn.execute(
                    update(deliveries).values(state="sent", message_id="m0", sent_at=NOW)
                )
                assert gateway_events.apply_pending(dispatcher_conn, ["m0"], now=T3) == 0
        webhook_conn.close()
        dispatcher_conn.close()
        assert _row(engine, 0).state == "sent"  # the event was lost between the two
        assert gateway_events.apply_recent_pending(engine, now=T3) == 1
        assert _row(engine, 0).state == "delivered"
        # old unmatched events are left alone
        assert gateway_events.apply_recent_pending(engine, now=T3 + timedelta(hours=1)) == 0
    finally:
        engine.dispose()


def test_apply_recent_pending_window(engine: Engine) -> None:
    _campaign(engine, 1, sent=0)
    _record(engine, [st(0, DeliveryStatus.READ, T1)])
    with engine.begin() as conn:
        conn.execute(update(deliveries).values(state="sent", message_id="m0", sent_at=NOW))
    assert gateway_events.apply_recent_pending(engine, now=T3 + timedelta(hours=1)) == 0
    assert gateway_events.apply_recent_pending(engine, now=T3) == 1
    assert _row(engine, 0).state == "read"


def _at(seconds: float) -> Any:
    return NOW + timedelta(seconds=seconds)


def _sent_at(engine: Engine, i: int, seconds: float) -> None:
    with engine.begin() as conn:
        conn.execute(
            update(deliveries).where(deliveries.c.target == phone(i)).values(sent_at=_at(seconds))
        )


def _times(engine: Engine, i: int) -> tuple[Any, Any, Any]:
    r = _row(engine, i)
    return r.sent_at, r.delivered_at, r.read_at


def test_event_time_takes_the_receipt_within_a_whole_second_stamp() -> None:
    got = _at(3.4)
    assert gateway_events.event_time(None, got) == got  # no stamp: the receipt
    assert gateway_events.event_time(_at(3), got) == got  # "during second 3", received in it
    assert gateway_events.event_time(_at(1), got) == _at(1)  # received later: the stamp
    assert gateway_events.event_time(_at(3.25), got) == _at(3.25)  # a fine stamp is kept
    assert gateway_events.event_time(_at(5), got) == _at(5)  # ahead of our clock: left to SQL


def test_truncated_or_skewed_stamps_never_precede_the_send(engine: Engine) -> None:
    """A whole-second stamp before the send, or one after the receipt: the receipt time."""
    _campaign(engine, 3, sent=3)
    for i in range(3):
        _sent_at(engine, i, 0.7)
    events: list[Event] = [st(0, DeliveryStatus.DELIVERED, _at(0))]  # truncated, before send
    gateway_events.record_events(engine, events, opt_out_keywords=(), now=_at(1.2))
    gateway_events.record_events(
        engine, [st(0, DeliveryStatus.READ, _at(1))], opt_out_keywords=(), now=_at(1.5)
    )
    assert _times(engine, 0) == (_at(0.7), _at(1.2), _at(1.5))
    # a gateway clock ahead of ours: its stamp is after the receipt
    gateway_events.record_events(
        engine, [st(1, DeliveryStatus.DELIVERED, _at(9.5))], opt_out_keywords=(), now=_at(1.1)
    )
    assert _times(engine, 1) == (_at(0.7), _at(1.1), None)
    # a failure stamped before the send fails at the receipt, never before its send
    gateway_events.record_events(
        engine, [st(2, DeliveryStatus.FAILED, _at(0), "404")], opt_out_keywords=(), now=_at(4)
    )
    assert _row(engine, 2).failed_at == _at(4)


def test_read_before_delivered_keeps_sent_delivered_read_in_order(engine: Engine) -> None:
    """Through the inbox (stored, applied later): a read first sets both times; a
    delivered after it lands between the send and the read, or stays at the read."""
    _campaign(engine, 3, sent=3)
    for i in range(3):
        _sent_at(engine, i, 0.7)

    def inbox(events: list[Event], now: Any) -> None:
        with engine.begin() as conn:
            stats = gateway_events.store_events_in(conn, events, opt_out_keywords=(), now=now)
            gateway_events.apply_pending(conn, stats.pending, now=now)

    inbox([st(i, DeliveryStatus.READ, _at(2.5)) for i in range(3)], _at(2.6))
    for i in range(3):
        assert _times(engine, i) == (_at(0.7), _at(2.5), _at(2.5))
    inbox(
        [
            st(0, DeliveryStatus.DELIVERED, _at(1.25)),  # plausible: corrects to earlier
            st(1, DeliveryStatus.DELIVERED, _at(3.1)),  # after the read: kept at the read
            st(2, DeliveryStatus.DELIVERED, _at(0.2)),  # before the send: receipt, > read
        ],
        _at(3.3),
    )
    assert _times(engine, 0) == (_at(0.7), _at(1.25), _at(2.5))
    assert _times(engine, 1) == (_at(0.7), _at(2.5), _at(2.5))
    assert _times(engine, 2) == (_at(0.7), _at(2.5), _at(2.5))


def test_status_times_never_go_backwards_in_any_order(engine: Engine) -> None:
    """Random stamps (some before the send, some after the receipt), orders, duplicates and
    batches: always sent_at <= delivered_at <= read_at."""
    _campaign(engine, 30, sent=30)
    rng = random.Random(18)
    batches: list[tuple[Any, list[Event]]] = []
    for i in range(30):
        _sent_at(engine, i, rng.uniform(0, 2))
        for status in rng.sample([DeliveryStatus.DELIVERED, DeliveryStatus.READ], 2):
            stamp = _at(rng.choice([0, 1, 2, 3]) + rng.choice([0, 0.5]))
            batches.append((_at(rng.uniform(1, 4)), [st(i, status, stamp)] * rng.randint(1, 2)))
    rng.shuffle(batches)
    for now, events in batches:
        gateway_events.record_events(engine, events, opt_out_keywords=(), now=now)
    for i in range(30):
        sent, delivered, read = _times(engine, i)
        assert sent <= delivered <= read, (i, sent, delivered, read)


def _second_campaign(engine: Engine, *, sent_at: Any) -> int:
    """Another campaign to the same people (after :func:`_campaign`), every row sent at
    ``sent_at`` with ids n0, n1, ...; its message has two quick-reply buttons."""
    message = {
        "type": "interactive",
        "text": "Coming?",
        "buttons": [
            {"kind": "quick_reply", "display_text": "Yes", "id": "yes"},
            {"kind": "quick_reply", "display_text": "No", "id": "no"},
        ],
    }
    cid = service.create_campaign(engine, spec(name="second", message=message), now=NOW).id
    with engine.begin() as conn:
        lifecycle.transition(conn, cid, lifecycle.RUNNING, now=NOW)
        materialise(conn, cid, now=NOW, instances=["A"])
        targets = conn.execute(
            select(deliveries.c.id, deliveries.c.target).where(deliveries.c.campaign_id == cid)
        ).all()
        for did, target in targets:
            i = int(target[-7:])
            conn.execute(
                update(deliveries)
                .where(deliveries.c.id == did)
                .values(state="sent", message_id=f"n{i}", sent_at=sent_at, attempts=1)
            )
    return cid


def _row_of(engine: Engine, campaign_id: int, i: int) -> Any:
    with engine.connect() as conn:
        return conn.execute(
            select(deliveries).where(
                deliveries.c.campaign_id == campaign_id, deliveries.c.target == phone(i)
            )
        ).one()


def test_a_quoted_reply_goes_to_the_delivery_it_quotes(engine: Engine) -> None:
    first = _campaign(engine, 3, sent=3)  # m0, m1, m2 at NOW
    second = _second_campaign(engine, sent_at=T1)  # n0, n1, n2 at T1: newer

    def incoming(i: int, mid: str, text: str, **extra: Any) -> IncomingMessage:
        digits = phone(i)[1:]
        return IncomingMessage("A", mid, f"{digits}@s.whatsapp.net", text, digits, at=T2, **extra)

    statements: list[str] = []

    def note(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    from sqlalchemy import event

    event.listen(engine, "before_cursor_execute", note)
    try:
        stats = _record(
            engine,
            [
                # quotes the first campaign's message, though the second's is newer
                incoming(0, "in0", "About the first one", quoted_id="m0"),
                # taps a button of the second campaign's message, quoting it
                incoming(1, "in1", "Yes", button_id="yes", quoted_id="n1"),
                # quotes someone else's message: the reply window decides (the newest)
                incoming(2, "in2", "Hm", quoted_id="m0"),
            ],
        )
    finally:
        event.remove(engine, "before_cursor_execute", note)
    assert stats.replies == 3
    assert _row_of(engine, first, 0).reply_text == "About the first one"
    assert _row_of(engine, second, 0).reply_text is None
    tapped = _row_of(engine, second, 1)
    assert (tapped.reply_text, tapped.tapped_button_id, tapped.tapped_title) == (
        "Yes",
        "yes",
        "Yes",
    )
    assert tapped.tapped_row_id is None
    assert _row_of(engine, first, 1).reply_text is None
    assert _row_of(engine, second, 2).reply_text == "Hm"
    assert _row_of(engine, first, 2).reply_text is None
    with engine.connect() as conn:
        stored = {
            r.message_id: r
            for r in conn.execute(
                select(
                    inbound.c.message_id,
                    inbound.c.delivery_id,
                    inbound.c.button_id,
                    inbound.c.quoted_id,
                )
            )
        }
    assert stored["in0"].delivery_id == _row_of(engine, first, 0).id
    assert (stored["in1"].button_id, stored["in1"].quoted_id) == ("yes", "n1")
    assert stored["in2"].delivery_id == _row_of(engine, second, 2).id
    # the quoted messages are looked up once for the batch, not once per reply
    lookups = [s for s in statements if "deliveries.message_id IN" in s]
    assert len(lookups) == 1, lookups
    # a later tap of the same person keeps the first one; a later text is not the reply
    _record(engine, [incoming(1, "in5", "No", button_id="no", quoted_id="n1")])
    again = _row_of(engine, second, 1)
    assert (again.tapped_button_id, again.reply_text) == ("yes", "Yes")
