"""Reply rules (issue 32, item 3) on both databases: keyword matching without case or
accents, the button and away triggers, one answer per rule and number within its limit,
nothing for an opt-out, a pause after a person answered from the inbox, and a message
answered once even when two passes race."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, insert, select

from campaigns.campaign_file import CampaignFileError
from campaigns.gateway_events import record_events
from campaigns.replies import answer_reply
from campaigns.reply_rules import (
    RuleError,
    add_rule,
    answer_due,
    delete_rule,
    edit_rule,
    is_open,
    keyword_matches,
    list_rules,
)
from gateway.events import IncomingMessage
from storage import tables
from storage.queries import reply_rules as q

# a Monday, 12:00 UTC = 09:00 in Sao Paulo
NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
PHONE = "+12025550181"
HOURS = {"timezone": "America/Sao_Paulo", "days": {"mon": ["09:00-18:00"]}}


@pytest.mark.parametrize(
    ("text", "keyword", "match", "hit"),
    [
        ("Horário?", "horario", "exact", True),
        ("HORARIO", "Horário", "word", True),
        ("qual o horário de hoje", "horario", "word", True),
        ("qual o horário de hoje", "horario", "exact", False),
        ("horarios", "horario", "word", False),
        ("info please", "INFO", "prefix", True),
        ("more info", "info", "prefix", False),
        ("", "info", "word", False),
    ],
)
def test_keywords_match_without_case_accents_or_punctuation(
    text: str, keyword: str, match: str, hit: bool
) -> None:
    assert keyword_matches(text, keyword, match) is hit


def test_business_hours_are_read_in_their_timezone() -> None:
    assert is_open(HOURS, NOW)  # 09:00 in Sao Paulo on a Monday
    assert not is_open(HOURS, NOW - timedelta(minutes=1))
    assert not is_open(HOURS, NOW + timedelta(days=1))  # Tuesday: not named, closed


def test_refusals_name_the_field() -> None:
    text = {"type": "text", "text": "hi"}
    cases: list[tuple[dict[str, Any], str]] = [
        ({"name": "", "trigger": "keyword", "keywords": ["a"], "message": text}, "name"),
        ({"name": "a", "trigger": "what", "message": text}, "trigger"),
        ({"name": "a", "trigger": "keyword", "keywords": [], "message": text}, "keywords"),
        ({"name": "a", "trigger": "button", "message": text}, "button_id"),
        ({"name": "a", "trigger": "away", "message": text}, "hours"),
        (
            {"name": "a", "trigger": "away", "hours": {"timezone": "Mars/Base"}, "message": text},
            "hours.timezone",
        ),
        (
            {
                "name": "a",
                "trigger": "away",
                "hours": {"timezone": "UTC", "days": {"mon": ["18:00-09:00"]}},
                "message": text,
            },
            "hours.days.mon",
        ),
        (
            {
                "name": "a",
                "trigger": "keyword",
                "keywords": ["a"],
                "limit_hours": -1,
                "message": text,
            },
            "limit_hours",
        ),
        ({"name": "a", "trigger": "keyword", "keywords": ["a"]}, "message"),
    ]
    from campaigns.reply_rules import check_rule

    for fields, field in cases:
        with pytest.raises(RuleError) as refused:
            check_rule(fields)
        assert refused.value.field == field
    with pytest.raises(CampaignFileError):
        check_rule({"name": "a", "trigger": "keyword", "keywords": ["a"], "message": {"type": "x"}})


def _sender(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(
            insert(tables.instances).values(
                instance_id="AAA", state="connected", created_at=NOW, updated_at=NOW
            )
        )


def _write(engine: Engine, mid: str, text: str, **more: Any) -> None:
    """PHONE writes to sender AAA (stored as the webhook stores it)."""
    event = IncomingMessage(
        instance_id="AAA",
        message_id=mid,
        chat=f"{PHONE[1:]}@c.us",
        sender_phone=PHONE[1:],
        text=text,
        at=NOW,
        **more,
    )
    record_events(engine, [event], opt_out_keywords=["STOP"], now=NOW)


def _answers(engine: Engine) -> list[tuple[int, int]]:
    """(rule, incoming message) of every answer."""
    with engine.connect() as conn:
        rows = q.answers_to(conn, PHONE)
    return [(int(r["rule_id"]), int(r["inbound_id"])) for r in rows]


def _inbound(engine: Engine, mid: str) -> int:
    im = tables.inbound_messages
    with engine.connect() as conn:
        return int(conn.execute(select(im.c.id).where(im.c.message_id == mid)).scalar_one())


def _rule(engine: Engine, **fields: Any) -> int:
    base = {"name": "rule", "message": {"type": "text", "text": "Hello {{ name }}"}}
    return add_rule(engine, {**base, **fields}, now=NOW).id


def test_a_keyword_rule_answers_once_within_its_limit(engine: Engine) -> None:
    _sender(engine)
    rule = _rule(engine, trigger="keyword", keywords=["horario"])
    _write(engine, "m1", "Qual o HORÁRIO?")
    _write(engine, "m2", "nothing to see")
    assert answer_due(engine, now=NOW) == 2
    assert _answers(engine) == [(rule, _inbound(engine, "m1"))]
    _write(engine, "m3", "horário")  # the other bot answers: within the limit, no answer
    answer_due(engine, now=NOW + timedelta(hours=1))
    assert len(_answers(engine)) == 1
    _write(engine, "m4", "horario")  # after the limit (24 h), one more
    answer_due(engine, now=NOW + timedelta(hours=25))
    assert _answers(engine)[-1] == (rule, _inbound(engine, "m4"))
    assert answer_due(engine, now=NOW + timedelta(hours=26)) == 0  # nothing left due
    # the answer is a direct message through the sender that received it
    with engine.connect() as conn:
        metadata = (
            conn.execute(
                select(tables.campaigns.c.message_metadata).where(
                    tables.campaigns.c.direct.is_(True)
                )
            )
            .scalars()
            .all()
        )
    assert metadata[0] == {"reply_rule": rule, "reply_to": _inbound(engine, "m1")}


def test_an_opt_out_gets_no_answer_even_when_a_rule_matches(engine: Engine) -> None:
    _sender(engine)
    _rule(engine, trigger="keyword", keywords=["stop"], match="exact")
    _rule(engine, trigger="away", hours={"timezone": "UTC", "days": {}})
    _write(engine, "m1", "STOP")
    answer_due(engine, now=NOW)
    assert _answers(engine) == []


def test_button_rules_come_first_and_away_answers_outside_hours(engine: Engine) -> None:
    _sender(engine)
    away = _rule(engine, trigger="away", hours=HOURS)
    button = _rule(engine, trigger="button", button_id="yes")
    _write(engine, "m1", "Yes", button_id="yes")
    _write(engine, "m2", "hello")  # 09:00 in Sao Paulo: open, no away message
    answer_due(engine, now=NOW)
    assert _answers(engine) == [(button, _inbound(engine, "m1"))]
    _write(engine, "m3", "hello again")
    answer_due(engine, now=NOW - timedelta(hours=4))  # 05:00 there: closed
    assert _answers(engine)[-1] == (away, _inbound(engine, "m3"))


def test_a_person_answering_from_the_inbox_pauses_the_rules(engine: Engine) -> None:
    _sender(engine)
    _rule(engine, trigger="keyword", keywords=["price"], pause_hours=2)
    _write(engine, "m1", "hi")
    answer_due(engine, now=NOW)
    answer_reply(
        engine,
        _inbound(engine, "m1"),
        message={"type": "text", "text": "A person here"},
        region="US",
        now=NOW,
    )
    _write(engine, "m2", "price?")
    answer_due(engine, now=NOW + timedelta(hours=1))
    assert _answers(engine) == []  # paused for 2 h
    _write(engine, "m3", "price?")
    answer_due(engine, now=NOW + timedelta(hours=3))
    assert [m for _, m in _answers(engine)] == [_inbound(engine, "m3")]


def test_edit_disable_and_delete(engine: Engine) -> None:
    _sender(engine)
    rule = _rule(engine, trigger="keyword", keywords=["price"])
    edited = edit_rule(engine, rule, {"enabled": False, "keywords": ["cost"]}, now=NOW)
    assert (edited.enabled, edited.keywords, edited.name) == (False, ["cost"], "rule")
    _write(engine, "m1", "cost")
    answer_due(engine, now=NOW)
    assert _answers(engine) == []
    delete_rule(engine, rule)
    assert list_rules(engine) == []


def test_a_message_is_answered_once_when_a_note_already_exists(engine: Engine) -> None:
    """The unique key on the incoming message: a second answer's transaction is rolled
    back with its message (as when two leaders raced)."""
    _sender(engine)
    rule = _rule(engine, trigger="keyword", keywords=["price"])
    _write(engine, "m1", "price")
    with engine.begin() as conn:  # another pass answered, and its clear was not seen
        q.record_answer(
            conn,
            inbound_id=_inbound(engine, "m1"),
            rule_id=rule,
            phone=PHONE,
            message_id=0,
            now=NOW,
        )
    with engine.connect() as conn:
        before = conn.execute(select(tables.campaigns.c.id)).all()
    answer_due(engine, now=NOW + timedelta(days=2))
    with engine.connect() as conn:
        after = conn.execute(select(tables.campaigns.c.id)).all()
        due = q.due_messages(conn, 10)
    assert before == after  # no second message stored
    assert len(_answers(engine)) == 1
    assert list(due) == []  # looked at: not tried again
