"""Test sends: events move their own row (forward only), never a delivery or a count;
failures in plain words; the send refused before anything is stored."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, select

from campaigns import failure_reasons, gateway_events, service, test_sends
from campaigns.delivery_lifecycle import LEASE_EXPIRED_ERROR, OPTED_OUT_ERROR
from gatecast.settings import DEFAULT_OPT_OUT_KEYWORDS
from gateway.events import DeliveryStatus, MessageStatus
from storage import tables
from storage.queries import test_sends as tq
from tests.campaigns.campaign_fixtures import NOW, make_list, people, spec
from tests.campaigns.test_gateway_events import T1, T2, T3


def _campaign_with_test(engine: Engine) -> tuple[int, int]:
    make_list(engine, "customers", people(2))
    cid = service.create_campaign(engine, spec(), now=NOW).id
    with engine.begin() as conn:
        test_id = tq.insert_test_send(
            conn,
            {
                "campaign_id": cid,
                "target": "+15550100",
                "sender": "A",
                "state": "sent",
                "message_id": "T-1",
                "content": {"type": "text", "text": "hi"},
                "sent_at": NOW,
                "created_at": NOW,
            },
        )
    return cid, test_id


def _events(engine: Engine, *statuses: tuple[DeliveryStatus, Any, str | None]) -> None:
    gateway_events.record_events(
        engine,
        [MessageStatus("A", "T-1", s, error_code=code, at=at) for s, at, code in statuses],
        opt_out_keywords=DEFAULT_OPT_OUT_KEYWORDS,
        now=T3,
    )


def test_events_move_the_test_send_only(engine: Engine) -> None:
    cid, test_id = _campaign_with_test(engine)
    _events(engine, (DeliveryStatus.READ, T2, None), (DeliveryStatus.DELIVERED, T1, None))
    found = test_sends.get_test_send(engine, cid, test_id)
    assert found is not None
    assert (found.state, found.delivered_at, found.read_at) == ("read", T1, T2)
    _events(engine, (DeliveryStatus.FAILED, T3, "404"))  # after read: moves nothing
    again = test_sends.get_test_send(engine, cid, test_id)
    assert again is not None and again.state == "read" and again.reason is None
    assert sum(service.campaign_counts(engine, cid).values()) == 0
    with engine.connect() as conn:
        applied = conn.execute(select(tables.status_events.c.applied)).scalars().all()
    assert applied and all(applied)  # retention may prune them


def test_a_failure_reads_plainly(engine: Engine) -> None:
    cid, test_id = _campaign_with_test(engine)
    _events(engine, (DeliveryStatus.FAILED, T1, "404"))
    found = test_sends.get_test_send(engine, cid, test_id)
    assert found is not None and found.state == "failed" and found.failed_at == T1
    assert found.reason == "not on WhatsApp"


@pytest.mark.parametrize(
    ("error", "code", "words"),
    [
        ("failed by the gateway (code 404)", None, failure_reasons.NOT_ON_APP),
        ("failed by the gateway", "463", failure_reasons.RESTRICTED),
        ("This WhatsApp account relogin required", None, failure_reasons.LOGGED_OUT),
        ("You have exceeded the maximum limit", None, failure_reasons.QUOTA),
        (OPTED_OUT_ERROR, None, failure_reasons.OPTED_OUT),
        (LEASE_EXPIRED_ERROR, None, failure_reasons.STOPPED_MID_SEND),
        (
            "gave up after 4 attempts: ConnectError: the gateway was not reached",
            None,
            f"{failure_reasons.UNREACHABLE} (gave up after 4 attempts)",
        ),
        ("something new", None, "something new"),
        (None, None, None),
    ],
)
def test_plain_reasons(error: str | None, code: str | None, words: str | None) -> None:
    assert failure_reasons.plain_reason(error, code) == words


def test_refusals_store_nothing(engine: Engine) -> None:
    cid, _ = _campaign_with_test(engine)

    class NoGateway:
        def send(self, *_: Any) -> Any:
            raise AssertionError("refused sends never reach the gateway")

    with pytest.raises(test_sends.TestSendRefused) as bad_number:
        test_sends.send_test(engine, NoGateway(), cid, to="12", now=NOW)
    assert bad_number.value.field == "to"
    with pytest.raises(test_sends.TestSendRefused) as no_sender:
        test_sends.send_test(engine, NoGateway(), cid, to="+12025550143", now=NOW)
    assert no_sender.value.kind == "conflict"
    assert test_sends.test_sends_page(engine, cid, limit=10).total == 1  # only the fixture's


def test_erase_removes_the_test_sends_of_the_number(engine: Engine) -> None:
    from campaigns.erasure import erase_contact

    cid, test_id = _campaign_with_test(engine)
    with engine.begin() as conn:
        conn.execute(
            tables.test_sends.update()
            .where(tables.test_sends.c.id == test_id)
            .values(target=people(1)[0]["phone"])
        )
    erased = erase_contact(engine, phone_e164=people(1)[0]["phone"])
    assert erased.test_sends_removed == 1
    assert test_sends.get_test_send(engine, cid, test_id) is None
