"""The inbox's journal: events acknowledged while the database is away, drained later."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError

from campaigns.gateway_events import ApplyStats
from campaigns.inbox.batcher import EventBatcher
from campaigns.inbox.journal import EventJournal, decode, encode
from gatecast.settings import Settings
from gatecast.web.context import AppContext
from gateway.events import (
    ConnectionStatus,
    DeliveryStatus,
    Event,
    IncomingMessage,
    MessageStatus,
)
from storage.queries import instances as iq
from tests.campaigns.inbox_fakes import make_batcher

AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SECRET = "s3cr3t-webhook-path"


def _status(i: int) -> MessageStatus:
    return MessageStatus("A", f"m{i}", DeliveryStatus.READ, chat=f"{i}@c.us", at=AT)


def test_events_round_trip_through_a_journal_line() -> None:
    events: list[Event] = [
        _status(1),
        MessageStatus("A", "m2", DeliveryStatus.FAILED, error_code="463"),
        IncomingMessage("A", "r1", "1@c.us", "STOP\nplease", sender_phone="1", at=AT),
        ConnectionStatus("A", "logged_out", reason="x", phone="15550001"),
    ]
    lines = [encode(e) for e in events]
    assert all("\n" not in line for line in lines)
    assert [decode(line) for line in lines] == events


class _Database:
    """A fake store: down (OperationalError) or slow until told otherwise."""

    def __init__(self) -> None:
        self.down = True
        self.stored: list[Event] = []
        self.release = threading.Event()
        self.slow = False

    def apply(self, events: list[Event]) -> ApplyStats:
        if self.slow:
            self.release.wait(10)
        if self.down:
            raise OperationalError("INSERT", {}, Exception("database is locked"))
        self.stored.extend(events)
        return ApplyStats()


def _batcher(db: _Database, journal: EventJournal, **kw: Any) -> EventBatcher:
    return make_batcher(db.apply, journal=journal, journal_after=0.2, drain_every=0.05, **kw)


async def _drained(batcher: EventBatcher) -> bool:
    for _ in range(100):
        if not batcher.journalled:
            return True
        await asyncio.sleep(0.05)
    return False


def test_a_batch_the_database_refuses_is_journalled_then_drained_in_order(
    tmp_path: Path,
) -> None:
    db = _Database()
    journal = EventJournal(tmp_path / "j.jsonl")

    async def go() -> None:
        batcher = _batcher(db, journal)
        await batcher.start()
        await batcher.submit([_status(1)])  # acknowledged although the database is down
        await batcher.submit([_status(2), _status(3)])
        assert journal.read() == [_status(1), _status(2), _status(3)]
        assert batcher.journalled is True
        await asyncio.sleep(0.2)  # drains keep failing: nothing lost
        assert len(journal.read()) == 3
        db.down = False
        await batcher.submit([_status(4)])  # behind the journal, not before it
        assert await _drained(batcher)
        await batcher.stop()

    asyncio.run(go())
    assert db.stored == [_status(i) for i in (1, 2, 3, 4)]
    assert not journal and journal.read() == []


def test_a_database_that_does_not_answer_in_time_is_journalled(tmp_path: Path) -> None:
    db = _Database()
    db.down, db.slow = False, True
    journal = EventJournal(tmp_path / "j.jsonl")

    async def go() -> None:
        batcher = _batcher(db, journal)
        await batcher.start()
        await asyncio.wait_for(batcher.submit([_status(1)]), 2)
        assert journal.read() == [_status(1)]
        db.release.set()  # the waiting thread commits too: storing twice is harmless
        db.slow = False
        assert await _drained(batcher)
        await batcher.stop()

    asyncio.run(go())
    assert set(db.stored) == {_status(1)}
    assert not journal


def test_a_journal_left_by_a_previous_process_is_drained_at_start(tmp_path: Path) -> None:
    db = _Database()
    db.down = False
    journal = EventJournal(tmp_path / "j.jsonl")
    journal.append([_status(1), _status(2)])

    async def go() -> None:
        batcher = _batcher(db, journal)
        await batcher.start()
        await batcher.stop()

    asyncio.run(go())
    assert db.stored == [_status(1), _status(2)]
    assert not journal


def test_an_error_that_is_not_the_database_being_away_still_fails(tmp_path: Path) -> None:
    journal = EventJournal(tmp_path / "j.jsonl")

    def apply(events: list[Event]) -> ApplyStats:
        raise ValueError("bad data")

    async def go() -> None:
        batcher = make_batcher(apply, journal=journal)
        await batcher.start()
        with pytest.raises(RuntimeError):
            await batcher.submit([_status(1)])
        await batcher.stop()

    asyncio.run(go())
    assert not journal


def test_a_journalled_event_the_database_refuses_does_not_block_the_rest(
    tmp_path: Path,
) -> None:
    journal = EventJournal(tmp_path / "j.jsonl")
    journal.append([_status(1), _status(2), _status(3)])
    stored: list[Event] = []

    def apply(events: list[Event]) -> ApplyStats:
        if _status(2) in events:
            raise ValueError("refused")
        stored.extend(events)
        return ApplyStats()

    async def go() -> None:
        batcher = make_batcher(apply, journal=journal, drain_every=0.05)
        await batcher.start()
        await batcher.stop()

    asyncio.run(go())
    assert stored == [_status(1), _status(3)]
    assert not journal


def test_a_full_journal_disk_with_the_database_locked_answers_503_with_retry_after(
    sqlite_engine: Engine, tmp_path: Path
) -> None:
    """Neither the database nor the journal can take the batch: 503, never a 200 or 500."""
    import sqlite3

    from campaigns.inbox.journal import JOURNAL_FILE
    from gatecast.web.app import create_app

    with sqlite_engine.begin() as conn:
        iq.mark_state(conn, "A", "connected", now=AT)
    journal_dir = tmp_path / "journal"
    journal_dir.mkdir()
    (journal_dir / JOURNAL_FILE).symlink_to("/dev/full")  # every write: ENOSPC
    settings = Settings(
        webhook_secret=SecretStr(SECRET), database_url="sqlite://", journal_dir=str(journal_dir)
    )
    app = create_app(
        AppContext(settings=settings, engine=sqlite_engine, api_key=SecretStr("k" * 32))
    )
    database = sqlite_engine.url.database
    assert database
    blocker = sqlite3.connect(database, isolation_level=None)
    body: dict[str, Any] = {
        "event": "message_status",
        "instance_id": "A",
        "data": {"id": "m1", "status": "read", "timestamp": 1795000000},
    }

    async def go() -> tuple[httpx.Response, httpx.Response]:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://gw") as c:
                blocker.execute("BEGIN IMMEDIATE")  # the write lock, held
                try:
                    refused = await c.post(f"/webhooks/gateway/{SECRET}", json=body)
                finally:
                    blocker.execute("COMMIT")
                (journal_dir / JOURNAL_FILE).unlink()  # room again, the database free
                body["data"]["id"] = "m2"
                return refused, await c.post(f"/webhooks/gateway/{SECRET}", json=body)

    try:
        refused, accepted = asyncio.run(go())
    finally:
        blocker.close()
    assert refused.status_code == 503, refused.text
    assert refused.headers["retry-after"].isdigit(), refused.headers
    assert refused.headers["content-type"] == "application/problem+json"
    assert "could not be stored" in refused.json()["detail"]
    assert accepted.status_code == 200, accepted.text


def test_a_long_drain_and_its_inbox_pass_yield_the_loop_between_chunks(tmp_path: Path) -> None:
    """Thousands of journalled events are stored and applied in chunks with the loop free
    between them: a drain on the loop once held it for seconds (gateway POSTs timed out)."""
    from campaigns.inbox.batcher import APPLY_LATER_EVENTS, MAX_BATCH_EVENTS

    journal = EventJournal(tmp_path / "j.jsonl")
    journal.append([_status(i) for i in range(3000)])
    log: list[tuple[str, int]] = []

    def inline(events: list[Event]) -> ApplyStats:
        log.append(("store", len(events)))
        return ApplyStats(pending=[e.message_id for e in events if isinstance(e, MessageStatus)])

    def inline_later(ids: list[str]) -> int:
        log.append(("apply", len(ids)))
        return len(ids)

    async def go() -> None:
        db = _Database()
        batcher = _batcher(
            db, journal, inline=inline, apply_later=inline_later, inline_later=inline_later
        )
        await batcher.start()  # a journal left by the last process: drained at once
        while batcher.journalled or batcher.unapplied:
            log.append(("tick", 0))
            await asyncio.sleep(0)
        await batcher.stop()

    asyncio.run(go())
    stores = [n for kind, n in log if kind == "store"]
    applies = [n for kind, n in log if kind == "apply"]
    assert sum(stores) == 3000 and max(stores) <= MAX_BATCH_EVENTS
    assert sum(applies) == 3000 and max(applies) <= APPLY_LATER_EVENTS
    # the loop is free after at most two chunks (a store chunk, then a pass's slice)
    runs, run = [], 0
    for kind, _ in log:
        run = 0 if kind == "tick" else run + 1
        runs.append(run)
    assert max(runs) <= 2, repr(log)
    assert not journal


def test_stored_events_wait_for_a_locked_database_without_holding_up_new_batches(
    tmp_path: Path,
) -> None:
    """Applying stored events under another writer's lock is put off, never waited for in
    the batcher's task: new batches are still stored (or journalled) meanwhile."""
    from campaigns.inbox.store import WouldBlock

    locked, released = threading.Event(), threading.Event()
    locked.set()
    applied: list[str] = []

    def inline(events: list[Event]) -> ApplyStats:
        return ApplyStats(pending=[e.message_id for e in events if isinstance(e, MessageStatus)])

    def inline_later(ids: list[str]) -> int:
        if locked.is_set():
            raise WouldBlock()
        applied.extend(ids)
        return len(ids)

    def apply_later_in_a_thread(ids: list[str]) -> int:
        released.wait(60)  # what a thread waiting on SQLite's busy timeout would do
        raise AssertionError("the lock must not be waited for")

    async def go() -> None:
        db = _Database()
        batcher = _batcher(
            db,
            EventJournal(tmp_path / "j.jsonl"),
            inline=inline,
            apply_later=apply_later_in_a_thread,
            inline_later=inline_later,
            later_events=1,  # every batch's ids are due for the pass at once
        )
        await batcher.start()
        for i in range(5):  # each acknowledged while the pass cannot run
            await asyncio.wait_for(batcher.submit([_status(i)]), 30)
        assert applied == [] and batcher.unapplied == 5
        locked.clear()  # the other writer commits
        released.set()
        for _ in range(600):
            if not batcher.unapplied:
                break
            await asyncio.sleep(0.05)
        await batcher.stop()

    try:
        asyncio.run(go())
    finally:
        locked.clear()
        released.set()
    assert sorted(applied) == [f"m{i}" for i in range(5)]
