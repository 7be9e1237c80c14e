"""The webhook receiver: secret, malformed bodies, durable group commit, burst, log redaction."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from pydantic import SecretStr
from sqlalchemy import Engine, func, literal, select, update

from campaigns import lifecycle, service
from campaigns.delivery_rows import materialise
from gatecast.settings import Settings
from gatecast.web import webhook
from gatecast.web.context import AppContext
from gatecast.web.metrics import process_value
from storage import tables
from storage.queries import instances as iq
from tests.campaigns.campaign_fixtures import NOW, make_list, people, phone, spec

SECRET = "s3cr3t-webhook-path"
deliveries = tables.deliveries
status_events = tables.status_events
inbound = tables.inbound_messages


def _app(engine: Engine, secret: str = SECRET) -> FastAPI:
    app = FastAPI(lifespan=None)
    settings = Settings(webhook_secret=SecretStr(secret), database_url="sqlite://")
    app.state.ctx = AppContext(settings=settings, engine=engine, clock=lambda: NOW)
    app.include_router(webhook.router)
    return app


def _campaign(engine: Engine, n: int) -> int:
    make_list(engine, "customers", people(n))
    cid = service.create_campaign(engine, spec(), now=NOW).id
    with engine.begin() as conn:
        lifecycle.transition(conn, cid, lifecycle.RUNNING, now=NOW)
        materialise(conn, cid, now=NOW, instances=["A"])
        iq.mark_state(conn, "A", "connected", now=NOW)  # the webhook hears held instances only
        conn.execute(
            update(deliveries).values(
                state="sent",
                sent_at=NOW,
                message_id=literal("m") + func.substr(deliveries.c.target, 6),
            )
        )
    return cid


def _status(i: int, status: str) -> dict[str, Any]:
    return {
        "event": "message_status",
        "instance_id": "A",
        "data": {"id": f"m{i:07d}", "status": status, "timestamp": 1795000000},
    }


def _states(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        rows = conn.execute(select(deliveries.c.state).order_by(deliveries.c.id)).scalars()
        return [str(s) for s in rows]


def _eventually(check: Any, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _counts(engine: Engine) -> tuple[int, int]:
    with engine.connect() as conn:
        return (
            conn.execute(select(func.count()).select_from(status_events)).scalar_one(),
            conn.execute(select(func.count()).select_from(inbound)).scalar_one(),
        )


async def _post_all(app: FastAPI, bodies: list[Any], *, concurrency: int = 100) -> list[int]:
    codes: list[int] = []
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            sem = asyncio.Semaphore(concurrency)

            async def one(body: Any) -> None:
                async with sem:
                    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
                    r = await client.post(f"/webhooks/gateway/{SECRET}", content=raw)
                    codes.append(r.status_code)

            await asyncio.gather(*(one(b) for b in bodies))
    return codes


def test_status_events_applied_both_dialects(engine: Engine) -> None:
    _campaign(engine, 3)
    app = _app(engine)
    codes = asyncio.run(
        _post_all(app, [_status(0, "delivered"), _status(1, "read"), _status(0, "read")])
    )
    assert codes == [200, 200, 200]
    with engine.connect() as conn:
        states: dict[str, str] = dict(
            conn.execute(select(deliveries.c.target, deliveries.c.state)).all()
        )
    assert states == {phone(0): "read", phone(1): "read", phone(2): "sent"}


def test_webhook_lag_and_times_to_delivered_and_read_are_observed(engine: Engine) -> None:
    """Both dialects (PostgreSQL stores status batches and applies them in the inbox pass):
    each status event's lag, and each delivered or read event's time since sent_at."""

    def seen() -> dict[str, float]:
        return {
            "lag_delivered": process_value(
                "gatecast_webhook_lag_seconds_count", kind="status_delivered"
            ),
            "lag_read": process_value("gatecast_webhook_lag_seconds_count", kind="status_read"),
            "delivered": process_value("gatecast_time_to_status_seconds_count", status="delivered"),
            "read": process_value("gatecast_time_to_status_seconds_count", status="read"),
        }

    _campaign(engine, 3)
    before = seen()
    bodies = [_status(0, "delivered"), _status(1, "read"), _status(0, "read")]
    assert asyncio.run(_post_all(_app(engine), bodies)) == [200, 200, 200]
    moved = {k: v - before[k] for k, v in seen().items()}
    assert moved == {"lag_delivered": 1, "lag_read": 2, "delivered": 1, "read": 2}


def test_wrong_or_unset_secret_is_404_and_changes_nothing(sqlite_engine: Engine) -> None:
    _campaign(sqlite_engine, 1)

    async def go(app: FastAPI, path: str) -> httpx.Response:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://gw") as c:
                return await c.post(path, json=_status(0, "read"))

    for app, path in [
        (_app(sqlite_engine), "/webhooks/gateway/wrong"),
        (_app(sqlite_engine), f"/webhooks/gateway/{SECRET}x"),
        (_app(sqlite_engine, secret=""), "/webhooks/gateway/"),
        (_app(sqlite_engine, secret=""), "/webhooks/gateway/anything"),
    ]:
        r = asyncio.run(go(app, path))
        assert r.status_code == 404, path
        assert SECRET not in r.text
    assert _counts(sqlite_engine) == (0, 0)


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"not json", "not JSON"),
        (b"", "empty"),
        (b'{"event": "message_status", "data": {"status": "read"}}', "id: missing"),
        (b'{"nothing": 1}', "no event name"),
        (b"\xff\xfe", "UTF-8"),
    ],
)
def test_malformed_is_400_with_reason(sqlite_engine: Engine, body: bytes, fragment: str) -> None:
    app = _app(sqlite_engine)

    async def go() -> httpx.Response:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://gw") as c:
                return await c.post(f"/webhooks/gateway/{SECRET}", content=body)

    r = asyncio.run(go())
    assert r.status_code == 400
    assert fragment in r.json()["detail"]
    assert _counts(sqlite_engine) == (0, 0)


def test_burst_of_10000_events_applied_completely(sqlite_engine: Engine) -> None:
    n = 2500
    _campaign(sqlite_engine, n)
    bodies: list[Any] = []
    for i in range(n):
        bodies += [_status(i, "sent"), _status(i, "delivered"), _status(i, "read")]
        bodies.append(_status(i, "read"))  # a duplicate
    assert len(bodies) == 10_000
    import random

    random.Random(3).shuffle(bodies)
    app = _app(sqlite_engine)
    codes = asyncio.run(_post_all(app, bodies, concurrency=200))
    assert codes.count(200) == 10_000
    batcher = app.state.webhook_batcher
    assert batcher.events == 10_000
    assert batcher.batches < 10_000 / 5  # group commit really groups
    with sqlite_engine.connect() as conn:
        states = conn.execute(
            select(deliveries.c.state, func.count()).group_by(deliveries.c.state)
        ).all()
        unapplied = conn.execute(
            select(func.count())
            .select_from(status_events)
            .where(status_events.c.applied.is_(False))
        ).scalar_one()
    assert states == [("read", n)]
    assert unapplied == 0
    assert _counts(sqlite_engine)[0] == 3 * n


def test_incoming_reply_through_http(sqlite_engine: Engine) -> None:
    _campaign(sqlite_engine, 2)
    digits = phone(1)[1:]
    body = {
        "event": "message",
        "instance_id": "A",
        "data": {"id": "in-1", "chat": f"{digits}@s.whatsapp.net", "text": "STOP"},
    }
    codes = asyncio.run(_post_all(_app(sqlite_engine), [body, body]))
    assert codes == [200, 200]
    with sqlite_engine.connect() as conn:
        row = conn.execute(select(deliveries).where(deliveries.c.target == phone(1))).one()
    assert row.reply_text == "STOP"
    assert _counts(sqlite_engine) == (0, 1)


def test_redaction_filter(caplog: pytest.LogCaptureFixture) -> None:
    webhook.install_log_redaction()
    webhook.install_log_redaction()  # idempotent
    filters = logging.getLogger("uvicorn.access").filters
    assert len([f for f in filters if isinstance(f, webhook.SecretPathFilter)]) == 1
    with caplog.at_level(logging.INFO):
        logging.getLogger("uvicorn.access").info(
            '%s - "%s %s HTTP/%s" %d',
            "127.0.0.1:1",
            "POST",
            f"/webhooks/gateway/{SECRET}",
            "1.1",
            200,
        )
        logging.getLogger("uvicorn.error").warning(
            f"Invalid request to /webhooks/gateway/{SECRET}?x=1"
        )
        logging.getLogger("httpx").info(
            'HTTP Request: %s %s "%s %d %s"',
            "POST",
            httpx.URL(f"http://127.0.0.1:1/webhooks/gateway/{SECRET}"),
            "HTTP/1.1",
            200,
            "OK",
        )
    assert SECRET not in caplog.text
    assert "/webhooks/gateway/***" in caplog.text
    assert 'HTTP Request: POST http://127.0.0.1:1/webhooks/gateway/*** "HTTP/1.1 200 OK"' in (
        caplog.text
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server(sqlite_engine: Engine) -> Iterator[str]:
    _campaign(sqlite_engine, 1)
    port = _free_port()
    config = uvicorn.Config(
        _app(sqlite_engine), host="127.0.0.1", port=port, log_config=None, access_log=True
    )
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    for _ in range(500):
        if srv.started:
            break
        time.sleep(0.01)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(10)


def test_real_server_access_log_is_redacted(
    server: str, sqlite_engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    webhook.install_log_redaction()
    with caplog.at_level(logging.INFO, logger="uvicorn.access"):
        r = httpx.post(f"{server}/webhooks/gateway/{SECRET}", json=_status(0, "delivered"))
        bad = httpx.post(f"{server}/webhooks/gateway/guess", json=_status(0, "read"))
    assert (r.status_code, bad.status_code) == (200, 404)
    assert "webhooks/gateway/***" in caplog.text
    assert SECRET not in caplog.text and "guess" not in caplog.text
    # stored before the 200; applied by the inbox pass shortly after
    assert _eventually(lambda: _states(sqlite_engine) == ["delivered"])


def test_full_app_starts_the_batcher_and_needs_no_api_key(sqlite_engine: Engine) -> None:
    from gatecast.web.app import create_app

    _campaign(sqlite_engine, 1)
    settings = Settings(webhook_secret=SecretStr(SECRET), database_url="sqlite://")
    ctx = AppContext(
        settings=settings, engine=sqlite_engine, clock=lambda: NOW, api_key=SecretStr("k" * 32)
    )
    app = create_app(ctx)

    async def go() -> int:
        async with app.router.lifespan_context(app):
            assert app.state.webhook_batcher.running
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://gw") as c:
                r = await c.post(f"/webhooks/gateway/{SECRET}", json=_status(0, "read"))
        assert not app.state.webhook_batcher.running
        return r.status_code

    assert asyncio.run(go()) == 200
    with sqlite_engine.connect() as conn:
        assert conn.execute(select(deliveries.c.state)).scalar_one() == "read"


def _full_app(engine: Engine) -> FastAPI:
    from gatecast.web.app import create_app

    settings = Settings(webhook_secret=SecretStr(SECRET), database_url="sqlite://")
    ctx = AppContext(
        settings=settings, engine=engine, clock=lambda: NOW, api_key=SecretStr("k" * 32)
    )
    return create_app(ctx)


def test_fast_path_answers_like_the_route(
    sqlite_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """create_app serves the webhook in front of FastAPI: same answers, same effects."""
    _campaign(sqlite_engine, 2)
    monkeypatch.setattr(webhook, "MAX_BODY_BYTES", 2000)
    app = _full_app(sqlite_engine)

    async def go() -> dict[str, httpx.Response]:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://gw") as c:
                path = f"/webhooks/gateway/{SECRET}"
                return {
                    "ok": await c.post(path, json=_status(0, "read")),
                    "wrong": await c.post("/webhooks/gateway/nope", json=_status(1, "read")),
                    "deeper": await c.post(f"{path}/x", json=_status(1, "read")),
                    "get": await c.get(path),
                    "malformed": await c.post(path, content=b"not json"),
                    "big": await c.post(path, content=b"{" + b" " * 3000 + b"}"),
                }

    r = asyncio.run(go())
    assert r["ok"].status_code == 200 and r["ok"].json() == {
        "status": "ok",
        "events": 1,
        "applied": 1,
    }
    assert r["wrong"].status_code == 404 and SECRET not in r["wrong"].text
    assert r["deeper"].status_code == 404
    assert r["get"].status_code == 405  # not ours: FastAPI's own answer
    assert r["malformed"].status_code == 400 and "not JSON" in r["malformed"].json()["detail"]
    assert r["big"].status_code == 413
    with sqlite_engine.connect() as conn:
        got: dict[str, str] = dict(
            conn.execute(select(deliveries.c.target, deliveries.c.state)).all()
        )
    assert got == {phone(0): "read", phone(1): "sent"}


def test_inline_apply_never_stalls_the_loop_on_a_locked_database(
    sqlite_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer holds SQLite's lock: the loop keeps serving, the event lands later."""
    import sqlite3

    from campaigns.inbox import batcher as webhook_batcher

    # the journal takes over after 1 s; this test is about the wait before that
    monkeypatch.setattr(webhook_batcher, "JOURNAL_AFTER_SECONDS", 60.0)
    _campaign(sqlite_engine, 1)
    app = _full_app(sqlite_engine)
    database = sqlite_engine.url.database
    assert database
    blocker = sqlite3.connect(database, isolation_level=None)
    outcome: dict[str, Any] = {}

    async def go() -> None:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://gw") as c:
                blocker.execute("BEGIN IMMEDIATE")  # the write lock, held
                post = asyncio.create_task(
                    c.post(f"/webhooks/gateway/{SECRET}", json=_status(0, "read"))
                )
                await asyncio.sleep(0.3)
                started = time.monotonic()
                health = await c.get("/healthz")  # served while the batch waits
                outcome["health"] = (health.status_code, time.monotonic() - started)
                outcome["pending"] = not post.done()
                blocker.execute("COMMIT")
                outcome["post"] = (await post).status_code

    try:
        asyncio.run(go())
    finally:
        blocker.close()
    assert outcome["pending"], "the event must wait for the lock, not fail"
    assert outcome["health"][0] == 200 and outcome["health"][1] < 5
    assert outcome["post"] == 200
    with sqlite_engine.connect() as conn:
        assert conn.execute(select(deliveries.c.state)).scalar_one() == "read"


