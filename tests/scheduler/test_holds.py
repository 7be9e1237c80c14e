"""The hold table (scheduler/holds.py): each kind from the rows the claim reads, on a
real database, and which hold is the campaign's primary one."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, update

from campaigns.webhook_endpoints import create_endpoint
from scheduler import holds
from scheduler.holds import Hold, combine
from storage import tables
from tests.scheduler.helpers import add_instances, add_running_campaign, spec

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)  # a Tuesday
MIDNIGHT = datetime(2026, 12, 2, 0, 0, tzinfo=UTC)
PACED = {"per_minute": 60, "delay_seconds": [0, 0], "daily_cap": None}
_i = tables.instances
_d = tables.deliveries
_c = tables.campaigns


def _sender(engine: Engine, **values: Any) -> None:
    with engine.begin() as conn:
        conn.execute(update(_i).where(_i.c.instance_id == "S1").values(**values))


def _rows(engine: Engine, cid: int, n: int, **values: Any) -> None:
    """The campaign's first ``n`` rows get ``values``."""
    with engine.begin() as conn:
        ids = [
            r[0]
            for r in conn.execute(
                _d.select().with_only_columns(_d.c.id).where(_d.c.campaign_id == cid)
            ).all()
        ][:n]
        conn.execute(update(_d).where(_d.c.id.in_(ids)).values(**values))


def _campaign(engine: Engine, state: str = "running", **sections: dict[str, Any]) -> int:
    return add_running_campaign(
        engine,
        spec(**{"pace": PACED, **sections}),
        recipients=4,
        senders=["S1"],
        now=T0,
        state=state,
        start_at=T0 + timedelta(hours=2),
    )


def _scheduled(engine: Engine) -> int:
    return _campaign(engine, state="scheduled")


def _paused_by_user(engine: Engine) -> int:
    cid = _campaign(engine, state="paused")
    with engine.begin() as conn:
        conn.execute(update(_c).where(_c.c.id == cid).values(state_reason="paused by user"))
    return cid


def _paused_by_safety(engine: Engine) -> int:
    cid = _campaign(engine, state="paused")
    reason = "failure rate 60% of 20 attempts passed the limit 50%"
    with engine.begin() as conn:
        conn.execute(update(_c).where(_c.c.id == cid).values(state_reason=reason))
    return cid


def _outside_window(engine: Engine) -> int:
    return _campaign(engine, schedule={"window": ["18:00", "20:00"]})


def _sender_paused(engine: Engine) -> int:
    cid = _campaign(engine)
    _sender(engine, paused_reason="relogin required", paused_at=T0 - timedelta(minutes=5))
    return cid


def _no_usable_sender(engine: Engine) -> int:
    cid = _campaign(engine)
    _sender(engine, state="logged_out")
    return cid


def _daily_cap(engine: Engine) -> int:
    cid = _campaign(engine, pace={**PACED, "daily_cap": 2})
    _rows(engine, cid, 2, state="sent", sent_at=T0 - timedelta(minutes=1), attempts=1)
    return cid


def _warmup(engine: Engine) -> int:
    cid = _campaign(engine)
    _sender(engine, warmup_ramp="2,2,4", warmup_used=2.0, warmup_day_key=T0.date().isoformat())
    return cid


def _retry(engine: Engine) -> int:
    cid = _campaign(engine)
    _rows(engine, cid, 4, due_at=T0 + timedelta(minutes=3), attempts=1, error="gateway busy")
    return cid


def _health(engine: Engine) -> int:
    cid = _campaign(engine)
    _sender(
        engine,
        paused_reason="health high (score 45): 5 failed",
        paused_at=T0,
        health_level="high",
        health_score=45.0,
        health_at=T0,
        health_resume_at=T0 + timedelta(minutes=30),
    )
    return cid


def _sending(engine: Engine) -> int:
    return _campaign(engine)


CASES: list[tuple[str, Callable[[Engine], int], str | None, datetime | None, str]] = [
    ("scheduled", _scheduled, "not_started", T0 + timedelta(hours=2), "starts at 12:00 Tue 1 Dec"),
    ("paused by a person", _paused_by_user, "campaign_paused", None, "paused by user"),
    ("paused by safety", _paused_by_safety, "safety_pause", None, "failure rate 60%"),
    ("window", _outside_window, "outside_window", T0 + timedelta(hours=8), "opens at 18:00"),
    ("sender paused", _sender_paused, "sender_paused", None, "relogin required"),
    ("logged out", _no_usable_sender, "no_usable_sender", None, "logged out"),
    ("daily cap", _daily_cap, "daily_cap", MIDNIGHT, "daily cap reached (2 of 2 today)"),
    (
        "warm-up",
        _warmup,
        "warmup_used",
        MIDNIGHT,
        "(2 of 2); next sends from 00:00 Wed 2 Dec (UTC), tomorrow's allowance 4",
    ),
    ("retry", _retry, "retry_backoff", T0 + timedelta(minutes=3), "(gateway busy)"),
    ("health", _health, "health_cooldown", T0 + timedelta(minutes=30), "resumes by itself"),
    ("sending", _sending, None, None, ""),
]


