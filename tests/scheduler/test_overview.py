"""The overview (``scheduler.overview``): its cost stays flat as senders grow and stops
growing past the running campaigns it lists; its words for a sender needing attention."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, event, update

from scheduler.overview import RUNNING_SHOWN, overview
from storage import tables
from tests.scheduler.helpers import add_instances, add_running_campaign, spec

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
CAPPED = {"per_minute": 60, "delay_seconds": [0, 0], "daily_cap": 100}


@contextmanager
def _counting(engine: Engine) -> Iterator[list[str]]:
    """The SQL statements ``engine`` runs inside the block."""
    seen: list[str] = []

    def note(*args: Any) -> None:
        seen.append(str(args[2]))

    event.listen(engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", note)


def _campaigns(engine: Engine, first: int, n: int) -> None:
    for k in range(first, first + n):
        add_running_campaign(
            engine,
            {**spec(pace=CAPPED), "name": f"c{k}"},
            recipients=2,
            senders=["S1", "S2"],
            now=T0,
            phone_base=15550000000 + 10 * k,
        )


def _statements(engine: Engine) -> int:
    with _counting(engine) as seen:
        overview(engine, T0)
    return len(seen)


def test_cost_flat_in_senders_and_capped_in_campaigns(sqlite_engine: Engine) -> None:
    add_instances(sqlite_engine, ["S1", "S2"], T0)
    _campaigns(sqlite_engine, 0, 3)
    few = _statements(sqlite_engine)
    add_instances(sqlite_engine, [f"X{n}" for n in range(300)], T0)
    assert _statements(sqlite_engine) == few  # 300 more senders: no more statements

    _campaigns(sqlite_engine, 3, RUNNING_SHOWN - 3)
    shown = _statements(sqlite_engine)
    _campaigns(sqlite_engine, RUNNING_SHOWN, 40)
    assert _statements(sqlite_engine) == shown  # past the listed ones: counted, not read
    found = overview(sqlite_engine, T0)
    assert found.running_total == RUNNING_SHOWN + 40 and len(found.running) == RUNNING_SHOWN
    assert len(found.senders) == 302


def test_senders_needing_attention_say_what_to_do(sqlite_engine: Engine) -> None:
    add_instances(sqlite_engine, ["ok", "out", "token", "hookless"], T0)
    i = tables.instances
    with sqlite_engine.begin() as conn:
        conn.execute(update(i).values(webhook_url_registered=True))
        conn.execute(
            update(i)
            .where(i.c.instance_id == "out")
            .values(state="logged_out", paused_reason="logged_out: link it again")
        )
        conn.execute(
            update(i)
            .where(i.c.instance_id == "token")
            .values(paused_reason="bad_token: the gateway refused the access token")
        )
        conn.execute(
            update(i).where(i.c.instance_id == "hookless").values(webhook_url_registered=False)
        )
    said = {(a.instance_id, a.problem, a.action) for a in overview(sqlite_engine, T0).attention}
    assert said == {
        (
            "out",
            "logged out: paused, nothing is sent through it until it is linked again",
            "link it: show its QR code on the Instances page and scan it with the phone",
        ),
        (
            "token",
            "paused: bad_token: the gateway refused the access token",
            "fix what the reason says, then resume the sender",
        ),
        (
            "hookless",
            "its webhook is not registered: replies and delivery receipts do not arrive",
            "register the webhook on the Instances page",
        ),
    }