def test_events_stored_but_unapplied_by_a_dead_process_are_applied_at_start(
    engine: Engine,
) -> None:
    """Crash between the 200 and the inbox pass: the next receiver applies them."""
    from campaigns.gateway_events import store_events_in
    from gatecast.settings import DEFAULT_OPT_OUT_KEYWORDS
    from gateway.event_parsing import parse_webhook

    _campaign(engine, 2)
    old = NOW - timedelta(hours=5)  # older than the idle sweep's window
    with engine.begin() as conn:
        stats = store_events_in(
            conn,
            parse_webhook(json.dumps(_status(1, "read")).encode()),
            opt_out_keywords=DEFAULT_OPT_OUT_KEYWORDS,
            now=old,
        )
    assert stats.pending == ["m0000001"] and stats.applied == 0
    assert _states(engine) == ["sent", "sent"]
    app = _app(engine)

    async def go() -> None:
        async with app.router.lifespan_context(app):
            await asyncio.sleep(0)
            for _ in range(2000):
                if _states(engine) == ["sent", "read"]:
                    break
                await asyncio.sleep(0.01)

    asyncio.run(go())
    assert _states(engine) == ["sent", "read"]


def test_a_body_of_20000_events_leaves_the_loop_free_and_stores_them_all(
    sqlite_engine: Engine,
) -> None:
    """One body of 20,000 events (16 MiB at most) is parsed off the loop and stored in
    batches: ``/healthz`` and a status posted meanwhile are answered while it is still in
    flight (the order proves the loop stayed free; no timing is asserted)."""
    from gatecast.intake.handler import create_intake_app

    _campaign(sqlite_engine, 1)
    ctx = AppContext(
        settings=Settings(webhook_secret=SecretStr(SECRET), database_url="sqlite://"),
        engine=sqlite_engine,
        clock=lambda: NOW,
    )
    app = create_intake_app(ctx, "\0gatecast-test-no-web")
    big = json.dumps([_status(i, "delivered") for i in range(20_000)]).encode()
    waits: list[float] = []
    outcome: dict[str, Any] = {}

    async def go() -> None:
        inner = app.fastapi_app  # the batcher starts with its lifespan
        async with inner.router.lifespan_context(inner):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://gw") as c:
                hook = f"/webhooks/gateway/{SECRET}"
                started = time.monotonic()
                post = asyncio.create_task(c.post(hook, content=big))
                while not post.done():
                    asked = time.monotonic()
                    assert (await c.get("/healthz")).status_code == 200
                    small = await c.post(hook, json=_status(99_999, "read"))
                    assert small.status_code == 200
                    waits.append(time.monotonic() - asked)
                    await asyncio.sleep(0.05)
                outcome["post"] = (await post).status_code
                outcome["seconds"] = time.monotonic() - started

    asyncio.run(go())
    assert outcome["post"] == 200
    assert len(waits) > 1, "the big body was stored before anything else was answered"
    assert _counts(sqlite_engine)[0] == 20_001