@pytest.mark.parametrize(
    ("setup", "kind", "until", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_each_kind_of_hold_from_the_rows_the_claim_reads(
    engine: Engine,
    setup: Callable[[Engine], int],
    kind: str | None,
    until: datetime | None,
    words: str,
) -> None:
    add_instances(engine, ["S1"], T0 - timedelta(days=1))
    cid = setup(engine)
    hold = holds.campaign_hold(engine, cid, T0)
    if kind is None:
        assert hold.primary is None and hold.as_dict() is None, hold
        return
    assert hold.primary is not None, hold
    assert hold.primary.kind == kind, hold
    assert hold.primary.until == until, hold
    assert words in hold.primary.words, hold
    assert hold.as_dict() is not None


def test_each_queued_recipient_carries_its_own_hold(engine: Engine) -> None:
    add_instances(engine, ["S1"], T0 - timedelta(days=1))
    cid = _campaign(engine)
    _rows(engine, cid, 1, due_at=T0 + timedelta(minutes=3), attempts=1, error="busy")
    found = holds.recipient_holds(engine, cid, T0)
    assert len(found) == 4
    kinds = sorted(r.hold.kind if r.hold else "due" for r in found)
    assert kinds == ["due", "due", "due", "retry_backoff"], found


def _hold(kind: str, until: datetime | None, sender: str | None = None) -> Hold:
    return Hold(kind, kind, until, None, None, sender)


def test_the_primary_hold_is_the_one_that_lifts_last_among_what_blocks_everything() -> None:
    window = _hold("outside_window", T0 + timedelta(hours=20))
    warm = _hold("warmup_used", MIDNIGHT, "S1")
    both = combine([window], {"S1": warm})
    assert both.primary == window  # the window opens after the allowance renews
    early = _hold("outside_window", T0 + timedelta(hours=1))
    assert combine([early], {"S1": warm}).primary == warm
    # two senders held differently: the campaign sends again when the first lifts
    paused = _hold("sender_paused", None, "S2")
    mixed = combine([], {"S1": warm, "S2": paused})
    assert mixed.primary is not None and mixed.primary.kind == "warmup_used"
    assert "other senders wait too" in mixed.primary.words
    assert len(mixed.senders) == 2
    # one sender sends: no primary hold, the held one listed
    some = combine([], {"S1": None, "S2": paused})
    assert some.primary is None and some.senders == (paused,)
    assert some.line() is not None and "S2" in some.line()  # type: ignore[operator]


def _held_events(engine: Engine) -> list[dict[str, Any]]:
    m = tables.webhook_messages
    with engine.connect() as conn:
        rows = conn.execute(
            m.select().with_only_columns(m.c.data).where(m.c.event == "campaign.held")
        ).all()
    return [json.loads(r[0]) if isinstance(r[0], str) else dict(r[0]) for r in rows]


def test_campaign_held_is_written_once_per_new_kind(engine: Engine) -> None:
    """The dispatcher announces the running campaigns' holds every few seconds: a
    subscribed endpoint gets one ``campaign.held`` per new kind, none when it clears."""
    add_instances(engine, ["S1"], T0 - timedelta(days=1))
    cid = _warmup(engine)
    create_endpoint(engine, "https://hooks.example.com/in", ["campaign.held"], now=T0)
    for _ in range(2):
        with engine.begin() as conn:
            holds.announce(conn, [cid], T0)
    (event,) = _held_events(engine)
    hold = holds.campaign_hold(engine, cid, T0).primary
    assert hold is not None
    assert (event["campaign_id"], event["kind"], event["words"]) == (cid, hold.kind, hold.words)
    assert event["until"] is not None and event["until"].startswith("2026-12-02")
    _sender(engine, warmup_off=True)  # the hold clears: no event
    with engine.begin() as conn:
        holds.announce(conn, [cid], T0)
    assert len(_held_events(engine)) == 1
    _sender(engine, paused_reason="relogin required", paused_at=T0)
    with engine.begin() as conn:
        holds.announce(conn, [cid], T0)
    assert [e["kind"] for e in _held_events(engine)] == ["warmup_used", "sender_paused"]


@pytest.mark.parametrize(
    ("reason", "command"),
    [
        (
            "bad_token: the gateway refused the access token; it is the same for every sender: "
            "correct the access token setting, then resume the senders",
            "set GATECAST_ACCESS_TOKEN, then gatecast instance resume S1",
        ),
        ("logged_out: link it again with a new QR code", "gatecast instance qr S1"),
        ("relogin_required", "gatecast instance qr S1"),
        ("health high (score 45): 5 failed", "gatecast instance resume S1"),
    ],
)
def test_a_paused_sender_is_advised_by_its_pause_reason(reason: str, command: str) -> None:
    """A refused token is the setting, a lost link a new QR code, the rest a resume."""
    action, cli = holds.unpause_advice("S1", reason)
    assert cli == command
    assert "GATECAST" not in action and "gatecast" not in action
