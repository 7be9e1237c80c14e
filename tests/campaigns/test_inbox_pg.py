"""PostgreSQL: status batches stored on the event loop (:mod:`campaigns.inbox.store`'s
``writer.statuses`` path, the writer :func:`storage.event_store.open_writer` gives)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from pydantic import SecretStr
from sqlalchemy import Engine, func, select, text

from campaigns.inbox import Inbox
from campaigns.inbox.batcher import BatcherConfig
from campaigns.inbox.guard import LOAD_RETRY_SECONDS
from campaigns.inbox.journal import EventJournal
from campaigns.inbox.store import InboxStore
from gatecast.settings import DEFAULT_OPT_OUT_KEYWORDS, Settings
from gatecast.web import webhook
from gatecast.web.context import AppContext
from gateway.event_parsing import parse_webhook
from gateway.events import Event
from storage.engine import make_engine
from storage.event_store import AsyncStatusInserter, open_writer
from storage.queries import instances as iq
from tests.campaigns.campaign_fixtures import NOW, phone
from tests.web.test_webhook import (
    SECRET,
    _campaign,
    _counts,
    _post_all,
    _states,
    _status,
    status_events,
)

pytestmark = pytest.mark.postgres


def _ctx(engine: Engine) -> AppContext:
    settings = Settings(webhook_secret=SecretStr(SECRET), database_url="sqlite://")
    return AppContext(settings=settings, engine=engine, clock=lambda: NOW)


def _app(engine: Engine) -> FastAPI:
    app = FastAPI(lifespan=None)
    app.state.ctx = _ctx(engine)
    app.include_router(webhook.router)
    return app


def _events(*bodies: object) -> list[Event]:
    return [e for b in bodies for e in parse_webhook(json.dumps(b).encode())]


def _stored(engine: Engine) -> list[tuple[str, str, bool]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(
                status_events.c.message_id, status_events.c.status, status_events.c.applied
            ).order_by(status_events.c.message_id, status_events.c.status)
        ).all()
    return [(str(m), str(s), bool(a)) for m, s, a in rows]


def _store(engine: Engine) -> InboxStore:
    return InboxStore(
        open_writer(engine), opt_out_keywords=DEFAULT_OPT_OUT_KEYWORDS, clock=lambda: NOW
    )


def _inserter(store: InboxStore) -> AsyncStatusInserter:
    assert store.writer.statuses is not None
    return store.writer.statuses


def _backend_pid(store: InboxStore) -> int:
    held = _inserter(store).held
    assert len(held) == 1  # one batch at a time here: one connection
    return int(held[0].info.backend_pid)


def _use(store: InboxStore, engine: Engine) -> None:
    """Point the store (its threads, its async connection, its guard's reads) at ``engine``."""
    store.engine = _inserter(store).engine = engine


def test_only_for_postgres(sqlite_engine: Engine, pg_engine: Engine) -> None:
    sqlite_writer, pg_writer = open_writer(sqlite_engine), open_writer(pg_engine)
    assert sqlite_writer.statuses is None and sqlite_writer.nowait is not None
    assert pg_writer.statuses is not None and pg_writer.nowait is None


def test_stores_status_batches_committed_and_deduplicated(pg_engine: Engine) -> None:
    store = _store(pg_engine)

    async def go() -> None:
        first = await store.on_loop(
            _events(_status(1, "delivered"), _status(1, "delivered"), _status(2, "read"))
        )
        assert first is not None
        assert first.pending == ["m0000001", "m0000002"] and first.status_events == 3
        # committed: another connection sees it while the store's connection stays open
        assert _stored(pg_engine) == [
            ("m0000001", "delivered", False),
            ("m0000002", "read", False),
        ]
        again = await store.on_loop(_events(_status(2, "read"), _status(1, "read")))
        assert again is not None and again.pending == ["m0000002", "m0000001"]
        ignored = await store.on_loop(_events(_status(3, "pending")))
        assert ignored is not None and ignored.pending == [] and ignored.ignored == 1
        await store.close()

    asyncio.run(go())
    assert _stored(pg_engine) == [
        ("m0000001", "delivered", False),
        ("m0000001", "read", False),
        ("m0000002", "read", False),
    ]


def test_a_batch_with_other_events_is_left_to_the_thread_path(pg_engine: Engine) -> None:
    store = _store(pg_engine)
    reply = {"event": "message", "instance_id": "A", "data": {"id": "in-1", "chat": "1@g.us"}}
    assert asyncio.run(store.on_loop(_events(_status(1, "read"), reply))) is None
    assert _stored(pg_engine) == []


def test_mixed_requests_through_http(pg_engine: Engine) -> None:
    """Status-only batches go the async path, a batch with a reply the thread path."""
    _campaign(pg_engine, 3)
    digits = phone(2)[1:]
    reply = {
        "event": "message",
        "instance_id": "A",
        "data": {"id": "in-1", "chat": f"{digits}@s.whatsapp.net", "text": "thanks"},
    }
    bodies = [_status(0, "delivered"), _status(1, "read"), _status(0, "read"), reply, reply]
    bodies += [_status(i % 3, "delivered") for i in range(40)]
    codes = asyncio.run(_post_all(_app(pg_engine), bodies, concurrency=8))
    assert codes == [200] * len(bodies)
    assert _states(pg_engine) == ["read", "read", "delivered"]
    assert _counts(pg_engine) == (5, 1)
    with pg_engine.connect() as conn:
        unapplied = conn.execute(
            select(func.count()).select_from(status_events).where(~status_events.c.applied)
        ).scalar_one()
    assert unapplied == 0


def test_reconnects_after_the_connection_is_closed_or_killed(pg_engine: Engine) -> None:
    store = _store(pg_engine)

    async def go() -> None:
        assert await store.on_loop(_events(_status(1, "sent")))
        old = _backend_pid(store)
        # the server ends the session (as on a restart): the next batch reconnects
        with pg_engine.connect() as conn:
            conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": old})
        await asyncio.sleep(0.05)
        stats = await store.on_loop(_events(_status(2, "sent")))
        assert stats is not None and stats.pending == ["m0000002"]
        assert _backend_pid(store) != old
        # closed under it
        (held,) = _inserter(store).held
        await held.close()
        assert await store.on_loop(_events(_status(3, "sent")))
        await store.close()

    asyncio.run(go())
    assert [m for m, _, _ in _stored(pg_engine)] == ["m0000001", "m0000002", "m0000003"]


def test_a_failed_store_answers_503_and_the_next_batch_recovers(pg_engine: Engine) -> None:
    """Server unreachable: the batch fails (503), nothing half-stored; later it works."""
    ctx = _ctx(pg_engine)
    inbox = Inbox(_store(pg_engine))
    good = pg_engine
    # the same database through a port nothing listens on
    bad = make_engine(good.url.set(port=1).render_as_string(hide_password=False))
    _use(inbox.store, bad)
    with good.begin() as conn:  # the webhook hears held instances only
        iq.mark_state(conn, "A", "connected", now=NOW)

    async def go() -> list[int]:
        await inbox.start()
        codes: list[int] = []
        app = FastAPI(lifespan=None)
        app.state.ctx = ctx
        app.state.inbox = inbox
        body = json.dumps(_status(1, "read")).encode()
        codes.append((await webhook.accept_body(app, ctx, body))[0])
        bad.dispose()
        _use(inbox.store, good)
        await asyncio.sleep(LOAD_RETRY_SECONDS)  # the instances held are read again
        codes.append((await webhook.accept_body(app, ctx, body))[0])
        await inbox.batcher.stop()  # stopped before the pass: the row stays unapplied
        await inbox.store.close()
        return codes

    assert asyncio.run(go()) == [503, 200]
    assert _stored(pg_engine) == [("m0000001", "read", False)]


def test_with_a_journal_an_unreachable_server_is_acknowledged_and_drained_later(
    pg_engine: Engine, tmp_path: Path
) -> None:
    """Server unreachable: the batch is journalled (200); stored once the server is back."""
    ctx = _ctx(pg_engine)
    journal = EventJournal(tmp_path / "journal.jsonl")
    inbox = Inbox(_store(pg_engine), journal=journal, config=BatcherConfig(drain_every=0.05))
    store = inbox.store
    good = pg_engine
    bad = make_engine(good.url.set(port=1).render_as_string(hide_password=False))
    with good.begin() as conn:
        iq.mark_state(conn, "A", "connected", now=NOW)

    async def go() -> list[int]:
        await inbox.start()
        app = FastAPI(lifespan=None)
        app.state.ctx = ctx
        app.state.inbox = inbox

        async def post(i: int) -> int:
            body = json.dumps(_status(i, "read")).encode()
            return (await webhook.accept_body(app, ctx, body))[0]

        codes = [await post(1)]  # the receiver knows the instances held
        await store.close()
        _inserter(store).engine = bad  # the server goes away
        codes += [await post(2), await post(3)]
        assert len(journal.read()) == 2
        assert [m for m, _, _ in _stored(good)] == ["m0000001"]
        _inserter(store).engine = good  # and comes back
        for _ in range(100):
            if not journal:
                break
            await asyncio.sleep(0.05)
        await inbox.batcher.stop()
        await store.close()
        return codes

    assert asyncio.run(go()) == [200, 200, 200]
    assert [m for m, _, _ in _stored(pg_engine)] == ["m0000001", "m0000002", "m0000003"]
    assert not journal


class _Proxy:
    """A TCP proxy in front of PostgreSQL: ``hang`` accepts and never answers (a server
    away or hung), ``forward`` pipes to it; switching to ``forward`` drops the held ones."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.forwarding = False
        self.held: list[socket.socket] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.forwarding:
                self.held.append(client)
                continue
            upstream = socket.create_connection(self.target)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def forward(self) -> None:
        self.forwarding = True
        for sock in self.held:
            sock.close()

    def close(self) -> None:
        self.listener.close()
        self.forward()


def test_cold_start_with_postgresql_away_answers_503_then_accepts_once_it_returns(
    pg_engine: Engine, tmp_path: Path
) -> None:
    """Before the instances held are known the receiver refuses (503, promptly, never a
    hang or a 500); once the database answers it loads them and accepts."""
    from campaigns.inbox.guard import COLD_LOAD_WAIT_SECONDS
    from gatecast.web.app import create_app

    with pg_engine.begin() as conn:
        iq.mark_state(conn, "A", "connected", now=NOW)
    url = pg_engine.url
    proxy = _Proxy((url.host or "127.0.0.1", url.port or 5432))
    away = make_engine(url.set(port=proxy.port).render_as_string(hide_password=False))
    settings = Settings(
        webhook_secret=SecretStr(SECRET), database_url="sqlite://", journal_dir=str(tmp_path)
    )
    app = create_app(AppContext(settings=settings, engine=away, api_key=SecretStr("k" * 32)))
    path = f"/webhooks/gateway/{SECRET}"

    async def go() -> tuple[list[httpx.Response], float, httpx.Response]:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://gw") as c:
                started = time.monotonic()
                refused = await asyncio.wait_for(
                    asyncio.gather(*(c.post(path, json=_status(i, "read")) for i in range(5))),
                    COLD_LOAD_WAIT_SECONDS + 10,
                )
                waited = time.monotonic() - started
                proxy.forward()  # the database is back
                deadline = time.monotonic() + 20
                while True:
                    accepted = await c.post(path, json=_status(9, "read"))
                    if accepted.status_code != 503 or time.monotonic() > deadline:
                        return refused, waited, accepted
                    await asyncio.sleep(0.2)

    try:
        refused, waited, accepted = asyncio.run(go())
    finally:
        proxy.close()
        away.dispose()
    assert [r.status_code for r in refused] == [503] * 5, [r.text for r in refused]
    assert all(r.headers["retry-after"].isdigit() for r in refused)
    assert waited < COLD_LOAD_WAIT_SECONDS + 5, waited
    assert accepted.status_code == 200, accepted.text
    assert [(m, s) for m, s, _ in _stored(pg_engine)] == [("m0000009", "read")]
