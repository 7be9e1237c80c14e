"""Follow-up steps (issue 32, item 2; decision 70) on both databases: who each kind of
condition is due for, that an evaluation run twice makes no second row, at most one
step pending per contact, and that the claim's re-check skips whoever answered since."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, insert, select, update

from campaigns import followups
from campaigns.campaign_file import CampaignFileError, parse_campaign
from campaigns.service import create_campaign
from scheduler.starts import start_campaign
from storage import tables
from storage.queries import deliveries as dq
from tests.campaigns.campaign_fixtures import NOW, make_list, people, phone

_d = tables.deliveries
SENT = NOW + timedelta(minutes=1)

BUTTONS = [
    {"kind": "quick_reply", "display_text": "Yes", "id": "yes"},
    {"kind": "quick_reply", "display_text": "No", "id": "no"},
]


def _campaign(engine: Engine, steps: list[dict[str, Any]]) -> int:
    make_list(engine, "customers", people(6))
    spec = parse_campaign(
        {
            "name": "invite",
            "list": "customers",
            "message": {"type": "interactive", "text": "Coming?", "buttons": BUTTONS},
            "steps": steps,
        }
    )
    with engine.begin() as conn:
        conn.execute(
            insert(tables.instances).values(
                instance_id="AAA", state="connected", created_at=NOW, updated_at=NOW
            )
        )
    cid = create_campaign(engine, spec, now=NOW).id
    start_campaign(engine, cid, now=NOW)
    with engine.begin() as conn:  # every first message sent (and read) at SENT
        conn.execute(
            update(_d)
            .where(_d.c.campaign_id == cid)
            .values(state="read", sent_at=SENT, attempted_at=SENT, read_at=SENT, sender="AAA")
        )
    return cid


def _reply(engine: Engine, i: int, text: str, *, button: str | None = None) -> None:
    """Person ``i`` answers the first message: the inbound message and the row's reply."""
    with engine.begin() as conn:
        cid = conn.execute(
            select(tables.contacts.c.id).where(tables.contacts.c.phone == phone(i))
        ).scalar_one()
        conn.execute(
            insert(tables.inbound_messages).values(
                message_id=f"in-{i}-{text}",
                chat=f"{phone(i)[1:]}@c.us",
                sender_phone=phone(i),
                contact_id=cid,
                text=text,
                button_id=button,
                received_at=SENT + timedelta(hours=1),
            )
        )
        conn.execute(
            update(_d)
            .where(_d.c.target == phone(i))
            .values(replied_at=SENT + timedelta(hours=1), reply_text=text, tapped_button_id=button)
        )


def _stepped(engine: Engine, cid: int, step: int) -> list[str]:
    with engine.connect() as conn:
        child = conn.execute(
            select(tables.campaigns.c.id).where(
                tables.campaigns.c.step_of == cid, tables.campaigns.c.step == step
            )
        ).scalar_one_or_none()
        if child is None:
            return []
        return sorted(conn.execute(select(_d.c.target).where(_d.c.campaign_id == child)).scalars())


NO_REPLY = {"when": "no_reply", "after": "2d", "message": {"type": "text", "text": "Reminder"}}
TAPPED_YES = {"when": "tapped", "button": "yes", "message": {"type": "text", "text": "Details"}}


def test_each_condition_is_due_for_whom_it_says(engine: Engine) -> None:
    keyword = {"when": "replied", "keyword": "info", "message": {"type": "text", "text": "Info"}}
    cid = _campaign(engine, [TAPPED_YES, NO_REPLY, keyword])
    _reply(engine, 0, "Yes", button="yes")
    _reply(engine, 1, "No", button="no")
    _reply(engine, 2, "more INFÓ please")
    _reply(engine, 3, "STOP")
    with engine.begin() as conn:
        conn.execute(
            update(tables.contacts)
            .where(tables.contacts.c.phone == phone(3))
            .values(opted_out=True)
        )
    followups.evaluate(engine, SENT + timedelta(hours=2))
    assert _stepped(engine, cid, 1) == [phone(0)]  # tapped yes: the details at once
    assert _stepped(engine, cid, 2) == []  # no reminder before 2 days
    assert _stepped(engine, cid, 3) == [phone(2)]  # the keyword, accents and case aside
    later = SENT + timedelta(days=2, minutes=1)
    followups.evaluate(engine, later)
    followups.evaluate(engine, later)  # run again: no second row
    # the reminder: only those who never answered (4, 5), not those who replied or said STOP
    assert _stepped(engine, cid, 2) == [phone(4), phone(5)]
    with engine.connect() as conn:
        n = conn.execute(select(_d.c.id).where(_d.c.target == phone(4))).all()
    assert len(n) == 2  # the first message and one reminder


