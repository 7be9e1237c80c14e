"""Shared fixtures: real SQLite files and a real PostgreSQL database per test session.

PostgreSQL tests skip with a visible reason when no server answers, except under
``GATECAST_REQUIRE_POSTGRES=1`` (set by ``.ci/run``), where they fail instead.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from gateway.sandbox import Sandbox, SandboxConfig, WebhookSink, run_sandbox_in_thread
from storage.engine import make_engine, upgrade
from tests.browser import launched_chromium

PG_ADMIN_URL = os.environ.get(
    "GATECAST_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)


#: the fixtures that reach the PostgreSQL server
PG_FIXTURES = ("pg_server", "pg_url", "pg_engine")


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``postgres`` every test using the PostgreSQL server through a fixture: ``make
    test-slow`` runs the slow ones apart from the rest, one after the other (the kill
    suite's restart scenario stops the server)."""
    for item in items:
        if set(PG_FIXTURES) & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.postgres)


@pytest.fixture(autouse=True, scope="session")
def _no_default_warmup() -> Iterator[None]:
    """Tests that are not about the warm-up send as before it existed: the default
    ramp is off in this process and in the ``gatecast`` commands it starts (warm-up tests
    turn it on, or give a sender its own ramp)."""
    from dataclasses import replace

    from scheduler.care import DEFAULTS, configure

    os.environ["GATECAST_WARMUP_ENABLED"] = "false"
    configure(replace(DEFAULTS, warmup_enabled=False))
    yield
    configure(DEFAULTS)


def _pg_unavailable_reason() -> str | None:
    try:
        eng = sa.create_engine(PG_ADMIN_URL, connect_args={"connect_timeout": 3})
        with eng.connect() as conn:
            conn.execute(sa.text("select 1"))
        eng.dispose()
    except Exception as exc:  # any failure to reach the server
        return f"PostgreSQL not reachable at {PG_ADMIN_URL}: {type(exc).__name__}"
    return None


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """The admin URL of a reachable PostgreSQL server (or a skip / failure)."""
    reason = _pg_unavailable_reason()
    if reason:
        if os.environ.get("GATECAST_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"{reason} (GATECAST_REQUIRE_POSTGRES=1)")
        pytest.skip(reason)
    yield PG_ADMIN_URL


def _admin_exec(admin_url: str, sql: str) -> None:
    eng = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with eng.connect() as conn:
        conn.execute(sa.text(sql))
    eng.dispose()


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test; dropped afterwards."""
    name = f"gatecast_t_{uuid.uuid4().hex[:12]}"
    _admin_exec(pg_server, f'CREATE DATABASE "{name}"')
    url = sa.engine.make_url(pg_server).set(database=name).render_as_string(hide_password=False)
    yield url
    _admin_exec(pg_server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh SQLite file for one test."""
    return f"sqlite:///{tmp_path / 'gatecast.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest) -> str:
    """Each test that uses it runs once on SQLite and once on PostgreSQL."""
    if request.param == "sqlite":
        return str(request.getfixturevalue("sqlite_url"))
    return str(request.getfixturevalue("pg_url"))


def _engine_at(url: str) -> Iterator[Engine]:
    eng = make_engine(url)
    upgrade(eng)
    yield eng
    eng.dispose()


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    """An engine on a fresh database, schema at head (SQLite and PostgreSQL)."""
    yield from _engine_at(db_url)


@pytest.fixture
def sqlite_engine(sqlite_url: str) -> Iterator[Engine]:
    """An engine on a fresh SQLite file only, schema at head."""
    yield from _engine_at(sqlite_url)


@pytest.fixture
def pg_engine(pg_url: str) -> Iterator[Engine]:
    """An engine on a fresh PostgreSQL database only, schema at head."""
    yield from _engine_at(pg_url)


# --------------------------------------------------------------------------- sandbox fixtures
@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    """A spec-dialect sandbox on a free port (real uvicorn server in a thread)."""
    with run_sandbox_in_thread(SandboxConfig(status_delays=(0.01, 0.02, 0.03))) as sb:
        yield sb


@pytest.fixture
def reference_sandbox() -> Iterator[Sandbox]:
    """A reference-dialect sandbox on a free port."""
    cfg = SandboxConfig(dialect="reference", status_delays=(0.01, 0.02, 0.03))
    with run_sandbox_in_thread(cfg) as sb:
        yield sb


@pytest.fixture
def webhook_sink() -> Iterator[WebhookSink]:
    """A local webhook receiver collecting every POSTed body (``.url``, ``.bodies``)."""
    with WebhookSink() as sink:
        yield sink


@pytest.fixture(scope="session")
def chromium_browser() -> Iterator[Any]:
    """One headless Chromium for the session's browser tests (each opens its own context)."""
    yield from launched_chromium()
