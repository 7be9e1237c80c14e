"""Only our gateway may speak: events of instances gatecast does not hold are refused,
the source allow-list, the cache of held instances, the refusal log and counter."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import SecretStr
from sqlalchemy import Engine, select

from campaigns.inbox.guard import HeldInstances, InstancesUnknown, RefusalLog
from gatecast.settings import Settings
from gatecast.web import metrics, webhook
from gatecast.web.context import AppContext
from gatecast.web.webhook_guard import source_allowed, source_networks
from gateway.events import ConnectionStatus, Event
from storage import tables
from storage.queries import instances as iq
from tests.campaigns.campaign_fixtures import NOW, phone
from tests.web.test_webhook import SECRET, _campaign

contacts = tables.contacts
instances = tables.instances


def _refused_total(reason: str) -> float:
    value = metrics._ATTEMPTS_REGISTRY.get_sample_value(
        "gatecast_webhook_events_refused_total", {"reason": reason}
    )
    return value or 0.0


def _app(engine: Engine, *, allowed: tuple[str, ...] = ()) -> FastAPI:
    app = FastAPI(lifespan=None)
    settings = Settings(
        webhook_secret=SecretStr(SECRET),
        database_url="sqlite://",
        webhook_allowed_sources=allowed,
    )
    app.state.ctx = AppContext(settings=settings, engine=engine, clock=lambda: NOW)
    app.include_router(webhook.router)
    return app


def _post(app: FastAPI, body: Any, client: tuple[str, int] = ("127.0.0.1", 5000)) -> httpx.Response:
    async def go() -> httpx.Response:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app, client=client)
            async with httpx.AsyncClient(transport=transport, base_url="http://gw") as c:
                return await c.post(f"/webhooks/gateway/{SECRET}", json=body)

    return asyncio.run(go())


def _stop(instance_id: str | None, n: int = 1) -> dict[str, Any]:
    body: dict[str, Any] = {
        "event": "message",
        "data": {
            "id": f"in-{instance_id}",
            "chat": f"{phone(n)[1:]}@s.whatsapp.net",
            "text": "STOP",
        },
    }
    if instance_id is not None:
        body["instance_id"] = instance_id
    return body


def _opted_out(engine: Engine, n: int = 1) -> bool:
    with engine.connect() as conn:
        return bool(
            conn.execute(select(contacts.c.opted_out).where(contacts.c.phone == phone(n))).scalar()
        )


def test_a_forged_stop_from_an_unknown_instance_opts_nobody_out(sqlite_engine: Engine) -> None:
    _campaign(sqlite_engine, 2)
    before = _refused_total("unknown_instance")
    for forged in (_stop("FORGED"), _stop(None)):
        r = _post(_app(sqlite_engine), forged)
        assert r.status_code == 200  # gateways neither retry nor read the answer
        assert r.json()["refused"] == 1
        assert not _opted_out(sqlite_engine)
    assert _refused_total("unknown_instance") == before + 2
    r = _post(_app(sqlite_engine), _stop("A"))  # the instance gatecast holds is heard
    assert r.status_code == 200 and "refused" not in r.json()
    assert _opted_out(sqlite_engine)


def test_a_forged_logged_out_changes_no_state(sqlite_engine: Engine) -> None:
    _campaign(sqlite_engine, 1)
    with sqlite_engine.begin() as conn:
        iq.mark_gone(conn, "OLD", "reset", now=NOW)
    for iid in ("OLD", "NEVER"):
        body = {"event": "connection", "instance_id": iid, "data": {"state": "logged_out"}}
        assert _post(_app(sqlite_engine), body).json()["refused"] == 1
    with sqlite_engine.connect() as conn:
        rows = dict(conn.execute(select(instances.c.instance_id, instances.c.state)).all())
    assert rows == {"A": "connected", "OLD": "gone"}


def test_source_allow_list(sqlite_engine: Engine) -> None:
    _campaign(sqlite_engine, 2)
    app = _app(sqlite_engine, allowed=("203.0.113.0/24", "2001:db8::/32"))
    before = _refused_total("source_not_allowed")
    r = _post(app, _stop("A"), client=("198.51.100.7", 4000))
    assert r.status_code == 403
    assert r.json()["detail"] == "source address not allowed"
    assert not _opted_out(sqlite_engine)
    assert _refused_total("source_not_allowed") == before + 1
    assert _post(app, _stop("A"), client=("203.0.113.9", 4000)).status_code == 200
    assert _opted_out(sqlite_engine)


def test_source_allowed_rules() -> None:
    nets = source_networks(["10.0.0.0/8", "192.0.2.1", "2001:db8::/32"])
    assert source_allowed("10.1.2.3", nets)
    assert source_allowed("192.0.2.1", nets)
    assert source_allowed("::ffff:10.0.0.1", nets)  # IPv4-mapped
    assert source_allowed("2001:db8::5", nets)
    assert not source_allowed("192.0.2.2", nets)
    assert not source_allowed(None, nets)
    assert not source_allowed("not-an-address", nets)
    assert source_allowed(None, ())  # no allow-list: anyone


def test_settings_refuse_a_bad_cidr() -> None:
    with pytest.raises(ValueError, match="not an IP address or network"):
        Settings(webhook_allowed_sources=("10.0.0.0/33",))


def _conn_event(iid: str) -> Event:
    return ConnectionStatus(iid, "connected")


def test_held_instances_cache_reloads_on_age_and_on_a_miss() -> None:
    now = [0.0]
    held = {"A"}
    loads: list[float] = []

    def load() -> frozenset[str]:
        loads.append(now[0])
        return frozenset(held)

    cache = HeldInstances(load, clock=lambda: now[0])

    async def split(iid: str) -> bool:
        accepted, _ = await cache.split([_conn_event(iid)])
        return bool(accepted)

    async def go() -> None:
        assert await split("A")
        assert not await split("B")  # a miss right after loading: no reload
        assert len(loads) == 1
        held.add("B")
        now[0] = 0.3  # a miss past MISS_REFRESH_SECONDS reloads: a new instance is heard
        assert await split("B")
        assert len(loads) == 2
        for _ in range(100):  # a flood of forged ids reads nothing more meanwhile
            assert not await split("FORGED")
        assert len(loads) == 2
        held.discard("A")  # gone: refused once the cache is REFRESH_SECONDS old
        now[0] = 2.5
        assert not await split("A")
        assert len(loads) == 3

    asyncio.run(go())


def test_held_instances_keeps_the_old_ids_when_a_reload_fails() -> None:
    now = [0.0]
    fail = [False]

    def load() -> frozenset[str]:
        if fail[0]:
            raise RuntimeError("database away")
        return frozenset({"A"})

    cache = HeldInstances(load, clock=lambda: now[0])

    async def go() -> None:
        assert (await cache.split([_conn_event("A")]))[0]
        fail[0] = True
        now[0] = 10.0
        assert (await cache.split([_conn_event("A")]))[0]

    asyncio.run(go())
    with pytest.raises(InstancesUnknown):  # none read yet: refused (503), not accepted
        asyncio.run(HeldInstances(load).split([_conn_event("A")]))


def test_refusals_are_logged_once_per_instance(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    refusals = RefusalLog(clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="gatecast.webhook"):
        for _ in range(50):
            refusals.note([_conn_event("X"), _conn_event("Y")])
        now[0] = 601.0
        refusals.note([_conn_event("X")])
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3
    assert sum("'X'" in line for line in lines) == 2