def test_one_step_pending_per_contact_and_the_claim_rechecks(engine: Engine) -> None:
    again = {**NO_REPLY, "after": "3d", "message": {"type": "text", "text": "Last call"}}
    cid = _campaign(engine, [NO_REPLY, again])
    followups.evaluate(engine, SENT + timedelta(days=4))
    # both steps are due for everyone, but only the first is made while it is pending
    assert len(_stepped(engine, cid, 1)) == 6 and _stepped(engine, cid, 2) == []
    _reply(engine, 5, "thanks, got it")  # answers after the reminder was made
    with engine.connect() as conn:
        rule = followups.rule_of(conn, cid, 1)
    assert rule is not None
    with engine.begin() as conn:
        child = conn.execute(
            select(tables.campaigns.c.id).where(tables.campaigns.c.step_of == cid)
        ).scalar_one()
        rows = dq.claim(
            conn,
            campaign_id=child,
            sender="AAA",
            now=SENT + timedelta(days=4),
            lease_until=SENT + timedelta(days=5),
            limit=10,
        )
        kept = followups.recheck(conn, rule, rows, SENT + timedelta(days=4))
    assert sorted(r.target for r in kept) == [phone(i) for i in range(5)]
    with engine.connect() as conn:
        skipped = conn.execute(
            select(_d.c.target, _d.c.error).where(
                _d.c.campaign_id == child, _d.c.state == "skipped"
            )
        ).all()
    assert skipped == [(phone(5), followups.ANSWERED)]


@pytest.mark.parametrize(
    ("step", "field"),
    [
        ({"when": "no_reply", "message": {"type": "text", "text": "x"}}, "steps[0].after"),
        ({"when": "tapped", "message": {"type": "text", "text": "x"}}, "steps[0].button"),
        ({"when": "replied", "message": {"type": "text", "text": "x"}}, "steps[0].keyword"),
        ({"when": "maybe", "message": {"type": "text", "text": "x"}}, "steps[0].when"),
        ({**NO_REPLY, "after": "soon"}, "steps[0].after"),
    ],
)
def test_a_step_missing_what_its_condition_needs_is_refused(
    step: dict[str, Any], field: str
) -> None:
    data = {"name": "n", "list": "l", "message": {"type": "text", "text": "hi"}, "steps": [step]}
    with pytest.raises(CampaignFileError) as err:
        parse_campaign(data)
    assert field in [e.path for e in err.value.errors], err.value


def test_keyword_matches_whole_words() -> None:
    assert followups.keyword_matches("info", "More INFO, please")
    assert followups.keyword_matches("info", "informação? não: info")
    assert not followups.keyword_matches("info", "information")
    assert followups.keyword_matches("sí", "SI claro")


def test_a_step_follows_its_campaign_paused_resumed_and_cancelled(engine: Engine) -> None:
    from campaigns import lifecycle
    from campaigns.service import cancel_campaign

    cid = _campaign(engine, [NO_REPLY])
    later = SENT + timedelta(days=3)
    followups.evaluate(engine, later)
    with engine.connect() as conn:
        child, state = conn.execute(
            select(tables.campaigns.c.id, tables.campaigns.c.state).where(
                tables.campaigns.c.step_of == cid
            )
        ).one()
    assert state == "running" and len(_stepped(engine, cid, 1)) == 6

    def child_state() -> str:
        with engine.connect() as conn:
            return str(
                conn.execute(
                    select(tables.campaigns.c.state).where(tables.campaigns.c.id == child)
                ).scalar_one()
            )

    with engine.begin() as conn:
        lifecycle.transition(conn, cid, lifecycle.PAUSED, now=later)
    followups.evaluate(engine, later)
    assert child_state() == "paused"
    with engine.begin() as conn:
        lifecycle.transition(conn, cid, lifecycle.RUNNING, now=later)
    followups.evaluate(engine, later)
    assert child_state() == "running"
    cancel_campaign(engine, cid, now=later)
    followups.evaluate(engine, later)
    assert child_state() == "cancelled"
    with engine.connect() as conn:
        left = conn.execute(
            select(_d.c.state, _d.c.error).where(_d.c.campaign_id == child).distinct()
        ).all()
    assert left == [("skipped", followups.STOPPED)]
